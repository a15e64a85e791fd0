#!/usr/bin/env python3
"""Reference tests of the URL canonicaliser and the JSON path extractor
(src/key/url.c, src/key/json.c) against models built on Python's
urllib.parse and json, on seeded random hostile inputs.

    test_keyparse_ref.py DRIVER      (DRIVER: the built tests/util/keyparse_driver)

The seed comes from DEDUP_TEST_SEED when set, else from the clock; it is
printed.  Every input line goes through the driver (one process per option
set) and its output line must equal the model's byte for byte.

Where Python's semantics differ from the contract (src/key/url.h,
src/key/json.h), the model applies the contract on top of Python's parsing,
and says so below:
  URLs  - urlsplit() removes tabs/CR/LF and strips leading controls and
          spaces: the model hides bytes <= 0x20 behind private code points
          while splitting, since the contract keeps every byte;
        - urlsplit() keeps the fragment: the model drops it;
        - .hostname lower-cases non-ASCII letters: the model lower-cases
          ASCII only and takes the host text from ._hostinfo;
        - escape normalisation, dot-segment removal, default ports and
          parameter dropping/sorting are the contract's rules, written here
          again independently (RFC 3986 5.2.4 in its string-rewriting form);
        - urlsplit() refuses stray '[' or ']' in the authority, and ignores
          text between ']' and ':': the generator makes neither (the C unit
          tests cover them).
  JSON  - json.loads() accepts NaN/Infinity and lone surrogate escapes: the
          model refuses them (CORRUPT);
        - numbers are compared by exact value (decimal.Decimal), not floats;
        - nesting deeper than 64 is LIMIT (Python would recurse on).
"""
import decimal
import fnmatch
import json
import os
import random
import re
import subprocess
import sys
import time

MAX_DEPTH = 64

# ---------------------------------------------------------------- URL model
from urllib.parse import urlsplit

ESC = re.compile(r"%[0-9A-Fa-f]{2}")
UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


HEX = set("0123456789abcdefABCDEF")


def norm_escapes(s, fold=False):
    """The contract's escape rule; an escape of a hex digit that would make
    an escape with a stray '%' before it stays encoded."""
    out = []
    i = 0
    while i < len(s):
        m = ESC.match(s, i)
        if m:
            ch = chr(int(s[i + 1:i + 3], 16))
            stray = (out[-1:] == ["%"]) or (len(out) >= 2 and out[-2] == "%" and out[-1] in HEX)
            if ch in UNRESERVED and not (ch in HEX and stray):
                out.append(ch.lower() if fold else ch)
            else:
                out.extend(s[i:i + 3].upper())
            i += 3
        else:
            c = s[i]
            out.append(c.lower() if fold and c.isascii() else c)
            i += 1
    return "".join(out)


def remove_dot_segments(inp):
    """RFC 3986 5.2.4, the string-rewriting form."""
    out = ""
    while inp:
        if inp.startswith("../"):
            inp = inp[3:]
        elif inp.startswith("./"):
            inp = inp[2:]
        elif inp.startswith("/./"):
            inp = "/" + inp[3:]
        elif inp == "/.":
            inp = "/"
        elif inp.startswith("/../"):
            inp = "/" + inp[4:]
            out = out[:out.rfind("/")] if "/" in out else ""
        elif inp == "/..":
            inp = "/"
            out = out[:out.rfind("/")] if "/" in out else ""
        elif inp in (".", ".."):
            inp = ""
        else:
            j = inp.find("/", 1)
            j = len(inp) if j < 0 else j
            out += inp[:j]
            inp = inp[j:]
    return out


def hide(s):
    return "".join(chr(0xE000 + ord(c)) if ord(c) <= 0x20 else c for c in s)


def unhide(s):
    return "".join(chr(ord(c) - 0xE000) if 0xE000 <= ord(c) <= 0xE020 else c for c in s)


