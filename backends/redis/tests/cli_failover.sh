#!/bin/bash
# `dedup --redis redis-cluster://... --wait-replicas 1` while the test kills
# the master of slot 0 mid-run, on a cluster of 3 masters + 3 replicas
# created here.  Two processes, each on half of the input through a FIFO:
# first D distinct keys, then (once they are all in the cluster and the
# master is killed) the same D keys again and D fresh ones.  The run either completes after the failover
# or exits 1 naming host:port; either way no key is written twice (no key
# reported new before the kill is new again after it), and after a complete
# run every distinct key is in the output or in --uncertain.
# Needs $DEDUP.  Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
test_seed
D=${D:-30000}
start_cluster
set -- $CLUSTER_PORTS
python3 - "$SEED" "$D" "$RT_DIR" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1])); d = int(sys.argv[2]); out = sys.argv[3]
first = ["job-%d-%d" % (r.randrange(1 << 30), i) for i in range(d)]
again = first[:] + ["late-%d" % i for i in range(d)]
r.shuffle(again)
open(out + "/part1", "w").write("\n".join(first) + "\n")
open(out + "/part2", "w").write("\n".join(again) + "\n")
open(out + "/distinct", "w").write("\n".join(sorted(set(first + again))) + "\n")
PY
master=$(slot0_master "$1")
[ -n "$master" ] || fail "no master for slot 0"
seeds=""
for p in $CLUSTER_PORTS; do [ "$p" != "$master" ] && seeds="$seeds${seeds:+,}127.0.0.1:$p"; done
# two processes, each on half of each part, through its own FIFO
split -n l/2 "$RT_DIR/part1" "$RT_DIR/p1."
split -n l/2 "$RT_DIR/part2" "$RT_DIR/p2."
dps=""
for h in aa ab; do
    mkfifo "$RT_DIR/fifo.$h"
    (
        cat "$RT_DIR/p1.$h"
        i=0
        until [ -e "$RT_DIR/go" ]; do i=$((i + 1)); [ $i -gt 600 ] && exit 1; sleep 0.05; done
        cat "$RT_DIR/p2.$h"
    ) > "$RT_DIR/fifo.$h" &
    RT_PIDS="$RT_PIDS $!"
    timeout 120 "$DEDUP" --redis "redis-cluster://$seeds" --name fo --wait-replicas 1 \
        --uncertain "$RT_DIR/unc.$h" --stats -o "$RT_DIR/out.$h" "$RT_DIR/fifo.$h" 2> "$RT_DIR/err.$h" &
    dps="$dps $!"
done
# the event: every key of part 1 recorded in the cluster
total() {
    local t=0 p n
    for p in $CLUSTER_PORTS; do
        if "$REDIS_CLI" -p "$p" role 2>/dev/null | head -1 | grep -q master; then
            n=$("$REDIS_CLI" -p "$p" dbsize 2>/dev/null) && t=$((t + n))
        fi
    done
    echo $t
}
i=0
until [ "$(total)" -ge "$D" ]; do
    i=$((i + 1))
    for dp in $dps; do
        kill -0 $dp 2>/dev/null || fail "dedup ended before part 1 was recorded: $(cat "$RT_DIR"/err.*)"
    done
    [ $i -gt 600 ] && fail "part 1 was never recorded"
    sleep 0.05
done
stop_server "$master"
touch "$RT_DIR/go"
# once the replica took over, the old master comes back as its replica
other=$1; [ "$other" = "$master" ] && other=$2
await_takeover "$master" "$other"
rc=0
set -- $dps
for h in aa ab; do
    wait "$1"; r=$?; shift
    cat "$RT_DIR/err.$h" >&2
    case $r in
    0) ;;
    1) grep -q "127.0.0.1:[0-9]" "$RT_DIR/err.$h" || fail "exit 1 without naming host:port: $(cat "$RT_DIR/err.$h")"
       rc=1 ;;
    *) fail "dedup exit $r" ;;
    esac
done
touch "$RT_DIR/out.aa" "$RT_DIR/out.ab" "$RT_DIR/unc.aa" "$RT_DIR/unc.ab"
# a run that failed left -o as it was and kept its records in OUT.partial-*
cat "$RT_DIR/out.aa" "$RT_DIR/out.ab" "$RT_DIR"/out.a?.partial-* 2> /dev/null > "$RT_DIR/out"
cat "$RT_DIR/unc.aa" "$RT_DIR/unc.ab" > "$RT_DIR/unc"
[ -z "$(sort "$RT_DIR/out" | uniq -d)" ] || fail "a key was written twice: $(sort "$RT_DIR/out" | uniq -d | head -3)"
sort "$RT_DIR/out" | comm -23 - "$RT_DIR/distinct" | grep -q . && fail "wrote a key not in the input"
if [ $rc = 0 ]; then
    # (an uncertain record may be a later occurrence of a key written before)
    sort -u "$RT_DIR/out" "$RT_DIR/unc" | cmp -s - "$RT_DIR/distinct" ||
        fail "complete run: output and uncertain together miss a distinct key"
    cat "$RT_DIR"/err.* | grep -q "retries: *[1-9]" || fail "complete runs without a retry: was the master killed mid-run?"
    echo "cli_failover: completed after the failover, $(wc -l < "$RT_DIR/unc") uncertain" >&2
else
    echo "cli_failover: a process exited 1 clearly" >&2
fi
echo "cli_failover: ok"
