/*
 * extsort.c - the external engine's object and public API (dedup/extsort.h):
 * create, push (whole or in pieces), finish, free, statistics; and the
 * engine's memory accounting with block reuse, through which every other
 * source allocates.  A record pushed goes to the top node (extsort_node.c) or,
 * in sorted order, to the sorted runs (extsort_merge.c); giants go to
 * extsort_giant.c; finish() ends the top node (extsort_partition.c).  What the
 * sources share, and the vocabulary: extsort_internal.h.
 */
#define _GNU_SOURCE /* one feature set (POSIX, Linux) for every extsort source */
#include "extsort_internal.h"

#include <stdlib.h>
#include <unistd.h>

/* ---- Memory: accounting and block reuse ------------------------------------ */

/* Block reuse.  The engine runs one child node per partition, one after the
 * other, and each builds the same table (slot arrays, arena chunks) and
 * buffers again: sizes repeat exactly.  Large blocks are mapped afresh by
 * malloc (or the caller's allocator) and every page of them faulted in
 * again, which cost more system time than the work itself (about 400,000
 * faults on 1.2 GB of input at 64 MiB).  So a freed block of ES_CACHE_MIN
 * bytes or more is kept (at most ES_CACHE_N of them) and handed out again
 * for a request of the same size.  Kept blocks count in the peak, and an
 * allocation that finds none of its size first releases kept blocks until
 * live + kept + the new block fit the budget: the engine never holds more
 * than it would without reuse, or than the budget. */
/* Removes entry i, keeping the others oldest first. */
static void cache_take(dedup_extsort *es, size_t i)
{
    memmove(&es->cache[i], &es->cache[i + 1], (es->ncache - i - 1) * sizeof es->cache[0]);
    es->ncache--;
}

static void cache_drop(dedup_extsort *es, size_t i)
{
    es->cached -= es->cache[i].n;
    ddi_free(&es->alloc, es->cache[i].p);
    cache_take(es, i);
}

void ddi_es_cache_clear(dedup_extsort *es)
{
    while (es->ncache)
        cache_drop(es, es->ncache - 1);
}

/* Releases kept blocks, least recently freed first, until n more bytes fit
 * the budget beside the live and kept ones. */
static void cache_room(dedup_extsort *es, size_t n)
{
    while (es->ncache && es->mem_cur + es->cached + n > es->budget)
        cache_drop(es, 0);
}

void ddi_es_note_peak(dedup_extsort *es)
{
    size_t held = es->mem_cur + es->cached + es->shadow_held;
    if (held > es->st.peak_memory)
        es->st.peak_memory = held;
}

void *ddi_es_alloc(dedup_extsort *es, size_t n)
{
    if (n >= ES_CACHE_MIN) {
        for (size_t i = es->ncache; i-- > 0;) /* the most recently freed first */
            if (es->cache[i].n == n) {
                void *p = es->cache[i].p;
                es->cached -= n;
                cache_take(es, i);
                es->mem_cur += n;
                return p;
            }
    }
    cache_room(es, n);
    void *p = ddi_malloc(&es->alloc, n);
    if (p) {
        es->mem_cur += n;
        ddi_es_note_peak(es);
    }
    return p;
}

void ddi_es_free(dedup_extsort *es, void *p, size_t n)
{
    if (!p)
        return;
    es->mem_cur -= n;
    if (n >= ES_CACHE_MIN) {
        if (es->ncache == ES_CACHE_N)
            cache_drop(es, 0);
        es->cache[es->ncache++] = (struct cached_blk){p, n};
        es->cached += n;
        return;
    }
    ddi_free(&es->alloc, p);
}

static void *es_realloc(dedup_extsort *es, void *p, size_t old, size_t n)
{
    if (n > old)
        cache_room(es, n - old);
    void *q = ddi_realloc(&es->alloc, p, old, n);
    if (q) {
        es->mem_cur = es->mem_cur - old + n;
        ddi_es_note_peak(es);
    }
    return q;
}

/* Room for element number n of an array of *cap elements of 'elem' bytes:
 * returns the array, doubled (from 'first') when full; NULL if that fails
 * (the old array stays valid). */
void *ddi_es_grow(dedup_extsort *es, void *arr, size_t n, size_t *cap, size_t elem, size_t first)
{
    if (n < *cap)
        return arr;
    size_t nc = *cap ? *cap * 2 : first;
    void *na = es_realloc(es, arr, *cap * elem, nc * elem);
    if (na)
        *cap = nc;
    return na;
}

/* Records 's' as the engine's error unless one is already recorded (errors
 * are sticky: every later call reports the first); returns 's'. */
dedup_status ddi_es_fail(dedup_extsort *es, dedup_status s)
{
    if (es->err == DEDUP_OK)
        es->err = s;
    return s;
}

