/*
 * dedup/bloom.h - classic and blocked Bloom filters.
 *
 * A Bloom filter answers "might this key have been added?".  A "no" is
 * certain; a "yes" is wrong with a probability (the false-positive rate, FPR)
 * that the caller chooses when sizing.  There are never false negatives.
 *
 * Two layouts share this API:
 *
 *  - DEDUP_BLOOM_CLASSIC: m bits, k probes spread over the whole array by
 *    enhanced double hashing of the digest (h1 = lo, h2 = hi; probe i at
 *    h1 + i*h2 + (i^3 - i)/6, mapped onto [0, m) by multiply-shift, plus
 *    i(i+1)/2 bits mod m, so the probes of every digest spread; a filter
 *    loaded from a file of probe scheme 0 keeps that scheme's probes,
 *    without the added term: see docs/FORMAT.md).  Sized by
 *    m = ceil(-n ln p / (ln 2)^2), k = round((m/n) ln 2), at least 1.  Each
 *    key touches up to k cache lines.
 *
 *  - DEDUP_BLOOM_BLOCKED: m is a multiple of 512; each key selects one
 *    64-byte block (one cache line) from the digest's low word and sets k bit
 *    positions inside it, each taken from the high word by its own
 *    multiply-shift ((hi * salt_i) >> 55).  Blocks fill unevenly, so the
 *    classic formula underestimates its FPR; it is sized with its own exact
 *    model (a Poisson mixture over keys per block, see bloom.c), and needs
 *    somewhat more bits than a classic filter for the same p.
 *
 * Keys enter as dedup_digest values (dedup/hash.h) hashed once with the
 * filter's seed; the *_key convenience functions hash for you.
 *
 * Thread-safety: queries may run concurrently with each other.  A filter
 * created with params.thread_safe = true also accepts concurrent add and
 * test_and_add calls from any number of threads (bits are set with atomic
 * OR; no lock; no added key is ever lost).  Without it, writers need
 * exclusive access.  union/intersect/load/free always need exclusive access.
 */
#ifndef DEDUP_BLOOM_H
#define DEDUP_BLOOM_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dedup_bloom_kind {
    DEDUP_BLOOM_CLASSIC = 0,
    DEDUP_BLOOM_BLOCKED = 1
} dedup_bloom_kind;

typedef struct dedup_bloom dedup_bloom;

typedef struct dedup_bloom_params {
    dedup_bloom_kind kind; /* default DEDUP_BLOOM_CLASSIC */
    uint64_t capacity;     /* n: items planned; required (>= 1) unless bits is set */
    double fpr;            /* p: target rate at capacity, in (0, 1); default 0.01 */
    uint64_t bits;         /* 0: size from (capacity, fpr); else use this many bits:
                              classic uses exactly this m (stored in whole 64-bit
                              words), blocked rounds up to a multiple of 512 */
    uint32_t k;            /* 0: optimal for (capacity, bits), or, when capacity
                              is 0, for the load at which bits reach fpr;
                              else this many probes (a blocked filter sized
                              from capacity then gets the fewest blocks that
                              reach fpr with this k) */
    uint64_t seed;         /* hash seed; default DEDUP_DEFAULT_SEED */
    bool thread_safe;      /* atomic adds (see above); default false */
} dedup_bloom_params;

/* Defaults: classic, capacity 0 (must be set), fpr 0.01, seed default. */
void dedup_bloom_params_init(dedup_bloom_params *params);

/* Creates an empty filter.  Sizing from (capacity, fpr) uses
 * dedup_bloom_bits_for/k_for (classic) or dedup_blocked_bits_for/k_for
 * (blocked); the blocked search costs a few milliseconds.
 * Errors: DEDUP_ERR_INVALID_ARG (capacity 0 without bits, fpr outside
 * [DEDUP_MIN_FPR, 1), k > DEDUP_MAX_BLOOM_K (16 for blocked), unknown kind),
 * DEDUP_ERR_LIMIT (more than DEDUP_MAX_BITS bits), DEDUP_ERR_NOMEM. */
dedup_status dedup_bloom_create(const dedup_bloom_params *params, const dedup_allocator *alloc,
                                dedup_bloom **out);
/* Frees the filter; NULL is a no-op. */
void dedup_bloom_free(dedup_bloom *bf);

/* ---- The one verb and its parts ----------------------------------------- */

/* The digest of a key under this filter's seed. */
dedup_digest dedup_bloom_digest(const dedup_bloom *bf, const void *key, size_t len);

void dedup_bloom_add(dedup_bloom *bf, dedup_digest d);
bool dedup_bloom_might_contain(const dedup_bloom *bf, dedup_digest d);
/* Adds d and returns whether it might have been present before the call.
 * In thread-safe mode two threads adding the same new key at once may both
 * get false (both saw it absent); the key is still added. */
bool dedup_bloom_test_and_add(dedup_bloom *bf, dedup_digest d);

/* Convenience: hash 'key' with the filter's seed, then as above. */
void dedup_bloom_add_key(dedup_bloom *bf, const void *key, size_t len);
bool dedup_bloom_might_contain_key(const dedup_bloom *bf, const void *key, size_t len);
bool dedup_bloom_test_and_add_key(dedup_bloom *bf, const void *key, size_t len);

/* Batch forms: the same results as calling the single form on d[0..n-1] in
 * order (a key repeated inside one batch is reported present the second
 * time), but memory accesses for many keys are issued ahead (prefetch), so
 * filters larger than cache run several times faster.  'out' has n entries. */
void dedup_bloom_add_batch(dedup_bloom *bf, const dedup_digest *d, size_t n);
void dedup_bloom_might_contain_batch(const dedup_bloom *bf, const dedup_digest *d, size_t n,
                                     bool *out);
