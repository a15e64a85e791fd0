#!/bin/bash
# dedup --keys int: the integer set, the bitmap and roaring against a naive
# reference (first occurrence of each integer value) on seeded inputs, with
# whole-record and -f keys, decimal and hex; --on-bad-key fail|skip|keep;
# --state saved and resumed for every mode and read by `dedup filter info`
# (a bitmap of any --range, which its file keeps; an old file without it);
# memory per key; and the errors found before any work.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/expect.sh"
fails=0
cd "$T" || exit 1

python3 - "$SEED" <<'EOF'
import random, sys
r = random.Random(int(sys.argv[1]))
def fmt(v):
    k = r.randrange(4)
    return ("0x%x" % v) if k == 0 else ("%03d" % v) if k == 1 else str(v)
with open("ids.txt", "w") as f, open("rows.tsv", "w") as g:
    for i in range(60000):
        v = r.randrange(30000) if r.random() < 0.7 else r.randrange(10**9)
        f.write(fmt(v) + "\n")
        g.write("row%d\t%s\tx\n" % (i, fmt(v)))
with open("part1.txt", "w") as a, open("part2.txt", "w") as b:
    for i in range(20000):
        (a if i < 10000 else b).write("%d\n" % r.randrange(15000))
EOF
# ref FILE [FIELD]: first occurrence of each integer value, as Python sees it.
ref() {
    python3 - "$@" <<'EOF'
import sys
seen = set()
field = int(sys.argv[2]) if len(sys.argv) > 2 else 0
for line in open(sys.argv[1]):
    rec = line.rstrip("\n")
    key = rec.split("\t")[field - 1] if field else rec
    v = int(key, 16) if key.startswith("0x") else int(key, 10)
    if v not in seen:
        seen.add(v)
        sys.stdout.write(rec + "\n")
EOF
}
ref ids.txt > ref_ids.txt
ref rows.tsv 2 > ref_rows.txt
for mode in "exact" "bitmap --range 0..999999999" "roaring"; do
    # shellcheck disable=SC2086
    "$DEDUP" --keys int --mode $mode ids.txt > out.txt || fail "--mode $mode: exit $?"
    cmp -s out.txt ref_ids.txt || fail "--mode $mode: output differs from the reference"
    # shellcheck disable=SC2086
    "$DEDUP" --keys int --mode $mode -f 2 rows.tsv > out.txt || fail "--mode $mode -f 2: exit $?"
    cmp -s out.txt ref_rows.txt || fail "--mode $mode -f 2: output differs from the reference"
    # shellcheck disable=SC2086
    "$DEDUP" --keys int --mode $mode -D ids.txt | wc -l > dups.txt
    [ "$(cat dups.txt)" -eq $(( $(wc -l < ids.txt) - $(wc -l < ref_ids.txt) )) ] || fail "--mode $mode -D: $(cat dups.txt) repeats"
done
printf '7\n007\n0x7\n0X0007\n8\n' | "$DEDUP" --keys int > out.txt
[ "$(tr '\n' ' ' < out.txt)" = "7 8 " ] || fail "7, 007, 0x7 are one key: $(cat out.txt)"

# --on-bad-key: fail (default) names file, line and value, exit 1 with what
# came before written; skip drops; keep writes.
printf '1\n2\n1\nabc\n3\n' > bad.txt
expect 1 "$DEDUP" --keys int bad.txt
grep -q "bad.txt:4: not an integer key: 'abc'" err || fail "fail: message: $(cat err)"
[ "$(tr '\n' ' ' < out)" = "1 2 " ] || fail "fail: output before the bad key: $(cat out)"
expect 0 "$DEDUP" --keys int --on-bad-key skip bad.txt
[ "$(tr '\n' ' ' < out)" = "1 2 3 " ] || fail "skip: $(cat out)"
grep -q "1 record had a key that is not an integer: dropped" err || fail "skip: no count: $(cat err)"
expect 0 "$DEDUP" --keys int --on-bad-key keep bad.txt
[ "$(tr '\n' ' ' < out)" = "1 2 abc 3 " ] || fail "keep: $(cat out)"
printf '5\n99\n5\n' > range.txt
expect 1 "$DEDUP" --keys int --mode bitmap --range 0..50 range.txt
grep -q "range.txt:2: key outside --range: '99'" err || fail "outside the range: $(cat err)"
printf 'a\t1\nb\t-1\n' > neg.tsv
expect 1 "$DEDUP" --keys int -f 2 neg.tsv
grep -q "neg.tsv:2: not an integer key in field 2: '-1'" err || fail "field named: $(cat err)"

