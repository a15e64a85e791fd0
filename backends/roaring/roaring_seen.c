/*
 * roaring_seen.c - the seen-set kind DEDUP_SEEN_ROARING (dedup/roaring.h).
 *
 * Buckets: a sorted array of (high 32 bits, roaring bitmap of the low 32
 * bits), with the last bucket used remembered, so a run of IDs under 2^32
 * (the usual case) costs one compare before CRoaring's add.
 */
#include "dedup/roaring.h"

#include <roaring/roaring.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/format.h"

/* The component reaches libdedup through its public API alone (libdedup.so
 * exports nothing else), so its allocation calls through the caller's
 * allocator are its own: NULL means the C library's, and a hook without
 * calloc or realloc is served by its malloc. */
static void *libc_malloc(void *ctx, size_t n) { (void)ctx; return malloc(n); }
static void *libc_calloc(void *ctx, size_t c, size_t n) { (void)ctx; return calloc(c, n); }
static void *libc_realloc(void *ctx, void *p, size_t n) { (void)ctx; return realloc(p, n); }
static void libc_free(void *ctx, void *p) { (void)ctx; free(p); }

static void ra_resolve(dedup_allocator *out, const dedup_allocator *a)
{
    if (a && a->malloc_fn && a->free_fn) {
        *out = *a;
        return;
    }
    *out = (dedup_allocator){libc_malloc, libc_calloc, libc_realloc, libc_free, NULL};
}

static void *ra_malloc(const dedup_allocator *a, size_t n)
{
    return a->malloc_fn(a->ctx, n ? n : 1);
}

static void *ra_calloc(const dedup_allocator *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    if (a->calloc_fn)
        return a->calloc_fn(a->ctx, count ? count : 1, size ? size : 1);
    void *p = ra_malloc(a, count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

static void *ra_realloc(const dedup_allocator *a, void *ptr, size_t old_size, size_t new_size)
{
    if (a->realloc_fn)
        return a->realloc_fn(a->ctx, ptr, new_size ? new_size : 1);
    void *p = ra_malloc(a, new_size);
    if (p && ptr) {
        memcpy(p, ptr, old_size < new_size ? old_size : new_size);
        a->free_fn(a->ctx, ptr);
    }
    return p;
}

static void ra_free(const dedup_allocator *a, void *ptr)
{
    if (ptr)
        a->free_fn(a->ctx, ptr);
}

#define PARAMS_LEN 16u
#define BUCKET_HEAD 16u

typedef struct bucket {
    uint32_t hi;
    roaring_bitmap_t *bm;
} bucket;

typedef struct rseen {
    bucket *b;
    size_t n, cap;
    size_t last;      /* index of the bucket used last (valid when n > 0) */
    uint64_t card;    /* distinct keys held */
    uint64_t seed;
    dedup_allocator alloc;
} rseen;

static void rs_free(void *impl)
{
    rseen *r = impl;
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        roaring_bitmap_free(r->b[i].bm);
    dedup_allocator a = r->alloc;
    ra_free(&a, r->b);
    ra_free(&a, r);
}

/* Index of the bucket for 'hi', or where it would go (*found false). */
static size_t find(const rseen *r, uint32_t hi, bool *found)
{
    if (r->n && r->b[r->last].hi == hi) {
        *found = true;
        return r->last;
    }
    size_t lo = 0, up = r->n;
    while (lo < up) {
        size_t mid = lo + (up - lo) / 2;
        if (r->b[mid].hi < hi)
            lo = mid + 1;
        else
            up = mid;
    }
    *found = lo < r->n && r->b[lo].hi == hi;
    return lo;
}

/* The bucket for 'hi', created when absent; NULL when out of memory. */
static roaring_bitmap_t *bucket_for(rseen *r, uint32_t hi)
{
    bool found;
    size_t i = find(r, hi, &found);
    if (!found) {
        if (r->n == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 4;
            bucket *nb = ra_realloc(&r->alloc, r->b, r->cap * sizeof *nb, cap * sizeof *nb);
            if (!nb)
                return NULL;
            r->b = nb;
            r->cap = cap;
        }
        roaring_bitmap_t *bm = roaring_bitmap_create();
        if (!bm)
            return NULL;
        memmove(r->b + i + 1, r->b + i, (r->n - i) * sizeof *r->b);
        r->b[i].hi = hi;
        r->b[i].bm = bm;
        r->n++;
    }
    r->last = i;
    return r->b[i].bm;
}

/* ---- prefetch ----------------------------------------------------------------
 * On IDs spread over a wide range each add lands in a container no other
 * key of the batch touches, and waits on three cache misses in a row: the
 * container's struct, then its data (an array container's last value and
 * the middle of its binary search).  CRoaring 0.2.x has no batch add for
 * unsorted values (roaring_bitmap_add_many only remembers the last
 * container), so the batch is taken in groups: the containers of a group
 * are found and their structs prefetched, then their data (a small array
 * whole, a large one at its last value and quarters, a bitset's word),
 * then the keys added, so the group's misses overlap.  This reads the layouts
 * that 0.2.x's installed headers publish (roaring_array_t, the array and
 * bitset containers); where a CRoaring keeps them private (its type-code
 * macros absent) the adds run without the prefetch. */
#if defined(ARRAY_CONTAINER_TYPE_CODE) && defined(BITSET_CONTAINER_TYPE_CODE) && \
    defined(__GNUC__)
#define RS_PREFETCH 1
/* Measured on 3e7 IDs uniform over [0, 3e9) (array containers of ~650
 * values): a group of 16 with whole arrays prefetched, 1.65x the adds per
 * CPU-second of no prefetch; only the last and middle values, 1.1x; 32
 * whole, 1.4x (bench/results/ints.md). */
#define RS_GROUP 16u
#define RS_WHOLE 1024 /* arrays up to 1024 values (32 lines) are prefetched whole */
/* The prefetch pays only when the containers outgrow the caches and hold
 * arrays: on dense IDs (a few thousand bitset containers) the extra search
 * cost 0.7x, so it runs from RS_MIN_CONTAINERS containers of at most 4096
 * values on average (array containers' limit). */
#define RS_MIN_CONTAINERS 4096u

static bool worth_prefetching(const rseen *r)
{
    uint64_t containers = 0;
    for (size_t i = 0; i < r->n; i++)
        containers += (uint64_t)r->b[i].bm->high_low_container.size;
    return containers >= RS_MIN_CONTAINERS && r->card <= containers * 4096;
}

/* The container of chunk 'key' (the value's bits 16..31) in 'bm', or NULL. */
static const void *container_of(const roaring_bitmap_t *bm, uint16_t key, uint8_t *type)
{
    const roaring_array_t *ra = &bm->high_low_container;
    int32_t lo = 0, hi = ra->size - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) >> 1;
        uint16_t k = ra->keys[mid];
        if (k < key)
            lo = mid + 1;
        else if (k > key)
            hi = mid - 1;
        else {
            *type = ra->typecodes[mid];
            return ra->containers[mid];
        }
    }
    return NULL;
}

