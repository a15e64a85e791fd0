/*
 * split_file.c - `dedup split` of a regular file on two threads (see
 * split.h).
 *
 * Why: the feeder's path (cmd_split.c) reads on one thread and does all the
 * rest on the other: jump hash, the copy of every record into its part's
 * buffer and the write(2) calls.  That second thread is the slow step.
 * Here each thread does all the work of every other block, and the only
 * thing that passes between them is how many bytes each block gives each
 * part:
 *
 *   - block k = the records that start in bytes [k B, (k+1) B) of the file
 *     (B = 1 MiB); thread k % 2 reads it with pread(2) (from the byte
 *     before, to see whether a record starts at k B, and on past (k+1) B to
 *     the end of its last record), cuts it at its terminators, makes the
 *     keys, hashes each once and routes them;
 *   - it counts the bytes of each part in the block, and once block k - 1
 *     has published where its bytes end in every part file, it takes the
 *     next range of each file and publishes block k's ends (the one
 *     hand-over, under a mutex, in block order);
 *   - it copies the block's records, grouped by part, into its own staging
 *     buffer while they are still in its cache, and writes each part's
 *     group with one pwrite(2) at its offset.  Every part gets its records
 *     in input order because the ranges are taken in block order.
 *
 * The file is read, not mapped, because touching a mapped file's pages
 * costs more CPU than read(2)'s copy (bench/results/ring.md); and each
 * thread does every step of its own blocks, so that no record crosses
 * cores between being cut and being copied out.
 *
 * Signals: the second thread blocks them; the caller's thread looks at
 * dd_stop_signal at every block and in its waits (100 ms at most), and
 * writes to regular files do not block for long, so a stop is seen within
 * a block.  The file's size is taken when it is opened; a file cut shorter
 * during the split gives a short read and SPLIT_FILE_SHRANK (the caller
 * removes the parts), one that grows is split up to that size.
 */
#define _GNU_SOURCE /* pread, pwrite, posix_fadvise */
#include "split.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define BLOCK ((size_t)1 << 20)
#define SLACK 128u /* bytes a record copy may write past its end (fixed-size copies) */
#define EXTRA ((size_t)64 << 10) /* read past a block for its last record */

typedef struct engine {
    const split_route *route;
    int fd;
    uint64_t size;
    uint64_t nblocks;
    uint64_t *base;    /* part -> its file's offset when this file began */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t *ends;    /* part -> bytes of it from the blocks published (under mu) */
    uint64_t next_pub; /* the next block to publish its ends (under mu) */
    int outcome;       /* first failure, SPLIT_FILE_DONE if none (under mu) */
    int error;         /* errno of a read or write error (under mu) */
    size_t error_part; /* the part of a write error */
} engine;

/* A thread's own state and buffers. */
typedef struct worker {
    engine *e;
    unsigned t;
    unsigned char *scratch; /* key normalisation */
    size_t scratch_cap;
    dedup_digest *dig;      /* digests, owners and records of a block */
    uint32_t *own;
    const unsigned char **rp;
    size_t *rl;
    size_t arr_cap;
    unsigned char *buf;     /* the block's bytes, SLACK more allocated */
    size_t cap;
    unsigned char *stage;   /* the block's records grouped by part */
    size_t stage_cap;
    uint64_t *cnt;          /* part -> bytes in this block, then its offset */
    size_t *pos;            /* part -> where its group goes in stage */
    uint64_t *records, *bytes; /* part -> totals of this thread's blocks */
} worker;

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

/* Reads [off, off + len) of the file into 'buf': SPLIT_FILE_DONE, or
 * SHRANK (the end of the file came first), or READ_ERROR (errno in *err). */
static int read_at(const engine *e, unsigned char *buf, uint64_t off, size_t len, int *err)
{
    while (len) {
        ssize_t got = pread(e->fd, buf, len, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            *err = errno;
            return SPLIT_FILE_READ_ERROR;
        }
        if (got == 0)
            return SPLIT_FILE_SHRANK;
        buf += got;
        off += (uint64_t)got;
        len -= (size_t)got;
    }
    return SPLIT_FILE_DONE;
}

