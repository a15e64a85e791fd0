#!/bin/bash
# `dedup filter` on Redis filters: create/add/query/info on
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
$DEDUP filter info "$U" --json | grep -q '"scheme":"bitmap"' || fail "info"
# to a file and back: the same answers
$DEDUP filter copy "$U" "$RT_DIR/f.dedup" || fail "copy from Redis"
seq 1 30000 | $DEDUP filter query "$RT_DIR/f.dedup" > "$RT_DIR/local.txt"
seq 1 30000 | $DEDUP filter query "$U" > "$RT_DIR/remote.txt"
cmp -s "$RT_DIR/local.txt" "$RT_DIR/remote.txt" || fail "the copy answers differently"
$DEDUP filter copy "$RT_DIR/f.dedup" "redis://127.0.0.1:$P/g" || fail "copy to Redis"
seq 1 30000 | $DEDUP filter query "redis://127.0.0.1:$P/g" > "$RT_DIR/g.txt"
cmp -s "$RT_DIR/local.txt" "$RT_DIR/g.txt" || fail "the copy back answers differently"
# a local blocked filter copied in
$DEDUP filter create "$RT_DIR/b.dedup" -t blocked -n 5000 || fail "local create"
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
echo "filter_cli: ok"
