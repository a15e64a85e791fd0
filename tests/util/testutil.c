#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/bloom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t tu_seed(void)
{
    static uint64_t seed;
    static int have;
    if (!have) {
        const char *e = getenv("DEDUP_TEST_SEED");
        if (e && *e)
            seed = strtoull(e, NULL, 0);
        else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec;
        }
        have = 1;
        fprintf(stderr, "test seed: %llu (set DEDUP_TEST_SEED to replay)\n",
                (unsigned long long)seed);
    }
    return seed;
}

/* z for a one-sided tail of 5e-6 (see testutil.h) */
#define TU_Z 4.4172

uint64_t tu_binomial_upper(uint64_t trials, double p)
{
    double mean = (double)trials * p;
    double sd = sqrt((double)trials * p * (1.0 - p));
    double hi = mean + TU_Z * sd + 1.0;
    if (mean < 30) {
        /* Poisson tail: smallest c with P(X > c) < 5e-6 */
        double term = exp(-mean), cdf = term;
        uint64_t c = 0;
        while (1.0 - cdf > 5e-6) {
            c++;
            term *= mean / (double)c;
            cdf += term;
        }
        if ((double)c > hi)
            hi = (double)c;
    }
    return (uint64_t)ceil(hi);
}

uint64_t tu_binomial_lower(uint64_t trials, double p)
{
    double mean = (double)trials * p;
    double sd = sqrt((double)trials * p * (1.0 - p));
    double lo = mean - TU_Z * sd - 1.0;
    return lo <= 0 ? 0 : (uint64_t)floor(lo);
}

typedef struct hdr { size_t size; size_t pad; } hdr;

static void *fa_malloc(void *ctx, size_t size)
{
    tu_failing_alloc *st = ctx;
    st->calls++;
    if (st->fail_at && st->calls >= st->fail_at)
        return NULL;
    hdr *h = malloc(sizeof(hdr) + size);
    if (!h)
        return NULL;
    h->size = size;
    st->live += (int64_t)size;
    return h + 1;
}

static void fa_free(void *ctx, void *p)
{
    tu_failing_alloc *st = ctx;
    if (!p)
        return;
    hdr *h = (hdr *)p - 1;
    st->live -= (int64_t)h->size;
    free(h);
}

static void *fa_calloc(void *ctx, size_t n, size_t sz)
{
    size_t total = n * sz;
    if (sz && total / sz != n)
        return NULL;
    void *p = fa_malloc(ctx, total);
    if (p)
        memset(p, 0, total);
    return p;
}

static void *fa_realloc(void *ctx, void *p, size_t size)
{
    if (!p)
        return fa_malloc(ctx, size);
    hdr *h = (hdr *)p - 1;
    void *q = fa_malloc(ctx, size);
    if (!q)
        return NULL;
    memcpy(q, p, h->size < size ? h->size : size);
    fa_free(ctx, p);
    return q;
}

dedup_allocator tu_failing_allocator(tu_failing_alloc *state, uint64_t fail_at)
{
    memset(state, 0, sizeof *state);
    state->fail_at = fail_at;
    dedup_allocator a = {fa_malloc, fa_calloc, fa_realloc, fa_free, state};
    return a;
}

unsigned char *tu_save_blob(dedup_save_fn save, const void *obj, uint64_t expected_size,
                            size_t *len)
{
    unsigned char *buf = malloc((size_t)expected_size);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, (size_t)expected_size);
    assert_int_equal(save(obj, &sink), DEDUP_OK);
    assert_int_equal(ms.len, expected_size);
    *len = ms.len;
    return buf;
}

unsigned char *tu_container(uint16_t type, uint64_t seed, const void *params, uint32_t plen,
                            const void *payload, uint64_t paylen, size_t *len)
{
    size_t cap = DEDUP_HEADER_SIZE + plen + (size_t)paylen + DEDUP_TRAILER_SIZE;
    unsigned char *buf = malloc(cap);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, cap);
    dedup_encoder e;
    assert_int_equal(dedup_encoder_begin(&e, sink, type, seed, params, plen, paylen), DEDUP_OK);
    assert_int_equal(dedup_encoder_write(&e, payload, (size_t)paylen), DEDUP_OK);
    assert_int_equal(dedup_encoder_end(&e), DEDUP_OK);
    *len = ms.len;
    return buf;
}

