# Shared by the CLI tests: a temp dir, failure reporting, a seed.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/python.sh"
: "${DEDUP:?DEDUP must point at the built dedup binary}"
SRC=${DEDUP_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/dedup-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0
PASSES=0
SEED=${DEDUP_TEST_SEED:-$(( $(date +%s) % 1000000 ))}
echo "test seed: $SEED (set DEDUP_TEST_SEED to replay)"
# sized N [DIVISOR]: a count of records for an input, N in an optimised
# build and N / DIVISOR (default 4) under a sanitizer, whose binary runs
# several times slower: the same cases, smaller inputs.  Callers keep the
# sanitized size above every threshold the case needs (blocks, budgets).
sized() {
    if [ -n "${DEDUP_SANITIZER:-}" ]; then echo $(( $1 / ${2:-4} )); else echo "$1"; fi
}
# rounds N: how many seeded random inputs a property test draws: N in an
# optimised build, half (at least one) under a sanitizer.  Each round is the
# same cases on another input; the seed printed above replays them all.
rounds() {
    if [ -n "${DEDUP_SANITIZER:-}" ]; then echo $(( $1 > 1 ? $1 / 2 : 1 )); else echo "$1"; fi
}
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { PASSES=$((PASSES + 1)); }
check() { # check DESC CMD...: passes when CMD succeeds
    local desc=$1; shift
    if "$@"; then pass; else fail "$desc"; fi
}
finish() {
    echo "$PASSES passed, $FAILS failed"
    [ "$FAILS" -eq 0 ]
}
# wait_until SECONDS CMD...: runs CMD every 50 ms until it succeeds (0) or
# SECONDS pass (1).  Tests that act on a running process wait for what they
# can observe (output appears, a file grows, a thread blocks), never for a
# fixed time that a slow or fast machine turns into no test.
wait_until() {
    local limit=$1 i=0
    shift
    while ! "$@"; do
        i=$((i + 1))
        [ $i -le $((limit * 20)) ] || return 1
        sleep 0.05
    done
}
# blocked_writing_pipe PID: some thread of PID sleeps in write(2) on a full
# pipe (its wait channel, or else its current system call, says so).
blocked_writing_pipe() {
    local t w
    for t in /proc/"$1"/task/*; do
        w=$(cat "$t/wchan" 2>/dev/null)
        case $w in *pipe_write*) return 0 ;; esac
        if [ "$w" = 0 ] || [ -z "$w" ]; then
            case "$(uname -m) $(cut -d' ' -f1 "$t/syscall" 2>/dev/null)" in
            "x86_64 1" | "aarch64 64") return 0 ;;
            esac
        fi
    done
    return 1
}
# has_files DIR: DIR holds at least one entry.
has_files() { [ -n "$(ls -A "$1" 2>/dev/null)" ]; }
# has_lines FILE N: FILE holds at least N lines.
has_lines() { [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; }
# has_open_file_in PID DIR: PID holds a file of DIR open (a nameless
# temporary shows as "DIR/#123 (deleted)").
has_open_file_in() {
    local fd
    for fd in /proc/"$1"/fd/*; do
        case "$(readlink "$fd" 2>/dev/null)" in "$2"/*) return 0 ;; esac
    done
    return 1
}
# changed_mid_run DESC WHAT FILE SRC MSG_RE CMD...: copies SRC to FILE and
# runs CMD (which reads FILE) with its output to a pipe nobody reads yet, so
# it blocks in write(2) early; then changes FILE (WHAT: truncate, append or
# rewrite one byte in place) and drains the pipe.  The run must end with
# exit 1 and a message matching MSG_RE (grep -E) that names FILE.
changed_mid_run() {
    local desc=$1 what=$2 file=$3 src=$4 re=$5
    shift 5
    cp "$src" "$file"
    rm -f "$T/fifo"; mkfifo "$T/fifo"
    "$@" > "$T/fifo" 2> "$T/err" &
    local pid=$!
    exec 3< "$T/fifo"
    if ! wait_until 30 blocked_writing_pipe "$pid"; then fail "$desc: never blocked"; fi
    case $what in
    truncate) truncate -s 1000 "$file" ;;
    append) echo appended >> "$file" ;;
    rewrite) printf 'X' | dd of="$file" bs=1 seek=10 conv=notrunc 2> /dev/null ;;
    esac
    cat <&3 > /dev/null
    exec 3<&-
    wait "$pid"
    local rc=$?
    check "$desc: exit 1 (got $rc)" test "$rc" -eq 1
    check "$desc: message" grep -Eq "$re" "$T/err"
    check "$desc: names the file" grep -q "$file" "$T/err"
}

# ---- -o outputs (cli/outfile.h): written to OUT.dedup-tmp-XXXXXX, renamed at the end
# out_tmp OUT: the name of OUT's temporary while a run writes it ("" if none).
out_tmp() { local f; for f in "$1".dedup-tmp-*; do [ -e "$f" ] && { echo "$f"; return; }; done; }
# tmp_exists OUT: a run has OUT's temporary open.
tmp_exists() { [ -n "$(out_tmp "$1")" ]; }
# tmp_has_lines OUT N: OUT's temporary holds at least N lines.
tmp_has_lines() { local f; f=$(out_tmp "$1"); [ -n "$f" ] && has_lines "$f" "$2"; }