# --state: saved, resumed, and described by dedup filter info, every mode.
cat part1.txt part2.txt > both.txt
ref both.txt > ref_both.txt
for mode in "exact" "bitmap --range 0..14999" "roaring"; do
    st="state.$(echo "$mode" | cut -d' ' -f1)"
    rm -f "$st"
    # shellcheck disable=SC2086
    { "$DEDUP" --keys int --mode $mode --state "$st" part1.txt &&
      "$DEDUP" --keys int --mode $mode --state "$st" part2.txt; } > out.txt || fail "--state $mode: exit $?"
    cmp -s out.txt ref_both.txt || fail "--state $mode: resumed output differs from one run"
    "$DEDUP" filter info --json "$st" > info.json || fail "filter info $st"
    python3 - "$(sort -un both.txt | wc -l)" <<'EOF' || fail "filter info $st: $(cat info.json)"
import json, sys
o = json.load(open("info.json"))
assert o["distinct"] == int(sys.argv[1]) and o["distinct_exact"] is True, o
EOF
done
expect_err "the saved bitmap covers --range 0..14999, not the --range 0..20000 given; give --range 0..14999" \
    "$DEDUP" --keys int --mode bitmap --range 0..20000 --state state.bitmap part1.txt
# A bitmap whose range does not start at 0: saved, resumed, described; a
# rerun with another range is refused naming both, and leaves the file.
awk '{ print $1 + 1000000 }' part1.txt > hi1.txt
awk '{ print $1 + 1000000 }' part2.txt > hi2.txt
cat hi1.txt hi2.txt > hiboth.txt
ref hiboth.txt > ref_hiboth.txt
rm -f state.hi
{ "$DEDUP" --keys int --mode bitmap --range 1000000..1014999 --state state.hi hi1.txt &&
  "$DEDUP" --keys int --mode bitmap --range 1000000..1014999 --state state.hi hi2.txt; } > out.txt ||
    fail "--state bitmap from 1000000: exit $?"
cmp -s out.txt ref_hiboth.txt || fail "--state bitmap from 1000000: resumed output differs from one run"
"$DEDUP" filter info --json state.hi > info.json || fail "filter info state.hi"
python3 - "$(sort -un hiboth.txt | wc -l)" <<'EOF' || fail "filter info state.hi: $(cat info.json)"
import json, sys
o = json.load(open("info.json"))
assert o["distinct"] == int(sys.argv[1]) and o["capacity"] == 15000, o
assert o["range_lo"] == 1000000 and o["range_hi"] == 1014999, o
EOF
"$DEDUP" filter info state.hi > info.txt || fail "filter info state.hi (text)"
grep -q "^range (--range) *1000000..1014999$" info.txt || fail "filter info text lacks the range: $(cat info.txt)"
cp state.hi state.hi.before
expect_err "the saved bitmap covers --range 1000000..1014999, not the --range 0..1014999 given" \
    "$DEDUP" --keys int --mode bitmap --range 0..1014999 --state state.hi hi1.txt
expect_err "not the --range 1000001..1015000 given; give --range 1000000..1014999 to resume it" \
    "$DEDUP" --keys int --mode bitmap --range 1000001..1015000 --state state.hi hi1.txt
