/*
 * test_counting.c - counting Bloom filter against an exact multiset model.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/counting.h"
#include "dedup/format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dedup_digest key_digest(const dedup_counting *cb, uint64_t key)
{
    return dedup_hash_u64(key, dedup_counting_seed(cb));
}

static dedup_status save_any(const void *obj, dedup_sink *sink)
{
    return dedup_counting_save(obj, sink);
}

static unsigned char *save_blob(const dedup_counting *cb, size_t *len)
{
    return tu_save_blob(save_any, cb, dedup_counting_serialized_size(cb), len);
}

static dedup_status load_blob(const void *buf, size_t len, const dedup_allocator *a,
                              dedup_counting **out)
{
    dedup_mem_source m;
    return dedup_counting_load(dedup_mem_source_init(&m, buf, len), a, out);
}

static dedup_counting *make(uint64_t n, double p)
{
    dedup_counting_params prm;
    dedup_counting_params_init(&prm);
    prm.capacity = n;
    prm.fpr = p;
    prm.seed = tu_seed();
    dedup_counting *cb = NULL;
    assert_int_equal(dedup_counting_create(&prm, NULL, &cb), DEDUP_OK);
    return cb;
}

static void test_params(void **state)
{
    (void)state;
    dedup_counting_params p;
    dedup_counting_params_init(&p);
    dedup_counting *cb = (dedup_counting *)1;
    assert_int_equal(dedup_counting_create(&p, NULL, &cb), DEDUP_ERR_INVALID_ARG);
    assert_null(cb);
    p.capacity = 1000;
    p.fpr = 0;
    assert_int_equal(dedup_counting_create(&p, NULL, &cb), DEDUP_ERR_INVALID_ARG);
    p.fpr = 1.0;
    assert_int_equal(dedup_counting_create(&p, NULL, &cb), DEDUP_ERR_INVALID_ARG);
    p.fpr = 0.01;
    p.k = DEDUP_MAX_BLOOM_K + 1;
    assert_int_equal(dedup_counting_create(&p, NULL, &cb), DEDUP_ERR_INVALID_ARG);
    p.k = 0;
    p.capacity = UINT64_C(1) << 40;
    assert_int_equal(dedup_counting_create(&p, NULL, &cb), DEDUP_ERR_LIMIT);
    /* counters without capacity needs k */
    p.capacity = 0;
    p.counters = 1000;
    assert_int_equal(dedup_counting_create(&p, NULL, &cb), DEDUP_ERR_INVALID_ARG);
    p.k = 3;
    assert_int_equal(dedup_counting_create(&p, NULL, &cb), DEDUP_OK);
    assert_int_equal(dedup_counting_counters(cb), 1008); /* multiple of 16 */
    assert_int_equal(dedup_counting_k(cb), 3);
    dedup_counting_free(cb);
    dedup_counting_free(NULL);

    /* Same m and k as the classic Bloom formulas: 1M at 1% -> 9585059 bits, k 7. */
    dedup_counting_params_init(&p);
    p.capacity = 1000000;
    assert_int_equal(dedup_counting_create(&p, NULL, &cb), DEDUP_OK);
    assert_int_equal(dedup_counting_k(cb), 7);
    uint64_t m = dedup_counting_counters(cb);
    assert_true(m >= 9585059 && m < 9585059 + 16);
    /* 4 bits per counter: memory within 4.1x of the classic bit count. */
    assert_true((double)dedup_counting_memory_usage(cb) * 8 <= 4.1 * 9585059);
    dedup_counting_free(cb);
}

