/* test_bloom.c - classic and blocked Bloom filters: sizing, no false
 * negatives, measured FPR against the model, algebra, persistence, OOM. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/bitmap.h"
#include "dedup/bloom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const dedup_bloom_kind KINDS[2] = {DEDUP_BLOOM_CLASSIC, DEDUP_BLOOM_BLOCKED};

static dedup_bloom *make_ex(dedup_bloom_kind kind, uint64_t n, double p, uint64_t seed)
{
    dedup_bloom_params pa;
    dedup_bloom_params_init(&pa);
    pa.kind = kind;
    pa.capacity = n;
    pa.fpr = p;
    pa.seed = seed;
    dedup_bloom *bf = NULL;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_OK);
    assert_non_null(bf);
    return bf;
}

static dedup_bloom *make(dedup_bloom_kind kind, uint64_t n, double p)
{
    return make_ex(kind, n, p, DEDUP_DEFAULT_SEED);
}

static unsigned char *save_mem(const dedup_bloom *bf, size_t *len)
{
    *len = (size_t)dedup_bloom_serialized_size(bf);
    unsigned char *buf = malloc(*len);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, *len);
    assert_int_equal(dedup_bloom_save(bf, &sink), DEDUP_OK);
    assert_int_equal(ms.len, *len);
    return buf;
}

static dedup_status load_mem(const unsigned char *buf, size_t len, const dedup_allocator *a,
                             dedup_bloom **out)
{
    dedup_mem_source ms;
    return dedup_bloom_load(dedup_mem_source_init(&ms, buf, len), a, out);
}

/* Bit-identical: same shape and the same serialized bytes. */
static void assert_same_bits(const dedup_bloom *a, const dedup_bloom *b)
{
    size_t la, lb;
    unsigned char *x = save_mem(a, &la), *y = save_mem(b, &lb);
    assert_int_equal(la, lb);
    /* Skip the params' capacity/fpr: compare header seed, bits, k, payload. */
    assert_memory_equal(x + 24, y + 24, 8);
    assert_memory_equal(x + 56, y + 56, la - 56 - 8);
    free(x);
    free(y);
}

/* ---- sizing ------------------------------------------------------------- */

/* The seeds' table, pinned exactly.  Classic bits are ceil(-n ln p/ln2^2);
 * blocked bits come from the exact model's search. */
static void test_sizing_table(void **state)
{
    (void)state;
    static const struct {
        uint64_t n;
        double p;
        uint64_t cbits;
        uint32_t ck;
        uint64_t bbits;
        uint32_t bk;
    } T[] = {
        {100000, 0.01, 958506, 7, 992256, 6},
        {1000000, 0.01, 9585059, 7, 9918464, 6},
        {1000000, 0.001, 14377588, 10, 15545856, 9},
        {10000000, 0.01, 95850584, 7, 99180032, 6},
        {100000000, 0.0001, 1917011676, 13, 2203021824, 12},
    };
    for (size_t i = 0; i < sizeof T / sizeof *T; i++) {
        uint64_t cb = dedup_bloom_bits_for(T[i].n, T[i].p);
        assert_int_equal(cb, T[i].cbits);
        assert_int_equal(dedup_bloom_k_for(T[i].n, cb), T[i].ck);
        double want = -(double)T[i].n * log(T[i].p) / (log(2) * log(2));
        assert_true(cb >= want && cb < want + 1);
        /* The FPR reached with the rounded k is within 1% of p. */
        double f = dedup_bloom_fpr_for(T[i].n, cb, T[i].ck);
        assert_true(fabs(f / T[i].p - 1) < 0.01);
        /* Capacity is the exact inverse. */
        uint64_t cap = dedup_bloom_capacity_for(cb, T[i].p);
        assert_true(cap >= T[i].n);
        assert_true(dedup_bloom_bits_for(cap, T[i].p) <= cb);
        assert_true(dedup_bloom_bits_for(cap + 1, T[i].p) > cb);

        uint64_t bb = dedup_blocked_bits_for(T[i].n, T[i].p);
        assert_int_equal(bb, T[i].bbits);
        assert_int_equal(bb % 512, 0);
        assert_int_equal(dedup_blocked_k_for(T[i].n, bb), T[i].bk);
        assert_true(dedup_blocked_fpr_for(T[i].n, bb, T[i].bk) <= T[i].p);
        /* One block fewer misses p with every k: bb is the smallest. */
        for (uint32_t k = 1; k <= 16; k++)
            assert_true(dedup_blocked_fpr_for(T[i].n, bb - 512, k) > T[i].p);
        uint64_t bcap = dedup_blocked_capacity_for(bb, T[i].p);
        assert_true(bcap >= T[i].n);
        assert_true(dedup_blocked_fpr_for(bcap, bb, dedup_blocked_k_for(bcap, bb)) <= T[i].p);
        assert_true(dedup_blocked_fpr_for(bcap + 1, bb, dedup_blocked_k_for(bcap + 1, bb)) >
                    T[i].p);
    }
    /* 1e6 at 1%: 1.14 MiB; 1e8 at 0.01%: 228.5 MiB. */
    dedup_bloom *bf = make(DEDUP_BLOOM_CLASSIC, 1000000, 0.01);
    assert_int_equal(dedup_bloom_bits(bf), 9585059);
    assert_int_equal(dedup_bloom_k(bf), 7);
    size_t mu = dedup_bloom_memory_usage(bf);
    assert_true(mu >= 9585059 / 8 && mu < 9585059 / 8 + 1024);
    assert_true(fabs(mu / 1048576.0 - 1.14) < 0.01);
    dedup_bloom_free(bf);
    assert_true(fabs(1917011676 / 8.0 / 1048576.0 - 228.5) < 0.05);
    bf = make(DEDUP_BLOOM_BLOCKED, 1000000, 0.001);
    assert_int_equal(dedup_bloom_bits(bf), 15545856);
    assert_int_equal(dedup_bloom_k(bf), 9);
    dedup_bloom_free(bf);
}

