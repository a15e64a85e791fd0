#!/usr/bin/env bash
# byref.sh - exact mode by reference (regular files mapped, the set keeps
# references): seeded random inputs through the file path, standard input
# from a file, a pipe and the copying path (DEDUP_NO_BYREF=1), with key
# options and output kinds, against the naive reference; files without a
# last terminator (one ending exactly on a page boundary), empty files,
# several files (large ones, placed at 2 MiB-aligned offsets, mixed with
# small ones), NUL terminators, a spill past the memory share; a file cut
# shorter, grown or rewritten while it is read gives exit 1 and a message
# naming it; and the memory a run takes per distinct key (getrusage).
set -u
. "$(dirname "$0")/lib/common.sh"
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"
export LC_ALL=C
. "$SRC/tests/cli/lib/byref_inputs.sh"
gen "$T/a" 30000 9000 "$SEED"
gen "$T/b" 5000 3000 $((SEED + 1)) -n
gen "$T/c" 20000 20000 $((SEED + 2))
: > "$T/empty"
# a file of exactly two pages whose last record has no newline
python3 -c "
import sys; d = b''.join(b'p%05d\n' % i for i in range(1200)); d = d[:8192 - 5] + b'\nlast'
open('$T/page', 'wb').write(d[:8192])"
check "page file is 8192 bytes" test "$(stat -c %s "$T/page")" -eq 8192
printf 'last' > "$T/last"

# By reference is chosen for files a quarter of the budget or more (below
# that the copying road is faster); the checks below force it with
# DEDUP_BYREF=1, and these first ones check the size rule itself.
DEDUP_BYREF= "$DEDUP" -v "$T/a" > /dev/null 2> "$T/err"
check "small file against the budget: copies" test ! -s "$T/err"
DEDUP_BYREF= DEDUP_MEMORY=$(($(stat -c %s "$T/a") * 2)) "$DEDUP" -v "$T/a" > /dev/null 2> "$T/err"
check "a file of half the budget: by reference" grep -q 'references' "$T/err"
DEDUP_BYREF= DEDUP_MEMORY=$(($(stat -c %s "$T/a") * 8)) "$DEDUP" -v "$T/a" > /dev/null 2> "$T/err"
check "a file of an eighth of the budget: copies" test ! -s "$T/err"
export DEDUP_BYREF=1

# the path is really taken for regular files, and not for a pipe
"$DEDUP" -v "$T/a" > /dev/null 2> "$T/err"
check "by reference for a file" grep -q 'references' "$T/err"
cat "$T/a" | "$DEDUP" -v > /dev/null 2> "$T/err"
check "copies for a pipe" test ! -s "$T/err"

