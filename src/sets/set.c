/*
 * set.c - exact hash sets for strings, 128-bit digests and 64-bit integers.
 *
 * How it works.  All three are open-addressing tables with linear probing.
 * The digest set is the ordered variant that grows in place; its own "How
 * the digest set works" block below describes it.  Integers use one table
 * whose home slot is dedup_reduce(hash, capacity), so capacity need not be
 * a power of two.
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
 *
 * Digests: a slot is the 16-byte digest itself, kept in sorted order; the
 * all-ones digest marks empty and the (astronomically unlikely) all-ones key
 * is kept in a side flag.  Counts, when asked for, live in a parallel array.
 *
 * Integers: a slot is the 8-byte key; 0 marks empty, with a side flag.
 *
 * Strings grow one segment at a time at load 3/4 (doubling below one
 * segment); integers double the table at load 4/5; digests grow in place by
 * 1/4 at load 17/20.  With a memory limit, an insert that would need more
 * memory (a split's segment and a doubled directory, a small-table or
 * integer rehash, during which old and new tables coexist, a digest-set
 * growth, or a new arena chunk) returns DEDUP_ERR_FULL and changes nothing.
 */
#include "dedup/set.h"

#include "dedup/limits.h"
#include "internal.h"

#include <stdlib.h>

#define ARENA_CHUNK ((size_t)4 << 20) /* 4 MiB: large enough to amortise, small enough for budgets */
#define MIN_SLOTS 64u

void dedup_set_params_init(dedup_set_params *params)
{
    memset(params, 0, sizeof *params);
    params->seed = DEDUP_DEFAULT_SEED;
}

static uint64_t slots_for(uint64_t capacity, unsigned num, unsigned den)
{
    uint64_t s = capacity / num * den + (capacity % num * den + num - 1) / num;
    if (s < MIN_SLOTS)
        s = MIN_SLOTS;
    return s + 1; /* always at least one empty slot */
}

/* ======================================================================== */
/* Strings                                                                    */
/* ======================================================================== */

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
    void *p = dd_realloc(a, arr, *cap * elem, nc * elem);
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
        dd_free(&s->alloc, s->segs[i].slots);
    dd_free(&s->alloc, s->segs);
    dd_free(&s->alloc, s->dir);
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
    dd_allocator_resolve(&a, alloc);
    uint64_t nslots = slots_for(params->capacity, 3, 4);
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
    dedup_strset *s = dd_calloc(&a, 1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->alloc = a;
    s->seed = params->seed;
    s->limit = params->memory_limit;
    s->counts = params->counts;
    s->depth = depth;
    s->dshift = 63 - depth;
    s->dir = dd_malloc(&a, sizeof(uint32_t) * nsegs);
    s->segs = dd_calloc(&a, nsegs, sizeof(str_seg));
    if (!s->dir || !s->segs)
        goto nomem;
    s->segs_cap = nsegs;
    for (size_t i = 0; i < nsegs; i++) {
        str_slot *t = dd_calloc(&a, (size_t)per, sizeof(str_slot));
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
    dd_free(&a, s);
    return DEDUP_ERR_NOMEM;
}

void dedup_strset_free(dedup_strset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nchunks; i++)
        dd_free(&s->alloc, s->chunks[i].data);
    dd_free(&s->alloc, s->chunks);
    str_free_tables(s);
    dd_free(&s->alloc, s);
}

void dedup_strset_clear(dedup_strset *s)
{
    for (size_t i = 0; i < s->nchunks; i++)
        dd_free(&s->alloc, s->chunks[i].data);
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
    str_slot *ns = dd_calloc(&s->alloc, (size_t)n, sizeof(str_slot));
    if (!ns)
        return DEDUP_ERR_NOMEM;
    for (uint64_t i = 0; i < g->nslots; i++)
        if (g->slots[i].tag)
            str_place(ns, n, g->slots[i]); /* the tag is the home: no rehashing of keys */
    dd_free(&s->alloc, g->slots);
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
        uint32_t *nd = dd_malloc(&s->alloc, sizeof(uint32_t) * old * 2);
        if (!nd)
            return DEDUP_ERR_NOMEM;
        for (size_t i = 0; i < old * 2; i++)
            nd[i] = s->dir[i >> 1];
        dd_free(&s->alloc, s->dir);
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
    str_slot *nt = dd_calloc(&s->alloc, (size_t)STR_SEG, sizeof(str_slot));
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
        unsigned char *data = dd_malloc(&s->alloc, cap);
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
    dedup_decoder *d = malloc(sizeof *d);
    if (!d)
        return DEDUP_ERR_NOMEM;
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
    st = dedup_strset_create(&p, alloc, &s);
    if (st)
        goto done;
    size_t bufcap = 4096;
    buf = malloc(bufcap);
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
            unsigned char *nb = realloc(buf, len);
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
    free(buf);
    free(d);
    if (st) {
        dedup_strset_free(s);
        return st;
    }
    *out = s;
    return DEDUP_OK;
}

