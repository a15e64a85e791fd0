/*
 * split_mapped.c - `dedup split` of a regular file on two threads (see
 * split.h).
 *
 * Why: the feeder's path (cmd_split.c) reads on one thread and does all the
 * rest on the other: jump hash, the copy of every record into its part's
 * buffer and the write(2) calls.  That second thread was the slow step
 * (65% of the CPU time; 2.7-3x of `cat FILE > OUT` on a quiet machine).
 * Here both threads share every kind of work, so each carries half (the
 * total is about the same: on a machine where every thread waits for a
 * core both roads take as long; bench/results/ring.md):
 *
 *   - the file is mapped, so no read(2) copies it (the page faults are
 *     cheaper than read's copy, and the blocks are not handed across);
 *   - block k = the records that start in about 1 MiB of the file; thread
 *     k % 2 cuts it at its terminators, makes the keys, hashes each once and
 *     routes it, and leaves the records in two lists, one per half of the
 *     parts (phase 1);
 *   - thread t copies the records of its half of the parts, block after
 *     block in file order, into the parts' buffered writers and writes them
 *     when they fill (phase 2).  A part is only ever touched by one thread,
 *     and blocks go through phase 2 in order, so every part gets its
 *     records in input order.
 *
 * Each thread knows where every block starts: both walk the same chain of
 * block ends (the last terminator before start + 1 MiB, or the end of a
 * longer record) while looking for their next block.  SLOTS blocks can be
 * in flight; a slot is reused once both halves copied its records out.  A
 * thread copies out the next block ready when there is one (its records
 * are still in cache from phase 1), else it does phase 1 of its next block
 * when a slot is free, else it waits.
 * The pages of a block both halves are done with are dropped from the
 * mapping (MADV_DONTNEED), so the resident size stays a few blocks.
 *
 * Signals: the second thread blocks the asynchronous ones; the caller's
 * thread looks at dd_stop_signal at every step and in its waits (100 ms at
 * most), and writes to regular files do not block for long, so a stop is
 * seen within a block.  A file cut shorter while it is being split makes
 * the next read of a page past its new end raise SIGBUS: the handler
 * (either thread) removes every part's temporary file, says which input
 * shrank and ends the process with exit status 1 (only async-signal-safe
 * calls: unlink, write, _exit).
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define BLOCK ((size_t)1 << 20)
#define SLOTS 4u
#define SLACK 128u /* bytes a record copy may write past its end (fixed-size copies) */

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
    size_t start, end;
    rec_list half[2];
} slot;

typedef struct engine {
    const split_route *route;
    const char *path;
    const unsigned char *map;
    size_t size, page;
    unsigned char *half_of; /* part -> 0/1 */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot s[SLOTS];
    uint64_t done[2];  /* blocks through phase 2 of half t (under mu) */
    uint64_t nblocks;  /* UINT64_MAX until a thread met the end (under mu) */
    size_t released;   /* mapping dropped below this offset (under mu) */
    int outcome;       /* first failure, SPLIT_MAPPED_DONE if none (under mu) */
} engine;

/* A thread's own state: where its walk of the block chain is, and scratch. */
typedef struct worker {
    engine *e;
    unsigned t;
    uint64_t chain_k;  /* block whose start is chain_pos */
    size_t chain_pos;
    unsigned char *scratch; /* key normalisation */
    size_t scratch_cap;
    dedup_digest *dig;      /* ring: digests and owners of a block */
    uint32_t *own;
    const unsigned char **rp;
    size_t *rl;
    size_t arr_cap;
} worker;

/* End of the block that starts at 'pos' (< size). */
static size_t block_end(const engine *e, size_t pos, unsigned char term)
{
    size_t lim = pos + BLOCK;
    if (lim >= e->size)
        return e->size;
    const unsigned char *t = memrchr(e->map + pos, term, lim - pos);
    if (t)
        return (size_t)(t - e->map) + 1;
    t = memchr(e->map + lim, term, e->size - lim); /* a record longer than a block */
    return t ? (size_t)(t - e->map) + 1 : e->size;
}

/* Walks the chain to block k; false if there is no block k. */
static bool find_block(worker *w, uint64_t k, size_t *start, size_t *end)
{
    engine *e = w->e;
    while (w->chain_k < k && w->chain_pos < e->size) {
        w->chain_pos = block_end(e, w->chain_pos, e->route->term);
        w->chain_k++;
    }
    if (w->chain_k < k || w->chain_pos >= e->size)
        return false;
    *start = w->chain_pos;
    *end = block_end(e, w->chain_pos, e->route->term);
    return true;
}

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

