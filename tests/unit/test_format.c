/* test_format.c - the container: encoder/decoder, sinks, sources, files. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/format.h"
#include "dedup/hash.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TYPE 7 /* any allocated type id */
static const unsigned char PARAMS[12] = "params-12byt";

/* A payload of 'n' bytes: 'nw' u64 words followed by raw bytes. */
static size_t encode(unsigned char *buf, size_t cap, const unsigned char *payload, size_t n,
                     const uint64_t *words, size_t nw)
{
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, cap);
    dedup_encoder e;
    assert_int_equal(dedup_encoder_begin(&e, sink, TYPE, UINT64_C(0xABCDEF), PARAMS,
                                         sizeof PARAMS, nw * 8 + n), DEDUP_OK);
    assert_int_equal(dedup_encoder_write_u64s(&e, words, nw), DEDUP_OK);
    assert_int_equal(dedup_encoder_write(&e, payload, n), DEDUP_OK);
    assert_int_equal(dedup_encoder_end(&e), DEDUP_OK);
    return ms.len;
}

/* Decodes a whole container of type TYPE; on success checks its content. */
static dedup_status decode(const unsigned char *buf, size_t len, const unsigned char *payload,
                           size_t n, const uint64_t *words, size_t nw)
{
    dedup_mem_source ms;
    dedup_decoder d;
    dedup_status s = dedup_decoder_begin(&d, dedup_mem_source_init(&ms, buf, len), TYPE);
    if (s)
        return s;
    if (d.header.params_len != sizeof PARAMS || d.header.payload_len != nw * 8 + n)
        return DEDUP_ERR_CORRUPT;
    uint64_t w[16];
    unsigned char p[256];
    s = dedup_decoder_read_u64s(&d, w, nw);
    if (!s)
        s = dedup_decoder_read(&d, p, n);
    if (!s)
        s = dedup_decoder_end(&d);
    if (!s) {
        assert_memory_equal(d.params, PARAMS, sizeof PARAMS);
        assert_int_equal(d.header.seed, UINT64_C(0xABCDEF));
        assert_int_equal(d.header.type, TYPE);
        assert_memory_equal(w, words, nw * 8);
        assert_memory_equal(p, payload, n);
    }
    return s;
}

static const uint64_t WORDS[3] = {UINT64_C(0x0102030405060708), 0, UINT64_MAX};
static unsigned char PAY[100];

static void test_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof PAY; i++)
        PAY[i] = (unsigned char)(i * 7);
    unsigned char buf[512];
    size_t len = encode(buf, sizeof buf, PAY, 100, WORDS, 3);
    assert_int_equal(len, 40 + 12 + 24 + 100 + 8);
    /* Header fields at their documented offsets, little-endian. */
    static const unsigned char magic[8] = {0x89, 'D', 'D', 'P', '\r', '\n', 0x1A, '\n'};
    assert_memory_equal(buf, magic, 8);
    assert_int_equal(buf[8] | buf[9] << 8, DEDUP_FORMAT_VERSION);
    assert_int_equal(buf[10] | buf[11] << 8, TYPE);
    assert_int_equal(dedup_get_u32(buf + 12), 0);
    assert_int_equal(dedup_get_u32(buf + 16), DEDUP_HASH_XXH3_128);
    assert_int_equal(dedup_get_u32(buf + 20), 12);
    assert_int_equal(dedup_get_u64(buf + 24), UINT64_C(0xABCDEF));
    assert_int_equal(dedup_get_u64(buf + 32), 124);
    assert_int_equal(buf[52], 0x08); /* first word, little-endian */
    assert_int_equal(buf[59], 0x01);
    assert_int_equal(decode(buf, len, PAY, 100, WORDS, 3), DEDUP_OK);
    /* Counting sink agrees. */
    uint64_t count;
    dedup_sink cs = dedup_count_sink_init(&count);
    dedup_encoder e;
    assert_int_equal(dedup_encoder_begin(&e, cs, TYPE, 0, PARAMS, 12, 5), DEDUP_OK);
    assert_int_equal(dedup_encoder_write(&e, PAY, 5), DEDUP_OK);
    assert_int_equal(dedup_encoder_end(&e), DEDUP_OK);
    assert_int_equal(count, 40 + 12 + 5 + 8);
    /* f64 helpers keep the bit pattern. */
    unsigned char f[8];
    dedup_put_f64(f, 0.001);
    assert_true(dedup_get_f64(f) == 0.001);
}

