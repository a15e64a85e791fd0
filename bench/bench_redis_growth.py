#!/usr/bin/env python3
"""bench_redis_growth.py - the false-positive rate of the module's scaling
Bloom filter after growth, over many filters (not one): the spread of one
small filter around its expected rate is what decides whether a chain's
links may sum to the whole p.

  /usr/bin/python3 bench/bench_redis_growth.py [CAPACITY=100] [ITEMS=5000] [FILTERS=20]

Starts its own redis-server on a free loopback port with build/dedup_redis.so
(DEDUP_REDIS_MODULE overrides), reserves FILTERS filters at p = 1% with
EXPANSION 2, adds ITEMS random items to each, probes 40,000 fresh items, and
prints every filter's false positives and the mean rate.
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "redis", "tests"))
os.environ.setdefault("DEDUP_REDIS_MODULE", os.path.join(HERE, "..", "build", "dedup_redis.so"))
os.environ.setdefault("REDIS_SERVER", "/usr/bin/redis-server")
from harness import Server  # noqa: E402

cap = int(sys.argv[1]) if len(sys.argv) > 1 else 100
n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
filters = int(sys.argv[3]) if len(sys.argv) > 3 else 20
probes = 40000
s = Server()
s.start()
try:
    r = s.client()
    fps = []
    for trial in range(filters):
        rng = random.Random(trial)
        key = "bf%d" % trial
        r.execute_command("BF.RESERVE", key, 0.01, cap, "EXPANSION", 2)
        xs = ["grow:%d:%d" % (rng.randrange(1 << 30), i) for i in range(n)]
        for i in range(0, n, 2000):
            r.execute_command("BF.MADD", key, *xs[i:i + 2000])
        fresh = ["out:%d:%d" % (rng.randrange(1 << 30), i) for i in range(probes)]
        fp = 0
        for i in range(0, probes, 2000):
            fp += sum(r.execute_command("BF.MEXISTS", key, *fresh[i:i + 2000]))
        fps.append(fp)
    print("capacity %d, %d items, %d filters: false positives per %d fresh: %s" %
          (cap, n, filters, probes, sorted(fps)))
    print("mean rate %.4f%% (p = 1%%); links: %s" %
          (100.0 * sum(fps) / len(fps) / probes, r.execute_command("BF.DEBUG", "bf0")[1:]))
finally:
    s.stop()
    s.cleanup()
