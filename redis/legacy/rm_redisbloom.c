/*
 * rm_redisbloom.c - RedisBloom-layout values (see rm_redisbloom.h for the
 * layouts).  Written from the layout, not from RedisBloom's code: the
 * probe and bucket formulas, the sizes and the growth rule are what a
 * value must follow for the items RedisBloom stored in it to be found.
 */
#include "../rm_internal.h"
#include "rm_redisbloom.h"

#include "dedup/format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint16_t get_u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

/* ==== hashes ==================================================================== */

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint64_t rb_murmur64a(const void *key, size_t len, uint64_t seed)
{
    const uint64_t m = UINT64_C(0xc6a4a7935bd1e995);
    const unsigned char *p = key;
    uint64_t h = seed ^ ((uint64_t)len * m);
    size_t n = len / 8;
    for (size_t i = 0; i < n; i++, p += 8) {
        uint64_t k = rd64(p);
        k *= m;
        k ^= k >> 47;
        k *= m;
        h ^= k;
        h *= m;
    }
    size_t t = len & 7;
    if (t) {
        for (size_t i = t; i-- > 0;)
            h ^= (uint64_t)p[i] << (8 * i);
        h *= m;
    }
    h ^= h >> 47;
    h *= m;
    h ^= h >> 47;
    return h;
}

uint32_t rb_murmur2(const void *key, size_t len, uint32_t seed)
{
    const uint32_t m = 0x5bd1e995u;
    const unsigned char *p = key;
    uint32_t h = seed ^ (uint32_t)len;
    while (len >= 4) {
        uint32_t k = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
        p += 4;
        len -= 4;
    }
    switch (len) {
    case 3:
        h ^= (uint32_t)p[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)p[1] << 8;
        /* fall through */
    case 1:
        h ^= p[0];
        h *= m;
        break;
    default:
        break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* ==== Bloom chains ================================================================ */

#define RB_OPT_NOROUND 1u
#define RB_OPT_ENTS_IS_BITS 2u
#define RB_OPT_FORCE64 4u
#define RB_OPT_NO_SCALING 8u
#define RB_OPT_ALL 15u
#define RB_MAX_LINKS 1000u
#define RB_MAX_HASHES 1100u
#define RB_LN2 0.693147180559945
#define RB_LN2_SQ 0.480453013918201

typedef struct rb_link {
    unsigned char *bf;
    uint64_t bytes, bits, size, entries;
    double error, bpe;
    uint32_t hashes;
    uint8_t n2;
} rb_link;

struct rb_bloom {
    dedup_allocator alloc;
    uint64_t size;
    uint32_t nfilters, options, growth;
    rb_link *links;
    uint64_t total, received; /* array bytes, and bytes loaded so far */
    uint64_t max_memory;
};

static const dedup_allocator *alloc_of(const dedup_allocator *a)
{
    return a->malloc_fn ? a : NULL;
}

void rb_bloom_free(rb_bloom *b)
{
    if (!b)
        return;
    dedup_allocator a = b->alloc;
    for (uint32_t i = 0; i < b->nfilters; i++)
        rmf_dealloc(alloc_of(&a), b->links[i].bf);
    rmf_dealloc(alloc_of(&a), b->links);
    rmf_dealloc(alloc_of(&a), b);
}

size_t rb_bloom_memory(const rb_bloom *b)
{
    size_t n = sizeof *b + (size_t)b->nfilters * sizeof *b->links;
    return n + (size_t)b->total;
}

bool rb_bloom_complete(const rb_bloom *b) { return b->received == b->total; }
uint64_t rb_bloom_items(const rb_bloom *b) { return b->size; }
uint32_t rb_bloom_filters(const rb_bloom *b) { return b->nfilters; }
bool rb_bloom_nonscaling(const rb_bloom *b) { return b->options & RB_OPT_NO_SCALING; }
uint32_t rb_bloom_expansion(const rb_bloom *b) { return b->growth; }
uint64_t rb_bloom_capacity(const rb_bloom *b)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < b->nfilters; i++)
        n += b->links[i].entries;
    return n;
}

/* A link's fields are consistent (every probe lands inside its array) and
 * its array can be allocated.  Not required: bits = 8 * bytes or the hash
 * count its bits per entry give (RedisBloom's SCANDUMP loader checks those,
 * but encoding 0 of its RDB has neither). */
static rmf_err link_check(const rb_link *l)
{
    if (!(l->error > 0 && l->error < 1) || !(l->bpe > 0) || !isfinite(l->bpe))
        return "ERR received bad data (link error rate)";
    if (l->n2 > 63 || l->bits == 0 || l->bytes == 0 || l->bytes > (UINT64_C(1) << 40) ||
        l->bits > l->bytes * 8 || (l->n2 && l->bits < (UINT64_C(1) << l->n2)))
        return "ERR received bad data (link size)";
    if (l->hashes < 1 || l->hashes > RB_MAX_HASHES)
        return "ERR received bad data (link hashes)";
    return NULL;
}

/* Allocates the arrays of b's links (fields already checked), not zeroed:
 * LOADCHUNK writes every byte before the key can be used, so memory is
 * touched only as chunks arrive, not for what a header merely announces
 * (rb_zero_rest() zeroes what never came when a loading key is saved). */
static rmf_err alloc_arrays(rb_bloom *b)
{
    for (uint32_t i = 0; i < b->nfilters; i++) {
        b->links[i].bf = rmf_alloc(alloc_of(&b->alloc), (size_t)b->links[i].bytes);
        if (!b->links[i].bf)
            return rmf_err_nomem();
    }
    return NULL;
}

