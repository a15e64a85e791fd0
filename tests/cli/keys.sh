#!/usr/bin/env bash
# Keys the data carries (issue 36): -f lists, ranges and names, --csv
# records (quoted fields, doubled quotes, delimiters and newlines inside
# quotes, CRLF, NUL bytes), --header, --on-bad-key, through files and pipes,
# against a reference model on Python's csv module (lib/ref_keys.py), byte
# for byte; and the key options in a state's identity.
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
        cp "$T/in" "$T/exp" "$T/got" /tmp/ 2>/dev/null
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

# --- seeded random CSV, well-formed and hostile -------------------------------------------
R=$(rounds 2)
for ((round = 0; round < R; round++)); do
    s=$((SEED + round))
    python3 "$REF" gen "$s" 400 > "$T/in"
    same "round $round" --csv
    same "round $round" --csv --header -f user,ad
    same "round $round" --csv --header -f ad,user -i --trim
    same "round $round" --csv -f 2-
    same "round $round" --csv -f 1,3-4
    same "round $round" --csv -f 4 --trim
    same "round $round" --csv --header -f note
    same "round $round" -d , -f 1,2
    same "round $round" -d , --header -f user,ad
    python3 "$REF" gen "$s" 400 hostile > "$T/in"
    same "hostile round $round" --csv -f 1,2 --on-bad-key skip
    same "hostile round $round" --csv -f 2 --on-bad-key keep
    same "hostile round $round" --csv --header -f ad --on-bad-key keep
    same "hostile round $round" --csv -f 1,2
done

# --- the external engine (-m, -D without --state) reads the same keys ---------------------
python3 "$REF" gen "$SEED" 2000 hostile > "$T/in"
same "external" --csv --header -f user,ad --on-bad-key skip -m 64M
same "external" --csv --header -f ad -D --on-bad-key skip
same "keep last" --csv --header -f user,ad --on-bad-key skip --keep last
printf 'a,1\n"b"x,2\n' > "$T/bad"
"$DEDUP" --csv -f 1,2 -m 64M "$T/bad" > "$T/got" 2> "$T/err"
rc=$?
check "the external engine fails on a malformed record (exit $rc), writing nothing" \
    test $rc -eq 1 -a ! -s "$T/got"
check "the external engine names the malformed record's line" grep -q "bad:2: malformed CSV" "$T/err"

# --- records cross the reader's 1 MiB blocks: quoted newlines at every cut ----------------
python3 "$REF" gen "$SEED" 80000 > "$T/in"
check "the large input is larger than one read block" test "$(stat -c %s "$T/in")" -gt 1100000
same "large" --csv --header -f user,ad
same "large" --csv -f 4,2 -i

# --- a tuple is unambiguous: a field holding the delimiter never joins another ------------
printf '"a,b",c\na,"b,c"\na,b,c\n"a,b",c\n' > "$T/in"
"$DEDUP" --csv -f 1,2 "$T/in" > "$T/got"
check "fields holding the delimiter make different tuples" \
    test "$(cat "$T/got")" = "$(printf '"a,b",c\na,"b,c"\na,b,c')"
printf 'a,b\tc\na\tb,c\na,b\tc\n' > "$T/in"
"$DEDUP" -f 1,2 "$T/in" > "$T/got"
check "plain fields holding a comma make different tuples" test "$(wc -l < "$T/got")" -eq 2

# --- a single field keeps its bytes: a quoted and an unquoted value are one key ------------
printf '"x",1\nx,2\n"x""y",3\n"x""y",4\n' > "$T/in"
"$DEDUP" --csv -f 1 "$T/in" > "$T/got"
check "a quoted value equals the unquoted one" test "$(cat "$T/got")" = "$(printf '"x",1\n"x""y",3')"

# --- the header: written once, names resolved, a missing column refused before output ------
printf 'user,ad\n1,a\n1,a\n' > "$T/h1"
printf 'user,ad\n1,a\n2,a\n' > "$T/h2"
"$DEDUP" --csv --header -f user,ad "$T/h1" "$T/h2" > "$T/got"
check "the header is written once for two inputs" \
    test "$(cat "$T/got")" = "$(printf 'user,ad\n1,a\n2,a')"
"$DEDUP" --csv --header -f user,nope "$T/h1" > "$T/got" 2> "$T/err"
rc=$?
check "a missing column exits 2 (got $rc)" test $rc -eq 2
check "a missing column writes nothing" test ! -s "$T/got"
check "a missing column is named with the file" grep -q "h1: the header has no column 'nope'" "$T/err"
"$DEDUP" --csv -f user "$T/h1" > "$T/got" 2> "$T/err"
check "a name without --header is refused" test $? -eq 2 -a ! -s "$T/got"
printf 'ad,user\n1,a\n' > "$T/h3"
"$DEDUP" --csv --header -f user "$T/h1" "$T/h3" > /dev/null 2> "$T/err"
check "inputs with different headers are refused" grep -q "differs" "$T/err"
printf 'user,ad\n' > "$T/h4"
check "an input of its header alone gives the header" \
    test "$("$DEDUP" --csv --header -f ad "$T/h4")" = "user,ad"

