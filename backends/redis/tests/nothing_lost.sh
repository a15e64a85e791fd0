#!/bin/bash
# Nothing lost without a word, for `dedup --redis` (keys and bitmap schemes):
#   kill     SCHEME TRIALS: the server (AOF, fsync always, on tmpfs when there
#            is one) is killed -9 once Redis holds a random number of the run's
#            keys, the run must exit 1 naming host:port; the server is started
#            again on its AOF and the run repeated: the two outputs plus the
#            first run's --uncertain hold every distinct key, and no key is
#            output by both runs (nor twice by one).
#   maxmem   SCHEME: maxmemory with noeviction reached mid-run: exit 1 naming
#            host:port and OOM; after raising the limit a rerun completes the
#            outputs as above.
#   wait     SCHEME TRIALS: a master and its replica, --wait-replicas 1, the
#            replica killed mid-run: WAIT fails after the batch's keys were
#            recorded on the master; a rerun completes the outputs as above.
#   cluster  SCHEME TRIALS: keys, bitmap or module (skipped, 77, without
#            the module); 3 masters + 3 replicas started once,
#            --wait-replicas 1, the master of one shard (each in turn) killed
#            mid-run and its replica promoted (FAILOVER FORCE): exit 0 or 1
#            naming host:port; a rerun completes the outputs as above.
#   damage:  a bitmap segment deleted under its NAME:meta, a foreign key (other
#            value, other type) at a record's key name, a damaged NAME:meta:
#            each an error naming the key, never a silent "new" or "seen".
# dedup itself killed -9 is self_kill.sh (keys) and journal_kill.sh (bitmap,
# module).
# Outputs go to a redirected stdout: what a killed or failed run wrote
# stays, whatever -o does with a temporary file.
# Needs $DEDUP.  Seeded (DEDUP_TEST_SEED); the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
test_seed
RANDOM=$((SEED % 32768))
what=${1:?kill SCHEME TRIALS | maxmem SCHEME | wait SCHEME TRIALS | cluster SCHEME TRIALS | damage}
N=${N:-8000}
# the bitmap kill loop: two batches (8,192 keys each), 16 segments each
[ "$what" = kill ] && [ "$2" = bitmap ] && N=${NB:-9000}
[ "$what" = cluster ] && N=${NC:-12000}
# the bitmap's -p: the kill loops take 0.05 (k = 4, not 9: each trial's
# BITFIELDs cost Redis half the time; at 2% load false drops stay ~0.02)
BP=0.001
{ [ "$what" = kill ] || [ "$what" = cluster ]; } && BP=0.05
make_input "$N"
D=$(wc -l < "$RT_DIR/distinct.txt")
AOF_DIR=$RT_DIR
[ -d /dev/shm ] && [ -w /dev/shm ] && AOF_DIR=$(mktemp -d /dev/shm/dedup-redis-test.XXXXXX)
cleanup_shm() { [ "$AOF_DIR" != "$RT_DIR" ] && rm -rf "$AOF_DIR"; rt_cleanup; }
trap cleanup_shm EXIT
P=$(free_port)
U="redis://127.0.0.1:$P"
start_aof() { start_server "$P" --appendonly yes --appendfsync always --dir "$AOF_DIR" "$@"; }
cli() { "$REDIS_CLI" -p "$P" "$@"; }
# aof_compact: the AOF rewritten (BGREWRITEAOF, waited for), so that the
# next restart replays what came after, not every earlier trial's commands
# and FLUSHALL (the kill loops' restarts grew from ~0.1 s to over 1 s)
aof_compact() {
    local i=0 n0
    n0=$(cli info persistence | sed -n 's/^aof_rewrites:\([0-9]*\).*/\1/p')
    [ -n "$n0" ] || fail "INFO persistence gives no aof_rewrites"
    cli bgrewriteaof > /dev/null || fail "BGREWRITEAOF refused"
    until cli info persistence | tr -d '\r' | awk -F: -v n="$n0" '$1 == "aof_rewrites" { a = $2 > n }
        $1 == "aof_rewrite_in_progress" { b = $2 == 0 } $1 == "aof_rewrite_scheduled" { c = $2 == 0 }
        END { exit !(a && b && c) }'; do
        i=$((i + 1)); [ $i -gt 500 ] && fail "the AOF rewrite did not end"; sleep 0.01
    done
}
scheme_args() {
    case $1 in
    keys) echo "--redis-scheme keys" ;;
    bitmap) echo "--redis-scheme bitmap -n $((D * 50)) -p $BP --segments 16" ;;
    module) echo "--redis-scheme module -n $D -p 1e-9" ;;
    esac
}

