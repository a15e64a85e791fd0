/* test_json.c - JSON Lines path values (src/key/json.h): path specs, the
 * canonical text of every kind of value, last-wins names, the refusals
 * (invalid JSON and UTF-8, surrogates, depth), the FULL retry, and random
 * objects whose members are shuffled giving one canonical text. */
#include "testutil.h"

#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dd_json_paths *compile(const char *spec)
{
    dd_json_paths *p = NULL;
    size_t ep = 0;
    dedup_status st = dd_json_paths_compile(spec, NULL, &p, &ep);
    if (st != DEDUP_OK)
        fprintf(stderr, "spec '%s' refused at %zu\n", spec, ep);
    assert_int_equal(st, DEDUP_OK);
    return p;
}

/* The values of 'spec' in 'line' joined with '|' into 'got'. */
static dedup_status extract(const char *spec, const char *line, size_t n, char *got)
{
    dd_json_paths *p = compile(spec);
    unsigned char out[4096];
    size_t olen = 0, bp = 99, bpos = 99;
    dedup_status st = dd_json_extract(p, (const unsigned char *)line, n, out, sizeof out, &olen,
                                      &bp, &bpos);
    got[0] = 0;
    if (st == DEDUP_OK) {
        size_t g = 0;
        for (size_t i = 0; i < olen;) {
            size_t L = out[i] | (size_t)out[i + 1] << 8 | (size_t)out[i + 2] << 16 |
                       (size_t)out[i + 3] << 24;
            if (i)
                got[g++] = '|';
            memcpy(got + g, out + i + 4, L);
            g += L;
            i += 4 + L;
        }
        got[g] = 0;
    } else if (st == DEDUP_ERR_NOT_FOUND) {
        sprintf(got, "missing %zu", bp);
    } else {
        sprintf(got, "at %zu", bpos);
    }
    dd_json_paths_free(p);
    return st;
}

static void ok(const char *spec, const char *line, const char *want)
{
    char got[4096];
    dedup_status st = extract(spec, line, strlen(line), got);
    if (st != DEDUP_OK || strcmp(got, want) != 0)
        fprintf(stderr, "%s on '%s': %d '%s', want '%s'\n", spec, line, (int)st, got, want);
    assert_int_equal(st, DEDUP_OK);
    assert_string_equal(got, want);
}

static void err(const char *spec, const char *line, size_t n, dedup_status want, const char *where)
{
    char got[4096];
    dedup_status st = extract(spec, line, n, got);
    if (st != want || strcmp(got, where) != 0)
        fprintf(stderr, "%s on '%s': %d '%s', want %d '%s'\n", spec, line, (int)st, got, (int)want,
                where);
    assert_int_equal(st, want);
    assert_string_equal(got, where);
}

