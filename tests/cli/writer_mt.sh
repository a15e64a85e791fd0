#!/usr/bin/env bash
# The output's writing thread (cli/io.c, dd_writer_start_thread): from
# -m 32M on, what the external engine's finish() emits (the final merge's
# output; all of it with --sort) is written by a thread of its own.  The
# same bytes as the reference; a closed pipe ends quietly; a full device is
# a write error, and an -o that is not a regular file is never removed;
# SIGTERM while the thread is blocked on a pipe nobody reads still ends the
# run.  Also runs under ThreadSanitizer (label "threads").
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C
mkdir "$T/tmp"
notmp() { [ -z "$(ls -A "$T/tmp")" ] || fail "temporary files left after: $*"; }

seq 1 700000 > "$T/keys"   # 700k distinct keys spill at 32 MiB
"$DEDUP" -m 32M -T "$T/tmp" --stats "$T/keys" "$T/keys" > "$T/got" 2> "$T/err"
check "-m 32M on 700k distinct keys spills" grep -q "runs written" "$T/err"
check "-m 32M output equals the reference" cmp -s "$T/keys" "$T/got"
"$DEDUP" -m 32M -T "$T/tmp" --sort "$T/keys" "$T/keys" > "$T/got"
sort -u "$T/keys" > "$T/exp"
check "-m 32M --sort equals LC_ALL=C sort -u" cmp -s "$T/exp" "$T/got"
# Under ThreadSanitizer (several times slower) the runs whose thread does
# nothing another run's does not: -c only changes what the main thread
# formats, -o on a full device fails as standard output does.
if [ "${DEDUP_SANITIZER:-}" != thread ]; then
"$DEDUP" -m 32M -T "$T/tmp" --sort -c "$T/keys" "$T/keys" > "$T/got"
sort "$T/keys" "$T/keys" | uniq -c > "$T/exp"
check "-m 32M --sort -c equals sort | uniq -c" cmp -s "$T/exp" "$T/got"
fi

"$DEDUP" -m 32M -T "$T/tmp" --sort "$T/keys" 2> "$T/err" | head -1 > /dev/null
check "broken pipe: exit 0" [ "${PIPESTATUS[0]}" -eq 0 ]
check "broken pipe: no message" [ ! -s "$T/err" ]

"$DEDUP" -m 32M -T "$T/tmp" --sort "$T/keys" > /dev/full 2> "$T/err"
check "a full device exits 1" [ $? -eq 1 ]
check "the message names standard output" grep -q "write error on (standard output): No space left" "$T/err"
if [ "${DEDUP_SANITIZER:-}" != thread ]; then
ln -s /dev/full "$T/full"
"$DEDUP" -m 32M -T "$T/tmp" --sort -o "$T/full" "$T/keys" 2> "$T/err"
check "-o on a full device exits 1" [ $? -eq 1 ]
check "an -o that is not a regular file is never removed" test -L "$T/full" -a -c /dev/full
fi

# the reader of the pipe sleeps: the writing thread blocks in write(2)
mkfifo "$T/fifo"
sleep 30 < "$T/fifo" &
sleeper=$!
"$DEDUP" -m 32M -T "$T/tmp" --sort "$T/keys" > "$T/fifo" 2> "$T/err" &
pid=$!
check "the writing thread blocks on the full pipe" wait_until 120 blocked_writing_pipe $pid
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
kill $sleeper 2>/dev/null
wait $sleeper 2>/dev/null
check "SIGTERM while blocked on a pipe ends the run (exit $rc)" [ $rc -eq 143 ]
notmp "all runs"
finish
