/*
 * test_hll.c - the HyperLogLog sketch: accuracy over many seeds and
 * cardinalities from 1 to 10^8, merge equal to the sketch of the union
 * register for register, the sparse form, files and their validation,
 * and out-of-memory.
 *
 * Keys are fed as digests straight from a splitmix64 stream (what XXH3
 * digests look like to the sketch), so 10^8 distinct keys cost ~0.5 s.
 * DEDUP_HLL_MAX_N (default 1e8) scales the largest cardinality down, e.g.
 * for a slow debugger run; nothing is skipped by default, sanitizers
 * included.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/hll.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dedup_hll *make(uint32_t p, uint64_t seed, const dedup_allocator *a)
{
    dedup_hll_params hp;
    dedup_hll_params_init(&hp);
    hp.precision = p;
    hp.seed = seed;
    dedup_hll *h = NULL;
    assert_int_equal(dedup_hll_create(&hp, a, &h), DEDUP_OK);
    return h;
}

/* Digest number i of stream 's': distinct for distinct i (splitmix64 is a
 * bijection of its counter). */
static dedup_digest digest_of(uint64_t s, uint64_t i)
{
    tu_rng a = {s * UINT64_C(0x2545F4914F6CDD1D) + i * UINT64_C(0x9E3779B97F4A7C15)};
    tu_rng b = {~s + i * UINT64_C(0x9E3779B97F4A7C15)};
    dedup_digest d;
    d.lo = tu_next(&a);
    d.hi = tu_next(&b);
    return d;
}

static void add_range(dedup_hll *h, uint64_t s, uint64_t from, uint64_t to)
{
    dedup_digest buf[4096];
    while (from < to) {
        size_t k = 0;
        for (; k < 4096 && from < to; k++, from++)
            buf[k] = digest_of(s, from);
        assert_int_equal(dedup_hll_add_batch(h, buf, k), DEDUP_OK);
    }
}

static uint64_t max_n(void)
{
    const char *e = getenv("DEDUP_HLL_MAX_N");
    uint64_t n = e ? (uint64_t)strtod(e, NULL) : 100000000u;
    return n ? n : 1;
}

/* Accuracy bookkeeping: every estimate within 3 standard errors (plus one
 * key, since a count is whole and a sparse sketch's error is a few keys or
 * none at all: one collision among 1,000 keys is 5.5 standard errors of its
 * 2^25 registers), allowing
 * as many outliers as a normal error would give (0.27% each, 99.9% bound),
 * and none beyond 6. */
typedef struct acc {
    uint64_t trials, beyond3;
    double worst; /* in standard errors */
} acc;

static void judge(acc *a, const dedup_hll *h, uint64_t n, uint64_t seed)
{
    double est = dedup_hll_estimate(h);
    double se = dedup_hll_std_error(h);
    double off = fabs(est - (double)n) - 1.0; /* one key of slack: counts are whole */
    double z = off > 0 ? off / ((double)n * se) : 0.0;
    a->trials++;
    if (z > 3.0)
        a->beyond3++;
    if (z > a->worst)
        a->worst = z;
    if (z > 6.0)
        fail_msg("p=%u n=%llu seed=%llu: estimate %.1f is %.2f standard errors off",
                 dedup_hll_precision(h), (unsigned long long)n, (unsigned long long)seed, est, z);
}

static void acc_check(const acc *a, const char *what)
{
    uint64_t allowed = tu_binomial_upper(a->trials, 0.0027);
    fprintf(stderr, "  %s: %llu estimates, %llu beyond 3 SE (allowed %llu), worst %.2f SE\n",
            what, (unsigned long long)a->trials, (unsigned long long)a->beyond3,
            (unsigned long long)allowed, a->worst);
    assert_true(a->beyond3 <= allowed);
}

/* Checkpoints 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, ... up to 'top'. */
static uint64_t next_checkpoint(uint64_t c)
{
    static const unsigned steps[] = {10, 15, 20, 30, 50, 70};
    if (c < 3)
        return c + 1;
    if (c < 10)
        return c == 3 ? 5 : c == 5 ? 7 : 10;
    uint64_t dec = 1;
    while (c / dec >= 100)
        dec *= 10;
    unsigned lead = (unsigned)(c / dec);
    for (size_t i = 0; i < 6; i++)
        if (steps[i] > lead)
            return steps[i] * dec;
    return 100 * dec;
}

