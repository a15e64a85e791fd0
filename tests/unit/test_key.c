/* test_key.c - key specs (dedup/key.h): selections, tuples, CSV records and
 * fields, per-record errors, the room a key needs, the allocator hook. */
#include "testutil.h"

#include "dedup/key.h"

#include <stdio.h>
#include <string.h>

static dedup_key *make(dedup_key_format f, const char *fields, const char *header)
{
    dedup_key_params p;
    dedup_key_params_init(&p);
    p.format = f;
    p.fields = fields;
    dedup_key *k = NULL;
    size_t at = 99;
    dedup_status st = dedup_key_create(&p, (const unsigned char *)header,
                                       header ? strlen(header) : 0, NULL, &k, &at);
    assert_int_equal(st, DEDUP_OK);
    return k;
}

/* The key of the string rec, compared with want[0..wl). */
static void key_is(const dedup_key *k, const char *rec, const void *want, size_t wl)
{
    unsigned char out[512];
    const unsigned char *key = NULL;
    size_t klen = 0;
    dedup_status st = dedup_key_of(k, (const unsigned char *)rec, strlen(rec), out, sizeof out,
                                   &key, &klen);
    assert_int_equal(st, DEDUP_OK);
    assert_int_equal(klen, wl);
    assert_memory_equal(key, want, wl);
}

static void test_bad_specs(void **state)
{
    (void)state;
    const char *bad[] = {"0", "3-1", "", "1,,2", "-", "1-2-3", "99999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        dedup_key_params p;
        dedup_key_params_init(&p);
        p.fields = bad[i][0] ? bad[i] : ",";
        dedup_key *k = (dedup_key *)1;
        assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_ERR_INVALID_ARG);
        assert_null(k);
    }
    dedup_key_params p;
    dedup_key_params_init(&p);
    p.fields = "2,user";
    dedup_key *k = NULL;
    size_t at = 0;
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, &at), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(at, 2); /* the name, which needs a header */
    const unsigned char h[] = "id\tname";
    assert_int_equal(dedup_key_create(&p, h, 7, NULL, &k, &at), DEDUP_ERR_NOT_FOUND);
    assert_int_equal(at, 2);
    p.format = DEDUP_KEY_CSV;
    p.delim = '"';
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_ERR_INVALID_ARG);
}

static void test_single_and_whole(void **state)
{
    (void)state;
    dedup_key *k = make(DEDUP_KEY_PLAIN, NULL, NULL);
    assert_true(dedup_key_is_identity(k));
    key_is(k, "a\tb", "a\tb", 3);
    dedup_key_free(k);
    k = make(DEDUP_KEY_PLAIN, "2", NULL);
    assert_false(dedup_key_is_identity(k));
    const char *rec = "a\tbb\tc";
    unsigned char out[16];
    const unsigned char *key;
    size_t klen;
    assert_int_equal(dedup_key_of(k, (const unsigned char *)rec, 6, out, 0, &key, &klen), DEDUP_OK);
    assert_ptr_equal(key, (const unsigned char *)rec + 2); /* a range of the record: no copy */
    assert_int_equal(klen, 2);
    key_is(k, "a", "", 0); /* past the last field: empty, as awk */
    dedup_key_free(k);
}

static void test_tuples(void **state)
{
    (void)state;
    dedup_key *k = make(DEDUP_KEY_PLAIN, "3,1", NULL);
    key_is(k, "a\tb\tcc", "\2\0\0\0cc\1\0\0\0a", 11);
    key_is(k, "a", "\0\0\0\0\1\0\0\0a", 9);
    dedup_key_free(k);
    k = make(DEDUP_KEY_PLAIN, "2-", NULL);
    key_is(k, "a\tb\tc", "\1\0\0\0b\1\0\0\0c", 10);
    key_is(k, "a", "", 0); /* an open range stops at the last field */
    dedup_key_free(k);
    k = make(DEDUP_KEY_PLAIN, "2-3", NULL);
    key_is(k, "a\tb", "\1\0\0\0b\0\0\0\0", 9);
    dedup_key_free(k);
    k = make(DEDUP_KEY_PLAIN, "ad,user", "user\tad\r");
    key_is(k, "u\tx", "\1\0\0\0x\1\0\0\0u", 10);
    dedup_key_free(k);
}

