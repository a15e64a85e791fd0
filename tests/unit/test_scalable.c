/*
 * test_scalable.c - scalable Bloom filter: the p split, growth, no false
 * negatives, measured FPR <= p when grown from 1,000 to 10M, persistence.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/format.h"
#include "dedup/scalable.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t g_seed;

static dedup_digest kd(uint64_t key)
{
    return dedup_hash_u64(key, g_seed);
}

static dedup_status save_any(const void *obj, dedup_sink *sink)
{
    return dedup_scalable_save(obj, sink);
}

static unsigned char *save_blob(const dedup_scalable *sb, size_t *len)
{
    return tu_save_blob(save_any, sb, dedup_scalable_serialized_size(sb), len);
}

static dedup_status load_blob(const void *buf, size_t len, const dedup_allocator *a,
                              dedup_scalable **out)
{
    dedup_mem_source m;
    return dedup_scalable_load(dedup_mem_source_init(&m, buf, len), a, out);
}

static dedup_scalable *make(dedup_bloom_kind kind, uint64_t cap, double p, uint32_t max_links)
{
    dedup_scalable_params prm;
    dedup_scalable_params_init(&prm);
    prm.kind = kind;
    prm.capacity = cap;
    prm.fpr = p;
    prm.max_links = max_links;
    prm.seed = g_seed;
    dedup_scalable *sb = NULL;
    assert_int_equal(dedup_scalable_create(&prm, NULL, &sb), DEDUP_OK);
    return sb;
}

static void test_split(void **state)
{
    (void)state;
    /* The rates of all L links add up to p. */
    double r[] = {0.5, 0.8, 0.9, 0.99};
    uint32_t L[] = {1, 2, 10, 64};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            double sum = 0;
            for (uint32_t i = 0; i < L[b]; i++)
                sum += dedup_scalable_link_fpr(0.01, r[a], L[b], i);
            assert_true(fabs(sum - 0.01) < 1e-12);
        }
    assert_true(dedup_scalable_link_fpr(0.01, 0.9, 1, 0) == 0.01);
    assert_true(dedup_scalable_link_fpr(0.01, 0.9, 64, 64) == 0.0);
    assert_true(dedup_scalable_link_fpr(0.01, 1.0, 64, 0) == 0.0);

    dedup_scalable_params p;
    dedup_scalable_params_init(&p);
    assert_int_equal(p.capacity, 1000);
    assert_int_equal(p.growth, 2);
    assert_true(p.tightening == 0.9);
    dedup_scalable *sb = (dedup_scalable *)1;
    p.capacity = 0;
    assert_int_equal(dedup_scalable_create(&p, NULL, &sb), DEDUP_ERR_INVALID_ARG);
    assert_null(sb);
    p.capacity = 10;
    p.growth = 0;
    assert_int_equal(dedup_scalable_create(&p, NULL, &sb), DEDUP_ERR_INVALID_ARG);
    p.growth = 2;
    p.tightening = 1.0;
    assert_int_equal(dedup_scalable_create(&p, NULL, &sb), DEDUP_ERR_INVALID_ARG);
    p.tightening = 0.9;
    p.max_links = 65;
    assert_int_equal(dedup_scalable_create(&p, NULL, &sb), DEDUP_ERR_INVALID_ARG);
    p.max_links = 64;
    p.fpr = 2e-12; /* p_0 = p/10 is below DEDUP_MIN_FPR */
    assert_int_equal(dedup_scalable_create(&p, NULL, &sb), DEDUP_ERR_LIMIT);
    p.fpr = 0.01;
    p.kind = (dedup_bloom_kind)7;
    assert_int_equal(dedup_scalable_create(&p, NULL, &sb), DEDUP_ERR_INVALID_ARG);
    dedup_scalable_free(NULL);
}

/* The model rate of link i holding 'items' keys: the expected rate of its
 * Bloom filter at that fill (classic or blocked, as test_bloom checks). */
