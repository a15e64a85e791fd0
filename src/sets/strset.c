/*
 * strset.c - the exact string set (dedup_strset, dedup/set.h): an
 * open-addressing table of {tag, ref} slots in segments (extendible
 * hashing), with the keys in an append-only arena.  What the three sets
 * share is in set.c.
 *
 * Strings: a slot is 16 bytes {tag, ref}.  'tag' is digest.lo (never 0; 0
 * marks an empty slot): it says where the key goes, again and again as the
 * set grows, so no key is ever hashed twice, and a probe rejects a
 * different key without touching the key bytes except on a full 64-bit tag
 * match.  'ref' locates the entry in an append-only arena of chunks:
 * (chunk << 32) | offset.  An entry is [u32 length][u64 count, only with
 * counts][bytes].  Entries are appended in insertion order, so iteration
 * walks the arena and needs no extra index.  A key too large for a normal
 * chunk gets a chunk of its own.
 *
 * The string slots live in segments (extendible hashing): a directory of
 * 2^D segment indices, D the global depth, is indexed by the top D bits of
 * the tag; a segment of local depth ld <= D holds every tag whose top ld
 * bits are its own (2^(D-ld) directory entries point to it).  Inside a
 * segment the home slot is dedup_reduce(tag << 32, STR_SEG), from the low
 * 32 bits (independent of the directory's; D stays <= 32), and probing
 * wraps inside the segment.  A segment is STR_SEG = 131068 slots, 2 MiB
 * less 64 bytes: one huge page, header included, with an allocator that
 * gives them (the CLI's does).
 *   - Growth: when an insert would pass 3/4 of a segment's slots, the
 *     segment splits: one new segment takes the entries whose tag bit
 *     63 - ld is set, both get local depth ld + 1, and the directory is
 *     doubled first if ld == D (it only holds 4-byte indices).  The old
 *     segment is rebuilt in place: from an empty slot, one cyclic pass takes
 *     every entry out and either moves it to the new segment or puts it back
 *     from its home, which is never past where it was; an entry put back
 *     never probes across a slot not yet visited, so all probe runs stay
 *     intact.  No second table and no scratch block: growth allocates
 *     exactly one segment, and the memory ever touched is the final tables.
 *   - Small sets: while there is one segment (D = 0) it is an ordinary table
 *     that grows by doubling (calloc, re-insert, free) from 64 slots, or its
 *     capacity-sized start, up to STR_SEG; only then does splitting start.
 *   - params.capacity beyond one segment's 3/4 creates 2^D full segments
 *     up front, D the least with capacity / 2^D (+ 1/32 for the spread of
 *     a hash) within 3/4 of a segment, so no split happens before then.
 */
#include "set_internal.h"

#include "dedup/limits.h"

#include <stdlib.h>

#define ARENA_CHUNK ((size_t)4 << 20) /* 4 MiB: large enough to amortise, small enough for budgets */

/* Slots per segment: 2 MiB of 16-byte slots less 64 bytes, so that an
 * allocator handing out huge pages for large blocks (the CLI's does) backs
 * each segment with one huge page even after its own header (the CLI's
 * takes 64 bytes, glibc's mmap'd chunks 16). */
#define STR_SEG ((uint64_t)131068)
#define STR_MAX_DEPTH 32u /* directory bits; the home inside a segment uses the low 32 */

typedef struct str_slot {
    uint64_t tag; /* digest.lo (1 if it was 0), 0 = empty; the slot derives from it */
    uint64_t ref; /* chunk << 32 | offset */
} str_slot;

typedef struct str_seg {
    str_slot *slots;
    uint64_t nslots;  /* STR_SEG, or less while the set is one small table */
    uint64_t used;    /* keys held */
    uint64_t grow_at; /* nslots * 3/4: an insert past it grows or splits the segment */
    unsigned ld;      /* local depth: the segment holds the tags whose top ld bits are its own */
} str_seg;

typedef struct chunk {
    unsigned char *data;
    size_t used;
    size_t cap;
} chunk;