/* Room for 'need' bytes and SLACK more in the read buffer. */
static bool buf_room(worker *w, size_t need)
{
    if (need + SLACK <= w->cap)
        return true;
    size_t nc = w->cap ? w->cap : BLOCK + EXTRA + SLACK;
    while (nc < need + SLACK)
        nc = nc / 2 * 3;
    unsigned char *b = realloc(w->buf, nc);
    if (!b)
        return false;
    w->buf = b;
    w->cap = nc;
    return true;
}

/* Reads block k, cuts, keys, hashes once and routes its records into the
 * worker's arrays (*n of them).  The block's records are those that start
 * in [k B, (k+1) B): the read starts one byte before (a record starts at
 * k B when that byte is a terminator) and goes on past (k+1) B, EXTRA
 * bytes at a time, to the terminator of the last one.  The terminators are
 * found 64 bytes at a time (a bit mask, no call per record) and each
 * record is hashed as it is found, while its bytes are in the first-level
 * cache; the owners come in one batch (dedup_jump_digest_batch or
 * dedup_ring_lookup_batch).  Returns SPLIT_FILE_DONE or the failure. */
static int cut_block(worker *w, uint64_t k, size_t *n_out, int *err)
{
    engine *e = w->e;
    const split_route *r = e->route;
    const unsigned char term = r->term;
    const bool identity = dd_keyspec_identity(r->key);
    *n_out = 0;
    uint64_t bstart = k * BLOCK, bend = bstart + BLOCK < e->size ? bstart + BLOCK : e->size;
    uint64_t from = k ? bstart - 1 : 0;
    size_t got = (size_t)(bend - from), st = 0;
    if (!buf_room(w, got))
        return SPLIT_FILE_NOMEM;
    int rc = read_at(e, w->buf, from, got, err);
    if (rc != SPLIT_FILE_DONE)
        return rc;
    if (k) {
        const unsigned char *t = memchr(w->buf, term, got);
        if (!t || from + (uint64_t)(t - w->buf) + 1 >= bend)
            return SPLIT_FILE_DONE; /* no record starts here: a long one goes on */
        st = (size_t)(t - w->buf) + 1;
    }
    size_t lim = got;
    while (w->buf[lim - 1] != term && from + got < e->size) { /* the last record's end */
        size_t more = e->size - (from + got) < EXTRA ? (size_t)(e->size - (from + got)) : EXTRA;
        if (!buf_room(w, got + more))
            return SPLIT_FILE_NOMEM;
        rc = read_at(e, w->buf + got, from + got, more, err);
        if (rc != SPLIT_FILE_DONE)
            return rc;
        const unsigned char *t = memchr(w->buf + got, term, more);
        got += more;
        lim = t ? (size_t)(t - w->buf) + 1 : got;
    }
    memset(w->buf + got, 0, SLACK); /* what the fixed-size copies read past a record */
    const unsigned char *rec = w->buf + st, *c = rec, *end = w->buf + lim;
    size_t n = 0;
#ifdef __SSE2__
    const __m128i t = _mm_set1_epi8((char)term);
    for (; end - c >= 64; c += 64) {
        uint64_t m = term_mask64(c, t);
        while (m) {
            const unsigned char *q = c + __builtin_ctzll(m);
            m &= m - 1;
            if (!take(w, r, identity, &n, rec, (size_t)(q - rec)))
                return SPLIT_FILE_NOMEM;
            rec = q + 1;
        }
    }
#endif
    for (;;) { /* the last bytes (all of them without SSE2) */
        const unsigned char *q = c < end ? memchr(c, term, (size_t)(end - c)) : NULL;
        if (!q)
            break;
        if (!take(w, r, identity, &n, rec, (size_t)(q - rec)))
            return SPLIT_FILE_NOMEM;
        rec = c = q + 1;
    }
    if (rec < end && !take(w, r, identity, &n, rec, (size_t)(end - rec)))
        return SPLIT_FILE_NOMEM; /* the file's last record, without terminator */
    if (r->ring)
        dedup_ring_lookup_batch(r->ring, w->dig, n, w->own);
    else
        dedup_jump_digest_batch(w->dig, n, (uint32_t)r->n, w->own);
    *n_out = n;
    return SPLIT_FILE_DONE;
}

