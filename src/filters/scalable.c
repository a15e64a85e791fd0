/*
 * scalable.c - scalable Bloom filter: a chain of dedup_bloom links with
 * growing capacity and tightening rates whose sum is the caller's p.
 *
 * Each link is a plain dedup_bloom created from (n_i, p_i), so sizing, probe
 * derivation and persistence of a link are exactly those of bloom.c.  In a
 * file the links are embedded as complete Bloom containers, read through a
 * source that draws from the outer container's payload (so the outer
 * checksum covers them too, and no link can read past the payload).
 */
#include "dedup/scalable.h"

#include "dedup/limits.h"
#include "internal.h"

#include <math.h>

typedef struct sc_link {
    dedup_bloom *bf;
    uint64_t capacity; /* n_i */
    uint64_t items;    /* new keys added here */
    double fpr;        /* p_i */
} sc_link;

struct dedup_scalable {
    dedup_allocator alloc;
    dedup_bloom_kind kind;
    uint64_t capacity0;
    double fpr;
    uint32_t growth;
    double tightening;
    uint32_t max_links;
    uint64_t seed;
    uint64_t items;
    uint32_t nlinks;
    sc_link links[DEDUP_MAX_CHAIN];
};

void dedup_scalable_params_init(dedup_scalable_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof *params);
    params->kind = DEDUP_BLOOM_CLASSIC;
    params->capacity = DEDUP_SCALABLE_DEFAULT_CAPACITY;
    params->fpr = 0.01;
    params->growth = DEDUP_SCALABLE_DEFAULT_GROWTH;
    params->tightening = DEDUP_SCALABLE_DEFAULT_TIGHTENING;
    params->max_links = DEDUP_MAX_CHAIN;
    params->seed = DEDUP_DEFAULT_SEED;
}

static bool fpr_ok(double p)
{
    return p >= DEDUP_MIN_FPR && p < 1.0;
}

static bool shape_ok(dedup_bloom_kind kind, uint64_t cap0, double p, uint32_t growth, double r,
                     uint32_t max_links)
{
    return (kind == DEDUP_BLOOM_CLASSIC || kind == DEDUP_BLOOM_BLOCKED) && cap0 >= 1 &&
           fpr_ok(p) && growth >= 1 && growth <= DEDUP_SCALABLE_MAX_GROWTH && r > 0.0 &&
           r < 1.0 && max_links >= 1 && max_links <= DEDUP_MAX_CHAIN;
}

double dedup_scalable_link_fpr(double p, double tightening, uint32_t max_links, uint32_t link)
{
    if (!(p > 0.0 && p < 1.0) || !(tightening > 0.0 && tightening < 1.0) || max_links == 0 ||
        link >= max_links)
        return 0.0;
    return p * (1.0 - tightening) * pow(tightening, (double)link) /
           (1.0 - pow(tightening, (double)max_links));
}

/* n_i = capacity0 * growth^i; false on overflow. */
static bool link_capacity(uint64_t cap0, uint32_t growth, uint32_t i, uint64_t *out)
{
    uint64_t n = cap0;
    for (uint32_t t = 0; t < i; t++)
        if (__builtin_mul_overflow(n, (uint64_t)growth, &n))
            return false;
    *out = n;
    return true;
}

/* Appends link number sb->nlinks. */
static dedup_status add_link(dedup_scalable *sb)
{
    uint32_t i = sb->nlinks;
    if (i >= sb->max_links)
        return DEDUP_ERR_FULL;
    uint64_t cap;
    if (!link_capacity(sb->capacity0, sb->growth, i, &cap))
        return DEDUP_ERR_LIMIT;
    double p = dedup_scalable_link_fpr(sb->fpr, sb->tightening, sb->max_links, i);
    if (!fpr_ok(p))
        return DEDUP_ERR_LIMIT;
    dedup_bloom_params bp;
    dedup_bloom_params_init(&bp);
    bp.kind = sb->kind;
    bp.capacity = cap;
    bp.fpr = p;
    bp.seed = sb->seed;
    if (sb->kind == DEDUP_BLOOM_CLASSIC) {
        /* m = dedup_bloom_bits_for(n, p) is the optimum for a real-valued
         * k; with k rounded to an integer the rate at capacity can exceed p
         * by a percent or two.  The chain's bound is a promise, so grow m
         * (by 1/512 steps) until the exact rate with the integer k is
         * within p_i. */
        uint64_t m = dedup_bloom_bits_for(cap, p);
        if (m == 0 || m > DEDUP_MAX_BITS)
            return DEDUP_ERR_LIMIT;
        while (dedup_bloom_fpr_for(cap, m, dedup_bloom_k_for(cap, m)) > p && m <= DEDUP_MAX_BITS)
            m += m / 512 + 1;
        if (m > DEDUP_MAX_BITS)
            return DEDUP_ERR_LIMIT;
        bp.bits = m;
    }
    dedup_bloom *bf = NULL;
    dedup_status s = dedup_bloom_create(&bp, &sb->alloc, &bf);
    if (s)
        return s == DEDUP_ERR_INVALID_ARG ? DEDUP_ERR_LIMIT : s;
    sb->links[i].bf = bf;
    sb->links[i].capacity = cap;
    sb->links[i].items = 0;
    sb->links[i].fpr = p;
    sb->nlinks = i + 1;
    return DEDUP_OK;
}

