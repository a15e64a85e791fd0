"""dedup.Ring routes keys as the CLI does (`dedup ring --owner`), files both ways."""
import subprocess

import pytest

import dedup
from conftest import random_keys


def cli_owner(dedup_bin, args, key):
    r = subprocess.run([dedup_bin, "ring", *args, "--owner", key], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_owner_as_the_cli(rng, dedup_bin, tmp_path):
    nodes = {"alpha": 1.0, "beta": 2.0, "gamma": 0.5}
    ring = dedup.Ring(nodes)
    keys = random_keys(rng, 400)
    owners = ring.owners(keys)
    assert owners == [ring.owner(k) for k in keys]
    spec = ",".join("%s=%g" % kv for kv in nodes.items())
    for k in rng.sample(keys, 8):
        assert cli_owner(dedup_bin, ["--nodes", spec], k) == ring.owner(k)
    # a ring saved by the CLI loads in Python, and the other way round
    path = str(tmp_path / "r.ring")
    subprocess.run([dedup_bin, "ring", "--nodes", spec, "--save", path], check=True,
                   capture_output=True, timeout=30)
    loaded = dedup.load(path)
    assert isinstance(loaded, dedup.Ring) and loaded.owners(keys) == owners
    ring.add("delta")
    ring.save(path)
    for k in rng.sample(keys, 4):
        assert cli_owner(dedup_bin, ["--ring", path], k) == ring.owner(k)
    # removing a node moves only its keys
    before = ring.owners(keys)
    ring.remove("delta")
    after = ring.owners(keys)
    assert all(a == b for a, b in zip(before, after) if a != "delta")
    with pytest.raises(KeyError):
        ring.remove("nope")
    with pytest.raises(dedup.Error):
        dedup.Ring().owner("k")
