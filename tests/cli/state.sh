#!/usr/bin/env bash
# --state FILE (issue 33 items 7-8, issue 34 item 1): one run at a time per
# state file, the key options recorded and checked, a fresh secret seed per
# new state or filter file, and a kill -9 at any instant of a save.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C

# --- two runs at once on one state: the second is refused ---------------------------------
# The first run reads a FIFO this shell holds open, so it holds the lock for
# as long as the test wants: no timing involved.
seq -f 'k%g' 1 1000 > "$T/in1"
seq -f 'k%g' 500 1500 > "$T/in2"
mkfifo "$T/fifo"
exec 3<> "$T/fifo"
"$DEDUP" --state "$T/st" "$T/fifo" > "$T/out1" 2> "$T/err1" 3>&- &
first=$!
# the lock is taken when its file holds the first run's pid
wait_until 20 grep -qsx "$first" "$T/st.lock"
check "the first run holds the lock" test $? -eq 0
"$DEDUP" --state "$T/st" "$T/in2" > "$T/out2" 2> "$T/err2"
rc=$?
check "a second run on a state in use exits 2 (got $rc)" test $rc -eq 2
check "the second run says the state is in use by the first's pid" \
    grep -q "$T/st: in use by PID $first" "$T/err2"
check "the second run writes nothing" test ! -s "$T/out2"
cat "$T/in1" >&3
exec 3>&-
wait $first
rc=$?
check "the first run ends normally (got $rc)" test $rc -eq 0
check "the first run wrote its records" cmp -s "$T/in1" "$T/out1"
"$DEDUP" --state "$T/st" "$T/in2" > "$T/out2" 2> "$T/err2"
check "after the first run ends, the second runs" test $? -eq 0
seq -f 'k%g' 1001 1500 > "$T/want2"
check "and outputs only the keys the first did not" cmp -s "$T/want2" "$T/out2"
# dedup filter add on a filter state in use is refused the same way.
echo a | "$DEDUP" --mode bloom -n 100 --state "$T/bst" > /dev/null
exec 3<> "$T/fifo"
"$DEDUP" --mode bloom -n 100 --state "$T/bst" "$T/fifo" > /dev/null 2>&1 3>&- &
holder=$!
wait_until 20 grep -qsx "$holder" "$T/bst.lock"
"$DEDUP" filter add "$T/bst" b 2> "$T/e"
rc=$?
check "dedup filter add on a state in use exits 2 (got $rc)" test $rc -eq 2
check "... naming the holder" grep -q "$T/bst: in use by PID $holder" "$T/e"
exec 3>&-
wait $holder
"$DEDUP" filter add "$T/bst" b
check "dedup filter add on it once free" test $? -eq 0
# A lock left by a killed run goes with its process.
exec 3<> "$T/fifo"
"$DEDUP" --state "$T/st" "$T/fifo" > /dev/null 2>&1 3>&- &
killed=$!
wait_until 20 grep -qsx "$killed" "$T/st.lock"
kill -9 $killed
wait $killed 2>/dev/null
exec 3>&-
echo k1 | "$DEDUP" --state "$T/st" > "$T/out3"
check "a run after a killed one takes the lock" test $? -eq 0
check "and the state is the one saved before" test ! -s "$T/out3"

# --- the key options are part of a state's identity ---------------------------------------
printf ' Apple\napple\nAPPLE \nPear\n' > "$T/fruit"
"$DEDUP" --trim -i --state "$T/id" "$T/fruit" > "$T/o" 2> "$T/e"
check "a new state with --trim -i runs" test $? -eq 0
printf 'apple\nplum\n' | "$DEDUP" --state "$T/id" > "$T/o" 2> "$T/e"
rc=$?
check "the same state without the key options exits 2 (got $rc)" test $rc -eq 2
check "the refusal names the file" grep -q "$T/id: made with other key options" "$T/e"
check "the refusal names the file's key options" grep -q "term=0a trim icase mode=exact'" "$T/e"
check "the refusal names this run's" grep -q "this run 'keys/1 field=0 delim=00 term=0a mode=exact'" "$T/e"
check "the refusal says --force-keys" grep -q -- "--force-keys" "$T/e"
check "nothing is written" test ! -s "$T/o"
printf ' APPLE\nplum\n' | "$DEDUP" --trim -i --state "$T/id" > "$T/o" 2> "$T/e"
check "the same key options go on (exit)" test $? -eq 0
check "the same key options go on (output)" test "$(cat "$T/o")" = plum
for opts in "-f 2" "-f 1 -d ," "--squeeze" "--strip-prefix x" "-z --trim -i" "--trim" "-i" \
    "--trim -i --mode fingerprint"; do
    # shellcheck disable=SC2086
    echo x | "$DEDUP" $opts --state "$T/id" > /dev/null 2> "$T/e"
    rc=$?
    check "--state made with --trim -i, run with $opts: exit 2 (got $rc)" test $rc -eq 2
