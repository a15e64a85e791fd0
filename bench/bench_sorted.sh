#!/usr/bin/env bash
# bench_sorted.sh - the external engine's sorted order (`dedup -m MEM --sort`)
# on input that is already sorted, reverse sorted and shuffled, against
# `LC_ALL=C sort -u -S MEM` on the sorted file, and on input whose lines are
# all equal against sort -u on that file, in one run; median of REPS.
#
#   bench/bench_sorted.sh [LINES=2500000] [MEM=64M] [REPS=3]
#   env: BUILD=build, DATA=/work/bench-data (data, not in the repo),
#        REPEAT=0.5 (gen_urls' repeat fraction)
#
# The URL lines come from bench/gen_urls.c (seed 1); the shuffled copy is
# `shuf` with the unsorted file as its random source, so it repeats.  Every
# output is compared with sort -u's: a run that differs stops the bench.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
DATA=${DATA:-/work/bench-data}
LINES=${1:-2500000}
MEM=${2:-64M}
REPS=${3:-3}
REPEAT=${REPEAT:-0.5}
mkdir -p "$DATA"
cc -O2 -o "$BUILD/gen_urls" "$SRC/bench/gen_urls.c" -lm
B=$DATA/sorted-$LINES-$REPEAT
if [ ! -s "$B.sorted" ]; then
  "$BUILD/gen_urls" "$LINES" -r "$REPEAT" > "$B.txt"
  LC_ALL=C sort "$B.txt" > "$B.sorted"
  LC_ALL=C sort -r "$B.txt" > "$B.rev"
  shuf --random-source="$B.txt" "$B.txt" > "$B.shuf"
fi
if [ ! -s "$B.same" ]; then # all equal: the first line, LINES times
  yes "$(head -1 "$B.txt")" | head -n "$LINES" > "$B.same"
fi
LC_ALL=C sort -u "$B.txt" > "$B.ref"
head -1 "$B.txt" > "$B.sameref"
echo "input: $LINES lines, $(stat -c %s "$B.sorted") bytes, $(wc -l < "$B.ref") distinct; -m $MEM; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A T
one() { # name cmd...: appends the wall seconds to T[name]
  local name=$1; shift
  local t=$DATA/.sorted.time ref=$B.ref
  case $name in *"(all equal)"*) ref=$B.sameref ;; esac
  /usr/bin/time -f "%e" -o "$t" "$@" > "$B.out"
  cmp -s "$ref" "$B.out" || { echo "$name: output differs from sort -u" >&2; exit 1; }
  T[$name]="${T[$name]:-} $(tail -1 "$t")"
}
for r in $(seq "$REPS"); do
  one "LC_ALL=C sort -u -S $MEM (sorted)" env LC_ALL=C sort -u -S "$MEM" "$B.sorted"
  one "dedup -m $MEM --sort (sorted)" "$BUILD/dedup" -m "$MEM" --sort "$B.sorted"
  one "dedup -m $MEM --sort (reverse sorted)" "$BUILD/dedup" -m "$MEM" --sort "$B.rev"
  one "dedup -m $MEM --sort (shuffled)" "$BUILD/dedup" -m "$MEM" --sort "$B.shuf"
  one "LC_ALL=C sort -u -S $MEM (all equal)" env LC_ALL=C sort -u -S "$MEM" "$B.same"
  one "dedup -m $MEM --sort (all equal)" "$BUILD/dedup" -m "$MEM" --sort "$B.same"
done
med() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ref=$(echo "${T["LC_ALL=C sort -u -S $MEM (sorted)"]}" | med)
echo "| command | wall s (median of $REPS) | runs | vs sort -u |"
echo "|---|---|---|---|"
for name in "LC_ALL=C sort -u -S $MEM (sorted)" "dedup -m $MEM --sort (sorted)" \
            "dedup -m $MEM --sort (reverse sorted)" "dedup -m $MEM --sort (shuffled)"; do
  m=$(echo "${T[$name]}" | med)
  printf '| %s | %s | %s | %sx |\n' "$name" "$m" "${T[$name]# }" "$(echo "scale=2; $ref / $m" | bc)"
done
# all equal: against sort -u on the same file
refe=$(echo "${T["LC_ALL=C sort -u -S $MEM (all equal)"]}" | med)
for name in "LC_ALL=C sort -u -S $MEM (all equal)" "dedup -m $MEM --sort (all equal)"; do
  m=$(echo "${T[$name]}" | med)
  printf '| %s | %s | %s | %sx |\n' "$name" "$m" "${T[$name]# }" "$(echo "scale=2; $refe / $m" | bc)"
done
rm -f "$B.out" "$DATA/.sorted.time"
