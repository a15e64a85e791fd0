/*
 * seen_filters.c - the probabilistic kinds of dedup/seen.h: BLOOM and
 * BLOCKED (dedup/bloom.h), COUNTING (dedup/counting.h), CUCKOO and its
 * chains (dedup/cuckoo.h), SCALABLE (dedup/scalable.h).
 *
 * Each filter sits in a box that keeps the planned capacity and the keys
 * answered NEW, which is what on_full needs:
 *   WARN  goes on; info.over_capacity turns true and fpr_bound reports the
 *         rate expected at the fill now (dedup_bloom_current_fpr ...);
 *   FAIL  decides in chunks no larger than the room left, and once the
 *         filter holds its capacity answers a key that might be present
 *         MAYBE_DUPLICATE (nothing changes) and stops at the first one that
 *         would be new, with DEDUP_ERR_FULL;
 *   GROW  BLOOM / BLOCKED are then a scalable chain from the first key
 *         (seen.c picks the SCALABLE class; its first link gets about half
 *         of fpr with the default tightening 0.5, so the whole chain stays
 *         within fpr); CUCKOO a chain of links; COUNTING cannot grow.
 */
#include "seen_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "dedup/bloom.h"
#include "dedup/counting.h"
#include "dedup/cuckoo.h"
#include "dedup/scalable.h"

#define CHUNK 256

typedef struct fbox {
    dedup_allocator alloc;
    void *st;
    uint64_t capacity;     /* planned keys; 0 = none known */
    uint64_t items;        /* answered NEW (BLOOM/BLOCKED: estimated after a load) */
    dedup_on_full on_full;
    uint64_t memory_limit; /* SCALABLE: FULL past it */
} fbox;

static dedup_status fbox_new(const dedup_allocator *a, const dedup_seen_spec *sp, fbox **out)
{
    fbox *b = ddi_malloc(a, sizeof *b);
    if (!b)
        return DEDUP_ERR_NOMEM;
    b->alloc = *a;
    b->st = NULL;
    b->capacity = 0;
    b->items = 0;
    b->on_full = sp ? sp->on_full : DEDUP_ON_FULL_WARN;
    b->memory_limit = sp ? sp->memory : 0;
    *out = b;
    return DEDUP_OK;
}

static void fbox_free(fbox *b)
{
    dedup_allocator a = b->alloc;
    ddi_free(&a, b);
}

static void *fbox_structure(const void *impl) { return ((const fbox *)impl)->st; }

/* A loaded filter starts with WARN; growing needs a chain from the first key. */
static dedup_status fbox_set_on_full(void *impl, dedup_on_full on_full)
{
    if (on_full != DEDUP_ON_FULL_WARN && on_full != DEDUP_ON_FULL_FAIL)
        return on_full == DEDUP_ON_FULL_GROW ? DEDUP_ERR_UNSUPPORTED : DEDUP_ERR_INVALID_ARG;
    ((fbox *)impl)->on_full = on_full;
    return DEDUP_OK;
}

/* Room left before the capacity under FAIL; SIZE_MAX when unlimited. */
static size_t room_of(const fbox *b)
{
    if (b->on_full != DEDUP_ON_FULL_FAIL || !b->capacity)
        return SIZE_MAX;
    return b->items >= b->capacity ? 0 : (size_t)(b->capacity - b->items);
}

static uint64_t round_estimate(double e, bool *known)
{
    *known = isfinite(e) && e >= 0 && e < 1.8e19;
    return *known ? (uint64_t)(e + 0.5) : 0;
}

/* ---- What every filter does alike ------------------------------------------------
 * The structure-specific step of each is a small adapter below (a typed
 * call on 'st'); the loops, the box and the errors are written once. */

/* Loads a structure into a new box ('load' adapts its dedup_X_load). */
typedef dedup_status (*st_load_fn)(dedup_source src, const dedup_allocator *a, void **st);

static dedup_status fbox_load(dedup_source src, const dedup_allocator *a, st_load_fn load,
                              fbox **out)
{
    fbox *b;
    dedup_status st = fbox_new(a, NULL, &b);
    if (st)
        return st;
    st = load(src, a, &b->st);
    if (st) {
        fbox_free(b);
        return st;
    }
    *out = b;
    return DEDUP_OK;
}

/* Answers a batch from the structure's batched membership test, CHUNK
 * digests at a time: a key it may hold is MAYBE_DUPLICATE. */
typedef void (*st_contains_fn)(const void *st, const dedup_digest *d, size_t n, bool *out);

