#!/usr/bin/env bash
# Every --json output of every command, parsed by a strict parser
# (lib/strict_json.py: a member named twice, NaN/Infinity, trailing data or
# an empty output fail): dedup --stats=json in each mode, split --stats=json,
# calc, plan, count (and --merge), ring, store info, and filter info of
# every filter type, of state files, of a sketch, several files at once.
# (filter info of a Redis filter is parsed in backends/redis/tests.)
. "$(dirname "$0")/lib/common.sh"
cd "$T" || exit 1
J="$SRC/tests/cli/lib/strict_json.py"

# strict DESC [--lines] FILE: FILE holds strict JSON (one value, or lines)
strict() {
    local desc=$1; shift
    if python3 "$J" "$@" > /dev/null 2> strict.err; then pass; else
        fail "$desc: $(cat strict.err): $(head -c 400 "${@: -1}")"
    fi
}
# json DESC CMD...: CMD exits 0 and its standard output is one JSON value
json() {
    local desc=$1; shift
    if "$@" > j.out 2> j.err; then strict "$desc" j.out; else
        fail "$desc: exit $?: $(cat j.err)"
    fi
}
# jsonl DESC CMD...: the same for JSON Lines
jsonl() {
    local desc=$1; shift
    if "$@" > j.out 2> j.err; then strict "$desc" --lines j.out; else
        fail "$desc: exit $?: $(cat j.err)"
    fi
}
# stats DESC CMD...: CMD's --stats=json object, the last line of its stderr
stats() {
    local desc=$1; shift
    if "$@" > /dev/null 2> s.err; then tail -n 1 s.err > s.json; strict "$desc" s.json; else
        fail "$desc: exit $?: $(cat s.err)"
    fi
}

seq -f 'k%g' 1 20000 > in
seq -f 'k%g' 1 10000 >> in
seq 1 5000 > ints

# dedup --stats=json, one mode after another
for mode in exact bloom blocked cuckoo scalable; do
    stats "dedup --mode $mode --stats=json" "$DEDUP" --mode "$mode" -n 30000 -p 1% --stats=json in
done
stats "dedup --keys int --stats=json" "$DEDUP" --keys int --stats=json ints
stats "dedup --window --stats=json" "$DEDUP" --window 1h -f 1 -d ' ' --stats=json \
    <(awk '{print 1700000000 + NR, $0}' in)
stats "dedup -m (spilling) --stats=json" "$DEDUP" -m 64K -T "$T" --stats=json in
stats "dedup --store --stats=json" "$DEDUP" --store "$T/st" --stats=json in
mkdir -p sp
stats "split --stats=json" "$DEDUP" split -N 3 -o "$T/sp/part.%s" --stats=json in

jsonl "calc -n --json" "$DEDUP" calc -n 1e6 -p 1% --json
jsonl "calc -m --json" "$DEDUP" calc -m 64M -p 0.1% --json
jsonl "calc -m --type blocked --json" "$DEDUP" calc -m 64M -n 1e6 --type blocked --json
for q in "-n 1e6 -p 1%" "-n 1e9 -m 1G -p 0.1%" "-n 1e6 --exact" "-n 1e8 --window 24h -p 1%" \
    "-n 1e8 --delete -p 1%" "-n 1e10 -m 4G --infra cluster --exact" "-n 1e9 --infra redis -p 1%"; do
    # shellcheck disable=SC2086
    json "plan $q --json" "$DEDUP" plan $q --json
done
json "count --json" "$DEDUP" count --json in
"$DEDUP" count -o a.hll in > /dev/null 2>&1 && "$DEDUP" count -o b.hll ints > /dev/null 2>&1 ||
    fail "count -o"
json "count --merge --json" "$DEDUP" count --merge a.hll b.hll --json
json "ring --json" "$DEDUP" ring -N 4 --json
json "ring --add --json" "$DEDUP" ring -N 4 --add 1 --json
json "ring --nodes --remove --json" "$DEDUP" ring --nodes a,b,c --remove b --json
json "store info --json" "$DEDUP" store info --json "$T/st"

# filter info of every filter type, then of files that are not filters
files=()
for t in bloom blocked counting cuckoo scalable; do
    "$DEDUP" filter create "f.$t" -t "$t" -n 20000 -p 1% 2> /dev/null || fail "create $t"
    head -n 15000 in | "$DEDUP" filter add "f.$t" 2> /dev/null || fail "add $t"
    json "filter info --json ($t)" "$DEDUP" filter info --json "f.$t"
    files+=("f.$t")
done
# past its capacity (a member more: over_capacity), and a cuckoo chain
"$DEDUP" filter create over.f -t blocked -n 1000 -p 1% 2> /dev/null
"$DEDUP" filter add over.f < in 2> /dev/null
json "filter info --json (over capacity)" "$DEDUP" filter info --json over.f
"$DEDUP" --state exact.st in > /dev/null && files+=(exact.st) || fail "--state exact"
"$DEDUP" --keys int --state int.st ints > /dev/null && files+=(int.st) || fail "--state int"
"$DEDUP" --window 1h -f 1 -d ' ' --state win.st <(awk '{print 1700000000 + NR, $0}' in) \
    > /dev/null && files+=(win.st) || fail "--state window"
files+=(a.hll)
for f in exact.st int.st win.st a.hll; do
    json "filter info --json ($f)" "$DEDUP" filter info --json "$f"
done
jsonl "filter info --json (${#files[@]} files at once)" "$DEDUP" filter info --json "${files[@]}"
[ "$(wc -l < j.out)" -eq "${#files[@]}" ] || fail "filter info --json of ${#files[@]} files: $(wc -l < j.out) lines"

# the parser itself refuses what it must
printf '{"items":1,"items":1}\n' > dup.json
if python3 "$J" dup.json 2> /dev/null; then fail "strict_json accepts a member named twice"; else pass; fi
printf '{"a":NaN}\n' > nan.json
if python3 "$J" nan.json 2> /dev/null; then fail "strict_json accepts NaN"; else pass; fi
finish
