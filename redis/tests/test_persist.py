#!/usr/bin/python3
"""Persistence, replication and hostile payloads: DEBUG RELOAD, restart from
RDB and from AOF (with and without rewrite), DUMP/RESTORE, a replica, and
corrupted LOADCHUNK/RESTORE payloads that must never crash the server."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from harness import Server, expect_error, run, seed  # noqa: E402

RNG = seed()
PROBE = ["p%d" % i for i in range(3000)]
HAVE_CF = os.environ.get("DEDUP_REDIS_NO_CF") is None


def populate(r):
    """Creates one key of every kind and shape; returns nothing."""
    r.execute_command("BF.RESERVE", "bf:scaling", 0.01, 200, "EXPANSION", 2)
    r.execute_command("BF.MADD", "bf:scaling", *["s%d" % i for i in range(1500)])
    r.execute_command("BF.RESERVE", "bf:fixed", 0.001, 1000, "NONSCALING")
    r.execute_command("BF.MADD", "bf:fixed", *["f%d" % i for i in range(700)])
    r.execute_command("BF.ADD", "bf:auto", "x")
    r.execute_command("DEDUP.RESERVE", "dd", 3600000, 0.01, 1000)
    r.execute_command("DEDUP.MADD", "dd", *["d%d" % i for i in range(400)])
    r.execute_command("DEDUP.RESERVE", "dx", 3600000, 0.01, 10, "EXACT")
    r.execute_command("DEDUP.MADD", "dx", *["d%d" % i for i in range(300)])
    if has_cf(r):
        r.execute_command("CF.RESERVE", "cf", 1000, "EXPANSION", 1)
        r.execute_command("CF.INSERT", "cf", "ITEMS", *["c%d" % i for i in range(1500)])
        r.execute_command("CF.DEL", "cf", "c7")
        r.execute_command("CF.ADD", "cf", "c8")
    # a LOADCHUNK in progress (header only) must survive too
    it, hdr = r.execute_command("BF.SCANDUMP", "bf:fixed", 0)
    r.execute_command("BF.LOADCHUNK", "bf:partial", it, hdr)


def has_cf(r):
    try:
        r.execute_command("CF.EXISTS", "nokey", "x")
        return True
    except redis.exceptions.ResponseError:
        return False


def dd_info(info):
    """DEDUP.INFO without 'Size': a window is loaded compacted, so a value
    may hold fewer bytes after a reload (test_dedup checks it is not more)."""
    return info[:10] + info[12:14]


def snapshot(r):
    """Every answer a client can see, per key."""
    out = {}
    for key in sorted(k.decode() for k in r.keys("*")):
        t = r.type(key).decode()
        if key == "bf:partial":
            out[key] = (t, "partial")
            continue
        if t == "dedup-BF1":
            out[key] = (t, r.execute_command("BF.INFO", key),
                        r.execute_command("BF.MEXISTS", key, *PROBE),
                        r.execute_command("BF.MEXISTS", key, *["s%d" % i for i in range(1500)]))
        elif t == "dedup-DD1":
            info = r.execute_command("DEDUP.INFO", key)
            pipe = r.pipeline(transaction=False)
            for x in PROBE + ["d%d" % i for i in range(400)]:
                pipe.execute_command("DEDUP.EXISTS", key, x)
            out[key] = (t, dd_info(info), pipe.execute())
        elif t == "dedup-CF1":
            pipe = r.pipeline(transaction=False)
            for x in PROBE[:300] + ["c%d" % i for i in range(20)]:
                pipe.execute_command("CF.COUNT", key, x)
            out[key] = (t, r.execute_command("CF.INFO", key),
                        r.execute_command("CF.MEXISTS", key, *PROBE), pipe.execute())
        else:
            out[key] = (t,)
    return out


def check_partial_survives(r):
    # the partial key still accepts the rest of its dump and becomes whole
    it = 89
    while True:
        it2, data = r.execute_command("BF.SCANDUMP", "bf:fixed", it)
        if it2 == 0:
            break
        r.execute_command("BF.LOADCHUNK", "bf:partial", it2, data)
        it = it2
    assert r.execute_command("BF.INFO", "bf:partial") == r.execute_command("BF.INFO", "bf:fixed")


def test_debug_reload(srv):
    r = srv.client()
    populate(r)
    before = snapshot(r)
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert snapshot(r) == before
    check_partial_survives(r)


def test_restart_from_rdb(srv):
    s = Server()
    try:
        r = s.start().client()
        populate(r)
        before = snapshot(r)
        s.stop(save=True)
        assert os.path.exists(os.path.join(s.dir, "dump.rdb"))
        r = s.start().client()
        assert snapshot(r) == before
        check_partial_survives(r)
    finally:
        s.cleanup()


def wait_rewrite(r):
    for _ in range(600):
        i = r.info("persistence")
        if not i["aof_rewrite_in_progress"] and not i["aof_rewrite_scheduled"]:
            return
        time.sleep(0.05)
    raise AssertionError("AOF rewrite did not finish")


def test_restart_from_aof(srv):
    # Without the RDB preamble a rewrite writes our LOADCHUNK commands.
    s = Server(appendonly=True, server_args=["--aof-use-rdb-preamble", "no"])
    try:
        r = s.start().client()
        populate(r)
        before = snapshot(r)
        s.stop()  # NOSAVE: only the AOF (plain commands) remains
        r = s.start().client()
        assert snapshot(r) == before
        # rewrite: each filter becomes LOADCHUNK commands
        r.execute_command("BGREWRITEAOF")
        wait_rewrite(r)
        aofdir = os.path.join(s.dir, "appendonlydir")
        text = b"".join(open(os.path.join(aofdir, f), "rb").read() for f in os.listdir(aofdir))
        assert b"BF.LOADCHUNK" in text and b"DEDUP.LOADCHUNK" in text
        r.execute_command("BF.ADD", "bf:auto", "after-rewrite")
        before = snapshot(r)
        s.stop()
        r = s.start().client()
        assert snapshot(r) == before
        check_partial_survives(r)
    finally:
        s.cleanup()


def test_restart_from_aof_with_rdb_preamble(srv):
    # Redis 7's default: the rewrite writes an RDB base (our rdb_save), then
    # commands are appended to an incremental file.
    s = Server(appendonly=True)
    try:
        r = s.start().client()
        populate(r)
        r.execute_command("BGREWRITEAOF")
        wait_rewrite(r)
        r.execute_command("BF.MADD", "bf:auto", "y1", "y2")
        r.execute_command("DEDUP.ADD", "dx", "after")
        before = snapshot(r)
        s.stop()
        r = s.start().client()
        assert snapshot(r) == before
    finally:
        s.cleanup()


def test_replication(srv):
    r = srv.client()
    r.config_set("repl-diskless-sync-delay", 0)
    rep = Server()
    try:
        rr = rep.start().client()
        rr.execute_command("REPLICAOF", "127.0.0.1", srv.port)
        for _ in range(200):
            if rr.info("replication").get("master_link_status") == "up":
                break
            time.sleep(0.05)
        populate(r)
        r.execute_command("DEDUP.ADD", "dd", "late")
        r.execute_command("WAIT", 1, 5000)
        assert snapshot(rr) == snapshot(r)
    finally:
        rep.cleanup()


def test_dump_restore_roundtrip(srv):
    r = srv.client()
    populate(r)
    for key in ("bf:scaling", "bf:fixed", "dd", "dx") + (("cf",) if has_cf(r) else ()):
        payload = r.dump(key)
        r.restore(key + ":copy", 0, payload)
        t = r.type(key).decode()
        if t == "dedup-BF1":
            assert r.execute_command("BF.MEXISTS", key + ":copy", *PROBE) == \
                r.execute_command("BF.MEXISTS", key, *PROBE)
            assert r.execute_command("BF.INFO", key + ":copy") == \
                r.execute_command("BF.INFO", key)
    assert r.execute_command("COPY", "bf:scaling", "bf:copied") == 1
    assert r.execute_command("BF.INFO", "bf:copied") == r.execute_command("BF.INFO", "bf:scaling")
    assert r.execute_command("BF.ADD", "bf:copied", "only-in-copy") == 1
    assert r.execute_command("BF.EXISTS", "bf:scaling", "only-in-copy") == 0


# ---- hostile payloads ---------------------------------------------------------

def crc64(data):
    """Redis's CRC-64 (Jones polynomial, reflected, init 0, no final xor)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x95AC9329AC4BC9B5 if crc & 1 else 0)
    return crc