static void test_csv_keys(void **state)
{
    (void)state;
    dedup_key *k = make(DEDUP_KEY_CSV, "1", NULL);
    key_is(k, "\"a,\"\"b\",c\r", "a,\"b", 4);
    key_is(k, "a,c", "a", 1);
    unsigned char out[64];
    const unsigned char *key;
    size_t klen;
    const char *bad[] = {"\"a\"x,c", "\"open", "a,\"b\"c"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dedup_key_of(k, (const unsigned char *)bad[i], strlen(bad[i]), out,
                                      sizeof out, &key, &klen),
                         DEDUP_ERR_CORRUPT);
    }
    dedup_key_free(k);
    k = make(DEDUP_KEY_CSV, NULL, NULL); /* every field */
    key_is(k, "\"a,b\",c", "\3\0\0\0a,b\1\0\0\0c", 12);
    key_is(k, "a,\"b,c\"", "\1\0\0\0a\3\0\0\0b,c", 12);
    key_is(k, "", "", 0); /* an empty record has no field */
    key_is(k, "\r", "", 0);
    dedup_key_free(k);
    k = make(DEDUP_KEY_CSV, "ad", "\"us,er\",\"ad\"");
    key_is(k, "1,\"x\ny\"", "x\ny", 3);
    dedup_key_free(k);
}

static void test_full_and_batch(void **state)
{
    (void)state;
    dedup_key *k = make(DEDUP_KEY_PLAIN, "1,1,1", NULL);
    const unsigned char *rec[3] = {(const unsigned char *)"abcd", (const unsigned char *)"ef",
                                   (const unsigned char *)"g"};
    size_t len[3] = {4, 2, 1};
    unsigned char small[8];
    const unsigned char *key;
    size_t klen;
    assert_int_equal(dedup_key_of(k, rec[0], 4, small, sizeof small, &key, &klen), DEDUP_ERR_FULL);
    assert_true(klen >= 24);
    assert_true(dedup_key_bound(k, 4) >= 24);
    unsigned char arena[40];
    const unsigned char *keys[3];
    size_t klens[3], done, need, used;
    dedup_status st[3];
    assert_int_equal(dedup_key_batch(k, 3, rec, len, arena, sizeof arena, keys, klens, st, &done,
                                     &need, &used),
                     DEDUP_ERR_FULL);
    assert_int_equal(done, 1); /* 24 bytes, then 18 more do not fit in 40 */
    assert_int_equal(used, 24);
    unsigned char arena2[64];
    assert_int_equal(dedup_key_batch(k, 2, rec + 1, len + 1, arena2, sizeof arena2, keys + 1,
                                     klens + 1, st + 1, &done, &need, &used),
                     DEDUP_OK);
    assert_int_equal(done, 2);
    assert_int_equal(klens[1], 18);
    assert_int_equal(klens[2], 15);
    assert_memory_equal(keys[2], "\1\0\0\0g\1\0\0\0g\1\0\0\0g", 15);
    dedup_key_free(k);
}

static void test_normalise(void **state)
{
    (void)state;
    dedup_key_params p;
    dedup_key_params_init(&p);
    p.format = DEDUP_KEY_CSV;
    p.fields = "1,2";
    p.trim = p.squeeze = p.fold_case = true;
    p.prefix = (const unsigned char *)"X"; /* stripped before the case fold */
    p.prefix_len = 1;
    dedup_key *k = NULL;
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
    assert_true(dedup_key_memory_usage(k) > 0);
    key_is(k, "\" XA  B \",Q", "\3\0\0\0a b\1\0\0\0q", 12);
    dedup_key_free(k);
}

static void test_allocator(void **state)
{
    (void)state;
    dedup_key_params p;
    dedup_key_params_init(&p);
    p.fields = "1,3-";
    p.prefix = (const unsigned char *)"pre";
    p.prefix_len = 3;
    for (uint64_t fail = 1;; fail++) {
        tu_failing_alloc fa;
        dedup_allocator a = tu_failing_allocator(&fa, fail);
        dedup_key *k = NULL;
        dedup_status st = dedup_key_create(&p, NULL, 0, &a, &k, NULL);
        if (st == DEDUP_OK) {
            dedup_key_free(k);
            assert_int_equal(fa.live, 0);
            break;
        }
        assert_int_equal(st, DEDUP_ERR_NOMEM);
        assert_null(k);
        assert_int_equal(fa.live, 0);
    }
    dedup_key_free(NULL);
}

