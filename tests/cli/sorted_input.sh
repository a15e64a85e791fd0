#!/usr/bin/env bash
# sorted_input.sh - the external engine's sorted order on input that is
# already sorted, reverse sorted, all equal or nearly sorted (the orders
# that once sent its table sort quadratic), at budgets that keep everything
# in one table and budgets that write several sorted runs; the output must
# be byte-identical to LC_ALL=C sort -u (first-occurrence order: to awk,
# with records carried and by reference).
set -u
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C
# ~40000 lines over ~20000 distinct values: a long shared prefix (longer
# than one 8-byte word), keys ending inside a word, an empty line.
awk -v seed="$SEED" 'BEGIN { srand(seed); for (i = 0; i < 40000; i++) {
    id = int(rand() * 20000); if (id == 7) { print ""; continue }
    s = "https://www.example.com/" id; n = id % 23; for (j = 0; j < n; j++) s = s "/x";
    print s } }' > "$T/in"
sort "$T/in" > "$T/sorted"
sort -r "$T/in" > "$T/rev"
yes 'the same line' | head -n 30000 > "$T/equal"
# nearly sorted: the sorted lines with every 1000th moved to the front
awk 'NR % 1000 == 0 { print }' "$T/sorted" > "$T/near"
awk 'NR % 1000 != 0 { print }' "$T/sorted" >> "$T/near"
for f in sorted rev equal near in; do
    sort -u "$T/$f" > "$T/ref"
    awk '!seen[$0]++' "$T/$f" > "$T/ref1"
    for m in 1M 4M 64M; do
        "$DEDUP" -m $m --tmpdir "$T" --sort "$T/$f" > "$T/out" 2> "$T/err"
        check "$f --sort -m $m exit" test $? -eq 0
        check "$f --sort -m $m output" cmp -s "$T/ref" "$T/out"
        "$DEDUP" -m $m --tmpdir "$T" --sort < "$T/$f" > "$T/out" 2> "$T/err"
        check "$f --sort -m $m (pipe) output" cmp -s "$T/ref" "$T/out"
        "$DEDUP" -m $m --tmpdir "$T" "$T/$f" > "$T/out" 2> "$T/err"
        check "$f -m $m first occurrences" cmp -s "$T/ref1" "$T/out"
        # the same by reference (cli/extref.h), whatever the lines' length
        DEDUP_EXTREF=1 "$DEDUP" -m $m --tmpdir "$T" --stats "$T/$f" > "$T/out" 2> "$T/err"
        check "$f -m $m first occurrences by reference" cmp -s "$T/ref1" "$T/out"
        check "$f -m $m went by reference" grep -q 'by reference' "$T/err"
        sort "$T/$f" | uniq -c > "$T/refc"
        "$DEDUP" -m $m --tmpdir "$T" --sort -c "$T/$f" > "$T/out" 2> "$T/err"
        check "$f --sort -c -m $m output" cmp -s "$T/refc" "$T/out"
    done
done
# the 1M runs did spill: several sorted runs were merged
"$DEDUP" -m 1M --tmpdir "$T" --sort --stats "$T/sorted" > /dev/null 2> "$T/err"
check "sorted -m 1M spilled" grep -q 'spilled to' "$T/err"
finish