static void accuracy_run(acc *a, uint32_t p, uint64_t seed, uint64_t top)
{
    dedup_hll *h = make(p, seed, NULL);
    uint64_t added = 0;
    for (uint64_t c = 1; c <= top; c = next_checkpoint(c)) {
        add_range(h, seed, added, c);
        added = c;
        judge(a, h, c, seed);
    }
    dedup_hll_free(h);
}

static void test_accuracy_default(void **state)
{
    (void)state;
    uint64_t base = tu_seed();
    uint64_t top = max_n();
    acc a = {0};
    /* Two streams all the way to 10^8, forty more to 10^6. */
    for (uint64_t s = 0; s < 2; s++)
        accuracy_run(&a, 14, base + s, top);
    for (uint64_t s = 2; s < 42; s++)
        accuracy_run(&a, 14, base + s, top < 1000000 ? top : 1000000);
    acc_check(&a, "precision 14, 1 .. 1e8");
}

/* Precisions 7 .. 18 as the default one.  Below 7 (16 .. 64 registers) the
 * error's distribution is skewed with a heavier tail than a normal one (hll.h
 * says so): there the RMS error over many sketches must be within 1.25
 * standard errors (1.4 at 16 registers), and at most 5% of them beyond 3 (a normal error: 0.27%). */
static void test_accuracy_precisions(void **state)
{
    (void)state;
    uint64_t base = tu_seed() ^ 0xabcdef;
    for (uint32_t p = DEDUP_HLL_MIN_PRECISION; p <= DEDUP_HLL_MAX_PRECISION; p++) {
        acc a = {0};
        uint64_t top = (uint64_t)200 << p; /* well past the switch to dense */
        unsigned runs = p <= 10 ? 40 : p <= 14 ? 10 : 3;
        char what[64];
        snprintf(what, sizeof what, "precision %u, 1 .. %llu", p, (unsigned long long)top);
        if (p >= 7) {
            for (unsigned s = 0; s < runs; s++)
                accuracy_run(&a, p, base + p * 1000 + s, top);
            acc_check(&a, what);
            continue;
        }
        double sum2 = 0, worst = 0, se = 0;
        unsigned beyond3 = 0;
        const unsigned trials = 1000;
        for (unsigned s = 0; s < trials; s++) {
            dedup_hll *h = make(p, 1, NULL);
            add_range(h, base + p * 100000 + s, 0, top);
            se = dedup_hll_std_error(h);
            double e = (dedup_hll_estimate(h) - (double)top) / (double)top;
            sum2 += e * e;
            beyond3 += fabs(e) / se > 3.0;
            if (fabs(e) / se > worst)
                worst = fabs(e) / se;
            dedup_hll_free(h);
        }
        double rms = sqrt(sum2 / trials) / se;
        fprintf(stderr, "  %s: %u sketches, RMS error %.3f SE, %u beyond 3 SE, worst %.2f SE\n",
                what, trials, rms, beyond3, worst);
        assert_true(rms < 1.4);
        assert_true(beyond3 <= trials / 20);
    }
}

