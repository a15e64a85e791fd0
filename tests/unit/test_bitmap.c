/* test_bitmap.c - the dense bitset against a naive model (one byte per bit),
 * its file (both params layouts: with and without the origin) and its
 * origin. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/bitmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dedup_bitmap *make(uint64_t nbits, const dedup_allocator *a)
{
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    p.nbits = nbits;
    dedup_bitmap *bm = NULL;
    assert_int_equal(dedup_bitmap_create(&p, a, &bm), DEDUP_OK);
    return bm;
}

static void check_equal(const dedup_bitmap *bm, const unsigned char *model, uint64_t n)
{
    uint64_t pop = 0;
    for (uint64_t i = 0; i < n; i++) {
        bool v = !model[i];
        assert_int_equal(dedup_bitmap_get(bm, i, &v), DEDUP_OK);
        assert_int_equal(v, model[i]);
        pop += model[i];
    }
    assert_int_equal(dedup_bitmap_popcount(bm), pop);
}

static void test_create_errors(void **state)
{
    (void)state;
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    dedup_bitmap *bm = (dedup_bitmap *)1;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &bm), DEDUP_ERR_INVALID_ARG);
    assert_null(bm);
    p.nbits = DEDUP_MAX_BITS + 1;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &bm), DEDUP_ERR_LIMIT);
    assert_int_equal(dedup_bitmap_create(NULL, NULL, &bm), DEDUP_ERR_INVALID_ARG);
    dedup_bitmap_free(NULL);
}

/* Random operations on several sizes, compared with the model after each
 * round; out-of-range indexes change nothing. */
static void test_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    const uint64_t sizes[] = {1, 63, 64, 65, 127, 128, 1000, 4099};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        uint64_t n = sizes[si];
        dedup_bitmap *bm = make(n, NULL);
        assert_int_equal(dedup_bitmap_size(bm), n);
        unsigned char *model = calloc(n, 1);
        assert_non_null(model);
        for (int op = 0; op < 20000; op++) {
            uint64_t i = tu_below(&r, n + 70); /* some out of range */
            bool in = i < n;
            bool v = true;
            switch (tu_below(&r, 4)) {
            case 0:
                assert_int_equal(dedup_bitmap_set(bm, i), in ? DEDUP_OK : DEDUP_ERR_RANGE);
                if (in)
                    model[i] = 1;
                break;
            case 1:
                assert_int_equal(dedup_bitmap_clear(bm, i), in ? DEDUP_OK : DEDUP_ERR_RANGE);
                if (in)
                    model[i] = 0;
                break;
            case 2:
                assert_int_equal(dedup_bitmap_test_and_set(bm, i, &v),
                                 in ? DEDUP_OK : DEDUP_ERR_RANGE);
                assert_int_equal(v, in ? model[i] : 0);
                if (in)
                    model[i] = 1;
                break;
            default:
                assert_int_equal(dedup_bitmap_get(bm, i, &v), in ? DEDUP_OK : DEDUP_ERR_RANGE);
                assert_int_equal(v, in ? model[i] : 0);
            }
        }
        check_equal(bm, model, n);
        /* Far out of range, including the largest index. */
        assert_int_equal(dedup_bitmap_set(bm, UINT64_MAX), DEDUP_ERR_RANGE);
        assert_int_equal(dedup_bitmap_test_and_set(bm, DEDUP_MAX_BITS, NULL), DEDUP_ERR_RANGE);
        check_equal(bm, model, n);
        dedup_bitmap_clear_all(bm);
        assert_int_equal(dedup_bitmap_popcount(bm), 0);
        dedup_bitmap_free(bm);
        free(model);
    }
}

