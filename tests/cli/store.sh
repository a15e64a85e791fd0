#!/usr/bin/env bash
# dedup --store DIR: runs over parts of a seeded random stream equal one run
# over all of it (each --sync mode, digest and whole keys); dedup store
# info; refusals (foreign, damaged, in use by PID N).
. "$(dirname "$0")/lib/common.sh"

if ! "$DEDUP" --help | grep -q -- '--store=DIR'; then
    echo "FAIL: this dedup has no --store (built without RocksDB?)" >&2
    exit 1
fi

gen() { # gen SEED N UNIVERSE FILE: N lines drawn from UNIVERSE keys
    python3 - "$1" "$2" "$3" "$4" <<'PY'
import random, sys
seed, n, u, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = random.Random(seed)
with open(path, "w") as f:
    for _ in range(n):
        f.write("url/%d/%s\n" % (r.randrange(u), "x" * r.randrange(30)))
PY
}

# --- three runs equal one run over the concatenation --------------------------------
gen "$SEED" 30000 20000 "$T/a"
gen $((SEED + 1)) 30000 20000 "$T/b"
gen $((SEED + 2)) 30000 40000 "$T/c"
cat "$T/a" "$T/b" "$T/c" > "$T/all"
awk '!seen[$0]++' "$T/all" > "$T/ref"
for sync in batch always none; do
    for keys in digest whole; do
        d="$T/st_${sync}_$keys"
        : > "$T/got"
        for part in a b c; do
            "$DEDUP" --tier "rocksdb:$d,sync=$sync,keys=$keys" "$T/$part" >> "$T/got" ||
                fail "run over $part ($sync, $keys) failed"
        done
        check "three runs = one run over a+b+c (sync $sync, $keys keys)" cmp -s "$T/ref" "$T/got"
    done
done
# --store is the same store, and its --sync applies
: > "$T/got"
for part in a b c; do "$DEDUP" --store "$T/st_s" --sync always "$T/$part" >> "$T/got"; done
check "--store DIR: three runs = one run" cmp -s "$T/ref" "$T/got"
# a second pass over everything finds only duplicates, and -D writes them
"$DEDUP" --store "$T/st_s" "$T/all" > "$T/got"
check "a repeated input is all duplicates" test ! -s "$T/got"

# --- store info ---------------------------------------------------------------------
"$DEDUP" store info "$T/st_s" > "$T/info" || fail "store info failed"
nref=$(wc -l < "$T/ref")
check "store info counts the distinct keys ($nref)" grep -q "^keys: *$nref\$" "$T/info"
check "store info shows bytes per key" grep -q "^bytes per key: *[0-9]" "$T/info"
"$DEDUP" store info --json "$T/st_s" > "$T/info.json"
check "store info --json" python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['keys']==$nref and j['bytes_on_disk']>0" "$T/info.json"

# --- refusals -------------------------------------------------------------------------
mkdir "$T/foreign"; echo hello > "$T/foreign/notes.txt"
echo x | "$DEDUP" --store "$T/foreign" > "$T/out" 2> "$T/err"
check "a foreign DIR is refused with exit 2" test $? -eq 2
check "... saying it is not a store" grep -q "not a dedup store" "$T/err"
check "... and the DIR is untouched" test "$(ls "$T/foreign")" = notes.txt
echo x | "$DEDUP" --store "$T/a" 2> "$T/err" >/dev/null
check "a file as DIR is refused" grep -q "not a dedup store (not a directory)" "$T/err"
cp -r "$T/st_s" "$T/damaged"
printf 'MANIFEST-garbage' > "$T/damaged/CURRENT"
echo x | "$DEDUP" --store "$T/damaged" > "$T/out" 2> "$T/err"
check "a damaged store is refused with exit 2" test $? -eq 2
check "... naming what is wrong" grep -qi "corrupt\|cannot open" "$T/err"
check "... writing nothing" test ! -s "$T/out"
# --- the seed: random at creation, kept; --seed fixes one ---------------------------
sd=$("$DEDUP" store info --json "$T/st_s" | python3 -c "import json,sys; print('0x%016x' % json.load(sys.stdin)['seed'])")
check "a new store's seed is not the public one ($sd)" test "$sd" != 0x9e3779b97f4a7c15
echo x | "$DEDUP" --store "$T/st_s" --seed 42 2> "$T/err" >/dev/null
check "another seed is refused, naming both" grep -q "seed $sd, asked 0x000000000000002a" "$T/err"
seq 1 5 | "$DEDUP" --store "$T/st_42" --seed 42 > /dev/null
check "--seed fixes a new store's seed" grep -q "seed 0x000000000000002a" <("$DEDUP" store info "$T/st_42")
seq 1 5 | "$DEDUP" --store "$T/st_r2" > /dev/null
check "two new stores take two seeds" test "$("$DEDUP" store info "$T/st_r2" | grep -o 'seed 0x[0-9a-f]*')" != "seed $sd"
seq 1 8 | "$DEDUP" --store "$T/st_42" --mode blocked -n 1000 -p 0.01 > "$T/out" 2>/dev/null
check "a filter in front takes the store's seed (6 7 8 new)" test "$(cat "$T/out" | tr '\n' ' ')" = "6 7 8 "

