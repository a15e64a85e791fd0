#!/bin/bash
# Issue 34 item 1 for `--tier redis://...` and the module scheme's --seed:
#  - two different lines sharing one XXH3-128 digest under the public seed
#    (xxh3_collide, the first argument) go through a Redis tier on a new
#    name: both are kept, NAME:meta holds a secret seed, and a second run
#    takes that same seed (it finds every key of the first);
#  - --seed fixes the seed on purpose, also when it is the public value:
#    the keys name and the module filter then keep that very seed (and the
#    digest-only Redis tier takes the pair for one key, as the man page
#    says a known seed allows).
# Needs $DEDUP; the module part needs $DEDUP_MODULE (skipped without it).
. "$(dirname "$0")/lib.sh"
: "${DEDUP:?}"
COLLIDE=${1:?usage: tier_seed.sh XXH3_COLLIDE}
PUBLIC=0x9E3779B97F4A7C15
PUBLIC_DEC=11400714819323198485
"$COLLIDE" pair > "$RT_DIR/pair" || fail "xxh3_collide"
[ "$(sort -u "$RT_DIR/pair" | wc -l)" = 2 ] || fail "the pair is not two different lines"
{ echo first; cat "$RT_DIR/pair"; echo middle; cat "$RT_DIR/pair" "$RT_DIR/pair"; echo last; } > "$RT_DIR/in"
awk '!s[$0]++' "$RT_DIR/in" > "$RT_DIR/exp"
P=$(free_port)
if [ -n "${DEDUP_MODULE:-}" ] && [ -f "$DEDUP_MODULE" ]; then
    start_server "$P" --loadmodule "$DEDUP_MODULE"
else
    echo "no dedup_redis.so: the module scheme's part is skipped" >&2
    DEDUP_MODULE=""
    start_server "$P"
fi
U="redis://127.0.0.1:$P"
cli() { "$REDIS_CLI" -p "$P" "$@"; }
meta_seed() { cli HGET "$1:meta" shape | sed -n 's/.* seed=\([0-9]*\)\( .*\)\{0,1\}$/\1/p'; }

# ---- a new name: a secret seed, kept and taken by the next run ----
"$DEDUP" --tier "$U,name=t" "$RT_DIR/in" > "$RT_DIR/o1" 2> "$RT_DIR/e" || fail "first run: $(cat "$RT_DIR/e")"
cmp -s "$RT_DIR/exp" "$RT_DIR/o1" || fail "--tier redis: the pair lost a line ($(wc -l < "$RT_DIR/o1") of 5 lines out)"
s1=$(meta_seed t)
[ -n "$s1" ] || fail "no seed in t:meta: '$(cli HGET t:meta shape)'"
[ "$s1" != "$PUBLIC_DEC" ] || fail "t:meta keeps the public seed"
n=$("$DEDUP" --tier "$U,name=t" "$RT_DIR/in" | wc -l)
[ "$n" = 0 ] || fail "the second run output $n records again: it did not take the stored seed"
[ "$(meta_seed t)" = "$s1" ] || fail "the second run changed t:meta's seed ($s1 -> $(meta_seed t))"
# another name, another seed
"$DEDUP" --tier "$U,name=t2" "$RT_DIR/in" > /dev/null || fail "run on t2"
s2=$(meta_seed t2)
[ -n "$s2" ] && [ "$s2" != "$s1" ] || fail "two names share the seed $s1"
# under a filter tier the name's seed is the run's too
"$DEDUP" --tier blocked:n=1000 --tier "$U,name=t" "$RT_DIR/in" > "$RT_DIR/o3" 2> "$RT_DIR/e" ||
    fail "blocked over t: $(cat "$RT_DIR/e")"
[ ! -s "$RT_DIR/o3" ] || fail "blocked over t output $(wc -l < "$RT_DIR/o3") known records"
# a --seed other than the stored one is refused
"$DEDUP" --seed 7 --tier "$U,name=t" "$RT_DIR/in" > /dev/null 2> "$RT_DIR/e"
[ $? = 2 ] && grep -q "seed=7" "$RT_DIR/e" || fail "--seed 7 on t (exit 2 naming both seeds expected): $(cat "$RT_DIR/e")"

# ---- --seed with the public value is a choice, kept as given ----
"$DEDUP" --seed $PUBLIC --tier "$U,name=pub" "$RT_DIR/in" > "$RT_DIR/o4" 2> "$RT_DIR/e" ||
    fail "--seed public: $(cat "$RT_DIR/e")"
[ "$(meta_seed pub)" = "$PUBLIC_DEC" ] || fail "--seed $PUBLIC: pub:meta holds seed $(meta_seed pub)"
[ "$(wc -l < "$RT_DIR/o4")" = 4 ] || fail "--seed public: the pair should be one digest ($(wc -l < "$RT_DIR/o4") lines)"
if [ -n "$DEDUP_MODULE" ]; then
    "$DEDUP" --redis "$U" --redis-scheme module --name mp -n 1000 --seed $PUBLIC "$RT_DIR/in" \
        > /dev/null 2> "$RT_DIR/e" || fail "module --seed public: $(cat "$RT_DIR/e")"
    [ "$(meta_seed mp)" = "$PUBLIC_DEC" ] || fail "module --seed $PUBLIC: mp:meta holds seed $(meta_seed mp)"
    "$DEDUP" --redis "$U" --redis-scheme module --name ms -n 1000 "$RT_DIR/in" > "$RT_DIR/o5" ||
        fail "module without --seed"
    s=$(meta_seed ms)
    [ -n "$s" ] && [ "$s" != "$PUBLIC_DEC" ] || fail "module without --seed: ms:meta holds seed '$s'"
    cmp -s "$RT_DIR/exp" "$RT_DIR/o5" || fail "module scheme: the pair lost a line"
fi
echo "PASS tier_seed"
