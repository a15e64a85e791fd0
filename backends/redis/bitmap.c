/*
 * bitmap.c - the bitmap scheme: a blocked Bloom filter on plain Redis
 * strings (dedup/redis.h).
 *
 * Layout.  The filter's blocks (512 bits each) are numbered as a local
 * blocked filter numbers them: block = reduce(lo, blocks).  Segment s holds
 * blocks [s * bps, (s + 1) * bps), bps = ceil(blocks / segments) <= 2^23 so
 * a segment stays within Redis' 2^32-bit string limit.  Inside its block a
 * key's bit i is at pos = (hi * SALT[i]) >> 55, the salts of bloom.c (pinned
 * there; a change there is a change of format here, and the test comparing
 * with a local filter catches it).  Redis numbers bits most-significant
 * first inside a byte, so local bit p of a segment is Redis bit
 * (p & ~7) | (7 - (p & 7)): a segment's bytes are then exactly the bytes
 * of the local filter's little-endian words, and copying is byte for byte.
 *
 * One batch = one command per segment touched.  Without generations it is
 * a plain BITFIELD of "SET u1 <off> 1" operations: Redis runs them in order
 * and returns each old bit, so a key is present when all its k old bits
 * were 1 -- atomic, and measured 3-4x faster than the same work through a
 * script (a script pays a Lua table entry and a conversion per argument).
 * With generations it is one script call, with every key of the call in
 * KEYS (the generation keys of one segment share a {hash tag}, so one
 * slot).  The script reads the older live generations with BITFIELD
 * GET, then BITFIELD SET (which returns the old bits) in the current one
 * for the keys found in none, in batch order: a key repeated in a batch is
 * present the second time.  It answers one byte per key ('1' present).
 */
#define _POSIX_C_SOURCE 200809L
#include "rd.h"

#include "dedup/bloom.h"
#include "dedup/limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FORMAT_VERSION 2
#define BLOCK_BITS 512u
#define MAX_SEG_BLOCKS (UINT64_C(1) << 23) /* 2^32 bits (format 1) */
#define SEG_BLOCKS_V2 (MAX_SEG_BLOCKS - 1) /* room for the sentinel byte */
#define MAX_K 16u
#define OFF_W 11 /* a bit offset < 2^32 in decimal, plus room */

static const uint64_t SALT[MAX_K] = {
    UINT64_C(0x157A3807A48FAA9D), UINT64_C(0xD573529B34A1D093), UINT64_C(0x2F90B72E996DCCBF),
    UINT64_C(0xA2D419334C4667ED), UINT64_C(0x01404CE914938009), UINT64_C(0x14BC574C2A2B4C73),
    UINT64_C(0xB8FC5B1060708C05), UINT64_C(0x8931545F4F9EA651), UINT64_C(0xF984DB4EF14FDE1B),
    UINT64_C(0x2680D065CB73ECE7), UINT64_C(0xCDB8C9CD9A62DA0F), UINT64_C(0x6A6E60FD5089ADED),
    UINT64_C(0x8EBA85B28DF77747), UINT64_C(0x97F6C69811CFB13B), UINT64_C(0x380E8B5C685039CF),
    UINT64_C(0xD7EBCCA19D49C3F5)};

/* KEYS[1] = the current generation, KEYS[2..] older live ones.
 * ARGV = k, record ('1'/'0'), PEXPIREAT of KEYS[1] ('0' = none), offsets. */
static const char SCRIPT[] =
    "local k = tonumber(ARGV[1])\n"
    "local record = ARGV[2] == '1'\n"
    "local total = #ARGV - 3\n"
    "local n = total / k\n"
    "local function bits(key, op, items)\n"
    "  local out, args = {}, {}\n"
    "  local per = op == 'SET' and 4 or 3\n"
    "  local function flush()\n"
    "    if #args > 0 then\n"
    "      local r = redis.call('BITFIELD', key, unpack(args))\n"
    "      for j = 1, #r do out[#out + 1] = r[j] end\n"
    "      args = {}\n"
    "    end\n"
    "  end\n"
    "  for _, i in ipairs(items) do\n"
    "    for j = 1, k do\n"
    "      args[#args + 1] = op; args[#args + 1] = 'u1'\n"
    "      args[#args + 1] = ARGV[3 + (i - 1) * k + j]\n"
    "      if per == 4 then args[#args + 1] = 1 end\n"
    "    end\n"
    "    if #args >= 6000 then flush() end\n"
    "  end\n"
    "  flush()\n"
    "  return out\n"
    "end\n"
    "local function all_set(r, m)\n"
    "  local res = {}\n"
    "  for q = 1, m do\n"
    "    local a = 1\n"
    "    for j = 1, k do if r[(q - 1) * k + j] == 0 then a = 0 end end\n"
    "    res[q] = a\n"
    "  end\n"
    "  return res\n"
    "end\n"
    "local present, idx = {}, {}\n"
    "for i = 1, n do present[i] = false; idx[i] = i end\n"
    "local first_old = record and 2 or 1\n"
    "for g = first_old, #KEYS do\n"
    "  local a = all_set(bits(KEYS[g], 'GET', idx), n)\n"
    "  for i = 1, n do if a[i] == 1 then present[i] = true end end\n"
    "end\n"
    "if record then\n"
    "  local todo = {}\n"
    "  for i = 1, n do if not present[i] then todo[#todo + 1] = i end end\n"
    "  if #todo > 0 then\n"
    "    local a = all_set(bits(KEYS[1], 'SET', todo), #todo)\n"
    "    for q = 1, #todo do if a[q] == 1 then present[todo[q]] = true end end\n"
    "    if ARGV[3] ~= '0' then redis.call('PEXPIREAT', KEYS[1], ARGV[3]) end\n"
    "  end\n"
    "end\n"
    "local s = {}\n"
    "for i = 1, n do s[i] = present[i] and '1' or '0' end\n"
    "return table.concat(s)\n";