static void test_and_or_xor(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 1};
    const uint64_t n = 1000;
    dedup_bitmap *a = make(n, NULL), *b = make(n, NULL);
    unsigned char ma[1000] = {0}, mb[1000] = {0}, want[1000];
    for (int i = 0; i < 700; i++) {
        uint64_t x = tu_below(&r, n), y = tu_below(&r, n);
        dedup_bitmap_set(a, x);
        ma[x] = 1;
        dedup_bitmap_set(b, y);
        mb[y] = 1;
    }
    dedup_bitmap *c = make(n, NULL);
    assert_int_equal(dedup_bitmap_or(c, a), DEDUP_OK); /* c = a */
    assert_int_equal(dedup_bitmap_and(c, b), DEDUP_OK);
    for (uint64_t i = 0; i < n; i++)
        want[i] = ma[i] & mb[i];
    check_equal(c, want, n);
    dedup_bitmap_clear_all(c);
    dedup_bitmap_or(c, a);
    assert_int_equal(dedup_bitmap_or(c, b), DEDUP_OK);
    for (uint64_t i = 0; i < n; i++)
        want[i] = ma[i] | mb[i];
    check_equal(c, want, n);
    dedup_bitmap_clear_all(c);
    dedup_bitmap_or(c, a);
    assert_int_equal(dedup_bitmap_xor(c, b), DEDUP_OK);
    for (uint64_t i = 0; i < n; i++)
        want[i] = ma[i] ^ mb[i];
    check_equal(c, want, n);
    /* x ^ x = 0, with dst == src. */
    assert_int_equal(dedup_bitmap_xor(c, c), DEDUP_OK);
    assert_int_equal(dedup_bitmap_popcount(c), 0);

    dedup_bitmap *d = make(n + 1, NULL);
    dedup_bitmap_set(d, n);
    assert_int_equal(dedup_bitmap_or(a, d), DEDUP_ERR_INCOMPATIBLE);
    assert_int_equal(dedup_bitmap_and(a, d), DEDUP_ERR_INCOMPATIBLE);
    assert_int_equal(dedup_bitmap_xor(d, a), DEDUP_ERR_INCOMPATIBLE);
    check_equal(a, ma, n); /* unchanged */
    dedup_bitmap_free(a);
    dedup_bitmap_free(b);
    dedup_bitmap_free(c);
    dedup_bitmap_free(d);
}

static void test_large_and_memory(void **state)
{
    (void)state;
    /* Bit indexes at and above 2^32 must not wrap onto low bits.  The
     * 512 MiB are calloc'ed, so untouched pages cost no physical memory. */
    const uint64_t n = (UINT64_C(1) << 32) + 65;
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    p.nbits = n;
    dedup_bitmap *bm = NULL;
    dedup_status s = dedup_bitmap_create(&p, NULL, &bm);
    assert_int_equal(s, DEDUP_OK);
    assert_true(dedup_bitmap_memory_usage(bm) >= n / 8);
    bool v;
    assert_int_equal(dedup_bitmap_test_and_set(bm, n - 1, &v), DEDUP_OK);
    assert_false(v);
    assert_int_equal(dedup_bitmap_set(bm, UINT64_C(1) << 32), DEDUP_OK);
    assert_int_equal(dedup_bitmap_get(bm, 0, &v), DEDUP_OK); /* 2^32 must not alias bit 0 */
    assert_false(v);
    assert_int_equal(dedup_bitmap_get(bm, UINT64_C(1) << 32, &v), DEDUP_OK);
    assert_true(v);
    assert_int_equal(dedup_bitmap_set(bm, n), DEDUP_ERR_RANGE);
    assert_int_equal(dedup_bitmap_popcount(bm), 2);
    dedup_bitmap_free(bm);
}

static unsigned char *save_mem(const dedup_bitmap *bm, size_t *len)
{
    *len = (size_t)dedup_bitmap_serialized_size(bm);
    unsigned char *buf = malloc(*len);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, *len);
    assert_int_equal(dedup_bitmap_save(bm, &sink), DEDUP_OK);
    assert_int_equal(ms.len, *len);
    return buf;
}

static dedup_status load_mem(const unsigned char *buf, size_t len, dedup_bitmap **out)
{
    dedup_mem_source ms;
    return dedup_bitmap_load(dedup_mem_source_init(&ms, buf, len), NULL, out);
}