/* ---- Public API ------------------------------------------------------------- */

void dedup_extsort_params_init(dedup_extsort_params *p)
{
    memset(p, 0, sizeof *p);
    p->memory_limit = DEDUP_EXTSORT_DEFAULT_MEMORY;
    p->order = DEDUP_EXTSORT_FIRST_OCCURRENCE;
    p->output = DEDUP_EXTSORT_FIRST;
    p->seed = DEDUP_DEFAULT_SEED;
    p->threads = 1;
}

dedup_status dedup_extsort_create(const dedup_extsort_params *params, const dedup_allocator *alloc,
                                  dedup_extsort **out)
{
    if (!params || !out || !params->emit || params->memory_limit < DEDUP_EXTSORT_MIN_MEMORY ||
        (unsigned)params->order > DEDUP_EXTSORT_SORTED ||
        (unsigned)params->output > DEDUP_EXTSORT_UNIQUE ||
        (params->order == DEDUP_EXTSORT_SORTED && params->output == DEDUP_EXTSORT_DUPLICATES))
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_extsort *es = ddi_malloc(&a, sizeof *es);
    if (!es)
        return DEDUP_ERR_NOMEM;
    memset(es, 0, sizeof *es);
    es->alloc = a;
    es->p = *params;
    es->budget = params->memory_limit > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)params->memory_limit;
    es->frame = clampz(es->budget / 1024, 2048, 64 << 10);
    es->zcap = FH + (size_t)LZ4_COMPRESSBOUND(es->frame);
    es->zstate_n = (size_t)LZ4_sizeofState();
    /* Giants: longer than budget/16, at most 1 MiB (the staging buffer is
     * taken out of the table's share), at least two frames. */
    es->giant_min = clampz(es->budget / 16, 2 * es->frame, (size_t)1 << 20);
    es->hb_frames = ddi_es_hb_frames_for(es);
    if (pthread_mutex_init(&es->wlock, NULL) == 0)
        es->wl = &es->wlock;
    else
        es->hb_frames = 0; /* no second thread without it */
    es->gf.fd = -1;
    for (int i = 0; i <= DEDUP_EXTSORT_MAX_DEPTH; i++)
        es->sp[i].fd = es->rs[i].fd = -1;
    const char *dir = params->tmpdir;
    if (!dir || !*dir) {
        dir = getenv("TMPDIR");
        if (!dir || !*dir)
            dir = "/tmp";
    }
    size_t dl = strlen(dir) + 1;
    es->tmpdir = ddi_es_alloc(es, dl);
    if (es->tmpdir) /* before anything can fail: free() takes its strlen */
        memcpy(es->tmpdir, dir, dl);
    es->top = ddi_es_alloc(es, sizeof(node));
    if (es->top)
        memset(es->top, 0, sizeof(node));
    if (!es->tmpdir || !es->top) {
        dedup_extsort_free(es);
        return DEDUP_ERR_NOMEM;
    }
    es->p.tmpdir = es->tmpdir;
    if (ddi_es_node_init(es, es->top, 0, NULL) != DEDUP_OK) {
        dedup_extsort_free(es);
        return DEDUP_ERR_NOMEM;
    }
    *out = es;
    return DEDUP_OK;
}

void dedup_extsort_free(dedup_extsort *es)
{
    if (!es)
        return;
    ddi_es_sc_stop(es);
    ddi_es_hp_stop(es); /* drops whatever is still queued */
    if (es->top) {
        ddi_es_node_free(es, es->top);
        ddi_es_free(es, es->top, sizeof(node));
    }
    for (int i = 0; i <= DEDUP_EXTSORT_MAX_DEPTH; i++) {
        if (es->sp[i].fd >= 0)
            close(es->sp[i].fd);
        if (es->rs[i].fd >= 0)
            close(es->rs[i].fd);
    }
    if (es->tmpdir)
        ddi_es_free(es, es->tmpdir, strlen(es->tmpdir) + 1);
    ddi_es_free(es, es->runs, es->capruns * sizeof(blk));
    ddi_es_free(es, es->zbuf, es->zcap);
    ddi_es_free(es, es->zstate, es->zstate_n);
    if (es->gf.fd >= 0)
        close(es->gf.fd);
    ddi_es_free(es, es->g, es->capg * sizeof(giant));
    ddi_es_free(es, es->gord, es->gordcap * sizeof(size_t));
    ddi_es_free(es, es->gbuf, es->giant_min);
    ddi_es_free(es, es->xsmem, sizeof(XXH3_state_t) + 64);
    ddi_es_cache_clear(es);
    if (es->wl == &es->wlock)
        pthread_mutex_destroy(&es->wlock);
    dedup_allocator a = es->alloc;
    ddi_free(&a, es);
}

