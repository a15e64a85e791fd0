"""Writes fuzz/corpus/redis_chunks/rb_*.bin: RedisBloom-layout inputs for
fuzz/fuzz_redis_chunks.c (its "RBBF"/"RBCF" SCANDUMP framing and "RBRB"/
"RBRC" RDB framing), built with rbmodel.py, plus truncated and flipped
copies.  (bf_v2_*.bin, the module's own BF dumps in envelope version 2, come
from BF.SCANDUMP of a running server.)

    python3 redis/tests/gen_fuzz_corpus.py fuzz/corpus/redis_chunks
"""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rbmodel  # noqa: E402


class Stream:
    """The fuzz target's RDB stream: u64, double, u32-length strings."""

    def __init__(self):
        self.out = b""

    def uint(self, v):
        self.out += struct.pack("<Q", v)

    def double(self, v):
        self.out += struct.pack("<d", v)

    def string(self, b):
        self.out += struct.pack("<I", len(b)) + b


def main(outdir):
    rng = random.Random(26)
    chain = rbmodel.Chain(50, 0.01, growth=2)
    for i in range(180):
        chain.add(b"item-%d" % i)
    old = rbmodel.Chain(40, 0.05, 0, 3)
    for i in range(100):
        old.add(b"old-%d" % i)
    cuckoo = rbmodel.Cuckoo(64, bucket_size=2, expansion=2)
    for i in range(100):
        cuckoo.add(b"cf-%d" % i)
    files = {}
    for name, m, tag in (("rb_bf", chain, b"RBBF"), ("rb_bf_pow2", old, b"RBBF"),
                         ("rb_cf", cuckoo, b"RBCF")):
        parts = m.scandump()
        hdr = parts[0][1]
        body = b"".join(d for _, d in parts[1:])
        files[name] = tag + struct.pack("<I", len(hdr)) + hdr + body
        s = Stream()
        m.rdb_value(s)
        files[name + "_rdb"] = (b"RBRB" if tag == b"RBBF" else b"RBRC") + b"\x04" + s.out
    for name in list(files):
        data = files[name]
        files[name + "_truncated"] = data[:len(data) * 2 // 3]
        b = bytearray(data)
        for _ in range(3):
            b[rng.randrange(8, min(len(b), 200))] ^= 1 << rng.randrange(8)
        files[name + "_bitflip"] = bytes(b)
    for name, data in files.items():
        with open(os.path.join(outdir, name + ".bin"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
