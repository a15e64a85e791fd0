#!/bin/bash
# dedup itself killed -9 at random instants, `--redis` bitmap and module
# schemes (which record a key for good when its batch is sent): the batch in
# flight is in the run's journal, and the next run on the name recovers it.
#   journal_kill.sh SCHEME KILLS   (SCHEME bitmap or module)
# One server for all trials.  Each trial: a run killed -9 after a random
# delay within a calibrated run's duration, then a rerun on the same name
# and journal directory, with --uncertain FILE (odd trials) or without (the
# recovered records then go to a .recovered file beside the journal).
# After each: the rerun exits 0; a journal with a whole batch was recovered
# with the line "recovered N records of a killed run (PID) into FILE"; no
# journal is left; the two outputs plus the recovered records hold every
# distinct input key; no run writes a key twice and no key is in both
# outputs.  Trials go on until KILLS kills landed while dedup ran.
# bitmap also checks, once: a damaged journal (a flipped payload byte, a
# flipped header byte) refused naming it with nothing output, a journal
# cut inside its batch removed with a warning, a locked (live) journal left
# alone, an unusable --journal refused before any output, --no-journal, the
# default directories.
# Needs $DEDUP; module needs $DEDUP_MODULE (else skipped, 77).  Seeded
# (DEDUP_TEST_SEED); the seed is printed.
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
scheme=${1:?bitmap|module}
KILLS=${2:-50}
if [ "$scheme" = module ] && { [ -z "${DEDUP_MODULE:-}" ] || [ ! -f "$DEDUP_MODULE" ]; }; then
    echo "SKIP: no dedup_redis.so to load (sanitized build)" >&2
    exit 77
fi
test_seed
RANDOM=$((SEED % 32768))
N=${N:-10000}
make_input "$N"
D=$(wc -l < "$RT_DIR/distinct.txt")
P=$(free_port)
if [ "$scheme" = module ]; then
    start_server "$P" --loadmodule "$DEDUP_MODULE"
    SARGS="--redis-scheme module -n $((D * 50)) -p 0.001 --shards 4"
else
    start_server "$P"
    SARGS="--redis-scheme bitmap -n $((D * 200)) -p 0.01 --segments 1"
