# Shared by the `dedup filter` tests: run a command in the current directory
# and check its exit status (and, for errors, its message).  The caller sets
# fails=0 first and reports it at the end.
. "$(dirname "${BASH_SOURCE[0]}")/python.sh"
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
# rate_within LABEL FP TRIALS MODEL: FP false positives among TRIALS fresh
# items agree with the filter's own model rate MODEL from both sides (99.9%
# binomial bounds around MODEL * 0.85 and MODEL * 1.15, the slack for what a
# fill-based model leaves out); fails too when TRIALS are too few for twice
# (or half) the rate to fall outside, so a doubled rate cannot pass.
rate_within() {
    python3 - "$@" <<'PY' || fail "$1: $2 false positives in $3 fresh items against a model rate of $4"
import math, sys
label, fp, n, p = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def lo(p): return n * p - 3.29 * math.sqrt(n * p * (1 - p)) - 0.5
def hi(p): return n * p + 3.29 * math.sqrt(n * p * (1 - p)) + 0.5
if not (lo(2 * p * 0.85) > hi(p * 1.15) and hi(p / 2 * 1.15) < lo(p * 0.85)):
    sys.exit("%s: %d fresh items are too few to tell the rate %g from twice it" % (label, n, p))
if not lo(p * 0.85) <= fp <= hi(p * 1.15):
    sys.exit("%s: %d of %d outside [%.1f, %.1f] (model %g)" % (label, fp, n, lo(p * 0.85), hi(p * 1.15), p))
PY
}
