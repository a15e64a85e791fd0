#!/usr/bin/env python3
"""Reference model of `dedup --json PATHS --on-bad-key MODE` for
tests/cli/keys.sh: Python's json module reads each line; a value's key is its
meaning (members in any order, the last of a repeated name, numbers by value
so 1 == 1.0 == 10e-1, strings after their escapes), and a line that is not
JSON, holds invalid UTF-8, nests past the limit or lacks a path has no key.

  ref_json_keys.py gen SEED N [norm]  random JSON Lines on stdout (norm: with
                                      strings that differ in case and spaces)
  ref_json_keys.py ref PATHS MODE FILE [-i] [--trim]
With -i and --trim, a selected value that is a string compares with ASCII
letters folded and leading and trailing whitespace ignored.
"""
import json, random, sys
from decimal import Decimal

DEPTH = 64


def gen(seed, n, norm=False):
    rnd = random.Random(seed)
    users = ['" Ab "', '"ab"', '"AB\\t"', '"\\u0041b"', '"\\r\\nab\\u000b"', '"a b"',
             '"A  B"', '"\\u00c9"', '"\u00e9 "', '"x\\"Y"', '"x\\"y"', '"\\u0000A"'] if norm else []
    users += ['1', '1.0', '10e-1', '"1"', '2', '2.50', '25e-1', 'true', 'null', '"\\u00e9"',
             '"\u00e9"', '"a\\/b"', '"a/b"', '{"x":1,"y":[1,2]}', '{"y":[1,2.0],"x":1}',
             '[1,"1"]', '"\\u0041"', '"A"']
    out = []
    for i in range(n):
        u, a = rnd.choice(users), rnd.choice(['"a1"', '"a2"', '"a\\u0031"'])
        members = ['"user":' + u, '"ad":' + a, '"ts":%d' % i]
        if rnd.random() < 0.1:
            members.append('"user":' + rnd.choice(users))  # a repeated name: the last wins
        rnd.shuffle(members)
        line = "{" + ",".join(members) + "}"
        r = rnd.random()
        if r < 0.03:
            line = '{"user":1,"ad":'  # not JSON
        elif r < 0.06:
            line = '{"ad":"a1"}'  # a path missing
        elif r < 0.08:
            line = '{"user":' + "[" * 100 + "]" * 100 + ',"ad":"a1"}'  # too deep
        elif r < 0.10:
            line = '{"user":"\xff\xfe","ad":"a1"}'  # invalid UTF-8
        out.append(line.encode("latin-1") if any(ord(c) > 127 and c != "\u00e9" for c in line)
                   else line.encode("utf-8"))
    sys.stdout.buffer.write(b"\n".join(out) + b"\n")


def canon(v):
    if isinstance(v, dict):
        return ("O", tuple(sorted((k, canon(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("L", tuple(canon(x) for x in v))
    if isinstance(v, bool) or v is None:
        return ("B", v)
    if isinstance(v, Decimal):
        return ("N", v.normalize())
    return ("S", v)


def depth(v):
    if isinstance(v, dict):
        return 1 + max((depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((depth(x) for x in v), default=0)
    return 0


SPACE = " \t\r\n\v\f"


def norm_str(v, opts):
    if "--trim" in opts:
        v = v.strip(SPACE)
    if "-i" in opts:
        v = "".join(c.lower() if "A" <= c <= "Z" else c for c in v)
    return v


def key_of(line, paths, opts=()):
    try:
        doc = json.loads(line.decode("utf-8"), parse_float=Decimal, parse_int=Decimal)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if depth(doc) > DEPTH:
        return None
    out = []
    for p in paths:
        v = doc
        for name in p.strip(".").split("."):
            if not isinstance(v, dict) or name not in v:
                return None
            v = v[name]
        if isinstance(v, str):
            v = norm_str(v, opts)
        out.append(canon(v))
    return tuple(out)


def ref(paths, mode, fn, opts=()):
    data = open(fn, "rb").read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    seen, out = set(), []
    for line in lines:
        k = key_of(line, paths.split(","), opts)
        if k is None:
            if mode == "fail":
                sys.stdout.buffer.write(b"".join(out))
                return 1
            if mode == "keep":
                out.append(line + b"\n")
            continue
        if k not in seen:
            seen.add(k)
            out.append(line + b"\n")
    sys.stdout.buffer.write(b"".join(out))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(int(sys.argv[2]), int(sys.argv[3]), len(sys.argv) > 4)
    else:
        sys.exit(ref(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]))
