#!/usr/bin/python3
"""CF.* commands: arguments, replies, errors, rates, dumps."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from harness import Server, assert_count, cf_rate_now, expect_error, run, seed  # noqa: E402

RNG = seed()


def items(prefix, n):
    return ["%s:%d:%d" % (prefix, RNG.randrange(1 << 30), i) for i in range(n)]


def info(r, key):
    v = r.execute_command("CF.INFO", key)
    return dict(zip([x.decode() for x in v[::2]], v[1::2]))


def insert_all(r, key, xs, cmd="CF.INSERT", chunk=2000):
    out = []
    for i in range(0, len(xs), chunk):
        out += r.execute_command(cmd, key, "ITEMS", *xs[i:i + chunk])
    return out


def mexists_all(r, key, xs, chunk=2000):
    out = []
    for i in range(0, len(xs), chunk):
        out += r.execute_command("CF.MEXISTS", key, *xs[i:i + chunk])
    return out


def test_reserve_and_errors(srv):
    r = srv.client()
    assert r.execute_command("CF.RESERVE", "cf", 1000) == b"OK"
    expect_error(r.execute_command, "CF.RESERVE", "cf", 1000, match="item exists")
    expect_error(r.execute_command, "CF.RESERVE", "x", "many", match="Bad capacity")
    expect_error(r.execute_command, "CF.RESERVE", "x", 3, match="Capacity must be at least (BucketSize * 2)")
    expect_error(r.execute_command, "CF.RESERVE", "x", 100, "BUCKETSIZE", "b",
                 match="Couldn't parse BUCKETSIZE")
    expect_error(r.execute_command, "CF.RESERVE", "x", 100, "BUCKETSIZE", 0,
                 match="BUCKETSIZE parameter needs to be a positive integer")
    expect_error(r.execute_command, "CF.RESERVE", "x", 100, "MAXITERATIONS", "m",
                 match="Couldn't parse MAXITERATIONS")
    expect_error(r.execute_command, "CF.RESERVE", "x", 100, "MAXITERATIONS", 0,
                 match="MAXITERATIONS parameter needs to be a positive integer")
    expect_error(r.execute_command, "CF.RESERVE", "x", 100, "EXPANSION", "e",
                 match="Couldn't parse EXPANSION")
    expect_error(r.execute_command, "CF.RESERVE", "x", 100, "EXPANSION", -1,
                 match="EXPANSION parameter needs to be a non-negative integer")
    expect_error(r.execute_command, "CF.RESERVE", "x", 100, "COLOUR", 1, match="unknown argument")
    expect_error(r.execute_command, "CF.RESERVE", "x", 100, "BUCKETSIZE", match="wrong number")
    expect_error(r.execute_command, "CF.RESERVE", "x", match="wrong number")
    expect_error(r.execute_command, "CF.ADD", "x", match="wrong number")
    expect_error(r.execute_command, "CF.EXISTS", "x", "a", "b", match="wrong number")
    expect_error(r.execute_command, "CF.INFO", "missing", match="not found")
    expect_error(r.execute_command, "CF.DEL", "missing", "a", match="Not found")
    assert r.exists("x") == 0
    s = Server(module_args=["MAX_MEMORY", 1 << 30, "MAX_CAPACITY", 1 << 32])
    s.start()
    try:
        r = s.client()
        expect_error(r.execute_command, "CF.RESERVE", "big", 1 << 33, match="MAX_CAPACITY")
        expect_error(r.execute_command, "CF.RESERVE", "big", 2000000000,
                     match="per-key memory limit")
        assert r.exists("big") == 0
    finally:
        s.stop()
        s.cleanup()


def test_wrongtype(srv):
    r = srv.client()
    r.set("s", "v")
    r.execute_command("BF.ADD", "b", "x")
    for key in ("s", "b"):
        for cmd in (("CF.ADD", key, "a"), ("CF.ADDNX", key, "a"), ("CF.EXISTS", key, "a"),
                    ("CF.MEXISTS", key, "a"), ("CF.COUNT", key, "a"), ("CF.DEL", key, "a"),
                    ("CF.INFO", key), ("CF.RESERVE", key, 100),
                    ("CF.INSERT", key, "ITEMS", "a"), ("CF.SCANDUMP", key, 0)):
            expect_error(r.execute_command, *cmd, match="WRONGTYPE")
    r.execute_command("CF.ADD", "c", "x")
    expect_error(r.execute_command, "BF.ADD", "c", "x", match="WRONGTYPE")


def test_add_exists_count_del(srv):
    r = srv.client()
    assert r.execute_command("CF.EXISTS", "cf", "a") == 0
    assert r.execute_command("CF.COUNT", "cf", "a") == 0
    assert r.execute_command("CF.MEXISTS", "cf", "a", "b") == [0, 0]
    assert r.execute_command("CF.ADD", "cf", "a") == 1       # auto-created
    assert r.execute_command("CF.ADD", "cf", "a") == 1       # ADD adds another copy
    assert r.execute_command("CF.COUNT", "cf", "a") == 2
    assert r.execute_command("CF.ADDNX", "cf", "a") == 0
    assert r.execute_command("CF.ADDNX", "cf", "b") == 1
    assert r.execute_command("CF.MEXISTS", "cf", "a", "b", "c") == [1, 1, 0]
    assert r.execute_command("CF.DEL", "cf", "a") == 1
    assert r.execute_command("CF.COUNT", "cf", "a") == 1
    assert r.execute_command("CF.DEL", "cf", "a") == 1
    assert r.execute_command("CF.DEL", "cf", "a") == 0
    assert r.execute_command("CF.EXISTS", "cf", "a") == 0
    i = info(r, "cf")
    assert i["Number of items inserted"] == 1 and i["Number of items deleted"] == 2, i
    assert i["Number of filters"] == 1 and i["Bucket size"] == 4, i
    assert i["Expansion rate"] == 1 and i["Max iterations"] == 500, i
    assert i["Number of buckets"] >= 1024 // 4, i


def test_info_shape(srv):
    r = srv.client()
    r.execute_command("CF.RESERVE", "cf", 1000, "BUCKETSIZE", 2, "MAXITERATIONS", 30,
                      "EXPANSION", 2)
    v = r.execute_command("CF.INFO", "cf")
    assert [x.decode() for x in v[::2]] == [
        "Size", "Number of buckets", "Number of filters", "Number of items inserted",
        "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"]
    i = info(r, "cf")
    assert i["Bucket size"] == 2 and i["Max iterations"] == 30 and i["Expansion rate"] == 2
    assert r.memory_usage("cf") >= i["Size"] > 0


def test_insert_and_full(srv):
    r = srv.client()
    expect_error(r.execute_command, "CF.INSERT", "k", "NOCREATE", "ITEMS", "a", match="not found")
    assert r.execute_command("CF.INSERT", "k", "CAPACITY", 100, "ITEMS", "a", "b", "a") == [1, 1, 1]
    assert r.execute_command("CF.INSERTNX", "k", "ITEMS", "a", "c") == [0, 1]
    expect_error(r.execute_command, "CF.INSERT", "k", "CAPACITY", "x", "ITEMS", "a",
                 match="Bad capacity")
    expect_error(r.execute_command, "CF.INSERT", "k", "CAPACITY", 1, "ITEMS", "a",
                 match="Capacity must be at least")
    expect_error(r.execute_command, "CF.INSERT", "k", "WHAT", "ITEMS", "a",
                 match="unknown argument")
    expect_error(r.execute_command, "CF.INSERT", "k", "ITEMS", match="wrong number")
    expect_error(r.execute_command, "CF.INSERT", "k", "CAPACITY", match="wrong number")
    # a fixed filter: -1 per item once full, ADD answers "Filter is full"
    r.execute_command("CF.RESERVE", "fixed", 64, "EXPANSION", 0)
    out = insert_all(r, "fixed", items("fill", 200))
    assert out.count(-1) > 0 and set(out) <= {1, -1}, out
    assert 1 in out and out.index(-1) >= 56, out.index(-1)   # >= 87% load before the first refusal
    expect_error(r.execute_command, "CF.ADD", "fixed", "one-more", match="Filter is full")
    assert info(r, "fixed")["Number of filters"] == 1


def test_insertnx_nocreate_full(srv):
    """CF.INSERTNX [NOCREATE] on a full fixed filter replies as RedisBloom's:
    -1 for each item that does not fit, 0 for one already there, 1 for a new
    one that fits; an array of integers, never an error in it."""
    r = srv.client()
    for nocreate in ([], ["NOCREATE"]):
        key = "nxfull%d" % len(nocreate)
        r.execute_command("CF.RESERVE", key, 64, "EXPANSION", 0)
        xs = items(key, 200)
        out = []
        for i in range(0, len(xs), 20):
            out += r.execute_command("CF.INSERTNX", key, *nocreate, "ITEMS", *xs[i:i + 20])
        assert all(type(a) is int for a in out), [a for a in out if type(a) is not int][:3]
        # (0: a false positive of the full filter, now and then)
        assert set(out) <= {1, 0, -1} and out.count(-1) > 100, out
        kept = [x for x, a in zip(xs, out) if a == 1]
        refused = [x for x, a in zip(xs, out) if a == -1]
        # one item already there, one that cannot fit (and is not a false
        # positive of the full filter), in one call
        absent = [x for x in refused if not r.execute_command("CF.EXISTS", key, x)]
        got = r.execute_command("CF.INSERTNX", key, *nocreate, "ITEMS", kept[0], absent[0])
        assert got == [0, -1], got
        assert info(r, key)["Number of filters"] == 1
        # CF.ADDNX, one item and no array, answers "Filter is full"
        expect_error(r.execute_command, "CF.ADDNX", key, absent[1], match="Filter is full")


def test_growth_and_max_expansions(srv):
    r = srv.client()
    r.execute_command("CF.RESERVE", "g", 8, "EXPANSION", 1, "BUCKETSIZE", 2)
    xs = items("grow", 2000)
    out = []
    for i in range(0, len(xs), 50):
        try:
            out += r.execute_command("CF.INSERT", "g", "ITEMS", *xs[i:i + 50])
        except redis.exceptions.ResponseError as e:
            assert "Maximum expansions reached" in str(e), e
            break
    errors = [a for a in out if isinstance(a, redis.exceptions.ResponseError)]
    assert errors and "Maximum expansions reached" in str(errors[0]), out[-5:]
    assert info(r, "g")["Number of filters"] == 32, info(r, "g")
    expect_error(r.execute_command, "CF.ADD", "g", "more", match="Maximum expansions reached")
    added = [x for x, a in zip(xs, out) if a == 1]
    assert all(mexists_all(r, "g", added)), "false negative after growth"


def test_no_false_negatives_rate_and_bits(srv):
    r = srv.client()
    n = 100000
    r.execute_command("CF.RESERVE", "cf", n, "EXPANSION", 0)
    xs = items("in", n)
    out = insert_all(r, "cf", xs)
    assert out.count(1) == n, "a reserved capacity must fit"
    assert all(mexists_all(r, "cf", xs)), "false negative"
    i = info(r, "cf")
    # Size includes about 3 KiB of fixed structure per key; the table itself
    # must take at most 12.8 bits per item (bench/bench_redis.sh measures the
    # whole Size at 10M items).
    bits = (i["Size"] - 4096) * 8.0 / n
    assert bits <= 12.8, bits
    fresh = items("out", 50000)
    fp = sum(mexists_all(r, "cf", fresh))
    p = 2 * 4 / 4095.0  # 12-bit fingerprints, 4 slots: the rate of a full table
    now = cf_rate_now(r, "cf")
    assert now <= p, now
    assert_count("fresh keys present", fp, len(fresh) * now)
    # deletes: every deleted item was added, so no other item disappears
    for x in xs[:1000]:
        assert r.execute_command("CF.DEL", "cf", x) == 1
    assert all(mexists_all(r, "cf", xs[1000:])), "delete caused a false negative"


def test_scandump_loadchunk(srv):
    r = srv.client()
    r.execute_command("CF.RESERVE", "src", 500, "EXPANSION", 2)
    xs = items("dump", 3000)
    insert_all(r, "src", xs)
    r.execute_command("CF.DEL", "src", xs[0])
    chunks = []
    it = 0
    while True:
        it, data = r.execute_command("CF.SCANDUMP", "src", it)
        if it == 0:
            assert data is None
            break
        chunks.append((it, data))
    for it, data in chunks:
        assert r.execute_command("CF.LOADCHUNK", "dst", it, data) == b"OK"
    assert info(r, "dst") == info(r, "src")
    probe = xs + items("dump-out", 3000)
    assert mexists_all(r, "dst", probe) == mexists_all(r, "src", probe)
    expect_error(r.execute_command, "CF.LOADCHUNK", "dst", chunks[0][0], chunks[0][1],
                 match="item exists")
    expect_error(r.execute_command, "CF.SCANDUMP", "missing", 0, match="not found")


def test_python_client_unchanged(srv):
    r = srv.client()
    cf = r.cf()
    assert cf.create("pycf", 1000)
    assert cf.create("pycf2", 1000, expansion=2, bucket_size=2, max_iterations=10)
    assert cf.add("pycf", "foo") == 1
    assert cf.addnx("pycf", "foo") == 0
    assert cf.insert("pycf", ["bar", "baz"]) == [1, 1]
    assert cf.insertnx("pycf", ["bar", "qux"]) == [0, 1]
    assert cf.insert("pynew", ["x"], capacity=100) == [1]
    assert cf.exists("pycf", "foo") == 1 and cf.exists("pycf", "nope") == 0
    assert cf.mexists("pycf", "foo", "nope") == [1, 0]
    assert cf.count("pycf", "foo") == 1
    assert cf.delete("pycf", "foo") == 1
    i = cf.info("pycf")
    assert i.insertedNum == 3 and i.deletedNum == 1 and i.filterNum == 1 and i.bucketSize == 4
    i2 = cf.info("pycf2")
    assert i2.bucketSize == 2 and i2.expansionRate == 2 and i2.maxIteration == 10
    chunks = []
    it = 0
    while True:
        it, data = cf.scandump("pycf", it)
        if it == 0:
            break
        chunks.append([it, data])
    for it, data in chunks:
        cf.loadchunk("pycopy", it, data)
    assert cf.mexists("pycopy", "bar", "baz", "qux", "foo") == [1, 1, 1, 0]


# ---- RedisBloom 2.4's flow tests (tests/flow/test_cuckoo.py), as this module answers them ----

def test_rb_expansion_0_refuses_at_redisbloom_fill(srv):
    """test_expansion_0: CF.RESERVE a 4 EXPANSION 0 takes 4 items, then
    CF.INSERT answers -1 per item.  A fixed filter never holds more than
    RedisBloom's (nextpow2(capacity / bucket size) buckets of that size)."""
    r = srv.client()
    r.execute_command("CF.RESERVE", "a", 4, "EXPANSION", 0)
    assert [r.execute_command("CF.ADD", "a", x) for x in "1234"] == [1, 1, 1, 1]
    assert r.execute_command("CF.INSERT", "a", "ITEMS", "5", "6") == [-1, -1]
    expect_error(r.execute_command, "CF.ADD", "a", "7", match="Filter is full")
    assert r.execute_command("CF.ADDNX", "a", "1") == 0          # held: still 0
    assert r.execute_command("CF.INSERTNX", "a", "ITEMS", "1", "9") == [0, -1]
    assert all(r.execute_command("CF.MEXISTS", "a", *"1234"))
    for cap, bs, slots in ((1000, 4, 1024), (100, 2, 128), (5, 2, 4)):
        key = "f%d" % cap
        r.execute_command("CF.RESERVE", key, cap, "BUCKETSIZE", bs, "EXPANSION", 0)
        out = insert_all(r, key, items(key, 2 * slots))
        assert out.count(1) <= slots and set(out) <= {1, -1}, (cap, out.count(1))
        assert out[:slots // 2] == [1] * (slots // 2), cap


def test_rb_max_expansions_at_redisbloom_size(srv):
    """test_max_expansions: CF.RESERVE cf 4 grows by sub-filters of
    RedisBloom's size -- 4 slots, its nextpow2(4 / 2) buckets of 2, here one
    bucket of 4 -- up to 32, then every add answers Maximum expansions
    reached.  Which add that is depends on how full the sub-filters are when
    the 32nd comes: RedisBloom's 31 hold 123 of their 124 slots for the
    items "0".."123" (its hash leaves one empty), so it refuses the 125th
    add; ours hold exactly 4 each (one bucket: nothing to relocate, no slot
    left empty, whatever the items), so the 32nd comes at add 125 and the
    126th is refused -- RedisBloom's latest possible refusal too."""
    r = srv.client()
    r.execute_command("CF.RESERVE", "cf", 4)
    for i in range(125):
        assert r.execute_command("CF.ADD", "cf", str(i)) == 1, i
        assert info(r, "cf")["Number of filters"] == i // 4 + 1, i
    expect_error(r.execute_command, "CF.ADD", "cf", "2048", match="Maximum expansions reached")
    expect_error(r.execute_command, "CF.INSERT", "cf", "ITEMS", "x", match="Maximum expansions")
    i = info(r, "cf")
    assert (i["Number of filters"], i["Number of items inserted"]) == (32, 125), i
    # RedisBloom's "Number of buckets" is the first sub-filter's
    assert i["Number of buckets"] * i["Bucket size"] == 4, i
    assert r.execute_command("CF.MEXISTS", "cf", *map(str, range(125))) == [1] * 125
    # any other items: the same count, the sizes do not depend on the hash
    r.execute_command("CF.RESERVE", "cf2", 4)
    out = insert_all(r, "cf2", items("mx", 130))
    assert out[:125] == [1] * 125 and info(r, "cf2")["Number of filters"] == 32, out[120:]
    assert all("Maximum expansions" in str(e) for e in out[125:]), out[125:]


def test_rb_sizes_of_reserve_and_growth(srv):
    """test_expansion, test_bucket_size, test_max_iterations, test_insert:
    every sub-filter has RedisBloom's slot count -- nextpow2(capacity /
    bucket size) buckets of its bucket size (2 without BUCKETSIZE, stored
    here as buckets of 4), times nextpow2(EXPANSION)^i -- so the sub-filters
    1000 adds need are RedisBloom's wherever the sizes decide it: 5 for
    CF.RESERVE b 64 EXPANSION 2 (four hold 960 slots), 3 with EXPANSION 4
    (two hold 320).  With EXPANSION 1 RedisBloom makes 17; here at least
    16 (fifteen hold 960), the exact count depending on the fill."""
    r = srv.client()
    for key, args, slots in (("r10", [10], 16), ("r10m", [10, "MAXITERATIONS", 10], 16),
                             ("r1000", [1000], 1024), ("r10000", [10000], 16384),
                             ("bs2", [64, "BUCKETSIZE", 2], 64),
                             ("bs4", [256, "BUCKETSIZE", 4, "MAXITERATIONS", 500], 256),
                             ("bs1", [64, "BUCKETSIZE", 1], 64)):
        r.execute_command("CF.RESERVE", key, *args)
        i = info(r, key)
        assert i["Number of buckets"] * i["Bucket size"] == slots, (key, i)
    # with the bucket size given, the buckets are RedisBloom's exactly
    assert r.execute_command("CF.DEBUG", "bs2").decode().startswith("bktsize:2 buckets:32 ")
    assert r.execute_command("CF.DEBUG", "bs4").decode().startswith("bktsize:4 buckets:64 ")
    assert r.execute_command("CF.DEBUG", "bs1").decode().startswith("bktsize:1 buckets:64 ")
    r.execute_command("CF.RESERVE", "e3", 64, "EXPANSION", 3)
    assert info(r, "e3")["Expansion rate"] == 4           # RedisBloom rounds it up too
    xs = [str(i) for i in range(1000)]
    want = {"e1": (1, None), "e2": (2, 5), "e4": (4, 3)}
    for key, (e, n) in want.items():
        r.execute_command("CF.RESERVE", key, 64, "EXPANSION", e)
        assert insert_all(r, key, xs) == [1] * 1000, key
        i = info(r, key)
        assert i["Number of buckets"] * i["Bucket size"] == 64, (key, i)
        assert i["Number of filters"] == n if n else 16 <= i["Number of filters"] <= 17, (key, i)
        assert all(mexists_all(r, key, xs)), key


def test_rb_loadchunk_replies(srv):
    """test_scandump_invalid, test_scandump_invalid_header(_alloc) and
    test_scandump_load_small: CF.LOADCHUNK answers RedisBloom's texts, and
    arbitrary bytes never change a live filter."""
    r = srv.client()
    r.execute_command("CF.RESERVE", "cf", 4)
    for pos, data in ((-9223372036854775808, "1"), (922337203685477588, "1"),
                      (4, "kdoasdksaodsadsadsadsadsadadsadadsdad"), (4, "abcd")):
        expect_error(r.execute_command, "CF.LOADCHUNK", "cf", pos, data,
                     match="Couldn't load chunk!")
    expect_error(r.execute_command, "CF.LOADCHUNK", "cf", 0, "x", match="Invalid position")
    expect_error(r.execute_command, "CF.LOADCHUNK", "cf", "str", "x", match="Invalid position")
    expect_error(r.execute_command, "CF.LOADCHUNK", "cf", 1, "x", match="item exists")
    expect_error(r.execute_command, "CF.LOADCHUNK", "none", 5, "ab", match="not found")
    expect_error(r.execute_command, "CF.LOADCHUNK", "none", 1, b"x" * 37, match="Invalid header")
    # a header whose first bytes are zeroed, or whose sizes are absurd
    r.execute_command("CF.RESERVE", "src", 100)
    for x in range(50):
        r.execute_command("CF.ADD", "src", "foo%d" % x)
    hdr = bytearray(r.execute_command("CF.SCANDUMP", "src", 0)[1])
    h1 = bytearray(hdr)
    h1[:9] = bytes(9)
    h2 = bytearray(hdr)
    h2[8:13] = bytes(5)
    h2[14] = 1
    for h in (h1, h2):
        text = expect_error(r.execute_command, "CF.LOADCHUNK", "new", 1, bytes(h))
        assert text == "Couldn't create filter!", text
        assert r.exists("new") == 0
    # random bytes at random positions into a live filter
    r.execute_command("CF.RESERVE", "live", 200, "EXPANSION", 2)
    xs = items("live", 2000)
    insert_all(r, "live", xs)
    before = r.execute_command("CF.DEBUG", "live")
    ok = {"Couldn't load chunk!", "Invalid position", "item exists"}
    for _ in range(300):
        b = bytes(RNG.randrange(256) for _ in range(RNG.randrange(0, 100)))
        text = expect_error(r.execute_command, "CF.LOADCHUNK", "live", RNG.randrange(0, 10001), b)
        assert text in ok, text
    assert r.execute_command("CF.DEBUG", "live") == before
    assert all(mexists_all(r, "live", xs)), "a stray chunk changed the filter"


if __name__ == "__main__":
    run(globals())
