#!/usr/bin/env bash
# --json with the normalisations (issue 36): -i, --trim, --squeeze,
# --strip-prefix and --url apply to a selected value that is a string (its
# decoded text), against the json-module model (lib/ref_json_keys.py) on
# seeded lines with strings that differ in case, spaces and escapes; --url
# on a JSON value, and on one that is not a string.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C
JREF="$SRC/tests/cli/lib/ref_json_keys.py"

R=$(rounds 2)
for ((round = 0; round < R; round++)); do
    python3 "$JREF" gen "$((SEED + round))" 3000 norm > "$T/in"
    for opts in "-i" "--trim" "-i --trim"; do
        # shellcheck disable=SC2086
        python3 "$JREF" ref .user,.ad skip "$T/in" $opts > "$T/exp"
        # shellcheck disable=SC2086
        "$DEDUP" --json .user,.ad --on-bad-key skip $opts "$T/in" > "$T/got" 2> /dev/null
        check "--json .user,.ad $opts, round $round: as the model" cmp -s "$T/exp" "$T/got"
        # shellcheck disable=SC2086
        "$DEDUP" --json .user,.ad --on-bad-key skip $opts -m 64M - < "$T/in" > "$T/got" 2> /dev/null
        check "--json .user,.ad $opts, round $round: external engine, pipe" cmp -s "$T/exp" "$T/got"
    done
    python3 "$JREF" ref .user,.ad skip "$T/in" > "$T/exp0"
    python3 "$JREF" ref .user,.ad skip "$T/in" -i --trim > "$T/exp"
    check "round $round: -i --trim changes what is kept (the input tests them)" \
        test "$(wc -l < "$T/exp")" -lt "$(wc -l < "$T/exp0")"
done

printf '%s\n' '{"u":"HTTP://Example.COM:80/a/../b?utm_source=x#top","n":1}' \
    '{"u":"http://example.com/b","n":2}' '{"n":3,"u":" http://EXAMPLE.com/b?x=1&utm_a=2 "}' \
    '{"u":"http://example.com/b?x=1","n":4}' '{"u":5}' '{"u":"nope"}' '{"u":"id:A  B"}' \
    '{"u":"a b"}' > "$T/in"
"$DEDUP" --json .u --url --trim --url-drop-params='utm_*' --on-bad-key skip "$T/in" > "$T/got" 2> "$T/err"
check "--json .u --url: one page, one line" \
    test "$(cat "$T/got")" = "$(printf '%s\n' '{"u":"HTTP://Example.COM:80/a/../b?utm_source=x#top","n":1}' \
                                              '{"n":3,"u":" http://EXAMPLE.com/b?x=1&utm_a=2 "}')"
check "--json .u --url: 4 records had no key" grep -q "4 records had no key" "$T/err"
"$DEDUP" --json .u --url "$T/in" > /dev/null 2> "$T/err"
check "--json --url: a value that is not a URL is named with its line" \
    grep -q "in:3: a selected JSON value is not a string holding an absolute URL" "$T/err"
tail -n 2 "$T/in" > "$T/in2"
check "--json --strip-prefix --squeeze -i" \
    test "$("$DEDUP" --json .u --strip-prefix id: --squeeze -i "$T/in2" | wc -l)" -eq 1
check "--json without them keeps both" test "$("$DEDUP" --json .u "$T/in2" | wc -l)" -eq 2
# the normalisations are part of a state's identity
"$DEDUP" --json .u -i --state "$T/st" "$T/in2" > /dev/null
"$DEDUP" --json .u --state "$T/st" "$T/in2" > /dev/null 2>&1
check "a --json -i state refuses --json without -i" test $? -eq 2
finish
