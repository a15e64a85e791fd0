# TLS helpers for the Redis backend's tests (sourced after lib.sh): a test
# CA with server and client certificates made by openssl(1) at test time,
# and redis-server on a TLS port only.  Needs: openssl.
command -v openssl >/dev/null || { echo "SKIP: openssl(1) not found" >&2; exit 77; }

# make_certs: in $RT_DIR/tls, ca.crt (the test CA), server.{crt,key} for
# IP 127.0.0.1 and DNS localhost, client.{crt,key}, other-ca.crt (a CA that
# signed nothing here), wronghost.{crt,key} (IP 10.9.8.7, DNS
# wrong.example), expired.{crt,key} (valid in 2020 only), all signed by
# the test CA.
make_certs() {
    local d="$RT_DIR/tls" n
    mkdir -p "$d/db"
    (
        cd "$d" || exit 1
        for ca in ca other-ca; do
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$ca.key" -out "$ca.crt" \
                -days 2 -subj "/CN=dedup test $ca" 2>/dev/null || exit 1
        done
        printf '%s\n' '[ca]' 'default_ca=t' '[t]' 'database=db/index' 'new_certs_dir=db' \
            'serial=db/serial' 'default_md=sha256' 'policy=p' 'copy_extensions=copy' \
            'unique_subject=no' '[p]' 'commonName=supplied' > ca.cnf
        : > db/index
        echo 01 > db/serial
        # sign NAME SAN [ca-args...]
        sign() {
            n=$1; san=$2; shift 2
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$n.key" -out "$n.csr" \
                -subj "/CN=$n" -addext "subjectAltName=$san" 2>/dev/null &&
            openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in "$n.csr" \
                -out "$n.crt" -notext "$@" 2>/dev/null
        }
        sign server "IP:127.0.0.1,DNS:localhost" -days 2 &&
        sign client "DNS:client" -days 2 &&
        sign wronghost "IP:10.9.8.7,DNS:wrong.example" -days 2 &&
        sign expired "IP:127.0.0.1,DNS:localhost" -startdate 20200101000000Z -enddate 20200102000000Z
    ) || fail "making the test certificates"
    chmod 600 "$d"/*.key
    TLS_DIR=$d
}

# start_tls_server PORT CERT [ARGS...]: redis-server with TLS only on
# 127.0.0.1:PORT serving $TLS_DIR/CERT.{crt,key} (client certificates not
# required unless ARGS say --tls-auth-clients yes); waits for PING.
start_tls_server() {
    local port=$1 cert=$2 pid i=0
    shift 2
    mkdir -p "$RT_DIR/$port"
    "$REDIS_SERVER" --port 0 --tls-port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --tls-cert-file "$TLS_DIR/$cert.crt" --tls-key-file "$TLS_DIR/$cert.key" \
        --tls-ca-cert-file "$TLS_DIR/ca.crt" --tls-auth-clients no \
        --dir "$RT_DIR/$port" --logfile "$RT_DIR/$port/log" "$@" &
    pid=$!
    RT_PIDS="$RT_PIDS $pid"
    eval "PID_$port=$pid"
    until tls_cli "$port" ping 2>/dev/null | grep -q PONG; do
        i=$((i + 1))
        [ $i -gt 500 ] && fail "TLS redis-server on port $port did not start: $(tail -5 "$RT_DIR/$port/log")"
        sleep 0.02
    done
}

# tls_cli PORT ARGS...: redis-cli over TLS, with the client certificate and
# without checking the server's (an expired one must still answer PING).
tls_cli() {
    local port=$1
    shift
    "$REDIS_CLI" --tls --insecure --cert "$TLS_DIR/client.crt" --key "$TLS_DIR/client.key" \
        -p "$port" ${RT_AUTH:+-a "$RT_AUTH" --no-auth-warning} "$@"
}
