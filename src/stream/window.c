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
 * Approximate generations are blocked Bloom filters (dedup/bloom.h), one
 * cache line per key and generation.
 */
#define _DEFAULT_SOURCE /* madvise() and MADV_HUGEPAGE */
#include "dedup/window.h"
#include "dedup/bloom.h"
#include "dedup/limits.h"
#include "internal.h"

#include <math.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

typedef struct wentry {
    uint64_t lo, hi;
    int64_t t;
} wentry;

typedef struct wgen {
    int64_t id;
    uint64_t count;  /* kept records in this generation */
    uint64_t cap;    /* home slots (exact) */
    uint64_t len;    /* allocated slots: cap + tail */
    wentry *slots;   /* exact; NULL until the first insert */
    dedup_bloom *bf; /* approximate */
} wgen;

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

    /* approximate */
    dedup_bloom_params bp;
    dedup_bloom *spare; /* the filter made by create(), until the first generation */
    uint64_t bloom_bits;
    uint32_t bloom_k;
};

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
    p->generations = DEDUP_WINDOW_DEFAULT_GENERATIONS;
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
        p.generations = DEDUP_WINDOW_DEFAULT_GENERATIONS;
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
        /* Generations alive at once: ids from gen_floor(W) to floor(T / s). */
        int64_t alive = p.type == DEDUP_WINDOW_TUMBLING ? w->L / w->D + 2
                                                        : (w->L + (w->D - 1)) / w->s + 2;
        if (alive > (int64_t)DEDUP_WINDOW_MAX_APPROX_LIVE)
            return DEDUP_ERR_LIMIT;
        double per_gen = p.type == DEDUP_WINDOW_TUMBLING
                             ? (double)p.capacity
                             : ceil((double)p.capacity * (double)w->s / (double)w->D);
        dedup_bloom_params_init(&w->bp);
        w->bp.kind = DEDUP_BLOOM_BLOCKED;
        w->bp.capacity = per_gen < 1 ? 1 : (uint64_t)per_gen;
        w->bp.fpr = p.fpr / (double)w->Q;
        if (w->bp.fpr < DEDUP_MIN_FPR)
            w->bp.fpr = DEDUP_MIN_FPR;
        w->bp.seed = p.seed;
    }
    if (p.mode == DEDUP_WINDOW_EXACT && p.capacity) {
        double per_gen = p.type == DEDUP_WINDOW_TUMBLING
                             ? (double)p.capacity
                             : ceil((double)p.capacity * (double)w->s / (double)w->D);
        w->hint = per_gen > 1e12 ? (uint64_t)1e12 : (uint64_t)per_gen;
    }
    return DEDUP_OK;
}

/* Allocates a window for 'params'.  A created window gets its first filter
 * now (which also checks the sizing); a loading one computes the filter size
 * only, so a hostile file cannot make it allocate before its payload is
 * known to hold the filters. */
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
    if (w->p.mode == DEDUP_WINDOW_APPROX && loading) {
        w->bloom_bits = dedup_blocked_bits_for(w->bp.capacity, w->bp.fpr);
        if (w->bloom_bits == 0 || w->bloom_bits > DEDUP_MAX_BITS) {
            dd_free(&a, w);
            return DEDUP_ERR_LIMIT;
        }
    } else if (w->p.mode == DEDUP_WINDOW_APPROX) {
        /* One filter up front: it checks the sizing and becomes the first
         * generation. */
        s = dedup_bloom_create(&w->bp, &w->alloc, &w->spare);
        if (s) {
            dd_free(&a, w);
            return s;
        }
        w->bloom_bits = w->bp.bits = dedup_bloom_bits(w->spare);
        w->bloom_k = w->bp.k = dedup_bloom_k(w->spare);
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
    dedup_bloom_free(g->bf);
    g->slots = NULL;
    g->bf = NULL;
}

void dedup_window_free(dedup_window *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->gn; i++)
        gen_release(w, &w->gv[i]);
    dd_free(&w->alloc, w->gv);
    dedup_bloom_free(w->spare);
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
        gen_release(w, g);
        k++;
    }
    if (k) {
        memmove(w->gv, w->gv + k, (w->gn - k) * sizeof(wgen));
        w->gn -= k;
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
    if (w->p.mode == DEDUP_WINDOW_APPROX) {
        /* The first filter was made by create(); later ones are created
         * with the bits and k it settled on, which skips the sizing
         * search.  A fresh calloc'd filter costs no more than clearing an
         * old one, and a dropped generation's memory is returned at once. */
        if (w->spare) {
            g.bf = w->spare;
            w->spare = NULL;
        } else if (dedup_bloom_create(&w->bp, &w->alloc, &g.bf) != DEDUP_OK) {
            return NULL;
        }
        if (!w->bp.k) {
            w->bloom_bits = w->bp.bits = dedup_bloom_bits(g.bf);
            w->bloom_k = w->bp.k = dedup_bloom_k(g.bf);
        }
    }
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
        dedup_digest dd = {lo, hi};
        for (size_t j = i; j < w->gn && w->gv[j].id <= last_id; j++) {
            if (dedup_bloom_might_contain(w->gv[j].bf, dd)) {
                dup = true;
                break;
            }
        }
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
        dedup_digest dd = {lo, hi};
        dedup_bloom_add(g->bf, dd);
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
    if (w->p.mode != DEDUP_WINDOW_EXACT || !time_ok(u))
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
    for (size_t i = 0; i < w->gn; i++)
        if (w->gv[i].bf)
            m += dedup_bloom_memory_usage(w->gv[i].bf);
    if (w->spare)
        m += dedup_bloom_memory_usage(w->spare);
    return m;
}

