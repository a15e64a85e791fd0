"""Bringing RedisBloom's data across: its SCANDUMP chunk sequences through
LOADCHUNK, its RDB values ("MBbloom--", "MBbloomCF") through RESTORE and a
whole RDB file at start-up.  The dumps are built by rbmodel.py from
RedisBloom's layout; every item added to them must still be present, the
replies (INFO, DEBUG, SCANDUMP) must be what RedisBloom gives for that
state, and malformed ones must be refused with the server still up."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
import rbmodel  # noqa: E402
from harness import Server, assert_count, bf_rate_now, expect_error, run, seed  # noqa: E402

RNG = seed()


def items(prefix, n):
    return [("%s:%d:%d" % (prefix, i, RNG.randrange(1 << 30))).encode() for i in range(n)]


def mexists(r, cmd, key, xs, chunk=2000):
    out = []
    for i in range(0, len(xs), chunk):
        out += r.execute_command(cmd, key, *xs[i:i + chunk])
    return out


def info(r, cmd, key):
    v = r.execute_command(cmd, key)
    return {v[i].decode(): v[i + 1] for i in range(0, len(v), 2)}


def load_chunks(r, cmd, key, chunks):
    for it, data in chunks:
        assert r.execute_command(cmd, key, it, data) == b"OK"


def scandump(r, cmd, key):
    out, it = [], 0
    while True:
        it, data = r.execute_command(cmd, key, it)
        if it == 0:
            return out
        out.append((it, data))


def check_bloom(r, key, model, xs, fresh):
    assert all(mexists(r, "BF.MEXISTS", key, xs)), "an item added under RedisBloom is lost"
    i = info(r, "BF.INFO", key)
    assert i["Number of items inserted"] == model.size
    assert i["Number of filters"] == len(model.links)
    assert i["Capacity"] == sum(l.entries for l in model.links)
    assert i["Expansion rate"] == (None if model.options & rbmodel.NO_SCALING else model.growth)
    assert [x.decode() for x in r.execute_command("BF.DEBUG", key)] == model.debug()
    # queries answer as RedisBloom's: identical for items added and fresh ones
    assert mexists(r, "BF.MEXISTS", key, fresh) == [int(model.exists(x)) for x in fresh]


def test_bf_scandump_chunks_migrate(srv):
    r = srv.client()
    for opts, growth, n in ((rbmodel.FORCE64 | rbmodel.NOROUND, 2, 3000),
                            (rbmodel.FORCE64 | rbmodel.NOROUND | rbmodel.NO_SCALING, 1, 250),
                            (0, 4, 2000)):  # 0: a pre-2.0 chain, 32-bit hash, power-of-2 sizes
        model = rbmodel.Chain(300, 0.01, opts, growth)
        xs = items("rb%d" % opts, n)
        for x in xs:
            assert model.add(x) >= 0
        key = "mig%d" % opts
        load_chunks(r, "BF.LOADCHUNK", key, model.scandump(limit=997))
        fresh = items("fresh%d" % opts, 3000)
        check_bloom(r, key, model, xs, fresh)
        assert r.type(key) == b"MBbloom--"
        # adds keep RedisBloom's layout: the chain grows as RedisBloom's would
        more = items("more%d" % opts, 700)
        got = r.execute_command("BF.MADD", key, *more)
        want = [model.add(x) for x in more]
        if opts & rbmodel.NO_SCALING:
            k = want.index(-2) if -2 in want else len(want)
            assert got[:k] == want[:k] and len(got) == min(len(want), k + 1)
            continue
        assert got == want
        check_bloom(r, key, model, xs + more, fresh)
        # and SCANDUMP hands back RedisBloom's bytes, so the key can go back
        assert scandump(r, "BF.SCANDUMP", key) == model.scandump()


def test_bf_fpr_after_migration(srv):
    r = srv.client()
    model = rbmodel.Chain(10000, 0.01)
    xs = items("fpr", 10000)
    for x in xs:
        model.add(x)
    load_chunks(r, "BF.LOADCHUNK", "k", model.scandump())
    assert all(mexists(r, "BF.MEXISTS", "k", xs))
    fresh = items("fpr-out", 40000)
    fp = sum(mexists(r, "BF.MEXISTS", "k", fresh))
    assert_count("fresh keys present after migration", fp, len(fresh) * bf_rate_now(r, "k"))


def test_cf_scandump_chunks_migrate(srv):
    r = srv.client()
    cf = r.cf()
    model = rbmodel.Cuckoo(1000, bucket_size=2, max_iterations=20, expansion=2)
    xs = items("cf", 1500)  # more than the first sub-filter holds: two or more
    for x in xs:
        assert model.add(x) == 1
    assert len(model.subs) >= 2
    for it, data in model.scandump(limit=500):
        cf.loadchunk("c", it, data)
    assert r.type("c") == b"MBbloomCF"
    assert all(mexists(r, "CF.MEXISTS", "c", xs)), "an item added under RedisBloom is lost"
    assert [r.execute_command("CF.COUNT", "c", x) for x in xs[:200]] == \
        [model.count(x) for x in xs[:200]]
    i = cf.info("c")
    assert i.insertedNum == model.items and i.filterNum == len(model.subs)
    assert i.bucketSize == 2 and i.expansionRate == 2 and i.maxIteration == 20
    assert i.bucketNum == model.nb
    assert r.execute_command("CF.DEBUG", "c").decode() == (
        "bktsize:2 buckets:%d items:%d deletes:0 filters:%d max_iterations:20 expansion:2"
        % (model.nb, model.items, len(model.subs)))
    assert scandump(r, "CF.SCANDUMP", "c") == model.scandump()
    # deletes, adds and compaction keep every other item
    for x in xs[:100]:
        assert cf.delete("c", x) == 1
    assert all(mexists(r, "CF.MEXISTS", "c", xs[100:]))
    more = items("cf-more", 500)
    assert r.execute_command("CF.INSERT", "c", "ITEMS", *more) == [1] * 500
    assert r.execute_command("CF.COMPACT", "c") == b"OK"
    assert all(mexists(r, "CF.MEXISTS", "c", xs[100:] + more))
    assert cf.info("c").deletedNum == 0


def test_rdb_values_restore(srv):
    """RESTORE of DUMP payloads holding RedisBloom's RDB encodings."""
    r = srv.client()
    chain = rbmodel.Chain(200, 0.001, growth=3)
    xs = items("rdb-bf", 1500)
    for x in xs:
        chain.add(x)
    bf_obj = rbmodel.module_object("MBbloom--", 4, chain.rdb_value)
    assert r.restore("b", 0, rbmodel.dump_payload(bf_obj)) == b"OK"
    check_bloom(r, "b", chain, xs, items("rdb-bf-out", 2000))
    cuckoo = rbmodel.Cuckoo(512, bucket_size=4, max_iterations=50, expansion=1)
    ys = items("rdb-cf", 900)
    for y in ys:
        assert cuckoo.add(y) == 1
    cf_obj = rbmodel.module_object("MBbloomCF", 4, cuckoo.rdb_value)
    assert r.restore("c", 0, rbmodel.dump_payload(cf_obj)) == b"OK"
    assert all(mexists(r, "CF.MEXISTS", "c", ys))
    assert r.cf().info("c").insertedNum == cuckoo.items
    # our DUMP of them is RedisBloom's encoding again (type id, version 4)
    assert r.dump("b")[:1] == b"\x07"
    assert r.restore("b2", 0, r.dump("b")) == b"OK"
    assert all(mexists(r, "BF.MEXISTS", "b2", xs))
    # older encodings: encver 2 (no growth field: 2) and 0 (no bits, no n2)
    old = rbmodel.Chain(100, 0.01, rbmodel.FORCE64 | rbmodel.NOROUND, 2)
    zs = items("old", 150)
    for z in zs:
        old.add(z)

    def enc2(w):
        w.uint(old.size)
        w.uint(len(old.links))
        w.uint(old.options)
        for l in old.links:
            w.uint(l.entries)
            w.double(l.error)
            w.uint(l.hashes)
            w.double(l.bpe)
            w.uint(l.bits)
            w.uint(l.n2)
            w.string(bytes(l.bf))
            w.uint(l.size)
    assert r.restore("o2", 0, rbmodel.dump_payload(rbmodel.module_object("MBbloom--", 2, enc2)))
    assert all(mexists(r, "BF.MEXISTS", "o2", zs))
    assert r.bf().info("o2").expansionRate == 2


