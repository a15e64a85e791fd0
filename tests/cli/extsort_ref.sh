#!/usr/bin/env bash
# extsort_ref.sh - the external engine, with budgets small enough to spill
# and recurse, against the reference tools: awk '!seen[$0]++' (first
# occurrences), LC_ALL=C sort -u (--sort), sort | uniq -c (--sort --count),
# uniq -u / -d style awk (--unique, --duplicates).  It drives the engine
# through `test_extsort --driver` (tests/util/extsort_driver.h) until the
# dedup command wires it.  Temporary files must not outlive any run.
set -euo pipefail
: "${DEDUP_BUILD:?}"
DRV="$DEDUP_BUILD/tests/test_extsort"
[ -x "$DRV" ] || { echo "missing $DRV" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/extsort_ref.XXXXXX")
trap 'rm -rf "$W"' EXIT
mkdir "$W/tmp"
export LC_ALL=C
fails=0
check() { # name expected actual
  if ! cmp -s "$2" "$3"; then
    echo "FAIL: $1" >&2; diff "$2" "$3" | head -5 >&2; fails=$((fails + 1))
  fi
  if [ -n "$(ls -A "$W/tmp")" ]; then echo "FAIL: $1 left temporary files" >&2; fails=$((fails + 1)); fi
}
seed=${DEDUP_TEST_SEED:-$RANDOM}
echo "seed $seed (DEDUP_TEST_SEED replays)"
# ~3 MB: 60000 lines over ~25000 distinct values, lengths 0..120, a few hot
# lines, some empty lines, a last line without newline.
awk -v seed="$seed" 'BEGIN { srand(seed); for (i = 0; i < 60000; i++) {
    r = rand(); if (r < 0.05) id = int(rand() * 10); else id = int(rand() * 25000);
    if (id == 3) { print ""; continue }
    s = "line-" id "-"; n = (id * 7919) % 97; for (j = 0; j < n; j++) s = s substr("abcxyz/._-", (id + j) % 10 + 1, 1);
    print s } printf "last-line-without-newline" }' > "$W/in"
awk 'BEGIN{}' > "$W/empty"

for m in 128K 1M 64M; do
  "$DRV" --driver -m $m -T "$W/tmp" "$W/in" > "$W/out"
  awk '!seen[$0]++' "$W/in" > "$W/ref"; check "first -m $m" "$W/ref" "$W/out"
  "$DRV" --driver -m $m -T "$W/tmp" --sort "$W/in" > "$W/out"
  sort -u "$W/in" > "$W/ref"; check "sort -m $m" "$W/ref" "$W/out"
  "$DRV" --driver -m $m -T "$W/tmp" --sort --count "$W/in" > "$W/out"
  sort "$W/in" | uniq -c > "$W/ref"; check "sort count -m $m" "$W/ref" "$W/out"
  "$DRV" --driver -m $m -T "$W/tmp" --count "$W/in" > "$W/out"
  awk '{ if (!($0 in c)) o[n++] = $0; c[$0]++ } END { for (i = 0; i < n; i++) printf "%7d %s\n", c[o[i]], o[i] }' \
    "$W/in" > "$W/ref"; check "count -m $m" "$W/ref" "$W/out"
  "$DRV" --driver -m $m -T "$W/tmp" --unique "$W/in" > "$W/out"
  awk '{ l[NR] = $0; c[$0]++ } END { for (i = 1; i <= NR; i++) if (c[l[i]] == 1) print l[i] }' \
    "$W/in" > "$W/ref"; check "unique -m $m" "$W/ref" "$W/out"
  "$DRV" --driver -m $m -T "$W/tmp" --sort --unique "$W/in" > "$W/out"
  sort "$W/in" | uniq -u > "$W/ref"; check "sort unique -m $m" "$W/ref" "$W/out"
  "$DRV" --driver -m $m -T "$W/tmp" --duplicates "$W/in" > "$W/out"
  awk 'seen[$0]++' "$W/in" > "$W/ref"; check "duplicates -m $m" "$W/ref" "$W/out"
done
"$DRV" --driver -m 128K -T "$W/tmp" --stats "$W/in" 2> "$W/stats" > /dev/null
grep -q 'spilled=1' "$W/stats" || { echo "FAIL: 128K did not spill: $(cat "$W/stats")" >&2; fails=$((fails + 1)); }
for opt in "" --sort --count --unique --duplicates; do
  "$DRV" --driver -m 128K -T "$W/tmp" $opt "$W/empty" > "$W/out"
  check "empty input $opt" "$W/empty" "$W/out"
done
# a temporary directory that does not exist: exit 1 and a message naming it
if "$DRV" --driver -m 64K -T "$W/nonexistent" "$W/in" > /dev/null 2> "$W/err"; then
  echo "FAIL: missing tmpdir accepted" >&2; fails=$((fails + 1))
fi
grep -q "$W/nonexistent" "$W/err" || { echo "FAIL: error does not name the directory: $(cat "$W/err")" >&2; fails=$((fails + 1)); }
[ "$fails" = 0 ] && echo "extsort_ref: all passed"
# not "exit $fails": an exit status is taken modulo 256 (256 failures = 0)
[ "$fails" = 0 ] || { echo "extsort_ref: $fails failure(s)" >&2; exit 1; }
exit 0
