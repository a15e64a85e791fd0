/*
 * extsort.c - bounded-memory exact deduplication (see dedup/extsort.h for the
 * algorithm and its IO cost).
 *
 * Vocabulary.  A *node* deduplicates one stream of records: the top node gets
 * the caller's pushes, a node at depth d > 0 reads one partition written by
 * its parent.  Each node owns an in-memory table; when it is full the node
 * spills the records of unknown keys into P partitions held in a temporary
 * file shared by every node of the same depth (SP[depth]), and later runs
 * one child node per partition, whose outputs go, one contiguous extent each,
 * to the result file RS[depth].  The node then merges those extents (plus,
 * for DUPLICATES, the repeats it recognised itself after spilling, and for
 * sorted order its own sorted table) into its output: the emit callback for
 * the top node, the parent's result file otherwise.  Nodes of one depth run
 * one after the other, so SP/RS are truncated and reused.
 *
 * Stream encoding (all integers LEB128 varints):
 *   [seq delta]  when the stream is in sequence order
 *   [count]      result streams of DEDUP_EXTSORT_COUNT
 *   keylen, recenc (0: record == key, else record length + 1), key, record
 * First-occurrence result streams drop a key that differs from its record
 * (keylen 0): only sorted merges compare keys.
 *
 * On disk a stream is a sequence of frames (tf_write / rd_frame): header
 * (u32 stored length | FR_RAW, u32 raw length, u64 XXH3-64 of the payload
 * seeded with both lengths) + LZ4 block or raw bytes.  Extents (blk) are in
 * file bytes and always hold whole frames; readers decode whole frames.
 */
#define _GNU_SOURCE /* O_TMPFILE, O_CLOEXEC */
#include "dedup/extsort.h"

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <lz4.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#define MAX_FIELD (UINT32_MAX - 1u)

/* Frame header on disk: u32 stored length (FR_RAW: the payload is the raw
 * bytes, LZ4 did not shrink them), u32 raw length, u64 XXH3-64 of the payload
 * seeded with both lengths. */
#define FH 16u
#define FR_RAW UINT32_C(0x80000000)

/* LZ4's acceleration for every frame.  Spill streams are URL-like records in
 * hash order, written once and read once.  Against the default 1, 8 packs
 * 37% faster (751 against 546 MB/s on a sample of such lines in 64 KiB
 * frames) and writes 15% more bytes (971 against 847 MiB on 1.2 GB at 64
 * MiB), for 11% less wall time on that run (medians of 3: 5.68 s, 6.41 s). */
#define LZ4_ACCEL 8

/* ---- Engine ---------------------------------------------------------------- */

/* Block reuse: how many freed blocks of at least ES_CACHE_MIN bytes are kept. */
#define ES_CACHE_N 64
#define ES_CACHE_MIN ((size_t)64 << 10)

typedef struct tfile {
    int fd;
    uint64_t size;
} tfile;

typedef struct blk {
    uint64_t off;
    uint64_t len;
} blk;

struct dedup_extsort {
    dedup_allocator alloc;
    dedup_extsort_params p;
    char *tmpdir;
    size_t budget;
    dedup_status err;
    int io_errno;
    uint64_t io_needed;
    int emit_rc;
    bool finished;
    uint64_t seq;
    size_t mem_cur;
    /* Large blocks freed and kept for reuse (see "Block reuse" below). */
    struct cached_blk {
        void *p;
        size_t n;
    } cache[ES_CACHE_N];
    size_t ncache, cached;
    struct helper *hp; /* the compressing thread (params.threads >= 2), once spilled */
    struct decoder *dec; /* the final merge's decode-ahead thread, while it runs */
    size_t hb_frames;  /* frames per batch for it; 0: no thread (none asked for, too
                          small a budget, or it could not be started) */
    pthread_mutex_t wlock; /* serialises params.write_fn between threads */
    pthread_mutex_t *wl;   /* &wlock once initialised, or the parent's in a shadow engine */
    size_t shadow_held;    /* what the shadow engines still hold (their peaks while they run) */
    dedup_extsort_stats st;
    tfile sp[DEDUP_EXTSORT_MAX_DEPTH + 1];
    tfile rs[DEDUP_EXTSORT_MAX_DEPTH + 1];
    struct node *top;
    blk *runs; /* sorted order: the sorted runs written so far, oldest first */
    size_t nruns, capruns;
    /* Compression scratch, shared by every stream (one thread): the LZ4
     * state and one frame's header + worst-case compressed payload, used to
     * compress on write and to read a frame before decompressing it. */
    size_t frame;          /* raw bytes per frame at most */
    uint8_t *zbuf;         /* FH + LZ4_COMPRESSBOUND(frame) bytes */
    size_t zcap;
    void *zstate;          /* LZ4_sizeofState() bytes */
    size_t zstate_n;
    /* Giant records (see "Giant records" below). */
    size_t giant_min;      /* longer records that are their own key are giants */
    tfile gf;
    struct giant *g;       /* every distinct giant, and DUPLICATES' repeats, by seq */
    size_t ng, capg;
    size_t *gord, ngord, gordcap; /* sorted order: distinct giants by key */
    size_t gnext;          /* first giant (of g or gord) not yet written out */
    bool gpre_ok;          /* gbuf holds the prefix of that giant */
    uint8_t *gbuf;         /* giant_min bytes: staging of pieces, then prefixes */
    uint8_t *xsmem;        /* the streaming digest state, 64-byte aligned inside */
    bool in_piece, piece_giant; /* between push_begin and push_end; spilled to GF */
    size_t plen;
    uint64_t poff, ptotal;
};

/* Bytes the compression scratch takes once the engine has spilled. */
static size_t scratch_bytes(const dedup_extsort *es) { return es->zcap + es->zstate_n; }
static size_t giant_reserve(const dedup_extsort *es);

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
    dd_free(&es->alloc, es->cache[i].p);
    cache_take(es, i);
}

static void cache_clear(dedup_extsort *es)
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

static void note_peak(dedup_extsort *es)
{
    size_t held = es->mem_cur + es->cached + es->shadow_held;
    if (held > es->st.peak_memory)
        es->st.peak_memory = held;
}

static void *es_alloc(dedup_extsort *es, size_t n)
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
    void *p = dd_malloc(&es->alloc, n);
    if (p) {
        es->mem_cur += n;
        note_peak(es);
    }
    return p;
}

static void es_free(dedup_extsort *es, void *p, size_t n)
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
    dd_free(&es->alloc, p);
}

static void *es_realloc(dedup_extsort *es, void *p, size_t old, size_t n)
{
    if (n > old)
        cache_room(es, n - old);
    void *q = dd_realloc(&es->alloc, p, old, n);
    if (q) {
        es->mem_cur = es->mem_cur - old + n;
        note_peak(es);
    }
    return q;
}

/* Room for element number n of an array of *cap elements of 'elem' bytes:
 * returns the array, doubled (from 'first') when full; NULL if that fails
 * (the old array stays valid). */
static void *es_grow(dedup_extsort *es, void *arr, size_t n, size_t *cap, size_t elem,
                     size_t first)
{
    if (n < *cap)
        return arr;
    size_t nc = *cap ? *cap * 2 : first;
    void *na = es_realloc(es, arr, *cap * elem, nc * elem);
    if (na)
        *cap = nc;
    return na;
}

static dedup_status fail(dedup_extsort *es, dedup_status s)
{
    if (es->err == DEDUP_OK)
        es->err = s;
    return s;
}

/* ---- Temporary files ----------------------------------------------------- */

static void hp_start(dedup_extsort *es);

static dedup_status tf_open(dedup_extsort *es, tfile *f)
{
    if (f->fd >= 0)
        return DEDUP_OK;
    if (!es->zbuf) { /* the first temporary file: compression scratch too */
        es->zbuf = es_alloc(es, es->zcap);
        if (!es->zbuf)
            return fail(es, DEDUP_ERR_NOMEM);
        es->zstate = es_alloc(es, es->zstate_n);
        if (!es->zstate)
            return fail(es, DEDUP_ERR_NOMEM);
    }
    int fd = -1;
#ifdef O_TMPFILE
    fd = open(es->tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) {
        size_t n = strlen(es->tmpdir) + 32;
        char *path = es_alloc(es, n);
        if (!path)
            return fail(es, DEDUP_ERR_NOMEM);
        snprintf(path, n, "%s/.dedup-spill-XXXXXX", es->tmpdir);
        fd = mkstemp(path);
        if (fd >= 0) {
            unlink(path); /* nameless from now on: nothing can be left behind */
            (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
        }
        es_free(es, path, n);
    }
    if (fd < 0) {
        es->io_errno = errno;
        es->io_needed = es->st.bytes_spilled;
        return fail(es, DEDUP_ERR_IO);
    }
    f->fd = fd;
    f->size = 0;
    es->st.spilled = true;
    hp_start(es);
    return DEDUP_OK;
}

/* The caller's write hook, one call at a time whatever the thread. */
static ptrdiff_t call_write_fn(const dedup_extsort *es, int fd, const void *buf, size_t len)
{
    if (es->wl)
        pthread_mutex_lock(es->wl);
    ptrdiff_t n = es->p.write_fn(es->p.write_ctx, fd, buf, len);
    int e = errno;
    if (es->wl)
        pthread_mutex_unlock(es->wl);
    errno = e;
    return n;
}

/* Where write_iov writes: at the descriptor's offset (appending). */
#define AT_END UINT64_MAX

/* Writes the n pieces iov[] to fd in order, all of them, at the descriptor's
 * offset (AT_END) or from offset 'off' on: with writev/pwritev, or through
 * params.write_fn one piece (at most 1 GiB of it) per call, after a seek to
 * 'off' made under the hook's lock with the calls.  iov[] is used up.
 * '*written' gets the bytes accepted.  Returns 0, or the errno of the
 * failure (ENOSPC for a write that accepts nothing). */
static int write_iov(const dedup_extsort *es, int fd, struct iovec *iov, size_t n, uint64_t off,
                     uint64_t *written)
{
    *written = 0;
    bool locked = off != AT_END && es->p.write_fn && es->wl;
    if (locked)
        pthread_mutex_lock(es->wl);
    if (off != AT_END && es->p.write_fn && lseek(fd, (off_t)off, SEEK_SET) < 0) {
        int e = errno;
        if (locked)
            pthread_mutex_unlock(es->wl);
        return e;
    }
    int err = 0;
    for (size_t k = 0; k < n;) {
        if (iov[k].iov_len == 0) {
            k++;
            continue;
        }
        ptrdiff_t r;
        int cnt = n - k > IOV_MAX ? IOV_MAX : (int)(n - k);
        if (es->p.write_fn) {
            size_t chunk = iov[k].iov_len > (size_t)1 << 30 ? (size_t)1 << 30 : iov[k].iov_len;
            r = locked ? es->p.write_fn(es->p.write_ctx, fd, iov[k].iov_base, chunk)
                       : call_write_fn(es, fd, iov[k].iov_base, chunk);
        } else if (off != AT_END) {
            r = (ptrdiff_t)pwritev(fd, iov + k, cnt, (off_t)(off + *written));
        } else {
            r = (ptrdiff_t)writev(fd, iov + k, cnt);
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            err = r < 0 && errno ? errno : ENOSPC;
            break;
        }
        *written += (uint64_t)r;
        for (size_t left = (size_t)r; left > 0;) {
            if (left >= iov[k].iov_len) {
                left -= iov[k++].iov_len;
            } else {
                iov[k].iov_base = (uint8_t *)iov[k].iov_base + left;
                iov[k].iov_len -= left;
                left = 0;
            }
        }
    }
    if (locked)
        pthread_mutex_unlock(es->wl);
    return err;
}

/* Writes 'len' bytes to 'f': appended (AT_END, the file grows), or at 'off'
 * of space already handed out (part_place). */
static dedup_status tf_write_raw(dedup_extsort *es, tfile *f, const void *buf, size_t len,
                                 uint64_t off)
{
    uint64_t done;
    struct iovec v = {(void *)buf, len};
    int e = write_iov(es, f->fd, &v, 1, off, &done);
    if (off == AT_END)
        f->size += done;
    es->st.bytes_spilled += done;
    if (e) {
        es->io_errno = e;
        es->io_needed = es->st.bytes_spilled + (len - done);
        return fail(es, DEDUP_ERR_IO);
    }
    return DEDUP_OK;
}

static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static uint64_t frame_check(const void *payload, size_t n, uint32_t stored, uint32_t raw)
{
    return XXH3_64bits_withSeed(payload, n, ((uint64_t)raw << 32) | stored);
}

/* Encodes 'raw' bytes (at most es->frame) as one frame into 'out' (es->zcap
 * bytes); returns the frame's length. */
static size_t frame_pack(void *zstate, const uint8_t *q, size_t raw, uint8_t *out, size_t zcap)
{
    int z = LZ4_compress_fast_extState(zstate, (const char *)q, (char *)out + FH, (int)raw,
                                       (int)(zcap - FH), LZ4_ACCEL);
    size_t n;
    uint32_t stored;
    if (z > 0 && (size_t)z < raw) {
        n = (size_t)z;
        stored = (uint32_t)n;
    } else {
        n = raw;
        stored = (uint32_t)raw | FR_RAW;
        memcpy(out + FH, q, raw);
    }
    wr32(out, stored);
    wr32(out + 4, (uint32_t)raw);
    wr64(out + 8, frame_check(out + FH, n, stored, (uint32_t)raw));
    return FH + n;
}

static dedup_status hp_sync(dedup_extsort *es);
struct part;
static uint64_t part_place(const dedup_extsort *es, tfile *f, struct part *p, uint64_t dlen);
static dedup_status part_extent(dedup_extsort *es, struct part *p, uint64_t off, uint64_t dlen,
                                size_t rawlen);

/* Writes 'len' stream bytes to 'f' (open) as frames of at most es->frame raw
 * bytes, each LZ4-compressed on its own (kept raw if that does not shrink
 * it) behind its header: appended, or, for partition p (not NULL), each at
 * its place in p's region of the file (part_place), its extent recorded. */
static dedup_status frames_write(dedup_extsort *es, tfile *f, struct part *p, const void *buf,
                                 size_t len)
{
    const uint8_t *q = buf;
    while (len > 0) {
        size_t raw = len < es->frame ? len : es->frame;
        size_t fl = frame_pack(es->zstate, q, raw, es->zbuf, es->zcap);
        uint64_t off = p ? part_place(es, f, p, fl) : AT_END;
        dedup_status s = tf_write_raw(es, f, es->zbuf, fl, off);
        if (s == DEDUP_OK && p)
            s = part_extent(es, p, off, fl, raw);
        if (s != DEDUP_OK)
            return s;
        es->st.bytes_spilled_raw += raw;
        q += raw;
        len -= raw;
    }
    return DEDUP_OK;
}

/* Appends 'len' stream bytes to 'f' as frames (frames_write). */
static dedup_status tf_write(dedup_extsort *es, tfile *f, const void *buf, size_t len)
{
    dedup_status s = hp_sync(es); /* frames still queued go first */
    if (s != DEDUP_OK)
        return s;
    if ((s = tf_open(es, f)) != DEDUP_OK)
        return s;
    return frames_write(es, f, NULL, buf, len);
}

/* pread(2) of exactly 'len' bytes, adding them to *nread; on failure the
 * errno in *eno.  Touches no engine state: the merge's decoding thread calls
 * it too. */
static dedup_status pread_full(int fd, void *buf, size_t len, uint64_t off, uint64_t *nread,
                               int *eno)
{
    uint8_t *q = buf;
    while (len > 0) {
        ssize_t n = pread(fd, q, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *eno = errno;
            return DEDUP_ERR_IO;
        }
        if (n == 0)
            return DEDUP_ERR_TRUNCATED;
        q += n;
        len -= (size_t)n;
        off += (uint64_t)n;
        *nread += (uint64_t)n;
    }
    return DEDUP_OK;
}

/* Records a failed read (pread_full's status and errno) on the engine. */
static dedup_status read_failed(dedup_extsort *es, dedup_status s, int eno)
{
    if (s == DEDUP_ERR_IO) {
        es->io_errno = eno;
        es->io_needed = es->st.bytes_spilled;
    }
    return fail(es, s);
}

/* Drops a temporary file's content so the next node of its depth reuses it. */
static void tf_reset(dedup_extsort *es, tfile *f)
{
    (void)hp_sync(es); /* nothing may still be queued for it (errors are sticky) */
    if (f->fd >= 0 && f->size > 0) {
        /* write(2) appends at the descriptor's offset: rewind it too.  If
         * either call fails the next writer simply appends past the old
         * data, which stays correct. */
        if (ftruncate(f->fd, 0) != 0 || lseek(f->fd, 0, SEEK_SET) != 0)
            return;
        f->size = 0;
    }
}

static size_t clampz(size_t v, size_t lo, size_t hi) { return v < lo ? lo : v > hi ? hi : v; }

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
 * queued (hp_sync), so the files are exactly as the single-threaded engine
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

static size_t pbuf_size(const dedup_extsort *es) { return clampz(es->budget / 1024, 4096, 64 << 10); }

/* What the thread's buffers take with batches of 'frames' frames. */
static size_t helper_cost(const dedup_extsort *es, size_t frames)
{
    return HB_QUEUE * frames * (pbuf_size(es) + sizeof(uint8_t *) + es->zcap) + es->zstate_n +
           sizeof(helper);
}

/* Frames per batch: as many as HB_FRAMES while the thread's buffers take at
 * most 1/16 of the budget; below 2 (budgets under ~860 KiB) no thread. */
static size_t hb_frames_for(const dedup_extsort *es)
{
    if (es->p.threads < 2)
        return 0;
    for (size_t f = HB_FRAMES; f >= 2; f /= 2)
        if (helper_cost(es, f) <= es->budget / 16)
            return f;
    return 0;
}

static bool threaded(const dedup_extsort *es) { return es->hb_frames >= 2; }

/* What the thread's buffers take of the budget (reserved from the start). */
static size_t helper_bytes(const dedup_extsort *es)
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
    fr->dlen = frame_pack(z, fr->raw, fr->rawlen, b->out + i * es->zcap, es->zcap);
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
        return write_iov(es, b->fd, iov, b->n, AT_END, &b->written);
    }
    for (size_t i = 0; i < b->n; i++)
        b->fr[i].off = part_place(es, b->f, b->fr[i].p, b->fr[i].dlen);
    b->written = 0;
    for (size_t i = 0; i < b->n;) {
        size_t m = 0;
        uint64_t at = b->fr[i].off, end = at, done;
        for (; i < b->n && b->fr[i].off == end; i++) {
            iov[m++] = (struct iovec){b->out + i * es->zcap, b->fr[i].dlen};
            end += b->fr[i].dlen;
        }
        int e = write_iov(es, b->fd, iov, m, at, &done);
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
        es_free(es, h->pool[i], h->pbuf);
    es_free(es, h->pool, HB_QUEUE * es->hb_frames * sizeof(uint8_t *));
    for (int i = 0; i < HB_QUEUE; i++)
        es_free(es, h->b[i].out, es->hb_frames * es->zcap);
    es_free(es, h->zstate, es->zstate_n);
}