dedup_status dedup_extsort_push(dedup_extsort *es, const void *rec, size_t len, const void *key,
                                size_t keylen, dedup_digest digest)
{
    if (es->err != DEDUP_OK)
        return es->err;
    if (es->finished || es->in_piece)
        return DEDUP_ERR_INVALID_ARG;
    if (!key) {
        key = rec;
        keylen = len;
    }
    if (es->p.emit_piece && keylen > es->giant_min) {
        if (len != keylen || (key != rec && memcmp(key, rec, len) != 0))
            return ddi_es_fail(es, DEDUP_ERR_LIMIT); /* a giant key must be its record */
        return ddi_es_giant_push_whole(es, rec, len, digest);
    }
    if (len > MAX_FIELD - 1 || keylen > MAX_FIELD - 1)
        return ddi_es_fail(es, DEDUP_ERR_LIMIT);
    item it;
    it.seq = es->seq++;
    it.count = 1;
    it.key = key;
    it.keylen = keylen;
    it.rec = rec;
    it.reclen = len;
    if (key != rec && len == keylen && (len == 0 || memcmp(key, rec, len) == 0))
        it.rec = it.key; /* stored once */
    es->st.records_in++;
    if (es->p.order == DEDUP_EXTSORT_SORTED)
        return ddi_es_runs_add(es, &it, digest);
    return ddi_es_node_add(es, es->top, &it, digest);
}

/* push_batch() one record at a time. */
static dedup_status push_each(dedup_extsort *es, size_t n, const void *const *recs,
                              const size_t *lens, const void *const *keys, const size_t *keylens,
                              const dedup_digest *digests)
{
    /* Three-stage software prefetch: the prefilter word 32 records ahead,
     * the slot 16 ahead (only for digests the prefilter lets through, once
     * spilled), the entry its tag points at 8 ahead, so the cache misses
     * overlap; for the others, the tail of the partition buffer.  The
     * prefilter (1/64 of the table's share: ~780 KiB at 64 MiB) does not
     * stay in the cache beside the partition buffers: read unfetched, its
     * word was 73% of this loop's time and 10% of a 5 GiB run's CPU. */
    enum { FRZ = 32, FAR = 16, NEAR = 8 };
    const node *top = es->top;
    const table *t = &top->t;
    dedup_status st = DEDUP_OK;
    for (size_t i = 0; i < n && i < FRZ; i++)
        frz_prefetch(top, digests[i]);
    for (size_t i = 0; i < n && i < FAR; i++)
        if (t->slots && frz_maybe(top, digests[i]))
            DD_PREFETCH(&t->slots[(size_t)digests[i].lo & t->mask]);
    for (size_t i = 0; i < n && st == DEDUP_OK; i++) {
        if (t->slots) {
            if (i + FRZ < n)
                frz_prefetch(top, digests[i + FRZ]);
            if (i + FAR < n && frz_maybe(top, digests[i + FAR]))
                DD_PREFETCH(&t->slots[(size_t)digests[i + FAR].lo & t->mask]);
            if (i + NEAR < n) {
                dedup_digest d = digests[i + NEAR];
                const slot *sl = frz_maybe(top, d) ? &t->slots[(size_t)d.lo & t->mask] : NULL;
                if (sl && sl->e && sl->tag == d.lo)
                    DD_PREFETCH(sl->e);
                else if (top->spilled) /* the tail of its partition buffer */
                {
                    const part *p = &top->parts[dedup_reduce(d.hi, top->P)];
                    DD_PREFETCH_W(p->buf + p->len);
                }
            }
        }
        st = dedup_extsort_push(es, recs[i], lens[i], keys ? keys[i] : NULL, keys ? keylens[i] : 0,
                                digests[i]);
    }
    return st;
}

dedup_status dedup_extsort_push_batch(dedup_extsort *es, size_t n, const void *const *recs,
                                      const size_t *lens, const void *const *keys,
                                      const size_t *keylens, const dedup_digest *digests)
{
    dedup_status st = DEDUP_OK;
    for (size_t off = 0; off < n && st == DEDUP_OK;) {
        size_t c = n - off < ES_SC_CHUNK ? n - off : ES_SC_CHUNK;
        const void *const *k = keys ? keys + off : NULL;
        const size_t *kl = keys ? keylens + off : NULL;
        bool done = false;
        /* once the top node has spilled: on two threads (extsort_scatter.c) */
        if (es->sc && es->top->spilled && es->err == DEDUP_OK && !es->finished && !es->in_piece)
            st = ddi_es_sc_push(es, c, recs + off, lens + off, k, kl, digests + off, &done);
        if (st == DEDUP_OK && !done)
            st = push_each(es, c, recs + off, lens + off, k, kl, digests + off);
        off += c;
    }
    return st;
}