static void test_csv_scan(void **state)
{
    (void)state;
    const char *s = "a,\"b\nc\"\n\"\"\"\",x\r\nd\"e,f\n\"g\"h\ni\n\"open\n";
    size_t n = strlen(s);
    size_t ends[16], ne = 0;
    dedup_csv_scan sc;
    dedup_csv_scan_init(&sc);
    size_t last = dedup_csv_scan_block(&sc, (const unsigned char *)s, n, ',', '\n', ends, 16, &ne);
    assert_int_equal(ne, 5);
    size_t want[5] = {8, 16, 22, 27, 29};
    for (int i = 0; i < 5; i++)
        assert_int_equal(ends[i], want[i]);
    assert_int_equal(last, 29);
    assert_false(dedup_csv_scan_at_start(&sc)); /* the quote at the end is open */
    for (size_t cut = 1; cut < n; cut++) { /* any cut in two gives the same ends */
        dedup_csv_scan a;
        dedup_csv_scan_init(&a);
        size_t e1 = dedup_csv_scan_block(&a, (const unsigned char *)s, cut, ',', '\n', NULL, 0, NULL);
        size_t e2 = dedup_csv_scan_block(&a, (const unsigned char *)s + cut, n - cut, ',', '\n',
                                         NULL, 0, NULL);
        assert_int_equal(e2 ? cut + e2 : e1, 29);
    }
}

/* ---- dedup_key_of_next (the record's end and its key in one pass) ----
 * On seeded random CSV streams of hostile records (quotes, doubled quotes,
 * newlines and delimiters inside quotes, text or '\r' after a closing quote,
 * CRLF, empty records, NUL bytes, more fields than the one-pass walk
 * takes), record after record: the end must be the one dedup_csv_scan_block
 * finds and the key (or status) the one dedup_key_of gives for that record,
 * for several selections and delimiters, and with a room too small. */
static size_t rand_csv(tu_rng *r, unsigned char *b, size_t cap, unsigned char d)
{
    static const char *const atoms[] = {"a", "bc", "\"q\"", "\"x,y\"", "\"l\nm\"", "\"\"\"\"",
                                        "\"t\"z", "\"c\"\r", "\r", "", "12", "\"", "u\"v", "\"\"",
                                        "\"d\"\"e\"", "w\r"};
    size_t n = 0, nf = tu_below(r, 8) ? 1 + tu_below(r, 6) : 1 + tu_below(r, 300);
    for (size_t i = 0; i < nf && n + 16 < cap; i++) {
        if (i)
            b[n++] = tu_below(r, 40) ? d : (unsigned char)'\r';
        if (!tu_below(r, 30)) {
            b[n++] = 0;
            continue;
        }
        const char *a = atoms[tu_below(r, sizeof atoms / sizeof atoms[0])];
        for (const char *c = a; *c; c++)
            b[n++] = (unsigned char)(*c == ',' ? d : *c);
    }
    return n;
}

static void test_key_of_next(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x36};
    static const char *const sels[] = {"1,2", "2-", "1,3-4", "3,1", "5,2,200"};
    static const unsigned char delims[] = {',', ';', '\t'};
    static unsigned char buf[1 << 16], out1[1 << 16], out2[1 << 16];
    size_t checked = 0, settled = 0;
    for (int round = 0; round < 300; round++) {
        unsigned char d = delims[tu_below(&r, 3)];
        dedup_key_params p;
        dedup_key_params_init(&p);
        p.format = DEDUP_KEY_CSV;
        p.fields = sels[tu_below(&r, 5)];
        p.delim = d;
        p.trim = tu_below(&r, 4) == 0;
        dedup_key *k = NULL;
        assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
        size_t n = 0;
        for (int i = 0; i < 40; i++) {
            n += rand_csv(&r, buf + n, sizeof buf - n - 2, d);
            buf[n++] = '\n';
        }
        dedup_csv_scan sc;
        dedup_csv_scan_init(&sc);
        size_t ends[64], ne = 0;
        (void)dedup_csv_scan_block(&sc, buf, n, d, '\n', ends, 64, &ne);
        size_t at = 0;
        for (size_t e = 0; e < ne; e++) {
            size_t len = ends[e] - 1 - at, got = 0, kl1 = 0, kl2 = 0;
            size_t cap = tu_below(&r, 10) ? sizeof out1 : tu_below(&r, 8);
            const unsigned char *k1 = NULL, *k2 = NULL;
            dedup_status s1 = dedup_key_of(k, buf + at, len, out1, cap, &k1, &kl1);
            dedup_status s2 = dedup_key_of_next(k, buf + at, n - at, '\n', &got, out2, cap, &k2,
                                                &kl2);
            assert_int_equal(got, len);
            assert_int_equal(s1, s2);
            assert_int_equal(kl1, kl2);
            if (s1 == DEDUP_OK) {
                assert_memory_equal(k1, k2, kl1);
                settled++;
            }
            checked++;
            at = ends[e];
        }
        dedup_key_free(k);
    }
    assert_true(checked > 5000 && settled > 1000);
}

