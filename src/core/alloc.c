/* alloc.c - the per-object allocator hook and its default. */
#include "internal.h"

#include <stdlib.h>

static void *libc_malloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}
static void *libc_calloc(void *ctx, size_t count, size_t size)
{
    (void)ctx;
    return calloc(count, size);
}
static void *libc_realloc(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    return realloc(ptr, size);
}
static void libc_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

void ddi_allocator_resolve(dedup_allocator *out, const dedup_allocator *a)
{
    if (a && a->malloc_fn && a->free_fn) {
        *out = *a;
        return;
    }
    out->malloc_fn = libc_malloc;
    out->calloc_fn = libc_calloc;
    out->realloc_fn = libc_realloc;
    out->free_fn = libc_free;
    out->ctx = NULL;
}

void *ddi_malloc(const dedup_allocator *a, size_t size)
{
    return a->malloc_fn(a->ctx, size ? size : 1);
}

void *ddi_calloc(const dedup_allocator *a, size_t count, size_t size)
{
    size_t total;
    if (!ddi_mul_size(count, size, &total))
        return NULL;
    if (a->calloc_fn)
        return a->calloc_fn(a->ctx, count ? count : 1, size ? size : 1);
    void *p = a->malloc_fn(a->ctx, total ? total : 1);
    if (p)
        memset(p, 0, total);
    return p;
}

void *ddi_realloc(const dedup_allocator *a, void *ptr, size_t old_size, size_t new_size)
{
    if (a->realloc_fn)
        return a->realloc_fn(a->ctx, ptr, new_size ? new_size : 1);
    void *p = a->malloc_fn(a->ctx, new_size ? new_size : 1);
    if (!p)
        return NULL;
    if (ptr) {
        memcpy(p, ptr, old_size < new_size ? old_size : new_size);
        a->free_fn(a->ctx, ptr);
    }
    return p;
}

void ddi_free(const dedup_allocator *a, void *ptr)
{
    if (ptr)
        a->free_fn(a->ctx, ptr);
}

void *ddi_aligned_calloc(const dedup_allocator *a, size_t size, size_t align, void **raw)
{
    size_t total;
    if (!ddi_add_size(size, align, &total))
        return NULL;
    unsigned char *p = ddi_calloc(a, 1, total);
    *raw = p;
    if (!p)
        return NULL;
    uintptr_t u = (uintptr_t)p;
    u = (u + align - 1) & ~(uintptr_t)(align - 1);
    return (void *)u;
}
