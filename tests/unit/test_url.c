/* test_url.c - canonical URLs (src/key/url.h): the issue's example, every
 * rule of the canonical form with its documented edge cases, the refusals,
 * dropping and sorting of parameters, the length bound on random inputs. */
#include "testutil.h"

#include "url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void canon_wn(const dd_url_opts *o, const char *in, size_t n, const char *want, size_t wn)
{
    unsigned char *out = malloc(n + 1);
    size_t olen = 99;
    dedup_status st = dd_url_canon(o, (const unsigned char *)in, n, out, &olen);
    if (st != DEDUP_OK || olen != wn || memcmp(out, want, olen) != 0)
        fprintf(stderr, "'%s': got %d '%.*s', want '%s'\n", in, (int)st, (int)olen, out, want);
    assert_int_equal(st, DEDUP_OK);
    assert_int_equal(olen, wn);
    assert_memory_equal(out, want, olen);
    if (o) { /* the prepared options (dd_url_opts_prepare) give the same */
        dd_url_opts p = *o;
        dd_url_opts_prepare(&p);
        assert_int_equal(dd_url_canon(&p, (const unsigned char *)in, n, out, &olen), DEDUP_OK);
        assert_int_equal(olen, wn);
        assert_memory_equal(out, want, olen);
    }
    free(out);
}

static void canon_opts(const dd_url_opts *o, const char *in, size_t n, const char *want)
{
    canon_wn(o, in, n, want, strlen(want));
}

static void canon(const char *in, const char *want)
{
    canon_opts(NULL, in, strlen(in), want);
}

static void refused(const char *in)
{
    size_t n = strlen(in), olen = 99;
    unsigned char *out = malloc(n + 1);
    dedup_status st = dd_url_canon(NULL, (const unsigned char *)in, n, out, &olen);
    if (st != DEDUP_ERR_INVALID_ARG)
        fprintf(stderr, "'%s' accepted as '%.*s'\n", in, (int)olen, out);
    assert_int_equal(st, DEDUP_ERR_INVALID_ARG);
    assert_int_equal(olen, 0);
    free(out);
}

static void test_issue_example(void **state)
{
    (void)state;
    const char *drop[] = {"utm_*", "fbclid", "gclid"};
    dd_url_opts o = {.drop = drop, .n_drop = 3, .sort_params = false};
    const char *a = "HTTP://Example.COM:80/a/../b?utm_source=x#top";
    canon_opts(&o, a, strlen(a), "http://example.com/b");
    canon("HTTP://Example.COM:80/a/../b?utm_source=x#top", "http://example.com/b?utm_source=x");
}

static void test_rules(void **state)
{
    (void)state;
    /* scheme and host lower-cased, userinfo kept, trailing dot kept */
    canon("HtTpS://User:PaSS@WWW.Example.ORG./X", "https://User:PaSS@www.example.org./X");
    /* default ports only for their scheme; leading zeros; empty port */
    canon("http://a:80/", "http://a/");
    canon("https://a:443/", "https://a/");
    canon("http://a:443/", "http://a:443/");
    canon("https://a:0080/", "https://a:80/");
    canon("http://a:0080/", "http://a/");
    canon("http://a:/", "http://a/");
    canon("ftp://a:21/", "ftp://a:21/");
    canon("http://a:0/", "http://a:0/");
    /* escapes: hex upper-cased, unreserved decoded, reserved kept, bad kept */
    canon("http://a/%7euser/%2fx/%41%2D%5f%7E/%3a%3A", "http://a/~user/%2Fx/A-_~/%3A%3A");
    canon("http://a/%zz/%4/%/%%41", "http://a/%zz/%4/%/%%41");
    canon("http://a/%4%41/%%41%42/%4%47/%%4A", "http://a/%4%41/%%41B/%4G/%J");
    canon("http://%%41%42.com/", "http://%%41b.com/");
    canon("http://a/a+b%20c", "http://a/a+b%20c");
    canon("http://%41B%2e%63om/", "http://ab.com/");
    canon("http://a/%C3%a9/\xc3\xa9", "http://a/%C3%A9/\xc3\xa9");
    /* dot segments, also escaped ones; empty path */
    canon("http://a", "http://a/");
    canon("http://a?x=1", "http://a/?x=1");
    canon("http://a/b/c/./../../g", "http://a/g");
    canon("http://a/b/./", "http://a/b/");
    canon("http://a/b/.", "http://a/b/");
    canon("http://a/b/..", "http://a/");
    canon("http://a/../../x", "http://a/x");
    canon("http://a/%2E%2e/x/%2e/y", "http://a/x/y");
    canon("http://a/.../..a/a../x", "http://a/.../..a/a../x");
    canon("http://a//x//../y", "http://a//x/y");
    /* IPv6 literals lower-cased, the port after them */
    canon("http://[FE80::A%25Eth0]:8080/", "http://[fe80::a%25eth0]:8080/");
    canon("https://[::FFFF:1.2.3.4]:443", "https://[::ffff:1.2.3.4]/");
    /* fragment and empty query dropped, query kept as it is */
    canon("http://a/p?#f", "http://a/p");
    canon("http://a/p#f?x", "http://a/p");
    canon("http://a/p?b=2&a=1&&#", "http://a/p?b=2&a=1&&");
    /* other bytes kept as they are: NUL, CR, quotes, spaces, >= 0x80 */
    canon_wn(NULL, "http://a/x\0y\r\"z w?q=\0", 21, "http://a/x\0y\r\"z w?q=\0", 21);
    canon("http://B\xc3\x9c" "CHER.de/", "http://b\xc3\x9c" "cher.de/");
}