static rb_bloom *bloom_new(uint32_t nfilters, const dedup_allocator *a, uint64_t max_memory)
{
    rb_bloom *b = rmf_alloc(a, sizeof *b);
    if (!b)
        return NULL;
    memset(b, 0, sizeof *b);
    if (a)
        b->alloc = *a;
    b->max_memory = max_memory;
    b->links = rmf_alloc(a, nfilters * sizeof *b->links);
    if (!b->links) {
        rmf_dealloc(a, b);
        return NULL;
    }
    memset(b->links, 0, nfilters * sizeof *b->links);
    b->nfilters = nfilters;
    return b;
}

/* Checks the whole chain (after the links): options, counts, memory. */
static rmf_err chain_check(rb_bloom *b)
{
    if (b->options & ~RB_OPT_ALL)
        return "ERR received bad data (options)";
    uint64_t items = 0, bytes = 0;
    for (uint32_t i = 0; i < b->nfilters; i++) {
        rmf_err e = link_check(&b->links[i]);
        if (e)
            return e;
        if (b->links[i].size > UINT64_MAX - items)
            return "ERR received bad data (items)";
        items += b->links[i].size;
        bytes += b->links[i].bytes;
        if (bytes > b->max_memory || bytes > (UINT64_C(1) << 42))
            return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    }
    if (items != b->size)
        return "ERR received bad data (items)";
    b->total = bytes;
    return NULL;
}

static void get_hash(const rb_bloom *b, const void *item, size_t len, uint64_t *ha, uint64_t *hb)
{
    if (b->options & RB_OPT_FORCE64) {
        *ha = rb_murmur64a(item, len, UINT64_C(0xc6a4a7935bd1e995));
        *hb = rb_murmur64a(item, len, *ha);
    } else {
        *ha = rb_murmur2(item, len, 0x9747b28cu);
        *hb = rb_murmur2(item, len, (uint32_t)*ha);
    }
}

/* Tests (and with 'set', sets) the item's bits in a link; true if all
 * were set before. */
static bool link_probe(rb_link *l, uint64_t ha, uint64_t hb, bool set)
{
    uint64_t mod = l->n2 ? UINT64_C(1) << l->n2 : l->bits;
    bool all = true;
    for (uint32_t i = 0; i < l->hashes; i++) {
        uint64_t x = (ha + (uint64_t)i * hb) % mod;
        unsigned char mask = (unsigned char)(1u << (x & 7));
        if (!(l->bf[x >> 3] & mask)) {
            if (!set)
                return false;
            all = false;
            l->bf[x >> 3] |= mask;
        }
    }
    return all;
}

bool rb_bloom_exists(const rb_bloom *b, const void *item, size_t len)
{
    uint64_t ha, hb;
    get_hash(b, item, len, &ha, &hb);
    for (uint32_t i = b->nfilters; i-- > 0;)
        if (link_probe(&b->links[i], ha, hb, false))
            return true;
    return false;
}

/* Sizes a new link the way RedisBloom's chains grow: 'entries' items at
 * 'error', with the chain's options. */
static rmf_err link_plan(rb_link *l, uint64_t entries, double error, uint32_t options)
{
    memset(l, 0, sizeof *l);
    if (entries < 1 || !(error > 0 && error < 1))
        return "ERR max number of scaling filters reached";
    l->error = error;
    l->entries = entries;
    l->bpe = fabs(log(error) / RB_LN2_SQ);
    uint64_t bits;
    if (options & RB_OPT_ENTS_IS_BITS) {
        if (entries > 63)
            return "ERR max number of scaling filters reached";
        l->n2 = (uint8_t)entries;
        bits = UINT64_C(1) << l->n2;
        l->entries = (uint64_t)((double)bits / l->bpe);
    } else if (options & RB_OPT_NOROUND) {
        double x = (double)entries * l->bpe;
        if (!(x < 0x1p60))
            return "ERR max number of scaling filters reached";
        bits = (uint64_t)x;
        if (bits == 0)
            bits = 1;
    } else {
        double bn2 = logb((double)entries * l->bpe);
        if (!(bn2 <= 59))
            return "ERR max number of scaling filters reached";
        l->n2 = (uint8_t)(bn2 + 1);
        bits = UINT64_C(1) << l->n2;
        /* the spare bits (truncated), then the items they hold (truncated) */
        double diff = (double)bits - (double)entries * l->bpe;
        uint64_t spare = diff > 0 ? (uint64_t)diff : 0;
        l->entries += (uint64_t)((double)spare / l->bpe);
    }
    l->bytes = bits % 64 ? (bits / 64 + 1) * 8 : bits / 8;
    l->bits = l->bytes * 8;
    l->hashes = (uint32_t)ceil(RB_LN2 * l->bpe);
    return link_check(l);
}

rmf_err rb_bloom_add(rb_bloom *b, const void *item, size_t len, int *added)
{
    uint64_t ha, hb;
    get_hash(b, item, len, &ha, &hb);
    for (uint32_t i = b->nfilters; i-- > 0;)
        if (link_probe(&b->links[i], ha, hb, false)) {
            *added = 0;
            return NULL;
        }
    rb_link *cur = &b->links[b->nfilters - 1];
    if (cur->size >= cur->entries) {
        if (b->options & RB_OPT_NO_SCALING)
            return "ERR non scaling filter is full";
        uint64_t n;
        if (b->nfilters >= RB_MAX_LINKS || __builtin_mul_overflow(cur->entries, b->growth, &n))
            return "ERR max number of scaling filters reached";
        rb_link nl;
        rmf_err e = link_plan(&nl, n, cur->error * 0.5, b->options);
        if (e)
            return e;
        if (b->total + nl.bytes > b->max_memory)
            return ERR_MAXMEM;
        rb_link *links = rmf_alloc(alloc_of(&b->alloc), (b->nfilters + 1) * sizeof *links);
        nl.bf = rmf_calloc(alloc_of(&b->alloc), (size_t)nl.bytes);
        if (!links || !nl.bf) {
            rmf_dealloc(alloc_of(&b->alloc), links);
            rmf_dealloc(alloc_of(&b->alloc), nl.bf);
            return rmf_err_nomem();
        }
        memcpy(links, b->links, b->nfilters * sizeof *links);
        links[b->nfilters] = nl;
        rmf_dealloc(alloc_of(&b->alloc), b->links);
        b->links = links;
        b->nfilters++;
        b->total += nl.bytes;
        b->received = b->total;
        cur = &b->links[b->nfilters - 1];
    }
    if (!link_probe(cur, ha, hb, true)) {
        cur->size++;
        b->size++;
        *added = 1;
    } else {
        *added = 0;
    }
    return NULL;
}

