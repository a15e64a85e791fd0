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


@pytest.fixture
def redis_url(tmp_path):
    """A redis-server of our own on a free 127.0.0.1 port, stopped after
    the test; skips when Redis or this build's Redis seen-set is missing."""
    import socket
    import subprocess
    import time

    import dedup

    if not hasattr(dedup.SeenSet, "open_redis") or not shutil.which("redis-server"):
        pytest.skip("no redis-server, or built without the Redis seen-set")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:  # until it answers PING (bounded)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("redis-server did not answer on port %d" % port)
            time.sleep(0.02)
        yield "redis://127.0.0.1:%d" % port
    finally:
        proc.terminate()
        proc.wait(10)
