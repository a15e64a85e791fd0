#!/bin/bash
# `dedup --redis ... --redis-scheme module` (this project's module loaded),
# what issues 33 and 34 ask of it:
#  - a new filter gets a secret seed kept in NAME:meta (not the public one,
#    another for another name), and a later run without -n adopts it;
#  - a shard deleted under an existing NAME:meta, a key of another type at a
#    shard's name, a damaged or foreign NAME:meta: refused naming the key,
#    nothing output, the shard not recreated;
#  - the server killed mid-run (AOF with appendfsync always, restarted
#    afterwards): every distinct input key is in the first run's output, its
#    --uncertain file or the rerun's output, and none is output twice.
# Needs $DEDUP and $DEDUP_MODULE (skipped, exit 77, without the module).
# Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
if [ -z "${DEDUP_MODULE:-}" ] || [ ! -f "$DEDUP_MODULE" ]; then
    echo "SKIP: no dedup_redis.so to load (sanitized build)" >&2
    exit 77
fi
test_seed
N=50000
seq 1 "$N" | sed 's/^/k/' > "$RT_DIR/in.txt"
P=$(free_port)
start_server "$P" --loadmodule "$DEDUP_MODULE"
U="redis://127.0.0.1:$P"
cli() { "$REDIS_CLI" -p "$P" "$@"; }
run() { "$DEDUP" --redis "$U" --redis-scheme module "$@"; }

# ---- the seed: secret, kept, adopted ----
run --name m -n "$N" -p 1e-6 --shards 4 "$RT_DIR/in.txt" > "$RT_DIR/m1.out" || fail "first run"
[ "$(wc -l < "$RT_DIR/m1.out")" = "$N" ] || fail "first run: $(wc -l < "$RT_DIR/m1.out") of $N keys"
shape=$(cli HGET m:meta shape)
seed=$(echo "$shape" | sed -n 's/.* seed=\([0-9]*\) .*/\1/p')
[ -n "$seed" ] || fail "no seed in m:meta: '$shape'"
[ "$seed" != 11400714819323198485 ] || fail "m:meta keeps the public seed: '$shape'"
echo "$shape" | grep -q ' v=2 .* sum=[0-9a-f]\{16\}$' || fail "m:meta has no checksum: '$shape'"
run --name m2 -n 10 "$RT_DIR/in.txt" > /dev/null 2>&1
seed2=$(cli HGET m2:meta shape | sed -n 's/.* seed=\([0-9]*\) .*/\1/p')
[ -n "$seed2" ] && [ "$seed2" != "$seed" ] || fail "two names share the seed $seed"
n=$(run --name m "$RT_DIR/in.txt" | wc -l)
[ "$n" = 0 ] || fail "a run without -n adopting the stored seed output $n keys again"
# the digests are keyed by the stored seed: stating it explicitly finds every key
n=$(run --name m --seed "$seed" "$RT_DIR/in.txt" | wc -l)
[ "$n" = 0 ] || fail "--seed $seed (the stored one) output $n keys: the runs did not digest with it"
# dedup filter finds the items with the stored seed too
printf 'k17\nk49999\nnever-added\n' | "$DEDUP" filter query "$U/m" > "$RT_DIR/fq" 2> "$RT_DIR/e" ||
    fail "dedup filter query: $(cat "$RT_DIR/e")"
[ "$(cat "$RT_DIR/fq" | tr '\n' ' ')" = "k17 k49999 " ] ||
    fail "dedup filter query on the module filter: '$(cat "$RT_DIR/fq")' (k17 k49999 expected)"
# an explicit seed other than the stored one is refused
run --name m --seed 7 "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/e"
[ $? = 1 ] && grep -q "seed differs" "$RT_DIR/e" || fail "another --seed: $(cat "$RT_DIR/e")"

# expect_refused LABEL PATTERN: the run on m exits 1, outputs nothing and
# names PATTERN on stderr
expect_refused() {
    run --name m "$RT_DIR/in.txt" > "$RT_DIR/r.out" 2> "$RT_DIR/r.err"
    rc=$?
    [ $rc = 1 ] || fail "$1: exit $rc, not 1: $(cat "$RT_DIR/r.err")"
    [ ! -s "$RT_DIR/r.out" ] || fail "$1: $(wc -l < "$RT_DIR/r.out") keys output"
    grep -qF -- "$2" "$RT_DIR/r.err" || fail "$1: '$2' not named: $(cat "$RT_DIR/r.err")"
}

# ---- a missing shard ----
cli RENAME 'm:{m:f2}' keep > /dev/null
expect_refused "missing shard" "shard m:{m:f2} of the module filter 'm' is missing"
[ "$(cli EXISTS 'm:{m:f2}')" = 0 ] || fail "the missing shard was recreated"
# ---- a foreign key at a shard's name ----
cli SET 'm:{m:f2}' hello > /dev/null
expect_refused "foreign shard" "m:{m:f2} holds a Redis 'string'"
cli DEL 'm:{m:f2}' > /dev/null
cli RENAME keep 'm:{m:f2}' > /dev/null
n=$(run --name m "$RT_DIR/in.txt" | wc -l)
[ "$n" = 0 ] || fail "with the shard back, $n keys output again"
# ---- a damaged meta: one digit changed (the sum no longer matches) ----
cli HSET m:meta shape "$(echo "$shape" | sed 's/ items=50000 / items=50001 /')" > /dev/null
expect_refused "damaged meta" "m:meta in Redis is damaged"
cli HSET m:meta shape "$(echo "$shape" | sed 's/ sum=.*//')" > /dev/null
expect_refused "meta without its sum" "m:meta in Redis is damaged"
cli HSET m:meta shape "$shape" > /dev/null
# ---- a meta of another type ----
cli RENAME m:meta metakeep > /dev/null
cli SET m:meta x > /dev/null
expect_refused "meta of another type" "m:meta in Redis is not the module filter's metadata"
cli DEL m:meta > /dev/null
cli RENAME metakeep m:meta > /dev/null
n=$(run --name m "$RT_DIR/in.txt" | wc -l)
[ "$n" = 0 ] || fail "with the meta back, $n keys output again"
stop_server "$P"