/* Copies the n records of a block into the staging buffer, grouped by part
 * (w->pos: where each group starts; every group has SLACK bytes after it,
 * so a fixed 64- or 128-byte copy, which the compiler inlines, never
 * reaches the next group), and writes each group at its offset in its part
 * file (w->cnt: the offset, w->pos: end of the group after the copies).
 * Returns SPLIT_FILE_DONE or WRITE_ERROR (*err, *part). */
static int write_block(worker *w, size_t n, int *err, size_t *part)
{
    const engine *e = w->e;
    const split_route *r = e->route;
    const unsigned char term = r->term;
    size_t *pos = w->pos;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = w->rp[i];
        size_t len = w->rl[i];
        unsigned char *d = w->stage + pos[w->own[i]];
        if (p[len] == term) { /* the slack after the read bytes is never the end */
            size_t m = len + 1;
            if (m <= SLACK / 2)
                memcpy(d, p, SLACK / 2);
            else if (m <= SLACK)
                memcpy(d, p, SLACK);
            else
                memcpy(d, p, m);
        } else {
            memcpy(d, p, len);
            d[len] = term;
        }
        pos[w->own[i]] += len + 1;
    }
    size_t start = 0;
    for (size_t q = 0; q < r->n; q++) {
        size_t stop = pos[q];
        uint64_t off = e->base[q] + w->cnt[q];
        const unsigned char *src = w->stage + start;
        while (src < w->stage + stop) {
            ssize_t put = pwrite(r->parts[q].fd, src, (size_t)(w->stage + stop - src), (off_t)off);
            if (put < 0 && errno == EINTR)
                continue;
            if (put <= 0) {
                *err = put < 0 ? errno : EIO;
                *part = q;
                return SPLIT_FILE_WRITE_ERROR;
            }
            src += put;
            off += (uint64_t)put;
        }
        start = stop + SLACK;
    }
    return SPLIT_FILE_DONE;
}

/* Records a failure (the first one wins) and wakes the other thread.
 * Called with mu held. */
static void fail_locked(engine *e, int outcome, int err, size_t part)
{
    if (e->outcome == SPLIT_FILE_DONE) {
        e->outcome = outcome;
        e->error = err;
        e->error_part = part;
    }
    pthread_cond_broadcast(&e->cv);
}

/* Waits on the engine's condition; the caller's thread wakes every 100 ms
 * to look at dd_stop_signal.  Called with mu held. */
static void wait_for(engine *e, unsigned t)
{
    if (t) {
        pthread_cond_wait(&e->cv, &e->mu);
        return;
    }
    cli_cond_wait_ns(&e->cv, &e->mu, 100000000L);
}

static void work(worker *w)
{
    engine *e = w->e;
    const split_route *r = e->route;
    const unsigned t = w->t;
    for (uint64_t k = t; k < e->nblocks; k += 2) {
        size_t n = 0, part = 0;
        int err = 0, rc = cut_block(w, k, &n, &err);
        /* this block's bytes per part, and room to group them */
        size_t need = 0;
        if (rc == SPLIT_FILE_DONE) {
            memset(w->cnt, 0, r->n * sizeof *w->cnt);
            for (size_t i = 0; i < n; i++) {
                w->cnt[w->own[i]] += w->rl[i] + 1;
                w->records[w->own[i]]++;
            }
            for (size_t q = 0; q < r->n; q++) {
                w->pos[q] = need;
                need += (size_t)w->cnt[q] + SLACK;
                w->bytes[q] += w->cnt[q];
            }
            if (need > w->stage_cap) {
                size_t nc = need + need / 2;
                unsigned char *s = realloc(w->stage, nc);
                if (s) {
                    w->stage = s;
                    w->stage_cap = nc;
                } else {
                    rc = SPLIT_FILE_NOMEM;
                }
            }
        }
        pthread_mutex_lock(&e->mu);
        if (rc != SPLIT_FILE_DONE)
            fail_locked(e, rc, err, 0);
        for (;;) { /* block k - 1 published, or a failure, or a stop */
            if (t == 0 && dd_stop_signal)
                fail_locked(e, SPLIT_FILE_STOPPED, 0, 0);
            if (e->outcome != SPLIT_FILE_DONE || e->next_pub == k)
                break;
            wait_for(e, t);
        }
        if (e->outcome != SPLIT_FILE_DONE) {
            pthread_mutex_unlock(&e->mu);
            return;
        }
        for (size_t q = 0; q < r->n; q++) { /* the block's range of every part file */
            uint64_t c = w->cnt[q];
            w->cnt[q] = e->ends[q];
            e->ends[q] += c;
        }
        e->next_pub = k + 1;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        rc = write_block(w, n, &err, &part);
        if (rc != SPLIT_FILE_DONE) {
            pthread_mutex_lock(&e->mu);
            fail_locked(e, rc, err, part);
            pthread_mutex_unlock(&e->mu);
            return;
        }
    }
}

