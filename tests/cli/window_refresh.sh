#!/usr/bin/env bash
# dedup --refresh-on-dup: a key arriving every 0.9 window is suppressed with
# it and NEW again without it (exact and --mode bloom, --window and --last);
# seeded random streams against a naive reference (exact: the same output;
# approximate: never a line the reference drops as a repeat, and few lines
# missing); --state resume and the refusal of a state made with the other
# choice; usage errors.
. "$(dirname "$0")/lib/common.sh"

# --- a key every 0.9 window ------------------------------------------------------------
# k at 0, 9, 18, ... 90 s with a 10 s window (and x, once, to see the stream goes on).
python3 - > "$T/every09" <<'PY'
for i in range(11):
    print("k\t%d" % (1700000000 + 9 * i))
print("x\t1700000091")
PY
for mode in "" "--mode bloom -n 100"; do
    # shellcheck disable=SC2086
    "$DEDUP" --window 10s --time-field 2 -f 1 $mode --refresh-on-dup "$T/every09" > "$T/got" 2> "$T/err"
    check "refresh $mode: exit 0" test $? -eq 0
    check "refresh $mode: k kept once, suppressed while it keeps coming" \
        test "$(cut -f2 "$T/got" | tr '\n' ' ')" = "1700000000 1700000091 "
    # shellcheck disable=SC2086
    "$DEDUP" --window 10s --time-field 2 -f 1 $mode "$T/every09" > "$T/got" 2> "$T/err"
    check "no refresh $mode: k NEW again once a window has passed since it was kept" \
        test "$(cut -f2 "$T/got" | tr '\n' ' ')" = "1700000000 1700000018 1700000036 1700000054 1700000072 1700000090 1700000091 "
done
# A gap of a whole window ends the suppression.
printf 'k\t100\nk\t109\nk\t118\nk\t128\nk\t137\n' > "$T/gap"
check "a gap of the window ends it" \
    test "$("$DEDUP" --window 10s --time-field 2 -f 1 --refresh-on-dup "$T/gap" | cut -f2 | tr '\n' ' ')" = "100 128 "
# --last N counts records: a key every 3rd record with --last 3.
printf 'k\na\nb\nk\nc\nd\nk\ne\nf\nk\n' > "$T/last"
check "--last 3 --refresh-on-dup: k once" \
    test "$("$DEDUP" --last 3 --refresh-on-dup "$T/last" | tr -d '\n')" = "kabcdef"
check "--last 2 --refresh-on-dup: k every time (a gap of 2 others)" \
    test "$("$DEDUP" --last 2 --refresh-on-dup "$T/last" | tr -d '\n')" = "kabkcdkefk"
check "--last 3 without: k again after 3 records" \
    test "$("$DEDUP" --last 3 "$T/last" | tr -d '\n')" = "kabcdkef"

# --- against a reference ---------------------------------------------------------------
# ref SPEC < IN > OUT: with refresh a record is a duplicate iff a non-late
# record of its key (kept or duplicate) lies less than D from it.
# SPEC: "window D L" (times in field 2, seconds) or "last N".
ref() {
    python3 -c '
import sys
kind, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = sys.stdout.buffer
seen, T, W, i = {}, None, None, 0
for line in sys.stdin.buffer:
    f = line.rstrip(b"\n").split(b"\t")
    if kind == "last":
        u, D = i, a + 1
        i += 1
    else:
        u, D = int(f[1]) * 1000000, a * 1000000
        if W is not None and u < W:
            out.write(line)  # late: written, not decided (--late keep)
            continue
        if T is None or u > T:
            T = u
            W = max(W, u - b * 1000000) if W is not None else u - b * 1000000
    ts = seen.setdefault(f[0], [])
    dup = any(abs(u - t) < D for t in ts)
    ts.append(u)
    if not dup:
        out.write(line)
' "$@"
}
python3 - $SEED 6000 "$T/in" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
t = 1700000000
with open(sys.argv[3], "wb") as f:
    for i in range(int(sys.argv[2])):
        t += r.randrange(3)
        u = t - (r.randrange(8) if r.random() < 0.3 else 0) - (r.randrange(40) if r.random() < 0.03 else 0)
        f.write(b"k%d\t%d\tr%d\n" % (r.randrange(60), u, i))