# check_union LABEL OUT1 UNC1 OUT2 [UNC2]: every distinct key in an output or
# an uncertain list; no key in both outputs or twice in one.  None may be
# missing: a bitmap at 2% of the load it is sized for drops a key falsely
# with odds of ~1e-8 (-p 0.05, k = 4: ~1e-4 per trial of ~6,600 keys) or
# far less (-p 1e-3), so one key missing is a loss, not bad luck.
check_union() {
    local label=$1 o1=$2 u1=$3 o2=$4 u2=${5:-/dev/null}
    [ -z "$(sort "$o1" | uniq -d)$(sort "$o2" | uniq -d)" ] || fail "$label: a run wrote a key twice"
    local both
    both=$(sort -u "$o1" | comm -12 - <(sort -u "$o2") | wc -l)
    [ "$both" = 0 ] || fail "$label: $both keys written by both runs, e.g. $(sort -u "$o1" | comm -12 - <(sort -u "$o2") | head -2 | tr '\n' ' ')"
    local missing
    missing=$(sort -u "$o1" "$u1" "$o2" "$u2" | comm -13 - "$RT_DIR/distinct.txt" | wc -l)
    [ "$missing" = 0 ] || fail "$label: $missing distinct keys neither written nor listed in --uncertain, e.g. $(sort -u "$o1" "$u1" "$o2" "$u2" | comm -13 - "$RT_DIR/distinct.txt" | head -3 | tr '\n' ' ')"
}

case $what in
kill)
    scheme=$2; T=${3:-50}
    start_aof
    t=0; mid=0
    while [ $t -lt "$T" ]; do
        t=$((t + 1))
        name="k$t"
        # the event: keys, Redis holds K of this run's keys (DBSIZE counts
        # the meta key); bitmap, Redis ran K commands (the open's ~20, then
        # 16 BITFIELDs a batch)
        if [ "$scheme" = keys ]; then
            count() { cli dbsize 2>/dev/null; }
            base=0; K=$((2 + RANDOM % (D - 2)))
        else
            count() { cli info stats 2>/dev/null | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p' | tr -d '\r'; }
            base=$(count); K=$((base + 1 + RANDOM % (20 + 16 * (N / 8192 + 1))))
        fi
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args "$scheme") --name "$name" \
            --redis-retries 0 --uncertain "$RT_DIR/unc1" "$RT_DIR/in.txt" > "$RT_DIR/out1" \
            2> "$RT_DIR/err1" &
        dp=$!
        i=0
        while kill -0 $dp 2>/dev/null; do
            n=$(count) && [ -n "$n" ] || break
            [ "$n" -ge "$K" ] && break
            i=$((i + 1)); [ $i -gt 3000 ] && fail "trial $t: Redis never held $K keys"
        done
        stop_server "$P"
        wait $dp; rc=$?
        touch "$RT_DIR/out1" "$RT_DIR/unc1"
        case $rc in
        0) ;; # the run ended before the kill
        1) grep -q "127.0.0.1:$P" "$RT_DIR/err1" || fail "trial $t: exit 1 without naming host:port: $(cat "$RT_DIR/err1")"
           mid=$((mid + 1)) ;;
        *) fail "trial $t: exit $rc: $(cat "$RT_DIR/err1")" ;;
        esac
        wait_gone=0
        while kill -0 "$(eval echo "\$PID_$P")" 2>/dev/null; do
            wait_gone=$((wait_gone + 1)); [ $wait_gone -gt 100 ] && fail "server did not die"; sleep 0.02
        done
        start_aof
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args "$scheme") --name "$name" --uncertain "$RT_DIR/unc2" \
            "$RT_DIR/in.txt" > "$RT_DIR/out2" 2> "$RT_DIR/err2" || fail "trial $t: rerun: $(cat "$RT_DIR/err2")"
        check_union "$scheme trial $t (killed at $((K - base)) keys or commands, exit $rc)" \
            "$RT_DIR/out1" "$RT_DIR/unc1" "$RT_DIR/out2" "$RT_DIR/unc2"
        cli flushall > /dev/null
        aof_compact
        rm -f "$RT_DIR/out1" "$RT_DIR/unc1" "$RT_DIR/out2" "$RT_DIR/unc2"
    done
    [ $mid -gt 0 ] || fail "no trial killed the server mid-run"
    echo "nothing_lost kill $scheme: $T trials, $mid killed mid-run, nothing lost" >&2
    ;;