def reseal(body):
    """A DUMP payload from its body (type byte, value, RDB version)."""
    return body + crc64(body).to_bytes(8, "little")


def test_corrupted_restore_is_an_error(srv):
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA
    r = srv.client()
    r.execute_command("BF.RESERVE", "bf", 0.01, 64, "EXPANSION", 2)
    r.execute_command("BF.MADD", "bf", *["x%d" % i for i in range(200)])
    r.execute_command("DEDUP.RESERVE", "dd", 60000, 0.1, 20)
    r.execute_command("DEDUP.MADD", "dd", "a", "b")
    r.execute_command("DEDUP.RESERVE", "dx", 60000, 0.1, 20, "EXACT")
    r.execute_command("DEDUP.MADD", "dx", "a", "b", "c")
    r.execute_command("CF.RESERVE", "cf", 100)
    r.execute_command("CF.INSERT", "cf", "ITEMS", "a", "b", "c")
    rejected = 0
    for key in ("bf", "dd", "dx", "cf"):
        payload = r.dump(key)
        body = payload[:-8]
        assert reseal(body) == payload
        n = len(body)
        for trial in range(150):
            b = bytearray(body)
            kind = trial % 3
            if kind == 0:      # flip bytes anywhere past the module type id
                for _ in range(RNG.randrange(1, 4)):
                    b[RNG.randrange(10, n - 2)] ^= 1 << RNG.randrange(8)
            elif kind == 1:    # truncate (keep the RDB version trailer)
                cut = RNG.randrange(10, n - 2)
                b = b[:cut] + b[-2:]
            else:              # random garbage in a window
                at = RNG.randrange(10, n - 2)
                for i in range(at, min(n - 2, at + 16)):
                    b[i] = RNG.randrange(256)
            try:
                r.restore("victim", 0, reseal(bytes(b)), replace=True)
                # A mutation that still parses must give a usable filter.
                t = r.type("victim").decode()
                if t == "dedup-BF1":
                    r.execute_command("BF.INFO", "victim")
                    r.execute_command("BF.MEXISTS", "victim", *PROBE[:50])
                    r.execute_command("BF.MADD", "victim", *PROBE[:50])
                elif t == "dedup-DD1":
                    r.execute_command("DEDUP.INFO", "victim")
                    r.execute_command("DEDUP.MADD", "victim", *PROBE[:50])
                elif t == "dedup-CF1":
                    r.execute_command("CF.INFO", "victim")
                    r.execute_command("CF.INSERT", "victim", "ITEMS", *PROBE[:50])
            except redis.exceptions.ResponseError:
                rejected += 1
            assert r.ping()
        r.delete("victim")
    assert rejected >= 500, rejected
    assert srv.alive()


