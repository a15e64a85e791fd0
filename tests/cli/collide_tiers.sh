#!/bin/bash
# Crafted collisions through persistent tiers (issue 34 item 1): the pair of
# tests/util/xxh3_collide.c (two different lines sharing one XXH3-128 digest
# under the public seed) through `--tier file:PATH`, a filter tier that makes
# its file (`--tier blocked:...,file=PATH`) and `--store DIR`.  A set made
# without --seed holds a secret seed of its own, so both lines are kept; the
# next run takes that seed from the file (it knows every record of the
# first, and the file's seed is unchanged).  --seed fixes the seed, also
# when it is the public value (then the filter takes the pair for one key).
# The Redis tier's half is backends/redis/tests/tier_seed.sh.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/collide.sh"
{ echo first; cat "$T/pair"; echo middle; cat "$T/pair" "$T/pair"; echo last; } > "$T/in"
awk '!s[$0]++' "$T/in" > "$T/exp"
file_seed() { "$DEDUP" filter info "$1" | sed -n 's/^seed  *//p'; }
secret() { [ -n "$1" ] && [ "$1" != "$PUBLIC" ]; }
same_secret() { secret "$1" && [ "$1" = "$2" ]; }

# --tier file: on a filter made by `dedup filter create` (a secret seed)
"$DEDUP" filter create "$T/f.flt" -t blocked -n 1000
sf=$(file_seed "$T/f.flt")
check "filter create: a secret seed ($sf)" secret "$sf"
"$DEDUP" --tier "file:$T/f.flt" "$T/in" > "$T/got"
check "--tier file: keeps both lines of the pair" cmp -s "$T/exp" "$T/got"
check "--tier file: the second run knows every record" [ "$("$DEDUP" --tier "file:$T/f.flt" "$T/in" | wc -l)" -eq 0 ]
check "--tier file: the file's seed is kept" [ "$(file_seed "$T/f.flt")" = "$sf" ]

# a filter tier whose file the run makes: a secret seed, kept in the file
for type in blocked bloom cuckoo scalable; do
    "$DEDUP" --tier "$type:n=1000,file=$T/g-$type.flt" "$T/in" > "$T/got"
    check "--tier $type,file= keeps both lines of the pair" cmp -s "$T/exp" "$T/got"
    sg=$(file_seed "$T/g-$type.flt")
    check "--tier $type,file=: a secret seed ($sg)" secret "$sg"
    check "--tier $type,file=: the second run knows every record" \
        [ "$("$DEDUP" --tier "$type:n=1000,file=$T/g-$type.flt" "$T/in" | wc -l)" -eq 0 ]
    check "--tier $type,file=: the file's seed is kept" [ "$(file_seed "$T/g-$type.flt")" = "$sg" ]
done
# two new files made in one run: one seed, not the public one
"$DEDUP" --tier "blocked:n=1000,file=$T/h1.flt" --tier "bloom:n=1000,file=$T/h2.flt" "$T/in" > "$T/got"
check "two new filter files keep both lines" cmp -s "$T/exp" "$T/got"
check "two new filter files share one secret seed" same_secret "$(file_seed "$T/h1.flt")" "$(file_seed "$T/h2.flt")"
# a new file under an existing one takes the existing one's seed
"$DEDUP" --tier "file:$T/f.flt" --tier "bloom:n=1000,file=$T/h3.flt" "$T/in" > /dev/null
check "a new file beside file:f.flt takes its seed" same_secret "$(file_seed "$T/h3.flt")" "$sf"
# one-run filter tiers: a fresh seed, both lines kept
"$DEDUP" --tier blocked:n=1000 "$T/in" > "$T/got"
check "--tier blocked (one run) keeps both lines" cmp -s "$T/exp" "$T/got"

# --seed with the public value: a choice, kept as given
"$DEDUP" --seed $PUBLIC --tier "blocked:n=1000,file=$T/p.flt" "$T/in" > "$T/got"
check "--seed public: the new file holds it" [ "$(file_seed "$T/p.flt")" = "$PUBLIC" ]
check "--seed public: the filter takes the pair for one key" [ "$(wc -l < "$T/got")" -eq 4 ]
"$DEDUP" --seed 7 --tier "file:$T/f.flt" "$T/in" > /dev/null 2> "$T/err"
check "--seed 7 on a file of another seed: refused (exit 2)" [ $? -eq 2 ]
check "--seed 7 on a file of another seed: names the file" grep -q "f.flt.*seed" "$T/err"

# --store: a secret seed, kept
if "$DEDUP" --help 2>&1 | grep -q -- '--store'; then
    "$DEDUP" --store "$T/st" "$T/in" > "$T/got" 2> "$T/err"
    if [ $? -eq 0 ]; then
        check "--store keeps both lines of the pair" cmp -s "$T/exp" "$T/got"
        ss=$("$DEDUP" store info "$T/st" | sed -n 's/.* seed //p')
        check "--store: a secret seed ($ss)" secret "$ss"
        check "--store: the second run knows every record" [ "$("$DEDUP" --store "$T/st" "$T/in" | wc -l)" -eq 0 ]
        # a filter file made over the store takes the store's seed
        "$DEDUP" --tier "blocked:n=1000,file=$T/s.flt" --store "$T/st" "$T/in" > /dev/null 2>&1
        check "a new file over --store takes its seed" same_secret "$(file_seed "$T/s.flt")" "$ss"
    elif grep -q -i "rocksdb" "$T/err"; then
        echo "no RocksDB in this build: the --store part is skipped"
    else
        fail "--store: $(cat "$T/err")"
    fi
fi
finish
