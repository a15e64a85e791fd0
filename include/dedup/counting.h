/*
 * dedup/counting.h - counting Bloom filter: a Bloom filter that can forget.
 *
 * Each of the m positions of a classic Bloom filter becomes a 4-bit counter
 * (16 per 64-bit word).  Adding a key increments its k counters, deleting it
 * decrements them; a key might be present while all its counters are
 * non-zero.  Probes are derived from the digest exactly as for the classic
 * Bloom filter (dedup/bloom.h: enhanced double hashing, h1 = lo, h2 = hi,
 * probe i at h1 + i*h2 + (i^3 - i)/6, mapped onto [0, m) by multiply-shift),
 * and sized with the same formulas (dedup_bloom_bits_for and
 * dedup_bloom_k_for): m = ceil(-n ln p / (ln 2)^2) counters
 * (rounded up to a multiple of 16), k = round((m/n) ln 2), at least 1.  The
 * memory is therefore 4x that of a classic filter of the same (n, p).
 *
 * Saturation: a counter that reaches 15 stays at 15 forever (adds and
 * deletes leave it alone), so a delete can never create a false negative,
 * whatever the add/delete history.  The price is that keys whose counters
 * are all saturated can never be fully forgotten.  The number of saturated
 * counters is reported (dedup_counting_saturated); with counters sized for
 * the planned capacity it stays 0 in practice (a counter reaches 15 with
 * probability about 1e-15 at capacity).
 *
 * Deleting: dedup_counting_delete() of a key that is certainly absent (one
 * of its counters is 0, or smaller than the number of its probes that land
 * on it) returns DEDUP_ERR_NOT_FOUND and changes nothing.  Deleting a key
 * that was never added but happens to be a false positive is not
 * detectable and removes a share of other keys' counts: the caller should
 * only delete keys it added (as with every counting filter).
 *
 * Thread-safety: queries may run concurrently with each other; add,
 * delete, merge, clear and load need exclusive access.
 */
#ifndef DEDUP_COUNTING_H
#define DEDUP_COUNTING_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The value a counter saturates at. */
#define DEDUP_COUNTING_MAX 15u

typedef struct dedup_counting dedup_counting;

typedef struct dedup_counting_params {
    uint64_t capacity; /* n: items planned; required (>= 1) unless counters is set */
    double fpr;        /* p: target rate at capacity, in [DEDUP_MIN_FPR, 1); default 0.01 */
    uint64_t counters; /* 0: size from (capacity, fpr); else this many counters
                          (rounded up to a multiple of 16) */
    uint32_t k;        /* 0: optimal for (capacity, counters); else 1..DEDUP_MAX_BLOOM_K */
    uint64_t seed;     /* hash seed; default DEDUP_DEFAULT_SEED */
} dedup_counting_params;

/* Defaults: capacity 0 (must be set), fpr 0.01, counters 0, k 0, default seed. */
void dedup_counting_params_init(dedup_counting_params *params);

/* Creates an empty filter (all counters zero).
 * Errors: DEDUP_ERR_INVALID_ARG (capacity 0 without counters; counters
 * given with capacity 0 and k 0, as the optimal k is then unknown; fpr
 * outside [DEDUP_MIN_FPR, 1); k > DEDUP_MAX_BLOOM_K), DEDUP_ERR_LIMIT (more
 * than DEDUP_MAX_BITS / 4 counters), DEDUP_ERR_NOMEM. */
dedup_status dedup_counting_create(const dedup_counting_params *params,
                                   const dedup_allocator *alloc, dedup_counting **out);
/* Frees the filter; NULL is a no-op. */
void dedup_counting_free(dedup_counting *cb);

/* The digest of a key under this filter's seed. */
dedup_digest dedup_counting_digest(const dedup_counting *cb, const void *key, size_t len);

/* ---- Operations (O(k)) ------------------------------------------------------ */

/* Increments the key's k counters (saturating at 15).  Cannot fail. */
void dedup_counting_add(dedup_counting *cb, dedup_digest d);
bool dedup_counting_might_contain(const dedup_counting *cb, dedup_digest d);
/* The one verb: if the key might be present, returns DEDUP_MAYBE_DUPLICATE
 * and changes nothing; otherwise adds it and returns DEDUP_NEW. */
dedup_verdict dedup_counting_test_and_add(dedup_counting *cb, dedup_digest d);
/* Decrements the key's counters (saturated ones stay at 15).
 * DEDUP_ERR_NOT_FOUND, with nothing changed, when the key is certainly
 * absent. */
