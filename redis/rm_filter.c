/*
 * rm_filter.c - the module's values (see rm_filter.h), free of Redis.
 *
 * Bloom values are the library's scalable Bloom filter (dedup/scalable.h):
 * a chain of classic Bloom links, link i planned for capacity * expansion^i
 * new items at the rate p_i of the library's documented split (tightening
 * 0.9, the p_i summing to p over the 64 links a chain may have), so the
 * whole chain stays below p however far it grows.  NONSCALING is a chain
 * of one link that gets the whole p: one classic filter sized for exactly
 * (capacity, p), so it meets p at capacity with the optimal number of bits.
 * The module keeps the chain's link count, capacity and item count beside
 * it (the library's info call walks the bit arrays), and refuses to grow a
 * link that would take the key past MAX_MEMORY.
 *
 * Expiring dedup values: G generations, each covering one time slot of
 * s = ceil(window / (G-2)) ms.  A generation is a scalable chain of blocked
 * Bloom links at rate p / G, its first link planned for capacity / (G-2)
 * items (what a steady stream brings per slot); a burst grows the newest
 * generation's chain instead of raising its rate.
 * An add always records the item in the newest generation (so "seen" means
 * "last seen"); a query looks at the G newest slots.  An item seen at time
 * t0 is therefore remembered at least until t0 + window and at most until
 * t0 + G*s (window * G/(G-2)).  EXACT values are a table of digests and
 * last-seen times instead (see "EXACT mode" below).
 */
#include "rm_filter.h"

#include "dedup/cuckoo.h"
#include "dedup/scalable.h"

#include "dedup/hash.h"
#include "dedup/limits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#define DD_MAX_GEN 16u
#define DD_MIN_GEN 3u

/* One slot of the EXACT table; all-zero is empty (a digest {0,0} is stored
 * as {0,1}). */
struct ex_entry {
    uint64_t lo, hi, last_ms;
};

struct rmf_obj {
    rmf_kind kind;
    dedup_allocator alloc;
    uint64_t items;
    uint64_t deleted;
    uint64_t capacity; /* as asked */
    double error_rate; /* as asked */
    uint32_t expansion;
    bool nonscaling;
    /* Bloom: the chain, and its link count and total capacity */
    dedup_scalable *sb;
    uint32_t sb_links;
    uint64_t sb_capacity;
    /* dedup: the generations, links[slot % nlinks], each a scalable chain
     * of blocked Bloom links, with its item count and capacity beside it */
    uint32_t nlinks;
    dedup_scalable *links[DD_MAX_GEN];
    uint64_t gen_items[DD_MAX_GEN];
    uint64_t gen_capacity[DD_MAX_GEN];
    uint32_t gen_links[DD_MAX_GEN];
    /* dedup, EXACT: open addressing over digests with their last-seen time */
    struct ex_entry *ex_slots;
    uint64_t ex_cap;  /* slots, a power of two; 0 in approximate mode */
    uint64_t ex_used; /* slots not empty (live or expired) */
    bool exact;
    /* dedup */
    uint64_t window_ms;
    uint64_t slot_ms;
    uint64_t cur_slot;
    /* cuckoo */
    dedup_cuckoo *cf;
    uint32_t cf_max_links; /* links allowed by CF_MAX_EXPANSIONS and MAX_MEMORY */
    bool cf_mem_bound;     /* ... and MAX_MEMORY is the one that binds */
    /* ceilings copied from the config at creation */
    uint64_t max_memory;
};

void rmf_config_init(rmf_config *c)
{
    c->bf_error_rate = 0.01;
    c->bf_initial_size = 100;
    c->bf_expansion = 2;
    c->cf_initial_size = 1024;
    c->cf_bucket_size = 4;       /* RedisBloom: 2; 4 reaches 95% load, 12.8 bits/item */
    c->cf_max_iterations = 500;  /* RedisBloom: 20; 500 is what 95% load needs */
    c->cf_expansion = 1;
    c->cf_max_expansions = 32;
    c->cf_error_rate = 0.01;
    c->max_memory = UINT64_C(1) << 30;
    c->max_capacity = UINT64_C(1) << 32;
    c->max_expansion = DEDUP_SCALABLE_MAX_GROWTH; /* 1024 */
}

/* ---- allocation through the hook ------------------------------------------ */
static void *obj_alloc(const dedup_allocator *a, size_t n)
{
    if (a && a->malloc_fn)
        return a->malloc_fn(a->ctx, n);
    return malloc(n);
}
static void obj_free(const dedup_allocator *a, void *p)
{
    if (!p)
        return;
    if (a && a->free_fn)
        a->free_fn(a->ctx, p);
    else
        free(p);
}

static rmf_obj *obj_new(rmf_kind kind, const dedup_allocator *a)
{
    rmf_obj *o = obj_alloc(a, sizeof *o);
    if (!o)
        return NULL;
    memset(o, 0, sizeof *o);
    o->kind = kind;
    if (a)
        o->alloc = *a;
    return o;
}

void rmf_free(rmf_obj *o)
{
    if (!o)
        return;
    for (uint32_t i = 0; i < o->nlinks; i++)
        dedup_scalable_free(o->links[i]);
    dedup_cuckoo_free(o->cf);
    dedup_scalable_free(o->sb);
    dedup_allocator a = o->alloc;
    obj_free(&a, o->ex_slots);
    obj_free(&a, o);
}

static const dedup_allocator *obj_allocator(const rmf_obj *o)
{
    return o->alloc.malloc_fn ? &o->alloc : NULL;
}

static rmf_err status_err(dedup_status s)
{
    switch (s) {
    case DEDUP_ERR_NOMEM:
        return "ERR allocation failure";
    case DEDUP_ERR_LIMIT:
        return "ERR filter would exceed the library's size limit";
    case DEDUP_ERR_INVALID_ARG:
        return "ERR invalid filter parameters";
    case DEDUP_ERR_FULL:
        return "ERR filter is full";
    default:
        return "ERR corrupted or unsupported payload";
    }
}

size_t rmf_memory_usage(const rmf_obj *o)
{
    size_t n = sizeof *o;
    for (uint32_t i = 0; i < o->nlinks; i++)
        n += dedup_scalable_memory_usage(o->links[i]);
    if (o->cf)
        n += dedup_cuckoo_memory_usage(o->cf);
    if (o->sb)
        n += dedup_scalable_memory_usage(o->sb);
    n += (size_t)o->ex_cap * sizeof(struct ex_entry);
    return n;
}

rmf_kind rmf_obj_kind(const rmf_obj *o) { return o->kind; }
uint64_t rmf_items(const rmf_obj *o) { return o->items; }
uint64_t rmf_capacity_asked(const rmf_obj *o) { return o->capacity; }

/* ---- Bloom ------------------------------------------------------------------ */

