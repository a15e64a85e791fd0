/*
 * seen_sets.c - the exact kinds of dedup/seen.h: EXACT (dedup_strset),
 * FINGERPRINT (dedup_digestset), U64 (dedup_u64set) and BITMAP
 * (dedup_bitmap over [range_lo, range_hi]).
 *
 * Each set sits in a small box that remembers what the structure does not
 * tell (its seed; the bitmap's range).
 */
#include "seen_internal.h"

#include "dedup/bitmap.h"
#include "dedup/set.h"

typedef struct box {
    dedup_allocator alloc;
    void *st;
    uint64_t seed;
    uint64_t lo; /* BITMAP: the integer of bit 0 */
} box;

static dedup_status box_new(const dedup_allocator *a, uint64_t seed, box **out)
{
    box *b = ddi_malloc(a, sizeof *b);
    if (!b)
        return DEDUP_ERR_NOMEM;
    b->alloc = *a;
    b->st = NULL;
    b->seed = seed;
    b->lo = 0;
    *out = b;
    return DEDUP_OK;
}

static void box_free(box *b)
{
    dedup_allocator a = b->alloc;
    ddi_free(&a, b);
}

/* Loads a structure into a new box ('load' adapts its dedup_X_load). */
typedef dedup_status (*st_load_fn)(dedup_source src, const dedup_allocator *a, void **st);

static dedup_status box_load(dedup_source src, const dedup_allocator *a, uint64_t seed,
                             st_load_fn load, void **impl)
{
    box *b;
    dedup_status st = box_new(a, seed, &b);
    if (st)
        return st;
    st = load(src, a, &b->st);
    if (st) {
        box_free(b);
        return st;
    }
    *impl = b;
    return DEDUP_OK;
}

static void *box_structure(const void *impl) { return ((const box *)impl)->st; }

static void set_params(const dedup_seen_spec *sp, dedup_set_params *p)
{
    dedup_set_params_init(p);
    p->capacity = sp->items;
    p->seed = sp->seed;
    p->counts = sp->counts;
    p->memory_limit = sp->memory; /* past it the set answers FULL, never guesses */
}

/* ---- EXACT ------------------------------------------------------------------------ */

static dedup_status exact_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    box *b;
    dedup_status st = box_new(a, sp->seed, &b);
    if (st)
        return st;
    dedup_set_params p;
    set_params(sp, &p);
    st = dedup_strset_create(&p, a, (dedup_strset **)&b->st);
    if (st) {
        box_free(b);
        return st;
    }
    *impl = b;
    return DEDUP_OK;
}

static dedup_status strset_st_load(dedup_source src, const dedup_allocator *a, void **st)
{
    return dedup_strset_load(src, a, (dedup_strset **)st);
}

static dedup_status exact_load(dedup_source src, const dedup_allocator *a, uint64_t seed,
                               void **impl)
{
    return box_load(src, a, seed, strset_st_load, impl);
}

/* Three passes, so that both cache misses of a key (its slot, then the
 * stored key it is compared with) overlap with the other keys'. */
static dedup_status exact_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    dedup_strset *s = ((box *)impl)->st;
    if (b->n && (!b->digests || !b->keys || !b->lens))
        return DEDUP_ERR_INVALID_ARG;
    const dedup_digest *d = b->digests;
    for (size_t i = 0; i < b->n; i++)
        dedup_strset_prefetch(s, d[i]);
    for (size_t i = 0; i < b->n; i++)
        dedup_strset_prefetch_key(s, d[i]);
    for (size_t i = 0; i < b->n; i++) {
        dedup_status st = dedup_strset_insert(s, b->keys[i], b->lens[i], d[i], &out[i]);
        if (st) {
            *done = i;
            return st;
        }
    }
    return DEDUP_OK;
}

static dedup_status exact_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    const dedup_strset *s = ((const box *)impl)->st;
    if (b->n && (!b->digests || !b->keys || !b->lens))
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++)
        dedup_strset_prefetch(s, b->digests[i]);
    for (size_t i = 0; i < b->n; i++)
        out[i] = dedup_strset_contains(s, b->keys[i], b->lens[i], b->digests[i]) ? DEDUP_DUPLICATE
                                                                                 : DEDUP_NEW;
    return DEDUP_OK;
}

