/*
 * rm_cuckoo.c - CF.* values: a seen-set of the library (dedup/seen.h, kind
 * DEDUP_SEEN_CUCKOO), with the module's growth limits (CF_MAX_EXPANSIONS,
 * MAX_MEMORY) beside it.  Test-and-add (CF.ADDNX, CF.INSERTNX), queries,
 * deletes, memory and save go through the seen-set; what seen.h has no
 * call for -- adding one more copy of a key (CF.ADD, CF.INSERT), counting
 * copies (CF.COUNT), the shape CF.INFO reports (buckets, bucket size, max
 * iterations) -- uses the cuckoo filter behind it (dedup_seen_impl).  The
 * seen spec has no bucket size or max iterations, so a filter is made with
 * dedup_cuckoo_create() and handed to the seen-set through its serialized
 * form (dedup_seen_load dispatches on the container's type), once, at
 * creation.  A key migrated from RedisBloom keeps RedisBloom's layout
 * instead (legacy/rm_redisbloom.c) and every call here hands it over.
 */
#include "rm_internal.h"
#include "legacy/rm_redisbloom.h"

#include "dedup/limits.h"

#include <stdio.h>
#include <string.h>


/* Bytes of link i of a chain whose first link has nb0 buckets. */
static uint64_t cf_link_bytes(uint64_t nb0, uint32_t exp, uint32_t b, uint32_t f, uint32_t i)
{
    uint64_t nb = nb0;
    for (uint32_t j = 0; j < i; j++)
        if (__builtin_mul_overflow(nb, (uint64_t)exp, &nb))
            return UINT64_MAX;
    uint64_t bits;
    if (__builtin_mul_overflow(nb, (uint64_t)b * f, &bits))
        return UINT64_MAX;
    return bits / 8 + 64;
}


/* Buckets of the first sub-filter of a growing filter: as many slots as RedisBloom's first
 * sub-filter has for this reserve -- nextpow2(capacity / rb_bs) buckets
 * (at least one) of rb_bs slots -- in buckets of b slots, ceil(slots / b)
 * of them (exact when b divides the slots, as with the defaults: b = 4,
 * rb_bs = 2 and a capacity of at least 4).  With the same growth factor
 * every sub-filter then has RedisBloom's slot count, so a growing filter
 * reaches CF_MAX_EXPANSIONS sub-filters after as many items.  0 when the
 * count overflows. */
static uint64_t cf_first_buckets(uint64_t capacity, uint32_t rb_bs, uint32_t b)
{
    uint64_t n = capacity / rb_bs, p = 1, slots;
    while (p < n) {
        if (p > (UINT64_MAX >> 1))
            return 0;
        p <<= 1;
    }
    if (__builtin_mul_overflow(p, (uint64_t)rb_bs, &slots))
        return 0;
    return slots / b + (slots % b != 0);
}

/* RedisBloom rounds the growth factor up to a power of two (0 stays 0). */
static uint32_t cf_pow2_expansion(uint32_t e)
{
    uint32_t p = 1;
    if (e == 0)
        return 0;
    while (p < e)
        p <<= 1;
    return p;
}

static dedup_status cf_load_seen(rmf_obj *o, dedup_source src)
{
    dedup_status s = dedup_seen_load(src, rmf_obj_allocator(o), &o->cfs);
    if (s != DEDUP_OK)
        return s;
    if (dedup_seen_kind_of(o->cfs) != DEDUP_SEEN_CUCKOO) {
        dedup_seen_free(o->cfs);
        o->cfs = NULL;
        return DEDUP_ERR_WRONG_TYPE;
    }
    o->cf = dedup_seen_impl(o->cfs);
    o->cf_seed = dedup_seen_seed(o->cfs);
    return DEDUP_OK;
}

static dedup_digest cf_digest(const rmf_obj *o, const void *item, size_t len)
{
    return dedup_hash(item, len, o->cf_seed);
}