static uint64_t bloom_bytes_for(dedup_bloom_kind kind, uint64_t n, double p)
{
    uint64_t bits = kind == DEDUP_BLOOM_CLASSIC ? dedup_bloom_bits_for(n, p)
                                                : dedup_blocked_bits_for(n, p);
    if (bits == 0)
        return UINT64_MAX;
    return (bits + 511) / 8 + 256; /* + struct and alignment slack */
}

/* Generations: chains of blocked links, r = 0.5 over at most 16 links, so
 * the first link gets about half the generation's rate. */
#define DD_TIGHTENING 0.5
#define DD_GEN_LINKS 16u
#define DD_GROWTH 2u

static void dd_gen_params(dedup_scalable_params *sp, uint64_t n0, double p)
{
    dedup_scalable_params_init(sp);
    sp->kind = DEDUP_BLOOM_BLOCKED;
    sp->capacity = n0;
    sp->fpr = p;
    sp->growth = DD_GROWTH;
    sp->tightening = DD_TIGHTENING;
    sp->max_links = DD_GEN_LINKS;
}

static rmf_err new_generation(rmf_obj *o, uint32_t i, uint64_t n0, double p)
{
    double p0 = dedup_scalable_link_fpr(p, DD_TIGHTENING, DD_GEN_LINKS, 0);
    uint64_t need = bloom_bytes_for(DEDUP_BLOOM_BLOCKED, n0, p0);
    if (need == UINT64_MAX || need > DEDUP_MAX_BITS / 8)
        return "ERR capacity too large for one filter";
    if (need > o->max_memory || rmf_memory_usage(o) + need > o->max_memory)
        return "ERR filter would exceed the per-key memory limit (module argument MAX_MEMORY)";
    dedup_scalable_params sp;
    dd_gen_params(&sp, n0, p);
    dedup_status s = dedup_scalable_create(&sp, obj_allocator(o), &o->links[i]);
    if (s != DEDUP_OK)
        return status_err(s);
    o->gen_items[i] = 0;
    o->gen_capacity[i] = n0;
    o->gen_links[i] = 1;
    return NULL;
}

/* Links a chain may have: NONSCALING is one link holding the whole p. */
static uint32_t bf_max_links(bool nonscaling) { return nonscaling ? 1u : DEDUP_MAX_CHAIN; }

rmf_err rmf_bf_create(const rmf_bf_params *p, const rmf_config *c, const dedup_allocator *a,
                      rmf_obj **out)
{
    *out = NULL;
    if (!(p->error_rate > 0 && p->error_rate < 1))
        return "ERR (0 < error rate range < 1)";
    if (p->error_rate < DEDUP_MIN_FPR)
        return "ERR error rate below the smallest supported (1e-12)";
    if (p->capacity < 1)
        return "ERR (capacity should be larger than 0)";
    if (p->capacity > c->max_capacity)
        return "ERR capacity above the module's limit (module argument MAX_CAPACITY)";
    if (!p->nonscaling && (p->expansion < 1 || p->expansion > DEDUP_SCALABLE_MAX_GROWTH))
        return "ERR bad expansion (1 to 1024)";
    uint32_t L = bf_max_links(p->nonscaling);
    double p0 = dedup_scalable_link_fpr(p->error_rate, DEDUP_SCALABLE_DEFAULT_TIGHTENING, L, 0);
    if (!(p0 >= DEDUP_MIN_FPR))
        return "ERR error rate too small for a scaling filter (the first link would need < 1e-12)";
    uint64_t need = bloom_bytes_for(DEDUP_BLOOM_CLASSIC, p->capacity, p0);
    if (need == UINT64_MAX || need > DEDUP_MAX_BITS / 8)
        return "ERR capacity too large for one filter";
    if (need > c->max_memory)
        return "ERR filter would exceed the per-key memory limit (module argument MAX_MEMORY)";
    rmf_obj *o = obj_new(RMF_BLOOM, a);
    if (!o)
        return "ERR allocation failure";
    o->capacity = p->capacity;
    o->error_rate = p->error_rate;
    o->nonscaling = p->nonscaling;
    o->expansion = p->nonscaling ? 0 : p->expansion;
    o->max_memory = c->max_memory;
    dedup_scalable_params sp;
    dedup_scalable_params_init(&sp);
    sp.kind = DEDUP_BLOOM_CLASSIC;
    sp.capacity = p->capacity;
    sp.fpr = p->error_rate;
    sp.growth = p->nonscaling ? 1 : p->expansion;
    sp.max_links = L;
    dedup_status s = dedup_scalable_create(&sp, obj_allocator(o), &o->sb);
    if (s != DEDUP_OK) {
        rmf_free(o);
        return status_err(s);
    }
    o->sb_links = 1;
    o->sb_capacity = p->capacity;
    *out = o;
    return NULL;
}

/* Before an add that may start a new link: NULL if the link may be made. */
static rmf_err bf_check_growth(const rmf_obj *o)
{
    if (o->items < o->sb_capacity)
        return NULL; /* the newest link has room */
    if (o->nonscaling)
        return "ERR non scaling filter is full";
    if (o->sb_links >= DEDUP_MAX_CHAIN)
        return "ERR max number of scaling filters reached";
    uint64_t n = o->capacity;
    for (uint32_t i = 0; i < o->sb_links; i++)
        if (__builtin_mul_overflow(n, (uint64_t)o->expansion, &n))
            return "ERR max number of scaling filters reached";
    double p = dedup_scalable_link_fpr(o->error_rate, DEDUP_SCALABLE_DEFAULT_TIGHTENING,
                                       DEDUP_MAX_CHAIN, o->sb_links);
    uint64_t need = bloom_bytes_for(DEDUP_BLOOM_CLASSIC, n, p);
    if (need == UINT64_MAX || need > DEDUP_MAX_BITS / 8)
        return "ERR max number of scaling filters reached";
    if (rmf_memory_usage(o) + need > o->max_memory)
        return "ERR filter would exceed the per-key memory limit (module argument MAX_MEMORY)";
    return NULL;
}

rmf_err rmf_bf_add(rmf_obj *o, const void *item, size_t len, int *added)
{
    dedup_digest d = dedup_scalable_digest(o->sb, item, len);
    if (o->items >= o->sb_capacity) {
        /* The newest link is full: only a new item needs the next link. */
        if (dedup_scalable_might_contain(o->sb, d)) {
            *added = 0;
            return NULL;
        }
        rmf_err e = bf_check_growth(o);
        if (e)
            return e;
    }
    dedup_verdict v;
    dedup_status s = dedup_scalable_test_and_add(o->sb, d, &v);
    if (s != DEDUP_OK) {
        if (s == DEDUP_ERR_FULL)
            return o->nonscaling ? "ERR non scaling filter is full"
                                 : "ERR max number of scaling filters reached";
        if (s == DEDUP_ERR_LIMIT)
            return "ERR max number of scaling filters reached";
        return status_err(s);
    }
    *added = v == DEDUP_NEW;
    if (v == DEDUP_NEW) {
        o->items++;
        const dedup_bloom *nl;
        while ((nl = dedup_scalable_link(o->sb, o->sb_links)) != NULL) {
            o->sb_capacity += dedup_bloom_capacity(nl);
            o->sb_links++;
        }
    }
    return NULL;
}