static double link_model(const dedup_scalable *sb, dedup_bloom_kind kind, uint32_t i,
                         uint64_t items)
{
    const dedup_bloom *bf = dedup_scalable_link(sb, i);
    assert_non_null(bf);
    return kind == DEDUP_BLOOM_CLASSIC ? dedup_bloom_fpr_for(items, dedup_bloom_bits(bf), dedup_bloom_k(bf))
                                       : dedup_blocked_fpr_for(items, dedup_bloom_bits(bf), dedup_bloom_k(bf));
}

/* The chain's model rate for a fresh key now: it is a false positive when
 * any link answers yes, 1 - prod(1 - rate_i), with links filled in order
 * (every link before the last holds its capacity; test_model asserts it). */
static double chain_model(const dedup_scalable *sb, dedup_bloom_kind kind, uint64_t news)
{
    double none = 1;
    for (uint32_t i = 0; dedup_scalable_link(sb, i); i++) {
        dedup_scalable_link_info li;
        assert_int_equal(dedup_scalable_get_link_info(sb, i, &li), DEDUP_OK);
        uint64_t items = news < li.capacity || !dedup_scalable_link(sb, i + 1) ? news : li.capacity;
        none *= 1 - link_model(sb, kind, i, items);
        news -= items;
    }
    return 1 - none;
}

