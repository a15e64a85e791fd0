#!/bin/bash
# bench_window_ab.sh - bench_window (this tree's source) linked against two
# builds of libdedup.a, run in interleaved rounds on the same machine, with
# the median CPU-s of each and new/old.
#
#   OLD=/path/to/other/build bash bench/bench_window_ab.sh [build] [ROUNDS=3] [bench_window options]
#
# e.g. the approximate window 10x past its plan:
#   OLD=/work/base-build bash bench/bench_window_ab.sh build 3 \
#       --live 1000000 --plan 100000 --events 20000000 --approx-only
# Both programs are compiled here from bench/bench_window.c with the same
# flags (it uses only the public API), so only the library differs.
set -eu
BUILD=${1:-build}
ROUNDS=${2:-3}
shift 2 || true
NEWLIB=$(cd "$BUILD" && pwd)/libdedup.a
OLDLIB=${OLD:?set OLD to the other build directory}/libdedup.a
[ -f "$NEWLIB" ] && [ -f "$OLDLIB" ] || { echo "need $NEWLIB and $OLDLIB" >&2; exit 1; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT INT TERM
for side in new old; do
    lib=$NEWLIB; [ $side = old ] && lib=$OLDLIB
    cc -std=c11 -O2 -I"$SRC/include" -I"$SRC/src/core" -I"$SRC/bench" \
        "$SRC/bench/bench_window.c" "$lib" -lxxhash -llz4 -lpthread -lm -o "$DIR/bw_$side"
done
echo "# bench_window A/B: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "new: $NEWLIB"
echo "old: $OLDLIB"
echo "options: $*"
for r in $(seq "$ROUNDS"); do
    for side in new old; do
        out=$("$DIR/bw_$side" "$@")
        echo "round $r $side: $(echo "$out" | grep -E '^approx \(batch\)|^dedup window approx' | head -1)"
        cpu=$(echo "$out" | sed -n 's/^approx (batch): \([0-9.]*\) CPU-s.*/\1/p;s/^dedup window approx (batch) *\([0-9.]*\).*/\1/p' | head -1)
        echo "$side $cpu" >> "$DIR/raw"
    done
done
n=$(awk '$1=="new" {print $2}' "$DIR/raw" | sort -g | tr '\n' ' ')
o=$(awk '$1=="old" {print $2}' "$DIR/raw" | sort -g | tr '\n' ' ')
mn=$(echo $n | awk '{print $(int((NF+1)/2))}')
mo=$(echo $o | awk '{print $(int((NF+1)/2))}')
echo "approximate window CPU-s, median of $ROUNDS: new $mn ($n) old $mo ($o) new/old $(awk -v a="$mn" -v b="$mo" 'BEGIN{printf "%.2f", a/b}')"
