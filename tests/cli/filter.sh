#!/bin/bash
# dedup filter: create/add/query/info/merge/del round trips, exit codes,
# stdin items, damaged files and clear errors.  Needs $DEDUP and python3.
set -u
DEDUP=${DEDUP:?set DEDUP to the dedup binary}
. "$(dirname "$0")/lib/expect.sh" # fail, expect, expect_err
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0

seq -f 'item-%g' 1 5000 >items
seq -f 'absent-%g' 1 5000 >absent
cat items absent >all
seq -f 'fresh-%g' 1 800000 >fresh

for type in bloom blocked; do
    f=$type.bf
    expect 0 "$DEDUP" filter create "$f" --type $type -n 5000 -p 0.1%
    [ -s "$f" ] || fail "create $type wrote no file"
    # Items from standard input, one per line.
    expect 0 "$DEDUP" filter add "$f" <items
    [ ! -s out ] || fail "add $type printed something"
    # No false negative: every added item is reported, in order.
    expect 0 "$DEDUP" filter query "$f" <items
    cmp -s out items || fail "$type: query of the added items did not print every item"
    expect 0 "$DEDUP" filter query -c "$f" <items
    [ "$(cat out)" = 5000 ] || fail "$type: query -c of added items gave $(cat out), expected 5000"
    # Fresh items: about p of them are false positives.
    "$DEDUP" filter query -c "$f" <absent >out
    fp=$(cat out)
    [ "$fp" -le 30 ] || fail "$type: $fp of 5000 fresh items reported present at p = 0.1%"
    # From both sides against the filter's own rate, over enough fresh items
    # that twice the rate fails.
    "$DEDUP" filter query -c "$f" <fresh >out
    fp=$(cat out)
    "$DEDUP" filter info --json "$f" >info.json
    rate_within "$type" "$fp" 800000 "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fpr_current"])' info.json)"
    # -v selects the certainly absent ones: complements the plain query.
    "$DEDUP" filter query "$f" <all >present
    "$DEDUP" filter query -v "$f" <all >notpresent
    [ $(($(wc -l <present) + $(wc -l <notpresent))) -eq 10000 ] || fail "$type: query and query -v do not partition the input"
    grep -qx 'item-1' notpresent && fail "$type: query -v printed an added item"
    # info: text and JSON.
    expect 0 "$DEDUP" filter info "$f"
    for label in 'type  *'$type 'items planned (n) *5000' 'hashes per item (k)' 'fill ratio' 'estimated items' \
        'false-positive rate now' 'bits (m)' 'seed  *0x'; do
        grep -q "^$label" out || fail "$type: info lacks '$label': $(cat out)"
    done
    expect 0 "$DEDUP" filter info --json "$f"
    python3 - out $type <<'EOF' || fail "$type: info --json"
import json, sys
o = json.load(open(sys.argv[1]))
t = sys.argv[2]
for k in ("type", "n", "p", "bits", "bytes", "k", "fill", "estimated_items", "fpr_current", "seed"):
    assert k in o, "missing " + k
assert o["type"] == t and o["n"] == 5000 and abs(o["p"] - 0.001) < 1e-12, o
assert abs(o["estimated_items"] - 5000) <= 250, o["estimated_items"]
assert 0.2 < o["fill"] < 0.8, o["fill"]
assert 0 < o["fpr_current"] <= 0.0015, o["fpr_current"]
assert o["bytes"] * 8 >= o["bits"] and o["file_bytes"] > o["bytes"], o
if t == "blocked":
    assert o["bits"] % 512 == 0, o
EOF
done

# ---- Exit codes of query: 0 some selected, 1 none, 2 error ------------------
expect 0 "$DEDUP" filter query bloom.bf item-1 absent-1
[ "$(cat out)" = item-1 ] || fail "query printed '$(cat out)', expected item-1"
expect 1 "$DEDUP" filter query bloom.bf absent-1 absent-2
[ ! -s out ] || fail "query with no hit printed something"
expect 0 "$DEDUP" filter query -v bloom.bf item-1 absent-1
[ "$(cat out)" = absent-1 ] || fail "query -v printed '$(cat out)'"
expect 1 "$DEDUP" filter query -v bloom.bf item-1
expect 0 "$DEDUP" filter query -q bloom.bf item-7
[ ! -s out ] || fail "query -q printed something"
expect 1 "$DEDUP" filter query -c bloom.bf absent-1
[ "$(cat out)" = 0 ] || fail "query -c with no hit printed '$(cat out)'"
expect_err "missing.bf: No such file or directory" "$DEDUP" filter query missing.bf x