/* Verdicts against an exact set: an added key is always MAYBE_DUPLICATE. */
static void test_model(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        dedup_scalable *sb = make((dedup_bloom_kind)kind, 100, 0.01, 64);
        tu_rng rng = {g_seed + (uint64_t)kind};
        enum { UNIVERSE = 30000 };
        static unsigned char seen[UNIVERSE];
        memset(seen, 0, sizeof seen);
        uint64_t news = 0, fps = 0, fresh = 0;
        double model = 0; /* false positives the chain's model expects */
        double full_none = 1; /* prod(1 - rate_i) over the full links */
        uint32_t nfull = 0;
        uint32_t cached_link = UINT32_MAX;
        uint64_t cached_block = 0;
        double cached_rate = 0;
        for (int op = 0; op < 60000; op++) {
            uint64_t key = tu_below(&rng, UNIVERSE);
            dedup_verdict v = DEDUP_LATE;
            if (!seen[key]) {
                /* Only the last link's fill changed since the last fresh
                 * key (get_link_info would count bits: O(1) here). */
                while (dedup_scalable_link(sb, nfull + 1)) {
                    full_none *= 1 - link_model(sb, (dedup_bloom_kind)kind, nfull, UINT64_C(100) << nfull);
                    nfull++;
                }
                uint64_t in_full = 0;
                for (uint32_t i = 0; i < nfull; i++)
                    in_full += UINT64_C(100) << i;
                /* The last link's rate at its fill, taken at the middle of
                 * runs of 'stride' fills (1 in the first links, 1/256 of
                 * the capacity in bigger ones): the rate is smooth, so the
                 * sum moves by far less than the widening below, and the
                 * library's model is computed ~2,500 times, not ~26,000. */
                uint64_t stride = (UINT64_C(100) << nfull) / 256 + 1, at = news - in_full;
                uint64_t block = at / stride;
                if (nfull != cached_link || block != cached_block) {
                    cached_link = nfull;
                    cached_block = block;
                    cached_rate = link_model(sb, (dedup_bloom_kind)kind, nfull,
                                             block * stride + stride / 2);
                }
                model += 1 - full_none * (1 - cached_rate);
            }
            assert_int_equal(dedup_scalable_test_and_add(sb, kd(key), &v), DEDUP_OK);
            if (seen[key]) {
                assert_int_equal(v, DEDUP_MAYBE_DUPLICATE);
            } else {
                fresh++;
                seen[key] = 1;
                if (v == DEDUP_NEW)
                    news++;
                else
                    fps++;
            }
        }
        dedup_scalable_info info;
        dedup_scalable_get_info(sb, &info);
        assert_int_equal(info.items, news);
        /* Within the promise, and from both sides of the chain's own model
         * (~120 expected for classic, ~80 for blocked), widened by 20% for
         * the scatter of one chain's small first links around their
         * expected fill (seen: blocked 0.74x to 1.23x with the binomial
         * noise): a chain at twice the rate still fails. */
        fprintf(stderr, "scalable %s: %llu false positives in %llu fresh keys while growing, model %.1f\n",
                kind ? "blocked" : "classic", (unsigned long long)fps, (unsigned long long)fresh, model);
        assert_true(fps <= tu_binomial_upper(fresh, 0.01));
        assert_true(fps <= tu_binomial_upper(fresh, 1.2 * model / (double)fresh));
        assert_true(fps >= tu_binomial_lower(fresh, 0.8 * model / (double)fresh));
        assert_true(info.links >= 8);
        assert_true(info.fpr_bound <= 0.01);
        /* the fill-based estimate scatters around the rates the small
         * links were sized for */
        assert_true(info.fpr_current <= 2 * info.fpr_bound);
        uint64_t sum = 0;
        double bound = 0;
        for (uint32_t i = 0; i < info.links; i++) {
            dedup_scalable_link_info li;
            assert_int_equal(dedup_scalable_get_link_info(sb, i, &li), DEDUP_OK);
            assert_int_equal(li.capacity, UINT64_C(100) << i);
            if (i + 1 < info.links)
                assert_int_equal(li.items, li.capacity);
            assert_true(li.fpr_current <= li.fpr * 3);
            sum += li.items;
            bound += li.fpr;
            assert_non_null(dedup_scalable_link(sb, i));
        }
        assert_null(dedup_scalable_link(sb, info.links));
        dedup_scalable_link_info li;
        assert_int_equal(dedup_scalable_get_link_info(sb, info.links, &li), DEDUP_ERR_RANGE);
        assert_int_equal(sum, news);
        assert_true(fabs(bound - info.fpr_bound) < 1e-15);
        /* batch and single queries agree; added keys are all present */
        dedup_digest d[1000];
        bool out[1000];
        for (uint64_t k0 = 0; k0 < UNIVERSE; k0 += 1000) {
            for (int j = 0; j < 1000; j++)
                d[j] = kd(k0 + (uint64_t)j);
            dedup_scalable_might_contain_batch(sb, d, 1000, out);
            for (int j = 0; j < 1000; j++) {
                assert_int_equal(out[j], dedup_scalable_might_contain(sb, d[j]));
                if (seen[k0 + (uint64_t)j])
                    assert_true(out[j]);
            }
        }
        /* The grown chain's rate over 400,000 fresh keys, from both sides:
         * against its model (the links' expected rates at their fill) and
         * against its conditional rate (each link's rate at the bits it
         * actually set, dedup_bloom_current_fpr), 1 - prod(1 - rate_i) for
         * both.  ~1,500-2,300 false positives expected: the 99.9% bounds
         * lie within +-8%, widened by 12% (conditional) and 25% (model):
         * the conditional rate assumes k distinct probes, but in the first
         * links (1,400 bits) a key's double-hashed probes coincide now and
         * then (classic measured 3-7% above it); the model also carries
         * the scatter of those links' fill (blocked: seen -16%).  Twice or
         * half the rate still fails. */
        {
            double none = 1;
            for (uint32_t i = 0; i < info.links; i++)
                none *= 1 - dedup_bloom_current_fpr(dedup_scalable_link(sb, i));
            double cond = 1 - none, whole = chain_model(sb, (dedup_bloom_kind)kind, news);
            const uint64_t trials = 400000;
            uint64_t fp = 0;
            for (uint64_t k0 = 0; k0 < trials; k0 += 1000) {
                for (int j = 0; j < 1000; j++)
                    d[j] = kd((UINT64_C(1) << 40) + k0 + (uint64_t)j);
                dedup_scalable_might_contain_batch(sb, d, 1000, out);
                for (int j = 0; j < 1000; j++)
                    fp += out[j];
            }
            fprintf(stderr, "scalable %s, %u links: measured FPR %.5f, model %.5f, conditional %.5f\n",
                    kind ? "blocked" : "classic", info.links, (double)fp / (double)trials, whole,
                    cond);
            assert_true(fp <= tu_binomial_upper(trials, cond * 1.12));
            assert_true(fp >= tu_binomial_lower(trials, cond * 0.88));
            assert_true(fp <= tu_binomial_upper(trials, whole * 1.25));
            assert_true(fp >= tu_binomial_lower(trials, whole * 0.75));
        }
        /* The batch verb gives the same verdicts and the same chain as the
         * single one, duplicates inside a batch included. */
        {
            dedup_scalable *s1 = make((dedup_bloom_kind)kind, 37, 0.05, 64);
            dedup_scalable *s2 = make((dedup_bloom_kind)kind, 37, 0.05, 64);
            dedup_digest bd[700];
            dedup_verdict bv[700];
            for (int round = 0; round < 20; round++) {
                size_t m = (size_t)tu_below(&rng, 700) + 1, done = 0;
                for (size_t j = 0; j < m; j++)
                    bd[j] = kd(tu_below(&rng, 8000));
                assert_int_equal(dedup_scalable_test_and_add_batch(s2, bd, m, bv, &done), DEDUP_OK);
                assert_int_equal(done, m);
                for (size_t j = 0; j < m; j++) {
                    dedup_verdict v1;
                    assert_int_equal(dedup_scalable_test_and_add(s1, bd[j], &v1), DEDUP_OK);
                    assert_int_equal(v1, bv[j]);
                }
            }
            size_t l1, l2;
            unsigned char *b1 = save_blob(s1, &l1), *b2 = save_blob(s2, &l2);
            assert_int_equal(l1, l2);
            assert_memory_equal(b1, b2, l1);
            free(b1);
            free(b2);
            dedup_scalable_free(s1);
            dedup_scalable_free(s2);
        }
        dedup_scalable_clear(sb);
        dedup_scalable_get_info(sb, &info);
        assert_int_equal(info.links, 1);
        assert_int_equal(info.items, 0);
        dedup_scalable_free(sb);
    }
}

