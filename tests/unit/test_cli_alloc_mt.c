/*
 * test_cli_alloc_mt.c - the command's allocators (cli/hugealloc.c), above all
 * the growing one: blocks carved in order from one region while a thread
 * populates the pages ahead.  Threaded, so it also runs under TSan.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dedup/set.h"
#include "testutil.h"

#define MIB ((size_t)1 << 20)

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* calloc is zero even where a freed block was written; realloc keeps the
 * contents whether the block grows in place (the top one) or moves. */
static void test_region_blocks(void **state)
{
    (void)state;
    const dedup_allocator *a = cli_allocator_growing();
    unsigned char *x = a->calloc_fn(a->ctx, 3, MIB);
    unsigned char *y = a->calloc_fn(a->ctx, 3, MIB);
    assert_non_null(x);
    assert_non_null(y);
    assert_true(all_zero(x, 3 * MIB) && all_zero(y, 3 * MIB));
    memset(y, 0xab, 3 * MIB);
    a->free_fn(a->ctx, y); /* the top block: handed out again */
    unsigned char *z = a->calloc_fn(a->ctx, 5, MIB);
    assert_non_null(z);
    assert_true(all_zero(z, 5 * MIB));

    /* the top block grows in place */
    memset(z, 0x5a, 5 * MIB);
    unsigned char *z2 = a->realloc_fn(a->ctx, z, 9 * MIB);
    assert_ptr_equal(z2, z);
    for (size_t i = 0; i < 5 * MIB; i += 4093)
        assert_int_equal(z2[i], 0x5a);

    /* a block below the top moves, contents kept */
    memset(x, 0x33, 3 * MIB);
    unsigned char *x2 = a->realloc_fn(a->ctx, x, 4 * MIB);
    assert_non_null(x2);
    assert_ptr_not_equal(x2, x);
    for (size_t i = 0; i < 3 * MIB; i += 4093)
        assert_int_equal(x2[i], 0x33);

    /* small blocks stay on malloc */
    unsigned char *s = a->calloc_fn(a->ctx, 1, 1000);
    assert_non_null(s);
    assert_true(all_zero(s, 1000));
    a->free_fn(a->ctx, s);
    a->free_fn(a->ctx, x2);
    a->free_fn(a->ctx, z2);
    a->free_fn(a->ctx, NULL);
}

/* The exact set on the growing allocator gives the same answers as on
 * malloc, over many arena chunks and segment splits. */
static void test_strset_on_region(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.counts = true;
    dedup_strset *on, *ref;
    assert_int_equal(dedup_strset_create(&p, cli_allocator_growing(), &on), DEDUP_OK);
    assert_int_equal(dedup_strset_create(&p, NULL, &ref), DEDUP_OK);
    char key[48];
    for (int i = 0; i < 600000; i++) {
        uint64_t id = tu_below(&r, 400000);
        size_t len = (size_t)snprintf(key, sizeof key, "https://example.org/%llu/%llu",
                                      (unsigned long long)id, (unsigned long long)(id * 7919));
        dedup_digest d = dedup_strset_digest(on, key, len);
        dedup_verdict v1, v2;
        assert_int_equal(dedup_strset_insert(on, key, len, d, &v1), DEDUP_OK);
        assert_int_equal(dedup_strset_insert(ref, key, len, d, &v2), DEDUP_OK);
        assert_int_equal(v1, v2);
    }
    assert_int_equal(dedup_strset_size(on), dedup_strset_size(ref));
    for (uint64_t id = 0; id < 400000; id += 97) {
        size_t len = (size_t)snprintf(key, sizeof key, "https://example.org/%llu/%llu",
                                      (unsigned long long)id, (unsigned long long)(id * 7919));
        dedup_digest d = dedup_strset_digest(on, key, len);
        assert_int_equal(dedup_strset_count_of(on, key, len, d),
                         dedup_strset_count_of(ref, key, len, d));
    }
    dedup_strset_free(on);
    dedup_strset_free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_region_blocks),
        cmocka_unit_test(test_strset_on_region),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cli_allocator_shutdown();
    return rc;
}