static dedup_status query_chunks(const void *impl, const dedup_batch *b, dedup_verdict *out,
                                 st_contains_fn contains)
{
    const void *st = ((const fbox *)impl)->st;
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    bool seen[CHUNK];
    for (size_t i = 0; i < b->n; i += CHUNK) {
        size_t c = b->n - i < CHUNK ? b->n - i : CHUNK;
        contains(st, b->digests + i, c, seen);
        for (size_t j = 0; j < c; j++)
            out[i + j] = seen[j] ? DEDUP_MAYBE_DUPLICATE : DEDUP_NEW;
    }
    return DEDUP_OK;
}

/* Deletes key by key: removed[i] false when key i was certainly absent. */
typedef dedup_status (*st_delete_fn)(void *st, dedup_digest d);

static dedup_status remove_each(void *impl, const dedup_batch *b, bool *removed,
                                st_delete_fn del)
{
    void *st = ((fbox *)impl)->st;
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++) {
        dedup_status s = del(st, b->digests[i]);
        if (s && s != DEDUP_ERR_NOT_FOUND)
            return s;
        if (removed)
            removed[i] = s == DEDUP_OK;
    }
    return DEDUP_OK;
}

/* ---- BLOOM / BLOCKED -------------------------------------------------------------- */

static dedup_status bloom_make(const dedup_seen_spec *sp, const dedup_allocator *a,
                               dedup_bloom_kind kind, void **impl)
{
    dedup_bloom_params p;
    dedup_bloom_params_init(&p);
    p.kind = kind;
    p.seed = sp->seed;
    p.fpr = sp->fpr;
    p.k = sp->hashes;
    if (sp->size) {
        p.bits = sp->size;
        p.capacity = sp->items ? sp->items
                     : kind == DEDUP_BLOOM_BLOCKED ? dedup_blocked_capacity_for(p.bits, p.fpr)
                                                   : dedup_bloom_capacity_for(p.bits, p.fpr);
        if (!p.capacity)
            return DEDUP_ERR_INVALID_ARG; /* not one key fits at this rate */
    } else if (sp->items) {
        p.capacity = sp->items;
        uint64_t bits = kind == DEDUP_BLOOM_BLOCKED ? dedup_blocked_bits_for(sp->items, p.fpr)
                                                    : dedup_bloom_bits_for(sp->items, p.fpr);
        if (!bits)
            return DEDUP_ERR_LIMIT;
        if (sp->memory && bits / 8 > sp->memory)
            return DEDUP_ERR_LIMIT;
        if (!p.k)
            p.bits = bits; /* sized once: create only picks k for it */
    } else if (sp->memory) {
        if (sp->memory > DEDUP_MAX_BITS / 8)
            return DEDUP_ERR_LIMIT;
        p.bits = sp->memory * 8;
        p.capacity = kind == DEDUP_BLOOM_BLOCKED ? dedup_blocked_capacity_for(p.bits, p.fpr)
                                                 : dedup_bloom_capacity_for(p.bits, p.fpr);
        if (!p.capacity)
            return DEDUP_ERR_INVALID_ARG; /* not one key fits at this rate */
    } else {
        return DEDUP_ERR_INVALID_ARG;
    }
    fbox *b;
    dedup_status st = fbox_new(a, sp, &b);
    if (st)
        return st;
    b->capacity = p.capacity;
    st = dedup_bloom_create(&p, a, (dedup_bloom **)&b->st);
    if (st) {
        fbox_free(b);
        return st;
    }
    *impl = b;
    return DEDUP_OK;
}

static dedup_status bloom_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    return bloom_make(sp, a, DEDUP_BLOOM_CLASSIC, impl);
}

static dedup_status blocked_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    return bloom_make(sp, a, DEDUP_BLOOM_BLOCKED, impl);
}

static dedup_status bloom_st_load(dedup_source src, const dedup_allocator *a, void **st)
{
    return dedup_bloom_load(src, a, (dedup_bloom **)st);
}

static dedup_status bloom_load(dedup_source src, const dedup_allocator *a, uint64_t seed, void **impl)
{
    (void)seed;
    fbox *b;
    dedup_status st = fbox_load(src, a, bloom_st_load, &b);
    if (st)
        return st;
    b->capacity = dedup_bloom_capacity(b->st);
    bool known;
    uint64_t e = round_estimate(dedup_bloom_estimate_count(b->st), &known);
    b->items = known ? e : b->capacity;
    *impl = b;
    return DEDUP_OK;
}

