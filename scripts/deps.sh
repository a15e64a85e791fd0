#!/bin/sh
# Installs the Debian packages dedup needs, if any is missing.  Run as root on
# Debian 12 (as `make` does); as another user it only says what is missing.
set -eu
# build + library
PKGS="build-essential cmake pkg-config libxxhash-dev liblz4-dev"
# tests: unit tests, the sanitizer and fuzz builds, CLI reference tools
PKGS="$PKGS libcmocka-dev clang mawk perl python3 groff-base"
# benchmarks compare against Debian's libbloom; Redis module tests
PKGS="$PKGS libbloom-dev time redis-server redis-tools python3-redis"
# the roaring component (backends/roaring: sparse integer keys)
PKGS="$PKGS libroaring-dev"
[ -n "${DEDUP_EXTRA_PKGS:-}" ] && PKGS="$PKGS $DEDUP_EXTRA_PKGS"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "dedup: missing Debian packages:$missing" >&2
    echo "dedup: run 'sudo apt-get install$missing' (or run make as root)" >&2
    exit 1
fi
echo "dedup: installing Debian packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
