#!/bin/sh
# bench_tiers.sh - the persistent seen-set, in one run: a blocked filter in
# front of RocksDB vs RocksDB alone vs --state (the exact set's file,
# rewritten whole at each run), and RocksDB's own ceiling on this machine.
#
#   sh bench/bench_tiers.sh [build-dir] [keys] [reps]
#   env CACHE: the store's block cache, default 1G
#   env METHODS: the methods and their order, default "store filter state"
#   env OLD: another build directory (e.g. the code before a change): adds
#              the method "old", the filter -> RocksDB stack run by OLD's
#              dedup, interleaved with the others (ratios to RocksDB alone)
#   env INPUT: a directory holding run1 and run2 made by an earlier run at
#              the same KEYS (generating 100M keys takes minutes)
#   env MAKE_INPUT: a directory: only write run1 and run2 there, for INPUT
#              (any two files serve as INPUT, e.g. bench/gen_uuids.c's output
#              cut in two: the distinct keys are then counted with dedup)
#   env KEEP: a directory: each run's `/usr/bin/time -v` report and stderr
#              are kept there (TIME-method-run-rep, ERR-method-run-rep)
#   env CEILING=0: leave out the rocksdb_ceiling.c step (at 100M keys it
#              ingests and reads 50M keys again: tens of minutes)
#
# The input: KEYS lines (default 2M), 50% repeats: KEYS/2 distinct 16-hex
# keys, each twice, in a seeded random order, cut in two halves.  Each
# method runs twice, once per half, on a fresh store or state: run 1 writes,
# run 2 reads the history (its repeats of run 1) and writes its new keys.
# Reported per method and run: keys/s (median of REPS, default 3,
# interleaved) by the wall clock and per CPU second (the machine is
# shared), and at the end bytes on disk per distinct key; for the filter,
# the share of new keys it settled without a store read (--stats=json).
# Ratios are to RocksDB alone in the same round.  Last, rocksdb_ceiling.c
# (built here with cc) measures librocksdb alone on KEYS/2 random 16-byte
# keys: memtable puts, sorted-file ingestion, MultiGet of present and
# absent keys.
set -eu
BUILD=${1:-build}
N=${2:-2000000}
REPS=${3:-3}
CACHE=${CACHE:-1G}
METHODS=${METHODS:-store filter state${OLD:+ old}}
DEDUP=$(cd "$BUILD" && pwd)/dedup
OLD_DEDUP=${OLD:+$(cd "$OLD" && pwd)/dedup}
HERE=$(cd "$(dirname "$0")" && pwd)
"$DEDUP" --help | grep -q -- --store= || { echo "dedup built without RocksDB" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/bench_tiers.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
distinct=$((N / 2))
if [ -n "${INPUT:-}" ]; then
    ln -s "$(cd "$INPUT" && pwd)/run1" "$W/run1"
    ln -s "$(cd "$INPUT" && pwd)/run2" "$W/run2"
else
# distinct keys (seeded), each written twice behind a seeded random tag,
# sorted by the tag: a random order without holding the lines in memory
python3 - "$distinct" <<'PY' |
import random, sys
n = int(sys.argv[1])
r = random.Random(42)
out = sys.stdout
for _ in range(n // 4096 + 1):
    m = min(4096, n)
    n -= m
    out.write("".join("%016x\n" % r.getrandbits(64) for _ in range(m)))
PY
awk 'BEGIN { srand(42) } { printf "%08x %s\n%08x %s\n", rand() * 4294967296, $0, rand() * 4294967296, $0 }' |
    LC_ALL=C sort -S 1G -T "$W" | cut -c10- > "$W/all"
half=$((N / 2))
head -n "$half" "$W/all" > "$W/run1"
tail -n +"$((half + 1))" "$W/all" > "$W/run2"
rm -f "$W/all"
fi
if [ -n "${MAKE_INPUT:-}" ]; then
    mkdir -p "$MAKE_INPUT"
    mv "$W/run1" "$W/run2" "$MAKE_INPUT/"
    echo "input: $N keys in $MAKE_INPUT/run1 and run2"
    exit 0
fi
lines1=$(wc -l < "$W/run1")
lines2=$(wc -l < "$W/run2")
[ -z "${INPUT:-}" ] || distinct=$("$DEDUP" "$W/run1" "$W/run2" | wc -l)
[ -z "${KEEP:-}" ] || mkdir -p "$KEEP"
echo "input: $N keys, $distinct distinct, run1 $lines1 lines, run2 $lines2 lines; reps $REPS; block cache $CACHE"

run() { # run NAME RUN: one timed run of method NAME over half RUN: "wall cpu maxrss"
    name=$1 r=$2 bin=$DEDUP
    case $name in
    filter|old) set -- --tier "blocked:n=$distinct,p=1%" --tier "rocksdb:$W/$name.db,cache=$CACHE" \
                --rebuild-filter --stats=json
                [ "$name" = filter ] || bin=$OLD_DEDUP ;;
    store)  set -- --tier "rocksdb:$W/store.db,cache=$CACHE" ;;
    state)  set -- --state "$W/state.dedup" -n "$distinct" ;;
    esac
    /usr/bin/time -v -o "$W/time" "$bin" "$@" "$W/run$r" > "$W/out.$name.$r" 2> "$W/err.$name.$r"
    [ -z "${KEEP:-}" ] || { cp "$W/time" "$KEEP/TIME-$name-$r-$rep"; cp "$W/err.$name.$r" "$KEEP/ERR-$name-$r-$rep"; }
    awk -F': ' '/Elapsed .wall clock/ { n = split($2, a, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + a[i] }
        /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { m = $2 }
        END { print w, u + s, m }' "$W/time"
}