bool rmf_bf_exists(const rmf_obj *o, const void *item, size_t len)
{
    return dedup_scalable_might_contain_key(o->sb, item, len);
}

uint64_t rmf_bf_capacity(const rmf_obj *o) { return o->sb_capacity; }
uint32_t rmf_bf_filters(const rmf_obj *o) { return o->sb_links; }
bool rmf_bf_nonscaling(const rmf_obj *o) { return o->nonscaling; }
uint32_t rmf_bf_expansion(const rmf_obj *o) { return o->expansion; }

/* ---- Expiring dedup ----------------------------------------------------------- */

static rmf_err ex_create(const rmf_dd_params *p, const rmf_config *c, const dedup_allocator *a,
                         rmf_obj **out);

rmf_err rmf_dd_create(const rmf_dd_params *p, const rmf_config *c, const dedup_allocator *a,
                      rmf_obj **out)
{
    *out = NULL;
    uint32_t g = p->generations ? p->generations : 5;
    if (p->window_ms < 1 || p->window_ms > UINT64_C(1) << 50)
        return "ERR bad window (milliseconds, 1 to 2^50)";
    if (!(p->error_rate > 0 && p->error_rate < 1))
        return "ERR (0 < error rate range < 1)";
    if (p->error_rate / g < DEDUP_MIN_FPR)
        return "ERR error rate below the smallest supported";
    if (p->capacity < 1)
        return "ERR (capacity should be larger than 0)";
    if (p->capacity > c->max_capacity)
        return "ERR capacity above the module's limit (module argument MAX_CAPACITY)";
    if (g < DD_MIN_GEN || g > DD_MAX_GEN)
        return "ERR GENERATIONS must be between 3 and 16";
    if (p->exact)
        return ex_create(p, c, a, out);
    rmf_obj *o = obj_new(RMF_DEDUP, a);
    if (!o)
        return "ERR allocation failure";
    o->capacity = p->capacity;
    o->error_rate = p->error_rate;
    o->window_ms = p->window_ms;
    o->slot_ms = (p->window_ms + (g - 2) - 1) / (g - 2);
    o->max_memory = c->max_memory;
    o->cur_slot = p->now_ms / o->slot_ms;
    /* A steady stream brings capacity/(g-2) items per slot; a burst grows
     * the newest generation's chain (its rate stays within p/g). */
    uint64_t per_gen = (p->capacity + (g - 2) - 1) / (g - 2);
    for (uint32_t i = 0; i < g; i++) {
        rmf_err e = new_generation(o, i, per_gen, p->error_rate / g);
        if (e) {
            rmf_free(o);
            return e;
        }
        o->nlinks = i + 1;
    }
    *out = o;
    return NULL;
}


/* ---- Expiring dedup, EXACT mode ------------------------------------------------
 * Each key's 128-bit digest and the time it was last seen, in a linear-
 * probing table kept at most 3/4 full.  A slot whose time is a window or
 * more in the past is expired: it still continues probe chains, and an
 * insert reuses the first expired slot of its chain (the key is known to be
 * absent further on).  When the table would pass 3/4 it is rebuilt with only
 * the live keys, at twice their number or more, so its memory follows the
 * keys seen within the window.  32 bytes or more per live key. */
#define EX_MIN_CAP 16u

static bool ex_empty(const struct ex_entry *e) { return !(e->lo | e->hi | e->last_ms); }

static bool ex_live(const rmf_obj *o, const struct ex_entry *e, uint64_t now)
{
    return now < e->last_ms || now - e->last_ms < o->window_ms;
}

static dedup_digest ex_norm(dedup_digest d)
{
    if (!(d.lo | d.hi))
        d.hi = 1;
    return d;
}

static uint64_t ex_cap_for(uint64_t live)
{
    uint64_t cap = EX_MIN_CAP;
    while (cap / 4 * 3 < live + 1 && cap < (UINT64_C(1) << 58))
        cap <<= 1;
    return cap;
}

/* Replaces the table by one of 'cap' slots holding the same keys, without
 * the expired ones when 'drop' (then 'now' says which those are). */
static rmf_err ex_alloc(rmf_obj *o, uint64_t cap, bool drop, uint64_t now)
{
    uint64_t bytes = cap * sizeof(struct ex_entry);
    size_t now_bytes = rmf_memory_usage(o);
    if (cap > (UINT64_C(1) << 58) || now_bytes + bytes > o->max_memory)
        return "ERR filter would exceed the per-key memory limit (module argument MAX_MEMORY)";
    struct ex_entry *t = obj_alloc(obj_allocator(o), (size_t)bytes);
    if (!t)
        return "ERR allocation failure";
    memset(t, 0, (size_t)bytes);
    struct ex_entry *old = o->ex_slots;
    uint64_t old_cap = o->ex_cap;
    o->ex_slots = t;
    o->ex_cap = cap;
    o->ex_used = 0;
    for (uint64_t i = 0; i < old_cap; i++) {
        if (ex_empty(&old[i]) || (drop && !ex_live(o, &old[i], now)))
            continue;
        uint64_t h = old[i].lo & (cap - 1);
        while (!ex_empty(&t[h]))
            h = (h + 1) & (cap - 1);
        t[h] = old[i];
        o->ex_used++;
    }
    obj_free(obj_allocator(o), old);
    return NULL;
}

static rmf_err ex_create(const rmf_dd_params *p, const rmf_config *c, const dedup_allocator *a,
                         rmf_obj **out)
{
    rmf_obj *o = obj_new(RMF_DEDUP, a);
    if (!o)
        return "ERR allocation failure";
    o->capacity = p->capacity;
    o->error_rate = p->error_rate;
    o->window_ms = p->window_ms;
    o->slot_ms = p->window_ms;
    o->max_memory = c->max_memory;
    o->exact = true;
    rmf_err e = ex_alloc(o, ex_cap_for(p->capacity), false, 0);
    if (e) {
        rmf_free(o);
        return e;
    }
    *out = o;
    return NULL;
}

/* Finds the slot of d, or the slot an insert of d should take (the first
 * expired slot of its chain, else the empty slot ending it). */
static struct ex_entry *ex_find(const rmf_obj *o, dedup_digest d, uint64_t now, bool *found)
{
    uint64_t h = d.lo & (o->ex_cap - 1);
    struct ex_entry *reuse = NULL;
    for (;;) {
        struct ex_entry *e = &o->ex_slots[h];
        if (ex_empty(e)) {
            *found = false;
            return reuse ? reuse : e;
        }
        if (e->lo == d.lo && e->hi == d.hi) {
            *found = true;
            return e;
        }
        if (!reuse && !ex_live(o, e, now))
            reuse = e;
        h = (h + 1) & (o->ex_cap - 1);
    }
}

