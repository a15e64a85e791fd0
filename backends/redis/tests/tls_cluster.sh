#!/bin/bash
# rediss-cluster:// (issue 40): a Redis Cluster of three masters on TLS
# ports only (cluster bus on TLS too), a test CA made by openssl here.
#  - the keys scheme over TLS through one seed (then bitmap, and module
#    when the project's module is built): every master holds keys (the
#    nodes learnt from CLUSTER SLOTS are reached over TLS and their
#    certificates checked), the output is the input's distinct lines;
#  - 2000 slots resharded after dedup loaded its slot map and before it
#    read its input: the MOVED redirections are followed over TLS (--stats
#    counts them), the output still exact;
#  - a seed whose certificate is for another host: refused naming it.
# Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tls_lib.sh"
: "${DEDUP:?}"
test_seed
make_certs
make_input 10000
MOD=${DEDUP_MODULE:-}
[ -n "$MOD" ] && [ -f "$MOD" ] || MOD=""
PORTS=""
for n in 1 2 3; do
    p=$(free_port)
    start_tls_server "$p" server --cluster-enabled yes --cluster-config-file "$RT_DIR/nodes-$p.conf" \
        --cluster-node-timeout 1000 --tls-cluster yes ${MOD:+--loadmodule "$MOD"}
    PORTS="$PORTS $p"
done
set -- $PORTS
# shellcheck disable=SC2086
tls_cli "$1" --cluster create 127.0.0.1:$1 127.0.0.1:$2 127.0.0.1:$3 --cluster-replicas 0 \
    --cluster-yes > "$RT_DIR/create.log" 2>&1 || fail "TLS cluster create: $(tail -5 "$RT_DIR/create.log")"
i=0
for p in $PORTS; do
    until tls_cli "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "TLS cluster did not reach cluster_state:ok"; sleep 0.1
    done
done
CA=(--tls-cacert "$TLS_DIR/ca.crt")
U="rediss-cluster://127.0.0.1:$1"

"$DEDUP" --redis "$U" "${CA[@]}" --name c1 "$RT_DIR/in.txt" > "$RT_DIR/c1.out" 2> "$RT_DIR/c1.err" ||
    fail "keys over a TLS cluster: $(cat "$RT_DIR/c1.err")"
sort "$RT_DIR/c1.out" | cmp -s - "$RT_DIR/distinct.txt" || fail "TLS cluster: wrong output"
for p in $PORTS; do
    [ "$(tls_cli "$p" dbsize)" -gt 1000 ] || fail "master $p holds $(tls_cli "$p" dbsize) keys"
done
# the filters too (their segments and shards spread over the masters)
for s in bitmap ${MOD:+module}; do
    "$DEDUP" --redis "$U" "${CA[@]}" --name "f$s" --redis-scheme "$s" -n 20000 -p 1e-7 \
        "$RT_DIR/in.txt" > "$RT_DIR/$s.out" 2> "$RT_DIR/$s.err" ||
        fail "$s over a TLS cluster: $(cat "$RT_DIR/$s.err")"
    sort "$RT_DIR/$s.out" | cmp -s - "$RT_DIR/distinct.txt" || fail "$s over a TLS cluster: wrong output"
done

# ---- MOVED over TLS: reshard while dedup waits for its input ----
mkfifo "$RT_DIR/fifo"
"$DEDUP" --redis "$U" "${CA[@]}" --name c2 --stats "$RT_DIR/fifo" > "$RT_DIR/c2.out" 2> "$RT_DIR/c2.err" &
D=$!
exec 9> "$RT_DIR/fifo" # returns once dedup opened its input, after its slot map
from=$(tls_cli "$1" cluster myid)
to=$(tls_cli "$2" cluster myid)
tls_cli "$1" --cluster reshard "127.0.0.1:$1" --cluster-from "$from" --cluster-to "$to" \
    --cluster-slots 2000 --cluster-yes > "$RT_DIR/reshard.log" 2>&1 ||
    fail "reshard: $(tail -5 "$RT_DIR/reshard.log")"
cat "$RT_DIR/in.txt" >&9
exec 9>&-
wait $D || fail "keys over TLS across a reshard: $(cat "$RT_DIR/c2.err")"
sort "$RT_DIR/c2.out" | cmp -s - "$RT_DIR/distinct.txt" || fail "TLS cluster after reshard: wrong output"
moved=$(sed -n 's/^retries: *[0-9]* (\([0-9]*\) MOVED.*/\1/p' "$RT_DIR/c2.err")
[ "${moved:-0}" -gt 0 ] || fail "no MOVED followed: $(cat "$RT_DIR/c2.err")"

# ---- a seed with another host's certificate ----
W=$(free_port)
start_tls_server "$W" wronghost --cluster-enabled yes --cluster-config-file "$RT_DIR/nodes-$W.conf"
"$DEDUP" --redis "rediss-cluster://127.0.0.1:$W" "${CA[@]}" "$RT_DIR/in.txt" > "$RT_DIR/w.out" 2> "$RT_DIR/w.err"
rc=$?
[ $rc = 1 ] || fail "wrong-host seed: exit $rc"
grep -q "127.0.0.1:$W.*mismatch" "$RT_DIR/w.err" || fail "wrong-host seed: $(cat "$RT_DIR/w.err")"
echo "ok: TLS cluster of 3 masters: keys, $moved MOVED followed over TLS, a wrong-host seed refused"