static void test_sizing_invalid(void **state)
{
    (void)state;
    assert_int_equal(dedup_bloom_bits_for(0, 0.01), 0);
    assert_int_equal(dedup_bloom_bits_for(10, 0), 0);
    assert_int_equal(dedup_bloom_bits_for(10, 1), 0);
    assert_int_equal(dedup_bloom_bits_for(10, NAN), 0);
    assert_int_equal(dedup_bloom_k_for(0, 100), 0);
    assert_int_equal(dedup_bloom_k_for(10, 0), 0);
    assert_true(dedup_bloom_fpr_for(10, 0, 3) == 0);
    assert_true(dedup_bloom_fpr_for(10, 100, 0) == 0);
    assert_int_equal(dedup_bloom_capacity_for(0, 0.01), 0);
    assert_int_equal(dedup_bloom_capacity_for(100, 1.5), 0);
    assert_int_equal(dedup_blocked_bits_for(0, 0.01), 0);
    assert_int_equal(dedup_blocked_bits_for(5, -1), 0);
    assert_int_equal(dedup_blocked_k_for(5, 100), 0);
    assert_true(dedup_blocked_fpr_for(5, 511, 3) == 0);
    assert_true(dedup_blocked_fpr_for(5, 1024, 17) == 0);
    assert_int_equal(dedup_blocked_capacity_for(100, 0.01), 0);
    /* Clamps: tiny p needs more than 32 probes; k_for stops at 32 (16). */
    assert_int_equal(dedup_bloom_k_for(1, 1000), 32);
    assert_true(dedup_blocked_k_for(1, 1 << 20) <= 16);
    /* Saturated: the FPR of an overfull filter is 1, not more. */
    assert_true(dedup_blocked_fpr_for(UINT64_C(1) << 40, 512, 4) == 1.0);
    assert_true(dedup_bloom_fpr_for(1000000, 64, 3) <= 1.0);
    /* Beyond the limit: blocked sizing says so. */
    assert_true(dedup_blocked_bits_for(UINT64_C(1) << 40, 1e-9) > DEDUP_MAX_BITS);
}

static void test_create_errors(void **state)
{
    (void)state;
    dedup_bloom_params pa;
    dedup_bloom *bf = (dedup_bloom *)1;
    dedup_bloom_params_init(&pa);
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_ERR_INVALID_ARG); /* no size */
    assert_null(bf);
    pa.capacity = 1000;
    const double bad_p[] = {0, 1, -0.5, 1e-13, NAN, INFINITY};
    for (size_t i = 0; i < 6; i++) {
        pa.fpr = bad_p[i];
        assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_ERR_INVALID_ARG);
    }
    pa.fpr = 0.01;
    pa.k = 33;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_ERR_INVALID_ARG);
    pa.kind = DEDUP_BLOOM_BLOCKED;
    pa.k = 17;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_ERR_INVALID_ARG);
    pa.k = 0;
    pa.kind = (dedup_bloom_kind)7;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_ERR_INVALID_ARG);
    for (int i = 0; i < 2; i++) {
        pa.kind = KINDS[i];
        pa.bits = DEDUP_MAX_BITS + 1;
        assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_ERR_LIMIT);
        pa.bits = 0;
        pa.capacity = UINT64_C(1) << 40;
        pa.fpr = 1e-6;
        assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_ERR_LIMIT);
        pa.capacity = 1000;
        pa.fpr = 0.01;
    }
    assert_int_equal(dedup_bloom_create(NULL, NULL, &bf), DEDUP_ERR_INVALID_ARG);
    dedup_bloom_free(NULL);
}

/* The blocked sizing searches walk over k (the FPR is unimodal in k) and
 * interpolate over block counts; this checks them against exhaustive scans
 * of the public model: k_for is the smallest k of least FPR, bits_for meets
 * p with its k and no k meets p with one block fewer. */
static void test_blocked_search_exhaustive(void **state)
{
    (void)state;
    static const double P[] = {0.5, 0.1, 0.01, 1e-3, 1e-5, 1e-8};
    for (size_t pi = 0; pi < sizeof P / sizeof *P; pi++) {
        for (uint64_t n = 1; n < UINT64_C(50000000); n = n * 7 + 3) {
            uint64_t bits = dedup_blocked_bits_for(n, P[pi]);
            assert_true(bits >= 512 && bits % 512 == 0);
            for (int shape = 0; shape < 3; shape++) {
                uint64_t b = shape == 0 ? bits : shape == 1 ? bits / 3 + 512 : bits * 5;
                b -= b % 512;
                uint32_t best = 0;
                double bestf = 2.0;
                for (uint32_t k = 1; k <= 16; k++) {
                    double f = dedup_blocked_fpr_for(n, b, k);
                    if (f < bestf) {
                        bestf = f;
                        best = k;
                    }
                }
                assert_int_equal(dedup_blocked_k_for(n, b), best);
            }
            assert_true(dedup_blocked_fpr_for(n, bits, dedup_blocked_k_for(n, bits)) <= P[pi]);
            if (bits > 512)
                for (uint32_t k = 1; k <= 16; k++)
                    assert_true(dedup_blocked_fpr_for(n, bits - 512, k) > P[pi]);
        }
    }
}

