#!/usr/bin/env bash
# Exact mode without -m: keys stay in memory up to half the default budget
# ($DEDUP_MEMORY here, to keep the test small), then the rest of the input
# goes through the external engine.  Output must not change at the handover.
. "$(dirname "$0")/lib/common.sh"
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"

python3 - "$SEED" "$T/in" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
pool = [b"https://Ex.com/%d/%s" % (i, b"x" * r.randrange(40)) for i in range(250000)]
out = [r.choice(pool) + (b" " if r.random() < 0.05 else b"") for _ in range(600000)]
open(sys.argv[2], "wb").write(b"\n".join(out) + b"\n")
PY

for c in "" "-c" "-u" "-D" "-f 4 -d / -i" "-c --trim -i"; do
    # shellcheck disable=SC2086
    $REF $c "$T/in" > "$T/exp"
    # shellcheck disable=SC2086
    DEDUP_MEMORY=12M "$DEDUP" $c --stats=json "$T/in" > "$T/got" 2> "$T/err"
    check "DEDUP_MEMORY=12M options '$c' (seed $SEED)" cmp -s "$T/exp" "$T/got"
done
# The plain run did hand over: it says so in --stats.  (Through the copying
# set: by reference, a regular file's keys take a fraction of the memory
# and this input fits; DEDUP_NO_BYREF=1 keeps the copies.)
DEDUP_NO_BYREF=1 DEDUP_MEMORY=12M "$DEDUP" --stats=json "$T/in" > /dev/null 2> "$T/err"
check "--stats says it spilled" grep -q '"spilled":true' "$T/err"
check "--stats shows the budget" grep -q '"memory_limit":12582912' "$T/err"
DEDUP_MEMORY=12M "$DEDUP" --stats "$T/in" > /dev/null 2> "$T/err"
check "--stats text names the budget's source" grep -q 'of 12.00 MiB allowed (DEDUP_MEMORY)' "$T/err"
# Without DEDUP_MEMORY the budget is half the usable memory, and --help says how much.
check "--help shows the default budget" sh -c "'$DEDUP' --help | grep -q 'half of the usable memory'"
"$DEDUP" --stats "$T/in" > /dev/null 2> "$T/err"
check "a run that fits does not spill" test -z "$(grep 'temporary' "$T/err")"
# -o FILE and a reader that goes away during the spilled part
DEDUP_MEMORY=12M "$DEDUP" -o "$T/out" "$T/in"
$REF "$T/in" > "$T/exp"
check "-o FILE after the handover" cmp -s "$T/exp" "$T/out"
DEDUP_MEMORY=12M "$DEDUP" "$T/in" 2> "$T/err" | head -1 > /dev/null
check "| head -1 exits 0 after the handover" test "${PIPESTATUS[0]}" -eq 0
check "| head -1 is quiet" test ! -s "$T/err"
# A bad DEDUP_MEMORY gets a warning, not an error.
DEDUP_MEMORY=lots "$DEDUP" "$T/in" > "$T/got" 2> "$T/err"
check "DEDUP_MEMORY=lots falls back to the default" cmp -s "$T/exp" "$T/got"
check "DEDUP_MEMORY=lots is named in a warning" grep -q "DEDUP_MEMORY='lots' is not a size" "$T/err"
# An address-space limit (ulimit -v) caps the default budget (three quarters
# of it count as usable), so a run under a tight one spills instead of
# running out of memory.  Sanitizer runtimes reserve terabytes of address
# space and cannot even start under such a limit: in those builds the
# Release run of this script is the one that checks it.
if ldd "$DEDUP" 2>/dev/null | grep -q 'lib[at]san'; then
    echo "note: sanitized build: the ulimit -v checks run in the Release build"
else
    (ulimit -v 64000 && DEDUP_NO_BYREF=1 exec "$DEDUP" --stats=json "$T/in" > "$T/got" 2> "$T/err")
    check "ulimit -v 64000: the run succeeds" test $? -eq 0
    check "ulimit -v 64000: output unchanged" cmp -s "$T/exp" "$T/got"
    check "ulimit -v 64000: budget = half of 3/4 of the limit" grep -q '"memory_limit":24576000' "$T/err"
    check "ulimit -v 64000: it spilled" grep -q '"spilled":true' "$T/err"
fi
finish