static void exact_info(const void *impl, dedup_seen_info *in)
{
    const box *b = impl;
    in->file_type = DEDUP_TYPE_SET_STRING;
    in->can_merge = in->can_count = in->can_save = true;
    in->seed = b->seed;
    in->items = in->distinct = dedup_strset_size(b->st);
    in->distinct_exact = true;
    in->memory = dedup_strset_memory_usage(b->st) + sizeof *b;
}

static dedup_status exact_save(const void *impl, dedup_sink *sink)
{
    return dedup_strset_save(((const box *)impl)->st, sink);
}

static uint64_t exact_count(const void *impl, const void *key, size_t len, dedup_digest d)
{
    return dedup_strset_count_of(((const box *)impl)->st, key, len, d);
}

static void exact_free(void *impl)
{
    if (!impl)
        return;
    dedup_strset_free(((box *)impl)->st);
    box_free(impl);
}

typedef struct merge_ctx {
    dedup_strset *dst;
    dedup_status st;
} merge_ctx;

static int merge_one(void *ctx, const void *key, size_t len, uint64_t count)
{
    (void)count;
    merge_ctx *m = ctx;
    dedup_verdict v;
    m->st = dedup_strset_insert(m->dst, key, len, dedup_strset_digest(m->dst, key, len), &v);
    return m->st != DEDUP_OK;
}

static dedup_status exact_merge(void *dst, const void *src, char *why, size_t whycap)
{
    const box *d = dst, *s = src;
    if (d->seed != s->seed) {
        ddi_seen_why(why, whycap, "the two sets were made with different seeds");
        return DEDUP_ERR_INCOMPATIBLE;
    }
    merge_ctx m = {d->st, DEDUP_OK};
    dedup_strset_foreach(s->st, merge_one, &m);
    return m.st;
}

const ddi_seen_class ddi_seen_class_exact = {
    .ops = {.kind = DEDUP_SEEN_EXACT, .decide = exact_decide, .query = exact_query,
            .info = exact_info, .save = exact_save, .count_of = exact_count, .free = exact_free},
    .file_types = {DEDUP_TYPE_SET_STRING, 0},
    .create = exact_create,
    .load = exact_load,
    .merge = exact_merge,
    .structure = box_structure,
};

/* ---- FINGERPRINT ---------------------------------------------------------------------- */

static dedup_status fp_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    dedup_set_params p;
    set_params(sp, &p);
    return dedup_digestset_create(&p, a, (dedup_digestset **)impl);
}

static dedup_status fp_load(dedup_source src, const dedup_allocator *a, uint64_t seed, void **impl)
{
    (void)seed;
    return dedup_digestset_load(src, a, (dedup_digestset **)impl);
}

static dedup_status fp_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    dedup_digestset *s = impl;
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++)
        dedup_digestset_prefetch(s, b->digests[i]);
    for (size_t i = 0; i < b->n; i++) {
        dedup_status st = dedup_digestset_insert(s, b->digests[i], &out[i]);
        if (st) {
            *done = i;
            return st;
        }
    }
    return DEDUP_OK;
}

static dedup_status fp_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    if (b->n && !b->digests)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++)
        dedup_digestset_prefetch(impl, b->digests[i]);
    for (size_t i = 0; i < b->n; i++)
        out[i] = dedup_digestset_contains(impl, b->digests[i]) ? DEDUP_DUPLICATE : DEDUP_NEW;
    return DEDUP_OK;
}

static void fp_info(const void *impl, dedup_seen_info *in)
{
    in->file_type = DEDUP_TYPE_SET_DIGEST;
    in->can_count = in->can_save = true;
    in->seed = dedup_digestset_seed(impl);
    in->items = in->distinct = dedup_digestset_size(impl);
    in->distinct_exact = true;
    in->memory = dedup_digestset_memory_usage(impl);
}

static dedup_status fp_save(const void *impl, dedup_sink *sink)
{
    return dedup_digestset_save(impl, sink);
}

static uint64_t fp_count(const void *impl, const void *key, size_t len, dedup_digest d)
{
    (void)key;
    (void)len;
    return dedup_digestset_count_of(impl, d);
}

static void fp_free(void *impl) { dedup_digestset_free(impl); }

static void *same(const void *impl) { return (void *)impl; }

