/*
 * dedup/cuckoo.h - cuckoo filter: a compact filter that can delete and grow.
 *
 * A table of nb buckets of b slots (default b = 4); each slot holds an
 * f-bit fingerprint of a key or 0 (empty).  A key may live in one of two
 * buckets; a query reads both, so it touches at most two cache lines.
 *
 * Indexes, all from the key's 128-bit digest (dedup/hash.h):
 *   fp   = the top f bits of digest.hi, or 1 if those are all zero
 *          (0 is reserved for "empty"; fingerprint 1 is thus twice as likely);
 *   i1   = dedup_reduce(digest.lo, nb);
 *   h    = dedup_reduce(mix64(fp + 0x9E3779B97F4A7C15), nb), mix64 being the
 *          splitmix64 finaliser;
 *   alt(i, fp) = (h - i) mod nb,  i2 = alt(i1, fp).
 * alt is an involution for any nb: alt(alt(i)) = h - (h - i) = i (mod nb),
 * so a fingerprint can be moved between its two buckets knowing only its
 * bucket and itself (partial-key cuckoo hashing), and nb need not be a power
 * of two: the table is sized to the capacity asked for, with no 2x jump.
 * (When 2*i1 = h mod nb both buckets coincide; that key has b slots only.)
 *
 * Fingerprint size: given explicitly (4..32 bits), or chosen from the target
 * rate p as the smallest f in {8, 12, 16, 20, 24, 28, 32} with
 * 2*b / 2^f <= p (the rate of a full table: 2b slots are compared, each
 * matches with probability 1/(2^f - 1)).  For b = 4: f = 8 for p >= 3.2%,
 * 12 for p >= 0.2%, 16 for p >= 0.0122%.  The rate at load a is about
 * 2*b*a / 2^f.
 *
 * Storage: the fingerprints of all slots are packed back to back (slot s of
 * the table at bit s*f), so a 12-bit filter uses 12 bits per slot: 12.6 bits
 * per item at 95% load.
 *
 * Sizing: nb = ceil(capacity / (b * a)) with the planned load a = 0.94 for
 * b = 4 (0.45 for b = 1, 0.80 for b = 2, 0.88 for b = 3, 0.96 for b >= 8,
 * linear from 4 to 8), so 'capacity' items fit with a margin: a table with
 * b = 4 and the default max_kicks = 500 reaches at least 95% load before an
 * insert fails (tested).  params.buckets sets nb directly instead.
 *
 * Insertion: into a free slot of the emptier of i1 and i2 (balancing the
 * buckets postpones kick-out chains); if both are full, evict a random
 * occupant of one of them and move it to its other bucket, at most
 * max_kicks times.  If that fails, every move is undone (the table is
 * exactly as before the call) and then:
 *  - a fixed filter (expansion = 0) returns DEDUP_ERR_FULL: nothing was
 *    added, nothing was lost;
 *  - a growable filter (expansion >= 1) first tries a free slot in the
 *    older links (space left by deletes), then appends a new link of
 *    nb_0 * expansion^L buckets (L = current number of links) and inserts
 *    there.  It returns DEDUP_ERR_FULL only when DEDUP_MAX_CHAIN links
 *    exist or the next link would exceed DEDUP_MAX_BITS bits, and
 *    DEDUP_ERR_NOMEM if the new link cannot be allocated (nothing changed
 *    in either case).
 * Queries, counts and deletes look at every link.  The expected FPR of a
 * chain is at most the sum of its links' rates (union bound).
 *
 * Deleting removes one copy of the key's fingerprint from one of its
 * buckets (newest link first).  Delete only keys that were added: deleting
 * a false positive removes another key's fingerprint, which may create a
 * false negative for it.  In one table, deleting an added key is exact: a
 * fingerprint equal to the key's in one of its buckets has the same bucket
 * pair (alt depends only on bucket and fingerprint), so any such copy is
 * interchangeable with the key's own.  The same holds across the links of
 * a chain with expansion 1 (every link has nb buckets, so a key has the
 * same pair in each).  With expansion >= 2 the links map a key to
 * different pairs, and when the key's fingerprint also shows up (falsely)
 * in a newer link than the one holding its copy, the delete removes that
 * other key's copy: per delete this happens with probability below the
 * filter's false-positive rate (fpr_current), and makes the other key a
 * false negative.  Use expansion 0 or 1 when exact deletes matter.
 * The same key may be added several times (up to 2b copies per link);
 * dedup_cuckoo_count() counts them.
 *
 * Files: a fixed filter saves as DEDUP_TYPE_CUCKOO, a growable one as
 * DEDUP_TYPE_CUCKOO_CHAIN; both share one layout (docs/FORMAT.md) and
 * dedup_cuckoo_load() reads either.
 *
 * Thread-safety: queries may run concurrently with each other; add,
 * test_and_add, delete, clear and load need exclusive access.
 */
