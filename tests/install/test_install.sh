#!/usr/bin/env bash
# Installs the built tree into a temporary prefix and builds a consumer
# against it both ways: pkg-config (static and shared) and find_package.
set -eu
: "${DEDUP_BUILD:?}" "${DEDUP_SRC:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/dedup-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
cmake --install "$DEDUP_BUILD" --prefix "$T/prefix" > /dev/null
test -x "$T/prefix/bin/dedup"
test -f "$T/prefix/share/man/man1/dedup.1"
test -f "$T/prefix/include/dedup/bloom.h"
libdir=$(dirname "$(find "$T/prefix" -name dedup.pc | head -1)")/..
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# pkg-config, shared library
cc -std=c11 -Wall -Werror "$DEDUP_SRC/examples/consumer/consumer.c" -o "$T/c-shared" \
    $(pkg-config --cflags --libs dedup) -Wl,-rpath,"$libdir"
"$T/c-shared"
# pkg-config, static library
cc -std=c11 -Wall -Werror "$DEDUP_SRC/examples/consumer/consumer.c" -o "$T/c-static" \
    $(pkg-config --cflags dedup) "$libdir/libdedup.a" $(pkg-config --libs-only-l --static libxxhash liblz4) -lpthread -lm
"$T/c-static"
# CMake find_package
cmake -S "$DEDUP_SRC/examples/consumer" -B "$T/cm" -DCMAKE_PREFIX_PATH="$T/prefix" > /dev/null
cmake --build "$T/cm" > /dev/null
LD_LIBRARY_PATH="$libdir" "$T/cm/consumer"
"$T/prefix/bin/dedup" --version
echo "1 passed, 0 failed"
