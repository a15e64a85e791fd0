#!/bin/sh
# `make run`: the main job on a generated example.  A crawler's frontier of
# 1,000,000 URLs in which more than a third are repeats (popular pages come back
# often) is deduplicated exactly, then with a 1% blocked Bloom filter, and a
# seen-set is kept across two "days" of crawling with --state.
set -eu
DEDUP=${1:-build/dedup}
DIR=${TMPDIR:-/tmp}/dedup-example
mkdir -p "$DIR"
echo "== generating $DIR/urls.txt: 1,000,000 crawler URLs, more than a third of them repeats"
awk 'BEGIN {
    srand(42);
    for (i = 0; i < 1000000; i++) {
        # popular pages repeat: pick an earlier page with a skewed choice
        if (i > 0 && rand() < 0.5) k = int(i * rand() * rand()); else k = i;
        printf "https://site%d.example.com/articles/%d?utm=%d\n", k % 997, k, k % 7;
    }
}' > "$DIR/urls.txt"
ls -l "$DIR/urls.txt" | awk '{printf "   %s bytes\n", $5}'

echo "== exact: dedup --stats urls.txt > unique.txt"
"$DEDUP" --stats "$DIR/urls.txt" > "$DIR/unique.txt"
echo "   first lines of unique.txt:"
head -3 "$DIR/unique.txt" | sed 's/^/     /'

echo "== same, checked against awk '!seen[\$0]++'"
awk '!seen[$0]++' "$DIR/urls.txt" > "$DIR/unique-awk.txt"
if cmp -s "$DIR/unique-awk.txt" "$DIR/unique.txt"; then
    echo "   identical output"
else
    echo "   DIFFERENT: dedup and awk disagree; see $DIR/unique.txt and $DIR/unique-awk.txt:" >&2
    cmp "$DIR/unique-awk.txt" "$DIR/unique.txt" >&2 || true
    exit 1
fi

echo "== fixed memory: dedup --mode blocked -n 1M -p 1% --stats"
"$DEDUP" --mode blocked -n 1M -p 1% --stats "$DIR/urls.txt" > "$DIR/unique-bloom.txt"

echo "== a crawler's seen-set across two days: dedup --state seen.dedup"
rm -f "$DIR/seen.dedup"
head -n 500000 "$DIR/urls.txt" > "$DIR/day1.txt"
tail -n 500000 "$DIR/urls.txt" > "$DIR/day2.txt"
"$DEDUP" --state "$DIR/seen.dedup" "$DIR/day1.txt" | wc -l | awk '{print "   day 1: " $1 " new URLs to fetch"}'
"$DEDUP" --state "$DIR/seen.dedup" "$DIR/day2.txt" | wc -l | awk '{print "   day 2: " $1 " new URLs to fetch"}'
echo "== how big is a Bloom filter for 1M URLs at 1%?  dedup calc -n 1M -p 1%"
"$DEDUP" calc -n 1M -p 1% | sed "s/^/   /"
echo "== done: outputs in $DIR"
