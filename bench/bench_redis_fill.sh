#!/bin/bash
# bench_redis_fill.sh - DEDUP.ADD filled far past its plan, with no expiry:
# for each module given, a private redis-server (127.0.0.1, free port,
# persistence off), DEDUP.RESERVE dd 60000 0.01 100000, then four batches of
# redis-benchmark -P 16 -c 4 -n 400000 -r 100000000 DEDUP.ADD dd __rand_int__
# (about 4x, 8x, 12x and 16x the plan within one 60 s window); prints the
# server's usec_per_call of each batch and MEMORY USAGE at the end.
#
#   bash bench/bench_redis_fill.sh MODULE.so [MODULE.so ...]
set -eu
P=/usr/bin/python3
port="" d=""
trap '[ -n "$port" ] && redis-cli -p "$port" shutdown nosave >/dev/null 2>&1; [ -n "$d" ] && rm -rf "$d"' EXIT INT TERM
echo "# DEDUP.ADD past the plan: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
for so in "$@"; do
  port=$($P -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  d=$(mktemp -d)
  redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no --dir $d --daemonize yes --logfile $d/log --loadmodule $so >/dev/null
  for _ in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $port DEDUP.RESERVE dd 60000 0.01 100000 >/dev/null
  out="$so:"
  for b in 1 2 3 4; do
    redis-cli -p $port config resetstat >/dev/null
    redis-benchmark -p $port -P 16 -c 4 -n 400000 -r 100000000 -q DEDUP.ADD dd __rand_int__ >/dev/null 2>&1
    out="$out $(redis-cli -p $port info commandstats | tr -d '\r' | sed -n 's/^cmdstat_dedup.add:.*usec_per_call=\([0-9.]*\).*/\1/p')"
  done
  echo "$out  mem $(redis-cli -p $port memory usage dd)"
  redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true; rm -rf $d
  port="" d=""
done
