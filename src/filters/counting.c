/*
 * counting.c - counting Bloom filter with 4-bit saturating counters.
 *
 * Layout: counter j lives in word j/16, bits 4*(j%16) .. 4*(j%16)+3.  The
 * saved payload is those words little-endian, so counter j is the low
 * nibble of byte j/2 when j is even and the high nibble when odd.
 *
 * Probes repeat: enhanced double hashing may send two of a key's k probes to
 * the same counter.  Every operation therefore works on the key's distinct
 * counters with their multiplicities: add increments a counter by its
 * multiplicity, delete decrements by it, and delete refuses (NOT_FOUND) when
 * a non-saturated counter holds less than its multiplicity, which can only
 * happen if the key was never added (or already deleted as often).
 */
#include "dedup/counting.h"

#include "dedup/bloom.h"
#include "dedup/limits.h"
#include "internal.h"

#include <math.h>

struct dedup_counting {
    dedup_allocator alloc;
    uint64_t *words;
    uint64_t counters; /* m, a multiple of 16 */
    uint64_t nwords;
    uint32_t k;
    uint64_t capacity;
    double fpr;
    uint64_t seed;
    uint64_t adds, deletes, saturated;
};

/* A key's distinct counters with multiplicities. */
typedef struct probes {
    uint32_t n;
    uint64_t idx[DEDUP_MAX_BLOOM_K];
    uint32_t mult[DEDUP_MAX_BLOOM_K];
} probes;

#define LN2 0.69314718055994530942

static uint64_t probe_at(uint64_t h1, uint64_t h2, uint32_t i, uint64_t m)
{
    uint64_t ii = i;
    uint64_t h = h1 + ii * h2 + (ii * ii * ii - ii) / 6;
    return dedup_reduce(h, m);
}

static void get_probes(const dedup_counting *cb, dedup_digest d, probes *p)
{
    p->n = 0;
    for (uint32_t i = 0; i < cb->k; i++) {
        uint64_t j = probe_at(d.lo, d.hi, i, cb->counters);
        uint32_t t = 0;
        while (t < p->n && p->idx[t] != j)
            t++;
        if (t == p->n) {
            p->idx[t] = j;
            p->mult[t] = 0;
            p->n++;
        }
        p->mult[t]++;
    }
}

static inline unsigned get_ctr(const uint64_t *w, uint64_t j)
{
    return (unsigned)(w[j >> 4] >> ((j & 15) * 4)) & 15u;
}

static inline void set_ctr(uint64_t *w, uint64_t j, unsigned v)
{
    unsigned sh = (unsigned)(j & 15) * 4;
    w[j >> 4] = (w[j >> 4] & ~(UINT64_C(15) << sh)) | ((uint64_t)v << sh);
}

void dedup_counting_params_init(dedup_counting_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof *params);
    params->fpr = 0.01;
    params->seed = DEDUP_DEFAULT_SEED;
}

static bool fpr_ok(double p)
{
    return p >= DEDUP_MIN_FPR && p < 1.0;
}

static dedup_status alloc_filter(const dedup_allocator *alloc, uint64_t counters, uint32_t k,
                                 uint64_t capacity, double fpr, uint64_t seed,
                                 dedup_counting **out)
{
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_counting *cb = ddi_calloc(&a, 1, sizeof *cb);
    if (!cb)
        return DEDUP_ERR_NOMEM;
    cb->alloc = a;
    cb->counters = counters;
    cb->nwords = counters / 16;
    cb->k = k;
    cb->capacity = capacity;
    cb->fpr = fpr;
    cb->seed = seed;
    if (cb->nwords > SIZE_MAX / 8 || !(cb->words = ddi_calloc(&a, (size_t)cb->nwords, 8))) {
        ddi_free(&a, cb);
        return DEDUP_ERR_NOMEM;
    }
    *out = cb;
    return DEDUP_OK;
}