static void test_shape_from_bits(void **state)
{
    (void)state;
    dedup_bloom_params pa;
    dedup_bloom_params_init(&pa);
    pa.bits = 1000003; /* classic keeps m exactly */
    pa.seed = 99;
    dedup_bloom *bf = NULL;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_OK);
    assert_int_equal(dedup_bloom_bits(bf), 1000003);
    assert_int_equal(dedup_bloom_k(bf), 7); /* -log2(0.01) rounded */
    assert_int_equal(dedup_bloom_capacity(bf), 0);
    assert_int_equal(dedup_bloom_seed(bf), 99);
    assert_true(dedup_bloom_target_fpr(bf) == 0.01);
    assert_int_equal(dedup_bloom_get_kind(bf), DEDUP_BLOOM_CLASSIC);
    /* Fill it well past capacity: no bit at or above m is ever set, and
     * the file (which checks that) loads. */
    for (uint64_t i = 0; i < 2000000; i++)
        dedup_bloom_add(bf, dedup_hash_u64(i, 99));
    size_t len;
    unsigned char *buf = save_mem(bf, &len);
    uint64_t last = dedup_get_u64(buf + len - 16);
    assert_int_equal(last >> (1000003 % 64), 0);
    assert_true(last != 0);
    dedup_bloom *back = NULL;
    assert_int_equal(load_mem(buf, len, NULL, &back), DEDUP_OK);
    assert_int_equal(dedup_bloom_popcount(back), dedup_bloom_popcount(bf));
    assert_true(dedup_bloom_popcount(bf) <= 1000003);
    free(buf);
    dedup_bloom_free(back);
    dedup_bloom_free(bf);

    pa.kind = DEDUP_BLOOM_BLOCKED;
    pa.bits = 1000003; /* rounded up to whole blocks */
    pa.k = 5;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_OK);
    assert_int_equal(dedup_bloom_bits(bf), 1000448);
    assert_int_equal(dedup_bloom_k(bf), 5);
    dedup_bloom_free(bf);
    pa.k = 0;
    pa.capacity = 100000;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_OK);
    assert_int_equal(dedup_bloom_k(bf), dedup_blocked_k_for(100000, 1000448));
    dedup_bloom_free(bf);
    /* Blocked sized from capacity with a fixed k: the fewest blocks that
     * reach p with that k. */
    pa.bits = 0;
    pa.k = 3;
    assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_OK);
    assert_int_equal(dedup_bloom_k(bf), 3);
    uint64_t m = dedup_bloom_bits(bf);
    assert_true(dedup_blocked_fpr_for(100000, m, 3) <= 0.01);
    assert_true(dedup_blocked_fpr_for(100000, m - 512, 3) > 0.01);
    assert_true(m > dedup_blocked_bits_for(100000, 0.01));
    dedup_bloom_free(bf);
}

/* ---- behaviour ------------------------------------------------------------ */

/* Millions of keys, single and batch forms: no false negative, ever, also
 * after a save/load round trip. */
static void test_no_false_negatives(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    const size_t n = 2000000;
    dedup_digest *d = malloc(n * sizeof *d);
    bool *out = malloc(n);
    assert_non_null(d);
    assert_non_null(out);
    for (int ki = 0; ki < 2; ki++) {
        uint64_t base = tu_next(&r);
        dedup_bloom *bf = make(KINDS[ki], n, 0.01);
        for (size_t i = 0; i < n; i++)
            d[i] = dedup_hash_u64(base + i, dedup_bloom_seed(bf));
        /* Half single adds, half batch adds. */
        for (size_t i = 0; i < n / 2; i++)
            dedup_bloom_add(bf, d[i]);
        dedup_bloom_add_batch(bf, d + n / 2, n - n / 2);
        for (size_t i = 0; i < n; i++)
            assert_true(dedup_bloom_might_contain(bf, d[i]));
        memset(out, 0, n);
        dedup_bloom_might_contain_batch(bf, d, n, out);
        for (size_t i = 0; i < n; i++)
            assert_true(out[i]);
        size_t len;
        unsigned char *buf = save_mem(bf, &len);
        dedup_bloom *back = NULL;
        assert_int_equal(load_mem(buf, len, NULL, &back), DEDUP_OK);
        free(buf);
        assert_same_bits(bf, back);
        memset(out, 0, n);
        dedup_bloom_might_contain_batch(back, d, n, out);
        for (size_t i = 0; i < n; i++)
            assert_true(out[i]);
        /* Re-adding says "present" for all of them. */
        dedup_bloom_test_and_add_batch(back, d, n, out);
        for (size_t i = 0; i < n; i++)
            assert_true(out[i]);
        for (size_t i = 0; i < n; i += 97)
            assert_true(dedup_bloom_test_and_add(back, d[i]));
        /* The estimated count is within a few percent at capacity. */
        double est = dedup_bloom_estimate_count(bf);
        assert_true(fabs(est / (double)n - 1) < 0.03);
        /* The current FPR from the fill agrees with the sizing model. */
        double model = ki == 0 ? dedup_bloom_fpr_for(n, dedup_bloom_bits(bf), dedup_bloom_k(bf))
                               : dedup_blocked_fpr_for(n, dedup_bloom_bits(bf), dedup_bloom_k(bf));
        double cur = dedup_bloom_current_fpr(bf);
        assert_true(fabs(cur / model - 1) < 0.05);
        assert_true(cur <= 0.0105);
        double fill = dedup_bloom_fill_ratio(bf);
        assert_true(fill > 0.4 && fill < 0.6);
        dedup_bloom_clear(bf);
        assert_int_equal(dedup_bloom_popcount(bf), 0);
        assert_true(dedup_bloom_estimate_count(bf) == 0);
        assert_true(dedup_bloom_current_fpr(bf) == 0);
        dedup_bloom_free(back);
        dedup_bloom_free(bf);
    }
    free(d);
    free(out);
}

