/*
 * window.c - stream deduplication over windows of event time.
 *
 * How it works.  Kept records are grouped into generations by event time
 * (generation id = floor(t / s)); the generations alive are kept in a small
 * array sorted by id.  A lookup for a record at time u consults only the
 * generations whose span can hold a time within D of u, and the watermark
 * drops whole generations from the front of the array: nothing ever scans
 * keys to expire them.
 *
 * Exact generations are "ordered" open-addressing tables (Amble & Knuth):
 * linear probing with the home slot dedup_reduce(lo, cap), which is
 * monotonic in the digest's low word, and every cluster kept sorted by
 * (lo, hi).  The whole table is then sorted, which gives:
 *  - unsuccessful lookups stop at the first larger entry, about
 *    (1 + 1/(1-a)) / 2 slots at load a instead of (1 + 1/(1-a)^2) / 2, so
 *    the tables can run at 85% load;
 *  - rebuilding at another size is one sequential pass with no probing
 *    (each entry goes to max(its home, previous position + 1)), which is how
 *    a generation is compacted when it stops being the newest one;
 *  - tables do not wrap around: a cluster that runs past the last home slot
 *    spills into a tail that is extended on demand.
 * An insertion shifts the rest of its cluster right by one entry.
 *
 * Approximate windows keep one table of short fingerprints for all
 * generations (partial-key cuckoo hashing, 4 slots per bucket, 2 candidate
 * buckets, as dedup/cuckoo.h); each slot is f bits of fingerprint and t bits
 * of generation tag (id mod 2^t), packed back to back.  A slot whose tag is
 * not a live generation's counts as empty, so a generation is dropped in
 * O(1) like an exact one; its tag's slots are cleared by one sequential
 * sweep just before the tag is reused (skipped when none is left).  A lookup
 * compares the fingerprint with the 8 slots of the key's two buckets and
 * accepts a match only if its tag is a live generation the lookup consults:
 * one union bound over 8 slots instead of one per generation.  When a kick
 * chain fails (more keys than planned) the key goes to an exact stash, a
 * small hash table keyed by its bucket pair; when generations expire, stash
 * entries move back into the table where there is room again.  Which slot
 * or stash holds an entry never changes a verdict except through the stash's
 * longer fingerprints, and the kick choices come from a saved generator, so
 * a resumed window places everything as the original would have.
 */
#define _DEFAULT_SOURCE /* madvise() and MADV_HUGEPAGE */
#include "dedup/window.h"
#include "dedup/limits.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

typedef struct wentry {
    uint64_t lo, hi;
    int64_t t;
} wentry;

typedef struct wgen {
    int64_t id;
    uint64_t count; /* kept records in this generation */
    uint64_t cap;   /* home slots (exact) */
    uint64_t len;   /* allocated slots: cap + tail */
    wentry *slots;  /* exact; NULL until the first insert */
} wgen;

/* Approximate: an entry the table had no room for, kept aside with the
 * smaller of its two buckets (which, with the fingerprint, names the pair).
 * v holds the slot value in its low S bits and 64 - S more bits of the
 * digest above them, so a stash entry matches another key with probability
 * about 2^-(f + 64 - S): the stash adds nothing measurable to the rate.
 * v = 0: an empty slot (b = 0) or a removed entry (b = 1). */
typedef struct sentry {
    uint64_t b, v;
} sentry;