dedup_status dedup_counting_create(const dedup_counting_params *params,
                                   const dedup_allocator *alloc, dedup_counting **out)
{
    if (!params || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (params->k > DEDUP_MAX_BLOOM_K)
        return DEDUP_ERR_INVALID_ARG;
    uint64_t m = params->counters;
    if (m == 0) {
        if (params->capacity == 0 || !fpr_ok(params->fpr))
            return DEDUP_ERR_INVALID_ARG;
        /* The classic filter's m and k (dedup/bloom.h), one counter per bit. */
        m = dedup_bloom_bits_for(params->capacity, params->fpr);
        if (m > DEDUP_MAX_BITS / 4)
            return DEDUP_ERR_LIMIT;
    } else {
        if (params->capacity == 0 && params->k == 0)
            return DEDUP_ERR_INVALID_ARG;
        if (params->capacity != 0 && !fpr_ok(params->fpr))
            return DEDUP_ERR_INVALID_ARG;
        if (m > DEDUP_MAX_BITS / 4)
            return DEDUP_ERR_LIMIT;
    }
    uint32_t k = params->k ? params->k : dedup_bloom_k_for(params->capacity, m);
    m = (m + 15) & ~UINT64_C(15);
    if (m > DEDUP_MAX_BITS / 4)
        return DEDUP_ERR_LIMIT;
    return alloc_filter(alloc, m, k, params->capacity, params->capacity ? params->fpr : 0.0,
                        params->seed, out);
}

void dedup_counting_free(dedup_counting *cb)
{
    if (!cb)
        return;
    dedup_allocator a = cb->alloc;
    ddi_free(&a, cb->words);
    ddi_free(&a, cb);
}

dedup_digest dedup_counting_digest(const dedup_counting *cb, const void *key, size_t len)
{
    return dedup_hash(key, len, cb->seed);
}

/* ---- operations ---------------------------------------------------------- */

void dedup_counting_add(dedup_counting *cb, dedup_digest d)
{
    probes p;
    get_probes(cb, d, &p);
    for (uint32_t t = 0; t < p.n; t++) {
        unsigned v = get_ctr(cb->words, p.idx[t]);
        if (v == DEDUP_COUNTING_MAX)
            continue;
        unsigned nv = v + p.mult[t];
        if (nv >= DEDUP_COUNTING_MAX) {
            nv = DEDUP_COUNTING_MAX;
            cb->saturated++;
        }
        set_ctr(cb->words, p.idx[t], nv);
    }
    cb->adds++;
}

bool dedup_counting_might_contain(const dedup_counting *cb, dedup_digest d)
{
    for (uint32_t i = 0; i < cb->k; i++)
        if (get_ctr(cb->words, probe_at(d.lo, d.hi, i, cb->counters)) == 0)
            return false;
    return true;
}

dedup_verdict dedup_counting_test_and_add(dedup_counting *cb, dedup_digest d)
{
    if (dedup_counting_might_contain(cb, d))
        return DEDUP_MAYBE_DUPLICATE;
    dedup_counting_add(cb, d);
    return DEDUP_NEW;
}

dedup_status dedup_counting_delete(dedup_counting *cb, dedup_digest d)
{
    probes p;
    get_probes(cb, d, &p);
    for (uint32_t t = 0; t < p.n; t++) {
        unsigned v = get_ctr(cb->words, p.idx[t]);
        if (v != DEDUP_COUNTING_MAX && v < p.mult[t])
            return DEDUP_ERR_NOT_FOUND;
    }
    for (uint32_t t = 0; t < p.n; t++) {
        unsigned v = get_ctr(cb->words, p.idx[t]);
        if (v != DEDUP_COUNTING_MAX)
            set_ctr(cb->words, p.idx[t], v - p.mult[t]);
    }
    cb->deletes++;
    return DEDUP_OK;
}

uint32_t dedup_counting_count(const dedup_counting *cb, dedup_digest d)
{
    probes p;
    get_probes(cb, d, &p);
    uint32_t best = DEDUP_COUNTING_MAX;
    for (uint32_t t = 0; t < p.n; t++) {
        unsigned v = get_ctr(cb->words, p.idx[t]);
        uint32_t c = v == DEDUP_COUNTING_MAX ? DEDUP_COUNTING_MAX : v / p.mult[t];
        if (c < best)
            best = c;
    }
    return best;
}

void dedup_counting_add_key(dedup_counting *cb, const void *key, size_t len)
{
    dedup_counting_add(cb, dedup_hash(key, len, cb->seed));
}
bool dedup_counting_might_contain_key(const dedup_counting *cb, const void *key, size_t len)
{
    return dedup_counting_might_contain(cb, dedup_hash(key, len, cb->seed));
}
dedup_verdict dedup_counting_test_and_add_key(dedup_counting *cb, const void *key, size_t len)
{
    return dedup_counting_test_and_add(cb, dedup_hash(key, len, cb->seed));
}
dedup_status dedup_counting_delete_key(dedup_counting *cb, const void *key, size_t len)
{
    return dedup_counting_delete(cb, dedup_hash(key, len, cb->seed));
}
uint32_t dedup_counting_count_key(const dedup_counting *cb, const void *key, size_t len)
{
    return dedup_counting_count(cb, dedup_hash(key, len, cb->seed));
}

void dedup_counting_add_batch(dedup_counting *cb, const dedup_digest *d, size_t n)
{
    /* Every probe of a key is written, so all k words are prefetched, for
     * keys AHEAD positions further on. */
    enum { AHEAD = 8 };
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            for (uint32_t p = 0; p < cb->k; p++)
                DD_PREFETCH_W(&cb->words[probe_at(d[i + AHEAD].lo, d[i + AHEAD].hi, p,
                                                  cb->counters) >> 4]);
        dedup_counting_add(cb, d[i]);
    }
}

