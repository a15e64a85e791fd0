#!/bin/bash
# Crafted collisions (issue 34): two different 300-byte lines that share one
# XXH3-128 digest under the public seed (tests/util/xxh3_collide.c).  A run
# without --state, store, tier or Redis digests with a secret seed of its
# own, so no mode loses either line, including those that decide by digest
# alone (--mode fingerprint, --window, --last) and the filters.  Given the
# public seed on purpose, the digest-only modes drop the second line: what
# the man page says a known --seed exposes.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/collide.sh"
# the pair among other lines, each line three times
{ echo first; cat "$T/pair"; echo middle; cat "$T/pair" "$T/pair"; echo last; echo first; } > "$T/in"
awk '!s[$0]++' "$T/in" > "$T/exp"
sort -u "$T/in" > "$T/exp.sorted"
tac "$T/in" | awk '!s[$0]++' | tac > "$T/exp.last"
mkdir -p "$T/tmp"

while IFS='|' read -r envv args; do
    # shellcheck disable=SC2086
    env $envv "$DEDUP" $args "$T/in" > "$T/got" 2> "$T/err"
    check "[$envv $args] exit 0" [ $? -eq 0 ]
    want=$T/exp
    case $args in *--sort*) want=$T/exp.sorted ;; *--keep=last*) want=$T/exp.last ;; esac
    check "[$envv $args] both lines of the pair kept" cmp -s "$want" "$T/got"
done << EOF
|
DEDUP_BYREF=1|
|-m 1M -T $T/tmp
|-m 1M -T $T/tmp --sort
|--keep=last
|--mode fingerprint
|--window 1h
|--window 1h --window-type tumbling
|--window 1h --refresh-on-dup
|--window 1h --mode fingerprint
|--last 100
|--last 100 --mode fingerprint
|--mode bloom -n 1000
|--mode blocked -n 1000
|--mode scalable
|--mode cuckoo -n 1000
|--window 1h --mode bloom -n 1000
EOF
# -c counts each line of the pair apart
"$DEDUP" -c "$T/in" > "$T/got"
check "-c counts the pair's lines apart" [ "$(grep -c '^      3 ' "$T/got")" -eq 2 ]

# a known seed: the digest-only modes take the second line for the first
for args in "--mode fingerprint" "--window 1h" "--last 100"; do
    # shellcheck disable=SC2086
    "$DEDUP" --seed $PUBLIC $args "$T/in" > "$T/got"
    check "[--seed public $args] the pair is one digest" [ "$(wc -l < "$T/got")" -eq 4 ]
done
# the exact mode compares whole keys: even under the public seed both stay
"$DEDUP" --seed $PUBLIC "$T/in" > "$T/got"
check "[--seed public] exact mode keeps both lines" cmp -s "$T/exp" "$T/got"
finish
