/*
 * u64set.c - the exact set of 64-bit integers (dedup_u64set, dedup/set.h):
 * one open-addressing table with linear probing whose home slot is
 * dedup_reduce(hash, capacity), so capacity need not be a power of two.
 * What the three sets share is in set.c.
 *
 * Integers: a slot is the 8-byte key; 0 marks empty, with a side flag.
 */
#include "set_internal.h"

#include "dedup/limits.h"

#include <stdlib.h>

struct dedup_u64set {
    dedup_allocator alloc;
    uint64_t seed;
    uint64_t limit;
    uint64_t *slots;
    uint64_t nslots;
    uint64_t size;
    uint64_t grow_at;
    bool has_zero;
};

size_t dedup_u64set_memory_usage(const dedup_u64set *s)
{
    return s ? sizeof *s + (size_t)s->nslots * 8 : 0;
}

uint64_t dedup_u64set_memory_for(uint64_t capacity)
{
    uint64_t nslots = ddi_set_slots_for(capacity, 4, 5);
    return nslots > (UINT64_C(1) << 40) ? 0 : sizeof(dedup_u64set) + nslots * 8;
}

dedup_status dedup_u64set_create(const dedup_set_params *params, const dedup_allocator *alloc,
                                 dedup_u64set **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_set_params def;
    if (!params) {
        dedup_set_params_init(&def);
        params = &def;
    }
    if (params->counts)
        return DEDUP_ERR_INVALID_ARG;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    uint64_t nslots = ddi_set_slots_for(params->capacity, 4, 5);
    if (nslots > (UINT64_C(1) << 40))
        return DEDUP_ERR_LIMIT;
    if (params->memory_limit && nslots * 8 > params->memory_limit)
        return DEDUP_ERR_FULL;
    dedup_u64set *s = ddi_calloc(&a, 1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->alloc = a;
    s->seed = params->seed;
    s->limit = params->memory_limit;
    s->slots = ddi_calloc(&a, (size_t)nslots, 8);
    if (!s->slots) {
        ddi_free(&a, s);
        return DEDUP_ERR_NOMEM;
    }
    s->nslots = nslots;
    s->grow_at = (nslots - 1) / 5 * 4;
    *out = s;
    return DEDUP_OK;
}

void dedup_u64set_free(dedup_u64set *s)
{
    if (!s)
        return;
    ddi_free(&s->alloc, s->slots);
    ddi_free(&s->alloc, s);
}

static inline uint64_t u64_home(const dedup_u64set *s, uint64_t key, uint64_t nslots)
{
    return dedup_reduce(dedup_hash_u64(key, s->seed).lo, nslots);
}

/* The slot holding 'key', or the empty slot where it belongs (*found
 * false), scanning right from slot 'i' (its home). */
static inline uint64_t u64_scan(const dedup_u64set *s, uint64_t key, uint64_t i, bool *found)
{
    for (;;) {
        uint64_t x = s->slots[i];
        if (x == key) {
            *found = true;
            return i;
        }
        if (x == 0) {
            *found = false;
            return i;
        }
        if (++i == s->nslots)
            i = 0;
    }
}

static inline uint64_t u64_find(const dedup_u64set *s, uint64_t key, bool *found)
{
    return u64_scan(s, key, u64_home(s, key, s->nslots), found);
}

static dedup_status u64_rehash(dedup_u64set *s)
{
    /* Grows by half: from 4/5 full to 8/15, so a growing set holds 10 to 15
     * bytes per key (doubling gave 10 to 20); the rehashes cost 3n slot
     * moves over n inserts instead of 2n. */
    uint64_t n = s->nslots + s->nslots / 2 + 1;
    if (s->limit && dedup_u64set_memory_usage(s) + n * 8 > s->limit)
        return DEDUP_ERR_FULL;
    uint64_t *ns = ddi_calloc(&s->alloc, (size_t)n, 8);
    if (!ns)
        return DEDUP_ERR_NOMEM;
    for (uint64_t i = 0; i < s->nslots; i++) {
        uint64_t x = s->slots[i];
        if (!x)
            continue;
        uint64_t j = u64_home(s, x, n);
        while (ns[j])
            if (++j == n)
                j = 0;
        ns[j] = x;
    }
    ddi_free(&s->alloc, s->slots);
    s->slots = ns;
    s->nslots = n;
    s->grow_at = (n - 1) / 5 * 4;
    return DEDUP_OK;
}

/* Records 'key' whose hash (dedup_hash_u64(key, seed).lo) is 'h'. */
static dedup_status u64_insert_hashed(dedup_u64set *s, uint64_t key, uint64_t h,
                                      dedup_verdict *verdict)
{
    if (key == 0) {
        *verdict = s->has_zero ? DEDUP_DUPLICATE : DEDUP_NEW;
        if (!s->has_zero)
            s->size++;
        s->has_zero = true;
        return DEDUP_OK;
    }
    bool found;
    uint64_t i = u64_scan(s, key, dedup_reduce(h, s->nslots), &found);
    if (found) {
        *verdict = DEDUP_DUPLICATE;
        return DEDUP_OK;
    }
    if (s->size + 1 > s->grow_at) {
        dedup_status st = u64_rehash(s);
        if (st)
            return st;
        i = u64_scan(s, key, dedup_reduce(h, s->nslots), &found);
    }
    s->slots[i] = key;
    s->size++;
    *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

dedup_status dedup_u64set_insert(dedup_u64set *s, uint64_t key, dedup_verdict *verdict)
{
    return u64_insert_hashed(s, key, dedup_hash_u64(key, s->seed).lo, verdict);
}

/* The batch calls hash a group of keys once, prefetch each home slot's
 * line, then probe: the group's cache misses overlap instead of each
 * insert waiting on its own (~250 ns in a table larger than the caches).
 * A group of 64 keeps its lines within L1 until they are probed.  A
 * rehash in the middle of a group only wastes the rest of its prefetches:
 * homes are taken from the hashes against the table of the moment. */
#define U64_GROUP 64u

dedup_status dedup_u64set_insert_batch(dedup_u64set *s, const uint64_t *keys, size_t n,
                                       dedup_verdict *verdicts, size_t *done)
{
    uint64_t h[U64_GROUP];
    for (size_t off = 0; off < n; off += U64_GROUP) {
        size_t g = n - off < U64_GROUP ? n - off : U64_GROUP;
        for (size_t i = 0; i < g; i++) {
            h[i] = dedup_hash_u64(keys[off + i], s->seed).lo;
            DD_PREFETCH_W(&s->slots[dedup_reduce(h[i], s->nslots)]);
        }
        for (size_t i = 0; i < g; i++) {
            dedup_status st = u64_insert_hashed(s, keys[off + i], h[i], &verdicts[off + i]);
            if (st) {
                if (done)
                    *done = off + i;
                return st;
            }
        }
    }
    if (done)
        *done = n;
    return DEDUP_OK;
}

void dedup_u64set_contains_batch(const dedup_u64set *s, const uint64_t *keys, size_t n,
                                 bool *found)
{
    uint64_t h[U64_GROUP];
    for (size_t off = 0; off < n; off += U64_GROUP) {
        size_t g = n - off < U64_GROUP ? n - off : U64_GROUP;
        for (size_t i = 0; i < g; i++) {
            h[i] = dedup_hash_u64(keys[off + i], s->seed).lo;
            DD_PREFETCH(&s->slots[dedup_reduce(h[i], s->nslots)]);
        }
        for (size_t i = 0; i < g; i++) {
            uint64_t k = keys[off + i];
            if (k == 0)
                found[off + i] = s->has_zero;
            else
                (void)u64_scan(s, k, dedup_reduce(h[i], s->nslots), &found[off + i]);
        }
    }
}

bool dedup_u64set_contains(const dedup_u64set *s, uint64_t key)
{
    if (key == 0)
        return s->has_zero;
    bool found;
    (void)u64_find(s, key, &found);
    return found;
}

uint64_t dedup_u64set_size(const dedup_u64set *s) { return s->size; }

/* File layout (type SET_U64): params = keys u64.  Payload: the keys, u64
 * each, in no particular order. */
dedup_status dedup_u64set_save(const dedup_u64set *s, dedup_sink *sink)
{
    unsigned char p[8];
    dedup_put_u64(p, s->size);
    dedup_encoder e;
    dedup_status st = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_SET_U64, s->seed, p, sizeof p,
                                          s->size * 8);
    if (!st && s->has_zero) {
        uint64_t z = 0;
        st = dedup_encoder_write_u64s(&e, &z, 1);
    }
    for (uint64_t i = 0; !st && i < s->nslots; i++)
        if (s->slots[i])
            st = dedup_encoder_write_u64s(&e, &s->slots[i], 1);
    if (!st)
        st = dedup_encoder_end(&e);
    return st;
}

dedup_status dedup_u64set_load(dedup_source src, const dedup_allocator *alloc, dedup_u64set **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    /* Every allocation through the caller's hook; the decoder (~5 KB, 64-byte
     * aligned, which no allocator promises) on the stack, as in every loader. */
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_decoder decoder, *d = &decoder;
    dedup_u64set *s = NULL;
    dedup_status st = dedup_decoder_begin(d, src, DEDUP_TYPE_SET_U64);
    if (!st && d->header.params_len != 8)
        st = DEDUP_ERR_CORRUPT;
    uint64_t nkeys = st ? 0 : dedup_get_u64(d->params);
    if (!st && (nkeys > (UINT64_C(1) << 38) || nkeys * 8 != d->header.payload_len))
        st = DEDUP_ERR_CORRUPT;
    if (!st) {
        dedup_set_params p;
        dedup_set_params_init(&p);
        p.capacity = nkeys;
        p.seed = d->header.seed;
        st = dedup_u64set_create(&p, &a, &s);
    }
    for (uint64_t i = 0; !st && i < nkeys; i++) {
        uint64_t k;
        dedup_verdict v;
        st = dedup_decoder_read_u64s(d, &k, 1);
        if (!st)
            st = dedup_u64set_insert(s, k, &v);
        if (!st && v != DEDUP_NEW)
            st = DEDUP_ERR_CORRUPT;
    }
    if (!st)
        st = dedup_decoder_end(d);
    if (st) {
        dedup_u64set_free(s);
        return st;
    }
    *out = s;
    return DEDUP_OK;
}