done
printf 'apple\nAPPLE\n' | "$DEDUP" --force-keys --state "$T/id" > "$T/o" 2> "$T/e"
check "--force-keys runs with other key options" test $? -eq 0
check "--force-keys warns naming the file" grep -q "$T/id: made with other key options" "$T/e"
check "--force-keys uses this run's keys" test "$(cat "$T/o")" = APPLE
printf 'apple\nPEAR\n' | "$DEDUP" --state "$T/id" > "$T/o" 2> "$T/e"
check "after --force-keys its options are the state's" test $? -eq 0 -a "$(cat "$T/o")" = PEAR
"$DEDUP" filter info "$T/id" > "$T/info"
check "filter info shows the key options" grep -q "key options (--state).*keys/1 field=0" "$T/info"
# --keys int and -z are recorded too
seq 1 5 | "$DEDUP" --keys int --state "$T/ik" > /dev/null
seq 1 6 | "$DEDUP" --state "$T/ik" > /dev/null 2> "$T/e"
check "a --keys int state without --keys int exits 2" test $? -eq 2
# A bare seen-set file (an older version's state, or a filter file): taken
# with a warning, and this run's key options recorded on save.
"$DEDUP" filter create "$T/bare" -t bloom -n 1000 --seed 5
"$DEDUP" filter add "$T/bare" a b
printf 'a\nc\n' | "$DEDUP" --mode bloom --state "$T/bare" > "$T/o" 2> "$T/e"
check "a state without key options runs" test $? -eq 0 -a "$(cat "$T/o")" = c
check "with a warning naming it" grep -q "$T/bare: holds no record of the key options" "$T/e"
echo d | "$DEDUP" --mode bloom -i --state "$T/bare" > /dev/null 2> "$T/e"
check "then its key options are recorded" test $? -eq 2
"$DEDUP" filter query "$T/bare" a c d > "$T/o"
check "dedup filter still reads it" test "$(tr '\n' ' ' < "$T/o")" = "a c "
"$DEDUP" filter add "$T/bare" d
echo x | "$DEDUP" --mode bloom -i --state "$T/bare" > /dev/null 2>&1
check "dedup filter add keeps its key options" test $? -eq 2

# --- seeds: a new state or filter file gets a secret one; --seed fixes it -----------------
seed_of() { "$DEDUP" filter info "$1" | awk '$1 == "seed" {print $2}'; }
for mode in exact fingerprint blocked; do
    seq 1 10 | "$DEDUP" --mode "$mode" -n 100 --state "$T/sa.$mode" > /dev/null
    seq 1 10 | "$DEDUP" --mode "$mode" -n 100 --state "$T/sb.$mode" > /dev/null
    a=$(seed_of "$T/sa.$mode") b=$(seed_of "$T/sb.$mode")
    check "--mode $mode: two new states have two seeds ($a $b)" test -n "$a" -a "$a" != "$b"
    check "--mode $mode: not the public seed" test "$a" != 0x9e3779b97f4a7c15
    seq 5 20 | "$DEDUP" --mode "$mode" -n 100 --state "$T/sa.$mode" > /dev/null
    check "--mode $mode: a later run keeps the state's seed" test "$(seed_of "$T/sa.$mode")" = "$a"
    seq 1 10 | "$DEDUP" --mode "$mode" -n 100 --seed 0x1234 --state "$T/sc.$mode" > /dev/null
    check "--mode $mode: --seed fixes it" test "$(seed_of "$T/sc.$mode")" = 0x0000000000001234
done
seq 1 3 | "$DEDUP" --seed 0x1235 --state "$T/sc.exact" > "$T/o" 2> "$T/e"
check "--seed other than an existing state's exits 2" test $? -eq 2 -a ! -s "$T/o"
check "... naming the state and both seeds" grep -q "$T/sc.exact: was made with seed 0x0000000000001234, not the --seed 0x0000000000001235" "$T/e"
seq 1 3 | "$DEDUP" --seed 0x1234 --state "$T/sc.exact" > "$T/o"
check "--seed equal to the state's goes on" test $? -eq 0 -a ! -s "$T/o"
"$DEDUP" --seed nope --state "$T/sx" < /dev/null 2> "$T/e"
check "--seed with a bad value exits 2" test $? -eq 2
check "--seed's error is said once" grep -q "^dedup: --seed must be" "$T/e"
"$DEDUP" filter create "$T/f1" -n 1000
"$DEDUP" filter create "$T/f2" -n 1000
check "two new filters have two seeds" test "$(seed_of "$T/f1")" != "$(seed_of "$T/f2")"
"$DEDUP" filter merge "$T/fm" "$T/f1" "$T/f2" 2> "$T/e"
check "merging filters of two seeds exits 2" test $? -eq 2
check "and tells to create them with the same --seed" grep -q "seeds differ.*same --seed" "$T/e"
check "and names both files" grep -q "$T/f1 and $T/f2" "$T/e"
"$DEDUP" filter create "$T/f3" -n 1000 --seed 99
"$DEDUP" filter create "$T/f4" -n 1000 --seed 99
"$DEDUP" filter add "$T/f3" a
"$DEDUP" filter add "$T/f4" b
"$DEDUP" filter merge "$T/fm" "$T/f3" "$T/f4"
check "filters made with one --seed merge" test "$("$DEDUP" filter query -c "$T/fm" a b)" = 2

