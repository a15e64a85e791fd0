#!/usr/bin/env bash
# bench_extsort.sh - external (larger than memory) dedup: the extsort engine
# against `LC_ALL=C sort -u -S MEM` and the IO floor, in one run.
#
#   bench/bench_extsort.sh [BYTES=5G] [MEM=64M]
#   env: BUILD=build (CMake build dir), DATA=/work/bench-data (data + temp
#        files, not in the repo), ENGINE=<path of the driver or the dedup CLI>,
#        PAUSE=S (sleep S seconds before each command, see below; default 0)
#
# Generates BYTES of URL-like lines, half of them repeats (bench/gen_urls.c,
# seed 42) unless the file exists, then runs each tool once, output to a file
# in DATA.  For each: wall and CPU seconds and peak RSS (/usr/bin/time), and
# the bytes the tool moved through read/write (rchar + wchar of
# /proc/<pid>/io, children included; the data sits in the page cache, so
# this is the logical IO, not the device IO) as a multiple of the input.
# On a virtual machine whose host takes freed memory back within seconds
# (free page reporting), a command that starts right after another freed
# memory gets cheaper page cache than one that starts on an idle machine:
# PAUSE gives every command the same idle start (as in bench/ab.sh).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
DATA=${DATA:-/work/bench-data}
SIZE=${1:-5G}
MEM=${2:-64M}
ENGINE=${ENGINE:-$BUILD/dedup}   # the CLI; or $BUILD/bench/bench_extsort (same options)
LABEL=${LABEL:-dedup}
mkdir -p "$DATA"
bytes=$(numfmt --from=iec "$SIZE")
cc -O2 -o "$BUILD/gen_urls" "$SRC/bench/gen_urls.c" -lm
F=$DATA/urls-$SIZE.txt
if [ ! -s "$F" ]; then
  echo "generating $F" >&2
  "$BUILD/gen_urls" 100000000000 -r 0.5 -S 42 -b "$bytes" > "$F"
fi
insize=$(stat -c %s "$F")
lines=$(wc -l < "$F")
echo "input: $F, $insize bytes, $lines lines; memory limit $MEM; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); pause ${PAUSE:-0} s"

declare -A WALL CPU RSS IO
N=0
run() { # name outfile cmd...
  local name=$1 out=$2; shift 2
  N=$((N + 1))
  local t=$DATA/.time.$N io=$DATA/.io.$N err=$DATA/.err.$N
  [ "${PAUSE:-0}" != 0 ] && sleep "$PAUSE"
  OUT=$out IOF=$io /usr/bin/time -f "%e %U %S %M" -o "$t" bash -c '"$@" > "$OUT"; cat /proc/$$/io > "$IOF"' run "$@" 2>"$err"
  read -r w u s m < <(tail -1 "$t")
  local rc wc
  rc=$(awk '/^rchar/{print $2}' "$io"); wc=$(awk '/^wchar/{print $2}' "$io")
  local rb wb
  rb=$(awk '/^read_bytes/{print $2}' "$io"); wb=$(awk '/^write_bytes/{print $2}' "$io")
  WALL[$name]=$w; CPU[$name]=$(echo "$u + $s" | bc); RSS[$name]=$((m / 1024))
  IO[$name]=$(echo "scale=2; ($rc + $wc) / $insize" | bc)
  printf '| %-38s | %8s | %8s | %6s MB | %5sx | %5.2f / %5.2f | %s\n' "$name" "$w" "${CPU[$name]}" "${RSS[$name]}" "${IO[$name]}" \
    "$(echo "scale=2; $rb / 1000000000" | bc)" "$(echo "scale=2; $wb / 1000000000" | bc)" \
    "$(tr '\n' ' ' < "$err" | cut -c1-300)"
}
echo "| command | wall s | CPU s | peak RSS | IO/input (rchar+wchar) | device read / write GB | notes"
echo "|---|---|---|---|---|---|---|"
run "cat FILE > /dev/null (read floor)" /dev/null cat "$F"
run "$LABEL -m $MEM" "$DATA/out.first" "$ENGINE" -m "$MEM" -T "$DATA" --stats "$F"
run "$LABEL -m $MEM --sort" "$DATA/out.sorted" "$ENGINE" -m "$MEM" -T "$DATA" --sort --stats "$F"
outsize=$(stat -c %s "$DATA/out.first")
run "dd output size, conv=fdatasync (write floor)" /dev/null dd if=/dev/zero of="$DATA/out.floor" bs=1M \
  count=$(( (outsize + 1048575) / 1048576 )) conv=fdatasync status=none
run "LC_ALL=C sort -u -S $MEM" "$DATA/out.sort" env LC_ALL=C sort -u -S "$MEM" -T "$DATA" "$F"
run "LC_ALL=C sort -u -S $MEM --parallel=2" "$DATA/out.sort2" env LC_ALL=C sort -u -S "$MEM" --parallel=2 -T "$DATA" "$F"
cmp "$DATA/out.sorted" "$DATA/out.sort" && echo "engine --sort output is byte-identical to sort -u"
echo "distinct lines: $(wc -l < "$DATA/out.first") (first-occurrence output) / $(wc -l < "$DATA/out.sort") (sort -u)"
s1=${WALL["LC_ALL=C sort -u -S $MEM"]}
for n in "$LABEL -m $MEM" "$LABEL -m $MEM --sort" "LC_ALL=C sort -u -S $MEM --parallel=2"; do
  echo "speed-up of '$n' over sort -u -S $MEM: wall $(echo "scale=2; $s1 / ${WALL[$n]}" | bc)x," \
    "CPU $(echo "scale=2; ${CPU["LC_ALL=C sort -u -S $MEM"]} / ${CPU[$n]}" | bc)x"
done
rm -f "$DATA/out.floor" "$DATA/out.sort2" "$DATA"/.time.* "$DATA"/.io.* "$DATA"/.err.*
