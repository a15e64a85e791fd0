/* test_intkeys.c - the CLI's integer keys (cli/intkeys.c): decimal and hex
 * against strtoull on seeded values and on every edge (2^64 - 1, 2^64,
 * leading zeros, signs, spaces, empty), the bad-key policy names, and the
 * message form of a bad key.  And the integer set's batch calls
 * (dedup_u64set_insert_batch / contains_batch, the path of --keys int
 * --mode exact) against a naive model, through growth and a memory limit. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "intkeys.h"
#include "dedup/set.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse(const char *s, uint64_t *v) { return dd_int_key((const unsigned char *)s, strlen(s), v); }

static void test_values(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_true(parse("0", &v) && v == 0);
    assert_true(parse("007", &v) && v == 7);
    assert_true(parse("18446744073709551615", &v) && v == UINT64_MAX);
    assert_false(parse("18446744073709551616", &v));
    assert_false(parse("99999999999999999999", &v));
    assert_true(parse("0x0", &v) && v == 0);
    assert_true(parse("0xff", &v) && v == 255);
    assert_true(parse("0XDEADbeef", &v) && v == 0xdeadbeef);
    assert_true(parse("0xffffffffffffffff", &v) && v == UINT64_MAX);
    assert_true(parse("0x0000ffffffffffffffff", &v) && v == UINT64_MAX);
    assert_false(parse("0x1ffffffffffffffff", &v));
    static const char *const bad[] = {"", " 1", "1 ", "-1", "+1", "1.0", "1e3", "0x", "0xg",
                                      "x10", "12a", "0x 1", "\t5", "0x00g0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(parse(bad[i], &v));
    /* Seeded values against strtoull, decimal and hex. */
    tu_rng r = {tu_seed()};
    for (int i = 0; i < 100000; i++) {
        uint64_t x = tu_next(&r) >> tu_below(&r, 64);
        char b[32];
        snprintf(b, sizeof b, i & 1 ? "0x%llx" : "%llu", (unsigned long long)x);
        assert_true(parse(b, &v));
        assert_true(v == x);
        errno = 0;
        assert_true(strtoull(b, NULL, 0) == x);
    }
}

static void test_policy_and_message(void **state)
{
    (void)state;
    dd_bad_key p;
    assert_true(dd_bad_key_from_name("fail", &p) && p == DD_BAD_KEY_FAIL);
    assert_true(dd_bad_key_from_name("skip", &p) && p == DD_BAD_KEY_SKIP);
    assert_true(dd_bad_key_from_name("keep", &p) && p == DD_BAD_KEY_KEEP);
    assert_false(dd_bad_key_from_name("drop", &p));
    char buf[16];
    assert_string_equal(dd_key_for_message((const unsigned char *)"abc", 3, buf, sizeof buf), "abc");
    assert_string_equal(dd_key_for_message((const unsigned char *)"a\tb\xff", 4, buf, sizeof buf),
                        "a\\x09b\\xFF");
    const char *longkey = "0123456789abcdefghij";
    assert_string_equal(dd_key_for_message((const unsigned char *)longkey, 20, buf, sizeof buf),
                        "0123456789ab...");
    assert_true(strlen(buf) < sizeof buf);
}

static void test_range_and_check(void **state)
{
    (void)state;
    uint64_t lo, hi;
    assert_true(dd_int_range("0..99", &lo, &hi) && lo == 0 && hi == 99);
    assert_true(dd_int_range("0x10..0x20", &lo, &hi) && lo == 16 && hi == 32);
    assert_true(dd_int_range("5..5", &lo, &hi) && lo == 5 && hi == 5);
    assert_false(dd_int_range("9..3", &lo, &hi));
    assert_false(dd_int_range("..3", &lo, &hi));
    assert_false(dd_int_range("3..", &lo, &hi));
    assert_false(dd_int_range("3-9", &lo, &hi));
    assert_false(dd_int_range("-1..3", &lo, &hi));
    dd_seen_opts so;
    memset(&so, 0, sizeof so);
    char msg[256];
    dedup_seen_kind k;
    assert_true(dd_int_keys_check(true, "exact", false, false, &so, NULL, msg, sizeof msg, &k));
    assert_int_equal(k, DEDUP_SEEN_U64);
    assert_false(dd_int_keys_check(false, "bitmap", false, false, &so, NULL, msg, sizeof msg, &k));
    assert_non_null(strstr(msg, "--keys int"));
    assert_false(dd_int_keys_check(true, "bloom", false, false, &so, NULL, msg, sizeof msg, &k));
    assert_false(dd_int_keys_check(true, "bitmap", false, false, &so, NULL, msg, sizeof msg, &k));
    assert_non_null(strstr(msg, "needs --range"));
    so.range_lo = 0;
    so.range_hi = 999999;
    assert_true(dd_int_keys_check(true, "bitmap", true, false, &so, NULL, msg, sizeof msg, &k));
    assert_int_equal(k, DEDUP_SEEN_BITMAP);
    so.memory = 100000; /* 125,000 bytes needed */
    assert_false(dd_int_keys_check(true, "bitmap", true, false, &so, NULL, msg, sizeof msg, &k));
    assert_non_null(strstr(msg, "needs 122.07 KiB as a bitmap, more than -m/--memory"));
    so.memory = 0;
    so.range_lo = 10; /* the file keeps the range: --state takes any LO */
    assert_true(dd_int_keys_check(true, "bitmap", true, false, &so, "s.dedup", msg, sizeof msg, &k));
    assert_int_equal(k, DEDUP_SEEN_BITMAP);
    so.range_lo = 0;
    so.range_hi = UINT64_MAX;
    assert_false(dd_int_keys_check(true, "bitmap", true, false, &so, NULL, msg, sizeof msg, &k));
    assert_non_null(strstr(msg, "2^40"));
}

