#!/bin/bash
# -m SIZE bounds the whole process, whatever the records look like (issue
# 34): the man page promises about SIZE + 16 MB.  Each shape runs under
# GNU time and its peak RSS (getrusage's ru_maxrss of the child) must stay
# within that: empty records (the reader's per-record arrays must not grow
# with the records a buffer holds), one-byte records, short distinct
# records, one record larger than SIZE, many tiny files, a pipe, NUL
# terminators, and the options that keep more per key (-c, -D, -u, --sort).
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C
mkdir -p "$T/tmp" "$T/many"
MB=$(sized 8)

# The peak is checked in an optimised build only: a sanitizer adds shadow
# memory and keeps freed blocks in quarantine (AddressSanitizer: up to
# 256 MB), so there only the outputs are.
slack=$((16 * 1024)) # KB

# within SIZE_KB DESC REF CMD...: CMD's output equals REF's (a file) and its
# peak RSS is at most SIZE_KB + slack.
within() {
    local size=$1 desc=$2 ref=$3
    shift 3
    /usr/bin/time -f %M -o "$T/rss" "$@" > "$T/got" 2> "$T/err" || { cat "$T/err" >&2; fail "$desc: exit status"; return; }
    check "$desc: output" cmp -s "$ref" "$T/got"
    local rss limit
    rss=$(tail -1 "$T/rss")
    limit=$((size + slack))
    echo "$desc: peak ${rss} KB (limit ${limit} KB)"
    [ -n "${DEDUP_SANITIZER:-}" ] && return
    check "$desc: peak RSS ${rss} KB <= ${limit} KB" [ "$rss" -le "$limit" ]
}

head -c $((MB << 20)) /dev/zero | tr '\0' '\n' > "$T/empty"
printf '\n' > "$T/empty.first"
for m in 1 4; do
    within $((m * 1024)) "empty records, -m ${m}M" "$T/empty.first" \
        "$DEDUP" -m ${m}M -T "$T/tmp" "$T/empty"
done
printf '%7d \n' $((MB << 20)) > "$T/empty.count"
within 1024 "empty records, -m 1M -c" "$T/empty.count" "$DEDUP" -m 1M -T "$T/tmp" -c "$T/empty"
within 1024 "empty records, -m 1M --sort" "$T/empty.first" "$DEDUP" -m 1M -T "$T/tmp" --sort "$T/empty"
tail -n +2 "$T/empty" > "$T/empty.dups"
within 1024 "empty records, -m 1M -D" "$T/empty.dups" "$DEDUP" -m 1M -T "$T/tmp" -D "$T/empty"
: > "$T/none"
within 1024 "empty records, -m 1M -u" "$T/none" "$DEDUP" -m 1M -T "$T/tmp" -u "$T/empty"
within 1024 "empty records from a pipe, -m 1M" "$T/empty.first" \
    sh -c '"$1" -m 1M -T "$2" < "$3"' sh "$DEDUP" "$T/tmp" "$T/empty"
tr '\n' '\0' < "$T/empty" > "$T/zero"
printf '\0' > "$T/zero.first"
within 1024 "empty NUL-terminated records, -m 1M -z" "$T/zero.first" "$DEDUP" -z -m 1M -T "$T/tmp" "$T/zero"

yes a | head -n $((MB << 19)) > "$T/ones"
printf 'a\n' > "$T/ones.first"
within 1024 "one-byte records, -m 1M" "$T/ones.first" "$DEDUP" -m 1M -T "$T/tmp" "$T/ones"

awk -v n=$((MB << 17)) -v s="$SEED" 'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%x\n", int(rand() * 65536) }' > "$T/short"
awk '!s[$0]++' "$T/short" > "$T/short.first"
within 1024 "short records, -m 1M" "$T/short.first" "$DEDUP" -m 1M -T "$T/tmp" "$T/short"

# one record of 18 MB, larger than the budget and the reader's buffer
{ echo x; head -c $((18 << 20)) /dev/zero | tr '\0' 'r'; echo; echo x; } > "$T/huge"
head -n 2 "$T/huge" > "$T/huge.first"
within 1024 "a record of 18 MB, -m 1M" "$T/huge.first" "$DEDUP" -m 1M -T "$T/tmp" "$T/huge"
# with a key option the record is read whole to take its key: its length more
within $((1024 + (18 << 10))) "a record of 18 MB, -m 1M -f 1" "$T/huge.first" \
    "$DEDUP" -m 1M -T "$T/tmp" -f 1 "$T/huge"

# many tiny files, some empty
for i in $(seq 1 2000); do
    if [ $((i % 7)) = 0 ]; then : > "$T/many/f$i"; else echo "k$((i % 50))" > "$T/many/f$i"; fi
done
(cd "$T/many" && for i in $(seq 1 2000); do cat "f$i"; done) | awk '!s[$0]++' > "$T/many.first"
files=()
for i in $(seq 1 2000); do files+=("$T/many/f$i"); done
within 1024 "2000 tiny files, -m 1M" "$T/many.first" "$DEDUP" -m 1M -T "$T/tmp" "${files[@]}"
finish
