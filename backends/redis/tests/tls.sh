#!/bin/bash
# rediss:// (issue 40): a test CA and certificates made by openssl at test
# time, redis-server on a TLS port only (--port 0).
#  - every scheme (keys, bitmap; module with the project's module loaded),
#    a rediss:// tier and `dedup filter` over TLS give the plain run's answer (a second run
#    outputs nothing: the set lives in the server);
#  - the server's certificate from another CA, for another host, or
#    expired, and a server requiring client certificates given none, each
#    fail with a message naming 127.0.0.1:PORT and why, exit 1, nothing
#    output; --tls-insecure accepts the wrong host with a warning; a client
#    certificate is accepted where one is required.
# Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tls_lib.sh"
: "${DEDUP:?}"
test_seed
make_certs
make_input 20000
MOD=${DEDUP_MODULE:-}
[ -n "$MOD" ] && [ -f "$MOD" ] || MOD=""
P=$(free_port)
start_tls_server "$P" server ${MOD:+--loadmodule "$MOD"}
CA=(--tls-cacert "$TLS_DIR/ca.crt")

# ---- each scheme over TLS ----
schemes="keys bitmap"
[ -n "$MOD" ] && schemes="$schemes module" || echo "note: no module: module scheme not run" >&2
for s in $schemes; do
    extra=()
    [ "$s" != keys ] && extra=(-n 40000 -p 1e-7)
    "$DEDUP" --redis "rediss://127.0.0.1:$P" "${CA[@]}" --redis-scheme "$s" --name "t$s" \
        "${extra[@]}" "$RT_DIR/in.txt" > "$RT_DIR/$s.out" 2> "$RT_DIR/$s.err" ||
        fail "$s over TLS: exit $?: $(cat "$RT_DIR/$s.err")"
    sort "$RT_DIR/$s.out" | cmp -s - "$RT_DIR/distinct.txt" ||
        fail "$s over TLS: the output is not the input's distinct lines"
    "$DEDUP" --redis "rediss://127.0.0.1:$P" "${CA[@]}" --redis-scheme "$s" --name "t$s" \
        "$RT_DIR/in.txt" > "$RT_DIR/$s.again" || fail "$s over TLS, second run"
    [ ! -s "$RT_DIR/$s.again" ] || fail "$s over TLS: a second run output $(wc -l < "$RT_DIR/$s.again") lines"
    # the keys are in the server (read back over TLS by redis-cli)
    [ "$(tls_cli "$P" --scan --pattern "t$s:*" | head -1)" ] || fail "$s: no key t$s:* in the server"
done

# ---- a rediss:// tier (its keys reserved, then committed) ----
"$DEDUP" --tier exact --tier "rediss://127.0.0.1:$P,name=tier" "${CA[@]}" "$RT_DIR/in.txt" \
    > "$RT_DIR/tier.out" 2> "$RT_DIR/tier.err" || fail "rediss:// tier: $(cat "$RT_DIR/tier.err")"
sort "$RT_DIR/tier.out" | cmp -s - "$RT_DIR/distinct.txt" || fail "rediss:// tier: wrong output"
[ "$(tls_cli "$P" --scan --pattern 'tier:*' | wc -l)" -gt 1000 ] || fail "rediss:// tier: no keys in the server"

# ---- dedup filter over TLS ----
F="rediss://127.0.0.1:$P/tf"
"$DEDUP" filter create "$F" "${CA[@]}" -n 10000 -p 0.001 || fail "filter create over TLS"
printf 'a\nb\n' | "$DEDUP" filter add "$F" "${CA[@]}" - || fail "filter add over TLS"
got=$(printf 'a\nc\nb\n' | "$DEDUP" filter query "$F" "${CA[@]}" -)
[ "$got" = "$(printf 'a\nb')" ] || fail "filter query over TLS answered '$got'"

# ---- certificates refused: exit 1, host:port and why named, nothing out ----
# expect_refused NAME PORT PATTERN DEDUP-ARGS...
expect_refused() {
    local name=$1 port=$2 pat=$3 rc
    shift 3
    "$DEDUP" --redis "rediss://127.0.0.1:$port" --name refused "$@" "$RT_DIR/in.txt" \
        > "$RT_DIR/r.out" 2> "$RT_DIR/r.err"
    rc=$?
    [ $rc = 1 ] || fail "$name: exit $rc, 1 expected: $(cat "$RT_DIR/r.err")"
    [ ! -s "$RT_DIR/r.out" ] || fail "$name: records output"
    grep -q "127.0.0.1:$port" "$RT_DIR/r.err" || fail "$name: host:port not named: $(cat "$RT_DIR/r.err")"
    grep -Eqi "$pat" "$RT_DIR/r.err" || fail "$name: '$pat' not said: $(cat "$RT_DIR/r.err")"
}
expect_refused "another CA" "$P" "certificate.*(self-signed|issuer)" --tls-cacert "$TLS_DIR/other-ca.crt"
W=$(free_port)
start_tls_server "$W" wronghost
expect_refused "wrong host" "$W" "certificate.*(hostname|IP address) mismatch" "${CA[@]}"
E=$(free_port)
start_tls_server "$E" expired
expect_refused "expired" "$E" "certificate.*expired" "${CA[@]}"
C=$(free_port)
start_tls_server "$C" server --tls-auth-clients yes
expect_refused "no client certificate" "$C" "certificate required" "${CA[@]}"
"$DEDUP" --redis "rediss://127.0.0.1:$C" "${CA[@]}" --tls-cert "$TLS_DIR/client.crt" \
    --tls-key "$TLS_DIR/client.key" "$RT_DIR/in.txt" > "$RT_DIR/c.out" ||
    fail "client certificate given: refused"
sort "$RT_DIR/c.out" | cmp -s - "$RT_DIR/distinct.txt" || fail "client certificate: wrong output"
# a plain-TCP client at a TLS port: an error, not a hang
"$DEDUP" --redis "redis://127.0.0.1:$P" --redis-retries 0 "$RT_DIR/in.txt" > /dev/null 2>&1 &&
    fail "plain TCP to a TLS port succeeded"

# ---- a CA file that cannot be read: a usage error naming it ----
"$DEDUP" --redis "rediss://127.0.0.1:$P" --tls-cacert "$RT_DIR/no-such-ca.pem" "$RT_DIR/in.txt" \
    > "$RT_DIR/n.out" 2> "$RT_DIR/n.err"
rc=$?
[ $rc = 2 ] || fail "unreadable CA file: exit $rc, 2 expected"
grep -q "no-such-ca.pem" "$RT_DIR/n.err" || fail "unreadable CA file not named: $(cat "$RT_DIR/n.err")"

# ---- --tls-insecure: the wrong host accepted, with a warning ----
"$DEDUP" --redis "rediss://127.0.0.1:$W" --tls-insecure "$RT_DIR/in.txt" > "$RT_DIR/i.out" \
    2> "$RT_DIR/i.err" || fail "--tls-insecure: refused: $(cat "$RT_DIR/i.err")"
grep -q "tls-insecure" "$RT_DIR/i.err" || fail "--tls-insecure: no warning"
sort "$RT_DIR/i.out" | cmp -s - "$RT_DIR/distinct.txt" || fail "--tls-insecure: wrong output"
echo "ok: TLS: schemes ($schemes), filter, four refusals, client certificate, --tls-insecure"
