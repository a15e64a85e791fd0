/* test_bloom_mt.c - thread-safe mode: concurrent adds lose nothing.
 *
 * Several threads add disjoint and overlapping key ranges (single, batch
 * and test_and_add forms) into one thread-safe filter while others query
 * it.  Afterwards every added key must be reported present, and the filter
 * must be bit-identical to one built sequentially from the same keys: an OR
 * lost to a race would show up as a missing bit.  Run under -DDEDUP_TSAN=ON
 * this also proves the accesses are race-free. */
#include "testutil.h"

#include "dedup/bloom.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define PER_THREAD 60000 /* keys of its own; plus a shared range */
#define SHARED 30000

typedef struct job {
    dedup_bloom *bf;
    int id;
    uint64_t base;
    uint64_t bad; /* present-before answers that were impossible: none expected */
} job;

static dedup_digest key_digest(uint64_t key) { return dedup_hash_u64(key, DEDUP_DEFAULT_SEED); }

static void *writer(void *arg)
{
    job *j = arg;
    dedup_digest batch[64];
    bool out[64];
    /* Own range: mode depends on the thread. */
    uint64_t own = j->base + (uint64_t)j->id * PER_THREAD;
    for (uint64_t i = 0; i < PER_THREAD; i += 64) {
        for (int b = 0; b < 64; b++)
            batch[b] = key_digest(own + i + (uint64_t)b);
        switch (j->id % 3) {
        case 0:
            for (int b = 0; b < 64; b++)
                dedup_bloom_add(j->bf, batch[b]);
            break;
        case 1:
            dedup_bloom_add_batch(j->bf, batch, 64);
            break;
        default:
            dedup_bloom_test_and_add_batch(j->bf, batch, 64, out);
            /* Immediately afterwards each must be present. */
            for (int b = 0; b < 64; b++)
                if (!dedup_bloom_might_contain(j->bf, batch[b]))
                    j->bad++;
        }
    }
    /* Shared range: every thread adds it, in a different order. */
    for (uint64_t i = 0; i < SHARED; i++) {
        uint64_t k = j->id % 2 ? SHARED - 1 - i : i;
        dedup_digest d = key_digest(j->base + THREADS * PER_THREAD + k);
        dedup_bloom_test_and_add(j->bf, d);
        if (!dedup_bloom_might_contain(j->bf, d))
            j->bad++;
    }
    return NULL;
}

static void *reader(void *arg)
{
    job *j = arg;
    /* Queries concurrent with the writers; the answers are not checked
     * (keys may or may not be in yet), only that reading is race-free. */
    uint64_t yes = 0;
    bool out[128];
    dedup_digest batch[128];
    for (uint64_t i = 0; i < THREADS * PER_THREAD; i += 128) {
        for (int b = 0; b < 128; b++)
            batch[b] = key_digest(j->base + i + (uint64_t)b);
        dedup_bloom_might_contain_batch(j->bf, batch, 128, out);
        for (int b = 0; b < 128; b++)
            yes += out[b];
    }
    (void)dedup_bloom_popcount(j->bf);
    (void)dedup_bloom_estimate_count(j->bf);
    j->bad = yes > THREADS * PER_THREAD ? 1 : 0;
    return NULL;
}

static void run_kind(dedup_bloom_kind kind)
{
    tu_rng r = {tu_seed() ^ (uint64_t)kind};
    uint64_t base = tu_next(&r) >> 8;
    dedup_bloom_params pa;
    dedup_bloom_params_init(&pa);
    pa.kind = kind;
    pa.capacity = THREADS * PER_THREAD + SHARED;
    pa.fpr = 0.01;
    pa.thread_safe = true;
    dedup_bloom *bf = NULL, *ref = NULL;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_OK);
    pa.thread_safe = false;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &ref), DEDUP_OK);

    pthread_t t[THREADS + 1];
    job jobs[THREADS + 1];
    for (int i = 0; i <= THREADS; i++) {
        jobs[i] = (job){bf, i, base, 0};
        assert_int_equal(pthread_create(&t[i], NULL, i < THREADS ? writer : reader, &jobs[i]), 0);
    }
    for (int i = 0; i <= THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(jobs[i].bad, 0);
    }
    /* Every key is present, and nothing was lost: bit-identical to the
     * sequential build. */
    for (uint64_t i = 0; i < THREADS * PER_THREAD + SHARED; i++) {
        dedup_digest d = key_digest(base + i);
        assert_true(dedup_bloom_might_contain(bf, d));
        dedup_bloom_add(ref, d);
    }
    assert_int_equal(dedup_bloom_popcount(bf), dedup_bloom_popcount(ref));
    /* ref AND bf keeps bf's popcount only if bf holds every bit of ref. */
    assert_int_equal(dedup_bloom_intersect(ref, bf), DEDUP_OK);
    assert_int_equal(dedup_bloom_popcount(ref), dedup_bloom_popcount(bf));
    dedup_bloom_free(bf);
    dedup_bloom_free(ref);
}

static void test_classic_mt(void **state)
{
    (void)state;
    run_kind(DEDUP_BLOOM_CLASSIC);
}

static void test_blocked_mt(void **state)
{
    (void)state;
    run_kind(DEDUP_BLOOM_BLOCKED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classic_mt),
        cmocka_unit_test(test_blocked_mt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
