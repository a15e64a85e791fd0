#!/usr/bin/env bash
# --url-drop-params (issue 36): the glob list's syntax, ',' between globs and
# a backslash making ',', '*', '?' or '\' literal; a malformed list refused
# before any output, naming the place; names matched in canonical form.
. "$(dirname "$0")/lib/common.sh"

# drops GLOBS URL: true when, with GLOBS, URL and URL's query without its
# first parameter are one key.
drops() {
    local globs=$1 url=$2 rest
    rest=$(printf '%s' "$url" | sed -E 's/\?[^&]*&?/?/')
    printf '%s\n%s\n' "$url" "$rest" > "$T/in"
    [ "$("$DEDUP" --url --url-drop-params="$globs" "$T/in" | wc -l)" -eq 1 ]
}
keeps() { ! drops "$@"; }
check "utm_* drops utm_source" drops 'utm_*,fbclid' 'http://a.com/?utm_source=x&d=1'
check "fbclid drops fbclid" drops 'utm_*,fbclid' 'http://a.com/?fbclid=x&d=1'
check "a\\,b drops the parameter 'a,b'" drops 'a\,b' 'http://a.com/?a,b=2&d=1'
check "a,b does not drop 'a,b' (two globs)" keeps 'a,b' 'http://a.com/?a,b=2&d=1'
check "c\\* drops 'c*'" drops 'c\*' 'http://a.com/?c*=2&d=1'
check "c\\* does not drop 'cx'" keeps 'c\*' 'http://a.com/?cx=2&d=1'
check "c\\? does not drop 'cx'" keeps 'c\?' 'http://a.com/?cx=2&d=1'
check "c\\? drops 'c?'" drops 'c\?' 'http://a.com/?c?=2&d=1'
check "e\\\\f drops 'e\\f'" drops 'e\\f' 'http://a.com/?e\f=2&d=1'
check "names are canonical: %2c is matched as %2C" drops 'a%2Cb' 'http://a.com/?a%2cb=2&d=1'
check "an escaped ',' in the URL is not a ','" keeps 'a\,b' 'http://a.com/?a%2Cb=2&d=1'

printf 'http://a.com/?x=1\n' > "$T/in"
for bad in 'x,,y' 'a,' ',a' 'a\b' 'a\'; do
    "$DEDUP" --url --url-drop-params="$bad" "$T/in" > "$T/got" 2> "$T/err"
    rc=$?
    check "--url-drop-params='$bad' is refused with exit 2 (got $rc), writing nothing" \
        test $rc -eq 2 -a ! -s "$T/got"
    check "--url-drop-params='$bad': the message names the list" \
        grep -qF -- "--url-drop-params: '$bad' is not a list of globs (the problem is at" "$T/err"
done
grep -qF "the problem is at '\\b'" <("$DEDUP" --url --url-drop-params='a\b' "$T/in" 2>&1)
check "the place of a bad escape is named" test $? -eq 0
"$DEDUP" split -N 2 --url --url-drop-params='a,,b' -o "$T/p%s" "$T/in" 2> /dev/null
check "split refuses a malformed list too" test $? -eq 2
finish
