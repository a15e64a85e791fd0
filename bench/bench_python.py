#!/usr/bin/env python3
"""The Python package against what Python users have (issue 39), in one run.

    PYTHONPATH=build/python python3 bench/bench_python.py [N] [N_PURE]

1. dedup.StrSet (whole keys) and dedup.DigestSet (128-bit digests under a
   secret seed) against Python's set on N keys of 20-60 bytes: memory per
   key (set: its table plus the key objects it keeps alive; ours: what the
   library holds) and a batch add (set.update, on fresh key objects and
   again with their hashes cached, vs update).
2. dedup.Bloom against a pure-Python Bloom filter as the articles write it
   (a list of ints, MD5 double hashing) on N_PURE keys: add and query rates,
   and the memory of each against the bits the formula asks for.
3. dedup.BlockedBloom: batch add (update) of N 40-byte keys and single add()
   calls, keys a second.

Rates are per second of this process's CPU time (time.process_time): on a
shared machine wall time mostly measures the other jobs.  Ratios matter
more than seconds.
"""
import gc
import hashlib
import math
import os
import random
import sys
import time

import dedup


class ArticleBloom:
    """The pure-Python Bloom filter of the tutorials: m bits in a list of
    ints, k probes h1 + i*h2 from one MD5 digest."""

    def __init__(self, n, p):
        self.m = math.ceil(-n * math.log(p) / math.log(2) ** 2)
        self.k = max(1, round(self.m / n * math.log(2)))
        self.bits = [0] * self.m

    def _probes(self, key):
        d = hashlib.md5(key).digest()
        h1 = int.from_bytes(d[:8], "little")
        h2 = int.from_bytes(d[8:], "little")
        return [(h1 + i * h2) % self.m for i in range(self.k)]

    def add(self, key):
        for b in self._probes(key):
            self.bits[b] = 1

    def __contains__(self, key):
        return all(self.bits[b] for b in self._probes(key))


def keys_of(rnd, n, lo, hi):
    # distinct by construction: a counter in every key
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789/._-"
    pad = bytes(rnd.choice(alphabet) for _ in range(4096))
    out = []
    for i in range(n):
        head = b"https://h%d.example/%x/" % (i % 97, i)
        want = rnd.randint(lo, hi)
        start = rnd.randrange(0, 4000)
        out.append((head + pad[start:start + max(0, want - len(head))])[:want]
                   if len(head) < want else head)
    return out


def rate(n, seconds):
    return n / seconds if seconds > 0 else float("inf")


def timed(fn):
    # CPU time of this process: on a shared machine wall time mostly
    # measures the other jobs (everything here runs on one thread).
    gc.collect()
    t = time.process_time()
    r = fn()
    return time.process_time() - t, r


def exact_sets(keys):
    n = len(keys)
    # set.update twice: first on the fresh key objects (it computes each
    # bytes object's hash, as a program reading its keys must), then on a
    # new set with every hash cached in the objects (set's best case).
    s = set()
    t_fresh, _ = timed(lambda: s.update(keys))
    s2 = set()
    t_cached, _ = timed(lambda: s2.update(keys))
    del s2
    set_bytes = sys.getsizeof(s) + sum(sys.getsizeof(k) for k in keys)
    ours = dedup.StrSet()
    t_ours, _ = timed(lambda: ours.update(keys))
    assert len(ours) == len(s) == n
    ours_bytes = ours.info["memory"]
    ours.close()
    ds = dedup.DigestSet()
    t_ds, _ = timed(lambda: ds.update(keys))
    assert len(ds) == n
    ds_bytes = ds.info["memory"]
    ds.close()
    print("exact set, %d keys of 20-60 bytes (mean %.1f):" % (n, sum(map(len, keys)) / n))
    print("  Python set:      %6.1f bytes/key  update %6.2f M keys/s (fresh keys), %6.2f (hashes cached)"
          % (set_bytes / n, rate(n, t_fresh) / 1e6, rate(n, t_cached) / 1e6))
    print("  dedup.StrSet:    %6.1f bytes/key  update %6.2f M keys/s (whole keys)"
          % (ours_bytes / n, rate(n, t_ours) / 1e6))
    print("  dedup.DigestSet: %6.1f bytes/key  update %6.2f M keys/s (128-bit digests, secret seed)"
          % (ds_bytes / n, rate(n, t_ds) / 1e6))
    print("  memory / set: StrSet %.2f, DigestSet %.2f (target <= 0.33); update speed / set.update "
          "(fresh, cached): StrSet %.2f, %.2f; DigestSet %.2f, %.2f (target >= 1)"
          % (ours_bytes / set_bytes, ds_bytes / set_bytes, t_fresh / t_ours, t_cached / t_ours,
             t_fresh / t_ds, t_cached / t_ds))


