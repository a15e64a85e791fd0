/* keys.c - field selection and key normalisation (see keys.h). */
#include "keys.h"

#include <string.h>

static inline bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

bool dd_keyspec_identity(const dd_keyspec *k)
{
    return k->field == 0 && !k->trim && !k->squeeze && !k->fold_case && k->prefix_len == 0;
}

const unsigned char *dd_key_of(const dd_keyspec *k, const unsigned char *rec, size_t len,
                               unsigned char *scratch, size_t *klen)
{
    const unsigned char *p = rec;
    size_t n = len;
    if (k->field) {
        /* Field N: the bytes between the (N-1)th and Nth delimiter; a record
         * with fewer fields has an empty key, as awk's $N. */
        for (size_t f = 1; f < k->field; f++) {
            const unsigned char *d = memchr(p, k->delim, n);
            if (!d) {
                p += n;
                n = 0;
                break;
            }
            n -= (size_t)(d - p) + 1;
            p = d + 1;
        }
        const unsigned char *d = memchr(p, k->delim, n);
        if (d)
            n = (size_t)(d - p);
    }
    if (k->trim) {
        while (n && is_space(*p)) {
            p++;
            n--;
        }
        while (n && is_space(p[n - 1]))
            n--;
    }
    if (k->squeeze) {
        size_t o = 0;
        bool in_space = false;
        for (size_t i = 0; i < n; i++) {
            if (is_space(p[i])) {
                if (!in_space)
                    scratch[o++] = ' ';
                in_space = true;
            } else {
                scratch[o++] = p[i];
                in_space = false;
            }
        }
        p = scratch;
        n = o;
    }
    if (k->prefix_len && n >= k->prefix_len && memcmp(p, k->prefix, k->prefix_len) == 0) {
        p += k->prefix_len;
        n -= k->prefix_len;
    }
    if (k->fold_case) {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = p[i];
            scratch[i] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
        }
        p = scratch;
    }
    *klen = n;
    return p;
}
