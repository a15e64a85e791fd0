#!/bin/bash
# bench_redis_tls.sh - dedup --redis over TLS (rediss://) against plain TCP
# on the same server, in one run (issue 40: at most 1.5x the time).
#
#   bash bench/bench_redis_tls.sh [build-dir] [records] [rounds]
#
# One private redis-server (127.0.0.1, free ports, persistence off, the
# project's module loaded) listens on a plain port and a TLS port at once
# (a test CA and server certificate made by openssl here).  Input: N
# records (default 1M) of which half are distinct.  Each round runs, for
# the keys and module schemes, a plain and a TLS run on fresh names (so
# every run does the same work); rounds interleave, medians are reported
# with the ratio TLS / plain.
set -eu
BUILD=$(cd "${1:-build}" && pwd)
N=${2:-1000000}
ROUNDS=${3:-3}
D=$BUILD/dedup
MODULE=$BUILD/dedup_redis.so
[ -x "$D" ] && [ -f "$MODULE" ] || { echo "build first: no $D or $MODULE" >&2; exit 1; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DIR=$(mktemp -d)
P=$(port)
T=$(port)
trap 'redis-cli -p "$P" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT INT TERM
cd "$DIR"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
    -out ca.crt -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout s.key -out s.csr \
    -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > ext
openssl x509 -req -in s.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile ext \
    -out s.crt 2>/dev/null
redis-server --port "$P" --tls-port "$T" --bind 127.0.0.1 --save '' --appendonly no \
    --tls-cert-file s.crt --tls-key-file s.key --tls-ca-cert-file ca.crt --tls-auth-clients no \
    --loadmodule "$MODULE" --dir "$DIR" --logfile "$DIR/log" --daemonize yes
i=0
until redis-cli -p "$P" ping 2>/dev/null | grep -q PONG; do
    i=$((i + 1)); [ $i -gt 200 ] && { echo "redis-server did not start" >&2; exit 1; }; sleep 0.05
done
python3 -c "
import random
r = random.Random(7)
n = $N
with open('in.txt', 'w') as f:
    for _ in range(n):
        f.write('https://example.com/item/%d\n' % r.randrange(n // 2))"
echo "# dedup --redis, TLS vs plain TCP, same server: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, redis $(redis-server --version | cut -d' ' -f3 | cut -d= -f2), $N records, $ROUNDS rounds"
run() { # run SCHEME URL NAME: seconds
    local s=$1 u=$2 name=$3 t0 t1 extra=()
    [ "$s" = module ] && extra=(-n "$N" -p 0.001)
    t0=$(date +%s.%N)
    "$D" --redis "$u" --tls-cacert ca.crt --redis-scheme "$s" --name "$name" --no-journal \
        "${extra[@]}" in.txt > out.txt
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}'
}
for s in keys module; do
    : > "times.$s.plain"; : > "times.$s.tls"
done
for r in $(seq 1 "$ROUNDS"); do
    for s in keys module; do
        run "$s" "redis://127.0.0.1:$P" "p$s$r" >> "times.$s.plain"
        run "$s" "rediss://127.0.0.1:$T" "t$s$r" >> "times.$s.tls"
        redis-cli -p "$P" flushall > /dev/null
    done
done
med() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-8s %10s %10s %8s   (runs: plain | tls)\n' scheme plain_s tls_s ratio
for s in keys module; do
    p=$(med "times.$s.plain"); t=$(med "times.$s.tls")
    printf '%-8s %10s %10s %8s   (%s | %s)\n' "$s" "$p" "$t" "$(echo "$p $t" | awk '{printf "%.2fx", $2 / $1}')" \
        "$(tr '\n' ' ' < "times.$s.plain")" "$(tr '\n' ' ' < "times.$s.tls")"
done
