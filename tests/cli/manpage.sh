#!/bin/bash
# docs/dedup.1 renders without a warning and documents every option that
# `dedup calc --help` and `dedup filter --help` list.  Needs groff
# (groff-base, in scripts/deps.sh).
set -u
DEDUP=${DEDUP:?set DEDUP to the dedup binary}
SRC=${DEDUP_SRC:-$(dirname "$0")/../..}
man=$SRC/docs/dedup.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -f "$man" ] || { echo "FAIL: $man is missing" >&2; exit 1; }
command -v groff >/dev/null || { echo "FAIL: groff is not installed (scripts/deps.sh installs groff-base)" >&2; exit 1; }
groff -man -ww -z "$man" 2>"$tmp/warn" || fail "groff failed on $man"
[ ! -s "$tmp/warn" ] || fail "groff warnings: $(cat "$tmp/warn")"
# The rendered text, with roff's escapes resolved.
groff -man -Tutf8 -P-c -P-b -P-u "$man" 2>/dev/null >"$tmp/text" || fail "cannot render $man"
for sub in calc filter; do
    "$DEDUP" $sub --help >"$tmp/help" || fail "dedup $sub --help"
    for opt in $(grep -o -- '--[a-z][a-z-]*' "$tmp/help" | sort -u); do
        [ "$opt" = --help ] || [ "$opt" = --version ] && continue
        grep -q -- "$opt" "$tmp/text" || fail "option $opt of 'dedup $sub' is not in the man page"
    done
done
for action in create add query del info merge verify; do
    grep -q "dedup filter $action" "$tmp/text" || fail "the man page lacks 'dedup filter $action'"
done
# A request glued to the end of a text line (as "kept..TP" once was) is
# printed as text, not obeyed: groff does not warn about it, so look for
# man(7) macro names in the rendered text and in the source's text lines.
if grep -nE '\.(TH|SH|SS|TP|PP|LP|IP|HP|RS|RE|B|I|BR|BI|IB|IR|RI|RB|nf|fi|br|sp|EX|EE)( |$)' "$tmp/text" >"$tmp/glued"; then
    fail "macro printed as text: $(head -3 "$tmp/glued")"
fi
if grep -nE '^[^.\x27].*\.\.(TH|SH|SS|TP|PP|LP|IP|HP|RS|RE|B|I|BR|BI|IB|IR|RI|RB)( |$)' "$man" >"$tmp/glued"; then
    fail "macro glued to a text line: $(head -3 "$tmp/glued")"
fi
grep -q '^OPTIONS (main job)' "$tmp/text" || fail "the man page lacks the OPTIONS (main job) section"

if [ $fails -ne 0 ]; then
    echo "manpage.sh: $fails check(s) failed" >&2
    exit 1
fi
echo "manpage.sh: all checks passed"