# ---- Items: arguments, "-", stdin; whole lines; CRLF; NUL ---------------------
expect 0 "$DEDUP" filter create s.bf -n 1000 -p 0.1% --seed 42
expect 0 "$DEDUP" filter add s.bf 'two words' ''
printf 'from-stdin\nlast-without-newline' | "$DEDUP" filter add s.bf arg-before - arg-after || fail "add with - failed"
expect 0 "$DEDUP" filter query s.bf 'two words' '' from-stdin last-without-newline arg-before arg-after
[ "$(wc -l <out)" -eq 6 ] || fail "items from arguments, - and stdin: got $(cat out)"
expect 1 "$DEDUP" filter query s.bf two words
printf 'crlf-item\r\n' | "$DEDUP" filter add s.bf || fail "add CRLF line"
expect 1 "$DEDUP" filter query s.bf crlf-item # the \r is part of the item by default
printf 'crlf-item\r\n' | "$DEDUP" filter query -c s.bf >out
[ "$(cat out)" = 1 ] || fail "the CRLF item added as is is not found as is"
printf 'dos-1\r\ndos-2\r\n' | "$DEDUP" filter add --crlf s.bf || fail "add --crlf"
expect 0 "$DEDUP" filter query s.bf dos-1 dos-2
[ "$(wc -l <out)" -eq 2 ] || fail "--crlf did not strip the \\r"
printf 'nul-1\0nul 2\0' | "$DEDUP" filter add -z s.bf || fail "add -z"
expect 0 "$DEDUP" filter query s.bf nul-1 'nul 2'
[ "$(wc -l <out)" -eq 2 ] || fail "-z items not found"
printf 'nul-1\0nul 2\0nope\0' | "$DEDUP" filter query -z s.bf >out
[ "$(tr '\0' '\n' <out)" = "$(printf 'nul-1\nnul 2')" ] || fail "query -z output is not NUL-terminated items"
# A long item (3 MB: longer than the read buffer).
python3 -c 'print("L" * 3000000)' >long
"$DEDUP" filter add s.bf <long || fail "add of a 3 MB item"
expect 0 "$DEDUP" filter query -c s.bf <long
[ "$(cat out)" = 1 ] || fail "3 MB item not found"
# Items beginning with '-' after --.
expect 0 "$DEDUP" filter add s.bf -- -dash
expect 0 "$DEDUP" filter query s.bf -- -dash
# Options may follow FILE.
expect 0 "$DEDUP" filter query s.bf dos-1 -c
[ "$(cat out)" = 1 ] || fail "option after FILE not honoured"

# ---- create: sizing, overwrite protection, errors ----------------------------
expect_err "already exists" "$DEDUP" filter create s.bf -n 10
expect 0 "$DEDUP" filter create s.bf -n 10 --force
expect 0 "$DEDUP" filter info --json s.bf
python3 -c 'import json,sys; o=json.load(open("out")); assert o["n"]==10 and o["bits_set"]==0, o' || fail "--force did not replace the file"
expect 0 "$DEDUP" filter create m.bf --type blocked -m 1M -p 1%
expect 0 "$DEDUP" filter info --json m.bf
python3 -c 'import json; o=json.load(open("out")); assert o["bits"]==8*2**20 and o["n"]>800000 and o["p"]==0.01, o' || fail "create -m 1M -p 1%"
cp out m.info
expect 0 "$DEDUP" calc -m 1M -p 1% --type blocked --json
python3 -c 'import json; c=json.load(open("out")); o=json.load(open("m.info")); assert (c["n"],c["bits"],c["k"])==(o["n"],o["bits"],o["k"]), (c,o)' ||
    fail "calc and create disagree on -m 1M -p 1%"
expect_err "-n/--items must be a positive whole number.*got '0'" "$DEDUP" filter create x.bf --type bloom -n 0 -p 2
expect_err "-p/--fpr must be between 0 and 1 exclusive.*got '2'" "$DEDUP" filter create x.bf --type bloom -n 10 -p 2
expect_err "-t/--type must be one of bloom, blocked.*got 'nope'" "$DEDUP" filter create x.bf --type nope -n 10
expect_err "-n/--items is required" "$DEDUP" filter create x.bf -p 1%
expect_err "-k/--hashes must be between 1 and 16" "$DEDUP" filter create x.bf -t blocked -n 10 -k 20
expect_err "missing FILE" "$DEDUP" filter create -n 10
[ ! -e x.bf ] || fail "a failed create left x.bf behind"

