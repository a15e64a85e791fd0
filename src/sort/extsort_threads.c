/*
 * extsort_threads.c - the external engine's two helper threads, both
 * used with params.threads >= 2: the compressing thread, which packs and
 * writes the frames of partitions and result streams while the engine's
 * thread goes on, and the decode-ahead thread of the final merge, which
 * keeps each reader's next frame decoded.  Their callers are the writers
 * and readers (extsort_stream.c), the partitions (extsort_node.c) and the
 * merges (extsort_merge.c); files are written through extsort_tmp.c.
 */
#define _GNU_SOURCE /* one feature set (POSIX, Linux) for every extsort source */
#include "extsort_internal.h"

#include <signal.h>

/* ---- The compressing thread -------------------------------------------------
 * With params.threads >= 2, a second thread compresses and writes the frames
 * of the two streams that carry nearly all the bytes: the partitions (spill)
 * and the buffered writers (per-partition results, sorted runs).  The engine's
 * thread fills a batch of up to F frames (pointers to raw bytes it leaves
 * untouched) and hands it over; the thread packs each frame into its own
 * slot of the batch's output area and appends them all to the file with one
 * writev.  Up to HB_QUEUE batches are in flight, numbered; the thread does
 * them in order.  The engine's thread takes their results (hp_reap) in the
 * same order: the file's size, each partition's extents, the statistics, and
 * any write error, reported by the call that reaps.  Packing is shared: a
 * frame is claimed by whichever thread takes the batch's next index first,
 * and the engine's thread, rather than wait for a batch (a full queue, or a
 * sync), packs the unclaimed frames of the batches in flight itself; the
 * thread writes a batch once all its frames are packed.  Packing is most of
 * the thread's work, and without this the engine's thread spent about a
 * third of the spill waiting for it.  A full partition buffer is swapped
 * for a spare one from a pool and returns to the pool when reaped; a writer
 * has two buffers and alternates, reusing one once its batches are reaped.
 * Everything else (giants, reading, truncating) first waits until nothing is
 * queued (ddi_es_hp_sync), so the files are exactly as the single-threaded engine
 * leaves them, byte for byte.
 * Memory: with F frames per batch, HB_QUEUE * F spare partition buffers,
 * HB_QUEUE output areas of F packed frames and one LZ4 state, plus a second
 * buffer per writer; all taken out of the table's share.  F is 8 while that
 * stays within 1/16 of the budget (~3.1 MiB at 64 MiB), else 4 or 2; budgets
 * too small even for 2 (under ~860 KiB) get no thread. */

#define HB_FRAMES 8

typedef struct hframe {
    const uint8_t *raw;
    size_t rawlen, dlen;   /* dlen: the packed frame's length, set by whoever packs it */
    struct part *p;        /* the extent belongs to this partition, or NULL */
    uint8_t *recycle;      /* a spare buffer to return to the pool once written */
    uint64_t off;          /* a partition's frame: where the thread placed it */
} hframe;

typedef struct hbatch {
    tfile *f;
    int fd;
    size_t n;
    atomic_size_t claim;   /* next frame to pack (may run past n) */
    atomic_size_t npacked; /* frames packed */
    hframe fr[HB_FRAMES];
    uint8_t *out;          /* es->hb_frames slots of es->zcap bytes, one per frame */
    uint64_t written;      /* bytes the write accepted */
    int err;               /* errno of a failed write (ENOSPC for a zero write) */
} hbatch;

/* Batches in the queue: one being filled, the others with the thread or
 * waiting to be reaped. */
#define HB_QUEUE 3

typedef struct helper {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_size_t nsub;    /* batches handed to the thread (written by the engine's thread) */
    atomic_size_t ndone;   /* batches the thread has finished (written by the thread) */
    bool quit;             /* under mu: stop */
    size_t sub, reaped;    /* the engine's thread's counts: handed over, results taken */
    hbatch b[HB_QUEUE];    /* batch number i lives in b[i % HB_QUEUE] */
    hbatch *cur;           /* b[sub % HB_QUEUE], being filled */
    void *zstate;
    uint8_t **pool;        /* spare partition buffers of pbuf bytes */
    size_t npool, pbuf;
} helper;