static dedup_status bloom_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    fbox *x = impl;
    dedup_bloom *bf = x->st;
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    const dedup_digest *d = b->digests;
    bool seen[CHUNK];
    size_t i = 0;
    while (i < b->n) {
        size_t c = b->n - i < CHUNK ? b->n - i : CHUNK;
        size_t room = room_of(x);
        if (room == 0) {
            if (!dedup_bloom_might_contain(bf, d[i])) {
                *done = i;
                return DEDUP_ERR_FULL;
            }
            out[i++] = DEDUP_MAYBE_DUPLICATE;
            continue;
        }
        if (c > room)
            c = room;
        dedup_bloom_test_and_add_batch(bf, d + i, c, seen);
        for (size_t j = 0; j < c; j++) {
            out[i + j] = seen[j] ? DEDUP_MAYBE_DUPLICATE : DEDUP_NEW;
            x->items += !seen[j];
        }
        i += c;
    }
    return DEDUP_OK;
}

static void bloom_contains(const void *st, const dedup_digest *d, size_t n, bool *out)
{
    dedup_bloom_might_contain_batch(st, d, n, out);
}

static dedup_status bloom_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    return query_chunks(impl, b, out, bloom_contains);
}

static void bloom_info(const void *impl, dedup_seen_info *in)
{
    const fbox *x = impl;
    const dedup_bloom *bf = x->st;
    in->file_type = dedup_bloom_get_kind(bf) == DEDUP_BLOOM_BLOCKED ? DEDUP_TYPE_BLOCKED_BLOOM
                                                                    : DEDUP_TYPE_BLOOM;
    in->probabilistic = true;
    in->can_merge = in->can_save = true;
    in->seed = dedup_bloom_seed(bf);
    in->capacity = x->capacity;
    in->items = x->items;
    in->distinct = round_estimate(dedup_bloom_estimate_count(bf), &in->distinct_known);
    /* a saturated filter (no estimate) is past any capacity */
    in->over_capacity = x->capacity && (x->items > x->capacity || !in->distinct_known);
    in->fpr_target = dedup_bloom_target_fpr(bf);
    in->fpr_bound = dedup_bloom_current_fpr(bf);
    in->memory = dedup_bloom_memory_usage(bf) + sizeof *x;
    in->bits = dedup_bloom_bits(bf);
    in->hashes = dedup_bloom_k(bf);
}

static void bloom_filter_info(const void *impl, dedup_seen_filter_info *fi)
{
    const dedup_bloom *bf = ((const fbox *)impl)->st;
    bool blocked = dedup_bloom_get_kind(bf) == DEDUP_BLOOM_BLOCKED;
    fi->file_type = blocked ? DEDUP_TYPE_BLOCKED_BLOOM : DEDUP_TYPE_BLOOM;
    fi->seed = dedup_bloom_seed(bf);
    fi->capacity = dedup_bloom_capacity(bf);
    fi->fpr_target = dedup_bloom_target_fpr(bf);
    fi->bits = dedup_bloom_bits(bf);
    fi->hashes = dedup_bloom_k(bf);
    fi->bits_set = dedup_bloom_popcount(bf);
    fi->fill = dedup_bloom_fill_ratio(bf);
    fi->estimated_items = dedup_bloom_estimate_count(bf);
    fi->fpr_current = dedup_bloom_current_fpr(bf);
    if (fi->capacity)
        fi->fpr_at_capacity = blocked ? dedup_blocked_fpr_for(fi->capacity, fi->bits, fi->hashes)
                                      : dedup_bloom_fpr_for(fi->capacity, fi->bits, fi->hashes);
    fi->structure_memory = dedup_bloom_memory_usage(bf);
}

static dedup_status bloom_save(const void *impl, dedup_sink *sink)
{
    return dedup_bloom_save(((const fbox *)impl)->st, sink);
}

/* Says the first of size, probes and seed in which two filters differ, as
 * "sizes differ: 958528 vs 1917056 bits"; false when none does. */
static bool shape_differs(char *why, size_t whycap, const char *unit, uint64_t size_a,
                          uint64_t size_b, uint32_t k_a, uint32_t k_b, uint64_t seed_a,
                          uint64_t seed_b)
{
    char buf[160];
    if (size_a != size_b)
        snprintf(buf, sizeof buf, "sizes differ: %" PRIu64 " vs %" PRIu64 " %s", size_a, size_b,
                 unit);
    else if (k_a != k_b)
        snprintf(buf, sizeof buf, "hash counts differ: k = %u vs %u", k_a, k_b);
    else if (seed_a != seed_b)
        snprintf(buf, sizeof buf, "seeds differ: 0x%016" PRIx64 " vs 0x%016" PRIx64, seed_a,
                 seed_b);
    else
        return false;
    ddi_seen_why(why, whycap, buf);
    return true;
}