static dedup_batch one(const dedup_digest *d)
{
    dedup_batch b;
    memset(&b, 0, sizeof b);
    b.n = 1;
    b.digests = d;
    return b;
}

rmf_err rmf_cf_create(const rmf_cf_params *p, const rmf_config *c, const dedup_allocator *a,
                      rmf_obj **out)
{
    *out = NULL;
    if (p->bucket_size < 1 || p->bucket_size > DEDUP_CUCKOO_MAX_BUCKET_SIZE)
        return "ERR BUCKETSIZE parameter needs to be a positive integer (at most 255)";
    if (p->max_iterations < 1 || p->max_iterations > DEDUP_CUCKOO_MAX_KICKS)
        return "ERR MAXITERATIONS parameter needs to be a positive integer (at most 65535)";
    if (p->expansion > DEDUP_CUCKOO_MAX_EXPANSION)
        return "ERR EXPANSION parameter needs to be a non-negative integer (at most 32768)";
    if (p->capacity < 1)
        return "ERR Bad capacity";
    if (p->capacity > c->max_capacity)
        return "ERR capacity above the module's limit (module argument MAX_CAPACITY)";
    uint32_t f = dedup_cuckoo_fingerprint_bits_for(c->cf_error_rate, p->bucket_size);
    uint32_t expansion = cf_pow2_expansion(p->expansion);
    /* A growing filter's sub-filters have RedisBloom's sizes, so it grows
     * to as many as RedisBloom's; a fixed one is sized for its capacity to
     * fit (at the planned load; cf_fixed_room caps it at RedisBloom's fill). */
    uint64_t nb0 = expansion == 0 ? dedup_cuckoo_buckets_for(p->capacity, p->bucket_size)
                   : cf_first_buckets(p->capacity,
                                      p->rb_bucket_size ? p->rb_bucket_size : p->bucket_size,
                                      p->bucket_size);
    /* RedisBloom's text for a filter it cannot make */
    if (f == 0 || nb0 == 0)
        return "ERR Couldn't create Cuckoo Filter";
    uint64_t first = cf_link_bytes(nb0, expansion, p->bucket_size, f, 0);
    if (first == UINT64_MAX || first > DEDUP_MAX_BITS / 8)
        return "ERR Couldn't create Cuckoo Filter";
    if (first > c->max_memory)
        return "ERR filter would exceed the per-key memory limit (module argument MAX_MEMORY)";
    rmf_obj *o = rmf_obj_new(RMF_CUCKOO, a);
    if (!o)
        return rmf_err_nomem();
    o->capacity = p->capacity;
    o->error_rate = c->cf_error_rate;
    o->expansion = expansion;
    o->max_memory = c->max_memory;
    /* The seen-set made directly (a cuckoo filter made apart and copied in
     * through its serialized form wrote the whole table three times). */
    dedup_cuckoo_params dflt;
    dedup_cuckoo_params_init(&dflt);
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_CUCKOO;
    sp.items = p->capacity;
    sp.size = nb0; /* the first sub-filter's buckets, exactly */
    sp.fpr = c->cf_error_rate;
    sp.seed = dflt.seed;
    sp.bucket_size = p->bucket_size;
    sp.max_kicks = p->max_iterations;
    sp.expansion = expansion;
    dedup_status s = dedup_seen_create(&sp, rmf_obj_allocator(o), &o->cfs);
    if (s == DEDUP_OK) {
        o->cf = dedup_seen_impl(o->cfs);
        o->cf_seed = dedup_seen_seed(o->cfs);
    }
    if (s != DEDUP_OK) {
        rmf_free(o);
        return rmf_status_err(s);
    }
    rmf_cf_set_max_links(o, c);
    *out = o;
    return NULL;
}