/* Starts the thread at the first spill.  If anything fails the engine simply
 * goes on without it. */
static void hp_start(dedup_extsort *es)
{
    if (es->hp || !threaded(es))
        return;
    helper *h = es_alloc(es, sizeof *h);
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
    bool ok = (h->zstate = es_alloc(es, es->zstate_n)) != NULL &&
              (h->pool = es_alloc(es, HB_QUEUE * es->hb_frames * sizeof(uint8_t *))) != NULL;
    for (int i = 0; ok && i < HB_QUEUE; i++)
        ok = (h->b[i].out = es_alloc(es, es->hb_frames * es->zcap)) != NULL;
    while (ok && h->npool < HB_QUEUE * es->hb_frames) {
        uint8_t *b = es_alloc(es, h->pbuf);
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
    es_free(es, h, sizeof *h);
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
            s = part_extent(es, fr->p, fr->off, fr->dlen, fr->rawlen);
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
        return fail(es, DEDUP_ERR_IO);
    }
    return s;
}

/* Reaps every batch numbered below 'upto', waiting as needed. */
static dedup_status hp_reap_upto(dedup_extsort *es, size_t upto)
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
static dedup_status hp_submit(dedup_extsort *es)
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

/* Waits until every queued frame is written and accounted for. */
static dedup_status hp_sync(dedup_extsort *es)
{
    if (!es->hp)
        return DEDUP_OK;
    dedup_status s = hp_submit(es);
    dedup_status r = hp_reap_upto(es, es->hp->sub);
    return s != DEDUP_OK ? s : r;
}

/* Queues 'len' bytes at 'raw' for 'f' (open), as frames; 'p' gets their
 * extents, 'recycle' returns to the pool after the last one.  The bytes must
 * stay untouched until reaped. */
static dedup_status hp_add(dedup_extsort *es, tfile *f, const uint8_t *raw, size_t len,
                           struct part *p, uint8_t *recycle)
{
    helper *h = es->hp;
    dedup_status s = DEDUP_OK;
    if (h->cur->n && h->cur->f != f)
        s = hp_submit(es);
    while (s == DEDUP_OK && len > 0) {
        if (h->cur->n == es->hb_frames && (s = hp_submit(es)) != DEDUP_OK)
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
static uint8_t *hp_spare(dedup_extsort *es, dedup_status *s)
{
    helper *h = es->hp;
    if (h->npool == 0 && (*s = hp_sync(es)) != DEDUP_OK)
        return NULL;
    *s = DEDUP_OK;
    return h->npool ? h->pool[--h->npool] : NULL;
}

/* Stops the thread (dropping whatever is queued) and frees its buffers. */
static void hp_stop(dedup_extsort *es)
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
    es_free(es, h, sizeof *h);
}

/* ---- Varints and items ---------------------------------------------------- */

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Returns bytes consumed, 0 if the varint does not end within [p, end). */
static size_t get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    unsigned shift = 0;
    size_t n = 0;
    while (p + n < end && shift < 64) {
        uint8_t b = p[n++];
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return n;
        }
        shift += 7;
    }
    return 0;
}

enum { F_SEQ = 1, F_COUNT = 2, F_KEY = 4 };

typedef struct item {
    uint64_t seq, count;
    const uint8_t *key, *rec;
    size_t keylen, reclen;
} item;

/* An item header's longest encoding: four varints of at most 10 bytes. */
#define ITEM_HEADER_MAX 40

/* Encodes an item's header into 'h' (at most ITEM_HEADER_MAX bytes); returns
 * its length.  '*keep_key' tells whether the key bytes follow. */
static size_t item_header(uint8_t *h, int flags, uint64_t seq_delta, const item *it, bool *keep_key)
{
    size_t n = 0;
    bool same = it->rec == it->key && it->reclen == it->keylen;
    if (flags & F_SEQ)
        n += put_varint(h + n, seq_delta);
    if (flags & F_COUNT)
        n += put_varint(h + n, it->count);
    *keep_key = same || (flags & F_KEY);
    n += put_varint(h + n, *keep_key ? it->keylen : 0);
    n += put_varint(h + n, same ? 0 : (uint64_t)it->reclen + 1);
    return n;
}

/* ---- Buffered writer (result streams) ------------------------------------- */

typedef struct writer {
    tfile *f;
    uint8_t *buf;
    uint8_t *buf2; /* with the compressing thread: the buffer it may be writing */
    size_t buf2_seq; /* buf2's frames are all in batches numbered below this */
    size_t cap, len;
    uint64_t prev_seq;
    int flags;
} writer;

static dedup_status wr_init(dedup_extsort *es, writer *w, tfile *f, size_t cap, int flags)
{
    w->f = f;
    w->cap = cap;
    w->len = 0;
    w->prev_seq = 0;
    w->flags = flags;
    w->buf = es_alloc(es, cap);
    w->buf2 = NULL;
    w->buf2_seq = 0;
    if (w->buf && es->hp && !(w->buf2 = es_alloc(es, cap))) {
        es_free(es, w->buf, cap);
        w->buf = NULL;
    }
    return w->buf ? DEDUP_OK : fail(es, DEDUP_ERR_NOMEM);
}

/* With the compressing thread the buffer is queued whole and the writer goes
 * on in the other one, once the batches holding that one are reaped. */
static dedup_status wr_flush(dedup_extsort *es, writer *w)
{
    if (w->len == 0)
        return DEDUP_OK;
    dedup_status s;
    if (w->buf2 && es->hp && w->f->fd >= 0) {
        s = hp_add(es, w->f, w->buf, w->len, NULL, NULL);
        if (s == DEDUP_OK)
            s = hp_submit(es);
        uint8_t *t = w->buf;
        w->buf = w->buf2;
        w->buf2 = t;
        size_t need = w->buf2_seq;
        w->buf2_seq = es->hp->sub;
        if (s == DEDUP_OK)
            s = hp_reap_upto(es, need);
    } else {
        s = tf_write(es, w->f, w->buf, w->len);
    }
    w->len = 0;
    return s;
}

/* Flushes and waits until the stream is on disk: the file's size is final. */
static dedup_status wr_close(dedup_extsort *es, writer *w)
{
    dedup_status s = wr_flush(es, w);
    dedup_status r = hp_sync(es);
    return s != DEDUP_OK ? s : r;
}

static void wr_free(dedup_extsort *es, writer *w)
{
    if (w->buf2) /* the thread may still read them (an error here is sticky) */
        (void)hp_sync(es);
    es_free(es, w->buf, w->cap);
    es_free(es, w->buf2, w->cap);
    w->buf = w->buf2 = NULL;
}

static dedup_status wr_bytes(dedup_extsort *es, writer *w, const void *p, size_t n)
{
    if (n <= w->cap - w->len) {
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        return DEDUP_OK;
    }
    dedup_status s = wr_flush(es, w);
    if (s != DEDUP_OK)
        return s;
    if (n >= w->cap)
        return tf_write(es, w->f, p, n);
    memcpy(w->buf, p, n);
    w->len = n;
    return DEDUP_OK;
}

static dedup_status wr_item(dedup_extsort *es, writer *w, const item *it)
{
    uint8_t h[ITEM_HEADER_MAX];
    bool keep_key;
    size_t hn = item_header(h, w->flags, it->seq - w->prev_seq, it, &keep_key);
    w->prev_seq = it->seq;
    bool same = it->rec == it->key && it->reclen == it->keylen;
    size_t total = hn + (keep_key ? it->keylen : 0) + (same ? 0 : it->reclen);
    if (total <= w->cap - w->len) { /* fast path */
        uint8_t *o = w->buf + w->len;
        memcpy(o, h, hn);
        o += hn;
        if (keep_key && it->keylen) {
            memcpy(o, it->key, it->keylen);
            o += it->keylen;
        }
        if (!same && it->reclen)
            memcpy(o, it->rec, it->reclen);
        w->len += total;
        return DEDUP_OK;
    }
    dedup_status s = wr_bytes(es, w, h, hn);
    if (s == DEDUP_OK && keep_key)
        s = wr_bytes(es, w, it->key, it->keylen);
    if (s == DEDUP_OK && !same)
        s = wr_bytes(es, w, it->rec, it->reclen);
    return s;
}

/* ---- Reader over a list of extents of a temporary file --------------------- */

struct ahead;

typedef struct reader {
    tfile *f;
    const blk *ext;
    /* The cursor: the next frame is at 'off' with 'left' bytes of extent
     * next - 1 after it.  With decode-ahead (ra) it belongs to whichever
     * thread holds the slot (RA_BUSY), and the others do not read it. */
    size_t next, n;
    uint64_t off, left;
    uint8_t *buf;
    size_t cap, lo, hi;
    uint8_t *big; /* an item larger than the buffer */
    size_t bigcap;
    uint64_t prev_seq;
    int flags;
    bool valid;
    struct ahead *ra; /* the final merge's decode-ahead slot, or NULL */
    item it;
} reader;

static dedup_status rd_init(dedup_extsort *es, reader *r, tfile *f, const blk *ext, size_t n,
                            size_t cap, int flags)
{
    memset(r, 0, sizeof *r);
    dedup_status s0 = hp_sync(es); /* the file must be complete before it is read */
    if (s0 != DEDUP_OK)
        return s0;
    r->f = f;
    r->ext = ext;
    r->n = n;
    /* Whole frames are decoded into the buffer: it holds two, so that a
     * refill always makes progress and an item up to cap - frame bytes can
     * be completed in place. */
    if (cap < 2 * es->frame)
        cap = 2 * es->frame;
    r->cap = cap;
    r->flags = flags;
    r->buf = es_alloc(es, cap);
    return r->buf ? DEDUP_OK : fail(es, DEDUP_ERR_NOMEM);
}

static void rd_free(dedup_extsort *es, reader *r)
{
    es_free(es, r->buf, r->cap);
    es_free(es, r->big, r->bigcap);
    r->buf = r->big = NULL;
}

