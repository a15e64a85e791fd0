#!/usr/bin/env bash
# Nothing lost without a word (issue 24): what a run leaves behind when it is
# killed or fails, the files it removes, and the small things a user
# notices.  Each check asserts the message, the exit status and the files.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C

# --- dedup -h is --help ------------------------------------------------------------------
"$DEDUP" -h > "$T/h" 2> "$T/err"
check "dedup -h exits 0" test $? -eq 0
check "dedup -h prints the usage on stdout" grep -q '^Usage: dedup' "$T/h"
check "dedup -h is silent on stderr" test ! -s "$T/err"
"$DEDUP" --help > "$T/help"
check "dedup -h equals dedup --help" cmp -s "$T/h" "$T/help"
check "--help lists -h" grep -q -- '-h, --help' "$T/help"

# --- a kill -9 during a state save leaves no temporary -----------------------------------
seq -f 'key-%g' 1 3000000 > "$T/many"
mkdir "$T/sd"
python3 - "$DEDUP" "$T/many" "$T/sd/s.dedup" <<'PY'
import os, signal, subprocess, sys, time
dedup, inp, state = sys.argv[1:4]
d = os.path.dirname(os.path.abspath(state))
p = subprocess.Popen([dedup, "--state", state, inp], stdout=subprocess.DEVNULL)
t0, seen = time.time(), None
# The kill comes once the save's file is open in the state's directory.
while p.poll() is None and time.time() - t0 < 300 and not seen:
    try:
        for fd in os.listdir("/proc/%d/fd" % p.pid):
            link = os.readlink("/proc/%d/fd/%s" % (p.pid, fd))
            if link.startswith(d + "/") and not link.endswith(".lock"):
                seen = link
    except OSError:
        pass
if not seen:
    sys.exit("the save was never seen (exit %s)" % p.poll())
os.kill(p.pid, signal.SIGKILL)
p.wait()
left = [f for f in os.listdir(d) if f != "s.dedup.lock"]  # the lock file stays
if left:
    sys.exit("a kill -9 while saving left %s (the file being written: %s)" % (left, seen))
PY
check "a kill -9 while the state is saved leaves nothing in its directory" test $? -eq 0
# A named temporary of a dead process (an older version, or a file system
# without O_TMPFILE) is removed by the next save; a live process's is kept.
seq 1 100 > "$T/small"
sh -c 'exit 0' & dead=$!; wait $dead
sleep 300 & live=$!
touch "$T/sd/s.dedup.tmp.$dead" "$T/sd/s.dedup.tmp.$live" "$T/sd/s.dedup.tmp.x1" "$T/sd/other.tmp.$dead"
"$DEDUP" --state "$T/sd/s.dedup" "$T/small" > /dev/null
check "the save succeeds beside stale temporaries" test $? -eq 0
check "a dead process's temporary is removed" test ! -e "$T/sd/s.dedup.tmp.$dead"
check "a live process's temporary is kept" test -e "$T/sd/s.dedup.tmp.$live"
check "files not named like a temporary are kept" test -e "$T/sd/s.dedup.tmp.x1" -a -e "$T/sd/other.tmp.$dead"
kill $live; wait $live 2>/dev/null

# --- a write error on -o removes the partial file, in every mode -------------------------
{ seq 1 300000; seq 1 300000; } > "$T/big"
for mode in "" "-c" "-D" "--mode blocked -n 1M" "--mode cuckoo -n 1M" "--state $T/ost" "-m 1M -T $T" "--window 1h" "--sort"; do
    rm -f "$T/o" "$T/ost"
    # shellcheck disable=SC2086
    (trap '' XFSZ; ulimit -f 200; exec "$DEDUP" $mode -o "$T/o" "$T/big") 2> "$T/err"
    rc=$?
    check "-o past the file size limit ($mode): exit 1 (got $rc)" test $rc -eq 1
    # (a spilling run may meet the limit first in its temporary files)
    check "... ($mode) names the file and the reason" grep -q "write error on $T/o: File too large\|temporary files in $T: File too large" "$T/err"
    check "... ($mode) removes the partial -o file" test ! -e "$T/o"
    check "... ($mode) saves no state" test ! -e "$T/ost"
done

# --- messages say "an" before a vowel ------------------------------------------------------
"$DEDUP" --state "$T/ex.s" "$T/small" > /dev/null
"$DEDUP" --mode bloom --state "$T/ex.s" "$T/small" > /dev/null 2> "$T/err"
check "a state of another mode: exit 2" test $? -eq 2
check "... 'an exact-set', never 'a exact-set'" grep -q "is an 'exact-set' state, but --mode bloom keeps a 'bloom' state" "$T/err"
"$DEDUP" --window 1h --state "$T/ex.s" "$T/small" > /dev/null 2> "$T/err"
check "a window run on an exact set's state says 'an exact-set'" grep -q "holds an exact-set, not a window's state" "$T/err"
if grep -rq "a unknown\|a exact\|a 'exact\|a 'unknown" "$T/err"; then fail "a message says 'a' before a vowel"; else pass; fi

# --- window modes and window states --------------------------------------------------------
"$DEDUP" --window 10s --mode cuckoo /dev/null > /dev/null 2> "$T/err"
check "--window --mode cuckoo: exit 2" test $? -eq 2
check "... naming every mode that works with a window" \
    grep -q "exact (default), fingerprint (both exact), bloom or blocked (both approximate.*not cuckoo" "$T/err"
for ok in exact fingerprint bloom blocked; do
    "$DEDUP" --window 10s --mode $ok -n 100 /dev/null > /dev/null 2> "$T/err"
    check "--window --mode $ok, named as working, works" test $? -eq 0