static void prefetch_data(const void *c, uint8_t type, uint16_t low)
{
    if (type == ARRAY_CONTAINER_TYPE_CODE) {
        const array_container_t *ac = c;
        int32_t n = ac->cardinality;
        if (n > 0 && n <= RS_WHOLE) { /* every line: the search and the shift read them */
            for (int32_t j = 0; j < n; j += 32)
                __builtin_prefetch(&ac->array[j], 1, 3);
            __builtin_prefetch(&ac->array[n - 1], 1, 3);
        } else if (n > 0) { /* the append check, then the search's first steps */
            __builtin_prefetch(&ac->array[n - 1], 1, 3);
            for (int32_t q = 1; q < 4; q++)
                __builtin_prefetch(&ac->array[(int64_t)n * q / 4], 1, 3);
        }
    } else if (type == BITSET_CONTAINER_TYPE_CODE) {
        __builtin_prefetch(&((const bitset_container_t *)c)->array[low >> 6], 1, 3);
    }
}
#endif

/* Adds the batch's keys one at a time. */
static dedup_status add_plain(rseen *r, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    for (size_t i = 0; i < b->n; i++) {
        uint64_t v = b->ints[i];
        roaring_bitmap_t *bm = bucket_for(r, (uint32_t)(v >> 32));
        if (!bm) {
            *done = i;
            return DEDUP_ERR_NOMEM;
        }
        bool added = roaring_bitmap_add_checked(bm, (uint32_t)v);
        r->card += added;
        out[i] = added ? DEDUP_NEW : DEDUP_DUPLICATE;
    }
    *done = b->n;
    return DEDUP_OK;
}

static dedup_status rs_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    rseen *r = impl;
    if (b->n && !b->ints)
        return DEDUP_ERR_INVALID_ARG;
#ifdef RS_PREFETCH
    if (!worth_prefetching(r))
        return add_plain(r, b, out, done);
    roaring_bitmap_t *bms[RS_GROUP];
    for (size_t off = 0; off < b->n; off += RS_GROUP) {
        size_t g = b->n - off < RS_GROUP ? b->n - off : RS_GROUP;
        const uint64_t *v = b->ints + off;
        const void *c[RS_GROUP];
        uint8_t type[RS_GROUP];
        /* Nothing is added before the third pass, so the containers found
         * in the first are still those of the second. */
        for (size_t i = 0; i < g; i++) {
            bms[i] = bucket_for(r, (uint32_t)(v[i] >> 32));
            if (!bms[i]) {
                *done = off;
                return DEDUP_ERR_NOMEM;
            }
            c[i] = container_of(bms[i], (uint16_t)(v[i] >> 16), &type[i]);
            if (c[i])
                __builtin_prefetch(c[i], 0, 3);
        }
        for (size_t i = 0; i < g; i++)
            if (c[i])
                prefetch_data(c[i], type[i], (uint16_t)v[i]);
        for (size_t i = 0; i < g; i++) {
            bool added = roaring_bitmap_add_checked(bms[i], (uint32_t)v[i]);
            r->card += added;
            out[off + i] = added ? DEDUP_NEW : DEDUP_DUPLICATE;
        }
    }
    *done = b->n;
    return DEDUP_OK;
