#!/bin/bash
# dedup count: the estimate against the exact count of a naive reference
# (sort -u) on seeded inputs, the key options, --exact, -o and --merge
# (merge of sketches == sketch of the union, byte for byte), JSON, and
# errors found before any work.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/expect.sh"
fails=0
cd "$T" || exit 1

# Seeded input: N lines over a space of distinct values, key in field 2.
python3 - "$SEED" <<'EOF'
import random, sys
r = random.Random(int(sys.argv[1]))
with open("a.txt", "w") as a, open("b.txt", "w") as b:
    for i in range(200000):
        a.write("%d\tuser%d\n" % (i, r.randrange(150000)))
    for i in range(100000):
        b.write("%d\tUser%d \n" % (i, r.randrange(100000, 300000)))
with open("small.txt", "w") as s:
    for i in range(500):
        s.write("k%d\n" % r.randrange(300))
EOF

# within EST TRUE SIGMAS SE: |EST - TRUE| <= SIGMAS * SE * TRUE + 1
within() {
    python3 -c "import sys; e,t,k,se=map(float,sys.argv[1:]); sys.exit(0 if abs(e-t) <= k*se*t + 1 else 1)" "$@"
}

# ---- estimate vs exact vs reference ------------------------------------------
ref_a=$(cut -f2 a.txt | sort -u | wc -l)
expect 0 "$DEDUP" count -f 2 a.txt
est=$(cut -f1 out)
grep -q $'\t± ' out || fail "text output lacks the standard error: $(cat out)"
within "$est" "$ref_a" 3 0.0081 || fail "estimate $est of $ref_a distinct keys is beyond 3 standard errors"
expect 0 "$DEDUP" count --exact -f 2 a.txt
[ "$(cat out)" = "$ref_a	exact" ] || fail "--exact: $(cat out), expected $ref_a"

# Small inputs stay sparse: exact or within a key.
ref_s=$(sort -u small.txt | wc -l)
expect 0 "$DEDUP" count small.txt
within "$(cut -f1 out)" "$ref_s" 0 0 || fail "small input: $(cat out), expected $ref_s"
expect 0 "$DEDUP" count --exact - <small.txt
[ "$(cut -f1 out)" = "$ref_s" ] || fail "stdin --exact: $(cat out)"

# Key options as in the main job: -i and --trim make b.txt's keys a.txt's.
ref_b=$(cut -f2 b.txt | sed 's/ *$//' | tr 'A-Z' 'a-z' | sort -u | wc -l)
expect 0 "$DEDUP" count --exact -f 2 -i --trim b.txt
[ "$(cut -f1 out)" = "$ref_b" ] || fail "-i --trim: $(cat out), expected $ref_b"
expect 0 "$DEDUP" count --exact -f 2 b.txt
[ "$(cut -f1 out)" = "$(cut -f2 b.txt | sort -u | wc -l)" ] || fail "keys without -i --trim"
# Same keys as the main job keeps lines.
kept=$("$DEDUP" -f 2 -i --trim a.txt b.txt | wc -l)
expect 0 "$DEDUP" count --exact -f 2 -i --trim a.txt b.txt
[ "$(cut -f1 out)" = "$kept" ] || fail "count --exact ($(cut -f1 out)) != lines dedup keeps ($kept)"

# ---- -o and --merge: the union, register for register ----------------------
expect 0 "$DEDUP" count -f 2 -i --trim -o a.hll a.txt
expect 0 "$DEDUP" count -f 2 -i --trim -o b.hll b.txt
expect 0 "$DEDUP" count -f 2 -i --trim -o ab.hll b.txt a.txt
expect 0 "$DEDUP" count --merge a.hll b.hll -o merged.hll
cmp -s merged.hll ab.hll || fail "merge of a.hll and b.hll differs from the sketch of a.txt + b.txt"
within "$(cut -f1 out)" "$kept" 3 0.0081 || fail "merged estimate $(cut -f1 out) vs $kept"
expect 0 "$DEDUP" count --merge a.hll b.hll --json
python3 - "$kept" <<'EOF' || fail "--json: $(cat out)"
import json, sys
o = json.load(open("out"))
assert o["exact"] is False and o["precision"] == 14 and o["sketches"] == 2, o
assert abs(o["distinct"] - int(sys.argv[1])) <= 3 * o["std_error"] + 1, o
assert abs(o["relative_std_error"] - 1.04 / 128) < 1e-12, o
EOF
expect 0 "$DEDUP" count -P 10 -o p10.hll a.txt
expect 0 "$DEDUP" count --seed 7 -o s7.hll a.txt
expect_err "precisions differ" "$DEDUP" count --merge a.hll p10.hll
expect_err "seeds differ" "$DEDUP" count --merge a.hll s7.hll

# ---- errors before the work ----------------------------------------------------
expect_err "precision" "$DEDUP" count -P 3 a.txt
expect_err "precision" "$DEDUP" count -P 19 a.txt
expect_err "cannot be used with --merge" "$DEDUP" count --exact --merge a.hll
expect_err "needs the sketch files" "$DEDUP" count --merge
expect_err "no-such" "$DEDUP" count no-such.txt
expect_err "unknown option" "$DEDUP" count --bogus
printf 'garbage' > bad.hll
expect_err "bad.hll: cannot load" "$DEDUP" count --merge bad.hll
head -c 100 a.hll > cut.hll
expect_err "cut.hll: cannot load" "$DEDUP" count --merge a.hll cut.hll
expect 0 "$DEDUP" count --help
grep -q -- "--merge" out || fail "--help lacks --merge"

# Every option of the help is in the man page.
groff -man -Tutf8 -P-c -P-b -P-u "$SRC/docs/dedup.1" 2>/dev/null >man.txt || fail "cannot render the man page"
"$DEDUP" count --help >help.txt
for opt in $(grep -o -- '--[a-z][a-z-]*' help.txt | sort -u); do
    [ "$opt" = --help ] && continue
    grep -q -- "$opt" man.txt || fail "option $opt of 'dedup count' is not in the man page"
done
grep -q "dedup count" man.txt || fail "the man page lacks 'dedup count'"

[ "$fails" -eq 0 ] && echo "count: all passed" || echo "count: $fails failed"
[ "$fails" -eq 0 ]