def test_rdb_file_from_redisbloom_loads(srv):
    """A server started on an RDB file holding RedisBloom's types keeps the
    keys, and saves them so that they load again."""
    chain = rbmodel.Chain(500, 0.01)
    xs = items("file-bf", 800)
    for x in xs:
        chain.add(x)
    cuckoo = rbmodel.Cuckoo(1024)
    ys = items("file-cf", 600)
    for y in ys:
        cuckoo.add(y)
    s = Server(rdb=True)
    try:
        with open(os.path.join(s.dir, "dump.rdb"), "wb") as f:
            f.write(rbmodel.rdb_file({
                b"bf": rbmodel.module_object("MBbloom--", 4, chain.rdb_value),
                b"cf": rbmodel.module_object("MBbloomCF", 4, cuckoo.rdb_value)}))
        s.start()
        r = s.client()
        assert all(mexists(r, "BF.MEXISTS", "bf", xs))
        assert all(mexists(r, "CF.MEXISTS", "cf", ys))
        r.execute_command("BF.ADD", "bf", "added-here")
        r.execute_command("DEBUG", "RELOAD")
        assert all(mexists(r, "BF.MEXISTS", "bf", xs + [b"added-here"]))
        assert all(mexists(r, "CF.MEXISTS", "cf", ys))
        assert r.type("bf") == b"MBbloom--" and r.type("cf") == b"MBbloomCF"
    finally:
        s.stop()
        s.cleanup()