static void test_small_exactish(void **state)
{
    (void)state;
    dedup_hll *h = make(14, 1, NULL);
    assert_true(dedup_hll_estimate(h) == 0.0);
    dedup_digest d = digest_of(9, 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(dedup_hll_add(h, d), DEDUP_OK); /* one key, many times */
    assert_true(fabs(dedup_hll_estimate(h) - 1.0) < 0.01);
    assert_true(dedup_hll_is_sparse(h));
    assert_true(fabs(dedup_hll_std_error(h) - 1.04 / sqrt(33554432.0)) < 1e-12); /* sparse */
    assert_int_equal(dedup_hll_registers(h), 16384);
    assert_int_equal(dedup_hll_densify(h), DEDUP_OK);
    assert_true(fabs(dedup_hll_std_error(h) - 1.04 / 128.0) < 1e-12);
    assert_true(fabs(dedup_hll_estimate(h) - 1.0) < 0.01);
    dedup_hll_clear(h);
    assert_true(dedup_hll_estimate(h) == 0.0);
    dedup_hll_free(h);
    dedup_hll_free(NULL);
}

/* The estimator's bias at small precisions, where a wrong correction shows
 * first.  Once no register is zero the estimator is the raw HyperLogLog one
 * with alpha_inf, whose relative bias over many sketches is
 * alpha_inf / alpha_m - 1 (Flajolet et al. 2007: alpha_16 = 0.673,
 * alpha_32 = 0.697, alpha_64 = 0.709, else 0.7213 / (1 + 1.079 / m)): 7.2%
 * at 16 registers, 0.4% at 256.  At 64 m keys the mean relative error over
 * many independent sketches must be that, two-sided; from 0.25 m to 8 m,
 * where the small-range term (sigma) takes part, it must lie between 0 and
 * that.  Each side allows 4.9 standard errors of the mean (about 1e-6) plus
 * 0.25% for the formula's own approximation. */
static double hll_asymptotic_bias(uint64_t m)
{
    const double ainf = 1.0 / (2.0 * log(2.0));
    double am = m == 16 ? 0.673 : m == 32 ? 0.697 : m == 64 ? 0.709 : 0.7213 / (1 + 1.079 / (double)m);
    return ainf / am - 1;
}

static void test_bias_small_precisions(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0xb1a5};
    static const double mult[] = {0.25, 1, 2.5, 8, 64};
    enum { CELLS = sizeof mult / sizeof mult[0] };
    for (uint32_t p = DEDUP_HLL_MIN_PRECISION; p <= 8; p++) {
        const uint64_t m = UINT64_C(1) << p;
        const unsigned trials = 16000u >> (p - DEDUP_HLL_MIN_PRECISION);
        double sum[CELLS] = {0}, sum2[CELLS] = {0};
        for (unsigned t = 0; t < trials; t++) {
            dedup_hll *h = make(p, 1, NULL);
            uint64_t added = 0, s = tu_next(&r);
            for (int c = 0; c < CELLS; c++) {
                uint64_t n = (uint64_t)(mult[c] * (double)m);
                add_range(h, s, added, n);
                added = n;
                double e = (dedup_hll_estimate(h) - (double)n) / (double)n;
                sum[c] += e;
                sum2[c] += e * e;
            }
            dedup_hll_free(h);
        }
        const double bias = hll_asymptotic_bias(m);
        for (int c = 0; c < CELLS; c++) {
            double mean = sum[c] / trials;
            double sd = sqrt((sum2[c] / trials - mean * mean) / (trials - 1));
            double slack = 4.9 * sd + 0.0025;
            double lo = (c == CELLS - 1 ? bias : 0) - slack, hi = bias + slack;
            fprintf(stderr, "  bias p=%u n=%gm: mean error %+.3f%%, allowed %+.3f%% .. %+.3f%% "
                    "(%u sketches)\n", p, mult[c], mean * 100, lo * 100, hi * 100, trials);
            if (mean < lo || mean > hi)
                fail_msg("p=%u n=%g m: the estimates are biased by %+.3f%%, outside %+.3f%% .. "
                         "%+.3f%%", p, mult[c], mean * 100, lo * 100, hi * 100);
        }
    }
}

