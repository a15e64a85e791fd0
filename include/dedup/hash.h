/*
 * dedup/hash.h - the one digest every structure derives its indexes from.
 *
 * A key is hashed exactly once, to a 128-bit XXH3 digest with the seed kept
 * in the object (and in its file).  Bloom probes, cuckoo buckets and
 * fingerprints, hash-set slots, ring positions and spill partitions are all
 * computed from this digest; nothing hashes a key twice.
 *
 * XXH3-128 output is stable across xxHash releases since 0.8.0, so digests
 * (and the files built from them) are portable across hosts and versions.
 * These functions are thread-safe, and all but dedup_secret_seed are pure.
 */
#ifndef DEDUP_HASH_H
#define DEDUP_HASH_H

#include "dedup/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hash algorithm identifiers stored in files.  Append only. */
#define DEDUP_HASH_XXH3_128 1u

/* The default seed used by the CLI and by params_init() functions. */
#define DEDUP_DEFAULT_SEED UINT64_C(0x9E3779B97F4A7C15)

typedef struct dedup_digest {
    uint64_t lo; /* low 64 bits of XXH3-128 */
    uint64_t hi; /* high 64 bits of XXH3-128 */
} dedup_digest;

/* A secret seed: 64 random bits from the operating system (getrandom(2),
 * blocking only until the kernel's pool is first initialised), never 0 and
 * never DEDUP_DEFAULT_SEED.  Digest-keyed structures made with it resist
 * keys chosen to collide: the seed must be kept with them (their files do).
 * DEDUP_ERR_IO, with errno set, when the OS gives none. */
dedup_status dedup_secret_seed(uint64_t *seed);

/* Digest of 'len' bytes at 'key' ('key' may be NULL when len == 0). */
dedup_digest dedup_hash(const void *key, size_t len, uint64_t seed);

/* Digest of a 64-bit integer key: hashes its 8 little-endian bytes, so the
 * result equals dedup_hash() of those bytes on every host. */
dedup_digest dedup_hash_u64(uint64_t key, uint64_t seed);

/* Map a 64-bit value uniformly onto [0, range) without division
 * (Lemire's multiply-shift).  range may be any value >= 1. */
__extension__ typedef unsigned __int128 dedup_u128_;
static inline uint64_t dedup_reduce(uint64_t x, uint64_t range)
{
    return (uint64_t)(((dedup_u128_)x * range) >> 64);
}

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_HASH_H */
