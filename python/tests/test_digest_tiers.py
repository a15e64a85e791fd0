"""DigestSet (an exact set by 128-bit digests under a secret seed), the batch
test-and-add of CountingBloom and Cuckoo against their single calls, and
SeenSet.stack (tiers) against a set model."""
import pickle

import pytest

import dedup
from conftest import random_keys


def test_digestset_against_set(rng, tmp_path):
    s = dedup.DigestSet()
    model = set()
    keys = random_keys(rng, 5000)
    stream = [rng.choice(keys) for _ in range(20000)]
    for k in stream[:3000]:
        assert s.add(k) == (k not in model)
        model.add(k)
    for k, v in zip(stream[3000:12000], s.add_many(stream[3000:12000])):
        assert v == (k not in model)
        model.add(k)
    s.update(stream[12000:])
    model.update(stream[12000:])
    assert len(s) == len(model)
    assert all(k in s for k in model)
    assert all(s.contains_many(list(model)))
    absent = [k for k in random_keys(rng, 3000, 25, 40) if k not in model]
    assert not any(k in s for k in absent)
    assert not any(s.contains_many(absent))
    # str and its UTF-8 bytes are one key
    some = next(iter(model))
    assert some.encode() in s and s.add(some.encode()) is False
    # the seed is secret (from the OS) unless given, and kept with the set
    assert dedup.DigestSet().info["seed"] != dedup.DigestSet().info["seed"]
    assert dedup.DigestSet(seed=7).info["seed"] == 7
    path = str(tmp_path / "d.set")
    s.save(path)
    for t in (dedup.DigestSet.load(path), dedup.DigestSet.from_bytes(s.to_bytes()),
              pickle.loads(pickle.dumps(s))):
        assert t.info["seed"] == s.info["seed"] and len(t) == len(s)
        assert all(k in t for k in model) and not any(t.contains_many(absent))
    with pytest.raises(dedup.Error, match="cannot delete"):
        s.remove(some)
    with pytest.raises(TypeError, match="int"):
        s.add(5)
    # memory: digests only, whatever the keys' length
    big = dedup.DigestSet()
    big.update([b"k%07d" % i + b"x" * 200 for i in range(200000)])
    assert len(big) == 200000
    assert big.info["memory"] / 200000 < 25, big.info


def test_digestset_memory_limit_stops_a_batch_and_says_how_far(rng):
    s = dedup.DigestSet(memory_limit=40000)
    keys = random_keys(rng, 5000)
    with pytest.raises(dedup.Error, match=r"the first (\d+) keys were added"):
        s.update(keys)
    n = len(s)
    assert 0 < n < len(keys)
    assert all(k in s for k in keys[:n])


@pytest.mark.parametrize("make", [lambda: dedup.CountingBloom(3000, 0.01),
                                  lambda: dedup.Cuckoo(8000, 0.01),
                                  lambda: dedup.Cuckoo(500, 0.01, expansion=2)])
def test_batch_test_and_add_equals_single_calls(make, rng):
    # The library's batch test-and-add against add() per key on a twin:
    # the same verdicts, in order (repeats inside a batch included), and
    # the same bytes after every batch.
    first = make()
    a, b = type(first).from_bytes(first.to_bytes()), type(first).from_bytes(first.to_bytes())
    keys = random_keys(rng, 4000)
    for _ in range(6):
        batch = [rng.choice(keys) for _ in range(rng.randint(0, 2500))]
        single = [a.add(k) for k in batch]
        assert b.add_many(batch) == single
        assert a.to_bytes() == b.to_bytes()


def test_cuckoo_batch_stops_at_full_and_says_how_far(rng):
    f = dedup.Cuckoo(200, 0.01)
    keys = random_keys(rng, 2000)
    with pytest.raises(dedup.Error, match=r"the first (\d+) keys were added"):
        f.update(keys)
    assert sum(1 for k in keys[:100] if k in f) == 100  # the keys before stay


def test_stack_against_set(rng):
    # A blocked filter in front of an exact set: exact answers, and the
    # filter saves lookups of the exact tier for keys it has never seen.
    top = dedup.SeenSet("blocked", items=20000, seed=11)
    bottom = dedup.SeenSet("exact", seed=11)
    s = dedup.SeenSet.stack([(top, {"name": "front", "covers_below": True}), bottom])
    model = set()
    keys = random_keys(rng, 4000)
    stream = [rng.choice(keys) for _ in range(12000)]
    verdicts = s.decide(stream[:6000]) + [s.decide(k) for k in stream[6000:]]
    for k, v in zip(stream, verdicts):
        assert v == (dedup.DUPLICATE if k in model else dedup.NEW), k
        model.add(k)
    st = s.tier_stats
    assert st["exact"] and st["keys"] == len(stream)
    assert st["new"] == len(model) and st["duplicates"] == len(stream) - len(model)
    assert [t["name"] for t in st["tiers"]] == ["front", "exact"]
    assert st["reads_avoided"] > 0.9 * len(model)
    # the tiers' objects were taken by the stack
    with pytest.raises(ValueError, match="closed"):
        top.decide("x")
    assert s.info["kind"] == "tiers"


def test_stack_errors_leave_the_tiers_usable():
    a, b = dedup.SeenSet("exact", seed=1), dedup.SeenSet("exact", seed=2)
    with pytest.raises(dedup.Error):
        dedup.SeenSet.stack([a, b])  # different seeds: one digest serves all tiers
    assert a.decide("k") == dedup.NEW and b.decide("k") == dedup.NEW
    with pytest.raises(ValueError, match="closed"):
        dedup.SeenSet.stack([a, a])  # the same object twice
    assert a.decide("k") == dedup.DUPLICATE
    with pytest.raises(TypeError, match="SeenSet"):
        dedup.SeenSet.stack([a, dedup.StrSet()])
    with pytest.raises(ValueError, match="unknown tier option"):
        dedup.SeenSet.stack([(a, {"colour": 1})])
    with pytest.raises(ValueError, match="1 to 8"):
        dedup.SeenSet.stack([])
    with pytest.raises(dedup.Error, match="not a stack"):
        a.tier_stats
