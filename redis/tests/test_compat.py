"""What a client written for RedisBloom 2.4 meets: the arguments it accepts
(EXPANSION, small CF capacities), the debugging commands and their reply
shapes, the module name, the empty CF dump, LOADCHUNK's messages, and the
memory and rate of the default scaling filter."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from harness import Server, assert_count, bf_rate_now, expect_error, run, seed  # noqa: E402

RNG = seed()


def items(prefix, n):
    return [("%s:%d:%d" % (prefix, i, RNG.randrange(1 << 30))).encode() for i in range(n)]


def madd(r, key, xs, chunk=5000):
    out = []
    for i in range(0, len(xs), chunk):
        out += r.execute_command("BF.MADD", key, *xs[i:i + chunk])
    return out


def mexists(r, cmd, key, xs, chunk=5000):
    out = []
    for i in range(0, len(xs), chunk):
        out += r.execute_command(cmd, key, *xs[i:i + chunk])
    return out


def raw_error(srv, *args):
    """The error line exactly as the server sends it (RESP "-..." without
    the CRLF): no client library strips the code or trims spaces."""
    import socket
    cmd = b"*%d\r\n" % len(args)
    for a in args:
        a = str(a).encode() if not isinstance(a, bytes) else a
        cmd += b"$%d\r\n%s\r\n" % (len(a), a)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
        s.sendall(cmd)
        buf = b""
        while not buf.endswith(b"\r\n"):
            chunk = s.recv(4096)
            assert chunk, "connection closed"
            buf += chunk
    assert buf.startswith(b"-"), buf
    return buf[1:-2].decode()


def test_bf_refusal_texts_as_redisbloom(srv):
    """BF.RESERVE, BF.INSERT and BF.LOADCHUNK refusals of impossible
    capacities, rates and headers: RedisBloom 2.4's texts (src/rebloom.c
    and src/sb.c), with this module's ERR code in front where RedisBloom
    sends none (a client library shows the same message)."""
    r = srv.client()
    res = "BF.RESERVE"
    assert raw_error(srv, res, "k", 0, 100) == "ERR (0 < error rate range < 1) "
    assert raw_error(srv, res, "k", 1, 100) == "ERR (0 < error rate range < 1) "
    assert raw_error(srv, res, "k", "x", 100) == "ERR bad error rate"
    assert raw_error(srv, res, "k", 0.01, 0) == "ERR (capacity should be larger than 0)"
    assert raw_error(srv, res, "k", 0.01, -5) == "ERR (capacity should be larger than 0)"
    assert raw_error(srv, res, "k", 0.01, "x") == "ERR bad capacity"
    assert raw_error(srv, res, "k", 0.01, 2 ** 64) == "ERR bad capacity"
    # too large for one filter: RedisBloom's text for a filter it cannot
    # create (for these sizes RedisBloom itself aborts the server in calloc)
    for cap in (10 ** 15, 2 ** 63 - 1):
        assert raw_error(srv, res, "k", 0.01, cap) == "ERR could not create filter"
        assert raw_error(srv, "BF.INSERT", "k", "CAPACITY", cap, "ITEMS", "a") == \
            "ERR could not create filter"
    assert raw_error(srv, res, "k", 0.01, 100, "EXPANSION") == "ERR no expansion"
    assert raw_error(srv, res, "k", 0.01, 100, "EXPANSION", "x") == "ERR bad expansion"
    assert raw_error(srv, res, "k", 0.01, 100, "EXPANSION", 0) == \
        "ERR expansion should be greater or equal to 1"
    ins = ("BF.INSERT", "k")
    assert raw_error(srv, *ins, "CAPACITY", "x", "ITEMS", "a") == "ERR Bad capacity"
    assert raw_error(srv, *ins, "CAPACITY", 0, "ITEMS", "a") == "ERR Bad argument received"
    assert raw_error(srv, *ins, "ERROR", "x", "ITEMS", "a") == "ERR Bad error rate"
    assert raw_error(srv, *ins, "ERROR", 1.5, "ITEMS", "a") == "ERR Bad argument received"
    assert raw_error(srv, *ins, "EXPANSION", "x", "ITEMS", "a") == "ERR Bad expansion"
    assert raw_error(srv, *ins, "EXPANSION", 0, "ITEMS", "a") == "ERR Bad argument received"
    assert r.exists("k") == 0, "a refused command created the key"
    # invalid headers at iterator 1: "received bad data", whatever is wrong
    # (the corruptions of RedisBloom's test_scandump_invalid_header, on a
    # dump of this module's layout, plus short and truncated ones)
    r.execute_command(res, "src", 0.01, 5)
    for i in range(50):
        r.execute_command("BF.ADD", "src", "foo%d" % i)
    hdr = r.execute_command("BF.SCANDUMP", "src", 0)[1]
    bad = [b"x", hdr[:-1], hdr + b"\0", b"\xff" * len(hdr)]
    for spans in (((72, 8, 0),), ((12, 4, 255),), ((0, 4, 255),), ((36, 8, 255), (0, 8, 255))):
        a = bytearray(hdr)
        for at, n, v in spans:
            a[at:at + n] = bytes([v]) * n
        bad.append(bytes(a))
    for b in bad:
        assert raw_error(srv, "BF.LOADCHUNK", "dst", 1, b) == "ERR received bad data", b
    assert r.exists("dst") == 0


def test_expansion_values(srv):
    r = srv.client()
    bf = r.bf()
    assert bf.create("big", 0.01, 10, expansion=30000)
    assert bf.info("big").expansionRate == 30000
    # the first new item past 10 opens a link of 300000 (an add that is a
    # false positive of the first link does not count, so add until it opens)
    for x in items("x", 100):
        r.execute_command("BF.ADD", "big", x)
        if bf.info("big").filterNum == 2:
            break
    assert bf.info("big").filterNum == 2 and bf.info("big").capacity == 10 + 300000
    for e in (0, -1):
        expect_error(r.execute_command, "BF.RESERVE", "e%d" % e, 0.01, 10, "EXPANSION", e,
                     match="expansion should be greater or equal to 1")
        expect_error(r.execute_command, "BF.INSERT", "i%d" % e, "EXPANSION", e, "ITEMS", "a",
                     match="Bad argument received")
    assert r.execute_command("BF.INSERT", "ins", "EXPANSION", 5000, "ITEMS", "a") == [1]
    assert bf.info("ins").expansionRate == 5000


def test_cf_small_capacities(srv):
    r = srv.client()
    cf = r.cf()
    assert cf.create("c4", 4)
    assert cf.add("c4", "a") == 1 and cf.exists("c4", "a") == 1
    assert r.execute_command("CF.RESERVE", "c4b", 4, "BUCKETSIZE", 2) in (True, b"OK")
    expect_error(r.execute_command, "CF.RESERVE", "c3", 3, match="Capacity must be at least")
    expect_error(r.execute_command, "CF.RESERVE", "c5", 5, "BUCKETSIZE", 4,
                 match="Capacity must be at least")
    assert r.execute_command("CF.INSERT", "ci", "CAPACITY", 4, "ITEMS", "a", "b") == [1, 1]
    expect_error(r.execute_command, "CF.INSERT", "cj", "CAPACITY", 3, "ITEMS", "a",
                 match="Capacity must be at least")


def test_bf_debug_shape(srv):
    r = srv.client()
    r.execute_command("BF.RESERVE", "d", 0.01, 100)
    madd(r, "d", items("d", 250))
    lines = [x.decode() for x in r.execute_command("BF.DEBUG", "d")]
    n = r.bf().info("d").filterNum
    card = r.execute_command("BF.CARD", "d")
    assert len(lines) == 1 + n and lines[0] == "size:%d" % card
    total = 0
    for ln in lines[1:]:
        f = dict(kv.split(":") for kv in ln.split(" "))
        assert list(f) == ["bytes", "bits", "hashes", "hashwidth", "capacity", "size", "ratio"]
        assert int(f["bits"]) <= 8 * int(f["bytes"]) and int(f["size"]) <= int(f["capacity"])
        total += int(f["size"])
    assert total == card
    expect_error(r.execute_command, "BF.DEBUG", "missing", match="not found")


def test_cf_debug_and_compact(srv):
    r = srv.client()
    r.execute_command("CF.RESERVE", "c", 1000, "EXPANSION", 1)
    xs = items("c", 500)
    assert r.execute_command("CF.INSERT", "c", "ITEMS", *xs) == [1] * 500
    for x in xs[:10]:
        assert r.execute_command("CF.DEL", "c", x) == 1
    d = r.execute_command("CF.DEBUG", "c").decode()
    i = r.cf().info("c")
    assert d == ("bktsize:%d buckets:%d items:%d deletes:10 filters:%d max_iterations:%d "
                 "expansion:%d" % (i.bucketSize, i.bucketNum, i.insertedNum, i.filterNum,
                                   i.maxIteration, i.expansionRate)), d
    assert r.execute_command("CF.COMPACT", "c") == b"OK"
    assert r.cf().info("c").deletedNum == 0
    assert all(mexists(r, "CF.MEXISTS", "c", xs[10:]))
    expect_error(r.execute_command, "CF.COMPACT", "missing", match="Cuckoo filter was not found")
    expect_error(r.execute_command, "CF.DEBUG", "missing", match="not found")


def test_cf_scandump_empty(srv):
    r = srv.client()
    r.execute_command("CF.RESERVE", "e", 100)
    assert r.execute_command("CF.SCANDUMP", "e", 0) == [0, None]
    assert r.cf().scandump("e", 0) == [0, None]


def module_names(r):
    out = []
    for m in r.execute_command("MODULE", "LIST"):
        d = m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))
        out.append(d[b"name"])
    return out


def test_module_name_option(srv):
    r = srv.client()
    assert module_names(r) == [b"dedup"]
    s = Server(module_args=["MODULE_NAME", "bf"])
    s.start()
    try:
        c = s.client()
        assert module_names(c) == [b"bf"]
        assert c.bf().add("k", "x") == 1
    finally:
        s.stop()
        s.cleanup()


def test_truncated_last_chunk_says_so(srv):
    r = srv.client()
    r.execute_command("BF.RESERVE", "src", 0.01, 1000)
    madd(r, "src", items("t", 500))
    chunks, it = [], 0
    while True:
        it, data = r.bf().scandump("src", it)
        if it == 0:
            break
        chunks.append((it, data))
    for it, data in chunks[:-1]:
        r.bf().loadchunk("dst", it, data)
    it, data = chunks[-1]
    expect_error(r.execute_command, "BF.LOADCHUNK", "dst", it, data[:-5], match="truncated")
    assert r.execute_command("BF.LOADCHUNK", "dst", it, data) == b"OK"
    assert r.execute_command("BF.EXISTS", "dst", "nope") in (0, 1)


def test_default_scaling_filter_memory_and_rate(srv):
    """BF.RESERVE k 0.01 N (scaling, the default): <= 11.1 bits per item at
    N, measured rate <= 1%; after growing to 7N the rate is still <= 1%."""
    r = srv.client()
    n, p = 100000, 0.01
    r.execute_command("BF.RESERVE", "s", p, n)
    xs = items("s", n)
    # an add answers 0 for a false positive of the items before it
    assert sum(madd(r, "s", xs)) >= n * (1 - p)
    size = r.bf().info("s").size
    bits = size * 8 / n
    assert bits <= 11.1, bits
    fresh = items("s-out", 200000)
    fp = sum(mexists(r, "BF.MEXISTS", "s", fresh))
    assert_count("fresh keys present at N", fp, len(fresh) * bf_rate_now(r, "s"))
    ys = items("s-more", 6 * n)
    madd(r, "s", ys)
    assert r.bf().info("s").filterNum >= 3
    assert all(mexists(r, "BF.MEXISTS", "s", xs + ys))
    fp = sum(mexists(r, "BF.MEXISTS", "s", fresh))
    now = bf_rate_now(r, "s")
    assert now <= p, now
    assert_count("fresh keys present at 7N", fp, len(fresh) * now)
    print("  scaling BF at 1%%: %.2f bits/item at capacity; %d/%d fresh positives after 7x"
          % (bits, fp, len(fresh)))


def test_small_key_overhead(srv):
    """MEMORY USAGE of a 100-item BF and CF (RedisBloom's default size) stays
    under 1.2 KB (the cuckoo object's links and kick path are no longer
    fixed tables of 64 links and 500 bytes)."""
    r = srv.client()
    r.execute_command("BF.RESERVE", "b", 0.01, 100)
    madd(r, "b", items("b", 100))
    r.execute_command("CF.RESERVE", "c", 100)
    r.execute_command("CF.INSERT", "c", "ITEMS", *items("c", 100))
    mb, mc = r.memory_usage("b"), r.memory_usage("c")
    print("  MEMORY USAGE: 100-item BF %d bytes, CF %d bytes" % (mb, mc))
    assert mb <= 1200, mb
    assert mc <= 1200, mc


if __name__ == "__main__":
    run(globals())
