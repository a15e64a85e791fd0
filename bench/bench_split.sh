#!/usr/bin/env bash
# bench_split.sh - `dedup split -N 16` against `cat FILE > OUT` on the same
# file in the same run, alternating, median of ROUNDS, and the ratio (the
# target: split within 1.5x of cat: it reads, hashes each key once and
# writes, and must not be the slow step of a cluster job).  Then the ring
# (--nodes with 16 names) the same way, and `split -N 16 < FILE` (standard
# input: the feeder's road, which pipes and --filter take; a named regular
# file is mapped and split on both threads, cli/split_file.c).  Besides
# wall time, user + system seconds: less sensitive to a loaded machine.
#
#   bench/bench_split.sh [LINES=20000000] [ROUNDS=3]
#
# DATA (default /tmp/dedup-bench-split) holds the generated URL file
# (bench/gen_urls.c, 50% repeats, ~1.7 GB for 20M lines) and the outputs; the
# input is read into the page cache before each command, and the previous
# command's outputs are removed first, so every command starts alike.
# Wall, user and system seconds and peak RSS come from /usr/bin/time.
# Then the price of each step on one thread (build/bench/bench_split_stages:
# line ends, + XXH3-128, + jump hash, + copy into 16 buffers, + writes), in
# the same rounds, against cat's CPU seconds: the floor of split's CPU work.
# BIN=path/to/dedup (default build/dedup), STAGES=path/to/bench_split_stages
# (default beside it in build/bench/; skipped when absent), BASE=another
# dedup to time `split -N 16 FILE` of in the same rounds (the "before" of
# an A/B), IN=an existing input file instead of the generated one.
set -euo pipefail
LINES=${1:-20000000}
ROUNDS=${2:-3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$SRC/build/dedup}
DATA=${DATA:-/tmp/dedup-bench-split}
mkdir -p "$DATA"
IN=${IN:-$DATA/urls-$LINES.txt}
if [ ! -s "$IN" ]; then
    cc -O2 -o "$DATA/gen_urls" "$SRC/bench/gen_urls.c" -lm
    "$DATA/gen_urls" "$LINES" > "$IN"
fi
STAGES=${STAGES:-$(dirname "$BIN")/bench/bench_split_stages}
NODES=$(seq -s, -f 'node%02g' 0 15)
TIMES=$(mktemp)
trap 'rm -f "$TIMES"; rm -rf "$DATA/out"' EXIT
run() { # run NAME CMD...: one timed run, outputs in $DATA/out
    local name=$1; shift
    rm -rf "$DATA/out"; mkdir "$DATA/out"
    cat "$IN" > /dev/null
    /usr/bin/time -f "$name %e %U %S %M" -a -o "$TIMES" "$@"
}
for ((i = 1; i <= ROUNDS; i++)); do
    run cat sh -c "cat '$IN' > '$DATA/out/all'"
    run split "$BIN" split -N 16 -o "$DATA/out/part-%s" "$IN"
    run ring "$BIN" split --nodes "$NODES" -o "$DATA/out/part-%s" "$IN"
    run stdin sh -c "'$BIN' split -N 16 -o '$DATA/out/part-%s' < '$IN'"
    if [ -n "${BASE:-}" ]; then run base "$BASE" split -N 16 -o "$DATA/out/part-%s" "$IN"; fi
done
# the last run's parts hold every line once
got=$(cat "$DATA"/out/part-* | wc -l)
[ "$got" -eq "$(wc -l < "$IN")" ] || { echo "bench_split: the parts hold $got lines" >&2; exit 1; }
echo "input: $IN ($(stat -c %s "$IN") bytes, $LINES lines)"
echo "runs (name wall user sys maxrss_kb):"
cat "$TIMES"
awk '
    function median(list,   m, v, i, j, t) {
        m = split(substr(list, 2), v, " ")
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return v[int((m + 1) / 2)]
    }
    { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " ($3 + $4) }
    END {
        for (k in wall) { med[k] = median(wall[k]); mcpu[k] = median(cpu[k]) }
        printf "median wall: cat %.2f s, split -N 16 %.2f s, split --nodes (16) %.2f s, split -N 16 < FILE %.2f s\n", med["cat"], med["split"], med["ring"], med["stdin"]
        printf "ratio to cat: split -N 16 %.2fx, split --nodes %.2fx, split -N 16 < FILE %.2fx (target <= 1.5x)\n", med["split"] / med["cat"], med["ring"] / med["cat"], med["stdin"] / med["cat"]
        printf "median user+sys: cat %.2f s, split -N 16 %.2f s, split --nodes %.2f s, split -N 16 < FILE %.2f s\n", mcpu["cat"], mcpu["split"], mcpu["ring"], mcpu["stdin"]
        printf "CPU ratio to cat: split -N 16 %.2fx, split --nodes %.2fx, split -N 16 < FILE %.2fx\n", mcpu["split"] / mcpu["cat"], mcpu["ring"] / mcpu["cat"], mcpu["stdin"] / mcpu["cat"]
        if ("base" in med)
            printf "BASE split -N 16: wall %.2f s (%.2fx of cat), user+sys %.2f s (%.2fx of cat)\n", med["base"], med["base"] / med["cat"], mcpu["base"], mcpu["base"] / mcpu["cat"]
    }' "$TIMES"
echo "load: $(uptime)"
[ -x "$STAGES" ] || exit 0
: > "$TIMES"
for ((i = 1; i <= ROUNDS; i++)); do
    run cat sh -c "cat '$IN' > '$DATA/out/all'"
    for st in lines hash jump copy; do run "$st" "$STAGES" "$st" "$IN" > /dev/null; done
    run write "$STAGES" write "$IN" "$DATA/out" > /dev/null
done
echo "one thread, each stage adds a step (name wall user sys maxrss_kb):"
cat "$TIMES"
awk '
    function median(list,   m, v, i, j, t) {
        m = split(substr(list, 2), v, " ")
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        return v[int((m + 1) / 2)]
    }
    { cpu[$1] = cpu[$1] " " ($3 + $4) }
    END {
        for (k in cpu) c[k] = median(cpu[k])
        printf "median user+sys: cat %.2f s; line ends %.2f, + XXH3-128 %.2f, + jump %.2f, + copy %.2f, + write %.2f s\n", c["cat"], c["lines"], c["hash"], c["jump"], c["copy"], c["write"]
        printf "steps: line ends %.2f, XXH3-128 %.2f, jump %.2f, copy %.2f, write %.2f s; all / cat = %.2fx of CPU\n", c["lines"], c["hash"] - c["lines"], c["jump"] - c["hash"], c["copy"] - c["jump"], c["write"] - c["copy"], c["write"] / c["cat"]
    }' "$TIMES"