rmf_err rmf_cf_can_grow(const rmf_obj *o)
{
    if (o->rcf)
        return rb_cuckoo_filters(o->rcf) >= o->cf_max_links ? "ERR Maximum expansions reached"
                                                             : NULL;
    /* O(1): link cf_max_links - 1 exists only when the limit is reached */
    dedup_cuckoo_link_info li;
    if (o->expansion == 0 || o->cf_max_links == 0 ||
        dedup_cuckoo_get_link_info(o->cf, o->cf_max_links - 1, &li) != DEDUP_OK)
        return NULL; /* a fixed filter never grows: a full one answers "full" */
    return o->cf_mem_bound
               ? "ERR Maximum expansions reached (the next sub-filter would pass the per-key "
                 "memory limit, module argument MAX_MEMORY)"
               : "ERR Maximum expansions reached";
}

/* How many sub-filters CF_MAX_EXPANSIONS and MAX_MEMORY allow. */
void rmf_cf_set_max_links(rmf_obj *o, const rmf_config *c)
{
    dedup_cuckoo_info ci;
    dedup_cuckoo_link_info li;
    dedup_cuckoo_get_info(o->cf, &ci);
    o->cf_max_links = c->cf_max_expansions;
    o->cf_mem_bound = false;
    if (ci.expansion == 0 || dedup_cuckoo_get_link_info(o->cf, 0, &li) != DEDUP_OK)
        return;
    uint64_t total = 0;
    for (uint32_t i = 0; i < c->cf_max_expansions; i++) {
        uint64_t b = cf_link_bytes(li.buckets, ci.expansion, ci.bucket_size, ci.fingerprint_bits, i);
        if (b == UINT64_MAX || total + b > c->max_memory) {
            o->cf_max_links = i > ci.links ? i : ci.links;
            o->cf_mem_bound = true;
            return;
        }
        total += b;
    }
}

/* Items a fixed filter (EXPANSION 0) may still take.  RedisBloom's fixed
 * filter for the same CF.RESERVE has nextpow2(capacity / bucket size)
 * buckets of that size and refuses once they are taken (or earlier, when
 * its relocations fail); ours refuses at that count too, or earlier when
 * its own table is full, so a filter never holds more than RedisBloom's
 * would.  UINT64_MAX for a growing filter. */
static uint64_t cf_fixed_room(const rmf_obj *o)
{
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(o->cf, &ci);
    if (ci.expansion != 0 || ci.bucket_size == 0)
        return UINT64_MAX;
    uint64_t nb = o->capacity / ci.bucket_size, p = 1;
    while (p < nb && p < (UINT64_C(1) << 56))
        p <<= 1;
    uint64_t slots = p * ci.bucket_size;
    return ci.items < slots ? slots - ci.items : 0;
}

int rmf_cf_add(rmf_obj *o, const void *item, size_t len, bool nx, rmf_err *err)
{
    *err = NULL;
    if (o->rcf)
        return rb_cuckoo_add(o->rcf, item, len, nx);
    dedup_digest d = cf_digest(o, item, len);
    dedup_status s;
    dedup_verdict v = DEDUP_NEW;
    if (cf_fixed_room(o) == 0) {
        /* full: CF.ADDNX still answers 0 for a key it holds */
        dedup_batch b = one(&d);
        if (nx && dedup_seen_query(o->cfs, &b, &v) == DEDUP_OK && v != DEDUP_NEW)
            return 0;
        return -1;
    }
    if (nx) {
        dedup_batch b = one(&d);
        s = dedup_seen_decide(o->cfs, &b, &v, NULL);
    } else {
        s = dedup_cuckoo_add(o->cf, d); /* one more copy: not a seen-set verb */
    }
    if (s == DEDUP_OK)
        return v == DEDUP_NEW ? 1 : 0;
    if (s == DEDUP_ERR_FULL)
        return -1;
    *err = s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : rmf_status_err(s);
    return -2;
}

