#!/usr/bin/env bash
# bench_lines.sh - the main job against the tools people use today, on the
# same data in one run: dedup (exact, fingerprint, blocked), LC_ALL=C sort -u,
# sort -u, mawk '!a[$0]++', perl, and `cat FILE > /dev/null` as the floor,
# with read_floor (reading, line ends and digests only, one thread) beside it.
# Each command runs REPS times (default 3), interleaved so that a noisy
# neighbour hurts all of them alike, in an order that rotates from one
# repetition to the next; medians and the medians of the
# per-repetition ratios are printed as a Markdown table.  Outputs go to
# files, except for the -null rows (`cat FILE > /dev/null`, the issue's
# floor, and dedup blocked the same way).  Peak RSS and CPU come from /usr/bin/time.
#
#   bench/bench_lines.sh [BUILD_DIR]     env: N (lines, default 20000000), REPS, DATA_DIR,
#                                        ONLY=urls|uuids (default both),
#                                        ROWS="cat-null dedup-exact ..." (default all; mawk
#                                        and sort-u-C are the ratio anchors)
set -eu
BUILD=${1:-build}
DEDUP=$(cd "$BUILD" && pwd)/dedup
N=${N:-20000000}
REPS=${REPS:-3}
DATA=${DATA_DIR:-/tmp/dedup-bench}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DATA"
[ -x /usr/bin/time ] || { echo "bench_lines: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
cc -O2 -o "$DATA/gen_urls" "$HERE/gen_urls.c" -lm
cc -O2 -o "$DATA/gen_uuids" "$HERE/gen_uuids.c"
cc -O2 -o "$DATA/read_floor" "$HERE/read_floor.c" -lxxhash
URLS="$DATA/urls-$N.txt"
UUIDS="$DATA/uuids-$N.txt"
[ -s "$URLS" ] || "$DATA/gen_urls" "$N" -r 0.5 -s 1 -S 1 > "$URLS"
[ -s "$UUIDS" ] || "$DATA/gen_uuids" "$N" -r 0.1 -S 1 > "$UUIDS"

run_one() { # run_one NAME FILE CMD... ; appends "name wall user sys maxrss_kb" to $RES
    # Output goes to $DATA/out.NAME (compared afterwards), or to /dev/null
    # for names ending in -null (the floor: `cat FILE > /dev/null`).
    local name=$1 file=$2 out; shift 2
    case " ${ROWS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
    case $name in *-null) out=/dev/null ;; *) out=$DATA/out.$name ;; esac
    cat "$file" > /dev/null # same cache state for everyone
    /usr/bin/time -f "%e %U %S %M" -o "$DATA/time.out" "$@" < "$file" > "$out" 2>/dev/null
    echo "$name $(cat "$DATA/time.out")" >> "$RES"
}

NROWS=13
row() { # row I FILE DISTINCT_HINT: the I-th command of a repetition
    local file=$2 nd=$3
    case $1 in
    0) run_one cat-null "$file" cat ;;
    1) run_one cat "$file" cat ;;
    2) run_one dedup-exact "$file" "$DEDUP" ;;
    3) run_one dedup-fingerprint "$file" "$DEDUP" --mode fingerprint ;;
    4) run_one dedup-fingerprint-n "$file" "$DEDUP" --mode fingerprint -n "$nd" ;;
    5) run_one dedup-blocked "$file" "$DEDUP" --mode blocked -n "$nd" -p 0.01 ;;
    6) run_one dedup-blocked-null "$file" "$DEDUP" --mode blocked -n "$nd" -p 0.01 ;;
    7) run_one sort-u-C "$file" env LC_ALL=C sort -u ;;
    8) run_one sort-u-C-S64M-par2 "$file" env LC_ALL=C sort -u -S 64M --parallel=2 ;;
    9) run_one sort-u "$file" sort -u ;;
    10) run_one mawk "$file" mawk '!a[$0]++' ;;
    11) run_one perl "$file" perl -ne 'print unless $s{$_}++' ;;
    12) run_one read-hash-null "$file" "$DATA/read_floor" ;;
    esac
}

bench_file() { # bench_file LABEL FILE DISTINCT_HINT
    local label=$1 file=$2 nd=$3
    RES="$DATA/results-$label.txt"
    : > "$RES"
    # Repetition r starts at a different row (the order rotates), so that
    # what a command inherits from the one before it (a cache it evicted,
    # gigabytes it just gave back to the host) falls on every row in turn.
    for r in $(seq "$REPS"); do
        for i in $(seq 0 $((NROWS - 1))); do
            row $(((i + (r - 1) * 5) % NROWS)) "$file" "$nd"
        done
    done
    if [ -s "$DATA/out.mawk" ] && [ -s "$DATA/out.dedup-exact" ]; then
        cmp -s "$DATA/out.dedup-exact" "$DATA/out.mawk" && same=yes || same=NO
    else same="not compared"; fi
    echo
    echo "### $label: $(wc -l < "$file") lines, $(du -h "$file" | cut -f1), $(wc -l < "$DATA/out.dedup-exact") distinct; dedup exact output identical to mawk: $same"
    echo
    python3 "$HERE/summarize_lines.py" "$RES"
}
echo "## bench_lines: N=$N, REPS=$REPS, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
case ${ONLY:-urls,uuids} in *urls*) bench_file urls "$URLS" "$N" ;; esac
case ${ONLY:-urls,uuids} in *uuids*) bench_file uuids "$UUIDS" "$N" ;; esac
