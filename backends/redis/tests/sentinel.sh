#!/bin/bash
# dedup --redis redis-sentinel://...: one master, one replica and three
# sentinels started here on free loopback ports.
#  1. URL errors and an unknown master name give a clear message;
#  2. the keys and bitmap schemes through the sentinel URL write exactly the
#     first occurrences, into the master the sentinels name;
#  3. the master is killed mid-run under --wait-replicas 1 (keys scheme):
#     the run completes after the sentinels promote the replica, or exits 1
#     naming host:port; no record is written twice in the run, and a rerun
#     over the same input writes no record the first run wrote, while the
#     two runs' outputs and the first run's --uncertain cover every distinct
#     record.
# Needs $DEDUP.  Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
test_seed
D=${D:-20000}

# start_sentinel PORT MASTER_PORT: a sentinel watching master "mm".
start_sentinel() {
    mkdir -p "$RT_DIR/s$1"
    cat > "$RT_DIR/s$1/sentinel.conf" <<CONF
port $1
bind 127.0.0.1
dir $RT_DIR/s$1
logfile $RT_DIR/s$1/log
sentinel monitor mm 127.0.0.1 $2 2
sentinel down-after-milliseconds mm 500
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
echo "sentinel: keys and bitmap through $URL ok" >&2

# the event: every sentinel sees the replica and the two other sentinels
for p in $SP; do
    i=0
    until "$REDIS_CLI" -p "$p" sentinel master mm 2>/dev/null |
          awk 'NR%2{k=$0;next} k=="num-slaves"&&$0==1{a=1} k=="num-other-sentinels"&&$0==2{b=1} END{exit !(a&&b)}'; do
        i=$((i + 1)); [ $i -gt 300 ] && fail "sentinel $p never saw the replica and its peers"; sleep 0.1
    done
done
