#!/usr/bin/env bash
# extref_mt.sh - the external engine (-m) with records by reference
# (cli/extref.h): seeded random inputs through regular files (references)
# and a pipe (records carried), with key options and every output kind,
# against the naive reference; several files, files without a last
# terminator, empty files, NUL terminators, a record longer than the
# read-back window; the choice itself (long records by reference, short ones
# and --sort carried, DEDUP_EXTREF / DEDUP_NO_EXTREF); a budget that gets
# the engine's threads (label "threads": TSan runs it); and a file cut
# shorter, grown or rewritten while it is read: exit 1 naming it.
set -u
. "$(dirname "$0")/lib/common.sh"
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"
export LC_ALL=C
unset DEDUP_EXTREF DEDUP_NO_EXTREF
GEN_STYLE=urls
export GEN_STYLE
. "$SRC/tests/cli/lib/byref_inputs.sh"
byref() { grep -q 'by reference' "$1"; }
gen "$T/a" 40000 15000 "$SEED"
gen "$T/b" 8000 5000 $((SEED + 1)) -n
: > "$T/empty"

# the choice: long records by reference, a pipe and --sort carry them
"$DEDUP" -m 1M --stats "$T/a" > /dev/null 2> "$T/err"
check "a regular file: by reference" byref "$T/err"
cat "$T/a" | "$DEDUP" -m 1M --stats > /dev/null 2> "$T/err"
check "a pipe: records carried" test -z "$(grep 'by reference' "$T/err")"
"$DEDUP" -m 1M --stats - < "$T/a" > /dev/null 2> "$T/err"
check "standard input: records carried" test -z "$(grep 'by reference' "$T/err")"
"$DEDUP" -m 1M --sort --stats "$T/a" > /dev/null 2> "$T/err"
check "--sort: records carried" test -z "$(grep 'by reference' "$T/err")"
rm -f "$T/ff"; mkfifo "$T/ff"
cat "$T/a" > "$T/ff" &
"$DEDUP" -m 1M --stats "$T/ff" > "$T/out" 2> "$T/err"
wait
check "a named FIFO: records carried" test -z "$(grep 'by reference' "$T/err")"
$REF "$T/a" > "$T/ref"
same "a named FIFO: whole output" "$T/ref" "$T/out"
DEDUP_NO_EXTREF=1 "$DEDUP" -m 1M --stats "$T/a" > /dev/null 2> "$T/err"
check "DEDUP_NO_EXTREF=1: records carried" test -z "$(grep 'by reference' "$T/err")"
python3 -c "
import random; r = random.Random($SEED)
open('$T/short', 'wb').write(b''.join(b'%d\n' % r.randrange(50000) for _ in range(60000)))"
"$DEDUP" -m 1M --stats "$T/short" > /dev/null 2> "$T/err"
check "short records: carried" test -z "$(grep 'by reference' "$T/err")"
DEDUP_EXTREF=1 "$DEDUP" -m 1M --stats "$T/short" > "$T/out" 2> "$T/err"
check "DEDUP_EXTREF=1: short records by reference" byref "$T/err"
$REF "$T/short" > "$T/ref"
same "short records by reference" "$T/ref" "$T/out"
export DEDUP_EXTREF=1

# records longer than the reader's buffer among referenced ones: they go to
# the engine's giant path whole (in pieces), the others by reference, and
# the offsets of those after a giant stay right; memory stays bounded
python3 -c "
import random; r = random.Random($SEED)
big = [bytes([97 + i]) * (3 << 20) for i in range(3)]
lines = [b'https://example.org/%d/%s' % (r.randrange(300), b'q' * r.randrange(40)) for _ in range(3000)]
for i in range(0, 3000, 500): lines.insert(i + r.randrange(400), big[r.randrange(3)])
open('$T/mixed', 'wb').write(b'\\n'.join(lines) + b'\\n')"
for o in "" -D -c -u; do
    # shellcheck disable=SC2086
    $REF $o "$T/mixed" > "$T/ref"
    # shellcheck disable=SC2086
    "$DEDUP" -m 1M $o --stats "$T/mixed" > "$T/out" 2> "$T/err"
    check "giant records among references ($o): by reference" byref "$T/err"
    same "giant records among references ($o)" "$T/ref" "$T/out"