#else
    return add_plain(r, b, out, done);
#endif
}

static dedup_status rs_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    const rseen *r = impl;
    if (b->n && !b->ints)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++) {
        bool found;
        size_t j = find(r, (uint32_t)(b->ints[i] >> 32), &found);
        out[i] = found && roaring_bitmap_contains(r->b[j].bm, (uint32_t)b->ints[i])
                     ? DEDUP_DUPLICATE
                     : DEDUP_NEW;
    }
    return DEDUP_OK;
}

static dedup_status rs_remove(void *impl, const dedup_batch *b, bool *removed)
{
    rseen *r = impl;
    if (b->n && !b->ints)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++) {
        bool found, was = false;
        size_t j = find(r, (uint32_t)(b->ints[i] >> 32), &found);
        if (found)
            was = roaring_bitmap_remove_checked(r->b[j].bm, (uint32_t)b->ints[i]);
        r->card -= was;
        if (removed)
            removed[i] = was;
    }
    return DEDUP_OK;
}

static size_t rs_memory(const rseen *r)
{
    size_t m = sizeof *r + r->cap * sizeof *r->b;
    for (size_t i = 0; i < r->n; i++) {
        roaring_statistics_t st;
        roaring_bitmap_statistics(r->b[i].bm, &st);
        /* containers' bytes, plus per container its pointer, key and type
         * in the bitmap's arrays and the container struct itself */
        m += (size_t)st.n_bytes_array_containers + st.n_bytes_run_containers +
             st.n_bytes_bitset_containers + (size_t)st.n_containers * 27 + 64;
    }
    return m;
}

static void rs_info(const void *impl, dedup_seen_info *in)
{
    const rseen *r = impl;
    in->kind = DEDUP_SEEN_ROARING;
    in->file_type = DEDUP_TYPE_ROARING;
    in->probabilistic = false;
    in->can_delete = in->can_count = in->can_save = true;
    in->can_merge = false;
    in->seed = r->seed;
    in->capacity = 0;
    in->items = in->distinct = r->card;
    in->distinct_exact = in->distinct_known = true;
    in->memory = rs_memory(r);
}

/* ---- the file ------------------------------------------------------------------ */

