/* test_range_sink.c - a save read a range at a time (dedup_range_sink):
 * every range equals the same bytes of a whole save, in any order and any
 * size, and a range taken up from the sink's kept state does not hash the
 * bytes before it again. */
#include "testutil.h"

#include "dedup/format.h"

#include <stdlib.h>
#include <string.h>

#define NA 300000u /* payload bytes of the first container */
#define NB 70001u  /* of the second */

static unsigned char A[NA], B[NB];

/* Two containers back to back, written in pieces of uneven sizes, as a
 * value of several structures is saved. */
static dedup_status save_two(dedup_sink *sink)
{
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, 7, 1, "pa", 2, NA);
    for (size_t i = 0, step = 1; !s && i < NA; i += step, step = step * 3 % 65521 + 1)
        s = dedup_encoder_write(&e, A + i, step < NA - i ? step : NA - i);
    if (!s)
        s = dedup_encoder_end(&e);
    if (!s)
        s = dedup_encoder_begin(&e, *sink, 8, 2, NULL, 0, NB);
    if (!s)
        s = dedup_encoder_write(&e, B, NB);
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

static size_t whole(unsigned char **out)
{
    uint64_t n;
    dedup_sink cs = dedup_count_sink_init(&n);
    assert_int_equal(save_two(&cs), DEDUP_OK);
    unsigned char *buf = malloc((size_t)n);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, (size_t)n);
    assert_int_equal(save_two(&sink), DEDUP_OK);
    *out = buf;
    return (size_t)n;
}

/* Range [off, off+len) through 'r' (kept state and all) equals full[off..]. */
static void check_range(dedup_range_sink *r, const unsigned char *full, size_t total,
                        size_t off, size_t len, unsigned char *buf)
{
    dedup_sink sink = dedup_range_sink_next(r, off, buf, len);
    dedup_status s = save_two(&sink);
    assert_true(s == DEDUP_OK || s == DEDUP_ERR_CANCELLED);
    size_t want = off >= total ? 0 : (len < total - off ? len : total - off);
    assert_int_equal(r->copied, want);
    if (want)
        assert_memory_equal(buf, full + off, want);
}

static void test_ranges_equal_the_whole(void **state)
{
    (void)state;
    tu_rng rng = {tu_seed()};
    for (size_t i = 0; i < NA; i++)
        A[i] = (unsigned char)tu_next(&rng);
    for (size_t i = 0; i < NB; i++)
        B[i] = (unsigned char)tu_next(&rng);
    unsigned char *full;
    size_t total = whole(&full);
    unsigned char *buf = malloc(total);
    assert_non_null(buf);
    dedup_range_sink r;
    static const size_t sizes[] = {13, 48, 4096, 65537, 150000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        dedup_range_sink_init(&r, 0, NULL, 0);
        for (size_t off = 0; off < total; off += sizes[k])
            check_range(&r, full, total, off, sizes[k], buf);
    }
    /* any order, any length, the same sink throughout */
    for (int i = 0; i < 300; i++) {
        size_t off = (size_t)(tu_next(&rng) % total);
        size_t len = 1 + (size_t)(tu_next(&rng) % (i % 3 ? 64 : 100000));
        check_range(&r, full, total, off, len, buf);
    }
    free(buf);
    free(full);
}

/* The kept state stands for the bytes before it: a change there is not
 * seen by the next range (which is why the caller must forget it when the
 * structure changes), while a sink started afresh sees it. */
static void test_next_range_does_not_rehash_the_prefix(void **state)
{
    (void)state;
    memset(A, 1, NA);
    memset(B, 2, NB);
    unsigned char *old;
    size_t total = whole(&old);
    size_t end_a = total - (DEDUP_HEADER_SIZE + NB + DEDUP_TRAILER_SIZE);
    unsigned char buf[64];
    dedup_range_sink r;
    dedup_range_sink_init(&r, 0, NULL, 0);
    dedup_sink sink = dedup_range_sink_next(&r, 1000, buf, 16);
    assert_int_equal(save_two(&sink), DEDUP_ERR_CANCELLED);
    A[10] = 9; /* before the kept position */
    /* the first container's checksum, taken up from the kept state */
    check_range(&r, old, total, end_a - 8, 8, buf);
    unsigned char *now;
    assert_int_equal(whole(&now), total);
    assert_memory_not_equal(now + end_a - 8, old + end_a - 8, 8);
    dedup_range_sink_init(&r, 0, NULL, 0);
    check_range(&r, now, total, end_a - 8, 8, buf);
    free(now);
    free(old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges_equal_the_whole),
        cmocka_unit_test(test_next_range_does_not_rehash_the_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
