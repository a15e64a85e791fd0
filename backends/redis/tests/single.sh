#!/bin/bash
# libdedup_redis against one real redis-server (and one with the project's
# module loaded): keys, TTL reserve/commit, bitmap identical to a local
# blocked filter, module shards, errors, and replies lost through a proxy.
# Usage: single.sh TEST_BINARY [MODULE.so]
. "$(dirname "$0")/lib.sh"
T=$1
MOD=${2:-}
"$T" url || fail "url"
P=$(free_port)
start_server "$P"
U="redis://127.0.0.1:$P/2"
"$T" keys "$U" || fail "keys"
"$T" ttl "$U" || fail "ttl"
"$T" bitmap "$U" || fail "bitmap"
"$T" bitmap-ttl "$U" || fail "bitmap-ttl"
"$T" errors "$U" || fail "errors"
# start_proxy UPSTREAM_PORT [gone]: a reply-cutting proxy (proxy.py) in front
# of the server; sets Q to its port.
start_proxy() {
    Q=$(free_port)
    rm -f "$RT_DIR/proxy.ready"
    python3 "$(dirname "$0")/proxy.py" "$Q" "$1" 3000 "$RT_DIR/proxy.ready" ${2:-} &
    RT_PIDS="$RT_PIDS $!"
    i=0
    until [ -e "$RT_DIR/proxy.ready" ]; do
        i=$((i + 1)); [ $i -gt 100 ] && fail "proxy did not start"; sleep 0.1
    done
}
start_proxy "$P"
"$T" lost "redis://127.0.0.1:$P" "redis://127.0.0.1:$Q" || fail "lost"
# repeats inside a batch after a lost reply, each scheme; then a server gone
schemes="keys bitmap"
if [ -n "$MOD" ]; then
    M=$(free_port)
    start_server "$M" --loadmodule "$MOD"
    "$T" module "redis://127.0.0.1:$M" || fail "module"
    schemes="$schemes module"
fi
for s in $schemes; do
    port=$P
    [ "$s" = module ] && port=$M
    for mode in "" gone; do
        start_proxy "$port" $mode
        "$T" lost-repeats "$s" "redis://127.0.0.1:$port" "redis://127.0.0.1:$Q" $mode ||
            fail "lost-repeats $s $mode"
    done
done
# A key repeated inside one batch is asked of Redis once (the keys scheme
# decides the repeats from the first occurrence: a reservation that ran out
# between two commands for one key would answer NEW twice and write the
# record twice).  1,000 keys, each three times in one batch: 1,000 SETs.
for i in 1 2 3; do seq 1 1000; done | sed 's/^/rep/' > "$RT_DIR/rep.in"
"$REDIS_CLI" -p "$P" CONFIG RESETSTAT > /dev/null
"$DEDUP" --redis "redis://127.0.0.1:$P/5" --name rep --journal "$RT_DIR/j" "$RT_DIR/rep.in" > "$RT_DIR/rep.out" ||
    fail "repeats in a batch: dedup failed"
[ "$(sort -u "$RT_DIR/rep.out" | wc -l)" = 1000 ] && [ "$(wc -l < "$RT_DIR/rep.out")" = 1000 ] ||
    fail "repeats in a batch: $(wc -l < "$RT_DIR/rep.out") lines written, 1000 expected"
sets=$("$REDIS_CLI" -p "$P" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_set:calls=\([0-9]*\),.*/\1/p')
[ "$sets" = 1000 ] || fail "repeats in a batch: $sets SET commands for 1,000 distinct keys"
echo "single: ok"