static int sentry_cmp(const void *a, const void *b)
{
    const sentry *x = a, *y = b;
    if (x->b != y->b)
        return x->b < y->b ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

enum { TAG_FREE = 0, TAG_LIVE = 1, TAG_DEAD = 2 };

struct dedup_window {
    dedup_allocator alloc;
    dedup_window_params p;
    int64_t D; /* effective duration: N + 1 for COUNT windows */
    int64_t s; /* generation span */
    int64_t L; /* lateness */
    uint32_t Q; /* largest number of generations a lookup consults */

    bool has_T, has_W;
    int64_t T, W;
    uint64_t counter; /* COUNT: index of the next record */

    uint64_t records, kept, duplicates, late, live, peak_live, expired;
    int64_t late_max_behind;

    wgen *gv; /* live generations, sorted by id */
    size_t gn, gcap;

    uint64_t hint;     /* exact: expected entries of a new newest generation */
    size_t slot_bytes; /* exact: bytes held by all tables */

    /* approximate: tagged fingerprint tables */
    uint32_t fbits, tbits, sbits; /* fingerprint, tag and slot bits */
    uint32_t ntags;               /* 2^tbits */
    uint64_t fmask;               /* 2^fbits - 1: fingerprints are 1 .. fmask */
    uint64_t nb;                  /* buckets per table */
    size_t tab_bytes;             /* packed bytes of one table (as saved) */
    unsigned char *tab;           /* nb * 4 packed slots, then TAB_SLACK zero bytes */
    uint64_t *tag_n;              /* per tag: table slots holding it (live, or dead not swept) */
    uint64_t tab_live;            /* table slots of live generations */
    uint64_t kick_fail_live;      /* tab_live when a kick chain last failed: none is
                                     tried again until fewer are live */
    sentry *st;                   /* the stash: open addressing on mix64(b), NULL if empty */
    uint64_t st_cap, st_used, st_live; /* slots (power of 2), used incl. removed, live */
    uint8_t *tag_state;           /* TAG_* per tag */
    int64_t *tag_id;              /* the live generation holding each TAG_LIVE tag */
    uint64_t rng;                 /* xorshift64 state for kick choices (never 0) */
};

#define SLOTS_PER_BUCKET 4u
#define PLANNED_LOAD 0.95 /* the table is sized for the planned keys at this load */
#define MAX_KICKS 500u
#define NO_KICKS_ABOVE 98u /* percent of slots live: a kick chain would likely fail */
#define TAB_SLACK 8u /* bytes after the packed slots: every slot is read with one 8-byte load */

#define TAIL_SLOTS 64u
#define MAX_LOAD_NUM 85u /* grow past 85% load */
#define COMPACT_BELOW 80u /* compact a closed generation below 80% load */

/* ---- time arithmetic ----------------------------------------------------- */

static inline int64_t fdiv(int64_t a, int64_t b) /* floor(a / b), b > 0 */
{
    int64_t q = a / b;
    if ((a % b) != 0 && a < 0)
        q--;
    return q;
}

static inline bool time_ok(int64_t t)
{
    return t >= DEDUP_WINDOW_MIN_TIME && t <= DEDUP_WINDOW_MAX_TIME;
}

/* Lowest generation id still relevant under watermark W. */
static int64_t gen_floor(const dedup_window *w, int64_t W)
{
    if (w->p.type == DEDUP_WINDOW_TUMBLING)
        return fdiv(W, w->D);
    return fdiv(W - w->D + 1, w->s);
}

/* ---- parameters ---------------------------------------------------------- */

void dedup_window_params_init(dedup_window_params *p)
{
    memset(p, 0, sizeof *p);
    p->type = DEDUP_WINDOW_SLIDING;
    p->mode = DEDUP_WINDOW_EXACT;
    p->generations = 0; /* the mode's default */
    p->fpr = 0.01;
    p->seed = DEDUP_DEFAULT_SEED;
}

/* Validates 'in' and fills the derived fields of 'w' (no allocation). */
static dedup_status setup(dedup_window *w, const dedup_window_params *in)
{
    dedup_window_params p = *in;
    if ((unsigned)p.type > DEDUP_WINDOW_COUNT || (unsigned)p.mode > DEDUP_WINDOW_APPROX)
        return DEDUP_ERR_INVALID_ARG;
    if (p.duration < 1 || p.duration > DEDUP_WINDOW_MAX_DURATION)
        return DEDUP_ERR_INVALID_ARG;
    if (p.lateness > DEDUP_WINDOW_MAX_DURATION)
        return DEDUP_ERR_INVALID_ARG;
    if (p.type == DEDUP_WINDOW_COUNT && p.duration == DEDUP_WINDOW_MAX_DURATION)
        return DEDUP_ERR_INVALID_ARG; /* N + 1 must stay within the time range */
    if (p.generations == 0)
        p.generations = p.mode == DEDUP_WINDOW_APPROX ? DEDUP_WINDOW_DEFAULT_APPROX_GENERATIONS
                                                      : DEDUP_WINDOW_DEFAULT_GENERATIONS;
    if (p.generations > DEDUP_WINDOW_MAX_GENERATIONS)
        return DEDUP_ERR_INVALID_ARG;
    if (p.type == DEDUP_WINDOW_COUNT)
        p.lateness = 0;
    if (p.mode == DEDUP_WINDOW_APPROX) {
        if (p.capacity < 1 || !(p.fpr >= DEDUP_MIN_FPR && p.fpr <= 0.5))
            return DEDUP_ERR_INVALID_ARG;
    } else {
        p.fpr = 0.01; /* unused; normalised so saved files compare equal */
    }
    w->p = p;
    w->D = (int64_t)p.duration + (p.type == DEDUP_WINDOW_COUNT ? 1 : 0);
    w->L = (int64_t)p.lateness;
    if (p.type == DEDUP_WINDOW_TUMBLING) {
        w->s = w->D;
        w->Q = 1;
    } else {
        w->s = (w->D + (int64_t)p.generations - 1) / (int64_t)p.generations;
        int64_t a = (2 * (w->D - 1)) / w->s;
        int64_t b = (w->L + (w->D - 1)) / w->s;
        int64_t q = (a < b ? a : b) + 2;
        w->Q = q > 0xFFFFFFF ? 0xFFFFFFFu : (uint32_t)q;
    }
    if (p.mode == DEDUP_WINDOW_APPROX) {
        /* A: generations alive at once, the ids from gen_floor(W) to
         * floor(T / s) with W >= T - L: ceil((L + D - 1) / s) + 1 (sliding,
         * count), ceil(L / D) + 1 (tumbling).  They need distinct tags. */
        int64_t x = p.type == DEDUP_WINDOW_TUMBLING ? w->L : w->L + (w->D - 1);
        int64_t alive = x / w->s + (x % w->s != 0) + 1;
        if (alive > (int64_t)DEDUP_WINDOW_MAX_APPROX_LIVE)
            return DEDUP_ERR_LIMIT;
        uint32_t t = 0;
        while ((INT64_C(1) << t) < alive)
            t++;
        /* f: the rate of a full table, 8 compared slots each matching with
         * probability 1 / (2^f - 1), is at most fpr. */
        uint32_t f = 2;
        while ((double)((UINT64_C(1) << f) - 1) * p.fpr < 2.0 * SLOTS_PER_BUCKET)
            f++;
        double per_gen = p.type == DEDUP_WINDOW_TUMBLING
                             ? (double)p.capacity
                             : ceil((double)p.capacity * (double)w->s / (double)w->D);
        double slots = ceil((double)alive * per_gen / PLANNED_LOAD);
        double nb = ceil(slots / SLOTS_PER_BUCKET);
        if (nb < 2)
            nb = 2;
        if (nb * SLOTS_PER_BUCKET * (double)(f + t) > (double)DEDUP_MAX_BITS)
            return DEDUP_ERR_LIMIT;
        w->fbits = f;
        w->tbits = t;
        w->sbits = f + t; /* <= 43 + 10: one 8-byte load reads any slot */
        w->ntags = UINT32_C(1) << t;
        w->fmask = (UINT64_C(1) << f) - 1;
        w->nb = (uint64_t)nb;
        w->tab_bytes = (size_t)((w->nb * SLOTS_PER_BUCKET * w->sbits + 7) / 8);
    }
    if (p.mode == DEDUP_WINDOW_EXACT && p.capacity) {
        double per_gen = p.type == DEDUP_WINDOW_TUMBLING
                             ? (double)p.capacity
                             : ceil((double)p.capacity * (double)w->s / (double)w->D);
        w->hint = per_gen > 1e12 ? (uint64_t)1e12 : (uint64_t)per_gen;
    }
    return DEDUP_OK;
}

static void advise_huge(void *p, size_t bytes);

/* Allocates the (empty) fingerprint table.  False on allocation failure. */
static bool tab_alloc(dedup_window *w)
{
    w->tab = dd_calloc(&w->alloc, w->tab_bytes + TAB_SLACK, 1);
    w->tag_n = dd_calloc(&w->alloc, w->ntags, sizeof(uint64_t));
    if (!w->tab || !w->tag_n)
        return false;
    advise_huge(w->tab, w->tab_bytes + TAB_SLACK);
    return true;
}

/* Allocates a window for 'params'.  A created approximate window gets its
 * table now; a loading one only its tag arrays (at most 1024 entries), and
 * the table once the payload is known to hold it, so a hostile file cannot
 * make it allocate first. */
static dedup_status alloc_window(const dedup_window_params *params, const dedup_allocator *alloc,
                                 bool loading, dedup_window **out)
{
    dedup_allocator a;
    dd_allocator_resolve(&a, alloc);
    dedup_window *w = dd_calloc(&a, 1, sizeof *w);
    if (!w)
        return DEDUP_ERR_NOMEM;
    w->alloc = a;
    dedup_status s = setup(w, params);
    if (s) {
        dd_free(&a, w);
        return s;
    }
    if (w->p.mode == DEDUP_WINDOW_APPROX) {
        w->kick_fail_live = UINT64_MAX;
        w->rng = w->p.seed ^ UINT64_C(0x6A09E667F3BCC909);
        if (!w->rng)
            w->rng = 1;
        w->tag_state = dd_calloc(&w->alloc, w->ntags, 1);
        w->tag_id = dd_calloc(&w->alloc, w->ntags, sizeof(int64_t));
        if (!w->tag_state || !w->tag_id || (!loading && !tab_alloc(w))) {
            dedup_window_free(w);
            return DEDUP_ERR_NOMEM;
        }
    }
    *out = w;
    return DEDUP_OK;
}

dedup_status dedup_window_create(const dedup_window_params *params, const dedup_allocator *alloc,
                                 dedup_window **out)
{
    if (!params || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    return alloc_window(params, alloc, false, out);
}

static void gen_release(dedup_window *w, wgen *g)
{
    if (g->slots) {
        dd_free(&w->alloc, g->slots);
        w->slot_bytes -= (size_t)g->len * sizeof(wentry);
    }
    g->slots = NULL;
}

void dedup_window_free(dedup_window *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->gn; i++)
        gen_release(w, &w->gv[i]);
    dd_free(&w->alloc, w->gv);
    dd_free(&w->alloc, w->tab);
    dd_free(&w->alloc, w->tag_n);
    dd_free(&w->alloc, w->st);
    dd_free(&w->alloc, w->tag_state);
    dd_free(&w->alloc, w->tag_id);
    dedup_allocator a = w->alloc;
    dd_free(&a, w);
}

dedup_digest dedup_window_digest(const dedup_window *w, const void *key, size_t len)
{
    return dedup_hash(key, len, w->p.seed);
}

/* ---- exact tables ---------------------------------------------------------- */

static inline bool ent_empty(const wentry *e)
{
    return (e->lo | e->hi) == 0;
}

/* -1, 0, 1 as (lo, hi) is below, equal to, above the entry. */
static inline int ent_cmp(uint64_t lo, uint64_t hi, const wentry *e)
{
    if (lo != e->lo)
        return lo < e->lo ? -1 : 1;
    if (hi != e->hi)
        return hi < e->hi ? -1 : 1;
    return 0;
}

static const wentry *tab_find(const wgen *g, uint64_t lo, uint64_t hi)
{
    if (!g->slots)
        return NULL;
    const wentry *e = g->slots + dedup_reduce(lo, g->cap);
    const wentry *end = g->slots + g->len;
    for (; e < end; e++) {
        if (ent_empty(e))
            return NULL;
        int c = ent_cmp(lo, hi, e);
        if (c == 0)
            return e;
        if (c < 0)
            return NULL;
    }
    return NULL;
}

/* Asks the kernel to back a large table with huge pages.  A probe into a
 * table of hundreds of MB otherwise costs a TLB miss and a page walk on top
 * of its cache miss; with 2 MB pages it is the cache miss alone.  Only the
 * whole 2 MB pages inside the block are advised; the call is a hint and its
 * failure (other kernels, other allocators) changes nothing. */
static void advise_huge(void *p, size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (bytes < 4 * huge)
        return;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Places sorted entries 'src[0..n)' into a fresh zeroed table of 'cap' home
 * slots; extends the tail as needed.  Returns false on allocation failure
 * (then *out_slots is NULL and nothing was kept). */
static bool tab_build(dedup_window *w, const wentry *src, uint64_t src_len, uint64_t cap,
                      wentry **out_slots, uint64_t *out_len)
{
    uint64_t len = cap + TAIL_SLOTS;
    size_t bytes;
    if (!dd_mul_size((size_t)len, sizeof(wentry), &bytes))
        return false;
    wentry *t = dd_calloc(&w->alloc, (size_t)len, sizeof(wentry));
    if (!t)
        return false;
    advise_huge(t, bytes);
    uint64_t next = 0; /* first free position */
    for (uint64_t i = 0; i < src_len; i++) {
        const wentry *e = &src[i];
        if (ent_empty(e))
            continue;
        uint64_t pos = dedup_reduce(e->lo, cap);
        if (pos < next)
            pos = next;
        if (pos >= len) {
            uint64_t nlen = len + len / 8 + TAIL_SLOTS;
            wentry *nt = dd_realloc(&w->alloc, t, (size_t)len * sizeof(wentry),
                                    (size_t)nlen * sizeof(wentry));
            if (!nt) {
                dd_free(&w->alloc, t);
                return false;
            }
            memset(nt + len, 0, (size_t)(nlen - len) * sizeof(wentry));
            t = nt;
            len = nlen;
        }
        t[pos] = *e;
        next = pos + 1;
    }
    *out_slots = t;
    *out_len = len;
    return true;
}

/* Rebuilds generation g with 'cap' home slots. */
static bool tab_resize(dedup_window *w, wgen *g, uint64_t cap)
{
    wentry *t;
    uint64_t len;
    if (!tab_build(w, g->slots, g->slots ? g->len : 0, cap, &t, &len))
        return false;
    if (g->slots) {
        dd_free(&w->alloc, g->slots);
        w->slot_bytes -= (size_t)g->len * sizeof(wentry);
    }
    g->slots = t;
    g->cap = cap;
    g->len = len;
    w->slot_bytes += (size_t)len * sizeof(wentry);
    return true;
}

static uint64_t cap_for(uint64_t entries)
{
    uint64_t c = entries + entries * (100 - MAX_LOAD_NUM) / MAX_LOAD_NUM + 8;
    return c < 64 ? 64 : c;
}

/* Inserts an entry known to be absent.  False on allocation failure (the
 * table is then unchanged). */
static bool tab_insert(dedup_window *w, wgen *g, uint64_t lo, uint64_t hi, int64_t t)
{
    if (!g->slots || (g->count + 1) * 100 > g->cap * MAX_LOAD_NUM) {
        /* A new generation starts at the size the last one needed plus 10%
         * (compacted when it closes); a full one grows by half. */
        uint64_t ncap = g->slots ? g->cap + g->cap / 2 : (w->hint ? cap_for(w->hint + w->hint / 10) : 64);
        if (ncap < cap_for(g->count + 1))
            ncap = cap_for(g->count + 1);
        if (!tab_resize(w, g, ncap))
            return false;
    }
    wentry *s = g->slots;
    uint64_t pos = dedup_reduce(lo, g->cap);
    while (pos < g->len && !ent_empty(&s[pos]) && ent_cmp(lo, hi, &s[pos]) > 0)
        pos++;
    uint64_t e = pos;
    while (e < g->len && !ent_empty(&s[e]))
        e++;
    if (e >= g->len) {
        /* The cluster runs into the end: extend the tail. */
        uint64_t nlen = g->len + g->len / 8 + TAIL_SLOTS;
        wentry *ns = dd_realloc(&w->alloc, s, (size_t)g->len * sizeof(wentry),
                                (size_t)nlen * sizeof(wentry));
        if (!ns)
            return false;
        memset(ns + g->len, 0, (size_t)(nlen - g->len) * sizeof(wentry));
        w->slot_bytes += (size_t)(nlen - g->len) * sizeof(wentry);
        g->slots = s = ns;
        g->len = nlen;
    }
    if (e > pos)
        memmove(&s[pos + 1], &s[pos], (size_t)(e - pos) * sizeof(wentry));
    s[pos].lo = lo;
    s[pos].hi = hi;
    s[pos].t = t;
    g->count++;
    return true;
}

/* ---- approximate tables -------------------------------------------------------
 * Slot i of a table occupies bits [i*S, (i+1)*S) of its byte string (bit k
 * is bit k mod 8 of byte k / 8); its value is fp | tag << f, and 0 when
 * empty (fingerprints are never 0).  S <= 53, so one little-endian 8-byte
 * load at byte (i*S) / 8 holds the whole slot. */

static inline uint64_t slot_get(const dedup_window *w, const unsigned char *mem, uint64_t i)
{
    uint64_t bit = i * w->sbits;
    return (dedup_get_u64(mem + (bit >> 3)) >> (bit & 7)) & ((UINT64_C(1) << w->sbits) - 1);
}

static inline void slot_set(const dedup_window *w, unsigned char *mem, uint64_t i, uint64_t v)
{
    uint64_t bit = i * w->sbits, sh = bit & 7;
    uint64_t m = ((UINT64_C(1) << w->sbits) - 1) << sh;
    uint64_t x = dedup_get_u64(mem + (bit >> 3));
    dedup_put_u64(mem + (bit >> 3), (x & ~m) | (v << sh));
}

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The key's fingerprint (1 .. fmask) and buckets, all from its digest. */
static inline uint64_t key_fp(const dedup_window *w, uint64_t hi)
{
    return dedup_reduce(hi, w->fmask) + 1;
}

/* The other bucket of fingerprint fp in bucket b: (h - b) mod nb, an
 * involution for any nb. */
static inline uint64_t alt_bucket(const dedup_window *w, uint64_t b, uint64_t fp)
{
    uint64_t h = dedup_reduce(mix64(fp + UINT64_C(0x9E3779B97F4A7C15)), w->nb);
    return h >= b ? h - b : h + w->nb - b;
}

static inline uint32_t gen_tag(const dedup_window *w, int64_t id)
{
    return (uint32_t)((uint64_t)id & (w->ntags - 1));
}

/* True if a slot holds an entry of a live generation. */
static inline bool slot_live(const dedup_window *w, uint64_t v)
{
    return (v & w->fmask) && w->tag_state[v >> w->fbits] == TAG_LIVE;
}

static inline bool tag_consulted(const dedup_window *w, uint64_t v, int64_t first_id,
                                 int64_t last_id)
{
    uint32_t tag = (uint32_t)(v >> w->fbits);
    return w->tag_state[tag] == TAG_LIVE && w->tag_id[tag] >= first_id &&
           w->tag_id[tag] <= last_id;
}

static inline uint32_t st_tag(const dedup_window *w, uint64_t v)
{
    return (uint32_t)((v >> w->fbits) & (w->ntags - 1));
}

static inline uint64_t st_home(const dedup_window *w, uint64_t b)
{
    return mix64(b + UINT64_C(0x9E3779B97F4A7C15)) & (w->st_cap - 1);
}

/* True if the table holds fingerprint fp in bucket b1 or b2, or the stash
 * holds it with the pair {b1, b2}, tagged with a live generation whose id is
 * in [first_id, last_id]. */
static bool ap_lookup(const dedup_window *w, uint64_t b1, uint64_t b2, uint64_t fp,
                      uint64_t ext, int64_t first_id, int64_t last_id)
{
    for (int k = 0; k < 2; k++) {
        uint64_t b = k ? b2 : b1;
        for (uint32_t j = 0; j < SLOTS_PER_BUCKET; j++) {
            uint64_t v = slot_get(w, w->tab, b * SLOTS_PER_BUCKET + j);
            if ((v & w->fmask) == fp && tag_consulted(w, v, first_id, last_id))
                return true;
        }
    }
    if (w->st_live) {
        uint64_t mb = b1 < b2 ? b1 : b2;
        for (uint64_t i = st_home(w, mb);; i = (i + 1) & (w->st_cap - 1)) {
            const sentry *e = &w->st[i];
            if (!e->v && !e->b)
                return false;
            if (e->v && e->b == mb && (e->v & w->fmask) == fp && e->v >> w->sbits == ext &&
                tag_consulted(w, e->v & ((UINT64_C(1) << w->sbits) - 1), first_id, last_id))
                return true;
        }
    }
    return false;
}

/* Puts v into a free slot of bucket b (a slot of a dead generation is
 * free).  False if the bucket holds 4 live entries. */
static bool bucket_put(dedup_window *w, uint64_t b, uint64_t v)
{
    for (uint32_t j = 0; j < SLOTS_PER_BUCKET; j++) {
        uint64_t i = b * SLOTS_PER_BUCKET + j, old = slot_get(w, w->tab, i);
        if (slot_live(w, old))
            continue;
        if (old & w->fmask)
            w->tag_n[old >> w->fbits]--; /* overwrites a dead entry */
        slot_set(w, w->tab, i, v);
        w->tag_n[v >> w->fbits]++;
        return true;
    }
    return false;
}

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Places a live entry into a stash known to have a free slot. */
static void st_place(dedup_window *w, uint64_t b, uint64_t v)
{
    uint64_t i = st_home(w, b);
    while (w->st[i].v)
        i = (i + 1) & (w->st_cap - 1);
    if (!w->st[i].b)
        w->st_used++; /* an empty slot, not a removed entry's */
    w->st[i].b = b;
    w->st[i].v = v;
    w->st_live++;
}

/* Rebuilds the stash with room for 'extra' more entries, keeping the
 * entries of live generations (an empty one is freed).  False on allocation
 * failure (nothing changed). */
static bool st_rebuild(dedup_window *w, uint64_t extra)
{
    uint64_t need = extra, cap = 0;
    for (uint64_t i = 0; i < w->st_cap; i++)
        need += w->st[i].v && w->tag_state[st_tag(w, w->st[i].v)] == TAG_LIVE;
    if (need) {
        cap = 64;
        while (cap < 2 * need)
            cap *= 2;
    }
    sentry *old = w->st;
    uint64_t ocap = w->st_cap;
    sentry *n = NULL;
    if (cap) {
        n = dd_calloc(&w->alloc, (size_t)cap, sizeof(sentry));
        if (!n)
            return false;
    }
    w->st = n;
    w->st_cap = cap;
    w->st_used = w->st_live = 0;
    for (uint64_t i = 0; i < ocap; i++)
        if (old[i].v && w->tag_state[st_tag(w, old[i].v)] == TAG_LIVE)
            st_place(w, old[i].b, old[i].v);
    dd_free(&w->alloc, old);
    return true;
}

/* Puts entry v (buckets b1, b2) into the table: into a free slot of either
 * bucket, else by a kick chain (swap the entry in hand with a random one of
 * the bucket, take that one to its other bucket; undone if it fails).
 * False if there was no room (the table is then as it was). */
static bool tab_place(dedup_window *w, uint64_t b1, uint64_t b2, uint64_t v)
{
    if (bucket_put(w, b1, v) || bucket_put(w, b2, v)) {
        w->tab_live++;
        return true;
    }
    uint64_t slots = w->nb * SLOTS_PER_BUCKET;
    if (w->tab_live * 100 >= slots * NO_KICKS_ABOVE || w->tab_live >= w->kick_fail_live)
        return false;
    uint64_t path[MAX_KICKS];
    uint64_t cur = v, b = (xorshift(&w->rng) & 1) ? b2 : b1;
    for (uint32_t k = 0; k < MAX_KICKS; k++) {
        uint64_t i = b * SLOTS_PER_BUCKET + (xorshift(&w->rng) >> 62);
        uint64_t out = slot_get(w, w->tab, i);
        slot_set(w, w->tab, i, cur);
        path[k] = i;
        w->tag_n[cur >> w->fbits]++;
        w->tag_n[out >> w->fbits]--;
        cur = out;
        b = alt_bucket(w, b, cur & w->fmask);
        if (bucket_put(w, b, cur)) {
            w->tab_live++;
            return true;
        }
    }
    w->kick_fail_live = w->tab_live;
    for (uint32_t k = MAX_KICKS; k-- > 0;) { /* undo: v is in hand again */
        uint64_t back = slot_get(w, w->tab, path[k]);
        slot_set(w, w->tab, path[k], cur);
        w->tag_n[cur >> w->fbits]++;
        w->tag_n[back >> w->fbits]--;
        cur = back;
    }
    return false;
}

/* Records fingerprint fp with tag 'tag' (buckets b1, b2): in the table, or
 * in the stash when the table is full around the key.  Error:
 * DEDUP_ERR_NOMEM (the stash could not grow); then nothing changed. */
static dedup_status ap_insert(dedup_window *w, uint64_t b1, uint64_t b2, uint64_t fp,
                              uint64_t ext, uint32_t tag)
{
    uint64_t v = fp | (uint64_t)tag << w->fbits;
    if (tab_place(w, b1, b2, v))
        return DEDUP_OK;
    if ((w->st_used + 1) * 2 > w->st_cap && !st_rebuild(w, 1))
        return DEDUP_ERR_NOMEM;
    st_place(w, b1 < b2 ? b1 : b2, v | ext << w->sbits);
    return DEDUP_OK;
}

/* Clears the table slots of dead generations' tags; those tags become
 * free.  (The stash holds no dead entry: they are removed on expiry.) */
static void ap_sweep(dedup_window *w)
{
    uint64_t n = w->nb * SLOTS_PER_BUCKET;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = slot_get(w, w->tab, i);
        if ((v & w->fmask) && w->tag_state[v >> w->fbits] == TAG_DEAD)
            slot_set(w, w->tab, i, 0);
    }
    for (uint32_t g = 0; g < w->ntags; g++)
        if (w->tag_state[g] == TAG_DEAD) {
            w->tag_n[g] = 0;
            w->tag_state[g] = TAG_FREE;
        }
}

/* Makes 'tag' live for generation 'id', sweeping first if a dead
 * generation left slots with that tag. */
static void ap_tag_open(dedup_window *w, uint32_t tag, int64_t id)
{
    if (w->tag_state[tag] == TAG_DEAD && w->tag_n[tag])
        ap_sweep(w);
    w->tag_state[tag] = TAG_LIVE;
    w->tag_id[tag] = id;
}

/* A generation with tag 'tag' is dropped: its table slots become free at
 * once (they are cleared before the tag is reused). */
static void ap_tag_close(dedup_window *w, uint32_t tag)
{
    w->tag_state[tag] = TAG_DEAD;
    w->tab_live -= w->tag_n[tag];
}

/* After generations were dropped: the stash loses their entries, and its
 * other entries move into the table where it now has room, in the order of
 * (bucket, entry) so that a window resumed from a file, whose stash is laid
 * out otherwise, moves the same ones; an empty stash is freed. */
static void ap_stash_settle(dedup_window *w)
{
    if (!w->st_cap)
        return;
    size_t n = 0;
    for (uint64_t i = 0; i < w->st_cap; i++)
        n += w->st[i].v && w->tag_state[st_tag(w, w->st[i].v)] == TAG_LIVE;
    sentry *tmp = n ? dd_malloc(&w->alloc, n * sizeof(sentry)) : NULL;
    if (n && !tmp) {
        /* No memory to sort: only remove the dropped entries, in place. */
        for (uint64_t i = 0; i < w->st_cap; i++) {
            sentry *e = &w->st[i];
            if (e->v && w->tag_state[st_tag(w, e->v)] != TAG_LIVE) {
                e->v = 0;
                e->b = 1;
                w->st_live--;
            }
        }
        return;
    }
    size_t k = 0;
    for (uint64_t i = 0; i < w->st_cap; i++)
        if (w->st[i].v && w->tag_state[st_tag(w, w->st[i].v)] == TAG_LIVE)
            tmp[k++] = w->st[i];
    if (n)
        qsort(tmp, n, sizeof(sentry), sentry_cmp);
    memset(w->st, 0, (size_t)w->st_cap * sizeof(sentry));
    w->st_used = w->st_live = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t slot = tmp[i].v & ((UINT64_C(1) << w->sbits) - 1);
        if (!tab_place(w, tmp[i].b, alt_bucket(w, tmp[i].b, tmp[i].v & w->fmask), slot))
            st_place(w, tmp[i].b, tmp[i].v); /* fits: fewer than before */
    }
    dd_free(&w->alloc, tmp);
    if (w->st_live * 8 < w->st_cap)
        (void)st_rebuild(w, 0); /* shrinks, or frees; on failure keeps the array */
}

