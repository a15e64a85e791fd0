/*
 * refset.c - the exact set of keys kept by reference (dedup_refset,
 * dedup/set.h): keys stay where the caller holds them (a mapped input
 * file), and the set keeps one 8-byte slot per distinct key.
 *
 * A slot is (offset + 1) << 24 | tag: the key's offset in the caller's span
 * (40 bits: up to 1 TiB) and 24 bits of the digest's low half (0 marks an
 * empty slot).  The key's length is not stored: a key is a whole record, so
 * it ends at the span's terminator byte or at one of the ends the caller
 * named (the end of a file whose last record has none).
 *
 * Slots are split over 2^S shards, chosen up front from the expected number
 * of keys, by the digest's high half; inside a shard a table of 2^b slots
 * (b <= 24) with linear probing puts a key at (tag & (2^b - 1)).  Because the
 * slot keeps the bits that say where it goes, a shard doubles at load 3/4
 * without hashing anything again; the tag's 24 - b remaining bits reject
 * most other keys before their bytes are touched (about 10 bits at the
 * sizes the shard count aims for).  A shard that would pass 2^24 slots, or
 * a growth that would pass the memory limit, fails with DEDUP_ERR_FULL and
 * changes nothing.
 *
 * Two threads: there are always two shards or more, and the digest's top
 * bit (the top bit of the shard's index) splits them into two parts.  A
 * thread inserting only keys of one part touches only that part's shards
 * and that part's counters (keys and bytes, on a cache line of their own,
 * written by their one owner and read by anyone through relaxed atomics),
 * so two threads may insert at once, one part each.  The empty key belongs
 * to the part of its digest like any other.
 */
#include "internal.h"

#include <stdatomic.h>
#include <string.h>

#include "dedup/set.h"

#define TAG_BITS 24
#define TAG_MASK ((UINT64_C(1) << TAG_BITS) - 1)
#define MAX_BITS 24       /* slots per shard at most 2^24: the index comes from the tag */
#define MIN_BITS 4
#define AIM_BITS 14       /* shards are planned for about 2^14 slots each */
#define MAX_SHARDS ((size_t)1 << 16)

typedef struct shard {
    uint64_t *slots;
    uint32_t bits, n;
} shard;

/* What one part holds: written by the thread inserting its keys only. */
typedef struct part {
    _Atomic uint64_t size;
    _Atomic size_t memory; /* its shards' tables */
    char pad[128 - sizeof(uint64_t) - sizeof(size_t)]; /* the parts' counters never share a line */
} part;

struct dedup_refset {
    dedup_allocator alloc;
    const unsigned char *base;
    uint64_t span;
    unsigned char term;
    uint64_t *ends; /* sorted, nends of them */
    size_t nends;
    uint64_t seed, limit;
    shard *sh;
    size_t nsh;
    unsigned shift; /* shard = d.hi >> shift */
    size_t memory;  /* the fixed part: this, shards, ends */
    part part[2];   /* part = d.hi >> 63 */
    bool has_empty; /* the empty key: kept here, not in a slot (see insert) */
};

void dedup_refset_params_init(dedup_refset_params *p)
{
    memset(p, 0, sizeof *p);
    p->term = '\n';
    p->seed = DEDUP_DEFAULT_SEED;
}

static size_t shard_bytes(unsigned bits) { return ((size_t)1 << bits) * sizeof(uint64_t); }

