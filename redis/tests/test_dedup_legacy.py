#!/usr/bin/python3
"""DEDUP values saved by the module before its port to the library's window
engine (envelope version 2, encver 1; data/dedup_v2_values.json, written by
gen_dedup_fixture.py with the module of that time) still load, through
RESTORE of their DUMP payload (the RDB path) and through LOADCHUNK of their
SCANDUMP chunks (the AOF path), and give the answers they gave then: every
item added is still seen while its window lasts, the short windows' items
are forgotten now, and fresh probes get the same replies."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "data", "dedup_v2_values.json")) as f:
    FIXTURE = json.load(f)["values"]
PROBES = ["p%d" % i for i in range(3000)]
SAME_INFO = ("Window", "Error rate", "Capacity", "Number of items inserted", "Mode")


def info(r, key):
    v = r.execute_command("DEDUP.INFO", key)
    return {k.decode(): (x.decode() if isinstance(x, bytes) else x) for k, x in zip(v[::2], v[1::2])}


def exists(r, key, xs):
    pipe = r.pipeline(transaction=False)
    for x in xs:
        pipe.execute_command("DEDUP.EXISTS", key, x)
    return pipe.execute()


def load_both_ways(r, name, v):
    """RESTORE the DUMP payload as 'name', LOADCHUNK the chunks as
    'name:chunks'; returns the two key names."""
    r.restore(name, 0, bytes.fromhex(v["dump"]))
    for it, data in v["chunks"]:
        assert r.execute_command("DEDUP.LOADCHUNK", name + ":chunks", it,
                                 bytes.fromhex(data)) == b"OK"
    return name, name + ":chunks"


def check_answers(r, key, name, v):
    long_window = v["reserve"][0] > 10 ** 9
    got = exists(r, key, v["items"])
    if long_window:
        assert got == v["exists_items"] == [1] * len(v["items"]), (name, key)
    else:  # the fixture is older than its one-second window
        assert got == [0] * len(v["items"]), (name, key, got)
    got = exists(r, key, PROBES)
    if "EXACT" in v["reserve"] or not long_window:
        assert sum(got) == 0, (name, key, sum(got))
    else:
        assert got == v["exists_probes"], (name, key)


def test_old_values_load_with_the_same_answers(srv):
    r = srv.client()
    for name, v in FIXTURE.items():
        for key in load_both_ways(r, name, v):
            i = info(r, key)
            for field in SAME_INFO:
                assert i[field] == v["info"][field], (name, key, field, i[field], v["info"][field])
            if "EXACT" not in v["reserve"]:
                assert i["Generations"] == v["info"]["Generations"], (name, key, i)
            check_answers(r, key, name, v)


def test_old_values_keep_working_and_survive_a_reload(srv):
    r = srv.client()
    for name, v in FIXTURE.items():
        load_both_ways(r, name, v)
    for name, v in FIXTURE.items():
        long_window = v["reserve"][0] > 10 ** 9
        # a repeat of an item added then, and a new item
        assert r.execute_command("DEDUP.ADD", name, v["items"][1]) == (0 if long_window else 1)
        assert r.execute_command("DEDUP.ADD", name, "after-load") == 1
        assert r.execute_command("DEDUP.ADD", name, "after-load") == 0
    def probe_items(name):
        # what was added after the load only where the window outlasts the
        # reload (a one-second window may pass during it on a loaded machine)
        items = FIXTURE[name]["items"]
        if FIXTURE[name]["reserve"][0] > 10 ** 9:
            return items + ["after-load"]
        return items[:1] + items[2:]
    before = {name: (exists(r, name, probe_items(name)),
                     exists(r, name, PROBES), info(r, name)) for name in FIXTURE}
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    for name, (items, probes, i) in before.items():
        assert exists(r, name, probe_items(name)) == items, name
        assert exists(r, name, PROBES) == probes, name
        after = info(r, name)
        long_window = FIXTURE[name]["reserve"][0] > 10 ** 9
        for field in SAME_INFO + ("Generations",) + (("Keys in window",) if long_window else ()):
            assert after[field] == i[field], (name, field, after[field], i[field])


if __name__ == "__main__":
    run(globals())
