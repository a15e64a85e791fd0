/*
 * dedup/limits.h - hard ceilings, each with the reason it exists.
 *
 * Loaders check every field read from a file or blob against these before
 * allocating anything, so a hostile length cannot make the library allocate
 * or read beyond them.  Raising one is a format-compatible change as long as
 * the new value still fits the field that stores it.
 */
#ifndef DEDUP_LIMITS_H
#define DEDUP_LIMITS_H

#include <stdint.h>

/* Bitmaps and Bloom filters: 2^40 bits = 128 GiB.  Enough for 100 billion
 * keys at 1%; beyond it a single filter no longer fits any machine we run
 * on, and bit indexes keep 24 bits of headroom in a uint64_t. */
#define DEDUP_MAX_BITS (UINT64_C(1) << 40)

/* Bloom probes per key.  k above 32 is never optimal for p >= 1e-9. */
#define DEDUP_MAX_BLOOM_K 32

/* Smallest false-positive rate accepted by sizing functions.  Below it the
 * digest's own collision rate (2^-64 per pair of index words) dominates. */
#define DEDUP_MIN_FPR 1e-12

/* Length of the structure-specific parameter block in a file header.  The
 * largest structure needs well under 1 KiB; the ceiling bounds what a loader
 * buffers before it has checked anything. */
#define DEDUP_MAX_PARAMS_LEN 4096u

/* Number of links in a scalable filter chain; with growth 2 this is far
 * beyond any reachable item count. */
#define DEDUP_MAX_CHAIN 64u

#endif /* DEDUP_LIMITS_H */