static void test_save_load(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 2};
    const uint64_t sizes[] = {1, 64, 100, 4096, 100003};
    for (size_t si = 0; si < 5; si++) {
        uint64_t n = sizes[si];
        dedup_bitmap *bm = make(n, NULL);
        for (uint64_t i = 0; i < n / 3 + 1; i++)
            dedup_bitmap_set(bm, tu_below(&r, n));
        size_t len;
        unsigned char *buf = save_mem(bm, &len);
        assert_int_equal(len, 40 + 16 + (n + 63) / 64 * 8 + 8);
        dedup_bitmap *back = NULL;
        assert_int_equal(load_mem(buf, len, &back), DEDUP_OK);
        assert_int_equal(dedup_bitmap_size(back), n);
        for (uint64_t i = 0; i < n; i++) {
            bool x, y;
            dedup_bitmap_get(bm, i, &x);
            dedup_bitmap_get(back, i, &y);
            assert_int_equal(x, y);
        }
        dedup_bitmap_free(back);
        /* Every truncation fails cleanly. */
        for (size_t cut = 0; cut < len; cut += (len > 200 ? len / 97 + 1 : 1)) {
            back = (dedup_bitmap *)1;
            assert_int_not_equal(load_mem(buf, cut, &back), DEDUP_OK);
            assert_null(back);
        }
        free(buf);
        dedup_bitmap_free(bm);
    }
}

/* Hand-built files with bad params, each with a correct checksum so the
 * params check itself is what rejects them. */
static void test_load_rejects(void **state)
{
    (void)state;
    dedup_bitmap *bm = make(100, NULL);
    size_t len;
    unsigned char *good = save_mem(bm, &len);
    dedup_bitmap_free(bm);
    unsigned char *buf = malloc(len + 8);
    assert_non_null(buf);
    struct {
        uint64_t nbits;
        uint64_t payload_len;
        uint64_t last_word;
        dedup_status want;
    } cases[] = {
        {0, 16, 0, DEDUP_ERR_CORRUPT},                      /* zero size */
        {100, 8, 0, DEDUP_ERR_CORRUPT},                     /* payload too short for size */
        {64, 16, 0, DEDUP_ERR_CORRUPT},                     /* payload too long for size */
        {100, 16, UINT64_C(1) << 40, DEDUP_ERR_CORRUPT},    /* bit 104 set beyond size 100 */
        {DEDUP_MAX_BITS + 64, 16, 0, DEDUP_ERR_LIMIT},      /* beyond the limit */
        {100, 16, UINT64_C(1) << 35, DEDUP_OK},             /* bit 99: legal */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        /* header(40) params(8) payload(payload_len) checksum(8) */
        size_t plen = (size_t)cases[c].payload_len;
        size_t n = 40 + 8 + plen;
        memcpy(buf, good, 40);
        dedup_put_u64(buf + 32, cases[c].payload_len);
        dedup_put_u64(buf + 40, cases[c].nbits);
        memset(buf + 48, 0, plen);
        dedup_put_u64(buf + 48 + plen - 8, cases[c].last_word);
        /* Re-checksum with the encoder's algorithm: write through an encoder. */
        unsigned char *out = malloc(n + 8);
        assert_non_null(out);
        dedup_mem_sink ms;
        dedup_sink sink = dedup_mem_sink_init(&ms, out, n + 8);
        dedup_encoder e;
        assert_int_equal(dedup_encoder_begin(&e, sink, DEDUP_TYPE_BITMAP, 0, buf + 40, 8,
                                             cases[c].payload_len), DEDUP_OK);
        assert_int_equal(dedup_encoder_write(&e, buf + 48, plen), DEDUP_OK);
        assert_int_equal(dedup_encoder_end(&e), DEDUP_OK);
        dedup_bitmap *back = NULL;
        assert_int_equal(load_mem(out, ms.len, &back), cases[c].want);
        if (cases[c].want == DEDUP_OK) {
            bool v;
            assert_int_equal(dedup_bitmap_get(back, 99, &v), DEDUP_OK);
            assert_true(v);
            assert_int_equal(dedup_bitmap_popcount(back), 1);
        } else {
            assert_null(back);
        }
        dedup_bitmap_free(back);
        free(out);
    }
    /* A bloom file is not a bitmap. */
    memcpy(buf, good, len);
    buf[10] = DEDUP_TYPE_BLOOM;
    dedup_bitmap *back = NULL;
    assert_int_equal(load_mem(buf, len, &back), DEDUP_ERR_WRONG_TYPE);
    free(buf);
    free(good);
}

