#!/usr/bin/python3
"""The Redis module against another build of it, in one run (bench_redis.sh
AB mode): per-key memory, the default scaling filter, bulk inserts and
redis-benchmark throughput, each measured for both modules in interleaved
rounds on private servers (127.0.0.1, free ports, persistence off), medians
reported with the ratio new/old.

    python3 bench/bench_redis_ab.py NEW.so OLD.so [rounds] [items]

Bulk inserts are timed as redis-cli --pipe of pre-built RESP files (10k
items per BF.MADD / CF.INSERT), so the client's cost stays out of them.
Needs redis-server, redis-cli, redis-benchmark and Debian's python3-redis.
"""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Srv:
    def __init__(self, module, d):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", d, "--loadmodule", module],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=600)
        for _ in range(200):
            try:
                self.r.ping()
                return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        try:
            self.r.shutdown(nosave=True)
        except redis.exceptions.ConnectionError:
            pass
        self.proc.wait(30)


def resp(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def pipe_file(path, cmd, key, prefix, n, chunk=10000):
    with open(path, "wb") as f:
        for lo in range(0, n, chunk):
            head = [cmd, key] + ([b"ITEMS"] if cmd == b"CF.INSERT" else [])
            f.write(resp(head + [b"%s%d" % (prefix, i) for i in range(lo, min(n, lo + chunk))]))


def timed_pipe(port, path):
    t0 = time.time()
    with open(path, "rb") as f:
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], stdin=f,
                       stdout=subprocess.DEVNULL, check=True)
    return time.time() - t0


def rate(port, n, *cmd):
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-P", "16", "-n", str(n), "-r",
                          "10000000", "-q"] + list(cmd), capture_output=True, text=True).stdout
    last = [x for x in out.replace("\r", "\n").splitlines() if "requests per second" in x][-1]
    return float(last.split(":")[1].split()[0].replace(",", ""))


def small_keys(r):
    r.execute_command("BF.RESERVE", "b100", 0.01, 100)
    r.execute_command("BF.MADD", "b100", *[b"x%d" % i for i in range(100)])
    r.execute_command("CF.RESERVE", "c100", 100)
    r.execute_command("CF.INSERT", "c100", "ITEMS", *[b"x%d" % i for i in range(100)])
    r.execute_command("BF.ADD", "bauto", "x")
    return r.memory_usage("b100"), r.memory_usage("c100"), r.memory_usage("bauto")


def main():
    new, old = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 10_000_000
    d = tempfile.mkdtemp(prefix="bench-redis-ab-")
    bf_pipe, cf_pipe = os.path.join(d, "bf.resp"), os.path.join(d, "cf.resp")
    pipe_file(bf_pipe, b"BF.MADD", b"bf", b"item:", n)
    pipe_file(cf_pipe, b"CF.INSERT", b"cf", b"item:", n)
    res = {m: {} for m in ("new", "old")}

    def add(m, k, v):
        res[m].setdefault(k, []).append(v)

    mods = {"new": new, "old": old}
    for rnd in range(rounds):
        for m in (("new", "old") if rnd % 2 == 0 else ("old", "new")):
            s = Srv(mods[m], d)
            try:
                r = s.r
                b, c, a = small_keys(r)
                add(m, "MEMORY USAGE, BF 0.01 100 + 100 items (bytes)", b)
                add(m, "MEMORY USAGE, CF 100 + 100 items (bytes)", c)
                add(m, "MEMORY USAGE, BF.ADD-created key, 1 item (bytes)", a)
                r.flushall()
                # the default, scaling, filter reserved for n at 1%
                r.execute_command("BF.RESERVE", "bf", 0.01, n)
                add(m, "BF.MADD %dM items into BF.RESERVE 0.01 %dM (s)" % (n // 10**6, n // 10**6),
                    timed_pipe(s.port, bf_pipe))
                size = r.bf().info("bf").size
                add(m, "scaling BF at capacity: bits/item", size * 8 / n)
                fp = 0
                for lo in range(0, 1_000_000, 10000):
                    fp += sum(r.execute_command("BF.MEXISTS", "bf",
                                                *[b"fresh:%d" % i for i in range(lo, lo + 10000)]))
                add(m, "scaling BF at capacity: FPR over 1M fresh (%)", fp / 1e4)
                r.flushall()
                r.execute_command("CF.RESERVE", "cf", n)
                add(m, "CF.INSERT %dM items into CF.RESERVE %dM (s)" % (n // 10**6, n // 10**6),
                    timed_pipe(s.port, cf_pipe))
                r.flushall()
                r.execute_command("BF.RESERVE", "tb", 0.01, 10_000_000)
                r.execute_command("CF.RESERVE", "tc", 10_000_000)
                add(m, "BF.ADD ops/s (redis-benchmark -P 16)", rate(s.port, 1_000_000, "BF.ADD", "tb", "__rand_int__"))
                add(m, "BF.EXISTS ops/s", rate(s.port, 1_000_000, "BF.EXISTS", "tb", "__rand_int__"))
                add(m, "CF.ADD ops/s", rate(s.port, 1_000_000, "CF.ADD", "tc", "__rand_int__"))
                add(m, "CF.EXISTS ops/s", rate(s.port, 1_000_000, "CF.EXISTS", "tc", "__rand_int__"))
            finally:
                s.stop()
    print("| measure | new (median) | old (median) | new/old | new runs | old runs |")
    print("|---|---:|---:|---:|---|---|")
    for k in res["new"]:
        a, b = statistics.median(res["new"][k]), statistics.median(res["old"][k])
        fmt = (lambda x: "%.0f" % x) if a > 100 else (lambda x: "%.3g" % x)
        print("| %s | %s | %s | %.2f | %s | %s |" % (
            k, fmt(a), fmt(b), a / b if b else float("nan"),
            " ".join(fmt(x) for x in res["new"][k]), " ".join(fmt(x) for x in res["old"][k])))
    for f in (bf_pipe, cf_pipe):
        os.unlink(f)
    os.rmdir(d)


if __name__ == "__main__":
    main()