/* Random add/delete/query sequences against a multiset model. */
static void test_model(void **state)
{
    (void)state;
    tu_rng rng = {tu_seed() ^ 1};
    enum { UNIVERSE = 6000 };
    dedup_counting *cb = make(4000, 0.01);
    static uint32_t model[UNIVERSE];
    memset(model, 0, sizeof model);
    uint64_t adds = 0, dels = 0;
    for (int op = 0; op < 60000; op++) {
        uint64_t key = tu_below(&rng, UNIVERSE);
        dedup_digest d = key_digest(cb, key);
        uint64_t r = tu_below(&rng, 10);
        if (r < 4) {
            /* keep the number of distinct keys around the capacity */
            dedup_counting_add(cb, d);
            model[key]++;
            adds++;
        } else if (r < 7) {
            if (model[key] > 0) {
                assert_int_equal(dedup_counting_delete(cb, d), DEDUP_OK);
                model[key]--;
                dels++;
            } else if (!dedup_counting_might_contain(cb, d)) {
                assert_int_equal(dedup_counting_delete(cb, d), DEDUP_ERR_NOT_FOUND);
            }
        } else {
            if (model[key] > 0) {
                assert_true(dedup_counting_might_contain(cb, d));
                uint32_t c = dedup_counting_count(cb, d);
                assert_true(c >= (model[key] < 15 ? model[key] : 15));
            }
        }
        if (op % 10000 == 9999) {
            for (uint64_t k2 = 0; k2 < UNIVERSE; k2++)
                if (model[k2])
                    assert_true(dedup_counting_might_contain(cb, key_digest(cb, k2)));
        }
    }
    assert_int_equal(dedup_counting_adds(cb), adds);
    assert_int_equal(dedup_counting_deletes(cb), dels);
    /* Delete everything that is left: the filter ends empty unless some
     * counter saturated. */
    for (uint64_t k2 = 0; k2 < UNIVERSE; k2++)
        while (model[k2]) {
            assert_int_equal(dedup_counting_delete(cb, key_digest(cb, k2)), DEDUP_OK);
            model[k2]--;
        }
    if (dedup_counting_saturated(cb) == 0)
        assert_int_equal(dedup_counting_nonzero(cb), 0);
    dedup_counting_free(cb);
}

static void test_fpr(void **state)
{
    (void)state;
    const uint64_t n = 100000, trials = 1000000;
    const double p = 0.01;
    dedup_counting *cb = make(n, p);
    dedup_counting *single = make(n, p);
    dedup_digest ab[1000];
    for (uint64_t i = 0; i < n; i += 1000) {
        for (int j = 0; j < 1000; j++) {
            ab[j] = key_digest(cb, i + (uint64_t)j);
            dedup_counting_add(single, ab[j]);
        }
        dedup_counting_add_batch(cb, ab, 1000);
    }
    {
        /* the batch add leaves exactly what single adds leave */
        size_t l1, l2;
        unsigned char *b1 = save_blob(cb, &l1), *b2 = save_blob(single, &l2);
        assert_int_equal(l1, l2);
        assert_memory_equal(b1, b2, l1);
        free(b1);
        free(b2);
        dedup_counting_free(single);
    }
    for (uint64_t i = 0; i < n; i++)
        assert_true(dedup_counting_might_contain(cb, key_digest(cb, i)));
    double model = dedup_counting_current_fpr(cb);
    double m = (double)dedup_counting_counters(cb), k = dedup_counting_k(cb);
    double formula = pow(1 - exp(-k * (double)n / m), k);
    assert_true(fabs(model - formula) < 0.1 * formula);
    uint64_t fp = 0;
    dedup_digest batch[256];
    bool out[256];
    for (uint64_t i = 0; i < trials; i += 256) {
        for (int j = 0; j < 256; j++)
            batch[j] = key_digest(cb, (UINT64_C(1) << 40) + i + (uint64_t)j);
        dedup_counting_might_contain_batch(cb, batch, 256, out);
        for (int j = 0; j < 256; j++) {
            assert_int_equal(out[j], dedup_counting_might_contain(cb, batch[j]));
            fp += out[j];
        }
    }
    uint64_t total = (trials + 255) / 256 * 256;
    fprintf(stderr, "counting: measured FPR %.5f, model %.5f, target %.3f\n",
            (double)fp / (double)total, model, p);
    /* fill^k assumes the k probes of a fresh key are independent; with
     * double hashing over one filter the true rate sits within about 3% of
     * it (seed 1796020439479937312 measured 3.3% under), so the binomial
     * bounds are taken around model * (1 -/+ 0.03), not the bare model. */
    assert_true(fp <= tu_binomial_upper(total, model * 1.03));
    assert_true(fp >= tu_binomial_lower(total, model * 0.97));
    /* The rate promised at capacity is the sizing formula's, which rounds k
     * to a whole number and m up: about 1.005 p for 1%, not p itself (one
     * run in 400 measured above p's bound: seeds 1796158102456700225 and
     * 666187423).  So the promise is checked where it is made, in the
     * sizing, and the measurement against the filter's own model above. */
    assert_true(formula <= p * 1.01);

    /* Delete half: the remaining half has no false negatives and the rate
     * falls to what the new fill predicts. */
    for (uint64_t i = 0; i < n; i += 2)
        assert_int_equal(dedup_counting_delete(cb, key_digest(cb, i)), DEDUP_OK);
    for (uint64_t i = 1; i < n; i += 2)
        assert_true(dedup_counting_might_contain(cb, key_digest(cb, i)));
    model = dedup_counting_current_fpr(cb);
    fp = 0;
    for (uint64_t i = 0; i < trials; i++)
        fp += dedup_counting_might_contain(cb, key_digest(cb, (UINT64_C(1) << 41) + i));
    assert_true(fp <= tu_binomial_upper(trials, model * 1.03));
    assert_true(fp >= tu_binomial_lower(trials, model * 0.97));
    assert_true(model < p / 4);
    dedup_counting_free(cb);
}

