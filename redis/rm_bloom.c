/*
 * rm_bloom.c - BF.* values: a chain of classic Bloom links (the library's
 * dedup_bloom), kept by the module so that a key holds only what it uses.
 *
 * Link i is planned for capacity * expansion^i new items at rate p_i, and
 * the p_i of a chain sum to at most p, so the filter's rate stays under the
 * error rate asked for however far it grows (the bound in force is the sum
 * of the links' rates).  The split (schedule 2, envelope version 2):
 *
 *   p_0 = 3p/4,   p_i = p / 2^(i+3) for i >= 1   (sum: 3p/4 + p/8 = 7p/8)
 *
 * The p/8 left over is for the spread of small links: each link's m is sized
 * so its *expected* rate is within p_i, but one filter of a few hundred items
 * can land above its expectation; with the growth links summing to p/4 a
 * chain reserved at 100 and grown 50 times measured 1.01% mean over 20
 * filters at p = 1% (test_bf.py's test_scaling_grows_and_keeps_rate failed 1
 * run in 20), so the growth links keep half of that share as margin: 0.89%
 * mean with this split (`bench/bench_redis_growth.py 100 5000 20`).
 *
 * so a filter that is sized right pays 1.44 * log2(4/3) = 0.42 bits per item
 * over the optimum (10.0 bits at 1% against 9.585), where RedisBloom's
 * halving (p_0 = p/2) pays 1.44; every later link pays 1.44 bits per item
 * more than the one before, as in RedisBloom, but starts from p/16.  A link
 * whose rate would fall under DEDUP_MIN_FPR is not made ("max number of
 * scaling filters reached").  NONSCALING is one link that gets the whole p.
 * Schedule 1 is what envelope version 1 (the library's scalable chain with
 * r = 0.9 over 64 links) used; a value loaded from it keeps that split.
 *
 * Each link's m is grown from the optimum until the exact rate with its
 * integer k is within p_i (the optimum assumes a real-valued k).  One digest
 * per item (the links share the seed) is probed against every link.
 *
 * Why not the seen-set of dedup/seen.h (kind SCALABLE) as CF values use it:
 * measured in one run (bench/results/redis.md, 2026-12-01), a BF key on the
 * library's scalable chain holds 3,224 bytes for 100 items (its object
 * reserves 64 link slots) against 536 here, and its split (p(1-r) for the
 * first link; r = 0.9 gave 14.4 bits per item at the reserved capacity,
 * r = 0.5 gives RedisBloom's 11.03) cannot express 3p/4-then-halving
 * (10.2 bits measured).  Links as seen-sets of kind BLOOM would size m
 * without the integer-k correction above, so the chain's bound could pass
 * p by a percent or two.
 */
#include "rm_internal.h"
#include "legacy/rm_redisbloom.h"

#include "dedup/limits.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double rmf_bf_link_fpr(unsigned schedule, double p, bool nonscaling, uint32_t link)
{
    if (nonscaling)
        return link == 0 ? p : 0.0;
    if (schedule == BF_SCHEDULE_V1)
        return dedup_scalable_link_fpr(p, DEDUP_SCALABLE_DEFAULT_TIGHTENING, DEDUP_MAX_CHAIN, link);
    if (link == 0)
        return p * 0.75;
    if (link > 1000)
        return 0.0;
    return ldexp(p, -(int)link - 3);
}

uint64_t rmf_bf_link_bits(uint64_t n, double p)
{
    uint64_t m = dedup_bloom_bits_for(n, p);
    if (m == 0 || m > DEDUP_MAX_BITS)
        return 0;
    while (dedup_bloom_fpr_for(n, m, dedup_bloom_k_for(n, m)) > p && m <= DEDUP_MAX_BITS)
        m += m / 512 + 1;
    return m > DEDUP_MAX_BITS ? 0 : m;
}

/* Bytes a link of m bits takes (words, alignment slack and the struct). */
static uint64_t link_bytes(uint64_t m) { return (m + 63) / 64 * 8 + 64 + 128; }

void rmf_bf_free_links(rmf_obj *o)
{
    for (uint32_t i = 0; i < o->bl_n; i++)
        dedup_bloom_free(o->bl[i]);
    rmf_dealloc(rmf_obj_allocator(o), o->bl);
    o->bl = NULL;
    o->bl_n = o->bl_cap = 0;
}

size_t rmf_bf_memory(const rmf_obj *o)
{
    size_t n = (size_t)o->bl_cap * sizeof *o->bl;
    for (uint32_t i = 0; i < o->bl_n; i++)
        n += dedup_bloom_memory_usage(o->bl[i]);
    return n;
}

