# Shared by the CLI tests: a temp dir, failure reporting, a seed.
set -u
: "${DEDUP:?DEDUP must point at the built dedup binary}"
SRC=${DEDUP_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/dedup-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0
PASSES=0
SEED=${DEDUP_TEST_SEED:-$(( $(date +%s) % 1000000 ))}
echo "test seed: $SEED (set DEDUP_TEST_SEED to replay)"
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
