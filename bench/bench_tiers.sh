#!/bin/sh
# bench_tiers.sh - the persistent seen-set, in one run: a blocked filter in
# front of RocksDB vs RocksDB alone vs --state (the exact set's file,
# rewritten whole at each run).
#
#   sh bench/bench_tiers.sh [build-dir] [keys] [reps]
#
# The input: KEYS lines (default 2M), 50% repeats: KEYS/2 distinct 16-hex
# keys, each twice, shuffled (seeded), cut in two halves.  Each method runs
# twice, once per half, on a fresh store or state: run 1 writes, run 2 reads
# the history (its repeats of run 1) and writes its new keys.  Reported per
# method and run: keys/s (median of REPS, default 3, interleaved), and at
# the end bytes on disk per distinct key; for the filter, the share of new
# keys it settled without a store read (--stats=json).  Ratios are to
# RocksDB alone in the same round.
set -eu
BUILD=${1:-build}
N=${2:-2000000}
REPS=${3:-3}
DEDUP=$(cd "$BUILD" && pwd)/dedup
"$DEDUP" --help | grep -q -- --store= || { echo "dedup built without RocksDB" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/bench_tiers.XXXXXX")
trap 'rm -rf "$W"' EXIT INT TERM
python3 - "$N" "$W" <<'PY'
import random, sys
n, w = int(sys.argv[1]), sys.argv[2]
r = random.Random(42)
keys = ["%016x" % r.getrandbits(64) for _ in range(n // 2)] * 2
r.shuffle(keys)
h = len(keys) // 2
open(w + "/run1", "w").write("\n".join(keys[:h]) + "\n")
open(w + "/run2", "w").write("\n".join(keys[h:]) + "\n")
PY
distinct=$((N / 2))
lines1=$(wc -l < "$W/run1")
lines2=$(wc -l < "$W/run2")
echo "input: $N keys, $distinct distinct, run1 $lines1 lines, run2 $lines2 lines; reps $REPS"

run() { # run NAME RUN: one timed run of method NAME over half RUN, prints seconds
    name=$1 r=$2
    case $name in
    filter) set -- --mode blocked -n "$distinct" -p 1% --store "$W/filter.db" --rebuild-filter --stats=json ;;
    store)  set -- --store "$W/store.db" ;;
    state)  set -- --state "$W/state.dedup" -n "$distinct" ;;
    esac
    /usr/bin/time -f "%e %M" -o "$W/time" "$DEDUP" "$@" "$W/run$r" > "$W/out.$name.$r" 2> "$W/err.$name.$r"
    cat "$W/time"
}

for rep in $(seq 1 "$REPS"); do
    for name in store filter state; do
        rm -rf "$W/filter.db" "$W/store.db" "$W/state.dedup"
        for r in 1 2; do
            set -- $(run "$name" "$r")
            echo "$rep $name $r $1 $2" >> "$W/times"
        done
        case $name in
        filter) du -sb "$W/filter.db" | cut -f1 > "$W/bytes.$name" ;;
        store)  du -sb "$W/store.db" | cut -f1 > "$W/bytes.$name" ;;
        state)  stat -c %s "$W/state.dedup" > "$W/bytes.$name" ;;
        esac
        [ "$name" = filter ] && grep -h '^{"tiers"' "$W/err.filter.1" "$W/err.filter.2" > "$W/stats.$rep"
        cat "$W/out.$name.1" "$W/out.$name.2" | sort | uniq -d | head -1 > "$W/dup"
        [ ! -s "$W/dup" ] || { echo "FAIL: $name wrote a key twice" >&2; exit 1; }
    done
done

python3 - "$W" "$lines1" "$lines2" "$distinct" <<'PY'
import json, statistics, sys
w, l1, l2, distinct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t = {}
rss = {}
for line in open(w + "/times"):
    rep, name, r, sec, kb = line.split()
    t.setdefault((name, r), []).append(float(sec))
    rss.setdefault((name, r), []).append(int(kb))
print("| method | run | keys/s (median) | vs RocksDB alone | peak RSS | bytes on disk / distinct key |")
print("|---|---|---|---|---|---|")
names = {"filter": "blocked 1% -> RocksDB", "store": "RocksDB alone", "state": "--state (exact set file)"}
for name in ("filter", "store", "state"):
    b = int(open(w + "/bytes." + name).read())
    for r, lines in (("1", l1), ("2", l2)):
        med = statistics.median(t[(name, r)])
        base = statistics.median(t[("store", r)])
        print("| %s | %s | %.0f | %.2fx | %d MB | %s |" % (
            names[name], r, lines / med, base / med, max(rss[(name, r)]) // 1024,
            "%.1f" % (b / distinct) if r == "2" else ""))
reps = sorted(int(f.split(".")[-1]) for f in __import__("os").listdir(w) if f.startswith("stats."))
for rep in reps:
    for i, line in enumerate(open("%s/stats.%d" % (w, rep))):
        j = json.loads(line)
        print("filter rep %d run %d: %d new keys, %.2f%% settled by the filter without a store read; store lookups %d" % (
            rep, i + 1, j["new_keys"], 100 * j["reads_avoided_rate"], j["tiers"][1]["lookups"]))
PY