static dedup_status bloom_merge(void *dst, const void *src, char *why, size_t whycap)
{
    fbox *d = dst;
    const fbox *s = src;
    if (shape_differs(why, whycap, "bits", dedup_bloom_bits(d->st), dedup_bloom_bits(s->st),
                      dedup_bloom_k(d->st), dedup_bloom_k(s->st), dedup_bloom_seed(d->st),
                      dedup_bloom_seed(s->st)))
        return DEDUP_ERR_INCOMPATIBLE;
    dedup_status st = dedup_bloom_union(d->st, s->st);
    if (st == DEDUP_ERR_INCOMPATIBLE)
        ddi_seen_why(why, whycap, "the two filters differ in probe scheme (one file was written "
                                 "before probe scheme 1): rebuild the older one");
    if (!st) {
        bool known;
        uint64_t e = round_estimate(dedup_bloom_estimate_count(d->st), &known);
        d->items = known ? e : d->items + s->items;
    }
    return st;
}

static uint64_t bloom_seed(const void *impl) { return dedup_bloom_seed(((const fbox *)impl)->st); }
static size_t bloom_memory(const void *impl)
{
    return dedup_bloom_memory_usage(((const fbox *)impl)->st) + sizeof(fbox);
}

static void bloom_free(void *impl)
{
    if (!impl)
        return;
    dedup_bloom_free(((fbox *)impl)->st);
    fbox_free(impl);
}

#define BLOOM_OPS(K)                                                                        \
    {.kind = K, .decide = bloom_decide, .query = bloom_query, .info = bloom_info,          \
     .save = bloom_save, .free = bloom_free}

const ddi_seen_class ddi_seen_class_bloom = {
    .ops = BLOOM_OPS(DEDUP_SEEN_BLOOM),
    .file_types = {DEDUP_TYPE_BLOOM, 0},
    .create = bloom_create,
    .load = bloom_load,
    .merge = bloom_merge,
    .set_on_full = fbox_set_on_full,
    .structure = fbox_structure,
    .seed = bloom_seed,
    .memory = bloom_memory,
    .filter_info = bloom_filter_info,
};

const ddi_seen_class ddi_seen_class_blocked = {
    .ops = BLOOM_OPS(DEDUP_SEEN_BLOCKED),
    .file_types = {DEDUP_TYPE_BLOCKED_BLOOM, 0},
    .create = blocked_create,
    .load = bloom_load,
    .merge = bloom_merge,
    .set_on_full = fbox_set_on_full,
    .structure = fbox_structure,
    .seed = bloom_seed,
    .memory = bloom_memory,
    .filter_info = bloom_filter_info,
};

/* ---- COUNTING ----------------------------------------------------------------------- */

static dedup_status counting_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    if (sp->on_full == DEDUP_ON_FULL_GROW)
        return DEDUP_ERR_INVALID_ARG; /* there is no chain of counting filters */
    dedup_counting_params p;
    dedup_counting_params_init(&p);
    p.seed = sp->seed;
    p.fpr = sp->fpr;
    p.k = sp->hashes;
    if (sp->size) {
        p.counters = sp->size;
        p.capacity = sp->items ? sp->items : dedup_bloom_capacity_for(p.counters, p.fpr);
        if (!p.capacity)
            return DEDUP_ERR_INVALID_ARG;
    } else if (sp->items) {
        p.capacity = sp->items;
        uint64_t need = dedup_seen_bytes_for(DEDUP_SEEN_COUNTING, sp->items, sp->fpr);
        if (!need || (sp->memory && need > sp->memory))
            return DEDUP_ERR_LIMIT;
    } else if (sp->memory) {
        if (sp->memory > DEDUP_MAX_BITS / 8)
            return DEDUP_ERR_LIMIT;
        p.counters = sp->memory * 2 / 16 * 16; /* 4 bits a counter */
        p.capacity = dedup_bloom_capacity_for(p.counters, p.fpr);
        if (!p.counters || !p.capacity)
            return DEDUP_ERR_INVALID_ARG;
    } else {
        return DEDUP_ERR_INVALID_ARG;
    }
    fbox *b;
    dedup_status st = fbox_new(a, sp, &b);
    if (st)
        return st;
    b->capacity = p.capacity;
    st = dedup_counting_create(&p, a, (dedup_counting **)&b->st);
    if (st) {
        fbox_free(b);
        return st;
    }
    *impl = b;
    return DEDUP_OK;
}

static dedup_status counting_st_load(dedup_source src, const dedup_allocator *a, void **st)
{
    return dedup_counting_load(src, a, (dedup_counting **)st);
}

static dedup_status counting_load(dedup_source src, const dedup_allocator *a, uint64_t seed,
                                  void **impl)
{
    (void)seed;
    fbox *b;
    dedup_status st = fbox_load(src, a, counting_st_load, &b);
    if (st)
        return st;
    b->capacity = dedup_counting_capacity(b->st);
    *impl = b;
    return DEDUP_OK;
}

