# Shared by the Redis backend's tests: free ports, servers and a cluster
# started in a temp dir, all stopped by the EXIT trap even on failure.
# Every wait is a bounded loop.  Needs: redis-server, redis-cli, python3.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../../../tests/cli/lib/python.sh"
REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
RT_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dedup-redis-test.XXXXXX")
# dedup --redis keeps its journals under $XDG_STATE_HOME/dedup: the test's own
export XDG_STATE_HOME="$RT_DIR/state"
RT_PIDS=""
# rt_own PID: PID is still a child of this test's shell.  A PID kept after
# its process ended may since belong to any other process (another test's
# server): the kernel reuses PIDs, within seconds when tests start
# thousands of processes (pid_max is 32768 here), so a kill goes only to a
# process that is still ours.
rt_own() {
    local st
    st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    st=${st##*) } # past "PID (comm) ": "STATE PPID ..."
    st=${st#* }
    [ "${st%% *}" = "$$" ]
}
rt_cleanup() {
    for p in $RT_PIDS; do rt_own "$p" && kill "$p" 2>/dev/null; done
    for p in $RT_PIDS; do
        i=0
        while rt_own "$p" && kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        rt_own "$p" && kill -9 "$p" 2>/dev/null
    done
    rm -rf "$RT_DIR"
}
trap rt_cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }

# A free loopback port (bound then released; the server takes it at once).
# Below 55536 so a cluster node's bus port (port + 10000) exists too.
free_port() {
    python3 -c '
import random, socket
for _ in range(200):
    p = random.randint(20000, 55000)
    try:
        for q in (p, p + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass'
}

# start_server PORT [ARGS...]: a redis-server on 127.0.0.1:PORT; waits for PING.
start_server() {
    port=$1; shift
    mkdir -p "$RT_DIR/$port"
    "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$RT_DIR/$port" --logfile "$RT_DIR/$port/log" "$@" &
    pid=$!
    RT_PIDS="$RT_PIDS $pid"
    eval "PID_$port=$pid"
    i=0
    until "$REDIS_CLI" -p "$port" ${RT_AUTH:+-a "$RT_AUTH" --no-auth-warning} ping >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 500 ] && fail "redis-server on port $port did not start: $(tail -5 "$RT_DIR/$port/log")"
        sleep 0.02
    done
}

stop_server() {
    local p
    eval "p=\${PID_$1:-}"
    [ -n "$p" ] && rt_own "$p" && kill -9 "$p" 2>/dev/null
    return 0
}

# start_cluster [ARGS...]: 3 masters + 3 replicas, each server given ARGS
# (e.g. --loadmodule M); sets CLUSTER_PORTS and CLUSTER_URL.  A replica's
# full sync starts at once (no repl-diskless-sync-delay, 5 s by default):
# the first syncs, and a restarted node's, which WAIT 1 and a failover wait
# for.
start_cluster() {
    CLUSTER_ARGS=(--repl-diskless-sync-delay 0 "$@")
    CLUSTER_PORTS=""
    for n in 1 2 3 4 5 6; do
        p=$(free_port)
        start_server "$p" --cluster-enabled yes --cluster-config-file "$RT_DIR/nodes-$p.conf" \
            --cluster-node-timeout 1000 "${CLUSTER_ARGS[@]}"
        CLUSTER_PORTS="$CLUSTER_PORTS $p"
    done
    hosts=""
    for p in $CLUSTER_PORTS; do hosts="$hosts 127.0.0.1:$p"; done
    # shellcheck disable=SC2086
    "$REDIS_CLI" --cluster create $hosts --cluster-replicas 1 --cluster-yes >"$RT_DIR/create.log" 2>&1 ||
        fail "cluster create: $(tail -5 "$RT_DIR/create.log")"
    i=0
    for p in $CLUSTER_PORTS; do
        until "$REDIS_CLI" -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; do
            i=$((i + 1))
            [ $i -gt 1500 ] && fail "cluster did not reach cluster_state:ok"
            sleep 0.02
        done
    done
    # every replica's link up, so WAIT 1 and a failover find it in sync
    for p in $CLUSTER_PORTS; do
        until "$REDIS_CLI" -p "$p" info replication 2>/dev/null |
            grep -Eq 'role:master|master_link_status:up'; do
            i=$((i + 1))
            [ $i -gt 3000 ] && fail "replica on port $p never synced"
            sleep 0.02
        done
        if "$REDIS_CLI" -p "$p" info replication | grep -q 'role:master'; then
            until "$REDIS_CLI" -p "$p" info replication | grep -q 'connected_slaves:1'; do
                i=$((i + 1))
                [ $i -gt 3000 ] && fail "master on port $p has no replica"
                sleep 0.02
            done
        fi
    done
    set -- $CLUSTER_PORTS
    CLUSTER_URL="redis-cluster://127.0.0.1:$1,127.0.0.1:$2"
}


# restart_node PORT: a cluster node stopped by stop_server, started again
# with its config file and the cluster's ARGS (it rejoins, as a replica of
# whoever took over its slots).
restart_node() {
    start_server "$1" --cluster-enabled yes --cluster-config-file "$RT_DIR/nodes-$1.conf" \
        --cluster-node-timeout 1000 "${CLUSTER_ARGS[@]}"
}

# await_takeover MASTER OTHER: once the master of slot 0 on port MASTER
# was stopped, waits (bounded) until node OTHER sees another master serve
# slot 0, then starts MASTER again (it rejoins as that one's replica).
await_takeover() {
    local i=0 m
    until m=$(slot0_master "$2"); [ -n "$m" ] && [ "$m" != "$1" ]; do
        i=$((i + 1)); [ $i -gt 1500 ] && fail "no replica took over slot 0"; sleep 0.02
    done
    restart_node "$1"
}

# test_seed: SEED from $DEDUP_TEST_SEED or random, printed for a replay.
# make_input N: N seeded records "rec-K" (K below 3N/4, so about half
# repeat) in $RT_DIR/in.txt, their distinct lines sorted in distinct.txt
make_input() {
    python3 - "$SEED" "$1" > "$RT_DIR/in.txt" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
n = int(sys.argv[2])
for _ in range(n):
    print("rec-%d" % r.randrange(n * 3 // 4))
PY
    sort -u "$RT_DIR/in.txt" > "$RT_DIR/distinct.txt"
}

test_seed() {
    SEED=${DEDUP_TEST_SEED:-$RANDOM$RANDOM}
    echo "seed $SEED (DEDUP_TEST_SEED to replay)" >&2
}

# slot0_master PORT: the port of the healthy master serving slot 0, as node
# PORT sees the cluster ("" if none).
slot0_master() {
    "$REDIS_CLI" -p "$1" cluster nodes 2>/dev/null |
        awk '$3 ~ /master/ && $3 !~ /fail/ && $9 ~ /^0-/ {split($2, a, "[:@]"); print a[2]}'
}

# slot_master PORT SLOT: the port of the healthy master serving SLOT, as node
# PORT sees the cluster ("" if none).
slot_master() {
    "$REDIS_CLI" -p "$1" cluster nodes 2>/dev/null |
        awk -v s="$2" '$3 ~ /master/ && $3 !~ /fail/ {
            for (i = 9; i <= NF; i++) if ($i ~ /^[0-9]/) {
                n = split($i, r, "-"); lo = r[1] + 0; hi = (n > 1 ? r[2] : r[1]) + 0
                if (lo <= s && s <= hi) { split($2, a, "[:@]"); print a[2] }
            }
        }'
}

# shard_slots PORT: the first slot of each master's range, as node PORT sees
# the cluster (one per line, sorted)
shard_slots() {
    "$REDIS_CLI" -p "$1" cluster nodes 2>/dev/null |
        awk '$3 ~ /master/ && $9 ~ /^[0-9]/ {split($9, r, "-"); print r[1] + 0}' | sort -n
}
