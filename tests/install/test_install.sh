#!/usr/bin/env bash
# Installs the built tree into a temporary prefix and builds a consumer
# against it both ways: pkg-config (static and shared) and find_package.
# Then each component the build made (DEDUP_COMPONENTS, comma-separated:
# store, redis, roaring) must be installed with its library, header and
# dedup-NAME.pc, and a consumer of it builds with nothing but
# `pkg-config --cflags --libs dedup-NAME` and runs (redis: against a
# redis-server of its own on a free 127.0.0.1 port).
set -eu
: "${DEDUP_BUILD:?}" "${DEDUP_SRC:?}"
COMPONENTS=",${DEDUP_COMPONENTS:-},"
if [ "${COMPONENTS#*,redis,}" != "$COMPONENTS" ]; then
    # the Redis tests' helpers: free ports, servers stopped and RT_DIR
    # removed by their EXIT trap
    . "$DEDUP_SRC/backends/redis/tests/lib.sh"
    T="$RT_DIR/install"
    mkdir "$T"
else
    T=$(mktemp -d "${TMPDIR:-/tmp}/dedup-install.XXXXXX")
    trap 'rm -rf "$T"' EXIT
fi
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
# The Python package, when the build made it: imported from the prefix
# (its extension carries the library linked in), a filter saved there
# read back by the installed CLI.
pyinit=$(find "$T/prefix" -path '*/dedup/__init__.py' | head -1)
if [ -n "$pyinit" ]; then
    py=/usr/bin/python3 # the interpreter CMake builds the package for when it exists
    [ -x "$py" ] || py=python3
    PYTHONPATH=$(dirname "$(dirname "$pyinit")") "$py" -c "
import dedup, sys
assert dedup.__file__.startswith(sys.argv[1]), dedup.__file__
f = dedup.Bloom(1000, 0.01); f.add('installed'); f.save(sys.argv[1] + '/py.bloom')
d = dedup.DigestSet(); d.update(['a', 'b', 'a']); assert len(d) == 2
" "$T"
    "$T/prefix/bin/dedup" filter query "$T/py.bloom" installed > /dev/null
fi

# A component's header is installed with its library, never without it.
for h in store redis roaring; do
    if [ "${COMPONENTS#*,$h,}" = "$COMPONENTS" ] && [ -e "$T/prefix/include/dedup/$h.h" ]; then
        echo "FAIL: dedup/$h.h installed without its component" >&2
        exit 1
    fi
done
# component NAME SOURCE ARGS...: builds SOURCE with dedup-NAME.pc alone and
# runs it with ARGS; then statically, with the archives and the libraries
# `pkg-config --static` names.  "@" in an argument is "shared" or "static"
# (a store directory or Redis name of each build's own).
component() {
    local name=$1 src=$2
    shift 2
    test -f "$libdir/pkgconfig/dedup-$name.pc" || { echo "FAIL: dedup-$name.pc not installed" >&2; exit 1; }
    test -f "$T/prefix/include/dedup/$name.h" || { echo "FAIL: dedup/$name.h not installed" >&2; exit 1; }
    test -f "$libdir/libdedup_$name.a" || { echo "FAIL: libdedup_$name.a not installed" >&2; exit 1; }
    cc -std=c11 -Wall -Werror "$src" -o "$T/$name-consumer" \
        $(pkg-config --cflags --libs "dedup-$name") -Wl,-rpath,"$libdir"
    # the program needs this component's library, not a copy of it
    readelf -d "$T/$name-consumer" | grep -q "NEEDED.*libdedup_$name\.so" ||
        { echo "FAIL: $name consumer does not use libdedup_$name.so" >&2; exit 1; }
    "$T/$name-consumer" "${@//@/shared}"
    # static: the archives, and the rest of what `pkg-config --static` names
    # (the component's private dependencies, then libdedup's)
    local libs="" l
    for l in $(pkg-config --static --libs-only-l "dedup-$name"); do
        case $l in -ldedup|-ldedup_*) ;; *) libs="$libs $l" ;; esac
    done
    cc -std=c11 -Wall -Werror "$src" -o "$T/$name-static" $(pkg-config --cflags "dedup-$name") \
        "$libdir/libdedup_$name.a" "$libdir/libdedup.a" $libs
    if readelf -d "$T/$name-static" | grep -q "NEEDED.*libdedup"; then
        echo "FAIL: $name static consumer needs a shared libdedup" >&2
        exit 1
    fi
    "$T/$name-static" "${@//@/static}"
}
case $COMPONENTS in *,store,*)
    component store "$DEDUP_SRC/examples/blacklist/blacklist.c" "$T/blacklist-@.db" 2000 10000 ;;
esac
case $COMPONENTS in *,roaring,*)
    component roaring "$DEDUP_SRC/examples/consumer/roaring_consumer.c" ;;
esac
case $COMPONENTS in *,redis,*)
    P=$(free_port)
    start_server "$P"
    component redis "$DEDUP_SRC/examples/consumer/redis_consumer.c" "redis://127.0.0.1:$P/0" install-@ ;;
esac
echo "1 passed, 0 failed"