struct dedup_strset {
    dedup_allocator alloc;
    uint64_t seed;
    uint64_t limit;
    bool counts;
    uint32_t *dir;   /* 2^depth segment indices, by the top 'depth' bits of the tag */
    unsigned depth;  /* global depth */
    unsigned dshift; /* 63 - depth: dir index = (tag >> 1) >> dshift */
    str_seg *segs;
    size_t nsegs, segs_cap;
    uint64_t size;
    chunk *chunks;
    size_t nchunks, chunks_cap;
    size_t arena_bytes; /* sum of chunk capacities */
};

static inline uint64_t str_tag(dedup_digest d) { return d.lo ? d.lo : 1; }

static size_t entry_header(const dedup_strset *s) { return 4 + (s->counts ? 8 : 0); }

static inline unsigned char *entry_at(const dedup_strset *s, uint64_t ref)
{
    return s->chunks[ref >> 32].data + (uint32_t)ref;
}

static inline uint32_t entry_len(const unsigned char *e)
{
    uint32_t l;
    memcpy(&l, e, 4);
    return l;
}

static size_t strset_table_bytes(uint64_t nslots) { return (size_t)nslots * sizeof(str_slot); }

/* An array of 'elem'-byte items with twice the capacity (16 when empty);
 * *cap is updated, NULL (the array unchanged) if the allocator fails. */
static void *grow_array(const dedup_allocator *a, void *arr, size_t *cap, size_t elem)
{
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = ddi_realloc(a, arr, *cap * elem, nc * elem);
    if (p)
        *cap = nc;
    return p;
}

/* The segment a tag belongs to (top 'depth' bits), and its home slot there
 * (from the low 32 bits, independent of the directory's). */
static inline str_seg *str_seg_of(const dedup_strset *s, uint64_t tag)
{
    return &s->segs[s->dir[(tag >> 1) >> s->dshift]];
}

static inline uint64_t str_home(uint64_t tag, uint64_t nslots)
{
    return dedup_reduce(tag << 32, nslots);
}

static uint64_t seg_grow_at(uint64_t nslots) { return nslots / 4 * 3 + nslots % 4 * 3 / 4; }

size_t dedup_strset_memory_usage(const dedup_strset *s)
{
    if (!s)
        return 0;
    size_t tables = 0;
    for (size_t i = 0; i < s->nsegs; i++)
        tables += strset_table_bytes(s->segs[i].nslots);
    return sizeof *s + ((size_t)sizeof(uint32_t) << s->depth) + s->segs_cap * sizeof(str_seg) +
           tables + s->arena_bytes + s->chunks_cap * sizeof(chunk);
}

/* Bytes the next growth step of 'g' adds at its peak: the doubled table
 * (while the set is one small table: old and new coexist), or a split's new
 * segment, a larger segment array and, when g is as deep as the directory, the
 * doubled directory (old and new coexist). */
static size_t str_grow_bytes(const dedup_strset *s, const str_seg *g)
{
    if (g->nslots < STR_SEG) {
        uint64_t n = g->nslots * 2 < STR_SEG ? g->nslots * 2 : STR_SEG;
        return strset_table_bytes(n);
    }
    size_t b = strset_table_bytes(STR_SEG);
    if (s->nsegs == s->segs_cap)
        b += s->segs_cap * sizeof(str_seg);
    if (g->ld == s->depth)
        b += (size_t)sizeof(uint32_t) << (s->depth + 1);
    return b;
}

/* The global depth for a set created for 'capacity' keys: enough segments
 * that each expects at most 3/4 of its slots less a margin of 1/32 for the
 * spread of a hash (about 10 standard deviations at this size). */
static unsigned str_depth_for(uint64_t capacity)
{
    unsigned d = 0;
    for (;;) {
        uint64_t per = (capacity >> d) + ((capacity & ((UINT64_C(1) << d) - 1)) != 0);
        if (per + per / 32 <= seg_grow_at(STR_SEG))
            return d;
        d++;
    }
}

