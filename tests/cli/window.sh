#!/usr/bin/env bash
# dedup --window / --last: decisions against a naive reference on seeded
# random streams with out-of-order and late records, streaming with
# --line-buffered, late records to a file, bad time fields, --state resume,
# time formats and exit codes.
. "$(dirname "$0")/lib/common.sh"
REF="python3 $SRC/tests/cli/lib/ref_window.py"

gen() { # gen SEED N FILE SCALE: key<TAB>time, times drifting up with jitter, some far behind
    python3 - "$1" "$2" "$3" "$4" <<'PY'
import random, sys
seed, n, path, scale = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r = random.Random(seed)
t = 1700000000 * scale
with open(path, "wb") as f:
    for i in range(n):
        t += r.randrange(3) * scale
        u = t
        c = r.random()
        if c < 0.3: u -= r.randrange(20) * scale
        elif c < 0.35: u -= r.randrange(100) * scale
        f.write(b"k%d\t%d\textra\n" % (r.randrange(40), u))
PY
}

# --- against the reference ------------------------------------------------------------
for round in $(seq "$(rounds 2)"); do
    s=$((SEED + round))
    gen "$s" 4000 "$T/in" 1
    gen "$s" 4000 "$T/in_ms" 1000
    for spec in "sliding 10 0" "sliding 10 5" "sliding 30 20" "tumbling 10 0" "tumbling 25 30" "last 7 0" "last 50 0"; do
        set -- $spec
        type=$1 n=$2 lat=$3
        for late in keep drop file; do
            if [ "$type" = last ]; then
                opts=(--last "$n" -f 1)
                $REF last "$n" 0 1 0 epoch keep "$T/exp" "$T/explate" < "$T/in"
                [ "$late" = keep ] || continue
            else
                lf=$late; [ "$late" = file ] && lf="$T/gotlate"
                opts=(--window "${n}s" --window-type "$type" --lateness "${lat}s" --time-field 2 -f 1 --late "$lf")
                $REF "$type" $((n * 1000000)) $((lat * 1000000)) 1 2 epoch "$late" "$T/exp" "$T/explate" < "$T/in"
            fi
            "$DEDUP" "${opts[@]}" "$T/in" > "$T/got" 2> "$T/err"
            rc=$?
            if [ $rc -ne 0 ] || ! cmp -s "$T/exp" "$T/got"; then
                fail "${opts[*]} (seed $s) differs from the reference (exit $rc)"
            else
                pass
            fi
            if [ "$late" = file ]; then
                check "${opts[*]}: late file (seed $s)" cmp -s "$T/explate" "$T/gotlate"
            fi
        done
    done
    # The same stream in milliseconds: detected, and the same decisions.
    $REF sliding 10000000 5000000 1 2 epoch_ms keep "$T/exp" /dev/null < "$T/in_ms"
    "$DEDUP" --window 10s --lateness 5s --time-field 2 -f 1 --stats "$T/in_ms" > "$T/got" 2> "$T/err"
    check "epoch milliseconds detected (seed $s)" cmp -s "$T/exp" "$T/got"
    check "--stats says the format was detected" grep -q "epoch_ms, detected" "$T/err"
    # Save mid-stream, resume: the same output as one run.
    head -n 1500 "$T/in" > "$T/part1"
    tail -n +1501 "$T/in" > "$T/part2"
    rm -f "$T/state"
    "$DEDUP" --window 10s --lateness 5s --time-field 2 -f 1 -s "$T/state" "$T/in" > "$T/whole" 2> /dev/null
    rm -f "$T/state"
    "$DEDUP" --window 10s --lateness 5s --time-field 2 -f 1 -s "$T/state" "$T/part1" > "$T/r1" 2> /dev/null
    "$DEDUP" --window 10s --lateness 5s --time-field 2 -f 1 -s "$T/state" "$T/part2" > "$T/r2" 2> /dev/null
    check "--state: two runs equal one (seed $s)" cmp -s "$T/whole" <(cat "$T/r1" "$T/r2")
    "$DEDUP" --window 20s --time-field 2 -f 1 -s "$T/state" "$T/part2" > /dev/null 2> "$T/err"
    check "--state with other window settings is exit 2" test $? -eq 2
    check "... and says so" grep -q "made with other options: --window 20s here, 10s saved; --lateness 0s here, 5s saved" "$T/err"
done

# --- late records: the warning names the lateness that would have covered them -----------
printf 'a\t100\nb\t130\na\t101\nc\t90\n' > "$T/late"
"$DEDUP" --window 10s --time-field 2 -f 1 --late drop "$T/late" > "$T/got" 2> "$T/err"
check "late records dropped" test "$(cat "$T/got")" = "$(printf 'a\t100\nb\t130')"
check "late warning with the lateness needed" grep -q -- "--lateness 40s would have covered them" "$T/err"
"$DEDUP" --window 10s --time-field 2 -f 1 --lateness 40s "$T/late" > "$T/got" 2> "$T/err"
check "with that lateness nothing is late" test "$(cat "$T/got")" = "$(printf 'a\t100\nb\t130\nc\t90')"
check "... and no warning" test ! -s "$T/err"