def test_malformed_dumps_refused(srv):
    r = srv.client()
    model = rbmodel.Chain(300, 0.01)
    for x in items("bad", 400):
        model.add(x)
    chunks = model.scandump(limit=1000)
    hdr = chunks[0][1]
    for trial in range(200):
        h = bytearray(hdr)
        if trial % 4 == 0:
            h = h[:RNG.randrange(len(h))]
        else:
            for _ in range(1 + trial % 3):
                h[RNG.randrange(len(h))] ^= 1 << RNG.randrange(8)
        r.delete("m")
        try:
            r.execute_command("BF.LOADCHUNK", "m", 1, bytes(h))
        except redis.exceptions.ResponseError:
            assert r.exists("m") == 0
            continue
        # accepted: the header was still consistent; chunks then fit or not
        for it, data in chunks[1:]:
            try:
                r.execute_command("BF.LOADCHUNK", "m", it, data)
            except redis.exceptions.ResponseError:
                break
        if r.exists("m"):
            try:
                assert r.execute_command("BF.EXISTS", "m", "x") in (0, 1)
            except redis.exceptions.ResponseError as e:
                assert "being loaded" in str(e), e  # a chunk was refused
    assert r.ping()
    # chunk out of order, too big, after completion
    r.delete("m")
    r.execute_command("BF.LOADCHUNK", "m", 1, hdr)
    expect_error(r.execute_command, "BF.EXISTS", "m", "x", match="being loaded")
    expect_error(r.execute_command, "BF.LOADCHUNK", "m", chunks[2][0], chunks[2][1],
                 match="out of order")
    expect_error(r.execute_command, "BF.LOADCHUNK", "m", chunks[1][0] + 10 ** 9, b"x" * 10,
                 match="out of order")
    load_chunks(r, "BF.LOADCHUNK", "m", chunks[1:])
    expect_error(r.execute_command, "BF.LOADCHUNK", "m", chunks[1][0], chunks[1][1],
                 match="complete")
    # cuckoo: bad header sizes and shapes
    expect_error(r.execute_command, "CF.LOADCHUNK", "c", 1, b"x" * 37, match="Invalid header")
    bad = rbmodel.Cuckoo(100)
    h = bytearray(bad.header())
    h[8] = 3  # 3 buckets: not a power of two
    expect_error(r.execute_command, "CF.LOADCHUNK", "c", 1, bytes(h), match="Couldn't create filter!")
    # RDB payloads: byte flips and truncations, resealed
    cuckoo = rbmodel.Cuckoo(256)
    for y in items("bad-cf", 100):
        cuckoo.add(y)
    objs = [rbmodel.module_object("MBbloom--", 4, model.rdb_value),
            rbmodel.module_object("MBbloomCF", 4, cuckoo.rdb_value)]
    for trial in range(120):
        o = bytearray(objs[trial % 2])
        if trial % 3 == 0:
            o = o[:RNG.randrange(1, len(o))]
        else:
            p = RNG.randrange(10, min(len(o), 400))
            o[p] ^= 1 << RNG.randrange(8)
        try:
            r.restore("rx%d" % trial, 0, rbmodel.dump_payload(bytes(o)))
            r.execute_command("BF.EXISTS" if trial % 2 == 0 else "CF.EXISTS", "rx%d" % trial, "x")
        except redis.exceptions.ResponseError:
            pass
        assert r.ping()