static void test_truncation(void **state)
{
    (void)state;
    unsigned char buf[512];
    size_t len = encode(buf, sizeof buf, PAY, 100, WORDS, 3);
    for (size_t cut = 0; cut < len; cut++) {
        dedup_status s = decode(buf, cut, PAY, 100, WORDS, 3);
        assert_int_equal(s, DEDUP_ERR_TRUNCATED);
    }
}

static void test_bit_flips(void **state)
{
    (void)state;
    unsigned char buf[512];
    size_t len = encode(buf, sizeof buf, PAY, 100, WORDS, 3);
    for (size_t byte = 0; byte < len; byte++)
        for (int bit = 0; bit < 8; bit++) {
            buf[byte] ^= (unsigned char)(1u << bit);
            dedup_status s = decode(buf, len, PAY, 100, WORDS, 3);
            buf[byte] ^= (unsigned char)(1u << bit);
            assert_int_not_equal(s, DEDUP_OK);
            if (byte >= 40)
                assert_int_equal(s, DEDUP_ERR_CHECKSUM);
            else if (byte < 8)
                assert_int_equal(s, DEDUP_ERR_BAD_MAGIC);
            else if (byte < 10)
                assert_int_equal(s, DEDUP_ERR_VERSION);
            else if (byte < 12)
                assert_int_equal(s, DEDUP_ERR_WRONG_TYPE);
            else if (byte < 24)
                assert_true(s == DEDUP_ERR_CORRUPT || s == DEDUP_ERR_TRUNCATED);
            else if (byte < 32)
                assert_int_equal(s, DEDUP_ERR_CHECKSUM); /* seed */
            else /* payload length */
                assert_true(s == DEDUP_ERR_TRUNCATED || s == DEDUP_ERR_CORRUPT);
        }
}

static void put_and_check(size_t off, uint64_t v, int width, dedup_status want)
{
    unsigned char buf[512];
    size_t len = encode(buf, sizeof buf, PAY, 100, WORDS, 3);
    if (width == 2) {
        buf[off] = (unsigned char)v;
        buf[off + 1] = (unsigned char)(v >> 8);
    } else if (width == 4)
        dedup_put_u32(buf + off, (uint32_t)v);
    else
        dedup_put_u64(buf + off, v);
    assert_int_equal(decode(buf, len, PAY, 100, WORDS, 3), want);
}