static void test_refused(void **state)
{
    (void)state;
    refused("");
    refused("example.com/x");
    refused("/x");
    refused("http:/x");
    refused("http:x");
    refused("1http://a/");
    refused("ht tp://a/");
    refused("://a/");
    refused("http:///x");
    refused("http://user@/x");
    refused("http://:80/");
    refused("http://a:8a/");
    refused("http://a:+80/");
    refused("http://a:65536/");
    refused("http://a:80:80/");
    refused("http://[::1/");
    refused("http://[::1]x/");
    canon("http://a:65535/", "http://a:65535/");
}

static void test_params(void **state)
{
    (void)state;
    const char *drop[] = {"utm_*", "fbclid", "?", "x*y*z"};
    dd_url_opts d = {.drop = drop, .n_drop = 4}, s = {.drop = drop, .n_drop = 4, .sort_params = true},
                so = {.drop = NULL, .n_drop = 0, .sort_params = true};
    const char *u = "http://a/?utm_source=1&bb=2&b=2&fbclid=3&a=1&q&&x1y2z=5&xyz&utm%5Fmedium=7&fbclidX=8&ab#f";
    canon_opts(&d, u, strlen(u), "http://a/?bb=2&fbclidX=8&ab");
    canon_opts(&s, u, strlen(u), "http://a/?ab&bb=2&fbclidX=8");
    const char *v = "http://a/?b=2&a=1&a&a=&c=%7e&a=0&bb=1&b=10";
    canon_opts(&so, v, strlen(v), "http://a/?a&a=&a=0&a=1&b=10&b=2&bb=1&c=~");
    const char *w = "http://a/?utm_a=1&utm_b=2";
    canon_opts(&d, w, strlen(w), "http://a/");
    /* the escape rule looks back only at what this URL's form holds (here
     * the path's dot removal leaves a stale '%' where the '?' goes) */
    const char *y = "http://a/../%25?%62b=1";
    canon_opts(&d, y, strlen(y), "http://a/%25?bb=1");
    canon_opts(&so, y, strlen(y), "http://a/%25?bb=1");
    const char *x = "http://a/?=1&%62=1&b";
    canon_opts(&so, x, strlen(x), "http://a/?=1&b&b=1");
    /* too many parameters to sort */
    char big[8 * (DD_URL_MAX_SORT_PARAMS + 1) + 16];
    size_t n = (size_t)sprintf(big, "http://a/?");
    for (int i = 0; i <= DD_URL_MAX_SORT_PARAMS; i++)
        n += (size_t)sprintf(big + n, "%s%d", i ? "&" : "", i % 1000);
    unsigned char *out = malloc(n + 1);
    size_t olen;
    assert_int_equal(dd_url_canon(&so, (unsigned char *)big, n, out, &olen), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dd_url_canon(&d, (unsigned char *)big, n, out, &olen), DEDUP_OK);
    free(out);
}

/* The word-at-a-time paths: a host of every byte that may stand in one
 * (lower-cased byte by byte is the reference), with a '%' at each offset of
 * a word; parameters whose '=', '%' or '&' falls at each offset of a word;
 * a sorted query left as it is when already in order, and reordered when
 * the disorder comes after an ordered prefix. */
