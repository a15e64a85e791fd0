"""Every class against Python's set on seeded inputs: verdicts, membership,
no false negative, and the false-positive rate within a two-sided binomial
bound of the rate the filter reports in force."""
import math

import pytest

import dedup
from conftest import random_keys

N = 10000  # keys added
M = 30000  # fresh keys the rate is measured on


def filters():
    return {
        "bloom": lambda: dedup.Bloom(N, 0.01),
        "blocked": lambda: dedup.BlockedBloom(N, 0.01),
        "counting": lambda: dedup.CountingBloom(N, 0.01),
        "cuckoo": lambda: dedup.Cuckoo(N, 0.01),
        "scalable": lambda: dedup.ScalableBloom(1000, 0.01),
    }


def binomial_ok(hits, trials, p, z=5.0, two_sided=True):
    """hits within z standard deviations of trials*p (plus one key of slack
    for tiny p); one-sided: only the upper bound."""
    mean = trials * p
    sd = math.sqrt(trials * p * (1 - p))
    hi = mean + z * sd + 1
    lo = mean - z * sd - 1
    return hits <= hi and (not two_sided or hits >= lo), (lo, mean, hi)


@pytest.mark.parametrize("name", list(filters()))
def test_filter_against_set(name, rng):
    f = filters()[name]()
    keys = random_keys(rng, N + M)
    added, fresh = keys[:N], keys[N:]
    model = set()
    # add() one at a time, then batches, with repeats mixed in.
    for k in added[: N // 2]:
        new = f.add(k)
        if k not in model:
            # a filter may take a new key for a seen one (false positive),
            # never the reverse
            pass
        else:
            assert new is False, k
        model.add(k)
    rest = added[N // 2:]
    batch = rest + rng.sample(added[: N // 2], 1000)
    verdicts = f.add_many(batch)
    assert len(verdicts) == len(batch)
    for k, v in zip(batch, verdicts):
        if k in model:
            assert v is False, k
        model.add(k)
    # No false negative, single and batch queries agree.
    assert all(k in f for k in model)
    assert all(f.contains_many(list(model)))
    # The false-positive rate on keys never added.
    info = f.info
    p = info["fpr_current"]
    hits = sum(f.contains_many(fresh))
    assert hits == sum(1 for k in fresh if k in f)
    # cuckoo's fpr_current is an upper bound (2b*load/2^f), not an exact mean
    ok, bounds = binomial_ok(hits, M, p, two_sided=name not in ("cuckoo", "scalable"))
    print(name, "hits", hits, "of", M, "rate in force", p, "bounds", bounds)
    assert ok, (hits, bounds)
    # len: an estimate for Bloom; exact counts otherwise (see the docs)
    if name in ("bloom", "blocked"):
        assert abs(len(f) - len(model)) <= 0.05 * len(model)
    elif name in ("cuckoo", "scalable"):
        # stored / new-verdict counts: every key but the false positives
        assert len(model) * 0.98 <= len(f) <= len(model)


def test_bloom_sized_rate_at_capacity(rng):
    # At capacity, the rate in force is near the rate asked for.
    f = dedup.Bloom(N, 0.01)
    f.update(random_keys(rng, N))
    assert 0.005 < f.info["fpr_current"] < 0.015
    assert f.info["bits"] == math.ceil(-N * math.log(0.01) / math.log(2) ** 2)


@pytest.mark.parametrize("cls", [dedup.CountingBloom, dedup.Cuckoo])
def test_delete_against_set(cls, rng):
    f = cls(N, 0.001)
    keys = random_keys(rng, N)
    # add() stores a key only when it is new to the filter: a key taken for
    # a stored one (a false positive) is not stored, so only stored keys may
    # be deleted, and it is they that must stay found
    stored = [k for k, new in zip(keys, f.add_many(keys)) if new]
    assert len(stored) >= 0.99 * N
    gone = set(rng.sample(stored, N // 4))
    for k in gone:
        f.remove(k)
    kept = [k for k in stored if k not in gone]
    assert all(k in f for k in kept)  # deleting never makes a false negative
    still = sum(1 for k in gone if k in f)
    assert still <= 0.02 * len(gone), still
    absent = next(k for k in random_keys(rng, 100, 30, 40) if k not in f)
    with pytest.raises(KeyError):
        f.remove(absent)
    assert f.discard(absent) is False


@pytest.mark.parametrize("cls", [dedup.Bloom, dedup.ScalableBloom, dedup.StrSet, dedup.IntSet])
def test_no_delete_is_a_clear_error(cls):
    f = cls(100) if cls is not dedup.ScalableBloom else cls(100, 0.01)
    with pytest.raises(dedup.Error, match="cannot delete"):
        f.remove(1 if cls is dedup.IntSet else "a")


def test_strset_against_set(rng):
    s = dedup.StrSet()
    model = set()
    keys = random_keys(rng, 5000)
    stream = [rng.choice(keys) for _ in range(20000)]
    for k in stream[:5000]:
        assert s.add(k) == (k not in model)
        model.add(k)
    verdicts = s.add_many(stream[5000:])
    for k, v in zip(stream[5000:], verdicts):
        assert v == (k not in model)
        model.add(k)
    assert len(s) == len(model)
    assert all(k in s for k in model)
    assert not any(k in s for k in random_keys(rng, 2000, 30, 40))
    # str and its UTF-8 bytes are one key; iteration gives bytes in insertion order
    assert set(s) == {k.encode() for k in model}
    first = []
    for k in stream:
        if k not in first and len(first) < 10:
            first.append(k)
    assert list(s)[:10] == [k.encode() for k in first]


def test_intset_against_set(rng):
    s = dedup.IntSet()
    model = set()
    stream = [rng.randrange(0, 2**64) if rng.random() < 0.5 else rng.randrange(0, 3000)
              for _ in range(30000)]
    for x in stream[:3000]:
        assert s.add(x) == (x not in model)
        model.add(x)
    for x, v in zip(stream[3000:], s.add_many(stream[3000:])):
        assert v == (x not in model)
        model.add(x)
    assert len(s) == len(model)
    assert all(x in s for x in model)
    assert 2**64 - 1 not in s or 2**64 - 1 in model
    with pytest.raises(OverflowError):
        s.add(2**64)
    with pytest.raises(OverflowError):
        s.add(-1)


def test_hll_count_and_merge(rng):
    keys = random_keys(rng, 60000)
    a, b = dedup.HyperLogLog(14), dedup.HyperLogLog(14)
    a.update(keys[:40000])
    for k in keys[20000:]:
        b.add(k)
    se = a.info["std_error"]
    assert abs(a.count() - 40000) <= 5 * se * 40000
    a.merge(b)
    assert abs(a.count() - 60000) <= 5 * se * 60000
    assert len(a) == round(a.count())
    with pytest.raises(dedup.Error):
        a.merge(dedup.HyperLogLog(12))


def test_union(rng):
    keys = random_keys(rng, 4000)
    a, b = dedup.Bloom(4000, 0.01), dedup.Bloom(4000, 0.01)
    a.update(keys[:2000])
    b.update(keys[2000:])
    a |= b
    assert all(k in a for k in keys)
    with pytest.raises(dedup.Error):
        a.union(dedup.Bloom(4000, 0.001))
    c, d = dedup.CountingBloom(4000), dedup.CountingBloom(4000)
    c.update(keys[:10])
    d.update(keys[10:20])
    c.union(d)
    assert all(k in c for k in keys[:20])
    with pytest.raises(dedup.Error):
        dedup.Cuckoo(100).union(dedup.Cuckoo(100))
