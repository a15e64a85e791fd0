#!/usr/bin/env bash
# The reading thread (cli/feeder.c) against the reference on inputs that cross
# its block boundaries: many blocks, records longer than a block, pipes, NUL
# terminators, keys, and stopping while it is blocked on a pipe.  Also runs
# under ThreadSanitizer (label "threads").
. "$(dirname "$0")/lib/common.sh"
REF="python3 $SRC/tests/cli/lib/ref_dedup.py"

# 120,000 records, about 24 of them 1-5 MiB long; under a sanitizer 30,000
# and about 6 (each still longer than a block): the threads meet
# the same block boundaries, on a quarter of the bytes
python3 - "$SEED" "$T/in" "$(sized 120000)" "$(sized 24)" <<'PY'
import random, sys
r = random.Random(int(sys.argv[1])); out = []; n = int(sys.argv[3]); g = int(sys.argv[4])
pool = [b"u%d\tv%d" % (r.randrange(10**6), r.randrange(50)) for _ in range(n // 6)]
for i in range(n):
    x = r.random()
    if x < g / n:   # records of 1-5 MiB: longer than a block, and repeated
        out.append(bytes([97 + r.randrange(3)]) * r.randrange(1 << 20, 5 << 20))
    elif x < 0.01:
        out.append(b"")
    else:
        out.append(r.choice(pool) if x < 0.6 else b"x%d\tY%d" % (r.randrange(10**9), i % 7))
open(sys.argv[2], "wb").write(b"\n".join(out))   # no final newline
PY
echo "input: $(wc -c < "$T/in") bytes"

for c in "" "-c" "-D" "-u" "-f 2 -i"; do
    # shellcheck disable=SC2086
    $REF $c "$T/in" > "$T/exp"
    # shellcheck disable=SC2086
    "$DEDUP" $c "$T/in" > "$T/got"
    check "file, options '$c' (seed $SEED)" cmp -s "$T/exp" "$T/got"
    # shellcheck disable=SC2086
    cat "$T/in" | "$DEDUP" $c > "$T/got"
    check "pipe, options '$c' (seed $SEED)" cmp -s "$T/exp" "$T/got"
done
tr '\n\0' '\0\n' < "$T/in" > "$T/inz"
$REF -z "$T/inz" > "$T/exp"
"$DEDUP" -z "$T/inz" > "$T/got"
check "-z (seed $SEED)" cmp -s "$T/exp" "$T/got"
"$DEDUP" --mode fingerprint "$T/in" "$T/in" > "$T/got"
$REF "$T/in" "$T/in" > "$T/exp"
check "two files, fingerprint" cmp -s "$T/exp" "$T/got"

# | head: quiet, exit 0, the reading thread stopped
"$DEDUP" "$T/in" 2> "$T/err" | head -1 > /dev/null
check "| head -1 exits 0" test "${PIPESTATUS[0]}" -eq 0
check "| head -1 is quiet" test ! -s "$T/err"

# A line is decided as soon as it arrives on a pipe (--line-buffered), and
# SIGTERM stops dedup while its reading thread waits on the pipe.
mkfifo "$T/fifo"
"$DEDUP" --line-buffered < "$T/fifo" > "$T/stream" 2> "$T/err" &
pid=$!
exec 3> "$T/fifo"
printf 'first\nfirst\nsecond\n' >&3
for _ in $(seq 300); do [ "$(wc -l < "$T/stream")" -ge 2 ] && break; sleep 0.1; done
check "streamed lines appear before the input ends" test "$(cat "$T/stream")" = "$(printf 'first\nsecond')"
kill -TERM "$pid"
for _ in $(seq 300); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2> /dev/null; then fail "SIGTERM did not stop dedup blocked on a pipe"; kill -9 "$pid"; else pass; fi
wait "$pid"; rc=$?
check "SIGTERM exit status 143 (got $rc)" test "$rc" -eq 143
exec 3>&-
check "nothing on stderr after SIGTERM but the notice" test -z "$(grep -v 'interrupted' "$T/err")"
[ "$FAILS" -eq 0 ] || { echo "stderr of the last run:"; cat "$T/err"; }
finish