rmf_err rmf_bf_push_link(rmf_obj *o, dedup_bloom *b)
{
    if (o->bl_n == o->bl_cap) {
        uint32_t cap = o->bl_cap ? o->bl_cap * 2 : 1;
        dedup_bloom **nl = rmf_alloc(rmf_obj_allocator(o), cap * sizeof *nl);
        if (!nl) {
            dedup_bloom_free(b);
            return rmf_err_nomem();
        }
        if (o->bl_n)
            memcpy(nl, o->bl, o->bl_n * sizeof *nl);
        rmf_dealloc(rmf_obj_allocator(o), o->bl);
        o->bl = nl;
        o->bl_cap = cap;
    }
    o->bl[o->bl_n++] = b;
    o->bl_capacity += dedup_bloom_capacity(b);
    return NULL;
}

/* Capacity of link i: capacity * expansion^i; false on overflow. */
static bool link_capacity(const rmf_obj *o, uint32_t i, uint64_t *out)
{
    uint64_t n = o->capacity;
    for (uint32_t t = 0; t < i; t++)
        if (__builtin_mul_overflow(n, (uint64_t)o->expansion, &n))
            return false;
    *out = n;
    return true;
}

/* Plans link i: its capacity and bits, or the error that stops it. */
static rmf_err plan_link(const rmf_obj *o, uint32_t i, uint64_t *n, uint64_t *m, double *p)
{
    const char *full = "ERR max number of scaling filters reached";
    *p = rmf_bf_link_fpr(o->schedule, o->error_rate, o->nonscaling, i);
    if (!(*p >= DEDUP_MIN_FPR))
        return i == 0 ? "ERR error rate below the smallest supported (1e-12)" : full;
    if (!link_capacity(o, i, n))
        return full;
    *m = rmf_bf_link_bits(*n, *p);
    if (*m == 0)
        return i == 0 ? ERR_BF_CREATE : full;
    if (o->max_memory != UINT64_MAX &&
        (link_bytes(*m) > o->max_memory || rmf_memory_usage(o) + link_bytes(*m) > o->max_memory))
        return ERR_MAXMEM;
    return NULL;
}

static rmf_err add_link(rmf_obj *o)
{
    uint64_t n, m;
    double p;
    rmf_err e = plan_link(o, o->bl_n, &n, &m, &p);
    if (e)
        return e;
    dedup_bloom_params bp;
    dedup_bloom_params_init(&bp);
    bp.kind = DEDUP_BLOOM_CLASSIC;
    bp.capacity = n;
    bp.fpr = p;
    bp.bits = m;
    bp.seed = DEDUP_DEFAULT_SEED;
    dedup_bloom *b;
    dedup_status s = dedup_bloom_create(&bp, rmf_obj_allocator(o), &b);
    if (s != DEDUP_OK)
        return rmf_status_err(s);
    e = rmf_bf_push_link(o, b);
    if (!e)
        o->bl_last_items = 0;
    return e;
}

rmf_err rmf_bf_create(const rmf_bf_params *p, const rmf_config *c, const dedup_allocator *a,
                      rmf_obj **out)
{
    *out = NULL;
    if (!(p->error_rate > 0 && p->error_rate < 1))
        return ERR_BF_RATE_RANGE;
    if (p->capacity < 1)
        return "ERR (capacity should be larger than 0)";
    if (p->capacity > c->max_capacity)
        return "ERR capacity above the module's limit (module argument MAX_CAPACITY)";
    if (!p->nonscaling && p->expansion < 1)
        return "ERR expansion should be greater or equal to 1";
    rmf_obj *o = rmf_obj_new(RMF_BLOOM, a);
    if (!o)
        return rmf_err_nomem();
    o->capacity = p->capacity;
    o->error_rate = p->error_rate;
    o->nonscaling = p->nonscaling;
    o->expansion = p->nonscaling ? 0 : p->expansion;
    o->max_memory = c->max_memory;
    o->schedule = BF_SCHEDULE_V2;
    rmf_err e = add_link(o);
    if (e) {
        rmf_free(o);
        return e;
    }
    *out = o;
    return NULL;
}

static bool chain_contains(const rmf_obj *o, dedup_digest d)
{
    for (uint32_t i = o->bl_n; i-- > 0;)
        if (dedup_bloom_might_contain(o->bl[i], d))
            return true;
    return false;
}

rmf_err rmf_bf_add(rmf_obj *o, const void *item, size_t len, int *added)
{
    if (o->rbf)
        return rb_bloom_add(o->rbf, item, len, added);
    dedup_digest d = dedup_bloom_digest(o->bl[0], item, len);
    if (chain_contains(o, d)) {
        *added = 0;
        return NULL;
    }
    if (o->bl_last_items >= dedup_bloom_capacity(o->bl[o->bl_n - 1])) {
        if (o->nonscaling)
            return "ERR non scaling filter is full";
        rmf_err e = add_link(o);
        if (e)
            return e;
    }
    dedup_bloom_add(o->bl[o->bl_n - 1], d);
    o->bl_last_items++;
    o->items++;
    *added = 1;
    return NULL;
}

