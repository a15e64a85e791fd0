/*
 * extsort_scatter.c - the top node's records spilled on two threads.
 *
 * Once the top node has spilled, nearly every record pushed is looked up in
 * the frozen table (its prefilter, mostly) and then appended to one of P
 * partition buffers (up to 256 of 64 KiB at 64 MiB).  The appends are
 * cache misses on the buffers' tails, on the caller's thread alone: 31% of a
 * 5 GiB run's time in one profile.  With params.threads >= 2 (and first-
 * occurrence order) a batch pushed after the spill goes in three passes:
 *   1. on the caller's thread, in input order: sequence numbers, the lookup
 *      (repeats counted, and for DUPLICATES written out, as before), and
 *      for every other record its partition, its sequence delta within the
 *      partition and its encoded size; then each partition the batch's
 *      records would overflow is flushed first, so that its buffer has room
 *      for all of them (a partition whose records would not fit even in an
 *      empty buffer is left to pass 3);
 *   2. the appends, in SC_PIECES groups of partitions (partition number mod
 *      SC_PIECES) claimed one at a time by the caller's thread and a thread
 *      of this file's own: no partition is written by both, and the bytes
 *      of each are those the one-thread loop writes, in the same order;
 *   3. on the caller's thread, the records of the partitions left out of
 *      pass 2, in input order, flushing as they fill.
 * The thread waits on a condition variable between batches (after a short
 * spin: batches come every few hundred microseconds); a group nobody has
 * claimed when the caller's thread has done its own is done by the caller's
 * thread, so a busy machine that does not schedule the thread costs only
 * the hand-off.  The output and the streams' bytes are those of one
 * thread; the frames may be cut at other points, since a partition is
 * flushed before a batch that would overflow it rather than at the record
 * that does.  Memory: SC_CHUNK x 20 bytes plus 5 bytes a partition
 * (~330 KiB), reserved from the top table's share at creation.
 * Measured (1.23 GB of URLs at 64 MiB, perf): pass 2 is ~4% of the run's
 * samples, pass 1 ~14%, most of it waiting on the frozen table's entries
 * for the repeats it does hold.
 */
#define _GNU_SOURCE /* one feature set (POSIX, Linux) for every extsort source */
#include "extsort_internal.h"

#define SC_CHUNK ES_SC_CHUNK
#define SC_PIECES 8   /* groups of partitions claimed one at a time */
#define SC_SPIN 4000  /* polls before sleeping (see HP_SPIN in extsort_threads.c) */

/* A record of the batch that goes to a partition. */
typedef struct miss {
    uint64_t delta;   /* sequence delta within its partition */
    uint32_t i;       /* its index in the batch */
    uint16_t p;       /* its partition */
    uint8_t same;     /* the record is the key (not stored twice) */
    uint8_t serial;   /* left to pass 3 */
} miss;

typedef struct scatter {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool quit;               /* under mu */
    atomic_size_t gen;       /* batches handed over */
    atomic_uint claim;       /* next group of the current batch */
    atomic_uint finished;    /* groups of the current batch done */
    /* the current batch (set before gen moves) */
    const void *const *recs, *const *keys;
    const size_t *lens, *keylens;
    miss *m;
    size_t nm;
    uint32_t *ord;           /* misses of pass 2 by group, in input order within each */
    size_t gstart[SC_PIECES + 1];
    uint32_t *need;          /* per partition: bytes of the batch (pass 1) */
    uint8_t *over;           /* per partition: left to pass 3 */
    dedup_extsort *es;
} scatter;

size_t ddi_es_sc_bytes(void)
{
    return sizeof(scatter) + SC_CHUNK * (sizeof(miss) + sizeof(uint32_t)) +
           256 * (sizeof(uint32_t) + 1); /* P is at most 256 (ddi_es_node_init) */
}

static inline size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* The batch's key and record of index i as push() makes them. */
static inline void sc_item(const scatter *sc, uint32_t i, bool same, item *it)
{
    it->rec = sc->recs[i];
    it->reclen = sc->lens[i];
    if (sc->keys && sc->keys[i]) {
        it->key = sc->keys[i];
        it->keylen = sc->keylens[i];
    } else {
        it->key = it->rec;
        it->keylen = it->reclen;
    }
    if (same)
        it->rec = it->key, it->reclen = it->keylen;
}