static uint64_t ex_live_count(const rmf_obj *o, uint64_t now)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < o->ex_cap; i++)
        n += !ex_empty(&o->ex_slots[i]) && ex_live(o, &o->ex_slots[i], now);
    return n;
}

static rmf_err ex_add(rmf_obj *o, dedup_digest d, uint64_t now, int *is_new)
{
    d = ex_norm(d);
    bool found;
    struct ex_entry *e = ex_find(o, d, now, &found);
    if (found) {
        *is_new = !ex_live(o, e, now);
        if (now > e->last_ms)
            e->last_ms = now;
        if (*is_new)
            o->items++;
        return NULL;
    }
    if (ex_empty(e) && o->ex_used + 1 > o->ex_cap / 4 * 3) {
        /* Rebuild without the expired keys, at twice the live ones (or
         * the same size if that cannot be allocated but is enough). */
        uint64_t live = ex_live_count(o, now);
        rmf_err err = ex_alloc(o, ex_cap_for(2 * live), true, now);
        if (err && (live + 1 > o->ex_cap / 4 * 3 || ex_alloc(o, o->ex_cap, true, now) != NULL))
            return err;
        e = ex_find(o, d, now, &found);
    }
    if (ex_empty(e))
        o->ex_used++;
    e->lo = d.lo;
    e->hi = d.hi;
    e->last_ms = now;
    o->items++;
    *is_new = 1;
    return NULL;
}

static bool ex_exists(const rmf_obj *o, dedup_digest d, uint64_t now)
{
    d = ex_norm(d);
    bool found;
    struct ex_entry *e = ex_find(o, d, now, &found);
    return found && ex_live(o, e, now);
}

/* Blob of the EXACT table (module format, not a library container):
 *   0  4  magic "DDEX"     4  4  version 1
 *   8  8  slots (a power of two, >= 16)
 *   16 8  n, entries that follow
 *   24 24n entries (lo, hi, last_ms), non-empty slots in slot order
 *   .. 8  XXH3-64 (seed 0) of everything before */
static uint64_t ex_blob_size(const rmf_obj *o)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < o->ex_cap; i++)
        n += !ex_empty(&o->ex_slots[i]);
    return 24 + 24 * n + 8;
}

static dedup_status ex_save(const rmf_obj *o, dedup_sink *sink)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    unsigned char h[24];
    memcpy(h, "DDEX", 4);
    dedup_put_u32(h + 4, 1);
    dedup_put_u64(h + 8, o->ex_cap);
    dedup_put_u64(h + 16, (ex_blob_size(o) - 32) / 24);
    XXH3_64bits_update(&st, h, sizeof h);
    dedup_status s = sink->write(sink->ctx, h, sizeof h);
    for (uint64_t i = 0; s == DEDUP_OK && i < o->ex_cap; i++) {
        const struct ex_entry *e = &o->ex_slots[i];
        if (ex_empty(e))
            continue;
        unsigned char b[24];
        dedup_put_u64(b, e->lo);
        dedup_put_u64(b + 8, e->hi);
        dedup_put_u64(b + 16, e->last_ms);
        XXH3_64bits_update(&st, b, sizeof b);
        s = sink->write(sink->ctx, b, sizeof b);
    }
    if (s == DEDUP_OK) {
        unsigned char c[8];
        dedup_put_u64(c, XXH3_64bits_digest(&st));
        s = sink->write(sink->ctx, c, sizeof c);
    }
    return s;
}

static rmf_err ex_load(dedup_source src, uint64_t blob_len, rmf_obj *o)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    unsigned char h[24];
    if (blob_len < 32 || src.read(src.ctx, h, sizeof h) != DEDUP_OK)
        return "ERR dump truncated";
    XXH3_64bits_update(&st, h, sizeof h);
    uint64_t cap = dedup_get_u64(h + 8), n = dedup_get_u64(h + 16);
    if (memcmp(h, "DDEX", 4) != 0 || dedup_get_u32(h + 4) != 1)
        return "ERR corrupted dump (exact table header)";
    if (cap < EX_MIN_CAP || cap > (UINT64_C(1) << 40) || (cap & (cap - 1)) ||
        n > cap / 4 * 3 || blob_len != 32 + 24 * n)
        return "ERR corrupted dump (exact table size)";
    rmf_err err = ex_alloc(o, cap, false, 0);
    if (err)
        return err;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char b[24];
        if (src.read(src.ctx, b, sizeof b) != DEDUP_OK)
            return "ERR dump truncated";
        XXH3_64bits_update(&st, b, sizeof b);
        struct ex_entry v = {dedup_get_u64(b), dedup_get_u64(b + 8), dedup_get_u64(b + 16)};
        if (!(v.lo | v.hi))
            return "ERR corrupted dump (exact table entry)";
        uint64_t slot = v.lo & (cap - 1);
        while (!ex_empty(&o->ex_slots[slot])) {
            if (o->ex_slots[slot].lo == v.lo && o->ex_slots[slot].hi == v.hi)
                return "ERR corrupted dump (a key twice in the exact table)";
            slot = (slot + 1) & (cap - 1);
        }
        o->ex_slots[slot] = v;
        o->ex_used++;
    }
    unsigned char c[8];
    if (src.read(src.ctx, c, sizeof c) != DEDUP_OK)
        return "ERR dump truncated";
    if (dedup_get_u64(c) != XXH3_64bits_digest(&st))
        return "ERR corrupted dump (exact table checksum)";
    return NULL;
}

/* Moves the newest slot forward to 'now_ms', clearing generations whose
 * slot has left the last G slots. */
static void dd_advance(rmf_obj *o, uint64_t now_ms)
{
    uint64_t slot = now_ms / o->slot_ms;
    if (slot <= o->cur_slot)
        return; /* same slot, or a clock that went back: keep everything */
    uint64_t steps = slot - o->cur_slot;
    if (steps > o->nlinks)
        steps = o->nlinks;
    for (uint64_t i = 1; i <= steps; i++) {
        uint32_t gi = (uint32_t)((slot - steps + i) % o->nlinks);
        dedup_scalable_clear(o->links[gi]);
        o->gen_items[gi] = 0;
        o->gen_links[gi] = 1;
        o->gen_capacity[gi] = dedup_bloom_capacity(dedup_scalable_link(o->links[gi], 0));
    }
    o->cur_slot = slot;
}

static bool dd_query(const rmf_obj *o, dedup_digest d, uint64_t now_ms)
{
    uint64_t now_slot = now_ms / o->slot_ms;
    if (now_slot < o->cur_slot)
        now_slot = o->cur_slot;
    for (uint32_t age = 0; age < o->nlinks && age <= o->cur_slot; age++) {
        uint64_t slot = o->cur_slot - age;
        if (now_slot - slot >= o->nlinks)
            break;
        if (dedup_scalable_might_contain(o->links[slot % o->nlinks], d))
            return true;
    }
    return false;
}

