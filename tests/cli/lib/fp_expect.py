#!/usr/bin/env python3
"""fp_expect.py: the false positives a filter that fills during a run is
expected to give, from the structure's own formula, with a two-sided
interval that a correct filter leaves with probability at most 1e-6 a side.

A fresh key meets the filter holding the keys before it, so over a run that
adds keys from0 .. from0+n-1 the expected count is the sum of the rate at
each fill (not n times the rate at capacity, about 6 times too much for a
Bloom filter filled from empty to capacity).

  fp_expect.py bloom BITS K N [SHARDS]      classic Bloom (m bits, k probes):
                                             rate (1 - (1 - 1/m)^(k i))^k
  fp_expect.py blocked BITS K N [SHARDS]    blocked Bloom, 512-bit blocks: the
                                             library's model (src/filters/bloom.c,
                                             a Poisson mixture of block loads)
  fp_expect.py cuckoo SLOTS BUCKETS F N [SHARDS]
                                             cuckoo, SLOTS a bucket, F-bit
                                             fingerprints: 2 SLOTS load / (2^F - 1);
                                             F may be p=RATE: the library's width for it
  fp_expect.py at ITEMS KIND ...           the rate of one filter of that
                                             shape holding ITEMS keys
  fp_expect.py check WHAT OBSERVED MEAN     exit 0 when OBSERVED lies in the
                                             interval of MEAN, else 1; says so

With SHARDS, N keys spread over SHARDS equal filters of that shape.  The
first forms print "MEAN LO HI".  The interval is Poisson's (a sum of
independent rare events has at most its variance).
"""
import math
import sys

TAIL = 1e-6
BLOCK = 512


def bloom_rate(i, bits, k):
    if i <= 0:
        return 0.0
    return (1.0 - math.exp(k * i * math.log1p(-1.0 / bits))) ** k


# k -> [means, dist]: means[j] is the mean of (set bits / 512)^k over the
# occupancy of a block after j keys' k*j probes, dist that occupancy for the
# next j.  They do not depend on the fill, so the rates of one run (33 fills
# in over_run) share them.
_OCCUPANCY = {}


def occupancy_means(k, jmax):
    means, dist = _OCCUPANCY.setdefault(k, [[], {0: 1.0}])
    powk = [(s / BLOCK) ** k for s in range(BLOCK + 1)]
    while len(means) <= jmax:
        means.append(sum(p * powk[s] for s, p in dist.items()))
        for _ in range(k):
            nd = {}
            for s, p in dist.items():
                if p < 1e-40:
                    continue
                if s:
                    nd[s] = nd.get(s, 0.0) + p * s / BLOCK
                if s < BLOCK:
                    nd[s + 1] = nd.get(s + 1, 0.0) + p * (BLOCK - s) / BLOCK
            dist = nd
    _OCCUPANCY[k][1] = dist
    return means


def blocked_rate(i, bits, k):
    """The library's model: keys per block ~ Poisson(i / blocks); a block
    holding j keys has its k*j probes spread over 512 bits (occupancy by
    dynamic programming); the rate is the mean of (set bits / 512)^k."""
    blocks = bits // BLOCK
    if i <= 0 or blocks == 0:
        return 0.0
    lam = i / blocks
    sd = math.sqrt(lam)
    jlo, jhi = max(0, int(math.floor(lam - 12 * sd - 30))), int(math.ceil(lam + 12 * sd + 30))
    means = occupancy_means(k, jhi)
    total = 0.0
    for j in range(jlo, jhi + 1):
        total += math.exp(-lam + j * math.log(lam) - math.lgamma(j + 1)) * means[j]
    return min(total, 1.0)


def cuckoo_fingerprint_bits(p, slots):
    """The library's choice (dedup_cuckoo_fingerprint_bits_for): the first
    of 8, 12, .. 32 bits with 2 slots / 2^f <= p."""
    for f in range(8, 33, 4):
        if 2.0 * slots / 2 ** f <= p:
            return f
    raise ValueError("no fingerprint width reaches %g" % p)


def over_run(rate, n):
    """Sum of rate(i) for i in 0 .. n-1: exact up to 64 terms, else
    Simpson's rule on the midpoint integral over 32 intervals."""
    if n <= 64:
        return sum(rate(i) for i in range(n))
    steps, a = 32, -0.5
    h = n / steps
    s = 0.0
    for j in range(steps + 1):
        w = 1 if j in (0, steps) else (4 if j % 2 else 2)
        s += w * rate(max(0.0, a + h * j))
    return s * h / 3


def interval(mean):
    """[lo, hi] with P(X < lo) <= TAIL and P(X > hi) <= TAIL, X ~ Poisson(mean)."""
    if mean <= 0:
        return 0, 0
    def pmf(j):
        return math.exp(-mean + j * math.log(mean) - math.lgamma(j + 1))
    span = int(12 * math.sqrt(mean) + 40)
    mode = int(mean)
    lo, acc = 0, 0.0
    for j in range(max(0, mode - span), mode + 1):
        if acc + pmf(j) > TAIL:
            lo = j
            break
        acc += pmf(j)
    hi, acc = mode, 0.0
    for j in range(mode + span, mode - 1, -1):
        if acc + pmf(j) > TAIL:
            hi = j
            break
        acc += pmf(j)
    return lo, hi


def main(a):
    if a and a[0] == "check":
        what, obs, mean = a[1], int(a[2]), float(a[3])
        lo, hi = interval(mean)
        ok = lo <= obs <= hi
        print("%s: %d observed, %.1f expected, allowed %d .. %d (1e-6 a side)%s"
              % (what, obs, mean, lo, hi, "" if ok else ": OUTSIDE"), file=sys.stderr)
        return 0 if ok else 1
    at = None
    if a and a[0] == "at":
        at, a = int(a[1]), a[2:]
    kind = a[0]
    if kind in ("bloom", "blocked"):
        bits, k, n = int(a[1]), int(a[2]), int(a[3])
        shards = int(a[4]) if len(a) > 4 else 1
        f = bloom_rate if kind == "bloom" else blocked_rate
        rate = lambda i: f(i, bits, k)  # noqa: E731
    elif kind == "cuckoo":
        slots, buckets, n = int(a[1]), int(a[2]), int(a[4])
        fbits = cuckoo_fingerprint_bits(float(a[3][2:]), slots) if a[3].startswith("p=") \
            else int(a[3])
        shards = int(a[5]) if len(a) > 5 else 1
        rate = lambda i: 2 * slots * (i / (buckets * slots)) / (2 ** fbits - 1)  # noqa: E731
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if at is not None:  # the rate of one such filter holding 'at' keys
        print("%.6g" % rate(at))
        return 0
    per = n / shards
    mean = shards * over_run(rate, int(round(per))) if shards > 1 else over_run(rate, n)
    lo, hi = interval(mean)
    print("%.3f %d %d" % (mean, lo, hi))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
