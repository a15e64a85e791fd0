#!/usr/bin/env bash
# `dedup split` of a regular file (cli/split_file.c: two threads)
# puts exactly what the feeder's path (standard input) puts in every part,
# byte for byte and in order: files of several 1 MiB blocks with records of
# every length around the copy sizes (0..130 bytes), empty records, records
# longer than a block across block ends, with and without a last
# terminator, -z, key options, jump hash and the ring, several inputs
# mixed with standard input, and --stats.
. "$(dirname "$0")/lib/common.sh"

gen() { # gen SEED FILE MODE: MODE nl (newline, final one kept), nonl, nul, long
    python3 - "$1" "$2" "$3" <<'PY'
import random, sys
seed, path, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
r = random.Random(seed)
term = b"\0" if mode == "nul" else b"\n"
keys = [b"k%d" % i for i in range(5000)]
out, size = [], 0
while size < 3_500_000:
    k = r.choice(keys)
    if mode == "long" and r.random() < 0.002:
        rec = k + b"\t" + bytes(r.choice(b"abcdef") for _ in range(r.randrange(900_000, 2_500_000)))
    else:
        pad = r.choice([0, 1, 50, 61, 62, 63, 64, 126, 127, 128, 129, r.randrange(300)])
        rec = (r.choice([b"", b" ", b"ID:"]) + (k.upper() if r.random() < 0.2 else k) + b"\t" +
               b"x" * pad + (b"\na" if mode == "nul" and r.random() < 0.1 else b""))
        if r.random() < 0.03:
            rec = b""
    out.append(rec)
    size += len(rec) + 1
data = term.join(out)
if mode in ("nl", "nul", "long"):
    data += term
open(path, "wb").write(data)
PY
}