dedup_status dedup_refset_create(const dedup_refset_params *p, const dedup_allocator *alloc,
                                 dedup_refset **out)
{
    if (!p || !out || !p->base || p->span >= (UINT64_C(1) << 40) - 1 || (p->nends && !p->ends))
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_refset *s = ddi_calloc(&a, 1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->alloc = a;
    s->base = p->base;
    s->span = p->span;
    s->term = p->term;
    s->seed = p->seed;
    s->limit = p->memory_limit;
    uint64_t expect = p->expected ? p->expected : p->span / 64;
    size_t nsh = 2; /* at least one shard a part */
    while (nsh < MAX_SHARDS && (uint64_t)nsh << AIM_BITS < expect + expect / 2)
        nsh *= 2;
    unsigned sb = 0;
    while (((size_t)1 << sb) < nsh)
        sb++;
    s->nsh = nsh;
    s->shift = 64 - sb;
    s->sh = ddi_calloc(&a, nsh, sizeof(shard));
    s->ends = p->nends ? ddi_malloc(&a, p->nends * sizeof(uint64_t)) : NULL;
    if (!s->sh || (p->nends && !s->ends)) {
        dedup_refset_free(s);
        return DEDUP_ERR_NOMEM;
    }
    if (p->nends)
        memcpy(s->ends, p->ends, p->nends * sizeof(uint64_t));
    s->nends = p->nends;
    s->memory = sizeof *s + nsh * sizeof(shard) + p->nends * sizeof(uint64_t);
    *out = s;
    return DEDUP_OK;
}

void dedup_refset_free(dedup_refset *s)
{
    if (!s)
        return;
    if (s->sh)
        for (size_t i = 0; i < s->nsh; i++)
            ddi_free(&s->alloc, s->sh[i].slots);
    ddi_free(&s->alloc, s->sh);
    ddi_free(&s->alloc, s->ends);
    dedup_allocator a = s->alloc;
    ddi_free(&a, s);
}

static inline shard *shard_of(const dedup_refset *s, dedup_digest d)
{
    return &s->sh[(size_t)(d.hi >> s->shift)];
}

unsigned dedup_refset_part(dedup_digest d) { return (unsigned)(d.hi >> 63); }

static inline uint64_t load(_Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static inline size_t load_sz(_Atomic size_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* Its owner's own update: a plain load and store, no locked instruction. */
static inline void bump(_Atomic uint64_t *v, uint64_t by)
{
    atomic_store_explicit(v, load(v) + by, memory_order_relaxed);
}

static inline void bump_sz(_Atomic size_t *v, size_t add, size_t sub)
{
    atomic_store_explicit(v, load_sz(v) + add - sub, memory_order_relaxed);
}

static size_t total_memory(const dedup_refset *s)
{
    dedup_refset *m = (dedup_refset *)s;
    return s->memory + load_sz(&m->part[0].memory) + load_sz(&m->part[1].memory);
}

/* The end of the file (record stream) that holds offset c: the first end
 * above c, or the span's end. */
static inline uint64_t end_after(const dedup_refset *s, uint64_t c)
{
    size_t lo = 0, hi = s->nends;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->ends[mid] <= c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->nends ? s->ends[lo] : s->span;
}

/* Whether the whole record at offset c is the key (bytes k, length len). */
static inline bool same_key(const dedup_refset *s, uint64_t c, const void *k, size_t len)
{
    uint64_t fe = end_after(s, c);
    if (len > fe - c)
        return false;
    if (len && memcmp(s->base + c, k, len) != 0)
        return false;
    return c + len == fe || s->base[c + len] == s->term;
}

/* Doubles shard h of part p (or gives it its first table): DEDUP_ERR_FULL
 * past 2^24 slots or (when 'limited') the memory limit, DEDUP_ERR_NOMEM;
 * nothing changed then. */
static dedup_status shard_grow(dedup_refset *s, shard *h, part *p, bool limited)
{
    unsigned nb = h->slots ? h->bits + 1 : MIN_BITS;
    if (nb > MAX_BITS)
        return DEDUP_ERR_FULL;
    size_t add = shard_bytes(nb);
    if (limited && s->limit && total_memory(s) + add > s->limit)
        return DEDUP_ERR_FULL;
    uint64_t *ns = ddi_calloc(&s->alloc, (size_t)1 << nb, sizeof(uint64_t));
    if (!ns)
        return DEDUP_ERR_NOMEM;
    size_t m = ((size_t)1 << nb) - 1;
    if (h->slots) {
        for (size_t i = 0; i <= ((size_t)1 << h->bits) - 1; i++) {
            uint64_t v = h->slots[i];
            if (!v)
                continue;
            size_t j = (size_t)(v & TAG_MASK) & m;
            while (ns[j])
                j = (j + 1) & m;
            ns[j] = v;
        }
        ddi_free(&s->alloc, h->slots);
    }
    bump_sz(&p->memory, add, h->slots ? shard_bytes(h->bits) : 0);
    h->slots = ns;
    h->bits = nb;
    return DEDUP_OK;
}

/* The slot holding the key, or the empty one where it belongs. */
static inline uint64_t *find(const dedup_refset *s, const shard *h, const void *k, size_t len,
                             dedup_digest d)
{
    uint64_t tag = d.lo & TAG_MASK;
    size_t m = ((size_t)1 << h->bits) - 1, i = (size_t)tag & m;
    for (;;) {
        uint64_t v = h->slots[i];
        if (!v)
            return &h->slots[i];
        if ((v & TAG_MASK) == tag && same_key(s, (v >> TAG_BITS) - 1, k, len))
            return &h->slots[i];
        i = (i + 1) & m;
    }
}

static dedup_status insert(dedup_refset *s, uint64_t off, size_t len, dedup_digest d,
                           bool limited, dedup_verdict *verdict)
{
    if (off > s->span || len > s->span - off)
        return DEDUP_ERR_INVALID_ARG;
    part *p = &s->part[dedup_refset_part(d)];
    /* Every empty record is the same key, wherever it lies.  It cannot go by
     * reference: an empty record at the end of a file without a last
     * terminator has the offset of the next file's first record, so its
     * bytes could not be told from that record's. */
    if (len == 0) {
        *verdict = s->has_empty ? DEDUP_DUPLICATE : DEDUP_NEW;
        bump(&p->size, !s->has_empty);
        s->has_empty = true;
        return DEDUP_OK;
    }
    shard *h = shard_of(s, d);
    const void *k = s->base + off;
    uint64_t *sl = NULL;
    if (h->slots) {
        sl = find(s, h, k, len, d);
        if (*sl) {
            *verdict = DEDUP_DUPLICATE;
            return DEDUP_OK;
        }
        if ((uint64_t)(h->n + 1) * 4 > ((uint64_t)3 << h->bits))
            sl = NULL;
    }
    if (!sl) {
        dedup_status st = shard_grow(s, h, p, limited);
        if (st != DEDUP_OK)
            return st;
        sl = find(s, h, k, len, d);
    }
    *sl = ((off + 1) << TAG_BITS) | (d.lo & TAG_MASK);
    h->n++;
    bump(&p->size, 1);
    *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

dedup_status dedup_refset_insert(dedup_refset *s, uint64_t off, size_t len, dedup_digest d,
                                 dedup_verdict *verdict)
{
    return insert(s, off, len, d, true, verdict);
}

dedup_status dedup_refset_insert_unlimited(dedup_refset *s, uint64_t off, size_t len,
                                           dedup_digest d, dedup_verdict *verdict)
{
    return insert(s, off, len, d, false, verdict);
}

bool dedup_refset_contains(const dedup_refset *s, const void *key, size_t len, dedup_digest d)
{
    if (len == 0)
        return s->has_empty;
    const shard *h = shard_of(s, d);
    return h->slots && *find(s, h, key, len, d) != 0;
}

void dedup_refset_prefetch(const dedup_refset *s, dedup_digest d)
{
    const shard *h = shard_of(s, d);
    if (h->slots)
        DD_PREFETCH(&h->slots[(size_t)(d.lo & TAG_MASK) & (((size_t)1 << h->bits) - 1)]);
}

void dedup_refset_prefetch_key(const dedup_refset *s, dedup_digest d, size_t len)
{
    const shard *h = shard_of(s, d);
    if (!h->slots)
        return;
    uint64_t v = h->slots[(size_t)(d.lo & TAG_MASK) & (((size_t)1 << h->bits) - 1)];
    if (v && (v & TAG_MASK) == (d.lo & TAG_MASK)) {
        const unsigned char *k = s->base + ((v >> TAG_BITS) - 1);
        DD_PREFETCH(k);
        /* the comparison reads up to the terminator after len bytes: its
         * last line too when the key crosses one */
        if (((uintptr_t)k ^ (uintptr_t)(k + len)) >= 64 && len <= s->span)
            DD_PREFETCH(k + len);
    }
}

uint64_t dedup_refset_size(const dedup_refset *s)
{
    dedup_refset *m = (dedup_refset *)s;
    return load(&m->part[0].size) + load(&m->part[1].size);
}

size_t dedup_refset_memory_usage(const dedup_refset *s) { return total_memory(s); }

uint64_t dedup_refset_memory_limit(const dedup_refset *s) { return s->limit; }