#ifndef DEDUP_CUCKOO_H
#define DEDUP_CUCKOO_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE 4u
#define DEDUP_CUCKOO_MAX_BUCKET_SIZE 255u
#define DEDUP_CUCKOO_DEFAULT_MAX_KICKS 500u
#define DEDUP_CUCKOO_MAX_KICKS 65535u
#define DEDUP_CUCKOO_MIN_FP_BITS 4u
#define DEDUP_CUCKOO_MAX_FP_BITS 32u
/* Expansion factors above this are refused (a link must stay allocatable). */
#define DEDUP_CUCKOO_MAX_EXPANSION 32768u

typedef struct dedup_cuckoo dedup_cuckoo;

typedef struct dedup_cuckoo_params {
    uint64_t capacity;          /* items planned for the first link; required unless buckets is set */
    uint64_t buckets;           /* 0: from capacity; else the first link has exactly this many buckets */
    double fpr;                 /* target rate, chooses fingerprint_bits when that is 0; default 0.01 */
    uint32_t fingerprint_bits;  /* 0: from fpr; else DEDUP_CUCKOO_MIN_FP_BITS..MAX_FP_BITS */
    uint32_t bucket_size;       /* slots per bucket b, 1..255; default 4 */
    uint32_t max_kicks;         /* relocations per insert, 0..65535; default 500 */
    uint32_t expansion;         /* 0: fixed size (FULL when full); >= 1: growable; default 0 */
    uint64_t seed;              /* hash seed; default DEDUP_DEFAULT_SEED */
} dedup_cuckoo_params;

/* Defaults: capacity 0 (must be set), buckets 0, fpr 0.01 (so 12-bit
 * fingerprints), bucket_size 4, max_kicks 500, expansion 0, default seed. */
void dedup_cuckoo_params_init(dedup_cuckoo_params *params);

/* Creates an empty filter of one link.
 * Errors: DEDUP_ERR_INVALID_ARG (capacity and buckets both 0; a field out of
 * its range above; fpr outside [DEDUP_MIN_FPR, 1) when fingerprint_bits is
 * 0, or too small for 32-bit fingerprints), DEDUP_ERR_LIMIT (the table
 * would exceed DEDUP_MAX_BITS bits), DEDUP_ERR_NOMEM. */
dedup_status dedup_cuckoo_create(const dedup_cuckoo_params *params, const dedup_allocator *alloc,
                                 dedup_cuckoo **out);
/* Frees the filter; NULL is a no-op. */
void dedup_cuckoo_free(dedup_cuckoo *cf);

/* The digest of a key under this filter's seed. */
dedup_digest dedup_cuckoo_digest(const dedup_cuckoo *cf, const void *key, size_t len);

/* ---- Operations ----------------------------------------------------------- */

/* Adds one copy of the key (even if it is already present).
 * Errors: DEDUP_ERR_FULL (see "Insertion" above; the filter is unchanged),
 * DEDUP_ERR_NOMEM (growable filter could not allocate a link; unchanged). */