bool rmf_bf_exists(const rmf_obj *o, const void *item, size_t len)
{
    if (o->rbf)
        return rb_bloom_exists(o->rbf, item, len);
    return chain_contains(o, dedup_bloom_digest(o->bl[0], item, len));
}

uint64_t rmf_bf_capacity(const rmf_obj *o)
{
    return o->rbf ? rb_bloom_capacity(o->rbf) : o->bl_capacity;
}
uint32_t rmf_bf_filters(const rmf_obj *o) { return o->rbf ? rb_bloom_filters(o->rbf) : o->bl_n; }
bool rmf_bf_nonscaling(const rmf_obj *o)
{
    return o->rbf ? rb_bloom_nonscaling(o->rbf) : o->nonscaling;
}
uint32_t rmf_bf_expansion(const rmf_obj *o)
{
    return o->rbf ? rb_bloom_expansion(o->rbf) : o->expansion;
}

size_t rmf_bf_debug(const rmf_obj *o, uint32_t line, char *buf, size_t cap)
{
    if (o->rbf)
        return rb_bloom_debug(o->rbf, line, buf, cap);
    if (line == 0)
        return (size_t)snprintf(buf, cap, "size:%llu", (unsigned long long)o->items);
    if (line > o->bl_n)
        return 0;
    const dedup_bloom *b = o->bl[line - 1];
    uint64_t n = dedup_bloom_capacity(b);
    uint64_t size = line == o->bl_n ? o->bl_last_items : n;
    return (size_t)snprintf(buf, cap,
                            "bytes:%llu bits:%llu hashes:%u hashwidth:%u capacity:%llu size:%llu "
                            "ratio:%g",
                            (unsigned long long)((dedup_bloom_bits(b) + 7) / 8),
                            (unsigned long long)dedup_bloom_bits(b), dedup_bloom_k(b), 128u,
                            (unsigned long long)n, (unsigned long long)size,
                            dedup_bloom_target_fpr(b));
}

static uint64_t bf_blobs_size(const rmf_obj *o)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < o->bl_n; i++)
        n += dedup_bloom_serialized_size(o->bl[i]);
    return n;
}

static dedup_status bf_save_blobs(const rmf_obj *o, dedup_sink *sink)
{
    dedup_status s = DEDUP_OK;
    for (uint32_t i = 0; s == DEDUP_OK && i < o->bl_n; i++)
        s = dedup_bloom_save(o->bl[i], sink);
    return s;
}

/* ---- the envelope's operations (rm_internal.h) ------------------------------ */

static void bf_encode(const rmf_obj *o, unsigned char h[RMF_ENVELOPE_SIZE])
{
    dedup_put_u32(h + 48, o->schedule);
    dedup_put_u32(h + 52, o->bl_n);
    dedup_put_u64(h + 56, o->bl_last_items);
}

static rmf_err bf_check(const rmf_envelope *e)
{
    bool ns = e->flags & 1;
    if (e->version == 1) {
        if ((e->flags & ~1u) || e->deleted || e->bucket_size || e->aux || e->window_ms ||
            e->cur_slot)
            return "ERR corrupted dump header";
        if (!(e->error_rate >= DEDUP_MIN_FPR && e->error_rate < 1))
            return "ERR corrupted dump header (error rate)";
        if (e->nblobs != 1 ||
            (ns ? e->expansion != 0
                : (e->expansion < 1 || e->expansion > DEDUP_SCALABLE_MAX_GROWTH)))
            return "ERR corrupted dump header (links)";
        return NULL;
    }
    if ((e->flags & ~1u) || e->deleted || e->bucket_size || e->cur_slot)
        return "ERR corrupted dump header";
    if (!(e->error_rate > 0 && e->error_rate < 1))
        return "ERR corrupted dump header (error rate)";
    if ((e->aux != BF_SCHEDULE_V1 && e->aux != BF_SCHEDULE_V2) || e->nblobs < 1 ||
        e->nblobs > BF_MAX_LINKS || (ns ? (e->expansion != 0 || e->nblobs != 1) : e->expansion < 1))
        return "ERR corrupted dump header (links)";
    return NULL;
}

/* Envelope v1: the library's scalable chain (r = 0.9 over 64 links), whose
 * links become the module's (each through its own validated container). */
