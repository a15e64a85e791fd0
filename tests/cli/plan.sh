#!/bin/bash
# dedup plan: the articles' cases through the command (text and JSON), a
# sample measured from a file, the questions asked one by one on a terminal
# (script(1) gives the command a pseudo-terminal), and usage errors.  The
# decisions themselves are tested on the library in tests/unit/test_plan.c;
# here the command must print them whole and correctly.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/expect.sh"
fails=0
cd "$T" || exit 1

# method CMD... : the recommended method of `dedup plan ... --json`
method() {
    "$DEDUP" plan "$@" --json >out 2>err || { fail "plan $*: exit $? $(cat err)"; return; }
    python3 -c 'import json; print(json.load(open("out"))["recommended"]["method"])'
}
want() { # want "METHOD|METHOD" ARGS...
    local pat=$1; shift
    local got; got=$(method "$@")
    [[ "$got" =~ ^($pat)$ ]] || fail "plan $*: recommended '$got', expected $pat"
}

want "blocked|bloom" -n 1e10 -p 1e-5 --key-bytes 80         # 10^10 URLs at 1 in 100,000
want "fingerprint|external" -n 1e8 --key-bytes 36 -m 4G --exact # 10^8 UUIDs in 4 GB
want "window" -n 5e5 --window 10m                              # ad clicks per user per 10 min
want "exact" -n 1e7 --key-bytes 20 --exact                     # profile IDs
want "redis-keys" -n 2e7 --window 24h --infra redis            # idempotency keys, TTL
want "cuckoo|counting" -n 1e6 -p 0.1% --delete                 # a blacklist with deletes
want "sharded" -n 1e10 --exact -m 64G --infra cluster
want "bitmap" -n 1e8 --keys int --range 0..199999999 --exact
want "external" -n 1e8 --key-bytes 36 -m 1G --exact

# JSON: every alternative has its reason; figures are numbers.
"$DEDUP" plan -n 1e10 -p 1e-5 --json >plan.json || fail "plan --json"
python3 - <<'EOF' || fail "plan JSON: $(head -c 300 plan.json)"
import json
o = json.load(open("plan.json"))
r = o["recommended"]
assert r["feasible"] and r["memory"] > 25 * 2**30 and r["hashes"] > 0 and 0 < r["fpr"] <= 1.01e-5, r
assert r["command"].startswith("dedup --mode "), r
assert o["question"]["items"] == 10**10 and o["question"]["fpr"] == 1e-5, o["question"]
names = {a["method"] for a in o["alternatives"]}
assert {"exact", "fingerprint", "cuckoo", "counting", "external"} <= names, names
for a in o["alternatives"]:
    assert len(a["reason"]) > 10, a
EOF

# Text: the recommendation, its figures, its command, the alternatives.
expect 0 "$DEDUP" plan -n 1e8 --key-bytes 36 -m 4G --exact
grep -q '^Recommended: fingerprint' out || fail "text: no recommendation line: $(head -3 out)"
grep -q '^  memory: .*bits a key' out || fail "text: no memory figure"
grep -q '^  command:  dedup --mode fingerprint -n 100000000 FILE' out || fail "text: no command"
grep -q 'exact .*ruled out: needs .* over the 4.00 GiB budget' out || fail "text: exact's reason"
expect 0 "$DEDUP" plan -n 1e8 --key-bytes 36 -m 1G --exact
grep -q '^  disk: ' out || fail "text: external plan without disk figures"
expect 0 "$DEDUP" plan -n 1e10 --exact -m 64G --infra cluster
grep -q '^  nodes:    [0-9]*, .* each' out || fail "text: sharded plan without nodes"
grep -q 'dedup split -N' out || fail "text: sharded plan without its split command"
expect 0 "$DEDUP" plan -n 2e7 --window 24h --infra redis
grep -q 'dedup --redis redis://HOST:6379 --redis-scheme keys --ttl 1d' out || fail "redis command: $(grep command out)"

# --sample: distinct keys and lengths measured from a file.
python3 - "$SEED" <<'EOF'
import random, sys
r = random.Random(int(sys.argv[1]))
with open("sample.txt", "w") as f:
    for i in range(30000):
        f.write("%d\thttps://example.com/item/%06d\n" % (i, r.randrange(20000)))
