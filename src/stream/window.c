/*
 * window.c - stream deduplication over windows of event time: parameters,
 * create/free, the generations, the verb (seen, seen_batch,
 * advance_watermark) and state.  The tables are in window_exact.c and
 * window_approx.c, save/load in window_persist.c; what they share is in
 * window_internal.h.
 *
 * How it works.  Kept records are grouped into generations by event time
 * (generation id = floor(t / s)); the generations alive are kept in a small
 * array sorted by id.  A lookup for a record at time u consults only the
 * generations whose span can hold a time within D of u, and the watermark
 * drops whole generations from the front of the array: nothing ever scans
 * keys to expire them.
 *
 * Exact generations are tables of their own (window_exact.c); approximate
 * windows keep one table of tagged fingerprints for all generations
 * (window_approx.c).
 */
#include "window_internal.h"

#include <math.h>

/* Lowest generation id still relevant under watermark W. */
int64_t ddi_win_gen_floor(const dedup_window *w, int64_t W)
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
    /* Refresh moves a key's time forward: a tumbling window would not
     * notice, and a lateness of a whole window could bring a record from
     * before the time it was moved from (dedup/window.h). */
    if (p.refresh && (p.type == DEDUP_WINDOW_TUMBLING || p.lateness >= p.duration))
        return DEDUP_ERR_INVALID_ARG;
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
        /* A: generations alive at once, the ids from ddi_win_gen_floor(W) to
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

/* Allocates the (empty) fingerprint table.  False on allocation failure. */
bool ddi_win_tab_alloc(dedup_window *w)
{
    w->tab = ddi_calloc(&w->alloc, w->tab_bytes + TAB_SLACK, 1);
    w->tag_n = ddi_calloc(&w->alloc, w->ntags, sizeof(uint64_t));
    if (!w->tab || !w->tag_n)
        return false;
    ddi_win_advise_huge(w->tab, w->tab_bytes + TAB_SLACK);
    return true;
}

/* Allocates a window for 'params'.  A created approximate window gets its
 * table now; a loading one only its tag arrays (at most 1024 entries), and
 * the table once the payload is known to hold it, so a hostile file cannot
 * make it allocate first. */
