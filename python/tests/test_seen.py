"""dedup.SeenSet from a spec: decide() against Python models."""
import pytest

import dedup
from conftest import random_keys


@pytest.mark.parametrize("kind", ["exact", "fingerprint"])
def test_exact_kinds_against_set(kind, rng):
    s = dedup.SeenSet(kind)
    keys = random_keys(rng, 3000)
    stream = [rng.choice(keys) for _ in range(12000)]
    model = set()
    got = s.decide(stream[:6000]) + [s.decide(k) for k in stream[6000:]]
    for k, v in zip(stream, got):
        assert v == (dedup.DUPLICATE if k in model else dedup.NEW), k
        model.add(k)
    assert len(s) == len(model) and s.info["distinct_exact"]


@pytest.mark.parametrize("kind", ["bloom", "blocked", "counting", "cuckoo", "scalable"])
def test_filter_kinds_never_answer_new_twice(kind, rng):
    s = dedup.SeenSet(kind, items=5000, error_rate=0.01)
    keys = random_keys(rng, 4000)
    stream = [rng.choice(keys) for _ in range(10000)]
    model = set()
    fp = 0
    for k, v in zip(stream, s.decide(stream)):
        if k in model:
            assert v == dedup.MAYBE_DUPLICATE, k
        else:
            assert v in (dedup.NEW, dedup.MAYBE_DUPLICATE)
            fp += v != dedup.NEW
        model.add(k)
    assert fp <= 0.03 * len(model), fp
    assert all(v != dedup.NEW for v in s.query(list(model)))


def test_u64_and_delete(rng):
    s = dedup.SeenSet("u64")
    xs = [rng.randrange(2**64) for _ in range(500)]
    assert s.decide(xs + xs[:10]) == [dedup.NEW] * 500 + [dedup.DUPLICATE] * 10
    with pytest.raises(TypeError, match="str"):
        s.decide(["1"])
    c = dedup.SeenSet("counting", items=100)
    c.decide(["a", "b"])
    assert c.delete(["a", "zz-never"]) == [True, False]
    with pytest.raises(dedup.Error):
        dedup.SeenSet("bloom", items=100).delete("a")


def test_sliding_window_against_a_model(rng):
    dur = 10.0
    w = dedup.SeenSet("window", duration=dur)
    keys = random_keys(rng, 50)
    t = 0.0
    last = {}
    for _ in range(3000):
        t += rng.random()  # event times in order
        k = rng.choice(keys)
        v = w.decide(k, times=t)
        want = dedup.DUPLICATE if k in last and t - last[k] < dur else dedup.NEW
        assert v == want, (k, t, last.get(k))
        if want == dedup.NEW:
            last[k] = t
    # far behind the watermark: LATE, not decided
    assert w.decide("late-key", times=t - 5 * dur) == dedup.LATE


def test_seen_files(tmp_path, rng):
    for spec in (dict(kind="exact"), dict(kind="blocked", items=1000),
                 dict(kind="window", duration=60)):
        s = dedup.SeenSet(**spec)
        keys = random_keys(rng, 300)
        times = list(range(300)) if spec["kind"] == "window" else None
        s.decide(keys, times=times)
        path = str(tmp_path / spec["kind"])
        s.save(path)
        any_class = dedup.load(path)  # the class of the file's structure
        if not isinstance(any_class, dedup.SeenSet):
            assert all(k in any_class for k in keys)
        for t in (dedup.SeenSet.load(path), dedup.SeenSet.from_bytes(s.to_bytes())):
            again = t.query(keys, times=[299] * 300 if times else None)
            assert all(v != dedup.NEW for v in again[-50:])
    with pytest.raises(ValueError, match="kind"):
        dedup.SeenSet("redis")


@pytest.mark.skipif(not hasattr(dedup.SeenSet, "open_store"), reason="built without RocksDB")
def test_store_against_set_and_the_cli(tmp_path, rng, dedup_bin):
    import subprocess
    d = str(tmp_path / "store")
    keys = random_keys(rng, 2000)
    stream = [rng.choice(keys) for _ in range(4000)]
    s = dedup.SeenSet.open_store(d)
    model = set()
    for k, v in zip(stream, s.decide(stream[:3000]) + [s.decide(k) for k in stream[3000:]]):
        assert v == (dedup.DUPLICATE if k in model else dedup.NEW)
        model.add(k)
    with pytest.raises(dedup.Error, match="in use"):
        dedup.SeenSet.open_store(d)  # one writer at a time: the store's lock
    s.close()
    # the CLI's --store continues the same history
    fresh = random_keys(rng, 50, 30, 40)
    some = rng.sample(sorted(model), 50)
    r = subprocess.run([dedup_bin, "--store", d], input="\n".join(some + fresh) + "\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == fresh
    again = dedup.SeenSet.open_store(d)
    assert again.query(fresh + some) == [dedup.DUPLICATE] * 100
    again.close()


def test_redis_seen_set_shared_by_two_clients(redis_url, rng):
    a = dedup.SeenSet.open_redis(redis_url, name="py")
    b = dedup.SeenSet.open_redis(redis_url, name="py")
    keys = random_keys(rng, 1500)
    stream = [rng.choice(keys) for _ in range(3000)]
    model = set()
    for i in range(0, len(stream), 500):
        part = stream[i:i + 500]
        who = a if (i // 500) % 2 else b  # two clients, one history
        for k, v in zip(part, who.decide(part)):
            assert v == (dedup.DUPLICATE if k in model else dedup.NEW), k
            model.add(k)
    assert a.query(sorted(model)) == [dedup.DUPLICATE] * len(model)
    other = dedup.SeenSet.open_redis(redis_url, name="other")
    assert other.decide(keys[0]) == dedup.NEW  # names are separate sets
    with pytest.raises(dedup.Error, match="cannot connect"):
        dedup.SeenSet.open_redis("redis://127.0.0.1:1")


def test_redis_ttl(redis_url):
    import time
    s = dedup.SeenSet.open_redis(redis_url, name="ttl", ttl=0.3)
    assert s.decide(["x", "x"]) == [dedup.NEW, dedup.DUPLICATE]
    s.commit(["x"])
    deadline = time.monotonic() + 10
    while s.query("x") != dedup.NEW:  # the key expires (bounded wait)
        assert time.monotonic() < deadline, "the key never expired"
        time.sleep(0.05)
    assert s.decide("x") == dedup.NEW
    # a reserved key not committed comes back after the reservation; a
    # committed one stays for its ttl
    long = dedup.SeenSet.open_redis(redis_url, name="long", ttl=60)
    assert long.decide(["kept", "lost"]) == [dedup.NEW, dedup.NEW]
    long.commit("kept")
    assert long.query(["kept", "lost"]) == [dedup.DUPLICATE, dedup.DUPLICATE]
