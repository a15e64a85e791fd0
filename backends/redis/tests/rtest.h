/*
 * rtest.h - what the Redis backend's test programs share: a CHECK that
 * counts failures and goes on (so one run reports every broken case), a
 * seeded splitmix64 generator whose seed comes from $DEDUP_TEST_SEED or the
 * clock and is printed, and the Redis key of the keys scheme's entry for a
 * digest.  Each program includes it once.
 */
#ifndef DEDUP_REDIS_RTEST_H
#define DEDUP_REDIS_RTEST_H

#include "dedup/hash.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* Seeds rnd() from $DEDUP_TEST_SEED, or from the clock when it is unset or
 * empty, and prints the seed so a failing run can be replayed. */
static inline uint64_t rtest_seed(void)
{
    const char *env = getenv("DEDUP_TEST_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0)
                                : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    fprintf(stderr, "seed %llu (DEDUP_TEST_SEED to replay)\n", (unsigned long long)seed);
    rng_s = seed;
    return seed;
}

/* The Redis key of the keys scheme's entry for digest d: "<name>:" and the
 * 16 digest bytes, little-endian lo then hi.  key holds strlen(name) + 17
 * bytes; returns that length. */
static inline size_t rtest_entry_key(char *key, const char *name, dedup_digest d)
{
    size_t nl = strlen(name);
    memcpy(key, name, nl);
    key[nl] = ':';
    for (int i = 0; i < 8; i++) {
        key[nl + 1 + i] = (char)(d.lo >> (8 * i));
        key[nl + 9 + i] = (char)(d.hi >> (8 * i));
    }
    return nl + 17;
}

#endif