def test_corrupted_loadchunk_other_kinds(srv):
    r = srv.client()
    r.execute_command("CF.RESERVE", "cf", 500, "EXPANSION", 1)
    r.execute_command("CF.INSERT", "cf", "ITEMS", *["x%d" % i for i in range(800)])
    r.execute_command("DEDUP.RESERVE", "dd", 60000, 0.01, 200)
    r.execute_command("DEDUP.MADD", "dd", *["x%d" % i for i in range(100)])
    r.execute_command("DEDUP.RESERVE", "dx", 60000, 0.01, 200, "EXACT")
    r.execute_command("DEDUP.MADD", "dx", *["x%d" % i for i in range(100)])
    for fam, key in (("CF", "cf"), ("DEDUP", "dd"), ("DEDUP", "dx")):
        chunks, it = [], 0
        while True:
            it, data = r.execute_command(fam + ".SCANDUMP", key, it)
            if it == 0:
                break
            chunks.append((it, data))
        hdr_it, hdr = chunks[0]
        body = b"".join(d for _, d in chunks[1:])
        for trial in range(60):
            b = bytearray(body)
            if trial % 3 == 2:
                b = b[:RNG.randrange(1, len(b))]
            else:
                for _ in range(RNG.randrange(1, 4)):
                    b[RNG.randrange(len(b))] ^= 1 << RNG.randrange(8)
            assert r.execute_command(fam + ".LOADCHUNK", "v", hdr_it, hdr) == b"OK"
            try:
                r.execute_command(fam + ".LOADCHUNK", "v", hdr_it + len(b), bytes(b))
                assert trial % 3 == 2, "a corrupted dump was accepted"
                # a truncated dump is simply incomplete: the key stays loading
                expect_error(r.execute_command, fam + ".INFO", "v", match="being loaded")
            except redis.exceptions.ResponseError:
                assert r.exists("v") == 0
            r.delete("v")
        # the intact dump loads and answers like the original
        for it, data in chunks:
            r.execute_command(fam + ".LOADCHUNK", key + ":copy", it, data)
        same = dd_info if fam == "DEDUP" else (lambda v: v[:14])
        assert same(r.execute_command(fam + ".INFO", key + ":copy")) == \
            same(r.execute_command(fam + ".INFO", key))
    assert srv.alive()


