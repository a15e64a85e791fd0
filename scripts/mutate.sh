#!/usr/bin/env bash
# mutate.sh - plants bugs one at a time in a scratch copy of the tree and
# runs the tests named for each: a test suite is only as good as the bugs it
# catches.  Not part of `make test` (a run builds the tree once per
# mutation; expect minutes).
#
# usage: scripts/mutate.sh [-j N] [-B] [-k] [-o REPORT] [MUTATIONS_FILE [NAME...]]
#   MUTATIONS_FILE  default scripts/mutations.txt; NAME... runs only those
#   -j N            build jobs (default 2)
#   -B              skip the baseline (the named tests must pass unmutated)
#   -k              keep the scratch directory (printed)
#   -o REPORT       also write the result table to REPORT
#
# The mutations file holds records separated by blank lines; '#' starts a
# comment line.  Each record:
#   name:  a short name
#   file:  a path inside the tree
#   old:   one whole line of that file, exactly (leading spaces included)
#   new:   the line that replaces it (may be empty: the line is deleted)
#   nth:   (optional) which occurrence of 'old' when it is not unique, 1-based
#   tests: a ctest -R regular expression
#   why:   (optional) the bug, in words
# Values start after the first ": " (old/new keep everything after it).
#
# The scratch copy holds the tracked and untracked (not ignored) files of
# the working tree as they are now, so uncommitted edits are tested too.  It
# is configured once (Release) and rebuilt incrementally for each mutation.
# Result per mutation: CAUGHT (a named test failed), SURVIVED (all passed),
# NOT-APPLIED ('old' not found, or found more often than 'nth' allows: the
# code moved), BUILD-FAILED (the mutant does not compile: a bad mutation).
# Exit status: 0 when every applied mutation was caught, 1 otherwise, 2 on
# a usage or setup error.
set -u
jobs=2 baseline=1 keep=0 report=""
while getopts "j:Bko:" opt; do
    case $opt in
    j) jobs=$OPTARG ;;
    B) baseline=0 ;;
    k) keep=1 ;;
    o) report=$OPTARG ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
