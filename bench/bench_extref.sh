#!/usr/bin/env bash
# bench_extref.sh - the external engine with records by reference (regular
# file input, cli/extref.h) against the record-carrying path
# (DEDUP_NO_EXTREF=1) and `LC_ALL=C sort -u -S MEM`, in the same rounds;
# medians of REPS.
#
#   bench/bench_extref.sh FILE [MEM=64M] [REPS=3]
#   env: BUILD=build, TMP=<dir for temporary files and outputs> (default: the
#        directory of FILE; not in the repo), SORT=0 to leave out sort -u,
#        RECORDS=0 to leave out the record-carrying path (then REF=FILE, if
#        set, is what the references' output is compared with)
#
# Per command: wall and CPU seconds and peak RSS (/usr/bin/time), and the
# bytes it moved through read/write/pread/pwrite (rchar + wchar of
# /proc/<pid>/io, children included: the input read, the temporary files
# written and read back, the input read again for the output, the output
# written) as a multiple of the input.  Outputs of the two dedup paths are
# compared with cmp in every round; a difference stops the bench.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
F=${1:?usage: bench_extref.sh FILE [MEM] [REPS]}
MEM=${2:-64M}
REPS=${3:-3}
TMP=${TMP:-$(dirname "$F")}
insize=$(stat -c %s "$F")
echo "input: $F, $insize bytes; -m $MEM; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A WALL CPU RSS IO
run() { # name outfile cmd...: appends this round's figures
  local name=$1 out=$2; shift 2
  local t=$TMP/.xr.time io=$TMP/.xr.io
  OUT=$out IOF=$io /usr/bin/time -f "%e %U %S %M" -o "$t" bash -c '"$@" > "$OUT"; cat /proc/$$/io > "$IOF"' run "$@"
  read -r w u s m < <(tail -1 "$t")
  local rc wc
  rc=$(awk '/^rchar/{print $2}' "$io"); wc=$(awk '/^wchar/{print $2}' "$io")
  WALL[$name]="${WALL[$name]:-} $w"
  CPU[$name]="${CPU[$name]:-} $(echo "$u + $s" | bc)"
  RSS[$name]="${RSS[$name]:-} $((m / 1024))"
  IO[$name]="${IO[$name]:-} $(echo "scale=2; ($rc + $wc) / $insize" | bc)"
}
S="LC_ALL=C sort -u -S $MEM"
R="dedup -m $MEM (references)"
C="dedup -m $MEM (records, DEDUP_NO_EXTREF=1)"
for r in $(seq "$REPS"); do
  [ "${SORT:-1}" = 0 ] || run "$S" "$TMP/xr.sort" env LC_ALL=C sort -u -S "$MEM" -T "$TMP" "$F"
  run "$R" "$TMP/xr.ref" "$BUILD/dedup" -m "$MEM" -T "$TMP" "$F"
  if [ "${RECORDS:-1}" != 0 ]; then
    run "$C" "$TMP/xr.rec" env DEDUP_NO_EXTREF=1 "$BUILD/dedup" -m "$MEM" -T "$TMP" "$F"
    cmp "$TMP/xr.ref" "$TMP/xr.rec" || { echo "round $r: outputs differ" >&2; exit 1; }
  elif [ -n "${REF:-}" ]; then
    cmp "$TMP/xr.ref" "$REF" || { echo "round $r: output differs from $REF" >&2; exit 1; }
  fi
  echo "round $r done: load $(cut -d' ' -f1-3 /proc/loadavg)"
done
med() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "| command | wall s | CPU s | peak RSS MB | IO/input | wall per round |"
echo "|---|---|---|---|---|---|"
for n in "$S" "$R" "$C"; do
  [ -n "${WALL[$n]:-}" ] || continue
  echo "| \`$n\` | $(echo "${WALL[$n]}" | med) | $(echo "${CPU[$n]}" | med) | $(echo "${RSS[$n]}" | med) | $(echo "${IO[$n]}" | med)x |${WALL[$n]} |"
done
if [ "${SORT:-1}" != 0 ]; then
  # ratios per round (the same round's sort), then their median
  for n in "$R" "$C"; do
    [ -n "${WALL[$n]:-}" ] || continue
    read -ra sw <<< "${WALL[$S]}"; read -ra nw <<< "${WALL[$n]}"
    read -ra sc <<< "${CPU[$S]}"; read -ra nc <<< "${CPU[$n]}"
    rw=""; rcpu=""
    for i in "${!sw[@]}"; do
      rw="$rw $(echo "scale=2; ${sw[$i]} / ${nw[$i]}" | bc)"
      rcpu="$rcpu $(echo "scale=2; ${sc[$i]} / ${nc[$i]}" | bc)"
    done
    echo "speed-up of '$n' over sort -u -S $MEM: wall $(echo "$rw" | med)x (rounds:$rw), CPU $(echo "$rcpu" | med)x (rounds:$rcpu)"
  done
fi
rm -f "$TMP/xr.sort" "$TMP/xr.ref" "$TMP/xr.rec" "$TMP/.xr.time" "$TMP/.xr.io"