static void str_free_tables(dedup_strset *s)
{
    for (size_t i = 0; i < s->nsegs; i++)
        ddi_free(&s->alloc, s->segs[i].slots);
    ddi_free(&s->alloc, s->segs);
    ddi_free(&s->alloc, s->dir);
}

dedup_status dedup_strset_create(const dedup_set_params *params, const dedup_allocator *alloc,
                                 dedup_strset **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_set_params def;
    if (!params) {
        dedup_set_params_init(&def);
        params = &def;
    }
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    uint64_t nslots = ddi_set_slots_for(params->capacity, 3, 4);
    if (nslots > (UINT64_C(1) << 40))
        return DEDUP_ERR_LIMIT;
    /* One small table up to a segment's worth, else 2^depth full segments. */
    unsigned depth = 0;
    uint64_t per = nslots;
    if (nslots > STR_SEG || params->capacity > seg_grow_at(nslots)) {
        depth = str_depth_for(params->capacity);
        per = STR_SEG;
    }
    size_t nsegs = (size_t)1 << depth;
    size_t bytes = sizeof(dedup_strset) + ((size_t)sizeof(uint32_t) << depth) +
                   nsegs * (sizeof(str_seg) + strset_table_bytes(per));
    if (params->memory_limit && bytes > params->memory_limit)
        return DEDUP_ERR_FULL;
    dedup_strset *s = ddi_calloc(&a, 1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->alloc = a;
    s->seed = params->seed;
    s->limit = params->memory_limit;
    s->counts = params->counts;
    s->depth = depth;
    s->dshift = 63 - depth;
    s->dir = ddi_malloc(&a, sizeof(uint32_t) * nsegs);
    s->segs = ddi_calloc(&a, nsegs, sizeof(str_seg));
    if (!s->dir || !s->segs)
        goto nomem;
    s->segs_cap = nsegs;
    for (size_t i = 0; i < nsegs; i++) {
        str_slot *t = ddi_calloc(&a, (size_t)per, sizeof(str_slot));
        if (!t)
            goto nomem;
        s->segs[i] = (str_seg){t, per, 0, seg_grow_at(per), depth};
        s->dir[i] = (uint32_t)i;
        s->nsegs++;
    }
    *out = s;
    return DEDUP_OK;
nomem:
    str_free_tables(s);
    ddi_free(&a, s);
    return DEDUP_ERR_NOMEM;
}

void dedup_strset_free(dedup_strset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nchunks; i++)
        ddi_free(&s->alloc, s->chunks[i].data);
    ddi_free(&s->alloc, s->chunks);
    str_free_tables(s);
    ddi_free(&s->alloc, s);
}

void dedup_strset_clear(dedup_strset *s)
{
    for (size_t i = 0; i < s->nchunks; i++)
        ddi_free(&s->alloc, s->chunks[i].data);
    s->nchunks = 0;
    s->arena_bytes = 0;
    for (size_t i = 0; i < s->nsegs; i++) {
        memset(s->segs[i].slots, 0, strset_table_bytes(s->segs[i].nslots));
        s->segs[i].used = 0;
    }
    s->size = 0;
}

dedup_digest dedup_strset_digest(const dedup_strset *s, const void *key, size_t len)
{
    return dedup_hash(key, len, s->seed);
}

void dedup_strset_prefetch(const dedup_strset *s, dedup_digest d)
{
    uint64_t tag = str_tag(d);
    const str_seg *g = str_seg_of(s, tag);
    DD_PREFETCH(&g->slots[str_home(tag, g->nslots)]);
}

void dedup_strset_prefetch_key(const dedup_strset *s, dedup_digest d)
{
    uint64_t tag = str_tag(d);
    const str_seg *g = str_seg_of(s, tag);
    uint64_t i = str_home(tag, g->nslots);
    for (int probes = 0; probes < 4; probes++) {
        const str_slot *sl = &g->slots[i];
        if (sl->tag == 0)
            return;
        if (sl->tag == tag) {
            /* the entry's header and key often straddle two lines */
            const unsigned char *e = entry_at(s, sl->ref);
            DD_PREFETCH(e);
            DD_PREFETCH(e + 64);
            return;
        }
        if (++i == g->nslots)
            i = 0;
    }
}

