/*
 * cuckoo.c - cuckoo filter with packed fingerprints and an optional chain of
 * growing links.
 *
 * Storage of a link: nb*b slots of f bits packed back to back, slot s at bit
 * s*f of a little-endian bit string (bit t is bit t%8 of byte t/8).  A slot
 * is read with one unaligned 64-bit little-endian load at byte (s*f)/8 and a
 * shift of at most 7, which covers f <= 32 (the table has 8 bytes of
 * padding so the load never leaves it).  When a whole bucket fits one such
 * load (b*f <= 57, or b*f a multiple of 8 and <= 64: b = 4 with f <= 14 or
 * f = 16) queries read each bucket with a single load.
 *
 * Insertion and the undo log: kick n evicts slot path[n] of the current
 * bucket; the evicted fingerprint x goes to alt(bucket, x).  Undoing kick n
 * needs only path[n]: holding x at bucket i', the bucket it came from is
 * alt(i', x) (alt is an involution), and putting it back into slot path[n]
 * returns the fingerprint that displaced it.  Undoing all kicks in reverse
 * restores the table bit for bit and hands back the new key's fingerprint,
 * so a failed insert loses nothing.
 */
#include "dedup/cuckoo.h"

#include "dedup/limits.h"
#include "internal.h"

#include <math.h>

typedef struct link {
    unsigned char *table; /* packed slots + 8 bytes of padding */
    uint64_t nb;          /* buckets */
    uint64_t items;       /* occupied slots */
    uint64_t bytes;       /* ceil(nb*b*f / 8), the saved size */
} link;

struct dedup_cuckoo {
    dedup_allocator alloc;
    uint32_t f, b, max_kicks, expansion;
    uint32_t nlinks;
    bool one_word; /* a bucket fits one 64-bit load */
    uint64_t fp_mask;
    uint64_t capacity;
    double fpr;
    uint64_t seed;
    uint64_t inserted, deleted;
    uint64_t rng;
    unsigned char *path; /* max_kicks entries, allocated at the first kick
                            when max_kicks > KICK_STACK; else NULL */
    /* Links, grown as the chain grows (a small filter -- a Redis key of a
     * hundred items -- holds one link, not DEDUP_MAX_CHAIN of them). */
    link *links;
    uint32_t links_cap;
};

/* Kick paths up to this long live on the stack of the inserting call. */
#define KICK_STACK 1024

/* Makes room for 'n' links (n <= DEDUP_MAX_CHAIN); new entries are zero. */
static dedup_status links_reserve(dedup_cuckoo *cf, uint32_t n)
{
    if (n <= cf->links_cap)
        return DEDUP_OK;
    uint32_t cap = cf->links_cap ? cf->links_cap * 2 : 1;
    while (cap < n)
        cap *= 2; /* powers of two, so a loaded chain holds what the grown one did */
    if (cap > DEDUP_MAX_CHAIN)
        cap = DEDUP_MAX_CHAIN;
    link *nl = ddi_calloc(&cf->alloc, cap, sizeof *nl);
    if (!nl)
        return DEDUP_ERR_NOMEM;
    if (cf->links_cap)
        memcpy(nl, cf->links, cf->links_cap * sizeof *nl);
    ddi_free(&cf->alloc, cf->links);
    cf->links = nl;
    cf->links_cap = cap;
    return DEDUP_OK;
}

/* ---- bit access ------------------------------------------------------------ */

static inline uint64_t load_le64(const unsigned char *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    return dedup_get_u64(p);
#endif
}

static inline void store_le64(unsigned char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    dedup_put_u64(p, v);
#endif
}

static inline uint32_t slot_get(const dedup_cuckoo *cf, const link *l, uint64_t bucket, uint32_t j)
{
    uint64_t bit = (bucket * cf->b + j) * cf->f;
    return (uint32_t)((load_le64(l->table + (bit >> 3)) >> (bit & 7)) & cf->fp_mask);
}

static inline void slot_set(const dedup_cuckoo *cf, link *l, uint64_t bucket, uint32_t j,
                            uint32_t v)
{
    uint64_t bit = (bucket * cf->b + j) * cf->f;
    unsigned char *p = l->table + (bit >> 3);
    unsigned sh = (unsigned)(bit & 7);
    uint64_t w = load_le64(p);
    w = (w & ~(cf->fp_mask << sh)) | ((uint64_t)v << sh);
    store_le64(p, w);
}

static inline const unsigned char *bucket_ptr(const dedup_cuckoo *cf, const link *l,
                                              uint64_t bucket)
{
    return l->table + ((bucket * cf->b * cf->f) >> 3);
}

/* ---- hashing ------------------------------------------------------------------ */

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint32_t fingerprint(const dedup_cuckoo *cf, dedup_digest d)
{
    uint32_t fp = (uint32_t)(d.hi >> (64 - cf->f));
    return fp ? fp : 1;
}

