#!/bin/bash
# dedup --redis redis-sentinel://...: one master, one replica and three
# sentinels started here on free loopback ports.
#  1. URL errors and an unknown master name give a clear message;
#  2. the keys and bitmap schemes through the sentinel URL write exactly the
#     first occurrences, into the master the sentinels name; dedup filter
#     create/add/query work on URL/NAME; a tier stack --tier
#     redis-sentinel://...,ttl=1h --tier exact writes them too, and again
#     nothing;
#  3. under --wait-replicas 1, Sentinel fails the master over mid-run
#     (SENTINEL FAILOVER, keys scheme), then the new master is killed
#     mid-run, once per scheme (keys, bitmap, and module when $DEDUP_MODULE
#     is built): each run completes on the promoted replica (a killed master
#     comes back as its replica) and its --stats name the master the
#     sentinels promoted; no record is written twice, a rerun over the same
#     input writes no record the first run wrote, while the two runs'
#     outputs and the first run's --uncertain cover every distinct record;
#  4. both servers killed mid-run: exit 1 after --redis-failover-wait,
#     naming the master.
# Needs $DEDUP.  Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
test_seed
D=${D:-20000}
# A failure shows the sentinels' view of the failovers (a spurious one, on a
# loaded machine, is Redis losing data, not dedup).
fail() {
    cat "$RT_DIR"/s*/log 2>/dev/null | grep -E "switch-master|odown|sdown|failover" | tail -20 >&2
    echo "FAIL: $*" >&2
    exit 1
}

# start_sentinel PORT MASTER_PORT: a sentinel watching master "mm".
start_sentinel() {
    mkdir -p "$RT_DIR/s$1"
    cat > "$RT_DIR/s$1/sentinel.conf" <<CONF
port $1
bind 127.0.0.1
dir $RT_DIR/s$1
logfile $RT_DIR/s$1/log
sentinel monitor mm 127.0.0.1 $2 2
sentinel down-after-milliseconds mm 1000
sentinel failover-timeout mm 3000
sentinel parallel-syncs mm 1
CONF
    "$REDIS_SERVER" "$RT_DIR/s$1/sentinel.conf" --sentinel &
    RT_PIDS="$RT_PIDS $!"
}

# sentinel_master PORT: the master port sentinel PORT names for mm.
sentinel_master() { "$REDIS_CLI" -p "$1" sentinel get-master-addr-by-name mm 2>/dev/null | sed -n 2p; }

# A replica's full sync at once (Redis 7.0 waits 5 s for more replicas)
SRV=(--repl-diskless-sync-delay 0)
HAVE_MODULE=false
if [ -n "${DEDUP_MODULE:-}" ] && [ -f "$DEDUP_MODULE" ]; then
    SRV+=(--loadmodule "$DEDUP_MODULE")
    HAVE_MODULE=true
else
    echo "sentinel: no dedup_redis.so (sanitized build): the module scheme's trial is left out" >&2
fi
M=$(free_port); start_server "$M" "${SRV[@]}"
R=$(free_port); start_server "$R" "${SRV[@]}" --replicaof 127.0.0.1 "$M"
i=0
until "$REDIS_CLI" -p "$R" info replication | grep -q 'master_link_status:up'; do
    i=$((i + 1)); [ $i -gt 300 ] && fail "replica never synced"; sleep 0.05
done
SP=""
for n in 1 2 3; do p=$(free_port); start_sentinel "$p" "$M"; SP="$SP $p"; done
# INFO of master and replicas every second (Redis 7.0's default: 10 s),
# so a replica's new priority is seen within a second; hellos every 0.5 s
# (default 2 s), so a demoted master still answering as one is made a
# replica after 2 s, not 8
for p in $SP; do
    i=0
    until "$REDIS_CLI" -p "$p" sentinel debug info-period 1000 publish-period 500 2>/dev/null |
          grep -qx OK; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "sentinel $p never answered"; sleep 0.05
    done