PY
for spec in "window 10 0" "window 10 5" "window 30 29" "window 3 2" "last 7 0" "last 100 0"; do
    set -- $spec
    if [ "$1" = last ]; then opts=(--last "$2" -f 1); else
        opts=(--window "${2}s" --lateness "${3}s" --time-field 2 -f 1); fi
    ref $spec < "$T/in" > "$T/exp"
    "$DEDUP" "${opts[@]}" --refresh-on-dup "$T/in" > "$T/got" 2> "$T/err"
    rc=$?
    if [ $rc -ne 0 ] || ! cmp -s "$T/exp" "$T/got"; then
        fail "${opts[*]} --refresh-on-dup (seed $SEED) differs from the reference (exit $rc)"
    else
        pass
    fi
    # Approximate: every line it writes the reference writes (never a false
    # NEW, so its output is a subsequence of the reference's); a line the
    # reference writes and it drops must be a false duplicate (at most a
    # few percent: ~60 keys in a window planned for 200 at p = 1%) or the
    # granularity dedup/window.h promises: a record of the key less than
    # D + s from it, s = ceil(D / 7) the generation span.
    "$DEDUP" "${opts[@]}" --refresh-on-dup --mode bloom -n 200 -p 1% "$T/in" > "$T/agot" 2> "$T/err"
    check "${opts[*]} --mode bloom: exit 0" test $? -eq 0
    python3 - "$T/in" "$T/exp" "$T/agot" $spec <<'PY' || fail "${opts[*]} --refresh-on-dup --mode bloom (seed $SEED) against the reference"
import sys
inp, expf, gotf, kind, a = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
exp = open(expf, "rb").read().splitlines()
got = open(gotf, "rb").read().splitlines()
j, missing = 0, []
for line in got:
    while j < len(exp) and exp[j] != line:
        missing.append(exp[j])
        j += 1
    if j == len(exp):
        sys.exit("a line the reference drops as a repeat was written: %r" % line)
    j += 1
missing += exp[j:]
D = a + 1 if kind == "last" else a * 1000000
s = -(-D // 7)
times, where = {}, {}
for i, line in enumerate(open(inp, "rb").read().splitlines()):
    f = line.split(b"\t")
    u = i if kind == "last" else int(f[1]) * 1000000
    where[line] = (f[0], u, i)
    times.setdefault(f[0], []).append((i, u))
unexplained = 0
for line in missing:
    k, u, i = where[line]
    if not any(ii < i and abs(u - t) < D + s for ii, t in times[k]):
        unexplained += 1
if not got or unexplained > 0.03 * len(exp) + 3:
    sys.exit("%d of %d lines missing, %d not explained by the granularity" % (len(missing), len(exp), unexplained))
PY
    pass
done

# --- state: resume, and the other choice refused -----------------------------------------
head -n 2500 "$T/in" > "$T/p1"
tail -n +2501 "$T/in" > "$T/p2"
# one seed for the three runs: the approximate window's false drops depend
# on it, and a run without --seed or state draws its own
for mode in "--seed 7" "--seed 7 --mode bloom -n 200"; do
    rm -f "$T/s"
    # shellcheck disable=SC2086
    "$DEDUP" --window 10s --lateness 5s --time-field 2 -f 1 --refresh-on-dup $mode -s "$T/s" "$T/p1" > "$T/r1" 2> /dev/null &&
    "$DEDUP" --window 10s --lateness 5s --time-field 2 -f 1 --refresh-on-dup $mode -s "$T/s" "$T/p2" > "$T/r2" 2> /dev/null
    check "refresh $mode --state: two runs as one" \
        cmp -s <("$DEDUP" --window 10s --lateness 5s --time-field 2 -f 1 --refresh-on-dup $mode "$T/in" 2> /dev/null) <(cat "$T/r1" "$T/r2")
    # shellcheck disable=SC2086
    "$DEDUP" --window 10s --lateness 5s --time-field 2 -f 1 $mode -s "$T/s" "$T/p2" > "$T/got" 2> "$T/err"
    check "a refresh state without --refresh-on-dup is exit 2" test $? -eq 2
    check "... naming the option" grep -q -- "--refresh-on-dup saved, not here" "$T/err"
    check "... and writes nothing" test ! -s "$T/got"
done
rm -f "$T/s"
"$DEDUP" --window 10s --time-field 2 -f 1 -s "$T/s" "$T/p1" > /dev/null 2>&1
"$DEDUP" --window 10s --time-field 2 -f 1 --refresh-on-dup -s "$T/s" "$T/p2" > "$T/got" 2> "$T/err"
check "a plain state with --refresh-on-dup is exit 2" test $? -eq 2
check "... naming the option" grep -q -- "--refresh-on-dup here, not saved" "$T/err"

# --- usage errors ----------------------------------------------------------------------
for bad in "--refresh-on-dup" "--window 10s --window-type tumbling --refresh-on-dup" \
           "--window 10s --lateness 10s --refresh-on-dup" "--window 10s --lateness 1m --refresh-on-dup"; do
    # shellcheck disable=SC2086
    "$DEDUP" $bad /dev/null > /dev/null 2> "$T/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q -- "--refresh-on-dup" "$T/err"; then pass; else
        fail "'$bad' should be exit 2 with a message naming --refresh-on-dup (got $rc)"; fi
done
check "--help lists --refresh-on-dup" sh -c "'$DEDUP' --help | grep -q -- '--refresh-on-dup'"
check "the man page documents it" grep -q 'refresh\\-on\\-dup' "$SRC/docs/dedup.1"

finish