/* What the thread's buffers take with batches of 'frames' frames. */
static size_t helper_cost(const dedup_extsort *es, size_t frames)
{
    return HB_QUEUE * frames * (pbuf_size(es) + sizeof(uint8_t *) + es->zcap) + es->zstate_n +
           sizeof(helper);
}

/* Frames per batch: as many as HB_FRAMES while the thread's buffers take at
 * most 1/16 of the budget; below 2 (budgets under ~860 KiB) no thread. */
size_t ddi_es_hb_frames_for(const dedup_extsort *es)
{
    if (es->p.threads < 2)
        return 0;
    for (size_t f = HB_FRAMES; f >= 2; f /= 2)
        if (helper_cost(es, f) <= es->budget / 16)
            return f;
    return 0;
}

/* What the thread's buffers take of the budget (reserved from the start). */
size_t ddi_es_helper_bytes(const dedup_extsort *es)
{
    return threaded(es) ? helper_cost(es, es->hb_frames) : 0;
}

/* Hand-offs come every few hundred microseconds, and on a virtual machine
 * waking a thread that went to sleep (and its idle CPU) costs tens of them:
 * each side first polls for up to HP_SPIN rounds of a pause instruction. */
#define HP_SPIN 4000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Polls until *c != v, then returns true; false if the spin ends first. */
static bool hp_poll(atomic_size_t *c, size_t v)
{
    for (int i = 0; i < HP_SPIN; i++) {
        if (atomic_load_explicit(c, memory_order_acquire) != v)
            return true;
        cpu_relax();
    }
    return false;
}

/* Claims the batch's next frame and packs it with LZ4 state 'z' (either
 * thread); false when every frame is claimed. */
static bool hb_pack_one(const dedup_extsort *es, void *z, hbatch *b)
{
    size_t i = atomic_fetch_add_explicit(&b->claim, 1, memory_order_relaxed);
    if (i >= b->n)
        return false;
    hframe *fr = &b->fr[i];
    fr->dlen = ddi_es_frame_pack(es->p.raw_frames ? NULL : z, fr->raw, fr->rawlen,
                                 b->out + i * es->zcap, es->zcap);
    atomic_fetch_add_explicit(&b->npacked, 1, memory_order_release);
    return true;
}

static void hb_reset(hbatch *b)
{
    b->n = 0;
    atomic_store_explicit(&b->claim, 0, memory_order_relaxed);
    atomic_store_explicit(&b->npacked, 0, memory_order_relaxed);
}

/* Whether the batch's frames are a node's partitions' (all or none are: a
 * batch holds one file's frames), placed in regions rather than appended. */
static bool hb_placed(const hbatch *b) { return b->n > 0 && b->fr[0].p; }

/* Writes the batch's packed frames (each in its slot) to its file: appended,
 * or, when placed, each at its place in its partition's region, adjacent
 * ones in one call. */
static int hb_write(const dedup_extsort *es, hbatch *b)
{
    struct iovec iov[HB_FRAMES];
    if (!hb_placed(b)) {
        for (size_t i = 0; i < b->n; i++)
            iov[i] = (struct iovec){b->out + i * es->zcap, b->fr[i].dlen};
        return ddi_es_write_iov(es, b->fd, iov, b->n, AT_END, &b->written);
    }
    for (size_t i = 0; i < b->n; i++)
        b->fr[i].off = ddi_es_part_place(es, b->f, b->fr[i].p, b->fr[i].dlen);
    b->written = 0;
    for (size_t i = 0; i < b->n;) {
        size_t m = 0;
        uint64_t at = b->fr[i].off, end = at, done;
        for (; i < b->n && b->fr[i].off == end; i++) {
            iov[m++] = (struct iovec){b->out + i * es->zcap, b->fr[i].dlen};
            end += b->fr[i].dlen;
        }
        int e = ddi_es_write_iov(es, b->fd, iov, m, at, &done);
        b->written += done;
        if (e)
            return e;
    }
    return 0;
}

