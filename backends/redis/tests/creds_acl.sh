#!/bin/bash
# Credentials off the command line and least-privilege ACL users (issue
# 40), against one redis-server (the project's module loaded when built):
#  - a user given exactly the commands redis/README.md ("ACL") lists runs
#    each scheme, its password from --redis-auth-file, DEDUP_REDIS_PASSWORD
#    or REDISCLI_AUTH;
#  - the same user without one of them: exit 1, the command named,
#    nothing lost (each distinct line output once or listed in --uncertain,
#    never both);
#  - an auth file group or others can read is refused (exit 2);
#  - the password never shows in /proc/PID/cmdline (a URL's is masked
#    while dedup runs, in --redis and in --tier), stderr or --stats; dedup holding it is not dumpable
#    (no core file).
# Seeded input; the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
test_seed
make_input 6000 # one batch (DD_REDIS_BATCH): a failed run has read it all
MOD=${DEDUP_MODULE:-}
[ -n "$MOD" ] && [ -f "$MOD" ] || MOD=""
P=$(free_port)
start_server "$P" ${MOD:+--loadmodule "$MOD"}
cli() { "$REDIS_CLI" -p "$P" "$@"; }
PW="pw-$SEED-secret"
# The commands of each scheme (redis/README.md, "ACL"), plain runs without --ttl.
KEYS_CMDS="+info +hsetnx +hget +set +mset"
BITMAP_CMDS="+info +hsetnx +hmget +script|load +bitfield"
MODULE_CMDS="+info +hsetnx +hget +type +bf.reserve +bf.insert"
user() { # user NAME COMMANDS...: a fresh ACL user on keys NAME*
    local n=$1
    shift
    cli ACL DELUSER "$n" > /dev/null
    # shellcheck disable=SC2068
    cli ACL SETUSER "$n" on ">$PW" "~$n*" $@ > /dev/null || fail "ACL SETUSER $n"
}
check_all() { # check_all OUT [UNCERTAIN]: each distinct line exactly once
    cat "$@" | sort | cmp -s - "$RT_DIR/distinct.txt" ||
        fail "$1${2:+ + $2}: not each distinct line exactly once"
}

# ---- each scheme under a user with exactly its commands ----
AF="$RT_DIR/auth"
umask 077
echo "ku $PW" > "$AF"
user ku $KEYS_CMDS
"$DEDUP" --redis "redis://127.0.0.1:$P" --name ku --redis-auth-file "$AF" --stats \
    "$RT_DIR/in.txt" > "$RT_DIR/k.out" 2> "$RT_DIR/k.err" || fail "keys under ACL: $(cat "$RT_DIR/k.err")"
check_all "$RT_DIR/k.out"
user bu $BITMAP_CMDS
DEDUP_REDIS_PASSWORD=$PW "$DEDUP" --redis "redis://bu:@127.0.0.1:$P" --name bu \
    --redis-scheme bitmap -n 20000 -p 1e-7 "$RT_DIR/in.txt" > "$RT_DIR/b.out" 2> "$RT_DIR/b.err" ||
    fail "bitmap under ACL: $(cat "$RT_DIR/b.err")"
check_all "$RT_DIR/b.out"
if [ -n "$MOD" ]; then
    user mu $MODULE_CMDS
    REDISCLI_AUTH=$PW "$DEDUP" --redis "redis://mu:@127.0.0.1:$P" --name mu --redis-scheme module \
        -n 20000 -p 1e-7 "$RT_DIR/in.txt" > "$RT_DIR/m.out" 2> "$RT_DIR/m.err" ||
        fail "module under ACL: $(cat "$RT_DIR/m.err")"
    check_all "$RT_DIR/m.out"
fi
# dedup filter takes the auth file too (a user with the bitmap commands)
echo "fu $PW" > "$RT_DIR/fauth"
user fu $BITMAP_CMDS
F="redis://127.0.0.1:$P/fu"
"$DEDUP" filter create "$F" -n 1000 --redis-auth-file "$RT_DIR/fauth" || fail "filter create as fu"
printf 'a\nb\n' | "$DEDUP" filter add "$F" --redis-auth-file "$RT_DIR/fauth" - || fail "filter add as fu"
got=$(printf 'a\nc\n' | "$DEDUP" filter query "$F" --redis-auth-file "$RT_DIR/fauth" -)
[ "$got" = a ] || fail "filter query as fu answered '$got'"
for f in k b ${MOD:+m}; do
    ! grep -q "$PW" "$RT_DIR/$f.err" || fail "the password is in stderr ($f)"
done
grep -q "round trips" "$RT_DIR/k.err" || fail "--stats printed nothing"