/* ======================================================================== */
/* Digests                                                                    */
/* ======================================================================== */

/*
 * How the digest set works.  The table is kept sorted by digest (lo, then
 * hi): an ordered linear-probing table (Amble and Knuth), which is Robin
 * Hood hashing with a monotone home function.  The home slot of a digest is
 * dedup_reduce(lo, nhome), monotone in lo, and there is no wrap-around:
 * 'nslots' = 'nhome' + an overflow tail, and the last slot is always empty,
 * so every scan stops without a bounds check.  An empty slot holds the
 * all-ones digest, which compares greater than every stored digest; the
 * all-ones digest itself is kept in a side flag.
 *
 * Invariants: (1) the occupied slots, read left to right, hold strictly
 * increasing digests; (2) a digest sits at or right of its home and every
 * slot between its home and it is occupied.  Together they make the layout
 * canonical: the k-th smallest digest sits at max(home(k), pos(k-1) + 1).
 *
 * Lookup: from the home slot, step over smaller digests; the first slot that
 * is not smaller holds the digest or is where it belongs (absent keys stop at
 * the first larger digest, not at the end of the cluster).  Insert: shift the
 * rest of the cluster one slot right (memmove up to the next empty slot) and
 * write the digest in the gap; if the shift would fill the last slot, the
 * tail is lengthened first.
 *
 * Growth is in place: the home range grows by 1/4 when the load passes
 * 17/20 of 'nhome', the blocks are enlarged through the allocator's realloc
 * (no second table), and every digest moves to its canonical position for
 * the new home range.  New positions are never left of old ones (homes only
 * move right and the layout is canonical), so a pass from the last digest to
 * the first never overwrites one not yet moved.  The new positions follow a
 * left-to-right recurrence, so the pass works on segments of DSET_SEG
 * slots from the right: it finds the recurrence's carry into the segment
 * from the few digests just left of it (dset_carry bounds how far to look),
 * computes the segment's new positions into a stack buffer, then moves its
 * digests right to left.  One read and one write of the table, no scratch
 * memory.  Counts move with their digests.
 */

#define DSET_SEG 1024u  /* slots per segment of the growth pass */
#define DSET_TAIL 64u   /* overflow slots past the home range */
#define DSET_LOAD_NUM 17u
#define DSET_LOAD_DEN 20u
#define DSET_MAX_SLOTS (UINT64_C(1) << 40)

struct dedup_digestset {
    dedup_allocator alloc;
    uint64_t seed;
    uint64_t limit;
    dedup_digest *slots; /* sorted, all-ones = empty; slot nslots-1 always empty */
    uint64_t *counts;    /* parallel to slots, or NULL */
    uint64_t nhome;      /* home range: home = dedup_reduce(lo, nhome) */
    uint64_t nslots;     /* nhome + tail; slots in [nslots, slots_cap) are empty */
    uint64_t slots_cap;  /* slots allocated */
    uint64_t counts_cap; /* counts allocated (0 without counts) */
    uint64_t size;
    uint64_t grow_at;
    bool has_ones; /* the all-ones digest, kept aside */
    uint64_t ones_count;
};

static inline bool dg_empty(dedup_digest d) { return (d.lo & d.hi) == UINT64_MAX; }
static inline bool dg_less(dedup_digest a, dedup_digest b)
{
    return a.lo < b.lo || (a.lo == b.lo && a.hi < b.hi);
}
static inline bool dg_equal(dedup_digest a, dedup_digest b) { return a.lo == b.lo && a.hi == b.hi; }

static uint64_t dset_grow_at(uint64_t nhome) { return nhome * DSET_LOAD_NUM / DSET_LOAD_DEN; }