static void test_paths(void **state)
{
    (void)state;
    const char *line = "{\"user\":{\"id\":7,\"n\":\"x\"},\"ad\":\"a3\",\"items\":[{\"sku\":\"s1\"},{\"sku\":2}],"
                       "\"a.b\":1,\"\xc3\xa9\":true,\"\":0}";
    ok(".user.id,.ad", line, "7|\"a3\"");
    ok(".ad,.user.id", line, "\"a3\"|7");
    ok(".items[0].sku,.items[1].sku,.items[1]", line, "\"s1\"|2|{\"sku\":2}");
    ok(".\"a.b\",.\"\\u00e9\",.\xc3\xa9,.\"\"", line, "1|true|true|0");
    ok(".user", line, "{\"id\":7,\"n\":\"x\"}");
    ok(".ad,.ad", line, "\"a3\"|\"a3\"");
    ok(".", "[1, 2]", "[1,2]");
    ok(".[1]", " [1 ,\t2 ]\r", "2");
    err(".user.id,.nope", line, strlen(line), DEDUP_ERR_NOT_FOUND, "missing 1");
    err(".items[2]", line, strlen(line), DEDUP_ERR_NOT_FOUND, "missing 0");
    err(".ad.x", line, strlen(line), DEDUP_ERR_NOT_FOUND, "missing 0");
    err(".user[0]", line, strlen(line), DEDUP_ERR_NOT_FOUND, "missing 0");
    err(".a", "[{\"a\":1}]", 9, DEDUP_ERR_NOT_FOUND, "missing 0");

    static const char *bad[] = {"", "user", ".a,", ".a.", ".a..b", ".a[", ".a[x]", ".a[-1]",
                                ".a]", ".\"a", ".\"\\x\"", ".a\"b\"", ".a,user",
                                ".[99999999999999999999999999]"};
    static const size_t at[] = {0, 0, 3, 3, 3, 2, 2, 2, 2, 1, 1, 2, 3, 1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        dd_json_paths *p = (dd_json_paths *)1;
        size_t ep = 999;
        dedup_status st = dd_json_paths_compile(bad[i], NULL, &p, &ep);
        if (st != DEDUP_ERR_INVALID_ARG || ep != at[i])
            fprintf(stderr, "spec '%s': %d at %zu, want refusal at %zu\n", bad[i], (int)st, ep, at[i]);
        assert_int_equal(st, DEDUP_ERR_INVALID_ARG);
        assert_int_equal(ep, at[i]);
        assert_null(p);
    }
    char many[4 * DD_JSON_MAX_PATHS + 8] = "";
    for (int i = 0; i <= DD_JSON_MAX_PATHS; i++)
        strcat(many, i ? ",.a" : ".a");
    dd_json_paths *p = NULL;
    size_t ep;
    assert_int_equal(dd_json_paths_compile(many, NULL, &p, &ep), DEDUP_ERR_INVALID_ARG);
    many[strlen(many) - 3] = 0;
    assert_int_equal(dd_json_paths_compile(many, NULL, &p, &ep), DEDUP_OK);
    assert_int_equal(dd_json_paths_count(p), DD_JSON_MAX_PATHS);
    dd_json_paths_free(p);
    dd_json_paths_free(NULL);
    /* DD_JSON_MAX_DEPTH components reach the deepest value; one more is
     * refused where it starts */
    char deep[8 * DD_JSON_MAX_DEPTH + 8] = "", doc[8 * DD_JSON_MAX_DEPTH + 8] = "";
    size_t n = 0;
    for (int i = 0; i < DD_JSON_MAX_DEPTH; i++) {
        strcat(deep, i % 2 ? "[0]" : ".k");
        n += (size_t)sprintf(doc + n, "%s", i % 2 ? "[" : "{\"k\":");
    }
    n += (size_t)sprintf(doc + n, "7");
    for (int i = DD_JSON_MAX_DEPTH - 1; i >= 0; i--)
        doc[n++] = i % 2 ? ']' : '}';
    doc[n] = 0;
    ok(deep, doc, "7");
    size_t cut = strlen(deep);
    strcat(deep, ".k");
    assert_int_equal(dd_json_paths_compile(deep, NULL, &p, &ep), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(ep, cut + 1);
}

static void test_canonical(void **state)
{
    (void)state;
    /* strings: one escaping */
    ok(".", "\"\\u00e9\\u00E9\xc3\xa9\\/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001F\\u007f\\ud83d\\ude00\"",
       "\"\xc3\xa9\xc3\xa9\xc3\xa9/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xf0\x9f\x98\x80\"");
    /* numbers by value */
    ok(".", "[1, 1.0, 1e0, 10e-1, 0.1e1, 100, 1E2, 1e+2, 1.5, 0.001, -0, -0.0e5, 0]",
       "[1,1,1,1,1,100,100,100,1.5e0,1e-3,0,0,0]");
    ok(".", "[1e21, 1e22, 123456789012345678901234567890, 12.34e-5, -7, 2.50e-10, 1e-400]",
       "[1000000000000000000000,1e22,123456789012345678901234567890,1.234e-4,-7,2.5e-10,1e-400]");
    ok(".", "[1e1000000000000000000, -9.9E-1000000000000000000]",
       "[1e1000000000000000000,-9.9e-1000000000000000000]");
    err(".", "1e1000000000000000001", 21, DEDUP_ERR_LIMIT, "at 99");
    /* 1 and "1" differ; literals */
    ok(".", "[1,\"1\",true,false,null]", "[1,\"1\",true,false,null]");
    /* objects sorted, nested; last repeated name wins */
    ok(".", "{\"b\":1,\"a\":{\"d\":[{\"z\":1,\"y\":2}],\"c\":3},\"\":0}",
       "{\"\":0,\"a\":{\"c\":3,\"d\":[{\"y\":2,\"z\":1}]},\"b\":1}");
    ok(".", "{\"a\":1,\"b\":2,\"a\":3,\"a\":{\"x\":1,\"x\":2}}", "{\"a\":{\"x\":2},\"b\":2}");
    ok(".a", "{\"a\":1,\"a\":2}", "2");
    err(".a.b", "{\"a\":{\"b\":1},\"a\":{}}", 20, DEDUP_ERR_NOT_FOUND, "missing 0");
    ok(".a.b", "{\"a\":{},\"a\":{\"b\":1}}", "1");
    /* names sorted by their canonical text, shorter prefix first */
    ok(".", "{\"ab\":1,\"a\":2,\"a!\":3,\"\\u0001\":4,\"\\\"\":5}",
       "{\"\\\"\":5,\"\\u0001\":4,\"a\":2,\"a!\":3,\"ab\":1}");
}

static void test_refused(void **state)
{
    (void)state;
    static const struct { const char *line; size_t at; } bad[] = {
        {"", 0}, {" ", 1}, {"{", 1}, {"{\"a\"}", 4}, {"{\"a\":}", 5}, {"{\"a\":1,}", 7},
        {"[1,]", 3}, {"[1 2]", 3}, {"01", 1}, {"1.", 2}, {".5", 0}, {"-", 1}, {"1e", 2},
        {"NaN", 0}, {"Infinity", 0}, {"tru", 0}, {"nul", 0}, {"\"abc", 4}, {"\"a\tb\"", 2},
        {"\"\\x\"", 1}, {"\"\\u12\"", 1}, {"\"\\ud800\"", 1}, {"\"\\udc00\\ud800\"", 1},
        {"\"\\ud800\\u0041\"", 1}, {"\"\xff\"", 1}, {"\"\xc0\xaf\"", 1}, {"\"\xed\xa0\x80\"", 1},
        {"\"\xf4\x90\x80\x80\"", 1}, {"\"\xe2\x82\"", 1}, {"\xef\xbb\xbf{}", 0}, {"{} {}", 3},
        {"{}x", 2}, {"[1]]", 3}, {"{\"a\":1]", 6}, {"\"\\", 2}, {"{1:2}", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char where[32];
        sprintf(where, "at %zu", bad[i].at);
        err(".", bad[i].line, strlen(bad[i].line), DEDUP_ERR_CORRUPT, where);
    }
    err(".", "[\"a\0b\"]", 7, DEDUP_ERR_CORRUPT, "at 3");
    err(".", "[1,\0]", 5, DEDUP_ERR_CORRUPT, "at 3");
    /* the whole line is checked, also past the values found */
    err(".a", "{\"a\":1,\"b\":\"\\ud800\"}", 19, DEDUP_ERR_CORRUPT, "at 12");
    ok(".", "\"\\uD83D\\uDE00\xf4\x8f\xbf\xbf\"", "\"\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"");
}

static void test_depth(void **state)
{
    (void)state;
    char line[2 * DD_JSON_MAX_DEPTH + 16], want[2 * DD_JSON_MAX_DEPTH + 16];
    size_t n = 0;
    for (int i = 0; i < DD_JSON_MAX_DEPTH; i++)
        line[n++] = '[';
    for (int i = 0; i < DD_JSON_MAX_DEPTH; i++)
        line[n++] = ']';
    line[n] = 0;
    ok(".", line, line);
    memcpy(want, line, n + 1);
    /* one more level: refused at its bracket, whatever follows */
    memmove(line + 1, line, n + 1);
    line[0] = '[';
    line[n + 1] = ']';
    line[n + 2] = 0;
    char where[32];
    sprintf(where, "at %d", DD_JSON_MAX_DEPTH);
    err(".a", line, n + 2, DEDUP_ERR_LIMIT, where);
    /* a long run of brackets: no crash, LIMIT */
    size_t big = 1 << 20;
    char *deep = malloc(big);
    memset(deep, '{', big);
    dd_json_paths *p = compile(".");
    unsigned char out[64];
    size_t olen, bp, bpos;
    assert_int_equal(dd_json_extract(p, (unsigned char *)deep, big, out, sizeof out, &olen, &bp, &bpos),
                     DEDUP_ERR_CORRUPT); /* '{' then '{' is not a name */
    memset(deep, '[', big);
    assert_int_equal(dd_json_extract(p, (unsigned char *)deep, big, out, sizeof out, &olen, &bp, &bpos),
                     DEDUP_ERR_LIMIT);
    assert_int_equal(bpos, DD_JSON_MAX_DEPTH);
    dd_json_paths_free(p);
    free(deep);
}

/* Too small a buffer: FULL with a size that is enough; with it the same
 * bytes as with a large buffer; on every size in between, FULL or those. */
static void test_full(void **state)
{
    (void)state;
    const char *line = "{\"x\":[1e21,{\"b\":1,\"a\":2,\"b\":3,\"c\":{\"z\":[],\"y\":\"\\u00e9\"}}],"
                       "\"id\":1.50}";
    dd_json_paths *p = compile(".x,.id,.");
    unsigned char ref[1024], out[1024];
    size_t rlen, olen, bp, bpos;
    assert_int_equal(dd_json_extract(p, (const unsigned char *)line, strlen(line), ref, sizeof ref,
                                     &rlen, &bp, &bpos), DEDUP_OK);
    for (size_t cap = 0; cap < rlen; cap++) {
        memset(out, 0xAA, sizeof out);
        dedup_status st = dd_json_extract(p, (const unsigned char *)line, strlen(line), out, cap,
                                          &olen, &bp, &bpos);
        assert_int_equal(st, DEDUP_ERR_FULL);
        assert_true(olen >= rlen);
        for (size_t i = cap; i < sizeof out; i++)
            assert_int_equal(out[i], 0xAA); /* nothing past cap */
        assert_int_equal(dd_json_extract(p, (const unsigned char *)line, strlen(line), out, olen,
                                         &olen, &bp, &bpos), DEDUP_OK);
        assert_int_equal(olen, rlen);
        assert_memory_equal(out, ref, rlen);
    }
    dd_json_paths_free(p);
}

/* Random flat objects written with their members in two random orders
 * (and random escapes of the names) have one canonical text; changing one
 * value changes it. */
static void test_shuffled(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    dd_json_paths *p = compile(".");
    static const char *names[] = {"a", "b", "ab", "ba", "", "\\u00e9", "\xc3\xa9x", "k1", "k10", "k2"};
    static const char *vals[] = {"1", "1.0", "\"1\"", "[1,{\"q\":2,\"p\":1}]", "null", "{}", "-2e3"};
    for (int it = 0; it < 2000; it++) {
        int m = (int)tu_below(&r, 8), idx[8], val[8];
        for (int i = 0; i < m; i++) {
            idx[i] = i; /* distinct names: the first m */
            val[i] = (int)tu_below(&r, 7);
        }
        unsigned char out[2][1024];
        size_t olen[2];
        for (int v = 0; v < 2; v++) {
            for (int i = m - 1; i > 0; i--) {
                int j = (int)tu_below(&r, (uint64_t)i + 1), t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
            char line[1024];
            size_t n = 0;
            line[n++] = '{';
            for (int i = 0; i < m; i++)
                n += (size_t)sprintf(line + n, "%s \"%s\" : %s", i ? "," : "", names[idx[i]],
                                     vals[val[idx[i]]]);
            line[n++] = '}';
            size_t bp, bpos;
            assert_int_equal(dd_json_extract(p, (unsigned char *)line, n, out[v], sizeof out[v],
                                             &olen[v], &bp, &bpos), DEDUP_OK);
        }
        assert_int_equal(olen[0], olen[1]);
        assert_memory_equal(out[0], out[1], olen[0]);
    }
    dd_json_paths_free(p);
}

/* Strings are scanned eight bytes at a time: a byte that ends the plain
 * run (quote, backslash, control, >= 0x80) at every offset of a word. */
static void test_string_runs(void **state)
{
    (void)state;
    for (int k = 0; k < 24; k++) {
        char line[64], want[64], where[32];
        sprintf(line, "\"%.*s\\\"%.*s\"", k, "aaaaaaaaaaaaaaaaaaaaaaaa", 23 - k,
                "bbbbbbbbbbbbbbbbbbbbbbbb");
        ok(".", line, line);
        sprintf(line, "\"%.*s\xc3\xa9%.*s\"", k, "aaaaaaaaaaaaaaaaaaaaaaaa", 23 - k,
                "bbbbbbbbbbbbbbbbbbbbbbbb");
        ok(".", line, line);
        sprintf(line, "\"%.*s\\u0041%.*s\"", k, "aaaaaaaaaaaaaaaaaaaaaaaa", 23 - k,
                "bbbbbbbbbbbbbbbbbbbbbbbb");
        sprintf(want, "\"%.*sA%.*s\"", k, "aaaaaaaaaaaaaaaaaaaaaaaa", 23 - k,
                "bbbbbbbbbbbbbbbbbbbbbbbb");
        ok(".", line, want);
        sprintf(line, "\"%.*s\"", k, "aaaaaaaaaaaaaaaaaaaaaaaa");
        ok(".", line, line);
        sprintf(where, "at %d", k + 1);
        static const char stops[] = {0x1f, 0x01, (char)0xff, (char)0x80};
        for (size_t b = 0; b < sizeof stops; b++) {
            sprintf(line, "\"%.*sX%.*s\"", k, "aaaaaaaaaaaaaaaaaaaaaaaa", 23 - k,
                    "bbbbbbbbbbbbbbbbbbbbbbbb");
            line[k + 1] = stops[b];
            err(".", line, strlen(line), DEDUP_ERR_CORRUPT, where);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_canonical),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_shuffled),
        cmocka_unit_test(test_string_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