# --- --on-bad-key fail names file and line; a record spanning lines counts them -------------
printf 'a,1\n"b\nc",2\n"d"x,3\ne,4\n' > "$T/in"
"$DEDUP" --csv -f 1 "$T/in" > "$T/got" 2> "$T/err"
rc=$?
check "a malformed record fails the run (got $rc)" test $rc -eq 1
check "the failure names file and line 4" grep -q "in:4: malformed CSV" "$T/err"
check "the records before it are written" test "$(cat "$T/got")" = "$(printf 'a,1\n"b\nc",2')"
printf 'a,1\n"open\n' > "$T/in"
"$DEDUP" --csv -f 1 "$T/in" > /dev/null 2> "$T/err"
check "a quote open at the end of the input is named" grep -q "in:2: malformed CSV" "$T/err"

# --- the key options are part of a state's identity -----------------------------------------
printf 'a,b\na,c\n' > "$T/in"
"$DEDUP" --csv -f 1,2 --state "$T/st" "$T/in" > /dev/null
check "a state with --csv -f 1,2 is made" test -s "$T/st"
"$DEDUP" --csv -f 1,2 --state "$T/st" "$T/in" > "$T/got" 2> "$T/err"
check "the same key options resume it (all seen)" test $? -eq 0 -a ! -s "$T/got"
"$DEDUP" -d , -f 1,2 --state "$T/st" "$T/in" > /dev/null 2> "$T/err"
check "plain fields are refused on a CSV state" test $? -eq 2
"$DEDUP" --csv -f 2,1 --state "$T/st" "$T/in" > /dev/null 2> "$T/err"
check "another field list is refused" test $? -eq 2
"$DEDUP" --csv --header -f ad --store "$T/db" "$T/h1" > "$T/got" 2> "$T/err"
check "--store with CSV keys by name keeps the first of each" \
    test "$(cat "$T/got")" = "$(printf 'user,ad\n1,a')"
"$DEDUP" --csv --header -f ad --store "$T/db" "$T/h2" > "$T/got" 2> "$T/err"
check "the store remembers CSV keys across runs (only the header again)" test "$(cat "$T/got")" = "user,ad"
"$DEDUP" --csv --header -f user --store "$T/db" "$T/h2" > /dev/null 2> "$T/err"
check "a store made with -f ad refuses -f user" test $? -eq 2
"$DEDUP" -f 1 -d , --state "$T/st1" "$T/in" > /dev/null
"$DEDUP" -f 1 -d , --state "$T/st1" "$T/in" > "$T/got"
check "a single-field state still resumes" test $? -eq 0 -a ! -s "$T/got"

# --- every exact road and the filters decide on the same keys -------------------------------
python3 "$REF" gen "$SEED" 2000 > "$T/in"
python3 "$REF" ref --csv --header -f user,ad "$T/in" > "$T/exp"
for mode in exact fingerprint blocked cuckoo scalable; do
    "$DEDUP" --mode "$mode" -n 100000 -p 0.000001 --csv --header -f user,ad "$T/in" > "$T/got" 2> "$T/err"
    check "--mode $mode with --csv --header -f user,ad matches the reference" cmp -s "$T/exp" "$T/got"
done

# --- JSON Lines against a json-module model: members in any order, the last of a repeated
# name, 1 == 1.0 == 10e-1 != "1", escapes decoded; invalid JSON, invalid UTF-8, nesting past
# the limit and a missing path have no key --------------------------------------------------
JREF="$SRC/tests/cli/lib/ref_json_keys.py"
for ((round = 0; round < R; round++)); do
    python3 "$JREF" gen "$((SEED + round))" 2000 > "$T/in"
    for mode in skip keep fail; do
        python3 "$JREF" ref .user,.ad "$mode" "$T/in" > "$T/exp"
        erc=$?
        "$DEDUP" --json .user,.ad --on-bad-key "$mode" "$T/in" > "$T/got" 2> /dev/null
        grc=$?
        check "--json .user,.ad --on-bad-key $mode, round $round: file (exit $grc, reference $erc)" \
            test "$erc" = "$grc" -a "$(cmp -s "$T/exp" "$T/got" && echo same)" = same
        "$DEDUP" --json .user,.ad --on-bad-key "$mode" < "$T/in" > "$T/got" 2> /dev/null
        check "--json .user,.ad --on-bad-key $mode, round $round: pipe" cmp -s "$T/exp" "$T/got"
    done
done

# --- JSON Lines and URLs go through the same key -------------------------------------------
printf '{"user":7,"ad":"a3","ts":1}\n{"ad":"a3","user":7,"ts":2}\n{"user":"7","ad":"a3"}\n{"user":7}\nnot json\n' > "$T/in"
"$DEDUP" --json .user,.ad --on-bad-key skip "$T/in" > "$T/got" 2> "$T/err"
check "--json keeps the first of each (user, ad), members in any order" \
    test "$(cat "$T/got")" = "$(printf '{"user":7,"ad":"a3","ts":1}\n{"user":"7","ad":"a3"}')"