static void test_saturation(void **state)
{
    (void)state;
    /* Large enough that two of the key's probes sharing a counter is ~1e-6. */
    dedup_counting *cb = make(1000000, 0.01);
    dedup_digest d = key_digest(cb, 42);
    for (int i = 0; i < 14; i++)
        dedup_counting_add(cb, d);
    assert_int_equal(dedup_counting_count(cb, d), 14);
    assert_int_equal(dedup_counting_saturated(cb), 0);
    dedup_counting_add(cb, d);
    assert_int_equal(dedup_counting_count(cb, d), 15);
    uint64_t sat = dedup_counting_saturated(cb);
    assert_true(sat >= 1 && sat <= dedup_counting_k(cb));
    for (int i = 0; i < 10; i++)
        dedup_counting_add(cb, d);
    assert_int_equal(dedup_counting_saturated(cb), sat);
    /* Deleting more often than adding never makes it absent. */
    for (int i = 0; i < 40; i++)
        assert_int_equal(dedup_counting_delete(cb, d), DEDUP_OK);
    assert_true(dedup_counting_might_contain(cb, d));
    assert_int_equal(dedup_counting_count(cb, d), 15);
    /* The statistic survives a save/load (recomputed from the payload). */
    size_t len;
    unsigned char *blob = save_blob(cb, &len);
    dedup_counting *back = NULL;
    assert_int_equal(load_blob(blob, len, NULL, &back), DEDUP_OK);
    assert_int_equal(dedup_counting_saturated(back), sat);
    free(blob);
    dedup_counting_free(back);
    dedup_counting_free(cb);
}