/* A file of the first params layout (nbits only), as libdedup wrote it
 * before the origin existed (fuzz/corpus/bloom_load/bitmap_v1_64_valid):
 * 64 bits, bits 0, 7, 14 ... 63 set. */
static const unsigned char v1_file[64] = {
    0x89, 0x44, 0x44, 0x50, 0x0d, 0x0a, 0x1a, 0x0a, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x81, 0x40, 0x20, 0x10, 0x08, 0x04, 0x02, 0x81, 0x48, 0xd7, 0xdb, 0xf4, 0xf7, 0x50, 0x01, 0x0d,
};

/* A bitmap file of the second layout with these params (nbits, origin, and
 * 'extra' bytes more), a correct checksum and a payload of zero words. */
static unsigned char *v2_file(uint64_t nbits, uint64_t origin, size_t extra, size_t *len)
{
    unsigned char params[24] = {0};
    dedup_put_u64(params, nbits);
    dedup_put_u64(params + 8, origin);
    uint64_t words = (nbits + 63) / 64;
    *len = 40 + 16 + extra + (size_t)words * 8 + 8;
    unsigned char *out = malloc(*len);
    assert_non_null(out);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, out, *len);
    dedup_encoder e;
    assert_int_equal(dedup_encoder_begin(&e, sink, DEDUP_TYPE_BITMAP, 0, params,
                                         (uint32_t)(16 + extra), words * 8), DEDUP_OK);
    uint64_t zero = 0;
    for (uint64_t i = 0; i < words; i++)
        assert_int_equal(dedup_encoder_write_u64s(&e, &zero, 1), DEDUP_OK);
    assert_int_equal(dedup_encoder_end(&e), DEDUP_OK);
    assert_int_equal(ms.len, *len);
    return out;
}

static void test_origin(void **state)
{
    (void)state;
    /* Created with an origin, saved in the second layout, loaded back. */
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    assert_int_equal(p.origin, 0);
    p.nbits = 1001;
    p.origin = 1000;
    dedup_bitmap *bm = NULL;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &bm), DEDUP_OK);
    assert_int_equal(dedup_bitmap_origin(bm), 1000);
    dedup_bitmap_set(bm, 0);
    dedup_bitmap_set(bm, 1000);
    size_t len;
    unsigned char *buf = save_mem(bm, &len);
    assert_int_equal(dedup_get_u32(buf + 20), 16); /* params length */
    assert_int_equal(dedup_get_u64(buf + 40), 1001);
    assert_int_equal(dedup_get_u64(buf + 48), 1000);
    dedup_bitmap *back = NULL;
    assert_int_equal(load_mem(buf, len, &back), DEDUP_OK);
    assert_int_equal(dedup_bitmap_origin(back), 1000);
    assert_int_equal(dedup_bitmap_size(back), 1001);
    assert_int_equal(dedup_bitmap_xor(back, bm), DEDUP_OK);
    assert_int_equal(dedup_bitmap_popcount(back), 0);
    dedup_bitmap_free(back);
    free(buf);

    /* Bits of different integers do not combine. */
    dedup_bitmap *zero = make(1001, NULL);
    assert_int_equal(dedup_bitmap_or(zero, bm), DEDUP_ERR_INCOMPATIBLE);
    assert_int_equal(dedup_bitmap_and(bm, zero), DEDUP_ERR_INCOMPATIBLE);
    assert_int_equal(dedup_bitmap_popcount(zero), 0);
    assert_int_equal(dedup_bitmap_popcount(bm), 2);
    dedup_bitmap_free(zero);
    dedup_bitmap_free(bm);

    /* The last integer must fit in 64 bits. */
    p.nbits = 100;
    p.origin = UINT64_MAX - 99;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &bm), DEDUP_OK);
    dedup_bitmap_free(bm);
    p.nbits = 101;
    bm = (dedup_bitmap *)1;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &bm), DEDUP_ERR_INVALID_ARG);
    assert_null(bm);

    /* The first layout still loads, with origin 0, and re-saves in the second. */
    assert_int_equal(load_mem(v1_file, sizeof v1_file, &back), DEDUP_OK);
    assert_int_equal(dedup_bitmap_size(back), 64);
    assert_int_equal(dedup_bitmap_origin(back), 0);
    assert_int_equal(dedup_bitmap_popcount(back), 10);
    for (uint64_t i = 0; i < 64; i++) {
        bool v;
        assert_int_equal(dedup_bitmap_get(back, i, &v), DEDUP_OK);
        assert_int_equal(v, i % 7 == 0);
    }
    buf = save_mem(back, &len);
    assert_int_equal(len, sizeof v1_file + 8);
    dedup_bitmap_free(back);
    free(buf);

    /* Second-layout rejects, each with a correct checksum. */
    buf = v2_file(100, UINT64_MAX - 99, 0, &len);
    assert_int_equal(load_mem(buf, len, &back), DEDUP_OK); /* the last integer is 2^64 - 1 */
    assert_int_equal(dedup_bitmap_origin(back), UINT64_MAX - 99);
    dedup_bitmap_free(back);
    free(buf);
    buf = v2_file(101, UINT64_MAX - 99, 0, &len); /* one past */
    back = (dedup_bitmap *)1;
    assert_int_equal(load_mem(buf, len, &back), DEDUP_ERR_CORRUPT);
    assert_null(back);
    free(buf);
    buf = v2_file(64, 5, 8, &len); /* params of 24 bytes: no such layout */
    assert_int_equal(load_mem(buf, len, &back), DEDUP_ERR_CORRUPT);
    free(buf);
}

