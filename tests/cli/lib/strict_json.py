#!/usr/bin/env python3
"""strict_json.py [--lines] [FILE]: parses FILE (or standard input) as one
JSON value, or with --lines as JSON Lines (one value a non-empty line),
strictly: a member named twice in one object, NaN or Infinity, an empty
input or anything after the value is an error.  Exit 0 and prints how many
values were read; exit 1 with the reason on standard error."""
import json
import sys


def no_duplicates(pairs):
    seen = set()
    for k, _ in pairs:
        if k in seen:
            raise ValueError("member %r appears twice in one object" % k)
        seen.add(k)
    return dict(pairs)


def no_constant(name):
    raise ValueError("%s is not JSON" % name)


def parse(text):
    return json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant)


def main(argv):
    lines = "--lines" in argv
    args = [a for a in argv if a != "--lines"]
    src = open(args[0], encoding="utf-8") if args else sys.stdin
    text = src.read()
    try:
        if lines:
            docs = [ln for ln in text.split("\n") if ln.strip()]
            if not docs:
                raise ValueError("no JSON line")
            for i, ln in enumerate(docs, 1):
                try:
                    parse(ln)
                except ValueError as e:
                    raise ValueError("line %d: %s" % (i, e))
            n = len(docs)
        else:
            if not text.strip():
                raise ValueError("empty input")
            parse(text)
            n = 1
    except ValueError as e:
        sys.stderr.write("strict_json: %s\n" % e)
        return 1
    print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