static void test_header_fields(void **state)
{
    (void)state;
    put_and_check(8, 2, 2, DEDUP_ERR_VERSION);
    put_and_check(8, 0, 2, DEDUP_ERR_VERSION);
    put_and_check(10, 8, 2, DEDUP_ERR_WRONG_TYPE);
    put_and_check(12, 1, 4, DEDUP_ERR_CORRUPT);          /* reserved flag */
    put_and_check(12, 0x80000000u, 4, DEDUP_ERR_CORRUPT);
    put_and_check(16, 2, 4, DEDUP_ERR_CORRUPT);          /* unknown hash id */
    put_and_check(20, DEDUP_MAX_PARAMS_LEN + 1, 4, DEDUP_ERR_CORRUPT);
    put_and_check(20, 1000, 4, DEDUP_ERR_TRUNCATED);     /* params longer than the data */
    put_and_check(32, UINT64_MAX, 8, DEDUP_ERR_TRUNCATED); /* payload length lies */
    put_and_check(32, 1u << 20, 8, DEDUP_ERR_TRUNCATED);
    put_and_check(32, 123, 8, DEDUP_ERR_CORRUPT);        /* shorter than what we read */
    put_and_check(0, 0, 8, DEDUP_ERR_BAD_MAGIC);
    /* The decoder without an expected type accepts any type. */
    unsigned char buf[512];
    size_t len = encode(buf, sizeof buf, PAY, 10, WORDS, 0);
    dedup_mem_source ms;
    dedup_decoder d;
    assert_int_equal(dedup_decoder_begin(&d, dedup_mem_source_init(&ms, buf, len), 0), DEDUP_OK);
    /* Reading past the declared payload is refused. */
    unsigned char tmp[20];
    assert_int_equal(dedup_decoder_read(&d, tmp, 11), DEDUP_ERR_CORRUPT);
    /* Ending before the payload is consumed is refused. */
    assert_int_equal(dedup_decoder_begin(&d, dedup_mem_source_init(&ms, buf, len), 0), DEDUP_OK);
    assert_int_equal(dedup_decoder_read(&d, tmp, 5), DEDUP_OK);
    assert_int_equal(dedup_decoder_end(&d), DEDUP_ERR_CORRUPT);
}

static void test_encoder_misuse_and_full(void **state)
{
    (void)state;
    unsigned char buf[512];
    /* Every sink capacity short of the full size gives FULL, never more
     * bytes than the capacity. */
    size_t full = encode(buf, sizeof buf, PAY, 100, WORDS, 3);
    for (size_t cap = 0; cap < full; cap++) {
        unsigned char out[512];
        memset(out, 0xEE, sizeof out);
        dedup_mem_sink ms;
        dedup_sink sink = dedup_mem_sink_init(&ms, out, cap);
        dedup_encoder e;
        dedup_status s = dedup_encoder_begin(&e, sink, TYPE, 1, PARAMS, 12, 124);
        if (!s)
            s = dedup_encoder_write_u64s(&e, WORDS, 3);
        if (!s)
            s = dedup_encoder_write(&e, PAY, 100);
        if (!s)
            s = dedup_encoder_end(&e);
        assert_int_equal(s, DEDUP_ERR_FULL);
        assert_true(ms.len <= cap);
        for (size_t i = cap; i < sizeof out; i++)
            assert_int_equal(out[i], 0xEE);
    }
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, sizeof buf);
    dedup_encoder e;
    assert_int_equal(dedup_encoder_begin(&e, sink, TYPE, 1, PARAMS, DEDUP_MAX_PARAMS_LEN + 1, 0),
                     DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_encoder_begin(&e, sink, TYPE, 1, NULL, 4, 0), DEDUP_ERR_INVALID_ARG);
    /* More payload than declared, or less, is refused. */
    assert_int_equal(dedup_encoder_begin(&e, sink, TYPE, 1, PARAMS, 12, 4), DEDUP_OK);
    assert_int_equal(dedup_encoder_write(&e, PAY, 5), DEDUP_ERR_INVALID_ARG);
    sink = dedup_mem_sink_init(&ms, buf, sizeof buf);
    assert_int_equal(dedup_encoder_begin(&e, sink, TYPE, 1, PARAMS, 12, 4), DEDUP_OK);
    assert_int_equal(dedup_encoder_write(&e, PAY, 3), DEDUP_OK);
    assert_int_equal(dedup_encoder_end(&e), DEDUP_ERR_INVALID_ARG);
}

/* ---- files ---- */

static char dir[64];

static size_t count_entries(void)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

typedef struct blob { const unsigned char *p; size_t n; int fail_after; } blob;

static dedup_status write_blob(const void *obj, dedup_sink *sink)
{
    const blob *b = obj;
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, TYPE, UINT64_C(0xABCDEF), PARAMS, 12, b->n);
    if (s)
        return s;
    for (size_t i = 0; i < b->n; i++) {
        if (b->fail_after >= 0 && (int)i == b->fail_after)
            return DEDUP_ERR_CANCELLED;
        s = dedup_encoder_write(&e, b->p + i, 1);
        if (s)
            return s;
    }
    return dedup_encoder_end(&e);
}

