#!/bin/sh
# bench_redis.sh - the Redis module against plain SET, in one run.
#
#   sh bench/bench_redis.sh [build-dir] [requests]
#
# Starts a private redis-server (127.0.0.1, free port, persistence off) with
# build/dedup_redis.so, then:
#  1. throughput: redis-benchmark -P 16 with random items (__rand_int__ over
#     10M values) for SET, BF.ADD, BF.EXISTS, CF.ADD, CF.EXISTS, in $ROUNDS
#     (default 3) interleaved rounds, median per command,
#     against a Bloom filter reserved for 10M items at 1% (NONSCALING) and a
#     cuckoo filter reserved for 10M items (module defaults: bucket size 4,
#     12-bit fingerprints); ratios are to SET's median;
#  2. memory and rate: fresh filters reserved for 10M items get exactly 10M
#     distinct items (BF.MADD / CF.INSERT, pipelined), then BF.INFO/CF.INFO
#     Size gives bytes per item and 1M never-added items give the measured
#     false-positive rate.
# Needs redis-server, redis-benchmark and Debian's python3-redis.
#
# A/B against another build of the module, same run:
#   OLD=/path/to/other/build ROUNDS=3 sh bench/bench_redis.sh build
# runs bench/bench_redis_ab.py instead: per-key MEMORY USAGE, the default
# scaling BF reserved for 10M (bits/item, FPR), bulk BF.MADD / CF.INSERT of
# 10M items (redis-cli --pipe) and redis-benchmark ops/s, both modules in
# interleaved rounds, medians and ratios.
set -eu
BUILD=${1:-build}
N=${2:-2000000}
MODULE=$(cd "$BUILD" && pwd)/dedup_redis.so
[ -f "$MODULE" ] || { echo "no $MODULE: build first (make)" >&2; exit 1; }
PY=/usr/bin/python3
if [ -n "${OLD:-}" ]; then
    echo "# redis module A/B: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(redis-server --version | cut -d' ' -f3)"
    echo "new: $MODULE"
    echo "old: $OLD/dedup_redis.so"
    exec $PY "$(dirname "$0")/bench_redis_ab.py" "$MODULE" "$OLD/dedup_redis.so" "${ROUNDS:-3}" "${ITEMS:-10000000}"
fi
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d)
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT INT TERM
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
    --daemonize no --logfile "$DIR/redis.log" --loadmodule "$MODULE" &
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

echo "# redis module benchmark: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(redis-server --version | cut -d' ' -f3)"
echo "requests per test: $N, pipeline 16, 50 clients, items __rand_int__ over 10M values"
echo
redis-cli -p "$PORT" BF.RESERVE bf 0.01 10000000 NONSCALING >/dev/null
redis-cli -p "$PORT" CF.RESERVE cf 10000000 >/dev/null

rate() { # command... -> requests per second
    redis-benchmark -p "$PORT" -P 16 -n "$N" -r 10000000 -q "$@" 2>/dev/null |
        tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
}
# Interleaved rounds, median per command: the machine is shared, so a single
# run of each says more about the neighbours than about the commands.
ROUNDS=${ROUNDS:-3}
SET=""; BFADD=""; BFEX=""; CFADD=""; CFEX=""
for _ in $(seq "$ROUNDS"); do
    SET="$SET $(rate SET key:__rand_int__ xxx)"
    BFADD="$BFADD $(rate BF.ADD bf __rand_int__)"
    BFEX="$BFEX $(rate BF.EXISTS bf __rand_int__)"
    CFADD="$CFADD $(rate CF.ADD cf __rand_int__)"
    CFEX="$CFEX $(rate CF.EXISTS cf __rand_int__)"
done
redis-cli -p "$PORT" flushall >/dev/null

$PY - "$PORT" "$SET" "$BFADD" "$BFEX" "$CFADD" "$CFEX" <<'EOF'
import statistics, sys, time
import redis
port = int(sys.argv[1])
runs = [[float(x) for x in a.split()] for a in sys.argv[2:]]
med = [statistics.median(x) for x in runs]
print("| command | ops/s (median of %d interleaved runs) | runs | vs SET |" % len(runs[0]))
print("|---|---:|---|---:|")
for name, m, x in zip(("SET key:__rand_int__", "BF.ADD", "BF.EXISTS", "CF.ADD", "CF.EXISTS"),
                      med, runs):
    print("| %s | %.0f | %s | %.2fx |" % (name, m, " ".join("%.0f" % v for v in x), m / med[0]))
print()

r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=600)
n, chunk = 10_000_000, 10_000
r.execute_command("BF.RESERVE", "bf", 0.01, n, "NONSCALING")
r.execute_command("CF.RESERVE", "cf", n, "EXPANSION", 0)
t0 = time.time()
bad_bf = bad_cf = 0
for lo in range(0, n, chunk):
    items = [b"item:%d" % i for i in range(lo, lo + chunk)]
    out = r.execute_command("BF.MADD", "bf", *items)
    bad_bf += sum(1 for x in out if not isinstance(x, int))
    out = r.execute_command("CF.INSERT", "cf", "ITEMS", *items)
    bad_cf += sum(1 for x in out if x != 1)
fill = time.time() - t0
fresh = 1_000_000
fp_bf = fp_cf = 0
for lo in range(0, fresh, chunk):
    items = [b"fresh:%d" % i for i in range(lo, lo + chunk)]
    fp_bf += sum(r.execute_command("BF.MEXISTS", "bf", *items))
    fp_cf += sum(r.execute_command("CF.MEXISTS", "cf", *items))
bi = dict(zip([x.decode() for x in r.execute_command("BF.INFO", "bf")[::2]],
              r.execute_command("BF.INFO", "bf")[1::2]))
ci = dict(zip([x.decode() for x in r.execute_command("CF.INFO", "cf")[::2]],
              r.execute_command("CF.INFO", "cf")[1::2]))
print("Filled 10M distinct items into each filter in %.0f s (BF.MADD / CF.INSERT, 10k per call);"
      " refused: BF %d, CF %d." % (fill, bad_bf, bad_cf))
print()
print("| filter (10M items) | Size (bytes) | bits/item | measured FPR (1M fresh items) | target |")
print("|---|---:|---:|---:|---|")
print("| BF NONSCALING, error 0.01 | %d | %.2f | %.4f%% | <= 9.7 bits/item, FPR ~1%% |"
      % (bi["Size"], bi["Size"] * 8 / n, 100.0 * fp_bf / fresh))
print("| CF defaults (b=4, f=12), EXPANSION 0 | %d | %.2f | %.4f%% | <= 12.8 bits/item |"
      % (ci["Size"], ci["Size"] * 8 / n, 100.0 * fp_cf / fresh))
print()
print("MEMORY USAGE bf: %d bytes, cf: %d bytes" % (r.memory_usage("bf"), r.memory_usage("cf")))
EOF