# ---- merge: the union answers like a filter of all items --------------------
head -2500 items >a.txt
tail -2500 items >b.txt
# (one --seed for all three: each new filter otherwise gets its own secret one)
for type in bloom blocked; do
    "$DEDUP" filter create A.bf -f -t $type -n 5000 -p 1% --seed 11 && "$DEDUP" filter add A.bf <a.txt &&
        "$DEDUP" filter create B.bf -f -t $type -n 5000 -p 1% --seed 11 && "$DEDUP" filter add B.bf <b.txt &&
        "$DEDUP" filter create ALL.bf -f -t $type -n 5000 -p 1% --seed 11 && "$DEDUP" filter add ALL.bf <items ||
        fail "$type: building the merge inputs"
    expect 0 "$DEDUP" filter merge U.bf A.bf B.bf
    cmp -s U.bf ALL.bf || fail "$type: merge of A and B is not the filter of all items"
    "$DEDUP" filter query U.bf <all >q1
    "$DEDUP" filter query ALL.bf <all >q2
    cmp -s q1 q2 || fail "$type: merged filter answers differently"
    "$DEDUP" filter info --json U.bf | python3 -c 'import json,sys; o=json.load(sys.stdin); o.pop("file"); print(sorted(o.items()))' >i1
    "$DEDUP" filter info --json ALL.bf | python3 -c 'import json,sys; o=json.load(sys.stdin); o.pop("file"); print(sorted(o.items()))' >i2
    cmp -s i1 i2 || fail "$type: merged filter's info differs"
    # In place: OUT may be one of the inputs.
    expect 0 "$DEDUP" filter merge A.bf A.bf B.bf
    cmp -s A.bf ALL.bf || fail "$type: in-place merge differs"
done
"$DEDUP" filter create small.bf -n 1000 -p 1% --seed 1 && "$DEDUP" filter create big.bf -n 2000 -p 1% --seed 1 &&
    "$DEDUP" filter create seeded.bf -n 1000 -p 1% --seed 7 && "$DEDUP" filter create blk.bf -t blocked -n 1000 -p 1% ||
    fail "building mismatched filters"
expect_err "cannot merge small.bf and big.bf: sizes differ" "$DEDUP" filter merge o.bf small.bf big.bf
expect_err "cannot merge small.bf and seeded.bf: seeds differ" "$DEDUP" filter merge o.bf small.bf seeded.bf
expect_err "cannot merge small.bf and blk.bf: types differ" "$DEDUP" filter merge o.bf small.bf blk.bf
[ ! -e o.bf ] || fail "a failed merge wrote its output"
expect_err "needs OUT and at least one IN" "$DEDUP" filter merge o.bf

