#!/usr/bin/env bash
# -o FILE in every mode (issue 33 item 9): an input that is also the output is
# refused before anything is touched; SIGINT, SIGTERM and SIGHUP leave the
# previous output as it was, no temporary, and exit 128 + the signal; a
# complete run replaces the output with the mode a new file (or the old one)
# has.  The runs read a FIFO this script holds open, so each signal comes
# while the run waits mid-stream, once its temporary output exists.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C

printf 'b\na\nb\nc\na\n' > "$T/in"
MODES=("" "-m 1M" "--sort" "--keep=last" "-c" "-u" "-D" "--last 5" "--window 1h"
       "--mode bloom -n 1000")
STORE_MODES=()
if "$DEDUP" --help | grep -q -- '--store'; then
    STORE_MODES=("--store $T/db" "--last 5 --store $T/dbw")
fi

# --- an input that is the output: exit 2, the file unchanged, named --------------------
refused() { # refused DESC OUT INPUT-ARGS...: the run must refuse, OUT unchanged
    local desc=$1 out=$2
    shift 2
    cp "$T/in" "$T/in.before"
    "$DEDUP" "$@" > /dev/null 2> "$T/err"
    local rc=$?
    check "$desc: exit 2 (got $rc)" test $rc -eq 2
    check "$desc: the file is unchanged" cmp -s "$T/in" "$T/in.before"
    check "$desc: the message names it: $(head -c 200 "$T/err")" grep -q "$out" "$T/err"
    check "$desc: no temporary" test -z "$(ls "$T" | grep -e 'dedup-tmp' -e partial)"
}
ln "$T/in" "$T/hard"
ln -s "$T/in" "$T/soft"
for mode in "${MODES[@]}" "${STORE_MODES[@]}"; do
    # shellcheck disable=SC2086
    refused "-o F F [$mode]" "$T/in" $mode -o "$T/in" "$T/in"
    # shellcheck disable=SC2086
    refused "-o via a hard link [$mode]" "$T/hard" $mode -o "$T/hard" "$T/in"
    # shellcheck disable=SC2086
    refused "-o via a symlink [$mode]" "$T/soft" $mode -o "$T/soft" "$T/in"
    # shellcheck disable=SC2086
    refused "-o F with F as standard input [$mode]" "$T/in" $mode -o "$T/in" - < "$T/in"
done
refused "-o /dev/stdin with F as standard input" "/dev/stdin" -o /dev/stdin < "$T/in"
refused "the input among others" "$T/soft" -o "$T/soft" /dev/null "$T/in"
refused "--late FILE that is the input" "$T/in" --window 1h --time-field 1 --late "$T/in" "$T/in"
refused "count -o F F" "$T/in" count -o "$T/in" "$T/in"
cp "$T/in" "$T/0"
refused "split: a part that is the input" "$T/0" split -N 1 -o "$T/%s" "$T/0"
rm -f "$T/0"
# /dev/null as both is no clash (a character device)
"$DEDUP" -o /dev/null < /dev/null
check "-o /dev/null with /dev/null as input is fine" test $? -eq 0

# --- a complete run: replaced, with the file's mode ----------------------------------
echo old > "$T/o"
chmod 640 "$T/o"
"$DEDUP" -o "$T/o" "$T/in"
check "a complete run replaces the output" test "$(cat "$T/o" | tr '\n' ,)" = "b,a,c,"
check "... keeping its mode 640" test "$(stat -c %a "$T/o")" = 640
ln -s o "$T/olink"
"$DEDUP" -D -o "$T/olink" "$T/in"
check "-o through a symlink: the link stays" test -L "$T/olink"
check "... and the file it names is replaced" test "$(cat "$T/o" | tr '\n' ,)" = "b,a,"
( umask 027; "$DEDUP" -o "$T/new" "$T/in" )
check "a new output has 0666 less the umask (027: 640)" test "$(stat -c %a "$T/new")" = 640
check "no temporary after complete runs" test -z "$(ls "$T" | grep dedup-tmp)"

