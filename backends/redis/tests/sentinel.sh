#!/bin/bash
# dedup --redis redis-sentinel://...: one master, one replica and three
# sentinels started here on free loopback ports.
#  1. URL errors and an unknown master name give a clear message;
#  2. the keys and bitmap schemes through the sentinel URL write exactly the
#     first occurrences, into the master the sentinels name; dedup filter
#     create/add/query work on URL/NAME;
#  3. under --wait-replicas 1 (keys scheme), Sentinel fails the master over
#     mid-run (SENTINEL FAILOVER), then the new master is killed mid-run:
#     each run completes on the promoted replica (a killed master comes back
#     as its replica); no record is written twice, a rerun
#     over the same input writes no record the first run wrote, while the
#     two runs' outputs and the first run's --uncertain cover every distinct
#     record;
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

M=$(free_port); start_server "$M"
R=$(free_port); start_server "$R" --replicaof 127.0.0.1 "$M"
i=0
until "$REDIS_CLI" -p "$R" info replication | grep -q 'master_link_status:up'; do
    i=$((i + 1)); [ $i -gt 300 ] && fail "replica never synced"; sleep 0.05
done
SP=""
for n in 1 2 3; do p=$(free_port); start_sentinel "$p" "$M"; SP="$SP $p"; done
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
# master the rest streams in, and the failover starts as soon as the master
# holds more (commands in flight).
python3 - "$SEED" "$D" "$RT_DIR" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1])); d = int(sys.argv[2]); out = sys.argv[3]
first = ["job-%d-%d" % (r.randrange(1 << 30), i) for i in range(d)]
again = first[:] + ["late-%d" % i for i in range(d)]
r.shuffle(again)
open(out + "/part1", "w").write("\n".join(first[:d // 2]) + "\n")
open(out + "/part2", "w").write("\n".join(first[d // 2:] + again) + "\n")
open(out + "/fo_distinct", "w").write("\n".join(sorted(set(first + again))) + "\n")
PY

# await_replica PORT MASTER: PORT's link to MASTER is up and every sentinel
# counts one replica of MASTER (so a failover has a replica to promote).
await_replica() {
    local i=0 p
    until "$REDIS_CLI" -p "$1" info replication 2>/dev/null | grep -q "master_port:$2" &&
          "$REDIS_CLI" -p "$1" info replication | grep -q 'master_link_status:up'; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "port $1 never synced with $2"; sleep 0.05
    done
    for p in $SP; do
        i=0
        until "$REDIS_CLI" -p "$p" sentinel replicas mm 2>/dev/null | grep -qx "127.0.0.1:$1" &&
              [ "$(sentinel_master "$p")" = "$2" ]; do
            i=$((i + 1)); [ $i -gt 300 ] && fail "sentinel $p never saw $1 replicate $2"; sleep 0.05
        done
    done
}

# trial HOW DB: master $MA, replica $RE; HOW = failover or kill.  Swaps
# MA and RE.
trial() {
    local how=$1 db=$2 i rc again
    mkfifo "$RT_DIR/fifo$db"
    (
        cat "$RT_DIR/part1"
        i=0
        until [ -e "$RT_DIR/go$db" ]; do i=$((i + 1)); [ $i -gt 600 ] && exit 1; sleep 0.05; done
        cat "$RT_DIR/part2"
    ) > "$RT_DIR/fifo$db" &
    RT_PIDS="$RT_PIDS $!"
    timeout 120 "$DEDUP" --redis "$URL/$db" --wait-replicas 1 --redis-retries 12 \
        --uncertain "$RT_DIR/unc$db" --stats -o "$RT_DIR/out$db" "$RT_DIR/fifo$db" 2> "$RT_DIR/err$db" &
    local dp=$!
    # the events: every key of part 1 recorded in the master, then more
    msize() { "$REDIS_CLI" -p "$MA" -n "$db" dbsize 2>/dev/null || echo 0; }
    i=0
    until [ "$(msize)" -ge $((D / 2)) ]; do
        i=$((i + 1))
        kill -0 $dp 2>/dev/null || fail "$how: dedup ended before part 1 was recorded: $(cat "$RT_DIR/err$db")"
        [ $i -gt 600 ] && fail "$how: part 1 was never recorded"
        sleep 0.05
    done
    touch "$RT_DIR/go$db"
    i=0
    until [ "$(msize)" -gt $((D / 2 + 1)) ]; do
        i=$((i + 1)); [ $i -gt 2000 ] && fail "$how: part 2 was never sent"
    done
    if [ "$how" = failover ]; then
        "$REDIS_CLI" -p "$S1" sentinel failover mm > "$RT_DIR/fo.reply" 2>&1
        grep -qx OK "$RT_DIR/fo.reply" || fail "SENTINEL FAILOVER: $(cat "$RT_DIR/fo.reply")"
    else
        stop_server "$MA"
    fi
    # the event: a sentinel names the replica
    i=0
    until [ "$(sentinel_master "$S1")" = "$RE" ]; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "$how: the sentinels never promoted the replica"; sleep 0.05
    done
    # killed: the old master comes back as its replica (as the sentinels
    # would make it, only sooner), so WAIT 1 can be met again; never to be
    # promoted (it starts empty: a failover to it before its sync ends would
    # lose what Redis acknowledged)
    [ "$how" = kill ] && start_server "$MA" --replicaof 127.0.0.1 "$RE" --replica-priority 0
    wait $dp; rc=$?
    cat "$RT_DIR/err$db" >&2
    # The replica took over and a replica of it is back: the one right
    # outcome is a complete run (a client staying on the old address exits 1).
    [ $rc = 0 ] || fail "$how: dedup exit $rc after the failover"
    grep -q "retries: *[1-9]" "$RT_DIR/err$db" || fail "$how: complete run without a retry"
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
        timeout 60 "$DEDUP" --redis "$URL/$db" -o "$RT_DIR/re$db" 2> "$RT_DIR/reerr$db" ||
        fail "$how: rerun: $(cat "$RT_DIR/reerr$db")"
    again=$(sort "$o1" | comm -12 - <(sort "$RT_DIR/re$db") | head -3)
    [ -z "$again" ] || fail "$how: written by the first run and again by the rerun: $again"
    sort -u "$o1" "$RT_DIR/unc$db" "$RT_DIR/re$db" | cmp -s - "$RT_DIR/fo_distinct" ||
        fail "$how: the runs' outputs and uncertain records miss a distinct key"
    echo "sentinel: $how mid-run: exit $rc, $(wc -l < "$RT_DIR/unc$db") uncertain, rerun wrote $(wc -l < "$RT_DIR/re$db")" >&2
    i=$MA; MA=$RE; RE=$i
}
MA=$M RE=$R
trial failover 1
await_replica "$RE" "$MA"
trial kill 3
M=$MA R=$RE

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