void dedup_counting_test_and_add_batch(dedup_counting *cb, const dedup_digest *d, size_t n,
                                       dedup_verdict *out)
{
    /* A new key writes all k words, so all of them are prefetched for
     * writing, for keys AHEAD positions further on (as add_batch). */
    enum { AHEAD = 8 };
    for (size_t i = 0; i < n && i < AHEAD; i++)
        for (uint32_t p = 0; p < cb->k; p++)
            DD_PREFETCH_W(&cb->words[probe_at(d[i].lo, d[i].hi, p, cb->counters) >> 4]);
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            for (uint32_t p = 0; p < cb->k; p++)
                DD_PREFETCH_W(&cb->words[probe_at(d[i + AHEAD].lo, d[i + AHEAD].hi, p,
                                                  cb->counters) >> 4]);
        out[i] = dedup_counting_test_and_add(cb, d[i]);
    }
}

void dedup_counting_might_contain_batch(const dedup_counting *cb, const dedup_digest *d,
                                        size_t n, bool *out)
{
    /* Prefetch the first probes of keys AHEAD positions further on; the
     * first two probes decide most absent keys. */
    enum { AHEAD = 16 };
    for (size_t i = 0; i < n && i < AHEAD; i++) {
        DD_PREFETCH(&cb->words[probe_at(d[i].lo, d[i].hi, 0, cb->counters) >> 4]);
        if (cb->k > 1)
            DD_PREFETCH(&cb->words[probe_at(d[i].lo, d[i].hi, 1, cb->counters) >> 4]);
    }
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n) {
            const dedup_digest *q = &d[i + AHEAD];
            DD_PREFETCH(&cb->words[probe_at(q->lo, q->hi, 0, cb->counters) >> 4]);
            if (cb->k > 1)
                DD_PREFETCH(&cb->words[probe_at(q->lo, q->hi, 1, cb->counters) >> 4]);
        }
        out[i] = dedup_counting_might_contain(cb, d[i]);
    }
}