/* ---- measured false-positive rates ----------------------------------------
 * The sizing models give the FPR expected over filter instances; one
 * filter's own rate varies around it (its fill varies), by more than the
 * binomial noise of a million queries when the rate is high.  So each
 * measurement spreads its queries over R independent filters (fresh seed
 * and keys each), which shrinks that variance R-fold, and compares:
 *  - the total false positives with the 99.9% binomial bounds of the model
 *    (the requirement), and
 *  - the same count with the bounds of the filters' own conditional rates
 *    (dedup_bloom_current_fpr: fill^k, or the mean of block fill^k), which
 *    is exact given the bits, plus the mean conditional rate against the
 *    model within 'tol'.
 * Each check is at 99.9%, so by chance one in a thousand fails; a failing
 * measurement is repeated once with fresh seeds (a chance failure then
 * needs two in a row, about 1e-6; a real bias fails both). */

typedef struct fpr_case {
    dedup_bloom_kind kind;
    uint64_t n;
    double p;       /* sized from (n, p) when bits == 0 */
    uint64_t bits;  /* else this shape ... */
    uint32_t k;     /* ... with this k */
    uint64_t trials;
    unsigned reps;  /* R */
    double tol;     /* mean conditional rate vs model; 0: not checked */
} fpr_case;

static bool measure_once(const fpr_case *c, tu_rng *r, bool verbose)
{
    uint64_t fp = 0, per = c->trials / c->reps;
    double cond_sum = 0, model = 0;
    uint64_t m = 0;
    uint32_t k = 0;
    for (unsigned rep = 0; rep < c->reps; rep++) {
        dedup_bloom_params pa;
        dedup_bloom_params_init(&pa);
        pa.kind = c->kind;
        pa.capacity = c->n;
        pa.fpr = c->p;
        pa.bits = c->bits;
        pa.k = c->k;
        pa.seed = tu_next(r);
        dedup_bloom *bf = NULL;
        assert_int_equal(dedup_bloom_create(&pa, NULL, &bf), DEDUP_OK);
        uint64_t base = tu_next(r);
        dedup_digest batch[256];
        bool out[256];
        for (uint64_t i = 0; i < c->n; i += 256) {
            size_t g = c->n - i < 256 ? (size_t)(c->n - i) : 256;
            for (size_t j = 0; j < g; j++)
                batch[j] = dedup_hash_u64(base + i + j, pa.seed);
            dedup_bloom_add_batch(bf, batch, g);
        }
        /* Fresh keys: a disjoint range of the same sequence. */
        for (uint64_t i = 0; i < per; i += 256) {
            size_t g = per - i < 256 ? (size_t)(per - i) : 256;
            for (size_t j = 0; j < g; j++)
                batch[j] = dedup_hash_u64(base + c->n + i + j, pa.seed);
            dedup_bloom_might_contain_batch(bf, batch, g, out);
            for (size_t j = 0; j < g; j++)
                fp += out[j];
        }
        cond_sum += dedup_bloom_current_fpr(bf);
        m = dedup_bloom_bits(bf);
        k = dedup_bloom_k(bf);
        dedup_bloom_free(bf);
    }
    model = c->kind == DEDUP_BLOOM_CLASSIC ? dedup_bloom_fpr_for(c->n, m, k)
                                           : dedup_blocked_fpr_for(c->n, m, k);
    uint64_t total = per * c->reps;
    double cond = cond_sum / c->reps;
    uint64_t lo = tu_binomial_lower(total, model), hi = tu_binomial_upper(total, model);
    uint64_t clo = tu_binomial_lower(total, cond), chi = tu_binomial_upper(total, cond);
    bool ok = fp >= lo && fp <= hi && fp >= clo && fp <= chi &&
              (c->tol == 0 || fabs(cond / model - 1) <= c->tol);
    if (verbose || !ok)
        fprintf(stderr,
                "%s%s n=%llu m=%llu k=%u: model %.4g, measured %.4g (%llu in [%llu, %llu]),"
                " conditional %.4g%s\n",
                ok ? "" : "(retrying) ", c->kind ? "blocked" : "classic",
                (unsigned long long)c->n, (unsigned long long)m, k, model,
                (double)fp / (double)total, (unsigned long long)fp, (unsigned long long)lo,
                (unsigned long long)hi, cond, ok ? "" : " -- outside");
    if (c->bits == 0)
        assert_true(model <= c->p * 1.01); /* sized to meet p (classic: with rounded k) */
    return ok;
}

static void measure(const fpr_case *c, tu_rng *r)
{
    if (!measure_once(c, r, true))
        assert_true(measure_once(c, r, true));
}

/* Measured FPR over >= 1M fresh keys lies within the 99.9% binomial bounds
 * of the model for the filters' actual (m, k, n), at 1%, 0.1%, 0.01%. */