/* Decodes the reader's next frame into 'dst' (room for es->frame bytes),
 * with 'zbuf' (es->zcap bytes) as scratch; *got is its raw length, 0 at the
 * end of the extents.  Touches no engine state (see pread_full). */
static dedup_status rd_frame(const dedup_extsort *es, reader *r, uint8_t *zbuf, uint8_t *dst,
                             size_t *got, uint64_t *nread, int *eno)
{
    *got = 0;
    while (r->left == 0) {
        if (r->next >= r->n)
            return DEDUP_OK;
        r->off = r->ext[r->next].off;
        r->left = r->ext[r->next].len;
        r->next++;
    }
    uint8_t h[FH];
    if (r->left < FH)
        return DEDUP_ERR_CORRUPT;
    dedup_status s = pread_full(r->f->fd, h, FH, r->off, nread, eno);
    if (s != DEDUP_OK)
        return s;
    r->off += FH;
    r->left -= FH;
    uint32_t stored = rd32(h), raw = rd32(h + 4);
    size_t n = stored & ~FR_RAW;
    if (raw == 0 || raw > es->frame || n > es->zcap - FH || n > r->left ||
        ((stored & FR_RAW) && n != raw))
        return DEDUP_ERR_CORRUPT;
    uint8_t *src = (stored & FR_RAW) ? dst : zbuf;
    if ((s = pread_full(r->f->fd, src, n, r->off, nread, eno)) != DEDUP_OK)
        return s;
    r->off += n;
    r->left -= n;
    if (frame_check(src, n, stored, raw) != rd64(h + 8))
        return DEDUP_ERR_CORRUPT;
    if (!(stored & FR_RAW) &&
        LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)raw) != (int)raw)
        return DEDUP_ERR_CORRUPT;
    *got = raw;
    return DEDUP_OK;
}

static dedup_status ra_take(dedup_extsort *es, reader *r, uint8_t *dst, size_t *got);

/* Moves unread bytes to the front and decodes whole frames behind them: as
 * many as fit, or with decode-ahead until 'need' bytes are there (the next
 * frames are the decoding thread's to do).  The callers keep an item within
 * cap - frame bytes, so at least one frame always fits. */
static dedup_status rd_fill(dedup_extsort *es, reader *r, size_t need)
{
    if (r->lo > 0) {
        memmove(r->buf, r->buf + r->lo, r->hi - r->lo);
        r->hi -= r->lo;
        r->lo = 0;
    }
    while (r->cap - r->hi >= es->frame) {
        size_t got;
        dedup_status s;
        if (r->ra) {
            if ((s = ra_take(es, r, r->buf + r->hi, &got)) != DEDUP_OK)
                return s;
        } else {
            int eno = 0;
            s = rd_frame(es, r, es->zbuf, r->buf + r->hi, &got, &es->st.bytes_read_back, &eno);
            if (s != DEDUP_OK)
                return read_failed(es, s, eno);
        }
        if (got == 0)
            break;
        r->hi += got;
        if (r->ra && r->hi - r->lo >= need)
            break;
    }
    return DEDUP_OK;
}

static bool rd_frames_left(const reader *r);

static bool rd_eof(const reader *r) { return r->lo == r->hi && !rd_frames_left(r); }

/* Copies 'n' stream bytes into 'dst'. */
static dedup_status rd_copy(dedup_extsort *es, reader *r, uint8_t *dst, size_t n)
{
    while (n > 0) {
        if (r->lo == r->hi) {
            dedup_status s = rd_fill(es, r, 1);
            if (s != DEDUP_OK)
                return s;
            if (r->lo == r->hi)
                return fail(es, DEDUP_ERR_TRUNCATED);
        }
        size_t k = r->hi - r->lo;
        if (k > n)
            k = n;
        memcpy(dst, r->buf + r->lo, k);
        r->lo += k;
        dst += k;
        n -= k;
    }
    return DEDUP_OK;
}

/* An item's header as it is encoded (see the top of this file). */
typedef struct ihead {
    uint64_t seq_delta, count, keylen, recenc;
    size_t len; /* header bytes */
} ihead;

/* Parses the header at p for a stream with 'flags'; false when it does not
 * end before 'end' or names a field longer than MAX_FIELD. */
static inline bool item_head(const uint8_t *p, const uint8_t *end, int flags, ihead *h)
{
    const uint8_t *p0 = p;
    size_t k;
    h->seq_delta = 0;
    h->count = 1;
    if ((flags & F_SEQ) && !(k = get_varint(p, end, &h->seq_delta)))
        return false;
    p += (flags & F_SEQ) ? k : 0;
    if ((flags & F_COUNT) && !(k = get_varint(p, end, &h->count)))
        return false;
    p += (flags & F_COUNT) ? k : 0;
    if (!(k = get_varint(p, end, &h->keylen)))
        return false;
    p += k;
    if (!(k = get_varint(p, end, &h->recenc)))
        return false;
    p += k;
    h->len = (size_t)(p - p0);
    return h->keylen <= MAX_FIELD && h->recenc <= (uint64_t)MAX_FIELD + 1;
}

/* Reads the next item into r->it; r->valid is false at the end. */
static dedup_status rd_next(dedup_extsort *es, reader *r)
{
    dedup_status s;
    if (r->hi - r->lo < 48 && rd_frames_left(r)) {
        if ((s = rd_fill(es, r, 48)) != DEDUP_OK)
            return s;
    }
    if (rd_eof(r)) {
        r->valid = false;
        return DEDUP_OK;
    }
    const uint8_t *p = r->buf + r->lo;
    item *it = &r->it;
    ihead ih;
    if (!item_head(p, r->buf + r->hi, r->flags, &ih))
        return fail(es, DEDUP_ERR_CORRUPT);
    if (r->flags & F_SEQ) {
        r->prev_seq += ih.seq_delta;
        it->seq = r->prev_seq;
    }
    it->count = ih.count;
    uint64_t keylen = ih.keylen, recenc = ih.recenc;
    size_t hn = ih.len;
    p += hn;
    size_t body = (size_t)keylen + (recenc ? (size_t)(recenc - 1) : 0);
    if (hn + body > r->hi - r->lo) {
        if (hn + body <= r->cap - es->frame) {
            if ((s = rd_fill(es, r, hn + body)) != DEDUP_OK)
                return s;
            if (hn + body > r->hi - r->lo)
                return fail(es, DEDUP_ERR_TRUNCATED);
            p = r->buf + r->lo + hn;
        } else { /* larger than the buffer: assemble it in 'big' */
            if (body > r->bigcap) {
                uint8_t *nb = es_alloc(es, body);
                if (!nb)
                    return fail(es, DEDUP_ERR_NOMEM);
                es_free(es, r->big, r->bigcap);
                r->big = nb;
                r->bigcap = body;
            }
            r->lo += hn;
            if ((s = rd_copy(es, r, r->big, body)) != DEDUP_OK)
                return s;
            p = r->big;
            hn = 0;
            body = 0;
        }
    }
    it->key = p;
    it->keylen = (size_t)keylen;
    if (recenc == 0) {
        it->rec = p;
        it->reclen = it->keylen;
    } else {
        it->rec = p + keylen;
        it->reclen = (size_t)(recenc - 1);
    }
    if (hn + body)
        r->lo += hn + body;
    /* A merge takes the next item of this reader only after (about) one of
     * every other reader: fetch its first bytes now, or they are a cache miss
     * then, with hundreds of readers' buffers between. */
    DD_PREFETCH(r->buf + r->lo);
    if (r->hi - r->lo > 64)
        DD_PREFETCH(r->buf + r->lo + 64);
    r->valid = true;
    return DEDUP_OK;
}

/* True when rd_next will return the next item without refilling the buffer,
 * which moves its bytes: the items taken before it stay where they are. */