/* Bytes the set holds with room for 'n' slots (at least its current blocks). */
static size_t dset_bytes_with(const dedup_digestset *s, uint64_t n)
{
    uint64_t sc = s->slots_cap > n ? s->slots_cap : n;
    uint64_t cc = s->counts ? (s->counts_cap > n ? s->counts_cap : n) : 0;
    return sizeof *s + (size_t)sc * sizeof(dedup_digest) + (size_t)cc * 8;
}

size_t dedup_digestset_memory_usage(const dedup_digestset *s)
{
    return s ? dset_bytes_with(s, 0) : 0;
}

/* Makes both blocks hold at least 'n' slots; new slots are empty.  On
 * failure the set is unchanged apart from a block that may have grown. */
static dedup_status dset_reserve(dedup_digestset *s, uint64_t n)
{
    if (s->slots_cap < n) {
        dedup_digest *p = dd_realloc(&s->alloc, s->slots, (size_t)s->slots_cap * sizeof *p,
                                     (size_t)n * sizeof *p);
        if (!p)
            return DEDUP_ERR_NOMEM;
        memset(p + s->slots_cap, 0xff, (size_t)(n - s->slots_cap) * sizeof *p);
        s->slots = p;
        s->slots_cap = n;
    }
    if (s->counts && s->counts_cap < n) {
        uint64_t *c = dd_realloc(&s->alloc, s->counts, (size_t)s->counts_cap * 8, (size_t)n * 8);
        if (!c)
            return DEDUP_ERR_NOMEM;
        s->counts = c;
        s->counts_cap = n;
    }
    return DEDUP_OK;
}

/* Whether holding 'n' slots stays within the limit.
 * Without a realloc in the allocator hook, enlarging copies the block, so
 * the old blocks count too. */
static bool dset_fits(const dedup_digestset *s, uint64_t n)
{
    if (!s->limit)
        return true;
    size_t need = dset_bytes_with(s, n);
    if (!s->alloc.realloc_fn && n > s->slots_cap)
        need += dset_bytes_with(s, 0) - sizeof *s;
    return need <= s->limit;
}

/* The table enlarged to n slots, within the limits: DEDUP_ERR_LIMIT past the
 * largest table, DEDUP_ERR_FULL past the memory limit, else dset_reserve(). */
static dedup_status dset_make_room(dedup_digestset *s, uint64_t n)
{
    if (n > DSET_MAX_SLOTS)
        return DEDUP_ERR_LIMIT;
    if (!dset_fits(s, n))
        return DEDUP_ERR_FULL;
    return dset_reserve(s, n);
}

dedup_status dedup_digestset_create(const dedup_set_params *params, const dedup_allocator *alloc,
                                    dedup_digestset **out)
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
    dd_allocator_resolve(&a, alloc);
    if (params->capacity > DSET_MAX_SLOTS)
        return DEDUP_ERR_LIMIT;
    uint64_t nhome = slots_for(params->capacity, DSET_LOAD_NUM, DSET_LOAD_DEN);
    uint64_t nslots = nhome + DSET_TAIL;
    if (nslots > DSET_MAX_SLOTS)
        return DEDUP_ERR_LIMIT;
    if (params->memory_limit &&
        sizeof(dedup_digestset) + nslots * (sizeof(dedup_digest) + (params->counts ? 8 : 0)) >
            params->memory_limit)
        return DEDUP_ERR_FULL;
    dedup_digestset *s = dd_calloc(&a, 1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->alloc = a;
    s->seed = params->seed;
    s->limit = params->memory_limit;
    s->slots = dd_malloc(&a, (size_t)nslots * sizeof(dedup_digest));
    if (params->counts)
        s->counts = dd_malloc(&a, (size_t)nslots * 8);
    if (!s->slots || (params->counts && !s->counts)) {
        dd_free(&a, s->slots);
        dd_free(&a, s->counts);
        dd_free(&a, s);
        return DEDUP_ERR_NOMEM;
    }
    memset(s->slots, 0xff, (size_t)nslots * sizeof(dedup_digest));
    s->slots_cap = nslots;
    s->counts_cap = params->counts ? nslots : 0;
    s->nhome = nhome;
    s->nslots = nslots;
    s->grow_at = dset_grow_at(nhome);
    *out = s;
    return DEDUP_OK;
}

void dedup_digestset_free(dedup_digestset *s)
{
    if (!s)
        return;
    dd_free(&s->alloc, s->slots);
    dd_free(&s->alloc, s->counts);
    dd_free(&s->alloc, s);
}