static void test_measured_fpr(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x55};
    static const struct {
        uint64_t n;
        double p;
        uint64_t trials;
    } C[] = {
        {100000, 0.01, 1000000},
        {200000, 0.001, 1000000},
        {100000, 0.0001, 4000000},
    };
    for (int ki = 0; ki < 2; ki++)
        for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
            fpr_case c = {KINDS[ki], C[i].n, C[i].p, 0, 0, C[i].trials, 8, 0.05};
            measure(&c, &r);
        }
}

/* Batches give exactly the results of the single calls in order, including
 * a key repeated inside one batch; the filters end bit-identical. */
static void test_batch_equals_single(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x77};
    const size_t n = 50000;
    dedup_digest *d = malloc(n * sizeof *d);
    bool *a = malloc(n), *b = malloc(n);
    assert_non_null(d);
    for (int ki = 0; ki < 2; ki++) {
        dedup_bloom *x = make(KINDS[ki], n, 0.05), *y = make(KINDS[ki], n, 0.05);
        for (size_t i = 0; i < n; i++) {
            /* Many repeats, some at distance 1 (same batch group). */
            uint64_t key = tu_below(&r, 3) == 0 && i ? (uint64_t)tu_below(&r, i) : i + 1000000;
            d[i] = i % 10 == 9 ? d[i - 1] : dedup_bloom_digest(x, &key, sizeof key);
        }
        for (size_t i = 0; i < n; i++)
            a[i] = dedup_bloom_test_and_add(x, d[i]);
        dedup_bloom_test_and_add_batch(y, d, n, b);
        assert_memory_equal(a, b, n);
        for (size_t i = 9; i < n; i += 10)
            assert_true(b[i]); /* repeated within its group */
        assert_same_bits(x, y);
        /* The *_key forms hash with the filter's seed. */
        uint64_t key = 424242;
        assert_false(dedup_bloom_might_contain_key(x, &key, sizeof key) !=
                     dedup_bloom_might_contain(x, dedup_hash(&key, sizeof key, DEDUP_DEFAULT_SEED)));
        dedup_bloom_add_key(x, "hello", 5);
        assert_true(dedup_bloom_might_contain(x, dedup_hash("hello", 5, DEDUP_DEFAULT_SEED)));
        assert_true(dedup_bloom_test_and_add_key(x, "hello", 5));
        assert_true(dedup_bloom_might_contain_key(x, "hello", 5));
        dedup_bloom_free(x);
        dedup_bloom_free(y);
    }
    free(d);
    free(a);
    free(b);
}

static void test_union_intersect(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x99};
    const uint64_t n = 100000;
    for (int ki = 0; ki < 2; ki++) {
        dedup_bloom *a = make(KINDS[ki], 2 * n, 0.01), *b = make(KINDS[ki], 2 * n, 0.01),
                    *all = make(KINDS[ki], 2 * n, 0.01);
        uint64_t base = tu_next(&r);
        /* a: [0, 1.5n), b: [n, 2.5n); both: [n, 1.5n). */
        for (uint64_t i = 0; i < 3 * n / 2; i++) {
            dedup_digest d = dedup_hash_u64(base + i, DEDUP_DEFAULT_SEED);
            dedup_bloom_add(a, d);
            dedup_bloom_add(all, d);
        }
        for (uint64_t i = n; i < 5 * n / 2; i++) {
            dedup_digest d = dedup_hash_u64(base + i, DEDUP_DEFAULT_SEED);
            dedup_bloom_add(b, d);
            dedup_bloom_add(all, d);
        }
        dedup_bloom *u = make(KINDS[ki], 2 * n, 0.01);
        assert_int_equal(dedup_bloom_union(u, a), DEDUP_OK);
        assert_int_equal(dedup_bloom_union(u, b), DEDUP_OK);
        assert_same_bits(u, all);
        assert_int_equal(dedup_bloom_intersect(a, b), DEDUP_OK);
        for (uint64_t i = n; i < 3 * n / 2; i++)
            assert_true(dedup_bloom_might_contain(a, dedup_hash_u64(base + i, DEDUP_DEFAULT_SEED)));
        assert_true(dedup_bloom_popcount(a) <= dedup_bloom_popcount(b));

        /* Shapes that differ are refused and nothing changes. */
        uint64_t before = dedup_bloom_popcount(u);
        dedup_bloom *other_seed = make_ex(KINDS[ki], 2 * n, 0.01, 1);
        dedup_bloom *other_size = make(KINDS[ki], 3 * n, 0.01);
        dedup_bloom *other_kind = make(KINDS[1 - ki], 2 * n, 0.01);
        dedup_bloom_params pa;
        dedup_bloom_params_init(&pa);
        pa.kind = KINDS[ki];
        pa.bits = dedup_bloom_bits(u);
        pa.k = dedup_bloom_k(u) + 1;
        dedup_bloom *other_k = NULL;
        assert_int_equal(dedup_bloom_create(&pa, NULL, &other_k), DEDUP_OK);
        dedup_bloom *bad[] = {other_seed, other_size, other_kind, other_k};
        for (int i = 0; i < 4; i++) {
            assert_int_equal(dedup_bloom_union(u, bad[i]), DEDUP_ERR_INCOMPATIBLE);
            assert_int_equal(dedup_bloom_intersect(u, bad[i]), DEDUP_ERR_INCOMPATIBLE);
            dedup_bloom_free(bad[i]);
        }
        assert_int_equal(dedup_bloom_popcount(u), before);
        dedup_bloom_free(a);
        dedup_bloom_free(b);
        dedup_bloom_free(all);
        dedup_bloom_free(u);
    }
}

