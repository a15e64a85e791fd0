/*
 * split_mapped.c - `dedup split` of a regular file on two threads (see
 * split.h).
 *
 * Why: the feeder's path (cmd_split.c) reads on one thread and does all the
 * rest on the other: jump hash, the copy of every record into its part's
 * buffer and the write(2) calls.  That second thread is the slow step.
 * Here both threads share every kind of work, so each carries half:
 *
 *   - block k = the records that start in bytes [k B, (k+1) B) of the file
 *     (B = 1 MiB); thread k % 2 reads it with pread(2) into a slot's buffer
 *     (from the byte before, to see whether a record starts at k B, and on
 *     past (k+1) B to the end of the last record), cuts it at its
 *     terminators, makes the keys, hashes each once and routes them, and
 *     leaves the records in two lists, one per half of the parts (phase 1);
 *   - thread t copies the records of its half of the parts, block after
 *     block in file order, into the parts' buffered writers and writes them
 *     when they fill (phase 2).  A part is only ever touched by one thread,
 *     and blocks go through phase 2 in order, so every part gets its
 *     records in input order.
 *
 * The file is read, not mapped: on the virtual machines this was measured
 * on, touching a mapped file's pages cost more CPU than read(2)'s copy
 * (page faults, and TLB shootdowns between the two threads when finished
 * pages are dropped): bench/results/ring.md.  SLOTS blocks can be in
 * flight; a slot is reused once both halves copied its records out.  A
 * thread copies out the next block ready when there is one (its records
 * are still in cache from phase 1), else it does phase 1 of its next block
 * when a slot is free, else it waits.
 *
 * Signals: the second thread blocks them; the caller's thread looks at
 * dd_stop_signal at every step and in its waits (100 ms at most), and
 * writes to regular files do not block for long, so a stop is seen within
 * a block.  The file's size is taken when it is opened; a file cut shorter
 * during the split gives a short read and SPLIT_MAPPED_SHRANK (the caller
 * removes the parts), one that grows is split up to that size.
 */
#define _GNU_SOURCE /* memrchr */
#include "split.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define BLOCK ((size_t)1 << 20)
#define SLOTS 4u
#define SLACK 128u /* bytes a record copy may write past its end (fixed-size copies) */
#define EXTRA ((size_t)64 << 10) /* read past a block for its last record */

typedef struct rec_ref {
    const unsigned char *p;
    size_t len;    /* without terminator */
    uint32_t part;
} rec_ref;

typedef struct rec_list {
    rec_ref *r;
    size_t n, cap;
} rec_list;

typedef struct slot {
    uint64_t k;     /* block in it (valid when ready) */
    bool ready;     /* under mu */
    unsigned char *buf; /* the block's bytes, SLACK more allocated */
    size_t cap;
    rec_list half[2];
} slot;

typedef struct engine {
    const split_route *route;
    int fd;
    uint64_t size;
    unsigned char *half_of; /* part -> 0/1 */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot s[SLOTS];
    uint64_t done[2];  /* blocks through phase 2 of half t (under mu) */
    uint64_t nblocks;
    int outcome;       /* first failure, SPLIT_MAPPED_DONE if none (under mu) */
    int error;         /* errno of a read error */
} engine;

/* A thread's own state: scratch space. */
typedef struct worker {
    engine *e;
    unsigned t;
    unsigned char *scratch; /* key normalisation */
    size_t scratch_cap;
    dedup_digest *dig;      /* digests and owners of a block */
    uint32_t *own;
    const unsigned char **rp;
    size_t *rl;
    size_t arr_cap;
} worker;

static bool list_grow(rec_list *l)
{
    size_t nc = l->cap ? l->cap * 2 : 8192;
    rec_ref *r = realloc(l->r, nc * sizeof *r);
    if (!r)
        return false;
    l->r = r;
    l->cap = nc;
    return true;
}

static inline bool list_add(rec_list *l, const unsigned char *p, size_t len, uint32_t part)
{
    if (l->n == l->cap && !list_grow(l))
        return false;
    rec_ref *r = &l->r[l->n++];
    r->p = p;
    r->len = len;
    r->part = part;
    return true;
}

