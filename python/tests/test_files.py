"""Files and bytes: the CLI's files both ways, to_bytes/from_bytes, pickle,
atomic saves, and damaged input refused with the library's message."""
import os
import pickle
import subprocess

import pytest

import dedup
from conftest import random_keys

CLI_TYPES = {
    "bloom": dedup.Bloom, "blocked": dedup.Bloom, "counting": dedup.CountingBloom,
    "cuckoo": dedup.Cuckoo, "cuckoo-chain": dedup.Cuckoo, "scalable": dedup.ScalableBloom,
}


def cli(dedup_bin, *args, stdin=None, ok=(0,)):
    r = subprocess.run([dedup_bin, *args], input=stdin, capture_output=True, timeout=60)
    assert r.returncode in ok, (args, r.returncode, r.stderr)
    return r


@pytest.mark.parametrize("t", list(CLI_TYPES))
def test_cli_file_to_python_and_back(t, tmp_path, rng, dedup_bin):
    path = str(tmp_path / ("f." + t))
    keys = random_keys(rng, 3000)
    a, b, fresh = keys[:1000], keys[1000:2000], keys[2000:]
    cli(dedup_bin, "filter", "create", path, "-t", t, "-n", "5000", "-p", "0.01")
    cli(dedup_bin, "filter", "add", path, stdin="\n".join(a).encode() + b"\n")
    f = dedup.load(path)
    assert type(f) is CLI_TYPES[t]
    assert all(k in f for k in a)
    # Python answers as the CLI does on every key, fresh ones included.
    r = cli(dedup_bin, "filter", "query", path, stdin="\n".join(keys).encode() + b"\n", ok=(0, 1))
    cli_yes = set(r.stdout.decode().splitlines())
    assert cli_yes == {k for k in keys if k in f}
    # Python adds, saves over the CLI's file; the CLI finds them.
    f.update(b)
    f.save(path)
    r = cli(dedup_bin, "filter", "query", path, stdin="\n".join(a + b).encode() + b"\n")
    assert r.stdout.decode().splitlines() == a + b
    r = cli(dedup_bin, "filter", "query", path, "-c", stdin="\n".join(fresh).encode() + b"\n",
            ok=(0, 1))
    assert int(r.stdout) == sum(1 for k in fresh if k in f)
    assert [p for p in os.listdir(tmp_path) if ".tmp." in p] == []


def test_python_file_to_cli(tmp_path, rng, dedup_bin):
    path = str(tmp_path / "py.bloom")
    keys = random_keys(rng, 2000)
    f = dedup.BlockedBloom(2000, 0.001)
    f.update(keys[:1000])
    f.save(path)
    r = cli(dedup_bin, "filter", "info", path, "--json")
    assert b"blocked" in r.stdout
    r = cli(dedup_bin, "filter", "query", path, stdin="\n".join(keys).encode() + b"\n")
    assert r.stdout.decode().splitlines() == [k for k in keys if k in f]
    # the file is the one to_bytes gives
    with open(path, "rb") as fh:
        assert fh.read() == f.to_bytes()


ALL = {
    "bloom": lambda: dedup.Bloom(500, 0.01), "blocked": lambda: dedup.BlockedBloom(500),
    "counting": lambda: dedup.CountingBloom(500), "cuckoo": lambda: dedup.Cuckoo(500),
    "scalable": lambda: dedup.ScalableBloom(100), "strset": lambda: dedup.StrSet(),
    "intset": lambda: dedup.IntSet(), "hll": lambda: dedup.HyperLogLog(10),
}


def fill(obj, keys):
    if isinstance(obj, dedup.IntSet):
        obj.update(range(len(keys)))
    else:
        obj.update(keys)


def probe(obj, keys):
    if isinstance(obj, dedup.HyperLogLog):
        return obj.count()
    if isinstance(obj, dedup.IntSet):
        return [x in obj for x in range(len(keys) + 50)]
    return [k in obj for k in keys]


@pytest.mark.parametrize("name", list(ALL))
def test_bytes_pickle_and_files_round_trip(name, tmp_path, rng):
    obj = ALL[name]()
    keys = random_keys(rng, 400)
    fill(obj, keys[:300])
    blob = obj.to_bytes()
    for copy in (dedup.from_bytes(blob), type(obj).from_bytes(blob),
                 pickle.loads(pickle.dumps(obj)), pickle.loads(pickle.dumps(obj, protocol=5))):
        assert type(copy) is type(obj)
        # the integer set saves in its table's order, which a load rebuilds
        if name != "intset":
            assert copy.to_bytes() == blob
        assert len(copy) == len(obj)
        assert probe(copy, keys) == probe(obj, keys)
    path = str(tmp_path / name)
    obj.save(path)
    for copy in (dedup.load(path), type(obj).load(path)):
        assert probe(copy, keys) == probe(obj, keys)
        assert name == "intset" or copy.to_bytes() == blob