/* ---- persistence ---------------------------------------------------------- */

/* Re-encodes a file with replaced params (and payload length), so that the
 * checksum is right and the params check is what must reject it. */
static unsigned char *reencode(const unsigned char *good, uint16_t type, uint64_t capacity,
                               double fpr, uint64_t bits, uint32_t k, uint32_t reserved,
                               uint64_t payload_len, size_t *len)
{
    unsigned char params[32];
    dedup_put_u64(params, capacity);
    dedup_put_f64(params + 8, fpr);
    dedup_put_u64(params + 16, bits);
    dedup_put_u32(params + 24, k);
    dedup_put_u32(params + 28, reserved);
    size_t cap = 40 + 32 + (size_t)payload_len + 8;
    unsigned char *out = calloc(1, cap);
    assert_non_null(out);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, out, cap);
    dedup_encoder e;
    assert_int_equal(dedup_encoder_begin(&e, sink, type, dedup_get_u64(good + 24), params, 32,
                                         payload_len), DEDUP_OK);
    unsigned char zero[64] = {0};
    for (uint64_t i = 0; i < payload_len; i += 64)
        assert_int_equal(dedup_encoder_write(&e, zero, payload_len - i < 64 ? payload_len - i : 64),
                         DEDUP_OK);
    assert_int_equal(dedup_encoder_end(&e), DEDUP_OK);
    *len = ms.len;
    return out;
}

static void test_load_validation(void **state)
{
    (void)state;
    dedup_bloom *c = make(DEDUP_BLOOM_CLASSIC, 1000, 0.01);   /* 9586 bits, k 7 */
    dedup_bloom *b = make(DEDUP_BLOOM_BLOCKED, 1000, 0.01);
    size_t clen, blen;
    unsigned char *cf = save_mem(c, &clen), *bfile = save_mem(b, &blen);
    const uint64_t cbits = dedup_bloom_bits(c), cpay = (cbits + 63) / 64 * 8;
    const uint64_t bbits = dedup_bloom_bits(b);
    struct {
        uint16_t type;
        uint64_t cap;
        double fpr;
        uint64_t bits;
        uint32_t k, res;
        uint64_t pay;
        dedup_status want;
    } T[] = {
        {2, 1000, 0.01, cbits, 7, 0, cpay, DEDUP_OK},
        {2, 0, 0.0, cbits, 7, 0, cpay, DEDUP_OK},                /* fpr 0 allowed */
        {2, 1000, 0.01, cbits, 0, 0, cpay, DEDUP_ERR_CORRUPT},   /* k 0 */
        {2, 1000, 0.01, cbits, 33, 0, cpay, DEDUP_ERR_CORRUPT},  /* k too big */
        {2, 1000, 0.01, cbits, 7, 1, cpay, DEDUP_OK},            /* probe scheme 1 */
        {2, 1000, 0.01, cbits, 7, 2, cpay, DEDUP_ERR_CORRUPT},   /* no scheme 2 */
        {2, 1000, 1.0, cbits, 7, 0, cpay, DEDUP_ERR_CORRUPT},    /* fpr */
        {2, 1000, NAN, cbits, 7, 0, cpay, DEDUP_ERR_CORRUPT},
        {2, 1000, 1e-13, cbits, 7, 0, cpay, DEDUP_ERR_CORRUPT},
        {2, 1000, 0.01, 0, 7, 0, 0, DEDUP_ERR_CORRUPT},          /* no bits */
        {2, 1000, 0.01, cbits, 7, 0, cpay + 8, DEDUP_ERR_CORRUPT},  /* payload lies */
        {2, 1000, 0.01, cbits + 64, 7, 0, cpay, DEDUP_ERR_CORRUPT},
        {2, 1000, 0.01, DEDUP_MAX_BITS + 64, 7, 0, cpay, DEDUP_ERR_LIMIT},
        {3, 1000, 0.01, bbits, 6, 0, bbits / 8, DEDUP_OK},
        {3, 1000, 0.01, bbits, 17, 0, bbits / 8, DEDUP_ERR_CORRUPT}, /* k > 16 */
        {3, 1000, 0.01, bbits, 6, 1, bbits / 8, DEDUP_ERR_CORRUPT},  /* blocked: word 0 */
        {3, 1000, 0.01, bbits - 64, 6, 0, bbits / 8 - 8, DEDUP_ERR_CORRUPT}, /* not whole blocks */
        {3, 1000, 0.01, bbits, 6, 0, bbits / 8 - 64, DEDUP_ERR_CORRUPT},
        {3, 1000, 0.01, UINT64_MAX - 511, 6, 0, bbits / 8, DEDUP_ERR_LIMIT},
    };
    for (size_t i = 0; i < sizeof T / sizeof *T; i++) {
        size_t len;
        unsigned char *f = reencode(T[i].type == 2 ? cf : bfile, T[i].type, T[i].cap, T[i].fpr,
                                    T[i].bits, T[i].k, T[i].res, T[i].pay, &len);
        dedup_bloom *out = NULL;
        tu_failing_alloc st;
        dedup_allocator a = tu_failing_allocator(&st, 0);
        dedup_status s = load_mem(f, len, &a, &out);
        if (s != T[i].want)
            fprintf(stderr, "case %zu: got %d want %d\n", i, s, T[i].want);
        assert_int_equal(s, T[i].want);
        if (s)
            assert_int_equal(st.calls, 0); /* rejected before allocating */
        else
            assert_int_equal(dedup_bloom_popcount(out), 0);
        dedup_bloom_free(out);
        assert_int_equal(st.live, 0);
        free(f);
    }
    /* Classic: a bit set beyond m is corruption (checksum intact). */
    {
        size_t len;
        unsigned char *f = reencode(cf, 2, 1000, 0.01, cbits, 7, 0, cpay, &len);
        /* Patch the last payload word and fix the checksum by re-encoding. */
        unsigned char params[32];
        memcpy(params, f + 40, 32);
        unsigned char *pay = calloc(1, cpay);
        dedup_put_u64(pay + cpay - 8, UINT64_C(1) << 63);
        unsigned char *g = tu_container(2, DEDUP_DEFAULT_SEED, params, 32, pay, cpay, &len);
        dedup_bloom *out = NULL;
        assert_int_equal(cbits % 64 != 63, true);
        assert_int_equal(load_mem(g, len, NULL, &out), DEDUP_ERR_CORRUPT);
        assert_null(out);
        free(f);
        free(g);
        free(pay);
    }
    /* Every truncation and a flipped bit anywhere fail cleanly. */
    const unsigned char *files[2] = {cf, bfile};
    size_t lens[2] = {clen, blen};
    for (int fi = 0; fi < 2; fi++) {
        unsigned char *f = malloc(lens[fi]);
        memcpy(f, files[fi], lens[fi]);
        for (size_t cut = 0; cut < lens[fi]; cut++) {
            dedup_bloom *out = NULL;
            assert_int_not_equal(load_mem(f, cut, NULL, &out), DEDUP_OK);
            assert_null(out);
        }
        for (size_t byte = 0; byte < lens[fi]; byte++) {
            int bit = (int)(byte * 5 % 8);
            f[byte] ^= (unsigned char)(1 << bit);
            dedup_bloom *out = NULL;
            dedup_status s = load_mem(f, lens[fi], NULL, &out);
            f[byte] ^= (unsigned char)(1 << bit);
            assert_int_not_equal(s, DEDUP_OK);
            assert_null(out);
        }
        free(f);
    }
    /* A bitmap file is the wrong type. */
    dedup_bitmap_params bp = {.nbits = 100};
    dedup_bitmap *bm = NULL;
    assert_int_equal(dedup_bitmap_create(&bp, NULL, &bm), DEDUP_OK);
    unsigned char bmbuf[256];
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, bmbuf, sizeof bmbuf);
    assert_int_equal(dedup_bitmap_save(bm, &sink), DEDUP_OK);
    dedup_bloom *out = NULL;
    assert_int_equal(load_mem(bmbuf, ms.len, NULL, &out), DEDUP_ERR_WRONG_TYPE);
    dedup_bitmap_free(bm);
    free(cf);
    free(bfile);
    dedup_bloom_free(c);
    dedup_bloom_free(b);
}