dedup_status ddi_win_alloc_window(const dedup_window_params *params, const dedup_allocator *alloc,
                                 bool loading, dedup_window **out)
{
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_window *w = ddi_calloc(&a, 1, sizeof *w);
    if (!w)
        return DEDUP_ERR_NOMEM;
    w->alloc = a;
    dedup_status s = setup(w, params);
    if (s) {
        ddi_free(&a, w);
        return s;
    }
    if (w->p.mode == DEDUP_WINDOW_APPROX) {
        w->kick_fail_live = UINT64_MAX;
        w->rng = w->p.seed ^ UINT64_C(0x6A09E667F3BCC909);
        if (!w->rng)
            w->rng = 1;
        w->tag_state = ddi_calloc(&w->alloc, w->ntags, 1);
        w->tag_id = ddi_calloc(&w->alloc, w->ntags, sizeof(int64_t));
        if (!w->tag_state || !w->tag_id || (!loading && !ddi_win_tab_alloc(w))) {
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
    return ddi_win_alloc_window(params, alloc, false, out);
}

static void gen_release(dedup_window *w, wgen *g)
{
    if (g->slots) {
        ddi_free(&w->alloc, g->slots);
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
    ddi_free(&w->alloc, w->gv);
    ddi_free(&w->alloc, w->tab);
    ddi_free(&w->alloc, w->tag_n);
    ddi_free(&w->alloc, w->st);
    ddi_free(&w->alloc, w->tag_state);
    ddi_free(&w->alloc, w->tag_id);
    dedup_allocator a = w->alloc;
    ddi_free(&a, w);
}

dedup_digest dedup_window_digest(const dedup_window *w, const void *key, size_t len)
{
    return dedup_hash(key, len, w->p.seed);
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
    int64_t floor_id = ddi_win_gen_floor(w, w->W);
    size_t k = 0;
    while (k < w->gn && w->gv[k].id < floor_id) {
        wgen *g = &w->gv[k];
        w->expired += g->count;
        w->live -= g->count;
        if (w->p.mode == DEDUP_WINDOW_APPROX)
            ddi_win_ap_tag_close(w, gen_tag(w, g->id));
        gen_release(w, g);
        k++;
    }
    if (k) {
        memmove(w->gv, w->gv + k, (w->gn - k) * sizeof(wgen));
        w->gn -= k;
        if (w->p.mode == DEDUP_WINDOW_APPROX) {
            w->kick_fail_live = UINT64_MAX; /* fewer live now: kick chains may succeed */
            ddi_win_ap_stash_settle(w);
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
        uint64_t ncap = ddi_win_cap_for(g->count);
        if (ncap < g->cap)
            (void)ddi_win_tab_resize(w, g, ncap); /* on failure keep the larger table */
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
        wgen *nv = ddi_realloc(&w->alloc, w->gv, w->gcap * sizeof(wgen), ncap * sizeof(wgen));
        if (!nv)
            return NULL;
        w->gv = nv;
        w->gcap = ncap;
    }
    wgen g;
    memset(&g, 0, sizeof g);
    g.id = id;
    if (w->p.mode == DEDUP_WINDOW_APPROX)
        ddi_win_ap_tag_open(w, gen_tag(w, id), id);
    bool newest = i == w->gn;
    if (newest && w->gn && w->p.mode == DEDUP_WINDOW_EXACT) {
        wgen *prev = &w->gv[w->gn - 1];
        /* The next span probably holds as many keys as the last one. */
        if (prev->count)
            w->hint = w->hint_max && prev->count > w->hint_max ? w->hint_max : prev->count;
        gen_close(w, prev);
    }
    if (!newest)
        memmove(&w->gv[i + 1], &w->gv[i], (w->gn - i) * sizeof(wgen));
    w->gv[i] = g;
    w->gn++;
    return &w->gv[i];
}

dedup_status dedup_window_limit_first_table(dedup_window *w, uint64_t max_entries)
{
    if (!w)
        return DEDUP_ERR_INVALID_ARG;
    w->hint_max = max_entries;
    if (max_entries && w->hint > max_entries)
        w->hint = max_entries;
    return DEDUP_OK;
}

/* ---- the verb ----------------------------------------------------------------- */

/* What a lookup of one key at time u needs: its digest words, the
 * approximate window's fingerprint, buckets and stash bits, the range of
 * generations that can hold a time within D of u, and the index of the
 * first of them. */
typedef struct probe {
    uint64_t lo, hi, fp, b1, b2, ext;
    int64_t first_id, last_id;
    size_t i;
} probe;

static void probe_init(const dedup_window *w, dedup_digest d, int64_t u, probe *p)
{
    p->lo = d.lo;
    p->hi = d.hi;
    if ((p->lo | p->hi) == 0)
        p->hi = 1;
    if (w->p.type == DEDUP_WINDOW_TUMBLING) {
        p->first_id = p->last_id = fdiv(u, w->D);
    } else {
        p->first_id = fdiv(u - w->D + 1, w->s);
        p->last_id = fdiv(u + w->D - 1, w->s);
    }
    p->fp = p->b1 = p->b2 = p->ext = 0;
    if (w->p.mode == DEDUP_WINDOW_APPROX) {
        p->fp = key_fp(w, p->hi);
        p->b1 = dedup_reduce(p->lo, w->nb);
        p->b2 = alt_bucket(w, p->b1, p->fp);
        p->ext = p->hi & (~UINT64_C(0) >> w->sbits); /* low bits of hi, which fp hardly depends on */
    }
    p->i = gen_lower(w, p->first_id);
}

/* True if the exact entry 'e' (kept or renewed at e->t) makes a record at u
 * a duplicate. */
static inline bool exact_within(const dedup_window *w, const wentry *e, int64_t u)
{
    int64_t diff = u - e->t;
    return w->p.type == DEDUP_WINDOW_TUMBLING || (diff < w->D && -diff < w->D);
}

/* Whether the key of 'p' makes a record at u a duplicate; changes nothing.
 * With 'newest' (exact), *newest receives the matching entry of the newest
 * generation, whose index goes to *gen. */
static bool lookup(const dedup_window *w, const probe *p, int64_t u, const wentry **newest,
                   size_t *gen)
{
    if (w->p.mode == DEDUP_WINDOW_APPROX)
        return p->i < w->gn && w->gv[p->i].id <= p->last_id &&
               ap_lookup(w, p->b1, p->b2, p->fp, p->ext, p->first_id, p->last_id);
    /* Every consulted table's home slot is fetched before any is read, so
     * the cache misses of the G + 1 probes overlap instead of queueing one
     * behind the other. */
    size_t end = p->i;
    for (; end < w->gn && w->gv[end].id <= p->last_id; end++) {
        const wgen *g = &w->gv[end];
        if (g->slots) {
            const wentry *e = g->slots + dedup_reduce(p->lo, g->cap);
            DD_PREFETCH(e);
            DD_PREFETCH((const char *)e + 47); /* the second line, if the entry straddles */
        }
    }
    if (newest) {
        /* Newest first: a key may hold an entry in two generations (kept
         * again after a gap, the older not yet expired), and a refresh must
         * renew the newer one, which a generation of u's span always is. */
        for (size_t j = end; j-- > p->i;) {
            const wentry *e = tab_find(&w->gv[j], p->lo, p->hi);
            if (e && exact_within(w, e, u)) {
                *newest = e;
                *gen = j;
                return true;
            }
        }
        return false;
    }
    for (size_t j = p->i; j < end; j++) {
        const wentry *e = tab_find(&w->gv[j], p->lo, p->hi);
        if (e && exact_within(w, e, u))
            return true;
    }
    return false;
}

/* Refresh: the duplicate at u renews its key.  Exact: the newest matching
 * entry takes the time u (when later), moving to u's generation when that
 * is another one.  Approximate: the matching entry of the newest generation
 * is retagged with u's generation (when older).  Nothing changes on error
 * (DEDUP_ERR_NOMEM; u's generation may be left created and empty). */
static dedup_status renew(dedup_window *w, const probe *p, int64_t u, const wentry *e, size_t j)
{
    int64_t gid = fdiv(u, w->s);
    if (w->p.mode == DEDUP_WINDOW_EXACT) {
        if (e->t >= u)
            return DEDUP_OK;
        int64_t old_id = w->gv[j].id;
        if (old_id == gid) {
            ((wentry *)e)->t = u; /* the same span: in place */
            return DEDUP_OK;
        }
        /* gen_get may move the array and compact a table: look up again. */
        wgen *g = gen_get(w, gid);
        if (!g)
            return DEDUP_ERR_NOMEM;
        if (!ddi_win_tab_insert(w, g, p->lo, p->hi, u))
            return DEDUP_ERR_NOMEM;
        size_t oi = gen_lower(w, old_id);
        wgen *og = &w->gv[oi];
        ddi_win_tab_remove(og, p->lo, p->hi);
        /* Keys that keep coming leave the older tables: one emptied to
         * half its planned load is rebuilt at its size (once per half of
         * its entries gone: O(1) a move), an empty one freed, so memory
         * still follows the keys in the window. */
        if (!og->count)
            gen_release(w, og);
        else if (oi + 1 < w->gn && og->count * 100 < og->cap * SHRINK_BELOW)
            (void)ddi_win_tab_resize(w, og, ddi_win_cap_for(og->count)); /* failure: keep it */
        return DEDUP_OK;
    }
    uint64_t where;
    bool stash;
    int64_t id = ddi_win_ap_newest(w, p->b1, p->b2, p->fp, p->ext, p->first_id, p->last_id,
                                   &where, &stash);
    if (id >= gid)
        return DEDUP_OK;
    wgen *g = gen_get(w, gid); /* a sweep it may run clears dead slots only */
    if (!g)
        return DEDUP_ERR_NOMEM;
    g->count++;
    w->gv[gen_lower(w, id)].count--;
    ddi_win_ap_retag(w, where, stash, gen_tag(w, gid));
    return DEDUP_OK;
}

static dedup_status decide(dedup_window *w, dedup_digest d, int64_t u, dedup_verdict *verdict)
{
    probe p;
    probe_init(w, d, u, &p);
    const wentry *e = NULL;
    size_t j = 0;
    bool refresh = w->p.refresh;
    bool dup = lookup(w, &p, u, refresh && w->p.mode == DEDUP_WINDOW_EXACT ? &e : NULL, &j);
    if (dup) {
        if (refresh) {
            dedup_status s = renew(w, &p, u, e, j);
            if (s)
                return s;
        }
        w->duplicates++;
        *verdict = w->p.mode == DEDUP_WINDOW_EXACT ? DEDUP_DUPLICATE : DEDUP_MAYBE_DUPLICATE;
        return DEDUP_OK;
    }
    wgen *g = gen_get(w, fdiv(u, w->s));
    if (!g)
        return DEDUP_ERR_NOMEM;
    if (w->p.mode == DEDUP_WINDOW_EXACT) {
        if (!ddi_win_tab_insert(w, g, p.lo, p.hi, u))
            return DEDUP_ERR_NOMEM;
    } else {
        dedup_status s = ddi_win_ap_insert(w, p.b1, p.b2, p.fp, p.ext, gen_tag(w, g->id));
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

/* The time a record is decided at: the record count of a COUNT window, the
 * event time otherwise (checked); *late when it is below the watermark. */
static dedup_status event_time(const dedup_window *w, int64_t time, int64_t *u, bool *late)
{
    *late = false;
    if (w->p.type == DEDUP_WINDOW_COUNT) {
        *u = (int64_t)w->counter;
        return *u > DEDUP_WINDOW_MAX_TIME ? DEDUP_ERR_RANGE : DEDUP_OK;
    }
    if (!time_ok(time))
        return DEDUP_ERR_RANGE;
    *u = time;
    *late = w->has_W && time < w->W;
    return DEDUP_OK;
}

dedup_status dedup_window_seen(dedup_window *w, dedup_digest d, int64_t time,
                               dedup_verdict *verdict)
{
    if (!w || !verdict)
        return DEDUP_ERR_INVALID_ARG;
    int64_t u;
    bool late;
    dedup_status st = event_time(w, time, &u, &late);
    if (st)
        return st;
    if (late) {
        w->late++;
        w->records++;
        int64_t behind = w->T - u; /* has_W without has_T: only by advance */
        if (w->has_T && behind > w->late_max_behind)
            w->late_max_behind = behind;
        *verdict = DEDUP_LATE;
        return DEDUP_OK;
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

dedup_status dedup_window_query(const dedup_window *w, dedup_digest d, int64_t time,
                                dedup_verdict *verdict)
{
    if (!w || !verdict)
        return DEDUP_ERR_INVALID_ARG;
    int64_t u;
    bool late;
    dedup_status st = event_time(w, time, &u, &late);
    if (st)
        return st;
    if (late) {
        *verdict = DEDUP_LATE;
        return DEDUP_OK;
    }
    probe p;
    probe_init(w, d, u, &p);
    if (!lookup(w, &p, u, NULL, NULL))
        *verdict = DEDUP_NEW;
    else
        *verdict = w->p.mode == DEDUP_WINDOW_EXACT ? DEDUP_DUPLICATE : DEDUP_MAYBE_DUPLICATE;
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
        if (w->st_live) { /* and its stash home: past the plan most new keys probe it */
            uint64_t ext = hi & (~UINT64_C(0) >> w->sbits);
            DD_PREFETCH(w->st + st_home(w, b1 < b2 ? b1 : b2, fp | ext << w->sbits));
        }
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

dedup_status dedup_window_count_within(const dedup_window *w, int64_t time, uint64_t *out)
{
    *out = 0;
    if (w->p.mode != DEDUP_WINDOW_EXACT)
        return DEDUP_ERR_UNSUPPORTED;
    if (!time_ok(time))
        return DEDUP_ERR_RANGE;
    if (w->p.type != DEDUP_WINDOW_COUNT && w->has_W && time < w->W)
        return DEDUP_OK; /* a query there is LATE: it calls no key DUPLICATE */
    uint64_t n = 0;
    for (size_t i = 0; i < w->gn; i++) {
        const wgen *g = &w->gv[i];
        for (uint64_t j = 0; g->slots && j < g->len; j++) {
            const wentry *e = &g->slots[j];
            if (ent_empty(e))
                continue;
            n += w->p.type == DEDUP_WINDOW_TUMBLING ? fdiv(e->t, w->D) == fdiv(time, w->D)
                                                    : exact_within(w, e, time);
        }
    }
    *out = n;
    return DEDUP_OK;
}

double dedup_window_fpr_now(const dedup_window *w)
{
    if (w->p.mode != DEDUP_WINDOW_APPROX || w->nb == 0)
        return 0.0;
    double load = (double)w->tab_live / ((double)w->nb * SLOTS_PER_BUCKET);
    return 8.0 * load / (double)w->fmask;
}
