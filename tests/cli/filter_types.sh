#!/bin/bash
# dedup filter with --type counting, cuckoo, cuckoo-chain and scalable:
# create/add/query/del/info/merge, no false negatives, deletes, 'full',
# growth, and the clear errors for what a type cannot do.  Needs $DEDUP and
# python3.
set -u
DEDUP=${DEDUP:?set DEDUP to the dedup binary}
. "$(dirname "$0")/lib/expect.sh" # fail, expect, expect_err
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0
json_check() { # FILE PYTHON-EXPR (o = the object)
    python3 -c "import json,sys; o=json.load(open(sys.argv[1])); assert $2, o" "$1" ||
        fail "info --json: $2"
}

seq -f 'item-%g' 1 5000 >items
seq -f 'absent-%g' 1 20000 >absent
seq -f 'fresh-%g' 1 800000 >fresh
model_rate() { "$DEDUP" filter info --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["fpr_current"])'; }
head -n 2500 items >firsthalf
tail -n 2500 items >secondhalf

# ---- common behaviour: no false negatives, rate, delete where possible ----------
for type in counting cuckoo cuckoo-chain scalable; do
    f=$type.f
    expect 0 "$DEDUP" filter create "$f" --type $type -n 5000 -p 1%
    expect 0 "$DEDUP" filter add "$f" <items
    expect 0 "$DEDUP" filter query -c "$f" <items
    [ "$(cat out)" = 5000 ] || fail "$type: $(cat out) of 5000 added items found"
    "$DEDUP" filter query -c "$f" <absent >out
    fp=$(cat out)
    [ "$fp" -le 320 ] || fail "$type: $fp of 20000 fresh items reported present at p = 1%"
    "$DEDUP" filter query -c "$f" <fresh >out
    rate_within "$type" "$(cat out)" 800000 "$(model_rate "$f")"
    expect 0 "$DEDUP" filter info --json "$f"
    json_check out "o['type'] == '$type'"
    json_check out "0 <= o['fpr_current'] <= 0.0125"
    expect 0 "$DEDUP" filter info "$f"
    grep -q '^false-positive rate now' out || fail "$type: info lacks the current rate"
done

for type in counting cuckoo cuckoo-chain; do
    f=$type.f
    # Delete the first half: the second half is still all there.
    expect 0 "$DEDUP" filter del "$f" <firsthalf
    expect 0 "$DEDUP" filter query -c "$f" <secondhalf
    [ "$(cat out)" = 2500 ] || fail "$type: after del, $(cat out) of the 2500 kept items found"
    "$DEDUP" filter query -c "$f" <firsthalf >out
    [ "$(cat out)" -le 50 ] || fail "$type: $(cat out) of 2500 deleted items still reported"
    # Deleting what is certainly absent: exit 1, a warning, the file unchanged.
    cp "$f" before
    "$DEDUP" filter query -v "$f" <absent | head -n 3 >gone
    [ "$(wc -l <gone)" = 3 ] || fail "$type: no certainly-absent items found"
    expect 1 "$DEDUP" filter del "$f" $(cat gone)
    grep -q 'certainly absent' err || fail "$type: del of absent items did not say so"
    cmp -s before "$f" || fail "$type: del of absent items changed the file"
done

# counting: info reports adds, deletes and saturated counters.
expect 0 "$DEDUP" filter info --json counting.f
json_check out "o['adds'] == 5000 and o['deletes'] == 2500 and o['items'] == 2500"
json_check out "o['saturated'] == 0 and o['counters'] % 16 == 0"
# Saturation: one item added 20 times stays after 20 deletes.
expect 0 "$DEDUP" filter create sat.f --type counting -n 100
for i in $(seq 20); do echo same; done >same
expect 0 "$DEDUP" filter add sat.f <same
expect 0 "$DEDUP" filter del sat.f <same
expect 0 "$DEDUP" filter query sat.f same
expect 0 "$DEDUP" filter info --json sat.f
json_check out "o['saturated'] >= 1"
# counting merge: the union answers for both inputs.
expect 0 "$DEDUP" filter create m1.f --type counting -n 5000 --seed 5 # one seed: they merge
expect 0 "$DEDUP" filter create m2.f --type counting -n 5000 --seed 5
expect 0 "$DEDUP" filter add m1.f <firsthalf
expect 0 "$DEDUP" filter add m2.f <secondhalf
expect 0 "$DEDUP" filter merge m.f m1.f m2.f
expect 0 "$DEDUP" filter query -c m.f <items
[ "$(cat out)" = 5000 ] || fail "counting merge: $(cat out) of 5000 found"
expect 0 "$DEDUP" filter create m3.f --type counting -n 9000
expect_err 'differ' "$DEDUP" filter merge m4.f m1.f m3.f