static inline uint64_t alt_bucket(uint64_t i, uint32_t fp, uint64_t nb)
{
    uint64_t h = dedup_reduce(mix64((uint64_t)fp + UINT64_C(0x9E3779B97F4A7C15)), nb);
    return h >= i ? h - i : h + nb - i;
}

/* ---- bucket operations ---------------------------------------------------------- */

static bool bucket_has(const dedup_cuckoo *cf, const link *l, uint64_t i, uint32_t fp)
{
    if (cf->one_word) {
        uint64_t bit = i * cf->b * cf->f;
        uint64_t w = load_le64(l->table + (bit >> 3)) >> (bit & 7);
        for (uint32_t j = 0; j < cf->b; j++, w >>= cf->f)
            if ((w & cf->fp_mask) == fp)
                return true;
        return false;
    }
    for (uint32_t j = 0; j < cf->b; j++)
        if (slot_get(cf, l, i, j) == fp)
            return true;
    return false;
}

static uint32_t bucket_count(const dedup_cuckoo *cf, const link *l, uint64_t i, uint32_t fp)
{
    uint32_t c = 0;
    for (uint32_t j = 0; j < cf->b; j++)
        c += slot_get(cf, l, i, j) == fp;
    return c;
}

/* Free slots of bucket i; *first = the first of them (when any). */
static uint32_t bucket_free(const dedup_cuckoo *cf, const link *l, uint64_t i, uint32_t *first)
{
    uint32_t n = 0;
    *first = 0;
    for (uint32_t j = cf->b; j-- > 0;)
        if (slot_get(cf, l, i, j) == 0) {
            n++;
            *first = j;
        }
    return n;
}

/* Puts fp into a free slot of bucket i; false if none. */
static bool bucket_put(const dedup_cuckoo *cf, link *l, uint64_t i, uint32_t fp)
{
    for (uint32_t j = 0; j < cf->b; j++)
        if (slot_get(cf, l, i, j) == 0) {
            slot_set(cf, l, i, j, fp);
            l->items++;
            return true;
        }
    return false;
}

/* Clears one slot holding fp in bucket i; false if none. */
static bool bucket_remove(const dedup_cuckoo *cf, link *l, uint64_t i, uint32_t fp)
{
    for (uint32_t j = 0; j < cf->b; j++)
        if (slot_get(cf, l, i, j) == fp) {
            slot_set(cf, l, i, j, 0);
            l->items--;
            return true;
        }
    return false;
}

static inline uint64_t next_rand(dedup_cuckoo *cf)
{
    cf->rng += UINT64_C(0x9E3779B97F4A7C15);
    return mix64(cf->rng);
}

/* Inserts into a free slot of either bucket, without kicking. */
static bool link_put_trivial(const dedup_cuckoo *cf, link *l, dedup_digest d, uint32_t fp)
{
    uint64_t i1 = dedup_reduce(d.lo, l->nb);
    if (bucket_put(cf, l, i1, fp))
        return true;
    return bucket_put(cf, l, alt_bucket(i1, fp, l->nb), fp);
}

/* Inserts with up to max_kicks relocations: 1 when inserted; 0 when there
 * was no room, after undoing every kick (the link exactly as before); -1
 * when the kick path could not be allocated (nothing changed). */
static int link_insert(dedup_cuckoo *cf, link *l, uint64_t i1, uint64_t i2, uint32_t fp)
{
    /* Into the emptier of the two buckets: keeping buckets balanced
     * postpones the first kick-out chains until the table is nearly full. */
    uint32_t j1, j2;
    uint32_t f1 = bucket_free(cf, l, i1, &j1), f2 = i2 == i1 ? 0 : bucket_free(cf, l, i2, &j2);
    if (f1 | f2) {
        if (f2 > f1)
            slot_set(cf, l, i2, j2, fp);
        else
            slot_set(cf, l, i1, j1, fp);
        l->items++;
        return 1;
    }
    /* The kick path: on the stack for up to KICK_STACK kicks (every default,
     * and RedisBloom's MAXITERATIONS up to it), else allocated once. */
    unsigned char stack_path[KICK_STACK];
    unsigned char *path = stack_path;
    if (cf->max_kicks > KICK_STACK) {
        if (!cf->path && !(cf->path = ddi_malloc(&cf->alloc, cf->max_kicks)))
            return -1;
        path = cf->path;
    }
    uint64_t i = (next_rand(cf) & 1) ? i1 : i2;
    uint32_t cur = fp;
    uint32_t n;
    for (n = 0; n < cf->max_kicks; n++) {
        uint32_t j = (uint32_t)dedup_reduce(next_rand(cf), cf->b);
        uint32_t victim = slot_get(cf, l, i, j);
        slot_set(cf, l, i, j, cur);
        path[n] = (unsigned char)j;
        cur = victim;
        i = alt_bucket(i, cur, l->nb);
        if (bucket_put(cf, l, i, cur))
            return 1;
    }
    /* Undo, last kick first. */
    while (n-- > 0) {
        i = alt_bucket(i, cur, l->nb);
        uint32_t j = path[n];
        uint32_t back = slot_get(cf, l, i, j);
        slot_set(cf, l, i, j, cur);
        cur = back;
    }
    return 0;
}