static void test_create_errors(void **state)
{
    (void)state;
    dedup_hll_params p;
    dedup_hll_params_init(&p);
    assert_int_equal(p.precision, 14);
    dedup_hll *h = (dedup_hll *)1;
    p.precision = 3;
    assert_int_equal(dedup_hll_create(&p, NULL, &h), DEDUP_ERR_INVALID_ARG);
    assert_null(h);
    p.precision = 19;
    assert_int_equal(dedup_hll_create(&p, NULL, &h), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_hll_create(NULL, NULL, &h), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_hll_create(&p, NULL, NULL), DEDUP_ERR_INVALID_ARG);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The sparse form holds the registers a dense one with the same adds holds,
 * estimates within its own (smaller) error, and turns dense exactly past
 * m / 8 distinct 25-bit prefixes. */
static void test_sparse_matches_dense(void **state)
{
    (void)state;
    uint64_t seed = tu_seed();
    for (uint32_t p = 4; p <= 13; p += 3) {
        dedup_hll *sp = make(p, 5, NULL), *de = make(p, 5, NULL);
        assert_int_equal(dedup_hll_densify(de), DEDUP_OK);
        uint64_t m = UINT64_C(1) << p;
        uint32_t *prefixes = malloc(4 * m * sizeof *prefixes);
        size_t np = 0;
        for (uint64_t i = 0; i < 4 * m; i++) {
            dedup_digest d = digest_of(seed + p, i % (2 * m)); /* repeats too */
            assert_int_equal(dedup_hll_add(sp, d), DEDUP_OK);
            assert_int_equal(dedup_hll_add(de, d), DEDUP_OK);
            prefixes[np++] = (uint32_t)(d.hi >> (64 - DEDUP_HLL_SPARSE_PRECISION));
            if ((i & (i - 1)) == 0 || i % 997 == 0 || i == m / 8 || i == m / 8 + 1) {
                qsort(prefixes, np, sizeof *prefixes, cmp_u32);
                size_t u = 0;
                for (size_t j = 0; j < np; j++)
                    if (u == 0 || prefixes[u - 1] != prefixes[j])
                        prefixes[u++] = prefixes[j];
                np = u;
                assert_int_equal(dedup_hll_is_sparse(sp), np <= m / 8);
                for (uint64_t r = 0; r < m; r++)
                    assert_int_equal(dedup_hll_register(sp, r), dedup_hll_register(de, r));
                uint64_t n = i + 1 < 2 * m ? i + 1 : 2 * m;
                /* Sparse estimates count distinct 25-bit prefixes, so two
                 * keys sharing one read as one: a whole-key step the
                 * asymptotic error does not cover at small n. The number of
                 * such pairs is about Poisson(n^2 / 2^26), under 0.02 here;
                 * allow three (P(>= 4) < 1e-8 per check). */
                double slack = dedup_hll_is_sparse(sp) ? 3.0 : 0.0;
                double err = fabs(dedup_hll_estimate(sp) - (double)n);
                assert_true(err <= 5 * dedup_hll_std_error(sp) * (double)n + slack);
            }
        }
        free(prefixes);
        assert_false(dedup_hll_is_sparse(sp));
        assert_true(dedup_hll_equal(sp, de));
        dedup_hll_free(sp);
        dedup_hll_free(de);
    }
}

static void assert_same_registers(const dedup_hll *a, const dedup_hll *b)
{
    assert_int_equal(dedup_hll_registers(a), dedup_hll_registers(b));
    for (uint64_t i = 0; i < dedup_hll_registers(a); i++)
        if (dedup_hll_register(a, i) != dedup_hll_register(b, i))
            fail_msg("register %llu: %u != %u", (unsigned long long)i, dedup_hll_register(a, i),
                     dedup_hll_register(b, i));
    assert_int_equal(dedup_hll_is_sparse(a), dedup_hll_is_sparse(b));
    assert_true(dedup_hll_equal(a, b));
}

/* merge(sketch(A), sketch(B)) == sketch(A u B), register for register, for
 * every pair of forms, sizes and overlaps. */
static void test_merge_is_union(void **state)
{
    (void)state;
    uint64_t seed = tu_seed();
    static const uint64_t sizes[] = {0, 1, 100, 2000, 2100, 30000, 1000000};
    for (size_t x = 0; x < sizeof sizes / sizeof sizes[0]; x++)
        for (size_t y = 0; y < sizeof sizes / sizeof sizes[0]; y++) {
            uint64_t na = sizes[x], nb = sizes[y], overlap = (na < nb ? na : nb) / 3;
            /* A = [0, na), B = [na - overlap, na - overlap + nb). */
            uint64_t b0 = na - overlap;
            dedup_hll *a = make(14, 77, NULL), *b = make(14, 77, NULL), *u = make(14, 77, NULL);
            add_range(a, seed, 0, na);
            add_range(b, seed, b0, b0 + nb);
            add_range(u, seed, b0, b0 + nb); /* the union, in another order */
            add_range(u, seed, 0, na);
            char why[128];
            assert_int_equal(dedup_hll_merge(a, b, why, sizeof why), DEDUP_OK);
            assert_same_registers(a, u);
            assert_int_equal(dedup_hll_merge(a, a, why, sizeof why), DEDUP_OK); /* self */
            assert_same_registers(a, u);
            dedup_hll_free(a);
            dedup_hll_free(b);
            dedup_hll_free(u);
        }
    /* Many machines: eight sketches of overlapping slices. */
    dedup_hll *all = make(12, 3, NULL), *u = make(12, 3, NULL);
    for (uint64_t k = 0; k < 8; k++) {
        dedup_hll *part = make(12, 3, NULL);
        add_range(part, seed, k * 40000, k * 40000 + 60000);
        add_range(u, seed, k * 40000, k * 40000 + 60000);
        assert_int_equal(dedup_hll_merge(all, part, NULL, 0), DEDUP_OK);
        dedup_hll_free(part);
    }
    assert_same_registers(all, u);
    double est = dedup_hll_estimate(all), n = 7 * 40000 + 60000;
    assert_true(fabs(est - n) / n < 5 * dedup_hll_std_error(all));
    dedup_hll_free(all);
    dedup_hll_free(u);
}

/* A digest landing on sparse index 'idx' (of 2^25) with rank 'rank'. */
static dedup_digest at_rank(uint32_t idx, unsigned rank)
{
    dedup_digest d;
    d.hi = (uint64_t)idx << (64 - DEDUP_HLL_SPARSE_PRECISION);
    d.lo = UINT64_C(1) << (64 - rank);
    return d;
}

/* Two sparse sketches that hold the same sparse indices with different
 * values (different keys, same 25-bit prefix): their merge must keep the
 * larger value of each, whichever side holds it, exactly as adding both
 * key sets to one sketch does.  (Merging sketches of overlapping key sets
 * cannot tell max from min: equal keys give equal values.) */
static void test_merge_sparse_collisions(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x5a5a};
    for (int round = 0; round < 20; round++) {
        dedup_hll *a = make(14, 9, NULL), *b = make(14, 9, NULL), *u = make(14, 9, NULL);
        for (int i = 0; i < 300; i++) {
            uint32_t idx = (uint32_t)tu_below(&r, UINT32_C(1) << DEDUP_HLL_SPARSE_PRECISION);
            unsigned ra = 1 + (unsigned)tu_below(&r, 20), rb = 1 + (unsigned)tu_below(&r, 20);
            int which = (int)tu_below(&r, 4); /* 0, 1: both; 2: a only; 3: b only */
            if (which != 3) {
                assert_int_equal(dedup_hll_add(a, at_rank(idx, ra)), DEDUP_OK);
                assert_int_equal(dedup_hll_add(u, at_rank(idx, ra)), DEDUP_OK);
            }
            if (which != 2) {
                assert_int_equal(dedup_hll_add(b, at_rank(idx, rb)), DEDUP_OK);
                assert_int_equal(dedup_hll_add(u, at_rank(idx, rb)), DEDUP_OK);
            }
        }
        assert_true(dedup_hll_is_sparse(a) && dedup_hll_is_sparse(b));
        dedup_hll *b2 = make(14, 9, NULL);
        assert_int_equal(dedup_hll_merge(b2, b, NULL, 0), DEDUP_OK); /* b2 = b */
        assert_int_equal(dedup_hll_merge(a, b, NULL, 0), DEDUP_OK);
        assert_true(dedup_hll_is_sparse(a));
        assert_true(dedup_hll_equal(a, u));
        assert_int_equal(dedup_hll_merge(b2, a, NULL, 0), DEDUP_OK); /* the other way round */
        assert_true(dedup_hll_equal(b2, u));
        assert_true(dedup_hll_estimate(a) == dedup_hll_estimate(u));
        dedup_hll_free(a), dedup_hll_free(b), dedup_hll_free(b2), dedup_hll_free(u);
    }
}