rmf_err rmf_dd_add(rmf_obj *o, const void *item, size_t len, uint64_t now_ms, int *is_new)
{
    if (o->exact)
        return ex_add(o, dedup_hash(item, len, DEDUP_DEFAULT_SEED), now_ms, is_new);
    dd_advance(o, now_ms);
    dedup_digest d = dedup_scalable_digest(o->links[0], item, len);
    bool seen = dd_query(o, d, now_ms);
    uint32_t gi = (uint32_t)(o->cur_slot % o->nlinks);
    dedup_scalable *gen = o->links[gi];
    if (o->gen_items[gi] >= o->gen_capacity[gi] && !dedup_scalable_might_contain(gen, d)) {
        /* recording it needs the generation's next link: check the cap */
        uint64_t n = dedup_bloom_capacity(dedup_scalable_link(gen, o->gen_links[gi] - 1));
        double p = dedup_scalable_link_fpr(o->error_rate / o->nlinks, DD_TIGHTENING,
                                           DD_GEN_LINKS, o->gen_links[gi]);
        uint64_t need = n > UINT64_MAX / DD_GROWTH
                            ? UINT64_MAX
                            : bloom_bytes_for(DEDUP_BLOOM_BLOCKED, n * DD_GROWTH, p);
        if (o->gen_links[gi] >= DD_GEN_LINKS || need == UINT64_MAX ||
            rmf_memory_usage(o) + need > o->max_memory)
            return "ERR filter would exceed the per-key memory limit (module argument MAX_MEMORY)";
    }
    dedup_verdict v;
    dedup_status s = dedup_scalable_test_and_add(gen, d, &v);
    if (s != DEDUP_OK)
        return s == DEDUP_ERR_NOMEM ? "ERR allocation failure" : status_err(s);
    if (v == DEDUP_NEW) {
        o->gen_items[gi]++;
        const dedup_bloom *nl;
        while ((nl = dedup_scalable_link(gen, o->gen_links[gi])) != NULL) {
            o->gen_capacity[gi] += dedup_bloom_capacity(nl);
            o->gen_links[gi]++;
        }
    }
    if (!seen)
        o->items++;
    *is_new = !seen;
    return NULL;
}

bool rmf_dd_exists(rmf_obj *o, const void *item, size_t len, uint64_t now_ms)
{
    if (o->exact)
        return ex_exists(o, dedup_hash(item, len, DEDUP_DEFAULT_SEED), now_ms);
    dedup_digest d = dedup_scalable_digest(o->links[0], item, len);
    return dd_query(o, d, now_ms);
}

uint64_t rmf_dd_window_ms(const rmf_obj *o) { return o->window_ms; }
uint32_t rmf_dd_generations(const rmf_obj *o) { return o->nlinks; }
uint64_t rmf_dd_slot_ms(const rmf_obj *o) { return o->slot_ms; }
double rmf_dd_error_rate(const rmf_obj *o) { return o->error_rate; }
bool rmf_dd_exact(const rmf_obj *o) { return o->exact; }
uint64_t rmf_dd_live(const rmf_obj *o, uint64_t now_ms)
{
    return o->exact ? ex_live_count(o, now_ms) : 0;
}

double rmf_dd_current_fpr(rmf_obj *o, uint64_t now_ms)
{
    if (o->exact)
        return 0.0; /* digest collisions aside (about n^2 / 2^129) */
    uint64_t now_slot = now_ms / o->slot_ms;
    if (now_slot < o->cur_slot)
        now_slot = o->cur_slot;
    double miss = 1.0;
    for (uint32_t age = 0; age < o->nlinks && age <= o->cur_slot; age++) {
        uint64_t slot = o->cur_slot - age;
        if (now_slot - slot >= o->nlinks)
            break;
        dedup_scalable_info si;
        dedup_scalable_get_info(o->links[slot % o->nlinks], &si);
        miss *= 1.0 - si.fpr_current;
    }
    return 1.0 - miss;
}

/* ---- Cuckoo ----------------------------------------------------------------- */

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

static void cf_set_max_links(rmf_obj *o, const rmf_config *c);

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
    if (p->capacity < 2ull * p->bucket_size)
        return "ERR Capacity must be at least (BucketSize * 2)";
    if (p->capacity > c->max_capacity)
        return "ERR capacity above the module's limit (module argument MAX_CAPACITY)";
    uint32_t f = dedup_cuckoo_fingerprint_bits_for(c->cf_error_rate, p->bucket_size);
    uint64_t nb0 = dedup_cuckoo_buckets_for(p->capacity, p->bucket_size);
    if (f == 0 || nb0 == 0)
        return "ERR invalid filter parameters";
    uint64_t first = cf_link_bytes(nb0, p->expansion, p->bucket_size, f, 0);
    if (first == UINT64_MAX || first > DEDUP_MAX_BITS / 8)
        return "ERR capacity too large for one filter";
    if (first > c->max_memory)
        return "ERR filter would exceed the per-key memory limit (module argument MAX_MEMORY)";
    rmf_obj *o = obj_new(RMF_CUCKOO, a);
    if (!o)
        return "ERR allocation failure";
    o->capacity = p->capacity;
    o->error_rate = c->cf_error_rate;
    o->expansion = p->expansion;
    o->max_memory = c->max_memory;
    dedup_cuckoo_params cp;
    dedup_cuckoo_params_init(&cp);
    cp.capacity = p->capacity;
    cp.fpr = c->cf_error_rate;
    cp.bucket_size = p->bucket_size;
    cp.max_kicks = p->max_iterations;
    cp.expansion = p->expansion;
    dedup_status s = dedup_cuckoo_create(&cp, obj_allocator(o), &o->cf);
    if (s != DEDUP_OK) {
        rmf_free(o);
        return status_err(s);
    }
    cf_set_max_links(o, c);
    *out = o;
    return NULL;
}

rmf_err rmf_cf_can_grow(const rmf_obj *o)
{
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(o->cf, &ci);
    if (ci.expansion == 0 || ci.links < o->cf_max_links)
        return NULL; /* a fixed filter never grows: a full one answers "full" */
    return o->cf_mem_bound
               ? "ERR Maximum expansions reached (the next sub-filter would pass the per-key "
                 "memory limit, module argument MAX_MEMORY)"
               : "ERR Maximum expansions reached";
}

/* How many sub-filters CF_MAX_EXPANSIONS and MAX_MEMORY allow. */
static void cf_set_max_links(rmf_obj *o, const rmf_config *c)
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

int rmf_cf_add(rmf_obj *o, const void *item, size_t len, bool nx, rmf_err *err)
{
    *err = NULL;
    dedup_digest d = dedup_cuckoo_digest(o->cf, item, len);
    dedup_status s;
    dedup_verdict v = DEDUP_NEW;
    if (nx)
        s = dedup_cuckoo_test_and_add(o->cf, d, &v);
    else
        s = dedup_cuckoo_add(o->cf, d);
    if (s == DEDUP_OK)
        return v == DEDUP_NEW ? 1 : 0;
    if (s == DEDUP_ERR_FULL)
        return -1;
    *err = s == DEDUP_ERR_NOMEM ? "ERR allocation failure" : status_err(s);
    return -2;
}

