#!/usr/bin/python3
"""No command of the module takes its server past maxmemory (issue 34.3).

The server runs with maxmemory 64mb, noeviction, and the module's own caps
off.  Every command is given the largest parameters it accepts (huge
capacities, the smallest error rate, the largest expansions, EXACT windows
asked for 2^40 items); after each, the server answers PING within a bound,
its used_memory stays within maxmemory plus a small slack, and a refusal is
an error reply that names the limit.  An EXACT table grows with what is
added (not with the capacity asked for), and the longest single command
while it grows to its limit is printed."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Server, expect_error, run, seed  # noqa: E402

RNG = seed()
MAXMEM = 64 << 20
SLACK = 2 << 20          # the deny-oom check bounds allocations under 1 MiB
PING_BOUND = 1.0         # seconds; the sanitized build is slow
SANITIZED = bool(os.environ.get("DEDUP_REDIS_PRELOAD"))


def check_server(srv, what):
    r = srv.client()
    t0 = time.monotonic()
    assert r.ping(), what
    dt = time.monotonic() - t0
    assert dt < PING_BOUND, "PING took %.3fs after %s" % (dt, what)
    used = r.info("memory")["used_memory"]
    assert used <= MAXMEM + SLACK, "used_memory %d past maxmemory after %s" % (used, what)


def refused(srv, *cmd, match="maxmemory"):
    """cmd must fail with an error containing 'match' (or succeed when
    match is None); the server must stay within its bounds either way."""
    r = srv.client()
    try:
        out = r.execute_command(*cmd)
        text = None
    except Exception as e:  # noqa: BLE001 - the text is checked below
        out, text = None, str(e)
    check_server(srv, " ".join(str(c) for c in cmd[:6]))
    if match is not None:
        assert text is not None and match in text, (cmd[:6], text, out)
    return text, out


def test_reserve_past_maxmemory_is_refused(srv):
    big = 1 << 40
    refused(srv, "DEDUP.RESERVE", "h", 1000, 0.01, big, "EXACT", match="capacity cannot fit")
    refused(srv, "DEDUP.RESERVE", "h", 1000, 0.01, 10 ** 8, "EXACT", match="capacity cannot fit")
    refused(srv, "DEDUP.RESERVE", "a", 1000, 1e-9, 10 ** 8, "GENERATIONS", 16)
    refused(srv, "DEDUP.RESERVE", "a", 2 ** 50, 0.01, 10 ** 9, match="")
    refused(srv, "BF.RESERVE", "b", 1e-9, 10 ** 8, "NONSCALING")
    refused(srv, "BF.RESERVE", "b", 0.01, big, match="")
    refused(srv, "BF.INSERT", "b", "CAPACITY", 10 ** 8, "ERROR", 1e-9, "ITEMS", "x")
    refused(srv, "CF.RESERVE", "c", 10 ** 8)
    refused(srv, "CF.RESERVE", "c", big, match="")
    refused(srv, "CF.INSERT", "c", "CAPACITY", 10 ** 8, "ITEMS", "x")
    r = srv.client()
    assert r.dbsize() == 0, r.keys()
    # within the limit, the same commands work
    assert r.execute_command("DEDUP.RESERVE", "h", 1000, 0.01, 100000, "EXACT") == b"OK"
    assert r.execute_command("DEDUP.ADD", "h", "zz") == 1
    assert r.execute_command("BF.RESERVE", "b", 0.01, 100000) == b"OK"


def test_growth_by_the_largest_expansion_is_refused(srv):
    r = srv.client()
    for key, expansion, match in (("b", 2 ** 32 - 1, "max number of scaling filters"),
                                  ("b2", 100000, "maxmemory")):
        assert r.execute_command("BF.RESERVE", key, 0.01, 1000, "EXPANSION", expansion) == b"OK"
        text = None
        for batch in range(20):
            items = [b"b%d:%d" % (batch, i) for i in range(200)]
            out = r.execute_command("BF.MADD", key, *items)
            check_server(srv, "BF.MADD")
            errs = [x for x in out if not isinstance(x, int)]
            if errs:
                text = str(errs[0])
                break
        assert text is not None and match in text, text
    # 3000 x 32768 slots: a second sub-filter of about 150 MB
    assert r.execute_command("CF.RESERVE", "c", 3000, "EXPANSION", 32768) == b"OK"
    text = None
    for batch in range(40):
        items = [b"c%d:%d" % (batch, i) for i in range(200)]
        try:
            out = r.execute_command("CF.INSERT", "c", "ITEMS", *items)
        except Exception as e:  # noqa: BLE001 - checked below
            text = str(e)
        check_server(srv, "CF.INSERT")
        errs = [str(x) for x in out if not isinstance(x, int)] if not text else [text]
        if errs:
            text = errs[0]
            break
    assert text is not None and "maxmemory" in text, text
    # the filters keep what they hold
    assert r.execute_command("BF.EXISTS", "b", "b0:5") == 1
    assert r.execute_command("CF.EXISTS", "c", "c0:5") == 1


def test_loadchunk_header_past_maxmemory_is_refused(srv):
    r = srv.client()
    assert r.execute_command("BF.RESERVE", "src", 0.01, 100) == b"OK"
    it, hdr = r.execute_command("BF.SCANDUMP", "src", 0)
    # the same header claiming a 1 GB payload: its buffer is refused
    head = bytearray(hdr)
    text = None
    try:
        r.execute_command("BF.LOADCHUNK", "dst", it, bytes(head))
        r.execute_command("BF.LOADCHUNK", "dst", 1 << 30, b"x")
    except Exception as e:  # noqa: BLE001
        text = str(e)
    check_server(srv, "BF.LOADCHUNK")
    assert text is not None


def test_exact_table_grows_within_maxmemory(srv):
    """An EXACT window asked for as many items as maxmemory can hold starts
    small, grows as items come, and at the limit refuses new items with an
    error naming maxmemory while it still answers for the ones it holds."""
    r = srv.client()
    cap = (MAXMEM - (8 << 20)) // 24
    t0 = time.monotonic()
    assert r.execute_command("DEDUP.RESERVE", "x", 3600000, 0.01, cap, "EXACT") == b"OK"
    first = time.monotonic() - t0
    t0 = time.monotonic()
    assert r.execute_command("DEDUP.ADD", "x", "first") == 1
    first = max(first, time.monotonic() - t0)
    assert first < 0.2, "the first add took %.3fs (a table sized by capacity)" % first
    used = r.info("memory")["used_memory"]
    assert used < 8 << 20, "the first add took the server to %d bytes" % used
    worst = (0.0, 0)
    jump = (0, 0)  # the largest growth of used_memory over one command
    last_used = r.info("memory")["used_memory"]
    n, batch, err = 0, 2000, None
    tag = RNG.randrange(1 << 30)
    limit_t = time.monotonic() + (60 if SANITIZED else 20)
    while err is None and time.monotonic() < limit_t:
        items = [b"%d:%d" % (tag, n + i) for i in range(batch)]
        t0 = time.monotonic()
        try:
            out = r.execute_command("DEDUP.MADD", "x", *items)
        except Exception as e:  # redis.ResponseError
            # the server itself past maxmemory (the last command's own
            # buffers, within SLACK): Redis refuses the whole command, also
            # naming maxmemory -- a refusal as the module's own
            if "maxmemory" not in str(e):
                raise
            err = str(e)
            break
        dt = time.monotonic() - t0
        if dt > worst[0]:
            worst = (dt, n)
        for x in out:
            if isinstance(x, int):
                assert x == 1
                n += 1
            else:
                err = str(x)
                break
        used = r.info("memory")["used_memory"]
        assert used <= MAXMEM + SLACK, "used_memory %d after %d items" % (used, n)
        if used - last_used > jump[0]:
            jump = (used - last_used, n)
        last_used = used
    check_server(srv, "DEDUP.MADD")
    assert err is not None, "no refusal after %d items" % n
    assert "maxmemory" in err or "memory limit" in err, err
    print("EXACT: %d items held under maxmemory %d; longest DEDUP.MADD of %d items %.1f ms "
          "(at %d items)" % (n, MAXMEM, batch, worst[0] * 1000, worst[1]))
    print("EXACT: largest growth of used_memory in one DEDUP.MADD: %d bytes (at %d items)" % jump)
    # The table grows a part at a time (a few MiB at most), never the whole
    # value at once (tens of MiB at this size, and as many ms).
    assert jump[0] < 4 << 20, "one command grew the value by %d bytes at %d items" % jump
    assert r.execute_command("DEDUP.EXISTS", "x", b"%d:%d" % (tag, 5)) == 1
    try:
        assert r.execute_command("DEDUP.ADD", "x", b"%d:%d" % (tag, 7)) == 0
    except Exception as e:  # past maxmemory Redis refuses every write, a held key's too
        if "maxmemory" not in str(e):
            raise
    slow = r.execute_command("SLOWLOG", "GET", 128)
    if slow:
        top = max(slow, key=lambda e: e[2])
        print("SLOWLOG: longest %d us (%s), %d commands over 1 ms" % (top[2], top[3][0].decode(),
                                                                     len(slow)))


if __name__ == "__main__":
    run(globals(), make_server=lambda: Server(
        server_args=["--maxmemory", MAXMEM, "--maxmemory-policy", "noeviction",
                     "--slowlog-log-slower-than", 1000]))
