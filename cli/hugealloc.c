/*
 * hugealloc.c - the allocator the command line hands to the library.
 *
 * Large blocks (hash tables, arena chunks, filters: 1 MiB and up) are mapped
 * directly, aligned to 2 MiB and marked MADV_HUGEPAGE, so a table of
 * gigabytes costs a few thousand page faults instead of a million, and
 * calloc of a fresh mapping touches nothing.  Small blocks use malloc.  This
 * is the library's per-object allocator hook at work: the library itself
 * stays on plain malloc unless told otherwise.  cli_allocator_growing(),
 * the exact set's, also populates the pages its next blocks will take on a
 * thread of its own (see "The bump region" below).
 */
#define _GNU_SOURCE /* mremap */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"

#define HUGE_MIN ((size_t)1 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)
#define HDR 64 /* keeps 64-byte alignment for the caller */

typedef struct hdr {
    uint64_t magic;
    size_t map_len; /* 0 for malloc'd blocks */
    size_t size;
    void *map;
} hdr;

#define MAGIC_MMAP UINT64_C(0x6875676570616765)
#define MAGIC_BUMP UINT64_C(0x62756d7062756d70)
#define MAGIC_HEAP UINT64_C(0x6d616c6c6f63636d)

static size_t map_len_for(size_t size) { return (size + HDR + 4095) & ~(size_t)4095; }

/* Maps 'keep' bytes (a multiple of the page size) at a 2 MiB boundary. */
static void *huge_reserve(size_t keep)
{
    size_t len = keep + HUGE_ALIGN;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
    size_t head = (size_t)(a - (uintptr_t)p);
    if (head)
        munmap(p, head);
    size_t tail = len - head - keep;
    if (tail)
        munmap((unsigned char *)a + keep, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)a, keep, MADV_HUGEPAGE);
#endif
    return (void *)a;
}

static void *huge_map(size_t size)
{
    size_t keep = map_len_for(size);
    void *a = huge_reserve(keep);
    if (!a)
        return NULL;
    hdr *h = (hdr *)a;
    h->magic = MAGIC_MMAP;
    h->map_len = keep;
    h->size = size;
    h->map = (void *)a;
    return (unsigned char *)a + HDR;
}


/* ---- The bump region and its populating thread ---------------------------
 * Large blocks are carved one after the other out of one big reservation
 * (MAP_NORESERVE, MADV_HUGEPAGE), and a thread of its own populates the
 * pages ahead of the next block (MADV_POPULATE_WRITE: mapped and writable,
 * contents untouched, so it never races with the blocks in use).  On a VM a
 * fresh page can cost a host fault, which the deciding thread would
 * otherwise wait for: the exact set's arena chunks and segments arrive one
 * after another, so the memory they will take is the memory just past the
 * last block.  A block freed at the top is handed out again (calloc clears
 * what was used); one freed below the top gives its pages back
 * (MADV_DONTNEED).  Without the region (mmap refused, or it is full) blocks
 * are mapped one by one as before.  Only the allocator for sets that grow
 * block by block (cli_allocator_growing) uses the region: a filter
 * allocated once gains nothing, and the external engine frees and
 * allocates out of order, which would leave holes in it. */
#define STEP ((size_t)2 << 20)

/* How far past the top to populate: a quarter of what is in use, from one
 * step to 32 MiB, so a small run does not pay for memory it never uses. */
static size_t ahead(size_t top)
{
    size_t a = top / 4;
    return a < STEP ? STEP : a > ((size_t)32 << 20) ? (size_t)32 << 20 : a;
}

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned char *base;
    size_t len;
    size_t top;     /* bytes handed out (blocks are at [base, base + top)) */
    size_t hiwater; /* the highest top so far: past it the pages are still zero */
    size_t ready;   /* bytes populated */
    int state;      /* 0 not tried, 1 ready, -1 unusable */
    bool thread, stop;
    pthread_t th;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *populate_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&R.mu);
    for (;;) {
        while (!R.stop && R.ready >= R.top + ahead(R.top))
            pthread_cond_wait(&R.cv, &R.mu);
        if (R.stop)
            break;
        /* whole steps: 'ready' stays page-aligned, as madvise needs */
        size_t from = R.ready, to = from + STEP;
        if (to > R.len)
            break; /* the end of the region */
        pthread_mutex_unlock(&R.mu);
        int rc;
        do
            rc = madvise(R.base + from, to - from, MADV_POPULATE_WRITE);
        while (rc != 0 && (errno == EINTR || errno == EAGAIN));
        pthread_mutex_lock(&R.mu);
        if (rc != 0)
            break; /* an old kernel, or no memory: the faults stay where they are */
        R.ready = to;
    }
    pthread_mutex_unlock(&R.mu);
    return NULL;
}