# --- bad time fields ------------------------------------------------------------------
printf 'a\t100\nb\t101\nc\tsoon\nd\t102\ne\n' > "$T/bad"
"$DEDUP" --window 10s --time-field 2 -f 1 "$T/bad" > "$T/got" 2> "$T/err"
check "a bad time fails with exit 1" test $? -eq 1
check "... naming the file, line and value" grep -q "bad:3: bad time in field 2: 'soon'" "$T/err"
check "... after writing every record before it" test "$(cat "$T/got")" = "$(printf 'a\t100\nb\t101')"
"$DEDUP" --window 10s --time-field 2 -f 1 --on-bad-time drop "$T/bad" > "$T/got" 2> "$T/err"
check "--on-bad-time drop" test "$(cut -f1 "$T/got" | tr -d '\n')" = "abd"
check "... warns about the missing field too" grep -q "bad:5: no field 2" "$T/err"
"$DEDUP" --window 10s --time-field 2 -f 1 --on-bad-time keep "$T/bad" > "$T/got" 2> /dev/null
check "--on-bad-time keep" test "$(cut -f1 "$T/got" | tr -d '\n')" = "abcde"
printf 'a\t2024-02-29T12:00:00+01:00\na\t2024-02-29T11:00:09Z\na\t2024-02-29T11:00:10Z\n' > "$T/iso"
check "ISO 8601 with offsets" test "$("$DEDUP" --window 10s --time-field 2 -f 1 "$T/iso" | wc -l)" -eq 2
printf 'a\t2024-02-29T12:00:00\na\t1700000000\n' > "$T/mixed"
"$DEDUP" --window 10s --time-field 2 -f 1 --time-format iso8601 "$T/mixed" > /dev/null 2> "$T/err"
check "a time in another format is a bad time" grep -q "mixed:2: bad time in field 2: '1700000000' (iso8601)" "$T/err"

# --- streaming: each kept record is written as soon as it is decided --------------------
python3 - "$DEDUP" <<'PY' || fail "--line-buffered streaming"
import os, select, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "--window", "1h", "--line-buffered"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def expect(line):
    r, _, _ = select.select([p.stdout], [], [], 10)
    if not r: sys.exit("no output for %r within 10 s" % line)
    got = p.stdout.readline()
    if got != line: sys.exit("got %r, want %r" % (got, line))
# A dropped duplicate is seen by what comes next: the next line out is the
# next new record, not the repeat (no fixed wait that a slow or fast machine
# turns into no test).
for rec, out in [(b"a\n", b"a\n"), (b"a\n", None), (b"b\n", b"b\n"), (b"a\n", None), (b"c\n", b"c\n")]:
    p.stdin.write(rec); p.stdin.flush()
    if out: expect(out)
p.stdin.close()
if p.stdout.read() != b"": sys.exit("output after the last new record")
if p.wait(10) != 0: sys.exit("exit %d" % p.returncode)
PY
pass

# --- approximate windows --------------------------------------------------------------
gen $((SEED + 7)) 3000 "$T/in" 1
"$DEDUP" --window 10s --time-field 2 -f 1 --mode bloom -n 1000 --stats=json "$T/in" > "$T/got" 2> "$T/err"
check "--mode bloom window runs" test $? -eq 0
check "... and reports itself" grep -q '"mode":"bloom"' "$T/err"
"$DEDUP" --window 10s --time-field 2 -f 1 "$T/in" > "$T/exact" 2> /dev/null
check "... keeping no more than the exact window (never a repeat within it)" \
    test "$(wc -l < "$T/got")" -le "$(wc -l < "$T/exact")"
# Record by record, and the false duplicates against the table's model:
# ~1000 keys per 10 s window (as planned by -n), 60% of records fresh.
python3 - $((SEED + 8)) 200000 "$T/ain" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
n, t, keys = int(sys.argv[2]), 1700000000000, []
with open(sys.argv[3], "wb") as f:
    for i in range(n):
        t += r.randrange(3) * 10
        u = t - (r.randrange(500) if r.random() < 0.2 else 0)
        if keys and r.random() < 0.4:
            k = keys[-1 - r.randrange(min(len(keys), 2000))]
        else:
            k = b"key-%d" % i
        keys.append(k)
        f.write(b"%s\t%d\tr%d\n" % (k, u, i))
PY
for wt in sliding tumbling; do
    rm -f "$T/astate"
    "$DEDUP" --window 10s --window-type $wt --lateness 1s --time-field 2 --time-format epoch_ms -f 1 \
        --late drop --mode bloom -n 1000 -p 1% --state "$T/astate" "$T/ain" > "$T/got" 2> "$T/err"
    check "--mode bloom --window-type $wt runs" test $? -eq 0
    check "--mode bloom --window-type $wt: each record's verdict, and false duplicates within the model's bounds" \
        python3 "$SRC/tests/cli/lib/check_approx_window.py" "$T/ain" "$T/got" "$T/astate" 1 2 1000
done

# --- last N ---------------------------------------------------------------------------
check "--last 1 keeps one per two repeats" test "$(printf 'a\na\na\na\nb\na\n' | "$DEDUP" --last 1 | tr -d '\n')" = "aaba"

# --- usage errors are exit 2 ------------------------------------------------------------
for bad in "--window 0" "--window soon" "--window 10s --last 5" "--window 10s -c" "--window 10s -u" \
           "--window 10s --mode cuckoo" "--window 10s --mode bloom" "--last 5 --time-field 2" \
           "--lateness 5s" "--time-field 2" "--window 10s --window-type hopping" \
           "--window 10s --time-format rfc" "--window 10s --on-bad-time ignore" "--window 10s -m 1G"; do
    # shellcheck disable=SC2086
    "$DEDUP" $bad /dev/null > /dev/null 2> "$T/err"
    rc=$?
    if [ $rc -eq 2 ] && [ -s "$T/err" ]; then pass; else fail "'$bad' should be exit 2 with a message (got $rc)"; fi
done
"$DEDUP" --window 10s --late /nonexistent/dir/late /dev/null 2> /dev/null
check "an unwritable --late file is exit 2" test $? -eq 2

finish