def url_model(b, drops, sort):
    s = hide(b.decode("latin-1"))
    try:
        p = urlsplit(s)
        m = re.match(r"[A-Za-z][A-Za-z0-9+.-]*", s)
        if not p.scheme or not m or m.group(0).lower() != p.scheme or \
                not s[m.end():].startswith("://"):
            return None
        userinfo, at, _ = p.netloc.rpartition("@")
        host, port = p._hostinfo
        port_num = p.port  # raises ValueError like the contract's port rule
    except ValueError:
        return None
    if not host:
        return None
    bracket = p.netloc.rpartition("@")[2].startswith("[")
    host = norm_escapes(("[" + host + "]") if bracket else host, fold=True)
    out = p.scheme + "://" + (userinfo + at) + host
    if port_num is not None and not ((p.scheme, port_num) in (("http", 80), ("https", 443))):
        out += ":" + str(port_num)
    path = remove_dot_segments(norm_escapes(p.path)) if p.path else "/"
    out += path
    if p.query:
        params = [norm_escapes(x) for x in p.query.split("&")]
        if drops or sort:
            params = [x for x in params if x]
            params = [x for x in params
                      if not any(fnmatch.fnmatchcase(x.partition("=")[0], g) for g in drops)]
            if sort:
                params.sort(key=lambda x: (unhide(x.partition("=")[0]).encode("latin-1"),
                                           unhide(x[len(x.partition("=")[0]):]).encode("latin-1")))
        if params:
            out += "?" + "&".join(params)
    return unhide(out).encode("latin-1")


SCHEMES = ["http", "HTTP", "https", "HtTpS", "ftp", "ws", "a+b.c-d", "1http", "ht tp", ""]
SEPS = ["://"] * 12 + [":/", ":", "//"]
USERS = ["", "", "", "user:Pass@", "%7Eu@", "a%2fb@", "x@y@", "\x00@"]
HOSTS = ["Example.COM", "www.a.com.", "A%2Db.org", "%41b", "[FE80::1]", "[::FFFF:1.2.3.4]",
         "x\x00y", "\xff\xe9.de", "", "h\ty", "a%2e", "%zzq", "EXAMPLE.com"]
PORTS = ["", "", "", ":", ":80", ":443", ":0080", ":8080", ":0", ":99999", ":8a", ":+1", ":\xb2"]
SEGS = ["", ".", "..", "%2e", "%2E%2e", "a", "B", "%7e", "%7E", "%2f", "%zz", "%", "%4", "a b",
        "x\ty", "\r", "\x00", '"q"', "+", "%20", "\xc3\xa9", "%C3%a9", ";p=1", "~", "%41%42",
        "%2E.", "..."]
PNAMES = ["utm_source", "UTM_x", "utm%5Fx", "utm", "fbclid", "gclid", "a", "b", "", "%61", "A",
          "b\x00", "\xe9"]
PVALS = ["", "=", "=1", "=2", "=x%20y", "=a+b", "=%7e", "==", "=\r"]
FRAGS = ["", "", "#", "#top", "#a?b&c", "#%41"]


def gen_url(r):
    u = r.choice(SCHEMES) + r.choice(SEPS) + r.choice(USERS) + r.choice(HOSTS) + r.choice(PORTS)
    if r.random() < 0.9:
        u += "".join("/" + r.choice(SEGS) for _ in range(r.randrange(0, 6)))
    if r.random() < 0.7:
        u += "?" + "&".join(r.choice(PNAMES) + r.choice(PVALS) for _ in range(r.randrange(0, 7)))
    u += r.choice(FRAGS)
    return u.encode("latin-1")


# --------------------------------------------------------------- JSON model
class Num:
    def __init__(self, t):
        self.t = t


def bad_constant(name):
    raise ValueError(name)


def canon_num(t):
    sign, digits, exp = decimal.Decimal(t).as_tuple()
    digits = list(digits)
    if not any(digits):
        return "0"
    while digits[0] == 0:
        digits.pop(0)
    while digits[-1] == 0:
        digits.pop()
        exp += 1
    s = "-" if sign else ""
    ds = "".join(map(str, digits))
    if 0 <= exp <= 21:
        return s + ds + "0" * exp
    x = exp + len(ds) - 1
    return s + ds[0] + ("." + ds[1:] if len(ds) > 1 else "") + "e" + str(x)


def check_strings(v):
    """Raises UnicodeEncodeError when a string or name holds a lone surrogate."""
    if isinstance(v, str):
        v.encode("utf-8")
    elif isinstance(v, list):
        for x in v:
            check_strings(x)


def pairs_hook(pairs):
    """Every member is checked, also those a later repeated name overrides."""
    for k, v in pairs:
        k.encode("utf-8")
        check_strings(v)
    return dict(pairs)