done
set -- $SP
S1=$1
URL="redis-sentinel://127.0.0.1:$1,127.0.0.1:$2,127.0.0.1:$3/mm"
echo "master $M replica $R sentinels $SP" >&2

# 1. errors: a missing master name (usage, 2), an unknown one, no sentinel up
printf 'a\n' > "$RT_DIR/one"
"$DEDUP" --redis "redis-sentinel://127.0.0.1:$1" "$RT_DIR/one" > /dev/null 2> "$RT_DIR/err"
rc=$?; [ $rc = 2 ] && grep -q "no master name" "$RT_DIR/err" || fail "URL without master: exit $rc: $(cat "$RT_DIR/err")"
"$DEDUP" --redis "redis-sentinel://127.0.0.1:$1,127.0.0.1:$2/nope" "$RT_DIR/one" > /dev/null 2> "$RT_DIR/err"
rc=$?; [ $rc = 1 ] && grep -q "knows a master named 'nope'" "$RT_DIR/err" ||
    fail "unknown master: exit $rc: $(cat "$RT_DIR/err")"
dead=$(free_port)
"$DEDUP" --redis "redis-sentinel://127.0.0.1:$dead/mm" "$RT_DIR/one" > /dev/null 2> "$RT_DIR/err"
rc=$?; [ $rc = 1 ] && grep -q "sentinel at 127.0.0.1:$dead" "$RT_DIR/err" ||
    fail "no sentinel: exit $rc: $(cat "$RT_DIR/err")"

# 1b. a sentinel and a master behind a password (the sentinel's
# requirepass): the password (here DEDUP_REDIS_PASSWORD) goes to both;
# without it, the sentinel's NOAUTH is named
AP=$(free_port); RT_AUTH=pw-s3 start_server "$AP" --requirepass pw-s3
AS=$(free_port)
mkdir -p "$RT_DIR/a$AS"
cat > "$RT_DIR/a$AS/sentinel.conf" <<CONF
port $AS
bind 127.0.0.1
dir $RT_DIR/a$AS
logfile $RT_DIR/a$AS/log
requirepass pw-s3
sentinel monitor pm 127.0.0.1 $AP 1
sentinel auth-pass pm pw-s3
CONF
"$REDIS_SERVER" "$RT_DIR/a$AS/sentinel.conf" --sentinel &
RT_PIDS="$RT_PIDS $!"
i=0
until "$REDIS_CLI" -p "$AS" -a pw-s3 --no-auth-warning ping 2>/dev/null | grep -qx PONG; do
    i=$((i + 1)); [ $i -gt 300 ] && fail "the sentinel with a password never answered"; sleep 0.05
done
printf 'a\nb\na\n' > "$RT_DIR/ab"
got=$(DEDUP_REDIS_PASSWORD=pw-s3 "$DEDUP" --redis "redis-sentinel://127.0.0.1:$AS/pm" \
    "$RT_DIR/ab" 2> "$RT_DIR/err") || fail "sentinel with a password: $(cat "$RT_DIR/err")"
[ "$got" = "$(printf 'a\nb')" ] || fail "sentinel with a password: wrote '$got'"
[ "$("$REDIS_CLI" -p "$AP" -a pw-s3 --no-auth-warning dbsize)" -gt 0 ] ||
    fail "sentinel with a password: nothing in the master"
"$DEDUP" --redis "redis-sentinel://127.0.0.1:$AS/pm" "$RT_DIR/ab" > /dev/null 2> "$RT_DIR/err"
rc=$?; [ $rc = 1 ] && grep -q "sentinel at 127.0.0.1:$AS answered: NOAUTH" "$RT_DIR/err" ||
    fail "sentinel with a password, none given: exit $rc: $(cat "$RT_DIR/err")"
echo "sentinel: a sentinel behind requirepass ok" >&2