static void test_delete_absent_unchanged(void **state)
{
    (void)state;
    dedup_counting *cb = make(1000, 0.01);
    assert_int_equal(dedup_counting_delete(cb, key_digest(cb, 1)), DEDUP_ERR_NOT_FOUND);
    for (uint64_t i = 0; i < 800; i++)
        dedup_counting_add(cb, key_digest(cb, i));
    size_t l1, l2;
    unsigned char *before = save_blob(cb, &l1);
    int absent = 0;
    for (uint64_t i = 10000; absent < 100; i++) {
        dedup_digest d = key_digest(cb, i);
        if (dedup_counting_might_contain(cb, d))
            continue;
        absent++;
        assert_int_equal(dedup_counting_delete(cb, d), DEDUP_ERR_NOT_FOUND);
    }
    unsigned char *after = save_blob(cb, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(before, after, l1);
    free(before);
    free(after);
    dedup_counting_free(cb);
}

static void test_test_and_add(void **state)
{
    (void)state;
    dedup_counting *cb = make(1000, 0.01);
    dedup_digest d = key_digest(cb, 7);
    assert_int_equal(dedup_counting_test_and_add(cb, d), DEDUP_NEW);
    assert_int_equal(dedup_counting_test_and_add(cb, d), DEDUP_MAYBE_DUPLICATE);
    assert_int_equal(dedup_counting_count(cb, d), 1); /* the second call added nothing */
    assert_int_equal(dedup_counting_test_and_add_key(cb, "abc", 3), DEDUP_NEW);
    assert_true(dedup_counting_might_contain_key(cb, "abc", 3));
    assert_int_equal(dedup_counting_count_key(cb, "abc", 3), 1);
    assert_int_equal(dedup_counting_delete_key(cb, "abc", 3), DEDUP_OK);
    assert_false(dedup_counting_might_contain_key(cb, "abc", 3));
    dedup_counting_add_key(cb, "", 0);
    assert_true(dedup_counting_might_contain_key(cb, "", 0));
    dedup_counting_clear(cb);
    assert_false(dedup_counting_might_contain(cb, d));
    assert_int_equal(dedup_counting_adds(cb), 0);
    dedup_counting_free(cb);
}

/* The batch test-and-add against single calls on a twin filter: the same
 * verdicts in order (repeats inside a batch included) and the same bytes
 * after every batch. */
static void test_test_and_add_batch(void **state)
{
    (void)state;
    dedup_counting *a = make(20000, 0.01), *b = make(20000, 0.01);
    tu_rng r = {tu_seed()};
    enum { MAXB = 700 };
    dedup_digest d[MAXB];
    dedup_verdict va[MAXB], vb[MAXB];
    for (int round = 0; round < 60; round++) {
        size_t n = (size_t)tu_below(&r, MAXB + 1);
        for (size_t i = 0; i < n; i++) /* about a third repeats */
            d[i] = key_digest(a, tu_below(&r, 30000));
        for (size_t i = 0; i < n; i++)
            va[i] = dedup_counting_test_and_add(a, d[i]);
        dedup_counting_test_and_add_batch(b, d, n, vb);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(va[i], vb[i]);
        size_t la, lb;
        unsigned char *ba = save_blob(a, &la), *bb = save_blob(b, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(ba, bb, la);
        free(ba);
        free(bb);
    }
    dedup_counting_test_and_add_batch(b, d, 0, vb); /* empty batch */
    dedup_counting_free(a);
    dedup_counting_free(b);
}

static void test_merge(void **state)
{
    (void)state;
    dedup_counting *a = make(2000, 0.01), *b = make(2000, 0.01);
    for (uint64_t i = 0; i < 1000; i++) {
        dedup_counting_add(a, key_digest(a, i));
        dedup_counting_add(b, key_digest(b, i + 500));
    }
    assert_int_equal(dedup_counting_merge(a, b), DEDUP_OK);
    for (uint64_t i = 0; i < 1500; i++)
        assert_true(dedup_counting_might_contain(a, key_digest(a, i)));
    /* keys in both were counted twice */
    for (uint64_t i = 500; i < 1000; i++)
        assert_true(dedup_counting_count(a, key_digest(a, i)) >= 2);
    assert_int_equal(dedup_counting_adds(a), 2000);
    dedup_counting *c = make(3000, 0.01);
    assert_int_equal(dedup_counting_merge(a, c), DEDUP_ERR_INCOMPATIBLE);
    dedup_counting_free(a);
    dedup_counting_free(b);
    dedup_counting_free(c);
}

static void test_save_load(void **state)
{
    (void)state;
    dedup_counting *cb = make(5000, 0.001);
    for (uint64_t i = 0; i < 5000; i++)
        dedup_counting_add(cb, key_digest(cb, i));
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(dedup_counting_delete(cb, key_digest(cb, i)), DEDUP_OK);
    size_t len, len2;
    unsigned char *blob = save_blob(cb, &len);
    dedup_counting *back = NULL;
    assert_int_equal(load_blob(blob, len, NULL, &back), DEDUP_OK);
    unsigned char *blob2 = save_blob(back, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(blob, blob2, len);
    assert_int_equal(dedup_counting_k(back), dedup_counting_k(cb));
    assert_int_equal(dedup_counting_capacity(back), 5000);
    assert_true(dedup_counting_target_fpr(back) == 0.001);
    assert_int_equal(dedup_counting_adds(back), 5000);
    assert_int_equal(dedup_counting_deletes(back), 1000);
    for (uint64_t i = 0; i < 20000; i++) {
        dedup_digest d = key_digest(cb, i);
        assert_int_equal(dedup_counting_might_contain(cb, d), dedup_counting_might_contain(back, d));
        assert_int_equal(dedup_counting_count(cb, d), dedup_counting_count(back, d));
    }

    /* Files: atomic save, load, trailing bytes rejected. */
    char path[] = "/tmp/dedup_test_countingXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(dedup_counting_save_file(cb, path), DEDUP_OK);
    dedup_counting *ff = NULL;
    assert_int_equal(dedup_counting_load_file(path, NULL, &ff), DEDUP_OK);
    unsigned char *blob3 = save_blob(ff, &len2);
    assert_memory_equal(blob, blob3, len);
    dedup_counting_free(ff);
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    fputc(0, f);
    fclose(f);
    assert_int_equal(dedup_counting_load_file(path, NULL, &ff), DEDUP_ERR_TRAILING);
    assert_null(ff);
    unlink(path);
    assert_int_equal(dedup_counting_load_file(path, NULL, &ff), DEDUP_ERR_IO);

    free(blob);
    free(blob2);
    free(blob3);
    dedup_counting_free(back);
    dedup_counting_free(cb);
}

/* Builds a blob with the given params block and payload, valid checksum. */
static unsigned char *craft(const unsigned char *params, uint32_t plen, const void *payload,
                            uint64_t paylen, size_t *len)
{
    return tu_container(DEDUP_TYPE_COUNTING_BLOOM, 1, params, plen, payload, paylen, len);
}

static void test_corrupt(void **state)
{
    (void)state;
    dedup_counting_params prm;
    dedup_counting_params_init(&prm);
    prm.capacity = 50;
    dedup_counting *cb = NULL;
    assert_int_equal(dedup_counting_create(&prm, NULL, &cb), DEDUP_OK);
    for (uint64_t i = 0; i < 50; i++)
        dedup_counting_add(cb, key_digest(cb, i));
    size_t len;
    unsigned char *blob = save_blob(cb, &len);
    dedup_counting *out = NULL;
    /* every truncation */
    for (size_t l = 0; l < len; l++) {
        assert_int_not_equal(load_blob(blob, l, NULL, &out), DEDUP_OK);
        assert_null(out);
    }
    /* every single-byte change */
    for (size_t i = 0; i < len; i++) {
        blob[i] ^= 0x5A;
        assert_int_not_equal(load_blob(blob, len, NULL, &out), DEDUP_OK);
        assert_null(out);
        blob[i] ^= 0x5A;
    }
    assert_int_equal(load_blob(blob, len, NULL, &out), DEDUP_OK);
    dedup_counting_free(out);

    /* Valid checksums around impossible params. */
    unsigned char p[48];
    memcpy(p, blob + DEDUP_HEADER_SIZE, 48);
    const unsigned char *pay = blob + DEDUP_HEADER_SIZE + 48;
    uint64_t paylen = len - DEDUP_HEADER_SIZE - 48 - DEDUP_TRAILER_SIZE;
    struct { size_t off; uint64_t v; int width; } cases[] = {
        {0, 0, 8}, {0, 17, 8}, {0, 32, 8}, {8, 0, 4}, {8, 33, 4}, {12, 1, 4},
        {0, UINT64_C(1) << 60, 8},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        unsigned char q[48];
        memcpy(q, p, 48);
        if (cases[c].width == 8)
            dedup_put_u64(q + cases[c].off, cases[c].v);
        else
            dedup_put_u32(q + cases[c].off, (uint32_t)cases[c].v);
        size_t l2;
        unsigned char *bad = craft(q, 48, pay, paylen, &l2);
        dedup_status s = load_blob(bad, l2, NULL, &out);
        assert_true(s == DEDUP_ERR_CORRUPT || s == DEDUP_ERR_LIMIT);
        assert_null(out);
        free(bad);
    }
    /* fpr NaN with a capacity */
    {
        unsigned char q[48];
        memcpy(q, p, 48);
        dedup_put_f64(q + 24, NAN);
        size_t l2;
        unsigned char *bad = craft(q, 48, pay, paylen, &l2);
        assert_int_equal(load_blob(bad, l2, NULL, &out), DEDUP_ERR_CORRUPT);
        free(bad);
    }
    /* payload length not matching counters */
    {
        size_t l2;
        unsigned char *bad = craft(p, 48, pay, paylen - 8, &l2);
        assert_int_equal(load_blob(bad, l2, NULL, &out), DEDUP_ERR_CORRUPT);
        free(bad);
    }
    /* params length wrong */
    {
        size_t l2;
        unsigned char *bad = craft(p, 40, pay, paylen, &l2);
        assert_int_equal(load_blob(bad, l2, NULL, &out), DEDUP_ERR_CORRUPT);
        free(bad);
    }
    free(blob);
    dedup_counting_free(cb);
}

static void test_oom(void **state)
{
    (void)state;
    size_t len = 0;
    unsigned char *blob = NULL;
    for (uint64_t fail = 1; fail < 10; fail++) {
        tu_failing_alloc st;
        dedup_allocator a = tu_failing_allocator(&st, fail);
        dedup_counting_params prm;
        dedup_counting_params_init(&prm);
        prm.capacity = 1000;
        dedup_counting *cb = NULL;
        dedup_status s = dedup_counting_create(&prm, &a, &cb);
        if (s) {
            assert_int_equal(s, DEDUP_ERR_NOMEM);
            assert_null(cb);
            assert_int_equal(st.live, 0);
            continue;
        }
        for (uint64_t i = 0; i < 100; i++)
            dedup_counting_add(cb, key_digest(cb, i));
        if (!blob)
            blob = save_blob(cb, &len);
        dedup_counting_free(cb);
        assert_int_equal(st.live, 0);
    }
    for (uint64_t fail = 1; fail < 10; fail++) {
        tu_failing_alloc st;
        dedup_allocator a = tu_failing_allocator(&st, fail);
        dedup_counting *cb = NULL;
        dedup_status s = load_blob(blob, len, &a, &cb);
        if (s)
            assert_int_equal(s, DEDUP_ERR_NOMEM);
        dedup_counting_free(cb);
        assert_int_equal(st.live, 0);
    }
    free(blob);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_fpr),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_delete_absent_unchanged),
        cmocka_unit_test(test_test_and_add),
        cmocka_unit_test(test_test_and_add_batch),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