static uint64_t counting_held(const dedup_counting *cb)
{
    uint64_t a = dedup_counting_adds(cb), d = dedup_counting_deletes(cb);
    return a > d ? a - d : 0;
}

static dedup_status counting_decide(void *impl, const dedup_batch *b, dedup_verdict *out,
                                    size_t *done)
{
    fbox *x = impl;
    dedup_counting *cb = x->st;
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++) {
        if (x->on_full == DEDUP_ON_FULL_FAIL && x->capacity && counting_held(cb) >= x->capacity &&
            !dedup_counting_might_contain(cb, b->digests[i])) {
            *done = i;
            return DEDUP_ERR_FULL;
        }
        out[i] = dedup_counting_test_and_add(cb, b->digests[i]);
    }
    return DEDUP_OK;
}

static dedup_status counting_add(void *impl, const dedup_batch *b, size_t *done)
{
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    dedup_counting_add_batch(((fbox *)impl)->st, b->digests, b->n);
    *done = b->n;
    return DEDUP_OK;
}

static void counting_contains(const void *st, const dedup_digest *d, size_t n, bool *out)
{
    dedup_counting_might_contain_batch(st, d, n, out);
}

static dedup_status counting_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    return query_chunks(impl, b, out, counting_contains);
}

static dedup_status counting_delete(void *st, dedup_digest d)
{
    return dedup_counting_delete(st, d);
}

static dedup_status counting_remove(void *impl, const dedup_batch *b, bool *removed)
{
    return remove_each(impl, b, removed, counting_delete);
}

static void counting_info(const void *impl, dedup_seen_info *in)
{
    const fbox *x = impl;
    const dedup_counting *cb = x->st;
    in->file_type = DEDUP_TYPE_COUNTING_BLOOM;
    in->probabilistic = true;
    in->can_delete = in->can_merge = in->can_save = true;
    in->seed = dedup_counting_seed(cb);
    in->capacity = x->capacity;
    in->items = in->distinct = counting_held(cb);
    in->over_capacity = x->capacity && in->items > x->capacity;
    in->fpr_target = dedup_counting_target_fpr(cb);
    in->fpr_bound = dedup_counting_current_fpr(cb);
    in->memory = dedup_counting_memory_usage(cb) + sizeof *x;
    in->bits = dedup_counting_counters(cb) * 4;
    in->hashes = dedup_counting_k(cb);
}

static void counting_filter_info(const void *impl, dedup_seen_filter_info *fi)
{
    const dedup_counting *cb = ((const fbox *)impl)->st;
    fi->file_type = DEDUP_TYPE_COUNTING_BLOOM;
    fi->seed = dedup_counting_seed(cb);
    fi->capacity = dedup_counting_capacity(cb);
    fi->fpr_target = dedup_counting_target_fpr(cb);
    fi->bits = dedup_counting_counters(cb);
    fi->hashes = dedup_counting_k(cb);
    fi->adds = dedup_counting_adds(cb);
    fi->deletes = dedup_counting_deletes(cb);
    fi->bits_set = dedup_counting_nonzero(cb);
    fi->saturated = dedup_counting_saturated(cb);
    fi->fill = fi->bits ? (double)fi->bits_set / (double)fi->bits : 0;
    fi->fpr_current = pow(fi->fill, (double)fi->hashes);
    if (fi->capacity)
        fi->fpr_at_capacity = dedup_bloom_fpr_for(fi->capacity, fi->bits, fi->hashes);
    fi->structure_memory = dedup_counting_memory_usage(cb);
}

static dedup_status counting_save(const void *impl, dedup_sink *sink)
{
    return dedup_counting_save(((const fbox *)impl)->st, sink);
}

static dedup_status counting_merge(void *dst, const void *src, char *why, size_t whycap)
{
    const dedup_counting *a = ((fbox *)dst)->st, *b = ((const fbox *)src)->st;
    if (shape_differs(why, whycap, "counters", dedup_counting_counters(a),
                      dedup_counting_counters(b), dedup_counting_k(a), dedup_counting_k(b),
                      dedup_counting_seed(a), dedup_counting_seed(b)))
        return DEDUP_ERR_INCOMPATIBLE;
    dedup_status st = dedup_counting_merge(((fbox *)dst)->st, ((const fbox *)src)->st);
    if (st == DEDUP_ERR_INCOMPATIBLE)
        ddi_seen_why(why, whycap, "the two filters differ in size, probes or seed");
    return st;
}

static uint64_t counting_seed(const void *impl)
{
    return dedup_counting_seed(((const fbox *)impl)->st);
}