/* ---- creation ------------------------------------------------------------------- */

static double planned_load(uint32_t b)
{
    switch (b) {
    case 1: return 0.45;
    case 2: return 0.80;
    case 3: return 0.88;
    case 4: return 0.94;
    default: break;
    }
    if (b >= 8)
        return 0.96;
    return 0.94 + (double)(b - 4) * 0.005;
}

uint32_t dedup_cuckoo_fingerprint_bits_for(double p, uint32_t bucket_size)
{
    if (!(p >= DEDUP_MIN_FPR && p < 1.0) || bucket_size == 0 ||
        bucket_size > DEDUP_CUCKOO_MAX_BUCKET_SIZE)
        return 0;
    for (uint32_t f = 8; f <= 32; f += 4)
        if (2.0 * bucket_size / ldexp(1.0, (int)f) <= p)
            return f;
    return 0;
}

uint64_t dedup_cuckoo_buckets_for(uint64_t n, uint32_t bucket_size)
{
    if (n == 0 || bucket_size == 0 || bucket_size > DEDUP_CUCKOO_MAX_BUCKET_SIZE)
        return 0;
    double nb = ceil((double)n / ((double)bucket_size * planned_load(bucket_size)));
    if (nb >= 18446744073709551615.0)
        return 0;
    return nb < 1 ? 1 : (uint64_t)nb;
}

uint64_t dedup_cuckoo_buckets_for_memory(uint64_t bytes, uint32_t fingerprint_bits,
                                         uint32_t bucket_size)
{
    if (fingerprint_bits < DEDUP_CUCKOO_MIN_FP_BITS || fingerprint_bits > DEDUP_CUCKOO_MAX_FP_BITS ||
        bucket_size == 0 || bucket_size > DEDUP_CUCKOO_MAX_BUCKET_SIZE || bytes > DEDUP_MAX_BITS / 8)
        return 0;
    return bytes * 8 / ((uint64_t)bucket_size * fingerprint_bits);
}

double dedup_cuckoo_fpr_for(uint32_t fingerprint_bits, uint32_t bucket_size, double load)
{
    if (fingerprint_bits < DEDUP_CUCKOO_MIN_FP_BITS || fingerprint_bits > DEDUP_CUCKOO_MAX_FP_BITS ||
        bucket_size == 0 || !(load >= 0))
        return 0;
    double r = 2.0 * bucket_size * (load > 1 ? 1 : load) / (ldexp(1.0, (int)fingerprint_bits) - 1);
    return r > 1 ? 1 : r;
}

void dedup_cuckoo_params_init(dedup_cuckoo_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof *params);
    params->fpr = 0.01;
    params->bucket_size = DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE;
    params->max_kicks = DEDUP_CUCKOO_DEFAULT_MAX_KICKS;
    params->seed = DEDUP_DEFAULT_SEED;
}

/* Bytes of a link of nb buckets; false (LIMIT) beyond DEDUP_MAX_BITS. */
static bool link_bytes(uint64_t nb, uint32_t b, uint32_t f, uint64_t *bytes)
{
    uint64_t slots, bits;
    if (nb == 0 || __builtin_mul_overflow(nb, (uint64_t)b, &slots) ||
        __builtin_mul_overflow(slots, (uint64_t)f, &bits) || bits > DEDUP_MAX_BITS)
        return false;
    *bytes = (bits + 7) / 8;
    return true;
}

static dedup_status link_alloc(dedup_cuckoo *cf, link *l, uint64_t nb)
{
    uint64_t bytes;
    if (!link_bytes(nb, cf->b, cf->f, &bytes))
        return DEDUP_ERR_LIMIT;
    if (bytes > SIZE_MAX - 8)
        return DEDUP_ERR_NOMEM;
    l->table = ddi_calloc(&cf->alloc, 1, (size_t)bytes + 8);
    if (!l->table)
        return DEDUP_ERR_NOMEM;
    l->nb = nb;
    l->bytes = bytes;
    l->items = 0;
    return DEDUP_OK;
}

/* Buckets of link 'idx': nb0 * expansion^idx; false on overflow. */
static bool link_nb(const dedup_cuckoo *cf, uint32_t idx, uint64_t *out)
{
    uint64_t nb = cf->links[0].nb;
    for (uint32_t t = 0; t < idx; t++)
        if (__builtin_mul_overflow(nb, (uint64_t)cf->expansion, &nb))
            return false;
    *out = nb;
    return true;
}

