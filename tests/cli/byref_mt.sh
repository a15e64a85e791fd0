#!/usr/bin/env bash
# byref_mt.sh - exact mode by reference decided on two threads (the feeder's
# thread decides the keys of one part of each block, the main thread the
# other part and the output; dedup_seen_decide_part in dedup/seen.h): seeded
# random inputs against the naive reference and the copying and pipe paths,
# one file and several, NUL terminators; the road is really taken (-v says
# how many blocks went on two threads); a budget whose quarter the set
# passes mid-run stops the two threads there and goes on whole, with and
# without a spill.  Labelled "threads": `make test` runs it under TSan too.
set -u
. "$(dirname "$0")/lib/common.sh"
. "$SRC/tests/cli/lib/byref_inputs.sh"
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"
export LC_ALL=C DEDUP_BYREF=1
gen "$T/a" 60000 20000 "$SEED"
gen "$T/b" 8000 5000 $((SEED + 1)) -n
gen "$T/big" 150000 400000 $((SEED + 3))
blocks() { sed -n 's/.*by reference: \([0-9]*\) of \([0-9]*\) blocks.*/\1 \2/p' "$1"; }

for files in "a" "a b" "b a big" "big"; do
    set -- ; for f in $files; do set -- "$@" "$T/$f"; done
    $REF "$@" > "$T/ref"
    "$DEDUP" -v "$@" > "$T/out" 2> "$T/err"
    check "[$files] exit" test $? -eq 0
    same "[$files] two threads" "$T/ref" "$T/out"
    read -r parted all <<< "$(blocks "$T/err")"
    check "[$files] every block on two threads ($parted of $all)" test "${parted:-0}" -gt 0 -a "${parted:-0}" = "${all:-x}"
    DEDUP_NO_BYREF=1 "$DEDUP" "$@" > "$T/out2"
    same "[$files] copying path" "$T/out" "$T/out2"
    cat "$@" | "$DEDUP" > "$T/out2"
    [ "$files" = "b a big" ] || same "[$files] pipe" "$T/out" "$T/out2"
done
"$DEDUP" < "$T/big" > "$T/out"
$REF "$T/big" > "$T/ref"
same "standard input from a file" "$T/ref" "$T/out"
tr '\n\0' '\0\n' < "$T/a" > "$T/az"
$REF -z "$T/az" "$T/b" > "$T/ref"
"$DEDUP" -z "$T/az" "$T/b" > "$T/out"
same "-z" "$T/ref" "$T/out"

# The set passes a quarter of the budget mid-run: the two threads stop at a
# block, the rest is decided whole; with a small budget it then spills.
$REF "$T/big" > "$T/ref"
for mem in 2M 5M; do
    DEDUP_MEMORY=$mem "$DEDUP" -v --stats "$T/big" > "$T/out" 2> "$T/err"
    check "budget $mem: exit" test $? -eq 0
    same "budget $mem: output" "$T/ref" "$T/out"
    read -r parted all <<< "$(blocks "$T/err")"
    check "budget $mem: the threads stopped mid-run ($parted of $all)" test "${parted:-0}" -gt 0 -a "${parted:-0}" -lt "${all:-0}"
done
check "budget 2M: it spilled" grep -q "the rest through" <(DEDUP_MEMORY=2M "$DEDUP" --stats "$T/big" 2>&1 > /dev/null)
finish