dedup_status dedup_cuckoo_add(dedup_cuckoo *cf, dedup_digest d);
/* The one verb: if the key might be present, sets *verdict to
 * DEDUP_MAYBE_DUPLICATE and changes nothing; otherwise adds it and sets
 * DEDUP_NEW.  Errors as dedup_cuckoo_add (then *verdict is not set and the
 * key was not added: a caller deduplicating lines must treat FULL as fatal
 * or fall back, never as "duplicate"). */
dedup_status dedup_cuckoo_test_and_add(dedup_cuckoo *cf, dedup_digest d, dedup_verdict *verdict);
/* Whether a fingerprint of the key is in one of its buckets of any link.
 * Two memory accesses per link. */
bool dedup_cuckoo_might_contain(const dedup_cuckoo *cf, dedup_digest d);
/* Removes one copy.  DEDUP_ERR_NOT_FOUND (nothing changed) when no link
 * holds the key's fingerprint in its buckets. */
dedup_status dedup_cuckoo_delete(dedup_cuckoo *cf, dedup_digest d);
/* Copies of the key's fingerprint in its buckets over all links: at least
 * the number of adds minus deletes of the key; more when other keys share
 * its fingerprint and a bucket (a false positive). */
uint64_t dedup_cuckoo_count(const dedup_cuckoo *cf, dedup_digest d);

/* Convenience: hash 'key' with the filter's seed, then as above. */
dedup_status dedup_cuckoo_add_key(dedup_cuckoo *cf, const void *key, size_t len);
dedup_status dedup_cuckoo_test_and_add_key(dedup_cuckoo *cf, const void *key, size_t len,
                                           dedup_verdict *verdict);
bool dedup_cuckoo_might_contain_key(const dedup_cuckoo *cf, const void *key, size_t len);
dedup_status dedup_cuckoo_delete_key(dedup_cuckoo *cf, const void *key, size_t len);
uint64_t dedup_cuckoo_count_key(const dedup_cuckoo *cf, const void *key, size_t len);

/* Batch forms, with the buckets of keys further on prefetched.
 * might_contain_batch: out[i] = might_contain(d[i]).
 * add_batch: adds d[0..n-1] in order exactly like n add calls; stops at the
 * first error and returns it, with *added (may be NULL) = keys added before
 * it (d[*added] was not added; the filter holds d[0..*added-1]). */
void dedup_cuckoo_might_contain_batch(const dedup_cuckoo *cf, const dedup_digest *d, size_t n,
                                      bool *out);
dedup_status dedup_cuckoo_add_batch(dedup_cuckoo *cf, const dedup_digest *d, size_t n,
                                    size_t *added);
/* Batch test-and-add: out[i] as dedup_cuckoo_test_and_add(d[i]) would set
 * it, in order (a key repeated inside the batch is NEW once, then
 * MAYBE_DUPLICATE), with the buckets of keys further on prefetched in every
 * link.  Stops at the first error and returns it (DEDUP_ERR_FULL,
 * DEDUP_ERR_NOMEM), with *done (may be NULL) = keys decided before it
 * (out[0..*done-1] valid, d[*done] not added); *done = n on success. */
dedup_status dedup_cuckoo_test_and_add_batch(dedup_cuckoo *cf, const dedup_digest *d, size_t n,
                                             dedup_verdict *out, size_t *done);

/* ---- Shape and state -------------------------------------------------------- */
typedef struct dedup_cuckoo_info {
    uint32_t fingerprint_bits; /* f */
    uint32_t bucket_size;      /* b */
    uint32_t max_kicks;
    uint32_t expansion;        /* 0 = fixed */
    uint32_t links;            /* sub-filters, >= 1 */
    uint64_t capacity;         /* the capacity asked for (0 if sized by buckets) */
    uint64_t buckets;          /* over all links */
    uint64_t slots;            /* buckets * b */
    uint64_t items;            /* occupied slots over all links */
    uint64_t inserted;         /* successful adds since creation (kept across save/load) */
    uint64_t deleted;          /* successful deletes since creation */
    double load;               /* items / slots */
    double fpr_full;           /* rate when every link is full: sum of 2b/(2^f - 1) */
    double fpr_current;        /* rate at the current load: sum of 2b*load_i/(2^f - 1) */
    uint64_t seed;
    size_t memory;             /* bytes held (dedup_cuckoo_memory_usage) */
} dedup_cuckoo_info;

