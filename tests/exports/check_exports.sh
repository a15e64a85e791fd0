#!/usr/bin/env bash
# check_exports.sh LIB [SYMBOL...] - LIB (libdedup.so or a component's
# shared library) exports dedup_* symbols only, and its public API is there:
# each SYMBOL, by default a few names of libdedup that every release keeps.
set -eu
LIB=$1
shift
[ $# -gt 0 ] || set -- dedup_strerror dedup_version_string dedup_seen_create dedup_seen_decide dedup_bloom_create
syms=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVWiu]$/ {print $3}' | sed 's/@.*//' | sort -u)
[ -n "$syms" ] || { echo "FAIL: $LIB exports nothing" >&2; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^dedup_' || true)
if [ -n "$bad" ]; then
    echo "FAIL: $LIB exports symbols outside dedup_*:" >&2
    printf '  %s\n' $bad >&2
    exit 1
fi
for s in "$@"; do
    printf '%s\n' "$syms" | grep -qx "$s" || { echo "FAIL: $LIB does not export $s" >&2; exit 1; }
done
echo "ok: $(printf '%s\n' "$syms" | wc -l) symbols, all dedup_*"