fi
U="redis://127.0.0.1:$P"
# an array, not a function: `cmd &` must give $! of dedup itself
# shellcheck disable=SC2206
RUN=("$DEDUP" --redis "$U" $SARGS)
run() { "${RUN[@]}" "$@"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# A whole run's duration: the kills land within it (and a bit past).
t0=$(now_ms)
run --name calib --journal "$RT_DIR/jcal" "$RT_DIR/in.txt" > "$RT_DIR/calib.out" || fail "calibration run"
W=$(($(now_ms) - t0))
[ "$(wc -l < "$RT_DIR/calib.out")" = "$D" ] || fail "calibration run: $(wc -l < "$RT_DIR/calib.out") of $D keys"
[ -z "$(find "$RT_DIR/jcal" -type f)" ] || fail "a finished run left a journal: $(find "$RT_DIR/jcal" -type f)"
W=$((W + W / 5 + 2))
echo "a whole run takes about $W ms; killing within that" >&2

t=0; killed=0; recovered=0; SAMPLE=""
while [ $killed -lt "$KILLS" ]; do
    t=$((t + 1))
    [ $t -gt $((KILLS * 3)) ] && fail "only $killed of $t trials killed dedup while it ran"
    JD="$RT_DIR/j$t"
    delay=$((RANDOM % W))
    "${RUN[@]}" --name "n$t" --journal "$JD" "$RT_DIR/in.txt" > "$RT_DIR/out1" 2> "$RT_DIR/err1" &
    dp=$!
    # from the moment its journal exists (bounded; the run may end first)
    i=0
    until compgen -G "$JD/*/*.journal" > /dev/null || ! kill -0 $dp 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 100000 ] && fail "trial $t: no journal appeared"
    done
    sleep "$((delay / 1000)).$(printf %03d $((delay % 1000)))"
    # a kill that came too late shortens the window (this machine may be
    # slower or faster now than at the calibration)
    if kill -9 $dp 2>/dev/null; then killed=$((killed + 1)); else W=$((W * 9 / 10 + 1)); fi
    wait $dp 2>/dev/null
    # a torn last line was not written
    [ -s "$RT_DIR/out1" ] && [ "$(tail -c 1 "$RT_DIR/out1" | od -An -c | tr -d ' ')" != '\n' ] &&
        sed -i '$d' "$RT_DIR/out1"
    jf=$(find "$JD" -name '*.journal' 2>/dev/null)
    batch=0
    if [ -n "$jf" ] && [ "$(stat -c %s "$jf")" -gt 48 ]; then
        batch=1
        [ -z "$SAMPLE" ] && [ "$(stat -c %s "$jf")" -gt 4000 ] && SAMPLE=$t && cp "$jf" "$RT_DIR/sample.journal"
    fi
    rm -f "$RT_DIR/u2"
    if [ $((t % 2)) = 1 ]; then
        run --name "n$t" --journal "$JD" --uncertain "$RT_DIR/u2" "$RT_DIR/in.txt" > "$RT_DIR/out2" 2> "$RT_DIR/err2" ||
            fail "trial $t: rerun: $(cat "$RT_DIR/err2")"
        rec="$RT_DIR/u2"
    else
        run --name "n$t" --journal "$JD" "$RT_DIR/in.txt" > "$RT_DIR/out2" 2> "$RT_DIR/err2" ||
            fail "trial $t: rerun: $(cat "$RT_DIR/err2")"
        rec=$(find "$JD" -name '*.recovered' 2>/dev/null)
    fi
    if [ $batch = 1 ] && ! grep -q 'ends inside' "$RT_DIR/err2"; then
        line=$(grep "recovered [0-9]* records of a killed run (PID $dp) into " "$RT_DIR/err2") ||
            fail "trial $t: a journal with a batch, and the rerun said nothing of it: $(cat "$RT_DIR/err2")"
        f=${line##* into }
        [ "$f" = "$rec" ] && [ -s "$f" ] || fail "trial $t: recovered into '$f', expected '$rec'"
        recovered=$((recovered + 1))
    fi
    # (a .tmp of a run killed before its journal was in place stays a
    # minute: it never held a batch)
    left=$(find "$JD" -name '*.journal' 2>/dev/null)
    [ -z "$left" ] || fail "trial $t: left behind: $left"
    # one pass: keys written twice by a run, keys in both outputs, distinct
    # keys in neither output nor the recovered records
    read -r dup1 dup2 both missing < <(awk '
        FILENAME == ARGV[1] { if (a[$0]++) d1++; next }
        FILENAME == ARGV[2] { if (b[$0]++) d2++; if ($0 in a) both++; next }
        FILENAME == ARGV[3] { r[$0] = 1; next }
        !($0 in a) && !($0 in b) && !($0 in r) { miss++ }
        END { print d1 + 0, d2 + 0, both + 0, miss + 0 }' \
        "$RT_DIR/out1" "$RT_DIR/out2" "${rec:-/dev/null}" "$RT_DIR/distinct.txt")
    [ "$dup1$dup2" = 00 ] || fail "trial $t: a run wrote a key twice ($dup1, $dup2)"
    [ "$both" = 0 ] || fail "trial $t: $both keys written by both runs"
    [ "$missing" = 0 ] ||
        fail "trial $t (killed after $delay ms, $(wc -l < "$RT_DIR/out1") written): $missing distinct keys lost"
done
[ $recovered -ge $((KILLS / 10)) ] ||
    fail "only $recovered of $killed kills left a batch to recover: the kills miss the batches"
echo "journal_kill $scheme: $t trials, $killed kills while dedup ran, $recovered batches recovered, nothing lost" >&2
[ "$scheme" = bitmap ] || exit 0

# ---- the journal's own cases, on a name that holds every key ----
[ -n "$SAMPLE" ] || fail "no trial left a journal to take as a sample"
JD="$RT_DIR/j$SAMPLE"
dir=$(dirname "$(find "$JD" -mindepth 1 -maxdepth 1 -type d | head -1)/x")
rerun() { run --name "n$SAMPLE" --journal "$JD" "$RT_DIR/in.txt" > "$RT_DIR/o" 2> "$RT_DIR/e"; }
flip() { # flip FILE OFFSET: one bit
    python3 -c 'import sys; f=open(sys.argv[1],"r+b"); o=int(sys.argv[2]); f.seek(o); b=f.read(1); f.seek(o); f.write(bytes([b[0]^1]))' "$1" "$2"
}
size=$(stat -c %s "$RT_DIR/sample.journal")
for off in 20 60 $((48 + 32 + (size - 80) / 2)) $((size - 1)); do
    cp "$RT_DIR/sample.journal" "$dir/1-bad.journal"
    flip "$dir/1-bad.journal" $off
    rerun && fail "a journal with byte $off flipped was accepted"
    grep -q "journal '$dir/1-bad.journal' is damaged" "$RT_DIR/e" || fail "byte $off flipped: $(cat "$RT_DIR/e")"
    [ ! -s "$RT_DIR/o" ] || fail "byte $off flipped: output written"
    [ -f "$dir/1-bad.journal" ] || fail "byte $off flipped: the journal was removed"
done
cp "$RT_DIR/sample.journal" "$dir/1-bad.journal"
printf 'x' >> "$dir/1-bad.journal"
rerun && fail "a journal with a byte past its batch was accepted"
rm -f "$dir/1-bad.journal"
head -c $((size - 7)) "$RT_DIR/sample.journal" > "$dir/2-torn.journal"
rerun || fail "a journal cut inside its batch: $(cat "$RT_DIR/e")"
grep -q "ends inside its batch" "$RT_DIR/e" || fail "a torn journal, no warning: $(cat "$RT_DIR/e")"
[ ! -e "$dir/2-torn.journal" ] || fail "a torn journal was left"
# a live run's journal (locked) is not taken
cp "$RT_DIR/sample.journal" "$dir/3-live.journal"
flock "$dir/3-live.journal" "${RUN[@]}" --name "n$SAMPLE" --journal "$JD" "$RT_DIR/in.txt" \
    > "$RT_DIR/o" 2> "$RT_DIR/e" ||
    fail "beside a live journal: $(cat "$RT_DIR/e")"
grep -q recovered "$RT_DIR/e" && fail "a live run's journal was recovered: $(cat "$RT_DIR/e")"
[ -f "$dir/3-live.journal" ] || fail "a live run's journal was removed"
rerun || fail "once its run is gone: $(cat "$RT_DIR/e")"
grep -q "recovered [0-9]* records of a killed run" "$RT_DIR/e" || fail "not recovered once unlocked: $(cat "$RT_DIR/e")"
# no journal directory: refused before any output; --no-journal runs
run --name nj --journal /dev/null/x "$RT_DIR/in.txt" > "$RT_DIR/o" 2> "$RT_DIR/e" &&
    fail "an unusable --journal was accepted"
grep -q "journal directory '/dev/null/x/" "$RT_DIR/e" || fail "unusable --journal: $(cat "$RT_DIR/e")"
[ ! -s "$RT_DIR/o" ] || fail "unusable --journal: output written"
HOME=/nonexistent XDG_STATE_HOME= run --name nj --no-journal "$RT_DIR/in.txt" > "$RT_DIR/o" 2> "$RT_DIR/e" ||
    fail "--no-journal: $(cat "$RT_DIR/e")"
[ "$(wc -l < "$RT_DIR/o")" = "$D" ] || fail "--no-journal: $(wc -l < "$RT_DIR/o") of $D keys"
# the default place: $XDG_STATE_HOME/dedup, else ~/.local/state/dedup
XDG_STATE_HOME="$RT_DIR/xdg" run --name "n$SAMPLE" "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/e" ||
    fail "XDG_STATE_HOME: $(cat "$RT_DIR/e")"
compgen -G "$RT_DIR/xdg/dedup/n$SAMPLE-????????????????" > /dev/null || fail "no journal directory under \$XDG_STATE_HOME/dedup"
env -u XDG_STATE_HOME HOME="$RT_DIR/home" "${RUN[@]}" --name "n$SAMPLE" "$RT_DIR/in.txt" > /dev/null 2> "$RT_DIR/e" ||
    fail "HOME: $(cat "$RT_DIR/e")"
compgen -G "$RT_DIR/home/.local/state/dedup/n$SAMPLE-????????????????" > /dev/null ||
    fail "no journal directory under ~/.local/state/dedup"
echo "journal_kill bitmap: damaged journals refused, a torn one removed, a live one left alone" >&2
