#!/bin/bash
# libdedup_redis against a real Redis Cluster of 3 masters + 3 replicas
# created by this test: keys, bitmap and module schemes routed per slot, URL
# kind mismatches refused, and a master killed mid-run (failover).
# Usage: cluster.sh TEST_BINARY [MODULE.so]
. "$(dirname "$0")/lib.sh"
T=$1
MOD=${2:-}
# one seed for the whole test, printed; the test binary takes it too
test_seed
export DEDUP_TEST_SEED=$SEED
if [ -n "$MOD" ]; then start_cluster --loadmodule "$MOD"; else start_cluster; fi
set -- $CLUSTER_PORTS
"$T" keys "$CLUSTER_URL" || fail "keys"
"$T" bitmap "$CLUSTER_URL" || fail "bitmap"
"$T" errors "$CLUSTER_URL" || fail "errors"
"$T" redirect "$CLUSTER_URL" || fail "redirect"
[ -n "$MOD" ] && { "$T" module "$CLUSTER_URL" || fail "module"; }
# a redis:// URL for a cluster node, a cluster URL for a plain server
P=$(free_port)
start_server "$P"
"$T" keys "redis://127.0.0.1:$1" 2>"$RT_DIR/err1" && fail "redis:// accepted for a cluster node"
grep -q "is a Redis Cluster node: use a redis-cluster:// URL" "$RT_DIR/err1" || fail "no clear message: $(cat "$RT_DIR/err1")"
"$T" keys "redis-cluster://127.0.0.1:$P" 2>"$RT_DIR/err2" && fail "redis-cluster:// accepted for a plain server"
grep -q "is not a cluster node" "$RT_DIR/err2" || fail "no clear message: $(cat "$RT_DIR/err2")"
# the command line: two processes on input halves, keys and bitmap
if [ -n "${DEDUP:-}" ]; then
    test_seed
    python3 -c 'import random, sys