typedef struct dedup_cuckoo_link_info {
    uint64_t buckets;
    uint64_t slots;
    uint64_t items;     /* occupied slots */
    uint64_t bytes;     /* packed table size */
    double load;
    double fpr_current; /* 2b*load/(2^f - 1), capped at 1 */
} dedup_cuckoo_link_info;

void dedup_cuckoo_get_info(const dedup_cuckoo *cf, dedup_cuckoo_info *info);
/* Link 0 is the oldest.  DEDUP_ERR_RANGE if link >= links. */
dedup_status dedup_cuckoo_get_link_info(const dedup_cuckoo *cf, uint32_t link,
                                        dedup_cuckoo_link_info *info);
/* Bytes held, the struct included. */
size_t dedup_cuckoo_memory_usage(const dedup_cuckoo *cf);
/* Empties every slot and drops the links after the first; statistics reset. */
void dedup_cuckoo_clear(dedup_cuckoo *cf);

/* ---- Sizing (pure) ------------------------------------------------------------
 * Fingerprint bits chosen for rate p with b slots per bucket (0 if p is out
 * of range or needs more than 32 bits); buckets for n items at the planned
 * load of b (0 on invalid arguments); the rate of a table of load a. */
uint32_t dedup_cuckoo_fingerprint_bits_for(double p, uint32_t bucket_size);
uint64_t dedup_cuckoo_buckets_for(uint64_t n, uint32_t bucket_size);
double dedup_cuckoo_fpr_for(uint32_t fingerprint_bits, uint32_t bucket_size, double load);
/* Buckets whose packed table fits in 'bytes' (bytes * 8 / (b * f), rounded
 * down): the one sizing of a filter from a memory budget (dedup_seen and
 * `dedup filter create -m` use it).  0 when the arguments are out of range
 * (f or b outside their limits, bytes above DEDUP_MAX_BITS / 8) or when not
 * one bucket fits. */
uint64_t dedup_cuckoo_buckets_for_memory(uint64_t bytes, uint32_t fingerprint_bits,
                                         uint32_t bucket_size);

/* ---- Persistence (docs/FORMAT.md: types CUCKOO and CUCKOO_CHAIN) ------------
 * save writes params (with per-link sizes and counts) and every link's
 * packed table.  For a RedisBloom-style SCANDUMP, save into a dedup_mem_sink
 * of dedup_cuckoo_serialized_size() bytes and hand out the blob in chunks;
 * LOADCHUNK reassembles it and calls dedup_cuckoo_load on a mem source.
 * load validates every field before allocating, checks that each link's
 * occupied-slot count matches its table, and verifies the checksum.
 * Load errors: the decoder's (BAD_MAGIC, VERSION, WRONG_TYPE, TRUNCATED,
 * CORRUPT, CHECKSUM), LIMIT, NOMEM, IO. */
dedup_status dedup_cuckoo_save(const dedup_cuckoo *cf, dedup_sink *sink);
uint64_t dedup_cuckoo_serialized_size(const dedup_cuckoo *cf);
dedup_status dedup_cuckoo_load(dedup_source src, const dedup_allocator *alloc, dedup_cuckoo **out);
dedup_status dedup_cuckoo_save_file(const dedup_cuckoo *cf, const char *path);
dedup_status dedup_cuckoo_load_file(const char *path, const dedup_allocator *alloc,
                                    dedup_cuckoo **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_CUCKOO_H */