bool rmf_cf_exists(const rmf_obj *o, const void *item, size_t len)
{
    return dedup_cuckoo_might_contain_key(o->cf, item, len);
}

uint64_t rmf_cf_count(const rmf_obj *o, const void *item, size_t len)
{
    return dedup_cuckoo_count_key(o->cf, item, len);
}

bool rmf_cf_del(rmf_obj *o, const void *item, size_t len)
{
    return dedup_cuckoo_delete_key(o->cf, item, len) == DEDUP_OK;
}

void rmf_cf_get_info(const rmf_obj *o, rmf_cf_info *out)
{
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(o->cf, &ci);
    out->buckets = ci.buckets;
    out->filters = ci.links;
    out->items = ci.items;
    out->deleted = ci.deleted;
    out->bucket_size = ci.bucket_size;
    out->expansion = ci.expansion;
    out->max_iterations = ci.max_kicks;
    out->fingerprint_bits = ci.fingerprint_bits;
    out->fpr_full = ci.fpr_full;
}

/* ---- copy ------------------------------------------------------------------- */

rmf_obj *rmf_copy(const rmf_obj *o)
{
    /* Round trip through the serialized form: the library has no clone,
     * and this reuses the validated load path. */
    uint64_t n = rmf_serialized_size(o);
    if (n > SIZE_MAX)
        return NULL;
    unsigned char *buf = obj_alloc(obj_allocator(o), (size_t)n);
    if (!buf)
        return NULL;
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, (size_t)n);
    rmf_obj *c = NULL;
    if (rmf_save(o, &sink) == DEDUP_OK) {
        rmf_config cfg;
        rmf_config_init(&cfg);
        cfg.max_memory = UINT64_MAX;
        cfg.max_capacity = UINT64_MAX;
        cfg.cf_max_expansions = DEDUP_MAX_CHAIN;
        dedup_mem_source src;
        if (rmf_load(dedup_mem_source_init(&src, buf, ms.len), o->kind, &cfg, obj_allocator(o),
                     &c) != NULL)
            c = NULL;
    }
    obj_free(obj_allocator(o), buf);
    if (c) {
        c->max_memory = o->max_memory;
        c->cf_max_links = o->cf_max_links;
        c->cf_mem_bound = o->cf_mem_bound;
    }
    return c;
}

/* ---- serialization --------------------------------------------------------------- */

static uint64_t blobs_size(const rmf_obj *o)
{
    if (o->cf)
        return dedup_cuckoo_serialized_size(o->cf);
    if (o->sb)
        return dedup_scalable_serialized_size(o->sb);
    if (o->exact)
        return ex_blob_size(o);
    uint64_t n = 0;
    for (uint32_t i = 0; i < o->nlinks; i++)
        n += dedup_scalable_serialized_size(o->links[i]);
    return n;
}

uint64_t rmf_serialized_size(const rmf_obj *o) { return RMF_ENVELOPE_SIZE + blobs_size(o); }

static void envelope_encode(const rmf_obj *o, unsigned char h[RMF_ENVELOPE_SIZE])
{
    memset(h, 0, RMF_ENVELOPE_SIZE);
    memcpy(h, "DDRM", 4);
    h[4] = (unsigned char)o->kind;
    h[5] = RMF_ENVELOPE_VERSION;
    h[6] = o->nonscaling ? 1 : 0;
    dedup_put_u64(h + 8, o->items);
    dedup_put_u64(h + 16, o->deleted);
    dedup_put_u64(h + 24, o->capacity);
    dedup_put_f64(h + 32, o->error_rate);
    dedup_put_u32(h + 40, o->expansion);
    if (o->cf) {
        dedup_cuckoo_info ci;
        dedup_cuckoo_get_info(o->cf, &ci);
        dedup_put_u64(h + 8, ci.inserted);
        dedup_put_u64(h + 16, ci.deleted);
        dedup_put_u32(h + 44, ci.bucket_size);
        dedup_put_u32(h + 48, ci.max_kicks);
        dedup_put_u32(h + 52, 1);
    } else if (o->sb) {
        dedup_put_u32(h + 52, 1);
    } else if (o->exact) {
        h[6] = 2; /* EXACT */
        dedup_put_u32(h + 52, 1);
    } else {
        dedup_put_u32(h + 48, o->nlinks);
        dedup_put_u32(h + 52, o->nlinks);
    }
    dedup_put_u64(h + 56, o->window_ms);
    dedup_put_u64(h + 64, o->cur_slot);
    dedup_put_u64(h + 72, blobs_size(o));
    dedup_put_u64(h + 80, dedup_hash(h, 80, 0).lo);
}

dedup_status rmf_save(const rmf_obj *o, dedup_sink *sink)
{
    unsigned char h[RMF_ENVELOPE_SIZE];
    envelope_encode(o, h);
    dedup_status s = sink->write(sink->ctx, h, sizeof h);
    if (s == DEDUP_OK && o->cf)
        return dedup_cuckoo_save(o->cf, sink);
    if (s == DEDUP_OK && o->sb)
        return dedup_scalable_save(o->sb, sink);
    if (s == DEDUP_OK && o->exact)
        return ex_save(o, sink);
    for (uint32_t i = 0; s == DEDUP_OK && i < o->nlinks; i++)
        s = dedup_scalable_save(o->links[i], sink);
    return s;
}

/* A sink that keeps only bytes [off, off+len) and stops the save once it
 * has them. */
typedef struct range_sink {
    uint64_t pos, off;
    unsigned char *buf;
    size_t len, copied;
} range_sink;

static dedup_status buf_sink_write(void *ctx, const void *data, size_t n)
{
    range_sink *r = ctx;
    const unsigned char *p = data;
    uint64_t end = r->pos + n;
    if (end > r->off && r->pos < r->off + r->len) {
        uint64_t from = r->pos > r->off ? r->pos : r->off;
        uint64_t to = end < r->off + r->len ? end : r->off + r->len;
        memcpy(r->buf + (from - r->off), p + (from - r->pos), (size_t)(to - from));
        r->copied += (size_t)(to - from);
    }
    r->pos = end;
    if (r->copied == r->len)
        return DEDUP_ERR_CANCELLED;
    return DEDUP_OK;
}

dedup_status rmf_serialize_range(const rmf_obj *o, uint64_t off, void *buf, size_t len,
                                 size_t *copied)
{
    *copied = 0;
    uint64_t total = rmf_serialized_size(o);
    if (off >= total || len == 0)
        return DEDUP_OK;
    if (len > total - off)
        len = (size_t)(total - off);
    range_sink r = {0, off, buf, len, 0};
    dedup_sink sink = {buf_sink_write, &r};
    dedup_status s = rmf_save(o, &sink);
    if (s != DEDUP_OK && s != DEDUP_ERR_CANCELLED)
        return s;
    *copied = r.copied;
    return r.copied == len ? DEDUP_OK : DEDUP_ERR_CORRUPT;
}