/* ---- generations ------------------------------------------------------------ */

/* Index of the first generation with id >= x (gn if none). */
static size_t gen_lower(const dedup_window *w, int64_t x)
{
    size_t lo = 0, hi = w->gn;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->gv[mid].id < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Drops every generation below the current watermark's floor. */
static void expire(dedup_window *w)
{
    if (!w->has_W || !w->gn)
        return;
    int64_t floor_id = gen_floor(w, w->W);
    size_t k = 0;
    while (k < w->gn && w->gv[k].id < floor_id) {
        wgen *g = &w->gv[k];
        w->expired += g->count;
        w->live -= g->count;
        if (w->p.mode == DEDUP_WINDOW_APPROX)
            ap_tag_close(w, gen_tag(w, g->id));
        gen_release(w, g);
        k++;
    }
    if (k) {
        memmove(w->gv, w->gv + k, (w->gn - k) * sizeof(wgen));
        w->gn -= k;
        if (w->p.mode == DEDUP_WINDOW_APPROX) {
            w->kick_fail_live = UINT64_MAX; /* fewer live now: kick chains may succeed */
            ap_stash_settle(w);
        }
    }
}

static void raise_watermark(dedup_window *w, int64_t wm)
{
    if (!w->has_W || wm > w->W) {
        w->W = wm;
        w->has_W = true;
        expire(w);
    }
}

/* A closed exact generation is compacted to ~85% load, so that the memory of
 * a window follows its keys. */
static void gen_close(dedup_window *w, wgen *g)
{
    if (!g->slots)
        return;
    if (g->count * 100 < g->cap * COMPACT_BELOW) {
        uint64_t ncap = cap_for(g->count);
        if (ncap < g->cap)
            (void)tab_resize(w, g, ncap); /* on failure keep the larger table */
    }
}

/* Returns the generation 'id', creating it.  NULL on allocation failure. */
static wgen *gen_get(dedup_window *w, int64_t id)
{
    size_t i = gen_lower(w, id);
    if (i < w->gn && w->gv[i].id == id)
        return &w->gv[i];
    if (w->gn == w->gcap) {
        size_t ncap = w->gcap ? w->gcap * 2 : 8;
        wgen *nv = dd_realloc(&w->alloc, w->gv, w->gcap * sizeof(wgen), ncap * sizeof(wgen));
        if (!nv)
            return NULL;
        w->gv = nv;
        w->gcap = ncap;
    }
    wgen g;
    memset(&g, 0, sizeof g);
    g.id = id;
    if (w->p.mode == DEDUP_WINDOW_APPROX)
        ap_tag_open(w, gen_tag(w, id), id);
    bool newest = i == w->gn;
    if (newest && w->gn && w->p.mode == DEDUP_WINDOW_EXACT) {
        wgen *prev = &w->gv[w->gn - 1];
        /* The next span probably holds as many keys as the last one. */
        if (prev->count)
            w->hint = prev->count;
        gen_close(w, prev);
    }
    if (!newest)
        memmove(&w->gv[i + 1], &w->gv[i], (w->gn - i) * sizeof(wgen));
    w->gv[i] = g;
    w->gn++;
    return &w->gv[i];
}

/* ---- the verb ----------------------------------------------------------------- */

static dedup_status decide(dedup_window *w, dedup_digest d, int64_t u, dedup_verdict *verdict)
{
    uint64_t lo = d.lo, hi = d.hi;
    if ((lo | hi) == 0)
        hi = 1;
    int64_t first_id, last_id;
    if (w->p.type == DEDUP_WINDOW_TUMBLING) {
        first_id = last_id = fdiv(u, w->D);
    } else {
        first_id = fdiv(u - w->D + 1, w->s);
        last_id = fdiv(u + w->D - 1, w->s);
    }
    bool dup = false;
    uint64_t fp = 0, b1 = 0, b2 = 0, ext = 0;
    size_t i = gen_lower(w, first_id);
    if (w->p.mode == DEDUP_WINDOW_EXACT) {
        /* Every consulted table's home slot is fetched before any is read,
         * so the cache misses of the G + 1 probes overlap instead of
         * queueing one behind the other. */
        for (size_t j = i; j < w->gn && w->gv[j].id <= last_id; j++) {
            const wgen *g = &w->gv[j];
            if (g->slots) {
                const wentry *e = g->slots + dedup_reduce(lo, g->cap);
                DD_PREFETCH(e);
                DD_PREFETCH((const char *)e + 47); /* the second line, if the entry straddles */
            }
        }
        for (size_t j = i; j < w->gn && w->gv[j].id <= last_id; j++) {
            const wentry *e = tab_find(&w->gv[j], lo, hi);
            if (e) {
                int64_t diff = u - e->t;
                if (w->p.type == DEDUP_WINDOW_TUMBLING || (diff < w->D && -diff < w->D)) {
                    dup = true;
                    break;
                }
            }
        }
    } else {
        fp = key_fp(w, hi);
        b1 = dedup_reduce(lo, w->nb);
        b2 = alt_bucket(w, b1, fp);
        ext = hi & (~UINT64_C(0) >> w->sbits); /* low bits of hi, which fp hardly depends on */
        dup = i < w->gn && w->gv[i].id <= last_id &&
              ap_lookup(w, b1, b2, fp, ext, first_id, last_id);
    }
    if (dup) {
        w->duplicates++;
        *verdict = w->p.mode == DEDUP_WINDOW_EXACT ? DEDUP_DUPLICATE : DEDUP_MAYBE_DUPLICATE;
        return DEDUP_OK;
    }
    wgen *g = gen_get(w, fdiv(u, w->s));
    if (!g)
        return DEDUP_ERR_NOMEM;
    if (w->p.mode == DEDUP_WINDOW_EXACT) {
        if (!tab_insert(w, g, lo, hi, u))
            return DEDUP_ERR_NOMEM;
    } else {
        dedup_status s = ap_insert(w, b1, b2, fp, ext, gen_tag(w, g->id));
        if (s)
            return s;
        g->count++;
    }
    w->kept++;
    w->live++;
    if (w->live > w->peak_live)
        w->peak_live = w->live;
    *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

dedup_status dedup_window_seen(dedup_window *w, dedup_digest d, int64_t time,
                               dedup_verdict *verdict)
{
    if (!w || !verdict)
        return DEDUP_ERR_INVALID_ARG;
    int64_t u;
    if (w->p.type == DEDUP_WINDOW_COUNT) {
        u = (int64_t)w->counter;
        if (u > DEDUP_WINDOW_MAX_TIME)
            return DEDUP_ERR_RANGE;
    } else {
        if (!time_ok(time))
            return DEDUP_ERR_RANGE;
        u = time;
        if (w->has_W && u < w->W) {
            w->late++;
            w->records++;
            int64_t behind = w->T - u; /* has_W without has_T: only by advance */
            if (w->has_T && behind > w->late_max_behind)
                w->late_max_behind = behind;
            *verdict = DEDUP_LATE;
            return DEDUP_OK;
        }
    }
    if (!w->has_T || u > w->T) {
        w->T = u;
        w->has_T = true;
        int64_t wm = u - w->L; /* >= -2^63: both are within 2^62 */
        raise_watermark(w, wm < DEDUP_WINDOW_MIN_TIME ? DEDUP_WINDOW_MIN_TIME : wm);
    }
    dedup_status s = decide(w, d, u, verdict);
    if (s)
        return s;
    w->records++;
    if (w->p.type == DEDUP_WINDOW_COUNT)
        w->counter++;
    return DEDUP_OK;
}

/* Issues the memory accesses seen() will make for (d, u): the home slot of
 * every exact table it will probe. */
static void prefetch_event(const dedup_window *w, dedup_digest d, int64_t u)
{
    if (w->p.mode == DEDUP_WINDOW_APPROX) {
        /* The key's two buckets. */
        uint64_t hi = (d.lo | d.hi) ? d.hi : 1;
        uint64_t fp = key_fp(w, hi), b1 = dedup_reduce(d.lo, w->nb), b2 = alt_bucket(w, b1, fp);
        uint64_t o1 = (b1 * SLOTS_PER_BUCKET * w->sbits) >> 3;
        uint64_t o2 = (b2 * SLOTS_PER_BUCKET * w->sbits) >> 3;
        DD_PREFETCH(w->tab + o1);
        DD_PREFETCH(w->tab + o2);
        return;
    }
    if (!time_ok(u))
        return;
    uint64_t lo = d.lo;
    int64_t first_id, last_id;
    if (w->p.type == DEDUP_WINDOW_TUMBLING) {
        first_id = last_id = fdiv(u, w->D);
    } else {
        first_id = fdiv(u - w->D + 1, w->s);
        last_id = fdiv(u + w->D - 1, w->s);
    }
    for (size_t j = gen_lower(w, first_id); j < w->gn && w->gv[j].id <= last_id; j++) {
        const wgen *g = &w->gv[j];
        if (g->slots)
            DD_PREFETCH(g->slots + dedup_reduce(lo, g->cap));
    }
}

#define BATCH_AHEAD 8 /* events prefetched ahead: enough misses in flight */

dedup_status dedup_window_seen_batch(dedup_window *w, const dedup_digest *d,
                                     const int64_t *times, size_t n, dedup_verdict *verdicts,
                                     size_t *done)
{
    if (done)
        *done = 0;
    if (!w || (n && (!d || !verdicts || (!times && w->p.type != DEDUP_WINDOW_COUNT))))
        return DEDUP_ERR_INVALID_ARG;
    bool count = w->p.type == DEDUP_WINDOW_COUNT;
    size_t warm = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t k = 0; k < warm; k++)
        prefetch_event(w, d[k], count ? (int64_t)(w->counter + k) : times[k]);
    for (size_t k = 0; k < n; k++) {
        if (k + BATCH_AHEAD < n)
            prefetch_event(w, d[k + BATCH_AHEAD],
                           count ? (int64_t)(w->counter + BATCH_AHEAD)
                                 : times[k + BATCH_AHEAD]);
        dedup_status s = dedup_window_seen(w, d[k], count ? 0 : times[k], &verdicts[k]);
        if (s)
            return s;
        if (done)
            *done = k + 1;
    }
    return DEDUP_OK;
}

dedup_status dedup_window_seen_key(dedup_window *w, const void *key, size_t len, int64_t time,
                                   dedup_verdict *verdict)
{
    if (!w || (!key && len))
        return DEDUP_ERR_INVALID_ARG;
    return dedup_window_seen(w, dedup_window_digest(w, key, len), time, verdict);
}

dedup_status dedup_window_advance_watermark(dedup_window *w, int64_t watermark)
{
    if (!w)
        return DEDUP_ERR_INVALID_ARG;
    if (w->p.type == DEDUP_WINDOW_COUNT)
        return DEDUP_ERR_UNSUPPORTED;
    if (!time_ok(watermark))
        return DEDUP_ERR_RANGE;
    raise_watermark(w, watermark);
    return DEDUP_OK;
}

/* ---- state -------------------------------------------------------------------- */

void dedup_window_get_stats(const dedup_window *w, dedup_window_stats *o)
{
    memset(o, 0, sizeof *o);
    o->records = w->records;
    o->kept = w->kept;
    o->duplicates = w->duplicates;
    o->late = w->late;
    o->late_max_behind = w->late_max_behind;
    o->live = w->live;
    o->peak_live = w->peak_live;
    o->expired = w->expired;
    o->generations = w->gn;
    o->has_time = w->has_T || w->has_W;
    o->max_time = w->has_T ? w->T : (w->has_W ? w->W : 0);
    o->watermark = w->has_W ? w->W : (w->has_T ? w->T - w->L : 0);
}

void dedup_window_get_params(const dedup_window *w, dedup_window_params *out)
{
    *out = w->p;
}

uint64_t dedup_window_span(const dedup_window *w)
{
    return (uint64_t)w->s;
}

uint32_t dedup_window_lookups(const dedup_window *w)
{
    return w->Q;
}

size_t dedup_window_memory_usage(const dedup_window *w)
{
    size_t m = sizeof *w + w->gcap * sizeof(wgen) + w->slot_bytes;
    if (w->p.mode == DEDUP_WINDOW_APPROX) {
        m += w->tab_bytes + TAB_SLACK + (size_t)w->ntags * (1 + 2 * sizeof(int64_t));
        m += (size_t)w->st_cap * sizeof(sentry);
    }
    return m;
}

/* ---- persistence ------------------------------------------------------------------
 * docs/FORMAT.md, "Time window", is the normative description. */

#define WIN_PARAMS_LEN 136u        /* exact */
#define WIN_PARAMS_LEN_APPROX 176u /* approximate: + table geometry and state */
#define GEN_HEADER_LEN 16u         /* id, count */
#define FLAG_HAS_T 1u
#define FLAG_HAS_W 2u

/* Generations with at least one kept record (the only ones saved: an empty
 * one is left behind only by an allocation failure). */
static uint32_t saved_gens(const dedup_window *w)
{
    uint32_t n = 0;
    for (size_t i = 0; i < w->gn; i++)
        n += w->gv[i].count != 0;
    return n;
}

static void put_params(const dedup_window *w, unsigned char *b)
{
    memset(b, 0, WIN_PARAMS_LEN_APPROX);
    dedup_put_u32(b + 0, (uint32_t)w->p.type);
    dedup_put_u32(b + 4, (uint32_t)w->p.mode);
    dedup_put_u64(b + 8, w->p.duration);
    dedup_put_u64(b + 16, w->p.lateness);
    dedup_put_u32(b + 24, w->p.generations);
    dedup_put_u32(b + 28, (w->has_T ? FLAG_HAS_T : 0) | (w->has_W ? FLAG_HAS_W : 0));
    dedup_put_u64(b + 32, w->p.capacity);
    dedup_put_f64(b + 40, w->p.fpr);
    dedup_put_u64(b + 48, (uint64_t)(w->has_T ? w->T : 0));
    dedup_put_u64(b + 56, (uint64_t)(w->has_W ? w->W : 0));
    dedup_put_u64(b + 64, w->counter);
    dedup_put_u64(b + 72, w->records);
    dedup_put_u64(b + 80, w->kept);
    dedup_put_u64(b + 88, w->duplicates);
    dedup_put_u64(b + 96, w->late);
    dedup_put_u64(b + 104, (uint64_t)w->late_max_behind);
    dedup_put_u64(b + 112, w->peak_live);
    dedup_put_u64(b + 120, w->expired);
    dedup_put_u32(b + 128, saved_gens(w));
    dedup_put_u32(b + 132, 0);
    if (w->p.mode == DEDUP_WINDOW_APPROX) {
        dedup_put_u32(b + 136, w->fbits);
        dedup_put_u32(b + 140, w->tbits);
        dedup_put_u64(b + 144, w->nb);
        dedup_put_u64(b + 152, w->st_live);
        dedup_put_u64(b + 160, w->rng);
        dedup_put_u64(b + 168, w->kick_fail_live);
    }
}

static uint64_t payload_len(const dedup_window *w)
{
    uint64_t n = 0;
    for (size_t i = 0; i < w->gn; i++) {
        const wgen *g = &w->gv[i];
        if (g->count)
            n += GEN_HEADER_LEN +
                 (w->p.mode == DEDUP_WINDOW_EXACT ? g->count * sizeof(wentry) : 0);
    }
    if (w->p.mode == DEDUP_WINDOW_APPROX)
        n += w->tab_bytes + w->st_live * sizeof(sentry);
    return n;
}

static uint32_t params_len(const dedup_window *w)
{
    return w->p.mode == DEDUP_WINDOW_APPROX ? WIN_PARAMS_LEN_APPROX : WIN_PARAMS_LEN;
}

uint64_t dedup_window_serialized_size(const dedup_window *w)
{
    return DEDUP_HEADER_SIZE + params_len(w) + payload_len(w) + DEDUP_TRAILER_SIZE;
}

/* Writes the table as saved: its packed slots with the entries of dead
 * generations cleared, in pieces of 8 * CHUNK slots (whole bytes); then the
 * stash's live entries. */
#define CHUNK 128u
static dedup_status save_approx(const dedup_window *w, dedup_encoder *e)
{
    unsigned char buf[CHUNK * 64 + TAB_SLACK];
    uint64_t n = w->nb * SLOTS_PER_BUCKET;
    dedup_status s = DEDUP_OK;
    for (uint64_t i0 = 0; !s && i0 < n; i0 += 8 * CHUNK) {
        uint64_t i1 = n - i0 < 8 * CHUNK ? n : i0 + 8 * CHUNK;
        size_t bytes = (size_t)(((i1 - i0) * w->sbits + 7) / 8);
        memset(buf, 0, bytes + TAB_SLACK);
        for (uint64_t i = i0; i < i1; i++) {
            uint64_t v = slot_get(w, w->tab, i);
            if (slot_live(w, v))
                slot_set(w, buf, i - i0, v);
        }
        s = dedup_encoder_write(e, buf, bytes);
    }
    if (s || !w->st_live)
        return s;
    /* The stash sorted by (bucket, entry): one canonical order. */
    sentry *tmp = dd_malloc(&w->alloc, (size_t)w->st_live * sizeof(sentry));
    if (!tmp)
        return DEDUP_ERR_NOMEM;
    size_t m = 0;
    for (uint64_t i = 0; i < w->st_cap; i++)
        if (w->st[i].v)
            tmp[m++] = w->st[i];
    qsort(tmp, m, sizeof(sentry), sentry_cmp);
    for (size_t i = 0; !s && i < m; i++) {
        uint64_t x[2] = {tmp[i].b, tmp[i].v};
        s = dedup_encoder_write_u64s(e, x, 2);
    }
    dd_free(&w->alloc, tmp);
    return s;
}

dedup_status dedup_window_save(const dedup_window *w, dedup_sink *sink)
{
    if (!w || !sink || !sink->write)
        return DEDUP_ERR_INVALID_ARG;
    if (w->gn > UINT32_MAX)
        return DEDUP_ERR_LIMIT;
    unsigned char params[WIN_PARAMS_LEN_APPROX];
    put_params(w, params);
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_WINDOW, w->p.seed, params,
                                         params_len(w), payload_len(w));
    for (size_t i = 0; !s && i < w->gn; i++) {
        const wgen *g = &w->gv[i];
        if (!g->count)
            continue;
        uint64_t h[2] = {(uint64_t)g->id, g->count};
        s = dedup_encoder_write_u64s(&e, h, 2);
        if (w->p.mode == DEDUP_WINDOW_EXACT) {
            uint64_t buf[3 * 256];
            size_t nb = 0;
            for (uint64_t k = 0; !s && g->slots && k < g->len; k++) {
                const wentry *x = &g->slots[k];
                if (ent_empty(x))
                    continue;
                buf[nb++] = x->lo;
                buf[nb++] = x->hi;
                buf[nb++] = (uint64_t)x->t;
                if (nb == sizeof buf / sizeof buf[0]) {
                    s = dedup_encoder_write_u64s(&e, buf, nb);
                    nb = 0;
                }
            }
            if (!s && nb)
                s = dedup_encoder_write_u64s(&e, buf, nb);
        }
    }
    if (!s && w->p.mode == DEDUP_WINDOW_APPROX)
        s = save_approx(w, &e);
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

/* Reads and validates one exact generation's entries into g. */
static dedup_status load_exact_gen(dedup_window *w, dedup_decoder *d, wgen *g)
{
    int64_t t_lo, t_hi; /* the times this generation may hold */
    t_lo = g->id * w->s;
    t_hi = t_lo + (w->s - 1);
    if (t_hi > w->T)
        t_hi = w->T;
    uint64_t cnt = g->count;
    g->count = 0;
    if (!cnt)
        return DEDUP_ERR_CORRUPT; /* empty generations are never saved */
    size_t bytes;
    if (!dd_mul_size((size_t)cnt, sizeof(wentry), &bytes))
        return DEDUP_ERR_CORRUPT;
    wentry *tmp = dd_malloc(&w->alloc, bytes);
    if (!tmp)
        return DEDUP_ERR_NOMEM;
    dedup_status s = dedup_decoder_read_u64s(d, (uint64_t *)(void *)tmp, (size_t)cnt * 3);
    for (uint64_t k = 0; !s && k < cnt; k++) {
        const wentry *x = &tmp[k];
        if (ent_empty(x) || x->t < t_lo || x->t > t_hi)
            s = DEDUP_ERR_CORRUPT;
        else if (k && ent_cmp(x->lo, x->hi, &tmp[k - 1]) <= 0)
            s = DEDUP_ERR_CORRUPT;
    }
    if (!s) {
        wentry *t;
        uint64_t len, cap = cap_for(cnt);
        if (tab_build(w, tmp, cnt, cap, &t, &len)) {
            g->slots = t;
            g->cap = cap;
            g->len = len;
            g->count = cnt;
            w->slot_bytes += (size_t)len * sizeof(wentry);
        } else {
            s = DEDUP_ERR_NOMEM;
        }
    }
    dd_free(&w->alloc, tmp);
    return s;
}

/* Reads the approximate table and stash (the generations are loaded and
 * their tags live): every entry must carry a non-zero fingerprint and the tag
 * of a saved generation, the bits after the last slot must be zero, a stash
 * entry must name the smaller bucket of a pair, and each generation must own
 * exactly its count of entries. */
static dedup_status load_approx(dedup_window *w, dedup_decoder *d, uint64_t sn)
{
    uint64_t n = w->nb * SLOTS_PER_BUCKET;
    if (!tab_alloc(w))
        return DEDUP_ERR_NOMEM;
    dedup_status s = dedup_decoder_read(d, w->tab, w->tab_bytes);
    if (s)
        return s;
    uint32_t tail = (uint32_t)(n * w->sbits % 8);
    if (tail && (w->tab[w->tab_bytes - 1] >> tail))
        return DEDUP_ERR_CORRUPT;
    uint64_t *cnt = dd_calloc(&w->alloc, w->ntags, sizeof(uint64_t));
    if (!cnt)
        return DEDUP_ERR_NOMEM;
    for (uint64_t i = 0; !s && i < n; i++) {
        uint64_t v = slot_get(w, w->tab, i);
        if (!v)
            continue;
        if (!slot_live(w, v))
            s = DEDUP_ERR_CORRUPT;
        else
            w->tag_n[v >> w->fbits]++;
    }
    w->tab_live = 0;
    for (uint32_t g = 0; g < w->ntags; g++) {
        cnt[g] = w->tag_n[g];
        w->tab_live += w->tag_n[g];
    }
    if (!s && sn && !st_rebuild(w, sn))
        s = DEDUP_ERR_NOMEM;
    uint64_t pb = 0, pv = 0;
    for (uint64_t k = 0; !s && k < sn; k++) {
        uint64_t x[2];
        s = dedup_decoder_read_u64s(d, x, 2);
        if (s)
            break;
        uint64_t fp = x[1] & w->fmask;
        if (x[0] >= w->nb || !slot_live(w, x[1] & ((UINT64_C(1) << w->sbits) - 1)) ||
            alt_bucket(w, x[0], fp) < x[0] ||
            (k && (x[0] < pb || (x[0] == pb && x[1] <= pv)))) {
            s = DEDUP_ERR_CORRUPT;
            break;
        }
        pb = x[0];
        pv = x[1];
        cnt[st_tag(w, x[1])]++;
        st_place(w, x[0], x[1]);
    }
    for (size_t i = 0; !s && i < w->gn; i++)
        if (cnt[gen_tag(w, w->gv[i].id)] != w->gv[i].count)
            s = DEDUP_ERR_CORRUPT;
    dd_free(&w->alloc, cnt);
    return s;
}

dedup_status dedup_window_load(dedup_source src, const dedup_allocator *alloc,
                               dedup_window **out)
{
    if (!out || !src.read)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    dd_allocator_resolve(&a, alloc);
    dedup_decoder dec, *d = &dec; /* ~5 KB, 64-byte aligned: on the stack as bloom.c does */
    dedup_window *w = NULL;
    dedup_status s = dedup_decoder_begin(d, src, DEDUP_TYPE_WINDOW);
    if (s)
        goto done;
    const unsigned char *b = d->params;
    uint32_t plen = d->header.params_len;
    if (plen < WIN_PARAMS_LEN) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    dedup_window_params p;
    dedup_window_params_init(&p);
    uint32_t type = dedup_get_u32(b), mode = dedup_get_u32(b + 4);
    uint32_t flags = dedup_get_u32(b + 28);
    if (mode == DEDUP_WINDOW_APPROX && plen == WIN_PARAMS_LEN) {
        /* An approximate window of the Bloom-generation layout (before the
         * tagged fingerprint table): not readable any more. */
        s = DEDUP_ERR_VERSION;
        goto done;
    }
    if (plen != (mode == DEDUP_WINDOW_APPROX ? WIN_PARAMS_LEN_APPROX : WIN_PARAMS_LEN)) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    p.duration = dedup_get_u64(b + 8);
    p.lateness = dedup_get_u64(b + 16);
    p.generations = dedup_get_u32(b + 24);
    p.capacity = dedup_get_u64(b + 32);
    p.fpr = dedup_get_f64(b + 40);
    p.seed = d->header.seed;
    if (type > DEDUP_WINDOW_COUNT || mode > DEDUP_WINDOW_APPROX || (flags & ~3u) ||
        dedup_get_u32(b + 132) != 0 || p.generations == 0) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    p.type = (dedup_window_type)type;
    p.mode = (dedup_window_mode)mode;
    s = alloc_window(&p, &a, true, &w);
    if (s) {
        if (s != DEDUP_ERR_NOMEM)
            s = s == DEDUP_ERR_LIMIT ? DEDUP_ERR_LIMIT : DEDUP_ERR_CORRUPT;
        goto done;
    }
    /* The params must be exactly what setup() normalises them to. */
    if (w->p.generations != p.generations || w->p.lateness != p.lateness ||
        w->p.fpr != p.fpr) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t sn = 0;
    if (p.mode == DEDUP_WINDOW_APPROX) {
        /* The geometry must be what these params create. */
        sn = dedup_get_u64(b + 152);
        w->rng = dedup_get_u64(b + 160);
        w->kick_fail_live = dedup_get_u64(b + 168);
        if (dedup_get_u32(b + 136) != w->fbits || dedup_get_u32(b + 140) != w->tbits ||
            dedup_get_u64(b + 144) != w->nb || !w->rng) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
    }
    w->has_T = flags & FLAG_HAS_T;
    w->has_W = flags & FLAG_HAS_W;
    w->T = w->has_T ? (int64_t)dedup_get_u64(b + 48) : 0;
    w->W = w->has_W ? (int64_t)dedup_get_u64(b + 56) : 0;
    w->counter = dedup_get_u64(b + 64);
    w->records = dedup_get_u64(b + 72);
    w->kept = dedup_get_u64(b + 80);
    w->duplicates = dedup_get_u64(b + 88);
    w->late = dedup_get_u64(b + 96);
    w->late_max_behind = (int64_t)dedup_get_u64(b + 104);
    w->peak_live = dedup_get_u64(b + 112);
    w->expired = dedup_get_u64(b + 120);
    uint32_t ng = dedup_get_u32(b + 128);
    if ((b[48] | b[49] | b[50] | b[51] | b[52] | b[53] | b[54] | b[55]) && !w->has_T)
        s = DEDUP_ERR_CORRUPT;
    if ((b[56] | b[57] | b[58] | b[59] | b[60] | b[61] | b[62] | b[63]) && !w->has_W)
        s = DEDUP_ERR_CORRUPT;
    if ((w->has_T && !time_ok(w->T)) || (w->has_W && !time_ok(w->W))) {
        s = DEDUP_ERR_CORRUPT; /* checked before any arithmetic on them */
        goto done;
    }
    /* The watermark is never below T - L once there is a T. */
    if (w->has_T && (!w->has_W || (w->W < w->T - w->L && w->W != DEDUP_WINDOW_MIN_TIME)))
        s = DEDUP_ERR_CORRUPT;
    if (w->late_max_behind < 0 || (w->late == 0 && w->late_max_behind != 0))
        s = DEDUP_ERR_CORRUPT;
    if (w->kept > w->records || w->duplicates > w->records - w->kept ||
        w->late != w->records - w->kept - w->duplicates || w->expired > w->kept)
        s = DEDUP_ERR_CORRUPT;
    if (p.type == DEDUP_WINDOW_COUNT) {
        if (w->late || w->has_W != w->has_T || w->counter != w->records ||
            (w->has_T ? (uint64_t)w->T + 1 != w->counter : w->counter != 0))
            s = DEDUP_ERR_CORRUPT;
    } else if (w->counter != 0) {
        s = DEDUP_ERR_CORRUPT;
    }
    if (ng && !w->has_T)
        s = DEDUP_ERR_CORRUPT; /* nothing is kept before a first record */
    if (s)
        goto done;
    if (p.mode == DEDUP_WINDOW_APPROX) {
        /* The payload length is implied by the params: check it before
         * allocating anything. */
        uint64_t want = (uint64_t)ng * GEN_HEADER_LEN + w->tab_bytes; /* < 2^38 */
        if (d->header.payload_len < want ||
            (d->header.payload_len - want) / sizeof(sentry) != sn ||
            (d->header.payload_len - want) % sizeof(sentry) != 0) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
    } else if ((uint64_t)ng > d->header.payload_len / GEN_HEADER_LEN) {
        /* Every generation is at least its header long: refuse counts the
         * payload cannot hold before allocating the array. */
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    if (ng) {
        w->gv = dd_calloc(&w->alloc, ng, sizeof(wgen));
        if (!w->gv) {
            s = DEDUP_ERR_NOMEM;
            goto done;
        }
        w->gcap = ng;
    }
    int64_t floor_id = w->has_W ? gen_floor(w, w->W) : INT64_MIN;
    int64_t top_id = w->has_T ? fdiv(w->T, w->s) : INT64_MIN;
    uint64_t live = 0;
    for (uint32_t i = 0; i < ng; i++) {
        uint64_t h[2];
        s = dedup_decoder_read_u64s(d, h, 2);
        if (s)
            goto done;
        int64_t id = (int64_t)h[0];
        uint64_t cnt = h[1];
        if (id < floor_id || id > top_id || (i && id <= w->gv[i - 1].id) || cnt == 0 ||
            cnt > w->kept - live) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
        uint64_t left = d->header.payload_len - d->consumed;
        wgen *g = &w->gv[i];
        g->id = id;
        g->count = cnt;
        w->gn = i + 1;
        if (p.mode == DEDUP_WINDOW_EXACT) {
            if (cnt > left / sizeof(wentry)) {
                s = DEDUP_ERR_CORRUPT;
                goto done;
            }
            s = load_exact_gen(w, d, g);
            if (s)
                goto done;
        } else {
            /* Ids between floor and top are fewer than 2^t: distinct tags. */
            if (w->tag_state[gen_tag(w, id)] != TAG_FREE) {
                s = DEDUP_ERR_CORRUPT;
                goto done;
            }
            w->tag_state[gen_tag(w, id)] = TAG_LIVE;
            w->tag_id[gen_tag(w, id)] = id;
        }
        live += cnt;
    }
    if (p.mode == DEDUP_WINDOW_APPROX) {
        s = load_approx(w, d, sn);
        if (s)
            goto done;
    }
    if (live != w->kept - w->expired || w->peak_live < live || w->peak_live > w->kept) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    w->live = live;
    s = dedup_decoder_end(d);
    if (!s && w->gn && p.mode == DEDUP_WINDOW_EXACT) {
        uint64_t c = w->gv[w->gn - 1].count;
        if (c > w->hint)
            w->hint = c;
    }
done:
    if (s) {
        dedup_window_free(w);
        return s;
    }
    *out = w;
    return DEDUP_OK;
}

static dedup_status save_cb(const void *obj, dedup_sink *sink)
{
    return dedup_window_save(obj, sink);
}

dedup_status dedup_window_save_file(const dedup_window *w, const char *path)
{
    if (!w || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_cb, w);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_window *x = NULL;
    dedup_status s = dedup_window_load(src, alloc, &x);
    *out = x;
    return s;
}

static void free_any(void *obj) { dedup_window_free(obj); }

dedup_status dedup_window_load_file(const char *path, const dedup_allocator *alloc,
                                dedup_window **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    void *obj = NULL;
    dedup_status s = dd_load_file(path, alloc, load_any, free_any, &obj);
    *out = obj;
    return s;
}
