/*
 * fuzz_url.c - dd_url_canon() on arbitrary bytes.  The first byte picks the
 * options (drop patterns, sorting); the rest is the URL.  Checks: only OK or
 * INVALID_ARG; nothing written past len + 1 bytes; the canonical form is a
 * fixed point; sorted parameters come out in order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const drop[] = {"utm_*", "?", "*x*y", "fbclid"};
    if (size == 0)
        return 0;
    dd_url_opts o = {.drop = drop, .n_drop = (size_t)(data[0] & 7) % 5,
                     .sort_params = (data[0] & 8) != 0};
    if (data[0] & 16)
        dd_url_opts_prepare(&o);
    const unsigned char *in = data + 1;
    size_t len = size - 1, olen = 0, olen2 = 0;
    unsigned char *out = malloc(len + 1), *again = malloc(len + 2);
    check(out && again);
    dedup_status st = dd_url_canon(&o, in, len, out, &olen);
    check(st == DEDUP_OK || st == DEDUP_ERR_INVALID_ARG);
    if (st == DEDUP_OK) {
        check(olen <= len + 1);
        check(dd_url_canon(&o, out, olen, again, &olen2) == DEDUP_OK);
        check(olen2 == olen && memcmp(again, out, olen) == 0);
        const unsigned char *q = memchr(out, '?', olen);
        if (q && o.sort_params) { /* names in order */
            const unsigned char *prev = NULL, *end = out + olen;
            size_t prevn = 0;
            for (const unsigned char *p = q + 1; p < end;) {
                const unsigned char *amp = memchr(p, '&', (size_t)(end - p));
                const unsigned char *e = amp ? amp : end, *eq = memchr(p, '=', (size_t)(e - p));
                size_t n = (size_t)((eq ? eq : e) - p);
                if (prev) {
                    int c = memcmp(prev, p, prevn < n ? prevn : n);
                    check(c < 0 || (c == 0 && prevn <= n));
                }
                prev = p;
                prevn = n;
                p = e + 1;
            }
        }
    }
    free(out);
    free(again);
    return 0;
}
