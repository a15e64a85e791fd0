/*
 * bitmap.c - dense bitset (include/dedup/bitmap.h).
 *
 * Words are 64-bit, 64-byte aligned.  Bits at and above the size in the
 * last word are kept zero by every operation (set/clear check the index;
 * and/or/xor of equal-sized bitmaps cannot create them), so popcount needs
 * no masking and a loader can reject a file that sets them.
 */
#include "dedup/bitmap.h"

#include "dedup/limits.h"
#include "internal.h"

#define PARAMS_LEN 8u

struct dedup_bitmap {
    uint64_t *words;
    void *raw;
    uint64_t nbits;
    uint64_t nwords;
    dedup_allocator alloc;
};

void dedup_bitmap_params_init(dedup_bitmap_params *params) { params->nbits = 0; }

static dedup_status bitmap_alloc(uint64_t nbits, const dedup_allocator *a, dedup_bitmap **out)
{
    uint64_t nwords = (nbits + 63) / 64;
    size_t bytes;
    if (nwords > SIZE_MAX / 8 || !ddi_mul_size((size_t)nwords, 8, &bytes))
        return DEDUP_ERR_LIMIT;
    dedup_bitmap *bm = ddi_malloc(a, sizeof *bm);
    if (!bm)
        return DEDUP_ERR_NOMEM;
    bm->alloc = *a;
    bm->words = ddi_aligned_calloc(a, bytes, 64, &bm->raw);
    if (!bm->words) {
        ddi_free(a, bm);
        return DEDUP_ERR_NOMEM;
    }
    bm->nbits = nbits;
    bm->nwords = nwords;
    *out = bm;
    return DEDUP_OK;
}

