/*
 * internal.h - helpers shared by the library's sources; not public API.
 *
 * The library's private prefix is ddi_ (the command line's is dd_, and the
 * two are linked together), and none of it leaves libdedup.so: the shared
 * library exports dedup_* only (src/libdedup.map).
 */
#ifndef DEDUP_INTERNAL_H
#define DEDUP_INTERNAL_H

#include "dedup/common.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Copies 'a' or, when NULL, the C library's allocator into 'out'. */
void ddi_allocator_resolve(dedup_allocator *out, const dedup_allocator *a);

/* Saving into a range sink (dedup/format.h): true when the encoder's next
 * 'n' payload bytes lie before the range and are already covered by its
 * kept checksum state, so that a save may pass them over with
 * ddi_encoder_skip() instead of computing them. */
struct dedup_encoder;
bool ddi_encoder_can_skip(const struct dedup_encoder *e, uint64_t n);
dedup_status ddi_encoder_skip(struct dedup_encoder *e, uint64_t n);

void *ddi_malloc(const dedup_allocator *a, size_t size);
void *ddi_calloc(const dedup_allocator *a, size_t count, size_t size);
/* realloc through the hook; 'old_size' is needed when the hook has no realloc. */
void *ddi_realloc(const dedup_allocator *a, void *ptr, size_t old_size, size_t new_size);
void ddi_free(const dedup_allocator *a, void *ptr);

/* Zeroed memory aligned to 'align' (a power of two <= 4096).  '*raw' receives
 * the pointer to pass to ddi_free().  Uses over-allocation, so it works with
 * any allocator hook (RedisModule_Alloc included). */
void *ddi_aligned_calloc(const dedup_allocator *a, size_t size, size_t align, void **raw);

/* Overflow-checked size arithmetic: returns false on overflow. */
static inline bool ddi_mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool ddi_add_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

#if defined(__GNUC__)
#define DD_LIKELY(x) __builtin_expect(!!(x), 1)
#define DD_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define DD_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#define DD_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#else
#define DD_LIKELY(x) (x)
#define DD_UNLIKELY(x) (x)
#define DD_PREFETCH(p) ((void)(p))
#define DD_PREFETCH_W(p) ((void)(p))
#endif

/* Loads an object from the file at 'path' with 'load' (a structure's
 * dedup_X_load through void pointers) and rejects a file that goes on after
 * the container's checksum with DEDUP_ERR_TRAILING (for a pipe, whose length
 * is unknown, by reading one byte more): then 'destroy' frees what 'load'
 * returned and *out is NULL.  The one implementation behind every
 * dedup_X_load_file(). */
#include "dedup/format.h"
/* Creates the named temporary 'tmp' of a save for writing: exclusively
 * (O_EXCL) and never through a link (O_NOFOLLOW).  A file or link already
 * at 'tmp' (the name holds this process's pid, so a dead process with the
 * same pid left it) is removed first.  Returns the descriptor, or -1 with
 * errno.  format.c's fallback where the file system has no O_TMPFILE. */
int ddi_open_named_temporary(const char *tmp);

typedef dedup_status (*ddi_load_fn)(dedup_source src, const dedup_allocator *alloc, void **out);
typedef void (*ddi_free_fn)(void *obj);
dedup_status ddi_load_file(const char *path, const dedup_allocator *alloc, ddi_load_fn load,
                           ddi_free_fn destroy, void **out);

#endif