size_t rb_bloom_debug(const rb_bloom *b, uint32_t line, char *buf, size_t cap)
{
    if (line == 0)
        return (size_t)snprintf(buf, cap, "size:%llu", (unsigned long long)b->size);
    if (line > b->nfilters)
        return 0;
    const rb_link *l = &b->links[line - 1];
    return (size_t)snprintf(
        buf, cap, "bytes:%llu bits:%llu hashes:%u hashwidth:%u capacity:%llu size:%llu ratio:%g",
        (unsigned long long)l->bytes,
        (unsigned long long)(l->bits ? l->bits : UINT64_C(1) << l->n2), l->hashes,
        b->options & RB_OPT_FORCE64 ? 64u : 32u, (unsigned long long)l->entries,
        (unsigned long long)l->size, l->error);
}

rb_bloom *rb_bloom_copy(const rb_bloom *b, const dedup_allocator *a)
{
    rb_bloom *c = bloom_new(b->nfilters, a, b->max_memory);
    if (!c)
        return NULL;
    c->size = b->size;
    c->options = b->options;
    c->growth = b->growth;
    c->total = b->total;
    c->received = b->received;
    for (uint32_t i = 0; i < b->nfilters; i++) {
        c->links[i] = b->links[i];
        c->links[i].bf = rmf_alloc(a, (size_t)b->links[i].bytes);
        if (!c->links[i].bf) {
            c->nfilters = i;
            rb_bloom_free(c);
            return NULL;
        }
        memcpy(c->links[i].bf, b->links[i].bf, (size_t)b->links[i].bytes);
    }
    return c;
}

static rmf_err bloom_from_header(const unsigned char *h, size_t len, uint64_t max_memory,
                                 const dedup_allocator *a, rb_bloom **out)
{
    *out = NULL;
    if (len < RB_BF_HEADER_BASE + RB_BF_HEADER_LINK)
        return "ERR received bad data (header too short)";
    uint32_t n = dedup_get_u32(h + 8);
    if (n < 1 || n > RB_MAX_LINKS || len != RB_BF_HEADER_BASE + (size_t)n * RB_BF_HEADER_LINK)
        return "ERR received bad data (header length)";
    rb_bloom *b = bloom_new(n, a, max_memory);
    if (!b)
        return rmf_err_nomem();
    b->size = dedup_get_u64(h);
    b->options = dedup_get_u32(h + 12);
    b->growth = dedup_get_u32(h + 16);
    for (uint32_t i = 0; i < n; i++) {
        const unsigned char *p = h + RB_BF_HEADER_BASE + (size_t)i * RB_BF_HEADER_LINK;
        rb_link *l = &b->links[i];
        l->bytes = dedup_get_u64(p);
        l->bits = dedup_get_u64(p + 8);
        l->size = dedup_get_u64(p + 16);
        l->error = dedup_get_f64(p + 24);
        l->bpe = dedup_get_f64(p + 32);
        l->hashes = dedup_get_u32(p + 40);
        l->entries = dedup_get_u64(p + 44);
        l->n2 = p[52];
    }
    /* As lenient as the RDB loader (only what indexing needs): a value read
     * from an RDB must dump to a header that loads again. */
    rmf_err e = chain_check(b);
    if (!e)
        e = alloc_arrays(b);
    if (e) {
        rb_bloom_free(b);
        return e;
    }
    *out = b;
    return NULL;
}

static size_t bloom_header(const rb_bloom *b, unsigned char *h, size_t cap)
{
    size_t need = RB_BF_HEADER_BASE + (size_t)b->nfilters * RB_BF_HEADER_LINK;
    if (cap < need)
        return need;
    dedup_put_u64(h, b->size);
    dedup_put_u32(h + 8, b->nfilters);
    dedup_put_u32(h + 12, b->options);
    dedup_put_u32(h + 16, b->growth);
    for (uint32_t i = 0; i < b->nfilters; i++) {
        unsigned char *p = h + RB_BF_HEADER_BASE + (size_t)i * RB_BF_HEADER_LINK;
        const rb_link *l = &b->links[i];
        dedup_put_u64(p, l->bytes);
        dedup_put_u64(p + 8, l->bits);
        dedup_put_u64(p + 16, l->size);
        dedup_put_f64(p + 24, l->error);
        dedup_put_f64(p + 32, l->bpe);
        dedup_put_u32(p + 40, l->hashes);
        dedup_put_u64(p + 44, l->entries);
        p[52] = l->n2;
    }
    return need;
}

/* ==== Cuckoo filters ================================================================ */

#define RB_CF_MAX_FILTERS 1024u
#define RB_CF_ALT 0x5bd1e995u

typedef struct rb_sub {
    uint64_t nb; /* buckets, a power of two */
    unsigned char *data;
} rb_sub;

struct rb_cuckoo {
    dedup_allocator alloc;
    uint64_t nb0, items, deletes;
    uint32_t nfilters, bucket_size, max_iter, expansion;
    rb_sub *subs;
    uint64_t total, received;
    uint64_t max_memory;
};

static bool pow2(uint64_t x) { return x && !(x & (x - 1)); }

