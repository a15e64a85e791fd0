# byref_inputs.sh - shared by byref.sh and byref_mt.sh: seeded random
# record files (empty records, mixed case and spaces, binary bytes with NUL,
# tab-separated fields) and a byte-exact comparison.  Sourced after
# common.sh.
gen() { # gen FILE LINES DISTINCT SEED [-n: no last newline]
    python3 - "$@" <<'PY'
import random, sys
path, n, k, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = random.Random(seed)
vals = []
for i in range(k):
    kind = r.random()
    if kind < 0.05: vals.append(b"")
    elif kind < 0.1: vals.append(b"  Mixed Case\t%d " % (i % 7))
    elif kind < 0.15: vals.append(bytes([r.randrange(256) for _ in range(r.randrange(1, 30))]).replace(b"\n", b"x").replace(b"\0", b"y") + b"\0in")
    else: vals.append(b"k%d\tf%d\t%s" % (i, i % 13, b"v" * r.randrange(0, 90)))
out = b"\n".join(vals[int(r.random() ** 2 * k)] for _ in range(n))
if len(sys.argv) < 6: out += b"\n"
open(path, "wb").write(out)
PY
}
same() { # same DESC EXPECTED ACTUAL
    if cmp -s "$2" "$3"; then pass; else fail "$1"; diff <(od -c "$2" | head -20) <(od -c "$3" | head -20) | head -5 >&2; fi
}
