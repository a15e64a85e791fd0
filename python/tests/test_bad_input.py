"""Wrong key types, closed objects, bad parameters."""
import pytest

import dedup

MAKERS = [
    lambda: dedup.Bloom(100), lambda: dedup.BlockedBloom(100), lambda: dedup.CountingBloom(100),
    lambda: dedup.Cuckoo(100), lambda: dedup.ScalableBloom(100), lambda: dedup.StrSet(),
    lambda: dedup.HyperLogLog(),
]


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("bad", [3, 1.5, None, ["a"], bytearray(b"a"), object()])
def test_wrong_key_type_names_it(make, bad):
    obj = make()
    name = type(bad).__name__
    with pytest.raises(TypeError, match=name):
        obj.add(bad)
    with pytest.raises(TypeError, match=name):
        obj.update(["ok", bad])
    if not isinstance(obj, dedup.HyperLogLog):
        with pytest.raises(TypeError, match=name):
            bad in obj
        with pytest.raises(TypeError, match=name):
            obj.add_many([b"ok", bad])


def test_a_failed_batch_adds_nothing():
    f = dedup.StrSet()
    with pytest.raises(TypeError):
        f.update(["a", "b", 7])
    assert len(f) == 0


def test_intset_keys():
    s = dedup.IntSet()
    for bad in ("1", b"1", 1.0, None):
        with pytest.raises(TypeError, match=type(bad).__name__):
            s.add(bad)
    with pytest.raises(TypeError, match="str"):
        s.update([1, "2"])


@pytest.mark.parametrize("make", MAKERS + [lambda: dedup.IntSet()])
def test_closed_object(make):
    obj = make()
    key = 1 if isinstance(obj, dedup.IntSet) else "k"
    obj.add(key)
    obj.close()
    obj.close()  # twice is harmless
    for call in (lambda: obj.add(key), lambda: len(obj), lambda: obj.to_bytes(),
                 lambda: obj.info, lambda: obj.update([key])):
        with pytest.raises(ValueError, match="closed"):
            call()
    with make() as o2:
        o2.add(key)
    with pytest.raises(ValueError, match="closed"):
        o2.add(key)


def test_bad_parameters_raise_the_library_error():
    with pytest.raises(dedup.Error, match="invalid argument"):
        dedup.Bloom(0)
    with pytest.raises(dedup.Error):
        dedup.Bloom(100, 1.5)
    with pytest.raises(dedup.Error):
        dedup.HyperLogLog(30)
    with pytest.raises(dedup.Error):
        dedup.Cuckoo(100, bucket_size=0)


def test_full_cuckoo_says_so_and_keeps_what_it_added():
    c = dedup.Cuckoo(64, 0.01, max_kicks=10)
    keys = ["k%d" % i for i in range(10000)]
    with pytest.raises(dedup.Error, match="full") as e:
        c.update(keys)
    added = int(str(e.value).split("the first ")[1].split()[0])
    assert 0 < added < len(keys)
    assert all(k in c for k in keys[:added])
    with pytest.raises(dedup.Error, match="full"):
        for k in keys:
            c.add(k)
