/*
 * dedup/roaring.h - sparse integer keys in compressed bitmaps: the seen-set
 * kind DEDUP_SEEN_ROARING, on CRoaring (Debian's libroaring-dev 0.2.66).
 *
 * A component outside libdedup (libdedup never links CRoaring): it builds
 * only when the package is found, defines DEDUP_HAVE_ROARING for the CLI,
 * and implements dedup/seen.h through dedup_seen_wrap(), so every caller
 * uses it as any other kind.
 *
 * Conventions, libdedup's own (dedup/common.h) and the same in every
 * component (dedup/store.h, dedup/redis.h, dedup/roaring.h):
 *  - dedup_X_params p; dedup_X_params_init(&p); fill in what you need;
 *    dedup_X_create(&p, alloc_or_NULL, &x, why, whycap) makes the object
 *    and dedup_X_free(x) releases it, dedup_X_free(NULL) a no-op.
 *  - Every call that can fail returns a dedup_status (dedup_strerror()
 *    names it).  A text buffer for the reason is 'char *why, size_t whycap'
 *    (why may be NULL; the sentence is cut to whycap bytes, NUL included);
 *    once the object exists, dedup_X_last_error(x) gives the sentence of
 *    its last failure ("" if none, never NULL).
 *  - dedup_X_as_seen(x, alloc, &seen) wraps the object as a seen-set
 *    (dedup/seen.h), which owns it from then on.
 *  - No global state, no printing, no exit.  The library libdedup_X
 *    exports dedup_* only; a program builds with
 *    `pkg-config --cflags --libs dedup-X`.
 * Here X is roaring, whose object is the seen-set itself: there are no
 * params, create is dedup_roaring_seen_create(&spec, alloc, &seen) and the
 * seen-set is freed by dedup_seen_free(); its failures are statuses alone.
 *
 * What it holds: 64-bit integer keys (batch.ints; digests are not used and
 * may be NULL), split by their high 32 bits into one 32-bit roaring bitmap
 * each (CRoaring 0.2 has no 64-bit bitmap in C); IDs below 2^32 live in one
 * bitmap.  Exact: decide answers DEDUP_NEW or DEDUP_DUPLICATE; delete
 * removes; query, distinct (exact), save and load are supported; merge is
 * not (DEDUP_ERR_UNSUPPORTED).  Memory: about 2 bits a key for dense runs of
 * IDs, 16 bits a key for scattered ones (array containers), and ~1 KiB per
 * 2^16-value chunk touched at all; dedup_seen_memory_usage() sums the
 * containers' allocations as CRoaring reports them.
 *
 * Allocation: the wrapper and the bucket array go through the allocator
 * given; CRoaring 0.2 allocates its containers with malloc (it has no hook),
 * and aborts rather than report a failed allocation inside an add.
 *
 * File (docs/FORMAT.md, type ROARING = 15): params 16 bytes: distinct keys
 * u64, buckets u32, reserved u32 (0).  Payload: for each non-empty bucket in
 * increasing order of its high 32 bits: high u32, reserved u32 (0), length
 * u64, then that many bytes of CRoaring's portable serialization (the
 * Roaring format specification shared by its implementations).  The loader
 * validates every byte of the portable form itself -- container count and
 * keys in order, cardinalities, offsets, arrays strictly increasing, bitset
 * popcounts, runs sorted and disjoint -- before CRoaring reads it, and checks
 * the totals and the container's checksum.
 *
 * Thread-safety: as dedup/seen.h (one writer, or many readers).
 */
#ifndef DEDUP_ROARING_H
#define DEDUP_ROARING_H

#include "dedup/seen.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates an empty roaring seen-set.  spec->kind must be DEDUP_SEEN_ROARING;
 * spec->seed is kept (and saved) though integer keys are not hashed.
 * Errors: DEDUP_ERR_INVALID_ARG, DEDUP_ERR_NOMEM. */
dedup_status dedup_roaring_seen_create(const dedup_seen_spec *spec, const dedup_allocator *alloc,
                                       dedup_seen **out);

/* Loads a file of type ROARING, validated as above.  Errors: the decoder's
 * (BAD_MAGIC, VERSION, WRONG_TYPE, TRUNCATED, CHECKSUM), CORRUPT, NOMEM, IO;
 * load_file also DEDUP_ERR_TRAILING. */
dedup_status dedup_roaring_seen_load(dedup_source src, const dedup_allocator *alloc,
                                     dedup_seen **out);
dedup_status dedup_roaring_seen_load_file(const char *path, const dedup_allocator *alloc,
                                          dedup_seen **out);

/* Whether 'len' bytes at 'buf' are exactly one valid portable roaring
 * bitmap; *cardinality (may be NULL) receives its number of values.  Never
 * reads past len. */
bool dedup_roaring_portable_valid(const void *buf, size_t len, uint64_t *cardinality);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_ROARING_H */
