#!/bin/bash
# `dedup --redis` against real servers started here: several processes on
# input halves (keys: every distinct key exactly once; bitmap: never a
# repeat, false drops within the binomial bound, and one process decides
# exactly as `--mode blocked` does locally), TTL commits, lost replies to
# --uncertain, and the failures: unreachable at start, server stopped
# mid-run, wrong password, metadata mismatch, a key of the wrong type.
# Needs $DEDUP.  Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
test_seed
N=${N:-200000}
python3 - "$SEED" "$N" > "$RT_DIR/in.txt" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
n = int(sys.argv[2])
for _ in range(n):
    print("https://example.com/%d" % r.randrange(n // 2))
PY
sort -u "$RT_DIR/in.txt" > "$RT_DIR/distinct.txt"
D=$(wc -l < "$RT_DIR/distinct.txt")
split -n l/2 "$RT_DIR/in.txt" "$RT_DIR/half."
P=$(free_port)
start_server "$P"
U="redis://127.0.0.1:$P"

# two processes on the halves at once
two() { # label args...
    local label=$1; shift
    "$DEDUP" --redis "$U" "$@" "$RT_DIR/half.aa" > "$RT_DIR/$label.a" &
    local pa=$!
    "$DEDUP" --redis "$U" "$@" "$RT_DIR/half.ab" > "$RT_DIR/$label.b" || fail "$label: second process"
    wait $pa || fail "$label: first process"
    cat "$RT_DIR/$label.a" "$RT_DIR/$label.b" | sort > "$RT_DIR/$label.all"
}
two keys --name k2
cmp -s "$RT_DIR/keys.all" "$RT_DIR/distinct.txt" || fail "keys: the two outputs are not every distinct key exactly once"

two bitmap --name b2 --redis-scheme bitmap -n "$D" -p 0.01
[ -z "$(uniq -d "$RT_DIR/bitmap.all")" ] || fail "bitmap: a key written twice"
dropped=$(comm -23 "$RT_DIR/distinct.txt" "$RT_DIR/bitmap.all" | wc -l)
FPX="$DEDUP_SRC/tests/cli/lib/fp_expect.py" # the filter's rate summed over its fill
read -r mean _ < <(python3 "$FPX" blocked $("$DEDUP" calc -n "$D" -p 1% -t blocked --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["bits"], j["k"])') "$D")
python3 "$FPX" check "bitmap: false drops of $D distinct keys" "$dropped" "$mean" || fail "bitmap: $dropped false drops"
comm -13 "$RT_DIR/distinct.txt" "$RT_DIR/bitmap.all" | grep -q . && fail "bitmap: wrote a key not in the input"

# one process: the same decisions as the local blocked filter of the same
# size and seed (--seed: a new name otherwise takes a secret one)
"$DEDUP" --redis "$U" --name b1 --redis-scheme bitmap -n "$D" -p 0.01 --seed 12345 "$RT_DIR/in.txt" > "$RT_DIR/b1.out" || fail "bitmap run"
"$DEDUP" --mode blocked -n "$D" -p 0.01 --seed 12345 "$RT_DIR/in.txt" > "$RT_DIR/local.out" || fail "local run"
cmp -s "$RT_DIR/b1.out" "$RT_DIR/local.out" || fail "bitmap in Redis and --mode blocked decide differently"

# module scheme (the project's module loaded): two processes on the halves
# with -n and no --shards agree through NAME:meta (bloom and cuckoo); a run
# naming no shape agrees too; --shards or -n/-p other than stored: refused
if [ -n "${DEDUP_MODULE:-}" ]; then
    M=$(free_port)
    start_server "$M" --loadmodule "$DEDUP_MODULE"
    for f in bloom cuckoo; do
        U="redis://127.0.0.1:$M" two "m$f" --name "m$f" --redis-scheme module --redis-filter $f -n "$D" -p 0.01
        [ -z "$(uniq -d "$RT_DIR/m$f.all")" ] || fail "module $f: a key written twice"
        dropped=$(comm -23 "$RT_DIR/distinct.txt" "$RT_DIR/m$f.all" | wc -l)
        dbg=$("$REDIS_CLI" -p "$M" "${f:0:1}F.DEBUG" "m$f:{m$f:f0}" | tr '\n' ' ') # one shard; its shape
        if [ $f = bloom ]; then shape="bloom $(sed 's/.* bits:\([0-9]*\) hashes:\([0-9]*\).*/\1 \2/' <<< "$dbg")"
        else shape="cuckoo $(sed 's/.*bktsize:\([0-9]*\) buckets:\([0-9]*\).*/\1 \2/' <<< "$dbg") p=0.01"; fi
        read -r mean _ < <(python3 "$FPX" $shape "$D")
        python3 -c "import sys; sys.exit(not float(sys.argv[1]) <= 0.0101)" "$(python3 "$FPX" at "$D" $shape 0)" ||
            fail "module $f: a shard shaped '$shape' passes 1% at $D keys"
        python3 "$FPX" check "module $f: false drops of $D distinct keys" "$dropped" "$mean" || fail "module $f: $dropped false drops"
        n=$("$DEDUP" --redis "redis://127.0.0.1:$M" --name "m$f" --redis-scheme module --stats "$RT_DIR/in.txt" 2> "$RT_DIR/m$f.err" | wc -l)
        [ "$n" = 0 ] || fail "module $f: a run without -n found $n new keys: $(cat "$RT_DIR/m$f.err")"
        grep -q "redis filter:   $f, $D keys at 0.01, 1 shard(s)" "$RT_DIR/m$f.err" || fail "module $f: shape: $(cat "$RT_DIR/m$f.err")"
        "$DEDUP" --redis "redis://127.0.0.1:$M" --name "m$f" --redis-scheme module --shards 3 "$RT_DIR/in.txt" > "$RT_DIR/mm.out" 2> "$RT_DIR/mm.err"
        [ $? = 1 ] && [ ! -s "$RT_DIR/mm.out" ] && grep -q "shards=1 " "$RT_DIR/mm.err" && grep -q "shards=3 " "$RT_DIR/mm.err" ||
            fail "module $f: --shards mismatch: $(cat "$RT_DIR/mm.err")"
        "$DEDUP" --redis "redis://127.0.0.1:$M" --name "m$f" --redis-scheme module -n "$D" -p 0.02 "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/mm.err"
        [ $? = 1 ] && grep -q "fpr=0.01 " "$RT_DIR/mm.err" && grep -q "fpr=0.02 " "$RT_DIR/mm.err" ||
            fail "module $f: -p mismatch: $(cat "$RT_DIR/mm.err")"
    done
    "$DEDUP" --redis "redis://127.0.0.1:$M" --name mbloom --redis-scheme module --redis-filter cuckoo "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/mm.err"
    [ $? = 1 ] && grep -q "filter=bloom" "$RT_DIR/mm.err" || fail "module: filter mismatch: $(cat "$RT_DIR/mm.err")"
    "$DEDUP" --redis "redis://127.0.0.1:$M" --name none --redis-scheme module "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/mm.err"
    [ $? = 1 ] && grep -q "no module filter named 'none'" "$RT_DIR/mm.err" || fail "module: absent: $(cat "$RT_DIR/mm.err")"
    "$DEDUP" --redis "redis://127.0.0.1:$M" --redis-scheme module --redis-filter cuckoo --ttl 1h -n 10 "$RT_DIR/in.txt" 2> "$RT_DIR/mm.err"
    [ $? = 2 ] || fail "module: cuckoo with --ttl is a usage error"
fi

# keys with a TTL: committed keys
"$DEDUP" --redis "$U" --name ttl --ttl 1h --reserve 5s "$RT_DIR/half.aa" > /dev/null || fail "ttl run"
# The smallest PTTL of every key of the run, taken inside the server: the key
# names hold binary digests, which a shell cannot pass back to redis-cli
# intact (a digest byte 0x0a split the name: PTTL -2 of a key that is not).
t=$("$REDIS_CLI" -p "$P" eval "local c, m = '0', -3
repeat
  local r = redis.call('SCAN', c, 'MATCH', 'ttl:*', 'COUNT', 1000)
  c = r[1]
  for _, k in ipairs(r[2]) do
    if k ~= 'ttl:meta' then
      local t = redis.call('PTTL', k)
      if m == -3 or t < m then m = t end
    end
  end
until c == '0'
return m" 0)
[ "$t" -gt 3000000 ] || fail "a committed key's PTTL is $t ms, not about 1h (the smallest of the run's keys)"

# a metadata mismatch: exit 1 naming both shapes, before any output
"$DEDUP" --redis "$U" --name b1 --redis-scheme bitmap -n $((D * 2)) "$RT_DIR/in.txt" > "$RT_DIR/mm.out" 2> "$RT_DIR/mm.err"
[ $? = 1 ] || fail "mismatch: exit status"
[ ! -s "$RT_DIR/mm.out" ] && grep -q "this run asks" "$RT_DIR/mm.err" || fail "mismatch: $(cat "$RT_DIR/mm.err")"

# a key of the wrong type where a segment lives
"$REDIS_CLI" -p "$P" rpush 'wt:{wt:s0}:g0' x > /dev/null
"$DEDUP" --redis "$U" --name wt --redis-scheme bitmap -n 1000 "$RT_DIR/half.aa" > /dev/null 2> "$RT_DIR/wt.err"
[ $? = 1 ] && grep -q WRONGTYPE "$RT_DIR/wt.err" || fail "wrong type: $(cat "$RT_DIR/wt.err")"

# unreachable at start: exit 1, the address named, -o not even created
"$DEDUP" --redis redis://127.0.0.1:1 -o "$RT_DIR/none.out" "$RT_DIR/in.txt" 2> "$RT_DIR/ur.err"
[ $? = 1 ] && grep -q "127.0.0.1:1" "$RT_DIR/ur.err" && [ ! -e "$RT_DIR/none.out" ] || fail "unreachable: $(cat "$RT_DIR/ur.err")"
"$DEDUP" --redis "redis://127.0.0.1:$P/x" "$RT_DIR/in.txt" 2> "$RT_DIR/url.err"
[ $? = 2 ] || fail "a bad URL is a usage error"

# passwords: a server with a default password and an ACL user
A=$(free_port)
RT_AUTH=sekret start_server "$A" --requirepass sekret
"$REDIS_CLI" -p "$A" -a sekret --no-auth-warning acl setuser alice on '>wonder' '~*' '&*' '+@all' > /dev/null
"$DEDUP" --redis "redis://:wrong@127.0.0.1:$A" "$RT_DIR/half.aa" > "$RT_DIR/pw.out" 2> "$RT_DIR/pw.err"
[ $? = 1 ] && [ ! -s "$RT_DIR/pw.out" ] && grep -q "refused AUTH" "$RT_DIR/pw.err" || fail "wrong password: $(cat "$RT_DIR/pw.err")"
"$DEDUP" --redis "redis://127.0.0.1:$A" "$RT_DIR/half.aa" > /dev/null 2> "$RT_DIR/nopw.err"
[ $? = 1 ] && grep -q "NOAUTH" "$RT_DIR/nopw.err" || fail "no password: $(cat "$RT_DIR/nopw.err")"
"$DEDUP" --redis "redis://:sekret@127.0.0.1:$A/3" "$RT_DIR/half.aa" | sort > "$RT_DIR/pw1" || fail "right password"
"$DEDUP" --redis "redis://alice:wonder@127.0.0.1:$A/3" "$RT_DIR/half.aa" > "$RT_DIR/pw2" || fail "ACL user"
[ -s "$RT_DIR/pw1" ] && [ ! -s "$RT_DIR/pw2" ] || fail "db 3 as user alice should hold every key of the first run"

# lost replies through a proxy: dropped, counted, written to --uncertain
Q=$(free_port)
python3 "$(dirname "$0")/proxy.py" "$Q" "$P" 20000 "$RT_DIR/proxy.ready" &
RT_PIDS="$RT_PIDS $!"
i=0
until [ -e "$RT_DIR/proxy.ready" ]; do i=$((i + 1)); [ $i -gt 100 ] && fail "proxy"; sleep 0.1; done
"$DEDUP" --redis "redis://127.0.0.1:$Q" --name lost --uncertain "$RT_DIR/unc.txt" --stats=json \
    "$RT_DIR/distinct.txt" > "$RT_DIR/lost.out" 2> "$RT_DIR/lost.err" || fail "lost: $(cat "$RT_DIR/lost.err")"
u=$(wc -l < "$RT_DIR/unc.txt")
grep -q "\"uncertain\":$u}" "$RT_DIR/lost.err" || fail "lost: stats do not count $u uncertain: $(cat "$RT_DIR/lost.err")"
[ "$u" -gt 0 ] || fail "lost: no reply was lost"
cat "$RT_DIR/lost.out" "$RT_DIR/unc.txt" | sort | cmp -s - "$RT_DIR/distinct.txt" || fail "lost: output + uncertain is not every key once"
echo "lost: $u uncertain records written aside" >&2

# a batch that fails (its replies cut, the server gone for good, no retry):
# every record of it not written out is in --uncertain -- the server ran
# the batch's commands, so a rerun straight to it takes their keys for seen
Q2=$(free_port)
python3 "$(dirname "$0")/proxy.py" "$Q2" "$P" 20000 "$RT_DIR/proxy2.ready" gone &
RT_PIDS="$RT_PIDS $!"
i=0
until [ -e "$RT_DIR/proxy2.ready" ]; do i=$((i + 1)); [ $i -gt 100 ] && fail "proxy 2"; sleep 0.1; done
"$DEDUP" --redis "redis://127.0.0.1:$Q2" --name failed --redis-retries 0 --uncertain "$RT_DIR/unc2.txt" \
    "$RT_DIR/distinct.txt" > "$RT_DIR/failed.out" 2> "$RT_DIR/failed.err"
[ $? = 1 ] && grep -q "were not written out" "$RT_DIR/failed.err" && [ -e "$RT_DIR/proxy2.ready.cut" ] ||
    fail "failed batch: exit status or message: $(cat "$RT_DIR/failed.err")"
[ -s "$RT_DIR/unc2.txt" ] || fail "failed batch: nothing listed in --uncertain"
"$DEDUP" --redis "$U" --name failed "$RT_DIR/distinct.txt" > "$RT_DIR/failed2.out" 2> "$RT_DIR/failed2.err" ||
    fail "failed batch: the rerun: $(cat "$RT_DIR/failed2.err")"
# (a listed record whose command never left the client is written by the
# rerun: listed means "may be in Redis")
sort -u "$RT_DIR/failed.out" "$RT_DIR/unc2.txt" "$RT_DIR/failed2.out" | cmp -s - "$RT_DIR/distinct.txt" ||
    fail "failed batch: $(sort -u "$RT_DIR/failed.out" "$RT_DIR/unc2.txt" "$RT_DIR/failed2.out" | comm -13 - "$RT_DIR/distinct.txt" | wc -l) keys neither written nor listed"
[ -z "$(sort "$RT_DIR/failed.out" "$RT_DIR/failed2.out" | uniq -d)" ] || fail "failed batch: a key written twice"
echo "failed batch: $(wc -l < "$RT_DIR/unc2.txt") records listed, $(wc -l < "$RT_DIR/failed2.out") written by the rerun" >&2

# the server stopped mid-run: exit 1 naming it; -o is left as it was (absent here)
# and what was written is kept beside it, named, since its keys are in Redis
S=$(free_port)
start_server "$S"
mkfifo "$RT_DIR/fifo"
# the second part only once the server is stopped (an event, not a time)
( cat "$RT_DIR/distinct.txt"
  i=0
  until [ -e "$RT_DIR/stopped" ]; do i=$((i + 1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done
  sed 's/^/b/' "$RT_DIR/distinct.txt" ) > "$RT_DIR/fifo" &
RT_PIDS="$RT_PIDS $!"
# two reconnect attempts, not the default 8 (whose backoff adds up to ~7 s
# here): the attempts run out the same way
"$DEDUP" --redis "redis://127.0.0.1:$S" --redis-retries 2 -o "$RT_DIR/mid.out" "$RT_DIR/fifo" 2> "$RT_DIR/mid.err" &
dp=$!
# every key of the first part decided (the reader then waits on the FIFO)
i=0
until [ "$("$REDIS_CLI" -p "$S" dbsize 2>/dev/null || echo 0)" -ge "$D" ]; do
    i=$((i + 1)); [ $i -gt 600 ] && fail "server stopped: the first part was never decided"; sleep 0.1
done
stop_server "$S"
touch "$RT_DIR/stopped"
wait $dp
rc=$?
[ $rc = 1 ] && grep -q "127.0.0.1:$S" "$RT_DIR/mid.err" || fail "server stopped: exit $rc: $(cat "$RT_DIR/mid.err")"
[ ! -e "$RT_DIR/mid.out" ] || fail "server stopped: -o was replaced by an incomplete output"
[ "$(cat "$RT_DIR"/mid.out.partial-* | wc -l)" -ge "$D" ] || fail "server stopped: the records decided before were not all kept"
grep -q "mid.out.partial-" "$RT_DIR/mid.err" || fail "server stopped: the kept records' file is not named: $(cat "$RT_DIR/mid.err")"
echo "cli_dedup: ok"
