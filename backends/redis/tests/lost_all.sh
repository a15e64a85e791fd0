#!/bin/bash
# Every command each Redis scheme sends, and `dedup filter URL add/query/del`,
# through the reply-cutting proxy (proxy.py): a lost reply costs a retry, an
# "uncertain" or an error, never a wrong definite answer
# (test_redis_lost_all.c says what each case checks).
# Usage: lost_all.sh TEST_BINARY [MODULE.so]   (needs $DEDUP)
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
T=$1
MOD=${2:-}
test_seed
export DEDUP_TEST_SEED=$SEED
# start_proxy UPSTREAM_PORT [COMMAND]: a proxy cutting its first connection's
# replies after 3000 bytes (with COMMAND: the replies of the connection that
# first sends COMMAND, 3000 bytes after it); sets Q to its port (stopped by
# the EXIT trap)
start_proxy() {
    Q=$(free_port)
    rm -f "$RT_DIR/proxy.ready" "$RT_DIR/proxy.ready.cut"
    python3 "$(dirname "$0")/proxy.py" "$Q" "$1" 3000 "$RT_DIR/proxy.ready" ${2:+"after=$2"} &
    RT_PIDS="$RT_PIDS $!"
    local i=0
    until [ -e "$RT_DIR/proxy.ready" ]; do
        i=$((i + 1)); [ $i -gt 100 ] && fail "proxy did not start"; sleep 0.1
    done
}
P=$(free_port)
start_server "$P"
cases="keys-decide keys-query keys-ttl-decide keys-ttl-query keys-ttl-commit
       bitmap-decide bitmap-query bitmap-ttl-decide bitmap-ttl-query"
if [ -n "$MOD" ]; then
    M=$(free_port)
    start_server "$M" --loadmodule "$MOD"
    cases="$cases module-decide module-query module-ttl-decide module-ttl-query
           cuckoo-decide cuckoo-query cuckoo-add cuckoo-del"
fi
failed=""
for c in $cases; do
    port=$P
    case $c in module* | cuckoo*) port=$M ;; esac
    start_proxy "$port"
    "$T" "$c" "redis://127.0.0.1:$port/3" "redis://127.0.0.1:$Q/3" || failed="$failed $c"
done

# the command line's filter operations on a Redis filter, through the proxy
n=4000
seq 1 $n | sed 's/^/f/' > "$RT_DIR/keys"
lost_here() { # lost_here WHAT: the proxy did cut a reply (else the case tested nothing)
    [ -e "$RT_DIR/proxy.ready.cut" ] || { echo "FAIL: $1: no reply was lost" >&2; failed="$failed $1"; }
}
filter_case() { # filter_case PORT NAME TYPE: add, query, del through a fresh proxy each,
    # cut in the replies of the command itself (the CLI's open sends others first)
    local port=$1 u="redis://127.0.0.1:$1/4/$2" out add=BITFIELD query=BITFIELD
    [ "$3" = cuckoo ] && { add=CF.INSERT; query=CF.MEXISTS; }
    $DEDUP filter create "$u" -t "$3" -n $((4 * n)) 2> "$RT_DIR/err" || { failed="$failed filter-create-$3"; return; }
    start_proxy "$port" $add
    $DEDUP filter add "redis://127.0.0.1:$Q/4/$2" < "$RT_DIR/keys" 2> "$RT_DIR/err" ||
        echo "filter add ($3) through the proxy failed: $(cat "$RT_DIR/err")" >&2
    lost_here "filter add ($3)"
    out=$($DEDUP filter query "$u" -c < "$RT_DIR/keys")
    [ "$out" = $n ] || { echo "FAIL: filter add ($3): $out of $n keys present" >&2; failed="$failed filter-add-$3"; }
    start_proxy "$port" $query
    out=$($DEDUP filter query "redis://127.0.0.1:$Q/4/$2" -c < "$RT_DIR/keys" 2> "$RT_DIR/err")
    [ "$out" = $n ] || { echo "FAIL: filter query ($3) through the proxy: $out of $n present: $(cat "$RT_DIR/err")" >&2
                         failed="$failed filter-query-$3"; }
    lost_here "filter query ($3)"
    [ "$3" = cuckoo ] || return 0
    start_proxy "$port" CF.DEL
    if ! $DEDUP filter del "redis://127.0.0.1:$Q/4/$2" < "$RT_DIR/keys" 2> "$RT_DIR/err"; then
        if grep -q "not in" "$RT_DIR/err"; then
            echo "FAIL: filter del through the proxy called keys added once absent: $(head -c 300 "$RT_DIR/err")" >&2
            failed="$failed filter-del"
        fi
    fi
    lost_here "filter del"
}
filter_case "$P" fb blocked
[ -n "$MOD" ] && filter_case "$M" fc cuckoo
[ -z "$failed" ] || fail "cases that failed:$failed"
echo "lost_all: ok"
