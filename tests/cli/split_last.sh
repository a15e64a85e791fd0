#!/usr/bin/env bash
# `dedup split`: the file's last record without a terminator is never lost.
# Files whose last record has no newline (or no NUL with -z), of length 1,
# 2, 3, 63, 64, 65, placed so that it ends or starts exactly at the file
# road's block boundaries (1 MiB blocks, 64-byte scans) and elsewhere; each
# split through the file road (a regular file) and the feeder's road
# (standard input), into 1 part and into 3.  Every part file is compared
# byte for byte with a model: with one part, the input with its last
# terminator added; with three, the parts of the same input given with its
# terminator (the last record routed by its key alone), and each part's
# records are exactly the input's records routed there, in input order.
. "$(dirname "$0")/lib/common.sh"

B=$((1 << 20))
# The cases, one a line: SIZE LASTLEN TERM.  Small files (the whole file one
# short block, the last record across a 64-byte scan), then at the file
# road's 1 MiB block boundary (the last record ends at B - 1, B, B + 1, or
# starts exactly at B), then NUL-terminated records (-z).
{
    for last in 1 2 3 64 65; do
        for size in $last $((last + 1)) 64 65 129; do
            [ "$size" -ge "$last" ] && echo "$size $last nl"
        done
    done
    for last in 1 2 64; do
        for size in $((B - 1)) $B $((B + 1)) $((B + last)); do echo "$size $last nl"; done
    done
    for last in 1 2; do
        for size in $last $((B + 1)); do echo "$size $last nul"; done
    done
    # a first record of 2 MiB - 1 bytes whose terminator is the last byte of
    # block 1: no record starts in that block (the next one starts exactly
    # at block 2)
    echo "$((2 * B + 500)) 1 nl-long"
} | sort -u > "$T/cases"
# each input: records of 0..40 bytes (seeded), the last one LASTLEN bytes
# long and without terminator; beside it the same with its terminator
python3 - "$SEED" "$T" "$T/cases" <<'PY' || { fail "generator"; finish; exit 1; }
import random, sys
seed, d = int(sys.argv[1]), sys.argv[2]
for line in open(sys.argv[3]):
    size, last, term = line.split()
    long_first = term.endswith("-long")
    term = term.replace("-long", "")
    size, last = int(size), int(last)
    t = b"\n" if term == "nl" else b"\0"
    r = random.Random(seed * 1000003 + size * 131 + last)
    body = size - last  # bytes before the last record, ending with a terminator
    out = bytearray()
    if long_first:
        out += b"L" * ((2 << 20) - 1) + t
    while len(out) < body:
        room = body - len(out)
        n = min(room - 1, r.randint(0, 40))
        out += bytes(r.choices(b"abcdefghij", k=n)) + t
    data = bytes(out) + bytes(r.choices(b"xyz", k=last))
    assert len(data) == size
    path = "%s/in-%d-%d-%s" % (d, size, last, term)
    open(path, "wb").write(data)
    open(path + ".term", "wb").write(data + t)
PY

cases=0
: > "$T/routed"
while read -r size last term; do
    term=${term%-long}
    z=""
    [ "$term" = nul ] && z="-z"
    in="$T/in-$size-$last-$term"
    for road in file stdin; do
        for n in 1 3; do
            d="$T/out-$size-$last-$term-$road-$n"
            mkdir "$d" "$d.model"
            if [ $road = file ]; then
                "$DEDUP" split $z -N "$n" -o "$d/p-%s" "$in" 2> "$T/err"
            else
                "$DEDUP" split $z -N "$n" -o "$d/p-%s" < "$in" 2> "$T/err"
            fi || { fail "split $road -N $n of $in: $(head -c 300 "$T/err")"; continue; }
            if [ "$n" = 1 ]; then
                cp "$in.term" "$d.model/p-0"
            else
                "$DEDUP" split $z -N "$n" -o "$d.model/p-%s" "$in.term" ||
                    { fail "split of $in.term"; continue; }
                echo "$term $in $d" >> "$T/routed"
            fi
            for ((i = 0; i < n; i++)); do
                if cmp -s "$d/p-$i" "$d.model/p-$i"; then pass; else
                    fail "size $size, last record of $last bytes ($term), $road, -N $n: part $i" \
                        "differs from the model ($(stat -c %s "$d/p-$i") vs" \
                        "$(stat -c %s "$d.model/p-$i") bytes)"
                fi
            done
        done
    done
    cases=$((cases + 1))
done < "$T/cases"
# the model's own routing, for every 3-part split: every input record in one
# part, each part its records in input order, each ending with a terminator
python3 - < "$T/routed" > "$T/why" <<'PY'
import glob, sys
bad = 0
for line in open(sys.argv[1]):
    term, inp, d = line.split()
    t = b"\n" if term == "nl" else b"\0"
    recs = open(inp, "rb").read().split(t)
    parts = [open(p, "rb").read() for p in sorted(glob.glob(d + "/p-*"))]
    try:
        for p in parts:
            assert p == b"" or p.endswith(t), "a part does not end with a terminator"
        parts = [p.split(t)[:-1] if p else [] for p in parts]
        where = {}
        for i, p in enumerate(parts):
            for r in p:
                assert where.setdefault(r, i) == i, "record %r in two parts" % r
        assert sum(map(len, parts)) == len(recs), "parts hold %d records, the input %d" % (
            sum(map(len, parts)), len(recs))
        for i, p in enumerate(parts):
            assert p == [r for r in recs if where.get(r) == i], "part %d: not its records in order" % i
    except AssertionError as e:
        print("%s: %s" % (d, e)); bad += 1
sys.exit(1 if bad else 0)
PY
check "the 3-part splits route every record once, in order: $(head -c 300 "$T/why")" test $? -eq 0
echo "$cases inputs"
finish