static void counting_free(void *impl)
{
    if (!impl)
        return;
    dedup_counting_free(((fbox *)impl)->st);
    fbox_free(impl);
}

const ddi_seen_class ddi_seen_class_counting = {
    .ops = {.kind = DEDUP_SEEN_COUNTING, .decide = counting_decide, .query = counting_query,
            .remove = counting_remove, .info = counting_info, .save = counting_save,
            .free = counting_free},
    .file_types = {DEDUP_TYPE_COUNTING_BLOOM, 0},
    .create = counting_create,
    .load = counting_load,
    .merge = counting_merge,
    .set_on_full = fbox_set_on_full,
    .structure = fbox_structure,
    .seed = counting_seed,
    .add = counting_add,
    .filter_info = counting_filter_info,
};

/* ---- CUCKOO ---------------------------------------------------------------------------
 * Sized by items (a chain of links past them when expansion >= 1), or by
 * memory (fixed: the buckets dedup_cuckoo_buckets_for_memory() gives).  With
 * both, memory is a ceiling and the filter does not grow. */

static dedup_status cuckoo_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    dedup_cuckoo_params p;
    dedup_cuckoo_params_init(&p);
    p.seed = sp->seed;
    p.fpr = sp->fpr;
    p.fingerprint_bits = sp->fingerprint_bits;
    if (sp->bucket_size)
        p.bucket_size = sp->bucket_size;
    if (sp->max_kicks)
        p.max_kicks = sp->max_kicks == DEDUP_SEEN_NO_KICKS ? 0 : sp->max_kicks;
    uint32_t f = p.fingerprint_bits ? p.fingerprint_bits
                                    : dedup_cuckoo_fingerprint_bits_for(p.fpr, p.bucket_size);
    if (!f)
        return DEDUP_ERR_INVALID_ARG;
    if (sp->size) {
        p.buckets = sp->size;
        p.capacity = sp->items;
        p.expansion = sp->expansion;
    } else if (sp->items) {
        p.capacity = sp->items;
        p.expansion = sp->memory ? 0 : sp->expansion;
    } else if (sp->memory) {
        p.buckets = dedup_cuckoo_buckets_for_memory(sp->memory, f, p.bucket_size);
        if (!p.buckets)
            return sp->memory > DEDUP_MAX_BITS / 8 ? DEDUP_ERR_LIMIT : DEDUP_ERR_INVALID_ARG;
        p.expansion = 0;
    } else {
        return DEDUP_ERR_INVALID_ARG;
    }
    if (sp->on_full == DEDUP_ON_FULL_FAIL)
        p.expansion = 0;
    else if (sp->on_full == DEDUP_ON_FULL_GROW && p.expansion == 0 && !sp->memory)
        p.expansion = 1;
    fbox *b;
    dedup_status st = fbox_new(a, sp, &b);
    if (st)
        return st;
    st = dedup_cuckoo_create(&p, a, (dedup_cuckoo **)&b->st);
    if (!st && !sp->size && sp->items && sp->memory &&
        dedup_cuckoo_memory_usage(b->st) > sp->memory) {
        dedup_cuckoo_free(b->st);
        st = DEDUP_ERR_LIMIT;
    }
    if (st) {
        fbox_free(b);
        return st;
    }
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(b->st, &ci);
    b->capacity = ci.capacity ? ci.capacity : (uint64_t)((double)ci.slots * 0.94);
    *impl = b;
    return DEDUP_OK;
}

static dedup_status cuckoo_st_load(dedup_source src, const dedup_allocator *a, void **st)
{
    return dedup_cuckoo_load(src, a, (dedup_cuckoo **)st);
}

static dedup_status cuckoo_load(dedup_source src, const dedup_allocator *a, uint64_t seed,
                                void **impl)
{
    (void)seed;
    fbox *b;
    dedup_status st = fbox_load(src, a, cuckoo_st_load, &b);
    if (st)
        return st;
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(b->st, &ci);
    b->capacity = ci.capacity;
    *impl = b;
    return DEDUP_OK;
}

static dedup_status cuckoo_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    dedup_cuckoo *cf = ((fbox *)impl)->st;
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++) {
        dedup_status st = dedup_cuckoo_test_and_add(cf, b->digests[i], &out[i]);
        if (st) {
            *done = i;
            return st;
        }
    }
    return DEDUP_OK;
}

static dedup_status cuckoo_add(void *impl, const dedup_batch *b, size_t *done)
{
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_cuckoo_add_batch(((fbox *)impl)->st, b->digests, b->n, done);
}

static void cuckoo_contains(const void *st, const dedup_digest *d, size_t n, bool *out)
{
    dedup_cuckoo_might_contain_batch(st, d, n, out);
}