/* On the thread: packs the frames nobody has claimed, waits for the ones the
 * engine's thread is packing (a frame's work, never a block), and writes. */
static void hb_run(const dedup_extsort *es, helper *h, hbatch *b)
{
    while (hb_pack_one(es, h->zstate, b))
        ;
    while (atomic_load_explicit(&b->npacked, memory_order_acquire) < b->n)
        cpu_relax();
    b->err = hb_write(es, b);
}

static void *helper_main(void *arg)
{
    dedup_extsort *es = arg;
    helper *h = es->hp;
    size_t done = 0;
    for (;;) {
        if (!hp_poll(&h->nsub, done)) {
            pthread_mutex_lock(&h->mu);
            while (atomic_load(&h->nsub) == done && !h->quit)
                pthread_cond_wait(&h->cv, &h->mu);
            bool stop = atomic_load(&h->nsub) == done;
            pthread_mutex_unlock(&h->mu);
            if (stop)
                break;
        }
        hb_run(es, h, &h->b[done % HB_QUEUE]);
        done++;
        pthread_mutex_lock(&h->mu);
        atomic_store_explicit(&h->ndone, done, memory_order_release);
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

static void hp_free_bufs(dedup_extsort *es, helper *h)
{
    for (size_t i = 0; i < h->npool; i++)
        ddi_es_free(es, h->pool[i], h->pbuf);
    ddi_es_free(es, h->pool, HB_QUEUE * es->hb_frames * sizeof(uint8_t *));
    for (int i = 0; i < HB_QUEUE; i++)
        ddi_es_free(es, h->b[i].out, es->hb_frames * es->zcap);
    ddi_es_free(es, h->zstate, es->zstate_n);
}

/* Starts the thread at the first spill.  If anything fails the engine simply
 * goes on without it. */
void ddi_es_hp_start(dedup_extsort *es)
{
    if (es->hp || !threaded(es))
        return;
    helper *h = ddi_es_alloc(es, sizeof *h);
    if (!h) {
        es->hb_frames = 0;
        return;
    }
    memset(h, 0, sizeof *h);
    atomic_init(&h->nsub, 0);
    atomic_init(&h->ndone, 0);
    for (int i = 0; i < HB_QUEUE; i++) {
        atomic_init(&h->b[i].claim, 0);
        atomic_init(&h->b[i].npacked, 0);
    }
    h->pbuf = pbuf_size(es);
    bool ok = (h->zstate = ddi_es_alloc(es, es->zstate_n)) != NULL &&
              (h->pool = ddi_es_alloc(es, HB_QUEUE * es->hb_frames * sizeof(uint8_t *))) != NULL;
    for (int i = 0; ok && i < HB_QUEUE; i++)
        ok = (h->b[i].out = ddi_es_alloc(es, es->hb_frames * es->zcap)) != NULL;
    while (ok && h->npool < HB_QUEUE * es->hb_frames) {
        uint8_t *b = ddi_es_alloc(es, h->pbuf);
        if (!(ok = b != NULL))
            break;
        h->pool[h->npool++] = b;
    }
    h->cur = &h->b[0];
    if (ok && pthread_mutex_init(&h->mu, NULL) == 0) {
        if (pthread_cond_init(&h->cv, NULL) == 0) {
            es->hp = h;
            if (pthread_create(&h->th, NULL, helper_main, es) == 0)
                return;
            es->hp = NULL;
            pthread_cond_destroy(&h->cv);
        }
        pthread_mutex_destroy(&h->mu);
    }
    hp_free_bufs(es, h);
    ddi_es_free(es, h, sizeof *h);
    es->hb_frames = 0; /* from here on, one thread */
}

/* The thread has not finished the oldest batch not reaped yet. */
static bool hp_oldest_busy(helper *h)
{
    return atomic_load_explicit(&h->ndone, memory_order_acquire) == h->reaped;
}

/* Takes the results of the oldest batch not reaped yet (there must be one),
 * waiting for the thread to finish it. */
static dedup_status hp_reap(dedup_extsort *es)
{
    helper *h = es->hp;
    /* Rather than wait, pack what nobody has claimed yet, oldest batch first. */
    for (size_t i = h->reaped; i < h->sub && hp_oldest_busy(h); i++)
        while (hp_oldest_busy(h) && hb_pack_one(es, es->zstate, &h->b[i % HB_QUEUE]))
            ;
    if (hp_oldest_busy(h) && !hp_poll(&h->ndone, h->reaped)) {
        pthread_mutex_lock(&h->mu);
        while (atomic_load(&h->ndone) == h->reaped)
            pthread_cond_wait(&h->cv, &h->mu);
        pthread_mutex_unlock(&h->mu);
    }
    hbatch *b = &h->b[h->reaped++ % HB_QUEUE];
    dedup_status s = DEDUP_OK;
    bool placed = hb_placed(b); /* else appended: the file's size moves */
    uint64_t total = 0;
    for (size_t i = 0; i < b->n; i++) {
        hframe *fr = &b->fr[i];
        if (!b->err && fr->p && s == DEDUP_OK)
            s = ddi_es_part_extent(es, fr->p, fr->off, fr->dlen, fr->rawlen);
        total += fr->dlen;
        es->st.bytes_spilled_raw += fr->rawlen;
        if (fr->recycle)
            h->pool[h->npool++] = fr->recycle;
    }
    hb_reset(b);
    if (!placed)
        b->f->size += b->written;
    es->st.bytes_spilled += b->written;
    if (b->err) {
        es->io_errno = b->err;
        es->io_needed = es->st.bytes_spilled + (total - b->written);
        return ddi_es_fail(es, DEDUP_ERR_IO);
    }
    return s;
}

/* Reaps every batch numbered below 'upto', waiting as needed. */
dedup_status ddi_es_hp_reap_upto(dedup_extsort *es, size_t upto)
{
    dedup_status s = DEDUP_OK;
    while (es->hp->reaped < upto) {
        dedup_status r = hp_reap(es);
        if (s == DEDUP_OK)
            s = r;
    }
    return s;
}

/* Drops the frames of the batch being filled (after an error). */
static void hp_discard(helper *h)
{
    for (size_t i = 0; i < h->cur->n; i++)
        if (h->cur->fr[i].recycle)
            h->pool[h->npool++] = h->cur->fr[i].recycle;
    hb_reset(h->cur);
}

/* Hands the batch being filled to the thread, reaping finished batches on
 * the way.  When this fills the queue, this thread packs the batch's frames
 * itself while the oldest is still being worked on (rather than wait), then
 * waits for the oldest, whose slot the next batch takes. */
dedup_status ddi_es_hp_submit(dedup_extsort *es)
{
    helper *h = es->hp;
    if (!h || h->cur->n == 0)
        return DEDUP_OK;
    if (es->err != DEDUP_OK) { /* the engine has failed: nothing more is written */
        hp_discard(h);
        return es->err;
    }
    dedup_status s = DEDUP_OK;
    while (s == DEDUP_OK && h->reaped < h->sub && !hp_oldest_busy(h))
        s = hp_reap(es);
    if (s != DEDUP_OK) {
        hp_discard(h);
        return s;
    }
    if (h->sub - h->reaped == HB_QUEUE - 1)
        while (hp_oldest_busy(h) && hb_pack_one(es, es->zstate, h->cur))
            ;
    h->cur->fd = h->cur->f->fd;
    h->sub++;
    pthread_mutex_lock(&h->mu);
    atomic_store_explicit(&h->nsub, h->sub, memory_order_release);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    h->cur = &h->b[h->sub % HB_QUEUE];
    if (h->sub - h->reaped == HB_QUEUE) /* the next slot is the oldest batch's */
        s = hp_reap(es);
    return s;
}

/* The number of batches handed to the thread so far: a batch's number is
 * the count before it was handed over. */
size_t ddi_es_hp_submitted(const dedup_extsort *es) { return es->hp->sub; }

/* Waits until every queued frame is written and accounted for. */
dedup_status ddi_es_hp_sync(dedup_extsort *es)
{
    if (!es->hp)
        return DEDUP_OK;
    dedup_status s = ddi_es_hp_submit(es);
    dedup_status r = ddi_es_hp_reap_upto(es, es->hp->sub);
    return s != DEDUP_OK ? s : r;
}

/* Queues 'len' bytes at 'raw' for 'f' (open), as frames; 'p' gets their
 * extents, 'recycle' returns to the pool after the last one.  The bytes must
 * stay untouched until reaped. */
dedup_status ddi_es_hp_add(dedup_extsort *es, tfile *f, const uint8_t *raw, size_t len,
                          struct part *p, uint8_t *recycle)
{
    helper *h = es->hp;
    dedup_status s = DEDUP_OK;
    if (h->cur->n && h->cur->f != f)
        s = ddi_es_hp_submit(es);
    while (s == DEDUP_OK && len > 0) {
        if (h->cur->n == es->hb_frames && (s = ddi_es_hp_submit(es)) != DEDUP_OK)
            break;
        size_t raw_n = len < es->frame ? len : es->frame;
        hframe *fr = &h->cur->fr[h->cur->n++];
        h->cur->f = f;
        *fr = (hframe){raw, raw_n, 0, p, raw_n == len ? recycle : NULL, 0};
        raw += raw_n;
        len -= raw_n;
    }
    if (s != DEDUP_OK && recycle && len > 0) /* its last frame was not queued */
        h->pool[h->npool++] = recycle;
    return s;
}

/* Takes a spare partition buffer. */
uint8_t *ddi_es_hp_spare(dedup_extsort *es, dedup_status *s)
{
    helper *h = es->hp;
    if (h->npool == 0 && (*s = ddi_es_hp_sync(es)) != DEDUP_OK)
        return NULL;
    *s = DEDUP_OK;
    return h->npool ? h->pool[--h->npool] : NULL;
}

/* Stops the thread (dropping whatever is queued) and frees its buffers. */
void ddi_es_hp_stop(dedup_extsort *es)
{
    helper *h = es->hp;
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    while (atomic_load(&h->ndone) != h->sub)
        pthread_cond_wait(&h->cv, &h->mu);
    h->quit = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    for (int i = 0; i < HB_QUEUE; i++) {
        for (size_t j = 0; j < h->b[i].n; j++)
            if (h->b[i].fr[j].recycle)
                h->pool[h->npool++] = h->b[i].fr[j].recycle;
        hb_reset(&h->b[i]);
    }
    es->hp = NULL;
    hp_free_bufs(es, h);
    ddi_es_free(es, h, sizeof *h);
}

/* ---- Decode-ahead for the final merge --------------------------------------
 * The final merge runs on the engine's thread while the second core has
 * nothing to do, and about a third of its time went to reading (pread(2)
 * copying out of the page cache) and LZ4-decoding the readers' frames.  With
 * params.threads >= 2 a decoding thread keeps, for each reader, its next
 * frame decoded in a slot of its own (one frame: the merge takes a reader's
 * frames one of about every k at a time, so one is far enough ahead), and
 * the merge copies it in.  A slot's state says who may touch the reader's
 * cursor: EMPTY (no frame ready; either thread may claim it), BUSY (claimed:
 * the claimer decodes), READY (a frame waits), END, ERR (the decoding
 * thread's read failed; the merge reports it).  When the merge finds a slot
 * EMPTY it claims it and decodes the frame itself rather than wait, so the
 * thread only ever takes work off the merge.  Cost: one frame per reader and
 * the thread's LZ4 scratch, out of the readers' share of the budget. */

typedef struct decoder {
    const dedup_extsort *es;
    reader *src;
    size_t k;
    ahead *slot;       /* k slots */
    uint8_t *zbuf;     /* the thread's LZ4 scratch */
    uint64_t nread;    /* bytes the thread read (statistics) */
    atomic_bool stop;
    atomic_bool sleeping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
} decoder;

/* Decodes the frame of a claimed (BUSY) slot and publishes the result. */
static void ra_decode(decoder *d, reader *r)
{
    ahead *a = r->ra;
    size_t got = 0;
    int eno = 0;
    dedup_status s = ddi_es_rd_frame(d->es, r, d->zbuf, a->buf, &got, &d->nread, &eno);
    int to = RA_READY;
    if (s != DEDUP_OK) {
        a->err = s;
        a->eno = eno;
        to = RA_ERR;
    } else if (got == 0) {
        to = RA_END;
    }
    a->len = got;
    atomic_store_explicit(&a->state, to, memory_order_release);
}

static bool ra_claim(ahead *a)
{
    int e = RA_EMPTY;
    return atomic_load_explicit(&a->state, memory_order_relaxed) == RA_EMPTY &&
           atomic_compare_exchange_strong_explicit(&a->state, &e, RA_BUSY, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void *decoder_main(void *arg)
{
    decoder *d = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    int idle = 0;
    while (!atomic_load_explicit(&d->stop, memory_order_acquire)) {
        bool did = false;
        for (size_t i = 0; i < d->k; i++) {
            if (ra_claim(&d->slot[i])) {
                ra_decode(d, &d->src[i]);
                did = true;
            }
        }
        if (did) {
            idle = 0;
            continue;
        }
        if (++idle < 64) { /* every frame is ready: poll a while, then sleep */
            for (int j = 0; j < 64; j++)
                cpu_relax();
            continue;
        }
        pthread_mutex_lock(&d->mu);
        atomic_store(&d->sleeping, true);
        bool empty = false; /* look again now that the merge will wake us */
        for (size_t i = 0; i < d->k && !empty; i++)
            empty = atomic_load(&d->slot[i].state) == RA_EMPTY;
        if (!empty && !atomic_load(&d->stop))
            pthread_cond_wait(&d->cv, &d->mu);
        atomic_store(&d->sleeping, false);
        pthread_mutex_unlock(&d->mu);
        idle = 0;
    }
    return NULL;
}

static void dec_wake(decoder *d)
{
    if (atomic_load(&d->sleeping)) {
        pthread_mutex_lock(&d->mu);
        pthread_cond_signal(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
}

/* ddi_es_rd_fill's frame source with decode-ahead: the slot's frame if ready, else
 * the next frame decoded here (waiting only while the thread is at it). */
dedup_status ddi_es_ra_take(dedup_extsort *es, reader *r, uint8_t *dst, size_t *got)
{
    ahead *a = r->ra;
    for (;;) {
        switch (atomic_load_explicit(&a->state, memory_order_acquire)) {
        case RA_READY:
            memcpy(dst, a->buf, a->len);
            *got = a->len;
            atomic_store(&a->state, RA_EMPTY); /* seq_cst: ordered before dec_wake's look */
            dec_wake(es->dec);
            return DEDUP_OK;
        case RA_END:
            *got = 0;
            return DEDUP_OK;
        case RA_ERR:
            return ddi_es_read_failed(es, a->err, a->eno);
        case RA_EMPTY:
            if (ra_claim(a)) {
                int eno = 0;
                dedup_status s =
                    ddi_es_rd_frame(es, r, es->zbuf, dst, got, &es->st.bytes_read_back, &eno);
                if (s != DEDUP_OK) {
                    a->err = s;
                    a->eno = eno;
                    atomic_store_explicit(&a->state, RA_ERR, memory_order_release);
                    return ddi_es_read_failed(es, s, eno);
                }
                atomic_store(&a->state, *got ? RA_EMPTY : RA_END);
                if (*got)
                    dec_wake(es->dec);
                return DEDUP_OK;
            }
            break;
        default: /* BUSY: the thread is decoding it */
            cpu_relax();
            break;
        }
    }
}

/* What decode-ahead takes of the budget for a merge of k readers. */
static size_t dec_bytes(const dedup_extsort *es, size_t k)
{
    return k * (sizeof(ahead) + es->frame) + es->zcap + sizeof(decoder);
}

/* Whether a merge of k readers with 'avail' bytes for its readers decodes
 * ahead: only the final one (its output goes to emit), with a second thread,
 * and when the budget still leaves each reader two frames beside its slot;
 * if so, takes what decode-ahead costs out of *avail. */
bool ddi_es_dec_reserve(const dedup_extsort *es, bool final, size_t k, size_t *avail)
{
    if (es->p.threads < 2 || !final || k < 2 ||
        *avail / k < 2 * es->frame + dec_bytes(es, k) / k)
        return false;
    *avail -= dec_bytes(es, k);
    return true;
}

/* Starts decode-ahead for the k readers (already initialised); false (and
 * nothing changed) if memory or the thread is refused. */
bool ddi_es_dec_start(dedup_extsort *es, reader *src, size_t k)
{
    decoder *d = ddi_es_alloc(es, sizeof *d);
    if (!d)
        return false;
    memset(d, 0, sizeof *d);
    d->es = es;
    d->src = src;
    d->k = k;
    d->slot = ddi_es_alloc(es, k * sizeof(ahead));
    d->zbuf = ddi_es_alloc(es, es->zcap);
    bool ok = d->slot && d->zbuf;
    size_t i = 0;
    if (ok)
        for (; i < k; i++) {
            d->slot[i].buf = ddi_es_alloc(es, es->frame);
            if (!d->slot[i].buf)
                break;
            atomic_init(&d->slot[i].state, RA_EMPTY);
        }
    ok = ok && i == k;
    if (ok) {
        atomic_init(&d->stop, false);
        atomic_init(&d->sleeping, false);
        pthread_mutex_init(&d->mu, NULL);
        pthread_cond_init(&d->cv, NULL);
        for (size_t j = 0; j < k; j++)
            src[j].ra = &d->slot[j];
        es->dec = d;
        if (pthread_create(&d->th, NULL, decoder_main, d) == 0)
            return true;
        for (size_t j = 0; j < k; j++)
            src[j].ra = NULL;
        es->dec = NULL;
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
    }
    for (size_t j = 0; j < i; j++)
        ddi_es_free(es, d->slot[j].buf, es->frame);
    ddi_es_free(es, d->slot, k * sizeof(ahead));
    ddi_es_free(es, d->zbuf, es->zcap);
    ddi_es_free(es, d, sizeof *d);
    return false;
}

/* Stops the thread and frees what ddi_es_dec_start took; the readers' cursors are
 * theirs again (unused: the merge is over). */
void ddi_es_dec_stop(dedup_extsort *es)
{
    decoder *d = es->dec;
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    atomic_store(&d->stop, true);
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->th, NULL);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    es->st.bytes_read_back += d->nread;
    for (size_t j = 0; j < d->k; j++) {
        d->src[j].ra = NULL;
        ddi_es_free(es, d->slot[j].buf, es->frame);
    }
    ddi_es_free(es, d->slot, d->k * sizeof(ahead));
    ddi_es_free(es, d->zbuf, es->zcap);
    ddi_es_free(es, d, sizeof *d);
    es->dec = NULL;
}
