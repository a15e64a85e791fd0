/*
 * test_roaring_seen.c - the roaring seen-set kind through dedup/seen.h:
 * verdicts against a naive model (a sorted array) on seeded dense, sparse
 * and 64-bit inputs; delete; save/load round trips, byte for byte; and the
 * loader refusing every kind of malformed portable bitmap and container.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/roaring.h"

#include <roaring/roaring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dedup_seen *make(void)
{
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_ROARING;
    dedup_seen *s = NULL;
    assert_int_equal(dedup_roaring_seen_create(&sp, NULL, &s), DEDUP_OK);
    return s;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Naive model: an open-addressing table of the values seen (and the list
 * of them, sorted at the end for lookups). */
typedef struct model { uint64_t *slot; unsigned char *used; size_t cap; uint64_t *v; size_t n; } model;
static bool model_insert(model *m, uint64_t x)
{
    size_t i = (size_t)((x * UINT64_C(0x9E3779B97F4A7C15)) >> 40) % m->cap;
    while (m->used[i]) {
        if (m->slot[i] == x)
            return false;
        i = (i + 1) % m->cap;
    }
    m->used[i] = 1;
    m->slot[i] = x;
    m->v[m->n++] = x;
    return true;
}

static dedup_status save_fn(const void *o, dedup_sink *s) { return dedup_seen_save(o, s); }

static unsigned char *blob_of(const dedup_seen *s, size_t *len)
{
    uint64_t n = 0;
    dedup_sink cs = dedup_count_sink_init(&n);
    assert_int_equal(dedup_seen_save(s, &cs), DEDUP_OK);
    return tu_save_blob(save_fn, s, n, len);
}