static dedup_status cuckoo_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    return query_chunks(impl, b, out, cuckoo_contains);
}

static dedup_status cuckoo_delete(void *st, dedup_digest d)
{
    return dedup_cuckoo_delete(st, d);
}

static dedup_status cuckoo_remove(void *impl, const dedup_batch *b, bool *removed)
{
    return remove_each(impl, b, removed, cuckoo_delete);
}

static void cuckoo_info(const void *impl, dedup_seen_info *in)
{
    const fbox *x = impl;
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(x->st, &ci);
    in->file_type = ci.expansion ? DEDUP_TYPE_CUCKOO_CHAIN : DEDUP_TYPE_CUCKOO;
    in->probabilistic = true;
    in->can_delete = in->can_save = true;
    in->seed = ci.seed;
    in->capacity = ci.expansion ? 0 : x->capacity;
    in->items = in->distinct = ci.items;
    in->over_capacity = false; /* a fixed filter refuses (FULL) rather than overfill */
    in->fpr_target = dedup_cuckoo_fpr_for(ci.fingerprint_bits, ci.bucket_size, 1.0);
    in->fpr_bound = ci.fpr_current;
    in->memory = ci.memory + sizeof *x;
    in->bits = ci.slots * ci.fingerprint_bits;
}

static void cuckoo_filter_info(const void *impl, dedup_seen_filter_info *fi)
{
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(((const fbox *)impl)->st, &ci);
    fi->file_type = ci.expansion ? DEDUP_TYPE_CUCKOO_CHAIN : DEDUP_TYPE_CUCKOO;
    fi->seed = ci.seed;
    fi->capacity = ci.capacity;
    fi->fingerprint_bits = ci.fingerprint_bits;
    fi->bucket_size = ci.bucket_size;
    fi->max_kicks = ci.max_kicks;
    fi->expansion = ci.expansion;
    fi->links = ci.links;
    fi->buckets = ci.buckets;
    fi->slots = ci.slots;
    fi->items = ci.items;
    fi->inserted = ci.inserted;
    fi->deleted = ci.deleted;
    fi->load = ci.load;
    fi->fpr_full = ci.fpr_full;
    fi->fpr_current = ci.fpr_current;
    fi->structure_memory = ci.memory;
}

static dedup_status cuckoo_link_info(const void *impl, uint32_t link, dedup_seen_link_info *li)
{
    dedup_cuckoo_link_info cl;
    dedup_status st = dedup_cuckoo_get_link_info(((const fbox *)impl)->st, link, &cl);
    if (st)
        return st;
    li->buckets = cl.buckets;
    li->items = cl.items;
    li->load = cl.load;
    li->fpr_current = cl.fpr_current;
    return DEDUP_OK;
}

static dedup_status cuckoo_save(const void *impl, dedup_sink *sink)
{
    return dedup_cuckoo_save(((const fbox *)impl)->st, sink);
}

static uint64_t cuckoo_seed(const void *impl)
{
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(((const fbox *)impl)->st, &ci);
    return ci.seed;
}

static void cuckoo_free(void *impl)
{
    if (!impl)
        return;
    dedup_cuckoo_free(((fbox *)impl)->st);
    fbox_free(impl);
}

const ddi_seen_class ddi_seen_class_cuckoo = {
    .ops = {.kind = DEDUP_SEEN_CUCKOO, .decide = cuckoo_decide, .query = cuckoo_query,
            .remove = cuckoo_remove, .info = cuckoo_info, .save = cuckoo_save,
            .free = cuckoo_free},
    .file_types = {DEDUP_TYPE_CUCKOO, DEDUP_TYPE_CUCKOO_CHAIN},
    .create = cuckoo_create,
    .load = cuckoo_load,
    .structure = fbox_structure,
    .seed = cuckoo_seed,
    .add = cuckoo_add,
    .filter_info = cuckoo_filter_info,
    .link_info = cuckoo_link_info,
};

/* ---- SCALABLE -------------------------------------------------------------------------
 * Links are blocked Bloom filters, except for a classic BLOOM asked to GROW. */

static dedup_status scalable_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    dedup_scalable_params p;
    dedup_scalable_params_init(&p);
    p.kind = sp->kind == DEDUP_SEEN_BLOOM || sp->classic_links ? DEDUP_BLOOM_CLASSIC
                                                               : DEDUP_BLOOM_BLOCKED;
    if (sp->max_links)
        p.max_links = sp->max_links;
    p.seed = sp->seed;
    p.fpr = sp->fpr;
    p.growth = sp->growth;
    p.tightening = sp->tightening;
    if (sp->items)
        p.capacity = sp->items;
    fbox *b;
    dedup_status st = fbox_new(a, sp, &b);
    if (st)
        return st;
    /* spec.memory is checked as the chain grows (decide: FULL past it) */
    st = dedup_scalable_create(&p, a, (dedup_scalable **)&b->st);
    if (st) {
        fbox_free(b);
        return st;
    }
    *impl = b;
    return DEDUP_OK;
}

