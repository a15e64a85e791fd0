#!/usr/bin/env bash
# --on-bad-key (issue 36) on every road that reads keys a record may lack,
# beside the main job's in-memory one (keys.sh): the external engine (-m,
# -D, --sort, spilling), --keep last, `dedup split` and `dedup count`, against
# the reference model on Python's csv module (lib/ref_keys.py), whose keep
# writes a record without a key where it stands.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C
REF="$SRC/tests/cli/lib/ref_keys.py"

# same DESC OPTS...: dedup's output and exit status equal the reference's,
# from the file $T/in and from a pipe.
same() {
    local desc=$1; shift
    python3 "$REF" ref "$@" "$T/in" > "$T/exp" 2>/dev/null
    local erc=$?
    "$DEDUP" "$@" "$T/in" > "$T/got" 2> "$T/err"
    local grc=$?
    if ! cmp -s "$T/exp" "$T/got" || [ "$erc" != "$grc" ]; then
        fail "$desc (file, options $*): exit $grc, reference $erc; $(head -c 300 "$T/err")"
        return
    fi
    pass
    "$DEDUP" "$@" - < "$T/in" > "$T/got" 2> "$T/err"
    grc=$?
    if ! cmp -s "$T/exp" "$T/got" || [ "$erc" != "$grc" ]; then
        fail "$desc (pipe, options $*): exit $grc, reference $erc"
    else
        pass
    fi
}

# sorted_same DESC FILE OPTS...: FILE holds the reference's records, in any order.
sorted_same() {
    local desc=$1 got=$2; shift 2
    python3 "$REF" ref "$@" "$T/in" 2>/dev/null | sort > "$T/exp.s"
    sort "$got" > "$T/got.s"
    check "$desc: $(wc -l < "$T/got.s") lines, reference $(wc -l < "$T/exp.s")" \
        cmp -s "$T/exp.s" "$T/got.s"
}

K=(--csv --header -f user,ad)
R=$(rounds 2)
for ((round = 0; round < R; round++)); do
    s=$((SEED + round))
    python3 "$REF" gen "$s" 2000 hostile > "$T/in"
    check "round $round: the input has records without a key" \
        test "$("$DEDUP" "${K[@]}" --on-bad-key skip "$T/in" 2>&1 >/dev/null | grep -c 'had no key')" -eq 1

    # --- the external engine and --keep last take keep -----------------------------------
    same "round $round: external" "${K[@]}" --on-bad-key keep -m 64M
    same "round $round: external -D" --csv --header -f ad -D --on-bad-key keep
    same "round $round: keep last" "${K[@]}" --on-bad-key keep --keep last
    same "round $round: keep last, one field" --csv -f 2 --on-bad-key keep --keep last
    same "round $round: keep last, skip" "${K[@]}" --on-bad-key skip --keep last
    "$DEDUP" "${K[@]}" --on-bad-key keep --sort "$T/in" > "$T/got" 2> /dev/null
    sorted_same "round $round: --sort" "$T/got" "${K[@]}" --on-bad-key keep

    # --- count: the lines the main job would write ---------------------------------------
    for mode in skip keep; do
        want=$(python3 "$REF" ref "${K[@]}" --on-bad-key $mode --nrec "$T/in")
        got=$("$DEDUP" count --exact "${K[@]}" --on-bad-key $mode "$T/in" 2> /dev/null | cut -f1)
        check "round $round: count --exact --on-bad-key $mode: $got, the main job $want" \
            test "$got" = "$want"
        got=$("$DEDUP" count "${K[@]}" --on-bad-key $mode - < "$T/in" 2> /dev/null | cut -f1)
        check "round $round: count (sketch) --on-bad-key $mode: $got, the main job $want" \
            test "$got" -ge $((want * 98 / 100)) -a "$got" -le $((want * 102 / 100 + 1))
    done

    # --- split: every part deduplicated alone, all together as the whole -----------------
    # (without the input's last record when its quote is left open: that one
    # takes the terminator written after it in its part into its value)
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); i = d.rfind(b"\n\"open,")
open(sys.argv[1], "wb").write(d[:i + 1] if i >= 0 else d)' "$T/in"
    for mode in skip keep; do
        rm -rf "$T/parts" && mkdir "$T/parts"
        "$DEDUP" split -N 3 "${K[@]}" --on-bad-key $mode -o "$T/parts/p%s" "$T/in" 2> "$T/err"
        check "round $round: split --on-bad-key $mode succeeds" test $? -eq 0
        check "round $round: split --on-bad-key $mode says how many had no key" \
            grep -q "records* had no key" "$T/err"
        : > "$T/all"
        for p in "$T"/parts/p*; do
            "$DEDUP" "${K[@]}" --on-bad-key $mode "$p" 2> /dev/null | tail -n +2 >> "$T/all"
        done
        python3 "$REF" ref "${K[@]}" --on-bad-key $mode "$T/in" | tail -n +2 > "$T/whole"
        sort "$T/whole" > "$T/whole.s"
        sort "$T/all" > "$T/all.s"
        check "round $round: split --on-bad-key $mode, parts deduplicated = the whole" \
            cmp -s "$T/whole.s" "$T/all.s"
    done
done

