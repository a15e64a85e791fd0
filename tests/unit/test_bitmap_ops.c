/* test_bitmap_ops.c - the bitmap's search (next set / next clear), range
 * count and Redis-order export/import against a naive model (one byte per
 * bit), at sizes around word boundaries and at every density. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/bitmap.h"

#include <stdlib.h>
#include <string.h>

static dedup_bitmap *make_random(uint64_t n, double density, tu_rng *r, unsigned char *model)
{
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    p.nbits = n;
    dedup_bitmap *bm = NULL;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &bm), DEDUP_OK);
    for (uint64_t i = 0; i < n; i++) {
        model[i] = (double)(tu_next(r) >> 11) / 9007199254740992.0 < density;
        if (model[i])
            assert_int_equal(dedup_bitmap_set(bm, i), DEDUP_OK);
    }
    return bm;
}

static const uint64_t sizes[] = {1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 1000, 4096, 4097, 70001};
static const double densities[] = {0.0, 0.001, 0.05, 0.5, 0.95, 0.999, 1.0};

static void test_next_and_count(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t di = 0; di < sizeof densities / sizeof densities[0]; di++) {
            uint64_t n = sizes[si];
            unsigned char *model = malloc(n);
            dedup_bitmap *bm = make_random(n, densities[di], &r, model);
            /* next_set / next_clear from every position, and past the end. */
            uint64_t ns = n, nc = n;
            for (uint64_t from = n + 2; from-- > 0;) {
                if (from < n) {
                    if (model[from])
                        ns = from;
                    else
                        nc = from;
                }
                assert_int_equal(dedup_bitmap_next_set(bm, from), from < n ? ns : n);
                assert_int_equal(dedup_bitmap_next_clear(bm, from), from < n ? nc : n);
            }
            /* count_range against prefix sums: all ranges when small, random ones else. */
            static uint64_t pre[70002];
            assert_true(n < 70002);
            pre[0] = 0;
            for (uint64_t i = 0; i < n; i++)
                pre[i + 1] = pre[i] + model[i];
            uint64_t trials = n <= 129 ? (n + 1) * (n + 1) : 5000;
            for (uint64_t t = 0; t < trials; t++) {
                uint64_t a, b;
                if (n <= 129) {
                    a = t / (n + 1);
                    b = t % (n + 1);
                } else {
                    a = tu_below(&r, n + 1);
                    b = tu_below(&r, n + 1);
                }
                uint64_t c = 99;
                if (a > b) {
                    assert_int_equal(dedup_bitmap_count_range(bm, a, b, &c), DEDUP_ERR_RANGE);
                    assert_int_equal(c, 0);
                    continue;
                }
                assert_int_equal(dedup_bitmap_count_range(bm, a, b, &c), DEDUP_OK);
                assert_int_equal(c, pre[b] - pre[a]);
            }
            uint64_t c;
            assert_int_equal(dedup_bitmap_count_range(bm, 0, n + 1, &c), DEDUP_ERR_RANGE);
            assert_int_equal(dedup_bitmap_count_range(bm, 0, n, &c), DEDUP_OK);
            assert_int_equal(c, dedup_bitmap_popcount(bm));
            assert_int_equal(dedup_bitmap_count_range(bm, 0, n, NULL), DEDUP_ERR_INVALID_ARG);
            free(model);
            dedup_bitmap_free(bm);
        }
}

/* Finding a free slot as an allocator does: take the first clear bit until
 * none is left; every slot is handed out once, in order. */
static void test_allocator_walk(void **state)
{
    (void)state;
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    p.nbits = 1000;
    dedup_bitmap *bm = NULL;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &bm), DEDUP_OK);
    for (uint64_t i = 0; i < 1000; i += 3)
        assert_int_equal(dedup_bitmap_set(bm, i), DEDUP_OK); /* taken */
    uint64_t got = 0, slot = 0;
    while ((slot = dedup_bitmap_next_clear(bm, slot)) < 1000) {
        assert_true(slot % 3 != 0);
        assert_int_equal(dedup_bitmap_set(bm, slot), DEDUP_OK);
        got++;
    }
    assert_int_equal(got, 1000 - 334);
    assert_int_equal(dedup_bitmap_next_clear(bm, 0), 1000);
    assert_int_equal(dedup_bitmap_popcount(bm), 1000);
    dedup_bitmap_free(bm);
}