static void test_files(void **state)
{
    (void)state;
    char path[] = "/tmp/dedup_test_bloom_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int ki = 0; ki < 2; ki++) {
        dedup_bloom *bf = make_ex(KINDS[ki], 10000, 0.001, 1234);
        for (uint64_t i = 0; i < 10000; i++)
            dedup_bloom_add(bf, dedup_hash_u64(i, 1234));
        assert_int_equal(dedup_bloom_save_file(bf, path), DEDUP_OK);
        dedup_bloom *back = NULL;
        assert_int_equal(dedup_bloom_load_file(path, NULL, &back), DEDUP_OK);
        assert_same_bits(bf, back);
        assert_int_equal(dedup_bloom_capacity(back), 10000);
        assert_true(dedup_bloom_target_fpr(back) == 0.001);
        assert_int_equal(dedup_bloom_seed(back), 1234);
        assert_int_equal(dedup_bloom_get_kind(back), KINDS[ki]);
        for (uint64_t i = 0; i < 10000; i++)
            assert_true(dedup_bloom_might_contain(back, dedup_hash_u64(i, 1234)));
        dedup_bloom_free(back);
        FILE *f = fopen(path, "ab");
        assert_non_null(f);
        fputs("trailing", f);
        fclose(f);
        assert_int_equal(dedup_bloom_load_file(path, NULL, &back), DEDUP_ERR_TRAILING);
        assert_null(back);
        dedup_bloom_free(bf);
    }
    unlink(path);
    dedup_bloom *back = NULL;
    assert_int_equal(dedup_bloom_load_file(path, NULL, &back), DEDUP_ERR_IO);
}