/* ---- shape and state ------------------------------------------------------- */

uint64_t dedup_counting_counters(const dedup_counting *cb) { return cb->counters; }
uint32_t dedup_counting_k(const dedup_counting *cb) { return cb->k; }
uint64_t dedup_counting_capacity(const dedup_counting *cb) { return cb->capacity; }
double dedup_counting_target_fpr(const dedup_counting *cb) { return cb->fpr; }
uint64_t dedup_counting_seed(const dedup_counting *cb) { return cb->seed; }
uint64_t dedup_counting_adds(const dedup_counting *cb) { return cb->adds; }
uint64_t dedup_counting_deletes(const dedup_counting *cb) { return cb->deletes; }
uint64_t dedup_counting_saturated(const dedup_counting *cb) { return cb->saturated; }

/* Nibbles of w that are non-zero (SWAR: OR each nibble's bits into its low bit). */
static inline unsigned nonzero_nibbles(uint64_t w)
{
    uint64_t x = w | (w >> 1);
    x |= x >> 2;
    return (unsigned)__builtin_popcountll(x & UINT64_C(0x1111111111111111));
}

/* Nibbles of w equal to 15. */
static inline unsigned full_nibbles(uint64_t w)
{
    uint64_t x = w & (w >> 1);
    x &= x >> 2;
    return (unsigned)__builtin_popcountll(x & UINT64_C(0x1111111111111111));
}

uint64_t dedup_counting_nonzero(const dedup_counting *cb)
{
    uint64_t c = 0;
    for (uint64_t i = 0; i < cb->nwords; i++)
        c += nonzero_nibbles(cb->words[i]);
    return c;
}

static uint64_t count_saturated(const uint64_t *w, uint64_t nwords)
{
    uint64_t c = 0;
    for (uint64_t i = 0; i < nwords; i++)
        c += full_nibbles(w[i]);
    return c;
}

double dedup_counting_current_fpr(const dedup_counting *cb)
{
    double fill = (double)dedup_counting_nonzero(cb) / (double)cb->counters;
    return pow(fill, (double)cb->k);
}

size_t dedup_counting_memory_usage(const dedup_counting *cb)
{
    return sizeof *cb + (size_t)cb->nwords * 8;
}

void dedup_counting_clear(dedup_counting *cb)
{
    memset(cb->words, 0, (size_t)cb->nwords * 8);
    cb->adds = cb->deletes = cb->saturated = 0;
}

dedup_status dedup_counting_merge(dedup_counting *dst, const dedup_counting *src)
{
    if (!dst || !src)
        return DEDUP_ERR_INVALID_ARG;
    if (dst->counters != src->counters || dst->k != src->k || dst->seed != src->seed)
        return DEDUP_ERR_INCOMPATIBLE;
    for (uint64_t i = 0; i < dst->nwords; i++) {
        uint64_t a = dst->words[i], b = src->words[i], r = 0;
        if (!b)
            continue;
        for (unsigned s = 0; s < 64; s += 4) {
            unsigned v = (unsigned)((a >> s) & 15) + (unsigned)((b >> s) & 15);
            if (v > DEDUP_COUNTING_MAX)
                v = DEDUP_COUNTING_MAX;
            r |= (uint64_t)v << s;
        }
        dst->words[i] = r;
    }
    dst->saturated = count_saturated(dst->words, dst->nwords);
    dst->adds += src->adds;
    dst->deletes += src->deletes;
    return DEDUP_OK;
}

/* ---- persistence ----------------------------------------------------------------
 * params (48 bytes):
 *   0  u64 counters   8  u32 k   12 u32 reserved (0)   16 u64 capacity
 *   24 f64 fpr        32 u64 adds   40 u64 deletes
 * payload: counters/2 bytes (the words, little-endian). */
#define PARAMS_LEN 48u