static rmf_err load_bloom_v1(dedup_source src, const rmf_envelope *e, const rmf_config *c,
                             rmf_obj *o)
{
    dedup_scalable *sb;
    dedup_status s = dedup_scalable_load(src, rmf_obj_allocator(o), &sb);
    if (s != DEDUP_OK)
        return s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : "ERR corrupted filter in dump";
    dedup_scalable_info si;
    dedup_scalable_get_info(sb, &si);
    bool ns = e->flags & 1;
    rmf_err err = NULL;
    if (si.kind != DEDUP_BLOOM_CLASSIC || si.max_links != (ns ? 1u : DEDUP_MAX_CHAIN) ||
        si.growth != (ns ? 1u : e->expansion) ||
        si.tightening != DEDUP_SCALABLE_DEFAULT_TIGHTENING || si.fpr != e->error_rate ||
        si.initial_capacity != e->capacity || si.items != e->items)
        err = "ERR corrupted dump (Bloom filter differs from its header)";
    o->schedule = BF_SCHEDULE_V1;
    for (uint32_t i = 0; !err && i < si.links; i++) {
        const dedup_bloom *l = dedup_scalable_link(sb, i);
        dedup_scalable_link_info li;
        uint64_t n = dedup_bloom_serialized_size(l);
        unsigned char *buf = n <= SIZE_MAX ? rmf_alloc(rmf_obj_allocator(o), (size_t)n) : NULL;
        if (!buf || dedup_scalable_get_link_info(sb, i, &li) != DEDUP_OK) {
            rmf_dealloc(rmf_obj_allocator(o), buf);
            err = rmf_err_nomem();
            break;
        }
        dedup_mem_sink ms;
        dedup_sink sink = dedup_mem_sink_init(&ms, buf, (size_t)n);
        dedup_bloom *b = NULL;
        dedup_mem_source m;
        if (dedup_bloom_save(l, &sink) != DEDUP_OK ||
            dedup_bloom_load(dedup_mem_source_init(&m, buf, ms.len), rmf_obj_allocator(o), &b) !=
                DEDUP_OK)
            err = rmf_err_nomem();
        rmf_dealloc(rmf_obj_allocator(o), buf);
        if (!err)
            err = rmf_bf_push_link(o, b);
        o->bl_last_items = li.items;
    }
    dedup_scalable_free(sb);
    if (!err && rmf_memory_usage(o) > c->max_memory)
        err = "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    return err;
}

/* Envelope v2: one classic Bloom container per link; each must be the link
 * the module would have made (capacity, rate, bits, seed), the older links
 * full, and the counts add up. */
static rmf_err load_bloom_v2(dedup_source src, const rmf_envelope *e, const rmf_config *c,
                             rmf_obj *o)
{
    o->schedule = (uint8_t)e->aux; /* a value first saved as v1 keeps its split */
    uint64_t n = e->capacity, full = 0;
    for (uint32_t i = 0; i < e->nblobs; i++) {
        if (i > 0 && __builtin_mul_overflow(n, (uint64_t)e->expansion, &n))
            return "ERR corrupted dump (link capacity)";
        double p = rmf_bf_link_fpr(o->schedule, e->error_rate, o->nonscaling, i);
        uint64_t m = p >= DEDUP_MIN_FPR ? rmf_bf_link_bits(n, p) : 0;
        if (m == 0)
            return "ERR corrupted dump (link shape)";
        if (rmf_memory_usage(o) + m / 8 > c->max_memory)
            return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
        dedup_bloom *b;
        dedup_status s = dedup_bloom_load(src, rmf_obj_allocator(o), &b);
        if (s != DEDUP_OK)
            return s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : "ERR corrupted filter in dump";
        if (dedup_bloom_capacity(b) != n || dedup_bloom_target_fpr(b) != p ||
            dedup_bloom_bits(b) != m || dedup_bloom_seed(b) != DEDUP_DEFAULT_SEED) {
            dedup_bloom_free(b);
            return "ERR corrupted dump (link shape)";
        }
        rmf_err err = rmf_bf_push_link(o, b);
        if (err)
            return err;
        if (i + 1 < e->nblobs)
            full += n;
    }
    if (e->window_ms > n || e->items != full + e->window_ms)
        return "ERR corrupted dump (item counts)";
    o->bl_last_items = e->window_ms;
    return NULL;
}

static rmf_err bf_load(dedup_source src, const rmf_envelope *e, const rmf_config *c, rmf_obj *o)
{
    return e->version == 1 ? load_bloom_v1(src, e, c, o) : load_bloom_v2(src, e, c, o);
}

const rmf_family_ops rmf_bf_ops = {bf_blobs_size, bf_encode, bf_save_blobs, bf_check, bf_load};
