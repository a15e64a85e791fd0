/*
 * keyparse_driver.c - the URL canonicaliser and the JSON path extractor on
 * the lines of stdin, for the Python reference tests (tests/key/).
 *
 *   keyparse_driver url [-d GLOB]... [-s]     one line out per line in: the
 *                                             canonical URL, or "ERR <code>"
 *   keyparse_driver json SPEC                 "OK" and "\t<value>" per path,
 *                                             or "ERR CORRUPT|LIMIT|NOT_FOUND <i>"
 * Lines are split on '\n' only (so '\r', NUL and the rest are data).  The
 * JSON output buffer starts small on purpose: every value that does not fit
 * goes through the DEDUP_ERR_FULL retry, which must then succeed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "url.h"

static unsigned char *slurp(size_t *n)
{
    size_t cap = 1 << 16, len = 0;
    unsigned char *b = malloc(cap);
    for (;;) {
        if (!b)
            exit(2);
        size_t r = fread(b + len, 1, cap - len, stdin);
        len += r;
        if (len < cap)
            break;
        cap *= 2;
        b = realloc(b, cap);
    }
    *n = len;
    return b;
}

static const char *code(dedup_status s)
{
    switch (s) {
    case DEDUP_ERR_INVALID_ARG: return "INVALID_ARG";
    case DEDUP_ERR_CORRUPT: return "CORRUPT";
    case DEDUP_ERR_LIMIT: return "LIMIT";
    case DEDUP_ERR_NOT_FOUND: return "NOT_FOUND";
    case DEDUP_ERR_FULL: return "FULL";
    default: return "OTHER";
    }
}

static void do_json(const dd_json_paths *p, const unsigned char *l, size_t n)
{
    size_t cap = 8, olen = 0, bp = 0, bpos = 0;
    unsigned char *out = malloc(cap);
    dedup_status s = dd_json_extract(p, l, n, out, cap, &olen, &bp, &bpos);
    if (s == DEDUP_ERR_FULL) {
        size_t need = olen;
        out = realloc(out, need);
        s = dd_json_extract(p, l, n, out, need, &olen, &bp, &bpos);
        if (s != DEDUP_OK || olen > need) {
            fprintf(stderr, "keyparse_driver: the retry after FULL gave %s\n", code(s));
            exit(3);
        }
    }
    if (s == DEDUP_ERR_NOT_FOUND)
        printf("ERR NOT_FOUND %zu\n", bp);
    else if (s != DEDUP_OK)
        printf("ERR %s\n", code(s));
    else {
        fputs("OK", stdout);
        for (size_t i = 0; i < olen;) {
            size_t L = out[i] | (size_t)out[i + 1] << 8 | (size_t)out[i + 2] << 16 |
                       (size_t)out[i + 3] << 24;
            putchar('\t');
            fwrite(out + i + 4, 1, L, stdout);
            i += 4 + L;
        }
        putchar('\n');
    }
    free(out);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    bool url = strcmp(argv[1], "url") == 0;
    dd_url_opts uo = {.drop = NULL};
    const char *drops[64];
    dd_json_paths *jp = NULL;
    if (url) {
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "-s") == 0)
                uo.sort_params = true;
            else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc && uo.n_drop < 64)
                drops[uo.n_drop++] = argv[++i];
            else
                return 2;
        }
        uo.drop = drops;
    } else {
        size_t ep;
        if (argc != 3 || dd_json_paths_compile(argv[2], NULL, &jp, &ep) != DEDUP_OK) {
            fprintf(stderr, "keyparse_driver: bad spec\n");
            return 2;
        }
    }
    size_t n;
    unsigned char *all = slurp(&n), *out = malloc(n + 1);
    for (size_t i = 0; i < n;) {
        unsigned char *nl = memchr(all + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - all) : n;
        if (url) {
            size_t olen;
            dedup_status s = dd_url_canon(&uo, all + i, e - i, out, &olen);
            if (s == DEDUP_OK) {
                fwrite(out, 1, olen, stdout);
                putchar('\n');
            } else {
                printf("ERR %s\n", code(s));
            }
        } else {
            do_json(jp, all + i, e - i);
        }
        i = e + 1;
    }
    dd_json_paths_free(jp);
    free(all);
    free(out);
    return fflush(stdout) ? 1 : 0;
}
