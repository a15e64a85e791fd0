/*
 * hll.c - HyperLogLog sketch (include/dedup/hll.h).
 *
 * Dense form: one byte per register, 64-byte aligned, so an add is a shift,
 * a count of leading zeros and a byte max in a table that stays in L1/L2.
 *
 * Sparse form: a sorted array of entries (index << 7 | value), unique by
 * index, where the index is the top 25 bits of digest.hi (a sketch of 2^25
 * registers, in which a few thousand keys almost never collide) and the
 * value the rank of digest.lo, as in the dense form.  Because the rank does
 * not depend on the index bits, a dense register is simply the maximum of
 * the entries whose index starts with its p bits.  An add is a binary
 * search and, for a new index, a memmove; the form is only used while at
 * most m / 8 indexes are present (2,048 at precision 14), so the move stays
 * short.  The list holds exactly the indexes seen, which is what makes the
 * form a function of the input's set of digests (hll.h promises it).
 *
 * File params (16 bytes): precision u32, form u32 (0 dense, 1 sparse),
 * entries u64 (sparse: the list's length; dense: 0).  Payload: dense, m
 * register bytes; sparse, the entries (index << 7 | value) as u32 LE in
 * increasing order.
 */
#include "dedup/hll.h"

#include <math.h>
#include <stdio.h>

#include "internal.h"

#define PARAMS_LEN 16u
#define FORM_DENSE 0u
#define FORM_SPARSE 1u
#define SP DEDUP_HLL_SPARSE_PRECISION
#define SP_INDEX(e) ((e) >> 7)
#define SP_VALUE(e) ((e) & 0x7fu)

struct dedup_hll {
    uint8_t *regs;     /* dense: m bytes; NULL while sparse */
    void *regs_raw;
    uint32_t *sparse;  /* sorted entries; NULL once dense */
    size_t nsparse, capsparse;
    uint32_t p;
    uint64_t m;
    uint64_t seed;
    dedup_allocator alloc;
};

void dedup_hll_params_init(dedup_hll_params *params)
{
    params->precision = DEDUP_HLL_DEFAULT_PRECISION;
    params->seed = DEDUP_DEFAULT_SEED;
}

static inline size_t sparse_limit(const dedup_hll *h) { return (size_t)(h->m / 8); }

static inline unsigned rank_of(uint64_t lo)
{
    return lo ? (unsigned)__builtin_clzll(lo) + 1 : DEDUP_HLL_MAX_RANK;
}

static dedup_hll *hll_new(uint32_t p, uint64_t seed, const dedup_allocator *a)
{
    dedup_hll *h = ddi_malloc(a, sizeof *h);
    if (!h)
        return NULL;
    memset(h, 0, sizeof *h);
    h->alloc = *a;
    h->p = p;
    h->m = UINT64_C(1) << p;
    h->seed = seed;
    return h;
}

dedup_status dedup_hll_create(const dedup_hll_params *params, const dedup_allocator *alloc,
                              dedup_hll **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (!params || params->precision < DEDUP_HLL_MIN_PRECISION ||
        params->precision > DEDUP_HLL_MAX_PRECISION)
        return DEDUP_ERR_INVALID_ARG;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_hll *h = hll_new(params->precision, params->seed, &a);
    if (!h)
        return DEDUP_ERR_NOMEM;
    *out = h;
    return DEDUP_OK;
}

void dedup_hll_free(dedup_hll *h)
{
    if (!h)
        return;
    dedup_allocator a = h->alloc;
    ddi_free(&a, h->regs_raw);
    ddi_free(&a, h->sparse);
    ddi_free(&a, h);
}