# same_parts DESC DIR1 DIR2: the same part files with the same bytes
same_parts() {
    local desc=$1 a=$2 b=$3 f
    if [ "$(cd "$a" && ls | sort)" != "$(cd "$b" && ls | sort)" ]; then
        fail "$desc: different part names"; return
    fi
    for f in "$a"/*; do
        cmp -s "$f" "$b/$(basename "$f")" || { fail "$desc: part $(basename "$f") differs"; return; }
    done
    pass
}

# split ARGS... -- INPUT: the file road (file argument) and the feeder's
# (standard input) into $T/m and $T/f
both() {
    local desc=$1 in=$2; shift 2
    rm -rf "$T/m" "$T/f"; mkdir "$T/m" "$T/f"
    "$DEDUP" split "$@" -o "$T/m/p-%s" "$in" 2> "$T/err" || { fail "$desc: file road: $(head -c 300 "$T/err")"; return; }
    "$DEDUP" split "$@" -o "$T/f/p-%s" < "$in" 2> "$T/err" || { fail "$desc: stdin: $(head -c 300 "$T/err")"; return; }
    same_parts "$desc" "$T/m" "$T/f"
}

s=$SEED
gen "$s" "$T/nl" nl
gen "$((s + 1))" "$T/nonl" nonl
gen "$((s + 2))" "$T/long" long
gen "$((s + 3))" "$T/nul" nul
for rt in "-N 1" "-N 2" "-N 7" "-N 16" "--nodes a,b=2,c,d=0.5"; do
    # shellcheck disable=SC2086
    both "nl $rt (seed $s)" "$T/nl" $rt
    # shellcheck disable=SC2086
    both "no final newline $rt (seed $s)" "$T/nonl" $rt
done
both "long records -N 3 (seed $s)" "$T/long" -N 3
both "long records ring (seed $s)" "$T/long" --nodes x,y
both "long records -f 1 (seed $s)" "$T/long" -N 5 -f 1
both "-z -N 4 (seed $s)" "$T/nul" -z -N 4
both "-z ring -i (seed $s)" "$T/nul" -z --nodes a,b,c -i
both "-f 1 -i --trim (seed $s)" "$T/nl" -N 6 -f 1 -i --trim
both "--strip-prefix --squeeze (seed $s)" "$T/nonl" --nodes a,b --strip-prefix ID: --squeeze
both "-f 2 -d x (seed $s)" "$T/nl" -N 3 -f 2 -d x

# every record once, all of a key's records in one part
rm -rf "$T/m"; mkdir "$T/m"
"$DEDUP" split -N 16 -f 1 -o "$T/m/%s" "$T/nl"
check "-N 16: the parts hold every record" [ "$(cat "$T"/m/* | wc -c)" -eq "$(wc -c < "$T/nl")" ]
check "-N 16: a key lives in one part" bash -c "cut -f1 '$T'/m/* | sort -u | wc -l | grep -qx \"\$(for f in '$T'/m/*; do cut -f1 \"\$f\" | sort -u; done | wc -l)\""

# several inputs, regular files mixed with standard input, one after another
rm -rf "$T/m" "$T/f"; mkdir "$T/m" "$T/f"
"$DEDUP" split --nodes a,b,c -o "$T/m/%s" "$T/nl" - "$T/nonl" "$T/long" < "$T/nl"
cat "$T/nl" "$T/nl" "$T/nonl" > "$T/cat"; printf '\n' >> "$T/cat"; cat "$T/long" >> "$T/cat"
"$DEDUP" split --nodes a,b,c -o "$T/f/%s" < "$T/cat"
same_parts "files and - mixed" "$T/m" "$T/f"

# --stats counts the same on both roads
"$DEDUP" split -N 5 --stats=json -o "$T/m/s-%s" "$T/nonl" 2> "$T/s1"
"$DEDUP" split -N 5 --stats=json -o "$T/f/s-%s" < "$T/nonl" 2> "$T/s2"
check "--stats: file road = stdin" python3 - "$T/s1" "$T/s2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["records"] == b["records"] and a["bytes"] == b["bytes"], (a, b)
assert [(p["records"], p["bytes"]) for p in a["per_part"]] == [(p["records"], p["bytes"]) for p in b["per_part"]]
PY

# a write error on the file road (a file size limit: EFBIG): exit 1, the
# file named, no part and no temporary left
rm -rf "$T/o"; mkdir "$T/o"
(trap '' XFSZ; ulimit -f 512; exec "$DEDUP" split -N 3 -o "$T/o/%s" "$T/nl") 2> "$T/err"
rc=$?
check "write error: exit 1 (got $rc)" [ $rc -eq 1 ]
check "write error: names the part" grep -q "write error on $T/o/[0-2]: File too large" "$T/err"
check "write error: nothing left" [ -z "$(ls -A "$T/o")" ]

# A file cut shorter during the split (read with pread: a short read
# before the size it had when opened): exit 1 naming the file, and no part
# and no temporary left.  The run is stopped as soon as a part has bytes
# written, the file cut, the run continued.  A run that finished before it
# could be stopped is tried again (bounded).
mkbig() { seq -f 'https://example.org/item/%.0f?ref=abcdefghijklmnop' 1 5000000 > "$T/big"; }
writing_now() { [ -n "$(find "$T/o" -type f -size +0 2> /dev/null)" ]; }
caught=0
for attempt in 1 2 3 4 5; do
    mkbig
    rm -rf "$T/o"; mkdir "$T/o"
    "$DEDUP" split -N 4 -o "$T/o/%s" "$T/big" 2> "$T/err" &
    pid=$!
    if wait_until 30 writing_now && kill -STOP "$pid" 2> /dev/null; then
        truncate -s 1000 "$T/big"
        kill -CONT "$pid"
    fi
    wait "$pid"
    rc=$?
    [ "$rc" -eq 0 ] && continue # done before it was stopped
    caught=1
    check "file cut during the split: exit 1 (got $rc, attempt $attempt)" [ "$rc" -eq 1 ]
    check "file cut during the split: message" grep -q "$T/big: the file shrank while it was being split; no part was written" "$T/err"
    check "file cut during the split: nothing left" [ -z "$(ls -A "$T/o")" ]
    break
done
check "file cut during the split: a run was caught before its end in 5 attempts" [ "$caught" -eq 1 ]
rm -f "$T/big"
finish