static bool worker_arrays(worker *w, size_t need)
{
    if (need <= w->arr_cap)
        return true;
    size_t nc = w->arr_cap ? w->arr_cap * 2 : 8192;
    while (nc < need)
        nc *= 2;
    dedup_digest *d = realloc(w->dig, nc * sizeof *d);
    if (d)
        w->dig = d;
    uint32_t *o = realloc(w->own, nc * sizeof *o);
    if (o)
        w->own = o;
    const unsigned char **rp = realloc(w->rp, nc * sizeof *rp);
    if (rp)
        w->rp = rp;
    size_t *rl = realloc(w->rl, nc * sizeof *rl);
    if (rl)
        w->rl = rl;
    if (!d || !o || !rp || !rl)
        return false;
    w->arr_cap = nc;
    return true;
}

/* Room for a key of 'len' bytes in the scratch buffer. */
static bool scratch_room(worker *w, size_t len)
{
    if (len <= w->scratch_cap)
        return true;
    size_t nc = w->scratch_cap ? w->scratch_cap : 4096;
    while (nc < len)
        nc *= 2;
    unsigned char *s = realloc(w->scratch, nc);
    if (!s)
        return false;
    w->scratch = s;
    w->scratch_cap = nc;
    return true;
}

/* Mask of the bytes equal to 'term' among the 64 at p (bit i: p[i]). */
#ifdef __SSE2__
static inline uint64_t term_mask64(const unsigned char *p, __m128i t)
{
    uint64_t m0 = (uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), t));
    uint64_t m1 = (uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16)), t));
    uint64_t m2 = (uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 32)), t));
    uint64_t m3 = (uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 48)), t));
    return m0 | m1 << 16 | m2 << 32 | m3 << 48;
}
#endif

/* One record of phase 1: its key hashed once, kept in the worker's arrays. */
static inline bool take(worker *w, const split_route *r, bool identity, size_t *n,
                        const unsigned char *p, size_t len)
{
    if (*n == w->arr_cap && !worker_arrays(w, *n + 1))
        return false;
    const unsigned char *k = p;
    size_t klen = len;
    if (!identity) {
        if (!scratch_room(w, len))
            return false;
        k = dd_key_of(r->key, p, len, w->scratch, &klen);
    }
    w->dig[*n] = dedup_hash(k, klen, DEDUP_DEFAULT_SEED);
    w->rp[*n] = p;
    w->rl[*n] = len;
    (*n)++;
    return true;
}

/* Room for 'need' bytes and SLACK more in slot s's buffer. */
static bool slot_room(slot *s, size_t need)
{
    if (need + SLACK <= s->cap)
        return true;
    size_t nc = s->cap ? s->cap : BLOCK + EXTRA + SLACK;
    while (nc < need + SLACK)
        nc = nc / 2 * 3;
    unsigned char *b = realloc(s->buf, nc);
    if (!b)
        return false;
    s->buf = b;
    s->cap = nc;
    return true;
}

/* Reads [off, off + len) of the file into 'buf': SPLIT_MAPPED_DONE, or
 * SHRANK (the end of the file came first), or READ_ERROR (errno in *err). */
static int read_at(const engine *e, unsigned char *buf, uint64_t off, size_t len, int *err)
{
    while (len) {
        ssize_t got = pread(e->fd, buf, len, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            *err = errno;
            return SPLIT_MAPPED_READ_ERROR;
        }
        if (got == 0)
            return SPLIT_MAPPED_SHRANK;
        buf += got;
        off += (uint64_t)got;
        len -= (size_t)got;
    }
    return SPLIT_MAPPED_DONE;
}

/* Phase 1 of block k into slot s: read it, cut, key, hash once, route, and
 * list each record under the half of the parts its owner is in.  The
 * block's records are those that start in [k B, (k+1) B): the read starts
 * one byte before (a record starts at k B when that byte is a terminator)
 * and goes on past (k+1) B, EXTRA bytes at a time, to the terminator of
 * the last one.  The terminators are found 64 bytes at a time (a bit mask,
 * no call per record) and each record is hashed as it is found, while its
 * bytes are in the first-level cache; the owners come in one batch per
 * block (dedup_jump_digest_batch or dedup_ring_lookup_batch).  Returns
 * SPLIT_MAPPED_DONE or the failure. */
