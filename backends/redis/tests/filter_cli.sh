#!/bin/bash
# `dedup filter` on Redis filters: create/add/query/del/info on
# redis://host:port/NAME, copy to and from a local blocked filter file (the
# two answer every query alike), a size mismatch refused naming both shapes.
# Needs $DEDUP (the built tool).
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
P=$(free_port)
start_server "$P"
U="redis://127.0.0.1:$P/5/f"
$DEDUP filter create "$U" -n 20000 -p 0.01 || fail "create"
seq 1 10000 | $DEDUP filter add "$U" || fail "add"
n=$(seq 1 10000 | $DEDUP filter query "$U" -c) || fail "query"
[ "$n" = 10000 ] || fail "query found $n of 10000 keys added"
fp=$(seq 10001 30000 | $DEDUP filter query "$U" -c)
[ "${fp:-0}" -lt 400 ] || fail "$fp of 20000 fresh keys present (1% filter)"
$DEDUP filter query "$U" no-such-key >/dev/null && fail "query of an absent key exits 0"
$DEDUP filter info "$U" --json > "$RT_DIR/info.json" || fail "info"
grep -q '"scheme":"bitmap"' "$RT_DIR/info.json" || fail "info"
python3 "$DEDUP_SRC/tests/cli/lib/strict_json.py" "$RT_DIR/info.json" > /dev/null || fail "info --json is not strict JSON"
# to a file and back: the same answers
$DEDUP filter copy "$U" "$RT_DIR/f.dedup" || fail "copy from Redis"
seq 1 30000 | $DEDUP filter query "$RT_DIR/f.dedup" > "$RT_DIR/local.txt"
seq 1 30000 | $DEDUP filter query "$U" > "$RT_DIR/remote.txt"
cmp -s "$RT_DIR/local.txt" "$RT_DIR/remote.txt" || fail "the copy answers differently"
$DEDUP filter copy "$RT_DIR/f.dedup" "redis://127.0.0.1:$P/g" || fail "copy to Redis"
seq 1 30000 | $DEDUP filter query "redis://127.0.0.1:$P/g" > "$RT_DIR/g.txt"
cmp -s "$RT_DIR/local.txt" "$RT_DIR/g.txt" || fail "the copy back answers differently"
# a local blocked filter copied in
# the public seed: a Redis filter query without --seed asks for it (a new
# file otherwise gets a secret seed of its own)
$DEDUP filter create "$RT_DIR/b.dedup" -t blocked -n 5000 --seed 0x9e3779b97f4a7c15 || fail "local create"
seq 1 3000 | $DEDUP filter add "$RT_DIR/b.dedup"
$DEDUP filter copy "$RT_DIR/b.dedup" "redis://127.0.0.1:$P/b" || fail "copy local"
a=$(seq 1 9000 | $DEDUP filter query "$RT_DIR/b.dedup" -c)
b=$(seq 1 9000 | $DEDUP filter query "redis://127.0.0.1:$P/b" -c)
[ "$a" = "$b" ] || fail "local $a vs Redis $b"
# mismatched size: exit 1 naming both shapes
$DEDUP filter create "$U" -n 40000 2>"$RT_DIR/err" && fail "mismatch accepted"
grep -q "bits=" "$RT_DIR/err" && grep -q "this run asks" "$RT_DIR/err" || fail "mismatch message: $(cat "$RT_DIR/err")"
# no such filter; unreachable server
$DEDUP filter query "redis://127.0.0.1:$P/none" x 2>"$RT_DIR/err2"; [ $? = 2 ] || fail "absent filter: query errors exit 2"
grep -q "no bitmap filter named 'none'" "$RT_DIR/err2" || fail "absent message: $(cat "$RT_DIR/err2")"
$DEDUP filter info "redis://127.0.0.1:1/x" 2>"$RT_DIR/err3"; [ $? = 1 ] || fail "unreachable"
grep -q "127.0.0.1:1" "$RT_DIR/err3" || fail "unreachable message: $(cat "$RT_DIR/err3")"
# a bitmap filter with a TTL (generations), copied both ways: to a file the
# union of its live generations (every key recorded so far present), into
# Redis the current generation (present, and expiring)
# (one --seed for both: a file is copied into a filter of the same seed only)
$DEDUP filter create "$RT_DIR/t0.dedup" -t blocked -n 20000 -p 0.01 2>/dev/null || fail "local create"
seq 1 5000 | sed 's/^/t/' | $DEDUP --redis "redis://127.0.0.1:$P/7" --name tt --redis-scheme bitmap --ttl 1h -n 20000 -p 0.01 --seed 12345 > /dev/null || fail "ttl bitmap run"
$DEDUP filter copy "redis://127.0.0.1:$P/7/tt" "$RT_DIR/tt.dedup" 2> "$RT_DIR/tt.err" || fail "copy a TTL filter from Redis: $(cat "$RT_DIR/tt.err")"
grep -q "union of its live generations" "$RT_DIR/tt.err" || fail "copy from a TTL filter does not say what the file is: $(cat "$RT_DIR/tt.err")"
n=$(seq 1 5000 | sed 's/^/t/' | $DEDUP filter query "$RT_DIR/tt.dedup" -c)
[ "$n" = 5000 ] || fail "the union holds $n of the 5000 keys recorded"
seq 1 5000 | sed 's/^/t/' | $DEDUP --redis "redis://127.0.0.1:$P/7" --name tu --redis-scheme bitmap --ttl 1h -n 20000 -p 0.01 --seed 12345 /dev/null || fail "ttl bitmap create"
$DEDUP filter copy "$RT_DIR/tt.dedup" "redis://127.0.0.1:$P/7/tu" 2> "$RT_DIR/tu.err" || fail "copy into a TTL filter: $(cat "$RT_DIR/tu.err")"
grep -q "forgotten one TTL from now" "$RT_DIR/tu.err" || fail "copy into a TTL filter does not say what it did: $(cat "$RT_DIR/tu.err")"
n=$(seq 1 5000 | sed 's/^/t/' | $DEDUP filter query "redis://127.0.0.1:$P/7/tu" -c)
[ "$n" = 5000 ] || fail "the TTL filter copied into holds $n of 5000 keys"
ttl=$("$REDIS_CLI" -p "$P" -n 7 eval "local m = -3
for _, k in ipairs(redis.call('KEYS', 'tu:{*')) do m = redis.call('PTTL', k) end
return m" 0)
[ "$ttl" -gt 3000000 ] || fail "the generation copied into has PTTL $ttl, not about 1h"
$DEDUP filter copy "$RT_DIR/b.dedup" "redis://127.0.0.1:$P/7/tu" 2> "$RT_DIR/tv.err" && fail "a file of another shape copied into a TTL filter"
grep -qE "bits=|seed=" "$RT_DIR/tv.err" || fail "shape mismatch message: $(cat "$RT_DIR/tv.err")"

# the module scheme's cuckoo filter: create, add, query, del (no -t after
# create: NAME:meta says what it is), mismatches refused naming both
if [ -n "${DEDUP_MODULE:-}" ]; then
    M=$(free_port)
    start_server "$M" --loadmodule "$DEDUP_MODULE"
    C="redis://127.0.0.1:$M/c"
    $DEDUP filter create "$C" -t cuckoo -n 20000 || fail "cuckoo create"
    seq 1 10000 | $DEDUP filter add "$C" || fail "cuckoo add"
    n=$(seq 1 10000 | $DEDUP filter query "$C" -c)
    [ "$n" = 10000 ] || fail "cuckoo: query found $n of 10000 keys added"
    $DEDUP filter info "$C" --json | grep -q '"filter":"cuckoo"' || fail "cuckoo info: $($DEDUP filter info "$C" --json)"
    seq 1 5000 | $DEDUP filter del "$C" || fail "cuckoo del"
    n=$(seq 1 5000 | $DEDUP filter query "$C" -c)
    [ "${n:-0}" -lt 100 ] || fail "cuckoo: $n of 5000 deleted keys still present"
    n=$(seq 5001 10000 | $DEDUP filter query "$C" -c)
    [ "$n" = 5000 ] || fail "cuckoo: $n of the 5000 keys kept present (false negatives after del)"
    $DEDUP filter del "$C" never-added 2> "$RT_DIR/ce.err"; [ $? = 1 ] || fail "del of an absent key: exit 1"
    grep -q "not in" "$RT_DIR/ce.err" || fail "del absent message: $(cat "$RT_DIR/ce.err")"
    $DEDUP filter create "$C" -t cuckoo -n 40000 2> "$RT_DIR/ce.err" && fail "cuckoo: -n mismatch accepted"
    grep -q "items=20000" "$RT_DIR/ce.err" && grep -q "items=40000" "$RT_DIR/ce.err" || fail "cuckoo -n mismatch: $(cat "$RT_DIR/ce.err")"
    $DEDUP filter query "$C" --shards 4 1 2> "$RT_DIR/ce.err"; [ $? = 2 ] || fail "cuckoo: --shards mismatch exit"
    grep -q "shards=1 " "$RT_DIR/ce.err" && grep -q "shards=4 " "$RT_DIR/ce.err" || fail "cuckoo --shards mismatch: $(cat "$RT_DIR/ce.err")"
    $DEDUP filter create "redis://127.0.0.1:$M/bf" -t module -n 1000 || fail "module bloom create"
    $DEDUP filter del "redis://127.0.0.1:$M/bf" 1 2> "$RT_DIR/ce.err"; [ $? = 1 ] || fail "del on a Bloom filter: exit"
    grep -q "cannot delete" "$RT_DIR/ce.err" || fail "del on a Bloom filter: $(cat "$RT_DIR/ce.err")"
    $DEDUP filter del "$U" 1 2> "$RT_DIR/ce.err"; [ $? = 1 ] && grep -q "cannot delete" "$RT_DIR/ce.err" || fail "del on a bitmap filter: $(cat "$RT_DIR/ce.err")"
fi
echo "filter_cli: ok"