/* Reserves the region on first use: as much address space as there is
 * memory (it costs nothing until touched).  Called with R.mu held. */
static bool region_ready(void)
{
    if (R.state)
        return R.state > 0;
    R.state = -1;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psz <= 0)
        return false;
    size_t len = ((size_t)pages * (size_t)psz + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
    unsigned char *p = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    uintptr_t a = ((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)a, len, MADV_HUGEPAGE);
#endif
    R.base = (unsigned char *)a;
    R.len = len;
    R.state = 1;
    R.thread = pthread_create(&R.th, NULL, populate_main, NULL) == 0;
    return true;
}

/* 'size' bytes (header included) from the region, or NULL.  *dirty: how
 * many of them, from the start, earlier blocks may have written. */
static hdr *region_alloc(size_t size, size_t *dirty)
{
    size_t need = (size + 63) & ~(size_t)63;
    /* under the lock: two threads may take their first block at once (the
     * by-reference set's two parts) */
    pthread_mutex_lock(&R.mu);
    hdr *h = NULL;
    if (region_ready() && need <= R.len - R.top) {
        h = (hdr *)(void *)(R.base + R.top);
        *dirty = R.hiwater > R.top ? R.hiwater - R.top : 0;
        R.top += need;
        if (R.top > R.hiwater)
            R.hiwater = R.top;
        pthread_cond_signal(&R.cv);
    }
    pthread_mutex_unlock(&R.mu);
    if (h) {
        h->magic = MAGIC_BUMP;
        h->map_len = need;
        h->map = h;
    }
    return h;
}

static bool in_region(const hdr *h) { return h->magic == MAGIC_BUMP; }

/* Gives a block back: the top one is handed out again, one below it returns
 * its whole pages. */
static void region_free(hdr *h)
{
    unsigned char *p = (unsigned char *)h;
    size_t len = h->map_len;
    pthread_mutex_lock(&R.mu);
    bool top = p + len == R.base + R.top;
    if (top)
        R.top = (size_t)(p - R.base);
    pthread_mutex_unlock(&R.mu);
    if (!top) {
        uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
        uintptr_t b = ((uintptr_t)p + len) & ~(uintptr_t)4095;
        if (b > a)
            (void)madvise((void *)a, b - a, MADV_DONTNEED);
    }
}

/* Grows or shrinks the top block in place; NULL if it is not the top one
 * or the region is full. */
static void *region_resize(hdr *h, size_t size)
{
    size_t need = (size + HDR + 63) & ~(size_t)63;
    unsigned char *p = (unsigned char *)h;
    void *r = NULL;
    pthread_mutex_lock(&R.mu);
    if (p + h->map_len == R.base + R.top && need <= R.len - (size_t)(p - R.base)) {
        R.top = (size_t)(p - R.base) + need;
        if (R.top > R.hiwater)
            R.hiwater = R.top;
        h->map_len = need;
        h->size = size;
        r = p + HDR;
        pthread_cond_signal(&R.cv);
    }
    pthread_mutex_unlock(&R.mu);
    return r;
}

void cli_allocator_shutdown(void)
{
    pthread_mutex_lock(&R.mu);
    R.stop = true;
    pthread_cond_signal(&R.cv);
    bool t = R.thread;
    R.thread = false;
    pthread_mutex_unlock(&R.mu);
    if (t)
        pthread_join(R.th, NULL);
}