def max_depth(text):
    """Deepest container nesting of a valid JSON text."""
    d = m = 0
    instr = esc = False
    for ch in text:
        if instr:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                instr = False
        elif ch == '"':
            instr = True
        elif ch in "[{":
            d += 1
            m = max(m, d)
        elif ch in "]}":
            d -= 1
    return m


def canon(v):
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, Num):
        return canon_num(v.t)
    if isinstance(v, list):
        return "[" + ",".join(canon(x) for x in v) + "]"
    keys = sorted(v, key=lambda k: json.dumps(k, ensure_ascii=False)[1:-1].encode("utf-8"))
    return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canon(v[k]) for k in keys) + "}"


def json_model(b, paths):
    try:
        text = b.decode("utf-8")
        doc = json.loads(text, parse_int=Num, parse_float=Num, parse_constant=bad_constant,
                         object_pairs_hook=pairs_hook)
        check_strings(doc)
        depth = max_depth(text)
    except (ValueError, UnicodeError, RecursionError):
        return b"ERR CORRUPT"
    if depth > MAX_DEPTH:
        return b"ERR LIMIT"
    vals = []
    for i, path in enumerate(paths):
        v = doc
        for c in path:
            if isinstance(c, int) and isinstance(v, list) and c < len(v):
                v = v[c]
            elif isinstance(c, str) and isinstance(v, dict) and c in v:
                v = v[c]
            else:
                return b"ERR NOT_FOUND %d" % i
        vals.append(canon(v))
    return ("OK" + "".join("\t" + x for x in vals)).encode("utf-8")


KEYS = ["user", "id", "ad", "a", "b", "\u00e9", "a.b", "items", "sku", "", "A", "\U0001F600", "x\"y"]
NUMS = ["0", "-0", "1", "1.0", "1e2", "100", "1E+2", "0.001", "1e-3", "12345678901234567890123456789",
        "1.5e300", "-2.50e-10", "1e21", "1e22", "10e20", "0.0e0", "-0.0", "7", "123.4560",
        "1" + "0" * 40, "9" * 30 + ".5", "1e-400", "5E-0"]
STRS = ["", "a3", "\u00e9", "\U0001F600", "\"", "\\", "/", "\n", "\x00", "\t", "\x7f", "\u2028",
        "1", "a,b", "\x1f", "\ufeff"]
BAD = ["\x00", "\xff", "\xc0\xaf", "\\ud800", "\\udc00x", "\"", ",", "\t", "}", "]", "\xed\xa0\x80",
       "\x01", "NaN", "01", "1.", ".5", "\\x", "\xf4\x90\x80\x80", "\\u12", "Infinity", "tru"]


def enc_str(r, s):
    out = []
    for ch in s:
        o = ord(ch)
        k = r.random()
        short = {"\"": "\\\"", "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\b": "\\b", "\f": "\\f",
                 "\r": "\\r", "/": "\\/"}
        if o > 0xFFFF and k < 0.5:
            v = o - 0x10000
            hi, lo = 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)
            out.append(("\\u%04x\\u%04X" if k < 0.25 else "\\u%04X\\u%04x") % (hi, lo))
        elif ch in short and (k < 0.5 or ch in "\"\\\n\t\r"):
            out.append(short[ch])
        elif o < 0x20 or ch in "\"\\" or (k < 0.3 and o <= 0xFFFF):
            out.append(("\\u%04x" if k < 0.15 else "\\u%04X") % o)
        else:
            out.append(ch)
    return "\"" + "".join(out) + "\""


def ws(r):
    return r.choice(["", "", "", " ", "\t", "\r", "  \r\t"])


def gen_value(r, depth):
    k = r.random()
    if depth < 4 and k < 0.3:
        members = []
        for _ in range(r.randrange(0, 5)):
            members.append(ws(r) + enc_str(r, r.choice(KEYS)) + ws(r) + ":" + gen_value(r, depth + 1))
        return "{" + ",".join(members) + ws(r) + "}"
    if depth < 4 and k < 0.45:
        return "[" + ",".join(gen_value(r, depth + 1) for _ in range(r.randrange(0, 4))) + ws(r) + "]"
    if k < 0.65:
        v = r.choice(NUMS) if r.random() < 0.7 else str(r.randrange(-10**6, 10**6))
    elif k < 0.9:
        v = enc_str(r, "".join(r.choice(STRS) for _ in range(r.randrange(0, 4))))
    else:
        v = r.choice(["true", "false", "null"])
    return ws(r) + v + ws(r)