static dedup_status cuckoo_new(const dedup_allocator *alloc, uint32_t f, uint32_t b,
                               uint32_t max_kicks, uint32_t expansion, uint64_t seed,
                               dedup_cuckoo **out)
{
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_cuckoo *cf = ddi_calloc(&a, 1, sizeof *cf);
    if (!cf)
        return DEDUP_ERR_NOMEM;
    cf->alloc = a;
    cf->f = f;
    cf->b = b;
    cf->max_kicks = max_kicks;
    cf->expansion = expansion;
    cf->seed = seed;
    cf->rng = seed ^ UINT64_C(0x2545F4914F6CDD1D);
    cf->fp_mask = (f == 64) ? UINT64_MAX : ((UINT64_C(1) << f) - 1);
    uint32_t bf = b * f;
    cf->one_word = bf <= 57 || (bf % 8 == 0 && bf <= 64);
    if (links_reserve(cf, 1)) {
        ddi_free(&a, cf);
        return DEDUP_ERR_NOMEM;
    }
    *out = cf;
    return DEDUP_OK;
}

dedup_status dedup_cuckoo_create(const dedup_cuckoo_params *params, const dedup_allocator *alloc,
                                 dedup_cuckoo **out)
{
    if (!params || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    uint32_t b = params->bucket_size;
    if (b == 0 || b > DEDUP_CUCKOO_MAX_BUCKET_SIZE || params->max_kicks > DEDUP_CUCKOO_MAX_KICKS ||
        params->expansion > DEDUP_CUCKOO_MAX_EXPANSION ||
        (params->capacity == 0 && params->buckets == 0))
        return DEDUP_ERR_INVALID_ARG;
    uint32_t f = params->fingerprint_bits;
    if (f == 0) {
        f = dedup_cuckoo_fingerprint_bits_for(params->fpr, b);
        if (f == 0)
            return DEDUP_ERR_INVALID_ARG;
    } else if (f < DEDUP_CUCKOO_MIN_FP_BITS || f > DEDUP_CUCKOO_MAX_FP_BITS) {
        return DEDUP_ERR_INVALID_ARG;
    }
    uint64_t nb = params->buckets ? params->buckets : dedup_cuckoo_buckets_for(params->capacity, b);
    uint64_t bytes;
    if (nb == 0 || !link_bytes(nb, b, f, &bytes))
        return DEDUP_ERR_LIMIT;
    dedup_cuckoo *cf;
    dedup_status s = cuckoo_new(alloc, f, b, params->max_kicks, params->expansion, params->seed, &cf);
    if (s)
        return s;
    cf->capacity = params->capacity;
    cf->fpr = params->fingerprint_bits ? dedup_cuckoo_fpr_for(f, b, 1.0) : params->fpr;
    s = link_alloc(cf, &cf->links[0], nb);
    if (s) {
        dedup_cuckoo_free(cf);
        return s;
    }
    cf->nlinks = 1;
    *out = cf;
    return DEDUP_OK;
}

void dedup_cuckoo_free(dedup_cuckoo *cf)
{
    if (!cf)
        return;
    dedup_allocator a = cf->alloc;
    for (uint32_t i = 0; i < cf->links_cap; i++)
        ddi_free(&a, cf->links[i].table);
    ddi_free(&a, cf->links);
    ddi_free(&a, cf->path);
    ddi_free(&a, cf);
}

dedup_digest dedup_cuckoo_digest(const dedup_cuckoo *cf, const void *key, size_t len)
{
    return dedup_hash(key, len, cf->seed);
}

/* ---- operations --------------------------------------------------------------- */

/* Adds a key whose fingerprint and buckets in the newest link are known. */
static dedup_status add_prepared(dedup_cuckoo *cf, dedup_digest d, uint32_t fp, uint64_t i1,
                                 uint64_t i2)
{
    link *newest = &cf->links[cf->nlinks - 1];
    int r = link_insert(cf, newest, i1, i2, fp);
    if (r < 0)
        return DEDUP_ERR_NOMEM;
    if (r > 0) {
        cf->inserted++;
        return DEDUP_OK;
    }
    if (cf->expansion == 0)
        return DEDUP_ERR_FULL;
    /* Growable: reuse space freed by deletes in older links first. */
    for (uint32_t t = cf->nlinks - 1; t-- > 0;)
        if (link_put_trivial(cf, &cf->links[t], d, fp)) {
            cf->inserted++;
            return DEDUP_OK;
        }
    uint64_t nb;
    if (cf->nlinks >= DEDUP_MAX_CHAIN || !link_nb(cf, cf->nlinks, &nb))
        return DEDUP_ERR_FULL;
    if (links_reserve(cf, cf->nlinks + 1))
        return DEDUP_ERR_NOMEM;
    link *l = &cf->links[cf->nlinks];
    dedup_status s = link_alloc(cf, l, nb);
    if (s)
        return s == DEDUP_ERR_LIMIT ? DEDUP_ERR_FULL : s;
    cf->nlinks++;
    if (!link_put_trivial(cf, l, d, fp))
        return DEDUP_ERR_FULL; /* unreachable: a new link is empty */
    cf->inserted++;
    return DEDUP_OK;
}

dedup_status dedup_cuckoo_add(dedup_cuckoo *cf, dedup_digest d)
{
    uint32_t fp = fingerprint(cf, d);
    const link *l = &cf->links[cf->nlinks - 1];
    uint64_t i1 = dedup_reduce(d.lo, l->nb);
    return add_prepared(cf, d, fp, i1, alt_bucket(i1, fp, l->nb));
}

bool dedup_cuckoo_might_contain(const dedup_cuckoo *cf, dedup_digest d)
{
    uint32_t fp = fingerprint(cf, d);
    for (uint32_t t = cf->nlinks; t-- > 0;) {
        const link *l = &cf->links[t];
        uint64_t i1 = dedup_reduce(d.lo, l->nb);
        if (bucket_has(cf, l, i1, fp) || bucket_has(cf, l, alt_bucket(i1, fp, l->nb), fp))
            return true;
    }
    return false;
}

dedup_status dedup_cuckoo_test_and_add(dedup_cuckoo *cf, dedup_digest d, dedup_verdict *verdict)
{
    if (dedup_cuckoo_might_contain(cf, d)) {
        if (verdict)
            *verdict = DEDUP_MAYBE_DUPLICATE;
        return DEDUP_OK;
    }
    dedup_status s = dedup_cuckoo_add(cf, d);
    if (!s && verdict)
        *verdict = DEDUP_NEW;
    return s;
}

dedup_status dedup_cuckoo_delete(dedup_cuckoo *cf, dedup_digest d)
{
    uint32_t fp = fingerprint(cf, d);
    for (uint32_t t = cf->nlinks; t-- > 0;) {
        link *l = &cf->links[t];
        uint64_t i1 = dedup_reduce(d.lo, l->nb);
        if (bucket_remove(cf, l, i1, fp) || bucket_remove(cf, l, alt_bucket(i1, fp, l->nb), fp)) {
            cf->deleted++;
            return DEDUP_OK;
        }
    }
    return DEDUP_ERR_NOT_FOUND;
}

uint64_t dedup_cuckoo_count(const dedup_cuckoo *cf, dedup_digest d)
{
    uint32_t fp = fingerprint(cf, d);
    uint64_t c = 0;
    for (uint32_t t = 0; t < cf->nlinks; t++) {
        const link *l = &cf->links[t];
        uint64_t i1 = dedup_reduce(d.lo, l->nb);
        uint64_t i2 = alt_bucket(i1, fp, l->nb);
        c += bucket_count(cf, l, i1, fp);
        if (i2 != i1)
            c += bucket_count(cf, l, i2, fp);
    }
    return c;
}

dedup_status dedup_cuckoo_add_key(dedup_cuckoo *cf, const void *key, size_t len)
{
    return dedup_cuckoo_add(cf, dedup_hash(key, len, cf->seed));
}
dedup_status dedup_cuckoo_test_and_add_key(dedup_cuckoo *cf, const void *key, size_t len,
                                           dedup_verdict *verdict)
{
    return dedup_cuckoo_test_and_add(cf, dedup_hash(key, len, cf->seed), verdict);
}
bool dedup_cuckoo_might_contain_key(const dedup_cuckoo *cf, const void *key, size_t len)
{
    return dedup_cuckoo_might_contain(cf, dedup_hash(key, len, cf->seed));
}
dedup_status dedup_cuckoo_delete_key(dedup_cuckoo *cf, const void *key, size_t len)
{
    return dedup_cuckoo_delete(cf, dedup_hash(key, len, cf->seed));
}
uint64_t dedup_cuckoo_count_key(const dedup_cuckoo *cf, const void *key, size_t len)
{
    return dedup_cuckoo_count(cf, dedup_hash(key, len, cf->seed));
}

enum { AHEAD = 16 };


/* out[i] (or out[i] |= when 'accumulate') = key i is in link l.  Each key's
 * buckets are computed once and kept in a ring while their lines arrive. */
static void link_query_batch(const dedup_cuckoo *cf, const link *l, const dedup_digest *d,
                             size_t n, bool *out, bool accumulate)
{
    enum { RING = 32 };
    _Static_assert((int)RING > (int)AHEAD && (RING & (RING - 1)) == 0, "ring size");
    uint64_t r1[RING], r2[RING];
    uint32_t rf[RING];
    for (size_t i = 0; i < n && i < AHEAD; i++) {
        rf[i] = fingerprint(cf, d[i]);
        r1[i] = dedup_reduce(d[i].lo, l->nb);
        r2[i] = alt_bucket(r1[i], rf[i], l->nb);
        DD_PREFETCH(bucket_ptr(cf, l, r1[i]));
        DD_PREFETCH(bucket_ptr(cf, l, r2[i]));
    }
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n) {
            size_t t = (i + AHEAD) & (RING - 1);
            rf[t] = fingerprint(cf, d[i + AHEAD]);
            r1[t] = dedup_reduce(d[i + AHEAD].lo, l->nb);
            r2[t] = alt_bucket(r1[t], rf[t], l->nb);
            DD_PREFETCH(bucket_ptr(cf, l, r1[t]));
            DD_PREFETCH(bucket_ptr(cf, l, r2[t]));
        }
        size_t q = i & (RING - 1);
        bool hit = bucket_has(cf, l, r1[q], rf[q]) || bucket_has(cf, l, r2[q], rf[q]);
        out[i] = accumulate ? (out[i] || hit) : hit;
    }
}

