#!/usr/bin/env bash
# bench_seed_ab.sh - issue 34's A/B: a build before the secret-seed work and
# one after, on the same data in the same run, for the exact mode, the
# blocked Bloom mode, a fresh --store and --redis (keys scheme, a private
# redis-server started here).  Rounds interleave the two builds (the first
# to run alternates), so the neighbours' load falls on both alike; medians
# and after/before ratios (of the medians, and the median of the per-round
# ratios) are printed as a Markdown table.  Output sizes must be equal
# between the builds (a row whose sizes differ is marked).  The redis row's
# CPU is the client's and the server's (its /proc stat before and after).
#
#   bench/bench_seed_ab.sh BEFORE_DEDUP AFTER_DEDUP INPUT [ROUNDS]
#
# env: SMALL=N   lines of INPUT for --store and --redis (default 2000000;
#                0 = all of it), taken from its head
#      ROWS="exact blocked store redis"   the rows to run (default all)
#      DATA=DIR  scratch (default /tmp/dedup-seed-ab)
# The blocked row gives both builds --seed 0x9E3779B97F4A7C15, so that their
# filters (and outputs) are the same; the others run with their defaults
# (the build after draws a secret seed, the one before uses the public one).
# Needs /usr/bin/time, redis-server and redis-cli.
set -u
BEFORE=${1:?usage: bench_seed_ab.sh BEFORE_DEDUP AFTER_DEDUP INPUT [ROUNDS]}
AFTER=${2:?}
IN=${3:?}
ROUNDS=${4:-3}
SMALL=${SMALL:-2000000}
ROWS=${ROWS:-exact blocked store redis}
DATA=${DATA:-/tmp/dedup-seed-ab}
mkdir -p "$DATA"
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time" >&2; exit 2; }
LINES=$(wc -l < "$IN")
SUB=$IN
if [ "$SMALL" != 0 ] && [ "$SMALL" -lt "$LINES" ]; then
    SUB=$DATA/head-$SMALL.txt
    [ -s "$SUB" ] || head -n "$SMALL" "$IN" > "$SUB"
fi
SUBLINES=$(wc -l < "$SUB")
PORT=
RPID=
cleanup() {
    [ -n "$RPID" ] && kill "$RPID" 2>/dev/null && wait "$RPID" 2>/dev/null
    rm -rf "$DATA/store" "$DATA/out" "$DATA/time" "$DATA/redis"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if [[ " $ROWS " == *" redis "* ]]; then
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    mkdir -p "$DATA/redis"
    redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DATA/redis" \
        --logfile "$DATA/redis/log" &
    RPID=$!
    i=0
    until redis-cli -p "$PORT" ping > /dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 500 ] && { echo "redis-server did not start" >&2; exit 1; }
        sleep 0.02
    done
fi

# redis-server's user + system CPU so far, in clock ticks
server_ticks() { awk '{print $14 + $15}' "/proc/$RPID/stat"; }
T0=0
# one BUILD ROW: runs it once, prints "wall cpu rss_kb bytes rc"
one() {
    local bin=$1 row=$2 rc
    rm -rf "$DATA/store"
    [ "$row" = redis ] && redis-cli -p "$PORT" flushall > /dev/null && T0=$(server_ticks)
    cat "$IN" > /dev/null # the same page-cache state for both
    case $row in
    exact) /usr/bin/time -f "%e %U %S %M" -o "$DATA/time" "$bin" "$IN" > "$DATA/out" ;;
    blocked) /usr/bin/time -f "%e %U %S %M" -o "$DATA/time" "$bin" --mode blocked -n "$LINES" -p 0.01 \
        --seed 0x9E3779B97F4A7C15 "$IN" > "$DATA/out" ;;
    store) /usr/bin/time -f "%e %U %S %M" -o "$DATA/time" "$bin" --store "$DATA/store" "$SUB" > "$DATA/out" ;;
    redis) /usr/bin/time -f "%e %U %S %M" -o "$DATA/time" "$bin" --redis "redis://127.0.0.1:$PORT" "$SUB" \
        > "$DATA/out" ;;
    esac
    rc=$?
    read -r wall user sys rss < <(tail -1 "$DATA/time")
    local cpu
    cpu=$(echo "$user + $sys" | bc)
    if [ "$row" = redis ]; then # and the server's share
        local t1
        t1=$(server_ticks)
        cpu=$(echo "scale=2; $cpu + ($t1 - $T0) / $(getconf CLK_TCK)" | bc)
    fi
    echo "$wall $cpu $rss $(stat -c %s "$DATA/out") $rc"
}

declare -A W C R S
echo "# seed A/B: $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "# before: $BEFORE"
echo "# after:  $AFTER"
echo "# input: $IN ($LINES lines); --store and --redis: $SUB ($SUBLINES lines)"
for ((r = 1; r <= ROUNDS; r++)); do
    for row in $ROWS; do
        if ((r % 2)); then order="before after"; else order="after before"; fi
        for b in $order; do
            bin=$BEFORE
            [ $b = after ] && bin=$AFTER
            read -r wall cpu rss bytes rc < <(one "$bin" "$row")
            echo "round $r $row $b: ${wall} s wall, ${cpu} s CPU, ${rss} KB, ${bytes} bytes out, exit $rc"
            W[$row.$b]="${W[$row.$b]:-} $wall"
            C[$row.$b]="${C[$row.$b]:-} $cpu"
            R[$row.$b]="${R[$row.$b]:-} $rss"
            S[$row.$b]="${S[$row.$b]:-} $bytes"
        done
    done
done

med() { printf '%s\n' $1 | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
# per-round ratios after/before, then their median
rmed() {
    local a=($1) b=($2) out="" i
    for ((i = 0; i < ${#a[@]}; i++)); do out="$out $(echo "scale=4; ${a[i]} / ${b[i]}" | bc)"; done
    med "$out"
}
echo
echo "| row | lines | wall before | wall after | after/before (medians; per-round median) | CPU before | CPU after | after/before (medians; per-round) | max RSS before / after (MB) | sizes equal |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for row in $ROWS; do
    n=$LINES
    [ "$row" = store ] || [ "$row" = redis ] && n=$SUBLINES
    wb=$(med "${W[$row.before]}") wa=$(med "${W[$row.after]}")
    cb=$(med "${C[$row.before]}") ca=$(med "${C[$row.after]}")
    rb=$(med "${R[$row.before]}") ra=$(med "${R[$row.after]}")
    same=yes
    [ "$(printf '%s\n' ${S[$row.before]} ${S[$row.after]} | sort -u | wc -l)" = 1 ] || same="NO (${S[$row.before]} /${S[$row.after]})"
    printf '| %s | %s | %s | %s | %.3f; %.3f | %s | %s | %.3f; %.3f | %d / %d | %s |\n' "$row" "$n" \
        "$wb" "$wa" "$(echo "scale=4; $wa / $wb" | bc)" "$(rmed "${W[$row.after]}" "${W[$row.before]}")" \
        "$cb" "$ca" "$(echo "scale=4; $ca / $cb" | bc)" "$(rmed "${C[$row.after]}" "${C[$row.before]}")" \
        $((rb / 1024)) $((ra / 1024)) "$same"
done