static dedup_scalable *new_chain(const dedup_allocator *alloc, dedup_bloom_kind kind,
                                 uint64_t cap0, double p, uint32_t growth, double r,
                                 uint32_t max_links, uint64_t seed)
{
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_scalable *sb = ddi_calloc(&a, 1, sizeof *sb);
    if (!sb)
        return NULL;
    sb->alloc = a;
    sb->kind = kind;
    sb->capacity0 = cap0;
    sb->fpr = p;
    sb->growth = growth;
    sb->tightening = r;
    sb->max_links = max_links;
    sb->seed = seed;
    return sb;
}

dedup_status dedup_scalable_create(const dedup_scalable_params *params,
                                   const dedup_allocator *alloc, dedup_scalable **out)
{
    if (!params || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (!shape_ok(params->kind, params->capacity, params->fpr, params->growth,
                  params->tightening, params->max_links))
        return DEDUP_ERR_INVALID_ARG;
    dedup_scalable *sb = new_chain(alloc, params->kind, params->capacity, params->fpr,
                                   params->growth, params->tightening, params->max_links,
                                   params->seed);
    if (!sb)
        return DEDUP_ERR_NOMEM;
    dedup_status s = add_link(sb);
    if (s) {
        dedup_scalable_free(sb);
        return s == DEDUP_ERR_FULL ? DEDUP_ERR_LIMIT : s;
    }
    *out = sb;
    return DEDUP_OK;
}

void dedup_scalable_free(dedup_scalable *sb)
{
    if (!sb)
        return;
    for (uint32_t i = 0; i < sb->nlinks; i++)
        dedup_bloom_free(sb->links[i].bf);
    dedup_allocator a = sb->alloc;
    ddi_free(&a, sb);
}

dedup_digest dedup_scalable_digest(const dedup_scalable *sb, const void *key, size_t len)
{
    return dedup_hash(key, len, sb->seed);
}

/* ---- operations --------------------------------------------------------------- */

bool dedup_scalable_might_contain(const dedup_scalable *sb, dedup_digest d)
{
    for (uint32_t i = sb->nlinks; i-- > 0;)
        if (dedup_bloom_might_contain(sb->links[i].bf, d))
            return true;
    return false;
}

dedup_status dedup_scalable_test_and_add(dedup_scalable *sb, dedup_digest d,
                                         dedup_verdict *verdict)
{
    if (dedup_scalable_might_contain(sb, d)) {
        if (verdict)
            *verdict = DEDUP_MAYBE_DUPLICATE;
        return DEDUP_OK;
    }
    sc_link *cur = &sb->links[sb->nlinks - 1];
    if (cur->items >= cur->capacity) {
        dedup_status s = add_link(sb);
        if (s)
            return s;
        cur = &sb->links[sb->nlinks - 1];
    }
    dedup_bloom_add(cur->bf, d);
    cur->items++;
    sb->items++;
    if (verdict)
        *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

dedup_status dedup_scalable_add(dedup_scalable *sb, dedup_digest d)
{
    dedup_verdict v;
    return dedup_scalable_test_and_add(sb, d, &v);
}

void dedup_scalable_might_contain_batch(const dedup_scalable *sb, const dedup_digest *d,
                                        size_t n, bool *out)
{
    enum { CHUNK = 256 };
    bool tmp[CHUNK];
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t m = n - off < CHUNK ? n - off : CHUNK;
        dedup_bloom_might_contain_batch(sb->links[sb->nlinks - 1].bf, d + off, m, out + off);
        for (uint32_t i = sb->nlinks - 1; i-- > 0;) {
            dedup_bloom_might_contain_batch(sb->links[i].bf, d + off, m, tmp);
            for (size_t j = 0; j < m; j++)
                out[off + j] |= tmp[j];
        }
    }
}

dedup_status dedup_scalable_test_and_add_batch(dedup_scalable *sb, const dedup_digest *d,
                                               size_t n, dedup_verdict *out, size_t *done)
{
    enum { CHUNK = 256 };
    bool pre[CHUNK];
    dedup_status s = DEDUP_OK;
    size_t off;
    for (off = 0; off < n; off += CHUNK) {
        size_t m = n - off < CHUNK ? n - off : CHUNK;
        /* Only the newest link (and links appended during this chunk)
         * change while the chunk is processed; every key that the batch
         * query finds absent is checked again there, in order. */
        uint32_t changing = sb->nlinks - 1;
        dedup_scalable_might_contain_batch(sb, d + off, m, pre);
        for (size_t j = 0; j < m; j++) {
            bool hit = pre[j];
            for (uint32_t i = sb->nlinks; !hit && i-- > changing;)
                hit = dedup_bloom_might_contain(sb->links[i].bf, d[off + j]);
            if (hit) {
                out[off + j] = DEDUP_MAYBE_DUPLICATE;
                continue;
            }
            sc_link *cur = &sb->links[sb->nlinks - 1];
            if (cur->items >= cur->capacity) {
                s = add_link(sb);
                if (s) {
                    off += j;
                    goto done;
                }
                cur = &sb->links[sb->nlinks - 1];
            }
            dedup_bloom_add(cur->bf, d[off + j]);
            cur->items++;
            sb->items++;
            out[off + j] = DEDUP_NEW;
        }
    }
    off = n;
done:
    if (done)
        *done = off;
    return s;
}

dedup_status dedup_scalable_test_and_add_key(dedup_scalable *sb, const void *key, size_t len,
                                             dedup_verdict *verdict)
{
    return dedup_scalable_test_and_add(sb, dedup_hash(key, len, sb->seed), verdict);
}
dedup_status dedup_scalable_add_key(dedup_scalable *sb, const void *key, size_t len)
{
    return dedup_scalable_add(sb, dedup_hash(key, len, sb->seed));
}
bool dedup_scalable_might_contain_key(const dedup_scalable *sb, const void *key, size_t len)
{
    return dedup_scalable_might_contain(sb, dedup_hash(key, len, sb->seed));
}

/* ---- shape and state ------------------------------------------------------------- */

size_t dedup_scalable_memory_usage(const dedup_scalable *sb)
{
    size_t m = sizeof *sb;
    for (uint32_t i = 0; i < sb->nlinks; i++)
        m += dedup_bloom_memory_usage(sb->links[i].bf);
    return m;
}

void dedup_scalable_get_info(const dedup_scalable *sb, dedup_scalable_info *info)
{
    memset(info, 0, sizeof *info);
    info->kind = sb->kind;
    info->links = sb->nlinks;
    info->max_links = sb->max_links;
    info->growth = sb->growth;
    info->tightening = sb->tightening;
    info->fpr = sb->fpr;
    info->initial_capacity = sb->capacity0;
    info->items = sb->items;
    info->seed = sb->seed;
    double pass = 1.0;
    for (uint32_t i = 0; i < sb->nlinks; i++) {
        const sc_link *l = &sb->links[i];
        info->fpr_bound += l->fpr;
        info->capacity += l->capacity;
        info->bits += dedup_bloom_bits(l->bf);
        pass *= 1.0 - dedup_bloom_current_fpr(l->bf);
    }
    info->fpr_current = 1.0 - pass;
    info->memory = dedup_scalable_memory_usage(sb);
}

dedup_status dedup_scalable_get_link_info(const dedup_scalable *sb, uint32_t link,
                                          dedup_scalable_link_info *info)
{
    if (!sb || !info || link >= sb->nlinks)
        return DEDUP_ERR_RANGE;
    const sc_link *l = &sb->links[link];
    info->capacity = l->capacity;
    info->items = l->items;
    info->bits = dedup_bloom_bits(l->bf);
    info->k = dedup_bloom_k(l->bf);
    info->fpr = l->fpr;
    info->fpr_current = dedup_bloom_current_fpr(l->bf);
    info->memory = dedup_bloom_memory_usage(l->bf);
    return DEDUP_OK;
}

const dedup_bloom *dedup_scalable_link(const dedup_scalable *sb, uint32_t link)
{
    return sb && link < sb->nlinks ? sb->links[link].bf : NULL;
}

void dedup_scalable_clear(dedup_scalable *sb)
{
    for (uint32_t i = 1; i < sb->nlinks; i++) {
        dedup_bloom_free(sb->links[i].bf);
        memset(&sb->links[i], 0, sizeof sb->links[i]);
    }
    sb->nlinks = 1;
    dedup_bloom_clear(sb->links[0].bf);
    sb->links[0].items = 0;
    sb->items = 0;
}

/* ---- persistence ---------------------------------------------------------------------
 * params (56 + 40 * links bytes):
 *   0 u32 kind   4 u32 links   8 u32 growth   12 u32 max_links
 *   16 u64 initial capacity   24 f64 fpr   32 f64 tightening   40 u64 items
 *   48 u64 reserved (0)
 *   56 + 40*t: u64 capacity, u64 items, u64 bits, u32 k, u32 reserved (0), f64 fpr
 * payload: each link as a complete Bloom container (type BLOOM or
 * BLOCKED_BLOOM, same seed), in link order. */
#define FIXED_LEN 56u
#define LINK_LEN 40u

typedef struct enc_ctx { dedup_encoder *e; } enc_ctx;
static dedup_status sub_write(void *ctx, const void *buf, size_t len)
{
    return dedup_encoder_write(((enc_ctx *)ctx)->e, buf, len);
}

typedef struct dec_ctx { dedup_decoder *d; } dec_ctx;
static dedup_status sub_read(void *ctx, void *buf, size_t len)
{
    return dedup_decoder_read(((dec_ctx *)ctx)->d, buf, len);
}
static uint64_t sub_remaining(void *ctx)
{
    const dedup_decoder *d = ((dec_ctx *)ctx)->d;
    return d->header.payload_len - d->consumed;
}

dedup_status dedup_scalable_save(const dedup_scalable *sb, dedup_sink *sink)
{
    if (!sb || !sink)
        return DEDUP_ERR_INVALID_ARG;
    unsigned char p[FIXED_LEN + LINK_LEN * DEDUP_MAX_CHAIN];
    uint32_t plen = FIXED_LEN + LINK_LEN * sb->nlinks;
    memset(p, 0, plen);
    dedup_put_u32(p, (uint32_t)sb->kind);
    dedup_put_u32(p + 4, sb->nlinks);
    dedup_put_u32(p + 8, sb->growth);
    dedup_put_u32(p + 12, sb->max_links);
    dedup_put_u64(p + 16, sb->capacity0);
    dedup_put_f64(p + 24, sb->fpr);
    dedup_put_f64(p + 32, sb->tightening);
    dedup_put_u64(p + 40, sb->items);
    uint64_t payload = 0;
    for (uint32_t i = 0; i < sb->nlinks; i++) {
        unsigned char *lp = p + FIXED_LEN + LINK_LEN * i;
        const sc_link *l = &sb->links[i];
        dedup_put_u64(lp, l->capacity);
        dedup_put_u64(lp + 8, l->items);
        dedup_put_u64(lp + 16, dedup_bloom_bits(l->bf));
        dedup_put_u32(lp + 24, dedup_bloom_k(l->bf));
        dedup_put_f64(lp + 32, l->fpr);
        payload += dedup_bloom_serialized_size(l->bf);
    }
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_SCALABLE_BLOOM, sb->seed, p, plen,
                                         payload);
    enc_ctx ec = {&e};
    dedup_sink sub = {sub_write, &ec};
    for (uint32_t i = 0; !s && i < sb->nlinks; i++)
        s = dedup_bloom_save(sb->links[i].bf, &sub);
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

uint64_t dedup_scalable_serialized_size(const dedup_scalable *sb)
{
    uint64_t n = DEDUP_HEADER_SIZE + FIXED_LEN + LINK_LEN * sb->nlinks + DEDUP_TRAILER_SIZE;
    for (uint32_t i = 0; i < sb->nlinks; i++)
        n += dedup_bloom_serialized_size(sb->links[i].bf);
    return n;
}

static bool close_enough(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fabs(b);
}

dedup_status dedup_scalable_load(dedup_source src, const dedup_allocator *alloc,
                                 dedup_scalable **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    /* On the stack: the decoder needs 64-byte alignment (about 5 KB). */
    dedup_decoder decoder, *dec = &decoder;
    dedup_scalable *sb = NULL;
    dedup_status s = dedup_decoder_begin(dec, src, DEDUP_TYPE_SCALABLE_BLOOM);
    if (s)
        return s;
    s = DEDUP_ERR_CORRUPT;
    const unsigned char *p = dec->params;
    if (dec->header.params_len < FIXED_LEN)
        return s;
    uint32_t kind = dedup_get_u32(p), links = dedup_get_u32(p + 4);
    uint32_t growth = dedup_get_u32(p + 8), max_links = dedup_get_u32(p + 12);
    uint64_t cap0 = dedup_get_u64(p + 16), items = dedup_get_u64(p + 40);
    double fpr = dedup_get_f64(p + 24), r = dedup_get_f64(p + 32);
    if (!shape_ok((dedup_bloom_kind)kind, cap0, fpr, growth, r, max_links) || links == 0 ||
        links > max_links || dedup_get_u64(p + 48) != 0 ||
        dec->header.params_len != FIXED_LEN + LINK_LEN * links)
        return s;
    /* Every link: its capacity and rate are implied by the chain's shape;
     * all but the last are full; the counts add up. */
    uint64_t sum = 0;
    for (uint32_t i = 0; i < links; i++) {
        const unsigned char *lp = p + FIXED_LEN + LINK_LEN * i;
        uint64_t cap, lit = dedup_get_u64(lp + 8), bits = dedup_get_u64(lp + 16);
        uint32_t k = dedup_get_u32(lp + 24);
        if (!link_capacity(cap0, growth, i, &cap) || dedup_get_u64(lp) != cap || lit > cap ||
            (i + 1 < links && lit != cap) || bits == 0 || k == 0 || k > DEDUP_MAX_BLOOM_K ||
            dedup_get_u32(lp + 28) != 0 ||
            !close_enough(dedup_get_f64(lp + 32), dedup_scalable_link_fpr(fpr, r, max_links, i)) ||
            !fpr_ok(dedup_get_f64(lp + 32)))
            return s;
        if (bits > DEDUP_MAX_BITS)
            return DEDUP_ERR_LIMIT;
        /* a link's bit array alone needs bits/8 bytes of payload */
        if (bits / 8 > dec->header.payload_len)
            return DEDUP_ERR_CORRUPT;
        sum += lit;
    }
    if (sum != items)
        return s;
    sb = new_chain(alloc, (dedup_bloom_kind)kind, cap0, fpr, growth, r, max_links,
                   dec->header.seed);
    if (!sb)
        return DEDUP_ERR_NOMEM;
    sb->items = items;
    dec_ctx dc = {dec};
    dedup_source sub = {sub_read, sub_remaining, &dc};
    for (uint32_t i = 0; i < links; i++) {
        const unsigned char *lp = p + FIXED_LEN + LINK_LEN * i;
        if (sub_remaining(&dc) < DEDUP_HEADER_SIZE) {
            s = DEDUP_ERR_CORRUPT;
            goto fail;
        }
        /* The embedded container must be a Bloom filter of the chain's
         * layout, seed and declared shape (checked once it is parsed). */
        dedup_bloom *bf = NULL;
        s = dedup_bloom_load(sub, &sb->alloc, &bf);
        if (s) {
            /* errors inside an embedded container are corruption of this one */
            if (s == DEDUP_ERR_WRONG_TYPE || s == DEDUP_ERR_TRUNCATED || s == DEDUP_ERR_BAD_MAGIC ||
                s == DEDUP_ERR_VERSION)
                s = DEDUP_ERR_CORRUPT;
            goto fail;
        }
        sc_link *l = &sb->links[i];
        l->bf = bf;
        sb->nlinks = i + 1;
        l->capacity = dedup_get_u64(lp);
        l->items = dedup_get_u64(lp + 8);
        l->fpr = dedup_scalable_link_fpr(fpr, r, max_links, i);
        if (dedup_bloom_get_kind(bf) != (dedup_bloom_kind)kind ||
            dedup_bloom_seed(bf) != sb->seed || dedup_bloom_bits(bf) != dedup_get_u64(lp + 16) ||
            dedup_bloom_k(bf) != dedup_get_u32(lp + 24) || dedup_bloom_capacity(bf) != l->capacity) {
            s = DEDUP_ERR_CORRUPT;
            goto fail;
        }
    }
    s = dedup_decoder_end(dec);
    if (s)
        goto fail;
    *out = sb;
    return DEDUP_OK;
fail:
    dedup_scalable_free(sb);
    return s;
}

static dedup_status save_fn(const void *obj, dedup_sink *sink)
{
    return dedup_scalable_save(obj, sink);
}

dedup_status dedup_scalable_save_file(const dedup_scalable *sb, const char *path)
{
    if (!sb || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_fn, sb);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_scalable *sb = NULL;
    dedup_status s = dedup_scalable_load(src, alloc, &sb);
    *out = sb;
    return s;
}

static void free_any(void *obj)
{
    dedup_scalable_free(obj);
}

dedup_status dedup_scalable_load_file(const char *path, const dedup_allocator *alloc,
                                      dedup_scalable **out)
{
    void *obj = NULL;
    dedup_status s = ddi_load_file(path, alloc, load_any, free_any, &obj);
    if (out)
        *out = obj;
    return s;
}