static void test_files_and_oom(void **state)
{
    (void)state;
    char path[] = "/tmp/dedup_test_bitmap_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    dedup_bitmap *bm = make(1000, NULL);
    dedup_bitmap_set(bm, 7);
    dedup_bitmap_set(bm, 999);
    assert_int_equal(dedup_bitmap_save_file(bm, path), DEDUP_OK);
    dedup_bitmap *back = NULL;
    assert_int_equal(dedup_bitmap_load_file(path, NULL, &back), DEDUP_OK);
    assert_int_equal(dedup_bitmap_popcount(back), 2);
    dedup_bitmap_free(back);
    /* Trailing garbage is rejected. */
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    fputc('x', f);
    fclose(f);
    assert_int_equal(dedup_bitmap_load_file(path, NULL, &back), DEDUP_ERR_TRAILING);
    assert_null(back);
    assert_int_equal(dedup_bitmap_load_file("/nonexistent/dir/x", NULL, &back), DEDUP_ERR_IO);
    unlink(path);

    /* OOM at every allocation of create and load: an error, no leak. */
    size_t len;
    unsigned char *buf = save_mem(bm, &len);
    for (uint64_t fail = 1; fail < 10; fail++) {
        tu_failing_alloc st;
        dedup_allocator a = tu_failing_allocator(&st, fail);
        dedup_bitmap_params p = {.nbits = 1000};
        dedup_bitmap *x = NULL;
        dedup_status s = dedup_bitmap_create(&p, &a, &x);
        assert_true(s == DEDUP_OK || s == DEDUP_ERR_NOMEM);
        dedup_bitmap_free(x);
        dedup_mem_source ms;
        x = NULL;
        s = dedup_bitmap_load(dedup_mem_source_init(&ms, buf, len), &a, &x);
        assert_true(s == DEDUP_OK || s == DEDUP_ERR_NOMEM);
        if (fail == 1)
            assert_int_equal(s, DEDUP_ERR_NOMEM);
        dedup_bitmap_free(x);
        assert_int_equal(st.live, 0);
    }
    free(buf);
    dedup_bitmap_free(bm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors), cmocka_unit_test(test_model),
        cmocka_unit_test(test_and_or_xor),    cmocka_unit_test(test_large_and_memory),
        cmocka_unit_test(test_save_load),     cmocka_unit_test(test_load_rejects),
        cmocka_unit_test(test_files_and_oom), cmocka_unit_test(test_origin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