maxmem)
    scheme=$2
    start_server "$P"
    if [ "$scheme" = keys ]; then
        cli config set maxmemory-policy noeviction > /dev/null
        used=$(cli info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p' | tr -d '\r')
        # room for about a third of the keys (a key costs ~70 bytes)
        cli config set maxmemory $((used + D * 25)) > /dev/null
        "$DEDUP" --redis "$U" --name mm --uncertain "$RT_DIR/unc1" \
            "$RT_DIR/in.txt" > "$RT_DIR/out1" 2> "$RT_DIR/err1"
        rc=$?
    else
        cli config set maxmemory-policy noeviction > /dev/null
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args bitmap) --name mm --pipeline 64 --uncertain "$RT_DIR/unc1" \
            "$RT_DIR/in.txt" > "$RT_DIR/out1" 2> "$RT_DIR/err1" &
        dp=$!
        # the event: the filter exists; then memory is over the limit
        i=0
        until [ "$(cli exists mm:meta)" = 1 ]; do
            i=$((i + 1)); [ $i -gt 2000 ] && fail "the bitmap filter was never created"
            kill -0 $dp 2>/dev/null || break
        done
        cli config set maxmemory 1 > /dev/null
        wait $dp; rc=$?
    fi
    cat "$RT_DIR/err1" >&2
    touch "$RT_DIR/out1" "$RT_DIR/unc1"
    [ $rc = 1 ] || fail "maxmemory $scheme: exit $rc, not 1"
    grep -q "OOM" "$RT_DIR/err1" && grep -q "127.0.0.1:$P" "$RT_DIR/err1" ||
        fail "maxmemory $scheme: the error names neither OOM nor host:port"
    cli config set maxmemory 0 > /dev/null
    # shellcheck disable=SC2046
    "$DEDUP" --redis "$U" $(scheme_args "$scheme") --name mm "$RT_DIR/in.txt" > "$RT_DIR/out2" \
        2> "$RT_DIR/err2" || fail "maxmemory rerun: $(cat "$RT_DIR/err2")"
    check_union "maxmemory $scheme" "$RT_DIR/out1" "$RT_DIR/unc1" "$RT_DIR/out2"
    echo "nothing_lost maxmem $scheme: $(wc -l < "$RT_DIR/out1") written, $(wc -l < "$RT_DIR/unc1") listed before the OOM" >&2
    ;;
