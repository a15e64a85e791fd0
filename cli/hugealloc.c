/*
 * hugealloc.c - the allocator the command line hands to the library.
 *
 * Large blocks (hash tables, arena chunks, filters: 1 MiB and up) are mapped
 * directly, aligned to 2 MiB and marked MADV_HUGEPAGE, so a table of
 * gigabytes costs a few thousand page faults instead of a million, and
 * calloc of a fresh mapping touches nothing.  Small blocks use malloc.  This
 * is the library's per-object allocator hook at work: the library itself
 * stays on plain malloc unless told otherwise.
 */
#define _GNU_SOURCE /* mremap */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

static void *ha_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size >= HUGE_MIN)
        return huge_map(size);
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
    if (total >= HUGE_MIN)
        return huge_map(total); /* fresh mappings are zero */
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
    if (h->magic == MAGIC_MMAP)
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
