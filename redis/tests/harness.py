"""Test harness for dedup_redis.so: a private redis-server per test file.

The server listens on a free port on 127.0.0.1 only, works in a temporary
directory, has persistence off unless a test asks for it, loads the module
named by $DEDUP_REDIS_MODULE and is always stopped at the end (also when a
test fails or raises).  In a sanitized build $DEDUP_REDIS_PRELOAD names the
ASan/UBSan runtimes to preload into the server; the server log is then
checked for sanitizer reports.

Each test is a function test_*(srv) of the calling module.  run() prints one
line per test and a closing "N passed, M failed" line, and exits non-zero
on any failure.
"""
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import redis

MODULE = os.environ.get("DEDUP_REDIS_MODULE")
SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
PRELOAD = os.environ.get("DEDUP_REDIS_PRELOAD", "")


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """A redis-server with the module loaded.  'appendonly' turns the AOF
    on; stop(save=True) writes dump.rdb; 'server_args' are extra server
    options, 'module_args' are passed after the module path."""

    def __init__(self, module_args=(), appendonly=False, rdb=False, directory=None,
                 server_args=(), address_space=None):
        self.module_args = [str(a) for a in module_args]
        self.address_space = address_space  # RLIMIT_AS in bytes, to provoke OOM
        self.server_args = [str(a) for a in server_args]
        self.appendonly = appendonly
        self.rdb = rdb
        self.own_dir = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="dedup-redis-")
        self.proc = None
        self.port = None
        self.logs = []

    def start(self):
        self.port = free_port()
        log = os.path.join(self.dir, "redis-%d.log" % len(self.logs))
        self.logs.append(log)
        args = [SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", self.dir, "--logfile", log, "--daemonize", "no",
                "--save", "", "--appendonly", "yes" if self.appendonly else "no",
                "--dbfilename", "dump.rdb", "--enable-debug-command", "yes"
                ] + self.server_args + ["--loadmodule", MODULE] + self.module_args
        env = dict(os.environ)
        if PRELOAD:
            env["LD_PRELOAD"] = PRELOAD
            # allocator_may_return_null: a huge allocation fails as with libc
            # (a hostile header may ask for more than the machine has)
            env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0:allocator_may_return_null=1"
            env["UBSAN_OPTIONS"] = "print_stacktrace=1"
        limit = None
        if self.address_space:
            import resource
            cap = self.address_space

            def limit():
                resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                     stderr=open(log + ".stderr", "w"), preexec_fn=limit)
        deadline = time.time() + 20
        while True:
            try:
                self.client().ping()
                if PRELOAD:
                    # Canary: the sanitizer runtime must really be in the server.
                    with open("/proc/%d/maps" % self.proc.pid) as f:
                        if "libasan" not in f.read():
                            raise RuntimeError("ASan runtime not loaded into redis-server")
                return self
            except redis.exceptions.ConnectionError:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("redis-server did not start:\n" + self.log_text())
                time.sleep(0.05)

    def client(self, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=60, **kw)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, save=False):
        """Stops the server: SHUTDOWN SAVE (writes dump.rdb) or NOSAVE."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.client().execute_command("SHUTDOWN", "SAVE" if save else "NOSAVE")
            except (redis.exceptions.ConnectionError, redis.exceptions.ResponseError):
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self, save=False):
        self.stop(save=save)
        return self.start()

    def log_text(self):
        out = []
        for log in self.logs:
            for path in (log, log + ".stderr"):
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        out.append(f.read())
        return "\n".join(out)

    # Redis itself reads the length of every string in a RESTORE payload and
    # asks ztrymalloc() for it, refusing the payload when that fails; with
    # allocator_may_return_null=1 ASan then prints this warning. The module's
    # own allocations go through RedisModule_Alloc, which aborts the server
    # on failure (a dead server fails the test), so this line is Redis's
    # refusal of a hostile length, not a fault of ours.
    TRYALLOC = re.compile(r"^==\d+==WARNING: AddressSanitizer failed to "
                          r"allocate 0x[0-9a-f]+ bytes$")

    def sanitizer_reports(self):
        text = self.log_text()
        return [line for line in text.splitlines()
                if ("AddressSanitizer" in line or "runtime error:" in line
                    or "LeakSanitizer" in line)
                and not self.TRYALLOC.match(line)]

    def cleanup(self):
        self.stop()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def seed():
    s = int(os.environ.get("DEDUP_TEST_SEED", random.randrange(1 << 32)))
    print("seed %d (DEDUP_TEST_SEED=%d replays)" % (s, s))
    return random.Random(s)


def count_interval(mean, tail=1e-6):
    """[lo, hi] around an expected count of rare independent events (a
    filter's false positives): P(X < lo) and P(X > hi) are each at most
    'tail' for X ~ Poisson(mean), whose variance is at least that of any sum
    of independent Bernoulli trials with this mean."""
    import math
    if mean <= 0:
        return 0, 0

    def pmf(j):
        return math.exp(-mean + j * math.log(mean) - math.lgamma(j + 1))
    span, mode = int(12 * math.sqrt(mean) + 40), int(mean)
    lo, acc = 0, 0.0
    for j in range(max(0, mode - span), mode + 1):
        if acc + pmf(j) > tail:
            lo = j
            break
        acc += pmf(j)
    hi, acc = mode, 0.0
    for j in range(mode + span, mode - 1, -1):
        if acc + pmf(j) > tail:
            hi = j
            break
        acc += pmf(j)
    return lo, hi


def assert_count(what, observed, mean):
    """Asserts that 'observed' lies in count_interval(mean), two-sided: a
    structure erring twice as often as its own formula says fails, and so
    does one that errs far less (a check that cannot see its events)."""
    lo, hi = count_interval(mean)
    print("  %s: %d observed, %.1f expected, allowed %d .. %d (1e-6 a side)"
          % (what, observed, mean, lo, hi))
    assert lo <= observed <= hi, (what, observed, mean, lo, hi)


def bloom_rate(items, bits, k):
    """A classic Bloom filter's false-positive rate holding 'items' keys:
    (1 - (1 - 1/m)^(k n))^k, as dedup_bloom_fpr_for."""
    import math
    if items <= 0:
        return 0.0
    return (1.0 - math.exp(k * items * math.log1p(-1.0 / bits))) ** k


def bf_links(r, key):
    """(bits, hashes, items) of each link of a BF filter, from BF.DEBUG."""
    out = []
    for line in r.execute_command("BF.DEBUG", key)[1:]:
        f = dict(kv.split(":", 1) for kv in line.decode().split())
        out.append((int(f["bits"]), int(f["hashes"]), int(f["size"])))
    return out


def bf_rate_now(r, key):
    """The rate a fresh key meets in a BF filter now: it is present when any
    link answers yes."""
    miss = 1.0
    for bits, k, n in bf_links(r, key):
        miss *= 1.0 - bloom_rate(n, bits, k)
    return 1.0 - miss


def cf_rate_now(r, key, error_rate=0.01):
    """The rate a fresh key meets in a CF filter now, from CF.DEBUG: each of
    its links has 2 b slots to compare with, each holding one of 2^f - 1
    fingerprints with probability its load; f is the library's width for
    the module's error rate (the first of 8, 12, .. with 2 b / 2^f <= it)."""
    f = dict(kv.split(":", 1) for kv in r.execute_command("CF.DEBUG", key).decode().split())
    b, nb, items = int(f["bktsize"]), int(f["buckets"]), int(f["items"])
    fbits = next(w for w in range(8, 33, 4) if 2.0 * b / 2 ** w <= error_rate)
    return 2.0 * b * (items / (nb * b)) / (2 ** fbits - 1)


def run(module_globals, make_server=lambda: Server()):
    if not MODULE or not os.path.exists(MODULE):
        print("DEDUP_REDIS_MODULE is not set to the built module")
        print("0 passed, 1 failed")
        sys.exit(1)
    tests = [(n, f) for n, f in module_globals.items()
             if n.startswith("test_") and callable(f)]
    only = os.environ.get("DEDUP_REDIS_ONLY")
    if only:
        tests = [(n, f) for n, f in tests if only in n]
    passed = failed = 0
    srv = make_server()
    try:
        srv.start()
        for name, fn in tests:
            if not srv.alive():
                srv.start()
            srv.client().flushall()
            t0 = time.time()
            try:
                fn(srv)
                if not srv.alive():
                    raise AssertionError("redis-server died:\n" + srv.log_text()[-4000:])
                passed += 1
                print("PASS %-40s %.2fs" % (name, time.time() - t0))
            except Exception:
                failed += 1
                print("FAIL %s" % name)
                traceback.print_exc()
                if not srv.alive():
                    print(srv.log_text()[-4000:])
            sys.stdout.flush()
    finally:
        srv.stop()
        reports = srv.sanitizer_reports()
        if reports:
            failed += 1
            print("FAIL sanitizer reports in the server log:")
            print(srv.log_text()[-8000:])
        srv.cleanup()
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


def expect_error(fn, *args, match=None):
    """Calls fn(*args) and returns the error text; fails unless it raised a
    redis ResponseError containing 'match'."""
    try:
        r = fn(*args)
    except redis.exceptions.ResponseError as e:
        text = str(e)
        if match is not None and match not in text:
            raise AssertionError("error %r does not contain %r" % (text, match))
        return text
    raise AssertionError("expected an error%s, got %r" % (
        "" if match is None else " containing %r" % match, r))