EOF
distinct=$(cut -f2 sample.txt | sort -u | wc -l)
"$DEDUP" plan --sample sample.txt -f 2 --json >out 2>err || fail "plan --sample: $(cat err)"
python3 - "$distinct" <<'EOF' || fail "--sample: $(head -c 300 out)"
import json, sys
q = json.load(open("out"))["question"]
d = int(sys.argv[1])
assert abs(q["items"] - d) <= 3 * 0.0081 * d + 1, (q["items"], d)  # 3 standard errors
assert q["records"] == 30000, q
assert abs(q["key_bytes"] - 31) < 0.01, q         # "https://example.com/item/NNNNNN"
EOF
expect_err "no-such.txt" "$DEDUP" plan --sample no-such.txt

# On a terminal the questions are asked one by one.
printf '1e7\n\nno\nbatch\nn local\n' | script -qec "$DEDUP plan" /dev/null >tty.out 2>&1
grep -q '1/5 How many distinct keys' tty.out || fail "terminal: question 1 not asked: $(head -c 300 tty.out)"
grep -q '5/5 Must keys be deleted' tty.out || fail "terminal: question 5 not asked"
grep -q 'Recommended: exact' tty.out || fail "terminal: no recommendation: $(tail -c 300 tty.out)"
printf '1e9\n4G\n1e-3\nstream 10m\ny redis\n' | script -qec "$DEDUP plan" /dev/null >tty.out 2>&1
grep -q 'Recommended: redis-keys' tty.out || fail "terminal: redis answers: $(grep Recommended tty.out)"

# The command's figures are the library's sizing, as `dedup calc` prints it:
# the bloom and blocked choices' bytes, k and rate for the same n and p.
for q in "1e6 1%" "3e7 0.1%" "5000 1e-5"; do
    set -- $q
    "$DEDUP" plan -n "$1" -p "$2" --json >plan.json || fail "plan -n $1 -p $2"
    "$DEDUP" calc -n "$1" -p "$2" --json >calc.json || fail "calc -n $1 -p $2"
    python3 - plan.json calc.json <<'PY' || fail "plan -n $1 -p $2: figures differ from dedup calc"
import json, sys
plan = json.load(open(sys.argv[1]))
calc = {c["type"]: c for c in map(json.loads, open(sys.argv[2]))}
got = {c["method"]: c for c in [plan["recommended"]] + plan["alternatives"]}
for t in ("bloom", "blocked"):
    g, c = got[t], calc[t]
    assert (g["memory"], g["hashes"]) == (c["bytes"], c["k"]), (t, g, c)
    assert abs(g["fpr"] - c["fpr"]) <= 1e-12 * c["fpr"], (t, g["fpr"], c["fpr"])
PY
done

# Without answers and without a terminal: a usage error, found before anything.
expect_err "give -n/--items N or --sample FILE" "$DEDUP" plan </dev/null
expect_err "--exact and -p/--fpr" "$DEDUP" plan -n 10 --exact -p 0.01
expect_err "at most 0.5" "$DEDUP" plan -n 10 -p 0.7
expect_err "--infra must be local, redis or cluster" "$DEDUP" plan -n 10 --infra cloud
expect_err "--range must be LO..HI" "$DEDUP" plan -n 10 --keys int --range 9..3
expect_err "--window must be a duration" "$DEDUP" plan -n 10 --window soon
expect_err "unexpected argument" "$DEDUP" plan -n 10 file.txt
expect_err "unknown option" "$DEDUP" plan --bogus
expect 0 "$DEDUP" plan --help
grep -q -- "--infra" out || fail "--help lacks --infra"

# Every option of the help is in the man page.
groff -man -Tutf8 -P-c -P-b -P-u "$SRC/docs/dedup.1" 2>/dev/null >man.txt || fail "cannot render the man page"
"$DEDUP" plan --help >help.txt
for opt in $(grep -o -- '--[a-z][a-z-]*' help.txt | sort -u); do
    [ "$opt" = --help ] && continue
    grep -q -- "$opt" man.txt || fail "option $opt of 'dedup plan' is not in the man page"
done
grep -q "dedup plan" man.txt || fail "the man page lacks 'dedup plan'"

[ "$fails" -eq 0 ] && echo "plan: all passed" || echo "plan: $fails failed"
[ "$fails" -eq 0 ]