dedup_status dedup_counting_delete(dedup_counting *cb, dedup_digest d);
/* Estimated number of copies of the key: the minimum over its counters
 * (a counter hit by j of the key's probes counts value/j).  Never less than
 * the true number of adds minus deletes of this key; 15 means "15 or
 * more" when a counter is saturated. */
uint32_t dedup_counting_count(const dedup_counting *cb, dedup_digest d);

/* Convenience: hash 'key' with the filter's seed, then as above. */
void dedup_counting_add_key(dedup_counting *cb, const void *key, size_t len);
bool dedup_counting_might_contain_key(const dedup_counting *cb, const void *key, size_t len);
dedup_verdict dedup_counting_test_and_add_key(dedup_counting *cb, const void *key, size_t len);
dedup_status dedup_counting_delete_key(dedup_counting *cb, const void *key, size_t len);
uint32_t dedup_counting_count_key(const dedup_counting *cb, const void *key, size_t len);

/* Batch add: the same as dedup_counting_add on d[0..n-1], with the counter
 * words of keys further on prefetched. */
void dedup_counting_add_batch(dedup_counting *cb, const dedup_digest *d, size_t n);
/* Batch query: out[i] = might_contain(d[i]); the counter words of many keys
 * are prefetched ahead, so large filters answer several times faster. */
void dedup_counting_might_contain_batch(const dedup_counting *cb, const dedup_digest *d,
                                        size_t n, bool *out);
/* Batch test-and-add: out[i] = dedup_counting_test_and_add(d[i]), in order
 * (a key repeated inside the batch is NEW once, then MAYBE_DUPLICATE), the
 * counter words of keys further on prefetched.  Cannot fail. */
void dedup_counting_test_and_add_batch(dedup_counting *cb, const dedup_digest *d, size_t n,
                                       dedup_verdict *out);

/* ---- Shape and state -------------------------------------------------------- */
uint64_t dedup_counting_counters(const dedup_counting *cb); /* m */
uint32_t dedup_counting_k(const dedup_counting *cb);
uint64_t dedup_counting_capacity(const dedup_counting *cb); /* n planned (0 if sized by counters) */
double dedup_counting_target_fpr(const dedup_counting *cb);
uint64_t dedup_counting_seed(const dedup_counting *cb);
/* Successful add calls (test_and_add answering NEW included). */
uint64_t dedup_counting_adds(const dedup_counting *cb);
/* Successful delete calls. */
uint64_t dedup_counting_deletes(const dedup_counting *cb);
/* Counters stuck at 15 (O(1)). */
uint64_t dedup_counting_saturated(const dedup_counting *cb);
/* Non-zero counters (O(m)). */
uint64_t dedup_counting_nonzero(const dedup_counting *cb);
/* FPR expected at the current fill: (nonzero/m)^k (O(m)). */
double dedup_counting_current_fpr(const dedup_counting *cb);
/* Bytes held, the struct included. */
size_t dedup_counting_memory_usage(const dedup_counting *cb);
/* Zeroes every counter and the add/delete/saturation statistics. */
void dedup_counting_clear(dedup_counting *cb);

/* dst becomes the counter-wise saturating sum dst + src: it then answers
 * like a filter into which both key multisets were added.  Adds/deletes
 * statistics are summed.  DEDUP_ERR_INCOMPATIBLE unless counters, k and seed
 * are equal. */
dedup_status dedup_counting_merge(dedup_counting *dst, const dedup_counting *src);

/* ---- Persistence (docs/FORMAT.md: type COUNTING_BLOOM) ----------------------
 * save writes the whole filter through 'sink' (a dedup_mem_sink of
 * dedup_counting_serialized_size() bytes gives a blob the caller may split
 * into chunks as it likes); load validates every field and the checksum,
 * and recomputes the saturated-counter statistic from the payload.
 * Load errors: the decoder's (BAD_MAGIC, VERSION, WRONG_TYPE, TRUNCATED,
 * CORRUPT, CHECKSUM), LIMIT, NOMEM, IO. */
dedup_status dedup_counting_save(const dedup_counting *cb, dedup_sink *sink);
uint64_t dedup_counting_serialized_size(const dedup_counting *cb);
dedup_status dedup_counting_load(dedup_source src, const dedup_allocator *alloc,
                                 dedup_counting **out);
/* Atomic save to a path (dedup_save_file) and load from one (trailing bytes
 * after the checksum are rejected with DEDUP_ERR_TRAILING). */
dedup_status dedup_counting_save_file(const dedup_counting *cb, const char *path);
dedup_status dedup_counting_load_file(const char *path, const dedup_allocator *alloc,
                                      dedup_counting **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_COUNTING_H */