static dedup_status read_file(const char *path, unsigned char *out, size_t n)
{
    dedup_file_source f;
    dedup_source src;
    dedup_status s = dedup_file_source_open(&f, path, &src);
    if (s)
        return s;
    dedup_decoder d;
    s = dedup_decoder_begin(&d, src, TYPE);
    if (!s && d.header.payload_len != n)
        s = DEDUP_ERR_CORRUPT;
    if (!s)
        s = dedup_decoder_read(&d, out, n);
    if (!s)
        s = dedup_decoder_end(&d);
    dedup_file_source_close(&f);
    return s;
}

static void test_save_file_atomic(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/dedup_test_format_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/f.ddp", dir);
    static unsigned char big[200000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 13 + (i >> 8));
    blob good = {big, sizeof big, -1};
    assert_int_equal(dedup_save_file(path, write_blob, &good), DEDUP_OK);
    static unsigned char back[200000];
    assert_int_equal(read_file(path, back, sizeof back), DEDUP_OK);
    assert_memory_equal(back, big, sizeof big);

    /* A save that fails half-way leaves the old file and no temporary. */
    blob bad = {PAY, 100, 50};
    assert_int_equal(dedup_save_file(path, write_blob, &bad), DEDUP_ERR_CANCELLED);
    assert_int_equal(count_entries(), 1);
    assert_int_equal(read_file(path, back, sizeof back), DEDUP_OK);
    assert_memory_equal(back, big, sizeof big);

    /* A save into a missing directory fails with IO and errno. */
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/dir/f", dir);
    errno = 0;
    assert_int_equal(dedup_save_file(missing, write_blob, &good), DEDUP_ERR_IO);
    assert_int_equal(errno, ENOENT);

    /* Peek reads only the header. */
    dedup_header h;
    assert_int_equal(dedup_peek_file(path, &h), DEDUP_OK);
    assert_int_equal(h.type, TYPE);
    assert_int_equal(h.payload_len, sizeof big);

    /* A truncated file is TRUNCATED at every length through the file source. */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 40 + 12 + 1000), 0);
    fclose(f);
    assert_int_equal(read_file(path, back, sizeof back), DEDUP_ERR_TRUNCATED);
    assert_int_equal(dedup_file_source_open(&(dedup_file_source){0}, dir, &(dedup_source){0}),
                     DEDUP_ERR_IO); /* a directory */
    unlink(path);
    assert_int_equal(read_file(path, back, sizeof back), DEDUP_ERR_IO);
    rmdir(dir);
}

/* The named temporary (the fallback without O_TMPFILE) is created, never
 * opened through a link or over a file: a link planted at its name cannot
 * make a save write into the link's target. */
static void test_named_temporary_exclusive(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/dedup_test_format_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char victim[160], tmp[160];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(tmp, sizeof tmp, "%s/f.ddp.tmp.%ld", dir, (long)getpid());
    FILE *f = fopen(victim, "wb");
    assert_non_null(f);
    fputs("precious", f);
    fclose(f);
    assert_int_equal(symlink(victim, tmp), 0);
    int fd = ddi_open_named_temporary(tmp);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
    struct stat st;
    assert_int_equal(lstat(tmp, &st), 0);
    assert_true(S_ISREG(st.st_mode)); /* a new file, not the link */
    assert_int_equal(st.st_size, 1);
    assert_int_equal(stat(victim, &st), 0);
    assert_int_equal(st.st_size, 8); /* the target untouched */
    unlink(tmp);
    unlink(victim);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_header_fields),
        cmocka_unit_test(test_encoder_misuse_and_full),
        cmocka_unit_test(test_save_file_atomic),
        cmocka_unit_test(test_named_temporary_exclusive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
