#!/bin/bash
# Hash flooding (issue 34): lines made to share one digest under the public
# seed (tests/util/xxh3_collide.c) must cost every exact road no more than
# random lines of the same size: a run digests with a secret seed of its
# own, so the flood is spread like any input.  Each road's output equals a
# reference, and the flood's CPU time and peak memory stay within 2x the
# random input's (plus a small absolute slack, for runs of a tenth of a
# second).  Without the secret seed the default road took minutes.
. "$(dirname "$0")/lib/common.sh"
COLLIDE=${DEDUP_BUILD:?DEDUP_BUILD must point at the build tree}/tests/xxh3_collide
[ -x "$COLLIDE" ] || { echo "missing $COLLIDE" >&2; exit 1; }
export LC_ALL=C
N=$(sized 100000)
LIMIT=60 # seconds a run may take before it counts as flooded

"$COLLIDE" flood "$N" > "$T/flood1" || { echo "xxh3_collide failed" >&2; exit 1; }
"$COLLIDE" random "$N" --rng "$SEED" > "$T/rand1" || exit 1
# Every line twice, so that half the records are repeats to drop.
cat "$T/flood1" "$T/flood1" > "$T/flood"
cat "$T/rand1" "$T/rand1" > "$T/rand"

ref() { # ref ROAD FILE: what the road must write
    case $1 in
    sort) sort -u "$2" ;;
    last) tac "$2" | awk '!s[$0]++' | tac ;;
    count) awk '{ if (!($0 in c)) k[n++] = $0; c[$0]++ }
                END { for (i = 0; i < n; i++) printf "%7d %s\n", c[k[i]], k[i] }' "$2" ;;
    *) awk '!s[$0]++' "$2" ;;
    esac
}

set -o pipefail
# measure NAME FILE ENV ARGS...: runs dedup on FILE; $T/NAME.sum gets the
# md5sum of its output (outputs are not kept: 30 MB each), $T/NAME.cpu its
# CPU seconds (user + system), $T/NAME.kb its peak RSS; 1 on a failure or a
# run past LIMIT.
measure() {
    local name=$1 file=$2 envv=$3
    shift 3
    if ! env $envv /usr/bin/time -f '%U %S %M' -o "$T/$name.time" \
        timeout "$LIMIT" "$DEDUP" "$@" "$file" 2> "$T/$name.err" | md5sum > "$T/$name.sum"; then
        cat "$T/$name.err" >&2
        return 1
    fi
    awk '{ printf "%.2f\n", $1 + $2 }' "$T/$name.time" > "$T/$name.cpu"
    awk '{ print $3 }' "$T/$name.time" > "$T/$name.kb"
}

road() { # road NAME REFKIND ENV ARGS...
    local name=$1 kind=$2 envv=$3
    shift 3
    local which ok=1
    for which in flood rand; do
        if ! measure "$name.$which" "$T/$which" "$envv" "$@"; then
            fail "$name: the run on $which failed or took over ${LIMIT}s"
            ok=0
            continue
        fi
        [ -f "$T/$kind.$which.ref" ] || ref "$kind" "$T/$which" | md5sum > "$T/$kind.$which.ref"
        check "$name: $which output equals the reference" cmp -s "$T/$name.$which.sum" "$T/$kind.$which.ref"
    done
    [ $ok = 1 ] || return
    local fc rc fk rk
    fc=$(cat "$T/$name.flood.cpu") rc=$(cat "$T/$name.rand.cpu")
    fk=$(cat "$T/$name.flood.kb") rk=$(cat "$T/$name.rand.kb")
    echo "$name: flood ${fc}s ${fk} KB, random ${rc}s ${rk} KB"
    check "$name: flood CPU ${fc}s within 2x random's ${rc}s + 0.5s" \
        awk -v f="$fc" -v r="$rc" 'BEGIN { exit !(f <= 2 * r + 0.5) }'
    check "$name: flood peak ${fk} KB within 2x random's ${rk} KB + 8 MB" \
        awk -v f="$fk" -v r="$rk" 'BEGIN { exit !(f <= 2 * r + 8192) }'
}

mkdir -p "$T/tmp"
road default first ""
road copying first "DEDUP_NO_BYREF=1"
road byref first "DEDUP_BYREF=1"
road spilling first "DEDUP_NO_BYREF=1 DEDUP_MEMORY=4M"
road budget first "" -m 1M -T "$T/tmp"
road sorted sort "" --sort
road keeplast last "" --keep=last
road count count "" -c
road window first "" --window 1h
road lastn first "" --last $((4 * N))
road fingerprint first "" --mode fingerprint
finish
