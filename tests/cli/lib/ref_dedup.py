#!/usr/bin/env python3
"""A deliberately naive reference for `dedup`'s line filter, used by the CLI
property tests: the same options, implemented the obvious way with a dict."""
import re, sys

FOLD = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))

def main(argv):
    term = b"\n"
    field = 0
    delim = b"\t"
    trim = squeeze = fold = False
    prefix = b""
    out = "first"
    files = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-z": term = b"\0"
        elif a == "-f": i += 1; field = int(argv[i])
        elif a == "-d": i += 1; delim = argv[i].encode()
        elif a == "--trim": trim = True
        elif a == "--squeeze": squeeze = True
        elif a == "-i": fold = True
        elif a == "--strip-prefix": i += 1; prefix = argv[i].encode()
        elif a == "-D": out = "dups"
        elif a == "-c": out = "count"
        elif a == "-u": out = "unique"
        else: files.append(a)
        i += 1
    # files are concatenated record-wise: a file without a final terminator
    # still ends its record (as dedup reads files one after another)
    if files:
        recs = []
        for f in files:
            d = open(f, "rb").read()
            if d:
                parts = d.split(term)
                if parts[-1] == b"": parts.pop()
                recs.extend(parts)
    else:
        recs = sys.stdin.buffer.read().split(term)
        if recs and recs[-1] == b"": recs.pop()
    ws = b" \t\r\n\v\f"
    def key(r):
        k = r
        if field:
            parts = k.split(delim)
            k = parts[field - 1] if field <= len(parts) else b""
        if trim: k = k.strip(ws)
        if squeeze: k = re.sub(rb"[ \t\r\n\v\f]+", b" ", k)  # each run of blanks: one space
        if prefix and k.startswith(prefix): k = k[len(prefix):]
        if fold: k = k.translate(FOLD)  # ASCII A-Z only, as dedup -i
        return k
    w = sys.stdout.buffer
    seen = {}
    order = []
    for r in recs:
        k = key(r)
        if k in seen:
            seen[k][1] += 1
            if out == "dups": w.write(r + term)
        else:
            seen[k] = [r, 1]
            order.append(k)
            if out == "first": w.write(r + term)
    if out == "count":
        for k in order:
            r, c = seen[k]
            w.write(b"%7d " % c + r + term)
    elif out == "unique":
        for k in order:
            r, c = seen[k]
            if c == 1: w.write(r + term)

main(sys.argv[1:])