for files in "a b" "b a c" "empty a empty" "page" "page last" "page page" "b b"; do
    set -- ; for f in $files; do set -- "$@" "$T/$f"; done
    all="-D -c -u"
    [ "$files" = "a b" ] && all="-D -c -u -f_2 -i --trim -f_1_-d_f --squeeze --strip-prefix_k
        -c_-i -u_-f_2 -c_--trim_-f_1 -i_--squeeze_-f_3 -u_--strip-prefix_k_-i"
    for o in "" $all; do
        opts=${o//_/ }
        # shellcheck disable=SC2086
        $REF $opts "$@" > "$T/ref"
        # shellcheck disable=SC2086
        "$DEDUP" $opts "$@" > "$T/out" 2> "$T/err"
        check "[$files] $opts: exit" test $? -eq 0
        same "[$files] $opts: file path" "$T/ref" "$T/out"
        # shellcheck disable=SC2086
        DEDUP_NO_BYREF=1 "$DEDUP" $opts "$@" > "$T/out"
        same "[$files] $opts: copying path" "$T/ref" "$T/out"
        [ "$files" = "a b" ] || continue
        # shellcheck disable=SC2086
        $REF $opts "$1" > "$T/ref1"
        # shellcheck disable=SC2086
        cat "$1" | "$DEDUP" $opts > "$T/out"
        same "[$files] $opts: pipe" "$T/ref1" "$T/out"
        # shellcheck disable=SC2086
        "$DEDUP" $opts < "$1" > "$T/out"
        same "[$files] $opts: standard input from a file" "$T/ref1" "$T/out"
    done
done
# Files of 2 MiB or more start at 2 MiB-aligned places of the span (so the
# kernel can map their page cache whole); small ones are packed after
# them: large and small files mixed, a large one without a last terminator
gen "$T/l1" 70000 25000 $((SEED + 6))
gen "$T/l2" 70000 25000 $((SEED + 7)) -n
check "large test files are 2 MiB or more" test "$(stat -c %s "$T/l1")" -ge 2097152 -a "$(stat -c %s "$T/l2")" -ge 2097152
# a record only at the end of a large file, without a terminator, then
# again (terminated, or at the end of the same file read twice): its
# repeats are found only if the set knows where that file ends
{ cat "$T/l1"; printf 'only at the end of l3'; } > "$T/l3"
printf 'only at the end of l3\n' > "$T/l3rec"
for files in "l1 b l2 a l1" "l2 l1" "b l2 empty l2 last" "l3 l3rec" "b l3 l3rec" "b l3 b l3"; do
    set -- ; for f in $files; do set -- "$@" "$T/$f"; done
    for o in "" -c -f_2; do
        opts=${o//_/ }
        # shellcheck disable=SC2086
        $REF $opts "$@" > "$T/ref"
        # shellcheck disable=SC2086
        "$DEDUP" -v $opts "$@" > "$T/out" 2> "$T/err"
        check "[$files] $opts: exit" test $? -eq 0
        check "[$files] $opts: by reference" grep -q 'references' "$T/err"
        same "[$files] $opts: file path" "$T/ref" "$T/out"
    done
done
# Key options keep references: a key that is a byte range of its record
# by reference, a normalised key that differs from the file's bytes copied
# (both ways in one run: -i on mixed-case records)
for o in -i -f_2 --trim -c_--squeeze; do
    # shellcheck disable=SC2086
    "$DEDUP" -v ${o//_/ } "$T/a" > /dev/null 2> "$T/err"
    check "$o: by reference" grep -q 'references' "$T/err"
done

# --state by reference: run after run, the same output and the same state
# file, byte for byte, as the copying road's (keys in first-occurrence
# order; a loaded state's keys copied in).  One --seed for both: a new
# state's seed is otherwise a fresh secret.
for o in "" -i -f_2 -D_--trim; do
    opts=${o//_/ }
    rm -f "$T/s1" "$T/s2"
    for f in a b c; do
        # shellcheck disable=SC2086
        "$DEDUP" -v $opts --seed 7 --state "$T/s1" "$T/$f" > "$T/out" 2> "$T/err"
        check "--state $opts [$f]: exit" test $? -eq 0
        check "--state $opts [$f]: by reference" grep -q 'references' "$T/err"
        # shellcheck disable=SC2086
        DEDUP_NO_BYREF=1 "$DEDUP" $opts --seed 7 --state "$T/s2" "$T/$f" > "$T/ref"
        same "--state $opts [$f]: output" "$T/ref" "$T/out"
        same "--state $opts [$f]: state file" "$T/s2" "$T/s1"
    done
done
# the third run's output against the reference: c's records whose keys a
# and b did not have
$REF -f 2 "$T/a" "$T/b" | wc -l > "$T/n1"
$REF -f 2 "$T/a" "$T/b" "$T/c" | tail -n +$(($(cat "$T/n1") + 1)) > "$T/ref"
rm -f "$T/s1"
"$DEDUP" -f 2 --state "$T/s1" "$T/a" "$T/b" > /dev/null && "$DEDUP" -f 2 --state "$T/s1" "$T/c" > "$T/out"
same "--state -f 2: a third file after two" "$T/ref" "$T/out"

# NUL-terminated records
tr '\n\0' '\0\n' < "$T/a" > "$T/az"
$REF -z "$T/az" "$T/b" > "$T/ref"
"$DEDUP" -z "$T/az" "$T/b" > "$T/out"
same "-z file path" "$T/ref" "$T/out"
# past the in-memory share: the set freezes and the engine takes the rest
gen "$T/big" 150000 400000 $((SEED + 3))
$REF "$T/big" > "$T/ref"
DEDUP_MEMORY=2M "$DEDUP" --stats "$T/big" > "$T/out" 2> "$T/err"
same "spill by reference" "$T/ref" "$T/out"
check "it did spill" grep -q "the rest through" "$T/err"

# A file changed while it is read.  The output goes to a pipe nobody reads
# yet, so the run blocks in write(2) early; then the file is changed and
# the pipe drained.
gen "$T/src" 400000 400000 $((SEED + 4))
changed_mid_run "cut shorter" truncate "$T/in" "$T/src" "shrank" "$DEDUP" "$T/in"
changed_mid_run "grown" append "$T/in" "$T/src" "changed while" "$DEDUP" "$T/in"
changed_mid_run "rewritten" rewrite "$T/in" "$T/src" "modified while" "$DEDUP" "$T/in"
# -c: the counts are written after the whole input is read, from the first
# records kept by reference: a file cut shorter then is still caught
changed_mid_run "cut shorter, -c -i" truncate "$T/in" "$T/src" "shrank|changed while" "$DEDUP" -c -i "$T/in"

# Memory per distinct key (getrusage of the child): the mapped file's pages
# count in the peak, the set about 11-21 bytes per key; the copying path
# holds each key and 16-byte slots on top of its buffers.
# Sanitizer runtimes add their shadow memory to every byte: the bound is
# checked in the Release build's run.
gen "$T/mem" 600000 600000 $((SEED + 5))
if ldd "$DEDUP" 2>/dev/null | grep -q 'lib[at]san'; then
    echo "note: sanitized build: the memory bound is checked in the Release build"
else
python3 - "$DEDUP" "$T/mem" <<'PY' || fail "memory per key"
import os, resource, subprocess, sys
dedup, path = sys.argv[1], sys.argv[2]
size = os.path.getsize(path)
# the run first: a child's peak counts what it shared with this process
subprocess.run([dedup, path], stdout=subprocess.DEVNULL, check=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
distinct = len(set(open(path, "rb").read().split(b"\n")[:-1]))
bound = size + 22 * distinct + 48 * 2**20
print("by reference: peak %.1f MB for %d distinct keys in %.1f MB (bound %.1f MB)"
      % (peak / 1e6, distinct, size / 1e6, bound / 1e6))
sys.exit(0 if peak <= bound else 1)
PY
fi
finish
