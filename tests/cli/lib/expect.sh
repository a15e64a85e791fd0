# Shared by the `dedup filter` tests: run a command in the current directory
# and check its exit status (and, for errors, its message).  The caller sets
# fails=0 first and reports it at the end.
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect RC CMD... : runs CMD (stdout -> out, stderr -> err), checks its status.
expect() {
    local want=$1
    shift
    "$@" >out 2>err
    local rc=$?
    [ $rc -eq "$want" ] || fail "'$*' exited $rc, expected $want; stderr: $(head -c 500 err)"
}
# expect_err PATTERN CMD... : exit 2, stderr matches, stdout empty.
expect_err() {
    local pat=$1
    shift
    expect 2 "$@"
    grep -q -- "$pat" err || fail "'$*': stderr lacks '$pat': $(head -c 500 err)"
    [ ! -s out ] || fail "'$*' wrote to stdout on error"
}
