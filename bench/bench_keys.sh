#!/usr/bin/env bash
# bench_keys.sh - keys the data carries (issue 36), same run, alternating,
# median of ROUNDS, ratios: on a generated click log of RECORDS records
# (user, ad, ts and a quoted free-text field holding commas) as CSV and as
# JSON Lines:
#   dedup --csv --header -f user,ad   vs  mlr --icsv --ocsv head -n 1 -g user,ad
#   dedup --json .user,.ad            vs  mlr --ijsonl --ojsonl head -n 1 -g user,ad
#   dedup -d , --header -f 1,2 (CSV without quotes)  vs  awk -F, '!s[$1 FS $2]++'
#   the composite key                 vs  a whole-line exact run on the same file
#   (and DEDUP_NO_BYREF=1 whole line: the same reading road as the key's)
# Outputs are compared (mlr writes JSON with its own spacing: compared as
# the set of user,ad pairs kept; CSV byte for byte).
#
#   bench/bench_keys.sh [RECORDS=20000000] [ROUNDS=3]
#
# BIN=path/to/dedup (default build/dedup); DATA (default /tmp/dedup-bench-keys).
# Miller is Debian's `miller` (skipped with a note when absent).
set -euo pipefail
RECORDS=${1:-20000000}
ROUNDS=${2:-3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$SRC/build/dedup}
DATA=${DATA:-/tmp/dedup-bench-keys}
mkdir -p "$DATA"
CSV=$DATA/clicks.csv JSONL=$DATA/clicks.jsonl PLAIN=$DATA/clicks_plain.csv
if [ ! -s "$CSV" ] || [ "$(($(wc -l < "$CSV") - 1))" != "$RECORDS" ]; then
    python3 - "$RECORDS" "$CSV" "$JSONL" "$PLAIN" <<'PY'
import random, sys
n = int(sys.argv[1]); r = random.Random(36)
with open(sys.argv[2], "w") as c, open(sys.argv[3], "w") as j, open(sys.argv[4], "w") as p:
    c.write("user,ad,ts,text\n"); p.write("user,ad,ts,text\n")
    for i in range(n):
        u, a, t, w = r.randrange(n // 10 + 1), r.randrange(50), 1700000000 + i, r.randrange(1000)
        c.write('%d,ad%d,%d,"free text, with commas %d"\n' % (u, a, t, w))
        j.write('{"user":%d,"ad":"ad%d","ts":%d,"text":"free text, with commas %d"}\n' % (u, a, t, w))
        p.write('%d,ad%d,%d,free text with no commas %d\n' % (u, a, t, w))
PY
fi
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A T C
run() { # run NAME OUT CMD...: appends the wall and the CPU (user + system) seconds of
        # CMD > OUT to T[NAME] and C[NAME] (CPU is the steadier figure on a loaded machine)
    local name=$1 out=$2; shift 2
    cat "$CSV" "$JSONL" "$PLAIN" > /dev/null
    /usr/bin/time -f "%e %U %S" -o "$DATA/time" "$@" > "$out"
    read -r w u sy < <(tail -n 1 "$DATA/time")
    T[$name]+="$w "
    C[$name]+="$(echo "$u + $sy" | bc) "
}
have_mlr=$(command -v mlr || true)
for ((i = 0; i < ROUNDS; i++)); do
    run whole "$DATA/o_whole" "$BIN" "$CSV"
    run whole_nobyref "$DATA/o_whole2" env DEDUP_NO_BYREF=1 "$BIN" "$CSV"
    run csv "$DATA/o_csv" "$BIN" --csv --header -f user,ad "$CSV"
    run json "$DATA/o_json" "$BIN" --json .user,.ad "$JSONL"
    run plain "$DATA/o_plain" "$BIN" -d , --header -f 1,2 "$PLAIN"
    run awk "$DATA/o_awk" awk -F, '!s[$1 FS $2]++' "$PLAIN"
    if [ -n "$have_mlr" ]; then
        run mlr_csv "$DATA/o_mlr_csv" mlr --icsv --ocsv head -n 1 -g user,ad "$CSV"
        run mlr_json "$DATA/o_mlr_json" mlr --ijsonl --ojsonl head -n 1 -g user,ad "$JSONL"
    fi
done
cmp -s "$DATA/o_plain" "$DATA/o_awk" && same_awk=yes || same_awk=NO
# The (user, ad) pairs of an output, streamed to a file (20M records do not
# fit in a Python list or a shell string comfortably).
pairs_csv() { python3 -c 'import csv,itertools,sys; w=sys.stdout.write; [w("%s %s\n" % (r[0],r[1])) for r in itertools.islice(csv.reader(open(sys.argv[1])),1,None)]' "$1" > "$2"; }
pairs_json() { python3 -c 'import json,sys; w=sys.stdout.write; [w("%s %s\n" % (d["user"],d["ad"])) for d in map(json.loads, open(sys.argv[1]))]' "$1" > "$2"; }
echo "records: $RECORDS, rounds: $ROUNDS (median wall seconds, median CPU seconds)"
for k in whole whole_nobyref csv json plain awk mlr_csv mlr_json; do
    [ -n "${T[$k]:-}" ] || continue
    m=$(echo "${T[$k]}" | tr ' ' '\n' | grep . | median)
    c=$(echo "${C[$k]}" | tr ' ' '\n' | grep . | median)
    printf '%-14s %8.2f s wall %8.2f s CPU\n' "$k" "$m" "$c"
    eval "M_$k=$m; CPU_$k=$c"
done
r() { echo "scale=2; $1 / $2" | bc; }
echo "by CPU: composite / whole $(r "$CPU_csv" "$CPU_whole"), / whole no map $(r "$CPU_csv" "$CPU_whole_nobyref"), awk / plain $(r "$CPU_awk" "$CPU_plain")${CPU_mlr_csv:+, mlr / csv $(r "$CPU_mlr_csv" "$CPU_csv"), mlr / json $(r "$CPU_mlr_json" "$CPU_json")}"
echo "by wall:"
echo "composite CSV key / whole line:         $(r "$M_csv" "$M_whole") (target <= 1.3)"
echo "composite CSV key / whole line, no map: $(r "$M_csv" "$M_whole_nobyref")"
echo "awk / dedup -f 1,2 (no quotes):         $(r "$M_awk" "$M_plain") (target >= 3), outputs identical: $same_awk"
if [ -n "$have_mlr" ]; then
    pairs_csv "$DATA/o_csv" "$DATA/p1"; pairs_csv "$DATA/o_mlr_csv" "$DATA/p2"
    cmp -s "$DATA/p1" "$DATA/p2" && sc=yes || sc=NO
    pairs_json "$DATA/o_json" "$DATA/p1"; pairs_json "$DATA/o_mlr_json" "$DATA/p2"
    cmp -s "$DATA/p1" "$DATA/p2" && sj=yes || sj=NO
    rm -f "$DATA/p1" "$DATA/p2"
    echo "mlr / dedup --csv:                      $(r "$M_mlr_csv" "$M_csv") (target >= 10), same records: $sc"
    echo "mlr / dedup --json:                     $(r "$M_mlr_json" "$M_json") (target >= 10), same records: $sj"
else
    echo "miller (Debian 'miller') not installed: its comparisons skipped"
fi