void rb_cuckoo_free(rb_cuckoo *c)
{
    if (!c)
        return;
    dedup_allocator a = c->alloc;
    for (uint32_t i = 0; i < c->nfilters; i++)
        rmf_dealloc(alloc_of(&a), c->subs[i].data);
    rmf_dealloc(alloc_of(&a), c->subs);
    rmf_dealloc(alloc_of(&a), c);
}

size_t rb_cuckoo_memory(const rb_cuckoo *c)
{
    return sizeof *c + (size_t)c->nfilters * sizeof *c->subs + (size_t)c->total;
}
uint64_t rb_cuckoo_items(const rb_cuckoo *c) { return c->items; }
uint32_t rb_cuckoo_filters(const rb_cuckoo *c) { return c->nfilters; }

static rb_cuckoo *cuckoo_new(uint32_t nfilters, const dedup_allocator *a, uint64_t max_memory)
{
    rb_cuckoo *c = rmf_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    memset(c, 0, sizeof *c);
    if (a)
        c->alloc = *a;
    c->max_memory = max_memory;
    c->subs = rmf_alloc(a, nfilters * sizeof *c->subs);
    if (!c->subs) {
        rmf_dealloc(a, c);
        return NULL;
    }
    memset(c->subs, 0, nfilters * sizeof *c->subs);
    c->nfilters = nfilters;
    return c;
}

/* Checks the shape (sub-filter bucket counts already set) and the memory,
 * and sets c->total. */
static rmf_err cuckoo_check(rb_cuckoo *c)
{
    if (c->bucket_size < 1 || c->bucket_size > 255 || c->max_iter < 1 || c->max_iter > 65535 ||
        c->expansion > 32768 || (c->expansion && !pow2(c->expansion)))
        return "ERR received bad data (cuckoo shape)";
    if (!pow2(c->nb0) || c->nb0 > (UINT64_C(1) << 40))
        return "ERR received bad data (buckets)";
    if (c->expansion == 0 && c->nfilters != 1)
        return "ERR received bad data (sub-filters)";
    uint64_t total = 0, want = c->nb0;
    for (uint32_t i = 0; i < c->nfilters; i++) {
        /* sub-filter i has nb0 * expansion^i buckets: RedisBloom's header
         * carries only nb0 and the expansion, so nothing else dumps back */
        uint64_t nb = c->subs[i].nb;
        if (i > 0 && __builtin_mul_overflow(want, (uint64_t)c->expansion, &want))
            return "ERR received bad data (sub-filter buckets)";
        if (nb != want || nb > (UINT64_C(1) << 40))
            return "ERR received bad data (sub-filter buckets)";
        total += nb * c->bucket_size;
        if (total > c->max_memory || total > (UINT64_C(1) << 42))
            return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    }
    c->total = total;
    return NULL;
}

/* Zeroed, unlike alloc_arrays(): as in RedisBloom, a cuckoo filter is
 * usable from its header on (its buckets empty until the chunks fill
 * them), so commands may add to it before the chunks arrive. */
static rmf_err cuckoo_alloc_data(rb_cuckoo *c)
{
    for (uint32_t i = 0; i < c->nfilters; i++) {
        size_t n = (size_t)(c->subs[i].nb * c->bucket_size);
        c->subs[i].data = rmf_calloc(alloc_of(&c->alloc), n);
        if (!c->subs[i].data)
            return rmf_err_nomem();
    }
    return NULL;
}

typedef struct cf_key {
    uint64_t h1, h2;
    unsigned char fp;
} cf_key;

static cf_key cf_key_of(const void *item, size_t len)
{
    uint64_t h = rb_murmur64a(item, len, 0);
    cf_key k;
    k.fp = (unsigned char)(h % 255 + 1);
    k.h1 = h;
    k.h2 = h ^ ((uint64_t)k.fp * RB_CF_ALT);
    return k;
}

static unsigned char *bucket(const rb_cuckoo *c, const rb_sub *s, uint64_t h)
{
    return s->data + (h & (s->nb - 1)) * c->bucket_size;
}

static unsigned char *bucket_find(const rb_cuckoo *c, unsigned char *b, unsigned char fp)
{
    for (uint32_t i = 0; i < c->bucket_size; i++)
        if (b[i] == fp)
            return b + i;
    return NULL;
}

bool rb_cuckoo_exists(const rb_cuckoo *c, const void *item, size_t len)
{
    cf_key k = cf_key_of(item, len);
    for (uint32_t i = 0; i < c->nfilters; i++)
        if (bucket_find(c, bucket(c, &c->subs[i], k.h1), k.fp) ||
            bucket_find(c, bucket(c, &c->subs[i], k.h2), k.fp))
            return true;
    return false;
}

uint64_t rb_cuckoo_count(const rb_cuckoo *c, const void *item, size_t len)
{
    cf_key k = cf_key_of(item, len);
    uint64_t n = 0;
    for (uint32_t i = 0; i < c->nfilters; i++) {
        const unsigned char *b1 = bucket(c, &c->subs[i], k.h1);
        const unsigned char *b2 = bucket(c, &c->subs[i], k.h2);
        for (uint32_t j = 0; j < c->bucket_size; j++)
            n += (b1[j] == k.fp) + (b2[j] == k.fp);
    }
    return n;
}

/* Moves fingerprints of sub-filter f into older ones; true if f emptied. */
static bool compact_one(rb_cuckoo *c, uint32_t f)
{
    rb_sub *s = &c->subs[f];
    bool all = true;
    for (uint64_t bi = 0; bi < s->nb; bi++) {
        unsigned char *b = s->data + bi * c->bucket_size;
        for (uint32_t j = 0; j < c->bucket_size; j++) {
            unsigned char fp = b[j];
            if (!fp)
                continue;
            /* An older sub-filter has fewer buckets (a divisor), so the
             * bucket index here names the item's buckets there too. */
            uint64_t h1 = bi, h2 = bi ^ ((uint64_t)fp * RB_CF_ALT);
            bool moved = false;
            for (uint32_t t = 0; t < f && !moved; t++) {
                unsigned char *e = bucket_find(c, bucket(c, &c->subs[t], h1), 0);
                if (!e)
                    e = bucket_find(c, bucket(c, &c->subs[t], h2), 0);
                if (e) {
                    *e = fp;
                    b[j] = 0;
                    moved = true;
                }
            }
            all = all && moved;
        }
    }
    return all;
}