for rep in $(seq 1 "$REPS"); do
    for name in $METHODS; do
        rm -rf "$W/filter.db" "$W/old.db" "$W/store.db" "$W/state.dedup"
        for r in 1 2; do
            load0=$(cut -d' ' -f1 /proc/loadavg)
            set -- $(run "$name" "$r")
            echo "$rep $name $r $1 $2 $3" >> "$W/times"
            echo "rep $rep $name run $r: $1 s wall, $2 CPU s, $3 kB peak; load average $load0 before, $(cut -d' ' -f1 /proc/loadavg) after"
        done
        case $name in
        filter|old) du -sb "$W/$name.db" | cut -f1 > "$W/bytes.$name" ;;
        store)  du -sb "$W/store.db" | cut -f1 > "$W/bytes.$name" ;;
        state)  stat -c %s "$W/state.dedup" > "$W/bytes.$name" ;;
        esac
        [ "$name" = filter ] && grep -h '^{"tiers"' "$W/err.filter.1" "$W/err.filter.2" > "$W/stats.$rep"
        if [ "$N" -le 20000000 ]; then # sorting 100M lines would take longer than the runs
            cat "$W/out.$name.1" "$W/out.$name.2" | LC_ALL=C sort -S 1G -T "$W" | uniq -d | head -1 > "$W/dup"
            [ ! -s "$W/dup" ] || { echo "FAIL: $name wrote a key twice" >&2; exit 1; }
        fi
        n_out=$(cat "$W/out.$name.1" "$W/out.$name.2" | wc -l)
        [ "$n_out" -eq "$distinct" ] || { echo "FAIL: $name wrote $n_out keys, not $distinct" >&2; exit 1; }
        rm -f "$W/out.$name.1" "$W/out.$name.2"
    done
done

python3 - "$W" "$lines1" "$lines2" "$distinct" <<'PY'
import json, os, statistics, sys
w, l1, l2, distinct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t, cpu, rss = {}, {}, {}
for line in open(w + "/times"):
    rep, name, r, sec, c, kb = line.split()
    t.setdefault((name, r), []).append(float(sec))
    cpu.setdefault((name, r), []).append(float(c))
    rss.setdefault((name, r), []).append(int(kb))
print("| method | run | keys/s (median) | vs RocksDB alone | keys per CPU s | peak RSS | bytes on disk / distinct key |")
print("|---|---|---|---|---|---|---|")
names = {"filter": "blocked 1% -> RocksDB", "old": "blocked 1% -> RocksDB, OLD build",
         "store": "RocksDB alone", "state": "--state (exact set file)"}
for name in ("filter", "old", "store", "state"):
    if not os.path.exists(w + "/bytes." + name):
        continue
    b = int(open(w + "/bytes." + name).read())
    for r, lines in (("1", l1), ("2", l2)):
        med = statistics.median(t[(name, r)])
        base = statistics.median(t[("store", r)]) if ("store", r) in t else float("nan")
        print("| %s | %s | %.0f | %.2fx | %.0f | %d MB | %s |" % (
            names[name], r, lines / med, base / med, lines / max(statistics.median(cpu[(name, r)]), 0.01),
            max(rss[(name, r)]) // 1024, "%.1f" % (b / distinct) if r == "2" else ""))
reps = sorted(int(f.split(".")[-1]) for f in os.listdir(w) if f.startswith("stats."))
for rep in reps:
    for i, line in enumerate(open("%s/stats.%d" % (w, rep))):
        j = json.loads(line)
        print("filter rep %d run %d: %d new keys, %.2f%% settled by the filter without a store read; store lookups %d" % (
            rep, i + 1, j["new_keys"], 100 * j["reads_avoided_rate"], j["tiers"][1]["lookups"]))
PY
rm -rf "$W"/*.db "$W/state.dedup" "$W"/run?
echo "done: $(date -u)"
[ "${CEILING:-1}" != 0 ] || exit 0
cc -O2 -o "$W/rocksdb_ceiling" "$HERE/rocksdb_ceiling.c" -lrocksdb
mkdir -p "$W/ceiling"
cache_mb=$(echo "$CACHE" | awk '/G$/ { print $0 * 1024; next } { print $0 + 0 }')
"$W/rocksdb_ceiling" "$W/ceiling" "$distinct" "" 1000000 "$cache_mb" 2>&1 ||
    echo "rocksdb_ceiling failed" >&2
