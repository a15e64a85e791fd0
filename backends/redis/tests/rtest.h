/*
 * rtest.h - what the Redis backend's test programs share: a CHECK that
 * counts failures and goes on (so one run reports every broken case), and
 * a seeded splitmix64 generator.  Each program includes it once.
 */
#ifndef DEDUP_REDIS_RTEST_H
#define DEDUP_REDIS_RTEST_H

#include <stdint.h>
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static uint64_t rng_s;
static inline uint64_t rnd(void)
{
    uint64_t z = (rng_s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

#endif