/* Redis order: offset i is bit 7 - i % 8 of byte i / 8. */
static void test_redis_order(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 1};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint64_t n = sizes[si];
        unsigned char *model = malloc(n);
        dedup_bitmap *bm = make_random(n, 0.3, &r, model);
        uint64_t nb = dedup_bitmap_redis_bytes(bm);
        assert_int_equal(nb, (n + 7) / 8);
        unsigned char *buf = malloc(nb);
        if (nb > 1)
            assert_int_equal(dedup_bitmap_export_redis(bm, buf, (size_t)nb - 1), DEDUP_ERR_FULL);
        assert_int_equal(dedup_bitmap_export_redis(bm, buf, (size_t)nb), DEDUP_OK);
        for (uint64_t i = 0; i < nb * 8; i++) {
            unsigned bit = (buf[i / 8] >> (7 - i % 8)) & 1;
            assert_int_equal(bit, i < n ? model[i] : 0);
        }
        dedup_bitmap *back = NULL;
        assert_int_equal(dedup_bitmap_import_redis(buf, (size_t)nb, n, NULL, &back), DEDUP_OK);
        for (uint64_t i = 0; i < n; i++) {
            bool v;
            assert_int_equal(dedup_bitmap_get(back, i, &v), DEDUP_OK);
            assert_int_equal(v, model[i]);
        }
        dedup_bitmap_free(back);
        /* A shorter string reads as zeros beyond its end. */
        assert_int_equal(dedup_bitmap_import_redis(buf, (size_t)nb / 2, n, NULL, &back), DEDUP_OK);
        for (uint64_t i = 0; i < n; i++) {
            bool v;
            assert_int_equal(dedup_bitmap_get(back, i, &v), DEDUP_OK);
            assert_int_equal(v, i < nb / 2 * 8 ? model[i] : 0);
        }
        dedup_bitmap_free(back);
        /* Longer than the size, or a bit set past it: refused. */
        unsigned char *longer = calloc((size_t)nb + 1, 1);
        assert_int_equal(dedup_bitmap_import_redis(longer, (size_t)nb + 1, n, NULL, &back),
                         DEDUP_ERR_RANGE);
        assert_null(back);
        if (n % 8) {
            buf[nb - 1] |= 1; /* the last byte's least significant bit: offset nb*8-1 >= n */
            assert_int_equal(dedup_bitmap_import_redis(buf, (size_t)nb, n, NULL, &back),
                             DEDUP_ERR_RANGE);
            assert_null(back);
        }
        free(longer);
        free(buf);
        free(model);
        dedup_bitmap_free(bm);
    }
    dedup_bitmap *x = NULL;
    assert_int_equal(dedup_bitmap_import_redis(NULL, 0, 0, NULL, &x), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_bitmap_import_redis(NULL, 0, 10, NULL, &x), DEDUP_OK);
    assert_int_equal(dedup_bitmap_popcount(x), 0);
    dedup_bitmap_free(x);
    unsigned char one = 0x80; /* Redis SETBIT k 0 1 */
    assert_int_equal(dedup_bitmap_import_redis(&one, 1, 8, NULL, &x), DEDUP_OK);
    bool v;
    assert_int_equal(dedup_bitmap_get(x, 0, &v), DEDUP_OK);
    assert_true(v);
    assert_int_equal(dedup_bitmap_popcount(x), 1);
    dedup_bitmap_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_next_and_count),
        cmocka_unit_test(test_allocator_walk),
        cmocka_unit_test(test_redis_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