void dedup_cuckoo_might_contain_batch(const dedup_cuckoo *cf, const dedup_digest *d, size_t n,
                                      bool *out)
{
    link_query_batch(cf, &cf->links[cf->nlinks - 1], d, n, out, false);
    for (uint32_t t = cf->nlinks - 1; t-- > 0;)
        link_query_batch(cf, &cf->links[t], d, n, out, true);
}

/* Prefetches both buckets of 'd' in every link (a test-and-add reads them
 * all, newest first, and writes one of the newest link's). */
static void prefetch_all_links(const dedup_cuckoo *cf, dedup_digest d)
{
    uint32_t fp = fingerprint(cf, d);
    for (uint32_t t = cf->nlinks; t-- > 0;) {
        const link *l = &cf->links[t];
        uint64_t i1 = dedup_reduce(d.lo, l->nb);
        DD_PREFETCH_W(bucket_ptr(cf, l, i1));
        DD_PREFETCH_W(bucket_ptr(cf, l, alt_bucket(i1, fp, l->nb)));
    }
}

dedup_status dedup_cuckoo_test_and_add_batch(dedup_cuckoo *cf, const dedup_digest *d, size_t n,
                                             dedup_verdict *out, size_t *done)
{
    for (size_t i = 0; i < n && i < AHEAD; i++)
        prefetch_all_links(cf, d[i]);
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            prefetch_all_links(cf, d[i + AHEAD]);
        dedup_status s = dedup_cuckoo_test_and_add(cf, d[i], &out[i]);
        if (s) {
            if (done)
                *done = i;
            return s;
        }
    }
    if (done)
        *done = n;
    return DEDUP_OK;
}