/* Pass 2 for group g: its records appended to their buffers, which have room. */
static void sc_group(scatter *sc, unsigned g)
{
    node *n = sc->es->top;
    for (size_t k = sc->gstart[g]; k < sc->gstart[g + 1]; k++) {
        const miss *m = &sc->m[sc->ord[k]];
        part *p = &n->parts[m->p];
        item it;
        sc_item(sc, m->i, m->same, &it);
        uint8_t *o = p->buf + p->len;
        o += put_varint(o, m->delta);
        o += put_varint(o, it.keylen); /* spill streams keep their keys (F_KEY) */
        o += put_varint(o, m->same ? 0 : (uint64_t)it.reclen + 1);
        if (it.keylen)
            memcpy(o, it.key, it.keylen);
        o += it.keylen;
        if (!m->same && it.reclen) {
            memcpy(o, it.rec, it.reclen);
            o += it.reclen;
        }
        p->len = (size_t)(o - p->buf);
    }
}

/* Claims and does groups of the current batch until none is left. */
static void sc_claim_all(scatter *sc)
{
    for (;;) {
        unsigned g = atomic_fetch_add_explicit(&sc->claim, 1u, memory_order_acq_rel);
        if (g >= SC_PIECES)
            return;
        sc_group(sc, g);
        if (atomic_fetch_add_explicit(&sc->finished, 1u, memory_order_acq_rel) + 1 == SC_PIECES) {
            pthread_mutex_lock(&sc->mu);
            pthread_cond_broadcast(&sc->cv);
            pthread_mutex_unlock(&sc->mu);
        }
    }
}

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *sc_main(void *arg)
{
    scatter *sc = arg;
    size_t seen = 0;
    for (;;) {
        int spin = 0;
        while (atomic_load_explicit(&sc->gen, memory_order_acquire) == seen && spin < SC_SPIN) {
            cpu_pause();
            spin++;
        }
        pthread_mutex_lock(&sc->mu);
        while (atomic_load_explicit(&sc->gen, memory_order_acquire) == seen && !sc->quit)
            pthread_cond_wait(&sc->cv, &sc->mu);
        bool stop = sc->quit;
        pthread_mutex_unlock(&sc->mu);
        if (stop)
            return NULL;
        seen = atomic_load_explicit(&sc->gen, memory_order_acquire);
        sc_claim_all(sc);
    }
}

void ddi_es_sc_start(dedup_extsort *es)
{
    if (es->sc || !threaded(es) || es->p.order != DEDUP_EXTSORT_FIRST_OCCURRENCE)
        return;
    scatter *sc = ddi_es_alloc(es, sizeof *sc);
    if (!sc)
        return; /* one thread, as before */
    memset(sc, 0, sizeof *sc);
    sc->es = es;
    uint32_t P = es->top->P;
    sc->m = ddi_es_alloc(es, SC_CHUNK * sizeof(miss));
    sc->ord = ddi_es_alloc(es, SC_CHUNK * sizeof(uint32_t));
    sc->need = ddi_es_alloc(es, P * sizeof(uint32_t));
    sc->over = ddi_es_alloc(es, P);
    atomic_init(&sc->gen, 0);
    atomic_init(&sc->claim, SC_PIECES);
    atomic_init(&sc->finished, SC_PIECES);
    bool ok = sc->m && sc->ord && sc->need && sc->over;
    if (ok && pthread_mutex_init(&sc->mu, NULL) == 0) {
        if (pthread_cond_init(&sc->cv, NULL) == 0) {
            if (pthread_create(&sc->th, NULL, sc_main, sc) == 0) {
                memset(sc->need, 0, P * sizeof(uint32_t));
                memset(sc->over, 0, P);
                es->sc = sc;
                return;
            }
            pthread_cond_destroy(&sc->cv);
        }
        pthread_mutex_destroy(&sc->mu);
    }
    ddi_es_free(es, sc->m, SC_CHUNK * sizeof(miss));
    ddi_es_free(es, sc->ord, SC_CHUNK * sizeof(uint32_t));
    ddi_es_free(es, sc->need, P * sizeof(uint32_t));
    ddi_es_free(es, sc->over, P);
    ddi_es_free(es, sc, sizeof *sc);
}

