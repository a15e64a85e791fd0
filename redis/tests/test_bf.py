#!/usr/bin/python3
"""BF.* commands: arguments, replies, errors, false-positive rate, dumps."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from harness import (Server, assert_count, bf_links, bf_rate_now, bloom_rate,  # noqa: E402
                     expect_error, run, seed)

RNG = seed()


def items(prefix, n):
    return ["%s:%d:%d" % (prefix, RNG.randrange(1 << 30), i) for i in range(n)]


def madd_all(r, key, xs, chunk=2000):
    out = []
    for i in range(0, len(xs), chunk):
        out += r.execute_command("BF.MADD", key, *xs[i:i + chunk])
    return out


def mexists_all(r, key, xs, chunk=2000):
    out = []
    for i in range(0, len(xs), chunk):
        out += r.execute_command("BF.MEXISTS", key, *xs[i:i + chunk])
    return out


def info(r, key):
    v = r.execute_command("BF.INFO", key)
    return dict(zip([x.decode() for x in v[::2]], v[1::2]))


def test_reserve_and_errors(srv):
    r = srv.client()
    assert r.execute_command("BF.RESERVE", "bf", 0.01, 1000) == b"OK"
    expect_error(r.execute_command, "BF.RESERVE", "bf", 0.01, 1000, match="item exists")
    expect_error(r.execute_command, "BF.RESERVE", "x", "abc", 10, match="bad error rate")
    for bad in ("0", "1", "-0.5", "1.5"):
        expect_error(r.execute_command, "BF.RESERVE", "x", bad, 10,
                     match="(0 < error rate range < 1)")
    expect_error(r.execute_command, "BF.RESERVE", "x", 0.01, "ten", match="bad capacity")
    for bad in ("0", "-5"):
        expect_error(r.execute_command, "BF.RESERVE", "x", 0.01, bad,
                     match="(capacity should be larger than 0)")
    expect_error(r.execute_command, "BF.RESERVE", "x", 0.01, 10, "EXPANSION", match="no expansion")
    expect_error(r.execute_command, "BF.RESERVE", "x", 0.01, 10, "EXPANSION", "two",
                 match="bad expansion")
    expect_error(r.execute_command, "BF.RESERVE", "x", 0.01, 10, "EXPANSION", 0,
                 match="expansion should be greater or equal to 1")
    expect_error(r.execute_command, "BF.RESERVE", "x", 0.01, 10, "NONSCALING", "EXPANSION", 2,
                 match="Nonscaling filters cannot expand")
    expect_error(r.execute_command, "BF.RESERVE", "x", 0.01, 10, "BOGUS",
                 match="unknown argument")
    expect_error(r.execute_command, "BF.RESERVE", "x", 0.01, match="wrong number of arguments")
    expect_error(r.execute_command, "BF.ADD", "x", match="wrong number of arguments")
    expect_error(r.execute_command, "BF.ADD", "x", "a", "b", match="wrong number of arguments")
    expect_error(r.execute_command, "BF.MADD", "x", match="wrong number of arguments")
    expect_error(r.execute_command, "BF.EXISTS", "x", match="wrong number of arguments")
    expect_error(r.execute_command, "BF.MEXISTS", "x", match="wrong number of arguments")
    expect_error(r.execute_command, "BF.INFO", match="wrong number of arguments")
    expect_error(r.execute_command, "BF.CARD", match="wrong number of arguments")
    assert r.exists("x") == 0, "a failed reserve must not create the key"


def test_wrongtype(srv):
    r = srv.client()
    r.set("s", "v")
    for cmd in (("BF.ADD", "s", "a"), ("BF.MADD", "s", "a"), ("BF.EXISTS", "s", "a"),
                ("BF.MEXISTS", "s", "a"), ("BF.INFO", "s"), ("BF.CARD", "s"),
                ("BF.RESERVE", "s", 0.01, 10), ("BF.INSERT", "s", "ITEMS", "a"),
                ("BF.SCANDUMP", "s", 0)):
        expect_error(r.execute_command, *cmd, match="WRONGTYPE")
    r.execute_command("DEDUP.RESERVE", "d", 1000, 0.01, 100)
    expect_error(r.execute_command, "BF.ADD", "d", "a", match="WRONGTYPE")
    r.execute_command("BF.ADD", "b", "a")
    expect_error(r.execute_command, "DEDUP.ADD", "b", "a", match="WRONGTYPE")
    expect_error(r.execute_command, "GET", "b", match="WRONGTYPE")


def test_add_exists_autocreate(srv):
    r = srv.client()
    assert r.execute_command("BF.EXISTS", "bf", "a") == 0
    assert r.execute_command("BF.MEXISTS", "bf", "a", "b") == [0, 0]
    assert r.execute_command("BF.CARD", "bf") == 0
    assert r.execute_command("BF.ADD", "bf", "a") == 1
    assert r.execute_command("BF.ADD", "bf", "a") == 0
    assert r.execute_command("BF.EXISTS", "bf", "a") == 1
    assert r.execute_command("BF.MADD", "bf", "a", "b", "c") == [0, 1, 1]
    assert r.execute_command("BF.MEXISTS", "bf", "a", "b", "c", "zz-never") == [1, 1, 1, 0]
    assert r.execute_command("BF.CARD", "bf") == 3
    i = info(r, "bf")  # module defaults: capacity 100, expansion 2
    assert i["Capacity"] == 100 and i["Expansion rate"] == 2, i
    assert i["Number of filters"] == 1 and i["Number of items inserted"] == 3, i
    assert r.type("bf") == b"dedup-BF1"


def test_info_fields(srv):
    r = srv.client()
    r.execute_command("BF.RESERVE", "bf", 0.001, 5000, "EXPANSION", 4)
    r.execute_command("BF.MADD", "bf", "a", "b")
    full = r.execute_command("BF.INFO", "bf")
    assert [x.decode() for x in full[::2]] == [
        "Capacity", "Size", "Number of filters", "Number of items inserted", "Expansion rate"]
    i = info(r, "bf")
    for field, name in (("CAPACITY", "Capacity"), ("SIZE", "Size"), ("FILTERS", "Number of filters"),
                        ("ITEMS", "Number of items inserted"), ("EXPANSION", "Expansion rate")):
        assert r.execute_command("BF.INFO", "bf", field) == [i[name]], field
        assert r.execute_command("BF.INFO", "bf", field.lower()) == [i[name]], field
    assert i["Expansion rate"] == 4 and i["Capacity"] == 5000 and i["Number of items inserted"] == 2
    expect_error(r.execute_command, "BF.INFO", "bf", "COLOUR", match="Invalid information value")
    expect_error(r.execute_command, "BF.INFO", "missing", match="not found")
    r.execute_command("BF.RESERVE", "ns", 0.01, 100, "NONSCALING")
    assert info(r, "ns")["Expansion rate"] is None
    assert r.execute_command("BF.INFO", "ns", "EXPANSION") == [None]


def test_size_is_real_memory_and_optimal(srv):
    r = srv.client()
    n = 1000000  # the ~3 KiB of fixed structure is 0.02 bits per item here
    r.execute_command("BF.RESERVE", "bf", 0.01, n, "NONSCALING")
    size = info(r, "bf")["Size"]
    bits_per_item = size * 8.0 / n
    assert bits_per_item <= 9.7, bits_per_item  # optimal is 9.585 at 1%
    assert bits_per_item >= 9.5, bits_per_item
    mem = r.memory_usage("bf")
    assert mem >= size and mem < size + 4096, (mem, size)


def test_nonscaling_full(srv):
    r = srv.client()
    r.execute_command("BF.RESERVE", "bf", 0.001, 3, "NONSCALING")
    out = r.execute_command("BF.MADD", "bf", "a", "b", "c", "d", "e")
    assert out[:3] == [1, 1, 1], out
    assert len(out) == 4 and isinstance(out[3], redis.exceptions.ResponseError), out
    assert "non scaling filter is full" in str(out[3])
    expect_error(r.execute_command, "BF.ADD", "bf", "f", match="non scaling filter is full")
    assert r.execute_command("BF.ADD", "bf", "a") == 0  # present items still answer 0
    assert r.execute_command("BF.CARD", "bf") == 3
    assert info(r, "bf")["Number of filters"] == 1


def test_insert(srv):
    r = srv.client()
    expect_error(r.execute_command, "BF.INSERT", "k", "NOCREATE", "ITEMS", "a", match="not found")
    assert r.exists("k") == 0
    assert r.execute_command("BF.INSERT", "k", "CAPACITY", 1000, "ERROR", 0.001, "ITEMS",
                             "a", "b", "a") == [1, 1, 0]
    i = info(r, "k")
    assert i["Capacity"] == 1000 and i["Number of items inserted"] == 2
    assert r.execute_command("BF.INSERT", "k", "NOCREATE", "ITEMS", "c") == [1]
    r.execute_command("BF.INSERT", "e", "EXPANSION", 3, "ITEMS", "x")
    assert info(r, "e")["Expansion rate"] == 3
    r.execute_command("BF.INSERT", "n", "NONSCALING", "CAPACITY", 2, "ITEMS", "x")
    assert info(r, "n")["Expansion rate"] is None
    out = r.execute_command("BF.INSERT", "n", "ITEMS", "y", "z", "w")
    assert out[0] == 1 and len(out) == 2 and isinstance(out[1], redis.exceptions.ResponseError)
    expect_error(r.execute_command, "BF.INSERT", "k", "ITEMS", match="wrong number of arguments")
    expect_error(r.execute_command, "BF.INSERT", "k", "CAPACITY", 5, match="wrong number")
    expect_error(r.execute_command, "BF.INSERT", "k", "CAPACITY", match="wrong number")
    expect_error(r.execute_command, "BF.INSERT", "k", "CAPACITY", "x", "ITEMS", "a",
                 match="Bad capacity")
    expect_error(r.execute_command, "BF.INSERT", "k", "CAPACITY", 0, "ITEMS", "a",
                 match="Bad argument received")
    expect_error(r.execute_command, "BF.INSERT", "k", "ERROR", "x", "ITEMS", "a",
                 match="Bad error rate")
    expect_error(r.execute_command, "BF.INSERT", "k", "ERROR", 2, "ITEMS", "a",
                 match="Bad argument received")
    expect_error(r.execute_command, "BF.INSERT", "k", "EXPANSION", "x", "ITEMS", "a",
                 match="Bad expansion")
    expect_error(r.execute_command, "BF.INSERT", "k2", "NONSCALING", "EXPANSION", 2, "ITEMS", "a",
                 match="Nonscaling filters cannot expand")
    expect_error(r.execute_command, "BF.INSERT", "k", "FOO", "ITEMS", "a",
                 match="unknown argument")


def test_no_false_negatives_and_fpr_nonscaling(srv):
    r = srv.client()
    n, p = 20000, 0.01
    r.execute_command("BF.RESERVE", "bf", p, n, "NONSCALING")
    xs = items("in", n)
    added = madd_all(r, "bf", xs)
    assert all(a in (0, 1) for a in added)
    assert all(mexists_all(r, "bf", xs)), "false negative"
    fresh = items("out", 40000)
    fp = sum(mexists_all(r, "bf", fresh))
    (bits, k, held), = bf_links(r, "bf")
    assert bloom_rate(n, bits, k) <= p * 1.01, (bits, k)
    assert_count("fresh keys present", fp, len(fresh) * bf_rate_now(r, "bf"))
    # adds that answered 0 were false positives of the items before them
    assert_count("adds answering 0", added.count(0), sum(bloom_rate(i, bits, k) for i in range(n)))


def test_scaling_grows_and_keeps_rate(srv):
    r = srv.client()
    p = 0.01
    # Reserved at 1,000 (not 100): one filter of a hundred items can land
    # well above its expected rate, and the check below is binomial over
    # probes of one filter, not over filters.
    r.execute_command("BF.RESERVE", "bf", p, 1000, "EXPANSION", 2)
    xs = items("grow", 50000)
    madd_all(r, "bf", xs)
    i = info(r, "bf")
    assert i["Number of filters"] >= 5, i
    assert i["Capacity"] >= i["Number of items inserted"], i
    assert all(mexists_all(r, "bf", xs)), "false negative in a scaling filter"
    fresh = items("grow-out", 40000)
    fp = sum(mexists_all(r, "bf", fresh))
    now = bf_rate_now(r, "bf")
    assert now <= p, now
    assert_count("fresh keys present", fp, len(fresh) * now)


def test_limits(srv):
    """The caps are module arguments, off by default."""
    s = Server(module_args=["MAX_MEMORY", 1 << 30, "MAX_CAPACITY", 1 << 32])
    s.start()
    try:
        r = s.client()
        expect_error(r.execute_command, "BF.RESERVE", "big", 0.01, 4000000000,
                     match="per-key memory limit")
        expect_error(r.execute_command, "BF.RESERVE", "big", 0.01, 1 << 40, match="MAX_CAPACITY")
        expect_error(r.execute_command, "BF.INSERT", "big", "CAPACITY", 4000000000, "ITEMS", "a",
                     match="per-key memory limit")
        assert r.exists("big") == 0
    finally:
        s.stop()
        s.cleanup()


def test_default_takes_what_redisbloom_creates(srv):
    """RedisBloom creates BF.RESERVE k 1e-6 300000000 (1.13 GB): so does the
    default module (no per-key cap), and the key holds what it says."""
    r = srv.client()
    assert r.execute_command("BF.RESERVE", "huge", 1e-6, 300000000) == b"OK"
    size = info(r, "huge")["Size"]
    assert 1.0e9 < size < 1.25e9, size
    assert r.execute_command("BF.ADD", "huge", "x") == 1
    r.delete("huge")


def test_scandump_loadchunk(srv):
    r = srv.client()
    r.execute_command("BF.RESERVE", "src", 0.01, 500, "EXPANSION", 2)
    xs = items("dump", 3000)
    madd_all(r, "src", xs)
    it, chunks = 0, []
    while True:
        it, data = r.execute_command("BF.SCANDUMP", "src", it)
        if it == 0:
            break
        chunks.append((it, data))
    assert len(chunks) >= 2 and len(chunks[0][1]) == 88
    for it, data in chunks:
        assert r.execute_command("BF.LOADCHUNK", "dst", it, data) == b"OK"
    assert info(r, "dst") == info(r, "src")
    probe = xs + items("dump-out", 5000)
    assert mexists_all(r, "dst", probe) == mexists_all(r, "src", probe)
    # LOADCHUNK errors
    expect_error(r.execute_command, "BF.LOADCHUNK", "dst", chunks[0][0], chunks[0][1],
                 match="item exists")
    expect_error(r.execute_command, "BF.LOADCHUNK", "new", chunks[1][0], chunks[1][1],
                 match="not found")
    expect_error(r.execute_command, "BF.LOADCHUNK", "new", "x", "y", match="numeric")
    expect_error(r.execute_command, "BF.SCANDUMP", "missing", 0, match="not found")
    expect_error(r.execute_command, "BF.SCANDUMP", "src", "x", match="numeric")


def test_python_client_unchanged(srv):
    r = srv.client()
    bf = r.bf()
    assert bf.create("pybf", 0.01, 1000)
    assert bf.add("pybf", "foo") == 1
    assert bf.madd("pybf", "foo", "bar", "baz") == [0, 1, 1]
    assert bf.exists("pybf", "bar") == 1 and bf.exists("pybf", "nope") == 0
    assert bf.mexists("pybf", "foo", "nope") == [1, 0]
    assert bf.insert("pyins", ["a", "b"], capacity=100, error=0.001) == [1, 1]
    assert bf.insert("pyins", ["c"], noCreate=True) == [1]
    assert bf.create("pyns", 0.01, 10, noScale=True)
    assert bf.create("pyexp", 0.01, 10, expansion=3)
    i = bf.info("pybf")
    assert i.capacity == 1000 and i.insertedNum == 3 and i.filterNum == 1
    assert i.expansionRate == 2 and i.size > 1000
    assert bf.info("pyexp").expansionRate == 3
    # the documented SCANDUMP / LOADCHUNK loop
    chunks = []
    it = 0
    while True:
        it, data = bf.scandump("pybf", it)
        if it == 0:
            break
        chunks.append([it, data])
    for it, data in chunks:
        bf.loadchunk("pycopy", it, data)
    assert bf.mexists("pycopy", "foo", "bar", "baz") == [1, 1, 1]
    assert bf.info("pycopy").insertedNum == 3


def test_command_docs(srv):
    r = srv.client()
    r.response_callbacks["COMMAND"] = lambda resp, **kw: resp  # raw reply
    docs = r.execute_command("COMMAND", "DOCS", "bf.add")
    flat = [x.decode() if isinstance(x, bytes) else x for x in docs[1]]
    assert "summary" in flat, docs
    assert "BF.ADD" in [c.decode().upper() for c in r.execute_command("COMMAND", "LIST")
                        if c.decode().upper().startswith("BF.")]


# ---- RedisBloom 2.4's flow tests (tests/flow/test_bloom.py) ----

def test_rb_loadchunk_replies(srv):
    """test_scandump_invalid_header and test_scandump_load_small: a header
    BF.LOADCHUNK cannot use at iterator 1 is "received bad data"; arbitrary
    bytes at arbitrary iterators into a live filter get one of RedisBloom's
    three texts, and never change the filter."""
    r = srv.client()
    r.execute_command("BF.RESERVE", "bf", 0.01, 5)
    for x in range(50):
        r.execute_command("BF.ADD", "bf", "foo%d" % x)
    hdr = r.execute_command("BF.SCANDUMP", "bf", 0)[1]
    r.delete("bf")
    for lo, hi in ((0, 4), (36, 44), (27, 36)):
        h = bytearray(hdr)
        h[lo:hi] = b"\xff" * (hi - lo)
        text = expect_error(r.execute_command, "BF.LOADCHUNK", "bf", 1, bytes(h))
        assert text == "received bad data", text
        assert r.exists("bf") == 0
    r.execute_command("BF.RESERVE", "live", 0.01, 10)
    xs = items("live", 3000)
    r.execute_command("BF.MADD", "live", *xs)
    before = r.execute_command("BF.DEBUG", "live")
    size = r.execute_command("BF.INFO", "live")[1]
    ok = {"invalid offset - no link found", "invalid chunk - Too big for current filter",
          "received bad data"}
    for _ in range(100):
        b = bytes(RNG.randrange(256) for _ in range(RNG.randrange(0, 4096)))
        text = expect_error(r.execute_command, "BF.LOADCHUNK", "live",
                            RNG.randrange(0, 2 * size + 1), b)
        assert text in ok, text
    assert r.execute_command("BF.DEBUG", "live") == before
    assert all(mexists_all(r, "live", xs)), "a stray chunk changed the filter"


if __name__ == "__main__":
    run(globals())
