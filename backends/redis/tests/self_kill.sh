#!/bin/bash
# dedup itself killed -9 at random instants, `--redis` keys scheme (a new key
# is reserved with SET NX GET PX --reserve, and recorded only once its
# record has been written out):
#   self_kill.sh KILLS [LANES]
# One server; LANES independent lanes (default 5) run at once, each on a
# database of its own, each with its own run names, until KILLS kills in
# all (split between the lanes) landed while dedup ran.  A trial:
#   A   dedup --reserve $SK_RESERVE (default 2s) on a fresh name, killed -9
#       after a random delay within a lane's run duration (the last rerun's,
#       so the kills land anywhere from the connect to the last batch);
#       2s: a batch's 8,192 SET NX GET take up to ~1s on a loaded 2-core
#       machine, and a reservation must outlive its batch (1s was seen to
#       let a run write a key twice, as the man page warns);
#   B   every third trial, a second run on the same name started with A and
#       left to finish: it must exit 0 (a key A holds reserved is a
#       duplicate for B, as the man page says);
#   wait until the server holds none of A's reservations (the longest PTTL
#       left, read once, then polled in a bounded loop);
#   C   a rerun on the name, which must exit 0.
# Then: no run writes a key twice; the outputs and --uncertain lists of A,
# B, C together are exactly the distinct input; no key is written by A and
# B, nor by B and C; a key written by A and C only from A's last batch, the
# one whose records were written but whose keys the kill left reserved
# (within the last 8,192 lines of A's output).  At least a tenth of the
# kills must have left reservations behind (the kills hit the window
# between a batch's SET NX and its commit); with 30 kills or more, at least
# one B must have dropped keys A held reserved that C then wrote.  First,
# once: --reserve below its minimum (1s) refused with exit 2, nothing
# output, no key set.
# Needs $DEDUP.  Seeded (DEDUP_TEST_SEED); the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
KILLS=${1:-50}
LANES=${2:-5}
RES=${SK_RESERVE:-2s}
BATCH=8192
test_seed
N=${NS:-16000}
make_input "$N"
P=$(free_port)
start_server "$P"
# a reservation shorter than a batch takes is refused, before any output
"$DEDUP" --redis "redis://127.0.0.1:$P" --reserve 999ms "$RT_DIR/in.txt" > "$RT_DIR/o" 2> "$RT_DIR/e"
rc=$?
[ $rc = 2 ] && grep -q "at least 1s" "$RT_DIR/e" && [ ! -s "$RT_DIR/o" ] ||
    fail "--reserve 999ms: exit $rc, $(cat "$RT_DIR/e")"
[ "$("$REDIS_CLI" -p "$P" dbsize)" = 0 ] || fail "--reserve 999ms: keys were set"
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# reserved DB NAME: the longest PTTL (ms) among NAME's keys still holding
# the reserved value (4217), 0 if none.
reserved() {
    "$REDIS_CLI" -p "$P" -n "$1" eval "local c, m = '0', 0
repeat
  local r = redis.call('SCAN', c, 'MATCH', ARGV[1] .. ':*', 'COUNT', 1000)
  c = r[1]
  for _, k in ipairs(r[2]) do
    if k ~= ARGV[1] .. ':meta' and redis.call('GET', k) == '4217' then
      local t = redis.call('PTTL', k)
      if t > m then m = t end
    end
  end
until c == '0'
return m" 0 "$2"
}

