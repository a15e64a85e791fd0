#!/usr/bin/env python3
"""Checks one `dedup split` run against its input, for tests/cli/split.sh.

usage: check_split.py TERM INPUT GLOBAL PART:DEDUPED...

TERM is 'nl' or 'nul'; INPUT the input file; GLOBAL the whole input
deduplicated by the reference; each PART the part file, DEDUPED that part
deduplicated by dedup with the same key options.  Checks that every record
is in exactly one part, that each part keeps input order, and that each
part's dedup output is exactly the global output's records of that part, in
the same order (so the union is the global answer and every first
occurrence is the global first occurrence).  Prints what differs."""
import collections, sys

def records(path, term):
    d = open(path, "rb").read()
    if not d:
        return []
    r = d.split(term)
    if r[-1] == b"":
        r.pop()
    return r

def main(argv):
    term = b"\n" if argv[1] == "nl" else b"\0"
    inp = records(argv[2], term)
    glob = records(argv[3], term)
    parts = [a.split(":", 1) for a in argv[4:]]
    part_of = {}
    bad = 0
    got = collections.Counter()
    for i, (p, _) in enumerate(parts):
        for r in records(p, term):
            got[r] += 1
            if part_of.setdefault(r, i) != i:
                print("record %r is in parts %d and %d" % (r, part_of[r], i)); bad += 1
    if got != collections.Counter(inp):
        print("the parts do not hold the input's records exactly once"); bad += 1
    for i, (p, dd) in enumerate(parts):
        if records(p, term) != [r for r in inp if part_of.get(r) == i]:
            print("part %s is not the input's records in input order" % p); bad += 1
        want = [r for r in glob if part_of.get(r) == i]
        if records(dd, term) != want:
            print("dedup of part %s differs from the global first occurrences" % p); bad += 1
    return 1 if bad else 0

sys.exit(main(sys.argv))