static dedup_status rs_save(const void *impl, dedup_sink *sink)
{
    const rseen *r = impl;
    uint64_t payload = 0;
    uint32_t nonempty = 0;
    for (size_t i = 0; i < r->n; i++)
        if (roaring_bitmap_get_cardinality(r->b[i].bm)) {
            payload += BUCKET_HEAD + roaring_bitmap_portable_size_in_bytes(r->b[i].bm);
            nonempty++;
        }
    unsigned char params[PARAMS_LEN];
    dedup_put_u64(params, r->card);
    dedup_put_u32(params + 8, nonempty);
    dedup_put_u32(params + 12, 0);
    dedup_encoder e;
    dedup_status s =
        dedup_encoder_begin(&e, *sink, DEDUP_TYPE_ROARING, r->seed, params, PARAMS_LEN, payload);
    for (size_t i = 0; !s && i < r->n; i++) {
        if (!roaring_bitmap_get_cardinality(r->b[i].bm))
            continue;
        size_t len = roaring_bitmap_portable_size_in_bytes(r->b[i].bm);
        unsigned char head[BUCKET_HEAD];
        dedup_put_u32(head, r->b[i].hi);
        dedup_put_u32(head + 4, 0);
        dedup_put_u64(head + 8, len);
        char *buf = ra_malloc(&r->alloc, len);
        if (!buf)
            return DEDUP_ERR_NOMEM;
        if (roaring_bitmap_portable_serialize(r->b[i].bm, buf) != len)
            s = DEDUP_ERR_CORRUPT;
        if (!s)
            s = dedup_encoder_write(&e, head, sizeof head);
        if (!s)
            s = dedup_encoder_write(&e, buf, len);
        ra_free(&r->alloc, buf);
    }
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

static const dedup_seen_ops roaring_ops = {
    .kind = DEDUP_SEEN_ROARING,
    .decide = rs_decide,
    .query = rs_query,
    .remove = rs_remove,
    .info = rs_info,
    .save = rs_save,
    .free = rs_free,
};

static rseen *rs_new(uint64_t seed, const dedup_allocator *a)
{
    rseen *r = ra_malloc(a, sizeof *r);
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->seed = seed;
    r->alloc = *a;
    return r;
}

static dedup_status wrap(rseen *r, const dedup_allocator *a, dedup_seen **out)
{
    dedup_status s = dedup_seen_wrap(&roaring_ops, r, a, out);
    if (s)
        rs_free(r);
    return s;
}

dedup_status dedup_roaring_seen_create(const dedup_seen_spec *spec, const dedup_allocator *alloc,
                                       dedup_seen **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (!spec || spec->kind != DEDUP_SEEN_ROARING)
        return DEDUP_ERR_INVALID_ARG;
    dedup_allocator a;
    ra_resolve(&a, alloc);
    rseen *r = rs_new(spec->seed, &a);
    if (!r)
        return DEDUP_ERR_NOMEM;
    return wrap(r, &a, out);
}

dedup_status dedup_roaring_seen_load(dedup_source src, const dedup_allocator *alloc,
                                     dedup_seen **out)
{
    if (!out || !src.read)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ra_resolve(&a, alloc);
    dedup_decoder decoder, *dec = &decoder;
    rseen *r = NULL;
    char *buf = NULL;
    dedup_status s = dedup_decoder_begin(dec, src, DEDUP_TYPE_ROARING);
    if (s)
        goto done;
    if (dec->header.params_len != PARAMS_LEN || dedup_get_u32(dec->params + 12) != 0) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t card = dedup_get_u64(dec->params);
    uint32_t nb = dedup_get_u32(dec->params + 8);
    uint64_t left = dec->header.payload_len;
    if (left / BUCKET_HEAD < nb) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    r = rs_new(dec->header.seed, &a);
    if (!r) {
        s = DEDUP_ERR_NOMEM;
        goto done;
    }
    if (nb) {
        r->b = ra_calloc(&a, nb, sizeof *r->b);
        if (!r->b) {
            s = DEDUP_ERR_NOMEM;
            goto done;
        }
        r->cap = nb;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < nb; i++) {
        unsigned char head[BUCKET_HEAD];
        if (left < BUCKET_HEAD) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
        s = dedup_decoder_read(dec, head, sizeof head);
        if (s)
            goto done;
        left -= BUCKET_HEAD;
        uint32_t hi = dedup_get_u32(head);
        uint64_t len = dedup_get_u64(head + 8);
        if (dedup_get_u32(head + 4) != 0 || (i > 0 && hi <= r->b[i - 1].hi) || len > left ||
            len < 4 || len > SIZE_MAX) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
        buf = ra_malloc(&a, (size_t)len);
        if (!buf) {
            s = DEDUP_ERR_NOMEM;
            goto done;
        }
        s = dedup_decoder_read(dec, buf, (size_t)len);
        if (s)
            goto done;
        left -= len;
        uint64_t c;
        if (!dedup_roaring_portable_valid(buf, (size_t)len, &c) || c == 0) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
        roaring_bitmap_t *bm = roaring_bitmap_portable_deserialize_safe(buf, (size_t)len);
        if (!bm) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
        r->b[i].hi = hi;
        r->b[i].bm = bm;
        r->n = i + 1;
        if (roaring_bitmap_get_cardinality(bm) != c) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
        total += c;
        ra_free(&a, buf);
        buf = NULL;
    }
    if (left != 0 || total != card) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    r->card = card;
    s = dedup_decoder_end(dec);
done:
    ra_free(&a, buf);
    if (s) {
        rs_free(r);
        return s;
    }
    return wrap(r, &a, out);
}

/* As every dedup_X_load_file(): a file that goes on after the container's
 * checksum is refused with DEDUP_ERR_TRAILING (a pipe, whose length is
 * unknown, by reading one byte more). */
dedup_status dedup_roaring_seen_load_file(const char *path, const dedup_allocator *alloc,
                                          dedup_seen **out)
{
    if (!path || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ra_resolve(&a, alloc);
    dedup_file_source *f = ra_malloc(&a, sizeof *f);
    if (!f)
        return DEDUP_ERR_NOMEM;
    dedup_source src;
    dedup_status s = dedup_file_source_open(f, path, &src);
    if (!s) {
        s = dedup_roaring_seen_load(src, &a, out);
        if (!s) {
            uint64_t left = src.remaining ? src.remaining(src.ctx) : UINT64_MAX;
            unsigned char extra;
            if (left == UINT64_MAX)
                left = src.read(src.ctx, &extra, 1) == DEDUP_OK;
            if (left != 0) {
                dedup_seen_free(*out);
                *out = NULL;
                s = DEDUP_ERR_TRAILING;
            }
        }
        dedup_file_source_close(f);
    }
    ra_free(&a, f);
    return s;
}
