#!/bin/bash
# bench_redis_backend.sh - `dedup --redis` against redis-benchmark's SET on the
# same server, in one run.
#
#   bash bench/bench_redis_backend.sh [build-dir] [keys]     (default build, 1000000)
#   ROUNDS=3 CLUSTER=1 ...
#
# Starts a private redis-server (127.0.0.1, free port, persistence off, this
# project's module loaded), and for ROUNDS (default 3) interleaved rounds:
#   SET     redis-benchmark -t set -P 16 -n N -r N      (one SET per key, 50 clients)
#   keys    dedup --redis URL                  on N distinct keys (one SET NX per key)
#   bitmap  dedup --redis URL --redis-scheme bitmap -n N -p 0.01
#   module  dedup --redis URL --redis-scheme module -n N -p 0.01
#   cuckoo  dedup --redis URL --redis-scheme module --redis-filter cuckoo -n N
# flushing the server between runs; keys/s = N / wall time of the dedup
# process (reading, hashing and writing included).  Ratios are to SET's
# median.  Then the memory per key in Redis of each scheme (INFO used_memory
# before and after; MEMORY USAGE of the bitmap's segments against the blocked
# filter's bits / 8).  With CLUSTER=1 the same on a 3-master cluster
# (redis-benchmark --cluster).  Needs redis-server, redis-benchmark, redis-cli.
set -u
BUILD=$(cd "${1:-build}" && pwd)
N=${2:-1000000}
ROUNDS=${ROUNDS:-3}
DEDUP=$BUILD/dedup
MODULE=$BUILD/dedup_redis.so
[ -x "$DEDUP" ] && [ -f "$MODULE" ] || { echo "build first: $DEDUP, $MODULE" >&2; exit 1; }
. "$(dirname "$0")/../backends/redis/tests/lib.sh"

seq -f 'key:%.0f' 1 "$N" > "$RT_DIR/keys.txt"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }
used() { "$REDIS_CLI" -p "$1" info memory | tr -d '\r' | awk -F: '/^used_memory:/{print $2}'; }

# rate_set PORT [--cluster]: SET requests per second.
rate_set() {
    local p=$1; shift
    "$REDIS_CLI" -p "$p" flushall >/dev/null 2>&1
    redis-benchmark -p "$p" "$@" -t set -P 16 -n "$N" -r "$N" -q 2>/dev/null |
        tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
}
# rate_dedup PORT URL ARGS...: keys per second of one dedup run.
rate_dedup() {
    local p=$1 url=$2; shift 2
    if [ -n "${CLUSTER_PORTS:-}" ] && [[ $url == redis-cluster* ]]; then
        for q in $CLUSTER_PORTS; do "$REDIS_CLI" -p "$q" flushall >/dev/null 2>&1; done
    else
        "$REDIS_CLI" -p "$p" flushall >/dev/null
    fi
    local t0 t1
    t0=$(now)
    "$DEDUP" --redis "$url" "$@" "$RT_DIR/keys.txt" > "$RT_DIR/out.txt" || { echo "dedup failed" >&2; echo 0; return; }
    t1=$(now)
    local got
    got=$(wc -l < "$RT_DIR/out.txt")
    echo "$N $t0 $t1 $got" >> "$RT_DIR/runs.log"
    awk -v n="$N" -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f\n", n / (b - a)}'
}

suite() { # PORT URL LABEL
    local p=$1 url=$2 label=$3
    local S="" K="" B="" M="" C="" extra=()
    [[ $url == redis-cluster* ]] && extra=(--cluster)
    for _ in $(seq "$ROUNDS"); do
        S="$S $(rate_set "$p" "${extra[@]}")"
        K="$K $(rate_dedup "$p" "$url")"
        B="$B $(rate_dedup "$p" "$url" --redis-scheme bitmap -n "$N" -p 0.01)"
        M="$M $(rate_dedup "$p" "$url" --redis-scheme module -n "$N" -p 0.01)"
        C="$C $(rate_dedup "$p" "$url" --redis-scheme module --redis-filter cuckoo -n "$N")"
    done
    local s k b m c
    s=$(echo "$S" | median); k=$(echo "$K" | median); b=$(echo "$B" | median); m=$(echo "$M" | median)
    c=$(echo "$C" | median)
    echo "## $label ($N keys, $ROUNDS rounds, medians)"
    echo
    echo "| what | keys/s (runs) | ratio to SET |"
    echo "|---|---|---|"
    echo "| redis-benchmark -t set -P 16 -n $N -r $N | $s ($S ) | 1.00 |"
    awk -v s="$s" -v k="$k" -v r="$K" 'BEGIN{printf "| dedup --redis (keys) | %s (%s ) | %.2f |\n", k, r, k / s}'
    awk -v s="$s" -v k="$b" -v r="$B" 'BEGIN{printf "| dedup --redis --redis-scheme bitmap -n N -p 1%% | %s (%s ) | %.2f |\n", k, r, k / s}'
    awk -v s="$s" -v k="$m" -v r="$M" 'BEGIN{printf "| dedup --redis --redis-scheme module -n N -p 1%% | %s (%s ) | %.2f |\n", k, r, k / s}'
    awk -v s="$s" -v k="$c" -v r="$C" 'BEGIN{printf "| dedup --redis --redis-scheme module --redis-filter cuckoo -n N | %s (%s ) | %.2f |\n", k, r, k / s}'
    echo
}

