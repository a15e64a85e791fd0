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
 *
 * Keys that are not whole records (params.lengths): a slot takes a second
 * word, the key's length, so a key may be any byte range of the span (a
 * field, a trimmed record).  Keys that are not in the span at all (a
 * normalised key whose bytes differ from the file's, a key of a loaded
 * state) are copied (dedup_refset_insert_copy) into an arena of their
 * part's own, each entry [u64 seq][u64 len][bytes], and their slot's offset
 * is span + the entry's place in that arena: the offsets past the span.
 * The arena is a table of chunks (ARENA_CHUNK bytes; a longer entry gets a
 * run of chunks of its own), so an entry never moves.  With params.counts a
 * slot's last word counts its key.  In first-occurrence order (foreach,
 * save) a key by reference sorts at DEDUP_REFSET_SPAN_SEQ + its offset, a
 * copy at the 'seq' it was given.
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/format.h"
#include "dedup/set.h"

#define TAG_BITS 24
#define TAG_MASK ((UINT64_C(1) << TAG_BITS) - 1)
#define MAX_BITS 24       /* slots per shard at most 2^24: the index comes from the tag */
#define MIN_BITS 4
#define AIM_BITS 14       /* shards are planned for about 2^14 slots each */
#define MAX_SHARDS ((size_t)1 << 16)
#define ARENA_BITS 18     /* copied keys: the arena grows by 256 KiB chunks */
#define ARENA_CHUNK ((uint64_t)1 << ARENA_BITS)
#define MAX_OFF ((UINT64_C(1) << 40) - 2) /* a slot's offset + 1 fits 40 bits */

typedef struct shard {
    uint64_t *slots;
    uint32_t bits, n;
} shard;

/* The copied keys of one part: a table of chunks; entries never move. */
typedef struct arena {
    unsigned char **tab;  /* chunk i's bytes (a long entry's run: consecutive) */
    unsigned char *start; /* 1 where a run of chunks was allocated */
    size_t ntab, cap;
    uint64_t used; /* the next entry's offset */
} arena;

/* What one part holds: written by the thread inserting its keys only. */
typedef struct part {
    _Atomic uint64_t size;
    _Atomic size_t memory; /* its shards' tables and its arena */
    arena ar;
    char pad[128 - sizeof(uint64_t) - sizeof(size_t) - sizeof(arena)]; /* own lines */
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
    /* The fields above and below are read by both threads on every key;
     * each part's counters are written by its thread on every new key: a
     * line of padding keeps them off each other's cache lines (the struct
     * itself is only as aligned as the allocator makes it). */
    char pad[64];
    part part[2]; /* part = d.hi >> 63 */
    unsigned w;     /* words a slot: offset|tag, [length], [count] */
    bool lengths, counts;
    bool has_empty; /* the empty key: kept here, not in a slot (see insert) */
    uint64_t empty_count, empty_seq;
};

void dedup_refset_params_init(dedup_refset_params *p)
{
    memset(p, 0, sizeof *p);
    p->term = '\n';
    p->seed = DEDUP_DEFAULT_SEED;
}

static size_t shard_bytes(const dedup_refset *s, unsigned bits)
{
    return ((size_t)1 << bits) * s->w * sizeof(uint64_t);
}

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
    s->lengths = p->lengths;
    s->counts = p->counts;
    s->w = 1u + p->lengths + p->counts;
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
    for (int p = 0; p < 2; p++) {
        arena *ar = &s->part[p].ar;
        for (size_t i = 0; i < ar->ntab; i++)
            if (ar->start[i])
                ddi_free(&s->alloc, ar->tab[i]);
        ddi_free(&s->alloc, ar->tab);
        ddi_free(&s->alloc, ar->start);
    }
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

/* The entry at offset a of arena 'ar': [seq][length][bytes]. */
static inline const unsigned char *entry_at(const arena *ar, uint64_t a)
{
    return ar->tab[(size_t)(a >> ARENA_BITS)] + (a & (ARENA_CHUNK - 1));
}