size_t rd_segment_key(const dedup_redis *r, uint32_t s, uint64_t gen, char *buf)
{
    return (size_t)sprintf(buf, "%s:{%s:s%u}:g%llu", r->name, r->name, s, (unsigned long long)gen);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rd_current_gen(const dedup_redis *r) { return r->gen_ms ? now_ms() / r->gen_ms : 0; }

typedef struct shape_text {
    unsigned version;
    unsigned long long bits, seed, gen_ms, items;
    unsigned k, segments, gens;
    double fpr;
} shape_text;

/* Format 1: "v=1 bits=... fpr=F" (generations in a field of their own).
 * Format 2 adds " gens=G" and ends with " sum=H" (rd_meta_seal), and its
 * segments carry a sentinel byte (RD_SENTINEL) just past their blocks,
 * without generations: a segment missing, evicted or recreated under an
 * existing name is then told from an empty one. */
static int shape_format(char *buf, size_t cap, const shape_text *t)
{
    int n = snprintf(buf, cap, "v=%u bits=%llu k=%u seed=%llu segments=%u gen_ms=%llu items=%llu fpr=%.17g",
                     t->version, t->bits, t->k, t->seed, t->segments, t->gen_ms, t->items, t->fpr);
    if (t->version >= 2 && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " gens=%u", t->gens);
    return n;
}

/* Strict: the text must be exactly what shape_format() writes. */
static bool shape_parse(const char *s, size_t len, shape_text *t)
{
    if (sscanf(s, "v=%u bits=%llu k=%u seed=%llu segments=%u gen_ms=%llu items=%llu fpr=%lg",
               &t->version, &t->bits, &t->k, &t->seed, &t->segments, &t->gen_ms, &t->items,
               &t->fpr) != 8)
        return false;
    if (t->version >= 2) {
        const char *g = strstr(s, " gens=");
        if (!g || sscanf(g, " gens=%u", &t->gens) != 1)
            return false;
    }
    char again[320];
    int n = shape_format(again, sizeof again, t);
    return n > 0 && (size_t)n == len && memcmp(again, s, len) == 0;
}

static dedup_status load_script(dedup_redis *r)
{
    redisReply *reps[1024];
    size_t n;
    const char *argv[3] = {"SCRIPT", "LOAD", SCRIPT};
    size_t lens[3] = {6, 4, sizeof SCRIPT - 1};
    dedup_status st = rc_each_master(r->c, 3, argv, lens, reps, 1024, &n);
    for (size_t i = 0; i < n; i++) {
        if (st == DEDUP_OK) {
            if (reps[i]->type != REDIS_REPLY_STRING || reps[i]->len != 40)
                st = rd_reply_error(r, reps[i], "SCRIPT LOAD");
            else
                memcpy(r->sha, reps[i]->str, 41);
        }
        freeReplyObject(reps[i]);
    }
    if (st != DEDUP_OK && !r->err[0])
        rd_error(r, "%s", rc_error(r->c));
    return st;
}

/* The shape this client would create from its options. */
static dedup_status bitmap_offer(dedup_redis *r, shape_text *want)
{
    const dedup_redis_params *o = &r->o;
    uint64_t bits = o->bits ? (o->bits + BLOCK_BITS - 1) / BLOCK_BITS * BLOCK_BITS
                            : dedup_blocked_bits_for(o->items, o->fpr);
    if (bits == 0 || bits > DEDUP_MAX_BITS) {
        rd_error(r, "a bitmap filter for %llu keys at %g needs more than 2^40 bits",
                 (unsigned long long)o->items, o->fpr);
        return DEDUP_ERR_LIMIT;
    }
    uint64_t n = o->items ? o->items : dedup_blocked_capacity_for(bits, o->fpr);
    uint32_t k = o->hashes ? o->hashes : n ? dedup_blocked_k_for(n, bits) : 1;
    if (k < 1 || k > MAX_K) {
        rd_error(r, "a bitmap filter takes k in 1..%u (got %u)", MAX_K, k);
        return DEDUP_ERR_INVALID_ARG;
    }
    uint64_t blocks = bits / BLOCK_BITS;
    uint64_t segs = o->segments ? o->segments : (blocks + SEG_BLOCKS_V2 - 1) / SEG_BLOCKS_V2;
    if (!o->segments && r->url.cluster && segs < 16)
        segs = 16 < blocks ? 16 : blocks; /* spread over the masters */
    if (segs < 1)
        segs = 1;
    if (segs > 65536 || segs > blocks || (blocks + segs - 1) / segs > SEG_BLOCKS_V2) {
        rd_error(r, "%llu segments cannot hold %llu blocks (1..min(65536, blocks), each at "
                    "most 2^23 - 1 blocks)", (unsigned long long)segs, (unsigned long long)blocks);
        return DEDUP_ERR_INVALID_ARG;
    }
    want->bits = bits;
    want->k = k;
    want->segments = (unsigned)segs;
    want->items = n;
    want->gen_ms = o->ttl_ms ? (o->ttl_ms / o->generations ? o->ttl_ms / o->generations : 1) : 0;
    return DEDUP_OK;
}

/* Segment s's sentinel: bit offset of the byte just past its blocks. */
static size_t sentinel_off(const dedup_redis *r, char *buf)
{
    return (size_t)sprintf(buf, "%llu", (unsigned long long)(r->blocks_per_seg * BLOCK_BITS));
}

/* Format 2 without generations: sets (create) or checks every segment's
 * sentinel, one pipeline.  A segment without it is missing (deleted,
 * evicted, or recreated empty since) or not ours: an error naming it. */
static dedup_status sentinels(dedup_redis *r, bool create)
{
    char off[24], kb[2 * RD_MAX_NAME + 48];
    size_t ol = sentinel_off(r, off);
    rc_batch_reset(&r->b);
    for (uint32_t s = 0; s < r->shape.segments; s++) {
        size_t kl = rd_segment_key(r, s, 0, kb);
        const char *a[6] = {"BITFIELD", kb, create ? "SET" : "GET", "u8", off, "165"};
        size_t l[6] = {8, kl, 3, 2, ol, 3};
        if (!rc_batch_add(&r->b, create ? 6 : 5, a, l, 1, s))
            return DEDUP_ERR_NOMEM;
    }
    r->b.wait_replicas = create ? r->o.wait_replicas : 0;
    dedup_status st = rd_exec(r);
    if (st != DEDUP_OK)
        return st;
    for (size_t j = 0; j < r->b.n; j++) {
        const redisReply *rep = r->b.cmds[j].reply;
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 1 ||
            rep->element[0]->type != REDIS_REPLY_INTEGER)
            return rd_reply_error(r, rep, "BITFIELD of a segment's sentinel");
        if (!create && rep->element[0]->integer != RD_SENTINEL) {
            rd_segment_key(r, r->b.cmds[j].tag, 0, kb);
            rd_error(r, "segment %s of the bitmap filter '%s' is missing (deleted or evicted, or "
                        "recreated empty since) or is not ours, while %s:meta is there: its keys "
                        "would be taken for new; restore it, or delete the filter's keys to start "
                        "over", kb, r->name, r->name);
            return DEDUP_ERR_CORRUPT;
        }
    }
    rc_batch_reset(&r->b);
    return DEDUP_OK;
}