memory() { # PORT URL
    local p=$1 url=$2
    echo "## memory in Redis per key ($N distinct keys)"
    echo
    echo "| scheme | bytes/key | detail |"
    echo "|---|---|---|"
    "$REDIS_CLI" -p "$p" flushall >/dev/null
    local u0 u1
    u0=$(used "$p")
    "$DEDUP" --redis "$url" "$RT_DIR/keys.txt" > /dev/null
    u1=$(used "$p")
    awk -v a="$u0" -v b="$u1" -v n="$N" 'BEGIN{printf "| keys (16-byte digest names) | %.1f | INFO used_memory %d -> %d |\n", (b - a) / n, a, b}'
    "$REDIS_CLI" -p "$p" flushall >/dev/null
    "$DEDUP" --redis "$url" --redis-scheme bitmap -n "$N" -p 0.01 --name bm "$RT_DIR/keys.txt" > /dev/null
    local info bits seg
    info=$("$DEDUP" filter info "$url/bm" --json)
    bits=$(echo "$info" | sed 's/.*"bits":\([0-9]*\).*/\1/')
    seg=$(echo "$info" | sed 's/.*"memory":\([0-9]*\).*/\1/')
    awk -v s="$seg" -v b="$bits" -v n="$N" 'BEGIN{printf "| bitmap 1%% | %.3f | MEMORY USAGE of the segments %d B; the blocked filter is %d bits = %d B (%.1f%% over) |\n", s / n, s, b, b / 8, (s / (b / 8) - 1) * 100}'
    "$REDIS_CLI" -p "$p" flushall >/dev/null
    u0=$(used "$p")
    "$DEDUP" --redis "$url" --redis-scheme module -n "$N" -p 0.01 "$RT_DIR/keys.txt" > /dev/null
    u1=$(used "$p")
    awk -v a="$u0" -v b="$u1" -v n="$N" 'BEGIN{printf "| module 1%% (1 shard) | %.3f | INFO used_memory %d -> %d |\n", (b - a) / n, a, b}'
    "$REDIS_CLI" -p "$p" flushall >/dev/null
    u0=$(used "$p")
    "$DEDUP" --redis "$url" --redis-scheme module --redis-filter cuckoo -n "$N" "$RT_DIR/keys.txt" > /dev/null
    u1=$(used "$p")
    awk -v a="$u0" -v b="$u1" -v n="$N" 'BEGIN{printf "| module cuckoo (1 shard) | %.3f | INFO used_memory %d -> %d |\n", (b - a) / n, a, b}'
    echo
}

echo "# dedup --redis benchmark: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(redis-server --version | cut -d' ' -f3)"
echo
P=$(free_port)
start_server "$P" --loadmodule "$MODULE"
suite "$P" "redis://127.0.0.1:$P" "one server"
memory "$P" "redis://127.0.0.1:$P"
stop_server "$P"
if [ "${CLUSTER:-0}" = 1 ]; then
    CLUSTER_PORTS=""
    for n in 1 2 3; do
        q=$(free_port)
        start_server "$q" --cluster-enabled yes --cluster-config-file "$RT_DIR/nodes-$q.conf" --loadmodule "$MODULE"
        CLUSTER_PORTS="$CLUSTER_PORTS $q"
    done
    hosts=""
    for q in $CLUSTER_PORTS; do hosts="$hosts 127.0.0.1:$q"; done
    # shellcheck disable=SC2086
    "$REDIS_CLI" --cluster create $hosts --cluster-yes > "$RT_DIR/create.log" 2>&1 || { cat "$RT_DIR/create.log"; exit 1; }
    set -- $CLUSTER_PORTS
    i=0
    until "$REDIS_CLI" -p "$1" cluster info | grep -q cluster_state:ok; do
        i=$((i + 1)); [ $i -gt 300 ] && { echo "cluster not ok" >&2; exit 1; }; sleep 0.1
    done
    suite "$1" "redis-cluster://127.0.0.1:$1,127.0.0.1:$2" "3-master cluster (no replicas)"
fi