# ---- Damaged files: clear errors naming the file, exit 2, file unchanged -----
cp bloom.bf bad.bf
python3 -c '
import sys
d = bytearray(open("bad.bf", "rb").read()); d[len(d) // 2] ^= 0x40
open("bad.bf", "wb").write(d)'
cp bad.bf bad.orig
expect_err "bad.bf: checksum mismatch (file is corrupted)" "$DEDUP" filter query bad.bf item-1
expect_err "bad.bf: checksum mismatch" "$DEDUP" filter info bad.bf
expect_err "bad.bf: checksum mismatch" "$DEDUP" filter add bad.bf x
cmp -s bad.bf bad.orig || fail "add to a corrupted file changed it"
head -c 1000 bloom.bf >trunc.bf
expect_err "trunc.bf: file is truncated" "$DEDUP" filter query trunc.bf item-1
expect_err "trunc.bf: file is truncated" "$DEDUP" filter info --json trunc.bf
head -c 20 bloom.bf >hdr.bf
expect_err "hdr.bf: file is truncated" "$DEDUP" filter info hdr.bf
echo 'just some text' >text.bf
expect_err "text.bf: not a dedup file" "$DEDUP" filter query text.bf x
: >empty.bf
expect_err "empty.bf: file is empty" "$DEDUP" filter info empty.bf
python3 -c '
d = bytearray(open("bloom.bf", "rb").read()); d[8] = 9
open("ver.bf", "wb").write(d)'
expect_err "ver.bf: unsupported file format version" "$DEDUP" filter info ver.bf

# A dedup file that is not a filter (the main job's exact state file):
# info validates all of it and describes it, the other actions refuse it by
# name; a truncated or damaged one is refused by info too.
printf 'a\nb\na\n' | "$DEDUP" -s state.ds >/dev/null || fail "dedup -s state.ds"
expect 0 "$DEDUP" filter info --json state.ds
python3 -c 'import json; o=json.load(open("out")); assert o["type"]=="exact-set" and o["type_id"]==9 and o["distinct"]==2 and o["checked"].startswith("whole file"), o' ||
    fail "info of a state file: $(cat out)"
head -c 60 state.ds >state.trunc
expect_err "state.trunc: file is truncated" "$DEDUP" filter info state.trunc
python3 -c 'd=bytearray(open("state.ds","rb").read()); d[len(d)-12]^=1; open("state.flip","wb").write(d)'
expect_err "state.flip: " "$DEDUP" filter info state.flip
printf 'k\t1\n' | "$DEDUP" --window 1h -f 1 -s win.ds >/dev/null || fail "dedup --window -s win.ds"
expect 0 "$DEDUP" filter info win.ds
grep -q "^contents checked  *whole file" out || fail "info of a window state: not checked whole: $(cat out)"
head -c 150 win.ds >win.trunc
expect_err "win.trunc: file is truncated" "$DEDUP" filter info win.trunc
# A filter past its capacity: add says so once, info shows items against it.
expect 0 "$DEDUP" filter create capped.bf -n 100
seq -f 'over-%g' 1 300 >over
expect 0 "$DEDUP" filter add capped.bf <over
[ "$(grep -c 'past the 100 it was created for: its false-positive rate is' err)" = 1 ] ||
    fail "add past capacity did not say so once: $(cat err)"
expect 0 "$DEDUP" filter info --json capped.bf
python3 -c 'import json; o=json.load(open("out")); assert o["capacity"]==100 and o["items"]>100 and o["over_capacity"] is True, o' ||
    fail "info past capacity: $(cat out)"
expect 0 "$DEDUP" filter info capped.bf
grep -q "^over capacity  *yes" out || fail "info text lacks 'over capacity yes'"
cp capped.bf capped.before
seq -f 'more-%g' 1 50 >more
expect 1 "$DEDUP" filter add --on-full fail capped.bf <more
grep -q "holds its capacity of 100 items and --on-full fail stops" err || fail "add --on-full fail: $(cat err)"
cmp -s capped.bf capped.before || fail "add --on-full fail changed the file"
expect 0 "$DEDUP" filter add --on-full fail capped.bf <over   # nothing new: nothing past capacity
expect_err "grow: a filter file keeps the size" "$DEDUP" filter add --on-full grow capped.bf x
expect 0 "$DEDUP" filter create cnt.f -t counting -n 100
expect 1 "$DEDUP" filter add --on-full fail cnt.f <over
cmp -s cnt.f <("$DEDUP" filter create /dev/stdout -t counting -n 100 --force 2>/dev/null) 2>/dev/null
grep -q "holds its capacity of 100 items" err || fail "counting add --on-full fail: $(cat err)"
expect_err "state.ds: holds a structure of type exact-set (9), not a filter" "$DEDUP" filter query state.ds a

# ---- del: Bloom filters cannot delete -----------------------------------------
cp bloom.bf before.bf
expect_err "bloom.bf is a classic Bloom filter, which cannot delete items.*\(counting Bloom or cuckoo\|--type counting\)" \
    "$DEDUP" filter del bloom.bf item-1
expect_err "blocked.bf is a blocked Bloom filter, which cannot delete" "$DEDUP" filter del blocked.bf item-1
cmp -s bloom.bf before.bf || fail "del changed the file"

# ---- A closed pipe ends quietly ------------------------------------------------
seq -f 'x%g' 1 300000 >many
"$DEDUP" filter create p.bf -t blocked -n 300000 -p 1% && "$DEDUP" filter add p.bf <many || fail "building p.bf"
"$DEDUP" filter query p.bf <many 2>err | head -1 >out
rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] || fail "query | head -1 exited $rc"
[ ! -s err ] || fail "query | head -1 printed: $(cat err)"
[ "$(cat out)" = x1 ] || fail "query | head -1 printed '$(cat out)'"