double tu_expected_over_run(tu_rate_fn rate, const void *ctx, uint64_t from, uint64_t n)
{
    if (n <= 4096) {
        double s = 0;
        for (uint64_t i = 0; i < n; i++)
            s += rate(from + i, ctx);
        return s;
    }
    /* Simpson over [from, from + n) with 4096 intervals, the sum of a smooth
     * f over integers i in [a, a + n) being close to its integral over
     * [a - 1/2, a + n - 1/2]; evaluate at the nearest integer counts. */
    const int steps = 4096;
    double a = (double)from - 0.5, h = (double)n / steps, s = 0;
    for (int j = 0; j <= steps; j++) {
        double x = a + h * j;
        uint64_t items = x <= 0 ? 0 : (uint64_t)llround(x);
        double w = (j == 0 || j == steps) ? 1 : (j % 2 ? 4 : 2);
        s += w * rate(items, ctx);
    }
    return s * h / 3;
}

typedef struct tu_bloom_shape { bool blocked; uint64_t bits; uint32_t k; } tu_bloom_shape;

static double tu_bloom_rate(uint64_t items, const void *ctx)
{
    const tu_bloom_shape *b = ctx;
    if (items == 0)
        return 0;
    return b->blocked ? dedup_blocked_fpr_for(items, b->bits, b->k)
                      : dedup_bloom_fpr_for(items, b->bits, b->k);
}

double tu_bloom_expected_over_run(bool blocked, uint64_t bits, uint32_t k, uint64_t from,
                                  uint64_t n)
{
    tu_bloom_shape b = {blocked, bits, k};
    return tu_expected_over_run(tu_bloom_rate, &b, from, n);
}

/* log P(X = j) for X ~ Poisson(mean). */
static double tu_log_poisson(double mean, double j)
{
    return j * log(mean) - mean - lgamma(j + 1);
}

void tu_count_interval(double mean, uint64_t *lo, uint64_t *hi)
{
    const double tail = 1e-6;
    *lo = 0, *hi = 0;
    if (!(mean > 0))
        return;
    /* Walk outwards from the mode, summing the pmf in each tail. */
    double mode = floor(mean);
    double sd = sqrt(mean), span = 12 * sd + 40;
    double below = 0; /* P(X < j) accumulated from the far left */
    double start = mode - span > 0 ? mode - span : 0;
    for (double j = start; j <= mode; j++) {
        double pj = exp(tu_log_poisson(mean, j));
        if (below + pj > tail) {
            *lo = (uint64_t)j;
            break;
        }
        below += pj;
    }
    double above = 0; /* P(X > j) from the far right */
    for (double j = mode + span; j >= mode; j--) {
        double pj = exp(tu_log_poisson(mean, j));
        if (above + pj > tail) {
            *hi = (uint64_t)j;
            break;
        }
        above += pj;
    }
}

void tu_assert_count(const char *what, uint64_t observed, double mean)
{
    uint64_t lo, hi;
    tu_count_interval(mean, &lo, &hi);
    print_message("%s: %llu observed, %.1f expected, allowed [%llu, %llu] (1e-6 a side)\n", what,
                  (unsigned long long)observed, mean, (unsigned long long)lo,
                  (unsigned long long)hi);
    assert_true(observed >= lo);
    assert_true(observed <= hi);
}

void tu_assert_count_between(const char *what, uint64_t observed, double mean_lo, double mean_hi)
{
    uint64_t lo, hi, unused;
    tu_count_interval(mean_lo, &lo, &unused);
    tu_count_interval(mean_hi, &unused, &hi);
    print_message("%s: %llu observed, %.1f .. %.1f expected, allowed [%llu, %llu] (1e-6 a side)\n",
                  what, (unsigned long long)observed, mean_lo, mean_hi, (unsigned long long)lo,
                  (unsigned long long)hi);
    assert_true(observed >= lo);
    assert_true(observed <= hi);
}