const ddi_seen_class ddi_seen_class_fingerprint = {
    .ops = {.kind = DEDUP_SEEN_FINGERPRINT, .decide = fp_decide, .query = fp_query,
            .info = fp_info, .save = fp_save, .count_of = fp_count, .free = fp_free},
    .file_types = {DEDUP_TYPE_SET_DIGEST, 0},
    .create = fp_create,
    .load = fp_load,
    .structure = same,
};

/* ---- U64 ----------------------------------------------------------------------------- */

static dedup_status u64_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    box *b;
    dedup_status st = box_new(a, sp->seed, &b);
    if (st)
        return st;
    dedup_set_params p;
    set_params(sp, &p);
    p.counts = false;
    st = dedup_u64set_create(&p, a, (dedup_u64set **)&b->st);
    if (st) {
        box_free(b);
        return st;
    }
    *impl = b;
    return DEDUP_OK;
}

static dedup_status u64set_st_load(dedup_source src, const dedup_allocator *a, void **st)
{
    return dedup_u64set_load(src, a, (dedup_u64set **)st);
}

static dedup_status u64_load(dedup_source src, const dedup_allocator *a, uint64_t seed, void **impl)
{
    return box_load(src, a, seed, u64set_st_load, impl);
}

static dedup_status u64_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    dedup_u64set *s = ((box *)impl)->st;
    if (b->n && !b->ints)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_u64set_insert_batch(s, b->ints, b->n, out, done);
}

static dedup_status u64_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    const dedup_u64set *s = ((const box *)impl)->st;
    if (b->n && !b->ints)
        return DEDUP_ERR_INVALID_ARG;
    bool found[256];
    for (size_t off = 0; off < b->n; off += 256) {
        size_t g = b->n - off < 256 ? b->n - off : 256;
        dedup_u64set_contains_batch(s, b->ints + off, g, found);
        for (size_t i = 0; i < g; i++)
            out[off + i] = found[i] ? DEDUP_DUPLICATE : DEDUP_NEW;
    }
    return DEDUP_OK;
}

static void u64_info(const void *impl, dedup_seen_info *in)
{
    const box *b = impl;
    in->file_type = DEDUP_TYPE_SET_U64;
    in->can_save = true;
    in->seed = b->seed;
    in->items = in->distinct = dedup_u64set_size(b->st);
    in->distinct_exact = true;
    in->memory = dedup_u64set_memory_usage(b->st) + sizeof *b;
}

static dedup_status u64_save(const void *impl, dedup_sink *sink)
{
    return dedup_u64set_save(((const box *)impl)->st, sink);
}

static void u64_free(void *impl)
{
    if (!impl)
        return;
    dedup_u64set_free(((box *)impl)->st);
    box_free(impl);
}

const ddi_seen_class ddi_seen_class_u64 = {
    .ops = {.kind = DEDUP_SEEN_U64, .decide = u64_decide, .query = u64_query, .info = u64_info,
            .save = u64_save, .free = u64_free},
    .file_types = {DEDUP_TYPE_SET_U64, 0},
    .create = u64_create,
    .load = u64_load,
    .structure = box_structure,
};

/* ---- BITMAP ---------------------------------------------------------------------------
 * Integer v is bit v - range_lo.  The file is the bitmap's own
 * (DEDUP_TYPE_BITMAP), whose origin is range_lo: a loaded one covers
 * [origin, origin + nbits - 1] (a file of the first layout, without an
 * origin, [0, nbits - 1]). */

static dedup_status bm_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    if (sp->range_hi < sp->range_lo)
        return DEDUP_ERR_INVALID_ARG;
    if (sp->range_hi - sp->range_lo >= DEDUP_MAX_BITS)
        return DEDUP_ERR_LIMIT;
    box *b;
    dedup_status st = box_new(a, 0, &b); /* integers are not hashed: seed 0, as in its file */
    if (st)
        return st;
    b->lo = sp->range_lo;
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    p.nbits = sp->range_hi - sp->range_lo + 1;
    p.origin = sp->range_lo;
    if (sp->memory && (p.nbits + 63) / 64 * 8 > sp->memory)
        st = DEDUP_ERR_LIMIT;
    else
        st = dedup_bitmap_create(&p, a, (dedup_bitmap **)&b->st);
    if (st) {
        box_free(b);
        return st;
    }
    *impl = b;
    return DEDUP_OK;
}

