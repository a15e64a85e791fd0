/* test_bloom.c - classic and blocked Bloom filters. */
#include "testutil.h"

#include "dedup/bloom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dedup_bloom *make(dedup_bloom_kind kind, uint64_t n, double p, bool ts)
{
    dedup_bloom_params pa;
    dedup_bloom_params_init(&pa);
    pa.kind = kind;
    pa.capacity = n;
    pa.fpr = p;
    pa.thread_safe = ts;
    dedup_bloom *bf = NULL;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_OK);
    assert_non_null(bf);
    return bf;
}

static void smoke_kind(dedup_bloom_kind kind)
{
    tu_rng r = {tu_seed()};
    const uint64_t n = 100000;
    dedup_bloom *bf = make(kind, n, 0.01, false);
    uint64_t base = tu_next(&r);
    for (uint64_t i = 0; i < n; i++)
        dedup_bloom_add(bf, dedup_hash_u64(base + i, dedup_bloom_seed(bf)));
    for (uint64_t i = 0; i < n; i++)
        assert_true(dedup_bloom_might_contain(bf, dedup_hash_u64(base + i, dedup_bloom_seed(bf))));
    uint64_t size = dedup_bloom_serialized_size(bf);
    unsigned char *buf = malloc(size);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    assert_int_equal(dedup_bloom_save(bf, &sink), DEDUP_OK);
    assert_int_equal(ms.len, size);
    dedup_mem_source src;
    dedup_bloom *back = NULL;
    assert_int_equal(dedup_bloom_load(dedup_mem_source_init(&src, buf, size), NULL, &back),
                     DEDUP_OK);
    assert_int_equal(dedup_bloom_bits(back), dedup_bloom_bits(bf));
    assert_int_equal(dedup_bloom_k(back), dedup_bloom_k(bf));
    for (uint64_t i = 0; i < n; i++)
        assert_true(dedup_bloom_might_contain(back, dedup_hash_u64(base + i, dedup_bloom_seed(bf))));
    free(buf);
    dedup_bloom_free(back);
    dedup_bloom_free(bf);
}

static void test_smoke_classic(void **state)
{
    (void)state;
    smoke_kind(DEDUP_BLOOM_CLASSIC);
}

static void test_smoke_blocked(void **state)
{
    (void)state;
    smoke_kind(DEDUP_BLOOM_BLOCKED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smoke_classic),
        cmocka_unit_test(test_smoke_blocked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