/* The acceptance test: from 1,000 to 10M items at p = 1%, the
 * measured FPR over 1M fresh keys stays <= p. */
static void test_grow_10m(void **state)
{
    (void)state;
#ifdef DEDUP_SANITIZED
    const uint64_t n = 1000000; /* the sanitizers make 10M too slow for CI */
#else
    const uint64_t n = 10000000;
#endif
    const uint64_t trials = 1000000;
    dedup_scalable *sb = make(DEDUP_BLOOM_CLASSIC, 1000, 0.01, 64);
    uint64_t maybe = 0;
    dedup_digest d[1024];
    bool out[1024];
    dedup_verdict vs[1024];
    for (uint64_t i = 0; i < n; i += 1024) {
        size_t m = n - i < 1024 ? (size_t)(n - i) : 1024, done = 0;
        for (size_t j = 0; j < m; j++)
            d[j] = kd(i + j);
        assert_int_equal(dedup_scalable_test_and_add_batch(sb, d, m, vs, &done), DEDUP_OK);
        assert_int_equal(done, m);
        for (size_t j = 0; j < m; j++)
            maybe += vs[j] == DEDUP_MAYBE_DUPLICATE;
    }
    dedup_scalable_info info;
    dedup_scalable_get_info(sb, &info);
    /* no false negatives: every 7th key, so all links are covered (the
     * insert loop above already saw each key's verdict) */
    for (uint64_t i = 0; i < n; i += 7 * 1024) {
        size_t m = 0;
        for (uint64_t key = i; key < n && key < i + 7 * 1024; key += 7)
            d[m++] = kd(key);
        dedup_scalable_might_contain_batch(sb, d, m, out);
        for (size_t j = 0; j < m; j++)
            if (!out[j])
                fail_msg("false negative for key %llu", (unsigned long long)(i + 7 * j));
    }
    uint64_t fp = 0;
    for (uint64_t i = 0; i < trials; i += 1024) {
        for (size_t j = 0; j < 1024; j++)
            d[j] = kd((UINT64_C(1) << 50) + i + j);
        dedup_scalable_might_contain_batch(sb, d, 1024, out);
        for (size_t j = 0; j < 1024; j++)
            fp += out[j];
    }
    uint64_t total = (trials + 1023) / 1024 * 1024;
    double bits_per_item = (double)info.bits / (double)info.items;
    fprintf(stderr,
            "scalable 1000 -> %llu: %u links, %.2f bits/item, measured FPR %.5f, "
            "expected %.5f, bound %.5f, target 0.01\n",
            (unsigned long long)n, info.links, bits_per_item, (double)fp / (double)total,
            info.fpr_current, info.fpr_bound);
    assert_true(info.fpr_bound <= 0.01);
    /* Widened by 12% as in test_model: the classic chain measures 2-8%
     * above its fill-based rate (seen: +4.6% at 1M keys, 3.6 standard
     * deviations, which failed the bare bound); twice the rate fails. */
    assert_true(fp <= tu_binomial_upper(total, info.fpr_current * 1.12));
    assert_true(fp >= tu_binomial_lower(total, info.fpr_current * 0.88));
    assert_true((double)fp / (double)total <= 0.01);
    assert_true(maybe <= tu_binomial_upper(n, info.fpr_bound));
    if (n == 10000000)
        assert_true(bits_per_item <= 32.0);
    dedup_scalable_free(sb);
}