static dedup_status bitmap_st_load(dedup_source src, const dedup_allocator *a, void **st)
{
    return dedup_bitmap_load(src, a, (dedup_bitmap **)st);
}

static dedup_status bm_load(dedup_source src, const dedup_allocator *a, uint64_t seed, void **impl)
{
    dedup_status st = box_load(src, a, seed, bitmap_st_load, impl);
    if (st == DEDUP_OK) {
        box *bx = *impl;
        bx->lo = dedup_bitmap_origin(bx->st);
    }
    return st;
}

static dedup_status bm_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    box *x = impl;
    if (b->n && !b->ints)
        return DEDUP_ERR_INVALID_ARG;
    uint64_t nbits = dedup_bitmap_size(x->st);
    for (size_t i = 0; i < b->n; i++) {
        uint64_t v = b->ints[i];
        if (v < x->lo || v - x->lo >= nbits) {
            *done = i;
            return DEDUP_ERR_RANGE;
        }
        bool was;
        (void)dedup_bitmap_test_and_set(x->st, v - x->lo, &was);
        out[i] = was ? DEDUP_DUPLICATE : DEDUP_NEW;
    }
    return DEDUP_OK;
}

static dedup_status bm_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    const box *x = impl;
    if (b->n && !b->ints)
        return DEDUP_ERR_INVALID_ARG;
    uint64_t nbits = dedup_bitmap_size(x->st);
    for (size_t i = 0; i < b->n; i++) {
        uint64_t v = b->ints[i];
        bool was = false;
        if (v >= x->lo && v - x->lo < nbits)
            (void)dedup_bitmap_get(x->st, v - x->lo, &was);
        out[i] = was ? DEDUP_DUPLICATE : DEDUP_NEW;
    }
    return DEDUP_OK;
}

static dedup_status bm_remove(void *impl, const dedup_batch *b, bool *removed)
{
    box *x = impl;
    if (b->n && !b->ints)
        return DEDUP_ERR_INVALID_ARG;
    uint64_t nbits = dedup_bitmap_size(x->st);
    for (size_t i = 0; i < b->n; i++) {
        uint64_t v = b->ints[i];
        bool was = false;
        if (v >= x->lo && v - x->lo < nbits) {
            (void)dedup_bitmap_get(x->st, v - x->lo, &was);
            (void)dedup_bitmap_clear(x->st, v - x->lo);
        }
        if (removed)
            removed[i] = was;
    }
    return DEDUP_OK;
}

static void bm_info(const void *impl, dedup_seen_info *in)
{
    const box *x = impl;
    in->file_type = DEDUP_TYPE_BITMAP;
    in->can_delete = true;
    in->can_merge = true;
    in->can_save = true;
    in->seed = x->seed;
    in->capacity = dedup_bitmap_size(x->st);
    in->items = in->distinct = dedup_bitmap_popcount(x->st);
    in->distinct_exact = true;
    in->memory = dedup_bitmap_memory_usage(x->st) + sizeof *x;
    in->bits = dedup_bitmap_size(x->st);
    in->range_lo = x->lo;
    in->range_hi = x->lo + (dedup_bitmap_size(x->st) - 1);
}

static dedup_status bm_save(const void *impl, dedup_sink *sink)
{
    return dedup_bitmap_save(((const box *)impl)->st, sink);
}

static dedup_status bm_merge(void *dst, const void *src, char *why, size_t whycap)
{
    box *d = dst;
    const box *s = src;
    if (d->lo != s->lo || dedup_bitmap_size(d->st) != dedup_bitmap_size(s->st)) {
        ddi_seen_why(why, whycap, "the two bitmaps cover different ranges");
        return DEDUP_ERR_INCOMPATIBLE;
    }
    return dedup_bitmap_or(d->st, s->st);
}

static void bm_free(void *impl)
{
    if (!impl)
        return;
    dedup_bitmap_free(((box *)impl)->st);
    box_free(impl);
}

const ddi_seen_class ddi_seen_class_bitmap = {
    .ops = {.kind = DEDUP_SEEN_BITMAP, .decide = bm_decide, .query = bm_query,
            .remove = bm_remove, .info = bm_info, .save = bm_save, .free = bm_free},
    .file_types = {DEDUP_TYPE_BITMAP, 0},
    .create = bm_create,
    .load = bm_load,
    .merge = bm_merge,
    .structure = box_structure,
};
