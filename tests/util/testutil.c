#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

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

/* z for one-sided 99.9% */
#define TU_Z 3.0902

uint64_t tu_binomial_upper(uint64_t trials, double p)
{
    double mean = (double)trials * p;
    double sd = sqrt((double)trials * p * (1.0 - p));
    double hi = mean + TU_Z * sd + 1.0;
    if (mean < 30) {
        /* Poisson tail: smallest c with P(X > c) < 0.001 */
        double term = exp(-mean), cdf = term;
        uint64_t c = 0;
        while (1.0 - cdf > 0.001) {
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
