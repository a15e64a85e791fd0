/*
 * fuzz_json.c - dd_json_paths_compile() and dd_json_extract() on arbitrary
 * bytes.  The first byte picks a path spec from a list (or, with its high
 * bit, the input up to the first newline is the spec); the rest is the
 * record.  Checks: only the documented statuses; a FULL answer's size is
 * enough, and then the result is the one a large buffer gives; the framing
 * adds up to the length; every value's canonical text is a fixed point
 * (extracting "." from it gives it back).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static uint32_t get32(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const specs[] = {".", ".a", ".a.b,.c", ".items[0].sku,.\"a.b\"",
                                        ".[1],.[0][0]", ".user.id,.ad,.", ".\"\\u00e9\",.a[2]"};
    if (size == 0)
        return 0;
    char spec[256];
    const unsigned char *line = data + 1;
    size_t len = size - 1;
    if (data[0] & 0x80) {
        const unsigned char *nl = memchr(line, '\n', len);
        size_t sl = nl ? (size_t)(nl - line) : len;
        if (sl >= sizeof spec || memchr(line, 0, sl))
            return 0;
        memcpy(spec, line, sl);
        spec[sl] = 0;
        line += nl ? sl + 1 : sl;
        len -= nl ? sl + 1 : sl;
    } else {
        strcpy(spec, specs[data[0] % (sizeof specs / sizeof *specs)]);
    }
    dd_json_paths *p = NULL, *root = NULL;
    size_t ep;
    dedup_status st = dd_json_paths_compile(spec, NULL, &p, &ep);
    check(st == DEDUP_OK || st == DEDUP_ERR_INVALID_ARG);
    if (st != DEDUP_OK)
        return 0;
    check(dd_json_paths_compile(".", NULL, &root, &ep) == DEDUP_OK);
    size_t cap = 16, olen = 0, bp = 0, bpos = 0;
    unsigned char *out = malloc(cap);
    check(out != NULL);
    st = dd_json_extract(p, line, len, out, cap, &olen, &bp, &bpos);
    if (st == DEDUP_ERR_FULL) {
        check(olen > cap);
        cap = olen;
        out = realloc(out, cap);
        check(out != NULL);
        st = dd_json_extract(p, line, len, out, cap, &olen, &bp, &bpos);
        check(st == DEDUP_OK);
    }
    check(st == DEDUP_OK || st == DEDUP_ERR_CORRUPT || st == DEDUP_ERR_LIMIT ||
          st == DEDUP_ERR_NOT_FOUND);
    if (st == DEDUP_ERR_CORRUPT)
        check(bpos <= len);
    if (st == DEDUP_ERR_NOT_FOUND)
        check(bp < dd_json_paths_count(p));
    if (st == DEDUP_OK) {
        size_t i = 0, k = 0;
        check(olen <= cap);
        while (i < olen) {
            check(olen - i >= 4);
            size_t L = get32(out + i);
            check(L <= olen - i - 4);
            size_t c2 = L + 4 > 64 ? 2 * L + 64 : 128, o2 = 0;
            unsigned char *v = malloc(c2);
            check(v != NULL);
            check(dd_json_extract(root, out + i + 4, L, v, c2, &o2, &bp, &bpos) == DEDUP_OK);
            check(o2 == L + 4 && get32(v) == L && memcmp(v + 4, out + i + 4, L) == 0);
            free(v);
            i += 4 + L;
            k++;
        }
        check(i == olen && k == dd_json_paths_count(p));
    }
    free(out);
    dd_json_paths_free(p);
    dd_json_paths_free(root);
    return 0;
}