def gen_record(r):
    members = []
    if r.random() < 0.8:
        members.append(("user", "{" + ws(r) + "\"id\":" + gen_value(r, 2) + (
            ",\"id\":" + gen_value(r, 2) if r.random() < 0.2 else "") + "}"))
    if r.random() < 0.8:
        members.append(("ad", gen_value(r, 1)))
    if r.random() < 0.5:
        members.append(("items", "[{\"sku\":" + gen_value(r, 3) + "}," + gen_value(r, 2) + "]"))
    if r.random() < 0.3:
        members.append(("a.b", gen_value(r, 1)))
    for _ in range(r.randrange(0, 3)):
        members.append((r.choice(KEYS), gen_value(r, 1)))
    r.shuffle(members)
    t = ws(r) + "{" + ",".join(ws(r) + enc_str(r, k) + ws(r) + ":" + v for k, v in members) + "}" + ws(r)
    deep = r.random() < 0.05
    if deep:  # 60..70 levels around a valid value
        d = r.randrange(58, 70)
        t = "{\"user\":" + "[" * d + t + "]" * d + "}"
    b = t.encode("utf-8")
    if not deep and r.random() < 0.15:  # hostile damage (not in deep ones: LIMIT comes first)
        bad = r.choice(BAD).encode("latin-1")
        at = r.randrange(0, len(b) + 1)
        b = b[:at] + bad + b[at + (1 if r.random() < 0.5 else 0):]
    return b.replace(b"\n", b"")


JSON_SPECS = [
    (".user.id,.ad", [["user", "id"], ["ad"]]),
    (".items[0].sku,.\"a.b\",.", [["items", 0, "sku"], ["a.b"], []]),
    (".ad,.user,.\"\\u00e9\",.items[1]", [["ad"], ["user"], ["\u00e9"], ["items", 1]]),
    (".user", [["user"]]),
]
URL_OPTS = [([], False), (["utm_*", "fbclid", "gclid"], False), (["utm_*", "?"], True), ([], True)]


def run(driver, args, lines):
    p = subprocess.run([driver] + args, input=b"\n".join(lines) + b"\n", stdout=subprocess.PIPE,
                       timeout=120, check=True)
    out = p.stdout.split(b"\n")
    assert out[-1] == b"" and len(out) == len(lines) + 1, "driver gave %d lines for %d" % (
        len(out) - 1, len(lines))
    return out[:-1]


def main():
    driver = sys.argv[1]
    seed = int(os.environ.get("DEDUP_TEST_SEED") or time.time_ns() % (1 << 32))
    print("seed: %d (DEDUP_TEST_SEED=%d to replay)" % (seed, seed), flush=True)
    r = random.Random(seed)
    n = int(os.environ.get("KEYPARSE_N", "4000"))
    fails = 0
    urls = [gen_url(r) for _ in range(n)]
    for drops, sort in URL_OPTS:
        args = ["url"] + sum((["-d", g] for g in drops), []) + (["-s"] if sort else [])
        got = run(driver, args, urls)
        for u, g in zip(urls, got):
            m = url_model(u, drops, sort)
            want = b"ERR INVALID_ARG" if m is None else m
            if g != want:
                fails += 1
                if fails <= 20:
                    print("URL %r %s\n  got  %r\n  want %r" % (u, args[1:], g, want))
    recs = [gen_record(r) for _ in range(n)]
    for spec, paths in JSON_SPECS:
        got = run(driver, ["json", spec], recs)
        for rec, g in zip(recs, got):
            want = json_model(rec, paths)
            if g != want:
                fails += 1
                if fails <= 40:
                    print("JSON %r %s\n  got  %r\n  want %r" % (rec, spec, g, want))
    kinds = {"URL OK": sum(url_model(u, [], False) is not None for u in urls)}
    for spec, paths in JSON_SPECS[:1]:
        for rec in recs:
            k = b" ".join(json_model(rec, paths).split(b"\t")[0].split(b" ")[:2]).decode()
            kinds[k] = kinds.get(k, 0) + 1
    print("%d URLs x %d option sets, %d records x %d specs; outcomes of the first spec: %s" % (
        n, len(URL_OPTS), n, len(JSON_SPECS), kinds))
    if fails:
        print("FAIL: %d mismatches (seed %d)" % (fails, seed))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