# 2. keys and bitmap through the URL (the first sentinel down: the next is asked)
make_input 20000
awk '!s[$0]++' "$RT_DIR/in.txt" > "$RT_DIR/want"
for scheme in keys bitmap; do
    "$DEDUP" --redis "redis-sentinel://127.0.0.1:$dead,127.0.0.1:$2/mm" --redis-scheme $scheme \
        -n 100000 --name "b$scheme" -o "$RT_DIR/got.$scheme" "$RT_DIR/in.txt" 2> "$RT_DIR/err" ||
        fail "$scheme: $(cat "$RT_DIR/err")"
    cmp -s "$RT_DIR/want" "$RT_DIR/got.$scheme" || fail "$scheme: not the first occurrences"
    n=$("$REDIS_CLI" -p "$M" --scan --pattern "b$scheme:*" | wc -l)
    [ "$n" -gt 0 ] || fail "$scheme: nothing in the master on port $M"
done
# dedup filter on a name through the sentinel URL ("URL/NAME")
"$DEDUP" filter create "$URL/flt" -n 1000 2> "$RT_DIR/err" || fail "filter create: $(cat "$RT_DIR/err")"
"$DEDUP" filter add "$URL/flt" alpha beta 2> "$RT_DIR/err" || fail "filter add: $(cat "$RT_DIR/err")"
got=$("$DEDUP" filter query "$URL/flt" alpha gamma beta 2> "$RT_DIR/err") || fail "filter query: $(cat "$RT_DIR/err")"
[ "$got" = "$(printf 'alpha\nbeta')" ] || fail "filter query through the sentinel URL: '$got'"
"$REDIS_CLI" -p "$M" exists flt:meta | grep -qx 1 || fail "filter: no flt:meta in the master"
# a tier stack with a sentinel URL as its Redis tier (the URL's sentinel
# list has commas: the tier's settings start after the master's name)
TIER="redis-sentinel://127.0.0.1:$dead,127.0.0.1:$2/mm/6,ttl=1h,name=tier"
"$DEDUP" --tier "$TIER" --tier exact -o "$RT_DIR/tier1" "$RT_DIR/in.txt" 2> "$RT_DIR/err" ||
    fail "tier: $(cat "$RT_DIR/err")"
cmp -s "$RT_DIR/want" "$RT_DIR/tier1" || fail "tier: not the first occurrences"
"$DEDUP" --tier "$TIER" --tier exact -o "$RT_DIR/tier2" "$RT_DIR/in.txt" 2> "$RT_DIR/err" ||
    fail "tier, second run: $(cat "$RT_DIR/err")"
[ -s "$RT_DIR/tier2" ] && fail "tier, second run: wrote $(wc -l < "$RT_DIR/tier2") records again"
n=$("$REDIS_CLI" -p "$M" -n 6 --scan --pattern "tier:*" | wc -l)
[ "$n" -gt 0 ] || fail "tier: nothing in db 6 of the master on port $M"
echo "sentinel: keys and bitmap through $URL ok" >&2

# the event: every sentinel sees the replica and the two other sentinels
for p in $SP; do
    i=0
    until "$REDIS_CLI" -p "$p" sentinel master mm 2>/dev/null |
          awk 'NR%2{k=$0;next} k=="num-slaves"&&$0==1{a=1} k=="num-other-sentinels"&&$0==2{b=1} END{exit !(a&&b)}'; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "sentinel $p never saw the replica and its peers"; sleep 0.1
    done
done
echo "sentinel: every sentinel sees the replica and its peers" >&2