static void run_input(uint64_t seed, int shape)
{
    tu_rng r = {seed};
    const size_t N = 60000;
    model m = {calloc(4 * N, sizeof(uint64_t)), calloc(4 * N, 1), 4 * N, calloc(N, sizeof(uint64_t)), 0};
    dedup_seen *s = make();
    uint64_t ints[512];
    dedup_verdict v[512];
    for (size_t done = 0; done < N;) {
        size_t k = N - done < 512 ? N - done : 512;
        for (size_t i = 0; i < k; i++) {
            uint64_t x = shape == 0   ? tu_below(&r, 80000)                 /* dense */
                         : shape == 1 ? tu_below(&r, UINT64_C(1) << 32)     /* sparse */
                                      : tu_next(&r) >> (tu_below(&r, 4) * 16); /* 64-bit */
            ints[i] = i > 0 && tu_below(&r, 5) == 0 ? ints[i - 1] : x;     /* repeats in a batch */
        }
        dedup_batch b = {.n = k, .ints = ints};
        size_t d = 0;
        assert_int_equal(dedup_seen_decide(s, &b, v, &d), DEDUP_OK);
        assert_int_equal(d, k);
        for (size_t i = 0; i < k; i++)
            assert_int_equal(v[i], model_insert(&m, ints[i]) ? DEDUP_NEW : DEDUP_DUPLICATE);
        done += k;
    }
    qsort(m.v, m.n, sizeof *m.v, cmp_u64);
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    assert_int_equal(in.kind, DEDUP_SEEN_ROARING);
    assert_int_equal(in.distinct, m.n);
    assert_true(in.distinct_exact && in.can_delete && in.can_save);
    assert_true(in.memory > 0);
    fprintf(stderr, "  shape %d: %zu distinct, %.2f bytes a key\n", shape, m.n,
            (double)in.memory / (double)m.n);

    /* Round trip: same answers, and the file saves back byte for byte. */
    size_t len;
    unsigned char *blob = blob_of(s, &len);
    dedup_mem_source ms;
    dedup_seen *back = NULL;
    assert_int_equal(dedup_roaring_seen_load(dedup_mem_source_init(&ms, blob, len), NULL, &back),
                     DEDUP_OK);
    size_t len2;
    unsigned char *blob2 = blob_of(back, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(blob, blob2, len);
    for (size_t i = 0; i < m.n; i += 7) {
        uint64_t x = m.v[i];
        dedup_batch b = {.n = 1, .ints = &x};
        assert_int_equal(dedup_seen_query(back, &b, v), DEDUP_OK);
        assert_int_equal(v[0], DEDUP_DUPLICATE);
    }
    uint64_t absent = 0;
    while (bsearch(&absent, m.v, m.n, sizeof *m.v, cmp_u64))
        absent++;
    dedup_batch ab = {.n = 1, .ints = &absent};
    assert_int_equal(dedup_seen_query(back, &ab, v), DEDUP_OK);
    assert_int_equal(v[0], DEDUP_NEW);

    /* Delete half; the rest stays. */
    bool removed;
    for (size_t i = 0; i < m.n; i += 2) {
        dedup_batch b = {.n = 1, .ints = &m.v[i]};
        assert_int_equal(dedup_seen_delete(back, &b, &removed), DEDUP_OK);
        assert_true(removed);
        assert_int_equal(dedup_seen_delete(back, &b, &removed), DEDUP_OK);
        assert_false(removed);
    }
    dedup_seen_get_info(back, &in);
    assert_int_equal(in.distinct, m.n / 2);
    free(blob2);
    free(blob);
    dedup_seen_free(back);
    dedup_seen_free(s);
    free(m.v);
    free(m.slot);
    free(m.used);
}

static void test_against_model(void **state)
{
    (void)state;
    uint64_t seed = tu_seed();
    for (int shape = 0; shape < 3; shape++)
        run_input(seed + (uint64_t)shape, shape);
}

static void test_file_and_truncation(void **state)
{
    (void)state;
    dedup_seen *s = make();
    uint64_t ints[3000];
    dedup_verdict v[3000];
    for (size_t i = 0; i < 3000; i++)
        ints[i] = i < 1000 ? i * 3 : i < 2000 ? 100000 + i : (UINT64_C(7) << 40) + i * 977;
    dedup_batch b = {.n = 3000, .ints = ints};
    assert_int_equal(dedup_seen_decide(s, &b, v, NULL), DEDUP_OK);
    char path[] = "/tmp/test_roaring_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_int_equal(dedup_seen_save_file(s, path), DEDUP_OK);
    dedup_seen *back = NULL;
    assert_int_equal(dedup_roaring_seen_load_file(path, NULL, &back), DEDUP_OK);
    uint64_t n;
    bool exact;
    assert_true(dedup_seen_distinct(back, &n, &exact));
    assert_int_equal(n, 3000);
    dedup_seen_free(back);
    FILE *f = fopen(path, "ab");
    fputc('x', f);
    fclose(f);
    assert_int_equal(dedup_roaring_seen_load_file(path, NULL, &back), DEDUP_ERR_TRAILING);
    unlink(path);
    size_t len;
    unsigned char *blob = blob_of(s, &len);
    for (size_t cut = 0; cut < len; cut += 1 + len / 60) {
        dedup_mem_source ms;
        dedup_seen *x = (dedup_seen *)1;
        assert_int_not_equal(
            dedup_roaring_seen_load(dedup_mem_source_init(&ms, blob, cut), NULL, &x), DEDUP_OK);
        assert_null(x);
    }
    free(blob);
    dedup_seen_free(s);
}

/* A container holding one bucket's portable bytes, with a valid checksum:
 * what is left to refuse is the content. */
static dedup_status load_bucket(const unsigned char *pb, size_t plen, uint64_t card, uint32_t hi2)
{
    unsigned char params[16];
    dedup_put_u64(params, card);
    dedup_put_u32(params + 8, hi2 ? 2 : 1);
    dedup_put_u32(params + 12, 0);
    size_t one = 16 + plen, paylen = hi2 ? 2 * one : one;
    unsigned char *pay = malloc(paylen);
    for (size_t k = 0; k < (hi2 ? 2u : 1u); k++) {
        unsigned char *h = pay + k * one;
        dedup_put_u32(h, k ? hi2 : 1);
        dedup_put_u32(h + 4, 0);
        dedup_put_u64(h + 8, plen);
        memcpy(h + 16, pb, plen);
    }
    size_t len;
    unsigned char *c = tu_container(DEDUP_TYPE_ROARING, 0, params, 16, pay, paylen, &len);
    dedup_mem_source ms;
    dedup_seen *s = NULL;
    dedup_status st = dedup_roaring_seen_load(dedup_mem_source_init(&ms, c, len), NULL, &s);
    dedup_seen_free(s);
    free(c);
    free(pay);
    return st;
}

static size_t portable_of(roaring_bitmap_t *bm, unsigned char **out)
{
    size_t n = roaring_bitmap_portable_size_in_bytes(bm);
    *out = malloc(n);
    assert_int_equal(roaring_bitmap_portable_serialize(bm, (char *)*out), n);
    return n;
}

static void test_validator(void **state)
{
    (void)state;
    /* Arrays (a few values), a bitset (5000 values), runs (run_optimize). */
    roaring_bitmap_t *arr = roaring_bitmap_create(), *bits = roaring_bitmap_create(),
                     *runs = roaring_bitmap_create();
    for (uint32_t i = 0; i < 10; i++)
        roaring_bitmap_add(arr, i * 1000 + 7);
    for (uint32_t i = 0; i < 5000; i++)
        roaring_bitmap_add(bits, i * 13);
    for (uint32_t k = 0; k < 5; k++)
        for (uint32_t i = 0; i < 3000; i++)
            roaring_bitmap_add(runs, k * 70000 + i);
    roaring_bitmap_run_optimize(runs);
    unsigned char *pa, *pb, *pr;
    size_t la = portable_of(arr, &pa), lb = portable_of(bits, &pb), lr = portable_of(runs, &pr);
    uint64_t c;
    assert_true(dedup_roaring_portable_valid(pa, la, &c) && c == 10);
    assert_true(dedup_roaring_portable_valid(pb, lb, &c) && c == 5000);
    assert_true(dedup_roaring_portable_valid(pr, lr, &c) && c == 15000);
    assert_int_equal(load_bucket(pa, la, 10, 0), DEDUP_OK);
    assert_int_equal(load_bucket(pr, lr, 15000, 0), DEDUP_OK);
    assert_int_equal(load_bucket(pr, lr, 30000, 9), DEDUP_OK);  /* two buckets */
    assert_int_equal(load_bucket(pr, lr, 30000, 1), DEDUP_ERR_CORRUPT); /* same high bits */
    assert_int_equal(load_bucket(pa, la, 11, 0), DEDUP_ERR_CORRUPT);  /* total */
    /* Every truncation and extension is refused by the validator. */
    for (size_t cut = 0; cut < lr; cut++)
        assert_false(dedup_roaring_portable_valid(pr, cut, NULL));
    unsigned char *longer = calloc(lr + 1, 1);
    memcpy(longer, pr, lr);
    assert_false(dedup_roaring_portable_valid(longer, lr + 1, NULL));
    free(longer);
    /* Arrays out of order (no-run cookie: 8 bytes head, 4 key/card, 4 offset). */
    size_t arr_data = 8 + 4 + 4;
    pa[arr_data] = pa[arr_data + 2], pa[arr_data + 1] = pa[arr_data + 3];
    assert_false(dedup_roaring_portable_valid(pa, la, NULL));
    assert_int_equal(load_bucket(pa, la, 10, 0), DEDUP_ERR_CORRUPT);
    /* A bitset whose popcount disagrees with its cardinality. */
    pb[lb - 1] ^= 0x80;
    assert_false(dedup_roaring_portable_valid(pb, lb, NULL));
    assert_int_equal(load_bucket(pb, lb, 5000, 0), DEDUP_ERR_CORRUPT);
    pb[lb - 1] ^= 0x80;
    /* A wrong offset; a cardinality changed in the header. */
    pb[12] ^= 1;
    assert_false(dedup_roaring_portable_valid(pb, lb, NULL));
    pb[12] ^= 1;
    pb[10] ^= 1;
    assert_false(dedup_roaring_portable_valid(pb, lb, NULL));
    pb[10] ^= 1;
    assert_true(dedup_roaring_portable_valid(pb, lb, NULL));
    /* A run past its chunk: 5 run containers with offsets (cookie 4, flags 1,
     * head 20, offsets 20), then container 0's nruns (2) and its one run,
     * made to start at 1 with length 65536. */
    size_t run0 = 4 + 1 + 20 + 20 + 2;
    pr[run0] = 1;
    pr[run0 + 2] = 0xff;
    pr[run0 + 3] = 0xff;
    assert_false(dedup_roaring_portable_valid(pr, lr, NULL));
    /* An empty no-run bitmap is valid and holds no values; a bad cookie is not. */
    uint64_t zero = 99;
    assert_true(dedup_roaring_portable_valid("\x3a\x30\x00\x00\x00\x00\x00\x00", 8, &zero));
    assert_int_equal(zero, 0);
    assert_false(dedup_roaring_portable_valid("\x00\x00\x00\x00", 4, NULL));
    free(pa);
    free(pb);
    free(pr);
    roaring_bitmap_free(arr);
    roaring_bitmap_free(bits);
    roaring_bitmap_free(runs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_file_and_truncation),
        cmocka_unit_test(test_validator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
