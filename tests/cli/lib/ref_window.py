#!/usr/bin/env python3
"""Naive reference for `dedup --window/--last`: remembers every kept record.

usage: ref_window.py MODE ARG LATENESS_US KEYFIELD TIMEFIELD FORMAT LATE OUT LATEFILE < input
  MODE sliding|tumbling|last, ARG window in us (or N), FORMAT epoch|epoch_ms|epoch_us,
  LATE keep|drop|file.  Writes kept (and late 'keep') records to OUT, late records to
  LATEFILE for 'file'.  Fields are TAB-separated; times are integers.
"""
import sys

mode, arg, lateness, kf, tf, fmt, late, out, latefile = sys.argv[1:10]
arg, lateness, kf, tf = int(arg), int(lateness), int(kf), int(tf)
unit = {"epoch": 1000000, "epoch_ms": 1000, "epoch_us": 1}[fmt]
kept = {}
T = None
W = None
o = open(out, "wb")
lf = open(latefile, "wb") if late == "file" else None
data = sys.stdin.buffer.read()
recs = data.split(b"\n")
if recs and recs[-1] == b"":
    recs.pop()
for i, rec in enumerate(recs):
    f = rec.split(b"\t")
    key = f[kf - 1] if kf else rec
    if mode == "last":
        u, D = i, arg + 1
    else:
        u, D = int(f[tf - 1]) * unit, arg
        if W is not None and u < W:
            if late == "keep":
                o.write(rec + b"\n")
            elif late == "file":
                lf.write(rec + b"\n")
            continue
    if T is None or u > T:
        T = u
        W = u - lateness if W is None else max(W, u - lateness)
    ts = kept.setdefault(key, [])
    if mode == "tumbling":
        dup = any(t // D == u // D for t in ts)
    else:
        dup = any(abs(u - t) < D for t in ts)
    if not dup:
        ts.append(u)
        o.write(rec + b"\n")