/* Finds the slot holding key in its segment g, or the empty slot where it
 * would go. */
static inline str_slot *str_find(const dedup_strset *s, const str_seg *g, const void *key,
                                 size_t len, uint64_t tag, bool *found)
{
    uint64_t i = str_home(tag, g->nslots);
    for (;;) {
        str_slot *sl = &g->slots[i];
        if (sl->tag == 0) {
            *found = false;
            return sl;
        }
        if (sl->tag == tag) {
            const unsigned char *e = entry_at(s, sl->ref);
            if (entry_len(e) == len && (len == 0 || memcmp(e + entry_header(s), key, len) == 0)) {
                *found = true;
                return sl;
            }
        }
        if (++i == g->nslots)
            i = 0;
    }
}

static inline void str_place(str_slot *t, uint64_t n, str_slot x)
{
    uint64_t j = str_home(x.tag, n);
    while (t[j].tag)
        if (++j == n)
            j = 0;
    t[j] = x;
}

/* The one small table doubles (up to a segment); the old one is freed. */
static dedup_status str_grow_table(dedup_strset *s, str_seg *g)
{
    uint64_t n = g->nslots * 2 < STR_SEG ? g->nslots * 2 : STR_SEG;
    str_slot *ns = ddi_calloc(&s->alloc, (size_t)n, sizeof(str_slot));
    if (!ns)
        return DEDUP_ERR_NOMEM;
    for (uint64_t i = 0; i < g->nslots; i++)
        if (g->slots[i].tag)
            str_place(ns, n, g->slots[i]); /* the tag is the home: no rehashing of keys */
    ddi_free(&s->alloc, g->slots);
    g->slots = ns;
    g->nslots = n;
    g->grow_at = seg_grow_at(n);
    return DEDUP_OK;
}

/* Splits segment gi (a full-size one) by tag bit 63 - ld into itself and a
 * new segment, doubling the directory first if the segment is as deep as
 * it; 'tag' is one that belongs to it.  On failure the set is unchanged (but for a doubled directory, which
 * is harmless). */
static dedup_status str_split(dedup_strset *s, size_t gi, uint64_t tag)
{
    unsigned ld = s->segs[gi].ld;
    if (ld >= STR_MAX_DEPTH)
        return DEDUP_ERR_LIMIT;
    if (s->nsegs >= UINT32_MAX)
        return DEDUP_ERR_LIMIT;
    if (ld == s->depth) {
        size_t old = (size_t)1 << s->depth;
        uint32_t *nd = ddi_malloc(&s->alloc, sizeof(uint32_t) * old * 2);
        if (!nd)
            return DEDUP_ERR_NOMEM;
        for (size_t i = 0; i < old * 2; i++)
            nd[i] = s->dir[i >> 1];
        ddi_free(&s->alloc, s->dir);
        s->dir = nd;
        s->depth++;
        s->dshift--;
    }
    if (s->nsegs == s->segs_cap) {
        str_seg *arr = grow_array(&s->alloc, s->segs, &s->segs_cap, sizeof *arr);
        if (!arr)
            return DEDUP_ERR_NOMEM;
        s->segs = arr;
    }
    str_slot *nt = ddi_calloc(&s->alloc, (size_t)STR_SEG, sizeof(str_slot));
    if (!nt)
        return DEDUP_ERR_NOMEM;
    size_t ni = s->nsegs++;
    str_seg *g = &s->segs[gi], *h = &s->segs[ni];
    *h = (str_seg){nt, STR_SEG, 0, seg_grow_at(STR_SEG), ld + 1};
    g->ld = ld + 1;

    /* The directory entries of g form a run of 2^(depth - ld); its upper
     * half (next tag bit set) now points to h. */
    unsigned span = s->depth - ld;
    size_t first = (size_t)((tag >> 1) >> s->dshift) >> span << span;
    size_t half = (size_t)1 << (span - 1);
    for (size_t i = first + half; i < first + 2 * half; i++)
        s->dir[i] = (uint32_t)ni;

    /* Redistribute in place.  Starting just after an empty slot, each
     * entry is taken out and put back from its home (at or before where it
     * was, in this cyclic order) or moved to h: an entry placed earlier
     * never probes across a slot taken out later, so every probe sequence
     * stays intact. */
    str_slot *t = g->slots;
    uint64_t e = 0;
    while (t[e].tag)
        e++;
    uint64_t moved = 0;
    for (uint64_t k = 1, p = e; k < STR_SEG; k++) {
        if (++p == STR_SEG)
            p = 0;
        str_slot x = t[p];
        if (!x.tag)
            continue;
        t[p].tag = 0;
        if ((x.tag >> (63 - ld)) & 1) {
            str_place(nt, STR_SEG, x);
            moved++;
        } else {
            str_place(t, STR_SEG, x);
        }
    }
    g->used -= moved;
    h->used = moved;
    return DEDUP_OK;
}