/* ---- loading ------------------------------------------------------------------- */

typedef struct envelope {
    rmf_kind kind;
    uint32_t flags;
    uint64_t items, deleted, capacity;
    double error_rate;
    uint32_t expansion, bucket_size, aux, nblobs;
    uint64_t window_ms, cur_slot, blobs_len;
} envelope;

static rmf_err envelope_decode(const unsigned char *h, size_t len, rmf_kind expect,
                               const rmf_config *c, envelope *e)
{
    if (len != RMF_ENVELOPE_SIZE || memcmp(h, "DDRM", 4) != 0)
        return "ERR invalid header (not a dedup filter dump)";
    if (h[5] != RMF_ENVELOPE_VERSION)
        return "ERR unsupported dump version";
    if (dedup_get_u64(h + 80) != dedup_hash(h, 80, 0).lo)
        return "ERR header checksum mismatch";
    e->kind = (rmf_kind)h[4];
    if (e->kind != RMF_BLOOM && e->kind != RMF_DEDUP && e->kind != RMF_CUCKOO)
        return "ERR unknown filter kind in dump";
    if (expect && e->kind != expect)
        return "ERR dump holds another filter kind";
    e->flags = (uint32_t)h[6] | (uint32_t)h[7] << 8;
    e->items = dedup_get_u64(h + 8);
    e->deleted = dedup_get_u64(h + 16);
    e->capacity = dedup_get_u64(h + 24);
    e->error_rate = dedup_get_f64(h + 32);
    e->expansion = dedup_get_u32(h + 40);
    e->bucket_size = dedup_get_u32(h + 44);
    e->aux = dedup_get_u32(h + 48);
    e->nblobs = dedup_get_u32(h + 52);
    e->window_ms = dedup_get_u64(h + 56);
    e->cur_slot = dedup_get_u64(h + 64);
    e->blobs_len = dedup_get_u64(h + 72);
    if (e->capacity < 1 || e->capacity > c->max_capacity)
        return "ERR dump capacity out of range";
    if (e->blobs_len > c->max_memory)
        return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    if (e->kind == RMF_BLOOM) {
        bool ns = e->flags & 1;
        if ((e->flags & ~1u) || e->deleted || e->bucket_size || e->aux || e->window_ms ||
            e->cur_slot)
            return "ERR corrupted dump header";
        if (!(e->error_rate >= DEDUP_MIN_FPR && e->error_rate < 1))
            return "ERR corrupted dump header (error rate)";
        if (e->nblobs != 1 ||
            (ns ? e->expansion != 0
                : (e->expansion < 1 || e->expansion > DEDUP_SCALABLE_MAX_GROWTH)))
            return "ERR corrupted dump header (links)";
    } else if (e->kind == RMF_DEDUP && e->flags == 2) { /* EXACT */
        if (e->deleted || e->bucket_size || e->expansion || e->aux || e->cur_slot ||
            e->nblobs != 1)
            return "ERR corrupted dump header";
        if (!(e->error_rate > 0 && e->error_rate < 1))
            return "ERR corrupted dump header (error rate)";
        if (e->window_ms < 1 || e->window_ms > UINT64_C(1) << 50)
            return "ERR corrupted dump header (window)";
    } else if (e->kind == RMF_DEDUP) {
        if (e->flags || e->deleted || e->bucket_size || e->expansion)
            return "ERR corrupted dump header";
        if (e->aux < DD_MIN_GEN || e->aux > DD_MAX_GEN || e->nblobs != e->aux)
            return "ERR corrupted dump header (generations)";
        if (!(e->error_rate > 0 && e->error_rate < 1) || e->error_rate / e->aux < DEDUP_MIN_FPR)
            return "ERR corrupted dump header (error rate)";
        if (e->window_ms < 1 || e->window_ms > UINT64_C(1) << 50)
            return "ERR corrupted dump header (window)";
    } else {
        if (e->flags || e->window_ms || e->cur_slot || e->nblobs != 1)
            return "ERR corrupted dump header";
        if (e->bucket_size < 1 || e->bucket_size > DEDUP_CUCKOO_MAX_BUCKET_SIZE ||
            e->aux > DEDUP_CUCKOO_MAX_KICKS || e->expansion > DEDUP_CUCKOO_MAX_EXPANSION ||
            !(e->error_rate >= DEDUP_MIN_FPR && e->error_rate < 1))
            return "ERR corrupted dump header (cuckoo shape)";
    }
    return NULL;
}

/* Loads the scalable Bloom blob and checks it against the envelope. */
static rmf_err load_scalable(dedup_source src, const envelope *e, const rmf_config *c,
                             rmf_obj *o)
{
    dedup_status s = dedup_scalable_load(src, obj_allocator(o), &o->sb);
    if (s != DEDUP_OK)
        return s == DEDUP_ERR_NOMEM ? "ERR allocation failure" : "ERR corrupted filter in dump";
    dedup_scalable_info si;
    dedup_scalable_get_info(o->sb, &si);
    bool ns = e->flags & 1;
    if (si.kind != DEDUP_BLOOM_CLASSIC || si.max_links != bf_max_links(ns) ||
        si.growth != (ns ? 1u : e->expansion) ||
        si.tightening != DEDUP_SCALABLE_DEFAULT_TIGHTENING || si.fpr != e->error_rate ||
        si.initial_capacity != e->capacity || si.items != e->items)
        return "ERR corrupted dump (Bloom filter differs from its header)";
    if (rmf_memory_usage(o) > c->max_memory)
        return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    o->sb_links = si.links;
    o->sb_capacity = si.capacity;
    return NULL;
}

/* Loads the cuckoo blob and checks it against the envelope. */
static rmf_err load_cuckoo(dedup_source src, const envelope *e, const rmf_config *c,
                           rmf_obj *o)
{
    dedup_status s = dedup_cuckoo_load(src, obj_allocator(o), &o->cf);
    if (s != DEDUP_OK)
        return s == DEDUP_ERR_NOMEM ? "ERR allocation failure" : "ERR corrupted filter in dump";
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(o->cf, &ci);
    if (ci.bucket_size != e->bucket_size || ci.max_kicks != e->aux ||
        ci.expansion != e->expansion || ci.capacity != e->capacity ||
        ci.inserted != e->items || ci.deleted != e->deleted)
        return "ERR corrupted dump (cuckoo filter differs from its header)";
    if (rmf_memory_usage(o) > c->max_memory)
        return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    cf_set_max_links(o, c);
    return NULL;
}

