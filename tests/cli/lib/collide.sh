# shellcheck shell=bash
# Sourced after common.sh by the crafted-collision tests: writes to $T/pair
# two different 300-byte lines sharing one XXH3-128 digest under the public
# seed (tests/util/xxh3_collide.c, built in $DEDUP_BUILD) and checks that
# they differ; sets PUBLIC to that seed and LC_ALL=C.
COLLIDE=${DEDUP_BUILD:?DEDUP_BUILD must point at the build tree}/tests/xxh3_collide
[ -x "$COLLIDE" ] || { echo "missing $COLLIDE" >&2; exit 1; }
export LC_ALL=C
PUBLIC=0x9e3779b97f4a7c15
"$COLLIDE" pair > "$T/pair" || { echo "xxh3_collide failed" >&2; exit 1; }
check "the pair is two different lines" [ "$(sort -u "$T/pair" | wc -l)" -eq 2 ]