static void *ha_malloc(void *ctx, size_t size)
{
    if (size >= HUGE_MIN) {
        size_t dirty;
        hdr *h = ctx ? region_alloc(size + HDR, &dirty) : NULL;
        if (h) {
            h->size = size;
            return (unsigned char *)h + HDR;
        }
        return huge_map(size);
    }
    unsigned char *p = malloc(size + HDR);
    if (!p)
        return NULL;
    hdr *h = (hdr *)p;
    h->magic = MAGIC_HEAP;
    h->map_len = 0;
    h->size = size;
    h->map = p;
    return p + HDR;
}

static void *ha_calloc(void *ctx, size_t n, size_t sz)
{
    size_t total;
    if (__builtin_mul_overflow(n, sz, &total))
        return NULL;
    if (total >= HUGE_MIN) {
        size_t dirty;
        hdr *h = ctx ? region_alloc(total + HDR, &dirty) : NULL;
        if (h) {
            h->size = total;
            if (dirty > HDR) /* what an earlier block left; the rest is fresh */
                memset((unsigned char *)h + HDR, 0, dirty - HDR < total ? dirty - HDR : total);
            return (unsigned char *)h + HDR;
        }
        return huge_map(total); /* fresh mappings are zero */
    }
    void *p = ha_malloc(ctx, total);
    if (p)
        memset(p, 0, total);
    return p;
}

static void ha_free(void *ctx, void *p)
{
    (void)ctx;
    if (!p)
        return;
    hdr *h = (hdr *)((unsigned char *)p - HDR);
    if (in_region(h))
        region_free(h);
    else if (h->magic == MAGIC_MMAP)
        munmap(h->map, h->map_len);
    else
        free(h->map);
}

/* Resizes a mapped block without copying: in place when the address space
 * after it is free, else by moving its pages (mremap) onto a fresh 2 MiB
 * aligned reservation, so old and new never both hold memory and the
 * alignment huge pages need is kept.  NULL if the kernel refuses (the
 * caller then copies). */
static void *huge_remap(hdr *h, size_t size)
{
    /* A block that grows is likely to grow again: whole 2 MiB units, so the
     * end of one size is not left in small pages under the next. */
    size_t keep = (size + HDR + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
    void *old = h->map;
    size_t old_len = h->map_len;
    if (keep <= old_len) {
        if (keep < old_len)
            munmap((unsigned char *)old + keep, old_len - keep);
    } else if (mremap(old, old_len, keep, 0) == MAP_FAILED) {
        void *dst = huge_reserve(keep);
        if (!dst)
            return NULL;
        if (mremap(old, old_len, keep, MREMAP_MAYMOVE | MREMAP_FIXED, dst) == MAP_FAILED) {
            munmap(dst, keep);
            return NULL;
        }
        h = (hdr *)dst;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)h, keep, MADV_HUGEPAGE);
#endif
    h->map_len = keep;
    h->size = size;
    h->map = (void *)h;
    return (unsigned char *)h + HDR;
}

static void *ha_realloc(void *ctx, void *p, size_t size)
{
    if (!p)
        return ha_malloc(ctx, size);
    hdr *h = (hdr *)((unsigned char *)p - HDR);
    if (h->magic == MAGIC_HEAP && size < HUGE_MIN) {
        unsigned char *q = realloc(h->map, size + HDR);
        if (!q)
            return NULL;
        ((hdr *)q)->size = size;
        ((hdr *)q)->map = q;
        return q + HDR;
    }
    if (in_region(h)) {
        void *q = region_resize(h, size);
        if (q)
            return q;
    }
    if (h->magic == MAGIC_MMAP && size >= HUGE_MIN) {
        void *q = huge_remap(h, size);
        if (q)
            return q;
    }
    void *q = ha_malloc(ctx, size);
    if (!q)
        return NULL;
    memcpy(q, p, h->size < size ? h->size : size);
    ha_free(ctx, p);
    return q;
}

const dedup_allocator *cli_allocator(void)
{
    static const dedup_allocator a = {ha_malloc, ha_calloc, ha_realloc, ha_free, NULL};
    return &a;
}

const dedup_allocator *cli_allocator_growing(void)
{
    static const dedup_allocator a = {ha_malloc, ha_calloc, ha_realloc, ha_free, &R};
    return &a;
}