@pytest.mark.parametrize("name", ["bloom", "cuckoo", "strset", "hll"])
def test_damaged_blobs_are_refused(name, tmp_path, rng):
    obj = ALL[name]()
    fill(obj, random_keys(rng, 200))
    blob = obj.to_bytes()
    path = str(tmp_path / "x")
    cases = {
        "truncated": (blob[:-1], "truncated"),
        "header only": (blob[:40], "truncated"),
        "trailing": (blob + b"\0", "after"),
        "magic": (b"X" + blob[1:], "not a dedup"),
        "empty": (b"", "truncated"),
    }
    # one flipped byte anywhere in the payload: refused, never "fewer keys"
    for i in range(20):
        pos = rng.randrange(40, len(blob) - 8)
        bad = bytearray(blob)
        bad[pos] ^= 1 << rng.randrange(8)
        cases["flip%d" % i] = (bytes(bad), "")
    for what, (data, msg) in cases.items():
        with pytest.raises(dedup.Error) as e:
            dedup.from_bytes(data)
        assert msg.lower() in str(e.value).lower(), (what, str(e.value))
        assert e.value.status > 0
        with open(path, "wb") as fh:
            fh.write(data)
        with pytest.raises(dedup.Error) as e:
            dedup.load(path)
        assert path in str(e.value), (what, str(e.value))
        assert str(e.value).endswith(dedup.strerror(e.value.status)), str(e.value)


def test_wrong_type_and_missing_file(tmp_path):
    blob = dedup.Cuckoo(100).to_bytes()
    with pytest.raises(dedup.Error, match="different structure type") as e:
        dedup.Bloom.from_bytes(blob)
    assert str(e.value) == dedup.strerror(e.value.status)
    with pytest.raises(dedup.Error, match="nope"):
        dedup.load(str(tmp_path / "nope"))
    with pytest.raises(dedup.Error):
        dedup.Bloom(10).save(str(tmp_path / "no" / "such" / "dir"))


def test_failed_save_leaves_the_old_file_and_no_temporary(tmp_path):
    # The rename cannot replace a non-empty directory: the save fails after
    # writing its temporary, which must not stay behind.
    target = tmp_path / "state"
    target.mkdir()
    (target / "old").write_bytes(b"old")
    with pytest.raises(dedup.Error) as e:
        dedup.Bloom(10000).save(str(target))
    assert str(target) in str(e.value)
    assert (target / "old").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    # and a good save replaces a file whole
    path = tmp_path / "f"
    a = dedup.Bloom(100)
    a.add("one")
    a.save(str(path))
    b = dedup.Bloom(100)
    b.add("two")
    b.save(str(path))
    assert path.read_bytes() == b.to_bytes()


@pytest.mark.parametrize("mode", ["exact", "fingerprint", "blocked"])
def test_cli_state_file_to_python_and_back(mode, tmp_path, rng, dedup_bin):
    # A --state FILE the CLI wrapped with its key options loads as a
    # SeenSet that keeps them; deciding in Python and saving writes the
    # same container, which the CLI continues (and refuses with other
    # key options, as its own files).
    path = str(tmp_path / "s.state")
    keys = random_keys(rng, 400)
    first, second = keys[:200], keys[200:]
    lines = ["%s,%d" % (k, i) for i, k in enumerate(first)]
    args = [dedup_bin, "-d", ",", "-f", "1", "--mode", mode, "--state", path]
    if mode == "blocked":
        args += ["-n", "10000", "-p", "1e-7"]  # a false positive here: ~1e-5 a run
    r = subprocess.run(args, input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    s = dedup.load(path)
    assert isinstance(s, dedup.SeenSet)
    ident = s.info["key_options"]
    assert "field=1" in ident and ("mode=%s" % mode) in ident
    assert all(v != dedup.NEW for v in s.query(first))
    assert all(v == dedup.NEW for v in s.decide(second[:100]))
    s.save(path)
    again = dedup.SeenSet.load(path)
    assert again.info["key_options"] == ident and len(again) >= 290
    r = subprocess.run(args, input="\n".join("%s,x" % k for k in first[:50] + second) + "\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [line.split(",")[0] for line in r.stdout.splitlines()] == second[100:]
    r = subprocess.run(args[:4] + ["2"] + args[5:], input="a,b\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "other key options" in r.stderr
    # damage anywhere is refused with the file's name
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2] ^= 0x10
    open(path, "wb").write(raw)
    with pytest.raises(dedup.Error, match="s.state"):
        dedup.load(path)