static int phase1(worker *w, slot *s, uint64_t k, int *err)
{
    engine *e = w->e;
    const split_route *r = e->route;
    const unsigned char term = r->term;
    const bool identity = dd_keyspec_identity(r->key);
    const unsigned char *half_of = e->half_of;
    s->half[0].n = s->half[1].n = 0;
    uint64_t bstart = k * BLOCK, bend = bstart + BLOCK < e->size ? bstart + BLOCK : e->size;
    uint64_t from = k ? bstart - 1 : 0;
    size_t got = (size_t)(bend - from), st = 0;
    if (!slot_room(s, got))
        return SPLIT_MAPPED_NOMEM;
    int rc = read_at(e, s->buf, from, got, err);
    if (rc != SPLIT_MAPPED_DONE)
        return rc;
    if (k) {
        const unsigned char *t = memchr(s->buf, term, got);
        if (!t || from + (uint64_t)(t - s->buf) + 1 >= bend)
            return SPLIT_MAPPED_DONE; /* no record starts here: a long one goes on */
        st = (size_t)(t - s->buf) + 1;
    }
    size_t lim = got;
    while (s->buf[lim - 1] != term && from + got < e->size) { /* the last record's end */
        size_t more = e->size - (from + got) < EXTRA ? (size_t)(e->size - (from + got)) : EXTRA;
        if (!slot_room(s, got + more))
            return SPLIT_MAPPED_NOMEM;
        rc = read_at(e, s->buf + got, from + got, more, err);
        if (rc != SPLIT_MAPPED_DONE)
            return rc;
        const unsigned char *t = memchr(s->buf + got, term, more);
        got += more;
        lim = t ? (size_t)(t - s->buf) + 1 : got;
    }
    memset(s->buf + got, 0, SLACK); /* what phase 2's fixed-size copies read past a record */
    const unsigned char *rec = s->buf + st, *c = rec, *end = s->buf + lim;
    size_t n = 0;
#ifdef __SSE2__
    const __m128i t = _mm_set1_epi8((char)term);
    for (; end - c >= 64; c += 64) {
        uint64_t m = term_mask64(c, t);
        while (m) {
            const unsigned char *q = c + __builtin_ctzll(m);
            m &= m - 1;
            if (!take(w, r, identity, &n, rec, (size_t)(q - rec)))
                return SPLIT_MAPPED_NOMEM;
            rec = q + 1;
        }
    }
#endif
    for (;;) { /* the last bytes (all of them without SSE2) */
        const unsigned char *q = c < end ? memchr(c, term, (size_t)(end - c)) : NULL;
        if (!q)
            break;
        if (!take(w, r, identity, &n, rec, (size_t)(q - rec)))
            return SPLIT_MAPPED_NOMEM;
        rec = c = q + 1;
    }
    if (rec < end && !take(w, r, identity, &n, rec, (size_t)(end - rec)))
        return SPLIT_MAPPED_NOMEM; /* the file's last record, without terminator */
    if (r->ring)
        dedup_ring_lookup_batch(r->ring, w->dig, n, w->own);
    else
        dedup_jump_digest_batch(w->dig, n, (uint32_t)r->n, w->own);
    for (size_t i = 0; i < n; i++)
        if (!list_add(&s->half[half_of[w->own[i]]], w->rp[i], w->rl[i], w->own[i]))
            return SPLIT_MAPPED_NOMEM;
    return SPLIT_MAPPED_DONE;
}

/* Phase 2 of a slot for half t: each record into its part's writer.  The
 * usual record (its terminator after it in the file, room in the buffer)
 * is one fixed 64- or 128-byte copy, which the compiler inlines (the bytes
 * past the record are overwritten by the next one), or else one memcpy;
 * the rest goes through dd_writer, which flushes full buffers. */
static bool phase2(engine *e, const slot *s, unsigned t)
{
    const split_route *r = e->route;
    const unsigned char term = r->term;
    const rec_list *l = &s->half[t];
    for (size_t i = 0; i < l->n; i++) {
        const rec_ref *rf = &l->r[i];
        split_part *p = &r->parts[rf->part];
        dd_writer *w = &p->w;
        size_t n = rf->len + 1;
        p->records++;
        p->bytes += n;
        /* the slot's buffer holds SLACK bytes past any record */
        if (n + SLACK <= w->cap - w->len && rf->p[rf->len] == term) {
            unsigned char *d = w->buf + w->len;
            if (n <= SLACK / 2)
                memcpy(d, rf->p, SLACK / 2);
            else if (n <= SLACK)
                memcpy(d, rf->p, SLACK);
            else
                memcpy(d, rf->p, n);
            w->len += n;
        } else if (!dd_writer_record(w, rf->p, rf->len, term)) {
            return false;
        }
    }
    return true;
}