static inline uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Whether the key of slot 'sl' (offset c; digest d's part) is the key
 * (bytes k, length len): a copy past the span; a byte range of the span
 * with its length in the slot; or the whole record at c. */
static inline bool same_key(const dedup_refset *s, const uint64_t *sl, uint64_t c, dedup_digest d,
                            const void *k, size_t len)
{
    if (c >= s->span) {
        const unsigned char *e = entry_at(&s->part[dedup_refset_part(d)].ar, c - s->span);
        return get64(e + 8) == len && memcmp(e + 16, k, len) == 0;
    }
    if (s->lengths)
        return sl[1] == len && memcmp(s->base + c, k, len) == 0;
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
    size_t add = shard_bytes(s, nb);
    if (limited && s->limit && total_memory(s) + add > s->limit)
        return DEDUP_ERR_FULL;
    const unsigned w = s->w;
    uint64_t *ns = ddi_calloc(&s->alloc, ((size_t)1 << nb) * w, sizeof(uint64_t));
    if (!ns)
        return DEDUP_ERR_NOMEM;
    size_t m = ((size_t)1 << nb) - 1;
    if (h->slots) {
        for (size_t i = 0; i <= ((size_t)1 << h->bits) - 1; i++) {
            const uint64_t *v = h->slots + i * w;
            if (!*v)
                continue;
            size_t j = (size_t)(*v & TAG_MASK) & m;
            while (ns[j * w])
                j = (j + 1) & m;
            memcpy(ns + j * w, v, w * sizeof *v);
        }
        ddi_free(&s->alloc, h->slots);
    }
    bump_sz(&p->memory, add, h->slots ? shard_bytes(s, h->bits) : 0);
    h->slots = ns;
    h->bits = nb;
    return DEDUP_OK;
}

/* The slot holding the key, or the empty one where it belongs. */
static inline uint64_t *find(const dedup_refset *s, const shard *h, const void *k, size_t len,
                             dedup_digest d)
{
    uint64_t tag = d.lo & TAG_MASK;
    const unsigned w = s->w;
    size_t m = ((size_t)1 << h->bits) - 1, i = (size_t)tag & m;
    for (;;) {
        uint64_t *sl = h->slots + i * w, v = *sl;
        if (!v)
            return sl;
        if ((v & TAG_MASK) == tag && same_key(s, sl, (v >> TAG_BITS) - 1, d, k, len))
            return sl;
        i = (i + 1) & m;
    }
}

/* Room for an entry of 'need' bytes in part p's arena: its offset in *a.
 * DEDUP_ERR_FULL past the memory limit (when 'limited') or past the 40-bit
 * offsets, DEDUP_ERR_NOMEM; no entry is placed then. */
static dedup_status arena_room(dedup_refset *s, part *p, uint64_t need, bool limited, uint64_t *a)
{
    arena *ar = &p->ar;
    uint64_t pos = ar->used;
    uint64_t room = (pos >> ARENA_BITS) < ar->ntab ? ARENA_CHUNK - (pos & (ARENA_CHUNK - 1)) : 0;
    if (need <= room) {
        *a = pos;
        return DEDUP_OK;
    }
    uint64_t nch = (need + ARENA_CHUNK - 1) >> ARENA_BITS;
    pos = (uint64_t)ar->ntab << ARENA_BITS;
    if (need > MAX_OFF - s->span || pos > MAX_OFF - s->span - need || nch > SIZE_MAX / ARENA_CHUNK)
        return DEDUP_ERR_FULL;
    size_t bytes = (size_t)(nch << ARENA_BITS), tabs = 0, nc = ar->cap;
    if (ar->ntab + nch > ar->cap) {
        nc = ar->cap ? ar->cap * 2 : 16;
        while (nc < ar->ntab + nch)
            nc *= 2;
        tabs = (nc - ar->cap) * (sizeof *ar->tab + 1);
    }
    if (limited && s->limit && total_memory(s) + bytes + tabs > s->limit)
        return DEDUP_ERR_FULL;
    if (nc > ar->cap) {
        unsigned char **nt = ddi_realloc(&s->alloc, ar->tab, ar->cap * sizeof *nt, nc * sizeof *nt);
        if (!nt)
            return DEDUP_ERR_NOMEM;
        ar->tab = nt;
        unsigned char *ns = ddi_realloc(&s->alloc, ar->start, ar->cap, nc);
        if (!ns)
            return DEDUP_ERR_NOMEM; /* the larger table stays: harmless */
        ar->start = ns;
        bump_sz(&p->memory, tabs, 0);
        ar->cap = nc;
    }
    unsigned char *mem = ddi_malloc(&s->alloc, bytes);
    if (!mem)
        return DEDUP_ERR_NOMEM;
    for (uint64_t j = 0; j < nch; j++) {
        ar->tab[ar->ntab + j] = mem + (j << ARENA_BITS);
        ar->start[ar->ntab + j] = j == 0;
    }
    ar->ntab += (size_t)nch;
    ar->used = pos; /* the rest of the last chunk is left unused */
    bump_sz(&p->memory, bytes, 0);
    *a = pos;
    return DEDUP_OK;
}

/* Records key k (len bytes, digest d): copied with 'seq' when 'copy', else
 * by reference at offset 'off' of the span (k = base + off). */
static dedup_status insert(dedup_refset *s, const unsigned char *k, uint64_t off, size_t len,
                           dedup_digest d, uint64_t seq, bool copy, bool limited,
                           dedup_verdict *verdict)
{
    part *p = &s->part[dedup_refset_part(d)];
    /* Every empty record is the same key, wherever it lies.  It cannot go by
     * reference: an empty record at the end of a file without a last
     * terminator has the offset of the next file's first record, so its
     * bytes could not be told from that record's. */
    if (len == 0) {
        *verdict = s->has_empty ? DEDUP_DUPLICATE : DEDUP_NEW;
        bump(&p->size, !s->has_empty);
        if (!s->has_empty)
            s->empty_seq = copy ? seq : DEDUP_REFSET_SPAN_SEQ + off;
        s->has_empty = true;
        s->empty_count++;
        return DEDUP_OK;
    }
    shard *h = shard_of(s, d);
    uint64_t *sl = NULL;
    if (h->slots) {
        sl = find(s, h, k, len, d);
        if (*sl) {
            if (s->counts)
                sl[s->w - 1]++;
            *verdict = DEDUP_DUPLICATE;
            return DEDUP_OK;
        }
        if ((uint64_t)(h->n + 1) * 4 > ((uint64_t)3 << h->bits))
            sl = NULL;
    }
    uint64_t a = 0;
    if (copy) {
        dedup_status st = arena_room(s, p, 16 + (uint64_t)len, limited, &a);
        if (st != DEDUP_OK)
            return st;
    }
    if (!sl) {
        dedup_status st = shard_grow(s, h, p, limited);
        if (st != DEDUP_OK)
            return st; /* an arena chunk just added stays, empty: harmless */
        sl = find(s, h, k, len, d);
    }
    if (copy) {
        unsigned char *e = p->ar.tab[(size_t)(a >> ARENA_BITS)] + (a & (ARENA_CHUNK - 1));
        uint64_t l = len;
        memcpy(e, &seq, 8);
        memcpy(e + 8, &l, 8);
        memcpy(e + 16, k, len);
        p->ar.used = a + 16 + len;
        off = s->span + a;
    }
    sl[0] = ((off + 1) << TAG_BITS) | (d.lo & TAG_MASK);
    if (s->lengths)
        sl[1] = len;
    if (s->counts)
        sl[s->w - 1] = 1;
    h->n++;
    bump(&p->size, 1);
    *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

/* A key by reference: inside the span. */
static dedup_status insert_ref(dedup_refset *s, uint64_t off, size_t len, dedup_digest d,
                               bool limited, dedup_verdict *verdict)
{
    if (off > s->span || len > s->span - off)
        return DEDUP_ERR_INVALID_ARG;
    return insert(s, s->base + off, off, len, d, 0, false, limited, verdict);
}

dedup_status dedup_refset_insert(dedup_refset *s, uint64_t off, size_t len, dedup_digest d,
                                 dedup_verdict *verdict)
{
    return insert_ref(s, off, len, d, true, verdict);
}

dedup_status dedup_refset_insert_unlimited(dedup_refset *s, uint64_t off, size_t len,
                                           dedup_digest d, dedup_verdict *verdict)
{
    return insert_ref(s, off, len, d, false, verdict);
}

dedup_status dedup_refset_insert_copy(dedup_refset *s, const void *key, size_t len, dedup_digest d,
                                      uint64_t seq, bool limited, dedup_verdict *verdict)
{
    if (!key && len)
        return DEDUP_ERR_INVALID_ARG;
    return insert(s, key, 0, len, d, seq, true, limited, verdict);
}

bool dedup_refset_contains(const dedup_refset *s, const void *key, size_t len, dedup_digest d)
{
    if (len == 0)
        return s->has_empty;
    const shard *h = shard_of(s, d);
    return h->slots && *find(s, h, key, len, d) != 0;
}

uint64_t dedup_refset_count_of(const dedup_refset *s, const void *key, size_t len, dedup_digest d)
{
    if (len == 0)
        return !s->has_empty ? 0 : s->counts ? s->empty_count : 1;
    const shard *h = shard_of(s, d);
    if (!h->slots)
        return 0;
    const uint64_t *sl = find(s, h, key, len, d);
    return !*sl ? 0 : s->counts ? sl[s->w - 1] : 1;
}

void dedup_refset_prefetch(const dedup_refset *s, dedup_digest d)
{
    const shard *h = shard_of(s, d);
    if (h->slots)
        DD_PREFETCH(&h->slots[((size_t)(d.lo & TAG_MASK) & (((size_t)1 << h->bits) - 1)) * s->w]);
}

void dedup_refset_prefetch_key(const dedup_refset *s, dedup_digest d, size_t len)
{
    const shard *h = shard_of(s, d);
    if (!h->slots)
        return;
    /* the first slot from the key's own whose tag is the key's, before an
     * empty one (the key is absent then), among the slots of the cache
     * line the prefetch of the key's slot brought in: linear probing puts
     * a key past its own slot whenever that was taken when it came (only
     * looking at the key's own slot: 1.10x slower on 20M URL lines) */
    const uint64_t tag = d.lo & TAG_MASK;
    const size_t m = ((size_t)1 << h->bits) - 1;
    size_t i = (size_t)tag & m;
    uint64_t v;
    for (;;) {
        const uint64_t *sl = h->slots + i * s->w;
        v = *sl;
        if (!v || (v & TAG_MASK) == tag)
            break;
        i = (i + 1) & m;
        if (((uintptr_t)(h->slots + i * s->w) & 63) == 0 || i == 0)
            return; /* the next line: not fetched yet */
    }
    if (v && (v >> TAG_BITS) - 1 < s->span) {
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

/* ---- first-occurrence order: foreach and save -------------------------------- */

typedef struct ordered {
    uint64_t seq;
    const uint64_t *slot; /* NULL: the empty key */
    unsigned part;
} ordered;

static int by_seq(const void *a, const void *b)
{
    uint64_t x = ((const ordered *)a)->seq, y = ((const ordered *)b)->seq;
    return x < y ? -1 : x > y;
}

/* The key of slot 'sl' of part 'p': its bytes and length. */
static const unsigned char *key_of(const dedup_refset *s, const uint64_t *sl, unsigned p,
                                   uint64_t *len, uint64_t *seq)
{
    uint64_t c = (sl[0] >> TAG_BITS) - 1;
    if (c >= s->span) {
        const unsigned char *e = entry_at(&s->part[p].ar, c - s->span);
        *seq = get64(e);
        *len = get64(e + 8);
        return e + 16;
    }
    *seq = DEDUP_REFSET_SPAN_SEQ + c;
    if (s->lengths) {
        *len = sl[1];
    } else {
        uint64_t fe = end_after(s, c);
        const unsigned char *t = memchr(s->base + c, s->term, (size_t)(fe - c));
        *len = t ? (uint64_t)(t - (s->base + c)) : fe - c;
    }
    return s->base + c;
}

/* Every key with its seq, sorted: *out (n of them), to free by the caller. */
static dedup_status sorted_keys(const dedup_refset *s, ordered **out, size_t *n)
{
    uint64_t size = dedup_refset_size(s);
    if (size > SIZE_MAX / sizeof(ordered))
        return DEDUP_ERR_NOMEM;
    ordered *o = ddi_malloc(&((dedup_refset *)s)->alloc, (size_t)(size ? size : 1) * sizeof *o);
    if (!o)
        return DEDUP_ERR_NOMEM;
    size_t m = 0;
    if (s->has_empty)
        o[m++] = (ordered){s->empty_seq, NULL, 0};
    for (size_t i = 0; i < s->nsh; i++) {
        const shard *h = &s->sh[i];
        unsigned p = (unsigned)(i >> (63 - s->shift)) & 1u; /* the top bit of the shard's index */
        for (size_t j = 0; h->slots && j < ((size_t)1 << h->bits) && m < size; j++) {
            const uint64_t *sl = h->slots + j * s->w;
            if (!*sl)
                continue;
            uint64_t len, seq;
            (void)key_of(s, sl, p, &len, &seq);
            o[m++] = (ordered){seq, sl, p};
        }
    }
    qsort(o, m, sizeof *o, by_seq);
    *out = o;
    *n = m;
    return DEDUP_OK;
}

/* Calls fn on the n sorted keys o[] in order; stops at a nonzero return. */
static int visit(const dedup_refset *s, const ordered *o, size_t n, dedup_refset_visit fn, void *ctx)
{
    int r = 0;
    for (size_t i = 0; i < n && !r; i++) {
        uint64_t len = 0, seq, count = s->counts ? s->empty_count : 1;
        const unsigned char *k = (const unsigned char *)"";
        if (o[i].slot) {
            k = key_of(s, o[i].slot, o[i].part, &len, &seq);
            if (s->counts)
                count = o[i].slot[s->w - 1];
        }
        r = fn(ctx, k, (size_t)len, count);
    }
    return r;
}

int dedup_refset_foreach(const dedup_refset *s, dedup_refset_visit fn, void *ctx, dedup_status *st)
{
    ordered *o = NULL;
    size_t n = 0;
    *st = sorted_keys(s, &o, &n);
    if (*st)
        return 0;
    int r = visit(s, o, n, fn, ctx);
    ddi_free(&((dedup_refset *)s)->alloc, o);
    return r;
}

/* dedup_refset_save: the file dedup_strset_save writes for the same keys
 * inserted in the same order. */
typedef struct save_ctx {
    dedup_encoder *e;
    bool counts;
    dedup_status st;
} save_ctx;

static int save_one(void *ctx, const void *key, size_t len, uint64_t count)
{
    save_ctx *c = ctx;
    unsigned char h[12];
    dedup_put_u32(h, (uint32_t)len);
    dedup_put_u64(h + 4, count);
    c->st = dedup_encoder_write(c->e, h, c->counts ? 12 : 4);
    if (!c->st)
        c->st = dedup_encoder_write(c->e, key, len);
    return c->st != DEDUP_OK;
}

typedef struct size_ctx {
    uint64_t bytes;
    bool too_long;
} size_ctx;

static int size_one(void *ctx, const void *key, size_t len, uint64_t count)
{
    (void)key;
    (void)count;
    size_ctx *c = ctx;
    c->too_long |= len > UINT32_MAX;
    c->bytes += len;
    return 0;
}

dedup_status dedup_refset_save(const dedup_refset *s, dedup_sink *sink)
{
    if (!s || !sink)
        return DEDUP_ERR_INVALID_ARG;
    ordered *o = NULL;
    size_t n = 0;
    dedup_status st = sorted_keys(s, &o, &n);
    if (st)
        return st;
    size_ctx z = {0, false};
    (void)visit(s, o, n, size_one, &z);
    if (z.too_long) {
        ddi_free(&((dedup_refset *)s)->alloc, o);
        return DEDUP_ERR_LIMIT; /* the format's lengths are 32 bits, as dedup_strset's */
    }
    z.bytes += (uint64_t)n * (s->counts ? 12 : 4);
    unsigned char p[24];
    dedup_put_u64(p, n);
    dedup_put_u64(p + 8, z.bytes);
    dedup_put_u32(p + 16, s->counts ? 1u : 0u);
    dedup_put_u32(p + 20, 0);
    dedup_encoder e;
    st = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_SET_STRING, s->seed, p, sizeof p, z.bytes);
    save_ctx c = {&e, s->counts, DEDUP_OK};
    if (!st)
        (void)visit(s, o, n, save_one, &c);
    ddi_free(&((dedup_refset *)s)->alloc, o);
    if (!st)
        st = c.st;
    return st ? st : dedup_encoder_end(&e);
}
