"""RedisBloom 2.4's filters, modelled from its documented layout, to build
the dumps and RDB payloads a RedisBloom server would hand over: a scalable
Bloom chain (BF.*) and a cuckoo filter (CF.*), with their SCANDUMP headers
and chunks and their RDB encodings ("MBbloom--" and "MBbloomCF", encoding
version 4), and a DUMP payload / RDB file around them.  Written here from
the layout (see redis/rm_redisbloom.h), not taken from RedisBloom."""
import math
import struct

M64 = (1 << 64) - 1


def murmur64a(data, seed):
    m = 0xc6a4a7935bd1e995
    n = len(data)
    h = (seed ^ (n * m)) & M64
    for i in range(0, n - n % 8, 8):
        k = int.from_bytes(data[i:i + 8], "little")
        k = (k * m) & M64
        k ^= k >> 47
        k = (k * m) & M64
        h ^= k
        h = (h * m) & M64
    tail = data[n - n % 8:]
    if tail:
        for i in range(len(tail) - 1, -1, -1):
            h ^= tail[i] << (8 * i)
        h = (h * m) & M64
    h ^= h >> 47
    h = (h * m) & M64
    h ^= h >> 47
    return h


def murmur2(data, seed):
    m = 0x5bd1e995
    M = 0xffffffff
    n = len(data)
    h = (seed ^ n) & M
    i = 0
    while n - i >= 4:
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & M
        k ^= k >> 24
        k = (k * m) & M
        h = (h * m) & M
        h ^= k
        i += 4
    rest = n - i
    if rest == 3:
        h ^= data[i + 2] << 16
    if rest >= 2:
        h ^= data[i + 1] << 8
    if rest >= 1:
        h ^= data[i]
        h = (h * m) & M
    h ^= h >> 13
    h = (h * m) & M
    h ^= h >> 15
    return h


NOROUND, ENTS_IS_BITS, FORCE64, NO_SCALING = 1, 2, 4, 8