static void compact(rb_cuckoo *c, bool cont)
{
    for (uint32_t f = c->nfilters; f > 1; f--) {
        bool emptied = compact_one(c, f - 1);
        if (emptied && f - 1 == c->nfilters - 1) {
            c->total -= c->subs[f - 1].nb * c->bucket_size;
            c->received = c->total;
            rmf_dealloc(alloc_of(&c->alloc), c->subs[f - 1].data);
            c->subs[f - 1].data = NULL;
            c->nfilters--;
        } else if (!emptied && !cont) {
            break;
        }
    }
    c->deletes = 0;
}

void rb_cuckoo_compact(rb_cuckoo *c) { compact(c, true); }

bool rb_cuckoo_del(rb_cuckoo *c, const void *item, size_t len)
{
    cf_key k = cf_key_of(item, len);
    for (uint32_t i = c->nfilters; i-- > 0;) {
        unsigned char *e = bucket_find(c, bucket(c, &c->subs[i], k.h1), k.fp);
        if (!e)
            e = bucket_find(c, bucket(c, &c->subs[i], k.h2), k.fp);
        if (e) {
            *e = 0;
            c->items--;
            c->deletes++;
            if (c->nfilters > 1 && (double)c->deletes > (double)c->items * 0.10)
                compact(c, false);
            return true;
        }
    }
    return false;
}

/* Kick-out insertion into sub-filter s: evict along the item's path, at
 * most max_iter times; on failure every move is undone (the walk is
 * retraced backwards: alt is an involution for power-of-two tables). */
static bool kick_insert(rb_cuckoo *c, rb_sub *s, cf_key k)
{
    uint64_t mask = s->nb - 1;
    uint64_t bi = k.h1 & mask;
    uint32_t victim = 0;
    unsigned char fp = k.fp;
    for (uint32_t n = 0; n < c->max_iter; n++) {
        unsigned char *b = s->data + bi * c->bucket_size;
        unsigned char t = b[victim];
        b[victim] = fp;
        fp = t;
        bi = (bi ^ ((uint64_t)fp * RB_CF_ALT)) & mask;
        unsigned char *e = bucket_find(c, s->data + bi * c->bucket_size, 0);
        if (e) {
            *e = fp;
            return true;
        }
        victim = (victim + 1) % c->bucket_size;
    }
    for (uint32_t n = 0; n < c->max_iter; n++) {
        victim = (victim + c->bucket_size - 1) % c->bucket_size;
        bi = (bi ^ ((uint64_t)fp * RB_CF_ALT)) & mask;
        unsigned char *b = s->data + bi * c->bucket_size;
        unsigned char t = b[victim];
        b[victim] = fp;
        fp = t;
    }
    return false;
}

static int cuckoo_grow(rb_cuckoo *c)
{
    uint64_t nb = c->subs[c->nfilters - 1].nb;
    if (c->nfilters >= RB_CF_MAX_FILTERS || __builtin_mul_overflow(nb, c->expansion, &nb) ||
        nb > (UINT64_C(1) << 40))
        return -1;
    uint64_t bytes = nb * c->bucket_size;
    if (c->total + bytes > c->max_memory)
        return -1;
    rb_sub *subs = rmf_alloc(alloc_of(&c->alloc), (c->nfilters + 1) * sizeof *subs);
    unsigned char *data = rmf_calloc(alloc_of(&c->alloc), (size_t)bytes);
    if (!subs || !data) {
        rmf_dealloc(alloc_of(&c->alloc), subs);
        rmf_dealloc(alloc_of(&c->alloc), data);
        return -2;
    }
    memcpy(subs, c->subs, c->nfilters * sizeof *subs);
    subs[c->nfilters].nb = nb;
    subs[c->nfilters].data = data;
    rmf_dealloc(alloc_of(&c->alloc), c->subs);
    c->subs = subs;
    c->nfilters++;
    c->total += bytes;
    c->received = c->total;
    return 0;
}

int rb_cuckoo_add(rb_cuckoo *c, const void *item, size_t len, bool nx)
{
    if (nx && rb_cuckoo_exists(c, item, len))
        return 0;
    cf_key k = cf_key_of(item, len);
    for (;;) {
        for (uint32_t i = c->nfilters; i-- > 0;) {
            unsigned char *e = bucket_find(c, bucket(c, &c->subs[i], k.h1), 0);
            if (!e)
                e = bucket_find(c, bucket(c, &c->subs[i], k.h2), 0);
            if (e) {
                *e = k.fp;
                c->items++;
                return 1;
            }
        }
        if (kick_insert(c, &c->subs[c->nfilters - 1], k)) {
            c->items++;
            return 1;
        }
        if (c->expansion == 0)
            return -1;
        int g = cuckoo_grow(c);
        if (g)
            return g;
    }
}

void rb_cuckoo_get_info(const rb_cuckoo *c, rmf_cf_info *out)
{
    memset(out, 0, sizeof *out);
    out->buckets = c->nb0;
    out->filters = c->nfilters;
    out->items = c->items;
    out->deleted = c->deletes;
    out->bucket_size = c->bucket_size;
    out->expansion = c->expansion;
    out->max_iterations = c->max_iter;
    out->fingerprint_bits = 8;
    out->fpr_full = 2.0 * c->bucket_size / 255.0 * c->nfilters;
}

