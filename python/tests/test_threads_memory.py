"""Several threads on one object (documented safe: every call takes the
object's lock; batches release the GIL), and no leak over a million calls."""
import gc
import threading

import pytest

import dedup
from conftest import random_keys


def run_threads(target, n):
    errors = []

    def wrap(i):
        try:
            target(i)
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)

    ts = [threading.Thread(target=wrap, args=(i,), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not any(t.is_alive() for t in ts), "a thread hung"
    assert not errors, errors


@pytest.mark.parametrize("make", [lambda: dedup.StrSet(), lambda: dedup.DigestSet(),
                                  lambda: dedup.Bloom(100000, 0.001),
                                  lambda: dedup.CountingBloom(100000, 0.001),
                                  lambda: dedup.Cuckoo(100000, 0.001),
                                  lambda: dedup.ScalableBloom(1000, 0.001)])
def test_threads_adding_to_one_object(make, rng):
    obj = make()
    keys = random_keys(rng, 40000)
    parts = [keys[i::4] for i in range(4)]
    verdicts = [None] * 4

    def work(i):
        # long batches (GIL released) interleaved with single calls
        v = obj.add_many(parts[i][:8000])
        v += [obj.add(k) for k in parts[i][8000:]]
        verdicts[i] = v
        assert all(obj.contains_many(parts[i]))

    run_threads(work, 4)
    assert all(k in obj for k in keys)
    if isinstance(obj, (dedup.StrSet, dedup.DigestSet)):
        # exact: every key new exactly once, across threads
        assert all(all(v) for v in verdicts)
        assert len(obj) == len(keys)


def test_threads_racing_on_the_same_keys(rng):
    s = dedup.StrSet()
    keys = random_keys(rng, 20000)
    news = [0] * 4

    def work(i):
        mine = keys[:]
        random_local = __import__("random").Random(i)
        random_local.shuffle(mine)
        news[i] = sum(s.add_many(mine[:10000])) + sum(s.add(k) for k in mine[10000:])

    run_threads(work, 4)
    # each key was new to exactly one thread: nothing lost, nothing twice
    assert sum(news) == len(keys) == len(s)


def test_close_while_other_threads_use_the_object(rng):
    f = dedup.Bloom(10000)
    keys = random_keys(rng, 5000)
    stop = threading.Event()

    def work(i):
        while not stop.is_set():
            try:
                f.add_many(keys)
                f.add(keys[i])
            except ValueError as e:
                assert "closed" in str(e)
                return

    ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    f.close()
    stop.set()
    for t in ts:
        t.join(30)
    assert not any(t.is_alive() for t in ts)


def rss_kib():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4


def test_no_leak_over_a_million_calls(rng):
    keys = random_keys(rng, 1000)
    blob_src = dedup.Cuckoo(2000)
    objs = [dedup.Bloom(2000), dedup.StrSet(), dedup.CountingBloom(2000), blob_src,
            dedup.ScalableBloom(500), dedup.HyperLogLog(8), dedup.IntSet(), dedup.DigestSet()]
    ints = list(range(1000))

    def rounds(n):
        calls = 0
        for r in range(n):
            for o in objs:
                ks = ints if isinstance(o, dedup.IntSet) else keys
                o.add(ks[r % 1000])
                if not isinstance(o, dedup.HyperLogLog):
                    ks[r % 997] in o
                    o.add_many(ks[:20])
                o.update(ks[:20])
                calls += 3
            if r % 50 == 0:
                dedup.from_bytes(blob_src.to_bytes()).close()
                try:
                    objs[0].add(3)
                except TypeError:
                    pass
                try:
                    dedup.from_bytes(b"\x89DDP junk")
                except dedup.Error:
                    pass
                calls += 4
            if r % 500 == 0:
                st = dedup.SeenSet.stack([dedup.SeenSet("blocked", items=100, seed=3),
                                          dedup.SeenSet("exact", seed=3)])
                st.decide(keys[:5])
                st.tier_stats
                st.close()
        return calls

    rounds(5000)  # warm up: the structures reach their size
    gc.collect()
    before = rss_kib()
    calls = rounds(50000)
    gc.collect()
    grown = rss_kib() - before
    print("calls", calls, "RSS grew by", grown, "KiB")
    assert calls >= 1_000_000
    assert grown < 2048, grown


def test_crossed_unions_do_not_deadlock():
    a, b = dedup.Bloom(100000), dedup.Bloom(100000)
    a.update(["a%d" % i for i in range(1000)])
    b.update(["b%d" % i for i in range(1000)])
    big = ["k%d" % i for i in range(5000)]

    def work(i):
        x, y = (a, b) if i % 2 else (b, a)
        for _ in range(200):
            x.union(y)
            x.update(big)  # releases the GIL while holding x's lock

    run_threads(work, 4)
    assert "a1" in b and "b1" in a