static void test_word_runs(void **state)
{
    (void)state;
    char in[512], want[512];
    for (int pct = -1; pct < 24; pct++) {
        size_t n = (size_t)sprintf(in, "http://"), wn = n;
        memcpy(want, in, n);
        for (int c = 1; c < 256; c++) {
            if (strchr("/?#@:[%", c))
                continue;
            if ((int)(n - 7) == pct) {
                memcpy(in + n, "%4A", 3), memcpy(want + wn, "j", 1);
                n += 3, wn += 1;
            }
            in[n++] = (char)c;
            want[wn++] = (char)(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
        }
        want[wn++] = '/';
        canon_wn(NULL, in, n, want, wn);
    }
    const char *drop[] = {"utm_*", "x"};
    dd_url_opts d = {.drop = drop, .n_drop = 2}, s = {.drop = drop, .n_drop = 2, .sort_params = true};
    for (int k = 0; k < 20; k++) {
        char name[32];
        memset(name, 'n', (size_t)k);
        name[k] = 0;
        size_t n = (size_t)sprintf(in, "http://a/?%s=%s%%62&utm_%s=1&x=%s&%sb&%sa=%%7e", name, name, name,
                                   name, name, name);
        sprintf(want, "http://a/?%s=%sb&%sb&%sa=~", name, name, name, name);
        canon_wn(&d, in, n, want, strlen(want));
        sprintf(want, "http://a/?%s=%sb&%sa=~&%sb", name, name, name, name);
        canon_wn(&s, in, n, want, strlen(want));
    }
    const char *sorted = "http://a/?a=1&b=2&b=3&c";
    canon_opts(&s, sorted, strlen(sorted), sorted);
    const char *late = "http://a/?a=1&b=2&d&c&utm_x";
    canon_opts(&s, late, strlen(late), "http://a/?a=1&b=2&c&d");
}

static void test_glob(void **state)
{
    (void)state;
    const unsigned char *n = (const unsigned char *)"utm_source";
    assert_true(dd_url_glob_match("utm_*", n, 10));
    assert_true(dd_url_glob_match("*", n, 10));
    assert_true(dd_url_glob_match("*source", n, 10));
    assert_true(dd_url_glob_match("u?m_*e", n, 10));
    assert_true(dd_url_glob_match("**_**", n, 10));
    assert_false(dd_url_glob_match("utm", n, 10));
    assert_false(dd_url_glob_match("UTM_*", n, 10));
    assert_false(dd_url_glob_match("utm_source?", n, 10));
    assert_true(dd_url_glob_match("", n, 0));
    /* a backslash makes the byte after it literal */
    const unsigned char *lit = (const unsigned char *)"c*?\\";
    assert_true(dd_url_glob_match("c\\*\\?\\\\", lit, 4));
    assert_false(dd_url_glob_match("c\\*", (const unsigned char *)"cx", 2));
    assert_false(dd_url_glob_match("c\\?", (const unsigned char *)"cx", 2));
    assert_true(dd_url_glob_match("c\\**", lit, 4));
    assert_true(dd_url_glob_match("*\\?*", lit, 4));
    assert_false(dd_url_glob_match("*\\?", lit, 4));
    assert_false(dd_url_glob_match("?", n, 0));
}

/* Random byte strings built from URL pieces: never longer than len + 1,
 * never a crash, and canonical forms are fixed points. */
static void test_random_bound(void **state)
{
    (void)state;
    static const char *pieces[] = {"http://", "HTTPS://", "a", "B", ".", "..", "/", "%", "%2e",
                                   "%7E", "?", "&", "=", "#", ":", "80", "@", "[", "]", "\0", "\xff"};
    tu_rng r = {tu_seed()};
    const char *drop[] = {"a*", "?"};
    unsigned char in[256], out[257], again[258];
    for (int it = 0; it < 200000; it++) {
        size_t n = 0;
        size_t k = tu_below(&r, 24);
        if (tu_below(&r, 4))
            memcpy(in, "http://h", 8), n = 8;
        for (size_t j = 0; j < k; j++) {
            const char *p = pieces[tu_below(&r, sizeof pieces / sizeof *pieces)];
            size_t pl = *p ? strlen(p) : 1;
            memcpy(in + n, p, pl);
            n += pl;
        }
        dd_url_opts o = {.drop = drop, .n_drop = tu_below(&r, 3),
                         .sort_params = tu_below(&r, 2) == 1};
        if (tu_below(&r, 2))
            dd_url_opts_prepare(&o);
        size_t olen = 0, olen2 = 0;
        memset(out, 0xAA, sizeof out);
        dedup_status st = dd_url_canon(&o, in, n, out, &olen);
        if (st != DEDUP_OK) {
            assert_int_equal(st, DEDUP_ERR_INVALID_ARG);
            continue;
        }
        assert_true(olen <= n + 1);
        for (size_t j = n + 1; j < sizeof out; j++)
            assert_int_equal(out[j], 0xAA);
        assert_int_equal(dd_url_canon(&o, out, olen, again, &olen2), DEDUP_OK);
        assert_int_equal(olen2, olen);
        assert_memory_equal(again, out, olen);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_issue_example),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_word_runs),
        cmocka_unit_test(test_glob),
        cmocka_unit_test(test_random_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
