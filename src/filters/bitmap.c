/*
 * bitmap.c - dense bitset (include/dedup/bitmap.h).
 *
 * Words are 64-bit, 64-byte aligned.  Bits at and above the size in the
 * last word are kept zero by every operation (set/clear check the index;
 * and/or/xor of equal-sized bitmaps cannot create them), so popcount needs
 * no masking and a loader can reject a file that sets them.
 *
 * The origin (the integer bit 0 stands for) rides along for callers that
 * map integers onto bits; nothing here but the file and the and/or/xor
 * shape check reads it.
 */
#include "dedup/bitmap.h"

#include "dedup/limits.h"
#include "internal.h"

/* Params layouts: 1 = nbits (8 bytes, origin 0; still read), 2 = nbits,
 * origin (16 bytes; written). */
#define PARAMS_LEN_V1 8u
#define PARAMS_LEN 16u

struct dedup_bitmap {
    uint64_t *words;
    void *raw;
    uint64_t nbits;
    uint64_t nwords;
    uint64_t origin;
    dedup_allocator alloc;
};

void dedup_bitmap_params_init(dedup_bitmap_params *params)
{
    params->nbits = 0;
    params->origin = 0;
}

/* origin + nbits - 1 fits in 64 bits (nbits >= 1). */
static bool origin_fits(uint64_t origin, uint64_t nbits) { return nbits - 1 <= UINT64_MAX - origin; }

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
    bm->origin = 0;
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
    if (!origin_fits(params->origin, params->nbits))
        return DEDUP_ERR_INVALID_ARG;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_status s = bitmap_alloc(params->nbits, &a, out);
    if (!s)
        (*out)->origin = params->origin;
    return s;
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

uint64_t dedup_bitmap_origin(const dedup_bitmap *bm) { return bm->origin; }

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

uint64_t dedup_bitmap_next_set(const dedup_bitmap *bm, uint64_t from)
{
    if (from >= bm->nbits)
        return bm->nbits;
    uint64_t w = from >> 6;
    uint64_t x = bm->words[w] & (~UINT64_C(0) << (from & 63));
    while (x == 0) {
        if (++w == bm->nwords)
            return bm->nbits;
        x = bm->words[w];
    }
    return w * 64 + (uint64_t)__builtin_ctzll(x); /* bits past the size are 0 */
}

uint64_t dedup_bitmap_next_clear(const dedup_bitmap *bm, uint64_t from)
{
    if (from >= bm->nbits)
        return bm->nbits;
    uint64_t w = from >> 6;
    uint64_t x = ~bm->words[w] & (~UINT64_C(0) << (from & 63));
    while (x == 0) {
        if (++w == bm->nwords)
            return bm->nbits;
        x = ~bm->words[w];
    }
    uint64_t i = w * 64 + (uint64_t)__builtin_ctzll(x);
    return i < bm->nbits ? i : bm->nbits; /* the clear bits past the size do not count */
}

dedup_status dedup_bitmap_count_range(const dedup_bitmap *bm, uint64_t from, uint64_t to,
                                      uint64_t *count)
{
    if (count)
        *count = 0;
    if (!bm || !count)
        return DEDUP_ERR_INVALID_ARG;
    if (from > to || to > bm->nbits)
        return DEDUP_ERR_RANGE;
    if (from == to)
        return DEDUP_OK;
    uint64_t fw = from >> 6, lw = (to - 1) >> 6;
    uint64_t first = ~UINT64_C(0) << (from & 63);
    uint64_t last = ~UINT64_C(0) >> (63 - ((to - 1) & 63));
    uint64_t c;
    if (fw == lw) {
        c = (uint64_t)__builtin_popcountll(bm->words[fw] & first & last);
    } else {
        c = (uint64_t)__builtin_popcountll(bm->words[fw] & first) +
            (uint64_t)__builtin_popcountll(bm->words[lw] & last);
        for (uint64_t w = fw + 1; w < lw; w++)
            c += (uint64_t)__builtin_popcountll(bm->words[w]);
    }
    *count = c;
    return DEDUP_OK;
}

/* A byte with its bits in the other order (bit 0 <-> bit 7 ...). */
static inline unsigned char reverse8(unsigned char b)
{
    b = (unsigned char)((b & 0xF0) >> 4 | (b & 0x0F) << 4);
    b = (unsigned char)((b & 0xCC) >> 2 | (b & 0x33) << 2);
    return (unsigned char)((b & 0xAA) >> 1 | (b & 0x55) << 1);
}

uint64_t dedup_bitmap_redis_bytes(const dedup_bitmap *bm) { return (bm->nbits + 7) / 8; }

dedup_status dedup_bitmap_export_redis(const dedup_bitmap *bm, void *buf, size_t cap)
{
    if (!bm || (!buf && cap))
        return DEDUP_ERR_INVALID_ARG;
    uint64_t n = dedup_bitmap_redis_bytes(bm);
    if (cap < n)
        return DEDUP_ERR_FULL;
    unsigned char *out = buf;
    for (uint64_t i = 0; i < n; i++)
        out[i] = reverse8((unsigned char)(bm->words[i >> 3] >> ((i & 7) * 8)));
    return DEDUP_OK;
}

dedup_status dedup_bitmap_import_redis(const void *bytes, size_t len, uint64_t nbits,
                                       const dedup_allocator *alloc, dedup_bitmap **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if ((!bytes && len) || nbits == 0)
        return DEDUP_ERR_INVALID_ARG;
    if (nbits > DEDUP_MAX_BITS)
        return DEDUP_ERR_LIMIT;
    if (len > (nbits + 7) / 8)
        return DEDUP_ERR_RANGE;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_bitmap *bm = NULL;
    dedup_status s = bitmap_alloc(nbits, &a, &bm);
    if (s)
        return s;
    const unsigned char *in = bytes;
    for (size_t i = 0; i < len; i++)
        bm->words[i >> 3] |= (uint64_t)reverse8(in[i]) << ((i & 7) * 8);
    if (nbits % 64 != 0 && (bm->words[bm->nwords - 1] >> (nbits % 64)) != 0) {
        dedup_bitmap_free(bm); /* a bit set past the size */
        return DEDUP_ERR_RANGE;
    }
    *out = bm;
    return DEDUP_OK;
}

void dedup_bitmap_clear_all(dedup_bitmap *bm) { memset(bm->words, 0, (size_t)bm->nwords * 8); }

#define BITMAP_OP(name, op)                                                            \
    dedup_status dedup_bitmap_##name(dedup_bitmap *dst, const dedup_bitmap *src)       \
    {                                                                                  \
        if (!dst || !src)                                                              \
            return DEDUP_ERR_INVALID_ARG;                                              \
        if (dst->nbits != src->nbits || dst->origin != src->origin)                    \
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
    dedup_put_u64(params + 8, bm->origin);
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
    uint32_t plen = dec->header.params_len;
    if (plen != PARAMS_LEN && plen != PARAMS_LEN_V1) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t nbits = dedup_get_u64(dec->params);
    uint64_t origin = plen == PARAMS_LEN ? dedup_get_u64(dec->params + 8) : 0;
    if (nbits == 0 || !origin_fits(origin, nbits)) {
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
    bm->origin = origin;
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
