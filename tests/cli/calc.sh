#!/bin/bash
# dedup calc: the seeds' sizing table, every direction of sizing, JSON, and
# clear errors.  Needs $DEDUP (the built tool) and python3.
set -u
DEDUP=${DEDUP:?set DEDUP to the dedup binary}
. "$(dirname "$0")/lib/python.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# check NAME CMD... : runs CMD, expects exit 0.
run_ok() {
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ $rc -eq 0 ] || fail "'$*' exited $rc: $(cat "$tmp/err")"
}

# ---- The seeds' table: classic Bloom must match the formulas exactly -----
# n p bits k bytes MiB(2 decimals)
while read -r n p bits k bytes mib; do
    run_ok "$DEDUP" calc -n "$n" -p "$p" --json --type bloom
    python3 - "$tmp/out" "$n" "$p" "$bits" "$k" "$bytes" "$mib" <<'EOF' || fail "calc -n $n -p $p"
import json, math, sys
path, n, p, bits, k, nbytes, mib = sys.argv[1:]
lines = open(path).read().splitlines()
assert len(lines) == 1, lines
o = json.loads(lines[0])
n, p, bits, k, nbytes = int(float(n)), float(p.rstrip('%')) / (100 if p.endswith('%') else 1), int(bits), int(k), int(nbytes)
for key in ("type", "n", "p", "bits", "bytes", "k", "fpr"):
    assert key in o, "missing key " + key
assert o["type"] == "bloom", o
assert o["n"] == n, (o["n"], n)
assert abs(o["p"] - p) < 1e-15, (o["p"], p)
# m = ceil(-n ln p / (ln 2)^2), k = round(m/n ln 2)
want_bits = math.ceil(-n * math.log(p) / math.log(2) ** 2)
assert o["bits"] == want_bits == bits, (o["bits"], want_bits, bits)
assert o["k"] == round(bits / n * math.log(2)) == k, (o["k"], k)
assert o["bytes"] == (bits + 7) // 8 == nbytes, (o["bytes"], nbytes)
assert "%.2f" % (o["bytes"] / 2**20) == mib, (o["bytes"] / 2**20, mib)
fpr = (1 - math.exp(k * n * math.log1p(-1 / bits))) ** k
assert abs(o["fpr"] - fpr) <= 1e-9 * fpr, (o["fpr"], fpr)
# rounding k costs a little: the rate reached is within 1% of p
assert abs(o["fpr"] - p) < 0.01 * p, (o["fpr"], p)
EOF
done <<'TABLE'
1e5 1% 958506 7 119814 0.11
1e6 1% 9585059 7 1198133 1.14
1e6 0.1% 14377588 10 1797199 1.71
1e7 1% 95850584 7 11981323 11.43
1e8 0.01% 1917011676 13 239626460 228.53
TABLE

# Text output shows the human-readable size.
run_ok "$DEDUP" calc -n 1e6 -p 0.01
grep -q '1198133 (1.14 MiB, 1.20 MB)' "$tmp/out" || fail "text output lacks '1.14 MiB': $(cat "$tmp/out")"
grep -q 'hashes (k): *7' "$tmp/out" || fail "text output lacks k = 7"
grep -q '^blocked Bloom' "$tmp/out" || fail "text output lacks the blocked layout"

# ---- Blocked: meets p by its own model, whole 512-bit blocks, more bits ---
for np in "1e5 0.01" "1e6 0.001" "1e7 0.01" "1e8 0.0001"; do
    set -- $np
    run_ok "$DEDUP" calc -n "$1" -p "$2" --json
    python3 -m json.tool --json-lines "$tmp/out" >/dev/null || fail "calc --json is not valid JSON Lines"
    python3 - "$tmp/out" "$1" "$2" <<'EOF' || fail "blocked sizing for n=$1 p=$2"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n, p = int(float(sys.argv[2])), float(sys.argv[3])
assert [r["type"] for r in rows] == ["bloom", "blocked"], rows
c, b = rows
assert b["bits"] % 512 == 0 and b["bytes"] * 8 == b["bits"], b
assert b["fpr"] <= p * (1 + 1e-9), b
assert b["bits"] >= c["bits"], (b, c)
assert 1 <= b["k"] <= 16, b
EOF
done

# ---- Every direction gives consistent answers --------------------------------
# n, m -> p: bits from the memory (rounded down), p is the rate reached.
run_ok "$DEDUP" calc -n 1e6 -m 1M --json
python3 - "$tmp/out" <<'EOF' || fail "calc -n 1e6 -m 1M"
import json, math, sys
c, b = [json.loads(l) for l in open(sys.argv[1])]
for r in (c, b):
    assert r["bits"] == 8 * 2**20 and r["bytes"] == 2**20, r
    assert r["p"] == r["fpr"] and 0.01 < r["fpr"] < 0.03, r