# --- the external engine spilling: records without a key are all written ---------------
python3 - "$SEED" "$(sized 60000 2)" > "$T/in" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
out = ["user,ad"]
for i in range(int(sys.argv[2])):
    u, a = r.randrange(20000), r.choice("abcdefgh")
    out.append('"%d"x,%s' % (u, a) if r.random() < 0.02 else '%d,"%s, %d"' % (u, a, i % 3))
sys.stdout.write("\n".join(out) + "\n")
PY
"$DEDUP" "${K[@]}" --on-bad-key keep -m 1M --stats "$T/in" > "$T/got" 2> "$T/err"
check "a 1 MiB budget spills (runs written)" grep -q "runs written" "$T/err"
sorted_same "spilling external engine, keep" "$T/got" "${K[@]}" --on-bad-key keep
"$DEDUP" "${K[@]}" --on-bad-key keep "$T/in" > "$T/mem" 2> /dev/null
check "spilling: as many lines as the in-memory road" test "$(wc -l < "$T/got")" -eq "$(wc -l < "$T/mem")"

# --- split keep: a record without a key goes where its whole record says ------------------
{ echo user,ad; for i in $(seq 40); do printf '"z%d"q,1\n%d,a\n"z%d"q,1\n' $i $i $i; done; } > "$T/in"
rm -rf "$T/parts" && mkdir "$T/parts"
"$DEDUP" split -N 4 "${K[@]}" --on-bad-key keep -o "$T/parts/p%s" "$T/in" 2> /dev/null
check "split keep: both copies of a record without a key are in one part" \
    test "$(grep -h -o '^"z[0-9]*"q' "$T"/parts/p* | sort | uniq -c | awk '$1 != 2' | wc -l)" -eq 0
check "split keep: records without a key spread over the parts" \
    test "$(grep -l '^"z' "$T"/parts/p* | wc -l)" -gt 1

# --- fail: named, nothing written; usage errors -------------------------------------------
printf 'user,ad\n1,a\n"2"x,b\n3,c\n' > "$T/in"
rm -rf "$T/parts" && mkdir "$T/parts"
"$DEDUP" split -N 2 "${K[@]}" -o "$T/parts/p%s" "$T/in" 2> "$T/err"
rc=$?
check "split: a record without a key fails the run (exit $rc)" test $rc -eq 1
check "split: it is named by file and line" grep -q "in:3: malformed CSV" "$T/err"
check "split: no part is left" test -z "$(ls -A "$T/parts")"
"$DEDUP" count "${K[@]}" "$T/in" > "$T/got" 2> "$T/err"
rc=$?
check "count: a record without a key fails the run (exit $rc)" test $rc -eq 1 -a ! -s "$T/got"
check "count: it is named by file and line" grep -q "in:3: malformed CSV" "$T/err"
check "count --on-bad-key keep counts it" \
    test "$("$DEDUP" count --exact "${K[@]}" --on-bad-key keep "$T/in" 2>/dev/null)" = "$(printf '3\texact')"
"$DEDUP" count "${K[@]}" --on-bad-key keep -o "$T/s.hll" "$T/in" 2> "$T/err"
check "count --on-bad-key keep -o is refused (exit 2)" test $? -eq 2 -a ! -e "$T/s.hll"
"$DEDUP" count --on-bad-key skip "$T/in" > /dev/null 2>&1
check "count --on-bad-key without keys that may fail is refused" test $? -eq 2
"$DEDUP" split -N 2 --on-bad-key keep -o "$T/parts/p%s" "$T/in" 2> /dev/null
check "split --on-bad-key without keys that may fail is refused" test $? -eq 2
"$DEDUP" split -N 2 --csv --on-bad-key drop -o "$T/parts/p%s" "$T/in" 2> /dev/null
check "split --on-bad-key drop is refused" test $? -eq 2
# --- the messages name file:line, the problem and where it is ------------------------------
printf '{"user":7,"ad":1}\n{"user":7,"ad":2}\n{"user":8,"a,d":3}\n' > "$T/j"
"$DEDUP" --json '.user,."a,d"' "$T/j" > /dev/null 2> "$T/err"
check "--json: a missing path is named with its line" \
    grep -q "j:1: the --json path '.\"a,d\"' is missing" "$T/err"
"$DEDUP" count --json-paths .user,.ad "$T/j" > /dev/null 2> "$T/err"
check "count --json-paths: a missing path is named" grep -q "count: .*j:3: the --json path '.ad' is missing" "$T/err"
printf '{"user":7,"ad":1}\n{"user":7, "ad": tru}\n' > "$T/j"
"$DEDUP" --json .user,.ad -m 64M "$T/j" > /dev/null 2> "$T/err"
check "--json: invalid JSON is named with its line and byte" grep -q "j:2: not valid JSON or UTF-8 at byte 18" "$T/err"
printf 'user,ad\n1,a\n2,"b"c\n' > "$T/c"
"$DEDUP" split -N 2 "${K[@]}" -o "$T/parts/q%s" "$T/c" 2> "$T/err"
check "split: malformed CSV is named with its line, problem and byte" \
    grep -q "c:3: malformed CSV: text after a closing quote at byte 6" "$T/err"
printf 'user,ad\n1,a\n2,"b\n' > "$T/c"
"$DEDUP" "${K[@]}" --keep last "$T/c" 2> "$T/err" > /dev/null
check "--keep last: an open quote is named with its line and byte" \
    grep -q "c:3: malformed CSV: a quote left open at byte 3" "$T/err"
finish