static dedup_status scalable_st_load(dedup_source src, const dedup_allocator *a, void **st)
{
    return dedup_scalable_load(src, a, (dedup_scalable **)st);
}

static dedup_status scalable_load(dedup_source src, const dedup_allocator *a, uint64_t seed,
                                  void **impl)
{
    (void)seed;
    fbox *b;
    dedup_status st = fbox_load(src, a, scalable_st_load, &b);
    if (st)
        return st;
    *impl = b;
    return DEDUP_OK;
}

static dedup_status scalable_decide(void *impl, const dedup_batch *b, dedup_verdict *out,
                                    size_t *done)
{
    fbox *x = impl;
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    dedup_status st = dedup_scalable_test_and_add_batch(x->st, b->digests, b->n, out, done);
    if (!st && x->memory_limit && dedup_scalable_memory_usage(x->st) > x->memory_limit) {
        *done = b->n; /* the chain grew past spec.memory: it cannot keep its promise */
        st = DEDUP_ERR_FULL;
    }
    return st;
}

static void scalable_contains(const void *st, const dedup_digest *d, size_t n, bool *out)
{
    dedup_scalable_might_contain_batch(st, d, n, out);
}

static dedup_status scalable_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    return query_chunks(impl, b, out, scalable_contains);
}

static void scalable_info(const void *impl, dedup_seen_info *in)
{
    const fbox *x = impl;
    dedup_scalable_info si;
    dedup_scalable_get_info(x->st, &si);
    in->file_type = DEDUP_TYPE_SCALABLE_BLOOM;
    in->probabilistic = true;
    in->can_save = true;
    in->seed = si.seed;
    in->capacity = 0; /* it grows */
    in->items = in->distinct = si.items;
    in->fpr_target = si.fpr;
    in->fpr_bound = si.fpr_current;
    in->memory = si.memory + sizeof *x;
    in->bits = si.bits;
}

static void scalable_filter_info(const void *impl, dedup_seen_filter_info *fi)
{
    dedup_scalable_info si;
    dedup_scalable_get_info(((const fbox *)impl)->st, &si);
    fi->file_type = DEDUP_TYPE_SCALABLE_BLOOM;
    fi->seed = si.seed;
    fi->blocked_links = si.kind == DEDUP_BLOOM_BLOCKED;
    fi->capacity = si.initial_capacity;
    fi->fpr_target = si.fpr;
    fi->growth = si.growth;
    fi->tightening = si.tightening;
    fi->max_links = si.max_links;
    fi->links = si.links;
    fi->links_capacity = si.capacity;
    fi->items = si.items;
    fi->bits = si.bits;
    fi->fpr_current = si.fpr_current;
    fi->fpr_bound = si.fpr_bound;
    fi->structure_memory = si.memory;
}

static dedup_status scalable_link_info(const void *impl, uint32_t link, dedup_seen_link_info *li)
{
    dedup_scalable_link_info sl;
    dedup_status st = dedup_scalable_get_link_info(((const fbox *)impl)->st, link, &sl);
    if (st)
        return st;
    li->capacity = sl.capacity;
    li->items = sl.items;
    li->bits = sl.bits;
    li->hashes = sl.k;
    li->fpr = sl.fpr;
    li->fpr_current = sl.fpr_current;
    return DEDUP_OK;
}

static dedup_status scalable_save(const void *impl, dedup_sink *sink)
{
    return dedup_scalable_save(((const fbox *)impl)->st, sink);
}

static uint64_t scalable_seed(const void *impl)
{
    dedup_scalable_info si;
    dedup_scalable_get_info(((const fbox *)impl)->st, &si);
    return si.seed;
}

static void scalable_free(void *impl)
{
    if (!impl)
        return;
    dedup_scalable_free(((fbox *)impl)->st);
    fbox_free(impl);
}

const ddi_seen_class ddi_seen_class_scalable = {
    .ops = {.kind = DEDUP_SEEN_SCALABLE, .decide = scalable_decide, .query = scalable_query,
            .info = scalable_info, .save = scalable_save, .free = scalable_free},
    .file_types = {DEDUP_TYPE_SCALABLE_BLOOM, 0},
    .create = scalable_create,
    .load = scalable_load,
    .structure = fbox_structure,
    .seed = scalable_seed,
    .filter_info = scalable_filter_info,
    .link_info = scalable_link_info,
};