done
printf 'a\t1\nb\t2\n' > "$T/wi"
"$DEDUP" --window 1m --lateness 5s --time-field 2 -f 1 --state "$T/ws" "$T/wi" > /dev/null
"$DEDUP" --window 10s --time-field 2 -f 1 --state "$T/ws" "$T/wi" > "$T/out" 2> "$T/err"
check "a window state rerun with other options: exit 2" test $? -eq 2
check "... names each option that differs, in the units it takes" \
    grep -q "made with other options: --window 10s here, 1m saved; --lateness 0s here, 5s saved" "$T/err"
check "... and writes nothing" test ! -s "$T/out"
"$DEDUP" --window 1m --lateness 5s --window-type tumbling --time-field 2 -f 1 --state "$T/ws" "$T/wi" > /dev/null 2> "$T/err"
check "... a window type that differs is named" grep -q "\-\-window-type tumbling here, sliding saved" "$T/err"
"$DEDUP" --window 1m --lateness 5s --time-field 2 -f 1 --mode bloom -n 100 --state "$T/ws" "$T/wi" > /dev/null 2> "$T/err"
check "... a mode that differs is named" grep -q "\-\-mode bloom here, exact saved" "$T/err"
if grep -q "[0-9]\{7,\} *us" "$T/err"; then fail "raw microseconds in a window message"; else pass; fi

# --- progress in the external engine: records, rate, percent -----------------------------
"$DEDUP" -m 16M -T "$T" --progress "$T/big" > /dev/null 2> "$T/prog"
check "external --progress: exit 0" test $? -eq 0
tr '\r' '\n' < "$T/prog" > "$T/prog.lines"
check "external --progress shows records, records/s and percent" \
    grep -q "^dedup: .*, 600000 records, .*M records/s, 100%" "$T/prog.lines"
check "... and says when the input is read and the merge runs" grep -q "input read; merging" "$T/prog.lines"

# --- make run's example says when dedup and awk disagree ---------------------------------
printf '#!/bin/sh\n"%s" "$@" | sed 1d\n' "$DEDUP" > "$T/wrong-dedup"
chmod +x "$T/wrong-dedup"
mkdir "$T/ex"
TMPDIR="$T/ex" sh "$SRC/scripts/run-example.sh" "$T/wrong-dedup" > "$T/out" 2> "$T/err"
check "the example fails (exit 1) when the output differs from awk's" test $? -eq 1
check "... and says so" grep -q "DIFFERENT: dedup and awk disagree" "$T/err"
check "... before going on" test "$(grep -c '^== ' "$T/out")" -eq 3
rm -rf "$T/ex"

# --- errors found before the work: the input is endless, so a run that read it
# first would never end (timeout: exit 124) -------------------------------------------------
before_work() { # DESC PATTERN ARGS...: exit 2 at once, the message, no output
    local desc=$1 pat=$2
    shift 2
    yes | timeout 30 "$DEDUP" "$@" > "$T/out" 2> "$T/err"
    local rc=${PIPESTATUS[1]}
    check "$desc: exit 2 before reading the input (got $rc)" test "$rc" -eq 2
    check "$desc: says why" grep -q -- "$pat" "$T/err"
    check "$desc: writes nothing" test ! -s "$T/out"
}
before_work "--state in a missing directory" "state /nonexistent/dir/s.dedup cannot be saved: /nonexistent/dir: No such file or directory" \
    --state /nonexistent/dir/s.dedup
before_work "--state under a file" "cannot be saved: $T/small: Not a directory" --state "$T/small/s.dedup"
before_work "-o in a missing directory" "/nonexistent/o: No such file or directory" -o /nonexistent/o
before_work "-T missing" "tmpdir /nonexistent cannot hold temporary files: No such file or directory" -T /nonexistent
before_work "-T a file" "tmpdir $T/small cannot hold temporary files: Not a directory" -T "$T/small"
before_work "-T with -m, a file" "tmpdir $T/small cannot hold temporary files: Not a directory" -m 1M -T "$T/small"
before_work "-T a directory that takes no file" "tmpdir /sys cannot hold temporary files: Permission denied" -T /sys
if grep -q "free space" "$T/err"; then fail "advice about free space for a directory that takes no file"; else pass; fi
TMPDIR=/nonexistent "$DEDUP" "$T/small" > "$T/out" 2> "$T/err"
check "an unusable default temporary directory: the run goes on (exit $?)" test -s "$T/out"
check "... with a warning naming it" grep -q "temporary files would go to /nonexistent, which cannot hold them" "$T/err"

# --- dedup --state s ... | head -1: not saved, and said ------------------------------------
seq 1 200000 > "$T/k200"
"$DEDUP" --state "$T/hs" "$T/small" > /dev/null
cp "$T/hs" "$T/hs.before"
"$DEDUP" --state "$T/hs" "$T/k200" 2> "$T/err" | head -1 > /dev/null
rc=${PIPESTATUS[0]}
check "--state into a closed pipe: exit 1 (got $rc)" test "$rc" -eq 1
check "... says the state was not saved and why" grep -q "hs: not saved: the output was closed (broken pipe)" "$T/err"
check "... the state is as it was" cmp -s "$T/hs" "$T/hs.before"
"$DEDUP" "$T/k200" 2> "$T/err" | head -1 > /dev/null
check "without --state a closed pipe is still a quiet end" test "${PIPESTATUS[0]}" -eq 0 -a ! -s "$T/err"

finish