dedup_status dedup_cuckoo_add_batch(dedup_cuckoo *cf, const dedup_digest *d, size_t n,
                                    size_t *added)
{
    /* As in the query batch: buckets computed once, kept in a ring while
     * their lines are fetched.  An add may append a link; the ring then
     * holds buckets of the old newest link, so it is refilled. */
    enum { RING = 32 };
    _Static_assert((int)RING > (int)AHEAD && (RING & (RING - 1)) == 0, "ring size");
    uint64_t r1[RING], r2[RING];
    uint32_t rf[RING];
    uint32_t links = 0;
    dedup_status s = DEDUP_OK;
    size_t i;
    for (i = 0; i < n; i++) {
        if (links != cf->nlinks) {
            links = cf->nlinks;
            const link *l = &cf->links[links - 1];
            for (size_t t = i; t < n && t < i + AHEAD; t++) {
                size_t q = t & (RING - 1);
                rf[q] = fingerprint(cf, d[t]);
                r1[q] = dedup_reduce(d[t].lo, l->nb);
                r2[q] = alt_bucket(r1[q], rf[q], l->nb);
                DD_PREFETCH_W(bucket_ptr(cf, l, r1[q]));
                DD_PREFETCH_W(bucket_ptr(cf, l, r2[q]));
            }
        }
        if (i + AHEAD < n) {
            const link *l = &cf->links[links - 1];
            size_t q = (i + AHEAD) & (RING - 1);
            rf[q] = fingerprint(cf, d[i + AHEAD]);
            r1[q] = dedup_reduce(d[i + AHEAD].lo, l->nb);
            r2[q] = alt_bucket(r1[q], rf[q], l->nb);
            DD_PREFETCH_W(bucket_ptr(cf, l, r1[q]));
            DD_PREFETCH_W(bucket_ptr(cf, l, r2[q]));
        }
        size_t q = i & (RING - 1);
        s = add_prepared(cf, d[i], rf[q], r1[q], r2[q]);
        if (s)
            break;
    }
    if (added)
        *added = i;
    return s;
}

/* ---- shape and state ------------------------------------------------------------- */

size_t dedup_cuckoo_memory_usage(const dedup_cuckoo *cf)
{
    size_t m = sizeof *cf + (size_t)cf->links_cap * sizeof(link) + (cf->path ? cf->max_kicks : 0);
    for (uint32_t t = 0; t < cf->nlinks; t++)
        m += (size_t)cf->links[t].bytes + 8;
    return m;
}