dedup_status dedup_hll_densify(dedup_hll *h)
{
    if (h->regs)
        return DEDUP_OK;
    void *raw;
    uint8_t *regs = ddi_aligned_calloc(&h->alloc, (size_t)h->m, 64, &raw);
    if (!regs)
        return DEDUP_ERR_NOMEM;
    const unsigned down = SP - h->p;
    for (size_t i = 0; i < h->nsparse; i++) {
        uint32_t r = SP_INDEX(h->sparse[i]) >> down;
        uint8_t v = (uint8_t)SP_VALUE(h->sparse[i]);
        if (regs[r] < v)
            regs[r] = v;
    }
    ddi_free(&h->alloc, h->sparse);
    h->sparse = NULL;
    h->nsparse = h->capsparse = 0;
    h->regs = regs;
    h->regs_raw = raw;
    return DEDUP_OK;
}

/* First entry whose index is >= idx. */
static size_t sparse_find(const dedup_hll *h, uint32_t idx)
{
    size_t lo = 0, hi = h->nsparse;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (SP_INDEX(h->sparse[mid]) < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Raises sparse index 'idx' to at least 'val', turning dense when a new
 * index would exceed the limit. */
static dedup_status sparse_raise(dedup_hll *h, uint32_t idx, unsigned val)
{
    size_t i = sparse_find(h, idx);
    if (i < h->nsparse && SP_INDEX(h->sparse[i]) == idx) {
        if (SP_VALUE(h->sparse[i]) < val)
            h->sparse[i] = idx << 7 | val;
        return DEDUP_OK;
    }
    if (h->nsparse + 1 > sparse_limit(h)) {
        dedup_status s = dedup_hll_densify(h);
        if (s)
            return s;
        uint32_t reg = idx >> (SP - h->p);
        if (h->regs[reg] < val)
            h->regs[reg] = (uint8_t)val;
        return DEDUP_OK;
    }
    if (h->nsparse == h->capsparse) {
        size_t cap = h->capsparse ? h->capsparse * 2 : 16;
        if (cap > sparse_limit(h))
            cap = sparse_limit(h);
        uint32_t *n = ddi_realloc(&h->alloc, h->sparse, h->capsparse * sizeof *n, cap * sizeof *n);
        if (!n)
            return DEDUP_ERR_NOMEM;
        h->sparse = n;
        h->capsparse = cap;
    }
    memmove(h->sparse + i + 1, h->sparse + i, (h->nsparse - i) * sizeof *h->sparse);
    h->sparse[i] = idx << 7 | val;
    h->nsparse++;
    return DEDUP_OK;
}

dedup_status dedup_hll_add(dedup_hll *h, dedup_digest d)
{
    unsigned r = rank_of(d.lo);
    if (DD_LIKELY(h->regs != NULL)) {
        uint32_t reg = (uint32_t)(d.hi >> (64 - h->p));
        if (h->regs[reg] < r)
            h->regs[reg] = (uint8_t)r;
        return DEDUP_OK;
    }
    return sparse_raise(h, (uint32_t)(d.hi >> (64 - SP)), r);
}

dedup_status dedup_hll_add_batch(dedup_hll *h, const dedup_digest *d, size_t n)
{
    size_t i = 0;
    for (; i < n && !h->regs; i++) {
        dedup_status s = dedup_hll_add(h, d[i]);
        if (s)
            return s;
    }
    uint8_t *regs = h->regs;
    const unsigned shift = 64 - h->p;
    for (; i < n; i++) {
        uint32_t reg = (uint32_t)(d[i].hi >> shift);
        uint8_t r = (uint8_t)rank_of(d[i].lo);
        uint8_t old = regs[reg];
        regs[reg] = old > r ? old : r;
    }
    return DEDUP_OK;
}

/* ---- estimate (Ertl 2017, "improved raw estimator") ---------------------- */

/* sigma(x) = x + sum_{k>=1} x^(2^k) 2^(k-1); infinite at x = 1. */
static double ertl_sigma(double x)
{
    if (x == 1.0)
        return INFINITY;
    double y = 1.0, z = x, zp;
    do {
        x *= x;
        zp = z;
        z += x * y;
        y += y;
    } while (z != zp);
    return z;
}

/* tau(x) = (1 - x - sum_{k>=1} (1 - x^(2^-k))^2 2^-k) / 3. */
static double ertl_tau(double x)
{
    if (x == 0.0 || x == 1.0)
        return 0.0;
    double y = 1.0, z = 1.0 - x, zp;
    do {
        x = sqrt(x);
        zp = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
    } while (z != zp);
    return z / 3.0;
}

double dedup_hll_estimate(const dedup_hll *h)
{
    /* Histogram of register values; q = 64 rank bits, values 0 .. q + 1. */
    enum { Q = 64 };
    uint64_t c[Q + 2] = {0};
    uint64_t regs;
    if (h->regs) {
        regs = h->m;
        for (uint64_t i = 0; i < h->m; i++)
            c[h->regs[i]]++;
    } else {
        regs = UINT64_C(1) << SP; /* the sparse form is a sketch of 2^25 registers */
        c[0] = regs - h->nsparse;
        for (size_t i = 0; i < h->nsparse; i++)
            c[SP_VALUE(h->sparse[i])]++;
    }
    const double m = (double)regs;
    double z = m * ertl_tau(1.0 - (double)c[Q + 1] / m);
    for (int k = Q; k >= 1; k--)
        z = 0.5 * (z + (double)c[k]);
    z += m * ertl_sigma((double)c[0] / m);
    if (isinf(z))
        return 0.0; /* every register 0: nothing added */
    const double alpha_inf = 1.0 / (2.0 * log(2.0));
    return alpha_inf * m * m / z;
}

double dedup_hll_std_error(const dedup_hll *h)
{
    return 1.04 / sqrt(h->regs ? (double)h->m : (double)(UINT64_C(1) << SP));
}

uint32_t dedup_hll_precision(const dedup_hll *h) { return h->p; }
uint64_t dedup_hll_seed(const dedup_hll *h) { return h->seed; }
uint64_t dedup_hll_registers(const dedup_hll *h) { return h->m; }
bool dedup_hll_is_sparse(const dedup_hll *h) { return h->regs == NULL; }

unsigned dedup_hll_register(const dedup_hll *h, uint64_t i)
{
    if (i >= h->m)
        return 0;
    if (h->regs)
        return h->regs[i];
    const unsigned down = SP - h->p;
    unsigned v = 0;
    for (size_t j = sparse_find(h, (uint32_t)i << down);
         j < h->nsparse && (SP_INDEX(h->sparse[j]) >> down) == i; j++)
        if (SP_VALUE(h->sparse[j]) > v)
            v = SP_VALUE(h->sparse[j]);
    return v;
}

bool dedup_hll_equal(const dedup_hll *a, const dedup_hll *b)
{
    if (a->p != b->p || a->seed != b->seed)
        return false;
    if (a->regs && b->regs)
        return memcmp(a->regs, b->regs, (size_t)a->m) == 0;
    if (!a->regs && !b->regs)
        return a->nsparse == b->nsparse &&
               (a->nsparse == 0 ||
                memcmp(a->sparse, b->sparse, a->nsparse * sizeof *a->sparse) == 0);
    return false; /* a sparse sketch holds more than its registers */
}

size_t dedup_hll_memory_usage(const dedup_hll *h)
{
    return sizeof *h + (h->regs ? (size_t)h->m + 64 : 0) + h->capsparse * sizeof(uint32_t);
}

void dedup_hll_clear(dedup_hll *h)
{
    if (h->regs)
        memset(h->regs, 0, (size_t)h->m);
    h->nsparse = 0;
}

dedup_status dedup_hll_merge(dedup_hll *dst, const dedup_hll *src, char *why, size_t whycap)
{
    if (!dst || !src)
        return DEDUP_ERR_INVALID_ARG;
    if (dst->p != src->p || dst->seed != src->seed) {
        if (why && whycap && dst->p != src->p)
            snprintf(why, whycap, "precisions differ (%u and %u)", (unsigned)dst->p,
                     (unsigned)src->p);
        else if (why && whycap)
            snprintf(why, whycap, "seeds differ (0x%llx and 0x%llx)",
                     (unsigned long long)dst->seed, (unsigned long long)src->seed);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    if (dst == src)
        return DEDUP_OK;
    if (!src->regs && !dst->regs) {
        /* Both sparse: merge the two sorted lists into a new one; turn dense
         * only when the union has more non-zero registers than the limit. */
        size_t i = 0, j = 0, n = 0;
        while (i < dst->nsparse || j < src->nsparse) {
            if (j == src->nsparse ||
                (i < dst->nsparse && SP_INDEX(dst->sparse[i]) < SP_INDEX(src->sparse[j])))
                i++;
            else if (i == dst->nsparse || SP_INDEX(src->sparse[j]) < SP_INDEX(dst->sparse[i]))
                j++;
            else
                i++, j++;
            n++;
        }
        if (n <= sparse_limit(dst)) {
            uint32_t *out = ddi_malloc(&dst->alloc, (n ? n : 1) * sizeof *out);
            if (!out)
                return DEDUP_ERR_NOMEM;
            i = j = n = 0;
            while (i < dst->nsparse || j < src->nsparse) {
                uint32_t a = i < dst->nsparse ? dst->sparse[i] : UINT32_MAX;
                uint32_t b = j < src->nsparse ? src->sparse[j] : UINT32_MAX;
                if (SP_INDEX(a) < SP_INDEX(b))
                    out[n++] = a, i++;
                else if (SP_INDEX(b) < SP_INDEX(a))
                    out[n++] = b, j++;
                else
                    out[n++] = a > b ? a : b, i++, j++;
            }
            ddi_free(&dst->alloc, dst->sparse);
            dst->sparse = out;
            dst->nsparse = n;
            dst->capsparse = n ? n : 1;
            return DEDUP_OK;
        }
    }
    dedup_status s = dedup_hll_densify(dst);
    if (s)
        return s;
    if (src->regs) {
        for (uint64_t i = 0; i < dst->m; i++)
            if (dst->regs[i] < src->regs[i])
                dst->regs[i] = src->regs[i];
    } else {
        const unsigned down = SP - dst->p;
        for (size_t i = 0; i < src->nsparse; i++) {
            uint32_t reg = SP_INDEX(src->sparse[i]) >> down;
            uint8_t v = (uint8_t)SP_VALUE(src->sparse[i]);
            if (dst->regs[reg] < v)
                dst->regs[reg] = v;
        }
    }
    return DEDUP_OK;
}

/* ---- persistence ------------------------------------------------------------ */

static uint64_t payload_len(const dedup_hll *h)
{
    return h->regs ? h->m : (uint64_t)h->nsparse * 4;
}

dedup_status dedup_hll_save(const dedup_hll *h, dedup_sink *sink)
{
    if (!h || !sink)
        return DEDUP_ERR_INVALID_ARG;
    unsigned char params[PARAMS_LEN];
    dedup_put_u32(params, h->p);
    dedup_put_u32(params + 4, h->regs ? FORM_DENSE : FORM_SPARSE);
    dedup_put_u64(params + 8, h->regs ? 0 : (uint64_t)h->nsparse);
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_HLL, h->seed, params, PARAMS_LEN,
                                         payload_len(h));
    if (s)
        return s;
    if (h->regs) {
        s = dedup_encoder_write(&e, h->regs, (size_t)h->m);
    } else {
        unsigned char buf[1024];
        for (size_t i = 0; i < h->nsparse && !s;) {
            size_t k = 0;
            for (; k < sizeof buf / 4 && i < h->nsparse; k++, i++)
                dedup_put_u32(buf + 4 * k, h->sparse[i]);
            s = dedup_encoder_write(&e, buf, 4 * k);
        }
    }
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

uint64_t dedup_hll_serialized_size(const dedup_hll *h)
{
    return DEDUP_HEADER_SIZE + PARAMS_LEN + payload_len(h) + DEDUP_TRAILER_SIZE;
}

dedup_status dedup_hll_load(dedup_source src, const dedup_allocator *alloc, dedup_hll **out)
{
    if (!out || !src.read)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_decoder decoder, *dec = &decoder;
    dedup_hll *h = NULL;
    dedup_status s = dedup_decoder_begin(dec, src, DEDUP_TYPE_HLL);
    if (s)
        goto done;
    if (dec->header.params_len != PARAMS_LEN) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint32_t p = dedup_get_u32(dec->params);
    uint32_t form = dedup_get_u32(dec->params + 4);
    uint64_t entries = dedup_get_u64(dec->params + 8);
    if (p < DEDUP_HLL_MIN_PRECISION || p > DEDUP_HLL_MAX_PRECISION || form > FORM_SPARSE) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t m = UINT64_C(1) << p;
    if ((form == FORM_DENSE && (entries != 0 || dec->header.payload_len != m)) ||
        (form == FORM_SPARSE && (entries > m / 8 || dec->header.payload_len != entries * 4))) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    h = hll_new(p, dec->header.seed, &a);
    if (!h) {
        s = DEDUP_ERR_NOMEM;
        goto done;
    }
    if (form == FORM_DENSE) {
        h->regs = ddi_aligned_calloc(&a, (size_t)m, 64, &h->regs_raw);
        if (!h->regs) {
            s = DEDUP_ERR_NOMEM;
            goto done;
        }
        s = dedup_decoder_read(dec, h->regs, (size_t)m);
        for (uint64_t i = 0; !s && i < m; i++)
            if (h->regs[i] > DEDUP_HLL_MAX_RANK)
                s = DEDUP_ERR_CORRUPT;
    } else if (entries) {
        h->sparse = ddi_malloc(&a, (size_t)entries * sizeof *h->sparse);
        if (!h->sparse) {
            s = DEDUP_ERR_NOMEM;
            goto done;
        }
        h->capsparse = (size_t)entries;
        unsigned char buf[1024];
        for (uint64_t i = 0; i < entries && !s;) {
            size_t k = (size_t)(entries - i < sizeof buf / 4 ? entries - i : sizeof buf / 4);
            s = dedup_decoder_read(dec, buf, 4 * k);
            for (size_t j = 0; !s && j < k; j++, i++) {
                uint32_t e = dedup_get_u32(buf + 4 * j);
                uint32_t v = SP_VALUE(e);
                if (v == 0 || v > DEDUP_HLL_MAX_RANK ||
                    (i > 0 && SP_INDEX(e) <= SP_INDEX(h->sparse[i - 1])))
                    s = DEDUP_ERR_CORRUPT; /* zero, too large, or not increasing */
                else
                    h->sparse[i] = e;
            }
        }
        h->nsparse = (size_t)entries;
    }
    if (!s)
        s = dedup_decoder_end(dec);
done:
    if (s) {
        dedup_hll_free(h);
        return s;
    }
    *out = h;
    return DEDUP_OK;
}

static dedup_status save_cb(const void *obj, dedup_sink *sink) { return dedup_hll_save(obj, sink); }

dedup_status dedup_hll_save_file(const dedup_hll *h, const char *path)
{
    if (!h || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_cb, h);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_hll *x = NULL;
    dedup_status s = dedup_hll_load(src, alloc, &x);
    *out = x;
    return s;
}

static void free_any(void *obj) { dedup_hll_free(obj); }

dedup_status dedup_hll_load_file(const char *path, const dedup_allocator *alloc, dedup_hll **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    void *obj = NULL;
    dedup_status s = ddi_load_file(path, alloc, load_any, free_any, &obj);
    *out = obj;
    return s;
}