rb_cuckoo *rb_cuckoo_copy(const rb_cuckoo *c, const dedup_allocator *a)
{
    rb_cuckoo *d = cuckoo_new(c->nfilters, a, c->max_memory);
    if (!d)
        return NULL;
    d->nb0 = c->nb0;
    d->items = c->items;
    d->deletes = c->deletes;
    d->bucket_size = c->bucket_size;
    d->max_iter = c->max_iter;
    d->expansion = c->expansion;
    d->total = c->total;
    d->received = c->received;
    for (uint32_t i = 0; i < c->nfilters; i++) {
        size_t n = (size_t)(c->subs[i].nb * c->bucket_size);
        d->subs[i].nb = c->subs[i].nb;
        d->subs[i].data = rmf_alloc(a, n);
        if (!d->subs[i].data) {
            d->nfilters = i;
            rb_cuckoo_free(d);
            return NULL;
        }
        memcpy(d->subs[i].data, c->subs[i].data, n);
    }
    return d;
}

static rmf_err cuckoo_from_header(const unsigned char *h, size_t len, uint64_t max_memory,
                                  const dedup_allocator *a, rb_cuckoo **out)
{
    *out = NULL;
    /* a header of this module's layout sent at RedisBloom's iterator 1 is
     * a header of the right kind that makes no filter here */
    if (len != RB_CF_HEADER_SIZE)
        return len == RMF_ENVELOPE_SIZE ? "ERR received bad data (module header at iterator 1)"
                                        : "ERR Invalid header";
    uint64_t nf = dedup_get_u64(h + 24);
    if (nf < 1 || nf > RB_CF_MAX_FILTERS)
        return "ERR received bad data (sub-filters)";
    rb_cuckoo *c = cuckoo_new((uint32_t)nf, a, max_memory);
    if (!c)
        return rmf_err_nomem();
    c->items = dedup_get_u64(h);
    c->nb0 = dedup_get_u64(h + 8);
    c->deletes = dedup_get_u64(h + 16);
    c->bucket_size = get_u16(h + 32);
    c->max_iter = get_u16(h + 34);
    c->expansion = get_u16(h + 36);
    rmf_err e = NULL;
    uint64_t nb = c->nb0;
    for (uint32_t i = 0; i < c->nfilters && !e; i++) {
        c->subs[i].nb = nb;
        if (i + 1 < c->nfilters && (nb > (UINT64_C(1) << 40) || c->expansion > 32768))
            e = "ERR received bad data (sub-filter buckets)";
        nb *= c->expansion;
    }
    if (!e)
        e = cuckoo_check(c);
    if (!e)
        e = cuckoo_alloc_data(c);
    if (e) {
        rb_cuckoo_free(c);
        return e;
    }
    *out = c;
    return NULL;
}

static void cuckoo_header(const rb_cuckoo *c, unsigned char *h)
{
    dedup_put_u64(h, c->items);
    dedup_put_u64(h + 8, c->nb0);
    dedup_put_u64(h + 16, c->deletes);
    dedup_put_u64(h + 24, c->nfilters);
    put_u16(h + 32, (uint16_t)c->bucket_size);
    put_u16(h + 34, (uint16_t)c->max_iter);
    put_u16(h + 36, (uint16_t)c->expansion);
}

/* ==== as module objects =============================================================== */

/* The arrays of a value as one sequence of byte ranges: range i. */
static bool range_at(const rmf_obj *o, uint32_t i, unsigned char **p, uint64_t *n)
{
    if (o->rbf) {
        if (i >= o->rbf->nfilters)
            return false;
        *p = o->rbf->links[i].bf;
        *n = o->rbf->links[i].bytes;
    } else {
        if (i >= o->rcf->nfilters)
            return false;
        *p = o->rcf->subs[i].data;
        *n = o->rcf->subs[i].nb * o->rcf->bucket_size;
    }
    return true;
}

/* Finds global offset 'off': the range's bytes from there, and how many. */
static unsigned char *locate(const rmf_obj *o, uint64_t off, uint64_t *left)
{
    unsigned char *p;
    uint64_t n;
    for (uint32_t i = 0; range_at(o, i, &p, &n); i++) {
        if (off < n) {
            *left = n - off;
            return p + off;
        }
        off -= n;
    }
    return NULL;
}

/* RedisBloom's replies to a header it cannot use: BF.LOADCHUNK "received
 * bad data" for any fault; CF.LOADCHUNK "Invalid header" for a wrong length
 * and "Couldn't create filter!" for the rest.  A refusal of this module's
 * own (MAX_MEMORY, out of memory) keeps its text: it names the limit. */
static rmf_err rb_header_reply(rmf_kind kind, rmf_err e)
{
    if (strncmp(e, "ERR received bad data", 21) != 0 && strcmp(e, "ERR Invalid header") != 0)
        return e;
    if (kind == RMF_BLOOM)
        return "ERR received bad data";
    return strcmp(e, "ERR Invalid header") == 0 ? e : "ERR Couldn't create filter!";
}

rmf_err rmf_rb_begin(rmf_kind kind, const void *hdr, size_t len, const rmf_config *c,
                     const dedup_allocator *a, rmf_obj **out)
{
    *out = NULL;
    rmf_obj *o = rmf_obj_new(kind, a);
    if (!o)
        return rmf_err_nomem();
    o->max_memory = c->max_memory;
    o->cf_max_links = c->cf_max_expansions;
    rmf_err e = kind == RMF_BLOOM    ? bloom_from_header(hdr, len, c->max_memory, a, &o->rbf)
                : kind == RMF_CUCKOO ? cuckoo_from_header(hdr, len, c->max_memory, a, &o->rcf)
                                     : "ERR not a RedisBloom filter kind";
    if (e) {
        rmf_free(o);
        return rb_header_reply(kind, e);
    }
    *out = o;
    return NULL;
}

static rmf_err rb_load_chunk(rmf_obj *o, long long iter, const void *data, size_t len);