n, m = 10**6, 8 * 2**20
assert c["k"] == round(m / n * math.log(2)), c
fpr = (1 - math.exp(c["k"] * n * math.log1p(-1 / m))) ** c["k"]
assert abs(c["fpr"] - fpr) <= 1e-9 * fpr, (c, fpr)
EOF

# m, p -> n: the capacity is the largest n whose bits fit.
for t in bloom blocked; do
    run_ok "$DEDUP" calc -m 64M -p 0.1% --json --type $t
    cap=$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); assert o["bits"]==64*2**20*8, o; print(o["n"])' "$tmp/out") ||
        { fail "calc -m 64M -p 0.1% --type $t"; continue; }
    if [ $t = bloom ]; then
        # n items need at most the memory given, n+1 items need more.
        run_ok "$DEDUP" calc -n "$cap" -p 0.1% --json --type bloom
        python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["bits"] <= 64*2**20*8' "$tmp/out" ||
            fail "capacity $cap at 0.1% does not fit 64M"
        run_ok "$DEDUP" calc -n $((cap + 1)) -p 0.1% --json --type bloom
        python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["bits"] > 64*2**20*8' "$tmp/out" ||
            fail "capacity $cap at 0.1% is not the largest that fits 64M"
    else
        # n items in that memory reach at most p, n+1 more than p.
        run_ok "$DEDUP" calc -n "$cap" -m 64M --json --type blocked
        python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["fpr"] <= 0.001' "$tmp/out" ||
            fail "blocked capacity $cap exceeds 0.1% in 64M"
        run_ok "$DEDUP" calc -n $((cap + 1)) -m 64M --json --type blocked
        python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["fpr"] > 0.001' "$tmp/out" ||
            fail "blocked capacity $cap is not the largest at 0.1% in 64M"
    fi
done

# Units: 1e6 = 1M = 1000k = 1000000; 1% = 0.01 = 1e-2.
run_ok "$DEDUP" calc -n 1000000 -p 0.01 --json
cp "$tmp/out" "$tmp/ref"
for args in "-n 1M -p 1%" "--items=1000k --fpr=1e-2" "-p 1% -n 1e6"; do
    run_ok "$DEDUP" calc $args --json
    cmp -s "$tmp/out" "$tmp/ref" || fail "calc $args differs from calc -n 1000000 -p 0.01"
done

# ---- Errors: exit 2, a message that names the argument, nothing on stdout --
check_err() { # PATTERN ARGS...
    local pat=$1
    shift
    "$DEDUP" calc "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ $rc -eq 2 ] || fail "calc $* exited $rc, expected 2"
    grep -q -- "$pat" "$tmp/err" || fail "calc $*: stderr lacks '$pat': $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "calc $*: wrote to stdout on error"
}
check_err "-p/--fpr must be between 0 and 1 exclusive.*(got '2')" -n 1e6 -p 2
check_err "-p/--fpr must be between 0 and 1" -n 1e6 -p 0
check_err "-p/--fpr must be between 0 and 1" -n 1e6 -p 100%
check_err "-n/--items must be a positive whole number.*got '0'" -n 0 -p 1%
check_err "-n/--items must be a positive whole number.*got 'abc'" -n abc -p 1%
check_err "-n/--items must be a positive whole number.*got '-5'" -n -5 -p 1%
check_err "-m/--memory must be a positive size.*got '12Q'" -m 12Q -p 1%
check_err "give two of" -n 1e6
check_err "give two of" 
check_err "got all three" -n 1e6 -p 1% -m 1M
check_err "-t/--type must be bloom or blocked (got 'cuckoo')" -n 1e6 -p 1% --type cuckoo
check_err "unknown option '--bogus'" --bogus
check_err "option '--items' needs a value" --items
check_err "too small for a blocked filter" -m 10 -p 1% --type blocked
check_err "unexpected argument 'extra'" -n 1 -p 1% extra

# ---- --help on stdout, exit 0 ---------------------------------------------
"$DEDUP" calc --help >"$tmp/out" 2>"$tmp/err" || fail "calc --help exit status"
grep -q '^Usage: dedup calc' "$tmp/out" || fail "calc --help does not print usage on stdout"
[ ! -s "$tmp/err" ] || fail "calc --help wrote to stderr"

if [ $fails -ne 0 ]; then
    echo "calc.sh: $fails check(s) failed" >&2
    exit 1
fi
echo "calc.sh: all checks passed"
