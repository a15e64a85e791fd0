#!/usr/bin/env bash
# Damage to a state file or a filter file (issue 33): every single-byte
# corruption and every truncation of a small file is refused with exit 2
# and a message naming the file, or gives exactly the right answer; never
# "fewer keys".  Exhaustive over each file's bytes in an optimised build;
# under a sanitizer (several times slower a run) every third variant, from
# an offset the seed draws, so that seeds together cover them all.
. "$(dirname "$0")/lib/common.sh"
export LC_ALL=C

printf 'a\nb\nc\n' > "$T/abc"
printf 'a\t1\nb\t2\nc\t3\n' > "$T/abc_t"
# kind | options making and using the state | input making it
cat > "$T/kinds" <<'EOF'
exact|--seed 1|abc
fingerprint|--seed 1 --mode fingerprint|abc
blocked|--seed 1 --mode blocked -n 20|abc
window|--seed 1 --window 1h -f 1 --time-field 2|abc_t
EOF
while IFS='|' read -r kind opts input; do
    # shellcheck disable=SC2086
    "$DEDUP" $opts --state "$T/$kind.state" "$T/$input" > /dev/null ||
        fail "$kind: making the state"
done < "$T/kinds"
"$DEDUP" filter create "$T/filter.bf" -n 20 --seed 1 && "$DEDUP" filter add "$T/filter.bf" a b c ||
    fail "making the filter file"

python3 - "$DEDUP" "$T" "$SEED" "${DEDUP_SANITIZER:-}" <<'PY'
import concurrent.futures, os, random, subprocess, sys
dedup, T, seed, sanitizer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rng = random.Random(seed)
step = 3 if sanitizer else 1
kinds = [l.split("|") for l in open(os.path.join(T, "kinds")).read().split("\n") if l]
# A rerun reads a, d, b, e: exactly d and e are new.
new_lines = {"abc": b"a\nd\nb\ne\n", "abc_t": b"a\t4\nd\t5\nb\t6\ne\t7\n"}
want_new = {"abc": b"d\ne\n", "abc_t": b"d\t5\ne\t7\n"}
jobs = []
for kind, opts, inp in kinds:
    good = open(os.path.join(T, kind + ".state"), "rb").read()
    jobs.append((kind, good, ["--state"] + opts.split(), new_lines[inp], want_new[inp]))
good = open(os.path.join(T, "filter.bf"), "rb").read()
jobs.append(("filter", good, None, None, b"a\nb\n"))

def variants(data):
    for i in range(len(data)):
        d = bytearray(data)
        d[i] ^= rng.randrange(1, 256)
        yield "byte %d changed" % i, bytes(d)
    for n in range(len(data)):
        yield "cut to %d bytes" % n, data[:n]

def trial(args):
    kind, what, data, opts, feed, want, idx = args
    path = os.path.join(T, "d%d.%s" % (idx, kind))
    with open(path, "wb") as f:
        f.write(data)
    if opts is None:
        cmd = [dedup, "filter", "query", path, "a", "d", "b", "e"]
        r = subprocess.run(cmd, capture_output=True)
    else:
        cmd = [dedup] + opts[:1] + [path] + opts[1:]
        r = subprocess.run(cmd, input=feed, capture_output=True)
    for p in (path, path + ".lock"):
        try:
            os.unlink(p)
        except OSError:
            pass
    if r.returncode == 2 and path.encode() in r.stderr and not r.stdout:
        return None
    if r.returncode == 0 and r.stdout == want:
        return None
    return "%s, %s: exit %d, stdout %r, stderr %r" % (kind, what, r.returncode, r.stdout[:80],
                                                     r.stderr[:200])

work, idx = [], 0
start = seed % step
for kind, data, opts, feed, want in jobs:
    for k, (what, d) in enumerate(variants(data)):
        if k % step == start:
            work.append((kind, what, d, opts, feed, want, idx))
            idx += 1
bad = []
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    for res in ex.map(trial, work):
        if res:
            bad.append(res)
print("%d damaged files tried (%s)" % (len(work), ", ".join("%s %d bytes" % (j[0], len(j[1])) for j in jobs)))
for b in bad[:20]:
    print("ACCEPTED DAMAGE: " + b)
sys.exit(1 if bad else 0)
PY
check "every damaged state or filter file is refused naming it, or answers right" test $? -eq 0

finish
