#!/usr/bin/python3
"""Writes redis/tests/data/dedup_v2_values.json: DEDUP values as the module
stored them before the port to the library's window engine (envelope
version 2, encver 1): for each key its DUMP payload (what RDB and RESTORE
read), its SCANDUMP chunks (what LOADCHUNK and an AOF rewrite carry), its
DEDUP.INFO and the answers DEDUP.EXISTS gave, on the items added and on
fresh probes.  test_dedup_legacy.py loads them into the current module and
expects the same answers.  Run once, with the module of that time:

    DEDUP_REDIS_MODULE=build/redis/dedup.so python3 redis/tests/gen_dedup_fixture.py \
        redis/tests/data/dedup_v2_values.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Server  # noqa: E402

LONG = 1 << 50  # the longest window: these items stay seen for 35,000 years

# key: (window ms, error rate, capacity, extra args, items)
VALUES = {
    "dd": (LONG, 0.01, 1000, [], ["f%d" % i for i in range(300)]),
    "dg3": (LONG, 0.05, 100, ["GENERATIONS", 3], ["g%d" % i for i in range(250)]),
    "dx": (LONG, 0.01, 100, ["EXACT"], ["x%d" % i for i in range(200)]),
    "short": (1000, 0.01, 1000, [], ["s%d" % i for i in range(50)]),
    "shortx": (1000, 0.01, 100, ["EXACT"], ["s%d" % i for i in range(50)]),
}
PROBES = ["p%d" % i for i in range(3000)]


def main(path):
    s = Server()
    try:
        r = s.start().client()
        out = {}
        for key, (w, p, n, extra, items) in VALUES.items():
            r.execute_command("DEDUP.RESERVE", key, w, p, n, *extra)
            r.execute_command("DEDUP.MADD", key, *items)
            r.execute_command("DEDUP.ADD", key, items[0])  # a repeat
            info = r.execute_command("DEDUP.INFO", key)
            chunks, it = [], 0
            while True:
                it, data = r.execute_command("DEDUP.SCANDUMP", key, it)
                if it == 0:
                    break
                chunks.append([it, data.hex()])
            out[key] = {
                "reserve": [w, p, n] + extra,
                "items": items,
                "dump": r.dump(key).hex(),
                "chunks": chunks,
                "info": {k.decode(): (v.decode() if isinstance(v, bytes) else v)
                         for k, v in zip(info[::2], info[1::2])},
                "exists_items": [r.execute_command("DEDUP.EXISTS", key, x) for x in items],
                "exists_probes": [r.execute_command("DEDUP.EXISTS", key, x) for x in PROBES],
            }
        with open(path, "w") as f:
            json.dump({"probes": "p0 .. p2999", "values": out}, f, indent=0)
            f.write("\n")
    finally:
        s.stop()
        s.cleanup()


if __name__ == "__main__":
    main(sys.argv[1])
