#!/usr/bin/python3
"""DEDUP.* commands: expiring "seen within the window" filters."""
import os
import sys
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Server, assert_count, expect_error, run, seed  # noqa: E402

RNG = seed()


def info(r, key):
    v = r.execute_command("DEDUP.INFO", key)
    return dict(zip([x.decode() for x in v[::2]], v[1::2]))


def test_reserve_errors(srv):
    r = srv.client()
    assert r.execute_command("DEDUP.RESERVE", "d", 60000, 0.01, 1000) == b"OK"
    expect_error(r.execute_command, "DEDUP.RESERVE", "d", 60000, 0.01, 1000, match="item exists")
    expect_error(r.execute_command, "DEDUP.RESERVE", "x", 0, 0.01, 10, match="bad window")
    expect_error(r.execute_command, "DEDUP.RESERVE", "x", "soon", 0.01, 10, match="bad window")
    expect_error(r.execute_command, "DEDUP.RESERVE", "x", 1000, "p", 10, match="bad error rate")
    expect_error(r.execute_command, "DEDUP.RESERVE", "x", 1000, 1, 10, match="error rate range")
    expect_error(r.execute_command, "DEDUP.RESERVE", "x", 1000, 0.01, 0, match="capacity")
    expect_error(r.execute_command, "DEDUP.RESERVE", "x", 1000, 0.01, 10, "GENERATIONS", 2,
                 match="GENERATIONS")
    expect_error(r.execute_command, "DEDUP.RESERVE", "x", 1000, 0.01, 10, "WHAT",
                 match="unknown argument")
    expect_error(r.execute_command, "DEDUP.RESERVE", "x", 1000, 0.01, match="wrong number")
    expect_error(r.execute_command, "DEDUP.ADD", "x", match="wrong number")
    expect_error(r.execute_command, "DEDUP.ADD", "missing", "a", match="not found")
    expect_error(r.execute_command, "DEDUP.INFO", "missing", match="not found")
    assert r.execute_command("DEDUP.EXISTS", "missing", "a") == 0
    r.set("s", "v")
    expect_error(r.execute_command, "DEDUP.ADD", "s", "a", match="WRONGTYPE")
    expect_error(r.execute_command, "DEDUP.RESERVE", "s", 10, 0.01, 10, match="WRONGTYPE")
    assert r.exists("x") == 0


def test_add_within_window(srv):
    r = srv.client()
    r.execute_command("DEDUP.RESERVE", "d", 60000, 0.01, 1000)
    assert r.execute_command("DEDUP.ADD", "d", "a") == 1
    assert r.execute_command("DEDUP.ADD", "d", "a") == 0
    assert r.execute_command("DEDUP.EXISTS", "d", "a") == 1
    assert r.execute_command("DEDUP.EXISTS", "d", "b") == 0
    assert r.execute_command("DEDUP.EXISTS", "d", "b") == 0  # EXISTS does not record
    assert r.execute_command("DEDUP.MADD", "d", "a", "b", "c", "b") == [0, 1, 1, 0]
    i = info(r, "d")
    assert i["Number of items inserted"] == 3 and i["Window"] == 60000, i
    assert i["Generations"] == 5 and i["Generation span"] == 12000, i
    assert i["Capacity"] == 1000 and float(i["Error rate"]) == 0.01, i
    assert i["Size"] > 0 and r.memory_usage("d") >= i["Size"]


def server_ms(r):
    """The server's clock (TIME), in milliseconds: what the window follows."""
    sec, usec = r.time()
    return sec * 1000.0 + usec / 1000.0


# Slack for the server's own clock reads (a command sees the time once).
SLACK_MS = 100