void dedup_digestset_prefetch(const dedup_digestset *s, dedup_digest d)
{
    /* The home slot and the next cache line: at loads of 2/3 to 17/20 the
     * scan (and an insert's shift) often runs past the home slot's line. */
    const dedup_digest *p = &s->slots[dedup_reduce(d.lo, s->nhome)];
    DD_PREFETCH(p);
    DD_PREFETCH((const unsigned char *)p + 64);
}

/* The first slot at or right of d's home that does not hold a smaller
 * digest: d's slot if present, else where d belongs.  d is not all-ones. */
static inline uint64_t dset_seek(const dedup_digestset *s, dedup_digest d)
{
    const dedup_digest *t = s->slots;
    uint64_t i = dedup_reduce(d.lo, s->nhome);
    while (dg_less(t[i], d))
        i++;
    return i;
}

/* The lowest new slot free for the first digest at or right of old slot
 * 'base' when the home range grows from 'h0' to 'h1': one more than the new
 * position of the last digest left of 'base' (0 if there is none).
 *
 * The new positions satisfy pos'(k) = max(home'(k), pos'(k-1) + 1), so the
 * answer is the maximum over digests j left of 'base' of home'(j) + (number
 * of digests from j to the last one).  Scanning j leftwards, the digests
 * still to the left can only matter through pos'(j-1) + 1 + that number,
 * and pos'(i) < (pos(i) + 1) * h1 / h0 for every digest i (by induction:
 * home'(i) < (home(i) + 1) * h1 / h0 <= (pos(i) + 1) * h1 / h0, and the
 * ratio is at least 1).  So the scan stops as soon as that bound cannot
 * beat the maximum found: a few slots past the start of the cluster, since
 * the bound falls by h1/h0 per slot and the count rises by at most 1. */
static uint64_t dset_carry(const dedup_digest *t, uint64_t base, uint64_t h0, uint64_t h1)
{
    uint64_t best = 0, count = 0;
    for (uint64_t p = base; p-- > 0;) {
        if (dg_empty(t[p]))
            continue;
        count++;
        uint64_t v = dedup_reduce(t[p].lo, h1) + count;
        if (v > best)
            best = v;
        /* digests left of p: pos'(j-1) + 1 <= ceil(p * h1 / h0) */
        uint64_t bound = (uint64_t)(((dedup_u128_)p * h1 + h0 - 1) / h0);
        if (bound + count <= best)
            break;
    }
    return best;
}

/* Grows the home range by 1/4 and moves every digest to its new canonical
 * slot in place (see "How the digest set works"). */
static dedup_status dset_grow(dedup_digestset *s)
{
    uint64_t add = s->nhome / 4 > 16 ? s->nhome / 4 : 16;
    uint64_t nh = s->nhome + add;
    uint64_t old = s->nslots;
    /* the new layout ends one slot after the last digest's new position */
    uint64_t n = dset_carry(s->slots, old, s->nhome, nh) + DSET_TAIL / 2;
    if (n < nh + DSET_TAIL)
        n = nh + DSET_TAIL;
    if (n < old)
        n = old;
    dedup_status st = dset_make_room(s, n);
    if (st)
        return st;

    /* Right to left, one segment at a time: the carry into the segment from
     * the digests left of it (still in their old slots), the segment's new
     * positions left to right, then its digests moved right to left. */
    dedup_digest *t = s->slots;
    uint64_t *c = s->counts;
    uint64_t pos[DSET_SEG];
    uint64_t nseg = (old + DSET_SEG - 1) / DSET_SEG;
    for (uint64_t g = nseg; g-- > 0;) {
        uint64_t base = g * DSET_SEG;
        uint64_t end = base + DSET_SEG < old ? base + DSET_SEG : old;
        uint64_t next = dset_carry(t, base, s->nhome, nh);
        for (uint64_t p = base; p < end; p++) {
            if (dg_empty(t[p]))
                continue;
            uint64_t h = dedup_reduce(t[p].lo, nh);
            pos[p - base] = h > next ? h : next;
            next = pos[p - base] + 1;
        }
        for (uint64_t p = end; p-- > base;) {
            if (dg_empty(t[p]))
                continue;
            uint64_t q = pos[p - base];
            if (q == p)
                continue;
            t[q] = t[p];
            t[p].lo = t[p].hi = UINT64_MAX;
            if (c)
                c[q] = c[p];
        }
    }
    s->nhome = nh;
    s->nslots = n;
    s->grow_at = dset_grow_at(nh);
    return DEDUP_OK;
}

