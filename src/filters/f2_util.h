/*
 * f2_util.h - helpers shared by counting.c, cuckoo.c and scalable.c; not
 * public API.
 */
#ifndef DEDUP_F2_UTIL_H
#define DEDUP_F2_UTIL_H

#include "dedup/format.h"
#include "internal.h"

/* Loads an object from 'path' with 'load' and rejects trailing bytes after
 * the container (DEDUP_ERR_CORRUPT), also for pipes whose length is
 * unknown.  On error 'destroy' frees what 'load' returned. */
typedef dedup_status (*f2_load_fn)(dedup_source src, const dedup_allocator *alloc, void **out);
typedef void (*f2_free_fn)(void *obj);

static inline dedup_status f2_load_file(const char *path, const dedup_allocator *alloc,
                                        f2_load_fn load, f2_free_fn destroy, void **out)
{
    if (!path || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    dd_allocator_resolve(&a, alloc);
    dedup_file_source *f = dd_malloc(&a, sizeof *f);
    if (!f)
        return DEDUP_ERR_NOMEM;
    dedup_source src;
    dedup_status s = dedup_file_source_open(f, path, &src);
    if (!s) {
        void *obj = NULL;
        s = load(src, &a, &obj);
        if (!s) {
            uint64_t left = src.remaining(src.ctx);
            unsigned char extra;
            if (left == UINT64_MAX)
                left = src.read(src.ctx, &extra, 1) == DEDUP_OK;
            if (left != 0) {
                destroy(obj);
                obj = NULL;
                s = DEDUP_ERR_CORRUPT;
            }
        }
        *out = obj;
        dedup_file_source_close(f);
    }
    dd_free(&a, f);
    return s;
}

#endif