r = random.Random(int(sys.argv[1]))
for _ in range(100000): print("id-%d" % r.randrange(60000))' "$SEED" > "$RT_DIR/in.txt"
    sort -u "$RT_DIR/in.txt" > "$RT_DIR/distinct.txt"
    split -n l/2 "$RT_DIR/in.txt" "$RT_DIR/half."
    D=$(wc -l < "$RT_DIR/distinct.txt")
    schemes="keys bitmap"
    [ -n "$MOD" ] && schemes="$schemes module cuckoo"
    for scheme in $schemes; do
        extra=()
        case $scheme in
        keys) extra=(--redis-scheme keys) ;;
        bitmap) extra=(--redis-scheme bitmap -n "$D" -p 0.01) ;;
        module) extra=(--redis-scheme module -n "$D" -p 0.01) ;;
        cuckoo) extra=(--redis-scheme module --redis-filter cuckoo -n "$D") ;;
        esac
        "$DEDUP" --redis "$CLUSTER_URL" --name "c$scheme" "${extra[@]}" --stats "$RT_DIR/half.aa" > "$RT_DIR/$scheme.a" 2> "$RT_DIR/$scheme.err" &
        pa=$!
        "$DEDUP" --redis "$CLUSTER_URL" --name "c$scheme" "${extra[@]}" "$RT_DIR/half.ab" > "$RT_DIR/$scheme.b" || fail "cli $scheme"
        wait $pa || fail "cli $scheme: $(cat "$RT_DIR/$scheme.err")"
        grep -q "cluster, 3 master" "$RT_DIR/$scheme.err" || fail "cli $scheme stats: $(cat "$RT_DIR/$scheme.err")"
        cat "$RT_DIR/$scheme.a" "$RT_DIR/$scheme.b" | sort > "$RT_DIR/$scheme.all"
        if [ $scheme = keys ]; then
            cmp -s "$RT_DIR/keys.all" "$RT_DIR/distinct.txt" || fail "cluster keys: not every distinct key exactly once"
        else
            [ -z "$(uniq -d "$RT_DIR/$scheme.all")" ] || fail "cluster $scheme: a key written twice"
            dropped=$(comm -23 "$RT_DIR/distinct.txt" "$RT_DIR/$scheme.all" | wc -l)
            # the filters' rate summed over their fill (tests/cli/lib/fp_expect.py):
            # bitmap, the library's blocked sizing; module, shard 0's shape, 12 alike
            FPX="$DEDUP_SRC/tests/cli/lib/fp_expect.py" S=1 key="c$scheme:{c$scheme:f0}"
            case $scheme in
            bitmap) shape="blocked $("$DEDUP" calc -n "$D" -p 1% -t blocked --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["bits"], j["k"])')" ;;
            module) S=12 shape="bloom $("$REDIS_CLI" -c -p "$1" BF.DEBUG "$key" | sed -n 's/.* bits:\([0-9]*\) hashes:\([0-9]*\).*/\1 \2/p')" ;;
            cuckoo) S=12 shape="cuckoo $("$REDIS_CLI" -c -p "$1" CF.DEBUG "$key" | sed 's/.*bktsize:\([0-9]*\) buckets:\([0-9]*\).*/\1 \2/') p=0.01" ;;
            esac
            read -r mean _ < <(python3 "$FPX" $shape "$D" $S)
            python3 "$FPX" check "cluster $scheme: false drops of $D distinct keys" "$dropped" "$mean" ||
                fail "cluster $scheme: $dropped false drops"
        fi
        if [ $scheme = module ] || [ $scheme = cuckoo ]; then
            # S came from the size (4 per master), stored: a run naming no
            # shape agrees (every key a duplicate); another -n is refused
            grep -q "12 shard(s)" "$RT_DIR/$scheme.err" || fail "cluster $scheme: shards: $(cat "$RT_DIR/$scheme.err")"
            n=$("$DEDUP" --redis "$CLUSTER_URL" --name "c$scheme" --redis-scheme module "$RT_DIR/in.txt" | wc -l) || fail "cluster $scheme: run without -n"
            [ "$n" = 0 ] || fail "cluster $scheme: a run without -n/--shards found $n new keys"
            "$DEDUP" --redis "$CLUSTER_URL" --name "c$scheme" --redis-scheme module -n $((D + 1)) "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/mm.err"
            [ $? = 1 ] && grep -q "items=$D " "$RT_DIR/mm.err" && grep -q "items=$((D + 1)) " "$RT_DIR/mm.err" ||
                fail "cluster $scheme: -n mismatch: $(cat "$RT_DIR/mm.err")"
        fi
    done
    "$DEDUP" --redis "redis://127.0.0.1:$1" "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/e3"
    [ $? = 1 ] && grep -q "redis-cluster://" "$RT_DIR/e3" || fail "cli: redis:// for a cluster: $(cat "$RT_DIR/e3")"
fi
# kill the master of slot 0 once the run is a quarter through, WAIT 1
m=$("$REDIS_CLI" -p "$1" cluster slots | awk 'NR==1{lo=$0} NR==4{print $0; exit}')
master=$("$REDIS_CLI" -p "$1" cluster nodes | awk '/master/ && $9 ~ /^0-/ {split($2,a,"[:@]"); print a[2]}')
[ -n "$master" ] || fail "no master for slot 0"
seeds=""
for p in $CLUSTER_PORTS; do [ "$p" != "$master" ] && seeds="$seeds${seeds:+,}127.0.0.1:$p"; done
rm -f "$RT_DIR/go"
"$T" failover "redis-cluster://$seeds" "$RT_DIR/go" 1 2>"$RT_DIR/fo.log" &
tp=$!
i=0
until [ -e "$RT_DIR/go" ] || ! kill -0 $tp 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 600 ] && fail "failover run never reached its quarter"; sleep 0.1
done
stop_server "$master"
# once its replica took over slot 0, it comes back (as that one's replica),
# so WAIT 1 can succeed again
set -- $CLUSTER_PORTS
other=$1; [ "$other" = "$master" ] && other=$2
await_takeover "$master" "$other"
wait $tp
rc=$?
cat "$RT_DIR/fo.log" >&2
[ $rc = 0 ] || { [ $rc = 3 ] && grep -q "exited clearly" "$RT_DIR/fo.log"; } || fail "failover run: exit $rc"
echo "cluster: ok"