/* Lengthens the overflow tail so that slot 'nslots - 1' is empty again. */
static dedup_status dset_extend_tail(dedup_digestset *s)
{
    uint64_t tail = s->nslots - s->nhome;
    uint64_t n = s->nslots + (tail / 2 > DSET_TAIL ? tail / 2 : DSET_TAIL);
    dedup_status st = dset_make_room(s, n);
    if (st)
        return st;
    s->nslots = n;
    return DEDUP_OK;
}

dedup_status dedup_digestset_insert(dedup_digestset *s, dedup_digest d, dedup_verdict *verdict)
{
    if (DD_UNLIKELY(dg_empty(d))) {
        *verdict = s->has_ones ? DEDUP_DUPLICATE : DEDUP_NEW;
        if (!s->has_ones)
            s->size++;
        s->has_ones = true;
        s->ones_count++;
        return DEDUP_OK;
    }
    uint64_t i = dset_seek(s, d);
    if (dg_equal(s->slots[i], d)) {
        if (s->counts)
            s->counts[i]++;
        *verdict = DEDUP_DUPLICATE;
        return DEDUP_OK;
    }
    if (s->size + 1 > s->grow_at) {
        dedup_status st = dset_grow(s);
        if (st)
            return st;
        i = dset_seek(s, d);
    }
    uint64_t j = i;
    while (!dg_empty(s->slots[j]))
        j++;
    if (DD_UNLIKELY(j == s->nslots - 1)) {
        dedup_status st = dset_extend_tail(s);
        if (st)
            return st;
    }
    dedup_digest *t = s->slots;
    memmove(t + i + 1, t + i, (size_t)(j - i) * sizeof *t);
    t[i] = d;
    if (s->counts) {
        memmove(s->counts + i + 1, s->counts + i, (size_t)(j - i) * 8);
        s->counts[i] = 1;
    }
    s->size++;
    *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

bool dedup_digestset_contains(const dedup_digestset *s, dedup_digest d)
{
    if (dg_empty(d))
        return s->has_ones;
    return dg_equal(s->slots[dset_seek(s, d)], d);
}

uint64_t dedup_digestset_count_of(const dedup_digestset *s, dedup_digest d)
{
    if (dg_empty(d))
        return s->has_ones ? (s->counts ? s->ones_count : 1) : 0;
    uint64_t i = dset_seek(s, d);
    if (!dg_equal(s->slots[i], d))
        return 0;
    return s->counts ? s->counts[i] : 1;
}

uint64_t dedup_digestset_size(const dedup_digestset *s) { return s->size; }
uint64_t dedup_digestset_seed(const dedup_digestset *s) { return s->seed; }

/* File layout (type SET_DIGEST): params = keys u64, flags u32 (bit 0:
 * counts), reserved u32.  Payload: per key lo u64, hi u64, [count u64].
 * Written in increasing (lo, hi) order; read in any order. */
dedup_status dedup_digestset_save(const dedup_digestset *s, dedup_sink *sink)
{
    bool counts = s->counts != NULL;
    uint64_t per = counts ? 24 : 16;
    unsigned char p[16];
    dedup_put_u64(p, s->size);
    dedup_put_u32(p + 8, counts ? 1u : 0u);
    dedup_put_u32(p + 12, 0);
    dedup_encoder e;
    dedup_status st = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_SET_DIGEST, s->seed, p, sizeof p,
                                          s->size * per);
    unsigned char rec[24];
    for (uint64_t i = 0; !st && i < s->nslots; i++) {
        dedup_digest x = s->slots[i];
        if (dg_empty(x))
            continue;
        dedup_put_u64(rec, x.lo);
        dedup_put_u64(rec + 8, x.hi);
        if (counts)
            dedup_put_u64(rec + 16, s->counts[i]);
        st = dedup_encoder_write(&e, rec, per);
    }
    if (!st && s->has_ones) {
        memset(rec, 0xff, 16);
        dedup_put_u64(rec + 16, s->ones_count);
        st = dedup_encoder_write(&e, rec, per);
    }
    if (!st)
        st = dedup_encoder_end(&e);
    return st;
}