bool rmf_cf_exists(const rmf_obj *o, const void *item, size_t len)
{
    if (o->rcf)
        return rb_cuckoo_exists(o->rcf, item, len);
    dedup_digest d = cf_digest(o, item, len);
    dedup_batch b = one(&d);
    dedup_verdict v = DEDUP_NEW;
    return dedup_seen_query(o->cfs, &b, &v) == DEDUP_OK && v != DEDUP_NEW;
}

uint64_t rmf_cf_count(const rmf_obj *o, const void *item, size_t len)
{
    if (o->rcf)
        return rb_cuckoo_count(o->rcf, item, len);
    return dedup_cuckoo_count(o->cf, cf_digest(o, item, len));
}

bool rmf_cf_del(rmf_obj *o, const void *item, size_t len)
{
    if (o->rcf)
        return rb_cuckoo_del(o->rcf, item, len);
    dedup_digest d = cf_digest(o, item, len);
    dedup_batch b = one(&d);
    bool removed = false;
    return dedup_seen_delete(o->cfs, &b, &removed) == DEDUP_OK && removed;
}

void rmf_cf_get_info(const rmf_obj *o, rmf_cf_info *out)
{
    if (o->rcf) {
        rb_cuckoo_get_info(o->rcf, out);
        return;
    }
    dedup_cuckoo_info ci;
    dedup_cuckoo_link_info l0;
    dedup_cuckoo_get_info(o->cf, &ci);
    /* RedisBloom's "Number of buckets" is its first sub-filter's */
    out->buckets = dedup_cuckoo_get_link_info(o->cf, 0, &l0) == DEDUP_OK ? l0.buckets : 0;
    out->filters = ci.links;
    out->items = ci.items;
    out->deleted = ci.deleted - o->deleted; /* o->deleted: hidden by CF.COMPACT */
    out->bucket_size = ci.bucket_size;
    out->expansion = ci.expansion;
    out->max_iterations = ci.max_kicks;
    out->fingerprint_bits = ci.fingerprint_bits;
    out->fpr_full = ci.fpr_full;
}


/* Items per batch: hashing a batch first lets the library prefetch every
 * bucket before it touches any. */
#define CF_BATCH 256

void rmf_cf_add_many(rmf_obj *o, const void *const *items, const size_t *lens, size_t n,
                     int *rc, rmf_err *errs)
{
    dedup_digest d[CF_BATCH];
    size_t i = 0;
    while (i < n) {
        size_t k = n - i < CF_BATCH ? n - i : CF_BATCH;
        if (!o->rcf) {
            /* One add creates at most one sub-filter, and the first add
             * into a new one always succeeds: a batch of k adds never
             * passes the limit when k more sub-filters are allowed. */
            dedup_cuckoo_info ci;
            dedup_cuckoo_get_info(o->cf, &ci);
            if (ci.expansion != 0) {
                size_t room = ci.links < o->cf_max_links ? o->cf_max_links - ci.links : 0;
                if (k > room)
                    k = room;
            } else if (cf_fixed_room(o) < k) {
                k = (size_t)cf_fixed_room(o);
                if (k == 0) {
                    rc[i++] = -1;
                    continue;
                }
            }
        }
        if (o->rcf || k <= 1) {
            /* one at a time, with the limit checked before each */
            if ((errs[i] = rmf_cf_can_grow(o)) != NULL) {
                rc[i++] = -2;
                continue;
            }
            rc[i] = rmf_cf_add(o, items[i], lens[i], false, &errs[i]);
            i++;
            continue;
        }
        for (size_t j = 0; j < k; j++)
            d[j] = cf_digest(o, items[i + j], lens[i + j]);
        size_t added = 0;
        dedup_status s = dedup_cuckoo_add_batch(o->cf, d, k, &added);
        for (size_t j = 0; j < added; j++)
            rc[i + j] = 1;
        i += added;
        if (s == DEDUP_OK)
            continue;
        if (s != DEDUP_ERR_FULL) {
            errs[i] = s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : rmf_status_err(s);
            rc[i++] = -2;
            continue;
        }
        rc[i++] = -1;
    }
}

