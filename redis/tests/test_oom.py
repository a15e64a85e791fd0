#!/usr/bin/python3
"""Allocation failure is an error reply, never an abort: the server runs
with a 1 GiB address-space limit and the module's own caps raised, so
reserves far beyond it reach the allocator and fail there.  (Not run in the
sanitized build: ASan's shadow memory needs far more address space.)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Server, expect_error, run  # noqa: E402

GIB = 1 << 30


def test_allocation_failure_is_an_error(srv):
    r = srv.client()
    for cmd in (("BF.RESERVE", "b", 0.01, 3000000000, "NONSCALING"),
                ("BF.INSERT", "b", "CAPACITY", 3000000000, "ITEMS", "x"),
                ("CF.RESERVE", "c", 3000000000),
                ("DEDUP.RESERVE", "d", 1000, 0.01, 1000000000)):
        expect_error(r.execute_command, *cmd, match="allocation failure")
        assert r.ping()
    assert r.dbsize() == 0
    # a reasonable filter still works afterwards
    assert r.execute_command("BF.ADD", "ok", "a") == 1
    # growth that cannot be allocated: links of 1000 and 1,024,000 items fit,
    # the third (about 2 GB) does not; the add fails, the filter stays usable
    r.execute_command("BF.RESERVE", "g", 0.01, 1000, "EXPANSION", 1024)
    n = 1000 + 1024000
    for lo in range(0, n, 10000):
        out = r.execute_command("BF.MADD", "g", *[b"i%d" % i for i in range(lo, min(n, lo + 10000))])
        assert all(isinstance(x, int) for x in out)
    # (false positives during the fill left a few slots: add until it fails)
    failed = None
    for batch in range(100):
        out = r.execute_command("BF.MADD", "g", *[b"x%d:%d" % (batch, i) for i in range(1000)])
        if not isinstance(out[-1], int):
            failed = str(out[-1])
            break
    assert failed is not None and "allocation failure" in failed, failed
    assert r.execute_command("BF.INFO", "g", "FILTERS") == [2]
    assert r.execute_command("BF.EXISTS", "g", "i5") == 1
    assert r.ping()


if __name__ == "__main__":
    run(globals(), make_server=lambda: Server(
        module_args=["MAX_MEMORY", 64 * GIB, "MAX_CAPACITY", 1 << 40],
        address_space=GIB))
