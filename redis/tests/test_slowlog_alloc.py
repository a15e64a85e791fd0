#!/usr/bin/python3
"""A new filter is created without writing its memory: no single command
that makes one (a reserve, a scaling filter's next link) blocks the server
while the filter is zeroed (issue 34.3).

The module asks the server for zeroed memory (RedisModule_Calloc /
TryCalloc), which hands out fresh pages the kernel zeroes when first
touched; the pages are then paid for by the commands that use them.  The
server runs with maxmemory 1gb and logs every command in its SLOWLOG (the
command's own execution on the server).  Filters of a few hundred MB are
made: BF.RESERVE, BF.INSERT, CF.RESERVE, DEDUP.RESERVE (a Bloom window)
and a BF.ADD that adds a scaling filter's second link of about 200 MB.
Each of these, the least of three rounds, must stay under 25 ms, or twice
the longest BF.MEXISTS sent between them (what the machine's load alone
costs one command).  Zeroed with memset (the module's allocator without
its calloc) they took 200 to 530 ms each on a loaded machine; CF.RESERVE,
which built its filter apart and copied it in through its serialized
form, 540 ms.

SCANDUMP is bounded the same way (test_dump_chunks_block_no_command)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Server, run, seed  # noqa: E402

RNG = seed()
MAXMEM = 1 << 30
SANITIZED = bool(os.environ.get("DEDUP_REDIS_PRELOAD"))
BOUND_US = (250 if SANITIZED else 25) * 1000
BATCH = 500
ROUNDS = 3


MEASURED = ("BF.RESERVE", "BF.INSERT", "CF.RESERVE", "DEDUP.RESERVE", "BF.ADD")


def make_filters(r, tag, probe):
    """Makes each filter once (then deletes it); returns the longest
    execution (us) of each measured command and of BF.MEXISTS."""
    r.execute_command("SLOWLOG", "RESET")
    made = [("BF.RESERVE", "b1", 1e-4, 10 ** 8, "NONSCALING"),
            ("BF.INSERT", "b2", "CAPACITY", 10 ** 8, "ERROR", 1e-4, "ITEMS", "x"),
            ("CF.RESERVE", "c1", 10 ** 8),
            ("DEDUP.RESERVE", "d1", 1000, 1e-4, 10 ** 8)]
    for cmd in made:
        assert r.execute_command(*cmd) in (b"OK", [1]), cmd
        r.execute_command("BF.MEXISTS", "noise", *probe)
        r.delete(cmd[1])
    # a scaling filter of 100,000 items grows by 1024: its second link is
    # made by the add that finds the first one full (a single BF.ADD, so
    # that what is measured is the link, not the pages a batch first touches)
    r.execute_command("BF.RESERVE", "s", 0.01, 100000, "EXPANSION", 1024)
    n = 0
    while r.execute_command("BF.INFO", "s", "ITEMS")[0] < 100000 - BATCH:
        r.execute_command("BF.MADD", "s", *[b"%d:%d" % (tag, n + i) for i in range(BATCH)])
        r.execute_command("BF.MEXISTS", "noise", *probe)
        n += BATCH
    while r.execute_command("BF.INFO", "s", "FILTERS")[0] < 2 and n < 200000:
        r.execute_command("BF.ADD", "s", b"%d:%d" % (tag, n))
        n += 1
    assert r.execute_command("BF.INFO", "s", "FILTERS") == [2], "no second link after %d" % n
    assert r.execute_command("BF.EXISTS", "s", b"%d:%d" % (tag, 7)) == 1
    r.execute_command("BF.MEXISTS", "noise", *probe)
    r.delete("s")
    worst, noise = {}, 0
    for e in r.execute_command("SLOWLOG", "GET", -1):
        name = e[3][0].upper().decode()
        if name == "BF.MEXISTS":
            noise = max(noise, e[2])
        elif name in MEASURED:
            worst[name] = max(worst.get(name, 0), e[2])
    assert set(worst) == set(MEASURED), worst
    return worst, noise


def test_new_filters_block_no_command(srv):
    r = srv.client()
    r.execute_command("CONFIG", "SET", "slowlog-log-slower-than", 0)
    r.execute_command("CONFIG", "SET", "slowlog-max-len", 1 << 20)
    r.execute_command("BF.RESERVE", "noise", 0.01, 10000, "NONSCALING")
    tag = RNG.randrange(1 << 30)
    probe = [b"p%d:%d" % (tag, i) for i in range(BATCH)]
    # the least of ROUNDS rounds: what making the filter costs, not a round
    # in which the loaded machine happened to stop the server
    rounds = [make_filters(r, tag + k, probe) for k in range(ROUNDS)]
    best = {name: min(w[name] for w, _ in rounds) for name in MEASURED}
    noise = min(nz for _, nz in rounds)
    bound = max(BOUND_US, 2 * noise)
    print("least of %d rounds: %s; BF.MEXISTS %.1f ms; bound %.1f ms" % (
        ROUNDS, ", ".join("%s %.1f ms" % (k, v / 1000) for k, v in sorted(best.items())),
        noise / 1000, bound / 1000))
    for name, us in best.items():
        assert us < bound, "%s blocked the server %.1f ms (bound %.1f ms)" % (
            name, us / 1000, bound / 1000)


def dump_times(r, kind, key, dst, probe):
    """SCANDUMPs key chunk by chunk into LOADCHUNKs of dst, with a
    BF.MEXISTS of 'probe' after each; returns the SLOWLOG times (us) of the
    data chunks in order, and the longest BF.MEXISTS."""
    r.execute_command("SLOWLOG", "RESET")
    it, chunks = 0, 0
    while True:
        it, data = r.execute_command("%s.SCANDUMP" % kind, key, it)
        if it == 0:
            break
        assert r.execute_command("%s.LOADCHUNK" % kind, dst, it, data) == b"OK"
        r.execute_command("BF.MEXISTS", "noise", *probe)
        chunks += 1
    log = list(reversed(r.execute_command("SLOWLOG", "GET", -1)))
    times = [e[2] for e in log if e[3][0].upper() == b"%s.SCANDUMP" % kind.encode()
             and e[3][2] != b"0"]
    noise = max(e[2] for e in log if e[3][0].upper() == b"BF.MEXISTS")
    assert len(times) >= chunks - 1, (len(times), chunks)
    return times[:chunks - 1], noise


def test_dump_chunks_block_no_command(srv):
    """A filter of 120 MB dumped with SCANDUMP and loaded into another key
    with LOADCHUNK: every chunk is serialised from its own offset (its
    checksums taken up from the chunk before) and is at most 1 MiB, so no
    SCANDUMP takes longer than 25 ms or twice the longest BF.MEXISTS; the
    load verifies every checksum and the items are there.  Chunks of 16 MiB
    serialised from the value's start took 40 to 400 ms each on a loaded
    machine (tests/unit/test_range_sink.c shows that a chunk does not hash
    the bytes before it)."""
    r = srv.client()
    r.execute_command("CONFIG", "SET", "slowlog-log-slower-than", 0)
    r.execute_command("CONFIG", "SET", "slowlog-max-len", 1 << 20)
    r.execute_command("BF.RESERVE", "noise", 0.01, 10000, "NONSCALING")
    tag = RNG.randrange(1 << 30)
    items = [b"%d:%d" % (tag, i) for i in range(BATCH)]
    probe = [b"p%d:%d" % (tag, i) for i in range(BATCH)]
    for kind, make in (("DEDUP", ("DEDUP.RESERVE", "k", 3600000, 1e-4, 4 * 10 ** 7)),
                       ("BF", ("BF.RESERVE", "k", 1e-4, 5 * 10 ** 7, "NONSCALING"))):
        assert r.execute_command(*make) == b"OK"
        r.execute_command("%s.MADD" % kind, "k", *items)
        times, noise = dump_times(r, kind, "k", "copy", probe)
        assert len(times) >= 100, len(times)
        bound = max(BOUND_US, 2 * noise)
        if max(times) >= bound:
            # a chunk slow by design is slow in every dump; one the loaded
            # machine stopped seldom is twice: each chunk's faster of two
            again, noise2 = dump_times(r, kind, "k", "copy2", probe)
            r.delete("copy2")
            times = [min(a, b) for a, b in zip(times, again)]
            bound = max(BOUND_US, 2 * min(noise, noise2))
        print("%s: %d chunks of SCANDUMP: median %.1f ms, longest %.1f ms (chunk %d); "
              "BF.MEXISTS %.1f ms; bound %.1f ms" % (
                  kind, len(times), sorted(times)[len(times) // 2] / 1000, max(times) / 1000,
                  times.index(max(times)) + 1, noise / 1000, bound / 1000))
        assert all(r.execute_command("%s.EXISTS" % kind, "copy", x) == 1 for x in items[:50])
        assert r.execute_command("%s.EXISTS" % kind, "copy", "never added") == 0
        r.delete("k", "copy")
        assert max(times) < bound, "%s.SCANDUMP blocked the server %.1f ms (bound %.1f ms)" % (
            kind, max(times) / 1000, bound / 1000)


if __name__ == "__main__":
    run(globals(), make_server=lambda: Server(
        server_args=["--maxmemory", MAXMEM, "--maxmemory-policy", "noeviction"]))
