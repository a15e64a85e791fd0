#!/usr/bin/env bash
# bench_budgets.sh - exact dedup of one file under the budgets 64M, 256M, 1G
# and the default, against `LC_ALL=C sort -u` and `sort -u -S 64M`, in one
# run, interleaved (bench/ab.sh: each command in turn, ROUNDS rounds, wall,
# user, system seconds and peak RSS of each run, medians).  A larger budget
# must never be slower than a smaller one (issue 37).
#
#   bench/bench_budgets.sh [LINES=5000000] [ROUNDS=3]
#   env: BUILD=build, DATA=/work/bench-data (inputs and outputs, not in the
#        repo), BEFORE=FILE (an earlier build's dedup binary: its -m rows too,
#        for an A/B in the same run), NO_SORT=1 (leave the sort rows out)
#
# The input is bench/gen_urls.c's `LINES` (half of the lines repeats).  The
# outputs are not compared here (sort's order differs); tests/cli/
# exact_budgets.sh checks that every budget gives the same output.  On a
# shared machine the CPU seconds (user + system) say more than the wall.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
DATA=${DATA:-/work/bench-data}
LINES=${1:-5000000}
ROUNDS=${2:-3}
mkdir -p "$DATA"
IN=$DATA/urls-budgets-$LINES.txt
if [ ! -s "$IN" ]; then
    cc -O2 -o "$DATA/gen_urls" "$SRC/bench/gen_urls.c" -lm
    "$DATA/gen_urls" "$LINES" > "$IN"
fi
cmds=()
for m in 64M 256M 1G; do
    [ -n "${BEFORE:-}" ] && cmds+=("$BEFORE -m $m")
    cmds+=("$BUILD/dedup -m $m")
done
cmds+=("$BUILD/dedup")
if [ -z "${NO_SORT:-}" ]; then
    cmds+=("env LC_ALL=C sort -u" "env LC_ALL=C sort -u -S 64M")
fi
DATA=$DATA exec bash "$SRC/bench/ab.sh" "$ROUNDS" "$IN" "" "${cmds[@]}"