void dedup_bloom_test_and_add_batch(dedup_bloom *bf, const dedup_digest *d, size_t n, bool *out);

/* ---- Shape and state ---------------------------------------------------- */
dedup_bloom_kind dedup_bloom_get_kind(const dedup_bloom *bf);
uint64_t dedup_bloom_bits(const dedup_bloom *bf);     /* m */
uint32_t dedup_bloom_k(const dedup_bloom *bf);        /* probes per key */
uint64_t dedup_bloom_capacity(const dedup_bloom *bf); /* n planned (0 if sized by bits) */
double dedup_bloom_target_fpr(const dedup_bloom *bf); /* p asked for */
uint64_t dedup_bloom_seed(const dedup_bloom *bf);
/* Set bits (O(m/64) time). */
uint64_t dedup_bloom_popcount(const dedup_bloom *bf);
/* Fraction of bits set, in [0, 1]. */
double dedup_bloom_fill_ratio(const dedup_bloom *bf);
/* Estimated number of distinct keys added, from the popcount (Swamidass &
 * Baldi; per block for the blocked layout).  Within a few percent while the
 * filter is below capacity; +INF when saturated. */
double dedup_bloom_estimate_count(const dedup_bloom *bf);
/* FPR expected at the current fill: fill^k for classic, the mean over blocks
 * of (block fill)^k for blocked. */
double dedup_bloom_current_fpr(const dedup_bloom *bf);
/* Bytes held, the struct included. */
size_t dedup_bloom_memory_usage(const dedup_bloom *bf);
/* Clears every bit. */
void dedup_bloom_clear(dedup_bloom *bf);

/* ---- Set algebra -----------------------------------------------------------
 * dst becomes dst OR src (union: answers like a filter of both key sets) or
 * dst AND src (intersection: may answer yes for keys in only one set, never
 * no for a key in both).  DEDUP_ERR_INCOMPATIBLE unless kind, bits, k,
 * seed and probe scheme (a classic filter loaded from a scheme-0 file) are
 * equal. */
dedup_status dedup_bloom_union(dedup_bloom *dst, const dedup_bloom *src);
dedup_status dedup_bloom_intersect(dedup_bloom *dst, const dedup_bloom *src);

/* ---- Persistence (docs/FORMAT.md: types BLOOM and BLOCKED_BLOOM) ------------ */
dedup_status dedup_bloom_save(const dedup_bloom *bf, dedup_sink *sink);
/* Bytes dedup_bloom_save() writes. */
uint64_t dedup_bloom_serialized_size(const dedup_bloom *bf);
/* Loads either layout; validates every field and the checksum.  The bit
 * array is read straight into its final place (no second copy).  The loaded
 * filter is not in thread-safe mode (thread_safe is not part of the file).
 * Bytes after the checksum are left unread in 'src'.  Errors:
 * the decoder's (BAD_MAGIC, VERSION, WRONG_TYPE, TRUNCATED, CORRUPT,
 * CHECKSUM), LIMIT, NOMEM, IO. */
dedup_status dedup_bloom_load(dedup_source src, const dedup_allocator *alloc, dedup_bloom **out);
/* Atomic save to a path (temporary file, fsync, rename) and load from one.
 * load_file rejects trailing bytes after the checksum (DEDUP_ERR_TRAILING);
 * DEDUP_ERR_IO leaves errno describing the failed system call.  In
 * thread-safe mode save may run while other threads add (each word is read
 * atomically; the file holds some consistent-per-word snapshot). */
dedup_status dedup_bloom_save_file(const dedup_bloom *bf, const char *path);
dedup_status dedup_bloom_load_file(const char *path, const dedup_allocator *alloc,
                                   dedup_bloom **out);

/* ---- Sizing, in every direction (pure, thread-safe, no allocation) --------
 * Classic: bits for (n, p) = ceil(-n ln p / (ln 2)^2) (UINT64_MAX if that
 * does not fit); optimal k for (n, bits) = round((bits/n) ln 2) clamped to
 * [1, DEDUP_MAX_BLOOM_K]; the FPR of (n, bits, k) = (1 - (1 - 1/bits)^(kn))^k;
 * the capacity that (bits, p) holds = the largest n with bits_for(n, p) <=
 * bits.  Return 0 when arguments are invalid (n == 0, p outside (0,1),
 * bits == 0, k == 0). */
uint64_t dedup_bloom_bits_for(uint64_t n, double p);
uint32_t dedup_bloom_k_for(uint64_t n, uint64_t bits);
double dedup_bloom_fpr_for(uint64_t n, uint64_t bits, uint32_t k);
uint64_t dedup_bloom_capacity_for(uint64_t bits, double p);
/* Blocked: the same four with the layout's exact model (see bloom.c):
 * bits_for is the smallest multiple of 512 whose model FPR, with the best k
 * in 1..16, is <= p (a search: milliseconds; beyond DEDUP_MAX_BITS it
 * returns DEDUP_MAX_BITS + 512); k_for is the k in 1..16 with the lowest
 * model FPR; fpr_for uses bits / 512 whole blocks (0 if bits < 512 or
 * k > 16); capacity_for is the largest n whose best-k FPR is <= p. */
uint64_t dedup_blocked_bits_for(uint64_t n, double p);
uint32_t dedup_blocked_k_for(uint64_t n, uint64_t bits);
double dedup_blocked_fpr_for(uint64_t n, uint64_t bits, uint32_t k);
uint64_t dedup_blocked_capacity_for(uint64_t bits, double p);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_BLOOM_H */
