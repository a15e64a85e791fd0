# byref_inputs.sh - shared by byref.sh, byref_mt.sh and extref_mt.sh: seeded
# random record files (empty records, mixed case and spaces, binary bytes
# with NUL, then tab-separated fields or, with GEN_STYLE=urls, long URLs)
# and a byte-exact comparison.  Sourced after common.sh.
gen() { # gen FILE LINES DISTINCT SEED [-n: no last newline]
    python3 - "$@" <<'PY'
import os, random, sys
path, n, k, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
urls = os.environ.get("GEN_STYLE") == "urls"
empty, mixed, binary = (0.03, 0.08, 0.12) if urls else (0.05, 0.1, 0.15)
r = random.Random(seed)
vals = []
for i in range(k):
    kind = r.random()
    if kind < empty: vals.append(b"")
    elif kind < mixed: vals.append(b"  Mixed Case\t%d %s" % (i % 7, b"\r" if urls else b""))
    elif kind < binary: vals.append(bytes([r.randrange(256) for _ in range(r.randrange(1, 60 if urls else 30))]).replace(b"\n", b"x").replace(b"\0", b"y") + b"\0in")
    elif urls: vals.append(b"https://host%d.example/%d/f%d/%s" % (i % 50, i, i % 13, b"p" * r.randrange(0, 120)))
    else: vals.append(b"k%d\tf%d\t%s" % (i, i % 13, b"v" * r.randrange(0, 90)))
out = b"\n".join(vals[int(r.random() ** 2 * k)] for _ in range(n))
if len(sys.argv) < 6: out += b"\n"
open(path, "wb").write(out)
PY
}
same() { # same DESC EXPECTED ACTUAL
    if cmp -s "$2" "$3"; then pass; else fail "$1"; diff <(od -c "$2" | head -20) <(od -c "$3" | head -20) | head -5 >&2; fi
}
