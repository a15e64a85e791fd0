#!/usr/bin/env bash
# dedup --keep last: each key's last occurrence, in the order of those last
# occurrences: what `tac | dedup | tac` gives (dedup's first-occurrence mode
# is itself checked against a naive reference in dedup.sh), on seeded random
# input, from files, standard input and pipes.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C
python3 - "$SEED" "$T/in" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
EDGE = [b" ", b"\r", b"\v", b"\f", b""]
with open(sys.argv[2], "wb") as f:
    for i in range(60000):
        k = r.randrange(4000)
        key = b"K%d" % k if r.random() < 0.2 else b"k%d" % k
        f.write(r.choice(EDGE) + key + r.choice(EDGE) + b"\tv%d\t%d\n" % (i, k % 7))
PY
for opts in "" "-f 1" "-f 1 -i" "-f 1 --trim" "-f 3" "-f 1 --trim -i --squeeze" "--mode fingerprint -f 1"; do
    # shellcheck disable=SC2086
    tac "$T/in" | "$DEDUP" $opts | tac > "$T/exp"
    # shellcheck disable=SC2086
    "$DEDUP" --keep last $opts "$T/in" > "$T/got" 2> "$T/err"
    check "--keep last $opts: exit 0" test $? -eq 0
    check "--keep last $opts equals tac | dedup | tac (seed $SEED)" cmp -s "$T/exp" "$T/got"
done
# standard input, a pipe, and two inputs (one a pipe)
tac "$T/in" | "$DEDUP" -f 1 | tac > "$T/exp"
"$DEDUP" --keep last -f 1 < "$T/in" > "$T/got"
check "--keep last from standard input" cmp -s "$T/exp" "$T/got"
cat "$T/in" | "$DEDUP" --keep last -f 1 -T "$T" > "$T/got"
check "--keep last from a pipe" cmp -s "$T/exp" "$T/got"
check "... leaves no temporary file" test -z "$(ls "$T" | grep -v '^\(in\|exp\|got\|err\)$')"
cat "$T/in" "$T/in" | tac | "$DEDUP" -f 1 | tac > "$T/exp"
"$DEDUP" --keep last -f 1 <(cat "$T/in") "$T/in" > "$T/got"
check "--keep last over two inputs, one a pipe" cmp -s "$T/exp" "$T/got"
"$DEDUP" --keep first -f 1 "$T/in" > "$T/got"
"$DEDUP" -f 1 "$T/in" > "$T/exp"
check "--keep first is the default" cmp -s "$T/exp" "$T/got"
"$DEDUP" --keep last --stats -f 1 "$T/in" > /dev/null 2> "$T/err"
check "--keep last --stats: counts" grep -q "60000 records in, 4[0-9]* out (each key's last occurrence)" "$T/err"
# refused combinations: exit 2, named
for bad in "--mode bloom -n 1000" "-c" "-D" "--window 1h" "--state $T/s" "-m 1M" "--sort"; do
    # shellcheck disable=SC2086
    "$DEDUP" --keep last $bad "$T/in" > "$T/out" 2> "$T/err"
    rc=$?
    check "--keep last $bad: exit 2 (got $rc)" test $rc -eq 2
    check "--keep last $bad: says what it cannot be combined with" grep -q "keep last cannot be combined with" "$T/err"
done
"$DEDUP" --keep middle "$T/in" > /dev/null 2> "$T/err"
check "--keep with a bad value: exit 2, the choices" grep -q "keep must be first or last (got 'middle')" "$T/err"
finish