dedup_status dedup_digestset_load(dedup_source src, const dedup_allocator *alloc,
                                  dedup_digestset **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_decoder *d = malloc(sizeof *d);
    if (!d)
        return DEDUP_ERR_NOMEM;
    dedup_digestset *s = NULL;
    dedup_status st = dedup_decoder_begin(d, src, DEDUP_TYPE_SET_DIGEST);
    if (st)
        goto done;
    if (d->header.params_len != 16) {
        st = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t nkeys = dedup_get_u64(d->params);
    uint32_t flags = dedup_get_u32(d->params + 8);
    bool counts = flags & 1u;
    uint64_t per = counts ? 24 : 16;
    if ((flags & ~1u) || dedup_get_u32(d->params + 12) || nkeys > (UINT64_C(1) << 38) ||
        nkeys * per != d->header.payload_len) {
        st = DEDUP_ERR_CORRUPT;
        goto done;
    }
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.capacity = nkeys;
    p.seed = d->header.seed;
    p.counts = counts;
    st = dedup_digestset_create(&p, alloc, &s);
    for (uint64_t i = 0; !st && i < nkeys; i++) {
        unsigned char rec[24];
        st = dedup_decoder_read(d, rec, per);
        if (st)
            break;
        dedup_digest x = {dedup_get_u64(rec), dedup_get_u64(rec + 8)};
        dedup_verdict v;
        st = dedup_digestset_insert(s, x, &v);
        if (!st && v != DEDUP_NEW)
            st = DEDUP_ERR_CORRUPT;
        if (!st && counts) {
            uint64_t c = dedup_get_u64(rec + 16);
            if (c == 0)
                st = DEDUP_ERR_CORRUPT;
            else if (dg_empty(x))
                s->ones_count = c;
            else
                s->counts[dset_seek(s, x)] = c;
        }
    }
    if (!st)
        st = dedup_decoder_end(d);
done:
    free(d);
    if (st) {
        dedup_digestset_free(s);
        return st;
    }
    *out = s;
    return DEDUP_OK;
}

/* ======================================================================== */
/* 64-bit integers                                                            */
/* ======================================================================== */

struct dedup_u64set {
    dedup_allocator alloc;
    uint64_t seed;
    uint64_t limit;
    uint64_t *slots;
    uint64_t nslots;
    uint64_t size;
    uint64_t grow_at;
    bool has_zero;
};

size_t dedup_u64set_memory_usage(const dedup_u64set *s)
{
    return s ? sizeof *s + (size_t)s->nslots * 8 : 0;
}

dedup_status dedup_u64set_create(const dedup_set_params *params, const dedup_allocator *alloc,
                                 dedup_u64set **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_set_params def;
    if (!params) {
        dedup_set_params_init(&def);
        params = &def;
    }
    if (params->counts)
        return DEDUP_ERR_INVALID_ARG;
    dedup_allocator a;
    dd_allocator_resolve(&a, alloc);
    uint64_t nslots = slots_for(params->capacity, 4, 5);
    if (nslots > (UINT64_C(1) << 40))
        return DEDUP_ERR_LIMIT;
    if (params->memory_limit && nslots * 8 > params->memory_limit)
        return DEDUP_ERR_FULL;
    dedup_u64set *s = dd_calloc(&a, 1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->alloc = a;
    s->seed = params->seed;
    s->limit = params->memory_limit;
    s->slots = dd_calloc(&a, (size_t)nslots, 8);
    if (!s->slots) {
        dd_free(&a, s);
        return DEDUP_ERR_NOMEM;
    }
    s->nslots = nslots;
    s->grow_at = (nslots - 1) / 5 * 4;
    *out = s;
    return DEDUP_OK;
}

void dedup_u64set_free(dedup_u64set *s)
{
    if (!s)
        return;
    dd_free(&s->alloc, s->slots);
    dd_free(&s->alloc, s);
}

static inline uint64_t u64_home(const dedup_u64set *s, uint64_t key, uint64_t nslots)
{
    return dedup_reduce(dedup_hash_u64(key, s->seed).lo, nslots);
}

static inline uint64_t u64_find(const dedup_u64set *s, uint64_t key, bool *found)
{
    uint64_t i = u64_home(s, key, s->nslots);
    for (;;) {
        uint64_t x = s->slots[i];
        if (x == key) {
            *found = true;
            return i;
        }
        if (x == 0) {
            *found = false;
            return i;
        }
        if (++i == s->nslots)
            i = 0;
    }
}

static dedup_status u64_rehash(dedup_u64set *s)
{
    uint64_t n = (s->nslots - 1) * 2 + 1;
    if (s->limit && dedup_u64set_memory_usage(s) + n * 8 > s->limit)
        return DEDUP_ERR_FULL;
    uint64_t *ns = dd_calloc(&s->alloc, (size_t)n, 8);
    if (!ns)
        return DEDUP_ERR_NOMEM;
    for (uint64_t i = 0; i < s->nslots; i++) {
        uint64_t x = s->slots[i];
        if (!x)
            continue;
        uint64_t j = u64_home(s, x, n);
        while (ns[j])
            if (++j == n)
                j = 0;
        ns[j] = x;
    }
    dd_free(&s->alloc, s->slots);
    s->slots = ns;
    s->nslots = n;
    s->grow_at = (n - 1) / 5 * 4;
    return DEDUP_OK;
}

dedup_status dedup_u64set_insert(dedup_u64set *s, uint64_t key, dedup_verdict *verdict)
{
    if (key == 0) {
        *verdict = s->has_zero ? DEDUP_DUPLICATE : DEDUP_NEW;
        if (!s->has_zero)
            s->size++;
        s->has_zero = true;
        return DEDUP_OK;
    }
    bool found;
    uint64_t i = u64_find(s, key, &found);
    if (found) {
        *verdict = DEDUP_DUPLICATE;
        return DEDUP_OK;
    }
    if (s->size + 1 > s->grow_at) {
        dedup_status st = u64_rehash(s);
        if (st)
            return st;
        i = u64_find(s, key, &found);
    }
    s->slots[i] = key;
    s->size++;
    *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

bool dedup_u64set_contains(const dedup_u64set *s, uint64_t key)
{
    if (key == 0)
        return s->has_zero;
    bool found;
    (void)u64_find(s, key, &found);
    return found;
}

uint64_t dedup_u64set_size(const dedup_u64set *s) { return s->size; }

/* File layout (type SET_U64): params = keys u64.  Payload: the keys, u64
 * each, in no particular order. */
dedup_status dedup_u64set_save(const dedup_u64set *s, dedup_sink *sink)
{
    unsigned char p[8];
    dedup_put_u64(p, s->size);
    dedup_encoder e;
    dedup_status st = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_SET_U64, s->seed, p, sizeof p,
                                          s->size * 8);
    if (!st && s->has_zero) {
        uint64_t z = 0;
        st = dedup_encoder_write_u64s(&e, &z, 1);
    }
    for (uint64_t i = 0; !st && i < s->nslots; i++)
        if (s->slots[i])
            st = dedup_encoder_write_u64s(&e, &s->slots[i], 1);
    if (!st)
        st = dedup_encoder_end(&e);
    return st;
}

dedup_status dedup_u64set_load(dedup_source src, const dedup_allocator *alloc, dedup_u64set **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_decoder *d = malloc(sizeof *d);
    if (!d)
        return DEDUP_ERR_NOMEM;
    dedup_u64set *s = NULL;
    dedup_status st = dedup_decoder_begin(d, src, DEDUP_TYPE_SET_U64);
    if (!st && d->header.params_len != 8)
        st = DEDUP_ERR_CORRUPT;
    uint64_t nkeys = st ? 0 : dedup_get_u64(d->params);
    if (!st && (nkeys > (UINT64_C(1) << 38) || nkeys * 8 != d->header.payload_len))
        st = DEDUP_ERR_CORRUPT;
    if (!st) {
        dedup_set_params p;
        dedup_set_params_init(&p);
        p.capacity = nkeys;
        p.seed = d->header.seed;
        st = dedup_u64set_create(&p, alloc, &s);
    }
    for (uint64_t i = 0; !st && i < nkeys; i++) {
        uint64_t k;
        dedup_verdict v;
        st = dedup_decoder_read_u64s(d, &k, 1);
        if (!st)
            st = dedup_u64set_insert(s, k, &v);
        if (!st && v != DEDUP_NEW)
            st = DEDUP_ERR_CORRUPT;
    }
    if (!st)
        st = dedup_decoder_end(d);
    free(d);
    if (st) {
        dedup_u64set_free(s);
        return st;
    }
    *out = s;
    return DEDUP_OK;
}