/* Bytes a new entry of 'need' bytes adds to the arena: none while the last
 * chunk has room, else a chunk (and a larger chunk array, when full). */
static size_t arena_grow_bytes(const dedup_strset *s, size_t need)
{
    if (s->nchunks && s->chunks[s->nchunks - 1].cap - s->chunks[s->nchunks - 1].used >= need)
        return 0;
    size_t b = need > ARENA_CHUNK ? need : ARENA_CHUNK;
    if (s->nchunks == s->chunks_cap)
        b += (s->chunks_cap ? s->chunks_cap : 16) * sizeof(chunk);
    return b;
}

size_t dedup_strset_memory_after_insert(const dedup_strset *s, size_t len)
{
    size_t mem = dedup_strset_memory_usage(s);
    /* Without the digest the segment is unknown: the largest growth step
     * of any full segment. */
    size_t grow = 0;
    for (size_t i = 0; i < s->nsegs; i++)
        if (s->segs[i].used + 1 > s->segs[i].grow_at) {
            size_t b = str_grow_bytes(s, &s->segs[i]);
            if (b > grow)
                grow = b;
        }
    return mem + grow + arena_grow_bytes(s, entry_header(s) + len);
}

/* Reserves 'need' arena bytes; returns the ref. */
static dedup_status arena_alloc(dedup_strset *s, size_t need, uint64_t *ref)
{
    chunk *c = s->nchunks ? &s->chunks[s->nchunks - 1] : NULL;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        if (s->limit && dedup_strset_memory_usage(s) + arena_grow_bytes(s, need) > s->limit)
            return DEDUP_ERR_FULL;
        if (s->nchunks == s->chunks_cap) {
            chunk *arr = grow_array(&s->alloc, s->chunks, &s->chunks_cap, sizeof *arr);
            if (!arr)
                return DEDUP_ERR_NOMEM;
            s->chunks = arr;
        }
        if (s->nchunks >= UINT32_MAX)
            return DEDUP_ERR_LIMIT;
        unsigned char *data = ddi_malloc(&s->alloc, cap);
        if (!data)
            return DEDUP_ERR_NOMEM;
        c = &s->chunks[s->nchunks++];
        c->data = data;
        c->used = 0;
        c->cap = cap;
        s->arena_bytes += cap;
    }
    *ref = ((uint64_t)(s->nchunks - 1) << 32) | c->used;
    c->used += need;
    return DEDUP_OK;
}

/* Makes room in the segment of 'tag' for one more key: doubles the small
 * table or splits the segment (again, while the split left the key's half
 * full: only digests crowded on their top bits do that). */
static dedup_status str_make_room(dedup_strset *s, uint64_t tag)
{
    for (;;) {
        str_seg *g = str_seg_of(s, tag);
        if (g->used + 1 <= g->grow_at)
            return DEDUP_OK;
        if (s->limit && dedup_strset_memory_usage(s) + str_grow_bytes(s, g) > s->limit)
            return DEDUP_ERR_FULL;
        dedup_status st = g->nslots < STR_SEG ? str_grow_table(s, g)
                                              : str_split(s, (size_t)(g - s->segs), tag);
        if (st)
            return st;
    }
}