# ---- one command missing: exit 1 naming it, nothing lost ----
# missing NAME WHAT SCHEME-ARGS...: user NAME lacks WHAT
missing() {
    local n=$1 what=$2 rc
    shift 2
    rm -f "$RT_DIR/u.txt"
    DEDUP_REDIS_PASSWORD=$PW "$DEDUP" --redis "redis://$n:@127.0.0.1:$P" --name "$n" \
        --uncertain "$RT_DIR/u.txt" --no-journal "$@" "$RT_DIR/in.txt" > "$RT_DIR/x.out" 2> "$RT_DIR/x.err"
    rc=$?
    [ $rc = 1 ] || fail "$n without $what: exit $rc, 1 expected: $(cat "$RT_DIR/x.err")"
    grep -qi "NOPERM.*'$what'" "$RT_DIR/x.err" || fail "$n without $what: not named: $(cat "$RT_DIR/x.err")"
    grep -q "127.0.0.1:$P" "$RT_DIR/x.err" || fail "$n without $what: host:port not named"
    # what was not output is listed, and nothing twice
    comm -12 <(sort -u "$RT_DIR/x.out") <(sort -u "$RT_DIR/u.txt") | grep -q . &&
        fail "$n without $what: a line both output and listed in --uncertain"
    sort "$RT_DIR/x.out" | uniq -d | grep -q . && fail "$n without $what: a line output twice"
    # refused at open (before any record was read): nothing out, nothing listed
    [ ! -s "$RT_DIR/x.out" ] && [ ! -s "$RT_DIR/u.txt" ] && return 0
    comm -23 "$RT_DIR/distinct.txt" <(cat "$RT_DIR/x.out" "$RT_DIR/u.txt" | sort -u) | grep -q . &&
        fail "$n without $what: lines neither output nor listed in --uncertain"
    return 0
}
user kx ${KEYS_CMDS/+set /}
missing kx set
user bx ${BITMAP_CMDS/+bitfield/}
missing bx bitfield --redis-scheme bitmap -n 20000
if [ -n "$MOD" ]; then
    user mx ${MODULE_CMDS/+bf.insert/}
    missing mx bf.insert --redis-scheme module -n 20000
fi

# ---- an auth file others can read: refused ----
chmod 644 "$AF"
"$DEDUP" --redis "redis://127.0.0.1:$P" --name ku --redis-auth-file "$AF" "$RT_DIR/in.txt" \
    > "$RT_DIR/l.out" 2> "$RT_DIR/l.err"
rc=$?
[ $rc = 2 ] || fail "auth file mode 644: exit $rc, 2 expected"
grep -q "group or others" "$RT_DIR/l.err" || fail "auth file mode 644: $(cat "$RT_DIR/l.err")"
! grep -q "$PW" "$RT_DIR/l.err" || fail "the password is in stderr (auth file)"

# ---- a URL's password: masked in /proc/PID/cmdline, never printed ----
cli ACL SETUSER default on ">$PW" > /dev/null
export RT_AUTH=$PW
# cmdline_check WHAT ARGS...: dedup ARGS (a URL with the password) reading
# a FIFO, its /proc/PID/cmdline read while it is connected
cmdline_check() {
    local what=$1 D i
    shift
    rm -f "$RT_DIR/fifo"
    mkfifo "$RT_DIR/fifo"
    "$DEDUP" "$@" --stats "$RT_DIR/fifo" > "$RT_DIR/p.out" 2> "$RT_DIR/p.err" &
    D=$!
    exec 9> "$RT_DIR/fifo" # dedup reads it once connected
    i=0
    until [ "$(cli -a "$PW" --no-auth-warning CLIENT LIST 2>/dev/null | grep -c '^id=')" -ge 2 ]; do
        i=$((i + 1)); [ $i -gt 200 ] && fail "$what: dedup never connected"; sleep 0.05
    done
    tr '\0' ' ' < "/proc/$D/cmdline" > "$RT_DIR/cmdline"
    # not dumpable (no core file holds the password): /proc/PID/environ is
    # then root's, unreadable here
    [ "$(stat -c %u "/proc/$D/environ")" = 0 ] || fail "$what: dedup holding a password is dumpable (a core file would hold it)"
    cat "$RT_DIR/in.txt" >&9
    exec 9>&-
    wait $D || fail "$what: URL password run failed: $(cat "$RT_DIR/p.err")"
    grep -q "$PW" "$RT_DIR/cmdline" && fail "$what: the password is in /proc/PID/cmdline: $(cat "$RT_DIR/cmdline")"
    grep -q "127.0.0.1:$P" "$RT_DIR/cmdline" || fail "$what: cmdline not read: $(cat "$RT_DIR/cmdline")"
    grep -q "$PW" "$RT_DIR/p.err" && fail "$what: the password is in stderr or --stats"
    grep -q "visible to other users" "$RT_DIR/p.err" || fail "$what: no warning about a password in the URL"
}
cmdline_check --redis --redis "redis://:$PW@127.0.0.1:$P" --name ps
cmdline_check --tier --tier "redis://:$PW@127.0.0.1:$P,ttl=1h,name=pst" --tier exact
# a refused password: the message shows the URL without it
"$DEDUP" --redis "redis://:wrong$PW@127.0.0.1:$P" "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/w.err" &&
    fail "a wrong password was accepted"
grep -q "AUTH" "$RT_DIR/w.err" || fail "wrong password: $(cat "$RT_DIR/w.err")"
grep -q "$PW" "$RT_DIR/w.err" && fail "the password is in the error message: $(cat "$RT_DIR/w.err")"
echo "ok: credentials and ACL users (${MOD:+module, }keys, bitmap)"
