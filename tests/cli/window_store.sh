#!/usr/bin/env bash
# Windows over a store or tiers (issue 33 item 3): --last and --window on top
# of --store / --tier at every batch size (a store's batches are 8,192
# records, a window's 64 without one).  As dedup.1 says, the window answers
# inside it and the store behind it across windows: with a store, a key is
# new once ever, so the output is the input's first occurrences, and a rerun
# over the same store writes only keys it never saw.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C

if ! "$DEDUP" --help | grep -q -- '--store'; then
    echo "built without RocksDB: no store to test"
    finish
    exit $?
fi

# gen N SEED FILE: N lines over about N/3 keys, a third of them the line
# before again (repeats inside any window) and the rest from anywhere.
gen() {
    python3 - "$1" "$2" > "$3" <<'PY'
import random, sys
n, seed = int(sys.argv[1]), int(sys.argv[2])
r = random.Random(seed)
prev = None
for i in range(n):
    if prev is not None and r.random() < 1 / 3:
        k = prev
    else:
        k = "key-%d" % r.randrange(max(1, n // 3))
    print(k)
    prev = k
PY
}
first() { awk '!seen[$0]++' "$1"; }

CONFIGS=("--last 5 --store DB" "--window 1h --store DB"
         "--last 5 --tier blocked:n=50000,p=0.01 --tier rocksdb:DB")
for n in 1 63 64 65 8192 8193 20000; do
    gen "$n" $((SEED + n)) "$T/in"
    first "$T/in" > "$T/ref"
    gen 500 $((SEED + n + 1)) "$T/more"
    sed 's/^key/more/' "$T/more" > "$T/new"
    cat "$T/in" "$T/new" > "$T/again"
    first "$T/new" > "$T/ref_new"
    for c in "${CONFIGS[@]}"; do
        rm -rf "$T/db"
        args=${c//DB/$T/db}
        # shellcheck disable=SC2086
        "$DEDUP" $args "$T/in" > "$T/out" 2> "$T/err"
        rc=$?
        check "$n lines, $c: exit 0 (got $rc): $(head -c 300 "$T/err")" test $rc -eq 0
        check "$n lines, $c: the input's first occurrences" cmp -s "$T/out" "$T/ref"
        # shellcheck disable=SC2086
        "$DEDUP" $args "$T/again" > "$T/out2" 2> "$T/err"
        rc=$?
        check "$n lines, $c, rerun: exit 0 (got $rc): $(head -c 300 "$T/err")" test $rc -eq 0
        check "$n lines, $c, rerun over the store: only the keys it never saw" \
            cmp -s "$T/out2" "$T/ref_new"
    done
done

# A window alone still forgets (the same input without a store differs when
# a key comes back past the window): the store is what answers across it.
printf 'a\nb\nc\nd\ne\nf\na\n' > "$T/w"
"$DEDUP" --last 5 "$T/w" > "$T/out"
check "--last 5 alone keeps a key seen 6 records before" test "$(wc -l < "$T/out")" -eq 7
rm -rf "$T/db"
"$DEDUP" --last 5 --store "$T/db" "$T/w" > "$T/out"
check "--last 5 --store drops it (the store saw it)" test "$(wc -l < "$T/out")" -eq 6
finish