# ---- Write errors: named, with their own status ---------------------------------
"$DEDUP" filter query p.bf x1 >/dev/full 2>err
[ $? -eq 2 ] || fail "query >/dev/full did not exit 2"
grep -q "write error on standard output" err || fail "query >/dev/full: $(cat err)"
"$DEDUP" filter info p.bf >/dev/full 2>err
[ $? -eq 1 ] || fail "info >/dev/full did not exit 1"
grep -q "write error on standard output" err || fail "info >/dev/full: $(cat err)"

# ---- Usage ----------------------------------------------------------------------
expect 0 "$DEDUP" filter --help
grep -q '^Usage: dedup filter' out || fail "filter --help lacks usage"
grep -q '^  blocked ' out || fail "filter --help does not list the types"
[ ! -s err ] || fail "--help wrote to stderr"
expect 0 "$DEDUP" filter query --help
grep -q '^Usage: dedup filter' out || fail "filter query --help lacks usage"
expect 0 "$DEDUP" filter --version
grep -q '^dedup [0-9]' out || fail "--version output: $(cat out)"
expect_err "missing ACTION" "$DEDUP" filter
expect_err "unknown action 'frob'" "$DEDUP" filter frob x
expect_err "unknown option '--bogus'" "$DEDUP" filter query s.bf --bogus
expect_err "option '--count' applies to 'filter query' only" "$DEDUP" filter add s.bf --count x
expect_err "missing FILE" "$DEDUP" filter info

# ---- verify: known items all found, fresh items' rate against the claim ------------
expect 0 "$DEDUP" filter create ver.f -n 100000 -p 1%
seq -f 'known-%g' 1 100000 >known
expect 0 "$DEDUP" filter add ver.f <known
expect 0 "$DEDUP" filter verify ver.f --known known --fresh fresh
grep -q '^known items  *100000, all found: no false negative' out || fail "verify: known line: $(cat out)"
grep -q '^fresh items  *800000, [0-9]* reported present: measured rate .* (99.9% interval' out || fail "verify: fresh line: $(cat out)"
grep -q '^claimed rate .*within the interval' out || fail "verify: claim: $(cat out)"
grep -q '^verdict  *pass' out || fail "verify: verdict: $(cat out)"
# fresh items that are really known: a rate far above the claim, exit 1
expect 1 "$DEDUP" filter verify ver.f --fresh known
grep -q 'BELOW the interval' out && grep -q '^verdict  *FAIL' out || fail "verify of a wrong rate: $(cat out)"
# a known item missing: a false negative, exit 1
printf 'never-added-%d\n' 1 2 3 >missing
expect 1 "$DEDUP" filter verify ver.f --known missing --fresh fresh
grep -q '3 NOT found: false negatives' out || fail "verify: false negatives: $(cat out)"
grep -q "never-added-1' of missing is not in the filter" err || fail "verify does not name the missing item"
# a filter in service past its plan: a blocked filter planned for n holding
# twice n keeps the rate its model claims at that fill (about 12%), far
# above the 1% planned: the verdict fails and says by how much
expect 0 "$DEDUP" filter create over.f -t blocked -n 50000 -p 1%
expect 0 "$DEDUP" filter add over.f <known
expect 1 "$DEDUP" filter verify over.f --known known --fresh fresh
grep -q '^planned rate  *1%: EXCEEDED' out && grep -q '^verdict  *FAIL' out ||
    fail "verify passes a filter holding twice its n: $(cat out)"
grep -Eq '^over plan .* is (9|1[0-9])\.?[0-9]*x the planned one' out ||
    fail "verify does not say by how much the plan is exceeded: $(cat out)"
# at its n exactly, the same filter keeps its plan
head -n 50000 known >known50k
expect 0 "$DEDUP" filter create at.f -t blocked -n 50000 -p 1%
expect 0 "$DEDUP" filter add at.f <known50k
expect 0 "$DEDUP" filter verify at.f --known known50k --fresh fresh
grep -q '^planned rate  *1%: not significantly exceeded' out || fail "verify at n: $(cat out)"
expect 0 "$DEDUP" filter verify ver.f --fresh <(head -n 100 fresh)
grep -q '^note .*give at least' out || fail "verify: no note for too few fresh items: $(cat out)"
expect_err "usage: dedup filter verify" "$DEDUP" filter verify ver.f

if [ $fails -ne 0 ]; then
    echo "filter.sh: $fails check(s) failed" >&2
    exit 1
fi
echo "filter.sh: all checks passed"