# --- the key options: part of the store's identity --------------------------------------
seq 1 5 | "$DEDUP" --store "$T/st_k" > /dev/null
check "store info shows the key options" grep -q "^key options: *keys/1 field=0 delim=00 term=0a\$" <("$DEDUP" store info "$T/st_k")
seq 1 7 | "$DEDUP" -i --store "$T/st_k" > "$T/out" 2> "$T/err"
check "other key options (-i) are refused with exit 2" test $? -eq 2
check "... naming both" grep -q "made with \[keys/1 field=0 delim=00 term=0a\]; this run makes them with \[keys/1 field=0 delim=00 term=0a icase\]" "$T/err"
check "... writing nothing" test ! -s "$T/out"
seq 1 7 | "$DEDUP" -i --force-keys --store "$T/st_k" > "$T/out"
check "--force-keys uses it anyway (6 and 7 new)" test "$(cat "$T/out" | tr '\n' ' ')" = "6 7 "
seq 1 7 | "$DEDUP" --store "$T/st_k" > "$T/out" 2> "$T/err"
check "... and records the new options as the store's" grep -q "this run makes them with \[keys/1 field=0 delim=00 term=0a\]" "$T/err"

# --- a killed run's pending log: the next run says how many keys it recovered -------------
mkfifo "$T/fifo_r"
"$DEDUP" --store "$T/st_rec" --line-buffered "$T/fifo_r" > "$T/rec.out" 2>/dev/null &
rpid=$!
exec 7> "$T/fifo_r"
seq 1 10 >&7
wait_until 20 test "$(wc -l < "$T/rec.out")" -ge 10
check "a run reading a FIFO wrote its first 10 records" test "$(wc -l < "$T/rec.out")" -eq 10
kill -9 $rpid; wait $rpid 2>/dev/null
exec 7>&-
seq 1 12 | "$DEDUP" --store "$T/st_rec" > "$T/out" 2> "$T/err"
check "the next run writes only 11 and 12" test "$(cat "$T/out" | tr '\n' ' ')" = "11 12 "
check "... and says it recovered the 10 keys" grep -q "st_rec: 10 key(s) recovered from the pending log" "$T/err"
echo x | "$DEDUP" --tier "rocksdb:$T/st_s,keys=whole" 2> "$T/err" >/dev/null
check "another key mode is refused" grep -q "holds digest keys, asked whole" "$T/err"
echo x | "$DEDUP" --store "$T/st_s" --state "$T/state" 2> "$T/err" >/dev/null
check "--store with --state is a usage error" grep -q "cannot be combined with --state" "$T/err"

# --- a second process on the same DIR: "in use" -----------------------------------
mkfifo "$T/fifo"
"$DEDUP" --store "$T/st_s" "$T/fifo" > /dev/null 2>&1 &
holder=$!
locked=0
for _ in $(seq 1 400); do   # the holder opens the store (LOCK held), then waits on the FIFO
    if ls -l "/proc/$holder/fd" 2>/dev/null | grep -q "st_s/LOCK"; then locked=1; break; fi
    sleep 0.05
done
check "the first dedup holds the store" test $locked -eq 1
echo x | "$DEDUP" --store "$T/st_s" > "$T/out" 2> "$T/err"
check "a second dedup on the same DIR exits 2" test $? -eq 2
check "... told the DIR is in use by the holder's PID ($holder)" grep -q "st_s: in use by PID $holder" "$T/err"
"$DEDUP" store info "$T/st_s" > /dev/null 2>&1
check "store info works while the store is in use" test $? -eq 0
timeout 10 sh -c ": > '$T/fifo'" # the holder reads an empty input and ends
wait $holder
check "the holder ends normally" test $? -eq 0

# ---- a table file's damaged properties block: refused naming it, never a crash ---------
# (issue 33: Debian's librocksdb parses that block before checking it and
# aborted on the restart count's hash-index bit, so dedup died of SIGABRT)
cp -r "$T/st_s" "$T/props"
python3 - "$T/props" <<'PY'
import glob, sys
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return v, i
for fn in sorted(glob.glob(sys.argv[1] + "/*.sst"))[-1:]:
    d = bytearray(open(fn, "rb").read())
    mo, i = varint(d, len(d) - 52); ms, _ = varint(d, i)    # the footer's metaindex handle
    at, end = mo, mo + ms - 4 - 4 * int.from_bytes(d[mo + ms - 4:mo + ms], "little")
    while at < end:                                         # its entries: the properties'
        _, at = varint(d, at); kl, at = varint(d, at); vl, at = varint(d, at)
        key, at = bytes(d[at:at + kl]), at + kl
        if key == b"rocksdb.properties":
            po, j = varint(d, at); ps, _ = varint(d, j)
            d[po + ps - 1] ^= 0x80                          # the restart count's top bit
        at += vl
    open(fn, "wb").write(d)
PY
sst=$(ls "$T/props" | grep '\.sst$' | sort | tail -1)
echo x | "$DEDUP" --store "$T/props" > "$T/out" 2> "$T/err"
rc=$?
check "a damaged properties block: exit 2, not a crash (got $rc)" test $rc -eq 2
check "... naming the table file: $(head -c 300 "$T/err")" grep -q "$sst.*damaged" "$T/err"
check "... writing nothing" test ! -s "$T/out"

# kill -9 at random instants: tests/cli/store_kill_*.sh

finish