void rmf_cf_exists_many(const rmf_obj *o, const void *const *items, const size_t *lens, size_t n,
                        int *out)
{
    dedup_digest d[CF_BATCH];
    dedup_verdict v[CF_BATCH];
    for (size_t i = 0; i < n; i += CF_BATCH) {
        size_t k = n - i < CF_BATCH ? n - i : CF_BATCH;
        if (o->rcf) {
            for (size_t j = 0; j < k; j++)
                out[i + j] = rb_cuckoo_exists(o->rcf, items[i + j], lens[i + j]);
            continue;
        }
        for (size_t j = 0; j < k; j++)
            d[j] = cf_digest(o, items[i + j], lens[i + j]);
        dedup_batch b;
        memset(&b, 0, sizeof b);
        b.n = k;
        b.digests = d;
        dedup_status s = dedup_seen_query(o->cfs, &b, v);
        for (size_t j = 0; j < k; j++)
            out[i + j] = s == DEDUP_OK && v[j] != DEDUP_NEW;
    }
}

void rmf_cf_compact(rmf_obj *o)
{
    if (o->rcf) {
        rb_cuckoo_compact(o->rcf);
        return;
    }
    /* The library's chain keeps its links; what RedisBloom's compaction
     * reports is the deletes counter starting over. */
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(o->cf, &ci);
    o->deleted = ci.deleted;
}

/* ---- the envelope's operations (rm_internal.h) ------------------------------ */

static uint64_t cf_blobs_size(const rmf_obj *o) { return dedup_cuckoo_serialized_size(o->cf); }

static void cf_encode(const rmf_obj *o, unsigned char h[RMF_ENVELOPE_SIZE])
{
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(o->cf, &ci);
    dedup_put_u64(h + 8, ci.inserted);
    dedup_put_u64(h + 16, ci.deleted);
    dedup_put_u32(h + 44, ci.bucket_size);
    dedup_put_u32(h + 48, ci.max_kicks);
    dedup_put_u32(h + 52, 1);
}

static dedup_status cf_save_blobs(const rmf_obj *o, dedup_sink *sink)
{
    return dedup_seen_save(o->cfs, sink);
}

static rmf_err cf_check(const rmf_envelope *e)
{
    if (e->flags || e->window_ms || e->cur_slot || e->nblobs != 1)
        return "ERR corrupted dump header";
    if (e->bucket_size < 1 || e->bucket_size > DEDUP_CUCKOO_MAX_BUCKET_SIZE ||
        e->aux > DEDUP_CUCKOO_MAX_KICKS || e->expansion > DEDUP_CUCKOO_MAX_EXPANSION ||
        !(e->error_rate >= DEDUP_MIN_FPR && e->error_rate < 1))
        return "ERR corrupted dump header (cuckoo shape)";
    return NULL;
}

/* Loads the cuckoo blob and checks it against the envelope. */
static rmf_err cf_load(dedup_source src, const rmf_envelope *e, const rmf_config *c,
                           rmf_obj *o)
{
    dedup_status s = cf_load_seen(o, src);
    if (s != DEDUP_OK)
        return s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : "ERR corrupted filter in dump";
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(o->cf, &ci);
    if (ci.bucket_size != e->bucket_size || ci.max_kicks != e->aux ||
        ci.expansion != e->expansion || ci.capacity != e->capacity ||
        ci.inserted != e->items || ci.deleted != e->deleted)
        return "ERR corrupted dump (cuckoo filter differs from its header)";
    if (rmf_memory_usage(o) > c->max_memory)
        return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    o->deleted = 0; /* the CF.COMPACT base starts over */
    rmf_cf_set_max_links(o, c);
    return NULL;
}

const rmf_family_ops rmf_cf_ops = {cf_blobs_size, cf_encode, cf_save_blobs, cf_check, cf_load};