/* Records a failure (the first one wins) and wakes the other thread. */
static void fail(engine *e, int outcome, int err)
{
    pthread_mutex_lock(&e->mu);
    if (e->outcome == SPLIT_MAPPED_DONE) {
        e->outcome = outcome;
        e->error = err;
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* Waits on the engine's condition; the caller's thread wakes every 100 ms
 * to look at dd_stop_signal.  Called with mu held. */
static void wait_for(engine *e, unsigned t)
{
    if (t) {
        pthread_cond_wait(&e->cv, &e->mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
}

static void work(worker *w)
{
    engine *e = w->e;
    const unsigned t = w->t;
    uint64_t next1 = t, next2 = 0; /* my next phase-1 block, my next phase-2 block */
    pthread_mutex_lock(&e->mu);
    for (;;) {
        if (t == 0 && dd_stop_signal && e->outcome == SPLIT_MAPPED_DONE) {
            e->outcome = SPLIT_MAPPED_STOPPED;
            pthread_cond_broadcast(&e->cv);
        }
        if (e->outcome != SPLIT_MAPPED_DONE || next2 >= e->nblocks)
            break;
        uint64_t low = e->done[0] < e->done[1] ? e->done[0] : e->done[1];
        bool can1 = next1 < e->nblocks && next1 < low + SLOTS;
        slot *s2 = &e->s[next2 % SLOTS];
        bool can2 = s2->ready && s2->k == next2;
        if (!can1 && !can2) {
            wait_for(e, t);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        if (can1 && !can2) {
            slot *s = &e->s[next1 % SLOTS];
            int err = 0, rc = phase1(w, s, next1, &err);
            if (rc != SPLIT_MAPPED_DONE) {
                fail(e, rc, err);
                pthread_mutex_lock(&e->mu);
                continue;
            }
            pthread_mutex_lock(&e->mu);
            s->k = next1;
            s->ready = true;
            next1 += 2;
            pthread_cond_broadcast(&e->cv);
            continue;
        }
        bool ok = phase2(e, s2, t);
        pthread_mutex_lock(&e->mu);
        if (!ok) {
            if (e->outcome == SPLIT_MAPPED_DONE)
                e->outcome = SPLIT_MAPPED_WRITE_ERROR;
            pthread_cond_broadcast(&e->cv);
            continue;
        }
        e->done[t] = ++next2;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

static void *second_main(void *arg)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    work(arg);
    return NULL;
}

/* Half of the parts each thread writes: by their share of the keys (jump
 * hash: all equal), greedily, so both halves carry about as many bytes. */
static void assign_halves(const split_route *r, unsigned char *half_of)
{
    double load[2] = {0, 0};
    for (size_t i = 0; i < r->n; i++) {
        double share = r->ring ? dedup_ring_node_share(r->ring, (uint32_t)i) : 1.0;
        unsigned h = load[1] < load[0];
        half_of[i] = (unsigned char)h;
        load[h] += share;
    }
}

int split_mapped(const split_route *r, const char *path, int *read_errno)
{
    for (size_t i = 0; i < r->n; i++)
        if (!r->parts[i].tmp || r->parts[i].pid || r->parts[i].w.th)
            return SPLIT_MAPPED_NOT_USED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return SPLIT_MAPPED_NOT_USED;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return SPLIT_MAPPED_NOT_USED;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    int outcome = SPLIT_MAPPED_NOMEM;
    engine e;
    memset(&e, 0, sizeof e);
    e.route = r;
    e.fd = fd;
    e.size = (uint64_t)st.st_size;
    e.nblocks = (e.size + BLOCK - 1) / BLOCK;
    e.outcome = SPLIT_MAPPED_DONE;
    e.half_of = malloc(r->n);
    worker w[2];
    memset(w, 0, sizeof w);
    if (!e.half_of)
        goto out;
    assign_halves(r, e.half_of);
    pthread_mutex_init(&e.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e.cv, &ca);
    pthread_condattr_destroy(&ca);
    for (unsigned t = 0; t < 2; t++) {
        w[t].e = &e;
        w[t].t = t;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, second_main, &w[1]) != 0) {
        outcome = SPLIT_MAPPED_NOMEM;
    } else {
        work(&w[0]);
        pthread_join(th, NULL);
        outcome = e.outcome;
    }
    pthread_mutex_destroy(&e.mu);
    pthread_cond_destroy(&e.cv);
    for (unsigned t = 0; t < 2; t++) {
        free(w[t].scratch);
        free(w[t].dig);
        free(w[t].own);
        free(w[t].rp);
        free(w[t].rl);
    }
    for (unsigned i = 0; i < SLOTS; i++) {
        free(e.s[i].buf);
        free(e.s[i].half[0].r);
        free(e.s[i].half[1].r);
    }
    if (read_errno)
        *read_errno = e.error;
out:
    free(e.half_of);
    close(fd);
    return outcome;
}
