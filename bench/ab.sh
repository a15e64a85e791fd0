#!/usr/bin/env bash
# ab.sh - same-run A/B timing: runs each command on the same input in turn,
# N rounds, so that the neighbours' load falls on all of them alike; checks
# every output against a reference; prints each run and the medians.
#
#   bench/ab.sh N INPUT REF 'CMD A' 'CMD B' ...
#
# Each command gets INPUT as its last argument and its output goes to
# $DATA/ab.out (DATA defaults to the input's directory), compared with REF
# (cmp; "" skips the check).  Wall, user and system seconds and peak RSS come
# from /usr/bin/time.  A command that needs an environment variable says
# so with env: 'env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 build/dedup ...'.
# PAUSE=S sleeps S seconds before each command: on a virtual machine whose
# host takes freed memory back within seconds (free page reporting), page
# cache a command gets right after another one freed some is already backed
# and cheaper to write; a pause gives every command the same, unbacked start.
# CACHE=1 reads INPUT into the page cache (cat > /dev/null) before each
# command, so that one which drops the cache behind it cannot slow the next.
# Example (the figures in bench/results/extsort.md):
#
#   bench/ab.sh 5 /work/bench-data/urls-20000000.txt /work/bench-data/ref-urls.txt \
#       'old/dedup -m 64M -T /work/bench-data/tmp' 'build/dedup -m 64M -T /work/bench-data/tmp'
set -uo pipefail
if [ $# -lt 4 ]; then
    sed -n '2,18p' "$0" >&2
    exit 2
fi
N=$1 IN=$2 REF=$3
shift 3
DATA=${DATA:-$(dirname "$IN")}
OUT=$DATA/ab.out
TIMES=$(mktemp)
trap 'rm -f "$TIMES" "$OUT"' EXIT
declare -a ALL
for ((i = 1; i <= N; i++)); do
    k=0
    for c in "$@"; do
        k=$((k + 1))
        [ -n "${CACHE:-}" ] && cat "$IN" > /dev/null
        [ -n "${PAUSE:-}" ] && sleep "$PAUSE"
        # shellcheck disable=SC2086
        /usr/bin/time -f "%e %U %S %M" -o "$TIMES" $c "$IN" > "$OUT" 2>/dev/null
        rc=$?
        bad=""
        [ $rc -ne 0 ] && bad=" EXIT $rc"
        if [ -n "$REF" ] && ! cmp -s "$OUT" "$REF"; then bad="$bad OUTPUT DIFFERS"; fi
        read -r wall user sys rss < <(tail -1 "$TIMES")
        printf 'round %d, command %d: %s s wall, %s s user, %s s sys, %s KB%s\n' \
            "$i" "$k" "$wall" "$user" "$sys" "$rss" "$bad"
        ALL[k]="${ALL[k]:-} $wall"
    done
done
k=0
for c in "$@"; do
    k=$((k + 1))
    # shellcheck disable=SC2086 # one word per time
    med=$(printf '%s\n' ${ALL[k]} | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
    printf '%s:%s (median %s s)\n' "$c" "${ALL[k]}" "$med"
done