def filters(keys, fresh, p=0.01):
    n = len(keys)
    pure = ArticleBloom(n, p)
    t_pa, _ = timed(lambda: [pure.add(k) for k in keys])
    t_pq, _ = timed(lambda: [k in pure for k in fresh])
    f = dedup.Bloom(n, p)
    t_oa, _ = timed(lambda: [f.add(k) for k in keys])
    t_oq, _ = timed(lambda: [k in f for k in fresh])
    g = dedup.Bloom(n, p)
    t_ba, _ = timed(lambda: g.update(keys))
    t_bq, _ = timed(lambda: g.contains_many(fresh))
    formula = math.ceil(-n * math.log(p) / math.log(2) ** 2) / 8
    pure_bytes = sys.getsizeof(pure.bits)
    print("Bloom filter, %d keys, p = %g (formula: %d bytes):" % (n, p, formula))
    print("  pure Python (list, MD5): add %8.3f M/s  query %8.3f M/s  memory %.2fx formula"
          % (rate(n, t_pa) / 1e6, rate(len(fresh), t_pq) / 1e6, pure_bytes / formula))
    print("  dedup.Bloom add()/in:    add %8.3f M/s  query %8.3f M/s  memory %.4fx formula"
          % (rate(n, t_oa) / 1e6, rate(len(fresh), t_oq) / 1e6, f.info["memory"] / formula))
    print("  dedup.Bloom batches:     add %8.3f M/s  query %8.3f M/s"
          % (rate(n, t_ba) / 1e6, rate(len(fresh), t_bq) / 1e6))
    print("  speed-up single calls: add %.0fx query %.0fx; batches: add %.0fx query %.0fx (target >= 50x)"
          % (t_pa / t_oa, t_pq / t_oq, t_pa / t_ba, t_pq / t_bq))


def blocked(keys):
    n = len(keys)
    f = dedup.BlockedBloom(n, 0.01)
    t_b, _ = timed(lambda: f.update(keys))
    g = dedup.BlockedBloom(n, 0.01)
    add = g.add
    t_s, _ = timed(lambda: [add(k) for k in keys])
    print("blocked Bloom, %d keys of 40 bytes:" % n)
    print("  update (batch): %6.2f M keys/s (target >= 10)" % (rate(n, t_b) / 1e6))
    print("  add() calls:    %6.2f M keys/s (target >= 3)" % (rate(n, t_s) / 1e6))


def main():
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 2_000_000
    n_pure = int(float(sys.argv[2])) if len(sys.argv) > 2 else 200_000
    seed = int(os.environ.get("DEDUP_TEST_SEED") or 1)
    rnd = random.Random(seed)
    print("bench_python: N=%d N_PURE=%d seed=%d, dedup %s, Python %s"
          % (n, n_pure, seed, dedup.__version__, sys.version.split()[0]))
    keys = keys_of(rnd, n, 20, 60)
    exact_sets(keys)
    del keys
    keys = keys_of(rnd, 2 * n_pure, 40, 40)
    filters(keys[:n_pure], keys[n_pure:])
    del keys
    blocked(keys_of(rnd, n, 40, 40))


if __name__ == "__main__":
    main()