/* Sorted-array model of a set of integers: insert answers whether new. */
typedef struct model {
    uint64_t *v;
    size_t n;
} model;

static size_t model_pos(const model *m, uint64_t x)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool model_has(const model *m, uint64_t x)
{
    size_t i = model_pos(m, x);
    return i < m->n && m->v[i] == x;
}

static bool model_insert(model *m, uint64_t x)
{
    size_t i = model_pos(m, x);
    if (i < m->n && m->v[i] == x)
        return false;
    memmove(m->v + i + 1, m->v + i, (m->n - i) * sizeof *m->v);
    m->v[i] = x;
    m->n++;
    return true;
}

static void test_u64set_batch_model(void **state)
{
    (void)state;
    uint64_t seed = tu_seed();
    print_message("u64set batch seed %llu\n", (unsigned long long)seed);
    tu_rng r = {seed};
    enum { KEYS = 60000, BATCH = 1000 };
    model m = {calloc(KEYS, sizeof(uint64_t)), 0};
    assert_non_null(m.v);
    dedup_set_params p;
    dedup_set_params_init(&p); /* capacity 0: grows, so rehashes fall inside batches */
    dedup_u64set *s;
    assert_int_equal(dedup_u64set_create(&p, NULL, &s), DEDUP_OK);
    uint64_t keys[BATCH];
    dedup_verdict v[BATCH];
    bool found[BATCH];
    for (int round = 0; round < KEYS / BATCH; round++) {
        /* Small ids repeat inside a batch and across batches; 0 and
         * 2^64 - 1 are edges (0 is the table's empty mark). */
        for (size_t i = 0; i < BATCH; i++) {
            uint64_t kind = tu_below(&r, 10);
            keys[i] = kind == 0 ? 0 : kind == 1 ? UINT64_MAX : kind < 6 ? tu_below(&r, 20000)
                                                                        : tu_next(&r);
        }
        dedup_u64set_contains_batch(s, keys, BATCH, found);
        for (size_t i = 0; i < BATCH; i++)
            assert_int_equal(found[i], model_has(&m, keys[i]));
        size_t done = 0;
        assert_int_equal(dedup_u64set_insert_batch(s, keys, BATCH, v, &done), DEDUP_OK);
        assert_int_equal(done, BATCH);
        for (size_t i = 0; i < BATCH; i++)
            assert_int_equal(v[i], model_insert(&m, keys[i]) ? DEDUP_NEW : DEDUP_DUPLICATE);
        assert_int_equal(dedup_u64set_size(s), m.n);
    }
    for (size_t i = 0; i < m.n; i++)
        assert_true(dedup_u64set_contains(s, m.v[i]));
    dedup_u64set_free(s);

    /* A memory limit: the batch stops at the key that needs the table to
     * grow, *done says how many were recorded, and those are all held. */
    p.memory_limit = 4096;
    assert_int_equal(dedup_u64set_create(&p, NULL, &s), DEDUP_OK);
    for (size_t i = 0; i < BATCH; i++)
        keys[i] = i + 1;
    size_t done = BATCH + 1;
    assert_int_equal(dedup_u64set_insert_batch(s, keys, BATCH, v, &done), DEDUP_ERR_FULL);
    assert_true(done > 0 && done < BATCH);
    assert_int_equal(dedup_u64set_size(s), done);
    for (size_t i = 0; i < BATCH; i++)
        assert_int_equal(dedup_u64set_contains(s, keys[i]), i < done);
    dedup_u64set_free(s);
    free(m.v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_policy_and_message),
        cmocka_unit_test(test_range_and_check),
        cmocka_unit_test(test_u64set_batch_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
