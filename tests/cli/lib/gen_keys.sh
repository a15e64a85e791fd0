# gen_keys.sh - shared by tiers.sh and tiers_redis.sh: a seeded file of N
# lines "k<i>", each i drawn uniformly from [0, UNIVERSE).  Sourced after
# common.sh (python3 is Debian's, lib/python.sh).
gen() { # gen SEED N UNIVERSE FILE
    python3 - "$1" "$2" "$3" "$4" <<'PY'
import random, sys
seed, n, u, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = random.Random(seed)
with open(path, "w") as f:
    for _ in range(n):
        f.write("k%d\n" % r.randrange(u))
PY
}