static rmf_err load_blobs(dedup_source src, const envelope *e, const rmf_config *c,
                          const dedup_allocator *a, rmf_obj **out)
{
    rmf_obj *o = obj_new(e->kind, a);
    if (!o)
        return "ERR allocation failure";
    o->items = e->items;
    o->deleted = e->deleted;
    o->capacity = e->capacity;
    o->error_rate = e->error_rate;
    o->expansion = e->expansion;
    o->nonscaling = e->flags & 1;
    o->window_ms = e->window_ms;
    o->cur_slot = e->cur_slot;
    o->max_memory = c->max_memory;
    uint64_t before = src.remaining ? src.remaining(src.ctx) : UINT64_MAX;
    if (before != UINT64_MAX && before < e->blobs_len) {
        rmf_free(o);
        return "ERR dump truncated";
    }
    rmf_err err = NULL;
    if (e->kind == RMF_DEDUP && e->flags == 2) {
        o->exact = true;
        o->slot_ms = o->window_ms;
        err = ex_load(src, e->blobs_len, o);
        if (err) {
            rmf_free(o);
            return err;
        }
        *out = o;
        return NULL;
    }
    if (e->kind == RMF_CUCKOO || e->kind == RMF_BLOOM) {
        err = e->kind == RMF_CUCKOO ? load_cuckoo(src, e, c, o) : load_scalable(src, e, c, o);
        if (!err) {
            uint64_t after = src.remaining ? src.remaining(src.ctx) : UINT64_MAX;
            if (before != UINT64_MAX && before - after != e->blobs_len)
                err = "ERR corrupted dump (blob lengths)";
        }
        if (err) {
            rmf_free(o);
            return err;
        }
        *out = o;
        return NULL;
    }
    uint64_t seed0 = 0;
    for (uint32_t i = 0; i < e->nblobs && !err; i++) {
        dedup_status s = dedup_scalable_load(src, obj_allocator(o), &o->links[i]);
        if (s != DEDUP_OK) {
            err = s == DEDUP_ERR_NOMEM ? "ERR allocation failure"
                                       : "ERR corrupted filter in dump";
            break;
        }
        o->nlinks = i + 1;
        uint32_t g = e->nblobs;
        dedup_scalable_params want;
        dd_gen_params(&want, (e->capacity + (g - 2) - 1) / (g - 2), e->error_rate / g);
        dedup_scalable_info si;
        dedup_scalable_get_info(o->links[i], &si);
        if (i == 0)
            seed0 = si.seed;
        if (si.kind != want.kind || si.initial_capacity != want.capacity ||
            si.fpr != want.fpr || si.growth != want.growth ||
            si.tightening != want.tightening || si.max_links != want.max_links)
            err = "ERR corrupted dump (generation shape)";
        else if (si.seed != seed0)
            err = "ERR corrupted dump (seeds differ)";
        else if (rmf_memory_usage(o) > c->max_memory)
            err = "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
        o->gen_items[i] = si.items;
        o->gen_capacity[i] = si.capacity;
        o->gen_links[i] = si.links;
    }
    if (!err) {
        uint64_t after = src.remaining ? src.remaining(src.ctx) : UINT64_MAX;
        if (before != UINT64_MAX && before - after != e->blobs_len)
            err = "ERR corrupted dump (blob lengths)";
    }
    if (!err && e->kind == RMF_DEDUP) {
        uint32_t g = o->nlinks;
        o->slot_ms = (o->window_ms + (g - 2) - 1) / (g - 2);
    }
    if (err) {
        rmf_free(o);
        return err;
    }
    *out = o;
    return NULL;
}

rmf_err rmf_load(dedup_source src, rmf_kind expect, const rmf_config *c,
                 const dedup_allocator *a, rmf_obj **out)
{
    *out = NULL;
    unsigned char h[RMF_ENVELOPE_SIZE];
    if (src.read(src.ctx, h, sizeof h) != DEDUP_OK)
        return "ERR dump truncated";
    envelope e;
    rmf_err err = envelope_decode(h, sizeof h, expect, c, &e);
    if (err)
        return err;
    return load_blobs(src, &e, c, a, out);
}

/* ---- chunked loading ---------------------------------------------------------- */

struct rmf_partial {
    dedup_allocator alloc;
    rmf_kind kind;
    uint64_t total, received;
    unsigned char *data;
};

rmf_err rmf_partial_begin(const void *hdr, size_t len, rmf_kind expect, const rmf_config *c,
                          const dedup_allocator *a, rmf_partial **out)
{
    *out = NULL;
    envelope e;
    rmf_err err = envelope_decode(hdr, len, expect, c, &e);
    if (err)
        return err;
    rmf_partial *p = obj_alloc(a, sizeof *p);
    if (!p)
        return "ERR allocation failure";
    memset(p, 0, sizeof *p);
    if (a)
        p->alloc = *a;
    p->kind = e.kind;
    p->total = RMF_ENVELOPE_SIZE + e.blobs_len;
    if (p->total > SIZE_MAX || !(p->data = obj_alloc(a, (size_t)p->total))) {
        obj_free(a, p);
        return "ERR allocation failure";
    }
    memcpy(p->data, hdr, RMF_ENVELOPE_SIZE);
    p->received = RMF_ENVELOPE_SIZE;
    *out = p;
    return NULL;
}

rmf_err rmf_partial_append(rmf_partial *p, uint64_t offset, const void *data, size_t len)
{
    if (offset != p->received)
        return "ERR chunk out of order (LOADCHUNK expects the chunks SCANDUMP returned, in order)";
    if (len > p->total - p->received)
        return "ERR chunk goes past the end of the dump";
    if (len)
        memcpy(p->data + p->received, data, len);
    p->received += len;
    return NULL;
}

uint64_t rmf_partial_received(const rmf_partial *p) { return p->received; }
uint64_t rmf_partial_total(const rmf_partial *p) { return p->total; }
rmf_kind rmf_partial_kind(const rmf_partial *p) { return p->kind; }
const unsigned char *rmf_partial_data(const rmf_partial *p) { return p->data; }

rmf_err rmf_partial_finish(const rmf_partial *p, const rmf_config *c, rmf_obj **out)
{
    *out = NULL;
    if (p->received != p->total)
        return "ERR dump incomplete";
    dedup_mem_source m;
    dedup_source src = dedup_mem_source_init(&m, p->data, (size_t)p->total);
    rmf_err err = rmf_load(src, p->kind, c, p->alloc.malloc_fn ? &p->alloc : NULL, out);
    if (!err && m.pos != m.len) {
        rmf_free(*out);
        *out = NULL;
        return "ERR trailing bytes after the dump";
    }
    return err;
}

size_t rmf_partial_memory_usage(const rmf_partial *p) { return sizeof *p + (size_t)p->total; }

void rmf_partial_free(rmf_partial *p)
{
    if (!p)
        return;
    dedup_allocator a = p->alloc;
    const dedup_allocator *ap = a.malloc_fn ? &a : NULL;
    obj_free(ap, p->data);
    obj_free(ap, p);
}