def test_types_can_be_left_out(srv):
    s = Server(module_args=["REDISBLOOM_TYPES", "no"])
    s.start()
    try:
        r = s.client()
        model = rbmodel.Chain(100, 0.01)
        expect_error(r.execute_command, "BF.LOADCHUNK", "k", 1, model.header(), match="")
    finally:
        s.stop()
        s.cleanup()


# ---- RedisBloom 2.4's flow tests (tests/flow/test_cuckoo.py) ----

def test_cf_header_only_loadchunk_is_usable(srv):
    """test_number_of_buckets_does_not_overflow: a key made from a CF
    header alone takes commands at once (its buckets empty), as in
    RedisBloom; it persists, and its chunks may still follow in order."""
    r = srv.client()
    hdr = struct.pack("<QQQQHHH", 0, 1 << 10, 0, 1, 1, 1, 1)
    assert r.execute_command("CF.LOADCHUNK", "cf", 1, hdr) == b"OK"
    assert r.execute_command("CF.INSERT", "cf", "ITEMS", *["1"] * 10) == [1] * 10
    assert r.execute_command("CF.COUNT", "cf", "1") == 10
    assert r.execute_command("CF.EXISTS", "cf", "2") == 0
    r.execute_command("DEBUG", "RELOAD")
    assert r.execute_command("CF.COUNT", "cf", "1") == 10
    # a RedisBloom dump: after its header the key answers; the chunks then load
    model = rbmodel.Cuckoo(256, bucket_size=2, max_iterations=20, expansion=2)
    xs = items("hdr", 400)
    for x in xs:
        model.add(x)
    chunks = model.scandump(limit=100)
    r.execute_command("CF.LOADCHUNK", "m", *chunks[0])
    assert r.execute_command("CF.EXISTS", "m", xs[0]) == 0
    assert r.execute_command("CF.INFO", "m")[7] == model.items
    load_chunks(r, "CF.LOADCHUNK", "m", chunks[1:])
    assert all(mexists(r, "CF.MEXISTS", "m", xs))
    expect_error(r.execute_command, "CF.LOADCHUNK", "m", *chunks[1], match="Couldn't load chunk!")


if __name__ == "__main__":
    run(globals())
