#!/bin/sh
# Installs the Debian packages dedup needs, if any is missing.  Run as root on
# Debian 12 (as `make` does); as another user it only says what is missing.
#
#   sh scripts/deps.sh [build|test|bench]     (default: build)
#
# build: what `make` and `make run` need to compile the library and the
#        command, plus the client libraries of the optional components
#        (hiredis, RocksDB, CRoaring: they are built when present, and CI
#        must test them; a user building by hand may leave them out).
# test:  build + what `make test` runs: cmocka, clang (fuzz and sanitizer
#        builds), the CLI tests' reference tools, Redis for the module tests.
# bench: build + what `make bench` compares against (libbloom, GNU time).
set -eu
MODE=${1:-build}
BUILD_PKGS="build-essential cmake pkg-config libxxhash-dev liblz4-dev"
BUILD_PKGS="$BUILD_PKGS libhiredis-dev librocksdb-dev libroaring-dev"
# the Redis backend's rediss:// (TLS under hiredis 0.14, which has none)
BUILD_PKGS="$BUILD_PKGS libssl-dev"
# the Python package (python/): its headers and setuptools for pip
BUILD_PKGS="$BUILD_PKGS python3-dev python3-setuptools"
TEST_PKGS="libcmocka-dev clang mawk perl python3 groff-base time redis-server redis-tools python3-redis"
# the cache-penetration example (examples/cache_guard) runs a real SQLite
TEST_PKGS="$TEST_PKGS libsqlite3-dev"
# the Redis TLS tests make their CA and certificates with openssl(1)
TEST_PKGS="$TEST_PKGS openssl"
# the Python package's tests and its Scrapy duplicate filter (python/)
TEST_PKGS="$TEST_PKGS python3-pytest python3-scrapy"
BENCH_PKGS="libbloom-dev time mawk perl"
# bench/bench_keys.sh compares CSV and JSON Lines keys against Miller
BENCH_PKGS="$BENCH_PKGS miller bc"
case $MODE in
build) PKGS="$BUILD_PKGS" ;;
test) PKGS="$BUILD_PKGS $TEST_PKGS" ;;
bench) PKGS="$BUILD_PKGS $BENCH_PKGS" ;;
*) echo "usage: sh scripts/deps.sh [build|test|bench]" >&2; exit 2 ;;
esac
[ -n "${DEDUP_EXTRA_PKGS:-}" ] && PKGS="$PKGS $DEDUP_EXTRA_PKGS"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "dedup: missing Debian packages ($MODE):$missing" >&2
    echo "dedup: run 'sudo apt-get install$missing' (or run make as root)" >&2
    exit 1
fi
echo "dedup: installing Debian packages ($MODE):$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