def test_corrupted_loadchunk_is_an_error(srv):
    r = srv.client()
    r.execute_command("BF.RESERVE", "bf", 0.01, 300, "EXPANSION", 2)
    r.execute_command("BF.MADD", "bf", *["x%d" % i for i in range(1000)])
    chunks = []
    it = 0
    while True:
        it, data = r.execute_command("BF.SCANDUMP", "bf", it)
        if it == 0:
            break
        chunks.append((it, data))
    hdr_it, hdr = chunks[0]
    body = b"".join(d for _, d in chunks[1:])
    # headers: random, truncated, bit flips (its checksum catches them)
    for trial in range(200):
        h = bytearray(hdr)
        if trial % 2:
            h[RNG.randrange(len(h))] ^= 1 << RNG.randrange(8)
        else:
            h = bytearray(RNG.randrange(256) for _ in range(RNG.randrange(0, 120)))
        expect_error(r.execute_command, "BF.LOADCHUNK", "v", 1 + len(h), bytes(h))
        assert r.exists("v") == 0
    # valid header, corrupted body: rejected when the dump completes
    for trial in range(100):
        b = bytearray(body)
        for _ in range(RNG.randrange(1, 4)):
            b[RNG.randrange(len(b))] ^= 1 << RNG.randrange(8)
        assert r.execute_command("BF.LOADCHUNK", "v", hdr_it, hdr) == b"OK"
        expect_error(r.execute_command, "BF.LOADCHUNK", "v", hdr_it + len(b), bytes(b))
        assert r.exists("v") == 0, "a rejected dump must not leave a key"
    # chunks out of order, past the end, and huge iterators
    r.execute_command("BF.LOADCHUNK", "v", hdr_it, hdr)
    expect_error(r.execute_command, "BF.LOADCHUNK", "v", hdr_it + 10 + 5, b"12345",
                 match="out of order")
    expect_error(r.execute_command, "BF.LOADCHUNK", "v", hdr_it + len(body) + 1, body + b"!",
                 match="past the end")
    expect_error(r.execute_command, "BF.LOADCHUNK", "v", (1 << 63) - 1, b"abc")
    expect_error(r.execute_command, "BF.LOADCHUNK", "v", -5, b"abc", match="invalid iterator")
    expect_error(r.execute_command, "BF.ADD", "v", "a", match="being loaded")
    expect_error(r.execute_command, "BF.EXISTS", "v", "a", match="being loaded")
    # the in-progress load can still complete correctly
    assert r.execute_command("BF.LOADCHUNK", "v", hdr_it + len(body), body) == b"OK"
    assert r.execute_command("BF.INFO", "v") == r.execute_command("BF.INFO", "bf")
    assert srv.alive()


if __name__ == "__main__":
    run(globals())
