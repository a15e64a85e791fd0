#!/usr/bin/env bash
# The main job against a naive reference (lib/ref_dedup.py) and the classic
# tools, on seeded random inputs, plus every edge case the man page promises.
. "$(dirname "$0")/lib/common.sh"
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"

gen() { # gen SEED LINES FILE: random records with repeats, case/space variants, NUL, \r, empties
    python3 - "$1" "$2" "$3" <<'PY'
import random, sys
seed, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = random.Random(seed)
EDGE = [b" ", b"\r", b"\v", b"\f"]
words = [b"alpha", b"Beta", b"GAMMA", b"delta", b"", b" x ", b"\tTab", b"a\rb", b"nul\0byte", b"\xff\xfe"]
out = []
for i in range(n):
    k = r.randrange(max(1, n // 3))
    w = words[k % len(words)]
    f1 = b"k%d" % (k % 97)
    if r.random() < 0.2: f1 = f1.upper()
    # the blanks --trim strips, \r \v \f among them, at both edges of the
    # field key and of the record (a CRLF ending too)
    edge = lambda: b"".join(r.choice(EDGE) for _ in range(r.randrange(3)))
    rec = edge() + f1 + edge() + b"\t" + w + b"\t" + b"%d" % (k % 7) + (edge() if r.random() < 0.3 else b"")
    if r.random() < 0.05: rec = b""
    if r.random() < 0.05: rec = b"id:" + rec
    out.append(rec)
data = b"\n".join(out)
if r.random() < 0.5: data += b"\n"   # sometimes no final newline
open(path, "wb").write(data)
PY
}

# --- property tests: every option combination against the reference -----------------
combos=(
  "" "-D" "-c" "-u"
  "-i" "--trim" "--squeeze" "--strip-prefix id:" "-i --trim --squeeze"
  "-f 1" "-f 2" "-f 3" "-f 5" "-f 2 -i" "-f 1 --trim -c" "-f 1 -d : " "-f 2 -u --squeeze"
  "--trim -D" "-i -c" "--strip-prefix id: --trim -u"
)
for round in $(seq "$(rounds 3)"); do
    s=$((SEED + round))
    gen "$s" 3000 "$T/in$round"
    for c in "${combos[@]}"; do
        # shellcheck disable=SC2086
        $REF $c "$T/in$round" > "$T/exp"
        for mode in exact fingerprint; do
            # shellcheck disable=SC2086
            "$DEDUP" --mode $mode $c "$T/in$round" > "$T/got" 2> "$T/err"
            if ! cmp -s "$T/exp" "$T/got"; then
                fail "mode $mode options '$c' seed $s differs from the reference"
            else pass; fi
        done
        # -z: the same records NUL-terminated (records hold no NUL there)
        tr '\n\0' '\0\n' < "$T/in$round" > "$T/inz"
        # shellcheck disable=SC2086
        $REF -z $c "$T/inz" > "$T/expz"
        # shellcheck disable=SC2086
        "$DEDUP" -z $c "$T/inz" > "$T/gotz"
        check "-z with '$c' seed $s" cmp -s "$T/expz" "$T/gotz"
    done
done

# --- the classic tools agree -----------------------------------------------------------
gen "$SEED" 20000 "$T/big"
awk '!seen[$0]++' "$T/big" > "$T/awk"
"$DEDUP" "$T/big" > "$T/got"
check "default output is byte-identical to awk '!seen[\$0]++'" cmp -s "$T/awk" "$T/got"
awk 'seen[$0]++' "$T/big" > "$T/awk"
"$DEDUP" --duplicates "$T/big" > "$T/got"
check "--duplicates equals awk 'seen[\$0]++'" cmp -s "$T/awk" "$T/got"
awk -F'\t' '!seen[$2]++' "$T/big" > "$T/awk"
"$DEDUP" -f 2 "$T/big" > "$T/got"
check "-f 2 equals awk -F'\\t' '!seen[\$2]++'" cmp -s "$T/awk" "$T/got"

# --- filters: a subset of the exact output, in order, never a repeat -------------------
"$DEDUP" "$T/big" > "$T/exact"
for mode in bloom blocked cuckoo scalable; do
    "$DEDUP" --mode $mode -n 20000 -p 0.01 "$T/big" > "$T/f"
    python3 - "$T/exact" "$T/f" <<'PY' || fail "--mode $mode output is not an ordered subset of exact's"
import sys
e = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
f = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
assert len(set(f)) == len(f), "a repeat was kept"
it = iter(e)
assert all(any(x == y for y in it) for x in f), "not an ordered subset"
assert len(f) >= 0.95 * len(e), "far more drops than the false-positive rate allows"
PY
    pass
    [ $mode = scalable ] || "$DEDUP" --mode $mode -m 64K "$T/big" > /dev/null || fail "--mode $mode sized by -m"
done
# The records a filter drops on distinct input are all false drops: their
# count agrees from both sides with the filter's own model (the estimate
# --stats makes from its rate as it fills), over enough keys that twice or
# half the rate fails.
seq 1 500000 | sed 's/^/distinct-/' > "$T/distinct"
for mode in bloom blocked cuckoo scalable; do
    p=0.01; [ $mode = scalable ] && p=0.1   # its links are tighter: more keys' worth of drops
    "$DEDUP" --mode $mode -n 500000 -p $p --stats=json "$T/distinct" > "$T/f" 2> "$T/err"
    drops=$((500000 - $(wc -l < "$T/f")))
    model=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["false_drops_estimated"])' "$T/err")
    python3 - "$mode" "$drops" "$model" <<'PY' || fail "--mode $mode: $drops false drops against a model of $model"
import math, sys
mode, k, mu = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
lo = lambda m: m - 3.29 * math.sqrt(m) - 0.5
hi = lambda m: m + 3.29 * math.sqrt(m) + 0.5
assert lo(2 * mu * 0.85) > hi(mu * 1.15) and hi(mu / 2 * 1.15) < lo(mu * 0.85), "too few keys to tell 2x (model %g)" % mu
assert lo(mu * 0.85) <= k <= hi(mu * 1.15), "%s: %d outside [%.1f, %.1f]" % (mode, k, lo(mu * 0.85), hi(mu * 1.15))
PY
    pass
done
"$DEDUP" --mode scalable -p 0.001 "$T/big" > "$T/f"
check "--mode scalable needs no -n and keeps (almost) every new record" \
    test "$(wc -l < "$T/f")" -ge "$(( $(wc -l < "$T/exact") * 99 / 100 ))"
"$DEDUP" --mode cuckoo -m 2K "$T/big" > /dev/null 2> "$T/err"
check "a full fixed-size cuckoo filter is exit 1" test $? -eq 1
check "... with a message saying what to do" grep -q "cuckoo filter is full" "$T/err"
"$DEDUP" --mode scalable -m 4K "$T/big" > /dev/null 2> "$T/err"
check "a scalable filter that grows past -m ends the run with 1" test $? -eq 1
check "... naming -m" grep -q "grew past -m/--memory" "$T/err"
"$DEDUP" --mode fingerprint -m 8K "$T/big" > /dev/null 2> "$T/err"
check "a fingerprint set past -m ends the run with 1" test $? -eq 1
check "... saying what to do" grep -q "more memory than -m/--memory" "$T/err"
"$DEDUP" --mode bloom "$T/big" > /dev/null 2> "$T/err"
check "bloom without a size exits 2" test $? -eq 2
check "bloom without a size explains -n/-m" grep -q -- "-n/--items" "$T/err"

# --- edge cases ------------------------------------------------------------------------------
printf 'a\nb\na' > "$T/nonl"
check "a last record without newline is a record, written with one" \
    test "$("$DEDUP" "$T/nonl" | od -An -c | tr -d ' \n')" = 'a\nb\n'
printf '\n\n\nx\n\n' > "$T/empties"
check "empty records are records" test "$("$DEDUP" "$T/empties" | od -An -c | tr -d ' \n')" = '\nx\n'
printf 'a\0b\na\0c\na\0b\n' > "$T/nuls"
check "NUL bytes inside records are data" test "$("$DEDUP" "$T/nuls" | wc -c)" -eq 8
printf 'a\r\na\n' > "$T/cr"
check "\\r is part of the record" test "$("$DEDUP" "$T/cr" | wc -l)" -eq 2
check "--trim ignores the \\r" test "$("$DEDUP" --trim "$T/cr" | wc -l)" -eq 1
: > "$T/empty"
check "empty input gives empty output" test -z "$("$DEDUP" "$T/empty")"
# 100 MB records (20 MB under a sanitizer: still twenty 1 MiB read blocks)
L=$(sized 100000000 5)
python3 -c "import sys; L = int(sys.argv[1]); sys.stdout.buffer.write(b'x' * L + b'\n' + b'y\n' + b'x' * L + b'\n' + b'x' * (L - 1) + b'\n')" "$L" > "$T/long"
check "$((L / 1000000)) MB records are deduplicated" test "$("$DEDUP" "$T/long" | wc -c)" -eq $((2 * L + 3))
rm -f "$T/long"
printf 'b\na\n' > "$T/f1"; printf 'a\nc' > "$T/f2"
check "several files and - for stdin" test "$(printf 'c\nd\n' | "$DEDUP" "$T/f1" - "$T/f2" | tr '\n' ,)" = 'b,a,c,d,'

# --- state across runs ------------------------------------------------------------------------
for mode in exact fingerprint blocked cuckoo scalable; do
    sz=""; [ $mode = blocked ] && sz="-n 100000 -p 1e-6"; [ $mode = cuckoo ] && sz="-n 100000 -p 1e-4"
    [ $mode = scalable ] && sz="-p 1e-6"
    # one seed for the four runs: the filters' false drops then fall on the same keys (a
    # state and a one-run set each draw their own seed otherwise)
    sz="$sz --seed $((SEED + 1))"
    rm -f "$T/state"
    head -c 40000 "$T/big" > "$T/p1"; tail -c +40001 "$T/big" | head -c 40000 > "$T/p2"; tail -c +80001 "$T/big" > "$T/p3"
    # cut at byte offsets may split a record: compare with one run over the same three files
    # shellcheck disable=SC2086
    { "$DEDUP" --mode $mode $sz -s "$T/state" "$T/p1"; "$DEDUP" --mode $mode $sz -s "$T/state" "$T/p2"; \
      "$DEDUP" --mode $mode $sz -s "$T/state" "$T/p3"; } > "$T/three"
    # shellcheck disable=SC2086
    "$DEDUP" --mode $mode $sz "$T/p1" "$T/p2" "$T/p3" > "$T/one"
    check "--state over three runs equals one run ($mode)" cmp -s "$T/three" "$T/one"
done
"$DEDUP" --mode exact -s "$T/state" "$T/big" > /dev/null 2> "$T/err"
check "a state file of another method is refused with exit 2" test $? -eq 2
check "the refusal names both methods" grep -q "scalable.*exact" "$T/err"
# an interrupted run leaves the previous state as it was
rm -f "$T/state"; "$DEDUP" -s "$T/state" "$T/p1" > /dev/null
cp "$T/state" "$T/state.before"
mkfifo "$T/fifo"
( cat "$T/p2"; exec sleep 60 ) > "$T/fifo" &
feeder=$!
"$DEDUP" -s "$T/state" --line-buffered -o "$T/partial" "$T/fifo" 2>/dev/null &
pid=$!
# The signal comes once the run has decided and written records of p2 (its
# input stays open, so it cannot have finished).
check "the run writes p2's new records while its input is open" wait_until 60 tmp_has_lines "$T/partial" 1
kill -TERM $pid; wait $pid; rc=$?
kill $feeder 2>/dev/null; wait $feeder 2>/dev/null
check "SIGTERM ends the run with 128+15" test $rc -eq 143
check "an interrupted run leaves the state file intact" cmp -s "$T/state" "$T/state.before"
check "no temporary state file is left" test -z "$(ls "$T" | grep 'state.tmp')"
check "no output file (-o) is left by the interrupted run" test -z "$(ls "$T" | grep 'partial')"
printf 'garbage' > "$T/bad.state"
"$DEDUP" -s "$T/bad.state" "$T/p1" > "$T/out" 2> "$T/err"
check "a corrupt state file is exit 2" test $? -eq 2
check "... names the file" grep -q "bad.state" "$T/err"
check "... and writes nothing" test ! -s "$T/out"
cp "$T/state" "$T/long.state"
printf 'x' >> "$T/long.state"
"$DEDUP" -s "$T/long.state" "$T/p1" > "$T/out" 2> "$T/err"
check "a state file with a byte appended is exit 2" test $? -eq 2
check "... named with what is wrong" grep -q "long.state: data goes on after the end of the saved structure" "$T/err"

# --- errors, pipes, stats ----------------------------------------------------------------------
"$DEDUP" "$T/big" "$T/missing" > "$T/out" 2> "$T/err"
check "an unreadable file is exit 2" test $? -eq 2
check "... named with the reason" grep -q "missing: No such file or directory" "$T/err"
check "... before any output" test ! -s "$T/out"
if [ -w /dev/full ]; then
    "$DEDUP" "$T/big" > /dev/full 2> "$T/err"
    check "a write error is exit 1" test $? -eq 1
    check "... with a message" grep -q "write error" "$T/err"
fi
yes | head -n 2000000 | nl -ba > "$T/many"
"$DEDUP" "$T/many" 2> "$T/err" | head -1 > /dev/null
check "dedup | head -1 exits 0" test "${PIPESTATUS[0]}" -eq 0
check "... quietly" test ! -s "$T/err"
"$DEDUP" --stats=json "$T/big" 2> "$T/json" > /dev/null
check "--stats=json has the promised keys" python3 -c "
import json,sys; d=json.load(open('$T/json'))
for k in ('records_in','records_out','duplicates','distinct','mode','memory_bytes'): assert k in d, k
assert d['records_in'] == d['records_out'] + d['duplicates']"
"$DEDUP" --stats "$T/big" 2> "$T/stats" > /dev/null
check "--stats text names the method and memory" grep -q "mode exact, memory" "$T/stats"
"$DEDUP" --progress "$T/big" 2> "$T/prog" > /dev/null
check "--progress forces a progress line (bytes, rate, percent)" grep -q "records/s, .*%" "$T/prog"
"$DEDUP" "$T/big" 2> "$T/prog" > /dev/null
check "no progress when stderr is not a terminal" test ! -s "$T/prog"
"$DEDUP" -o "$T/out.txt" "$T/big" > "$T/stdout"
check "-o writes to the file" cmp -s "$T/out.txt" "$T/exact"
check "-o leaves stdout empty" test ! -s "$T/stdout"
check "--help exits 0 on stdout" sh -c "'$DEDUP' --help | grep -q Usage"
check "--version exits 0" sh -c "'$DEDUP' --version | grep -q '^dedup '"
"$DEDUP" --bogus 2> "$T/err"; check "an unknown option is exit 2" test $? -eq 2
"$DEDUP" -c -u "$T/big" 2> "$T/err"; check "conflicting output kinds are exit 2" test $? -eq 2
"$DEDUP" --mode bloom -n 10 -c "$T/big" 2> "$T/err"; check "--count with a filter is refused" test $? -eq 2
"$DEDUP" --mode blom -c "$T/missing" 2> "$T/err"; check "an unknown --mode is exit 2" test $? -eq 2
check "... named, with the choices, before the inputs and other options" \
    grep -qx "dedup: unknown --mode 'blom' (choose exact, fingerprint, bloom, blocked, cuckoo or scalable)" "$T/err"
# an empty record first, with a key normalisation and counts (the count
# pass once handed the set a NULL key of length 0: UBSan caught it)
printf '\nA\na\n\n' | "$DEDUP" -i -c > "$T/got" 2> "$T/err"
printf '      2 \n      2 A\n' > "$T/exp"
check "empty first record with -i -c" cmp -s "$T/exp" "$T/got"
check "empty first record with -i -c: nothing on stderr" test ! -s "$T/err"
finish