wait)
    # --wait-replicas 1 and the replica killed mid-run: WAIT fails after
    # the batch's keys were recorded on the master; none may be lost.
    scheme=$2; T=${3:-5}
    # the replica's full sync at once (no 5 s diskless delay: every trial
    # starts a new replica and waits for its link)
    start_server "$P" --repl-diskless-sync-delay 0
    R=$(free_port)
    start_server "$R" --replicaof 127.0.0.1 "$P"
    t=0
    while [ $t -lt "$T" ]; do
        t=$((t + 1))
        i=0
        until "$REDIS_CLI" -p "$R" info replication | grep -q 'master_link_status:up'; do
            i=$((i + 1)); [ $i -gt 300 ] && fail "the replica never connected"; sleep 0.05
        done
        if [ "$scheme" = keys ]; then
            count() { cli dbsize 2>/dev/null; }
            K=$((2 + RANDOM % (D - 2)))
        else # the open's ~40 commands, then 16 BITFIELDs
            count() { cli info stats 2>/dev/null | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p' | tr -d '\r'; }
            K=$(($(count) + 30 + RANDOM % 30))
        fi
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args "$scheme") --name "w$t" --wait-replicas 1 --redis-retries 1 --pipeline 8192 \
            --uncertain "$RT_DIR/unc1" "$RT_DIR/in.txt" > "$RT_DIR/out1" 2> "$RT_DIR/err1" &
        dp=$!
        i=0
        while kill -0 $dp 2>/dev/null; do
            n=$(count) && [ -n "$n" ] || break
            [ "$n" -ge "$K" ] && break
            i=$((i + 1)); [ $i -gt 3000 ] && fail "trial $t: Redis never held $K keys"
        done
        stop_server "$R"
        t0=$(date +%s%N)
        wait $dp; rc=$?
        echo "wait: dedup ended $(( ($(date +%s%N) - t0) / 1000000 )) ms after the kill" >&2
        touch "$RT_DIR/out1" "$RT_DIR/unc1"
        case $rc in
        0) ;;
        1) grep -q "127.0.0.1:$P" "$RT_DIR/err1" || fail "trial $t: exit 1 without naming host:port: $(cat "$RT_DIR/err1")" ;;
        *) fail "trial $t: exit $rc: $(cat "$RT_DIR/err1")" ;;
        esac
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args "$scheme") --name "w$t" "$RT_DIR/in.txt" > "$RT_DIR/out2" \
            2> "$RT_DIR/err2" || fail "trial $t: rerun: $(cat "$RT_DIR/err2")"
        check_union "wait $scheme trial $t (replica killed at $K keys, exit $rc)" \
            "$RT_DIR/out1" "$RT_DIR/unc1" "$RT_DIR/out2"
        echo "wait $scheme trial $t: exit $rc, $(wc -l < "$RT_DIR/out1") written, $(wc -l < "$RT_DIR/unc1") listed; $(head -c 300 "$RT_DIR/err1")" >&2
        rm -f "$RT_DIR/out1" "$RT_DIR/unc1" "$RT_DIR/out2"
        wait_gone=0
        while kill -0 "$(eval echo "\$PID_$R")" 2>/dev/null; do
            wait_gone=$((wait_gone + 1)); [ $wait_gone -gt 100 ] && fail "replica did not die"; sleep 0.02
        done
        start_server "$R" --replicaof 127.0.0.1 "$P"
    done
    ;;
