#!/bin/sh
# run.sh - every benchmark, each comparing dedup with the real alternatives in
# one run (`make bench`).  The default is a quick pass (minutes, small
# inputs); FULL=1 runs the sizes bench/RESULTS.md reports (tens of minutes,
# ~20 GB of data under $DATA_DIR).  Nothing here is a test: the figures are
# for reading, and ratios matter more than seconds on a shared machine.
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
export DATA_DIR=${DATA_DIR:-/tmp/dedup-bench}
mkdir -p "$DATA_DIR"
if [ "${FULL:-0}" = 1 ]; then
    "$BUILD/bench/bench_bloom"
    "$BUILD/bench/bench_filters2" --n 10000000,100000000 --queries 10000000 --huge
    "$BUILD/bench/bench_window"
    N=20000000 bash "$HERE/bench_lines.sh" "$BUILD"
    BUILD=$BUILD DATA=$DATA_DIR bash "$HERE/bench_extsort.sh" 5G 64M
    ROUNDS=5 sh "$HERE/bench_redis.sh" "$BUILD" 1000000
else
    "$BUILD/bench/bench_bloom" --n 1000000 --p 0.01
    "$BUILD/bench/bench_filters2" --n 1000000 --queries 1000000 --scalable-to 1000000
    "$BUILD/bench/bench_window" --live 1000000 --events 5000000
    N=1000000 REPS=1 bash "$HERE/bench_lines.sh" "$BUILD"
    BUILD=$BUILD DATA=$DATA_DIR bash "$HERE/bench_extsort.sh" 256M 16M
    ROUNDS=1 sh "$HERE/bench_redis.sh" "$BUILD" 100000
fi
