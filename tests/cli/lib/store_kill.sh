# Shared by tests/cli/store_kill_*.sh: kill -9 at random instants.
# store_kill_chains NAME TARGET KILLS ARGS...: chains until TARGET runs were
# really killed mid-way (at most 3 x TARGET / KILLS chains): a fresh store
# (so the first kills fall in its creation too), KILLS runs of dedup ARGS
# over one input each sent SIGKILL at an instant drawn from the test seed
# (a run may end first), then one run to the end.  Asserted (man page,
# --sync):
#  - every run after a kill opens the store (exit 0 for the last one);
#  - the union of the outputs' whole lines is exactly the distinct input:
#    nothing lost, nothing invented;
#  - a record is written again by a later run only when the kill fell
#    between the write of its batch's output and the commit of the batch's
#    keys: at most one batch (8192 records) per kill.
# STORE in ARGS is replaced by the chain's store directory.
store_kill_chains() {
    local name=$1 target=$2 kills=$3
    shift 3
    local n distinct
    n=$(sized 40000 2)
    python3 - "$SEED" "$n" "$T/in" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
n = int(sys.argv[2])
with open(sys.argv[3], "w") as f:
    for _ in range(n):
        k = r.randrange(n // 2)
        f.write("rec/%d/%s\n" % (k, "y" * (k % 23)))
PY
    awk '!s[$0]++' "$T/in" | sort > "$T/ref"
    distinct=$(wc -l < "$T/ref")
    # how long one whole run takes here: the kills fall in [0, 1.3 x that]
    local t0 t1 span
    rm -rf "$T/probe"
    t0=$(date +%s%N)
    "$DEDUP" "${@//STORE/$T/probe}" "$T/in" > /dev/null 2>&1 || fail "$name: a plain run failed"
    t1=$(date +%s%N)
    span=$(( (t1 - t0) / 1000000 + 10 ))
    echo "$name: $target kills in chains of $kills, input $n lines ($distinct distinct), kills within ${span} ms"
    local r=$SEED c=0 k killed=0 ran_out=0 repeats_max=0
    while [ $killed -lt "$target" ] && [ $c -lt $((3 * target / kills + 1)) ]; do
        c=$((c + 1))
        local d="$T/st_$c"
        rm -rf "$d" "$d".dedup-new.* # a fresh store, also when a test runs several modes
        rm -f "$T"/o_*
        for k in $(seq "$kills"); do
            r=$(( (r * 1103515245 + 12345) % 2147483648 ))
            local ms=$(( r % span ))
            "$DEDUP" "${@//STORE/$d}" "$T/in" > "$T/o_$k" 2> "$T/e_$k" &
            local pid=$!
            sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
            if kill -9 $pid 2>/dev/null; then killed=$((killed + 1)); else ran_out=$((ran_out + 1)); fi
            wait $pid 2>/dev/null
            local rc=$?
            if [ $rc -ne 137 ] && [ $rc -ne 0 ]; then
                fail "$name chain $c run $k (kill at $ms ms): exit $rc: $(head -c 300 "$T/e_$k")"
            fi
        done
        "$DEDUP" "${@//STORE/$d}" "$T/in" > "$T/o_last" 2> "$T/e_last"
        local rc=$?
        check "$name chain $c: the run after $kills kills opens the store (exit $rc: $(head -c 300 "$T/e_last"))" test $rc -eq 0
        # whole lines only: a line cut by the kill was not written out
        python3 - "$T/ref" "$T"/o_* > "$T/verdict" <<'PY'
import sys
ref = set(open(sys.argv[1], "rb").read().splitlines())
seen, repeats, extra = {}, 0, 0
for p in sys.argv[2:]:
    d = open(p, "rb").read()
    for line in d[:d.rfind(b"\n") + 1].splitlines():
        if line in seen:
            repeats += 1
        elif line not in ref:
            extra += 1
        seen[line] = 1
missing = len(ref - set(seen))
print(missing, repeats, extra)
PY
        local missing repeats extra
        read -r missing repeats extra < "$T/verdict"
        check "$name chain $c: no record lost ($missing of $distinct missing from the union)" test "$missing" -eq 0
        check "$name chain $c: nothing written that is not in the input ($extra)" test "$extra" -eq 0
        check "$name chain $c: at most one batch written again per kill ($repeats over $kills kills)" \
            test "$repeats" -le $((kills * 8192))
        [ "$repeats" -gt "$repeats_max" ] && repeats_max=$repeats
    done
    echo "$name: $killed runs killed in $c chains, $ran_out ended before their kill; most records written again in a chain: $repeats_max"
    check "$name: $target runs killed mid-way ($killed)" test $killed -ge "$target"
}
# kill_target: 50 kills per mode in an optimised build (never fewer);
# under a sanitizer DEDUP_KILL_TESTS, default 20.
kill_target() {
    if [ -n "${DEDUP_SANITIZER:-}" ]; then
        echo "${DEDUP_KILL_TESTS:-20}"
    elif [ "${DEDUP_KILL_TESTS:-50}" -gt 50 ]; then
        echo "$DEDUP_KILL_TESTS"
    else
        echo 50
    fi
}
# first_run_kills N ARGS...: N fresh stores, the first run of each sent
# SIGKILL within its first 80 ms (while RocksDB creates the store); the run
# after it must open the store (a half-made DIR was refused for ever) and
# leave no creation directory beside it.
first_run_kills() {
    local n=$1 i r=$((SEED + 7)) ms
    shift
    seq 1 20000 > "$T/first_in"
    for i in $(seq "$n"); do
        r=$(( (r * 1103515245 + 12345) % 2147483648 ))
        ms=$(( r % 80 ))
        local d="$T/first_$i"
        "$DEDUP" "${@//STORE/$d}" "$T/first_in" > /dev/null 2>&1 &
        local pid=$!
        sleep "0.0$(printf '%02d' "$ms")"
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        "$DEDUP" "${@//STORE/$d}" "$T/first_in" > "$T/first_out" 2> "$T/first_err"
        local rc=$?
        check "first run killed at $ms ms: the next run opens the store (exit $rc: $(head -c 200 "$T/first_err"))" test $rc -eq 0
        check "... and leaves no creation directory beside it" test -z "$(ls -d "$d".dedup-new.* 2>/dev/null)"
    done
}