static void put_params(const dedup_counting *cb, unsigned char *p)
{
    dedup_put_u64(p, cb->counters);
    dedup_put_u32(p + 8, cb->k);
    dedup_put_u32(p + 12, 0);
    dedup_put_u64(p + 16, cb->capacity);
    dedup_put_f64(p + 24, cb->fpr);
    dedup_put_u64(p + 32, cb->adds);
    dedup_put_u64(p + 40, cb->deletes);
}

dedup_status dedup_counting_save(const dedup_counting *cb, dedup_sink *sink)
{
    if (!cb || !sink)
        return DEDUP_ERR_INVALID_ARG;
    unsigned char p[PARAMS_LEN];
    put_params(cb, p);
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_COUNTING_BLOOM, cb->seed, p,
                                         PARAMS_LEN, cb->nwords * 8);
    if (!s)
        s = dedup_encoder_write_u64s(&e, cb->words, (size_t)cb->nwords);
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

uint64_t dedup_counting_serialized_size(const dedup_counting *cb)
{
    return DEDUP_HEADER_SIZE + PARAMS_LEN + cb->nwords * 8 + DEDUP_TRAILER_SIZE;
}

dedup_status dedup_counting_load(dedup_source src, const dedup_allocator *alloc,
                                 dedup_counting **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    /* On the stack: the decoder needs 64-byte alignment (about 5 KB). */
    dedup_decoder decoder, *dec = &decoder;
    dedup_counting *cb = NULL;
    dedup_status s = dedup_decoder_begin(dec, src, DEDUP_TYPE_COUNTING_BLOOM);
    if (s)
        goto out;
    s = DEDUP_ERR_CORRUPT;
    if (dec->header.params_len != PARAMS_LEN)
        goto out;
    const unsigned char *p = dec->params;
    uint64_t m = dedup_get_u64(p);
    uint32_t k = dedup_get_u32(p + 8);
    uint32_t reserved = dedup_get_u32(p + 12);
    uint64_t capacity = dedup_get_u64(p + 16);
    double fpr = dedup_get_f64(p + 24);
    uint64_t adds = dedup_get_u64(p + 32), deletes = dedup_get_u64(p + 40);
    if (m == 0 || m % 16 != 0 || k == 0 || k > DEDUP_MAX_BLOOM_K || reserved != 0)
        goto out;
    if (capacity ? !fpr_ok(fpr) : fpr != 0.0)
        goto out;
    if (m > DEDUP_MAX_BITS / 4) {
        s = DEDUP_ERR_LIMIT;
        goto out;
    }
    if (dec->header.payload_len != m / 2)
        goto out;
    s = alloc_filter(&a, m, k, capacity, fpr, dec->header.seed, &cb);
    if (s)
        goto out;
    s = dedup_decoder_read_u64s(dec, cb->words, (size_t)cb->nwords);
    if (!s)
        s = dedup_decoder_end(dec);
    if (s)
        goto out;
    cb->adds = adds;
    cb->deletes = deletes;
    cb->saturated = count_saturated(cb->words, cb->nwords);
out:
    if (s) {
        dedup_counting_free(cb);
        return s;
    }
    *out = cb;
    return DEDUP_OK;
}

static dedup_status save_fn(const void *obj, dedup_sink *sink)
{
    return dedup_counting_save(obj, sink);
}

dedup_status dedup_counting_save_file(const dedup_counting *cb, const char *path)
{
    if (!cb || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_fn, cb);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_counting *cb = NULL;
    dedup_status s = dedup_counting_load(src, alloc, &cb);
    *out = cb;
    return s;
}

static void free_any(void *obj)
{
    dedup_counting_free(obj);
}

dedup_status dedup_counting_load_file(const char *path, const dedup_allocator *alloc,
                                      dedup_counting **out)
{
    void *obj = NULL;
    dedup_status s = ddi_load_file(path, alloc, load_any, free_any, &obj);
    if (out)
        *out = obj;
    return s;
}