/* The last record end of a block (no all_ends: found from the unquoted
 * stretches the scan remembers) against the last of all the ends, and the
 * state after it, on seeded random streams cut at random places; lines of
 * hundreds of quoted fields make more stretches than the scan remembers. */
static void test_csv_scan_last(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x37};
    static unsigned char buf[1 << 16];
    static size_t ends[1 << 14];
    for (int round = 0; round < 400; round++) {
        size_t n = 0, lines = 1 + tu_below(&r, 30);
        for (size_t i = 0; i < lines; i++) {
            n += rand_csv(&r, buf + n, sizeof buf / 2 - n, ',');
            if (tu_below(&r, 4))
                buf[n++] = '\n';
        }
        size_t cut = tu_below(&r, n + 1);
        dedup_csv_scan a, b;
        dedup_csv_scan_init(&a);
        dedup_csv_scan_init(&b);
        size_t la = 0, lb = 0, ne = 0;
        for (int part = 0; part < 2; part++) {
            size_t from = part ? cut : 0, to = part ? n : cut;
            size_t ea = dedup_csv_scan_block(&a, buf + from, to - from, ',', '\n', NULL, 0, NULL);
            size_t eb = dedup_csv_scan_block(&b, buf + from, to - from, ',', '\n', ends,
                                             sizeof ends / sizeof ends[0], &ne);
            assert_int_equal(ea, eb);
            assert_int_equal(ea, ne ? ends[ne - 1] : 0);
            assert_int_equal(dedup_csv_scan_at_start(&a), dedup_csv_scan_at_start(&b));
            la += ea;
            lb += eb;
        }
        assert_int_equal(la, lb);
    }
}

static void test_json_and_url(void **state)
{
    (void)state;
    dedup_key_params p;
    dedup_key_params_init(&p);
    p.format = DEDUP_KEY_JSON;
    p.json_paths = ".a,.b";
    dedup_key *k = NULL;
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
    key_is(k, "{\"b\":\"x\",\"a\":1}", "\1\0\0\0" "1" "\3\0\0\0\"x\"", 12);
    unsigned char out[64];
    const unsigned char *key;
    size_t klen;
    const char *bad = "{\"a\":1}";
    assert_int_equal(dedup_key_of(k, (const unsigned char *)bad, strlen(bad), out, sizeof out,
                                  &key, &klen),
                     DEDUP_ERR_NOT_FOUND);
    assert_int_equal(dedup_key_of(k, (const unsigned char *)"nope", 4, out, sizeof out, &key, &klen),
                     DEDUP_ERR_CORRUPT);
    dedup_key_free(k);
    /* normalisations apply to the string values, decoded then escaped again */
    p.trim = true;
    p.fold_case = true;
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
    key_is(k, "{\"b\":\" X\\\"\\u0001Y\\t\",\"a\":[\" A\"]}",
           "\6\0\0\0[\" A\"]" "\x0c\0\0\0\"x\\\"\\u0001y\"", 26);
    dedup_key_free(k);
    p.trim = p.fold_case = false;
    p.url = true; /* a value that is not a string is not a URL */
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
    const char *num = "{\"a\":1,\"b\":\"http://h\"}";
    unsigned char big[512];
    assert_int_equal(dedup_key_of(k, (const unsigned char *)num, strlen(num), big, sizeof big,
                                  &key, &klen),
                     DEDUP_ERR_INVALID_ARG);
    const char *two = "{\"a\":\"HTTP://H:80\",\"b\":\"http://x/a/../b\"}";
    key_is(k, two, "\x0b\0\0\0\"http://h/\"" "\x0c\0\0\0\"http://x/b\"", 31);
    dedup_key_free(k);
    p.url = false;

    dedup_key_params_init(&p);
    p.fields = "2";
    p.url = true;
    p.url_drop = "utm_*";
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
    key_is(k, "x\tHTTP://A.com:80/a/../b?utm_source=z#top", "http://a.com/b", 14);
    assert_int_equal(dedup_key_of(k, (const unsigned char *)"x\tnope", 6, out, sizeof out, &key,
                                  &klen),
                     DEDUP_ERR_INVALID_ARG);
    dedup_key_free(k);
    /* the glob list: escapes, and the place of a problem in it */
    static const struct { const char *list; size_t at; } bad_lists[] = {
        {"a,,b", 2}, {",a", 0}, {"a,", 2}, {"a\\b", 1}, {"a\\", 1}, {"", 0},
    };
    for (size_t i = 0; i < sizeof bad_lists / sizeof *bad_lists; i++) {
        size_t at = 99;
        p.url_drop = bad_lists[i].list;
        assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, &at), DEDUP_ERR_INVALID_ARG);
        assert_int_equal(at, bad_lists[i].at);
    }
    p.url_drop = "a\\,b,c\\*";
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
    key_is(k, "x\thttp://h/?a,b=1&a=2&b=3&c*=4&cd=5", "http://h/?a=2&b=3&cd=5", 22);
    dedup_key_free(k);
    p.url_drop = "utm_*";
    p.url = false; /* drop globs need --url */
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_ERR_INVALID_ARG);
}

