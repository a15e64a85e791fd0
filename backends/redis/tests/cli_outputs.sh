#!/bin/bash
# `dedup --redis`: which output kinds work, against a real redis-server.
# The first occurrences (default) and -D write what a local exact run
# writes, byte for byte, with --stats too; -c and -u (they need each key's
# count over the whole input, which a shared seen-set does not keep) and
# --keep last are refused with exit 2 and the reason, before anything is
# sent to the server.  Needs $DEDUP.  Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
test_seed
python3 - "$SEED" > "$RT_DIR/in.txt" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
for _ in range(20000):
    print("https://example.com/%d" % r.randrange(8000))
PY
P=$(free_port)
start_server "$P"
U="redis://127.0.0.1:$P"

# what works: the same bytes as a local exact run (each run a fresh name)
"$DEDUP" --mode exact "$RT_DIR/in.txt" > "$RT_DIR/first.local" || fail "local run"
"$DEDUP" --mode exact -D "$RT_DIR/in.txt" > "$RT_DIR/dups.local" || fail "local -D run"
"$DEDUP" --redis "$U" --name first "$RT_DIR/in.txt" > "$RT_DIR/first.redis" ||
    fail "--redis: exit $?"
cmp -s "$RT_DIR/first.local" "$RT_DIR/first.redis" || fail "--redis: not the local first occurrences"
"$DEDUP" --redis "$U" --name dups -D --stats "$RT_DIR/in.txt" > "$RT_DIR/dups.redis" 2> "$RT_DIR/dups.err" ||
    fail "--redis -D --stats: exit $?: $(cat "$RT_DIR/dups.err")"
cmp -s "$RT_DIR/dups.local" "$RT_DIR/dups.redis" || fail "--redis -D: not the local duplicates"
grep -q "redis" "$RT_DIR/dups.err" || fail "--redis --stats: no statistics: $(cat "$RT_DIR/dups.err")"

# what is refused: exit 2 naming why, no output, nothing sent (the db stays as it was)
before=$("$REDIS_CLI" -p "$P" dbsize)
for opt in -c --count -u --unique; do
    "$DEDUP" --redis "$U" --name counts "$opt" "$RT_DIR/in.txt" > "$RT_DIR/c.out" 2> "$RT_DIR/c.err"
    rc=$?
    [ $rc = 2 ] || fail "--redis $opt: exit $rc, not 2"
    grep -q "cannot be combined with -c/--count or -u/--unique: they need each key's count" "$RT_DIR/c.err" ||
        fail "--redis $opt: the reason is not given: $(cat "$RT_DIR/c.err")"
    grep -q "first occurrences, the default, and -D" "$RT_DIR/c.err" ||
        fail "--redis $opt: the outputs that work are not named: $(cat "$RT_DIR/c.err")"
    [ ! -s "$RT_DIR/c.out" ] || fail "--redis $opt: wrote records"
done
"$DEDUP" --redis "$U" --name counts --keep last "$RT_DIR/in.txt" > "$RT_DIR/c.out" 2> "$RT_DIR/c.err"
rc=$?
[ $rc = 2 ] && grep -q "cannot revise" "$RT_DIR/c.err" || fail "--redis --keep last: exit $rc: $(cat "$RT_DIR/c.err")"
[ "$("$REDIS_CLI" -p "$P" dbsize)" = "$before" ] || fail "a refused run wrote to the server"
echo "cli_outputs: ok"
