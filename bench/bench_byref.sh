#!/usr/bin/env bash
# bench_byref.sh - exact dedup of a regular file by reference (the set keeps
# references into the mapped file) against the copying path
# (DEDUP_NO_BYREF=1), the pipe path (`cat FILE | dedup`) and
# `LC_ALL=C sort -u`, in one run, interleaved (each round in a rotated order),
# median of REPS.
#
#   bench/bench_byref.sh [LINES=20000000] [REPS=3]
#   env: BUILD=build, DATA=/work/bench-data (data and outputs, not in the repo),
#        INPUT=FILE (default DATA/urls-LINES.txt, generated when missing),
#        BEFORE=DIR (a build of an earlier commit: adds its by-reference row,
#        "dedup-file-before", for an A/B in the same run),
#        OPTS="-i ..." (key options and output kind for every dedup command:
#        the outputs are then compared among the dedup roads only, and the
#        ratios taken against the copying road), NO_SORT=1 (no sort -u row)
#
# The file is bench/gen_urls.c's `LINES -r 0.5 -s 1 -S 1` (bench_lines.sh's).
# For each command: wall and CPU (user + system) seconds and peak RSS from
# /usr/bin/time (pages of the mapped file that the process touched count
# there), and the peak of RssAnon (anonymous memory only: the set, buffers,
# heap) sampled from /proc/PID/status every 100 ms.  On a shared machine
# the CPU seconds say more than the wall: compare both with sort -u's.  Outputs are compared with sort -u's as
# sets (dedup keeps input order): sorted, they must be identical.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
DATA=${DATA:-/work/bench-data}
LINES=${1:-20000000}
REPS=${2:-3}
DEDUP=$BUILD/dedup
mkdir -p "$DATA"
cc -O2 -o "$BUILD/gen_urls" "$SRC/bench/gen_urls.c" -lm
F=${INPUT:-$DATA/urls-$LINES.txt}
[ -s "$F" ] || "$BUILD/gen_urls" "$LINES" -r 0.5 -s 1 -S 1 > "$F"
echo "input: $F, $(stat -c %s "$F") bytes, $LINES lines; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A WALL CPU RSS ANON
exec {TICK}<> <(:) # a pipe nobody writes to: 'read -t' on it is a sleep without a process
one() { # name cmd... (a shell command line)
  local name=$1 cmd=$2 t=$DATA/.byref.time
  cat "$F" > /dev/null
  /usr/bin/time -f "%e %M %U %S" -o "$t" bash -c "$cmd" > "$DATA/out.$name" &
  local pid=$! max=0 c k v pids="" i=0
  # Sampling must not take the measured command's CPU: the processes are
  # looked up (pgrep) in the first half second and then once a second, the
  # status files are read with builtins, and the wait is a read timeout,
  # not a sleep process.
  while kill -0 "$pid" 2> /dev/null; do
    if [ $i -lt 5 ] || [ -z "${pids// /}" ] || [ $((i % 10)) -eq 0 ]; then
      pids=$(pgrep -P "$pid" 2> /dev/null || true)
      [ -z "$pids" ] || pids="$pids $(pgrep -P "${pids%%[!0-9]*}" 2> /dev/null || true)"
    fi
    i=$((i + 1))
    for c in $pids; do
      { while read -r k v _; do
          [ "$k" = RssAnon: ] || continue
          [ "$v" -le "$max" ] || max=$v
          break
        done < "/proc/$c/status"; } 2> /dev/null || true
    done
    read -r -t 0.1 -u "$TICK" _ || true
  done
  wait "$pid"
  read -r w m u sy < "$t"
  WALL[$name]="${WALL[$name]:-} $w"; CPU[$name]="${CPU[$name]:-} $(echo "$u + $sy" | bc)"; RSS[$name]="${RSS[$name]:-} $((m / 1024))"; ANON[$name]="${ANON[$name]:-} $((max / 1024))"
}
OPTS=${OPTS:-}
[ -n "$OPTS" ] && NO_SORT=1
sortrow=sort-u
[ -n "${NO_SORT:-}" ] && sortrow=
names="dedup-file dedup-copying dedup-pipe $sortrow"
[ -n "${BEFORE:-}" ] && names="dedup-file dedup-file-before dedup-copying dedup-pipe $sortrow"
echo "dedup options: ${OPTS:-(none)}"
declare -A CMD=(
  [dedup-file]="DEDUP_BYREF=1 '$DEDUP' $OPTS '$F'"
  [dedup-file-before]="DEDUP_BYREF=1 '${BEFORE:-}/dedup' $OPTS '$F'"
  [dedup-copying]="DEDUP_NO_BYREF=1 '$DEDUP' $OPTS '$F'"
  [dedup-pipe]="cat '$F' | '$DEDUP' $OPTS"
  [sort-u]="LC_ALL=C sort -u '$F'")
# Round r starts at the r-th command and wraps around, so that no command
# always follows the same one (a command run right after one that freed a
# lot of memory pays for fresh pages: the host took the freed ones back).
order=($names)
for r in $(seq "$REPS"); do
  for i in $(seq 0 $((${#order[@]} - 1))); do
    n=${order[$(((r - 1 + i) % ${#order[@]}))]}
    one "$n" "${CMD[$n]}"
  done
done
[ -n "$sortrow" ] || cp "$DATA/out.dedup-copying" "$DATA/out.sort-u" # the reference: the copying road
[ -n "$sortrow" ] || WALL[sort-u]=${WALL[dedup-copying]} CPU[sort-u]=${CPU[dedup-copying]}
[ -n "$sortrow" ] && { LC_ALL=C sort "$DATA/out.dedup-file" | cmp -s - "$DATA/out.sort-u" || { echo "dedup's keys differ from sort -u's" >&2; exit 1; }; }
[ -z "${BEFORE:-}" ] || cmp -s "$DATA/out.dedup-file" "$DATA/out.dedup-file-before" ||
  { echo "the by-reference outputs before and after differ" >&2; exit 1; }
cmp -s "$DATA/out.dedup-file" "$DATA/out.dedup-copying" && cmp -s "$DATA/out.dedup-file" "$DATA/out.dedup-pipe" ||
  { echo "the three dedup paths differ" >&2; exit 1; }
med() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
sw=$(echo "${WALL[sort-u]}" | med)
sc=$(echo "${CPU[sort-u]}" | med)
echo "distinct: $(wc -l < "$DATA/out.sort-u")"
cw=$(echo "${WALL[dedup-copying]}" | med)
echo "| command | wall s (median of $REPS) | runs | sort -u / this | copying / this | CPU s | sort -u / this (CPU) | peak RSS MB (/usr/bin/time) | peak RssAnon MB (sampled) |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $names; do
  w=$(echo "${WALL[$n]}" | med)
  c=$(echo "${CPU[$n]}" | med)
  printf '| %s | %s | %s | %sx | %sx | %s | %sx | %s | %s |\n' "$n" "$w" "${WALL[$n]# }" "$(echo "scale=2; $sw / $w" | bc)" \
    "$(echo "scale=2; $cw / $w" | bc)" \
    "$c" "$(echo "scale=2; $sc / $c" | bc)" \
    "$(echo "${RSS[$n]}" | med)" "$(echo "${ANON[$n]}" | med)"
done
rm -f "$DATA"/out.dedup-* "$DATA/out.sort-u" "$DATA/.byref.time"