# --- a kill -9 at any instant of a save leaves the old state or the new one ---------------
# Each trial kills a run once its save has a file open in the state's
# directory, after a random part of a typical save's time.
n=$(sized 400000)
seq -f 'old-%g' 1 "$n" > "$T/old"
seq -f 'new-%g' 1 "$n" > "$T/new"
mkdir "$T/kd"
"$DEDUP" --state "$T/kd/s" "$T/old" > /dev/null
cp "$T/kd/s" "$T/kd.before"
trials=$(rounds 12)
python3 - "$DEDUP" "$T/new" "$T/kd/s" "$T/kd.before" "$SEED" "$trials" <<'PY'
import os, random, signal, subprocess, sys, time, filecmp
dedup, inp, state, before, seed, trials = sys.argv[1:7]
random.seed(int(seed))
d = os.path.dirname(state)
killed_in_save = 0
for t in range(int(trials)):
    p = subprocess.Popen([dedup, "--state", state, inp], stdout=subprocess.DEVNULL)
    t0 = time.time()
    saving = False
    while p.poll() is None and time.time() - t0 < 60:
        try:
            for fd in os.listdir("/proc/%d/fd" % p.pid):
                link = os.readlink("/proc/%d/fd/%s" % (p.pid, fd))
                if link.startswith(d + "/") and link not in (state, state + ".lock"):
                    saving = True
        except OSError:
            pass
        if saving:
            break
    if saving:
        time.sleep(random.uniform(0, 0.03))
        p.send_signal(signal.SIGKILL)
        killed_in_save += 1
    p.wait()
    # The state is the old one or, when the rename came first, the new one.
    if not filecmp.cmp(state, before, shallow=False):
        r = subprocess.run([dedup, "filter", "info", state], capture_output=True)
        if r.returncode != 0:
            sys.exit("trial %d: the state does not load: %s" % (t, r.stderr))
        os.replace(state, before + ".new")
        subprocess.run(["cp", before, state])
    extra = [f for f in os.listdir(d) if f not in ("s", "s.lock") and ".tmp." not in f]
    if extra:
        sys.exit("trial %d: left %s" % (t, extra))
print("kill trials: %d, %d killed while saving" % (int(trials), killed_in_save))
if killed_in_save < int(trials) // 2:
    sys.exit("too few kills landed in a save")
PY
check "a kill -9 while saving leaves the old state (or the new one, whole)" test $? -eq 0
"$DEDUP" --state "$T/kd/s" "$T/old" > "$T/o"
check "the next run loads it" test $? -eq 0 -a ! -s "$T/o"
check "and leaves no temporary beside it" test -z "$(ls "$T/kd" | grep -v -x -e s -e s.lock)"

# ---- dedup filter add|del on a plain filter file takes its lock too ---------------------
# (review of issue 33 item 7) two changes at once would each save their own.
"$DEDUP" filter create "$T/pf" -n 1000 > /dev/null
rm -f "$T/fifo" && mkfifo "$T/fifo"
exec 3<> "$T/fifo"
"$DEDUP" filter add "$T/pf" < "$T/fifo" 3>&- &
holder=$!
wait_until 20 grep -qsx "$holder" "$T/pf.lock"
check "dedup filter add on a plain filter file holds its lock" test $? -eq 0
"$DEDUP" filter add "$T/pf" b 2> "$T/e"
rc=$?
check "a second dedup filter add on it exits 2 (got $rc)" test $rc -eq 2
check "... naming the holder: $(head -c 200 "$T/e")" grep -q "$T/pf: in use by PID $holder" "$T/e"
echo a >&3
exec 3>&-
wait $holder
check "the first dedup filter add ends normally" test $? -eq 0
"$DEDUP" filter add "$T/pf" b
check "dedup filter add on it once free" test $? -eq 0
check "both adds' items are in it" test "$("$DEDUP" filter query -c "$T/pf" a b)" = 2

finish