here=$(cd "$(dirname "$0")/.." && pwd)
list=${1:-$here/scripts/mutations.txt}
[ $# -gt 0 ] && shift
[ -r "$list" ] || { echo "mutate: cannot read $list" >&2; exit 2; }
only=("$@")

scratch=$(mktemp -d "${TMPDIR:-/tmp}/dedup-mutate.XXXXXX")
cleanup() { [ $keep = 1 ] && echo "mutate: scratch kept in $scratch" >&2 || rm -rf "$scratch"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
src=$scratch/src
mkdir -p "$src"
(cd "$here" && git ls-files -z --cached --others --exclude-standard |
    tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$src" ||
    { echo "mutate: cannot copy the tree (is $here a git checkout?)" >&2; exit 2; }

# The records, as NAME<TAB>FILE<TAB>NTH<TAB>TESTS lines in $scratch/index,
# each one's old and new lines in $scratch/m/NAME.old and .new.
mkdir -p "$scratch/m"
python3 - "$list" "$scratch" "${only[@]}" <<'PY' || exit 2
import os, sys
path, out, only = sys.argv[1], sys.argv[2], set(sys.argv[3:])
recs, cur = [], {}
for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
    line = line.rstrip("\n")
    if not line.strip():
        if cur: recs.append(cur); cur = {}
        continue
    if line.startswith("#"):
        continue
    key, sep, val = line.partition(": ")
    if not sep and line.endswith(":"):
        key, val = line[:-1], ""
    elif not sep:
        sys.exit("%s:%d: not 'key: value': %r" % (path, lineno, line))
    if key not in ("name", "file", "old", "new", "nth", "tests", "why"):
        sys.exit("%s:%d: unknown key %r" % (path, lineno, key))
    cur[key] = val
if cur: recs.append(cur)
names = set()
with open(os.path.join(out, "index"), "w") as ix:
    for r in recs:
        for k in ("name", "file", "old", "tests"):
            if k not in r:
                sys.exit("%s: record %r has no %s" % (path, r.get("name", "?"), k))
        if r["name"] in names or "/" in r["name"] or "\t" in r["name"]:
            sys.exit("%s: bad or repeated name %r" % (path, r["name"]))
        names.add(r["name"])
        if only and r["name"] not in only:
            continue
        open(os.path.join(out, "m", r["name"] + ".old"), "w").write(r["old"])
        open(os.path.join(out, "m", r["name"] + ".new"), "w").write(r.get("new", ""))
        ix.write("%s\t%s\t%s\t%s\n" % (r["name"], r["file"], r.get("nth", "0"), r["tests"]))
missing = only - names
if missing:
    sys.exit("%s: no mutation named %s" % (path, ", ".join(sorted(missing))))
PY
[ -s "$scratch/index" ] || { echo "mutate: no mutation to run" >&2; exit 2; }

# apply NAME FILE NTH: replaces the line in the scratch copy (the original is
# kept as FILE.orig); fails when the line is not there exactly as asked.
apply() {
    python3 - "$src/$2" "$scratch/m/$1.old" "$scratch/m/$1.new" "$3" <<'PY'
import shutil, sys
path, old, new, nth = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read(), int(sys.argv[4])
lines = open(path, encoding="utf-8", errors="surrogateescape").read().split("\n")
hits = [i for i, l in enumerate(lines) if l == old]
if not hits or (nth == 0 and len(hits) > 1) or nth > len(hits):
    print("line found %d time(s)" % len(hits)); sys.exit(1)
i = hits[(nth or 1) - 1]
shutil.copy2(path, path + ".orig")
if new:
    lines[i] = new
else:
    del lines[i]
open(path, "w", encoding="utf-8", errors="surrogateescape").write("\n".join(lines))
PY
}
restore() { mv -f "$src/$1.orig" "$src/$1"; }

log=$scratch/log
echo "mutate: building the scratch copy ($src, -j$jobs)" >&2
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release > "$log" 2>&1 &&
    cmake --build "$src/build" -j"$jobs" >> "$log" 2>&1 ||
    { echo "mutate: the unmutated tree does not build:" >&2; tail -20 "$log" >&2; exit 2; }
runtests() { # runtests REGEX: 0 when every matching test passes (and some ran)
    (cd "$src/build" && ctest -R "$1" --timeout 600 > "$scratch/ctest.out" 2>&1)
    local rc=$?
    grep -q "No tests were found" "$scratch/ctest.out" && return 3
    return $rc
}
if [ $baseline = 1 ]; then
    cut -f4 "$scratch/index" | sort -u | while read -r rx; do
        runtests "$rx"
        case $? in
        0) ;;
        3) echo "mutate: no test matches '$rx'" >&2; exit 2 ;;
        *) echo "mutate: '$rx' fails on the unmutated tree:" >&2
           grep -E "Failed|\*\*\*" "$scratch/ctest.out" | head -5 >&2; exit 2 ;;
        esac
    done || exit 2
fi

table=$scratch/table
printf "%-34s %-13s %6s  %s\n" MUTATION RESULT SECS TESTS > "$table"
caught=0 survived=0 notapplied=0 buildfailed=0
while IFS=$'\t' read -r name file nth tests; do
    t0=$(date +%s)
    if ! why=$(apply "$name" "$file" "$nth"); then
        result=NOT-APPLIED
        notapplied=$((notapplied + 1))
        tests="$tests ($file: $why)"
    elif ! cmake --build "$src/build" -j"$jobs" > "$log" 2>&1; then
        result=BUILD-FAILED
        buildfailed=$((buildfailed + 1))
    else
        runtests "$tests"
        case $? in
        0) result=SURVIVED; survived=$((survived + 1)) ;;
        3) result=NOT-APPLIED; notapplied=$((notapplied + 1)); tests="$tests (no test matches)" ;;
        *) result=CAUGHT; caught=$((caught + 1))
           tests="$tests [$(grep -oE -- '- [A-Za-z0-9_]+ \((Failed|Timeout)\)' "$scratch/ctest.out" |
                            awk '{print $2}' | paste -sd, -)]" ;;
        esac
    fi
    [ -e "$src/$file.orig" ] && restore "$file"
    line=$(printf "%-34s %-13s %6s  %s" "$name" "$result" $(( $(date +%s) - t0 )) "$tests")
    echo "$line" >> "$table"
    echo "$line" >&2
done < "$scratch/index"
summary="mutations: $((caught + survived + notapplied + buildfailed)), caught $caught, survived $survived, not applied $notapplied, build failed $buildfailed"
echo "$summary" >> "$table"
# leave the scratch build matching the tree (for -k)
cmake --build "$src/build" -j"$jobs" > "$log" 2>&1
cat "$table"
[ -n "$report" ] && cp "$table" "$report"
[ $survived -eq 0 ] && [ $notapplied -eq 0 ] && [ $buildfailed -eq 0 ]