static void test_nonscaling(void **state)
{
    (void)state;
    dedup_scalable *sb = make(DEDUP_BLOOM_CLASSIC, 1000, 0.01, 1);
    dedup_scalable_link_info li;
    assert_int_equal(dedup_scalable_get_link_info(sb, 0, &li), DEDUP_OK);
    assert_true(li.fpr == 0.01); /* L = 1: the only link gets all of p */
    uint64_t i = 0, news = 0;
    dedup_status s;
    dedup_verdict v;
    while ((s = dedup_scalable_test_and_add(sb, kd(i), &v)) == DEDUP_OK) {
        news += v == DEDUP_NEW;
        i++;
    }
    assert_int_equal(s, DEDUP_ERR_FULL);
    assert_int_equal(news, 1000);
    size_t l1, l2;
    unsigned char *a = save_blob(sb, &l1);
    /* more new keys: FULL and nothing changes */
    for (uint64_t t = 1; t < 50; t++) {
        dedup_digest d = kd(i + 1000000 * t);
        if (!dedup_scalable_might_contain(sb, d))
            assert_int_equal(dedup_scalable_add(sb, d), DEDUP_ERR_FULL);
    }
    unsigned char *b = save_blob(sb, &l2);
    assert_memory_equal(a, b, l1);
    /* a duplicate still answers */
    assert_int_equal(dedup_scalable_test_and_add(sb, kd(0), &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_MAYBE_DUPLICATE);
    free(a);
    free(b);
    dedup_scalable_free(sb);
}

static void test_keys(void **state)
{
    (void)state;
    dedup_scalable *sb = make(DEDUP_BLOOM_BLOCKED, 10, 0.001, 64);
    dedup_verdict v;
    assert_int_equal(dedup_scalable_test_and_add_key(sb, "a", 1, &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_NEW);
    assert_int_equal(dedup_scalable_test_and_add_key(sb, "a", 1, &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_MAYBE_DUPLICATE);
    assert_int_equal(dedup_scalable_add_key(sb, "b", 1), DEDUP_OK);
    assert_true(dedup_scalable_might_contain_key(sb, "b", 1));
    dedup_digest d = dedup_scalable_digest(sb, "b", 1);
    assert_true(dedup_scalable_might_contain(sb, d));
    dedup_scalable_free(sb);
}

static void test_save_load(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        dedup_scalable *sb = make((dedup_bloom_kind)kind, 50, 0.02, 64);
        for (uint64_t i = 0; i < 3000; i++)
            assert_int_equal(dedup_scalable_add(sb, kd(i)), DEDUP_OK);
        size_t len, len2;
        unsigned char *blob = save_blob(sb, &len);
        dedup_scalable *back = NULL;
        assert_int_equal(load_blob(blob, len, NULL, &back), DEDUP_OK);
        unsigned char *blob2 = save_blob(back, &len2);
        assert_int_equal(len, len2);
        assert_memory_equal(blob, blob2, len);
        dedup_scalable_info a, b;
        dedup_scalable_get_info(sb, &a);
        dedup_scalable_get_info(back, &b);
        assert_int_equal(a.links, b.links);
        assert_int_equal(a.items, b.items);
        assert_int_equal(a.bits, b.bits);
        assert_true(a.fpr_bound == b.fpr_bound);
        for (uint64_t i = 0; i < 20000; i++)
            assert_int_equal(dedup_scalable_might_contain(sb, kd(i)),
                             dedup_scalable_might_contain(back, kd(i)));
        /* the loaded chain keeps growing */
        for (uint64_t i = 3000; i < 9000; i++)
            assert_int_equal(dedup_scalable_add(back, kd(i)), DEDUP_OK);

        char path[] = "/tmp/dedup_test_scalableXXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(dedup_scalable_save_file(sb, path), DEDUP_OK);
        dedup_scalable *ff = NULL;
        assert_int_equal(dedup_scalable_load_file(path, NULL, &ff), DEDUP_OK);
        dedup_scalable_free(ff);
        FILE *f = fopen(path, "ab");
        fputc('x', f);
        fclose(f);
        assert_int_equal(dedup_scalable_load_file(path, NULL, &ff), DEDUP_ERR_TRAILING);
        assert_null(ff);
        unlink(path);
        free(blob);
        free(blob2);
        dedup_scalable_free(back);
        dedup_scalable_free(sb);
    }
}

static unsigned char *craft(const unsigned char *params, uint32_t plen, const void *payload,
                            uint64_t paylen, size_t *len)
{
    return tu_container(DEDUP_TYPE_SCALABLE_BLOOM, g_seed, params, plen, payload, paylen, len);
}

static void test_corrupt(void **state)
{
    (void)state;
    dedup_scalable *sb = make(DEDUP_BLOOM_CLASSIC, 4, 0.1, 64);
    for (uint64_t i = 0; i < 20; i++)
        assert_int_equal(dedup_scalable_add(sb, kd(i)), DEDUP_OK);
    size_t len;
    unsigned char *blob = save_blob(sb, &len);
    dedup_scalable *out = NULL;
    for (size_t l = 0; l < len; l++) {
        assert_int_not_equal(load_blob(blob, l, NULL, &out), DEDUP_OK);
        assert_null(out);
    }
    for (size_t i = 0; i < len; i++) {
        blob[i] ^= 0x44;
        assert_int_not_equal(load_blob(blob, len, NULL, &out), DEDUP_OK);
        assert_null(out);
        blob[i] ^= 0x44;
    }
    uint32_t plen = dedup_get_u32(blob + 20);
    const unsigned char *p = blob + DEDUP_HEADER_SIZE;
    const unsigned char *pay = p + plen;
    uint64_t paylen = dedup_get_u64(blob + 32);
    struct { size_t off; uint64_t v; int w; } cases[] = {
        {0, 2, 4},                       /* kind */
        {4, 0, 4}, {4, 65, 4}, {4, 1, 4}, /* links */
        {8, 0, 4}, {8, 3, 4},            /* growth */
        {12, 0, 4}, {12, 2, 4},          /* max links < links */
        {16, 0, 8}, {16, 5, 8},          /* initial capacity */
        {24, 0, 8},                      /* fpr 0.0 */
        {40, 1000, 8},                   /* items don't add up */
        {48, 1, 8},                      /* reserved */
        {56, 5, 8},                      /* link 0 capacity */
        {64, 3, 8},                      /* link 0 not full */
        {72, 0, 8},                      /* bits */
        {72, UINT64_C(1) << 41, 8},
        {72, 64, 8},                     /* bits differ from the embedded link */
        {80, 0, 4}, {80, 33, 4},         /* k */
        {84, 1, 4},                      /* reserved */
        {88, 0, 8},                      /* link rate */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        unsigned char q[4096];
        memcpy(q, p, plen);
        if (cases[c].w == 8)
            dedup_put_u64(q + cases[c].off, cases[c].v);
        else
            dedup_put_u32(q + cases[c].off, (uint32_t)cases[c].v);
        size_t l2;
        unsigned char *bad = craft(q, plen, pay, paylen, &l2);
        dedup_status s = load_blob(bad, l2, NULL, &out);
        if (s != DEDUP_ERR_CORRUPT && s != DEDUP_ERR_LIMIT)
            fprintf(stderr, "case %zu: status %d\n", c, s);
        assert_true(s == DEDUP_ERR_CORRUPT || s == DEDUP_ERR_LIMIT);
        assert_null(out);
        free(bad);
    }
    size_t l2;
    unsigned char *good = craft(p, plen, pay, paylen, &l2);
    assert_int_equal(load_blob(good, l2, NULL, &out), DEDUP_OK);
    dedup_scalable_free(out);
    free(good);
    /* payload shorter than the links need */
    unsigned char *shortp = craft(p, plen, pay, paylen - 9, &l2);
    assert_int_equal(load_blob(shortp, l2, NULL, &out), DEDUP_ERR_CORRUPT);
    free(shortp);
    free(blob);
    dedup_scalable_free(sb);
}

static void test_oom(void **state)
{
    (void)state;
    size_t len = 0;
    unsigned char *blob = NULL;
    for (uint64_t fail = 1; fail < 40; fail++) {
        tu_failing_alloc st;
        dedup_allocator a = tu_failing_allocator(&st, fail);
        dedup_scalable_params p;
        dedup_scalable_params_init(&p);
        p.capacity = 10;
        p.seed = g_seed;
        dedup_scalable *sb = NULL;
        dedup_status s = dedup_scalable_create(&p, &a, &sb);
        if (s) {
            assert_int_equal(s, DEDUP_ERR_NOMEM);
            assert_null(sb);
            assert_int_equal(st.live, 0);
            continue;
        }
        uint64_t i, news = 0;
        for (i = 0; i < 2000; i++) {
            dedup_verdict v;
            s = dedup_scalable_test_and_add(sb, kd(i), &v);
            if (s)
                break;
            news += v == DEDUP_NEW;
        }
        if (s) {
            /* growth failed: nothing lost, nothing half-added */
            assert_int_equal(s, DEDUP_ERR_NOMEM);
            for (uint64_t j = 0; j < i; j++)
                assert_true(dedup_scalable_might_contain(sb, kd(j)));
            dedup_scalable_info info;
            dedup_scalable_get_info(sb, &info);
            assert_int_equal(info.items, news);
        } else if (!blob) {
            blob = save_blob(sb, &len);
        }
        dedup_scalable_free(sb);
        assert_int_equal(st.live, 0);
    }
    assert_non_null(blob);
    for (uint64_t fail = 1; fail < 40; fail++) {
        tu_failing_alloc st;
        dedup_allocator a = tu_failing_allocator(&st, fail);
        dedup_scalable *sb = NULL;
        dedup_status s = load_blob(blob, len, &a, &sb);
        if (s)
            assert_int_equal(s, DEDUP_ERR_NOMEM);
        dedup_scalable_free(sb);
        assert_int_equal(st.live, 0);
    }
    free(blob);
}

int main(void)
{
    g_seed = tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_grow_10m),
        cmocka_unit_test(test_nonscaling),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