# ---- the server killed mid-run ----
# Each trial: a fresh server (AOF, fsync always), a run over M keys (three
# batches of 8 shard commands) with --uncertain, the server killed -9 once it
# ran a random number of commands (the open's ~30, then the batches') and,
# in odd trials, started
# again at once on its AOF (the run reconnects and goes on: lost replies),
# in even ones only after the run gave up (--redis-retries 1: it fails
# mid-batch); then a rerun.  Trials alternate two by two between the Bloom
# and the cuckoo filter.  The filters are sized so a false drop is unlikely
# (-p 1e-7; the cuckoo's rate is the module's CF_ERROR_RATE): with M 20,000
# over 8 shards, about 1e-5 expected per Bloom trial and, with CF_ERROR_RATE
# 1e-8 (30-bit fingerprints, buckets of 4), about 2e-5 per cuckoo trial; a
# false drop is a key lost here.
TRIALS=${TRIALS:-50}
M=${M:-20000}
MODARGS=(--loadmodule "$DEDUP_MODULE" CF_ERROR_RATE 0.00000001 --appendonly yes --appendfsync always)
seq 1 "$M" | sed 's/^/u/' > "$RT_DIR/big.txt"
RANDOM=$((SEED % 32768))
lost_total=0
hits=0
t0=$(date +%s%N)
P=$(free_port) # one port, a fresh directory each trial
gone() { # the killed server released its port
    local i=0
    while "$REDIS_CLI" -p "$P" ping > /dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.02; i=$((i + 1)); done
}
for t in $(seq 1 "$TRIALS"); do
    start_server "$P" "${MODARGS[@]}"
    U="redis://127.0.0.1:$P"
    o="$RT_DIR/k$t"
    count() { "$REDIS_CLI" -p "$P" info stats 2>/dev/null | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p' | tr -d '\r'; }
    K=$(($(count) + 1 + RANDOM % 36)) # commands run before the kill
    delay=$((RANDOM % 4))
    filter=bloom
    [ $(((t + 1) / 2 % 2)) = 0 ] && filter=cuckoo
    retries=()
    [ $((t % 2)) = 0 ] && retries=(--redis-retries 1)
    "$DEDUP" --redis "$U" --redis-scheme module --redis-filter $filter --name kt -n "$M" \
        -p 1e-7 --shards 8 "${retries[@]}" --uncertain "$o.unc" "$RT_DIR/big.txt" > "$o.out" 2> "$o.err" &
    pd=$!
    i=0
    while kill -0 $pd 2>/dev/null && [ $i -lt 3000 ]; do
        n=$(count) && [ -n "$n" ] && [ "$n" -lt "$K" ] || break
        i=$((i + 1))
    done
    sleep "$(printf '0.%03d' "$delay")"
    on=0
    kill -0 $pd 2>/dev/null && on=1
    hits=$((hits + on))
    stop_server "$P"
    if [ $((t % 2)) = 1 ]; then
        gone
        start_server "$P" "${MODARGS[@]}"
        wait $pd
        rc=$?
        [ $rc = 0 ] || fail "trial $t: the run did not survive a restarted server: $(cat "$o.err")"
    else
        wait $pd
        rc=$?
        # a run seen alive just before the kill may still have finished
        # before the kill landed (exit 0); one that was not must exit 0
        { [ $rc = 0 ] || { [ $rc = 1 ] && [ $on = 1 ]; }; } ||
            fail "trial $t: exit $rc after the server was killed (run on: $on): $(cat "$o.err")"
        start_server "$P" "${MODARGS[@]}"
    fi
    "$DEDUP" --redis "$U" --redis-scheme module --name kt "$RT_DIR/big.txt" > "$o.re" 2> "$o.reerr" ||
        fail "trial $t: rerun: $(cat "$o.reerr"; head -3 "$o.err")"
    stop_server "$P"
    touch "$o.unc"
    sort "$o.out" "$o.re" > "$o.outs"
    twice=$(uniq -d "$o.outs" | wc -l)
    [ "$twice" = 0 ] || fail "trial $t ($filter): $twice keys output twice"
    sort -u "$o.outs" "$o.unc" > "$o.all"
    lost=$(( M - $(wc -l < "$o.all") ))
    echo "trial $t ($filter, killed at command $K + $delay ms, run on: $on): exit $rc, $(wc -l < "$o.out") out, $(wc -l < "$o.unc") uncertain, $(wc -l < "$o.re") on rerun, $lost lost" >&2
    lost_total=$((lost_total + lost))
    if [ "$lost" != 0 ]; then
        sort "$RT_DIR/big.txt" | comm -23 - "$o.all" | head -5 > "$o.lost"
        fail "trial $t ($filter): $lost keys neither output nor listed (first ones: $(tr '\n' ' ' < "$o.lost")): $(head -3 "$o.err")"
    fi
    gone
    rm -rf "$o".* "${RT_DIR:?}/$P"
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "cli_module: ok ($TRIALS kill trials in $ms ms, $((ms / (TRIALS > 0 ? TRIALS : 1))) ms each, $hits while the run was on, $lost_total lost)" >&2
[ "$TRIALS" = 0 ] || [ "$hits" -gt 0 ] || fail "no kill landed while a run was on"