dedup_status dedup_extsort_finish(dedup_extsort *es)
{
    if (es->err != DEDUP_OK)
        return es->err;
    if (es->finished || es->in_piece)
        return DEDUP_ERR_INVALID_ARG;
    es->finished = true;
    ddi_es_sc_stop(es); /* no more pushes */
    dedup_status s = DEDUP_OK;
    if (es->ng && es->p.order == DEDUP_EXTSORT_SORTED)
        s = ddi_es_giants_sort(es);
    if (s == DEDUP_OK)
        s = es->nruns ? ddi_es_runs_finish(es) : ddi_es_node_finish(es, es->top);
    if (s == DEDUP_OK && es->ng)
        s = ddi_es_giants_before(es, NULL);
    ddi_es_tf_reset(es, &es->gf);
    ddi_es_node_free(es, es->top);
    for (int i = 0; i <= DEDUP_EXTSORT_MAX_DEPTH; i++) {
        ddi_es_tf_reset(es, &es->sp[i]);
        ddi_es_tf_reset(es, &es->rs[i]);
    }
    return s != DEDUP_OK ? ddi_es_fail(es, s) : DEDUP_OK;
}

dedup_status dedup_extsort_push_begin(dedup_extsort *es)
{
    if (es->err != DEDUP_OK)
        return es->err;
    if (es->finished || es->in_piece || !es->p.emit_piece)
        return DEDUP_ERR_INVALID_ARG;
    dedup_status s = ddi_es_giant_buffers(es);
    if (s != DEDUP_OK)
        return s;
    XXH3_128bits_reset_withSeed(ddi_es_xstate(es), es->p.seed);
    es->in_piece = true;
    es->piece_giant = false;
    es->plen = 0;
    es->ptotal = 0;
    return DEDUP_OK;
}

dedup_status dedup_extsort_push_part(dedup_extsort *es, const void *data, size_t len)
{
    if (es->err != DEDUP_OK)
        return es->err;
    if (!es->in_piece)
        return DEDUP_ERR_INVALID_ARG;
    if (len == 0)
        return DEDUP_OK;
    XXH3_128bits_update(ddi_es_xstate(es), data, len);
    es->ptotal += len;
    const uint8_t *q = data;
    dedup_status s;
    while (len > 0) {
        if (len <= es->giant_min - es->plen) {
            memcpy(es->gbuf + es->plen, q, len);
            es->plen += len;
            return DEDUP_OK;
        }
        /* longer than giant_min: a giant, whose bytes go to GF */
        if (!es->piece_giant) {
            if ((s = ddi_es_tf_open(es, &es->gf)) != DEDUP_OK)
                return s;
            es->piece_giant = true;
            es->poff = es->gf.size;
        }
        if (es->plen) {
            if ((s = ddi_es_tf_write(es, &es->gf, es->gbuf, es->plen)) != DEDUP_OK)
                return s;
            es->plen = 0;
        }
        if (len >= es->giant_min)
            return ddi_es_tf_write(es, &es->gf, q, len);
    }
    return DEDUP_OK;
}

dedup_status dedup_extsort_push_end(dedup_extsort *es)
{
    if (es->err != DEDUP_OK)
        return es->err;
    if (!es->in_piece)
        return DEDUP_ERR_INVALID_ARG;
    XXH128_hash_t h = XXH3_128bits_digest(ddi_es_xstate(es));
    dedup_digest d = {h.low64, h.high64};
    es->in_piece = false;
    if (!es->piece_giant) /* it fitted: an ordinary record */
        return dedup_extsort_push(es, es->gbuf, es->plen, NULL, 0, d);
    dedup_status s = DEDUP_OK;
    if (es->plen)
        s = ddi_es_tf_write(es, &es->gf, es->gbuf, es->plen);
    es->plen = 0;
    return s == DEDUP_OK ? ddi_es_giant_add(es, es->poff, es->ptotal, d) : s;
}

size_t dedup_extsort_giant_min(const dedup_extsort *es) { return es->giant_min; }

bool dedup_extsort_io_error(const dedup_extsort *es, int *err, const char **dir,
                            uint64_t *bytes_needed)
{
    if (es->err != DEDUP_ERR_IO)
        return false;
    if (err)
        *err = es->io_errno;
    if (dir)
        *dir = es->tmpdir;
    if (bytes_needed)
        *bytes_needed = es->io_needed;
    return true;
}

int dedup_extsort_emit_result(const dedup_extsort *es) { return es->emit_rc; }

void dedup_extsort_set_tmp_in_memory(dedup_extsort *es, bool in_memory)
{
    es->p.tmp_in_memory = in_memory;
}

void dedup_extsort_stats_get(const dedup_extsort *es, dedup_extsort_stats *out) { *out = es->st; }

size_t dedup_extsort_memory_usage(const dedup_extsort *es)
{
    return es->mem_cur + es->cached + sizeof *es;
}