# 3. failovers mid-run, keys scheme, --wait-replicas 1: first one that
# Sentinel runs while the master lives (SENTINEL FAILOVER: the master is
# demoted, READONLY, and the replica promoted), then the new master killed.
# The input: D distinct keys, then those again and D fresh ones, shuffled.
# Its first half of the distinct keys goes in first; once they are in the
# master half the rest streams in, and the failover starts as soon as the
# master holds more (commands maybe in flight); the last part waits for the
# failover's end, so the run always meets it (however fast it goes).
python3 - "$SEED" "$D" "$RT_DIR" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1])); d = int(sys.argv[2]); out = sys.argv[3]
first = ["job-%d-%d" % (r.randrange(1 << 30), i) for i in range(d)]
again = first[:] + ["late-%d" % i for i in range(d)]
r.shuffle(again)
open(out + "/part1", "w").write("\n".join(first[:d // 2]) + "\n")
rest = first[d // 2:] + again
open(out + "/part2", "w").write("\n".join(rest) + "\n")
open(out + "/part2a", "w").write("\n".join(rest[:len(rest) // 2]) + "\n")
open(out + "/part2b", "w").write("\n".join(rest[len(rest) // 2:]) + "\n")
open(out + "/fo_distinct", "w").write("\n".join(sorted(set(first + again))) + "\n")
PY

# await_replica PORT MASTER: PORT's link to MASTER is up, its priority
# back to the default (a killed master restarts with 0 until synced), and
# every sentinel counts it a replica of MASTER with that priority (so a
# failover has a replica to promote).
await_replica() {
    local i=0 p
    until "$REDIS_CLI" -p "$1" info replication 2>/dev/null | grep -q "master_port:$2" &&
          "$REDIS_CLI" -p "$1" info replication | grep -q 'master_link_status:up'; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "port $1 never synced with $2"; sleep 0.05
    done
    "$REDIS_CLI" -p "$1" config set replica-priority 100 | grep -qx OK ||
        fail "port $1: CONFIG SET replica-priority refused"
    for p in $SP; do
        i=0
        until "$REDIS_CLI" -p "$p" sentinel replicas mm 2>/dev/null |
              awk -v n="127.0.0.1:$1" 'NR%2{k=$0;next} k=="name"{c=$0} k=="slave-priority"&&c==n&&$0==100{ok=1} END{exit !ok}' &&
              [ "$(sentinel_master "$p")" = "$2" ]; do
            i=$((i + 1)); [ $i -gt 300 ] && fail "sentinel $p never saw $1 replicate $2"; sleep 0.05
        done
    done
}

# repl_offset PORT: the master's replication offset (the writes it took)
repl_offset() {
    "$REDIS_CLI" -p "$1" info replication 2>/dev/null | tr -d '\r' | sed -n 's/^master_repl_offset://p'
}
CUTS=0

# trial HOW DB [SCHEME]: master $MA, replica $RE; HOW = failover or kill.
# Swaps MA and RE.
trial() {
    local how=$1 db=$2 scheme=${3:-keys} i rc again
    local sargs=(--redis-scheme "$scheme")
    [ "$scheme" = keys ] || sargs+=(-n 100000 -p 0.000001)
    how="$how ($scheme)"
    local t0=$SECONDS
    mkfifo "$RT_DIR/fifo$db"
    (
        cat "$RT_DIR/part1"
        i=0
        until [ -e "$RT_DIR/go$db" ]; do i=$((i + 1)); [ $i -gt 600 ] && exit 1; sleep 0.05; done
        cat "$RT_DIR/part2a"
        i=0
        until [ -e "$RT_DIR/go${db}b" ]; do i=$((i + 1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done
        cat "$RT_DIR/part2b"
    ) > "$RT_DIR/fifo$db" &
    RT_PIDS="$RT_PIDS $!"
    timeout 120 "$DEDUP" --redis "$URL/$db" "${sargs[@]}" --wait-replicas 1 --redis-retries 12 \
        --uncertain "$RT_DIR/unc$db" --stats -o "$RT_DIR/out$db" "$RT_DIR/fifo$db" 2> "$RT_DIR/err$db" &
    local dp=$!
    # the events: every key of part 1 recorded in the master, then more
    # (bitmap, module: a fixed number of keys; their records are written
    # out batch by batch, the journal's flush: count those, from a quarter
    # of part 1, as its last batch may wait for part 2)
    msize() {
        if [ "$scheme" = keys ]; then
            "$REDIS_CLI" -p "$MA" -n "$db" dbsize 2>/dev/null || echo 0
        else
            cat "$RT_DIR/out$db".dedup-tmp-* 2>/dev/null | wc -l # -o's file until the end
        fi
    }
    local first=$((D / 2))
    [ "$scheme" = keys ] || first=$((D / 4))
    i=0
    until [ "$(msize)" -ge $first ]; do
        i=$((i + 1))
        kill -0 $dp 2>/dev/null || fail "$how: dedup ended before part 1 was recorded: $(cat "$RT_DIR/err$db")"
        [ $i -gt 600 ] && fail "$how: part 1 was never recorded"
        sleep 0.05
    done
    touch "$RT_DIR/go$db"
    i=0
    until [ "$(msize)" -gt $((D / 2 + 1)) ]; do
        i=$((i + 1)); [ $i -gt 2000 ] && fail "$how: part 2 was never sent"
        [ "$scheme" = keys ] || sleep 0.01
    done
    if [ "${how%% *}" = failover ]; then
        "$REDIS_CLI" -p "$S1" sentinel failover mm > "$RT_DIR/fo.reply" 2>&1
        grep -qx OK "$RT_DIR/fo.reply" || fail "SENTINEL FAILOVER: $(cat "$RT_DIR/fo.reply")"
    else
        # The master acknowledges writes no replica holds: the replica drops
        # its link and is stopped before it can reconnect (its cron waits a
        # second), and the master is killed once its replication offset
        # moved past the cut (the run's writes after it, their WAIT
        # pending); the replica resumes without them and is promoted.  A run
        # that took those writes for replicated would find their keys new
        # again on the promoted replica (the rerun's check below).
        "$REDIS_CLI" -p "$RE" client kill type master > /dev/null 2>&1
        eval "kill -STOP \$PID_$RE"
        local off0 cut=0
        off0=$(repl_offset "$MA")
        i=0
        while [ $i -lt 60 ]; do
            [ "$(repl_offset "$MA")" -gt "${off0:-0}" ] && { cut=1; break; }
            i=$((i + 1)); sleep 0.02
        done
        stop_server "$MA"
        eval "kill -CONT \$PID_$RE"
        CUTS=$((CUTS + cut))
    fi
    # the event: a sentinel names the replica
    i=0
    until [ "$(sentinel_master "$S1")" = "$RE" ]; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "$how: the sentinels never promoted the replica"; sleep 0.05
    done
    # killed: the old master comes back as its replica (as the sentinels
    # would make it, only sooner), so WAIT 1 can be met again; never to be
    # promoted (it starts empty: a failover to it before its sync ends would
    # lose what Redis acknowledged) until await_replica
    if [ "${how%% *}" = kill ]; then
        start_server "$MA" "${SRV[@]}" --replicaof 127.0.0.1 "$RE" --replica-priority 0
    else # the event: the old master demoted (it refuses writes)
        i=0
        until "$REDIS_CLI" -p "$MA" role 2>/dev/null | head -1 | grep -qx slave; do
            i=$((i + 1)); [ $i -gt 300 ] && fail "$how: the old master was never demoted"; sleep 0.05
        done
    fi
    touch "$RT_DIR/go${db}b"
    wait $dp; rc=$?
    cat "$RT_DIR/err$db" >&2
    # The replica took over and a replica of it is back: the one right
    # outcome is a complete run (a client staying on the old address exits 1).
    [ $rc = 0 ] || fail "$how: dedup exit $rc after the failover"
    grep -q "retries: *[1-9]" "$RT_DIR/err$db" || fail "$how: complete run without a retry"
    grep -q "redis: *$scheme scheme, sentinel master 'mm' at 127.0.0.1:$RE\$" "$RT_DIR/err$db" ||
        fail "$how: --stats do not name the promoted master 127.0.0.1:$RE"
    local o1=$RT_DIR/o$db
    cat "$RT_DIR/out$db" > "$o1"
    touch "$RT_DIR/unc$db"
    [ -z "$(sort "$o1" | uniq -d)" ] || fail "$how: a key was written twice: $(sort "$o1" | uniq -d | head -3)"
    sort "$o1" | comm -23 - "$RT_DIR/fo_distinct" | grep -q . && fail "$how: wrote a key not in the input"
    sort -u "$o1" "$RT_DIR/unc$db" | cmp -s - "$RT_DIR/fo_distinct" ||
        fail "$how: output and uncertain together miss a distinct key"
    # the rerun over the same input: nothing the first run wrote is new
    # again, and with it every distinct key is written or was uncertain
    cat "$RT_DIR/part1" "$RT_DIR/part2" |
        timeout 60 "$DEDUP" --redis "$URL/$db" "${sargs[@]}" -o "$RT_DIR/re$db" 2> "$RT_DIR/reerr$db" ||
        fail "$how: rerun: $(cat "$RT_DIR/reerr$db")"
    again=$(sort "$o1" | comm -12 - <(sort "$RT_DIR/re$db") | head -3)
    [ -z "$again" ] || fail "$how: written by the first run and again by the rerun: $again"
    sort -u "$o1" "$RT_DIR/unc$db" "$RT_DIR/re$db" | cmp -s - "$RT_DIR/fo_distinct" ||
        fail "$how: the runs' outputs and uncertain records miss a distinct key"
    echo "sentinel: $how mid-run: exit $rc, $(wc -l < "$RT_DIR/unc$db") uncertain, rerun wrote $(wc -l < "$RT_DIR/re$db"), $((SECONDS - t0)) s" >&2
    i=$MA; MA=$RE; RE=$i
}
MA=$M RE=$R
trial failover 1
await_replica "$RE" "$MA"
trial kill 3
await_replica "$RE" "$MA"
trial kill 7 bitmap
if $HAVE_MODULE; then
    await_replica "$RE" "$MA"
    trial kill 8 module
fi
M=$MA R=$RE
# at least one kill met writes the replica never had (else the check of
# keys new again after the failover was not put to the test)
[ "$CUTS" -ge 1 ] || fail "no kill trial met writes acknowledged after the replica was cut off"
echo "sentinel: $CUTS kill trial(s) with writes after the replica was cut off" >&2

# 4. no master left (both servers killed mid-run): exit 1 within
# --redis-failover-wait plus the retries' pauses, naming the master
printf 'x-%s\n' $(seq 1 100) > "$RT_DIR/small1"
printf 'y-%s\n' $(seq 1 100) > "$RT_DIR/small2"
mkfifo "$RT_DIR/fifo4"
(
    cat "$RT_DIR/small1"
    i=0
    until [ -e "$RT_DIR/go4" ]; do i=$((i + 1)); [ $i -gt 600 ] && exit 1; sleep 0.05; done
    cat "$RT_DIR/small2"
) > "$RT_DIR/fifo4" &
RT_PIDS="$RT_PIDS $!"
timeout 60 "$DEDUP" --redis "$URL/2" --redis-failover-wait 1s --redis-retries 2 \
    --uncertain "$RT_DIR/unc4" -o "$RT_DIR/out4" "$RT_DIR/fifo4" 2> "$RT_DIR/err4" &
dp=$!
i=0
until [ "$("$REDIS_CLI" -p "$M" -n 2 dbsize 2>/dev/null || echo 0)" -ge 100 ]; do
    i=$((i + 1))
    kill -0 $dp 2>/dev/null || fail "dedup ended early: $(cat "$RT_DIR/err4")"
    [ $i -gt 600 ] && fail "the first records never reached the master"; sleep 0.05
done
stop_server "$R"; stop_server "$M"
t0=$(date +%s)
touch "$RT_DIR/go4"
wait $dp; rc=$?
t=$(($(date +%s) - t0))
[ $rc = 1 ] && grep -q "no master 'mm' within 1000 ms" "$RT_DIR/err4" ||
    fail "no master left: exit $rc: $(cat "$RT_DIR/err4")"
[ $t -le 20 ] || fail "no master left: exit after $t s"
echo "sentinel: no master left: exit 1 after $t s: $(head -1 "$RT_DIR/err4")" >&2
echo "sentinel: ok"