# --- a run that fails mid-stream: the previous output stays, no temporary ---------------
echo previous > "$T/o"
printf '1\n2\nx\n3\n' | "$DEDUP" --keys int -o "$T/o" 2> "$T/err"
rc=$?
check "a bad integer key ends the run with 1 (got $rc)" test $rc -eq 1
check "... the previous output is as it was" test "$(cat "$T/o")" = previous
check "... no temporary" test -z "$(ls "$T" | grep dedup-tmp)"
printf '1 a\nzz b\n' | "$DEDUP" --window 1h --time-field 1 -k 2 -o "$T/o" 2> /dev/null
check "a bad time ends the run with 1, the previous output as it was" test "$(cat "$T/o")" = previous

# --- signals: the previous output byte for byte, no temporary, 128 + the signal -------
# has_out_open PID OUT: PID holds OUT, or a temporary beside it, open (the
# run is past opening its output)
has_out_open() {
    local fd
    for fd in /proc/"$1"/fd/*; do
        case "$(readlink "$fd" 2>/dev/null)" in "$2"|"$2".*) return 0 ;; esac
    done
    return 1
}
signum() { case $1 in HUP) echo 1 ;; INT) echo 2 ;; TERM) echo 15 ;; esac; }
leftovers() { ls "$T" | grep -e '^out\.' -e 'dedup-tmp' | tr '\n' ' '; }
interrupted() { # interrupted SIG MODE...: one run stopped by SIG while it waits on the FIFO
    local sig=$1 desc
    shift
    desc="$sig [$*]"
    seq -f 'r%g' 1 1000 > "$T/before"
    cp "$T/before" "$T/out"
    rm -f "$T/fifo" && mkfifo "$T/fifo"
    exec 3<> "$T/fifo"
    seq -f 'k%g' 1 2000 >&3
    mkdir -p "$T/tmpk"
    local tmpdir=()
    case "${1:-}" in -m|--sort|--keep=last) tmpdir=(-T "$T/tmpk") ;; esac
    "$DEDUP" "$@" "${tmpdir[@]}" -o "$T/out" "$T/fifo" 2> "$T/err" &
    local pid=$! ready
    # the event: the output's temporary exists (--keep=last first copies its
    # input: a nameless file in -T)
    if [ "${1:-}" = "--keep=last" ]; then ready="has_open_file_in $pid $T/tmpk"; else ready="has_out_open $pid $T/out"; fi
    # shellcheck disable=SC2086
    check "$desc: the run started" wait_until 30 $ready
    kill -"$sig" $pid
    wait $pid
    local rc=$?
    exec 3>&-
    check "$desc: exit $((128 + $(signum "$sig"))) (got $rc): $(head -c 200 "$T/err")" \
        test $rc -eq $((128 + $(signum "$sig")))
    check "$desc: the previous output is byte-identical" cmp -s "$T/out" "$T/before"
    check "$desc: no temporary left: $(leftovers)" test -z "$(leftovers)"
    check "$desc: no file left in -T" test -z "$(ls -A "$T/tmpk")"
}
for mode in "${MODES[@]}" "--state $T/st"; do
    for sig in INT TERM HUP; do
        # shellcheck disable=SC2086
        interrupted $sig $mode
    done
done
# -T does not apply with a store: the same without it
for mode in "${STORE_MODES[@]}"; do
    for sig in INT TERM HUP; do
        desc="$sig [$mode], nothing decided yet"
        seq -f 'r%g' 1 1000 > "$T/before"; cp "$T/before" "$T/out"
        rm -f "$T/fifo" && mkfifo "$T/fifo"
        exec 3<> "$T/fifo"
        # shellcheck disable=SC2086
        "$DEDUP" $mode -o "$T/out" "$T/fifo" 2> "$T/err" &
        pid=$!
        check "$desc: the run started" wait_until 30 has_out_open $pid "$T/out"
        kill -"$sig" $pid; wait $pid; rc=$?
        exec 3>&-
        check "$desc: exit $((128 + $(signum "$sig"))) (got $rc)" test $rc -eq $((128 + $(signum "$sig")))
        check "$desc: the previous output is byte-identical" cmp -s "$T/out" "$T/before"
        check "$desc: no temporary left: $(leftovers)" test -z "$(leftovers)"
    done
done
# A store records the keys of the records written: a stopped run keeps those
# records beside the output, named, and a rerun writes only the rest.
for mode in "${STORE_MODES[@]}"; do
    rm -rf "$T/db" "$T/dbw"
    desc="TERM [$mode] after 1000 records"
    seq -f 'r%g' 1 10 > "$T/before"; cp "$T/before" "$T/out"
    rm -f "$T/fifo" && mkfifo "$T/fifo"
    exec 3<> "$T/fifo"
    seq -f 'k%g' 1 1000 >&3
    # shellcheck disable=SC2086
    "$DEDUP" $mode --line-buffered -o "$T/out" "$T/fifo" 2> "$T/err" &
    pid=$!
    check "$desc: the run wrote the first 1000 records" wait_until 30 tmp_has_lines "$T/out" 1000
    kill -TERM $pid; wait $pid; rc=$?
    exec 3>&-
    check "$desc: exit 143 (got $rc)" test $rc -eq 143
    check "$desc: the previous output is byte-identical" cmp -s "$T/out" "$T/before"
    check "$desc: no temporary left" test -z "$(ls "$T" | grep dedup-tmp)"
    part=$(ls "$T" | grep '^out\.partial-' | head -1)
    check "$desc: the records written are kept in out.partial-*" test -n "$part"
    check "$desc: ... named on stderr: $(head -c 300 "$T/err")" grep -q "out.partial-" "$T/err"
    seq -f 'k%g' 1 1500 > "$T/all"
    # shellcheck disable=SC2086
    "$DEDUP" $mode -o "$T/out" "$T/all"
    seq -f 'k%g' 1001 1500 > "$T/rest"
    check "$desc: a rerun writes only the rest" cmp -s "$T/out" "$T/rest"
    [ -n "$part" ] && cat "$T/$part" "$T/out" | cmp -s - "$T/all"
    check "$desc: the kept records and the rerun's are the input, each once" test $? -eq 0
    rm -f "$T"/out.partial-*
done

# The same with SIGKILL, which nothing can catch: the temporary stays, and
# the next run on the same output keeps it as out.partial-*, says so, and
# writes only the rest (nothing written by the killed run is lost).
for mode in "${STORE_MODES[@]}"; do
    rm -rf "$T/db" "$T/dbw"
    desc="KILL [$mode] after 1000 records"
    seq -f 'r%g' 1 10 > "$T/before"; cp "$T/before" "$T/out"
    rm -f "$T/fifo" && mkfifo "$T/fifo"
    exec 3<> "$T/fifo"
    seq -f 'k%g' 1 1000 >&3
    # shellcheck disable=SC2086
    "$DEDUP" $mode --line-buffered -o "$T/out" "$T/fifo" 2> "$T/err" &
    pid=$!
    check "$desc: the run wrote the first 1000 records" wait_until 30 tmp_has_lines "$T/out" 1000
    kill -KILL $pid; wait $pid 2>/dev/null
    exec 3>&-
    check "$desc: the previous output is byte-identical" cmp -s "$T/out" "$T/before"
    check "$desc: the killed run's temporary is there" tmp_exists "$T/out"
    seq -f 'k%g' 1 1500 > "$T/all"
    # shellcheck disable=SC2086
    "$DEDUP" $mode -o "$T/out" "$T/all" 2> "$T/err"
    part=$(ls "$T" | grep '^out\.partial-' | head -1)
    check "$desc: the next run keeps it as out.partial-*" test -n "$part"
    check "$desc: ... and says so: $(head -c 300 "$T/err")" grep -q "out.partial-.*killed" "$T/err"
    check "$desc: no temporary left" test -z "$(ls "$T" | grep dedup-tmp)"
    [ -n "$part" ] && sort -u "$T/$part" "$T/out" | cmp -s - <(sort -u "$T/all")
    check "$desc: the kept records and the rerun's cover the input" test $? -eq 0
    rm -f "$T"/out.partial-*
done

# By reference (regular files, DEDUP_BYREF=1), a signal while the run works:
# the output is then complete or the previous one, never a part.
seq -f 'line %g' 1 $(sized 2000000) > "$T/big"
for sig in INT TERM HUP; do
    seq -f 'r%g' 1 1000 > "$T/before"; cp "$T/before" "$T/out"
    DEDUP_BYREF=1 "$DEDUP" -o "$T/out" "$T/big" 2> "$T/err" &
    pid=$!
    wait_until 30 has_out_open $pid "$T/out"
    kill -"$sig" $pid 2> /dev/null; wait $pid; rc=$?
    if [ $rc -eq 0 ]; then
        check "by reference, $sig too late: the output is complete" cmp -s "$T/out" "$T/big"
    else
        check "by reference, $sig: exit $((128 + $(signum "$sig"))) (got $rc)" test $rc -eq $((128 + $(signum "$sig")))
        check "by reference, $sig: the previous output is byte-identical" cmp -s "$T/out" "$T/before"
    fi
    check "by reference, $sig: no temporary left" test -z "$(leftovers)"
done

# dedup split and count: a signal leaves no part, no sketch, no temporary
for sub in "split -N 2 -o $T/part-%s" "count -o $T/sketch"; do
    rm -f "$T/fifo" && mkfifo "$T/fifo"
    exec 3<> "$T/fifo"
    seq 1 100 >&3
    # shellcheck disable=SC2086
    "$DEDUP" $sub "$T/fifo" 2> "$T/err" &
    pid=$!
    if [ "${sub%% *}" = split ]; then
        check "$sub: started" wait_until 30 has_out_open $pid "$T/part-0"
    else
        check "$sub: started" wait_until 30 has_open_file_in $pid "$T"
    fi
    kill -HUP $pid; wait $pid; rc=$?
    exec 3>&-
    check "$sub: SIGHUP ends it with 129 (got $rc)" test $rc -eq 129
    check "$sub: nothing left: $(ls "$T" | grep -e part- -e sketch | tr '\n' ' ')" \
        test -z "$(ls "$T" | grep -e part- -e sketch)"
done

# --- one "dedup: " per message (issue 34.5): option errors of the main job -----------
if "$DEDUP" --help | grep -q -- '--pipeline'; then
    "$DEDUP" --redis redis://127.0.0.1:1 --pipeline 0 /dev/null 2> "$T/err"
    check "a bad --pipeline is exit 2" test $? -eq 2
    check "... said once as 'dedup: --pipeline ...': $(cat "$T/err")" grep -q '^dedup: --pipeline must' "$T/err"
fi
"$DEDUP" count -P 99 /dev/null 2> "$T/err"
check "a subcommand's option error keeps its name: $(cat "$T/err")" grep -q '^dedup: count: -P/--precision must' "$T/err"
# ---- -o that is the --state or --uncertain file; -o on a 255-byte name ------------------
# (review of issue 33 item 9) refused before anything is touched, as -o F F is.
"$DEDUP" -o "$T/sf" --state "$T/sf" "$T/in" > /dev/null 2> "$T/err"
rc=$?
check "-o F --state F: exit 2 (got $rc)" test $rc -eq 2
check "-o F --state F: nothing made" test ! -e "$T/sf"
check "-o F --state F: named: $(head -c 200 "$T/err")" grep -q "$T/sf.*--state" "$T/err"
"$DEDUP" --state "$T/st1" "$T/in" > /dev/null && cp "$T/st1" "$T/st1.before"
ln "$T/st1" "$T/st1.link"
"$DEDUP" -o "$T/st1.link" --state "$T/st1" "$T/in" > /dev/null 2> "$T/err"
rc=$?
check "-o (a hard link of the state) --state: exit 2 (got $rc)" test $rc -eq 2
check "... the state unchanged" cmp -s "$T/st1" "$T/st1.before"
echo old > "$T/uo"
# no Redis answers on port 1: the refusal comes first, before --uncertain is opened
"$DEDUP" --redis redis://127.0.0.1:1 --uncertain "$T/uo" -o "$T/uo" "$T/in" > /dev/null 2> "$T/err"
rc=$?
check "-o F --uncertain F: exit 2 (got $rc)" test $rc -eq 2
check "-o F --uncertain F: F unchanged" test "$(cat "$T/uo")" = old
check "-o F --uncertain F: named: $(head -c 200 "$T/err")" grep -q "$T/uo.*--uncertain" "$T/err"
# --late FILE is written too: the same as -o, --state or --uncertain is refused
printf '1\ta\n2\tb\n' > "$T/tin"
for other in "-o" "--state" "--uncertain"; do
    echo old > "$T/lf"
    extra=""; [ "$other" = --uncertain ] && extra="--redis redis://127.0.0.1:1"
    # shellcheck disable=SC2086
    "$DEDUP" $extra --window 1m --time-field 1 -f 2 --late "$T/lf" "$other" "$T/lf" "$T/tin" > /dev/null 2> "$T/err"
    rc=$?
    check "--late F $other F: exit 2 (got $rc)" test $rc -eq 2
    check "--late F $other F: F unchanged" test "$(cat "$T/lf")" = old
    check "--late F $other F: named: $(head -c 200 "$T/err")" grep -q -- "--late.*$T/lf\|$T/lf.*--late" "$T/err"
done
"$DEDUP" --window 1m --time-field 1 -f 2 --late /dev/null -o /dev/null "$T/tin" 2> "$T/err"
check "--late /dev/null -o /dev/null: a character device is never refused ($(head -c 200 "$T/err"))" test $? -eq 0
rm -f "$T/sf" "$T/st1" "$T/st1.before" "$T/st1.link" "$T/st1.lock" "$T/uo" "$T/lf" "$T/tin"
# a name of NAME_MAX bytes: its temporary and kept names are shortened, not refused
long=$(printf 'n%.0s' $(seq 255))
"$DEDUP" -o "$T/$long" "$T/in" 2> "$T/err"
check "-o on a 255-byte name: exit 0 ($(head -c 200 "$T/err"))" test $? -eq 0
check "... the output written" test "$(tr '\n' , < "$T/$long")" = "b,a,c,"
rm -f "$T/fifo" && mkfifo "$T/fifo"
exec 3<> "$T/fifo"
seq -f 'k%g' 1 1000 >&3
"$DEDUP" --line-buffered -o "$T/$long" "$T/fifo" 2> /dev/null &
pid=$!
long_tmp_has_1000() { local f; for f in "$T/${long:0:229}"~*.dedup-tmp-*; do [ -e "$f" ] && has_lines "$f" 1000 && return 0; done; return 1; }
check "-o on a 255-byte name, KILL: the run wrote 1000 records" wait_until 30 long_tmp_has_1000
kill -KILL $pid; wait $pid 2> /dev/null
exec 3>&-
"$DEDUP" -o "$T/$long" "$T/in" 2> "$T/err"
check "... the next run keeps the killed run's records: $(head -c 300 "$T/err")" \
    grep -q "partial-.*killed" "$T/err"
part=$(ls "$T" | grep "^${long:0:229}~.*\.partial-" | head -1)
check "... in a kept file named after it" test -n "$part" -a "$(wc -l < "$T/$part" 2> /dev/null)" = 1000
check "... no temporary left" test -z "$(ls "$T" | grep dedup-tmp)"
rm -f "$T/$long" "$T"/n*partial-*

finish
