"""Shared fixtures: the seed (DEDUP_TEST_SEED, else a fresh one, always
printed) and the CLI binary (DEDUP_BIN, set by CTest)."""
import os
import random
import shutil

import pytest

SEED = int(os.environ.get("DEDUP_TEST_SEED") or random.SystemRandom().randrange(1, 2**31))


def pytest_report_header(config):
    return "DEDUP_TEST_SEED=%d" % SEED


@pytest.fixture
def rng(request):
    # A test's stream depends on the seed and the test's name only.
    print("DEDUP_TEST_SEED=%d" % SEED)
    return random.Random("%d/%s" % (SEED, request.node.name))


@pytest.fixture
def dedup_bin():
    path = os.environ.get("DEDUP_BIN") or shutil.which("dedup")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("the dedup CLI was not found: set DEDUP_BIN (CTest does)")
    return path


def random_keys(rng, n, lo=4, hi=24):
    """n distinct str keys (mixing ASCII and non-ASCII)."""
    out = set()
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789/:.é漢"
    while len(out) < n:
        out.add("".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi))))
    return list(out)