cluster)
    # 3 masters + 3 replicas started once for every trial (full syncs
    # without the diskless delay).  A trial: the master of a shard (the
    # three in turn) killed -9 once it ran a random number of the run's
    # commands (--wait-replicas 1; module: at a random instant), its replica
    # promoted at once (CLUSTER FAILOVER FORCE: an election, so a new epoch,
    # without the node timeout), the killed node started again once every
    # node sees the promotion (it rejoins as a replica).  The shards take
    # turns because a master votes about a given failed master at most once
    # in twice the node timeout (2 s): killing the same pair's master every
    # other trial, as one shard alone would, had one election in three
    # refused and retried 4 s later.  A node is not killed again within
    # 2.2 s of its last kill (with three shards that wait is rare).  The run,
    # given no retries in odd trials and 8 in even ones, exits 1 naming
    # host:port or completes after the failover; once the cluster is whole
    # again a rerun completes the outputs; then FLUSHALL on the masters.
    # The random count is below 4/5 of what an unkilled run makes that
    # shard's master run; the random instant within 4/5 of its time.
    scheme=$2; T=${3:-3}
    if [ "$scheme" = module ]; then
        [ -n "${DEDUP_MODULE:-}" ] && [ -f "$DEDUP_MODULE" ] || { echo "SKIP: no dedup_redis.so" >&2; exit 77; }
        start_cluster --loadmodule "$DEDUP_MODULE"
    else
        start_cluster
    fi
    set -- $CLUSTER_PORTS
    # seeds: every node but the one to kill (a killed master restarted asks
    # no one before it answers CLUSTER SLOTS with its old claim)
    seeds() {
        local p u=""
        for p in $CLUSTER_PORTS; do [ "$p" != "$1" ] && u="$u${u:+,}127.0.0.1:$p"; done
        CU="redis-cluster://$u"
    }
    cmds() { "$REDIS_CLI" -p "$1" info stats 2>/dev/null | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p' | tr -d '\r'; }
    # replica_of PORT: the port of the replica of the master on PORT
    replica_of() {
        "$REDIS_CLI" -p "$1" info replication 2>/dev/null | tr -d '\r' | sed -n 's/^slave0:.*port=\([0-9]*\),.*/\1/p'
    }
    # whole: every node sees the cluster ok, every replica in sync, every
    # master with its replica (bounded)
    whole() {
        local p i=0
        for p in $CLUSTER_PORTS; do
            until printf 'CLUSTER INFO\nINFO replication\n' | "$REDIS_CLI" -p "$p" 2>/dev/null | tr -d '\r' |
                grep -Ec '^cluster_state:ok|^connected_slaves:1|^master_link_status:up' | grep -qx 2; do
                i=$((i + 1)); [ $i -gt 600 ] && fail "the cluster did not recover"; sleep 0.02
            done
        done
    }
    run1() { # NAME RETRIES: the run under test, in the background (pid in dp)
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$CU" $(scheme_args "$scheme") --name "$1" --wait-replicas 1 --pipeline 8192 \
            --redis-retries "$2" --stats --uncertain "$RT_DIR/unc1" "$RT_DIR/in.txt" > "$RT_DIR/out1" 2> "$RT_DIR/err1" &
        dp=$!
    }
    read -r -a slots <<< "$(shard_slots "$1" | tr '\n' ' ')"
    [ ${#slots[@]} = 3 ] || fail "the cluster has ${#slots[@]} shards, not 3"
    # calibration: what an unkilled run makes each shard's master run
    declare -A c0=() span=() killed_at=()
    for s in "${slots[@]}"; do
        m=$(slot_master "$1" "$s"); c0[$s]=$(cmds "$m")
    done
    seeds none # every node
    ts=$(date +%s%N)
    run1 cal 0; wait $dp || fail "calibration run: $(cat "$RT_DIR/err1")"
    dur=$(( ($(date +%s%N) - ts) / 1000000 ))
    for s in "${slots[@]}"; do
        span[$s]=$(( $(cmds "$(slot_master "$1" "$s")") - ${c0[$s]} ))
        [ "${span[$s]}" -gt 1 ] || fail "calibration: the master of slot $s ran ${span[$s]} commands"
    done
    for p in $CLUSTER_PORTS; do "$REDIS_CLI" -p "$p" flushall > /dev/null 2>&1; done
    t=0; mid=0; t0=$(date +%s%N)
    while [ $t -lt "$T" ]; do
        t=$((t + 1))
        slot=${slots[$(( (t - 1) % 3 ))]}
        master=$(slot_master "$1" "$slot")
        [ -n "$master" ] || fail "no master for slot $slot"
        replica=$(replica_of "$master")
        [ -n "$replica" ] || fail "the master of slot $slot ($master) has no replica"
        seeds "$master"
        i=0 # the voters' limit: one failover about a master in 2 s
        while [ $(( $(date +%s%N) / 1000000 - ${killed_at[$master]:-0} )) -lt 2200 ]; do
            i=$((i + 1)); [ $i -gt 100 ] && fail "cluster trial $t: the wait for the vote limit"; sleep 0.05
        done
        K=$(( $(cmds "$master") + 1 + RANDOM * 32768 % (span[$slot] * 4 / 5) ))
        # odd trials give up at the kill (exit 1, the batch listed), even
        # ones retry through the failover
        run1 "c$t" $((t % 2 ? 0 : 8))
        if [ "$scheme" = module ]; then
            # a run is a few commands per master (one per shard and batch),
            # fewer than polls can follow: a random instant of its time
            K=$((RANDOM * 32768 % (dur * 4 / 5 + 1)))
            sleep "$((K / 1000)).$(printf '%03d' $((K % 1000)))"
            K="${K} ms"
        fi
        i=0
        while [ "$scheme" != module ] && kill -0 $dp 2>/dev/null; do
            n=$(cmds "$master") && [ -n "$n" ] && [ "$n" -lt "$K" ] || break
            i=$((i + 1)); [ $i -gt 5000 ] && fail "cluster trial $t: never reached $K"
        done
        stop_server "$master"
        killed_at[$master]=$(( $(date +%s%N) / 1000000 ))
        i=0 # the killed node released its port
        while "$REDIS_CLI" -p "$master" ping > /dev/null 2>&1; do
            i=$((i + 1)); [ $i -gt 100 ] && fail "the killed master did not die"; sleep 0.02
        done
        "$REDIS_CLI" -p "$replica" cluster failover force > /dev/null ||
            fail "cluster trial $t: CLUSTER FAILOVER FORCE on $replica"
        # every live node sees the replica serve the shard before the killed
        # node comes back (with its old epoch it then rejoins as a replica)
        for p in $CLUSTER_PORTS; do
            [ "$p" = "$master" ] && continue
            i=0
            until [ "$(slot_master "$p" "$slot")" = "$replica" ]; do
                i=$((i + 1)); [ $i -gt 500 ] && fail "cluster trial $t: node $p never saw $replica take over"; sleep 0.02
            done
        done
        restart_node "$master"
        wait $dp; rc=$?
        touch "$RT_DIR/out1" "$RT_DIR/unc1"
        case $rc in
        0) ;;
        1) grep -q "127.0.0.1:[0-9]" "$RT_DIR/err1" || fail "cluster trial $t: exit 1 without naming host:port: $(cat "$RT_DIR/err1")" ;;
        *) fail "cluster trial $t: exit $rc: $(cat "$RT_DIR/err1")" ;;
        esac
        whole
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$CU" $(scheme_args "$scheme") --name "c$t" "$RT_DIR/in.txt" > "$RT_DIR/out2" \
            2> "$RT_DIR/err2" || fail "cluster trial $t: rerun: $(cat "$RT_DIR/err2")"
        check_union "cluster $scheme trial $t (master $master killed at $K, exit $rc)" \
            "$RT_DIR/out1" "$RT_DIR/unc1" "$RT_DIR/out2"
        r=$(sed -n 's/^retries: *\([0-9]*\).*/\1/p' "$RT_DIR/err1")
        { [ "$rc" = 1 ] || [ "${r:-0}" -gt 0 ]; } && mid=$((mid + 1))
        echo "cluster $scheme trial $t: exit $rc, ${r:-?} retries, $(wc -l < "$RT_DIR/out1") written, $(wc -l < "$RT_DIR/unc1") listed" >&2
        rm -f "$RT_DIR/out1" "$RT_DIR/unc1" "$RT_DIR/out2"
        fl="" # the six at once: replicas refuse (READONLY) and follow
        for p in $CLUSTER_PORTS; do
            "$REDIS_CLI" -p "$p" flushall > /dev/null 2>&1 &
            fl="$fl $!"
        done
        # shellcheck disable=SC2086
        wait $fl
    done
    [ $mid -gt 0 ] || fail "no cluster trial met the failover mid-run"
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "nothing_lost cluster $scheme: $T trials in $ms ms ($((ms / T)) ms each), $mid met the failover mid-run, nothing lost" >&2
    ;;