static void *second_main(void *arg)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    work(arg);
    return NULL;
}

static bool worker_init(worker *w, engine *e, unsigned t, size_t nparts)
{
    memset(w, 0, sizeof *w);
    w->e = e;
    w->t = t;
    w->cnt = calloc(nparts, sizeof *w->cnt);
    w->pos = calloc(nparts, sizeof *w->pos);
    w->records = calloc(nparts, sizeof *w->records);
    w->bytes = calloc(nparts, sizeof *w->bytes);
    return w->cnt && w->pos && w->records && w->bytes;
}

static void worker_free(worker *w)
{
    free(w->scratch);
    free(w->dig);
    free(w->own);
    free(w->rp);
    free(w->rl);
    free(w->buf);
    free(w->stage);
    free(w->cnt);
    free(w->pos);
    free(w->records);
    free(w->bytes);
}

int split_file(const split_route *r, const char *path, int *read_errno)
{
    for (size_t i = 0; i < r->n; i++)
        if (!r->parts[i].out.tmp || r->parts[i].pid || r->parts[i].w.th)
            return SPLIT_FILE_NOT_USED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return SPLIT_FILE_NOT_USED;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return SPLIT_FILE_NOT_USED;
    }
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    int outcome = SPLIT_FILE_NOMEM;
    engine e;
    memset(&e, 0, sizeof e);
    e.route = r;
    e.fd = fd;
    e.size = (uint64_t)st.st_size;
    e.nblocks = (e.size + BLOCK - 1) / BLOCK;
    e.outcome = SPLIT_FILE_DONE;
    e.base = calloc(r->n, sizeof *e.base);
    e.ends = calloc(r->n, sizeof *e.ends);
    worker w[2];
    bool ok = worker_init(&w[0], &e, 0, r->n);
    ok = worker_init(&w[1], &e, 1, r->n) && ok;
    if (!ok || !e.base || !e.ends)
        goto out;
    /* what earlier inputs left in the writers goes first; the groups of
     * this file follow at the parts' current offsets */
    for (size_t i = 0; i < r->n; i++) {
        off_t at;
        if (!dd_writer_flush(&r->parts[i].w) || (at = lseek(r->parts[i].fd, 0, SEEK_CUR)) < 0) {
            if (!r->parts[i].w.error)
                r->parts[i].w.error = errno ? errno : EIO;
            outcome = SPLIT_FILE_WRITE_ERROR;
            goto out;
        }
        e.base[i] = (uint64_t)at;
    }
    pthread_mutex_init(&e.mu, NULL);
    cli_cond_init(&e.cv);
    pthread_t th;
    if (pthread_create(&th, NULL, second_main, &w[1]) != 0) {
        outcome = SPLIT_FILE_NOMEM;
    } else {
        work(&w[0]);
        pthread_join(th, NULL);
        outcome = e.outcome;
    }
    pthread_mutex_destroy(&e.mu);
    pthread_cond_destroy(&e.cv);
    for (size_t i = 0; i < r->n; i++) {
        split_part *p = &r->parts[i];
        p->records += w[0].records[i] + w[1].records[i];
        p->bytes += w[0].bytes[i] + w[1].bytes[i];
        if (outcome == SPLIT_FILE_DONE &&
            lseek(p->fd, (off_t)(e.base[i] + e.ends[i]), SEEK_SET) < 0) {
            p->w.error = errno;
            outcome = SPLIT_FILE_WRITE_ERROR;
        }
    }
    if (outcome == SPLIT_FILE_WRITE_ERROR && e.error)
        r->parts[e.error_part].w.error = e.error;
    if (read_errno)
        *read_errno = e.error;
out:
    worker_free(&w[0]);
    worker_free(&w[1]);
    free(e.base);
    free(e.ends);
    close(fd);
    return outcome;
}
