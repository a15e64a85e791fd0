#!/usr/bin/env bash
# dedup --tier ...: seeded random streams, run after run, through stacks of
# tiers (filters rebuilt or not, filter files, a window on top, an exact
# tier, two stores) equal the exact reference; --trust-filter never keeps a
# repeat and drops new keys within the binomial bound; --stats shows the
# reads a filter saved; usage errors.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/gen_keys.sh"

if ! "$DEDUP" --help | grep -q -- '--tier=SPEC'; then
    echo "FAIL: this dedup has no --tier" >&2
    exit 1
fi

# --- every stack, three runs each, equals the reference ------------------------------
for i in 1 2 3; do gen $((SEED + i)) 20000 30000 "$T/p$i"; done
cat "$T/p1" "$T/p2" "$T/p3" | awk '!seen[$0]++' > "$T/ref"
stacks=(
  "--tier blocked:n=40000,p=1% --tier rocksdb:@D"
  "--tier blocked:n=40000,p=1% --tier rocksdb:@D --rebuild-filter"
  "--tier blocked:n=40000,p=1%,file=@F --tier rocksdb:@D --rebuild-filter"
  "--tier cuckoo:n=40000 --tier rocksdb:@D --rebuild-filter"
  "--tier scalable:n=1000 --tier rocksdb:@D,sync=always --rebuild-filter"
  "--tier exact --tier rocksdb:@D"
  "--tier blocked:n=40000,p=2% --tier exact --tier rocksdb:@D --rebuild-filter"
  "--tier blocked:n=40000 --tier rocksdb:@D --tier rocksdb:@E --rebuild-filter"
  "--tier blocked:n=40000 --tier rocksdb:@D --shared"
  "--mode blocked -n 40000 --store @D --rebuild-filter"
  "--mode bloom -n 40000 --store @D"
  "--store @D"
)
si=0
for spec in "${stacks[@]}"; do
    si=$((si + 1))
    args=${spec//@D/$T/s$si}
    args=${args//@E/$T/e$si}
    args=${args//@F/$T/f$si.bf}
    : > "$T/got"
    for i in 1 2 3; do
        # shellcheck disable=SC2086
        "$DEDUP" $args "$T/p$i" >> "$T/got" 2> "$T/err" || fail "stack $si run $i: $(cat "$T/err")"
    done
    check "stack $si ($spec): three runs = the reference" cmp -s "$T/ref" "$T/got"
done
check "a filter file tier is saved after the run" test -s "$T/f3.bf"
"$DEDUP" --tier "file:$T/f3.bf" --tier "rocksdb:$T/s3" --rebuild-filter "$T/p2" > "$T/got"
check "file:PATH loads it; all repeats" test ! -s "$T/got"

# a filter in front of a store that already holds keys, not rebuilt: warned,
# still exact, and no reads saved
"$DEDUP" --tier blocked:n=40000 --tier "rocksdb:$T/s1" --stats=json "$T/p1" > "$T/got" 2> "$T/err"
check "a filter that does not know the store is warned about" grep -q "does not know the" "$T/err"
check "... and the run stays exact" test ! -s "$T/got"

# --- a window on top: exact inside it, the store behind it ---------------------------
printf 'a\nb\na\nc\nb\n' > "$T/w1"
printf 'a\nd\nd\nc\n' > "$T/w2"
"$DEDUP" --last 2 --tier blocked:n=1000 --tier "rocksdb:$T/sw" "$T/w1" > "$T/got"
"$DEDUP" --last 2 --tier blocked:n=1000 --tier "rocksdb:$T/sw" --rebuild-filter "$T/w2" >> "$T/got"
printf 'a\nb\nc\nd\n' > "$T/exp"
check "window in front of a filter and a store: exact across runs" cmp -s "$T/exp" "$T/got"

# --- --stats: reads saved by a covering filter ------------------------------------------
gen $((SEED + 9)) 100000 1000000000 "$T/fresh"    # (nearly) all new keys
"$DEDUP" --tier blocked:n=200000,p=1% --tier "rocksdb:$T/sr" --stats=json "$T/fresh" > /dev/null 2> "$T/stats"
check "a filter in front of a new store settles >= 95% of new keys without a store read" \
    python3 -c "
import json,sys
j=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{\"tiers\"')][0]
assert j['exact'] and j['reads_avoided_rate']>=0.95, j
assert j['tiers'][1]['lookups'] < 0.05*j['new_keys'], j" "$T/stats"

# --- --trust-filter: never a repeat kept, false drops within the bound -------------------
n=50000
python3 -c "
import sys
with open(sys.argv[1],'w') as f:
    for i in range($n): f.write('t%d-%d\n' % ($SEED, i))
    for i in range(0,$n,3): f.write('t%d-%d\n' % ($SEED, i))" "$T/tf"
"$DEDUP" --tier blocked:n=$n,p=1% --tier "rocksdb:$T/st" --trust-filter --stats "$T/tf" > "$T/got" 2> "$T/err"
check "--trust-filter keeps no repeat" test -z "$(sort "$T/got" | uniq -d)"
kept=$(wc -l < "$T/got")
# each new key meets the filter holding the ones before it: the drops
# expected are the blocked model's rate summed over that fill (lib/fp_expect.py)
shape=$("$DEDUP" calc -n $n -p 1% --type blocked --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["bits"], j["k"])')
read -r mean _ < <(python3 "$SRC/tests/cli/lib/fp_expect.py" blocked $shape $n)
check "--trust-filter drops new keys as the filter's rate over the run predicts" \
    python3 "$SRC/tests/cli/lib/fp_expect.py" check "--trust-filter: new keys dropped" \
    $((n - kept)) "$mean"
check "--stats says the stack is not exact" grep -q "not exact" "$T/err"

# --- a reader that goes away (| head) -----------------------------------------------------
# A run keeping keys for later (a filter file, a store) says so and exits 1;
# a file tier is then not saved.  A run keeping nothing ends quietly (0).
seq 1 300000 > "$T/pipe_in"
for args in "--tier blocked:n=1M,file=$T/pipe.bf" "--store $T/pipe_store"; do
    # shellcheck disable=SC2086
    "$DEDUP" $args "$T/pipe_in" 2> "$T/err" | head -1 > /dev/null
    rc=${PIPESTATUS[0]}
    check "'$args' | head: exit 1 with a message" \
        test "$rc" -eq 1 -a -n "$(grep 'broken pipe' "$T/err")"
done
check "a filter file is not saved when the reader went away" test ! -e "$T/pipe.bf"
"$DEDUP" --tier blocked:n=1M "$T/pipe_in" 2> "$T/err" | head -1 > /dev/null
rc=${PIPESTATUS[0]}
check "a one-run tier | head ends quietly (exit 0, nothing said)" test "$rc" -eq 0 -a ! -s "$T/err"

# --- usage errors ------------------------------------------------------------------------
for bad in "--tier bogus" "--tier blocked" "--tier blocked:n=x" "--tier rocksdb:" \
           "--tier rocksdb:$T/x,sync=sometimes" "--rebuild-filter --store $T/x" \
           "--trust-filter --store $T/x" "--sync always" "--store $T/x -c" \
           "--mode cuckoo --tier rocksdb:$T/x" "--mode fingerprint --store $T/x" \
           "--window 1m --tier exact --tier rocksdb:$T/x"; do
    # shellcheck disable=SC2086
    echo x | "$DEDUP" $bad > "$T/out" 2> "$T/err"
    rc=$?
    check "'$bad' is a usage error (exit 2, a message, no output)" \
        test $rc -eq 2 -a -s "$T/err" -a ! -s "$T/out"
done
check "no store was created by a refused command" test ! -e "$T/x"

finish