done

# every output kind and key option, files against the pipe and the reference
budgets="1M 4M"   # under a sanitizer one of them, chosen by the seed
[ -n "${DEDUP_SANITIZER:-}" ] && budgets=$( ((SEED % 2)) && echo 4M || echo 1M)
# under ThreadSanitizer a third of the options, chosen by the seed (they
# differ in the main thread's work; successive seeds cover them all)
k=0
for m in $budgets; do
    for o in "" -D -c -u -f_2_-d_/ -i --trim "-c_-i_--trim" "-u_-f_1_-d_."; do
        k=$((k + 1))
        [ "${DEDUP_SANITIZER:-}" = thread ] && [ $((k % 3)) != $((SEED % 3)) ] && continue
        opts=${o//_/ }
        # shellcheck disable=SC2086
        $REF $opts "$T/a" "$T/b" > "$T/ref"
        # shellcheck disable=SC2086
        "$DEDUP" -m $m $opts --stats "$T/a" "$T/b" > "$T/out" 2> "$T/err"
        check "-m $m $opts: exit" test $? -eq 0
        check "-m $m $opts: by reference" byref "$T/err"
        same "-m $m $opts: files by reference (seed $SEED)" "$T/ref" "$T/out"
        # shellcheck disable=SC2086
        cat "$T/a" "$T/b" | "$DEDUP" -m $m $opts > "$T/out"
        same "-m $m $opts: pipe (seed $SEED)" "$T/ref" "$T/out"
    done
done
# several files: no last terminator in the middle, empty ones, the same twice
for files in "b a" "empty a empty" "b b" "a empty b"; do
    set -- ; for f in $files; do set -- "$@" "$T/$f"; done
    for o in "" -c -D; do
        # shellcheck disable=SC2086
        $REF $o "$@" > "$T/ref"
        # shellcheck disable=SC2086
        "$DEDUP" -m 1M $o "$@" > "$T/out"
        same "[$files] $o (seed $SEED)" "$T/ref" "$T/out"
    done
done
# NUL terminators
tr '\n' '\0' < "$T/a" > "$T/z"
$REF -z "$T/z" > "$T/ref"
"$DEDUP" -m 1M -z "$T/z" > "$T/out"
same "-z by reference" "$T/ref" "$T/out"
# records longer than the 1 MiB read-back window, repeated, among others
python3 -c "
import random; r = random.Random($SEED)
big = [bytes(r.choice(b'abcdef') for _ in range(1500000)) for _ in range(3)]
small = [b'https://x.example/%d/%s' % (i, b'q' * 40) for i in range(20000)]
recs = small[:10000] + [big[0], big[1]] + small + [big[0], big[2], big[1]] + small[5000:]
open('$T/big', 'wb').write(b'\n'.join(recs))"
for o in "" -c -u -D; do
    # shellcheck disable=SC2086
    $REF $o "$T/big" > "$T/ref"
    # shellcheck disable=SC2086
    "$DEDUP" -m 2M $o "$T/big" > "$T/out"
    same "long records $o" "$T/ref" "$T/out"
done

# The engine's threads (a budget of 32 MiB or more) with a spill: enough
# distinct long lines that the references do not fit.
gen "$T/m" 700000 600000 $((SEED + 3))
$REF "$T/m" > "$T/ref"
"$DEDUP" -m 32M --stats "$T/m" > "$T/out" 2> "$T/err"
check "-m 32M: spilled" grep -q 'spilled to' "$T/err"
same "-m 32M: by reference with threads (seed $SEED)" "$T/ref" "$T/out"

# A file changed while it is read.  The output goes to a pipe nobody reads
# yet, so the run blocks in write(2); then the file is changed and the pipe
# drained.
gen "$T/src" "$(sized 300000)" "$(sized 300000)" $((SEED + 4))
for w in "cut shorter:truncate" "grown:append" "rewritten:rewrite"; do
    changed_mid_run "${w%%:*}" "${w#*:}" "$T/in" "$T/src" "shrank|changed while|modified while" \
        "$DEDUP" -m 2M "$T/in"
done
finish
