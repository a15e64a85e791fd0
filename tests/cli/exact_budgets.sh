#!/bin/bash
# Exact mode gives the same output whatever the budget and wherever its
# partitions live (issue 37): -m 64M, 256M, 1G and the default road, each
# output kind (first, -u, -D, -c, --sort), whole records, a field key and a
# CSV column, from files and from a pipe, against a naive model
# (lib/ref_dedup.py; `sort -u` for --sort; the default road for CSV keys).
# The input has several files, empty records, a last file without its final
# newline and a record longer than any buffer (1.5 MB, twice).
# DEDUP_PARTITION_FIRST=1M moves the engine's table mark low enough that
# these small inputs partition: under a large budget the partitions stay
# in memory ('spilled to memory'), under a small one or from a pipe they go
# to --tmpdir, and both must give the model's output.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"
mkdir -p "$T/tmp"
N=$(sized 80000)

# Seeded records: keys drawn from N/2 values ("k<i>,<j>"), some empty.
python3 - "$SEED" "$N" "$T" <<'EOF'
import random, sys
seed, n, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rnd = random.Random(seed)
recs = []
for i in range(n):
    r = rnd.random()
    if r < 0.02:
        recs.append(b"")
    else:
        k = rnd.randrange(n // 2)
        recs.append(b"k%d,%d,https://example.org/p/%x" % (k, k % 7, k * 2654435761 % (1 << 32)))
big = b"G" * 1500000  # longer than the reader's 1 MiB buffer
recs.insert(n // 3, big)
recs.insert(2 * n // 3, big)
third = len(recs) // 3
parts = [recs[:third], recs[third:2 * third], recs[2 * third:]]
for i, p in enumerate(parts):
    with open("%s/in%d" % (d, i), "wb") as f:
        f.write(b"\n".join(p))
        if i < 2:
            f.write(b"\n")  # the last file has no final newline
EOF
IN="$T/in0 $T/in1 $T/in2"
cat $IN > "$T/all"  # one stream: the third file ends without newline, as a pipe sees it

# run DESC EXPECTED ENV-ASSIGNMENTS -- ARGS...: dedup with ARGS on the files,
# output compared with EXPECTED.
run() {
    local desc=$1 exp=$2
    shift 2
    env "$@" > "$T/got" 2> "$T/err" || { cat "$T/err" >&2; fail "$desc: exit status"; return; }
    check "$desc" cmp -s "$exp" "$T/got"
}

# PF:BUDGET pairs.  With the mark at 64M these inputs fit every table;
# with it at 1M a budget of 1100K sends the partitions to --tmpdir, 256M and
# 1G hold them in memory, and the default road does not use the engine.
budgets=":64M :256M :1G 1M:1100K 1M:256M 1M:1G :default"
for out in first -u -D -c; do
    oflag=$out
    [ "$out" = first ] && oflag=
    for key in whole field; do
        kflag=
        [ "$key" = field ] && kflag="-f 1 -d ,"
        # shellcheck disable=SC2086
        $REF $oflag $kflag $IN > "$T/exp.$out.$key"
        for b in $budgets; do
            pf=${b%%:*} m=${b#*:}
            mflag="-m $m"
            [ "$m" = default ] && mflag=
            # shellcheck disable=SC2086
            run "$out $key -m $m PF=$pf files" "$T/exp.$out.$key" \
                DEDUP_PARTITION_FIRST=$pf "$DEDUP" $oflag $kflag $mflag -T "$T/tmp" $IN
        done
        # shellcheck disable=SC2086
        run "$out $key -m 256M PF=1M pipe" "$T/exp.$out.$key" DEDUP_PARTITION_FIRST=1M \
            sh -c 'cat "$@" | "$0" '"$oflag $kflag"' -m 256M -T "$1" -' "$DEDUP" "$T/tmp" $IN
    done
done

# --sort: whole records sorted bytewise, as sort -u.
sort -u "$T/all" > "$T/exp.sort"
for m in 64M 1G; do
    # shellcheck disable=SC2086
    run "--sort -m $m" "$T/exp.sort" DEDUP_PARTITION_FIRST=1M "$DEDUP" --sort -m $m -T "$T/tmp" $IN
done

# A CSV column: the default road (the copying set) is the reference.
# shellcheck disable=SC2086
"$DEDUP" --csv -f 3 $IN > "$T/exp.csv" || fail "--csv default road"
for m in 64M 1G; do
    for pf in "" 1M; do
        # shellcheck disable=SC2086
        run "--csv -f 3 -m $m PF=$pf" "$T/exp.csv" DEDUP_PARTITION_FIRST=$pf \
            "$DEDUP" --csv -f 3 -m $m -T "$T/tmp" $IN
    done
done

# Where the partitions went: in memory under a budget that holds them, in
# --tmpdir under one that does not and from a pipe (its size is unknown).
# shellcheck disable=SC2086
DEDUP_PARTITION_FIRST=1M "$DEDUP" --stats -m 1G -T "$T/tmp" $IN > /dev/null 2> "$T/err"
check "-m 1G: partitions in memory" grep -q 'spilled to memory' "$T/err"
# shellcheck disable=SC2086
DEDUP_PARTITION_FIRST=1M "$DEDUP" --stats -m 1100K -T "$T/tmp" $IN > /dev/null 2> "$T/err"
check "-m 1100K: partitions in the tmpdir" grep -q "spilled to $T/tmp" "$T/err"
# shellcheck disable=SC2086
cat $IN | DEDUP_PARTITION_FIRST=1M "$DEDUP" --stats -m 1G -T "$T/tmp" > /dev/null 2> "$T/err"
check "pipe: partitions in the tmpdir" grep -q "spilled to $T/tmp" "$T/err"
check "no temporary file left" test -z "$(ls -A "$T/tmp")"

# A file changed while it is read is still reported with the partitions in
# memory (the output goes to a pipe nobody reads yet, so the run blocks in
# write(2); then the file is changed and the pipe drained).  The input is
# 80000 records whatever the build, so that the output blocks before the
# input is read to its end (a change after the last check is not one).
grep -v '^GGG' "$T/all" | awk -v n=80000 '{ a[NR] = $0 } END { for (i = 0; i < n; i++) print a[i % NR + 1] "," int(i / NR) }' > "$T/src"
for w in "cut shorter:truncate" "grown:append" "rewritten:rewrite"; do
    changed_mid_run "${w%%:*} (partitions in memory)" "${w#*:}" "$T/in" "$T/src" \
        "shrank|changed while|modified while" \
        env DEDUP_PARTITION_FIRST=1M "$DEDUP" -m 1G -T "$T/tmp" "$T/in"
done
finish