damage)
    scheme=bitmap
    start_server "$P"
    expect_fail() { # LABEL WORD ARGS...: exit 1 and WORD in the message
        local label=$1 word=$2; shift 2
        "$DEDUP" --redis "$U" "$@" "$RT_DIR/in.txt" > "$RT_DIR/o" 2> "$RT_DIR/e"
        local rc=$?
        [ $rc = 1 ] || fail "$label: exit $rc, not 1 ($(cat "$RT_DIR/e"))"
        grep -qF -- "$word" "$RT_DIR/e" || fail "$label: the error does not name $word: $(cat "$RT_DIR/e")"
        [ -s "$RT_DIR/o" ] && [ "$label" != "foreign value" ] && [ "$label" != "foreign type" ] &&
            fail "$label: records were written"
        echo "damage: $label: $(head -1 "$RT_DIR/e")" >&2
    }
    # a segment deleted (or evicted) under its meta
    "$DEDUP" --redis "$U" --redis-scheme bitmap -n 50000 --segments 4 --name seg "$RT_DIR/in.txt" > /dev/null ||
        fail "bitmap run"
    cli del 'seg:{seg:s2}:g0' > /dev/null
    expect_fail "deleted segment" 'seg:{seg:s2}:g0' --redis-scheme bitmap --name seg
    # ... and recreated by a client that knows nothing of sentinels
    cli setbit 'seg:{seg:s2}:g0' 7 1 > /dev/null
    expect_fail "recreated segment" 'seg:{seg:s2}:g0' --redis-scheme bitmap --name seg
    # foreign keys at record key names (readable with --redis-whole-keys)
    k1=$(sed -n 100p "$RT_DIR/in.txt"); k2=$(sed -n 200p "$RT_DIR/in.txt")
    [ "$k1" != "$k2" ] || k2=$(sed -n 201p "$RT_DIR/in.txt")
    "$DEDUP" --redis "$U" --redis-whole-keys --name fk /dev/null || fail "creating fk"
    cli set "fk:$k1" hello > /dev/null
    expect_fail "foreign value" "fk:$k1" --redis-whole-keys --name fk
    cli del "fk:$k1" > /dev/null
    cli flushall > /dev/null
    "$DEDUP" --redis "$U" --redis-whole-keys --name fk /dev/null || fail "creating fk"
    cli rpush "fk:$k2" x > /dev/null
    expect_fail "foreign type" "fk:$k2" --redis-whole-keys --name fk
    # NAME:meta damaged: one digit changed, keys and bitmap
    for s in keys bitmap; do
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args $s) --name "dm$s" /dev/null || fail "creating dm$s"
        m=$(cli hget "dm$s:meta" shape)
        bad=$(printf '%s' "$m" | sed 's/seed=\([0-9]\)/seed=9\1/')
        [ "$bad" != "$m" ] || fail "could not damage $m"
        cli hset "dm$s:meta" shape "$bad" > /dev/null
        # shellcheck disable=SC2046
        expect_fail "damaged meta ($s)" "dm$s:meta" $(scheme_args $s) --name "dm$s"
    done
    # names of older versions: a format 1 bitmap meta (no checksum, no
    # sentinels) is still read; a keys name without meta whose keys hold 1
    # is used with the public seed, and refused (with the hint) without it
    "$DEDUP" --redis "$U" $(scheme_args bitmap) --name lg --seed 0x9E3779B97F4A7C15 "$RT_DIR/in.txt" > /dev/null ||
        fail "legacy: creating lg"
    v1=$(cli hget lg:meta shape | sed 's/^v=2/v=1/; s/ gens=[0-9]*//; s/ sum=[0-9a-f]*$//')
    cli hset lg:meta shape "$v1" > /dev/null
    "$DEDUP" --redis "$U" --redis-scheme bitmap --name lg --seed 0x9E3779B97F4A7C15 "$RT_DIR/in.txt" > "$RT_DIR/o" 2> "$RT_DIR/e" ||
        fail "legacy: a format 1 meta refused: $(cat "$RT_DIR/e")"
    [ ! -s "$RT_DIR/o" ] || fail "legacy: the format 1 filter forgot its keys"
    cli set "lk:$k1" 1 > /dev/null
    echo "$k1" | "$DEDUP" --redis "$U" --redis-whole-keys --name lk --seed 0x9E3779B97F4A7C15 > "$RT_DIR/o" ||
        fail "legacy: an old keys name with the public seed refused"
    [ ! -s "$RT_DIR/o" ] || fail "legacy: an old key holding 1 was not taken for seen"
    cli del lk:meta > /dev/null
    echo "$k1" | "$DEDUP" --redis "$U" --redis-whole-keys --name lk 2> "$RT_DIR/e" > /dev/null &&
        fail "legacy: an old key under a name with a secret seed was taken for seen"
    grep -q "0x9E3779B97F4A7C15" "$RT_DIR/e" || fail "legacy: no hint at the public seed: $(cat "$RT_DIR/e")"
    echo "damage: legacy names: format 1 bitmap read, old keys name used with the public seed" >&2
    # the seed: secret and kept; --seed must match it
    for s in keys bitmap; do
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args $s) --name "sd$s" "$RT_DIR/in.txt" > "$RT_DIR/s1" || fail "seed run 1"
        if [ $s = keys ]; then # every key committed: value 4219, no expiry left
            left=$(cli eval "local c, n = '0', 0
repeat
  local r = redis.call('SCAN', c, 'MATCH', 'sdkeys:*', 'COUNT', 1000)
  c = r[1]
  for _, k in ipairs(r[2]) do
    if k ~= 'sdkeys:meta' and (redis.call('GET', k) ~= '4219' or redis.call('PTTL', k) ~= -1) then n = n + 1 end
  end
until c == '0'
return n" 0)
            [ "$left" = 0 ] || fail "keys: $left keys left reserved (not committed) after a complete run"
        fi
        sd=$(cli hget "sd$s:meta" shape | sed -n 's/.*seed=\([0-9]*\).*/\1/p')
        [ -n "$sd" ] && [ "$sd" != 11400714819323198485 ] || fail "$s: a new name kept the public seed ($sd)"
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args $s) --name "sd$s" "$RT_DIR/in.txt" > "$RT_DIR/s2" || fail "seed run 2"
        [ ! -s "$RT_DIR/s2" ] || fail "$s: a second run (stored seed) wrote $(wc -l < "$RT_DIR/s2") records again"
        # shellcheck disable=SC2046
        expect_fail "other --seed ($s)" "seed=$sd" $(scheme_args $s) --name "sd$s" --seed 7
        # shellcheck disable=SC2046
        "$DEDUP" --redis "$U" $(scheme_args $s) --name "sd$s" --seed "$sd" "$RT_DIR/in.txt" > "$RT_DIR/s3" ||
            fail "$s: --seed equal to the stored one refused"
        echo "seed: $s name got seed $sd" >&2
    done
    ;;
*) fail "unknown part $what" ;;
esac
echo "nothing_lost $what: ok"