/* CF.LOADCHUNK answers RedisBloom's one text for any chunk it refuses
 * (RedisBloom writes a chunk wherever its position lands; this module takes
 * chunks only in order, so a stray one cannot overwrite a filter). */
rmf_err rmf_rb_load_chunk(rmf_obj *o, long long iter, const void *data, size_t len)
{
    rmf_err e = rb_load_chunk(o, iter, data, len);
    return e && o->rcf ? "ERR Couldn't load chunk!" : e;
}

static rmf_err rb_load_chunk(rmf_obj *o, long long iter, const void *data, size_t len)
{
    uint64_t *received = o->rbf ? &o->rbf->received : &o->rcf->received;
    uint64_t total = o->rbf ? o->rbf->total : o->rcf->total;
    if (iter < 1 || len == 0 || (uint64_t)iter - 1 < len)
        return "ERR received bad data (iterator)";
    uint64_t off = (uint64_t)iter - 1 - len;
    if (off != *received)
        return *received == total
                   ? "ERR the filter is complete (no LOADCHUNK expected)"
                   : "ERR chunk out of order (LOADCHUNK expects the chunks SCANDUMP returned, in "
                     "order)";
    uint64_t left;
    unsigned char *p = locate(o, off, &left);
    if (!p || len > left)
        return "ERR invalid chunk - Too big for current filter";
    memcpy(p, data, len);
    *received += len;
    return NULL;
}

/* Zeroes the bytes of a loading value that have not arrived (so a save of
 * it writes zeros there, as RedisBloom's zero-filled arrays would). */
static void rb_zero_rest(const rmf_obj *o)
{
    if (!o->rbf)
        return; /* a cuckoo filter's buckets start zeroed and may hold adds */
    uint64_t received = o->rbf->received;
    uint64_t total = o->rbf->total;
    while (received < total) {
        uint64_t left;
        unsigned char *p = locate(o, received, &left);
        if (!p)
            break;
        memset(p, 0, (size_t)left);
        received += left;
    }
}

size_t rmf_rb_header(const rmf_obj *o, unsigned char *buf, size_t cap)
{
    if (buf)
        rb_zero_rest(o); /* the header starts every dump (AOF rewrite too) */
    if (o->rbf)
        return bloom_header(o->rbf, buf, cap);
    if (cap >= RB_CF_HEADER_SIZE)
        cuckoo_header(o->rcf, buf);
    return RB_CF_HEADER_SIZE;
}

const unsigned char *rmf_rb_chunk(const rmf_obj *o, long long *iter, size_t *len, size_t max)
{
    uint64_t left;
    unsigned char *p = *iter >= 1 ? locate(o, (uint64_t)*iter - 1, &left) : NULL;
    if (!p) {
        *iter = 0;
        *len = 0;
        return NULL;
    }
    *len = left < max ? (size_t)left : max;
    *iter += (long long)*len;
    return p;
}

/* ---- RDB ---------------------------------------------------------------------------- */

/* Loads one string into dst (exactly n bytes expected). */
static rmf_err rdb_array(const rb_io *io, unsigned char **dst, uint64_t n,
                         const dedup_allocator *a)
{
    size_t got = 0;
    char *buf = io->load_buf(io->ctx, &got);
    if (!buf || io->error(io->ctx) || got != n) {
        if (buf)
            io->free_buf(io->ctx, buf);
        return "ERR RDB value truncated or of the wrong size";
    }
    *dst = rmf_alloc(a, got ? got : 1);
    if (*dst)
        memcpy(*dst, buf, got);
    io->free_buf(io->ctx, buf);
    return *dst ? NULL : rmf_err_nomem();
}

static rmf_err rdb_load_bloom(int encver, const rb_io *io, const rmf_config *c,
                              const dedup_allocator *a, rb_bloom **out)
{
    *out = NULL;
    if (encver < 0 || encver > RB_BF_ENCVER)
        return "ERR unsupported MBbloom-- encoding";
    uint64_t size = io->load_u64(io->ctx);
    uint64_t n = io->load_u64(io->ctx);
    uint64_t options = encver >= 2 ? io->load_u64(io->ctx) : 0;
    uint64_t growth = encver >= 4 ? io->load_u64(io->ctx) : 2;
    if (io->error(io->ctx) || n < 1 || n > RB_MAX_LINKS || options > RB_OPT_ALL ||
        growth > UINT32_MAX)
        return "ERR corrupted MBbloom-- header";
    rb_bloom *b = bloom_new((uint32_t)n, a, c->max_memory);
    if (!b)
        return rmf_err_nomem();
    b->size = size;
    b->options = (uint32_t)options;
    b->growth = (uint32_t)growth;
    rmf_err e = NULL;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < b->nfilters && !e; i++) {
        rb_link *l = &b->links[i];
        l->entries = io->load_u64(io->ctx);
        l->error = io->load_double(io->ctx);
        uint64_t hashes = io->load_u64(io->ctx);
        l->bpe = io->load_double(io->ctx);
        uint64_t n2 = 0;
        if (encver == 0) {
            double x = (double)l->entries * l->bpe;
            l->bits = x >= 1 && x < 0x1p62 ? (uint64_t)x : 0;
        } else {
            l->bits = io->load_u64(io->ctx);
            n2 = io->load_u64(io->ctx);
        }
        if (io->error(io->ctx) || hashes > RB_MAX_HASHES || n2 > 63) {
            e = "ERR corrupted MBbloom-- link";
            break;
        }
        l->hashes = (uint32_t)hashes;
        l->n2 = (uint8_t)n2;
        /* The array's length is its 'bytes'; check the rest against the
         * largest array the limit allows before reading it. */
        l->bytes = (l->bits + 63) / 64 * 8;
        if (encver == 0 || l->bytes * 8 < l->bits)
            l->bytes = l->bits / 8 + 8;
        e = link_check(l);
        if (e)
            break;
        size_t got = 0;
        char *buf = io->load_buf(io->ctx, &got);
        if (!buf || io->error(io->ctx) || got == 0 || (uint64_t)got * 8 < l->bits ||
            (uint64_t)got > (UINT64_C(1) << 40) || bytes + got > c->max_memory) {
            if (buf)
                io->free_buf(io->ctx, buf);
            e = "ERR corrupted MBbloom-- array";
            break;
        }
        l->bytes = got;
        bytes += got;
        l->bf = rmf_alloc(a, got);
        if (l->bf)
            memcpy(l->bf, buf, got);
        io->free_buf(io->ctx, buf);
        if (!l->bf) {
            e = rmf_err_nomem();
            break;
        }
        l->size = io->load_u64(io->ctx);
        if (io->error(io->ctx))
            e = "ERR corrupted MBbloom-- link";
    }
    if (!e)
        e = chain_check(b);
    if (e) {
        rb_bloom_free(b);
        return e;
    }
    b->received = b->total;
    *out = b;
    return NULL;
}

