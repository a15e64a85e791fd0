/*
 * testutil.h - shared helpers for the cmocka tests: a seeded PRNG whose seed
 * is printed (and can be fixed with DEDUP_TEST_SEED), a binomial bound for
 * false-positive checks, and a failing allocator for out-of-memory tests.
 */
#ifndef DEDUP_TESTUTIL_H
#define DEDUP_TESTUTIL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dedup/common.h"

/* Seed for this test program: $DEDUP_TEST_SEED if set, else time-based.
 * Printed once to stderr so a failure can be replayed. */
uint64_t tu_seed(void);

/* Under ThreadSanitizer, whose engine runs several times slower, a loop over
 * k variants may run every k-th one from an offset the seed picks: each run
 * covers a share, and the seeds of successive runs cover them all.  In the
 * other builds the loop runs every variant. */
#ifdef DEDUP_TSANITIZED
#define TU_TSAN_FIRST(k) ((int)(tu_seed() % (uint64_t)(k)))
#define TU_TSAN_STEP(k) (k)
#else
#define TU_TSAN_FIRST(k) 0
#define TU_TSAN_STEP(k) 1
#endif

/* The entry of a threaded test program's case that runs on one thread
 * only: left out of the ThreadSanitizer build's list (nothing in it can
 * race; the optimised and the AddressSanitizer builds run it).
 *     const struct CMUnitTest tests[] = {TU_ONE_THREAD(cmocka_unit_test(a)) ...}; */
#ifdef DEDUP_TSANITIZED
#define TU_ONE_THREAD(entry)
#else
#define TU_ONE_THREAD(entry) entry,
#endif
/* Marks such a case's function, which the ThreadSanitizer build defines
 * without running. */
#define TU_ONE_THREAD_FN __attribute__((unused))

/* splitmix64 PRNG. */
typedef struct tu_rng { uint64_t s; } tu_rng;
static inline uint64_t tu_next(tu_rng *r)
{
    uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
static inline uint64_t tu_below(tu_rng *r, uint64_t n) { return n ? tu_next(r) % n : 0; }

/* Largest count of false positives among 'trials' that still agrees with a
 * predicted rate 'p' at confidence 1 - 5e-6 (one-sided; normal
 * approximation with continuity correction, plus the exact Poisson tail for
 * small means).  The suite holds dozens of these checks and runs three times
 * per CI run: at 99.9% one of them failed by chance every few runs, while a
 * real fault (a rate off by a few percent over 10^6 trials) is still many
 * standard deviations out. */
uint64_t tu_binomial_upper(uint64_t trials, double p);
/* Smallest such count (the lower side). */
uint64_t tu_binomial_lower(uint64_t trials, double p);

/* ---- Rate checks over a run ---------------------------------------------------
 * A filter that fills while it is tested has, at the i-th fresh key, the
 * false-positive rate of a filter holding i keys; over a run of keys
 * from0 .. from0+n-1 the expected count is the sum of those rates.  These
 * helpers give that sum from the structure's own formula, and a two-sided
 * interval around a mean that a count of rare independent events falls
 * outside with probability at most 1e-6 on each side. */

/* The rate of a filter holding 'items' keys (a model's formula). */
typedef double (*tu_rate_fn)(uint64_t items, const void *ctx);
/* Sum of rate(i) for i in [from, from + n): exact for n <= 4096, else by
 * Simpson's rule over 4096 intervals (the rates are smooth in i). */
double tu_expected_over_run(tu_rate_fn rate, const void *ctx, uint64_t from, uint64_t n);
/* The same for a Bloom filter of 'bits' bits and 'k' probes, with the
 * library's own model: dedup_blocked_fpr_for when 'blocked', else
 * dedup_bloom_fpr_for. */
double tu_bloom_expected_over_run(bool blocked, uint64_t bits, uint32_t k, uint64_t from,
                                  uint64_t n);
/* The Poisson interval [*lo, *hi] for a mean 'mean': P(X < lo) <= 1e-6 and
 * P(X > hi) <= 1e-6.  A sum of independent Bernoulli trials has at most the
 * Poisson variance, so the interval also holds for it. */
void tu_count_interval(double mean, uint64_t *lo, uint64_t *hi);
/* Asserts lo <= observed <= hi for tu_count_interval(mean), printing what,
 * the count, the mean and the interval either way. */
void tu_assert_count(const char *what, uint64_t observed, double mean);
/* The same where the structure's formula bounds the mean from both sides
 * rather than giving it: the low end from mean_lo's interval, the high end
 * from mean_hi's. */
void tu_assert_count_between(const char *what, uint64_t observed, double mean_lo, double mean_hi);

/* An allocator that fails the Nth allocation (1-based) and every one after
 * it when fail_at != 0; counts live bytes so leaks can be asserted.
 * tu_failing_allocator() initialises *state, fail_at included. */
typedef struct tu_failing_alloc {
    uint64_t calls;
    uint64_t fail_at;
    int64_t live;
} tu_failing_alloc;
dedup_allocator tu_failing_allocator(tu_failing_alloc *state, uint64_t fail_at);

/* Saves an object into a malloc'd buffer of exactly 'expected_size' bytes
 * (its serialized_size), asserting that save succeeds and fills it; the
 * caller frees the buffer.  'save' adapts a structure's dedup_X_save. */
#include "dedup/format.h"
unsigned char *tu_save_blob(dedup_save_fn save, const void *obj, uint64_t expected_size,
                            size_t *len);

/* A container file in a malloc'd buffer (*len bytes) holding exactly the
 * given type, seed, parameters and payload, with a correct checksum: how the
 * loaders' tests build files whose fields lie.  The caller frees it. */
unsigned char *tu_container(uint16_t type, uint64_t seed, const void *params, uint32_t plen,
                            const void *payload, uint64_t paylen, size_t *len);

#endif