dedup_status dedup_strset_insert(dedup_strset *s, const void *key, size_t len, dedup_digest d,
                                 dedup_verdict *verdict)
{
    if (len > UINT32_MAX)
        return DEDUP_ERR_LIMIT;
    uint64_t tag = str_tag(d);
    str_seg *g = str_seg_of(s, tag);
    bool found;
    str_slot *sl = str_find(s, g, key, len, tag, &found);
    if (found) {
        if (s->counts) {
            unsigned char *e = entry_at(s, sl->ref);
            uint64_t c;
            memcpy(&c, e + 4, 8);
            c++;
            memcpy(e + 4, &c, 8);
        }
        *verdict = DEDUP_DUPLICATE;
        return DEDUP_OK;
    }
    /* New key: make room first so that failure changes nothing. */
    size_t hdr = entry_header(s);
    if (DD_UNLIKELY(g->used + 1 > g->grow_at)) {
        if (s->limit && dedup_strset_memory_usage(s) + str_grow_bytes(s, g) +
                                arena_grow_bytes(s, hdr + len) >
                            s->limit)
            return DEDUP_ERR_FULL;
        dedup_status st = str_make_room(s, tag);
        if (st)
            return st;
        g = str_seg_of(s, tag);
        sl = str_find(s, g, key, len, tag, &found);
    }
    uint64_t ref;
    dedup_status st = arena_alloc(s, hdr + len, &ref);
    if (st)
        return st;
    unsigned char *e = entry_at(s, ref);
    uint32_t l32 = (uint32_t)len;
    memcpy(e, &l32, 4);
    if (s->counts) {
        uint64_t one = 1;
        memcpy(e + 4, &one, 8);
    }
    if (len)
        memcpy(e + hdr, key, len);
    sl->tag = tag;
    sl->ref = ref;
    g->used++;
    s->size++;
    *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

bool dedup_strset_contains(const dedup_strset *s, const void *key, size_t len, dedup_digest d)
{
    uint64_t tag = str_tag(d);
    bool found;
    (void)str_find(s, str_seg_of(s, tag), key, len, tag, &found);
    return found;
}

uint64_t dedup_strset_count_of(const dedup_strset *s, const void *key, size_t len,
                               dedup_digest d)
{
    uint64_t tag = str_tag(d);
    bool found;
    str_slot *sl = str_find(s, str_seg_of(s, tag), key, len, tag, &found);
    if (!found)
        return 0;
    if (!s->counts)
        return 1;
    uint64_t c;
    memcpy(&c, entry_at(s, sl->ref) + 4, 8);
    return c;
}

uint64_t dedup_strset_size(const dedup_strset *s) { return s->size; }

int dedup_strset_foreach(const dedup_strset *s, dedup_strset_visit fn, void *ctx)
{
    size_t hdr = entry_header(s);
    for (size_t c = 0; c < s->nchunks; c++) {
        const chunk *ch = &s->chunks[c];
        size_t off = 0;
        while (off < ch->used) {
            const unsigned char *e = ch->data + off;
            uint32_t len = entry_len(e);
            uint64_t count = 1;
            if (s->counts)
                memcpy(&count, e + 4, 8);
            int r = fn(ctx, e + hdr, len, count);
            if (r)
                return r;
            off += hdr + len;
        }
    }
    return 0;
}

/* File layout (type SET_STRING): params = keys u64, key bytes u64, flags u32
 * (bit 0: counts), reserved u32.  Payload: per key in insertion order,
 * length u32, [count u64], bytes. */
dedup_status dedup_strset_save(const dedup_strset *s, dedup_sink *sink)
{
    uint64_t bytes = 0;
    for (size_t c = 0; c < s->nchunks; c++)
        bytes += s->chunks[c].used;
    unsigned char p[24];
    dedup_put_u64(p, s->size);
    dedup_put_u64(p + 8, bytes);
    dedup_put_u32(p + 16, s->counts ? 1u : 0u);
    dedup_put_u32(p + 20, 0);
    dedup_encoder e;
    dedup_status st = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_SET_STRING, s->seed, p, sizeof p, bytes);
    size_t hdr = entry_header(s);
    for (size_t c = 0; !st && c < s->nchunks; c++) {
        const chunk *ch = &s->chunks[c];
        size_t off = 0;
        while (!st && off < ch->used) {
            const unsigned char *en = ch->data + off;
            uint32_t len = entry_len(en);
            unsigned char h[12];
            dedup_put_u32(h, len);
            if (s->counts) {
                uint64_t cnt;
                memcpy(&cnt, en + 4, 8);
                dedup_put_u64(h + 4, cnt);
            }
            st = dedup_encoder_write(&e, h, hdr);
            if (!st)
                st = dedup_encoder_write(&e, en + hdr, len);
            off += hdr + len;
        }
    }
    if (!st)
        st = dedup_encoder_end(&e);
    return st;
}

