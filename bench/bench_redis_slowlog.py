#!/usr/bin/python3
"""The longest single execution of each module command, from the server's
own SLOWLOG (slowlog-log-slower-than 0: the command's execution on the
server, not the network), with the largest parameters each command accepts
under maxmemory 64mb (noeviction): the greatest capacity that fits, the
smallest error rate, the largest expansions, EXACT windows filled to the
limit, dumps read back in chunks, Bloom windows turned over.  Prints one
line per command, worst first.  A measurement, not a test: the bound on
EXACT growth is asserted by redis/tests/test_slowlog.py.

    DEDUP_REDIS_MODULE=build/dedup_redis.so python3 bench/bench_redis_slowlog.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "redis", "tests"))
from harness import Server, run, seed  # noqa: E402

RNG = seed()
MAXMEM = 64 << 20
SANITIZED = bool(os.environ.get("DEDUP_REDIS_PRELOAD"))
BATCH = 500  # items per M* command: the per-item work is not what is measured


def slowest(r):
    """The longest execution (us) of each command in the SLOWLOG, which is
    then reset."""
    worst = {}
    for e in r.execute_command("SLOWLOG", "GET", -1):
        name = e[3][0].decode().upper()
        args = b" ".join(e[3][1:5]).decode(errors="replace")
        if e[2] > worst.get(name, (0, ""))[0]:
            worst[name] = (e[2], args)
    r.execute_command("SLOWLOG", "RESET")
    return worst


def call(r, *cmd):
    """Runs cmd; an error reply (a refusal at the limit) is returned as text."""
    try:
        return r.execute_command(*cmd)
    except Exception as e:  # noqa: BLE001 - refusals are expected at the limit
        return str(e)


def fill(r, cmd, key, tag, limit_s, opts=()):
    """Adds batches of new items with cmd (BF.MADD, CF.INSERT ITEMS, ...)
    until an item is refused or limit_s passes; returns the items added."""
    n = 0
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        items = [b"%s%d:%d" % (tag, RNG.randrange(1 << 30), n + i) for i in range(BATCH)]
        out = call(r, cmd, key, *opts, *items)
        if isinstance(out, str):
            return n
        ok = [x for x in out if isinstance(x, int) and x >= 0]
        n += len(ok)
        if len(ok) < len(out):
            return n
    return n


def dump_and_load(r, kind, key, dst):
    it = 0
    chunks = []
    while True:
        out = call(r, "%s.SCANDUMP" % kind, key, it)
        if isinstance(out, str):  # e.g. no room for a chunk at the limit
            print("  %s.SCANDUMP %s at %d: %s" % (kind, key, it, out))
            break
        it, data = out
        if it == 0:
            break
        chunks.append((it, data))
    r.delete(key)
    for it, data in chunks:
        call(r, "%s.LOADCHUNK" % kind, dst, it, data)


def test_slowest_commands(srv):
    r = srv.client()
    r.execute_command("CONFIG", "SET", "slowlog-log-slower-than", 0)
    r.execute_command("CONFIG", "SET", "slowlog-max-len", 1 << 20)
    r.execute_command("SLOWLOG", "RESET")
    worst = {}
    t_fill = 20 if SANITIZED else 6

    def phase(what):
        for name, (us, args) in slowest(r).items():
            if us > worst.get(name, (0, "", ""))[0]:
                worst[name] = (us, args, what)

    # Bloom: the largest fixed filter that fits, filled; a scaling one with
    # the largest expansion that can still grow, grown to the limit
    for cap in (10 ** 8, 3 * 10 ** 7, 10 ** 7, 5 * 10 ** 6):
        if call(r, "BF.RESERVE", "bfix", 1e-4, cap, "NONSCALING") == b"OK":
            break
    fill(r, "BF.MADD", "bfix", b"a", 2)
    call(r, "BF.INFO", "bfix")
    call(r, "BF.DEBUG", "bfix")
    call(r, "BF.MEXISTS", "bfix", *[b"x%d" % i for i in range(BATCH)])
    phase("BF fixed")
    dump_and_load(r, "BF", "bfix", "bload")
    phase("BF dump/load")
    r.delete("bload")
    call(r, "BF.RESERVE", "bscale", 1e-9, 100000, "EXPANSION", 64)
    fill(r, "BF.MADD", "bscale", b"b", t_fill)
    call(r, "BF.INSERT", "bins", "CAPACITY", 1000, "ERROR", 1e-9, "EXPANSION", 1 << 20, "ITEMS", "x")
    fill(r, "BF.INSERT", "bins", b"c", t_fill / 2, opts=("ITEMS",))
    phase("BF scaling")
    r.delete("bscale", "bins")
    # Cuckoo: the largest fixed filter, filled; one growing by the largest
    # expansion; a compaction of a filter of many sub-filters
    for cap in (10 ** 8, 3 * 10 ** 7, 10 ** 7, 5 * 10 ** 6):
        if call(r, "CF.RESERVE", "cfix", cap, "EXPANSION", 0) == b"OK":
            break
    fill(r, "CF.INSERT", "cfix", b"d", 2, opts=("ITEMS",))
    call(r, "CF.INFO", "cfix")
    phase("CF fixed")
    dump_and_load(r, "CF", "cfix", "cload")
    phase("CF dump/load")
    r.delete("cload")
    call(r, "CF.RESERVE", "cgrow", 100000, "EXPANSION", 32768)
    fill(r, "CF.INSERT", "cgrow", b"e", t_fill / 2, opts=("ITEMS",))
    r.delete("cgrow")
    call(r, "CF.RESERVE", "cmany", 1000, "BUCKETSIZE", 1, "EXPANSION", 2)
    n = fill(r, "CF.INSERTNX", "cmany", b"f", t_fill / 2, opts=("ITEMS",))
    call(r, "CF.COMPACT", "cmany")
    phase("CF growth and compact (%d items)" % n)
    r.delete("cmany")
    # DEDUP: a Bloom window at the largest capacity that fits; an EXACT one
    # asked for 2^40 items is refused at RESERVE, one that fits is filled to
    # the limit
    for cap in (10 ** 8, 3 * 10 ** 7, 10 ** 7, 5 * 10 ** 6):
        if call(r, "DEDUP.RESERVE", "dbf", 1000, 1e-4, cap, "GENERATIONS", 16) == b"OK":
            break
    fill(r, "DEDUP.MADD", "dbf", b"g", 2)
    time.sleep(1.1)  # the window turns over: generations are cleared
    fill(r, "DEDUP.MADD", "dbf", b"h", 1)
    call(r, "DEDUP.INFO", "dbf")
    phase("DEDUP Bloom")
    dump_and_load(r, "DEDUP", "dbf", "dload")
    phase("DEDUP dump/load")
    r.delete("dload")
    r.flushall()
    call(r, "DEDUP.RESERVE", "dx", 1000, 0.01, 1 << 40, "EXACT")
    cap = (MAXMEM - r.info("memory")["used_memory"] - (4 << 20)) // 24
    call(r, "DEDUP.RESERVE", "dx", 3600000, 0.01, cap, "EXACT")
    n = fill(r, "DEDUP.MADD", "dx", b"i", t_fill * 2)
    call(r, "DEDUP.INFO", "dx")
    call(r, "DEDUP.EXISTS", "dx", "i")
    phase("DEDUP EXACT (%d items)" % n)
    dump_and_load(r, "DEDUP", "dx", "dxload")
    phase("DEDUP EXACT dump/load")
    r.delete("dxload")
    call(r, "DEDUP.RESERVE", "dxw", 300, 0.01, cap, "EXACT")
    fill(r, "DEDUP.MADD", "dxw", b"j", 1)
    time.sleep(0.4)  # the window passes: the next commands expire what it held
    fill(r, "DEDUP.MADD", "dxw", b"k", 1)
    phase("DEDUP EXACT expiry")

    top = sorted(worst.items(), key=lambda kv: -kv[1][0])
    for name, (us, args, what) in top:
        print("  %-16s %8.2f ms  (%s: %s)" % (name, us / 1000, what, args[:60]))


if __name__ == "__main__":
    run(globals(), make_server=lambda: Server(
        server_args=["--maxmemory", MAXMEM, "--maxmemory-policy", "noeviction"]))