void ddi_es_sc_stop(dedup_extsort *es)
{
    scatter *sc = es->sc;
    if (!sc)
        return;
    pthread_mutex_lock(&sc->mu);
    sc->quit = true;
    pthread_cond_broadcast(&sc->cv);
    pthread_mutex_unlock(&sc->mu);
    pthread_join(sc->th, NULL);
    pthread_cond_destroy(&sc->cv);
    pthread_mutex_destroy(&sc->mu);
    uint32_t P = es->top ? es->top->P : 256;
    ddi_es_free(es, sc->m, SC_CHUNK * sizeof(miss));
    ddi_es_free(es, sc->ord, SC_CHUNK * sizeof(uint32_t));
    ddi_es_free(es, sc->need, P * sizeof(uint32_t));
    ddi_es_free(es, sc->over, P);
    ddi_es_free(es, sc, sizeof *sc);
    es->sc = NULL;
}

/* Whether every record of the batch takes push()'s ordinary road. */
static bool sc_plain(const dedup_extsort *es, size_t n, const size_t *lens, const void *const *keys,
                     const size_t *keylens)
{
    for (size_t i = 0; i < n; i++) {
        size_t kl = keys && keys[i] ? keylens[i] : lens[i];
        if (lens[i] > MAX_FIELD - 1 || kl > MAX_FIELD - 1 || (es->p.emit_piece && kl > es->giant_min))
            return false;
    }
    return true;
}

/* The three passes for n <= SC_CHUNK records; '*done' false (nothing done)
 * when a record needs push()'s other roads. */
