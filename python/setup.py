"""Builds the dedup package with pip, offline:

    pip install --no-build-isolation ./python

The extension is compiled together with libdedup's own sources (../src), so
the package needs no installed libdedup and no CMake build first: only a C
compiler, Python's headers (python3-dev) and the library's two Debian
dependencies (libxxhash-dev, liblz4-dev).  The library is linked in
statically and only PyInit__dedup is exported, so the module never clashes
with another libdedup in the same process.  (CMake builds the same module
against its libdedup_static for the build tree and `make install`.)
"""
import glob
import os
import re

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def version():
    with open(os.path.join(ROOT, "include", "dedup", "common.h")) as f:
        text = f.read()
    parts = [re.search(r"#define DEDUP_VERSION_%s (\d+)" % p, text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


# Absolute paths: setuptools places each object under build/ by its
# source path, and a relative '../src' would put them outside it.
lib_sources = sorted(glob.glob(os.path.join(ROOT, "src", "*", "*.c")))
ext_sources = sorted(glob.glob(os.path.join(HERE, "src", "*.c")))

setup(
    name="dedup",
    version=version(),
    description="libdedup's deduplication structures (Bloom, cuckoo, exact sets, HLL) from Python",
    packages=["dedup"],
    package_dir={"dedup": os.path.relpath(os.path.join(HERE, "dedup"))},
    ext_modules=[
        Extension(
            "dedup._dedup",
            sources=[os.path.relpath(p) for p in ext_sources] + lib_sources,
            include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "src", "core")],
            libraries=["xxhash", "lz4", "pthread", "m"],
            extra_compile_args=["-std=c11", "-fvisibility=hidden"],
        )
    ],
    zip_safe=False,
)