dedup_status dedup_bitmap_create(const dedup_bitmap_params *params, const dedup_allocator *alloc,
                                 dedup_bitmap **out)
{
    if (!params || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (params->nbits == 0)
        return DEDUP_ERR_INVALID_ARG;
    if (params->nbits > DEDUP_MAX_BITS)
        return DEDUP_ERR_LIMIT;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    return bitmap_alloc(params->nbits, &a, out);
}

void dedup_bitmap_free(dedup_bitmap *bm)
{
    if (!bm)
        return;
    dedup_allocator a = bm->alloc;
    ddi_free(&a, bm->raw);
    ddi_free(&a, bm);
}

uint64_t dedup_bitmap_size(const dedup_bitmap *bm) { return bm->nbits; }

dedup_status dedup_bitmap_set(dedup_bitmap *bm, uint64_t i)
{
    if (i >= bm->nbits)
        return DEDUP_ERR_RANGE;
    bm->words[i >> 6] |= UINT64_C(1) << (i & 63);
    return DEDUP_OK;
}

dedup_status dedup_bitmap_clear(dedup_bitmap *bm, uint64_t i)
{
    if (i >= bm->nbits)
        return DEDUP_ERR_RANGE;
    bm->words[i >> 6] &= ~(UINT64_C(1) << (i & 63));
    return DEDUP_OK;
}

dedup_status dedup_bitmap_get(const dedup_bitmap *bm, uint64_t i, bool *value)
{
    if (i >= bm->nbits) {
        if (value)
            *value = false;
        return DEDUP_ERR_RANGE;
    }
    if (value)
        *value = (bm->words[i >> 6] >> (i & 63)) & 1;
    return DEDUP_OK;
}

dedup_status dedup_bitmap_test_and_set(dedup_bitmap *bm, uint64_t i, bool *was_set)
{
    if (i >= bm->nbits) {
        if (was_set)
            *was_set = false;
        return DEDUP_ERR_RANGE;
    }
    uint64_t bit = UINT64_C(1) << (i & 63);
    uint64_t old = bm->words[i >> 6];
    bm->words[i >> 6] = old | bit;
    if (was_set)
        *was_set = (old & bit) != 0;
    return DEDUP_OK;
}

uint64_t dedup_bitmap_popcount(const dedup_bitmap *bm)
{
    uint64_t c = 0;
    for (uint64_t i = 0; i < bm->nwords; i++)
        c += (uint64_t)__builtin_popcountll(bm->words[i]);
    return c;
}

void dedup_bitmap_clear_all(dedup_bitmap *bm) { memset(bm->words, 0, (size_t)bm->nwords * 8); }

#define BITMAP_OP(name, op)                                                            \
    dedup_status dedup_bitmap_##name(dedup_bitmap *dst, const dedup_bitmap *src)       \
    {                                                                                  \
        if (!dst || !src)                                                              \
            return DEDUP_ERR_INVALID_ARG;                                              \
        if (dst->nbits != src->nbits)                                                  \
            return DEDUP_ERR_INCOMPATIBLE;                                             \
        uint64_t *d = dst->words;                                                      \
        const uint64_t *s = src->words;                                                \
        for (uint64_t i = 0; i < dst->nwords; i++)                                     \
            d[i] = d[i] op s[i];                                                       \
        return DEDUP_OK;                                                               \
    }
BITMAP_OP(and, &)
BITMAP_OP(or, |)
BITMAP_OP(xor, ^)

size_t dedup_bitmap_memory_usage(const dedup_bitmap *bm)
{
    return sizeof *bm + (size_t)bm->nwords * 8 + 64;
}

/* ---- persistence ---------------------------------------------------------- */

dedup_status dedup_bitmap_save(const dedup_bitmap *bm, dedup_sink *sink)
{
    if (!bm || !sink)
        return DEDUP_ERR_INVALID_ARG;
    unsigned char params[PARAMS_LEN];
    dedup_put_u64(params, bm->nbits);
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_BITMAP, 0, params, PARAMS_LEN,
                                         bm->nwords * 8);
    if (!s)
        s = dedup_encoder_write_u64s(&e, bm->words, (size_t)bm->nwords);
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

uint64_t dedup_bitmap_serialized_size(const dedup_bitmap *bm)
{
    return DEDUP_HEADER_SIZE + PARAMS_LEN + bm->nwords * 8 + DEDUP_TRAILER_SIZE;
}

dedup_status dedup_bitmap_load(dedup_source src, const dedup_allocator *alloc,
                               dedup_bitmap **out)
{
    if (!out || !src.read)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_decoder decoder, *dec = &decoder; /* ~5 KB; 64-byte aligned */
    dedup_bitmap *bm = NULL;
    dedup_status s = dedup_decoder_begin(dec, src, DEDUP_TYPE_BITMAP);
    if (s)
        goto done;
    if (dec->header.params_len != PARAMS_LEN) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t nbits = dedup_get_u64(dec->params);
    if (nbits == 0) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    if (nbits > DEDUP_MAX_BITS) {
        s = DEDUP_ERR_LIMIT;
        goto done;
    }
    uint64_t nwords = (nbits + 63) / 64;
    if (dec->header.payload_len != nwords * 8) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    s = bitmap_alloc(nbits, &a, &bm);
    if (s)
        goto done;
    s = dedup_decoder_read_u64s(dec, bm->words, (size_t)nwords);
    if (!s)
        s = dedup_decoder_end(dec);
    if (!s && nbits % 64 != 0 && (bm->words[nwords - 1] >> (nbits % 64)) != 0)
        s = DEDUP_ERR_CORRUPT; /* bits beyond the size are never set */
done:
    if (s) {
        dedup_bitmap_free(bm);
        return s;
    }
    *out = bm;
    return DEDUP_OK;
}

static dedup_status save_cb(const void *obj, dedup_sink *sink)
{
    return dedup_bitmap_save(obj, sink);
}

dedup_status dedup_bitmap_save_file(const dedup_bitmap *bm, const char *path)
{
    if (!bm || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_cb, bm);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_bitmap *x = NULL;
    dedup_status s = dedup_bitmap_load(src, alloc, &x);
    *out = x;
    return s;
}

static void free_any(void *obj) { dedup_bitmap_free(obj); }

dedup_status dedup_bitmap_load_file(const char *path, const dedup_allocator *alloc,
                                dedup_bitmap **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    void *obj = NULL;
    dedup_status s = ddi_load_file(path, alloc, load_any, free_any, &obj);
    *out = obj;
    return s;
}