static dedup_status sc_batch(dedup_extsort *es, size_t n, const void *const *recs,
                             const size_t *lens, const void *const *keys, const size_t *keylens,
                             const dedup_digest *digests, bool *done)
{
    scatter *sc = es->sc;
    node *top = es->top;
    const table *t = &top->t;
    *done = false;
    if (!sc_plain(es, n, lens, keys, keylens))
        return DEDUP_OK;
    *done = true;
    sc->recs = recs;
    sc->lens = lens;
    sc->keys = keys;
    sc->keylens = keylens;
    sc->nm = 0;
    dedup_status s = DEDUP_OK;
    /* 1. in input order; prefetches as in dedup_extsort_push_batch */
    enum { FRZ = 32, FAR = 16, NEAR = 8 };
    for (size_t i = 0; i < n && i < FRZ; i++)
        frz_prefetch(top, digests[i]);
    for (size_t i = 0; i < n && i < FAR; i++)
        if (frz_maybe(top, digests[i]))
            DD_PREFETCH(&t->slots[(size_t)digests[i].lo & t->mask]);
    for (size_t i = 0; i < n && s == DEDUP_OK; i++) {
        if (i + FRZ < n)
            frz_prefetch(top, digests[i + FRZ]);
        if (i + FAR < n && frz_maybe(top, digests[i + FAR]))
            DD_PREFETCH(&t->slots[(size_t)digests[i + FAR].lo & t->mask]);
        if (i + NEAR < n && frz_maybe(top, digests[i + NEAR])) {
            const slot *sl = &t->slots[(size_t)digests[i + NEAR].lo & t->mask];
            if (sl->e && sl->tag == digests[i + NEAR].lo)
                DD_PREFETCH(sl->e);
        }
        dedup_digest d = digests[i];
        item it;
        it.seq = es->seq++;
        it.count = 1;
        sc_item(sc, (uint32_t)i, false, &it);
        bool same = it.rec == it.key && it.reclen == it.keylen;
        if (!same && it.reclen == it.keylen && (it.reclen == 0 || memcmp(it.key, it.rec, it.reclen) == 0))
            same = true; /* stored once */
        if (same)
            it.rec = it.key;
        es->st.records_in++;
        if (frz_maybe(top, d)) {
            slot *sl = table_find(t, d, it.key, it.keylen);
            if (sl->e) { /* a repeat */
                if (t->counting)
                    wr64(sl->e + 8, rd64(sl->e + 8) + 1);
                if (es->p.output == DEDUP_EXTSORT_DUPLICATES)
                    s = ddi_es_wr_item(es, &top->direct, &it);
                continue;
            }
        }
        uint32_t pi = node_part(top, d);
        part *p = &top->parts[pi];
        miss *m = &sc->m[sc->nm++];
        m->delta = it.seq - p->prev_seq;
        p->prev_seq = it.seq;
        m->i = (uint32_t)i;
        m->p = (uint16_t)pi;
        m->same = same;
        m->serial = 0;
        size_t sz = varint_len(m->delta) + varint_len(it.keylen) +
                    varint_len(same ? 0 : (uint64_t)it.reclen + 1) + it.keylen +
                    (same ? 0 : it.reclen);
        uint64_t nd = (uint64_t)sc->need[pi] + sz;
        sc->need[pi] = nd > UINT32_MAX ? UINT32_MAX : (uint32_t)nd;
    }
    /* room: flush what would overflow; a batch too big for an empty buffer
     * goes to pass 3 */
    size_t cnt[SC_PIECES] = {0};
    for (size_t k = 0; k < sc->nm && s == DEDUP_OK; k++) {
        miss *m = &sc->m[k];
        part *p = &top->parts[m->p];
        if (sc->need[m->p]) { /* the partition's first record of the batch */
            if (p->len + sc->need[m->p] > top->pbuf && p->len) {
                s = ddi_es_part_flush(es, top, p, p->buf, p->len);
                p->len = 0;
            }
            sc->over[m->p] = sc->need[m->p] > top->pbuf;
            sc->need[m->p] = 0;
        }
        m->serial = sc->over[m->p];
        if (!m->serial)
            cnt[m->p % SC_PIECES]++;
    }
    if (s != DEDUP_OK)
        return s;
    sc->gstart[0] = 0;
    for (unsigned g = 0; g < SC_PIECES; g++)
        sc->gstart[g + 1] = sc->gstart[g] + cnt[g];
    size_t at[SC_PIECES];
    memcpy(at, sc->gstart, sizeof at);
    bool serial = false;
    for (size_t k = 0; k < sc->nm; k++) {
        const miss *m = &sc->m[k];
        if (m->serial)
            serial = true;
        else
            sc->ord[at[m->p % SC_PIECES]++] = (uint32_t)k;
    }
    /* 2. both threads */
    if (sc->gstart[SC_PIECES] > 0) {
        atomic_store_explicit(&sc->finished, 0u, memory_order_relaxed);
        atomic_store_explicit(&sc->claim, 0u, memory_order_release);
        pthread_mutex_lock(&sc->mu);
        atomic_fetch_add_explicit(&sc->gen, 1, memory_order_release);
        pthread_cond_broadcast(&sc->cv);
        pthread_mutex_unlock(&sc->mu);
        sc_claim_all(sc);
        int spin = 0;
        while (atomic_load_explicit(&sc->finished, memory_order_acquire) < SC_PIECES &&
               spin < SC_SPIN) {
            cpu_pause();
            spin++;
        }
        if (atomic_load_explicit(&sc->finished, memory_order_acquire) < SC_PIECES) {
            pthread_mutex_lock(&sc->mu);
            while (atomic_load_explicit(&sc->finished, memory_order_acquire) < SC_PIECES)
                pthread_cond_wait(&sc->cv, &sc->mu);
            pthread_mutex_unlock(&sc->mu);
        }
    }
    /* 3. the partitions too full for pass 2, in input order */
    for (size_t k = 0; serial && k < sc->nm && s == DEDUP_OK; k++) {
        const miss *m = &sc->m[k];
        if (!m->serial)
            continue;
        item it;
        sc_item(sc, m->i, m->same, &it);
        it.seq = 0; /* only the delta is written */
        it.count = 1;
        s = ddi_es_part_item(es, top, &top->parts[m->p], &it, m->delta);
    }
    for (size_t k = 0; serial && k < sc->nm; k++)
        sc->over[sc->m[k].p] = 0;
    return s;
}

dedup_status ddi_es_sc_push(dedup_extsort *es, size_t n, const void *const *recs,
                            const size_t *lens, const void *const *keys, const size_t *keylens,
                            const dedup_digest *digests, bool *done)
{
    dedup_status s = sc_batch(es, n, recs, lens, keys, keylens, digests, done);
    return s != DEDUP_OK ? ddi_es_fail(es, s) : DEDUP_OK;
}
