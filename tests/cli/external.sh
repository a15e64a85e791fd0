#!/usr/bin/env bash
# The main job under a memory budget (-m in exact mode, --sort, --tmpdir):
# tiny budgets force spills and several levels; the output must equal the
# naive reference (lib/ref_dedup.py) for every key option and output kind,
# `LC_ALL=C sort -u` for --sort and `sort | uniq -c` for --sort -c; no
# temporary file may outlive a run; a failing temporary directory exits 1
# with a message naming it and removes the -o file.
. "$(dirname "$0")/lib/common.sh"
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"
export LC_ALL=C
mkdir "$T/tmp"
notmp() { [ -z "$(ls -A "$T/tmp")" ] || fail "temporary files left after: $*"; }

gen() { # gen SEED LINES FILE: records with repeats, case/space variants, NUL, \r, empties
    python3 - "$1" "$2" "$3" <<'PY'
import random, sys
seed, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = random.Random(seed)
EDGE = [b" ", b"\r", b"\v", b"\f"]
words = [b"alpha", b"Beta", b"GAMMA", b"delta", b"", b" x ", b"\tTab", b"a\rb", b"nul\0byte", b"\xff\xfe"]
out = []
for i in range(n):
    k = r.randrange(max(1, n // 2))
    w = words[k % len(words)] * (1 + k % 5)
    f1 = b"k%d" % (k % 9973)
    if r.random() < 0.2: f1 = f1.upper()
    # the blanks --trim strips, \r \v \f among them, at the key's edges
    edge = lambda: b"".join(r.choice(EDGE) for _ in range(r.randrange(3)))
    rec = edge() + f1 + edge() + b"\t" + w + b"\t" + b"%d" % (k % 7) + b"/" + b"p" * (k % 40) + (edge() if r.random() < 0.3 else b"")
    if r.random() < 0.05: rec = b""
    if r.random() < 0.05: rec = b"id:" + rec
    out.append(rec)
data = b"\n".join(out)
if r.random() < 0.5: data += b"\n"
open(path, "wb").write(data)
PY
}

gen "$SEED" 40000 "$T/in"   # ~1.5 MB
combos=("" "-D" "-c" "-u" "-i" "--trim --squeeze" "-f 1" "-f 2 -c" "-f 1 -i -u" "--strip-prefix id: -D" "-f 3 -d /")
for m in 64K 1M; do
    for c in "${combos[@]}"; do
        # shellcheck disable=SC2086
        $REF $c "$T/in" > "$T/exp"
        # shellcheck disable=SC2086
        "$DEDUP" -m $m -T "$T/tmp" $c "$T/in" > "$T/got" 2> "$T/err" || fail "-m $m $c exited $?: $(cat "$T/err")"
        check "-m $m options '$c' equals the reference" cmp -s "$T/exp" "$T/got"
        notmp "-m $m $c"
    done
    "$DEDUP" -m $m -T "$T/tmp" --sort "$T/in" > "$T/got"
    sort -u "$T/in" > "$T/exp"
    check "-m $m --sort equals LC_ALL=C sort -u" cmp -s "$T/exp" "$T/got"
    "$DEDUP" -m $m -T "$T/tmp" --sort -c "$T/in" > "$T/got"
    sort "$T/in" | uniq -c > "$T/exp"
    check "-m $m --sort -c equals sort | uniq -c" cmp -s "$T/exp" "$T/got"
    "$DEDUP" -m $m -T "$T/tmp" --sort -u "$T/in" > "$T/got"
    sort "$T/in" | uniq -u > "$T/exp"
    check "-m $m --sort -u equals sort | uniq -u" cmp -s "$T/exp" "$T/got"
    notmp "-m $m --sort"
done
# the same as the unbounded exact mode, and -z
"$DEDUP" "$T/in" > "$T/exp"
"$DEDUP" -m 64K -T "$T/tmp" "$T/in" > "$T/got"
check "-m 64K output is byte-identical to the in-memory exact mode" cmp -s "$T/exp" "$T/got"
tr '\n\0' '\0\n' < "$T/in" > "$T/inz"
"$DEDUP" -z "$T/inz" > "$T/exp"
"$DEDUP" -z -m 64K -T "$T/tmp" "$T/inz" > "$T/got"
check "-z -m 64K equals -z in memory" cmp -s "$T/exp" "$T/got"
# stdin and several files
cat "$T/in" | "$DEDUP" -m 64K -T "$T/tmp" - "$T/in" > "$T/got"
"$DEDUP" "$T/in" "$T/in" > "$T/exp"
check "stdin plus a file under -m" cmp -s "$T/exp" "$T/got"
# --stats reports the spill
"$DEDUP" -m 64K -T "$T/tmp" --stats "$T/in" > /dev/null 2> "$T/err"
check "--stats names the runs and bytes spilled" grep -q "runs written, .* merge passes, .* written, .* read back" "$T/err"
"$DEDUP" -m 64K -T "$T/tmp" --stats=json "$T/in" > /dev/null 2> "$T/err"
check "--stats=json has the spill fields" python3 -c "
import json,sys; d=json.load(open('$T/err')); assert d['spilled'] and d['runs']>0 and d['merge_passes']>0 and d['bytes_read_back']==d['bytes_spilled']>0, d"
"$DEDUP" -m 64M --stats "$T/in" > /dev/null 2> "$T/err"
check "a budget that fits does not spill" grep -q "nothing spilled" "$T/err"
# empty input
: > "$T/empty"
for c in "" --sort -c -u -D; do
    "$DEDUP" -m 64K -T "$T/tmp" $c "$T/empty" > "$T/got"
    check "empty input $c" cmp -s "$T/empty" "$T/got"
done
# a record larger than the budget
python3 -c "
import sys; big = b'x' * 300000
sys.stdout.buffer.write(b'a\n' + big + b'\nb\n' + big + b'\n' + big[:-1] + b'y\na\n')" > "$T/bigrec"
awk '!seen[$0]++' "$T/bigrec" > "$T/exp"
"$DEDUP" -m 64K -T "$T/tmp" "$T/bigrec" > "$T/got"
check "a record larger than the budget" cmp -s "$T/exp" "$T/got"
# ... in every output (giants: the engine streams them from its temporary file)
LC_ALL=C sort -u "$T/bigrec" > "$T/exp"
"$DEDUP" -m 64K -T "$T/tmp" --sort "$T/bigrec" > "$T/got"
check "a record larger than the budget, --sort" cmp -s "$T/exp" "$T/got"
awk 'seen[$0]++' "$T/bigrec" > "$T/exp"
"$DEDUP" -m 64K -T "$T/tmp" -D "$T/bigrec" > "$T/got"
check "a record larger than the budget, -D" cmp -s "$T/exp" "$T/got"
awk '{c[$0]++; if (c[$0] == 1) k[++n] = $0} END {for (i = 1; i <= n; i++) printf "%7d %s\n", c[k[i]], k[i]}' "$T/bigrec" > "$T/exp"
"$DEDUP" -m 64K -T "$T/tmp" -c "$T/bigrec" > "$T/got"
check "a record larger than the budget, -c" cmp -s "$T/exp" "$T/got"
awk '{c[$0]++; if (c[$0] == 1) k[++n] = $0} END {for (i = 1; i <= n; i++) if (c[k[i]] == 1) print k[i]}' "$T/bigrec" > "$T/exp"
"$DEDUP" -m 64K -T "$T/tmp" -u "$T/bigrec" > "$T/got"
check "a record larger than the budget, -u" cmp -s "$T/exp" "$T/got"
# records far larger than the budget and than the reader's buffer: they are
# read in pieces and spilled as they come, so the process never holds one
python3 -c "
import sys; big = b'%d' * (8 << 20)
sys.stdout.buffer.write(b'a\n' + big + b'\nb\n' + big + b'\n' + big[:-1] + b'y\na\n' + big)" > "$T/giant"
# the same binary's peak RSS on a tiny input is the baseline (sanitizers add their own)
printf 'a\nb\n' > "$T/tiny"
/usr/bin/time -f %M -o "$T/rss" "$DEDUP" -m 1M -T "$T/tmp" "$T/tiny" > /dev/null
base=$(tail -1 "$T/rss")
# ThreadSanitizer shadows every byte the program touches with about four more,
# so under it the allowance scales with it: a 16 MB record held whole would
# still go over (about 80 MB); `make test` runs only threaded tests under TSan
allow=12288
if ldd "$DEDUP" 2> /dev/null | grep -q libtsan; then allow=$((allow * 5)); fi
for c in "" --sort -c -u -D; do
    if [ "$c" = --sort ]; then
        LC_ALL=C sort -u "$T/giant" > "$T/exp"
    else
        # shellcheck disable=SC2086
        python3 "$SRC/tests/cli/lib/ref_dedup.py" $c "$T/giant" > "$T/exp"
    fi
    # shellcheck disable=SC2086
    /usr/bin/time -f %M -o "$T/rss" "$DEDUP" -m 1M -T "$T/tmp" $c "$T/giant" > "$T/got"
    check "16 MB records at -m 1M, options '$c'" cmp -s "$T/exp" "$T/got"
    rss=$(tail -1 "$T/rss")
    check "16 MB records at -m 1M, options '$c': peak RSS ${rss} KB < ${base} KB + ${allow} KB" \
        [ "$rss" -lt $((base + allow)) ]
done
# a temporary directory that cannot be used: found before the work (exit 2),
# named with the reason, no -o made
"$DEDUP" -m 64K -T "$T/nonexistent" -o "$T/out" "$T/in" 2> "$T/err"
check "unusable --tmpdir exits 2 before the work" [ $? -eq 2 ]
check "the message names the directory and the reason" grep -q "$T/nonexistent cannot hold temporary files: No such file or directory" "$T/err"
check "no -o file is made" [ ! -e "$T/out" ]
# a failed run removes its -o output only when that is a regular file: as
# root, "-o /dev/full" must not unlink the device
ln -s /dev/full "$T/full"
"$DEDUP" -m 64K -T "$T/tmp" -o "$T/full" "$T/in" 2> "$T/err"
check "-o on a full device exits 1" [ $? -eq 1 ]
check "the message names it" grep -q "write error on $T/full: No space left" "$T/err"
check "an -o that is not a regular file is never removed" test -L "$T/full" -a -c /dev/full
# refused combinations (exit 2)
"$DEDUP" -m 1M --state "$T/s" "$T/in" > /dev/null 2>&1
check "-m with --state is refused" [ $? -eq 2 ]
"$DEDUP" --sort -D "$T/in" > /dev/null 2>&1
check "--sort -D is refused" [ $? -eq 2 ]
"$DEDUP" --sort --mode bloom "$T/in" > /dev/null 2>&1
check "--sort with a filter is refused" [ $? -eq 2 ]
# a closed pipe ends quietly
"$DEDUP" -m 64K -T "$T/tmp" "$T/in" 2> "$T/err" | head -1 > /dev/null
check "broken pipe: exit 0" [ "${PIPESTATUS[0]}" -eq 0 ]
check "broken pipe: no message" [ ! -s "$T/err" ]
# SIGTERM in the middle of a spilling run: exit 143, nothing left behind
seq 1 1500000 > "$T/seq"
mkfifo "$T/sfifo"
( cat "$T/seq"; exec sleep 60 ) > "$T/sfifo" &
feeder=$!
"$DEDUP" -m 64K -T "$T/tmp" "$T/sfifo" > /dev/null 2>&1 &
pid=$!
# The signal comes once a spill file is open; the input stays open, so the
# run cannot have finished.
check "the run spills while its input is open" wait_until 60 has_open_file_in $pid "$T/tmp"
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
kill $feeder 2>/dev/null; wait $feeder 2>/dev/null
check "SIGTERM in a spilling run ends it with 143 (exit $rc)" [ $rc -eq 143 ]
notmp "SIGTERM"
notmp "all runs"
finish