# lane L QUOTA: trials on database L until QUOTA kills landed; prints
# "kills trials left-reserved written-again" on its last line.
lane() {
    trap - EXIT
    local l=$1 quota=$2 d="$RT_DIR/lane$1"
    mkdir -p "$d"
    RANDOM=$(((SEED + l * 7919) % 32768))
    local U="redis://127.0.0.1:$P/$l"
    local run=("$DEDUP" --redis "$U" --reserve "$RES")
    # the lane's run duration, from a whole run (then from each rerun)
    local t0 W t=0 killed=0 left=0 again=0 rescued=0
    t0=$(now_ms)
    "${run[@]}" --name "cal$l" "$RT_DIR/in.txt" > "$d/cal" 2> "$d/e" || fail "lane $l: calibration: $(cat "$d/e")"
    W=$(($(now_ms) - t0 + 2))
    while [ $killed -lt "$quota" ]; do
        t=$((t + 1))
        [ $t -gt $((quota * 3)) ] && fail "lane $l: only $killed of $t trials killed dedup while it ran"
        local name="s${l}x$t" peer=0 delay rc rcb m i
        [ $((t % 3)) = 0 ] && peer=1
        rm -f "$d"/o? "$d"/u? "$d"/e?
        delay=$(((RANDOM * 32768 + RANDOM) % W))
        "${run[@]}" --name "$name" --uncertain "$d/ua" "$RT_DIR/in.txt" > "$d/oa" 2> "$d/ea" &
        local dp=$! bp=""
        if [ $peer = 1 ]; then
            "${run[@]}" --name "$name" --uncertain "$d/ub" "$RT_DIR/in.txt" > "$d/ob" 2> "$d/eb" &
            bp=$!
        fi
        sleep "$((delay / 1000)).$(printf %03d $((delay % 1000)))"
        kill -9 $dp 2>/dev/null
        wait $dp 2>/dev/null; rc=$?
        case $rc in
        137) killed=$((killed + 1)) ;;
        0) W=$((W * 9 / 10 + 2)) ;; # too late: the run had ended
        *) fail "lane $l trial $t: exit $rc: $(cat "$d/ea")" ;;
        esac
        if [ -n "$bp" ]; then
            wait $bp; rcb=$?
            [ $rcb = 0 ] || fail "lane $l trial $t: the concurrent run: exit $rcb: $(cat "$d/eb")"
        fi
        touch "$d/oa" "$d/ua" "$d/ob" "$d/ub"
        # a torn last line was not written
        [ -s "$d/oa" ] && [ "$(tail -c 1 "$d/oa" | od -An -c | tr -d ' ')" != '\n' ] && sed -i '$d' "$d/oa"
        # A's reservations run out: the longest left, then a bounded poll
        m=$(reserved "$l" "$name") || fail "lane $l: reading reservations"
        [ "$m" -gt 0 ] && left=$((left + 1))
        i=0
        while [ "$m" -gt 0 ]; do
            i=$((i + 1)); [ $i -gt 40 ] && fail "lane $l trial $t: reservations never ran out ($m ms left)"
            m=$((m + 5))
            sleep "$((m / 1000)).$(printf %03d $((m % 1000)))"
            m=$(reserved "$l" "$name") || fail "lane $l: reading reservations"
        done
        t0=$(now_ms)
        "${run[@]}" --name "$name" --uncertain "$d/uc" "$RT_DIR/in.txt" > "$d/oc" 2> "$d/ec" ||
            fail "lane $l trial $t: rerun: $(cat "$d/ec")"
        W=$(($(now_ms) - t0 + 2))
        touch "$d/uc"
        # one pass: A, B, C written twice; A&B, B&C; A&C and where in A
        # they start; the union against the distinct input
        local r
        r=$(awk -v batch=$BATCH '
            FILENAME == ARGV[1] { if ($0 in a) da++; a[$0] = FNR; na = FNR; u[$0]; next }
            FILENAME == ARGV[2] { if ($0 in b) db++; b[$0]; if ($0 in a) ab++; u[$0]; next }
            FILENAME == ARGV[3] { if ($0 in c) dc++; c[$0]; if ($0 in b) bc++
                                  if ($0 in a) { ac++; if (!first || a[$0] < first) first = a[$0] }
                                  u[$0]; next }
            FILENAME == ARGV[7] { if (!($0 in u)) miss++; else delete u[$0]; next }
            { u[$0] }
            END { extra = 0; for (k in u) extra++
                  tail = ac ? na - first + 1 : 0
                  printf "%d %d %d %d %d %d %d %d %d\n", da, db, dc, ab, bc, ac, tail, miss, extra }' \
            "$d/oa" "$d/ob" "$d/oc" "$d/ua" "$d/ub" "$d/uc" "$RT_DIR/distinct.txt")
        local da db dc ab bc ac tail miss extra
        read -r da db dc ab bc ac tail miss extra <<< "$r"
        local what="lane $l trial $t (killed after $delay ms, exit $rc, $(wc -l < "$d/oa") written${bp:+, with a concurrent run})"
        [ "$da$db$dc" = 000 ] || fail "$what: a run wrote a key twice (A $da, B $db, C $dc)"
        [ "$miss" = 0 ] || fail "$what: $miss distinct keys neither written nor listed in --uncertain"
        [ "$extra" = 0 ] || fail "$what: $extra keys written or listed that are not in the input"
        [ "$ab" = 0 ] || fail "$what: $ab keys written by both concurrent runs"
        [ "$bc" = 0 ] || fail "$what: $bc keys written by the concurrent run and again by the rerun"
        [ "$tail" -le $BATCH ] ||
            fail "$what: $ac keys written again by the rerun, from the last $tail lines of A's output (more than a batch)"
        [ "$ac" -gt 0 ] && again=$((again + 1))
        # with B: keys A held reserved when killed, dropped by B, written by C
        [ -n "$bp" ] && [ "$(wc -l < "$d/oc")" -gt "$ac" ] && rescued=$((rescued + 1))
        "$REDIS_CLI" -p "$P" -n "$l" flushdb > /dev/null
    done
    echo "$killed $t $left $again $rescued"
}

pids=""
for l in $(seq 1 "$LANES"); do
    q=$(((KILLS + LANES - l) / LANES))
    lane "$l" "$q" > "$RT_DIR/lane$l.sum" 2> "$RT_DIR/lane$l.err" &
    pids="$pids $!"
done
bad=0
for p in $pids; do wait "$p" || bad=1; done
kills=0; trials=0; left=0; again=0; rescued=0
for l in $(seq 1 "$LANES"); do
    cat "$RT_DIR/lane$l.err" >&2
    read -r k t f a r < <(tail -1 "$RT_DIR/lane$l.sum")
    kills=$((kills + ${k:-0})); trials=$((trials + ${t:-0})); left=$((left + ${f:-0}))
    again=$((again + ${a:-0})); rescued=$((rescued + ${r:-0}))
done
[ $bad = 0 ] || fail "a lane failed (above)"
[ $kills -ge "$KILLS" ] || fail "only $kills kills landed"
[ $left -ge $((KILLS / 10)) ] ||
    fail "only $left of $kills kills left reservations behind: the kills miss the batches"
[ "$KILLS" -lt 30 ] || [ $rescued -gt 0 ] ||
    fail "no concurrent run met keys the killed run held reserved: the second runs miss the window"
echo "self_kill: $LANES lanes, $trials trials, $kills kills while dedup ran, $left left reservations, $again with a batch written again, $rescued where the concurrent run dropped keys of the killed one that the rerun wrote; nothing lost" >&2