static rmf_err rdb_load_cuckoo(int encver, const rb_io *io, const rmf_config *c,
                               const dedup_allocator *a, rb_cuckoo **out)
{
    *out = NULL;
    if (encver < 1 || encver > RB_CF_ENCVER)
        return "ERR unsupported MBbloomCF encoding";
    uint64_t nf = io->load_u64(io->ctx);
    uint64_t nb = io->load_u64(io->ctx);
    uint64_t items = io->load_u64(io->ctx);
    uint64_t deletes = 0, bs = 2, mi = 20, ex = 1;
    if (encver >= 4) {
        deletes = io->load_u64(io->ctx);
        bs = io->load_u64(io->ctx);
        mi = io->load_u64(io->ctx);
        ex = io->load_u64(io->ctx);
    }
    if (io->error(io->ctx) || nf < 1 || nf > RB_CF_MAX_FILTERS || bs > 255 || mi > 65535 ||
        ex > 32768)
        return "ERR corrupted MBbloomCF header";
    rb_cuckoo *cf = cuckoo_new((uint32_t)nf, a, c->max_memory);
    if (!cf)
        return rmf_err_nomem();
    cf->nb0 = nb;
    cf->items = items;
    cf->deletes = deletes;
    cf->bucket_size = (uint32_t)bs;
    cf->max_iter = (uint32_t)mi;
    cf->expansion = (uint32_t)ex;
    rmf_err e = NULL;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < cf->nfilters && !e; i++) {
        uint64_t sb = encver >= 4 ? io->load_u64(io->ctx) : nb;
        if (io->error(io->ctx) || !pow2(sb) || sb > (UINT64_C(1) << 40) || bs < 1 ||
            bytes + sb * bs > c->max_memory) {
            e = "ERR corrupted MBbloomCF sub-filter";
            break;
        }
        cf->subs[i].nb = sb;
        bytes += sb * bs;
        e = rdb_array(io, &cf->subs[i].data, sb * bs, a);
    }
    if (!e) {
        /* cuckoo_check allocates nothing: the arrays are in place.  The
         * items and deletes counts are only counters (RedisBloom checks
         * neither; a compaction can leave items above the slots left). */
        e = cuckoo_check(cf);
    }
    if (e) {
        rb_cuckoo_free(cf);
        return e;
    }
    cf->received = cf->total;
    *out = cf;
    return NULL;
}

rmf_err rmf_rb_rdb_load(rmf_kind kind, int encver, const rb_io *io, const rmf_config *c,
                        const dedup_allocator *a, rmf_obj **out)
{
    *out = NULL;
    rmf_obj *o = rmf_obj_new(kind, a);
    if (!o)
        return rmf_err_nomem();
    o->max_memory = c->max_memory;
    o->cf_max_links = c->cf_max_expansions;
    rmf_err e = kind == RMF_BLOOM    ? rdb_load_bloom(encver, io, c, a, &o->rbf)
                : kind == RMF_CUCKOO ? rdb_load_cuckoo(encver, io, c, a, &o->rcf)
                                     : "ERR not a RedisBloom filter kind";
    if (e) {
        rmf_free(o);
        return e;
    }
    *out = o;
    return NULL;
}

void rmf_rb_rdb_save(const rmf_obj *o, const rb_io *io)
{
    rb_zero_rest(o);
    if (o->rbf) {
        const rb_bloom *b = o->rbf;
        io->save_u64(io->ctx, b->size);
        io->save_u64(io->ctx, b->nfilters);
        io->save_u64(io->ctx, b->options);
        io->save_u64(io->ctx, b->growth);
        for (uint32_t i = 0; i < b->nfilters; i++) {
            const rb_link *l = &b->links[i];
            io->save_u64(io->ctx, l->entries);
            io->save_double(io->ctx, l->error);
            io->save_u64(io->ctx, l->hashes);
            io->save_double(io->ctx, l->bpe);
            io->save_u64(io->ctx, l->bits);
            io->save_u64(io->ctx, l->n2);
            io->save_buf(io->ctx, l->bf, (size_t)l->bytes);
            io->save_u64(io->ctx, l->size);
        }
        return;
    }
    const rb_cuckoo *c = o->rcf;
    io->save_u64(io->ctx, c->nfilters);
    io->save_u64(io->ctx, c->nb0);
    io->save_u64(io->ctx, c->items);
    io->save_u64(io->ctx, c->deletes);
    io->save_u64(io->ctx, c->bucket_size);
    io->save_u64(io->ctx, c->max_iter);
    io->save_u64(io->ctx, c->expansion);
    for (uint32_t i = 0; i < c->nfilters; i++) {
        io->save_u64(io->ctx, c->subs[i].nb);
        io->save_buf(io->ctx, c->subs[i].data, (size_t)(c->subs[i].nb * c->bucket_size));
    }
}