dedup_status dedup_strset_load(dedup_source src, const dedup_allocator *alloc, dedup_strset **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    /* Every allocation through the caller's hook; the decoder (~5 KB, 64-byte
     * aligned, which no allocator promises) on the stack, as in every loader. */
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_decoder decoder, *d = &decoder;
    dedup_strset *s = NULL;
    unsigned char *buf = NULL;
    dedup_status st = dedup_decoder_begin(d, src, DEDUP_TYPE_SET_STRING);
    if (st)
        goto done;
    if (d->header.params_len != 24) {
        st = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t nkeys = dedup_get_u64(d->params);
    uint64_t bytes = dedup_get_u64(d->params + 8);
    uint32_t flags = dedup_get_u32(d->params + 16);
    bool counts = flags & 1u;
    size_t hdr = 4 + (counts ? 8 : 0);
    if ((flags & ~1u) || dedup_get_u32(d->params + 20) || bytes != d->header.payload_len ||
        nkeys > bytes / hdr || nkeys > (UINT64_C(1) << 38)) {
        st = DEDUP_ERR_CORRUPT;
        goto done;
    }
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.capacity = nkeys;
    p.seed = d->header.seed;
    p.counts = counts;
    st = dedup_strset_create(&p, &a, &s);
    if (st)
        goto done;
    size_t bufcap = 4096;
    buf = ddi_malloc(&a, bufcap);
    if (!buf) {
        st = DEDUP_ERR_NOMEM;
        goto done;
    }
    for (uint64_t i = 0; i < nkeys; i++) {
        unsigned char h[12];
        st = dedup_decoder_read(d, h, hdr);
        if (st)
            goto done;
        uint32_t len = dedup_get_u32(h);
        if (len > d->header.payload_len - d->consumed) {
            st = DEDUP_ERR_CORRUPT;
            goto done;
        }
        if (len > bufcap) {
            unsigned char *nb = ddi_realloc(&a, buf, bufcap, len);
            if (!nb) {
                st = DEDUP_ERR_NOMEM;
                goto done;
            }
            buf = nb;
            bufcap = len;
        }
        st = dedup_decoder_read(d, buf, len);
        if (st)
            goto done;
        dedup_verdict v;
        dedup_digest dg = dedup_hash(buf, len, s->seed);
        st = dedup_strset_insert(s, buf, len, dg, &v);
        if (st)
            goto done;
        if (v != DEDUP_NEW) {
            st = DEDUP_ERR_CORRUPT; /* a key stored twice */
            goto done;
        }
        if (counts) {
            uint64_t c = dedup_get_u64(h + 4);
            if (c == 0) {
                st = DEDUP_ERR_CORRUPT;
                goto done;
            }
            bool found;
            str_slot *sl = str_find(s, str_seg_of(s, str_tag(dg)), buf, len, str_tag(dg), &found);
            memcpy(entry_at(s, sl->ref) + 4, &c, 8);
        }
    }
    st = dedup_decoder_end(d);
done:
    ddi_free(&a, buf);
    if (st) {
        dedup_strset_free(s);
        return st;
    }
    *out = s;
    return DEDUP_OK;
}