def until_gone(r, key, item, ts0, ts1, w, forget_by):
    """Polls EXISTS (bounded: 20 s) until 'item', added between the server
    times ts0 and ts1, is forgotten.  Every answer is judged by the server's
    clock read around it, so a stalled client never fails the test: present
    is wrong only when asked after ts1 + forget_by (+ slack), absent only
    when answered before ts0 + w (the window is guaranteed).  Returns how
    many answers were judged "must be present"."""
    end = time.time() + 20
    held = 0
    while True:
        before = server_ms(r)
        v = r.execute_command("DEDUP.EXISTS", key, item)
        after = server_ms(r)
        if v == 0:
            assert after >= ts0 + w, "forgotten %.0f ms after its add, within the %d ms window" % (
                after - ts0, w)
            return held
        assert before <= ts1 + forget_by + SLACK_MS, \
            "still present %.0f ms after its add (forgotten by %d ms)" % (before - ts1, forget_by)
        held += after < ts0 + w
        assert time.time() < end, "never forgotten"
        time.sleep(0.01)


def test_items_expire(srv):
    r = srv.client()
    w = 300
    r.execute_command("DEDUP.RESERVE", "d", w, 0.01, 1000)
    ts0 = server_ms(r)
    assert r.execute_command("DEDUP.ADD", "d", "old") == 1
    ts1 = server_ms(r)
    # Remembered for at least w, forgotten after at most w * (1 + 1/G)
    # (G = 5: 360 ms), both measured on the server's clock.
    until_gone(r, "d", "old", ts0, ts1, w, w * 6 // 5)
    assert r.execute_command("DEDUP.ADD", "d", "old") == 1


def test_items_stay_within_a_long_window(srv):
    # "Still there" without a race: a window of an hour, asked for a while.
    r = srv.client()
    r.execute_command("DEDUP.RESERVE", "long", 3600000, 0.01, 1000)
    assert r.execute_command("DEDUP.ADD", "long", "old") == 1
    for _ in range(20):
        assert r.execute_command("DEDUP.EXISTS", "long", "old") == 1
        time.sleep(0.01)
    assert r.execute_command("DEDUP.ADD", "long", "old") == 0


def test_repeated_items_stay_seen(srv):
    # Each repeat within the window of the previous sighting (as the
    # server's clock measures it) must be answered "seen"; a repeat after a
    # client stall longer than the window proves nothing and is not judged.
    r = srv.client()
    w = 300
    r.execute_command("DEDUP.RESERVE", "d", w, 0.01, 100)
    assert r.execute_command("DEDUP.ADD", "d", "hot") == 1
    last = server_ms(r)
    start, judged, end = last, 0, time.time() + 20
    while judged < 10 or last - start < 4 * w:  # four windows at least
        assert time.time() < end, "only %d repeats came within the window" % judged
        time.sleep(0.1)  # well inside the window, unless the client stalls
        before = server_ms(r)
        v = r.execute_command("DEDUP.ADD", "d", "hot")
        if before - last < w:
            assert v == 0, "a repeat %.0f ms after the previous one answered new" % (before - last)
            judged += 1
        last = server_ms(r)


def test_fpr_and_no_false_negatives(srv):
    r = srv.client()
    n, p = 50000, 0.01  # enough false duplicates (~150) that twice as many fail
    r.execute_command("DEDUP.RESERVE", "d", 600000, p, n)
    xs = ["in:%d:%d" % (RNG.randrange(1 << 40), i) for i in range(n)]
    new = []
    for i in range(0, n, 2000):
        new += r.execute_command("DEDUP.MADD", "d", *xs[i:i + 2000])
    # the table's rate is linear in its load ("Current error rate" at the
    # end): summed over the run, the end rate times about n / 2
    rate = float(info(r, "d")["Current error rate"])
    assert_count("false duplicates while filling", new.count(0), rate * (n - 1) / 2)
    for i in range(0, n, 2000):
        pipe = r.pipeline(transaction=False)
        for x in xs[i:i + 2000]:
            pipe.execute_command("DEDUP.EXISTS", "d", x)
        assert all(pipe.execute()), "false negative"
    fresh = ["out:%d:%d" % (RNG.randrange(1 << 40), i) for i in range(30000)]
    pipe = r.pipeline(transaction=False)
    for x in fresh:
        pipe.execute_command("DEDUP.EXISTS", "d", x)
    fp = sum(pipe.execute())
    assert_count("fresh keys present", fp, rate * len(fresh))
    assert rate < p


def test_scandump_loadchunk(srv):
    r = srv.client()
    r.execute_command("DEDUP.RESERVE", "d", 600000, 0.01, 1000)
    xs = ["k%d" % i for i in range(500)]
    r.execute_command("DEDUP.MADD", "d", *xs)
    it = 0
    chunks = []
    while True:
        it, data = r.execute_command("DEDUP.SCANDUMP", "d", it)
        if it == 0:
            break
        chunks.append((it, data))
    for it, data in chunks:
        assert r.execute_command("DEDUP.LOADCHUNK", "copy", it, data) == b"OK"
    probe = xs + ["z%d" % i for i in range(2000)]
    pipe = r.pipeline(transaction=False)
    for x in probe:
        pipe.execute_command("DEDUP.EXISTS", "d", x)
        pipe.execute_command("DEDUP.EXISTS", "copy", x)
    out = pipe.execute()
    assert out[0::2] == out[1::2]
    expect_error(r.execute_command, "BF.LOADCHUNK", "bfcopy", chunks[0][0], chunks[0][1],
                 match="another filter kind")


def test_exact_mode(srv):
    r = srv.client()
    assert r.execute_command("DEDUP.RESERVE", "e", 60000, 0.01, 100, "EXACT") == b"OK"
    assert r.execute_command("DEDUP.ADD", "e", "a") == 1
    assert r.execute_command("DEDUP.ADD", "e", "a") == 0
    assert r.execute_command("DEDUP.MADD", "e", "a", "b", "b") == [0, 1, 0]
    assert r.execute_command("DEDUP.EXISTS", "e", "c") == 0
    i = info(r, "e")
    assert i["Mode"] == b"exact" and i["Keys in window"] == 2, i
    assert i["Number of items inserted"] == 2 and float(i["Current error rate"]) == 0
    # grows far past its capacity hint, and is exact: no false positive
    xs = ["x%d" % k for k in range(30000)]
    for lo in range(0, len(xs), 5000):
        assert r.execute_command("DEDUP.MADD", "e", *xs[lo:lo + 5000]) == [1] * 5000
    for lo in range(0, len(xs), 5000):
        assert r.execute_command("DEDUP.MADD", "e", *xs[lo:lo + 5000]) == [0] * 5000
    fresh = ["y%d" % k for k in range(30000)]
    pipe = r.pipeline(transaction=False)
    for x in fresh:
        pipe.execute_command("DEDUP.EXISTS", "e", x)
    assert sum(pipe.execute()) == 0
    assert info(r, "e")["Keys in window"] == 30002
    assert info(r, "e")["Size"] < 30002 * 64  # at most 1/4 of 24-byte slots empty, x2 growth


def test_exact_expiry_and_reuse(srv):
    r = srv.client()
    w = 300
    r.execute_command("DEDUP.RESERVE", "e", w, 0.01, 1000, "EXACT")
    old = ["old%d" % k for k in range(3000)]
    ts0 = server_ms(r)
    r.execute_command("DEDUP.MADD", "e", *old)
    ts1 = server_ms(r)
    # exactly the window: forgotten right after it (server clock)
    until_gone(r, "e", "old7", ts0, ts1, w, w)
    size_before = info(r, "e")["Size"]
    new = ["new%d" % k for k in range(3000)]
    # every old key is gone by now (all were added by ts1)
    while server_ms(r) < ts1 + w + SLACK_MS:
        time.sleep(0.01)
    assert r.execute_command("DEDUP.MADD", "e", *new) == [1] * 3000
    i = info(r, "e")
    assert i["Keys in window"] == 3000, i
    assert i["Size"] <= size_before * 2, (i["Size"], size_before)  # expired slots reused
    assert r.execute_command("DEDUP.ADD", "e", "old7") == 1


def fill_to_memory_cap(reserve, batches, size):
    """Reserves 'reserve' (the key is "m") on a server with MAX_MEMORY 1 MiB
    and adds batches of distinct items until an add is refused: the refusal
    names MAX_MEMORY, the value stays within it and known keys still answer
    "seen"."""
    s = Server(module_args=["MAX_MEMORY", 1 << 20])
    try:
        r = s.start().client()
        r.execute_command("DEDUP.RESERVE", "m", *reserve)
        err = None
        for batch in range(batches):
            out = r.execute_command("DEDUP.MADD", "m", *["k%d:%d" % (batch, i) for i in range(size)])
            bad = [x for x in out if not isinstance(x, int)]
            if bad:
                err = str(bad[0])
                break
        assert err is not None and "MAX_MEMORY" in err, err
        assert info(r, "m")["Size"] <= 1 << 20
        assert r.execute_command("DEDUP.EXISTS", "m", "k0:5") == 1
        # New keys (ones the window does not already answer "seen" for: an
        # approximate window's false positive, which depends on its random
        # seed, is answered before any memory is asked for) are refused
        # naming MAX_MEMORY as soon as one needs memory: an approximate
        # window may still place a key or two where it has room (which key
        # does depends on the value's random seed), never past the cap.
        refused = None
        for k in ("one-more-%d" % i for i in range(1000)):
            if r.execute_command("DEDUP.EXISTS", "m", k) != 0:
                continue
            try:
                assert r.execute_command("DEDUP.ADD", "m", k) == 1
            except redis.exceptions.ResponseError as e:
                refused = str(e)
                break
            assert info(r, "m")["Size"] <= 1 << 20
        assert refused is not None and "MAX_MEMORY" in refused, refused
        assert r.execute_command("DEDUP.ADD", "m", "k0:5") == 0  # known keys still answer
        return r
    finally:
        s.stop()
        s.cleanup()


def test_exact_memory_cap(srv):
    fill_to_memory_cap([3600000, 0.01, 10, "EXACT"], 40, 2000)


def test_approximate_memory_cap(srv):
    """Past its plan the approximate window keeps extra keys aside (its
    stash); MAX_MEMORY bounds that too, and a reserve above it is refused."""
    fill_to_memory_cap([3600000, 0.01, 100000], 200, 5000)
    s = Server(module_args=["MAX_MEMORY", 1 << 20])
    try:
        expect_error(s.start().client().execute_command, "DEDUP.RESERVE", "big", 60000, 0.01,
                     10000000, match="MAX_MEMORY")
    finally:
        s.stop()
        s.cleanup()


def test_window_encoding_round_trip(srv):
    """Values are saved as the library window (envelope version 3) and come
    back from DEBUG RELOAD and from a restart with the same answers, no more
    bytes, and go on working."""
    s = Server(rdb=True)
    try:
        r = s.start().client()
        xs = ["w%d" % i for i in range(2000)]
        probe = ["q%d" % i for i in range(5000)]
        for key, extra in (("a", []), ("x", ["EXACT"]), ("g", ["GENERATIONS", 16])):
            r.execute_command("DEDUP.RESERVE", key, 3600000, 0.01, 3000, *extra)
            r.execute_command("DEDUP.MADD", key, *xs)
            it, hdr = r.execute_command("DEDUP.SCANDUMP", key, 0)
            assert hdr[:4] == b"DDRM" and hdr[5] == 3, hdr[:8]
        def answers():
            out = {}
            for key in ("a", "x", "g"):
                pipe = r.pipeline(transaction=False)
                for x in xs + probe:
                    pipe.execute_command("DEDUP.EXISTS", key, x)
                i = info(r, key)
                out[key] = (pipe.execute(), i["Size"],
                            [i[f] for f in ("Generations", "Generation span", "Mode",
                                            "Number of items inserted", "Keys in window")])
            return out
        before = answers()
        assert all(before[k][0][:len(xs)] == [1] * len(xs) for k in before)
        assert r.execute_command("DEBUG", "RELOAD") == b"OK"
        after = answers()
        s.restart(save=True)
        r = s.client()
        restarted = answers()
        for key in before:
            for got in (after, restarted):
                assert got[key][0] == before[key][0], key
                assert got[key][2] == before[key][2], (key, got[key][2], before[key][2])
                assert got[key][1] <= before[key][1], (key, got[key][1], before[key][1])
            # (each value has a random seed: an approximate one may call a
            # new item seen, at its error rate, 1% here)
            fresh = [r.execute_command("DEDUP.ADD", key, "new-after-restart-%d" % i)
                     for i in range(20)]
            assert fresh.count(1) == 20 if key == "x" else fresh.count(1) >= 15, (key, fresh)
            assert r.execute_command("DEDUP.ADD", key, xs[7]) == 0
    finally:
        s.stop()
        s.cleanup()


def test_command_docs(srv):
    r = srv.client()
    r.response_callbacks["COMMAND"] = lambda resp, **kw: resp
    for c in ("dedup.reserve", "dedup.add", "dedup.madd", "dedup.exists", "dedup.info"):
        docs = r.execute_command("COMMAND", "DOCS", c)
        flat = [x.decode() if isinstance(x, bytes) else x for x in docs[1]]
        assert "summary" in flat and "complexity" in flat, (c, docs)

def test_values_have_secret_seeds(srv):
    """Each DEDUP value hashes its items with its own random seed, kept in its
    dump (issue 34): two values given the same items dump different bytes,
    neither carries the library's public seed, and a value restored from its
    dump (another key) answers as the original."""
    r = srv.client()
    public = (0x9E3779B97F4A7C15).to_bytes(8, "little")
    items = ["s%d" % i for i in range(500)]
    for extra in ([], ["EXACT"]):
        dumps = []
        for key in ("p", "q"):
            r.delete(key)
            r.execute_command("DEDUP.RESERVE", key, 3600000, 0.01, 1000, *extra)
            r.execute_command("DEDUP.MADD", key, *items)
            chunks, it = [], 0
            while True:
                it, data = r.execute_command("DEDUP.SCANDUMP", key, it)
                if it == 0:
                    break
                chunks.append((it, data))
            dumps.append(chunks)
        body = [b"".join(d for _, d in chunks[1:]) for chunks in dumps]
        assert body[0] != body[1], "two values share a seed %r" % extra
        assert public not in body[0] and public not in body[1], "public seed in a dump %r" % extra
        r.delete("c")
        for it, data in dumps[0]:
            r.execute_command("DEDUP.LOADCHUNK", "c", it, data)
        probe = items[:50] + ["never%d" % i for i in range(50)]
        for x in probe:
            assert (r.execute_command("DEDUP.EXISTS", "c", x) ==
                    r.execute_command("DEDUP.EXISTS", "p", x)), x

def test_exact_parts_round_trip(srv):
    """An EXACT value reserved for more than 65,536 items is split into
    parts (one window each, by digest): its dump (SCANDUMP/LOADCHUNK), COPY
    and DEBUG RELOAD keep every item, the count in the window, and the
    answers for new items."""
    r = srv.client()
    r.execute_command("DEDUP.RESERVE", "big", 3600000, 0.01, 300000, "EXACT")
    xs = [b"p%d" % i for i in range(20000)]
    for lo in range(0, len(xs), 5000):
        assert r.execute_command("DEDUP.MADD", "big", *xs[lo:lo + 5000]) == [1] * 5000
    chunks, it = [], 0
    while True:
        it, data = r.execute_command("DEDUP.SCANDUMP", "big", it)
        if it == 0:
            break
        chunks.append((it, data))
    for it, data in chunks:
        r.execute_command("DEDUP.LOADCHUNK", "restored", it, data)
    assert r.execute_command("COPY", "big", "copied") == 1
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    probe = xs[::97] + [b"q%d" % i for i in range(300)]
    for key in ("big", "restored", "copied"):
        assert info(r, key)["Keys in window"] == len(xs), key
        pipe = r.pipeline(transaction=False)
        for x in probe:
            pipe.execute_command("DEDUP.EXISTS", key, x)
        got = pipe.execute()
        assert got == [1] * len(xs[::97]) + [0] * 300, key
        assert r.execute_command("DEDUP.ADD", key, xs[3]) == 0
        assert r.execute_command("DEDUP.ADD", key, b"fresh") == 1


if __name__ == "__main__":
    run(globals())