static void test_merge_incompatible(void **state)
{
    (void)state;
    dedup_hll *a = make(14, 1, NULL), *b = make(12, 1, NULL), *c = make(14, 2, NULL);
    add_range(a, 1, 0, 10);
    dedup_hll *copy = make(14, 1, NULL);
    add_range(copy, 1, 0, 10);
    char why[128] = "";
    assert_int_equal(dedup_hll_merge(a, b, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
    assert_non_null(strstr(why, "precision"));
    assert_int_equal(dedup_hll_merge(a, c, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
    assert_non_null(strstr(why, "seed"));
    assert_true(dedup_hll_equal(a, copy)); /* unchanged */
    dedup_hll_free(a);
    dedup_hll_free(b);
    dedup_hll_free(c);
    dedup_hll_free(copy);
}

static dedup_status save_fn(const void *o, dedup_sink *s) { return dedup_hll_save(o, s); }

static void roundtrip(const dedup_hll *h)
{
    size_t len;
    unsigned char *blob = tu_save_blob(save_fn, h, dedup_hll_serialized_size(h), &len);
    dedup_mem_source ms;
    dedup_hll *back = NULL;
    assert_int_equal(dedup_hll_load(dedup_mem_source_init(&ms, blob, len), NULL, &back), DEDUP_OK);
    assert_int_equal(ms.pos, len);
    assert_same_registers(h, back);
    assert_int_equal(dedup_hll_seed(back), dedup_hll_seed(h));
    assert_true(dedup_hll_estimate(back) == dedup_hll_estimate(h));
    dedup_hll_free(back);
    /* Every truncation fails cleanly; every single-byte flip is refused. */
    for (size_t cut = 0; cut < len; cut += 1 + len / 50) {
        dedup_hll *x = (dedup_hll *)1;
        assert_int_not_equal(dedup_hll_load(dedup_mem_source_init(&ms, blob, cut), NULL, &x),
                             DEDUP_OK);
        assert_null(x);
    }
    for (size_t at = 0; at < len; at += 1 + len / 40) {
        blob[at] ^= 0x10;
        dedup_hll *x = NULL;
        assert_int_not_equal(dedup_hll_load(dedup_mem_source_init(&ms, blob, len), NULL, &x),
                             DEDUP_OK);
        blob[at] ^= 0x10;
    }
    free(blob);
}

static void test_save_load(void **state)
{
    (void)state;
    uint64_t seed = tu_seed();
    dedup_hll *h = make(10, 99, NULL);
    roundtrip(h); /* empty */
    add_range(h, seed, 0, 50);
    assert_true(dedup_hll_is_sparse(h));
    roundtrip(h);
    add_range(h, seed, 50, 100000);
    assert_false(dedup_hll_is_sparse(h));
    roundtrip(h);
    char path[] = "/tmp/test_hll_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(dedup_hll_save_file(h, path), DEDUP_OK);
    dedup_hll *back = NULL;
    assert_int_equal(dedup_hll_load_file(path, NULL, &back), DEDUP_OK);
    assert_same_registers(h, back);
    dedup_hll_free(back);
    FILE *f = fopen(path, "ab");
    fputc(0, f);
    fclose(f);
    assert_int_equal(dedup_hll_load_file(path, NULL, &back), DEDUP_ERR_TRAILING);
    assert_null(back);
    unlink(path);
    dedup_hll_free(h);
}

static void expect_corrupt(uint32_t p, uint32_t form, uint64_t entries, const void *payload,
                           uint64_t paylen, dedup_status want)
{
    unsigned char params[16];
    dedup_put_u32(params, p);
    dedup_put_u32(params + 4, form);
    dedup_put_u64(params + 8, entries);
    size_t len;
    unsigned char *c = tu_container(DEDUP_TYPE_HLL, 1, params, 16, payload, paylen, &len);
    dedup_mem_source ms;
    dedup_hll *h = (dedup_hll *)1;
    assert_int_equal(dedup_hll_load(dedup_mem_source_init(&ms, c, len), NULL, &h), want);
    if (want == DEDUP_OK)
        dedup_hll_free(h);
    else
        assert_null(h);
    free(c);
}

static void test_loader_validates(void **state)
{
    (void)state;
    unsigned char dense[16] = {0};
    expect_corrupt(4, 0, 0, dense, 16, DEDUP_OK);
    expect_corrupt(3, 0, 0, dense, 8, DEDUP_ERR_CORRUPT);   /* precision */
    expect_corrupt(19, 1, 0, NULL, 0, DEDUP_ERR_CORRUPT);
    expect_corrupt(4, 2, 0, dense, 16, DEDUP_ERR_CORRUPT);  /* form */
    expect_corrupt(4, 0, 1, dense, 16, DEDUP_ERR_CORRUPT);  /* dense with entries */
    expect_corrupt(4, 0, 0, dense, 15, DEDUP_ERR_CORRUPT);  /* short payload */
    dense[3] = 66;
    expect_corrupt(4, 0, 0, dense, 16, DEDUP_ERR_CORRUPT);  /* value > 65 */
    dense[3] = 65;
    expect_corrupt(4, 0, 0, dense, 16, DEDUP_OK);
    unsigned char sp[8];
    /* p = 6: m = 64, at most 8 entries of (25-bit index << 7 | value). */
    dedup_put_u32(sp, 3u << 7 | 2);
    dedup_put_u32(sp + 4, 9u << 7 | 1);
    expect_corrupt(6, 1, 2, sp, 8, DEDUP_OK);
    expect_corrupt(6, 1, 2, sp, 7, DEDUP_ERR_CORRUPT);      /* length */
    expect_corrupt(6, 1, 9, NULL, 0, DEDUP_ERR_CORRUPT);    /* more than m/8 */
    dedup_put_u32(sp + 4, 3u << 7 | 1);
    expect_corrupt(6, 1, 2, sp, 8, DEDUP_ERR_CORRUPT);      /* not increasing */
    dedup_put_u32(sp + 4, 2u << 7 | 1);
    expect_corrupt(6, 1, 2, sp, 8, DEDUP_ERR_CORRUPT);      /* decreasing */
    dedup_put_u32(sp + 4, 9u << 7 | 0);
    expect_corrupt(6, 1, 2, sp, 8, DEDUP_ERR_CORRUPT);      /* value 0 */
    dedup_put_u32(sp + 4, 9u << 7 | 66);
    expect_corrupt(6, 1, 2, sp, 8, DEDUP_ERR_CORRUPT);      /* value > 65 */
    dedup_put_u32(sp + 4, UINT32_C(0x1ffffff) << 7 | 65);
    expect_corrupt(6, 1, 2, sp, 8, DEDUP_OK);               /* the last index */
}

static void test_out_of_memory(void **state)
{
    (void)state;
    uint64_t seed = tu_seed();
    for (uint64_t fail_at = 1; fail_at < 40; fail_at++) {
        tu_failing_alloc st;
        dedup_allocator a = tu_failing_allocator(&st, fail_at);
        dedup_hll_params hp;
        dedup_hll_params_init(&hp);
        hp.precision = 12;
        dedup_hll *h = NULL;
        if (dedup_hll_create(&hp, &a, &h) != DEDUP_OK) {
            assert_null(h);
            assert_int_equal(st.live, 0);
            continue;
        }
        dedup_hll *ref = make(12, hp.seed, NULL);
        uint64_t i = 0;
        dedup_status s = DEDUP_OK;
        for (; i < 5000 && s == DEDUP_OK; i++) {
            s = dedup_hll_add(h, digest_of(seed, i));
            if (s == DEDUP_OK)
                assert_int_equal(dedup_hll_add(ref, digest_of(seed, i)), DEDUP_OK);
        }
        if (s != DEDUP_OK)
            assert_int_equal(s, DEDUP_ERR_NOMEM);
        assert_true(dedup_hll_equal(h, ref)); /* the failed add changed nothing */
        dedup_hll_free(h);
        dedup_hll_free(ref);
        assert_int_equal(st.live, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_small_exactish),
        cmocka_unit_test(test_sparse_matches_dense),
        cmocka_unit_test(test_merge_is_union),
        cmocka_unit_test(test_merge_sparse_collisions),
        cmocka_unit_test(test_bias_small_precisions),
        cmocka_unit_test(test_merge_incompatible),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_loader_validates),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_accuracy_precisions),
        cmocka_unit_test(test_accuracy_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