/* Phase 1 of block [start, end) into slot s: cut, key, hash once, route,
 * and list each record under the half of the parts its owner is in.  The
 * terminators are found 64 bytes at a time (a bit mask, no call per
 * record) and each record is hashed as it is found, while its bytes are in
 * the first-level cache; the owners come in one batch per block
 * (dedup_jump_digest_batch or dedup_ring_lookup_batch). */
static bool phase1(worker *w, slot *s, size_t start, size_t end)
{
    engine *e = w->e;
    const split_route *r = e->route;
    const unsigned char term = r->term;
    const bool identity = dd_keyspec_identity(r->key);
    const unsigned char *half_of = e->half_of;
    const unsigned char *rec = e->map + start, *c = rec, *lim = e->map + end;
    s->half[0].n = s->half[1].n = 0;
    s->start = start;
    s->end = end;
    size_t n = 0;
#ifdef MADV_POPULATE_READ
    /* the block's pages mapped in one call, not one fault per 16 pages
     * (a fault is dear in a virtual machine); older kernels say EINVAL */
    size_t from = start / e->page * e->page;
    (void)madvise((void *)(uintptr_t)(e->map + from), end - from, MADV_POPULATE_READ);
#endif
#ifdef __SSE2__
    const __m128i t = _mm_set1_epi8((char)term);
    for (; lim - c >= 64; c += 64) {
        uint64_t m = term_mask64(c, t);
        while (m) {
            const unsigned char *q = c + __builtin_ctzll(m);
            m &= m - 1;
            if (!take(w, r, identity, &n, rec, (size_t)(q - rec)))
                return false;
            rec = q + 1;
        }
    }
#endif
    for (;;) { /* the last bytes (all of them without SSE2) */
        const unsigned char *q = c < lim ? memchr(c, term, (size_t)(lim - c)) : NULL;
        if (!q)
            break;
        if (!take(w, r, identity, &n, rec, (size_t)(q - rec)))
            return false;
        rec = c = q + 1;
    }
    if (rec < lim && !take(w, r, identity, &n, rec, (size_t)(lim - rec)))
        return false; /* the file's last record, without terminator */
    if (r->ring)
        dedup_ring_lookup_batch(r->ring, w->dig, n, w->own);
    else
        dedup_jump_digest_batch(w->dig, n, (uint32_t)r->n, w->own);
    for (size_t i = 0; i < n; i++)
        if (!list_add(&s->half[half_of[w->own[i]]], w->rp[i], w->rl[i], w->own[i]))
            return false;
    return true;
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
    const unsigned char *map_end = e->map + e->size;
    const rec_list *l = &s->half[t];
    for (size_t i = 0; i < l->n; i++) {
        const rec_ref *rf = &l->r[i];
        split_part *p = &r->parts[rf->part];
        dd_writer *w = &p->w;
        size_t n = rf->len + 1;
        p->records++;
        p->bytes += n;
        if (n + SLACK <= w->cap - w->len && rf->p + rf->len < map_end) {
            unsigned char *d = w->buf + w->len;
            if (n <= SLACK / 2 && rf->p + SLACK / 2 <= map_end)
                memcpy(d, rf->p, SLACK / 2);
            else if (n <= SLACK && rf->p + SLACK <= map_end)
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
static void fail(engine *e, int outcome)
{
    pthread_mutex_lock(&e->mu);
    if (e->outcome == SPLIT_MAPPED_DONE)
        e->outcome = outcome;
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
    size_t s1 = 0, e1 = 0;
    bool have1 = find_block(w, next1, &s1, &e1);
    pthread_mutex_lock(&e->mu);
    if (!have1 && w->chain_k < e->nblocks)
        e->nblocks = w->chain_k;
    for (;;) {
        if (t == 0 && dd_stop_signal && e->outcome == SPLIT_MAPPED_DONE) {
            e->outcome = SPLIT_MAPPED_STOPPED;
            pthread_cond_broadcast(&e->cv);
        }
        if (e->outcome != SPLIT_MAPPED_DONE || next2 >= e->nblocks)
            break;
        uint64_t low = e->done[0] < e->done[1] ? e->done[0] : e->done[1];
        bool can1 = have1 && next1 < low + SLOTS;
        slot *s2 = &e->s[next2 % SLOTS];
        bool can2 = s2->ready && s2->k == next2;
        if (!can1 && !can2) {
            wait_for(e, t);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        if (can1 && !can2) {
            slot *s = &e->s[next1 % SLOTS];
            if (!phase1(w, s, s1, e1)) {
                fail(e, SPLIT_MAPPED_NOMEM);
                pthread_mutex_lock(&e->mu);
                continue;
            }
            next1 += 2;
            have1 = find_block(w, next1, &s1, &e1);
            pthread_mutex_lock(&e->mu);
            s->k = next1 - 2;
            s->ready = true;
            if (!have1 && w->chain_k < e->nblocks)
                e->nblocks = w->chain_k;
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
        /* Both halves past this block: its pages leave the mapping. */
        size_t drop_from = 0, drop_to = 0;
        if (e->done[0] == next2 || e->done[1] == next2) {
            uint64_t other = e->done[1 - t];
            if (other >= next2) {
                size_t to = s2->end / e->page * e->page;
                if (to > e->released) {
                    drop_from = e->released;
                    drop_to = to;
                    e->released = to;
                }
            }
        }
        pthread_cond_broadcast(&e->cv);
        if (drop_to > drop_from) {
            pthread_mutex_unlock(&e->mu);
            (void)madvise((void *)(uintptr_t)(e->map + drop_from), drop_to - drop_from,
                          MADV_DONTNEED);
            pthread_mutex_lock(&e->mu);
        }
    }
    pthread_mutex_unlock(&e->mu);
}

/* The engine whose input is mapped, for the SIGBUS handler (a process
 * splits one file at a time). */
static const engine *volatile bus_engine;

static void put(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

/* A page past the input's new end: it was cut shorter during the split. */
static void on_bus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const engine *e = bus_engine;
    const unsigned char *a = si ? (const unsigned char *)si->si_addr : NULL;
    if (e && a >= e->map && a < e->map + e->size) {
        for (size_t i = 0; i < e->route->n; i++)
            if (e->route->parts[i].tmp)
                unlink(e->route->parts[i].tmp);
        put("dedup split: ");
        put(e->path);
        put(": the file shrank while it was being split; no part was written\n");
        _exit(CLI_EXIT_FAIL);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void *second_main(void *arg)
{
    sigset_t all;
    sigfillset(&all);
    sigdelset(&all, SIGBUS); /* a fault's signal must reach this thread's handler */
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
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

int split_mapped(const split_route *r, const char *path)
{
    for (size_t i = 0; i < r->n; i++)
        if (!r->parts[i].tmp || r->parts[i].pid || r->parts[i].w.th)
            return SPLIT_MAPPED_NOT_USED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return SPLIT_MAPPED_NOT_USED;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (uint64_t)st.st_size > SIZE_MAX / 2) {
        close(fd);
        return SPLIT_MAPPED_NOT_USED;
    }
    size_t size = (size_t)st.st_size;
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return SPLIT_MAPPED_NOT_USED;
    (void)madvise(m, size, MADV_SEQUENTIAL);

    int outcome = SPLIT_MAPPED_NOMEM;
    engine e;
    memset(&e, 0, sizeof e);
    e.route = r;
    e.path = path;
    e.map = m;
    e.size = size;
    long pg = sysconf(_SC_PAGESIZE);
    e.page = pg > 0 ? (size_t)pg : 4096;
    e.nblocks = UINT64_MAX;
    e.outcome = SPLIT_MAPPED_DONE;
    e.half_of = malloc(r->n);
    worker w[2];
    memset(w, 0, sizeof w);
    if (!e.half_of)
        goto out_map;
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
    struct sigaction bus, old_bus;
    memset(&bus, 0, sizeof bus);
    bus.sa_sigaction = on_bus;
    bus.sa_flags = SA_SIGINFO;
    sigemptyset(&bus.sa_mask);
    bus_engine = &e;
    sigaction(SIGBUS, &bus, &old_bus);
    pthread_t th;
    if (pthread_create(&th, NULL, second_main, &w[1]) != 0) {
        outcome = SPLIT_MAPPED_NOMEM;
    } else {
        work(&w[0]);
        pthread_join(th, NULL);
        outcome = e.outcome;
    }
    sigaction(SIGBUS, &old_bus, NULL);
    bus_engine = NULL;
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
        free(e.s[i].half[0].r);
        free(e.s[i].half[1].r);
    }
out_map:
    free(e.half_of);
    munmap(m, size);
    return outcome;
}
