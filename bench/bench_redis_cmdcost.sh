#!/bin/bash
# bench_redis_cmdcost.sh - the server's own time per call of BF.ADD,
# BF.EXISTS, CF.ADD, CF.EXISTS, DEDUP.ADD and DEDUP.EXISTS (approximate, and
# DEDUP.ADD of an EXACT value) for two builds of the module, same run, and
# MEMORY USAGE of DEDUP.RESERVE mem 60000 0.01 100000 (and of the same
# EXACT) after 100,000 distinct items.
#
#   OLD=/path/to/other/build bash bench/bench_redis_cmdcost.sh [build] [ROUNDS=5] [N=400000]
#
# Starts two private redis-servers (127.0.0.1, free ports, persistence off),
# one with each module, reserves BF 0.01 10M NONSCALING and CF 10M in both,
# DEDUP 60000 ms 0.01 100000 (approximate "dd", EXACT "dx"),
# then in ROUNDS interleaved rounds resets INFO commandstats, runs
# redis-benchmark -P 16 -c 4 -n N with random items for each command and
# reads usec_per_call from INFO commandstats.  The server's time per call
# is what the module costs; the client's requests per second on a 2-core
# machine also measure redis-benchmark fighting the server for a core,
# which is why bench_redis.sh's ops/s figures swing by +-30% between runs.
# Prints the medians per build and new/old (below 1: the new build is
# cheaper), and each round's figure in round order (a value filled past its
# plan shows as a trend over the rounds).
set -eu
BUILD=${1:-build}
ROUNDS=${2:-5}
N=${3:-400000}
NEW=$(cd "$BUILD" && pwd)/dedup_redis.so
OLDSO=${OLD:?set OLD to the other build directory}/dedup_redis.so
[ -f "$NEW" ] && [ -f "$OLDSO" ] || { echo "need $NEW and $OLDSO" >&2; exit 1; }
PY=/usr/bin/python3
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PN=$(free_port); PO=$(free_port)
DIR=$(mktemp -d)
trap 'redis-cli -p "$PN" shutdown nosave >/dev/null 2>&1 || true
      redis-cli -p "$PO" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT INT TERM
for pm in "$PN:$NEW" "$PO:$OLDSO"; do
    p=${pm%%:*}; m=${pm#*:}
    redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
        --daemonize yes --logfile "$DIR/$p.log" --loadmodule "$m" >/dev/null
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$p" CF.RESERVE cf 10000000 >/dev/null
    redis-cli -p "$p" BF.RESERVE bf 0.01 10000000 NONSCALING >/dev/null
    redis-cli -p "$p" DEDUP.RESERVE dd 60000 0.01 100000 >/dev/null
    redis-cli -p "$p" DEDUP.RESERVE dx 60000 0.01 100000 EXACT >/dev/null
    redis-cli -p "$p" DEDUP.RESERVE mem 60000 0.01 100000 >/dev/null
    redis-cli -p "$p" DEDUP.RESERVE memx 60000 0.01 100000 EXACT >/dev/null
    for k in mem memx; do
        seq 1 100000 | awk -v k=$k '{printf "DEDUP.ADD %s item:%d\n", k, $1}' |
            redis-cli -p "$p" >/dev/null
    done
done
echo "# redis module, server time per call: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "new: $NEW"
echo "old: $OLDSO"
echo "MEMORY USAGE after 100,000 items: new mem $(redis-cli -p "$PN" memory usage mem) B," \
     "memx (EXACT) $(redis-cli -p "$PN" memory usage memx) B; old mem" \
     "$(redis-cli -p "$PO" memory usage mem) B, memx $(redis-cli -p "$PO" memory usage memx) B"
echo "redis-benchmark -P 16 -c 4 -n $N -r 10000000, $ROUNDS interleaved rounds"
RAW=$DIR/raw
for _ in $(seq "$ROUNDS"); do
    for side in new old; do
        p=$PN; [ $side = old ] && p=$PO
        redis-cli -p "$p" config resetstat >/dev/null
        for c in "CF.ADD cf __rand_int__" "CF.EXISTS cf __rand_int__" \
                 "BF.ADD bf __rand_int__" "BF.EXISTS bf __rand_int__" \
                 "DEDUP.ADD dd __rand_int__" "DEDUP.EXISTS dd __rand_int__"; do
            # shellcheck disable=SC2086
            redis-benchmark -p "$p" -P 16 -c 4 -n "$N" -r 10000000 -q $c >/dev/null 2>&1
        done
        redis-cli -p "$p" info commandstats | tr -d '\r' |
            sed -n 's/^cmdstat_\([bcdefpu]*\.[a-z]*\):.*usec_per_call=\([0-9.]*\).*/\1 \2/p' |
            sed "s/^/$side /" >> "$RAW"
        # EXACT on its own, named dedup.addx in the table
        redis-cli -p "$p" config resetstat >/dev/null
        redis-benchmark -p "$p" -P 16 -c 4 -n "$N" -r 10000000 -q DEDUP.ADD dx __rand_int__ >/dev/null 2>&1
        redis-cli -p "$p" info commandstats | tr -d '\r' |
            sed -n 's/^cmdstat_dedup\.add:.*usec_per_call=\([0-9.]*\).*/dedup.addx \1/p' |
            sed "s/^/$side /" >> "$RAW"
    done
done
echo
echo "| command | new us/call (median) | old us/call (median) | new/old | new runs (round order) | old runs |"
echo "|---|---:|---:|---:|---|---|"
for c in bf.add bf.exists cf.add cf.exists dedup.add dedup.exists dedup.addx; do
    n=$(awk -v c=$c '$1=="new" && $2==c {print $3}' "$RAW" | tr '\n' ' ')
    o=$(awk -v c=$c '$1=="old" && $2==c {print $3}' "$RAW" | tr '\n' ' ')
    mn=$(echo $n | tr ' ' '\n' | awk 'NF' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    mo=$(echo $o | tr ' ' '\n' | awk 'NF' | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    printf '| %s | %s | %s | %.2f | %s| %s|\n' "$(echo $c | tr a-z A-Z)" "$mn" "$mo" \
        "$(awk -v a="$mn" -v b="$mo" 'BEGIN{print a/b}')" "$n" "$o"
done
