#!/usr/bin/env bash
# check_exports.sh LIB - libdedup.so exports dedup_* symbols only, and the
# public API is there (a few names that every release keeps).
set -eu
LIB=$1
syms=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVWiu]$/ {print $3}' | sed 's/@.*//' | sort -u)
[ -n "$syms" ] || { echo "FAIL: $LIB exports nothing" >&2; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^dedup_' || true)
if [ -n "$bad" ]; then
    echo "FAIL: $LIB exports symbols outside dedup_*:" >&2
    printf '  %s\n' $bad >&2
    exit 1
fi
for s in dedup_strerror dedup_version_string dedup_seen_create dedup_seen_decide dedup_bloom_create; do
    printf '%s\n' "$syms" | grep -qx "$s" || { echo "FAIL: $LIB does not export $s" >&2; exit 1; }
done
echo "ok: $(printf '%s\n' "$syms" | wc -l) symbols, all dedup_*"
