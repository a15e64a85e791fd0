"""dedup: libdedup's deduplication structures from Python.

The classes wrap the C library through its public API (the _dedup extension
module); nothing is implemented twice.  Files written by ``save()`` and
``to_bytes()`` are exactly the CLI's files (``dedup filter create`` ...),
and ``dedup.load(path)`` reads any of them.

Filters answer "might contain": ``key in f`` is True for every key added
(never a false negative) and for a few keys never added (false positives,
at about the rate asked for).  Exact sets (StrSet, IntSet) answer with
certainty; DigestSet keeps a 128-bit digest per key under a secret seed
(equal keys always match; different keys only on a digest collision, about
n^2 / 2^129).  Keys are str (encoded as UTF-8) or bytes; IntSet takes ints.
Every object may be shared by threads: calls on one object are serialised
by a lock, and batch calls (update, add_many, contains_many) release the
GIL while the library works.  See docs/python.md.
"""
from ._dedup import (  # noqa: F401
    Bloom, CountingBloom, Cuckoo, ScalableBloom, StrSet, DigestSet, IntSet, HyperLogLog,
    SeenSet, Ring, Key, Error, load, from_bytes, strerror, library_version,
    NEW, DUPLICATE, MAYBE_DUPLICATE, LATE, DEFERRED, UNCERTAIN,
)

__version__ = library_version


def BlockedBloom(capacity=0, error_rate=0.01, **kw):
    """A blocked Bloom filter: ``Bloom(..., blocked=True)`` (one 64-byte
    block per key: one cache miss per add or query)."""
    return Bloom(capacity, error_rate, blocked=True, **kw)


__all__ = [
    "Bloom", "BlockedBloom", "CountingBloom", "Cuckoo", "ScalableBloom",
    "StrSet", "DigestSet", "IntSet", "HyperLogLog", "SeenSet", "Ring", "Key", "Error", "load", "from_bytes",
    "strerror", "NEW", "DUPLICATE", "MAYBE_DUPLICATE", "LATE", "DEFERRED", "UNCERTAIN",
]