/* Reads "<name>:meta", creating it first (HSETNX: the first client's shape
 * wins, every later one compares) when this client has a shape to offer
 * and there is none. */
dedup_status rd_bitmap_open(dedup_redis *r)
{
    const dedup_redis_params *o = &r->o;
    shape_text want = {FORMAT_VERSION, 0, o->seed, 0, o->items, 0, 0, o->generations, o->fpr};
    bool offer = o->items > 0 || o->bits > 0;
    if (o->generations < 1 || o->generations > RD_MAX_GEN) {
        rd_error(r, "generations must be in 1..%d (got %u)", RD_MAX_GEN, o->generations);
        return DEDUP_ERR_INVALID_ARG;
    }
    if (offer) {
        dedup_status st = bitmap_offer(r, &want);
        if (st != DEDUP_OK)
            return st;
        uint64_t rs;
        if (o->secret_seed && rd_random_seed(r, &rs) != DEDUP_OK)
            return DEDUP_ERR_IO;
        if (o->secret_seed)
            want.seed = rs;
    }
    char meta[RD_MAX_NAME + 8], body[320], text[352];
    size_t ml = (size_t)sprintf(meta, "%s:meta", r->name);
    shape_format(body, sizeof body, &want);
    int tl = rd_meta_seal(text, sizeof text, body);
    const char *a1[4] = {"HSETNX", meta, "shape", text};
    size_t l1[4] = {6, ml, 5, (size_t)tl};
    const char *a2[4] = {"HMGET", meta, "generations", "shape"};
    size_t l2[4] = {5, ml, 11, 5};
    redisReply *got = NULL, *ggot = NULL;
    dedup_status st = DEDUP_OK;
    /* Round 1 reads; round 2 (no shape stored, one to offer) creates the
     * segments' sentinels, then the shape, and reads again. */
    for (int round = 0; round < 2; round++) {
        rc_batch_reset(&r->b);
        if (round == 1) {
            r->blocks = want.bits / BLOCK_BITS;
            r->blocks_per_seg = (r->blocks + want.segments - 1) / want.segments;
            r->shape.segments = want.segments;
            if (!want.gen_ms && (st = sentinels(r, true)) != DEDUP_OK)
                return st;
            if (!rc_batch_add(&r->b, 4, a1, l1, 1, 0))
                return DEDUP_ERR_NOMEM;
        }
        if (!rc_batch_add(&r->b, 4, a2, l2, 1, 1))
            return DEDUP_ERR_NOMEM;
        if ((st = rd_exec(r)) != DEDUP_OK)
            return st;
        for (size_t j = 0; j < r->b.n; j++)
            if (r->b.cmds[j].reply->type == REDIS_REPLY_ERROR)
                return rd_reply_error(r, r->b.cmds[j].reply, "metadata key");
        redisReply *both = r->b.cmds[r->b.n - 1].reply;
        if (both->type != REDIS_REPLY_ARRAY || both->elements != 2)
            return rd_reply_error(r, both, "metadata key");
        got = both->element[1];
        ggot = both->element[0];
        if (got->type == REDIS_REPLY_STRING || !offer)
            break;
    }
    unsigned have_gens = 4;
    if (ggot->type == REDIS_REPLY_STRING &&
        (sscanf(ggot->str, "%u", &have_gens) != 1 || have_gens < 1 || have_gens > RD_MAX_GEN)) {
        rd_error(r, "%s holds generations='%s', not a number in 1..%d", meta, ggot->str, RD_MAX_GEN);
        return DEDUP_ERR_CORRUPT;
    }
    if (got->type == REDIS_REPLY_STRING && strncmp(got->str, "scheme=", 7) == 0) {
        rd_error(r, "'%s' in Redis is not a bitmap filter (%s holds '%s', another scheme's "
                    "shape): use its scheme, or another name", r->name, meta, got->str);
        return DEDUP_ERR_WRONG_TYPE;
    }
    if (got->type != REDIS_REPLY_STRING) {
        rd_error(r, "no bitmap filter named '%s' in Redis (%s is absent): give its size "
                    "(items, or bits) to create it", r->name, meta);
        return DEDUP_ERR_NOT_FOUND;
    }
    shape_text have;
    memset(&have, 0, sizeof have);
    size_t bl = got->len;
    unsigned ver = 0;
    if (sscanf(got->str, "v=%u", &ver) == 1 && ver >= 2 &&
        (st = rd_meta_open_seal(r, meta, got->str, &bl)) != DEDUP_OK)
        return st;
    uint64_t seg_max = ver >= 2 ? SEG_BLOCKS_V2 : MAX_SEG_BLOCKS;
    if (!shape_parse(got->str, bl, &have) || have.version < 1 || have.version > FORMAT_VERSION ||
        have.k < 1 || have.k > MAX_K || have.bits < BLOCK_BITS || have.bits % BLOCK_BITS ||
        have.bits > DEDUP_MAX_BITS || have.segments < 1 || have.segments > 65536 ||
        have.segments > have.bits / BLOCK_BITS ||
        (have.bits / BLOCK_BITS + have.segments - 1) / have.segments > seg_max ||
        (have.version >= 2 && (have.gens < 1 || have.gens > RD_MAX_GEN))) {
        rd_error(r, "%s holds a shape this version cannot use: '%s' (format version 1 or %u "
                    "expected)", meta, got->str, FORMAT_VERSION);
        return have.version > FORMAT_VERSION || have.version < 1 ? DEDUP_ERR_VERSION
                                                                 : DEDUP_ERR_CORRUPT;
    }
    if (have.version >= 2)
        have_gens = have.gens;
    if (offer && (have.bits != want.bits || have.k != want.k ||
                  (!o->secret_seed && have.seed != want.seed) ||
                  have.segments != want.segments || have.gen_ms != want.gen_ms ||
                  (have.gen_ms && have_gens != o->generations))) {
        char mine[320];
        want.seed = o->seed;
        shape_format(mine, sizeof mine, &want);
        rd_error(r, "the bitmap filter '%s' in Redis has %s generations=%u; this run asks %s "
                    "generations=%u (same -n, -p, seed, segments and TTL needed, or another "
                    "name)", r->name, got->str, have_gens, mine, o->generations);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    if (!offer && !o->secret_seed && o->seed != have.seed) {
        rd_error(r, "the bitmap filter '%s' in Redis has seed=%llu; this run asks seed=%llu",
                 r->name, have.seed, (unsigned long long)o->seed);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    /* Without a shape of its own a client takes the stored TTL; one that
     * names a TTL must name the stored one. */
    uint64_t asked_gen = o->ttl_ms / have_gens ? o->ttl_ms / have_gens : 1;
    if (!offer && o->ttl_ms && asked_gen != have.gen_ms) {
        rd_error(r, "the bitmap filter '%s' in Redis has gen_ms=%llu generations=%u (a TTL of "
                    "%llu ms); this run asks a TTL of %llu ms", r->name, have.gen_ms, have_gens,
                 have.gen_ms * have_gens, (unsigned long long)o->ttl_ms);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    rc_batch_reset(&r->b);
    r->blocks = have.bits / BLOCK_BITS;
    r->blocks_per_seg = (r->blocks + have.segments - 1) / have.segments;
    r->gen_ms = have.gen_ms;
    r->shape.bits = have.bits;
    r->shape.k = have.k;
    r->shape.segments = have.segments;
    r->shape.generations = have.gen_ms ? have_gens : 0;
    r->shape.items = have.items;
    r->shape.fpr = have.fpr;
    r->shape.seed = have.seed;
    r->o.generations = have_gens;
    if (have.gen_ms && o->ttl_ms == 0)
        r->o.ttl_ms = have.gen_ms * have_gens;
    r->sentinels = have.version >= 2 && !have.gen_ms;
    if (r->sentinels && (st = sentinels(r, false)) != DEDUP_OK)
        return st;
    return load_script(r);
}

/* Without generations one segment is one plain key: a batch is one
 * BITFIELD command per segment (SET u1 off 1 returns the old bit, in order,
 * atomically), cheaper than any script. */
static bool add_bitfield(dedup_redis *r, uint32_t s, uint32_t first, size_t count, bool record,
                         const char *offs, const unsigned char *olen)
{
    uint32_t k = r->shape.k;
    size_t args = 5 + count * k * (record ? 4 : 3);
    if (rd_scratch(r, 0, args, 2 * RD_MAX_NAME + 48 + 24) != DEDUP_OK)
        return false;
    size_t a = 0;
    r->argv[a] = "BITFIELD";
    r->lens[a++] = 8;
    r->argv[a] = r->argbuf;
    r->lens[a++] = rd_segment_key(r, s, 0, r->argbuf);
    if (r->sentinels) { /* first, the sentinel: a segment recreated lacks it */
        char *off = r->argbuf + 2 * RD_MAX_NAME + 48;
        r->argv[a] = "GET";
        r->lens[a++] = 3;
        r->argv[a] = "u8";
        r->lens[a++] = 2;
        r->argv[a] = off;
        r->lens[a++] = sentinel_off(r, off);
    }
    for (uint32_t i = first; i != UINT32_MAX; i = r->seg_next[i])
        for (uint32_t j = 0; j < k; j++) {
            size_t slot = (size_t)i * k + j;
            r->argv[a] = record ? "SET" : "GET";
            r->lens[a++] = 3;
            r->argv[a] = "u1";
            r->lens[a++] = 2;
            r->argv[a] = offs + slot * OFF_W;
            r->lens[a++] = olen[slot];
            if (record) {
                r->argv[a] = "1";
                r->lens[a++] = 1;
            }
        }
    return rc_batch_add(&r->b, (int)a, r->argv, r->lens, 1, s);
}

/* Appends the script call of segment s (its keys chained from first[s]). */
static bool add_call(dedup_redis *r, uint32_t s, uint32_t first, size_t count, bool record,
                     bool eval, const char *offs, const unsigned char *olen)
{
    uint32_t k = r->shape.k;
    uint64_t cur = rd_current_gen(r);
    uint32_t older = r->gen_ms ? r->shape.generations : 0;
    uint32_t nkeys = 1 + older;
    size_t args = 3 + nkeys + 3 + count * k;
    if (rd_scratch(r, 0, args, nkeys * (2 * RD_MAX_NAME + 48) + 64) != DEDUP_OK)
        return false;
    size_t a = 0, used = 0;
    r->argv[a] = eval ? "EVAL" : "EVALSHA";
    r->lens[a++] = eval ? 4 : 7;
    r->argv[a] = eval ? SCRIPT : r->sha;
    r->lens[a++] = eval ? sizeof SCRIPT - 1 : 40;
    char *nk = r->argbuf + used;
    r->argv[a] = nk;
    r->lens[a++] = (size_t)sprintf(nk, "%u", nkeys);
    used += 16;
    for (uint32_t g = 0; g < nkeys; g++) {
        char *kb = r->argbuf + used;
        size_t kl = rd_segment_key(r, s, cur >= g ? cur - g : 0, kb);
        r->argv[a] = kb;
        r->lens[a++] = kl;
        used += kl + 1;
    }
    char *ka = r->argbuf + used;
    r->argv[a] = ka;
    r->lens[a++] = (size_t)sprintf(ka, "%u", k);
    used += 8;
    r->argv[a] = record ? "1" : "0";
    r->lens[a++] = 1;
    char *ex = r->argbuf + used;
    r->argv[a] = ex;
    r->lens[a++] = r->gen_ms ? (size_t)sprintf(ex, "%llu",
                                               (unsigned long long)((cur + 1) * r->gen_ms + r->o.ttl_ms))
                             : (size_t)sprintf(ex, "0");
    for (uint32_t i = first; i != UINT32_MAX; i = r->seg_next[i])
        for (uint32_t j = 0; j < k; j++) {
            size_t slot = (size_t)i * k + j;
            r->argv[a] = offs + slot * OFF_W;
            r->lens[a++] = olen[slot];
        }
    return rc_batch_add(&r->b, (int)a, r->argv, r->lens, 3, s);
}

/* A segment's reply: the shape its command asks (and, with sentinels, the
 * sentinel first), else the error it is (its message kept when 'say'). */
static dedup_status check_reply(dedup_redis *r, const rc_cmd *cm, uint32_t count, bool say)
{
    const redisReply *rep = cm->reply;
    size_t head = r->sentinels ? 1 : 0;
    if (r->gen_ms ? rep->type != REDIS_REPLY_STRING || rep->len != count
                  : rep->type != REDIS_REPLY_ARRAY ||
                        rep->elements != (size_t)count * r->shape.k + head) {
        char keep[sizeof r->err];
        memcpy(keep, r->err, sizeof keep);
        dedup_status st = rd_reply_error(r, rep, r->gen_ms ? "bitmap script" : "BITFIELD");
        if (say)
            rd_error_on(r, cm);
        else
            memcpy(r->err, keep, sizeof keep);
        return st;
    }
    if (head && (rep->element[0]->type != REDIS_REPLY_INTEGER ||
                 rep->element[0]->integer != RD_SENTINEL)) {
        if (say) {
            char kb[2 * RD_MAX_NAME + 48];
            rd_segment_key(r, cm->tag, 0, kb);
            rd_error(r, "segment %s of the bitmap filter '%s' went missing during the run "
                        "(deleted or evicted) or is not ours: its keys would be taken for new; "
                        "restore it, or delete the filter's keys to start over",
                     kb, r->name);
            rd_error_on(r, cm);
        }
        return DEDUP_ERR_CORRUPT;
    }
    return DEDUP_OK;
}

dedup_status rd_bitmap_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, bool record)
{
    uint32_t k = r->shape.k, S = r->shape.segments;
    size_t n = b->n;
    dedup_status st = rd_scratch(r, n, 0, 0);
    if (st != DEDUP_OK)
        return st;
    char *offs = malloc(n * k * OFF_W);
    unsigned char *olen = malloc(n * k);
    uint32_t *count = calloc(S, sizeof *count), *first = malloc(S * sizeof *first),
             *last = malloc(S * sizeof *last);
    redisReply **by_seg = calloc(S, sizeof *by_seg);
    bool *lost = calloc(S, sizeof *lost);
    bool any_lost = false;
    dedup_status failed = DEDUP_OK;
    if (!offs || !olen || !count || !first || !last || !by_seg || !lost) {
        st = DEDUP_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        dedup_digest d = b->digests[i];
        uint64_t block = dedup_reduce(d.lo, r->blocks);
        uint32_t s = (uint32_t)(block / r->blocks_per_seg);
        uint64_t base = (block - (uint64_t)s * r->blocks_per_seg) * BLOCK_BITS;
        for (uint32_t j = 0; j < k; j++) {
            unsigned pos = (unsigned)((d.hi * SALT[j]) >> 55);
            uint64_t p = base + pos;
            uint64_t ro = (p & ~UINT64_C(7)) | (7 - (p & 7));
            size_t slot = i * k + j;
            olen[slot] = (unsigned char)sprintf(offs + slot * OFF_W, "%llu", (unsigned long long)ro);
        }
        r->seg_of[i] = s;
        r->seg_next[i] = UINT32_MAX;
        if (count[s] == 0)
            first[s] = (uint32_t)i;
        else
            r->seg_next[last[s]] = (uint32_t)i;
        r->pos_in[i] = count[s]++;
        last[s] = (uint32_t)i;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        rc_batch_reset(&r->b);
        bool any = false;
        for (uint32_t s = 0; s < S; s++) {
            if (!count[s] || by_seg[s])
                continue;
            any = true;
            if (r->gen_ms ? !add_call(r, s, first[s], count[s], record, attempt > 0, offs, olen)
                          : !add_bitfield(r, s, first[s], count[s], record, offs, olen)) {
                st = DEDUP_ERR_NOMEM;
                goto out;
            }
        }
        if (!any)
            break;
        r->b.wait_replicas = record ? r->o.wait_replicas : 0;
        failed = rd_exec(r);
        if (failed != DEDUP_OK && (!record || r->b.wait_replicas)) {
            st = failed;
            goto out;
        }
        bool noscript = false;
        for (size_t j = 0; j < r->b.n; j++) {
            rc_cmd *cm = &r->b.cmds[j];
            redisReply *rep = cm->reply;
            if (!cm->done)
                continue;
            if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0) {
                noscript = true; /* e.g. a replica promoted since: EVAL loads it */
                continue;
            }
            /* An error reply (OOM under maxmemory, WRONGTYPE) or a missing
             * sentinel ends the decided part at the segment's first key
             * (below), as a reply never received does. */
            dedup_status bad = check_reply(r, cm, count[cm->tag], failed == DEDUP_OK);
            if (bad != DEDUP_OK) {
                if (failed == DEDUP_OK)
                    failed = bad;
                continue;
            }
            by_seg[cm->tag] = rep;
            lost[cm->tag] = cm->lost;
            any_lost |= cm->lost && record;
            cm->reply = NULL; /* kept in by_seg */
        }
        if (!noscript || failed != DEDUP_OK)
            break;
    }
    /* A decide that failed part way: the keys before the first segment
     * left without a reply keep their verdicts (the caller writes them
     * out). */
    size_t upto = n;
    if (failed != DEDUP_OK) {
        for (uint32_t s = 0; s < S; s++)
            if (count[s] && !by_seg[s] && first[s] < upto)
                upto = first[s];
        if (upto == 0) {
            st = failed;
            goto out;
        }
    }
    for (size_t i = 0; i < upto; i++) {
        redisReply *rep = by_seg[r->seg_of[i]];
        if (!rep) {
            rd_error(r, "Redis kept answering NOSCRIPT to the bitmap script");
            st = DEDUP_ERR_IO;
            goto out;
        }
        bool present = true;
        if (r->gen_ms) {
            present = rep->str[r->pos_in[i]] == '1';
        } else {
            redisReply **e = rep->element + (r->sentinels ? 1 : 0) + (size_t)r->pos_in[i] * k;
            for (uint32_t j = 0; j < k && present; j++)
                present = e[j]->type == REDIS_REPLY_INTEGER && e[j]->integer == 1;
        }
        out[i] = !present ? DEDUP_NEW
                          : record && lost[r->seg_of[i]] ? DEDUP_UNCERTAIN : DEDUP_MAYBE_DUPLICATE;
    }
    st = rd_finish(r, b, out, upto, any_lost, DEDUP_MAYBE_DUPLICATE, failed);
out:
    if (by_seg)
        for (uint32_t s = 0; s < S; s++)
            if (by_seg[s])
                freeReplyObject(by_seg[s]);
    free(offs);
    free(olen);
    free(count);
    free(first);
    free(last);
    free(by_seg);
    free(lost);
    return st;
}

/* Segment s's bytes in the local layout: [s * bps * 64, min(blocks, (s+1) * bps) * 64). */
static void seg_range(const dedup_redis *r, uint32_t s, uint64_t *off, uint64_t *len)
{
    uint64_t b0 = (uint64_t)s * r->blocks_per_seg;
    uint64_t b1 = b0 + r->blocks_per_seg < r->blocks ? b0 + r->blocks_per_seg : r->blocks;
    *off = b0 * 64;
    *len = b1 > b0 ? (b1 - b0) * 64 : 0;
}

#define COPY_CHUNK (UINT64_C(4) << 20)

/* Copying.  Without generations a copy is the filter.  With them, a read
 * ORs every live generation of a segment (current and the 'generations'
 * older ones): the result answers "present" for every key recorded within
 * the window at the time of the copy, and forgets nothing afterwards (a
 * local file has no clock).  A write ORs into the current generation and
 * gives it its expiry: the keys copied in count as seen at the time of the
 * copy, and are forgotten ttl_ms (to ttl_ms * (1 + 1/generations)) later. */
static bool check_len(dedup_redis *r, uint64_t len)
{
    if (len == r->shape.bits / 8)
        return true;
    rd_error(r, "a %llu-bit filter is %llu bytes, not %llu", (unsigned long long)r->shape.bits,
             (unsigned long long)(r->shape.bits / 8), (unsigned long long)len);
    return false;
}

dedup_status rd_bitmap_read(dedup_redis *r, unsigned char *buf, uint64_t len)
{
    if (r->o.scheme != DEDUP_REDIS_BITMAP) {
        rd_error(r, "only a bitmap filter can be read whole");
        return DEDUP_ERR_UNSUPPORTED;
    }
    if (!check_len(r, len))
        return DEDUP_ERR_INVALID_ARG;
    memset(buf, 0, len);
    char kb[2 * RD_MAX_NAME + 48];
    uint64_t cur = rd_current_gen(r);
    uint32_t gens = r->gen_ms ? r->shape.generations + 1 : 1;
    for (uint32_t s = 0; s < r->shape.segments; s++) {
        uint64_t off, sl;
        seg_range(r, s, &off, &sl);
        for (uint32_t g = 0; g < gens && g <= cur; g++) {
            size_t kl = rd_segment_key(r, s, cur - g, kb);
            rc_batch_reset(&r->b);
            for (uint64_t c = 0; c < sl; c += COPY_CHUNK) {
                char a[24], z[24];
                uint64_t e = (c + COPY_CHUNK < sl ? c + COPY_CHUNK : sl) - 1;
                const char *argv[4] = {"GETRANGE", kb, a, z};
                size_t lens[4] = {8, kl, (size_t)sprintf(a, "%llu", (unsigned long long)c),
                                  (size_t)sprintf(z, "%llu", (unsigned long long)e)};
                if (!rc_batch_add(&r->b, 4, argv, lens, 1, (uint32_t)(c / COPY_CHUNK)))
                    return DEDUP_ERR_NOMEM;
            }
            dedup_status st = rd_exec(r);
            if (st != DEDUP_OK)
                return st;
            for (size_t j = 0; j < r->b.n; j++) {
                redisReply *rep = r->b.cmds[j].reply;
                if (rep->type != REDIS_REPLY_STRING)
                    return rd_reply_error(r, rep, "GETRANGE of a segment");
                uint64_t c = (uint64_t)r->b.cmds[j].tag * COPY_CHUNK;
                uint64_t room = sl - c < COPY_CHUNK ? sl - c : COPY_CHUNK;
                size_t m = rep->len < room ? rep->len : (size_t)room;
                unsigned char *d = buf + off + c;
                for (size_t q = 0; q < m; q++)
                    d[q] |= (unsigned char)rep->str[q];
            }
            rc_batch_reset(&r->b);
        }
    }
    return DEDUP_OK;
}

dedup_status rd_bitmap_write(dedup_redis *r, const unsigned char *buf, uint64_t len)
{
    if (r->o.scheme != DEDUP_REDIS_BITMAP) {
        rd_error(r, "only a bitmap filter can be written whole");
        return DEDUP_ERR_UNSUPPORTED;
    }
    if (!check_len(r, len))
        return DEDUP_ERR_INVALID_ARG;
    char kb[2 * RD_MAX_NAME + 48], tb[2 * RD_MAX_NAME + 48], ex[24];
    uint64_t cur = rd_current_gen(r);
    size_t exl = (size_t)sprintf(ex, "%llu", (unsigned long long)((cur + 1) * r->gen_ms + r->o.ttl_ms));
    for (uint32_t s = 0; s < r->shape.segments; s++) {
        uint64_t off, sl;
        seg_range(r, s, &off, &sl);
        size_t kl = rd_segment_key(r, s, cur, kb);
        size_t tl = (size_t)sprintf(tb, "%s:{%s:s%u}:copy", r->name, r->name, s);
        rc_batch_reset(&r->b);
        const char *d[2] = {"DEL", tb};
        size_t dl[2] = {3, tl};
        if (!rc_batch_add(&r->b, 2, d, dl, 1, 0))
            return DEDUP_ERR_NOMEM;
        for (uint64_t c = 0; c < sl; c += COPY_CHUNK) {
            char a[24];
            uint64_t e = c + COPY_CHUNK < sl ? c + COPY_CHUNK : sl;
            const char *argv[4] = {"SETRANGE", tb, a, (const char *)buf + off + c};
            size_t lens[4] = {8, tl, (size_t)sprintf(a, "%llu", (unsigned long long)c), (size_t)(e - c)};
            if (!rc_batch_add(&r->b, 4, argv, lens, 1, 0))
                return DEDUP_ERR_NOMEM;
        }
        const char *o[5] = {"BITOP", "OR", kb, kb, tb};
        size_t ol[5] = {5, 2, kl, kl, tl};
        const char *x[3] = {"PEXPIREAT", kb, ex};
        size_t xl[3] = {9, kl, exl};
        if (!rc_batch_add(&r->b, 5, o, ol, 2, 0) || !rc_batch_add(&r->b, 2, d, dl, 1, 0) ||
            (r->gen_ms && !rc_batch_add(&r->b, 3, x, xl, 1, 0)))
            return DEDUP_ERR_NOMEM;
        r->b.wait_replicas = r->o.wait_replicas;
        dedup_status st = rd_exec(r);
        if (st != DEDUP_OK)
            return st;
        for (size_t j = 0; j < r->b.n; j++)
            if (r->b.cmds[j].reply->type == REDIS_REPLY_ERROR)
                return rd_reply_error(r, r->b.cmds[j].reply, "copy into a segment");
        rc_batch_reset(&r->b);
    }
    return DEDUP_OK;
}