"$DEDUP" --json .user,.ad "$T/in" > /dev/null 2> "$T/err"
check "--json: a missing path fails naming line 4 and the path" grep -q "in:4: the --json path '.ad' is missing" "$T/err"
printf 'HTTP://Example.COM:80/a/../b?utm_source=x#top\nhttp://example.com/b\nhttp://example.com/b?b=1&a=2\nhttp://example.com/b?a=2&b=1\n' > "$T/in"
"$DEDUP" --url --url-drop-params='utm_*' --url-sort-params "$T/in" > "$T/got"
check "--url: one page, one line" \
    test "$(cat "$T/got")" = "$(printf 'HTTP://Example.COM:80/a/../b?utm_source=x#top\nhttp://example.com/b?b=1&a=2')"
printf 'u1,"HTTP://X.org/p"\nu2,http://x.org/p\n' > "$T/in"
check "--url on a CSV field" test "$("$DEDUP" --csv -f 2 --url "$T/in" | wc -l)" -eq 1

# --- windows: the time field by column name (CSV) and by JSON path ---------------------------
printf 'user,ad,ts\n1,a,2026-01-01T00:00:00Z\n1,a,2026-01-01T00:05:00Z\n"1",a,"2026-01-01T00:20:00Z"\n2,a,2026-01-01T00:21:00Z\n' > "$T/in"
"$DEDUP" --csv --header -f user,ad --window 10m --time-field ts "$T/in" > "$T/got" 2> "$T/err"
check "--window with --time-field ts (a column name) keeps a click again after 10 minutes" \
    test "$(cat "$T/got")" = "$(printf 'user,ad,ts\n1,a,2026-01-01T00:00:00Z\n"1",a,"2026-01-01T00:20:00Z"\n2,a,2026-01-01T00:21:00Z')"
printf '{"u":1,"ts":"2026-01-01T00:00:00Z"}\n{"ts":"2026-01-01T00:05:00Z","u":1}\n{"u":1,"ts":"2026-01-01T00:20:00Z"}\n' > "$T/in"
"$DEDUP" --json .u --window 10m --time-field .ts "$T/in" > "$T/got" 2> "$T/err"
check "--window with --time-field .ts (a JSON path)" test "$(wc -l < "$T/got")" -eq 2
"$DEDUP" --csv -f 1 --window 10m --time-field ts "$T/in" > /dev/null 2> "$T/err"
check "a named time field without --header is refused" test $? -eq 2

# --- split: a record's owner depends on its key only; the header tops every part -------------
python3 "$REF" gen "$SEED" 3000 > "$T/in"
mkdir -p "$T/sp"
"$DEDUP" split -N 4 -o "$T/sp/p-%s" --csv --header -f user,ad "$T/in"
check "split --csv --header exits 0" test $? -eq 0
python3 - "$T/in" "$T"/sp/p-* <<'PY'
import csv, sys
def recs(path):
    with open(path, newline="", encoding="latin-1") as f:
        return list(csv.reader(f, strict=False))
src = recs(sys.argv[1])
owner, total = {}, 0
for path in sys.argv[2:]:
    rows = recs(path)
    assert rows[0] == src[0], (path, rows[0])        # the header, once, on top
    assert src[0] not in rows[1:] or src[0] in src[1:]
    for r in rows[1:]:
        key = (r[0] if r else "", r[1] if len(r) > 1 else "")
        assert owner.setdefault(key, path) == path, ("key in two parts", key)
        total += 1
assert total == len(src) - 1, (total, len(src) - 1)
PY
check "every (user, ad) lies in one part, the header tops each, no record lost" test $? -eq 0

# --- count: distinct keys as the reference finds them ---------------------------------------
want=$(python3 "$REF" ref --csv --header -f user,ad "$T/in" | python3 -c '
import csv, sys, io
print(len(list(csv.reader(io.TextIOWrapper(sys.stdin.buffer, encoding="latin-1", newline=""), strict=False))) - 1)')
got=$("$DEDUP" count --exact --csv --header -f user,ad "$T/in" | cut -f1)
check "count --exact --csv --header -f user,ad finds $want keys (got $got)" test "$got" = "$want"
printf 'a,1\n"b"x,2\n' > "$T/bad"
"$DEDUP" count --exact --csv -f 1 "$T/bad" > /dev/null 2> "$T/err"
check "count names a malformed record's line" grep -q "bad:2: malformed CSV" "$T/err"

# --- plan --sample reads the same keys ------------------------------------------------------
"$DEDUP" plan --sample "$T/bad" --csv -f 1 > /dev/null 2> "$T/err"
check "plan --sample leaves a malformed record out, and says so" grep -q "1 record with no key left out" "$T/err"

finish