cmp -s state.hi.before state.hi || fail "a refused resume changed the state file"
# A bitmap state of the first file layout (written before the file kept the
# range: it covers 0..1023 and holds 0..29) still resumes and is described.
cp "$SRC/fuzz/corpus/seen_load/bitmap-v1" old.state
printf '5\n29\n30\n1023\n5\n' | "$DEDUP" --keys int --mode bitmap --range 0..1023 --state old.state > out.txt ||
    fail "old bitmap state: exit $?"
[ "$(tr '\n' ' ' < out.txt)" = "30 1023 " ] || fail "old bitmap state: $(cat out.txt)"
"$DEDUP" filter info --json old.state > info.json || fail "filter info old.state"
python3 -c 'import json; o=json.load(open("info.json")); assert (o["range_lo"], o["range_hi"], o["distinct"]) == (0, 1023, 32), o' ||
    fail "filter info old.state: $(cat info.json)"
expect_err "is a 'set-u64' state, but --mode roaring keeps a 'roaring' state" "$DEDUP" --keys int --mode roaring --state state.exact part1.txt

# Memory per key: the integer set sized with -n at most 12 bytes a key, at
# most 20 growing (it doubles at 4/5 full); the bitmap one bit per ID.
seq 1 200000 > seq.txt
"$DEDUP" --keys int -n 200000 --stats=json seq.txt >/dev/null 2>stats.json
python3 -c 'import json; o=json.load(open("stats.json")); b=o["memory_bytes"]/o["distinct"]; print("sized: %.2f B/key" % b); assert b <= 12, o' || fail "sized set over 12 B/key: $(cat stats.json)"
"$DEDUP" --keys int --stats=json seq.txt >/dev/null 2>stats.json
python3 -c 'import json; o=json.load(open("stats.json")); b=o["memory_bytes"]/o["distinct"]; print("growing: %.2f B/key" % b); assert b <= 20, o' || fail "growing set over 20 B/key: $(cat stats.json)"
"$DEDUP" --keys int --mode bitmap --range 0..1999999 --stats=json seq.txt >/dev/null 2>stats.json
python3 -c 'import json; o=json.load(open("stats.json")); assert o["memory_bytes"] < 2000000/8 + 4096, o' || fail "bitmap memory: $(cat stats.json)"

# Errors found before any work.
expect_err "needs 128.00 GiB as a bitmap, more than -m/--memory 1.00 GiB" \
    "$DEDUP" --keys int --mode bitmap --range 0..0xffffffffff -m 1G ids.txt
expect_err "over its limit of 2^40" "$DEDUP" --keys int --mode bitmap --range 0..0xffffffffffff ids.txt
expect_err "--mode bitmap needs --range" "$DEDUP" --keys int --mode bitmap ids.txt
expect_err "--mode bitmap needs --keys int" "$DEDUP" --mode bitmap --range 0..9 ids.txt
expect_err "--on-bad-key needs --keys int" "$DEDUP" --on-bad-key skip ids.txt
expect_err "--range must be LO..HI" "$DEDUP" --keys int --mode bitmap --range 9..3 ids.txt
expect_err "--keys must be int or string" "$DEDUP" --keys float ids.txt
expect_err "--on-bad-key must be fail, skip or keep" "$DEDUP" --keys int --on-bad-key drop ids.txt
expect_err "works with --mode exact (the integer set), bitmap or roaring, not bloom" \
    "$DEDUP" --keys int --mode bloom -n 10 ids.txt
expect_err "not with -c/--count" "$DEDUP" --keys int -c ids.txt
"$DEDUP" --help > help.txt
for opt in --keys --range --on-bad-key; do
    grep -q -- "$opt" help.txt || fail "--help lacks $opt"
done

[ "$fails" -eq 0 ] && echo "intkeys: all passed" || echo "intkeys: $fails failed"
[ "$fails" -eq 0 ]