class Link:
    def __init__(self, entries, error, options):
        self.error = error
        self.entries = entries
        self.bpe = abs(math.log(error) / 0.480453013918201)
        self.n2 = 0
        if options & NOROUND:
            bits = int(entries * self.bpe) or 1
        else:
            bn2 = math.frexp(entries * self.bpe)[1] - 1  # logb
            self.n2 = bn2 + 1
            bits = 1 << self.n2
            spare = int(bits - entries * self.bpe)
            self.entries += int(spare / self.bpe)
        self.bytes = (bits // 64 + 1) * 8 if bits % 64 else bits // 8
        self.bits = self.bytes * 8
        self.hashes = int(math.ceil(0.693147180559945 * self.bpe))
        self.bf = bytearray(self.bytes)
        self.size = 0

    def probe(self, a, b, setbits):
        mod = (1 << self.n2) if self.n2 else self.bits
        allset = True
        for i in range(self.hashes):
            x = ((a + i * b) & M64) % mod
            if not self.bf[x >> 3] & (1 << (x & 7)):
                if not setbits:
                    return False
                allset = False
                self.bf[x >> 3] |= 1 << (x & 7)
        return allset


class Chain:
    """SB_NewChain(capacity, error, options, growth) and its adds."""

    def __init__(self, capacity, error, options=FORCE64 | NOROUND, growth=2):
        self.options = options
        self.growth = growth
        self.size = 0
        first = error if options & NO_SCALING else error * 0.5
        self.links = [Link(capacity, first, options)]

    def hash(self, item):
        if self.options & FORCE64:
            a = murmur64a(item, 0xc6a4a7935bd1e995)
            return a, murmur64a(item, a)
        a = murmur2(item, 0x9747b28c)
        return a, murmur2(item, a)

    def exists(self, item):
        a, b = self.hash(item)
        return any(l.probe(a, b, False) for l in self.links)

    def add(self, item):
        a, b = self.hash(item)
        if any(l.probe(a, b, False) for l in self.links):
            return 0
        cur = self.links[-1]
        if cur.size >= cur.entries:
            if self.options & NO_SCALING:
                return -2
            self.links.append(Link(cur.entries * self.growth, cur.error * 0.5, self.options))
            cur = self.links[-1]
        cur.probe(a, b, True)
        cur.size += 1
        self.size += 1
        return 1

    def header(self):
        h = struct.pack("<QIII", self.size, len(self.links), self.options, self.growth)
        for l in self.links:
            h += struct.pack("<QQQddIQB", l.bytes, l.bits, l.size, l.error, l.bpe, l.hashes,
                             l.entries, l.n2)
        return h

    def scandump(self, limit=16 << 20):
        """(iterator, data) pairs as BF.SCANDUMP returns them, header first."""
        out = [(1, self.header())]
        it = 1
        for l in self.links:
            off = 0
            while off < l.bytes:
                n = min(limit, l.bytes - off)
                it += n
                out.append((it, bytes(l.bf[off:off + n])))
                off += n
        return out

    def debug(self):
        lines = ["size:%d" % self.size]
        for l in self.links:
            lines.append("bytes:%d bits:%d hashes:%d hashwidth:%d capacity:%d size:%d ratio:%g" % (
                l.bytes, l.bits if l.bits else 1 << l.n2, l.hashes,
                64 if self.options & FORCE64 else 32, l.entries, l.size, l.error))
        return lines

    def rdb_value(self, w):
        w.uint(self.size)
        w.uint(len(self.links))
        w.uint(self.options)
        w.uint(self.growth)
        for l in self.links:
            w.uint(l.entries)
            w.double(l.error)
            w.uint(l.hashes)
            w.double(l.bpe)
            w.uint(l.bits)
            w.uint(l.n2)
            w.string(bytes(l.bf))
            w.uint(l.size)


def next_pow2(n):
    if n == 0:
        return 0
    p = 1
    while p < n:
        p <<= 1
    return p


class Cuckoo:
    """CuckooFilter_Init(capacity, bucket size, max iterations, expansion);
    adds place a fingerprint in a free slot of its buckets (newest
    sub-filter first) or grow, which is a state RedisBloom reaches too."""

    def __init__(self, capacity, bucket_size=2, max_iterations=20, expansion=1):
        self.bucket_size = bucket_size
        self.max_iterations = max_iterations
        self.expansion = next_pow2(expansion)
        self.nb = next_pow2(capacity // bucket_size) or 1
        self.subs = [bytearray(self.nb * bucket_size)]
        self.items = 0
        self.deletes = 0

    @staticmethod
    def key(item):
        h = murmur64a(item, 0)
        fp = h % 255 + 1
        return h, (h ^ (fp * 0x5bd1e995)) & M64, fp

    def sub_nb(self, i):
        return len(self.subs[i]) // self.bucket_size

    def slots(self, i, h):
        b = (h % self.sub_nb(i)) * self.bucket_size
        return range(b, b + self.bucket_size)

    def add(self, item):
        h1, h2, fp = self.key(item)
        while True:
            for i in range(len(self.subs) - 1, -1, -1):
                for h in (h1, h2):
                    for s in self.slots(i, h):
                        if self.subs[i][s] == 0:
                            self.subs[i][s] = fp
                            self.items += 1
                            return 1
            if self.expansion == 0:
                return -1
            self.subs.append(bytearray(self.nb * self.expansion ** len(self.subs)
                                       * self.bucket_size))

    def count(self, item):
        h1, h2, fp = self.key(item)
        return sum(self.subs[i][s] == fp for i in range(len(self.subs))
                   for h in (h1, h2) for s in self.slots(i, h))

    def header(self):
        return struct.pack("<QQQQHHH", self.items, self.nb, self.deletes, len(self.subs),
                           self.bucket_size, self.max_iterations, self.expansion)

    def scandump(self, limit=16 << 20):
        out = [(1, self.header())]
        it = 1
        for d in self.subs:
            off = 0
            while off < len(d):
                n = min(limit, len(d) - off)
                it += n
                out.append((it, bytes(d[off:off + n])))
                off += n
        return out

    def rdb_value(self, w):
        w.uint(len(self.subs))
        w.uint(self.nb)
        w.uint(self.items)
        w.uint(self.deletes)
        w.uint(self.bucket_size)
        w.uint(self.max_iterations)
        w.uint(self.expansion)
        for i, d in enumerate(self.subs):
            w.uint(self.sub_nb(i))
            w.string(bytes(d))


# ---- RDB ----------------------------------------------------------------------

def rdb_len(n):
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | (n >> 8), n & 0xff])
    if n <= 0xffffffff:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + n.to_bytes(8, "big")


def rdb_string(b):
    return rdb_len(len(b)) + b


class ModuleValue:
    """The opcodes RedisModule_Save* write for a module value."""

    def __init__(self):
        self.out = b""

    def uint(self, v):
        self.out += rdb_len(2) + rdb_len(v)

    def double(self, v):
        self.out += rdb_len(4) + struct.pack("<d", v)

    def string(self, b):
        self.out += rdb_len(5) + rdb_string(b)


CSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def module_type_id(name, encver):
    v = 0
    for c in name:
        v = (v << 6) | CSET.index(c)
    return (v << 10) | encver


def module_object(type_name, encver, value_writer):
    """RDB_TYPE_MODULE_2 object body: type byte, module id, value, EOF."""
    w = ModuleValue()
    value_writer(w)
    return bytes([7]) + rdb_len(module_type_id(type_name, encver)) + w.out + rdb_len(0)


def crc64(data):
    """Redis's CRC-64 (Jones polynomial, reflected, init 0, no final xor)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x95AC9329AC4BC9B5 if crc & 1 else 0)
    return crc


def dump_payload(obj):
    """A DUMP/RESTORE payload: the object, RDB version 10, CRC-64."""
    body = obj + (10).to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


def rdb_file(keys):
    """A whole RDB file (version 10) holding 'keys': {name: object body}.
    The checksum is left 0, which Redis takes as "not computed"."""
    out = b"REDIS0010" + b"\xfe\x00" + b"\xfb" + rdb_len(len(keys)) + rdb_len(0)
    for name, obj in keys.items():
        out += obj[:1] + rdb_string(name) + obj[1:]
    return out + b"\xff" + b"\x00" * 8