/* ---- dedup_key_explain: where and what, for messages ---------------------------------- */
static void explains(const dedup_key *k, const char *rec, dedup_status st, const char *what,
                     size_t offset, size_t spec_off, size_t spec_len)
{
    dedup_key_problem pr;
    dedup_key_explain(k, (const unsigned char *)rec, strlen(rec), st, &pr);
    assert_string_equal(pr.what, what);
    assert_int_equal(pr.offset, offset);
    assert_int_equal(pr.spec_off, spec_off);
    assert_int_equal(pr.spec_len, spec_len);
}

static void test_explain(void **state)
{
    (void)state;
    dedup_key *k = make(DEDUP_KEY_CSV, "1,2", NULL);
    explains(k, "a,\"b\"x,c", DEDUP_ERR_CORRUPT, "text after a closing quote", 5, 0, 0);
    explains(k, "a,\"b\"\"x,c\r", DEDUP_ERR_CORRUPT, "a quote left open", 2, 0, 0);
    dedup_key_free(k);

    dedup_key_params p;
    dedup_key_params_init(&p);
    p.format = DEDUP_KEY_JSON;
    p.json_paths = ".a,.\"b,c\".d,.e";
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
    explains(k, "{\"a\":1,\"e\":2}", DEDUP_ERR_NOT_FOUND, "a JSON path missing", SIZE_MAX, 3,
             8);
    explains(k, "{\"a\":1,\"b,c\":{\"d\":3}}", DEDUP_ERR_NOT_FOUND, "a JSON path missing",
             SIZE_MAX, 12, 2);
    explains(k, "{\"a\": tru}", DEDUP_ERR_CORRUPT, "not valid JSON or UTF-8", 6, 0, 0);
    char deep[200];
    memset(deep, '[', 100);
    deep[100] = 0;
    explains(k, deep, DEDUP_ERR_LIMIT, "JSON nested deeper than 64 levels", 64, 0, 0);
    dedup_key_free(k);

    dedup_key_params_init(&p);
    p.url = true;
    assert_int_equal(dedup_key_create(&p, NULL, 0, NULL, &k, NULL), DEDUP_OK);
    explains(k, "nope", DEDUP_ERR_INVALID_ARG, "not an absolute URL with a host", SIZE_MAX, 0, 0);
    dedup_key_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_specs),     cmocka_unit_test(test_single_and_whole),
        cmocka_unit_test(test_tuples),        cmocka_unit_test(test_csv_keys),
        cmocka_unit_test(test_full_and_batch), cmocka_unit_test(test_normalise),
        cmocka_unit_test(test_allocator),     cmocka_unit_test(test_csv_scan),
        cmocka_unit_test(test_json_and_url),
        cmocka_unit_test(test_explain),
        cmocka_unit_test(test_key_of_next),
        cmocka_unit_test(test_csv_scan_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
