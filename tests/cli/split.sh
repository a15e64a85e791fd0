#!/usr/bin/env bash
# `dedup split` and `dedup ring`: split + per-part dedup is exact global
# dedup (against the naive reference, seeded random inputs, key options,
# jump hash and the ring), filters, nothing left half on failure, and every
# bad input refused with exit 2 before any output.
. "$(dirname "$0")/lib/common.sh"
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"
CHECK="python3 $SRC/tests/cli/lib/check_split.py"

gen() { # gen SEED LINES FILE: records with repeats, case/space variants, empties
    python3 - "$1" "$2" "$3" <<'PY'
import random, sys
seed, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = random.Random(seed)
words = [b"alpha", b"Beta", b"GAMMA", b"delta", b"", b" x ", b"\tTab", b"a\rb", b"\xff\xfe"]
out = []
for i in range(n):
    k = r.randrange(max(1, n // 3))
    f1 = b"k%d" % (k % 211)
    if r.random() < 0.2: f1 = f1.upper()
    sp = b" " * r.randrange(3)
    rec = sp + f1 + sp + b"\t" + words[k % len(words)] + b"\t" + b"%d" % (k % 7)
    if r.random() < 0.1: rec += b"  "
    if r.random() < 0.05: rec = b""
    if r.random() < 0.05: rec = b"id:" + rec
    out.append(rec)
data = b"\n".join(out)
if r.random() < 0.5: data += b"\n"
open(path, "wb").write(data)
PY
}

# --- split, dedup each part, compare with the whole input's dedup -------------------
combos=("" "-i" "--trim" "--squeeze" "--strip-prefix id:" "-f 1" "-f 2 -i" "-f 1 --trim -i"
        "-f 3" "-i --trim --squeeze")
routes=("-N 1" "-N 5" "--nodes a,b=2,c" "--nodes n1,n2,n3,n4,n5,n6,n7=0.5")
for round in $(seq "$(rounds 2)"); do
    s=$((SEED + round))
    gen "$s" 2000 "$T/in"
    for c in "${combos[@]}"; do
        # shellcheck disable=SC2086
        $REF $c "$T/in" > "$T/global"
        for rt in "${routes[@]}"; do
            rm -rf "$T/p"; mkdir "$T/p"
            # shellcheck disable=SC2086
            if ! "$DEDUP" split $rt $c -o "$T/p/part-%s" "$T/in" 2> "$T/err"; then
                fail "split $rt $c (seed $s): $(head -c 300 "$T/err")"; continue
            fi
            args=()
            for f in "$T"/p/part-*; do
                # shellcheck disable=SC2086
                "$DEDUP" $c "$f" > "$f.dd"
                args+=("$f:$f.dd")
            done
            if $CHECK nl "$T/in" "$T/global" "${args[@]}" > "$T/why"; then pass
            else fail "split $rt $c (seed $s): $(head -c 300 "$T/why")"; fi
        done
    done
done
# the number of parts: one a node, also the empty ones
rm -rf "$T/p"; mkdir "$T/p"
printf 'only\n' | "$DEDUP" split -N 7 -o "$T/p/%s.txt"
check "-N 7 makes 7 files" [ "$(ls "$T/p" | wc -l)" -eq 7 ]
check "one record in all" [ "$(cat "$T"/p/*.txt | wc -l)" -eq 1 ]
rm -rf "$T/p"; mkdir "$T/p"
: | "$DEDUP" split --nodes a,b -o "$T/p/%s"
check "empty input: empty parts" [ -f "$T/p/a" ] && [ ! -s "$T/p/a" ] && [ -f "$T/p/b" ]

# -z, and several input files read one after another
python3 - "$SEED" "$T/z1" "$T/z2" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
for path in sys.argv[2:]:
    recs = [b"key %d\nwith newline" % r.randrange(300) for _ in range(800)]
    open(path, "wb").write(b"\0".join(recs))   # no final NUL: still a record
PY
cat "$T/z1" > "$T/zall"; printf '\0' >> "$T/zall"; cat "$T/z2" >> "$T/zall"
$REF -z "$T/zall" > "$T/global"
rm -rf "$T/p"; mkdir "$T/p"
"$DEDUP" split -z --nodes x,y,z -o "$T/p/%s" "$T/z1" "$T/z2"
args=()
for f in "$T"/p/?; do "$DEDUP" -z "$f" > "$f.dd"; args+=("$f:$f.dd"); done
if $CHECK nul "$T/zall" "$T/global" "${args[@]}" > "$T/why"; then pass; else fail "-z: $(cat "$T/why")"; fi

# --- routing is the library's, pinned: the ring's test keys, from the command line ---
owner=$("$DEDUP" ring --nodes alpha,beta,gamma=2,delta=0.5 --owner key-1)
check "owner of key-1 is pinned (gamma)" [ "$owner" = gamma ]
check "jump owner of key-0 among 10 is pinned (8)" [ "$("$DEDUP" ring -N 10 --owner key-0)" = 8 ]
rm -rf "$T/p"; mkdir "$T/p"
printf 'key-0\nkey-1\nkey-2\n' | "$DEDUP" split --nodes alpha,beta,gamma=2,delta=0.5 -o "$T/p/%s"
check "split sends key-0 where ring says" grep -qx key-0 "$T/p/$("$DEDUP" ring --nodes alpha,beta,gamma=2,delta=0.5 --owner key-0)"
check "split sends key-1 to gamma" grep -qx key-1 "$T/p/gamma"
printf 'key-0\n' | "$DEDUP" split -N 10 -o "$T/p/j%s"
check "split -N 10 sends key-0 to 8" grep -qx key-0 "$T/p/j8"

# --- --filter ------------------------------------------------------------------------------
gen "$SEED" 3000 "$T/in"
rm -rf "$T/p" "$T/q"; mkdir "$T/p" "$T/q"
"$DEDUP" split --nodes a,b,c -f 1 -o "$T/p/%s" "$T/in"
(cd "$T/q" && "$DEDUP" split --nodes a,b,c -f 1 --filter 'cat > "got-$DEDUP_NODE"' "$T/in")
for n in a b c; do check "filter part $n equals -o part" cmp -s "$T/p/$n" "$T/q/got-$n"; done
(cd "$T/q" && "$DEDUP" split -N 3 -o 'f-%s.gz' --filter 'gzip > "$FILE"' "$T/in")
check "FILE is the -o name" [ -s "$T/q/f-0.gz" ] && [ -s "$T/q/f-2.gz" ]
# the recipe: each filter deduplicates its part; the concatenation is global dedup
(cd "$T/q" && "$DEDUP" split -N 4 -f 1 -i --filter "\"$DEDUP\" -f 1 -i > \"dd-\$DEDUP_NODE\"" "$T/in")
sort "$T"/q/dd-* > "$T/union"
$REF -f 1 -i "$T/in" | sort > "$T/whole"
check "recipe: union of per-part dedup = whole dedup" cmp -s "$T/union" "$T/whole"
# a failing filter: its status, its node's name
"$DEDUP" split --nodes a,b,c --filter 'if [ "$DEDUP_NODE" = b ]; then cat >/dev/null; exit 3; fi; cat >/dev/null' "$T/in" 2> "$T/err"
rc=$?
check "failing filter: its exit status (3, got $rc)" [ $rc -eq 3 ]
check "failing filter: node named" grep -q "node 'b' exited with status 3" "$T/err"
"$DEDUP" split -N 3 --filter 'if [ "$DEDUP_NODE" = 1 ]; then exit 5; fi; cat >/dev/null' "$T/in" 2> "$T/err"
rc=$?
check "filter that exits at once: status 5 (got $rc)" [ $rc -eq 5 ]
"$DEDUP" split -N 2 --filter 'kill -9 $$' "$T/in" 2> "$T/err"
rc=$?
check "killed filter: 128+9 (got $rc)" [ $rc -eq 137 ]
check "killed filter: named" grep -q "killed by signal 9" "$T/err"
# one that stops reading early but succeeds (head) is not a failure
"$DEDUP" split -N 2 --filter 'head -n 1 > /dev/null' "$T/in" 2> "$T/err"
check "a filter like head: exit 0" [ $? -eq 0 ]

# --- nothing half ---------------------------------------------------------------------------
rm -rf "$T/o"; mkdir "$T/o"
echo old > "$T/o/a"
ln -s /dev/full "$T/o/b"
"$DEDUP" split --nodes a,b,c -o "$T/o/%s" "$T/in" 2> "$T/err"
rc=$?
check "write error: exit 1 (got $rc)" [ $rc -eq 1 ]
check "write error: names the file" grep -q "write error on $T/o/b" "$T/err"
check "write error: the old part a is kept" [ "$(cat "$T/o/a")" = old ]
check "write error: no part c, no temporary" [ "$(ls "$T/o" | sort | tr '\n' ' ')" = "a b " ]

# --- bad input: exit 2, a clear message, no output at all ---------------------------------
bad() { # bad PATTERN ARGS...: exit 2, stderr matches, nothing written
    local pat=$1; shift
    rm -rf "$T/b"; mkdir "$T/b"
    (cd "$T/b" && "$DEDUP" split "$@" < "$T/in" > "$T/out" 2> "$T/err")
    local rc=$?
    if [ $rc -ne 2 ]; then fail "split $*: exit $rc, expected 2"; return; fi
    grep -q -- "$pat" "$T/err" || { fail "split $*: stderr lacks '$pat': $(head -c 300 "$T/err")"; return; }
    [ ! -s "$T/out" ] || { fail "split $*: wrote to stdout"; return; }
    [ -z "$(ls -A "$T/b")" ] || { fail "split $*: left files: $(ls "$T/b")"; return; }
    pass
}
bad "empty node name" --nodes a,,b
bad "empty node name" --nodes ""
bad "node 'a' is listed twice" --nodes a,b,a
bad "weight of node 'b' must be a positive number" --nodes a,b=0
bad "weight of node 'b' must be a positive number" --nodes a,b=-1
bad "weight of node 'b' must be a positive number" --nodes a,b=x
bad "weight of node 'a' must be a positive number" --nodes a=0.0001
bad "needs a weight" --nodes a=
bad "printable ASCII" --nodes a/b
bad "node name '.' or '..'" --nodes ..
bad "\-N/--shards" -N 0
bad "\-N/--shards" -N x
bad "\-N/--shards" -N 65537
bad "say how to split" -o 'x-%s'
bad "give one" -N 2 --nodes a,b
bad "must hold %s once" -N 2 -o 'part'
bad "must hold %s once" -N 2 -o '%s-%s'
bad "must hold %s once" -N 2 -o '%d-%s'
bad "cannot write '/nonexistent/dir/0'" -N 2 -o '/nonexistent/dir/%s'
bad "missing-input: No such file" -N 2 missing-input
bad "unknown option '--bogus'" -N 2 --bogus
bad "needs a command" -N 2 --filter ''
bad "\-f/--field" -N 2 -f 0
printf '# nodes\na=1\n\nb = 2\nc=0\n' > "$T/nodes"
bad "$T/nodes:5: the weight of node 'c'" --nodes-file "$T/nodes"
printf 'a\na\n' > "$T/nodes"
bad "node 'a' is listed twice" --nodes-file "$T/nodes"
bad "no node in the file" --nodes-file /dev/null
bad "nodes-file $T/none" --nodes-file "$T/none"
chmod 555 "$T/b" 2>/dev/null
if [ "$(id -u)" != 0 ]; then
    mkdir -p "$T/ro" && chmod 555 "$T/ro"
    "$DEDUP" split -N 2 -o "$T/ro/%s" "$T/in" 2> "$T/err"
    check "unwritable directory: exit 2" [ $? -eq 2 ]
fi
# the good file form works
printf '# nodes\na=1\n\n  b = 2  \nc\n' > "$T/nodes"
rm -rf "$T/p"; mkdir "$T/p"
check "--nodes-file with comments and spaces" "$DEDUP" split --nodes-file "$T/nodes" -o "$T/p/%s" "$T/in"
check "--nodes-file equals --nodes" bash -c "\"$DEDUP\" split --nodes a,b=2,c -o '$T/p/n-%s' '$T/in' && cmp -s '$T/p/b' '$T/p/n-b'"

# --- --stats ------------------------------------------------------------------------------------
rm -rf "$T/p"; mkdir "$T/p"
"$DEDUP" split -N 4 --stats=json -o "$T/p/%s" "$T/in" 2> "$T/stats"
python3 - "$T/stats" "$T/in" "$T/p" <<'PY' && pass || fail "--stats=json does not match the parts"
import json, os, sys
s = json.load(open(sys.argv[1]))
n = open(sys.argv[2], "rb").read().count(b"\n")
assert s["records"] >= n and s["parts"] == 4 and s["routing"] == "jump", s
tot = 0
for p in s["per_part"]:
    data = open(os.path.join(sys.argv[3], p["node"]), "rb").read()
    assert p["records"] == data.count(b"\n") and p["bytes"] == len(data), p
    tot += p["records"]
assert tot == s["records"]
peak = max(p["records"] for p in s["per_part"])
assert abs(s["peak_mean_records"] - peak / (tot / 4)) < 1e-9
PY
"$DEDUP" split --nodes a,b --stats -o "$T/p/%s" "$T/in" 2> "$T/stats"
check "--stats text: balance line" grep -q "peak/mean" "$T/stats"

# --- dedup ring ---------------------------------------------------------------------------------
"$DEDUP" ring --nodes a,b,c --add d --json > "$T/ring.json"
python3 - "$T/ring.json" <<'PY' && pass || fail "ring --add: moved fraction or flows wrong"
import json, math, sys
r = json.load(open(sys.argv[1]))
m = r["moved"]
assert 0 < m <= 0.25 * (1 + 3 / math.sqrt(160)), m
assert all(f["to"] == "d" for f in r["flows"]), r["flows"]
assert abs(sum(f["fraction"] for f in r["flows"]) - m) < 1e-9
assert abs(sum(n["share"] for n in r["nodes"]) - 1) < 1e-9
PY
"$DEDUP" ring --nodes a,b,c --remove b --ranges > "$T/ranges"
check "ring --remove b: ranges listed" grep -Eq '^[0-9a-f]{16} [0-9a-f]{16} b [ac]$' "$T/ranges"
check "ring --remove b: every range leaves b" awk '/^[0-9a-f]{16} / && $3 != "b" {bad=1} END {exit bad}' "$T/ranges"
check "ring --remove: moved line" grep -q "^moved: " "$T/ranges"
check "ring -N 8 --add 2 moves 0.2" bash -c "\"$DEDUP\" ring -N 8 --add 2 | grep -q '0.200000 of the keys move'"
"$DEDUP" ring --nodes a,b,c --remove zz > /dev/null 2> "$T/err"
check "ring --remove unknown: exit 2" [ $? -eq 2 ]
"$DEDUP" ring --nodes a,b=2,c --save "$T/ring.ddp" > /dev/null
rm -rf "$T/p"; mkdir "$T/p"
"$DEDUP" split --ring "$T/ring.ddp" -o "$T/p/r-%s" "$T/in"
"$DEDUP" split --nodes a,b=2,c -o "$T/p/n-%s" "$T/in"
for n in a b c; do check "split --ring part $n = --nodes part" cmp -s "$T/p/r-$n" "$T/p/n-$n"; done
printf 'garbage' > "$T/bad.ddp"
"$DEDUP" split --ring "$T/bad.ddp" -o "$T/p/x-%s" "$T/in" 2> "$T/err"
check "split --ring garbage: exit 2" [ $? -eq 2 ]
check "split --ring garbage: no part" [ ! -e "$T/p/x-a" ]

check "split --help" bash -c "\"$DEDUP\" split --help | grep -q '^Usage: dedup split'"
check "ring --help" bash -c "\"$DEDUP\" ring --help | grep -q '^Usage: dedup ring'"
finish