void dedup_cuckoo_get_info(const dedup_cuckoo *cf, dedup_cuckoo_info *info)
{
    memset(info, 0, sizeof *info);
    info->fingerprint_bits = cf->f;
    info->bucket_size = cf->b;
    info->max_kicks = cf->max_kicks;
    info->expansion = cf->expansion;
    info->links = cf->nlinks;
    info->capacity = cf->capacity;
    info->inserted = cf->inserted;
    info->deleted = cf->deleted;
    info->seed = cf->seed;
    for (uint32_t t = 0; t < cf->nlinks; t++) {
        const link *l = &cf->links[t];
        info->buckets += l->nb;
        info->slots += l->nb * cf->b;
        info->items += l->items;
        info->fpr_full += dedup_cuckoo_fpr_for(cf->f, cf->b, 1.0);
        info->fpr_current += dedup_cuckoo_fpr_for(cf->f, cf->b, (double)l->items / (double)(l->nb * cf->b));
    }
    if (info->fpr_full > 1)
        info->fpr_full = 1;
    if (info->fpr_current > 1)
        info->fpr_current = 1;
    info->load = (double)info->items / (double)info->slots;
    info->memory = dedup_cuckoo_memory_usage(cf);
}

dedup_status dedup_cuckoo_get_link_info(const dedup_cuckoo *cf, uint32_t idx,
                                        dedup_cuckoo_link_info *info)
{
    if (!cf || !info || idx >= cf->nlinks)
        return DEDUP_ERR_RANGE;
    const link *l = &cf->links[idx];
    info->buckets = l->nb;
    info->slots = l->nb * cf->b;
    info->items = l->items;
    info->bytes = l->bytes;
    info->load = (double)l->items / (double)info->slots;
    info->fpr_current = dedup_cuckoo_fpr_for(cf->f, cf->b, info->load);
    return DEDUP_OK;
}

void dedup_cuckoo_clear(dedup_cuckoo *cf)
{
    for (uint32_t t = 1; t < cf->nlinks; t++) {
        ddi_free(&cf->alloc, cf->links[t].table);
        memset(&cf->links[t], 0, sizeof cf->links[t]);
    }
    cf->nlinks = 1;
    memset(cf->links[0].table, 0, (size_t)cf->links[0].bytes + 8);
    cf->links[0].items = 0;
    cf->inserted = cf->deleted = 0;
}

/* ---- persistence ---------------------------------------------------------------------
 * params (64 + 16 * links bytes):
 *   0 u32 fingerprint bits   4 u32 bucket size   8 u32 max kicks   12 u32 expansion
 *   16 u32 links   20 u32 reserved (0)   24 u64 capacity   32 f64 fpr
 *   40 u64 inserted   48 u64 deleted   56 u64 reserved (0)
 *   64 + 16*t: u64 buckets of link t, u64 occupied slots of link t
 * payload: each link's packed table, ceil(buckets*b*f/8) bytes, in link order. */
#define FIXED_LEN 64u

dedup_status dedup_cuckoo_save(const dedup_cuckoo *cf, dedup_sink *sink)
{
    if (!cf || !sink)
        return DEDUP_ERR_INVALID_ARG;
    unsigned char p[FIXED_LEN + 16 * DEDUP_MAX_CHAIN];
    uint32_t plen = FIXED_LEN + 16 * cf->nlinks;
    memset(p, 0, plen);
    dedup_put_u32(p, cf->f);
    dedup_put_u32(p + 4, cf->b);
    dedup_put_u32(p + 8, cf->max_kicks);
    dedup_put_u32(p + 12, cf->expansion);
    dedup_put_u32(p + 16, cf->nlinks);
    dedup_put_u64(p + 24, cf->capacity);
    dedup_put_f64(p + 32, cf->fpr);
    dedup_put_u64(p + 40, cf->inserted);
    dedup_put_u64(p + 48, cf->deleted);
    uint64_t payload = 0;
    for (uint32_t t = 0; t < cf->nlinks; t++) {
        dedup_put_u64(p + FIXED_LEN + 16 * t, cf->links[t].nb);
        dedup_put_u64(p + FIXED_LEN + 16 * t + 8, cf->links[t].items);
        payload += cf->links[t].bytes;
    }
    uint16_t type = cf->expansion ? DEDUP_TYPE_CUCKOO_CHAIN : DEDUP_TYPE_CUCKOO;
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, type, cf->seed, p, plen, payload);
    for (uint32_t t = 0; !s && t < cf->nlinks; t++)
        s = dedup_encoder_write(&e, cf->links[t].table, (size_t)cf->links[t].bytes);
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

uint64_t dedup_cuckoo_serialized_size(const dedup_cuckoo *cf)
{
    uint64_t n = DEDUP_HEADER_SIZE + FIXED_LEN + 16 * cf->nlinks + DEDUP_TRAILER_SIZE;
    for (uint32_t t = 0; t < cf->nlinks; t++)
        n += cf->links[t].bytes;
    return n;
}

/* Occupied slots of a link, and whether the padding bits after the last slot
 * are zero. */
static bool link_check(const dedup_cuckoo *cf, const link *l)
{
    uint64_t slots = l->nb * cf->b, occ = 0;
    for (uint64_t s = 0; s < slots; s++) {
        uint64_t bit = s * cf->f;
        occ += ((load_le64(l->table + (bit >> 3)) >> (bit & 7)) & cf->fp_mask) != 0;
    }
    uint64_t used = slots * cf->f;
    if (used % 8) {
        unsigned char last = l->table[l->bytes - 1];
        if (last >> (used % 8))
            return false;
    }
    return occ == l->items;
}