static bool rd_ready(const reader *r)
{
    if (r->hi - r->lo < 48 && rd_frames_left(r))
        return false;
    ihead h; /* a bad header: rd_next reports it */
    if (!item_head(r->buf + r->lo, r->buf + r->hi, r->flags, &h))
        return false;
    return h.len + h.keylen + (h.recenc ? h.recenc - 1 : 0) <= r->hi - r->lo;
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

enum { RA_EMPTY, RA_BUSY, RA_READY, RA_END, RA_ERR };

typedef struct ahead {
    atomic_int state;
    uint8_t *buf; /* es->frame bytes */
    size_t len;   /* READY: the frame's raw length */
    dedup_status err; /* ERR: what failed, and its errno */
    int eno;
} ahead;

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

static bool rd_frames_left(const reader *r)
{
    if (r->ra)
        return atomic_load_explicit(&r->ra->state, memory_order_acquire) != RA_END;
    return r->left > 0 || r->next < r->n;
}

/* Decodes the frame of a claimed (BUSY) slot and publishes the result. */
static void ra_decode(decoder *d, reader *r)
{
    ahead *a = r->ra;
    size_t got = 0;
    int eno = 0;
    dedup_status s = rd_frame(d->es, r, d->zbuf, a->buf, &got, &d->nread, &eno);
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

/* rd_fill's frame source with decode-ahead: the slot's frame if ready, else
 * the next frame decoded here (waiting only while the thread is at it). */
static dedup_status ra_take(dedup_extsort *es, reader *r, uint8_t *dst, size_t *got)
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
            return read_failed(es, a->err, a->eno);
        case RA_EMPTY:
            if (ra_claim(a)) {
                int eno = 0;
                dedup_status s =
                    rd_frame(es, r, es->zbuf, dst, got, &es->st.bytes_read_back, &eno);
                if (s != DEDUP_OK) {
                    a->err = s;
                    a->eno = eno;
                    atomic_store_explicit(&a->state, RA_ERR, memory_order_release);
                    return read_failed(es, s, eno);
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
static bool dec_reserve(const dedup_extsort *es, bool final, size_t k, size_t *avail)
{
    if (es->p.threads < 2 || !final || k < 2 ||
        *avail / k < 2 * es->frame + dec_bytes(es, k) / k)
        return false;
    *avail -= dec_bytes(es, k);
    return true;
}

/* Starts decode-ahead for the k readers (already initialised); false (and
 * nothing changed) if memory or the thread is refused. */
static bool dec_start(dedup_extsort *es, reader *src, size_t k)
{
    decoder *d = es_alloc(es, sizeof *d);
    if (!d)
        return false;
    memset(d, 0, sizeof *d);
    d->es = es;
    d->src = src;
    d->k = k;
    d->slot = es_alloc(es, k * sizeof(ahead));
    d->zbuf = es_alloc(es, es->zcap);
    bool ok = d->slot && d->zbuf;
    size_t i = 0;
    if (ok)
        for (; i < k; i++) {
            d->slot[i].buf = es_alloc(es, es->frame);
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
        es_free(es, d->slot[j].buf, es->frame);
    es_free(es, d->slot, k * sizeof(ahead));
    es_free(es, d->zbuf, es->zcap);
    es_free(es, d, sizeof *d);
    return false;
}

/* Stops the thread and frees what dec_start took; the readers' cursors are
 * theirs again (unused: the merge is over). */
static void dec_stop(dedup_extsort *es)
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
        es_free(es, d->slot[j].buf, es->frame);
    }
    es_free(es, d->slot, d->k * sizeof(ahead));
    es_free(es, d->zbuf, es->zcap);
    es_free(es, d, sizeof *d);
    es->dec = NULL;
}

/* ---- The in-memory table ---------------------------------------------------
 * Open addressing with linear probing; a slot is the digest's low 64 bits and
 * a pointer to the entry in an arena of chunks laid out in insertion order:
 *   u64 seq, [u64 count], u32 keylen, u32 recenc, key, [record]
 * Why not dedup_strset: an entry here also carries the first occurrence's
 * sequence number and its record (which may differ from the key), the arena
 * is walked in insertion order, and the slot array is reused in place as the
 * sort array of sorted order; strset keeps keys only, and parallel arrays
 * for the rest would cost more memory than this whole table. */

typedef struct slot {
    uint64_t tag;
    uint8_t *e;
} slot;

typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
} chunk;

typedef struct table {
    slot *slots;
    size_t mask, n;
    chunk *head, *tail;
    size_t arena, limit, chunk_size, hdr;
    bool counting;
} table;

#define CHUNK_DATA(c) ((uint8_t *)((c) + 1))
#define TABLE_MIN_SLOTS 256

static dedup_status table_init(dedup_extsort *es, table *t, size_t limit, bool counting)
{
    memset(t, 0, sizeof *t);
    t->limit = limit;
    t->counting = counting;
    t->hdr = counting ? 24 : 16;
    /* Chunks of limit/32 (at least 4 KiB); from 32 MiB limits on, of 2 MiB
     * less 128 bytes with their header, so that an allocator that maps large
     * blocks on huge pages (the CLI's) fits each, with its own header, in one
     * 2 MiB page.  Entries are probed at random, and on 4 KiB pages nearly
     * every probe also missed the TLB. */
    t->chunk_size = limit / 32 < ((size_t)1 << 20) ? clampz(limit / 32, 4096, (size_t)1 << 20)
                                                    : ((size_t)2 << 20) - 128 - sizeof(chunk);
    t->slots = es_alloc(es, TABLE_MIN_SLOTS * sizeof(slot));
    if (!t->slots)
        return fail(es, DEDUP_ERR_NOMEM);
    memset(t->slots, 0, TABLE_MIN_SLOTS * sizeof(slot));
    t->mask = TABLE_MIN_SLOTS - 1;
    return DEDUP_OK;
}

static void table_free(dedup_extsort *es, table *t)
{
    chunk *c = t->head;
    while (c) {
        chunk *nx = c->next;
        es_free(es, c, sizeof(chunk) + c->cap);
        c = nx;
    }
    t->head = t->tail = NULL;
    if (t->slots)
        es_free(es, t->slots, (t->mask + 1) * sizeof(slot));
    t->slots = NULL;
    t->n = 0;
}

static inline uint32_t e_keylen(const table *t, const uint8_t *e) { return rd32(e + t->hdr - 8); }
static inline uint32_t e_recenc(const table *t, const uint8_t *e) { return rd32(e + t->hdr - 4); }
static inline const uint8_t *e_key(const table *t, const uint8_t *e) { return e + t->hdr; }

static void e_item(const table *t, const uint8_t *e, item *it)
{
    it->seq = rd64(e);
    it->count = t->counting ? rd64(e + 8) : 1;
    it->keylen = e_keylen(t, e);
    it->key = e + t->hdr;
    uint32_t re = e_recenc(t, e);
    if (re == 0) {
        it->rec = it->key;
        it->reclen = it->keylen;
    } else {
        it->rec = it->key + it->keylen;
        it->reclen = re - 1;
    }
}

/* Finds the key's entry, or the empty slot where it belongs. */
static inline slot *table_find(const table *t, dedup_digest d, const uint8_t *key, size_t keylen)
{
    size_t i = (size_t)d.lo & t->mask;
    for (;;) {
        slot *s = &t->slots[i];
        if (!s->e)
            return s;
        if (s->tag == d.lo && e_keylen(t, s->e) == keylen &&
            memcmp(e_key(t, s->e), key, keylen) == 0)
            return s;
        i = (i + 1) & t->mask;
    }
}

static size_t table_bytes(const table *t) { return t->arena + (t->mask + 1) * sizeof(slot); }

/* Inserts a new key (known absent; 's' is its empty slot).  Returns
 * DEDUP_ERR_FULL when the entry does not fit the table's share of the
 * budget; an empty table always takes its first entry. */
static dedup_status table_insert(dedup_extsort *es, table *t, slot *s, dedup_digest d,
                                 uint64_t seq, const item *it)
{
    bool same = it->rec == it->key && it->reclen == it->keylen;
    size_t esz = t->hdr + it->keylen + (same ? 0 : it->reclen);
    bool empty = t->n == 0;
    /* Grow the slot array first (old and new arrays live together briefly). */
    if ((t->n + 1) * 4 > (t->mask + 1) * 3) {
        size_t oldn = t->mask + 1, newn = oldn * 2;
        if (!empty && table_bytes(t) + newn * sizeof(slot) + esz > t->limit)
            return DEDUP_ERR_FULL;
        slot *ns = es_alloc(es, newn * sizeof(slot));
        if (!ns)
            return fail(es, DEDUP_ERR_NOMEM);
        memset(ns, 0, newn * sizeof(slot));
        for (size_t i = 0; i < oldn; i++) {
            if (!t->slots[i].e)
                continue;
            size_t j = (size_t)t->slots[i].tag & (newn - 1);
            while (ns[j].e)
                j = (j + 1) & (newn - 1);
            ns[j] = t->slots[i];
        }
        es_free(es, t->slots, oldn * sizeof(slot));
        t->slots = ns;
        t->mask = newn - 1;
        s = table_find(t, d, it->key, it->keylen);
    }
    if (!t->tail || t->tail->cap - t->tail->used < esz) {
        size_t cap = esz > t->chunk_size ? esz : t->chunk_size;
        if (!empty && table_bytes(t) + sizeof(chunk) + cap > t->limit)
            return DEDUP_ERR_FULL;
        chunk *c = es_alloc(es, sizeof(chunk) + cap);
        if (!c)
            return fail(es, DEDUP_ERR_NOMEM);
        c->next = NULL;
        c->cap = cap;
        c->used = 0;
        if (t->tail)
            t->tail->next = c;
        else
            t->head = c;
        t->tail = c;
        t->arena += sizeof(chunk) + cap;
    }
    uint8_t *e = CHUNK_DATA(t->tail) + t->tail->used;
    t->tail->used += esz;
    wr64(e, seq);
    if (t->counting)
        wr64(e + 8, 1);
    uint32_t kl = (uint32_t)it->keylen, re = same ? 0 : (uint32_t)it->reclen + 1;
    memcpy(e + t->hdr - 8, &kl, 4);
    memcpy(e + t->hdr - 4, &re, 4);
    if (it->keylen)
        memcpy(e + t->hdr, it->key, it->keylen);
    if (!same && it->reclen)
        memcpy(e + t->hdr + it->keylen, it->rec, it->reclen);
    s->tag = d.lo;
    s->e = e;
    t->n++;
    return DEDUP_OK;
}

/* Calls fn on every entry in insertion order. */
#define TABLE_FOREACH(t, e)                                                          \
    for (chunk *c_ = (t)->head; c_; c_ = c_->next)                                   \
        for (uint8_t *e = CHUNK_DATA(c_); e < CHUNK_DATA(c_) + c_->used;             \
             e += (t)->hdr + e_keylen((t), e) +                                      \
                  (e_recenc((t), e) ? e_recenc((t), e) - 1 : 0))

/* ---- Sorting entries by key --------------------------------------------------
 * A multikey quicksort (Bentley & Sedgewick) whose "characters" are 8-byte
 * big-endian words of the key, cached next to the entry pointer: a
 * partitioning step reads only the contiguous array, and an entry is touched
 * once per 8 bytes of the prefix that tells it apart (instead of once per
 * byte and per level), which matters when the table is far larger than the
 * cache.  A key ending inside a word sorts before the longer keys sharing
 * that word (memcmp order: a prefix first). */

static inline int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

typedef struct sel {
    uint64_t w; /* big-endian key bytes [8 * depth, 8 * depth + 8), zero padded */
    uint8_t *e;
} sel;

static inline uint64_t key_word(const table *t, const uint8_t *e, size_t wd)
{
    size_t kl = e_keylen(t, e), off = wd * 8;
    const uint8_t *k = e_key(t, e) + off;
    uint64_t v = 0;
    if (off + 8 <= kl) {
        memcpy(&v, k, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        v = __builtin_bswap64(v);
#endif
        return v;
    }
    for (size_t i = 0; off + i < kl; i++)
        v |= (uint64_t)k[i] << (56 - 8 * i);
    return v;
}

static void wsort(const table *t, sel *a, size_t n, size_t wd)
{
    while (n > 1) {
        if (n < 16) { /* insertion sort on the bytes from 8 * wd on */
            size_t off = wd * 8;
            for (size_t i = 1; i < n; i++) {
                sel x = a[i];
                size_t xl = e_keylen(t, x.e) - off, j = i;
                while (j > 0) {
                    const sel *y = &a[j - 1];
                    if (y->w < x.w)
                        break;
                    if (y->w == x.w && key_cmp(e_key(t, y->e) + off, e_keylen(t, y->e) - off,
                                               e_key(t, x.e) + off, xl) <= 0)
                        break;
                    a[j] = a[j - 1];
                    j--;
                }
                a[j] = x;
            }
            return;
        }
        uint64_t c0 = a[0].w, c1 = a[n / 2].w, c2 = a[n - 1].w;
        uint64_t v = c0 < c1 ? (c1 < c2 ? c1 : (c0 < c2 ? c2 : c0))
                             : (c0 < c2 ? c0 : (c1 < c2 ? c2 : c1));
        /* three-way partition: [0,lt) < v, [lt,gt) == v, [gt,n) > v */
        size_t lt = 0, i = 0, gt = n;
        while (i < gt) {
            if (a[i].w < v) {
                sel tmp = a[lt];
                a[lt++] = a[i];
                a[i++] = tmp;
            } else if (a[i].w > v) {
                sel tmp = a[--gt];
                a[gt] = a[i];
                a[i] = tmp;
            } else {
                i++;
            }
        }
        wsort(t, a, lt, wd);
        wsort(t, a + gt, n - gt, wd);
        /* equal words: keys ending within this word first (shorter first;
         * two such keys of one length would be equal keys), then the longer
         * ones, sorted on their next word */
        sel *b = a + lt;
        size_t m = gt - lt, nend = 0, lim = (wd + 1) * 8;
        for (size_t k = 0; k < m; k++) {
            if (k + 8 < m)
                DD_PREFETCH(b[k + 8].e);
            if (e_keylen(t, b[k].e) <= lim) {
                sel tmp = b[nend];
                b[nend++] = b[k];
                b[k] = tmp;
            } else {
                b[k].w = key_word(t, b[k].e, wd + 1);
            }
        }
        for (size_t k = 1; k < nend; k++) {
            sel x = b[k];
            size_t j = k;
            while (j > 0 && e_keylen(t, b[j - 1].e) > e_keylen(t, x.e)) {
                b[j] = b[j - 1];
                j--;
            }
            b[j] = x;
        }
        a = b + nend;
        n = m - nend;
        wd++;
    }
}

/* Rewrites the slot array as an array of entries sorted by key and returns
 * it (the table can no longer be probed afterwards). */
_Static_assert(sizeof(sel) == sizeof(slot), "sorting reuses the slot array");
static sel *table_sorted(table *t)
{
    sel *arr = (sel *)(void *)t->slots; /* a slot and a sel are both 16 bytes */
    /* Two sequential passes over the arena (insertion order, no random
     * access): the bytes all keys share with the first one, then the sort
     * array with each key's first word past that common prefix (URLs share
     * "https://www." and would otherwise cost a whole refill level). */
    size_t lcp = SIZE_MAX;
    const uint8_t *k0 = NULL;
    TABLE_FOREACH(t, e)
    {
        if (lcp < 8)
            break;
        const uint8_t *k = e_key(t, e);
        size_t l = e_keylen(t, e), q = 0;
        if (!k0) {
            k0 = k;
            lcp = l;
            continue;
        }
        size_t m = lcp < l ? lcp : l;
        while (q < m && k[q] == k0[q])
            q++;
        lcp = q;
    }
    size_t wd = lcp == SIZE_MAX ? 0 : lcp / 8, j = 0;
    TABLE_FOREACH(t, e)
    {
        sel x = {key_word(t, e, wd), e};
        memcpy(&arr[j++], &x, sizeof x); /* slot memory, no longer probed */
    }
    wsort(t, arr, j, wd);
    return arr;
}

/* ---- Nodes -------------------------------------------------------------- */

typedef struct part {
    uint8_t *buf;
    size_t len;
    uint64_t prev_seq, bytes;
    blk *blocks;
    size_t nblk, capblk;
    uint64_t roff, rleft; /* its current region of the file: next frame's place, room left */
} part;

typedef struct node {
    int depth;
    table t;
    bool spilled, table_live;
    uint32_t P;
    size_t pbuf;
    part *parts;
    writer direct; /* DUPLICATES after the spill point */
    bool direct_live;
    uint64_t direct_start;
    writer *out; /* NULL at the top: emit */
    int spill_flags, res_flags;
    unsigned shift;
    uint64_t *frz; /* once spilled: the frozen table's prefilter (see frz_build) */
    size_t frz_words, frz_cap;
} node;

static bool counting(const dedup_extsort *es)
{
    return es->p.output == DEDUP_EXTSORT_COUNT || es->p.output == DEDUP_EXTSORT_UNIQUE;
}

/* Read/write buffer size for a node's input and output streams. */
static size_t io_buf(const dedup_extsort *es) { return clampz(es->budget / 16, 4096, 1 << 20); }

static dedup_status node_init(dedup_extsort *es, node *n, int depth, writer *out)
{
    memset(n, 0, sizeof *n);
    n->depth = depth;
    n->out = out;
    n->pbuf = pbuf_size(es);
    n->P = (uint32_t)clampz(es->budget / (4 * n->pbuf), 4, 256);
    n->shift = (unsigned)(depth * 11) & 63;
    /* Partitions are only used in first-occurrence order (sorted order
     * writes sorted runs instead, see runs_add). */
    bool sorted = es->p.order == DEDUP_EXTSORT_SORTED;
    n->spill_flags = F_SEQ | F_KEY;
    n->res_flags = F_SEQ | (es->p.output == DEDUP_EXTSORT_COUNT ? F_COUNT : 0);
    /* What is left for the table once the spill buffers, this node's input
     * buffer, its output buffer and the DUPLICATES buffer are reserved. */
    size_t reserve = n->P * n->pbuf + (size_t)n->P * 64 + 3 * io_buf(es) + 4096;
    if (sorted && depth == 0) /* sorted runs: only the run writer's buffer */
        reserve = io_buf(es) + 8192;
    if (threaded(es)) /* the compressing thread's buffers; writers' second buffers */
        reserve += helper_bytes(es) + (sorted && depth == 0 ? 1 : 2) * io_buf(es);
    reserve += scratch_bytes(es) + giant_reserve(es); /* compression; giant records */
    size_t limit = es->budget > reserve + 16384 ? es->budget - reserve : 16384;
    if (!(sorted && depth == 0)) { /* the prefilter's share, once spilled */
        n->frz_cap = (limit / 64) & ~(size_t)63;
        limit -= n->frz_cap;
    }
    dedup_status s = table_init(es, &n->t, limit, counting(es));
    if (s == DEDUP_OK)
        n->table_live = true;
    return s;
}

/* ---- The frozen table's prefilter ---------------------------------------------
 * Once a node spills, its table is frozen: every later record is looked up in
 * it, and unless the repeats favour old keys almost all miss.  Each lookup is
 * a cache miss on a table of tens of MiB, on the engine's busiest thread.  So
 * the table's keys also go into a blocked Bloom filter of 1/64 of the table's
 * memory (at 64 MiB: 618 KiB for 393k keys, 12.9 bits a key, small enough to
 * stay in the core's cache): one 64-bit word per key, picked by bits 32-63
 * of the digest's low half (the slot tag), with 4 bits set by bits 0-23.  A
 * record the filter rules out is not looked up.  The filter has no false
 * negatives, so nothing changes but the cost; about 1% of the misses still
 * look (0.9% measured on random digests).  1.2 GB of URLs at 64 MiB, same
 * run, output identical: 5.41 -> 4.65 s (medians of 3). */

static inline uint64_t frz_mask(uint64_t lo)
{
    return (UINT64_C(1) << (lo & 63)) | (UINT64_C(1) << ((lo >> 6) & 63)) |
           (UINT64_C(1) << ((lo >> 12) & 63)) | (UINT64_C(1) << ((lo >> 18) & 63));
}

static inline size_t frz_word(const node *n, uint64_t lo)
{
    return (size_t)(((lo >> 32) * (uint64_t)n->frz_words) >> 32);
}

/* False only for a digest whose key is not in the frozen table. */
static inline bool frz_maybe(const node *n, dedup_digest d)
{
    if (!n->frz)
        return true;
    uint64_t m = frz_mask(d.lo);
    return (n->frz[frz_word(n, d.lo)] & m) == m;
}

/* Builds the prefilter from the slots' tags, when the node spills; without
 * its memory (a tiny budget) every record is looked up as before. */
static void frz_build(dedup_extsort *es, node *n)
{
    size_t words = n->frz_cap / 8;
    if (words < 8 || n->t.n == 0 || words > UINT32_MAX)
        return;
    n->frz = es_alloc(es, n->frz_cap);
    if (!n->frz)
        return;
    memset(n->frz, 0, n->frz_cap);
    n->frz_words = words;
    for (size_t i = 0; i <= n->t.mask; i++) {
        const slot *sl = &n->t.slots[i];
        if (sl->e)
            n->frz[frz_word(n, sl->tag)] |= frz_mask(sl->tag);
    }
}

static void frz_free(dedup_extsort *es, node *n)
{
    es_free(es, n->frz, n->frz_cap);
    n->frz = NULL;
    n->frz_words = 0;
}

/* Records that 'dlen' file bytes at 'off' hold 'rawlen' bytes of p's stream. */
static dedup_status part_extent(dedup_extsort *es, part *p, uint64_t off, uint64_t dlen,
                                size_t rawlen)
{
    if (p->nblk > 0 && p->blocks[p->nblk - 1].off + p->blocks[p->nblk - 1].len == off) {
        p->blocks[p->nblk - 1].len += dlen; /* contiguous with the previous block */
    } else {
        blk *nb = es_grow(es, p->blocks, p->nblk, &p->capblk, sizeof(blk), 8);
        if (!nb)
            return fail(es, DEDUP_ERR_NOMEM);
        p->blocks = nb;
        p->blocks[p->nblk++] = (blk){off, dlen};
    }
    p->bytes += rawlen;
    return DEDUP_OK;
}

/* ---- Regions ------------------------------------------------------------------
 * The partitions' frames are written in the order they fill, all partitions
 * mixed, so if each were appended to the file a partition's extent list would
 * hold one entry per frame (16 bytes per 2-64 KiB frame, memory that grows
 * with the input whatever the budget).  Instead the file is handed out in
 * regions of REGION_FRAMES frame buffers (64 KiB - 1 MiB), one partition's
 * each: a frame goes at the end of its partition's current region, or starts
 * a new region at the end of the file, so the list holds one entry per
 * region.  A region's unused tail is a hole: never written or read, and no
 * disk space where the filesystem has sparse files.  Placing a frame
 * needs its packed length: with the compressing thread it is done there
 * (hb_write), and the partition's region is touched by no other thread until
 * the batch is reaped. */
#define REGION_FRAMES 16

/* Where a packed frame of 'dlen' bytes of partition p goes in file f. */
static uint64_t part_place(const dedup_extsort *es, tfile *f, part *p, uint64_t dlen)
{
    if (p->rleft < dlen) {
        uint64_t r = REGION_FRAMES * (uint64_t)pbuf_size(es);
        if (r < dlen)
            r = dlen;
        p->roff = f->size;
        p->rleft = r;
        f->size += r;
    }
    uint64_t off = p->roff;
    p->roff += dlen;
    p->rleft -= dlen;
    return off;
}

static dedup_status part_flush(dedup_extsort *es, node *n, part *p, const void *data, size_t len)
{
    tfile *f = &es->sp[n->depth];
    dedup_status s = tf_open(es, f);
    if (s != DEDUP_OK)
        return s;
    if (es->hp && data == p->buf) { /* the thread packs and writes it; p takes a spare */
        uint8_t *spare = hp_spare(es, &s);
        if (!spare)
            return s != DEDUP_OK ? s : fail(es, DEDUP_ERR_NOMEM);
        uint8_t *full = p->buf;
        p->buf = spare;
        return hp_add(es, f, full, len, p, full);
    }
    if ((s = hp_sync(es)) != DEDUP_OK)
        return s;
    return frames_write(es, f, p, data, len);
}

static dedup_status part_put(dedup_extsort *es, node *n, part *p, const void *data, size_t len)
{
    if (len <= n->pbuf - p->len) {
        memcpy(p->buf + p->len, data, len);
        p->len += len;
        return DEDUP_OK;
    }
    dedup_status s;
    if (p->len) {
        if ((s = part_flush(es, n, p, p->buf, p->len)) != DEDUP_OK)
            return s;
        p->len = 0;
    }
    if (len >= n->pbuf)
        return part_flush(es, n, p, data, len);
    memcpy(p->buf, data, len);
    p->len = len;
    return DEDUP_OK;
}

static dedup_status node_start_spill(dedup_extsort *es, node *n)
{
    if (n->depth >= DEDUP_EXTSORT_MAX_DEPTH)
        return fail(es, DEDUP_ERR_LIMIT);
    n->parts = es_alloc(es, n->P * sizeof(part));
    if (!n->parts)
        return fail(es, DEDUP_ERR_NOMEM);
    memset(n->parts, 0, n->P * sizeof(part));
    for (uint32_t i = 0; i < n->P; i++) {
        n->parts[i].buf = es_alloc(es, n->pbuf);
        if (!n->parts[i].buf)
            return fail(es, DEDUP_ERR_NOMEM);
    }
    if (es->p.output == DEDUP_EXTSORT_DUPLICATES) {
        dedup_status s = wr_init(es, &n->direct, &es->rs[n->depth], io_buf(es), F_SEQ);
        if (s != DEDUP_OK)
            return s;
        if ((s = tf_open(es, &es->rs[n->depth])) != DEDUP_OK)
            return s;
        n->direct_live = true;
        if ((s = hp_sync(es)) != DEDUP_OK)
            return s;
        n->direct_start = es->rs[n->depth].size;
    }
    n->spilled = true;
    frz_build(es, n);
    if ((uint64_t)n->depth + 1 > es->st.max_depth)
        es->st.max_depth = (uint64_t)n->depth + 1;
    return DEDUP_OK;
}

static void node_free(dedup_extsort *es, node *n)
{
    if (n->parts) /* queued frames name its partitions */
        (void)hp_sync(es);
    if (n->table_live)
        table_free(es, &n->t);
    n->table_live = false;
    frz_free(es, n);
    if (n->parts) {
        for (uint32_t i = 0; i < n->P; i++) {
            es_free(es, n->parts[i].buf, n->pbuf);
            es_free(es, n->parts[i].blocks, n->parts[i].capblk * sizeof(blk));
        }
        es_free(es, n->parts, n->P * sizeof(part));
        n->parts = NULL;
    }
    if (n->direct_live)
        wr_free(es, &n->direct);
    n->direct_live = false;
}

/* ---- Giant records ------------------------------------------------------------
 * With params.emit_piece set, a record that is its own key and is longer than
 * es->giant_min (pushed in pieces, or whole by push()) never enters a table or
 * a stream: its bytes go, as compressed frames, straight to the giant file GF
 * and an entry (sequence number, digest, extent, length, count) stays in
 * memory.  A new giant is compared with the earlier distinct giants of the
 * same digest and length by streaming both from GF (two frame readers); a
 * repeat only counts (its bytes are truncated away again, except for
 * DUPLICATES output, which must write it later).  Giants are written out by
 * streaming them from GF to emit_piece: at once while first-occurrence output
 * streams, else interleaved with the other output at the top level in
 * sequence order (node_out) or, in sorted order, in key order: no ordinary
 * key is longer than giant_min, so the giant's first giant_min bytes decide
 * where it goes, and the giants are sorted among themselves by streaming
 * comparisons before the final merge. */

enum { G_DUP = 1, G_DONE = 2 };

typedef struct giant {
    uint64_t seq, count, off, dlen, rawlen;
    dedup_digest d;
    unsigned flags;
} giant;

/* The giants' share of the budget: the staging buffer, two frame readers and
 * the streaming digest state. */
static size_t giant_reserve(const dedup_extsort *es)
{
    return es->p.emit_piece ? es->giant_min + 4 * es->frame + 2 * sizeof(reader) +
                                  sizeof(XXH3_state_t) + 64
                            : 0;
}

/* Drops what was appended to 'f' from 'off' on (a repeated giant). */
static void tf_truncate(tfile *f, uint64_t off)
{
    if (f->fd >= 0 && f->size > off && ftruncate(f->fd, (off_t)off) == 0 &&
        lseek(f->fd, (off_t)off, SEEK_SET) == (off_t)off)
        f->size = off;
}

/* Makes the next bytes of a raw-stream reader available; false at its end. */
static dedup_status rd_more(dedup_extsort *es, reader *r, bool *more)
{
    dedup_status s = DEDUP_OK;
    if (r->lo == r->hi)
        s = rd_fill(es, r, 1);
    *more = s == DEDUP_OK && r->lo < r->hi;
    return s;
}

/* Streams giants a and b from GF and compares them as keys (memcmp, then
 * shorter first). */
static dedup_status giant_cmp(dedup_extsort *es, const giant *a, const giant *b, int *res)
{
    blk ea = {a->off, a->dlen}, eb = {b->off, b->dlen};
    reader ra, rb;
    memset(&rb, 0, sizeof rb);
    dedup_status s = rd_init(es, &ra, &es->gf, &ea, 1, 2 * es->frame, 0);
    if (s == DEDUP_OK)
        s = rd_init(es, &rb, &es->gf, &eb, 1, 2 * es->frame, 0);
    *res = 0;
    while (s == DEDUP_OK) {
        bool ma, mb;
        if ((s = rd_more(es, &ra, &ma)) != DEDUP_OK || (s = rd_more(es, &rb, &mb)) != DEDUP_OK)
            break;
        if (!ma || !mb) {
            *res = ma ? 1 : mb ? -1 : 0;
            break;
        }
        size_t na = ra.hi - ra.lo, nb = rb.hi - rb.lo, m = na < nb ? na : nb;
        int c = memcmp(ra.buf + ra.lo, rb.buf + rb.lo, m);
        if (c) {
            *res = c;
            break;
        }
        ra.lo += m;
        rb.lo += m;
    }
    rd_free(es, &ra);
    rd_free(es, &rb);
    return s;
}

/* Streams giant g from GF to emit_piece. */
static dedup_status giant_emit(dedup_extsort *es, giant *g)
{
    blk e = {g->off, g->dlen};
    reader r;
    dedup_status s = rd_init(es, &r, &es->gf, &e, 1, 2 * es->frame, 0);
    uint64_t left = g->rawlen;
    bool first = true;
    while (s == DEDUP_OK && left > 0) {
        bool more;
        if ((s = rd_more(es, &r, &more)) != DEDUP_OK)
            break;
        size_t n = r.hi - r.lo;
        if (!more || n > left) {
            s = fail(es, more ? DEDUP_ERR_CORRUPT : DEDUP_ERR_TRUNCATED);
            break;
        }
        left -= n;
        int rc = es->p.emit_piece(es->p.emit_ctx, r.buf + r.lo, n, first, left == 0,
                                  es->p.output == DEDUP_EXTSORT_COUNT ? g->count : 1);
        r.lo = r.hi;
        first = false;
        if (rc) {
            es->emit_rc = rc;
            s = fail(es, DEDUP_ERR_CANCELLED);
        }
    }
    rd_free(es, &r);
    if (s == DEDUP_OK) {
        es->st.records_out++;
        g->flags |= G_DONE;
    }
    return s;
}

/* Whether giant g is still to be written out. */
static bool giant_due(const dedup_extsort *es, const giant *g)
{
    if (g->flags & G_DONE)
        return false;
    if (es->p.output == DEDUP_EXTSORT_DUPLICATES)
        return (g->flags & G_DUP) != 0;
    return !(g->flags & G_DUP) && (es->p.output != DEDUP_EXTSORT_UNIQUE || g->count == 1);
}

/* Reads the first giant_min bytes of g into es->gpre. */
static dedup_status giant_prefix(dedup_extsort *es, const giant *g)
{
    blk e = {g->off, g->dlen};
    reader r;
    dedup_status s = rd_init(es, &r, &es->gf, &e, 1, 2 * es->frame, 0);
    size_t have = 0;
    while (s == DEDUP_OK && have < es->giant_min) {
        bool more;
        if ((s = rd_more(es, &r, &more)) != DEDUP_OK)
            break;
        if (!more) {
            s = fail(es, DEDUP_ERR_TRUNCATED);
            break;
        }
        size_t n = r.hi - r.lo;
        if (n > es->giant_min - have)
            n = es->giant_min - have;
        memcpy(es->gbuf + have, r.buf + r.lo, n);
        r.lo += n;
        have += n;
    }
    rd_free(es, &r);
    return s;
}

/* Writes out the due giants that come before 'it' at the top level (all of
 * them when it is NULL): by sequence number, or in sorted order by key. */
static dedup_status giants_before(dedup_extsort *es, const item *it)
{
    bool sorted = es->p.order == DEDUP_EXTSORT_SORTED;
    size_t end = sorted ? es->ngord : es->ng;
    while (es->gnext < end) {
        giant *g = &es->g[sorted ? es->gord[es->gnext] : es->gnext];
        if (!giant_due(es, g)) {
            es->gnext++;
            es->gpre_ok = false;
            continue;
        }
        if (it) {
            if (!sorted && g->seq > it->seq)
                break;
            if (sorted) {
                if (!es->gpre_ok) {
                    dedup_status s = giant_prefix(es, g);
                    if (s != DEDUP_OK)
                        return s;
                    es->gpre_ok = true;
                }
                /* it->keylen <= giant_min < g->rawlen: the giant comes first
                 * only if its prefix is smaller */
                if (it->keylen == 0 || memcmp(es->gbuf, it->key, it->keylen) >= 0)
                    break;
            }
        }
        dedup_status s = giant_emit(es, g);
        if (s != DEDUP_OK)
            return s;
        es->gnext++;
        es->gpre_ok = false;
    }
    return DEDUP_OK;
}

/* Sorted order, at finish: orders the distinct giants by key (binary
 * insertion, O(G log G) streaming comparisons). */
static dedup_status giants_sort(dedup_extsort *es)
{
    size_t nd = 0;
    for (size_t i = 0; i < es->ng; i++)
        nd += !(es->g[i].flags & G_DUP);
    if (nd == 0)
        return DEDUP_OK;
    es->gord = es_alloc(es, nd * sizeof(size_t));
    if (!es->gord)
        return fail(es, DEDUP_ERR_NOMEM);
    es->gordcap = nd;
    for (size_t i = 0; i < es->ng; i++) {
        if (es->g[i].flags & G_DUP)
            continue;
        size_t lo = 0, hi = es->ngord;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c;
            dedup_status s = giant_cmp(es, &es->g[es->gord[mid]], &es->g[i], &c);
            if (s != DEDUP_OK)
                return s;
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(es->gord + lo + 1, es->gord + lo, (es->ngord - lo) * sizeof(size_t));
        es->gord[lo] = i;
        es->ngord++;
    }
    return DEDUP_OK;
}

/* Whether output goes out as records arrive (first-occurrence FIRST or
 * DUPLICATES before the top node spills). */
static bool streaming(const dedup_extsort *es)
{
    return es->p.order == DEDUP_EXTSORT_FIRST_OCCURRENCE && !es->top->spilled &&
           (es->p.output == DEDUP_EXTSORT_FIRST || es->p.output == DEDUP_EXTSORT_DUPLICATES);
}

/* A giant's bytes are in GF from 'off' to its end: dedups it against the
 * earlier giants and records or writes it out. */
static dedup_status giant_add(dedup_extsort *es, uint64_t off, uint64_t rawlen, dedup_digest d)
{
    dedup_status s;
    giant *ng = es_grow(es, es->g, es->ng, &es->capg, sizeof(giant), 8);
    if (!ng)
        return fail(es, DEDUP_ERR_NOMEM);
    es->g = ng;
    giant *g = &es->g[es->ng];
    memset(g, 0, sizeof *g);
    g->seq = es->seq++;
    g->count = 1;
    g->off = off;
    g->dlen = es->gf.size - off;
    g->rawlen = rawlen;
    g->d = d;
    es->st.records_in++;
    for (size_t i = 0; i < es->ng; i++) {
        giant *o = &es->g[i];
        if ((o->flags & G_DUP) || o->d.lo != d.lo || o->d.hi != d.hi || o->rawlen != rawlen)
            continue;
        int c;
        if ((s = giant_cmp(es, o, g, &c)) != DEDUP_OK)
            return s;
        if (c != 0)
            continue;
        o->count++; /* a repeat */
        if (es->p.output != DEDUP_EXTSORT_DUPLICATES) {
            tf_truncate(&es->gf, off);
            return DEDUP_OK;
        }
        g->flags = G_DUP;
        if (streaming(es)) {
            s = giant_emit(es, g);
            tf_truncate(&es->gf, off);
            return s;
        }
        es->ng++; /* written out later, in sequence order */
        return DEDUP_OK;
    }
    es->st.distinct++;
    es->ng++;
    if (streaming(es) && es->p.output == DEDUP_EXTSORT_FIRST)
        return giant_emit(es, &es->g[es->ng - 1]);
    return DEDUP_OK;
}

/* Lazily allocates the staging buffer and the digest state. */
static dedup_status giant_buffers(dedup_extsort *es)
{
    if (!es->gbuf) {
        es->gbuf = es_alloc(es, es->giant_min);
        if (!es->gbuf)
            return fail(es, DEDUP_ERR_NOMEM);
    }
    if (!es->xsmem) {
        es->xsmem = es_alloc(es, sizeof(XXH3_state_t) + 64);
        if (!es->xsmem)
            return fail(es, DEDUP_ERR_NOMEM);
    }
    return DEDUP_OK;
}

static XXH3_state_t *xstate(dedup_extsort *es)
{
    uintptr_t p = (uintptr_t)es->xsmem;
    return (XXH3_state_t *)(void *)(es->xsmem + ((64 - (p & 63)) & 63));
}

/* push() of a giant the caller holds whole. */
static dedup_status giant_push_whole(dedup_extsort *es, const void *rec, size_t len,
                                     dedup_digest d)
{
    dedup_status s = giant_buffers(es); /* gbuf takes sorted order's prefixes */
    if (s == DEDUP_OK)
        s = tf_open(es, &es->gf);
    if (s != DEDUP_OK)
        return s;
    uint64_t off = es->gf.size;
    if ((s = tf_write(es, &es->gf, rec, len)) != DEDUP_OK)
        return s;
    return giant_add(es, off, len, d);
}

/* Sends one output item of node 'n' to its parent's result stream or to emit. */
static dedup_status node_out(dedup_extsort *es, node *n, const item *it)
{
    if (!n->out) {
        if (es->ng) {
            dedup_status s = giants_before(es, it);
            if (s != DEDUP_OK)
                return s;
        }
        es->st.records_out++;
        int rc = es->p.emit(es->p.emit_ctx, it->rec, it->reclen,
                            es->p.output == DEDUP_EXTSORT_COUNT ? it->count : 1);
        if (rc) {
            es->emit_rc = rc;
            return fail(es, DEDUP_ERR_CANCELLED);
        }
        return DEDUP_OK;
    }
    return wr_item(es, n->out, it);
}

static dedup_status node_add(dedup_extsort *es, node *n, const item *it, dedup_digest d)
{
    dedup_status s;
    slot *sl = NULL;
    if (!n->spilled || frz_maybe(n, d))
        sl = table_find(&n->t, d, it->key, it->keylen);
    if (sl && sl->e) { /* a repeat */
        if (n->t.counting) {
            uint64_t c = rd64(sl->e + 8);
            wr64(sl->e + 8, c + 1);
        }
        if (es->p.output == DEDUP_EXTSORT_DUPLICATES) {
            if (!n->spilled)
                return node_out(es, n, it);
            return wr_item(es, &n->direct, it);
        }
        return DEDUP_OK;
    }
    if (!n->spilled) {
        s = table_insert(es, &n->t, sl, d, it->seq, it);
        if (s == DEDUP_OK) {
            if (es->p.output == DEDUP_EXTSORT_FIRST &&
                es->p.order == DEDUP_EXTSORT_FIRST_OCCURRENCE)
                return node_out(es, n, it);
            return DEDUP_OK;
        }
        if (s != DEDUP_ERR_FULL)
            return s;
        if ((s = node_start_spill(es, n)) != DEDUP_OK)
            return s;
    }
    /* spill to the partition picked by digest bits this depth has not used */
    uint64_t x = n->shift ? (d.hi << n->shift) | (d.hi >> (64 - n->shift)) : d.hi;
    part *p = &n->parts[dedup_reduce(x, n->P)];
    uint8_t h[ITEM_HEADER_MAX];
    bool keep_key;
    bool same = it->rec == it->key && it->reclen == it->keylen;
    size_t body = it->keylen + (same ? 0 : it->reclen);
    uint64_t delta = it->seq - p->prev_seq;
    p->prev_seq = it->seq;
    size_t room = n->pbuf - p->len, hn;
    uint8_t *o = p->buf + p->len;
    if (body <= room && room - body >= ITEM_HEADER_MAX) {
        /* the header goes straight to the buffer: staged in h[] and read back
         * right after its byte stores, it stalled the copy */
        hn = item_header(o, n->spill_flags, delta, it, &keep_key);
    } else {
        hn = item_header(h, n->spill_flags, delta, it, &keep_key);
        if (hn + body > room)
            goto split;
        memcpy(o, h, hn);
    }
    if (it->keylen)
        memcpy(o + hn, it->key, it->keylen);
    if (!same && it->reclen)
        memcpy(o + hn + it->keylen, it->rec, it->reclen);
    p->len += hn + body;
    return DEDUP_OK;
split:
    if ((s = part_put(es, n, p, h, hn)) != DEDUP_OK)
        return s;
    if ((s = part_put(es, n, p, it->key, it->keylen)) != DEDUP_OK)
        return s;
    if (!same)
        s = part_put(es, n, p, it->rec, it->reclen);
    return s;
}

/* Emits the table's entries that belong in the output, in insertion order. */
static dedup_status table_out_ordered(dedup_extsort *es, node *n)
{
    if (es->p.output != DEDUP_EXTSORT_COUNT && es->p.output != DEDUP_EXTSORT_UNIQUE)
        return DEDUP_OK; /* FIRST went out on insertion; DUPLICATES never lists keys */
    item it;
    TABLE_FOREACH(&n->t, e)
    {
        e_item(&n->t, e, &it);
        if (es->p.output == DEDUP_EXTSORT_UNIQUE && it.count != 1)
            continue;
        dedup_status s = node_out(es, n, &it);
        if (s != DEDUP_OK)
            return s;
    }
    return DEDUP_OK;
}

/* Emits (or writes to 'w' when not NULL) the table's entries sorted by key. */
static dedup_status table_out_sorted(dedup_extsort *es, node *n, writer *w, bool filter)
{
    size_t cnt = n->t.n;
    sel *arr = table_sorted(&n->t);
    item it;
    for (size_t i = 0; i < cnt; i++) {
        if (i + 8 < cnt)
            DD_PREFETCH(arr[i + 8].e);
        e_item(&n->t, arr[i].e, &it);
        if (filter && es->p.output == DEDUP_EXTSORT_UNIQUE && it.count != 1)
            continue;
        dedup_status s = w ? wr_item(es, w, &it) : node_out(es, n, &it);
        if (s != DEDUP_OK)
            return s;
    }
    return DEDUP_OK;
}

/* ---- k-way merge with a loser tree ---------------------------------------- */

typedef struct merger {
    reader *src;
    int *tree;
    uint64_t *seq; /* sequence order: each source's head (mg_seq) */
    size_t k;
    bool by_key;
} merger;

static inline bool mg_less(const merger *m, int a, int b)
{
    const reader *x = &m->src[a], *y = &m->src[b];
    if (!x->valid)
        return false;
    if (!y->valid)
        return true;
    if (m->by_key) {
        int c = key_cmp(x->it.key, x->it.keylen, y->it.key, y->it.keylen);
        return c < 0 || (c == 0 && a < b);
    }
    return x->it.seq < y->it.seq || (x->it.seq == y->it.seq && a < b);
}

static void mg_adjust(merger *m, int s)
{
    size_t t = ((size_t)s + m->k) >> 1;
    while (t > 0) {
        if (m->tree[t] < 0) { /* building: park until the other side arrives */
            m->tree[t] = s;
            return;
        }
        if (mg_less(m, m->tree[t], s)) {
            int w = m->tree[t];
            m->tree[t] = s;
            s = w;
        }
        t >>= 1;
    }
    m->tree[0] = s;
}

/* mg_adjust for sequence order, on the built tree: the heads' sequence
 * numbers sit in one small array, all distinct (see mg_seq), and the winner
 * of each match is chosen without a branch: which way a match goes is a coin
 * toss, and the mispredictions cost more than the comparisons. */
static void mg_adjust_seq(merger *m, int s)
{
    const uint64_t *q = m->seq;
    uint64_t ks = q[s];
    for (size_t t = ((size_t)s + m->k) >> 1; t > 0; t >>= 1) {
        int o = m->tree[t];
        uint64_t ko = q[o];
        int ow = -(int)(ko < ks); /* all ones when the parked one wins */
        int w = (o & ow) | (s & ~ow);
        m->tree[t] = o ^ s ^ w;
        s = w;
        ks = q[w];
    }
    m->tree[0] = s;
}

/* Source i's head for mg_adjust_seq: its sequence number, or once it has
 * ended one of k values above every sequence number, distinct per source. */
static inline uint64_t mg_seq(const merger *m, size_t i)
{
    return m->src[i].valid ? m->src[i].it.seq : UINT64_MAX - m->k + i;
}

/* Merges the k result extents ext[] (in files[], or all in RS[depth]). */
static dedup_status node_merge(dedup_extsort *es, node *n, const blk *ext, tfile *const *files,
                               size_t k)
{
    dedup_status s = DEDUP_OK;
    merger m = {0};
    m.k = k;
    m.by_key = false; /* partition results are in sequence order */
    /* Read buffers get what the budget has left beside the output buffer,
     * this merge's bookkeeping and the node's partition array. */
    size_t fixed = (n->out ? (n->out->buf2 ? 2 : 1) * n->out->cap : 0) +
                   k * (sizeof(reader) + sizeof(int) + sizeof(blk)) + n->P * sizeof(part) +
                   scratch_bytes(es) + giant_reserve(es) + helper_bytes(es) + 8192;
    size_t avail = es->budget > fixed ? es->budget - fixed : 4096;
    bool use_ahead = dec_reserve(es, !n->out, k, &avail);
    size_t rb = clampz(avail / (k ? k : 1), 4096, 1 << 20);
    m.src = es_alloc(es, k * sizeof(reader));
    if (m.src) /* zeroed at once: the cleanup below frees every reader */
        memset(m.src, 0, k * sizeof(reader));
    m.tree = es_alloc(es, k * sizeof(int));
    m.seq = es_alloc(es, k * sizeof(uint64_t));
    if (!m.src || !m.tree || !m.seq) {
        s = fail(es, DEDUP_ERR_NOMEM);
        goto done;
    }
    for (size_t i = 0; i < k; i++)
        m.tree[i] = -1;
    for (size_t i = 0; i < k && s == DEDUP_OK; i++) {
        s = rd_init(es, &m.src[i], files ? files[i] : &es->rs[n->depth], &ext[i], 1, rb,
                    n->res_flags);
        if (s == DEDUP_OK)
            s = rd_next(es, &m.src[i]);
        m.seq[i] = mg_seq(&m, i);
    }
    if (s != DEDUP_OK)
        goto done;
    if (use_ahead)
        (void)dec_start(es, m.src, k);
    es->st.merge_passes++;
    for (size_t i = 0; i < k; i++)
        mg_adjust(&m, (int)i);
    for (;;) {
        int w = m.tree[0];
        if (!m.src[w].valid)
            break;
        if ((s = node_out(es, n, &m.src[w].it)) != DEDUP_OK)
            break;
        if ((s = rd_next(es, &m.src[w])) != DEDUP_OK)
            break;
        m.seq[w] = mg_seq(&m, (size_t)w);
        mg_adjust_seq(&m, w);
    }
done:
    dec_stop(es);
    if (m.src)
        for (size_t i = 0; i < k; i++)
            rd_free(es, &m.src[i]);
    es_free(es, m.src, k * sizeof(reader));
    es_free(es, m.tree, k * sizeof(int));
    es_free(es, m.seq, k * sizeof(uint64_t));
    return s;
}

static dedup_status node_finish(dedup_extsort *es, node *n);

/* Deduplicates partition 'p' of node 'n' (depth d) into RS[d] through 'w'. */
static dedup_status run_child(dedup_extsort *es, node *n, tfile *src, part *p, writer *w)
{
    node *c = es_alloc(es, sizeof(node));
    if (!c)
        return fail(es, DEDUP_ERR_NOMEM);
    reader r;
    bool rlive = false;
    dedup_status s = node_init(es, c, n->depth + 1, w);
    if (s == DEDUP_OK) {
        s = rd_init(es, &r, src, p->blocks, p->nblk, io_buf(es), n->spill_flags);
        rlive = s == DEDUP_OK;
    }
    /* In batches of the items that are whole in the read buffer, so that
     * their table slots are fetched together rather than one miss at a time
     * (the table of a partition is tens of MiB at large budgets).  5 GB of
     * URLs at 64 MiB, same run, output identical: 29.22 -> 25.90 s, user
     * time 37.7 -> 34.3 s (medians of 3; no change at 1.2 GB, whose
     * partitions' tables stay in the cache). */
    enum { RB = 32, AHEAD = 4 };
    item it[RB];
    dedup_digest dg[RB];
    while (s == DEDUP_OK) {
        if ((s = rd_next(es, &r)) != DEDUP_OK || !r.valid)
            break;
        size_t m = 0;
        it[m++] = r.it;
        while (m < RB && rd_ready(&r) && (s = rd_next(es, &r)) == DEDUP_OK)
            it[m++] = r.it;
        const table *t = &c->t;
        for (size_t i = 0; i < m; i++) {
            dg[i] = dedup_hash(it[i].key, it[i].keylen, es->p.seed);
            if (!c->spilled || frz_maybe(c, dg[i]))
                DD_PREFETCH(&t->slots[(size_t)dg[i].lo & t->mask]);
        }
        for (size_t i = 0; i < m && s == DEDUP_OK; i++) {
            if (i + AHEAD < m && !c->spilled) {
                const slot *sl = &t->slots[(size_t)dg[i + AHEAD].lo & t->mask];
                if (sl->e && sl->tag == dg[i + AHEAD].lo)
                    DD_PREFETCH(sl->e);
            }
            s = node_add(es, c, &it[i], dg[i]);
        }
    }
    if (rlive)
        rd_free(es, &r);
    if (s == DEDUP_OK)
        s = node_finish(es, c);
    node_free(es, c);
    es_free(es, c, sizeof(node));
    return s;
}

/* ---- Partitions in parallel -------------------------------------------------
 * With the compressing thread (params.threads >= 2), the top node's
 * partitions are deduplicated two at a time: the engine's thread and one more
 * each take the next partition in turn (an atomic counter) and run its child
 * node in a shadow engine of their own: half of what the budget has left, its
 * own compression scratch, statistics, errors and temporary files (results,
 * and deeper levels if a partition still does not fit).  Both read the
 * partition file with pread.  The results are merged as before, each extent
 * read from the file of the shadow that wrote it; a finished shadow gives
 * its memory back and keeps only that file open until the merge is done.
 * The output and the statistics are those of one thread, except the peak,
 * which adds up both shadows' peaks.  Below 512 KiB per shadow (budgets under
 * ~1.2 MiB) the partitions go one at a time. */

typedef struct pshared {
    node *n;
    tfile *src;            /* the partition file */
    atomic_uint next;      /* next partition to take */
    atomic_bool stop;      /* a worker failed */
    blk *pext;             /* per partition: its results' extent */
    unsigned char *pwho;   /* per partition: which shadow holds them */
} pshared;

typedef struct pworker {
    pshared *ps;
    dedup_extsort *e;      /* this worker's shadow engine */
    unsigned id;
    dedup_status s;
} pworker;

typedef struct par {
    bool used;
    dedup_extsort *e[2];
    tfile **files;         /* per merged extent: the file it is in */
    size_t nfiles;
} par;

static void shadow_free(dedup_extsort *es, dedup_extsort *sh)
{
    if (!sh)
        return;
    for (int i = 0; i <= DEDUP_EXTSORT_MAX_DEPTH; i++) {
        if (sh->sp[i].fd >= 0)
            close(sh->sp[i].fd);
        if (sh->rs[i].fd >= 0)
            close(sh->rs[i].fd);
    }
    es_free(sh, sh->zbuf, sh->zcap);
    es_free(sh, sh->zstate, sh->zstate_n);
    cache_clear(sh);
    es_free(es, sh, sizeof *sh);
}

static dedup_extsort *shadow_new(dedup_extsort *es, size_t budget)
{
    dedup_extsort *sh = es_alloc(es, sizeof *sh);
    if (!sh)
        return NULL;
    memset(sh, 0, sizeof *sh);
    sh->alloc = es->alloc;
    sh->p = es->p;
    sh->p.threads = 1;
    sh->p.emit_piece = NULL; /* giants never reach a partition */
    sh->tmpdir = es->tmpdir;
    sh->budget = budget;
    sh->frame = es->frame;
    sh->zcap = es->zcap;
    sh->zstate_n = es->zstate_n;
    sh->giant_min = es->giant_min;
    sh->wl = es->wl;
    sh->gf.fd = -1;
    for (int i = 0; i <= DEDUP_EXTSORT_MAX_DEPTH; i++)
        sh->sp[i].fd = sh->rs[i].fd = -1;
    sh->zbuf = es_alloc(sh, sh->zcap);
    sh->zstate = es_alloc(sh, sh->zstate_n);
    if (!sh->zbuf || !sh->zstate) {
        shadow_free(es, sh);
        return NULL;
    }
    return sh;
}

/* Deduplicates partition p of node n, read from 'src', with engine e (the
 * node's own, or a shadow) into e's result file of that depth; '*ext' gets
 * the results' extent (empty when there are none). */
static dedup_status run_partition(dedup_extsort *e, node *n, tfile *src, part *p, blk *ext)
{
    tfile *out = &e->rs[n->depth];
    writer w;
    dedup_status s;
    *ext = (blk){0, 0};
    if ((s = tf_open(e, out)) != DEDUP_OK || (s = hp_sync(e)) != DEDUP_OK ||
        (s = wr_init(e, &w, out, io_buf(e), n->res_flags)) != DEDUP_OK)
        return s;
    uint64_t start = out->size;
    s = run_child(e, n, src, p, &w);
    if (s == DEDUP_OK)
        s = wr_close(e, &w);
    wr_free(e, &w);
    if (s == DEDUP_OK)
        *ext = (blk){start, out->size - start};
    return s;
}

/* Drops a partition's block list once its child has run. */
static void part_done(dedup_extsort *es, part *p)
{
    es_free(es, p->blocks, p->capblk * sizeof(blk));
    p->blocks = NULL;
    p->capblk = p->nblk = 0;
}

static void *pw_run(void *arg)
{
    pworker *w = arg;
    pshared *ps = w->ps;
    node *n = ps->n;
    dedup_status s = DEDUP_OK;
    while (s == DEDUP_OK && !atomic_load(&ps->stop)) {
        unsigned i = atomic_fetch_add(&ps->next, 1u);
        if (i >= n->P)
            break;
        if (!n->parts[i].bytes)
            continue;
        s = run_partition(w->e, n, ps->src, &n->parts[i], &ps->pext[i]);
        ps->pwho[i] = (unsigned char)w->id;
    }
    if (s != DEDUP_OK)
        atomic_store(&ps->stop, true);
    w->s = s;
    return NULL;
}

static void par_free(dedup_extsort *es, par *pr)
{
    es->shadow_held = 0;
    for (int j = 0; j < 2; j++)
        shadow_free(es, pr->e[j]);
    es_free(es, pr->files, pr->nfiles * sizeof(tfile *));
    memset(pr, 0, sizeof *pr);
}

/* Step 3 of node_finish for the top node, two partitions at a time: appends
 * the result extents to ext[*k..] (pr->files names their files).  Leaves
 * pr->used false when the budget is too small (the caller goes on alone). */
static dedup_status children_parallel(dedup_extsort *es, node *n, blk *ext, size_t *k,
                                      size_t extcap, par *pr)
{
    memset(pr, 0, sizeof *pr);
    cache_clear(es);
    size_t extra = 2 * sizeof(dedup_extsort) + n->P * (sizeof(blk) + 1) + extcap * sizeof(tfile *);
    size_t used = es->mem_cur + extra + 16384;
    size_t each = es->budget > used ? (es->budget - used) / 2 : 0;
    if (each < ((size_t)512 << 10))
        return DEDUP_OK;
    dedup_status s = DEDUP_OK;
    pshared ps;
    memset(&ps, 0, sizeof ps);
    ps.n = n;
    ps.src = &es->sp[n->depth];
    atomic_init(&ps.next, 0u);
    atomic_init(&ps.stop, false);
    ps.pext = es_alloc(es, n->P * sizeof(blk));
    ps.pwho = es_alloc(es, n->P);
    pr->files = es_alloc(es, extcap * sizeof(tfile *));
    pr->nfiles = extcap;
    pr->e[0] = shadow_new(es, each);
    pr->e[1] = shadow_new(es, each);
    if (!ps.pext || !ps.pwho || !pr->files || !pr->e[0] || !pr->e[1]) {
        s = fail(es, DEDUP_ERR_NOMEM);
        goto done;
    }
    memset(ps.pext, 0, n->P * sizeof(blk));
    pr->used = true;
    pworker w[2] = {{&ps, pr->e[0], 0, DEDUP_OK}, {&ps, pr->e[1], 1, DEDUP_OK}};
    pthread_t th;
    bool two = pthread_create(&th, NULL, pw_run, &w[1]) == 0;
    pw_run(&w[0]);
    if (two)
        pthread_join(th, NULL);
    else
        pw_run(&w[1]); /* nothing left for it unless w[0] stopped early */
    size_t peaks = 0;
    for (int j = 0; j < 2; j++) {
        /* From here on a shadow only holds its result file open for the
         * merge: its memory goes back before the merge takes the budget. */
        dedup_extsort *e = pr->e[j];
        es_free(e, e->zbuf, e->zcap);
        es_free(e, e->zstate, e->zstate_n);
        e->zbuf = e->zstate = NULL;
        cache_clear(e);
        const dedup_extsort_stats *t = &e->st;
        es->st.bytes_spilled += t->bytes_spilled;
        es->st.bytes_read_back += t->bytes_read_back;
        es->st.bytes_spilled_raw += t->bytes_spilled_raw;
        es->st.distinct += t->distinct;
        es->st.runs_written += t->runs_written;
        es->st.merge_passes += t->merge_passes;
        if (t->max_depth > es->st.max_depth)
            es->st.max_depth = t->max_depth;
        peaks += (size_t)t->peak_memory;
    }
    for (int j = 0; j < 2 && s == DEDUP_OK; j++) { /* the first failure, with everything written */
        dedup_extsort *e = pr->e[j];
        if ((s = w[j].s) == DEDUP_OK)
            continue;
        es->io_errno = e->io_errno;
        uint64_t more = e->io_needed > e->st.bytes_spilled ? e->io_needed - e->st.bytes_spilled : 0;
        es->io_needed = es->st.bytes_spilled + more;
        es->emit_rc = e->emit_rc;
    }
    es->shadow_held = peaks;
    note_peak(es);
    es->shadow_held = 0;
    for (int j = 0; j < 2; j++) /* what they keep through the merge */
        es->shadow_held += pr->e[j]->mem_cur + pr->e[j]->cached;
    if (s != DEDUP_OK) {
        s = fail(es, s);
        goto done;
    }
    for (size_t j = 0; j < *k; j++) /* the node's own extent, if any */
        pr->files[j] = &es->rs[n->depth];
    for (uint32_t i = 0; i < n->P; i++) {
        part *p = &n->parts[i];
        if (p->bytes)
            es->st.runs_written++;
        if (ps.pext[i].len) {
            ext[*k] = ps.pext[i];
            pr->files[*k] = &pr->e[ps.pwho[i]]->rs[n->depth];
            (*k)++;
        }
        part_done(es, p);
    }
done:
    es_free(es, ps.pext, n->P * sizeof(blk));
    es_free(es, ps.pwho, n->P);
    return s;
}

/* Ends node 'n': outputs the table, then the merged results of its partitions. */
static dedup_status node_finish(dedup_extsort *es, node *n)
{
    dedup_status s = DEDUP_OK;
    bool sorted = es->p.order == DEDUP_EXTSORT_SORTED;
    if (!n->spilled) {
        s = sorted ? table_out_sorted(es, n, NULL, true) : table_out_ordered(es, n);
        es->st.distinct += n->t.n;
        table_free(es, &n->t);
        n->table_live = false;
        return s;
    }
    int d = n->depth;
    tfile *rs = &es->rs[d];
    blk *ext = NULL;
    size_t k = 0, extcap = (size_t)n->P + 1;
    /* 1. the partitions' last blocks */
    for (uint32_t i = 0; i < n->P && s == DEDUP_OK; i++) {
        part *p = &n->parts[i];
        if (p->len)
            s = part_flush(es, n, p, p->buf, p->len);
        p->len = 0;
        es_free(es, p->buf, n->pbuf);
        p->buf = NULL;
    }
    if (s == DEDUP_OK) /* every extent and byte count is known from here on */
        s = hp_sync(es);
    if (s != DEDUP_OK)
        return s;
    if ((s = tf_open(es, rs)) != DEDUP_OK)
        return s;
    ext = es_alloc(es, extcap * sizeof(blk));
    if (!ext)
        return fail(es, DEDUP_ERR_NOMEM);
    /* 2. what this node recognised itself */
    es->st.distinct += n->t.n;
    if (n->direct_live) {
        s = wr_close(es, &n->direct);
        wr_free(es, &n->direct);
        n->direct_live = false;
        if (s == DEDUP_OK && rs->size > n->direct_start)
            ext[k++] = (blk){n->direct_start, rs->size - n->direct_start};
    } else {
        s = table_out_ordered(es, n);
    }
    table_free(es, &n->t);
    n->table_live = false;
    frz_free(es, n);
    /* 3. each partition, one level down (two at a time at the top, with threads) */
    par pr = {0};
    if (s == DEDUP_OK && d == 0 && threaded(es))
        s = children_parallel(es, n, ext, &k, extcap, &pr);
    for (uint32_t i = 0; i < n->P && s == DEDUP_OK && !pr.used; i++) {
        part *p = &n->parts[i];
        if (!p->bytes)
            continue;
        es->st.runs_written++;
        blk e;
        if ((s = run_partition(es, n, &es->sp[d], p, &e)) == DEDUP_OK && e.len)
            ext[k++] = e;
        part_done(es, p);
    }
    tf_reset(es, &es->sp[d]);
    /* 4. merge */
    if (s == DEDUP_OK && k > 0)
        s = node_merge(es, n, ext, pr.used ? pr.files : NULL, k);
    par_free(es, &pr);
    es_free(es, ext, extcap * sizeof(blk));
    tf_reset(es, rs);
    return s;
}

/* ---- Sorted order: sorted runs and a combining k-way merge -----------------
 * In sorted order nothing can be emitted before the end, so the full table is
 * not frozen as in first-occurrence order: it is written out as a sorted run
 * (its distinct keys, their counts and first records) and cleared.  finish()
 * merges the runs with the loser tree, combining equal keys (counts summed,
 * the record of the oldest run kept, since ties go to the lower run index),
 * in several passes when there are more runs than the budget has read
 * buffers of max(8 KiB, 2 frames) for.  IO: each record not repeated within
 * its run's window is written once and read once, plus once more per extra
 * merge pass (none below ~budget^2 / 128 KiB of distinct data: ~30 GB at 64
 * MiB, since a reader decodes whole 64 KiB frames). */

static int run_flags(const dedup_extsort *es) { return F_KEY | (counting(es) ? F_COUNT : 0); }

static dedup_status runs_flush(dedup_extsort *es, node *n)
{
    tfile *f = &es->sp[0];
    dedup_status s = tf_open(es, f);
    if (s != DEDUP_OK)
        return s;
    blk *nr = es_grow(es, es->runs, es->nruns, &es->capruns, sizeof(blk), 16);
    if (!nr)
        return fail(es, DEDUP_ERR_NOMEM);
    es->runs = nr;
    writer w;
    if ((s = hp_sync(es)) != DEDUP_OK)
        return s;
    uint64_t start = f->size;
    if ((s = wr_init(es, &w, f, io_buf(es), run_flags(es))) != DEDUP_OK)
        return s;
    s = table_out_sorted(es, n, &w, false);
    if (s == DEDUP_OK)
        s = wr_close(es, &w);
    wr_free(es, &w);
    if (s != DEDUP_OK)
        return s;
    es->runs[es->nruns++] = (blk){start, f->size - start};
    es->st.runs_written++;
    es->st.max_depth = 1;
    size_t limit = n->t.limit;
    table_free(es, &n->t);
    n->table_live = false;
    if ((s = table_init(es, &n->t, limit, counting(es))) != DEDUP_OK)
        return s;
    n->table_live = true;
    return DEDUP_OK;
}

static dedup_status runs_add(dedup_extsort *es, const item *it, dedup_digest d)
{
    node *n = es->top;
    slot *sl = table_find(&n->t, d, it->key, it->keylen);
    if (sl->e) {
        if (n->t.counting)
            wr64(sl->e + 8, rd64(sl->e + 8) + 1);
        return DEDUP_OK;
    }
    dedup_status s = table_insert(es, &n->t, sl, d, it->seq, it);
    if (s != DEDUP_ERR_FULL)
        return s;
    if ((s = runs_flush(es, n)) != DEDUP_OK)
        return s;
    sl = table_find(&n->t, d, it->key, it->keylen);
    return table_insert(es, &n->t, sl, d, it->seq, it); /* an empty table takes it */
}

/* The item being combined while the merge looks for more of its key. */
typedef struct held {
    uint8_t *buf;
    size_t cap;
    item it;
    bool have;
} held;

static dedup_status held_set(dedup_extsort *es, held *h, const item *it)
{
    bool same = it->rec == it->key && it->reclen == it->keylen;
    size_t need = it->keylen + (same ? 0 : it->reclen);
    if (need > h->cap || !h->buf) { /* never hand out NULL, even for "" */
        size_t nc = need > 2 * h->cap ? need : 2 * h->cap;
        if (nc < 256)
            nc = 256;
        uint8_t *nb = es_alloc(es, nc);
        if (!nb)
            return fail(es, DEDUP_ERR_NOMEM);
        es_free(es, h->buf, h->cap);
        h->buf = nb;
        h->cap = nc;
    }
    if (it->keylen)
        memcpy(h->buf, it->key, it->keylen);
    if (!same && it->reclen)
        memcpy(h->buf + it->keylen, it->rec, it->reclen);
    h->it = *it;
    h->it.key = h->buf;
    h->it.rec = same ? h->buf : h->buf + it->keylen;
    h->have = true;
    return DEDUP_OK;
}

/* Writes the combined item to 'w', or emits it when 'w' is NULL. */
static dedup_status held_out(dedup_extsort *es, held *h, writer *w)
{
    if (w)
        return wr_item(es, w, &h->it);
    es->st.distinct++;
    if (es->p.output == DEDUP_EXTSORT_UNIQUE && h->it.count != 1)
        return DEDUP_OK;
    return node_out(es, es->top, &h->it);
}

static size_t runs_fan_in(const dedup_extsort *es)
{
    size_t fixed = (threaded(es) ? 2 : 1) * io_buf(es) + scratch_bytes(es) + giant_reserve(es) +
                   helper_bytes(es) + 16384;
    size_t per = (2 * es->frame > 8192 ? 2 * es->frame : 8192) + sizeof(reader) + sizeof(int);
    return es->budget > fixed + 2 * per ? (es->budget - fixed) / per : 2;
}

static dedup_status runs_merge(dedup_extsort *es, tfile *src, const blk *runs, size_t k, writer *w)
{
    dedup_status s = DEDUP_OK;
    merger m = {0};
    held h = {0};
    m.k = k;
    m.by_key = true;
    size_t fixed = (w ? (w->buf2 ? 2 : 1) * w->cap : 0) + k * (sizeof(reader) + sizeof(int)) +
                   scratch_bytes(es) + giant_reserve(es) + helper_bytes(es) + 16384;
    size_t avail = es->budget > fixed ? es->budget - fixed : 4096;
    bool use_ahead = dec_reserve(es, !w, k, &avail);
    size_t rb = clampz(avail / k, 4096, 1 << 20);
    m.src = es_alloc(es, k * sizeof(reader));
    if (m.src) /* zeroed at once: the cleanup below frees every reader */
        memset(m.src, 0, k * sizeof(reader));
    m.tree = es_alloc(es, k * sizeof(int));
    if (!m.src || !m.tree) {
        s = fail(es, DEDUP_ERR_NOMEM);
        goto done;
    }
    for (size_t i = 0; i < k; i++)
        m.tree[i] = -1;
    for (size_t i = 0; i < k && s == DEDUP_OK; i++) {
        s = rd_init(es, &m.src[i], src, &runs[i], 1, rb, run_flags(es));
        if (s == DEDUP_OK)
            s = rd_next(es, &m.src[i]);
    }
    if (s != DEDUP_OK)
        goto done;
    if (use_ahead)
        (void)dec_start(es, m.src, k);
    es->st.merge_passes++;
    for (size_t i = 0; i < k; i++)
        mg_adjust(&m, (int)i);
    for (;;) {
        int x = m.tree[0];
        if (!m.src[x].valid)
            break;
        const item *it = &m.src[x].it;
        if (h.have && key_cmp(it->key, it->keylen, h.it.key, h.it.keylen) == 0) {
            h.it.count += it->count;
        } else {
            if (h.have && (s = held_out(es, &h, w)) != DEDUP_OK)
                break;
            if ((s = held_set(es, &h, it)) != DEDUP_OK)
                break;
        }
        if ((s = rd_next(es, &m.src[x])) != DEDUP_OK)
            break;
        mg_adjust(&m, x);
    }
    if (s == DEDUP_OK && h.have)
        s = held_out(es, &h, w);
done:
    dec_stop(es);
    if (m.src)
        for (size_t i = 0; i < k; i++)
            rd_free(es, &m.src[i]);
    es_free(es, m.src, k * sizeof(reader));
    es_free(es, m.tree, k * sizeof(int));
    es_free(es, h.buf, h.cap);
    return s;
}

static dedup_status runs_finish(dedup_extsort *es)
{
    node *n = es->top;
    dedup_status s = DEDUP_OK;
    if (n->t.n > 0)
        s = runs_flush(es, n);
    table_free(es, &n->t);
    n->table_live = false;
    tfile *a = &es->sp[0], *b = &es->rs[0];
    size_t kmax = runs_fan_in(es);
    while (s == DEDUP_OK && es->nruns > kmax) { /* an intermediate pass */
        size_t groups = (es->nruns + kmax - 1) / kmax;
        blk *nr = es_alloc(es, groups * sizeof(blk));
        if (!nr)
            return fail(es, DEDUP_ERR_NOMEM);
        if ((s = tf_open(es, b)) != DEDUP_OK) {
            es_free(es, nr, groups * sizeof(blk));
            return s;
        }
        for (size_t g = 0; g < groups && s == DEDUP_OK; g++) {
            size_t lo = g * kmax, cnt = es->nruns - lo < kmax ? es->nruns - lo : kmax;
            writer w;
            if ((s = hp_sync(es)) != DEDUP_OK)
                break;
            uint64_t start = b->size;
            if ((s = wr_init(es, &w, b, io_buf(es), run_flags(es))) != DEDUP_OK)
                break;
            s = runs_merge(es, a, &es->runs[lo], cnt, &w);
            if (s == DEDUP_OK)
                s = wr_close(es, &w);
            wr_free(es, &w);
            nr[g] = (blk){start, b->size - start};
        }
        tf_reset(es, a);
        es_free(es, es->runs, es->capruns * sizeof(blk));
        es->runs = nr;
        es->nruns = es->capruns = groups;
        tfile *t = a;
        a = b;
        b = t;
    }
    if (s == DEDUP_OK)
        s = runs_merge(es, a, es->runs, es->nruns, NULL);
    tf_reset(es, a);
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
    dd_allocator_resolve(&a, alloc);
    dedup_extsort *es = dd_malloc(&a, sizeof *es);
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
    es->hb_frames = hb_frames_for(es);
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
    es->tmpdir = es_alloc(es, dl);
    if (es->tmpdir) /* before anything can fail: free() takes its strlen */
        memcpy(es->tmpdir, dir, dl);
    es->top = es_alloc(es, sizeof(node));
    if (es->top)
        memset(es->top, 0, sizeof(node));
    if (!es->tmpdir || !es->top) {
        dedup_extsort_free(es);
        return DEDUP_ERR_NOMEM;
    }
    es->p.tmpdir = es->tmpdir;
    if (node_init(es, es->top, 0, NULL) != DEDUP_OK) {
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
    hp_stop(es); /* drops whatever is still queued */
    if (es->top) {
        node_free(es, es->top);
        es_free(es, es->top, sizeof(node));
    }
    for (int i = 0; i <= DEDUP_EXTSORT_MAX_DEPTH; i++) {
        if (es->sp[i].fd >= 0)
            close(es->sp[i].fd);
        if (es->rs[i].fd >= 0)
            close(es->rs[i].fd);
    }
    if (es->tmpdir)
        es_free(es, es->tmpdir, strlen(es->tmpdir) + 1);
    es_free(es, es->runs, es->capruns * sizeof(blk));
    es_free(es, es->zbuf, es->zcap);
    es_free(es, es->zstate, es->zstate_n);
    if (es->gf.fd >= 0)
        close(es->gf.fd);
    es_free(es, es->g, es->capg * sizeof(giant));
    es_free(es, es->gord, es->gordcap * sizeof(size_t));
    es_free(es, es->gbuf, es->giant_min);
    es_free(es, es->xsmem, sizeof(XXH3_state_t) + 64);
    cache_clear(es);
    if (es->wl == &es->wlock)
        pthread_mutex_destroy(&es->wlock);
    dedup_allocator a = es->alloc;
    dd_free(&a, es);
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
            return fail(es, DEDUP_ERR_LIMIT); /* a giant key must be its record */
        return giant_push_whole(es, rec, len, digest);
    }
    if (len > MAX_FIELD - 1 || keylen > MAX_FIELD - 1)
        return fail(es, DEDUP_ERR_LIMIT);
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
        return runs_add(es, &it, digest);
    return node_add(es, es->top, &it, digest);
}

dedup_status dedup_extsort_push_batch(dedup_extsort *es, size_t n, const void *const *recs,
                                      const size_t *lens, const void *const *keys,
                                      const size_t *keylens, const dedup_digest *digests)
{
    /* Two-stage software prefetch: the slot 16 records ahead, the entry its
     * tag points at 8 records ahead, so the table's cache misses overlap;
     * once spilled, only for digests the prefilter lets through, and the
     * tail of the partition buffer for the others. */
    enum { FAR = 16, NEAR = 8 };
    const node *top = es->top;
    const table *t = &top->t;
    dedup_status st = DEDUP_OK;
    for (size_t i = 0; i < n && i < FAR; i++)
        if (t->slots && frz_maybe(top, digests[i]))
            DD_PREFETCH(&t->slots[(size_t)digests[i].lo & t->mask]);
    for (size_t i = 0; i < n && st == DEDUP_OK; i++) {
        if (t->slots) {
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

dedup_status dedup_extsort_finish(dedup_extsort *es)
{
    if (es->err != DEDUP_OK)
        return es->err;
    if (es->finished || es->in_piece)
        return DEDUP_ERR_INVALID_ARG;
    es->finished = true;
    dedup_status s = DEDUP_OK;
    if (es->ng && es->p.order == DEDUP_EXTSORT_SORTED)
        s = giants_sort(es);
    if (s == DEDUP_OK)
        s = es->nruns ? runs_finish(es) : node_finish(es, es->top);
    if (s == DEDUP_OK && es->ng)
        s = giants_before(es, NULL);
    tf_reset(es, &es->gf);
    node_free(es, es->top);
    for (int i = 0; i <= DEDUP_EXTSORT_MAX_DEPTH; i++) {
        tf_reset(es, &es->sp[i]);
        tf_reset(es, &es->rs[i]);
    }
    return s != DEDUP_OK ? fail(es, s) : DEDUP_OK;
}

dedup_status dedup_extsort_push_begin(dedup_extsort *es)
{
    if (es->err != DEDUP_OK)
        return es->err;
    if (es->finished || es->in_piece || !es->p.emit_piece)
        return DEDUP_ERR_INVALID_ARG;
    dedup_status s = giant_buffers(es);
    if (s != DEDUP_OK)
        return s;
    XXH3_128bits_reset_withSeed(xstate(es), es->p.seed);
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
    XXH3_128bits_update(xstate(es), data, len);
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
            if ((s = tf_open(es, &es->gf)) != DEDUP_OK)
                return s;
            es->piece_giant = true;
            es->poff = es->gf.size;
        }
        if (es->plen) {
            if ((s = tf_write(es, &es->gf, es->gbuf, es->plen)) != DEDUP_OK)
                return s;
            es->plen = 0;
        }
        if (len >= es->giant_min)
            return tf_write(es, &es->gf, q, len);
    }
    return DEDUP_OK;
}

dedup_status dedup_extsort_push_end(dedup_extsort *es)
{
    if (es->err != DEDUP_OK)
        return es->err;
    if (!es->in_piece)
        return DEDUP_ERR_INVALID_ARG;
    XXH128_hash_t h = XXH3_128bits_digest(xstate(es));
    dedup_digest d = {h.low64, h.high64};
    es->in_piece = false;
    if (!es->piece_giant) /* it fitted: an ordinary record */
        return dedup_extsort_push(es, es->gbuf, es->plen, NULL, 0, d);
    dedup_status s = DEDUP_OK;
    if (es->plen)
        s = tf_write(es, &es->gf, es->gbuf, es->plen);
    es->plen = 0;
    return s == DEDUP_OK ? giant_add(es, es->poff, es->ptotal, d) : s;
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

void dedup_extsort_stats_get(const dedup_extsort *es, dedup_extsort_stats *out) { *out = es->st; }

size_t dedup_extsort_memory_usage(const dedup_extsort *es)
{
    return es->mem_cur + es->cached + sizeof *es;
}