# ---- cuckoo: full is reported and nothing is saved; growth -------------------------
expect 0 "$DEDUP" filter create small.f --type cuckoo -n 1000
cp small.f small.before
expect 1 "$DEDUP" filter add small.f <items
grep -q 'full' err || fail "cuckoo: adding 5000 items to a 1000-item filter did not report full"
cmp -s small.before small.f || fail "cuckoo: a failed add changed the file"
expect 0 "$DEDUP" filter create grow.f --type cuckoo -n 1000 --expansion 2
expect 0 "$DEDUP" filter add grow.f <items
expect 0 "$DEDUP" filter query -c grow.f <items
[ "$(cat out)" = 5000 ] || fail "cuckoo --expansion 2: $(cat out) of 5000 found"
expect 0 "$DEDUP" filter info --json grow.f
json_check out "o['type'] == 'cuckoo-chain' and o['links'] >= 3 and o['items'] == 5000"
json_check out "o['fingerprint_bits'] == 12 and o['bucket_size'] == 4 and o['expansion'] == 2"
expect 0 "$DEDUP" filter create fp.f --type cuckoo -n 1000 --fingerprint-bits 16 --bucket-size 2 --max-kicks 100
expect 0 "$DEDUP" filter info --json fp.f
json_check out "o['fingerprint_bits'] == 16 and o['bucket_size'] == 2 and o['max_kicks'] == 100"
expect_err 'bad value' "$DEDUP" filter create bad.f --type cuckoo -n 1000 --bucket-size 0
expect_err 'bad value' "$DEDUP" filter create bad.f --type cuckoo -n 1000 --fingerprint-bits 40
expect_err 'does not apply' "$DEDUP" filter create bad.f --type cuckoo -n 1000 -k 3
expect_err 'cannot merge\|cannot be re-inserted\|fingerprints' "$DEDUP" filter merge x.f cuckoo.f cuckoo.f

# ---- scalable: no -n needed, grows, keeps the promise, cannot delete --------------
expect 0 "$DEDUP" filter create s.f --type scalable -p 1%
seq -f 'k%g' 1 100000 >many
expect 0 "$DEDUP" filter add s.f <many
expect 0 "$DEDUP" filter query -c s.f <many
[ "$(cat out)" = 100000 ] || fail "scalable: $(cat out) of 100000 found"
"$DEDUP" filter query -c s.f <absent >out
[ "$(cat out)" -le 260 ] || fail "scalable: $(cat out) of 20000 fresh items present at p = 1%"
"$DEDUP" filter query -c s.f <fresh >out
rate_within "scalable after growth" "$(cat out)" 800000 "$(model_rate s.f)"
expect 0 "$DEDUP" filter info --json s.f
json_check out "o['links'] >= 6 and o['n'] == 1000 and o['fpr_bound'] <= 0.01"
json_check out "o['fpr_current'] <= o['fpr_bound'] * 1.2 and abs(o['tightening'] - 0.9) < 1e-12"
json_check out "o['link0_capacity'] == 1000 and o['link1_capacity'] == 2000"
expect_err 'cannot delete' "$DEDUP" filter del s.f k1
expect_err 'cannot\|promise' "$DEDUP" filter merge x.f s.f s.f
expect_err 'does not apply' "$DEDUP" filter create bad.f --type scalable -m 1M
expect_err 'bad value' "$DEDUP" filter create bad.f --type scalable --tightening 1.5
expect 0 "$DEDUP" filter create s1.f --type scalable -n 10 --max-links 1 --growth 3 --blocked
expect 1 "$DEDUP" filter add s1.f <items
grep -q 'full' err || fail "scalable --max-links 1: overflow did not report full"

# Options of one type are refused for another.
expect_err 'growth' "$DEDUP" filter create bad.f --type counting -n 10 --growth 2

[ $fails -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "filter_types: all passed"
