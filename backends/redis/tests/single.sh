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
Q=$(free_port)
python3 "$(dirname "$0")/proxy.py" "$Q" "$P" 3000 "$RT_DIR/proxy.ready" &
RT_PIDS="$RT_PIDS $!"
i=0
until [ -e "$RT_DIR/proxy.ready" ]; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "proxy did not start"; sleep 0.1
done
"$T" lost "redis://127.0.0.1:$P" "redis://127.0.0.1:$Q" || fail "lost"
if [ -n "$MOD" ]; then
    M=$(free_port)
    start_server "$M" --loadmodule "$MOD"
    "$T" module "redis://127.0.0.1:$M" || fail "module"
fi
echo "single: ok"
