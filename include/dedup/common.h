/*
 * dedup/common.h - status codes, allocator hook, verdicts and version.
 *
 * Every libdedup object follows one shape:
 *
 *   dedup_X_params p; dedup_X_params_init(&p);   fill in what you need
 *   dedup_X *x; dedup_status s = dedup_X_create(&p, alloc_or_NULL, &x);
 *   ... use x ...
 *   dedup_X_free(x);                               free(NULL) is a no-op
 *
 * The library keeps no global state, prints nothing and never exits.  Every
 * call that can fail returns a dedup_status; queries that cannot fail return
 * their answer directly.  Memory is obtained through the allocator passed at
 * creation (NULL means the C library's malloc family) and every object
 * reports what it holds through dedup_X_memory_usage().
 *
 * Thread-safety, unless a function says otherwise: different objects may be
 * used from different threads at once; one object may be read (queried) from
 * several threads at once; a write (add, delete, load) needs exclusive access.
 */
#ifndef DEDUP_COMMON_H
#define DEDUP_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version --------------------------------------------------------
 * The one place the version is written: CMake reads these three lines for
 * project(VERSION), the shared library's SONAME and dedup.pc, and the
 * string below is made from them. */
#define DEDUP_VERSION_MAJOR 0
#define DEDUP_VERSION_MINOR 1
#define DEDUP_VERSION_PATCH 0
#define DEDUP_VERSION_NUMBER \
    (DEDUP_VERSION_MAJOR * 10000 + DEDUP_VERSION_MINOR * 100 + DEDUP_VERSION_PATCH)
#define DEDUP_VERSION_STR_(x) #x
#define DEDUP_VERSION_STR(x) DEDUP_VERSION_STR_(x)
#define DEDUP_VERSION_STRING                                               \
    DEDUP_VERSION_STR(DEDUP_VERSION_MAJOR) "." DEDUP_VERSION_STR(DEDUP_VERSION_MINOR) "." \
        DEDUP_VERSION_STR(DEDUP_VERSION_PATCH)

/* Runtime twins of the macros above: the version of the library actually
 * linked, which may differ from the header a program was compiled with. */
unsigned dedup_version_number(void);
const char *dedup_version_string(void);

/* ---- Status ----------------------------------------------------------
 * Values are pinned forever: new codes are appended, none is renumbered. */
typedef enum dedup_status {
    DEDUP_OK = 0,
    DEDUP_ERR_INVALID_ARG = 1,  /* a parameter is out of its documented range */
    DEDUP_ERR_NOMEM = 2,        /* the allocator returned NULL */
    DEDUP_ERR_IO = 3,           /* a read, write, fsync or rename failed (see errno) */
    DEDUP_ERR_BAD_MAGIC = 4,    /* not a dedup file / blob */
    DEDUP_ERR_VERSION = 5,      /* format version this library cannot read */
    DEDUP_ERR_WRONG_TYPE = 6,   /* a valid file holding another structure type */
    DEDUP_ERR_CHECKSUM = 7,     /* stored checksum does not match the content */
    DEDUP_ERR_TRUNCATED = 8,    /* the data ends before the lengths it declares */
    DEDUP_ERR_CORRUPT = 9,      /* a field holds an impossible value */
    DEDUP_ERR_FULL = 10,        /* no room left; nothing was changed */
    DEDUP_ERR_RANGE = 11,       /* an index or value outside the structure */
    DEDUP_ERR_INCOMPATIBLE = 12,/* two structures differ in shape, type or seed */
    DEDUP_ERR_NOT_FOUND = 13,   /* delete of a key that is certainly absent */
    DEDUP_ERR_LIMIT = 14,       /* a size beyond a limit in dedup/limits.h */
    DEDUP_ERR_UNSUPPORTED = 15, /* the operation does not exist for this structure */
    DEDUP_ERR_CANCELLED = 16,   /* stopped by the caller (signal, callback) */
    DEDUP_ERR_TRAILING = 17     /* a file goes on after its structure's checksum */
} dedup_status;

/* A constant English sentence for a status; never NULL, also for unknown
 * values. */
const char *dedup_strerror(dedup_status status);

/* ---- Verdicts of "was this seen before?" ---------------------------- */
typedef enum dedup_verdict {
    DEDUP_NEW = 0,             /* certainly not seen before (now recorded) */
    DEDUP_DUPLICATE = 1,       /* certainly seen before (exact methods) */
    DEDUP_MAYBE_DUPLICATE = 2, /* a probabilistic method may have seen it */
    DEDUP_LATE = 3,            /* window methods: too late to decide */
    DEDUP_DEFERRED = 4,        /* recorded; decided later by dedup_seen_finish() */
    DEDUP_UNCERTAIN = 5        /* remote methods: a lost reply, presence unknown */
} dedup_verdict;

/* ---- Allocator hook ---------------------------------------------------
 * Passed to every create/load call and kept by the object.  All memory the
 * object holds goes through it.  NULL selects malloc/calloc/realloc/free.
 * The struct is copied; 'ctx' is passed back on every call.  'calloc' and
 * 'realloc' may be NULL, in which case malloc+memset / malloc+copy are used.
 * Every zero-initialised array (filter bits and tables, set slots, window
 * tables) is obtained with 'calloc', so a calloc that hands out pages the
 * system zeroes on first touch creates a structure of any size without
 * writing it; what dedup_X_memory_usage() reports does not depend on it.
 * Functions must be safe to call from any thread that uses the object. */
typedef struct dedup_allocator {
    void *(*malloc_fn)(void *ctx, size_t size);
    void *(*calloc_fn)(void *ctx, size_t count, size_t size);
    void *(*realloc_fn)(void *ctx, void *ptr, size_t size);
    void (*free_fn)(void *ctx, void *ptr);
    void *ctx;
} dedup_allocator;

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_COMMON_H */