/* ---- persistence ------------------------------------------------------------------
 * docs/FORMAT.md, "Time window", is the normative description. */

#define WIN_PARAMS_LEN 136u
#define GEN_HEADER_LEN 16u /* exact: id, count */
#define GEN_HEADER_LEN_APPROX 24u /* approx: id, count, filter length */
#define FLAG_HAS_T 1u
#define FLAG_HAS_W 2u

static void put_params(const dedup_window *w, unsigned char *b)
{
    memset(b, 0, WIN_PARAMS_LEN);
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
    dedup_put_u32(b + 128, (uint32_t)w->gn);
    dedup_put_u32(b + 132, 0);
}

static uint64_t payload_len(const dedup_window *w)
{
    uint64_t n = 0;
    for (size_t i = 0; i < w->gn; i++) {
        const wgen *g = &w->gv[i];
        if (w->p.mode == DEDUP_WINDOW_EXACT)
            n += GEN_HEADER_LEN + g->count * sizeof(wentry);
        else
            n += GEN_HEADER_LEN_APPROX + dedup_bloom_serialized_size(g->bf);
    }
    return n;
}

uint64_t dedup_window_serialized_size(const dedup_window *w)
{
    return DEDUP_HEADER_SIZE + WIN_PARAMS_LEN + payload_len(w) + DEDUP_TRAILER_SIZE;
}

typedef struct enc_sink_ctx {
    dedup_encoder *e;
} enc_sink_ctx;

static dedup_status enc_sink_write(void *ctx, const void *buf, size_t len)
{
    return dedup_encoder_write(((enc_sink_ctx *)ctx)->e, buf, len);
}

dedup_status dedup_window_save(const dedup_window *w, dedup_sink *sink)
{
    if (!w || !sink || !sink->write)
        return DEDUP_ERR_INVALID_ARG;
    if (w->gn > UINT32_MAX)
        return DEDUP_ERR_LIMIT;
    unsigned char params[WIN_PARAMS_LEN];
    put_params(w, params);
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_WINDOW, w->p.seed, params,
                                         WIN_PARAMS_LEN, payload_len(w));
    for (size_t i = 0; !s && i < w->gn; i++) {
        const wgen *g = &w->gv[i];
        uint64_t h[3] = {(uint64_t)g->id, g->count, 0};
        if (w->p.mode == DEDUP_WINDOW_EXACT) {
            s = dedup_encoder_write_u64s(&e, h, 2);
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
        } else {
            h[2] = dedup_bloom_serialized_size(g->bf);
            s = dedup_encoder_write_u64s(&e, h, 3);
            if (!s) {
                enc_sink_ctx c = {&e};
                dedup_sink sub = {enc_sink_write, &c};
                s = dedup_bloom_save(g->bf, &sub);
            }
        }
    }
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

/* A source over the next 'left' payload bytes of a decoder (nested filters). */
typedef struct dec_src_ctx {
    dedup_decoder *d;
    uint64_t left;
} dec_src_ctx;

static dedup_status dec_src_read(void *ctx, void *buf, size_t len)
{
    dec_src_ctx *c = ctx;
    if (len > c->left)
        return DEDUP_ERR_TRUNCATED;
    c->left -= len;
    return dedup_decoder_read(c->d, buf, len);
}

static uint64_t dec_src_remaining(void *ctx)
{
    return ((dec_src_ctx *)ctx)->left;
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

static dedup_status load_approx_gen(dedup_window *w, dedup_decoder *d, wgen *g, uint64_t blen)
{
    dec_src_ctx c = {d, blen};
    dedup_source src = {dec_src_read, dec_src_remaining, &c};
    dedup_status s = dedup_bloom_load(src, &w->alloc, &g->bf);
    if (s)
        return s == DEDUP_ERR_TRUNCATED ? DEDUP_ERR_CORRUPT : s;
    if (c.left != 0 || dedup_bloom_get_kind(g->bf) != DEDUP_BLOOM_BLOCKED ||
        dedup_bloom_bits(g->bf) != w->bloom_bits || dedup_bloom_seed(g->bf) != w->p.seed ||
        (w->bloom_k && dedup_bloom_k(g->bf) != w->bloom_k))
        return DEDUP_ERR_CORRUPT;
    /* All generations share one shape; later ones are created like it. */
    w->bloom_k = w->bp.k = dedup_bloom_k(g->bf);
    w->bp.bits = w->bloom_bits;
    return DEDUP_OK;
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
    if (d->header.params_len != WIN_PARAMS_LEN) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    dedup_window_params p;
    dedup_window_params_init(&p);
    uint32_t type = dedup_get_u32(b), mode = dedup_get_u32(b + 4);
    uint32_t flags = dedup_get_u32(b + 28);
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
    /* Every generation is at least its header long: refuse counts the
     * payload cannot hold before allocating the array. */
    uint64_t gh = p.mode == DEDUP_WINDOW_EXACT ? GEN_HEADER_LEN : GEN_HEADER_LEN_APPROX;
    if ((uint64_t)ng > d->header.payload_len / gh) {
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
        uint64_t h[3];
        s = dedup_decoder_read_u64s(d, h, p.mode == DEDUP_WINDOW_EXACT ? 2 : 3);
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
        } else {
            if (h[2] > left) {
                s = DEDUP_ERR_CORRUPT;
                goto done;
            }
            s = load_approx_gen(w, d, g, h[2]);
        }
        if (s)
            goto done;
        live += cnt;
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