static void test_oom(void **state)
{
    (void)state;
    for (int ki = 0; ki < 2; ki++) {
        dedup_bloom *src = make(KINDS[ki], 5000, 0.01);
        dedup_bloom_add_key(src, "x", 1);
        size_t len;
        unsigned char *buf = save_mem(src, &len);
        for (uint64_t fail = 1; fail <= 4; fail++) {
            tu_failing_alloc st;
            dedup_allocator a = tu_failing_allocator(&st, fail);
            dedup_bloom_params pa;
            dedup_bloom_params_init(&pa);
            pa.kind = KINDS[ki];
            pa.capacity = 5000;
            dedup_bloom *bf = NULL;
            dedup_status s = dedup_bloom_create(&pa, &a, &bf);
            if (fail <= 2)
                assert_int_equal(s, DEDUP_ERR_NOMEM);
            assert_true(s == DEDUP_OK || s == DEDUP_ERR_NOMEM);
            assert_true((s == DEDUP_OK) == (bf != NULL));
            if (bf)
                assert_true(dedup_bloom_memory_usage(bf) >= (size_t)st.live - 64);
            dedup_bloom_free(bf);
            assert_int_equal(st.live, 0);

            st.calls = 0;
            bf = NULL;
            s = load_mem(buf, len, &a, &bf);
            if (fail <= 2)
                assert_int_equal(s, DEDUP_ERR_NOMEM);
            assert_true(s == DEDUP_OK || s == DEDUP_ERR_NOMEM);
            if (bf)
                assert_true(dedup_bloom_might_contain_key(bf, "x", 1));
            dedup_bloom_free(bf);
            assert_int_equal(st.live, 0);
        }
        free(buf);
        dedup_bloom_free(src);
    }
}

/* The models hold away from the optimum too: fixed k from 1 to 20 and
 * filters filled to three times their design load. */
static void test_model_off_optimum(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x1234};
    static const struct {
        dedup_bloom_kind kind;
        uint32_t k;
        uint64_t n;
    } C[] = {
        {DEDUP_BLOOM_BLOCKED, 1, 100000},  {DEDUP_BLOOM_BLOCKED, 3, 100000},
        {DEDUP_BLOOM_BLOCKED, 16, 100000}, {DEDUP_BLOOM_BLOCKED, 8, 300000},
        {DEDUP_BLOOM_CLASSIC, 2, 100000},  {DEDUP_BLOOM_CLASSIC, 20, 100000},
        {DEDUP_BLOOM_CLASSIC, 7, 300000},
    };
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        fpr_case c = {C[i].kind, C[i].n, 0.01, UINT64_C(1) << 20, C[i].k, 1000000, 8, 0.03};
        measure(&c, &r);
    }
}

/* A classic filter spreads the k probes of every digest: scheme 0 (files
 * written before) put a digest whose step hi * m / 2^64 is near 0 or near
 * m*a/j on 1..j bits, a false-positive floor far above a tiny p. */
static void test_probe_spread(void **state)
{
    (void)state;
    dedup_bloom *bf = make(DEDUP_BLOOM_CLASSIC, 12964, 7.5e-8);
    const uint32_t k = dedup_bloom_k(bf);
    assert_true(k >= 20);
    const uint64_t steps[] = {0, 1, UINT64_C(1) << 63, UINT64_MAX / 3, UINT64_MAX / 7 * 2,
                              UINT64_MAX};
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        dedup_bloom_clear(bf);
        dedup_digest d = {UINT64_C(0x0123456789ABCDEF) * (i + 1), steps[i]};
        dedup_bloom_add(bf, d);
        if (dedup_bloom_popcount(bf) != k)
            fprintf(stderr, "step %#llx: %llu bits of k = %u\n", (unsigned long long)steps[i],
                    (unsigned long long)dedup_bloom_popcount(bf), k);
        assert_int_equal(dedup_bloom_popcount(bf), k);
    }
    dedup_bloom_free(bf);

    /* A scheme-0 file keeps its probes: its bits, set by the old formula,
     * are found; the same bits read as scheme 1 are not. */
    dedup_bloom *c = make(DEDUP_BLOOM_CLASSIC, 1000, 0.01);
    const uint64_t m = dedup_bloom_bits(c), pay = (m + 63) / 64 * 8;
    const uint32_t ck = dedup_bloom_k(c);
    dedup_digest d = {UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x0000000012345678)};
    unsigned char *words = calloc(1, pay);
    assert_non_null(words);
    uint64_t x = d.lo, y = d.hi;
    for (uint32_t i = 0; i < ck; i++) {
        uint64_t b = dedup_reduce(x, m);
        words[b / 8] |= (unsigned char)(1u << (b % 8)); /* little-endian words */
        x += y;
        y += i + 1;
    }
    for (uint32_t scheme = 0; scheme < 2; scheme++) {
        unsigned char params[32];
        dedup_put_u64(params, 1000);
        dedup_put_f64(params + 8, 0.01);
        dedup_put_u64(params + 16, m);
        dedup_put_u32(params + 24, ck);
        dedup_put_u32(params + 28, scheme);
        size_t len;
        unsigned char *f = tu_container(2, DEDUP_DEFAULT_SEED, params, 32, words, pay, &len);
        dedup_bloom *out = NULL;
        assert_int_equal(load_mem(f, len, NULL, &out), DEDUP_OK);
        assert_int_equal(dedup_bloom_might_contain(out, d), scheme == 0);
        /* saved again, it keeps its scheme */
        size_t len2;
        unsigned char *g = save_mem(out, &len2);
        assert_int_equal(dedup_get_u32(g + 40 + 28), scheme);
        free(g);
        dedup_bloom_free(out);
        free(f);
    }
    free(words);
    dedup_bloom_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizing_table),
        cmocka_unit_test(test_sizing_invalid),
        cmocka_unit_test(test_blocked_search_exhaustive),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_shape_from_bits),
        cmocka_unit_test(test_no_false_negatives),
        cmocka_unit_test(test_measured_fpr),
        cmocka_unit_test(test_model_off_optimum),
        cmocka_unit_test(test_batch_equals_single),
        cmocka_unit_test(test_union_intersect),
        cmocka_unit_test(test_load_validation),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_probe_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