dedup_status dedup_cuckoo_load(dedup_source src, const dedup_allocator *alloc, dedup_cuckoo **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    /* On the stack: the decoder needs 64-byte alignment (about 5 KB). */
    dedup_decoder decoder, *dec = &decoder;
    dedup_cuckoo *cf = NULL;
    dedup_status s = dedup_decoder_begin(dec, src, 0);
    if (s)
        goto out;
    uint16_t type = dec->header.type;
    if (type != DEDUP_TYPE_CUCKOO && type != DEDUP_TYPE_CUCKOO_CHAIN) {
        s = DEDUP_ERR_WRONG_TYPE;
        goto out;
    }
    s = DEDUP_ERR_CORRUPT;
    const unsigned char *p = dec->params;
    if (dec->header.params_len < FIXED_LEN)
        goto out;
    uint32_t f = dedup_get_u32(p), b = dedup_get_u32(p + 4);
    uint32_t kicks = dedup_get_u32(p + 8), exp = dedup_get_u32(p + 12);
    uint32_t links = dedup_get_u32(p + 16);
    double fpr = dedup_get_f64(p + 32);
    if (f < DEDUP_CUCKOO_MIN_FP_BITS || f > DEDUP_CUCKOO_MAX_FP_BITS || b == 0 ||
        b > DEDUP_CUCKOO_MAX_BUCKET_SIZE || kicks > DEDUP_CUCKOO_MAX_KICKS ||
        exp > DEDUP_CUCKOO_MAX_EXPANSION || links == 0 || links > DEDUP_MAX_CHAIN ||
        dedup_get_u32(p + 20) != 0 || dedup_get_u64(p + 56) != 0 || !(fpr >= 0 && fpr < 1) ||
        dec->header.params_len != FIXED_LEN + 16 * links)
        goto out;
    if (type == DEDUP_TYPE_CUCKOO ? (exp != 0 || links != 1) : exp == 0)
        goto out;
    /* Every link's size is implied by link 0 and the expansion. */
    uint64_t nb = dedup_get_u64(p + FIXED_LEN), total = 0;
    for (uint32_t t = 0; t < links; t++) {
        const unsigned char *lp = p + FIXED_LEN + 16 * t;
        uint64_t bytes;
        if (dedup_get_u64(lp) != nb)
            goto out;
        if (!link_bytes(nb, b, f, &bytes)) {
            s = nb == 0 ? DEDUP_ERR_CORRUPT : DEDUP_ERR_LIMIT;
            goto out;
        }
        if (dedup_get_u64(lp + 8) > nb * b || __builtin_add_overflow(total, bytes, &total))
            goto out;
        if (t + 1 < links && __builtin_mul_overflow(nb, (uint64_t)exp, &nb))
            goto out;
    }
    if (total != dec->header.payload_len)
        goto out;
    s = cuckoo_new(&a, f, b, kicks, exp, dec->header.seed, &cf);
    if (s)
        goto out;
    cf->capacity = dedup_get_u64(p + 24);
    cf->fpr = fpr;
    cf->inserted = dedup_get_u64(p + 40);
    cf->deleted = dedup_get_u64(p + 48);
    s = links_reserve(cf, links);
    if (s)
        goto out;
    for (uint32_t t = 0; t < links; t++) {
        const unsigned char *lp = p + FIXED_LEN + 16 * t;
        link *l = &cf->links[t];
        s = link_alloc(cf, l, dedup_get_u64(lp));
        if (s)
            goto out;
        cf->nlinks = t + 1;
        l->items = dedup_get_u64(lp + 8);
        s = dedup_decoder_read(dec, l->table, (size_t)l->bytes);
        if (s)
            goto out;
    }
    s = dedup_decoder_end(dec);
    if (s)
        goto out;
    for (uint32_t t = 0; t < links; t++)
        if (!link_check(cf, &cf->links[t])) {
            s = DEDUP_ERR_CORRUPT;
            goto out;
        }
out:
    if (s) {
        dedup_cuckoo_free(cf);
        return s;
    }
    *out = cf;
    return DEDUP_OK;
}

static dedup_status save_fn(const void *obj, dedup_sink *sink)
{
    return dedup_cuckoo_save(obj, sink);
}

dedup_status dedup_cuckoo_save_file(const dedup_cuckoo *cf, const char *path)
{
    if (!cf || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_fn, cf);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_cuckoo *cf = NULL;
    dedup_status s = dedup_cuckoo_load(src, alloc, &cf);
    *out = cf;
    return s;
}

static void free_any(void *obj)
{
    dedup_cuckoo_free(obj);
}

dedup_status dedup_cuckoo_load_file(const char *path, const dedup_allocator *alloc,
                                    dedup_cuckoo **out)
{
    void *obj = NULL;
    dedup_status s = ddi_load_file(path, alloc, load_any, free_any, &obj);
    if (out)
        *out = obj;
    return s;
}
