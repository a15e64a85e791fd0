#!/usr/bin/env python3
"""Checks the output of an approximate `dedup --window ... --mode bloom`
run record by record, and its false duplicates against the table's own model.

usage: check_approx_window.py INPUT OUTPUT STATE KEYFIELD TIMEFIELD UNIT_US

INPUT's records are TAB-separated and unique (a record number in a field),
OUTPUT what dedup wrote with --late drop, STATE the --state file it saved
(docs/FORMAT.md, time window: D, L, G, fingerprint bits and bucket count
are read from its params), UNIT_US the microseconds per time unit.
Checks, per record:
  - OUTPUT is a subsequence of INPUT (nothing invented, order kept);
  - never a false NEW: no kept record has a kept record of the same key
    within D (sliding) or in its window (tumbling);
  - a record dropped with no kept record of its key within D + s (the
    generation granularity) is a false duplicate; their count lies within
    99.9% binomial bounds of the model (20% above, 10% below for what it
    leaves out), with enough fresh keys that twice the rate fails.
The model: a fresh key's fingerprint meets about 2 N / NB of the N entries
the lookup's generations hold, each equal with probability 1 / (2^f - 1).
"""
import math
import struct
import sys

inp, outp, state, kf, tf, unit = sys.argv[1:7]
kf, tf, unit = int(kf), int(tf), int(unit)
raw = open(state, "rb").read()
if struct.unpack_from("<H", raw, 10)[0] == 16:
    # a --state container (docs/FORMAT.md): the window's file is its payload
    raw = raw[40 + struct.unpack_from("<I", raw, 20)[0]:-8]
P = 40
wtype, mode = struct.unpack_from("<II", raw, P)
D, L = struct.unpack_from("<QQ", raw, P + 8)
G = struct.unpack_from("<I", raw, P + 24)[0]
if mode != 1:
    sys.exit("the state is not an approximate window's")
fbits = struct.unpack_from("<I", raw, P + 136)[0]
NB = struct.unpack_from("<Q", raw, P + 144)[0]
fmask = (1 << fbits) - 1
tumbling = wtype == 1
s = D if tumbling else (D + G - 1) // G


def recs(path):
    data = open(path, "rb").read().split(b"\n")
    if data and data[-1] == b"":
        data.pop()
    return data


ins, outs = recs(inp), recs(outp)
if not outs:
    sys.exit("the output is empty")
j = 0
kept = {}     # key -> kept times
per_gen = {}  # generation id -> kept records
T = W = None
trials = fp = 0
model = 0.0
for rec in ins:
    f = rec.split(b"\t")
    key, u = f[kf - 1], int(f[tf - 1]) * unit
    is_kept = j < len(outs) and outs[j] == rec
    if is_kept:
        j += 1
    if W is not None and u < W:
        if is_kept:
            sys.exit("a late record was written with --late drop: %r" % rec)
        continue
    if T is None or u > T:
        T = u
        W = u - L
    within = near = False
    for t in kept.get(key, ()):
        if tumbling:
            if t // D == u // D:
                within = near = True
        else:
            within |= abs(u - t) < D
            near |= abs(u - t) < D + s
    if is_kept and within:
        sys.exit("a repeat within the window was kept: %r" % rec)
    if not near:
        trials += 1
        fp += not is_kept
        if tumbling:
            first = last = u // D
        else:
            first, last = (u - D + 1) // s, (u + D - 1) // s
        n = sum(per_gen.get(g, 0) for g in range(first, last + 1))
        model += 1.0 - (1.0 - 1.0 / fmask) ** (2.0 * n / NB)
    if is_kept:
        kept.setdefault(key, []).append(u)
        per_gen[u // s] = per_gen.get(u // s, 0) + 1
if j != len(outs):
    sys.exit("the output holds records not in the input, or out of order (at %r)" % outs[j])


def bounds(n, p):
    mu, sd = n * p, math.sqrt(n * p * (1 - p))
    return mu - 3.29 * sd - 0.5, mu + 3.29 * sd + 0.5


rate = model / trials
lo = bounds(trials, rate * 0.9)[0]
hi = bounds(trials, rate * 1.2)[1]
print("approximate window: %d false duplicates in %d fresh keys, model %.1f, bounds [%.1f, %.1f]"
      % (fp, trials, model, lo, hi))
if bounds(trials, 2 * rate * 0.9)[0] <= hi:
    sys.exit("too few fresh keys for twice the rate to fail (model %.1f)" % model)
if not lo <= fp <= hi:
    sys.exit("%d false duplicates outside [%.1f, %.1f]" % (fp, lo, hi))
