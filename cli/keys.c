/* keys.c - field selection and key normalisation (see keys.h). */
#include "keys.h"

#include <string.h>

#include "dedup/hash.h"

#include "cli.h"

static inline bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

void dd_keyspec_init(dd_keyspec *k)
{
    memset(k, 0, sizeof *k);
    k->delim = '\t';
}

int dd_key_option(int c, const char *arg, const char *cmd, dd_keyspec *k, unsigned char *term)
{
    const char *pre = cmd ? cmd : "", *sep = cmd ? ": " : "";
    switch (c) {
    case 'f': {
        uint64_t f;
        if (!cli_parse_count(arg, &f) || f > 1000000) {
            cli_error("%s%s-f/--field must be a field number from 1 (got '%s')", pre, sep, arg);
            return -1;
        }
        k->field = (size_t)f;
        return 1;
    }
    case 'd':
        if (strlen(arg) == 1)
            k->delim = (unsigned char)arg[0];
        else if (strcmp(arg, "\\t") == 0)
            k->delim = '\t';
        else if (strcmp(arg, "\\0") == 0)
            k->delim = '\0';
        else {
            cli_error("%s%s-d/--delimiter must be one character (got '%s')", pre, sep, arg);
            return -1;
        }
        return 1;
    case 'i': k->fold_case = true; return 1;
    case DD_KEY_OPT_TRIM: k->trim = true; return 1;
    case DD_KEY_OPT_SQUEEZE: k->squeeze = true; return 1;
    case DD_KEY_OPT_PREFIX:
        k->prefix = arg;
        k->prefix_len = strlen(arg);
        return 1;
    case 'z': *term = '\0'; return 1;
    default: return 0;
    }
}

size_t dd_keyspec_describe(const dd_keyspec *k, unsigned char term, bool int_keys, char *buf,
                           size_t cap)
{
    /* The prefix is written in hex so that the description stays one
     * printable line whatever bytes the prefix holds. */
    char pre[2 * 256 + 1];
    size_t plen = k->prefix_len < 256 ? k->prefix_len : 256;
    for (size_t i = 0; i < plen; i++)
        snprintf(pre + 2 * i, 3, "%02x", (unsigned char)k->prefix[i]);
    pre[2 * plen] = '\0';
    /* A longer prefix is told apart by its length and a digest of it all. */
    char tail[64] = "";
    if (k->prefix_len > plen) {
        dedup_digest d = dedup_hash(k->prefix, k->prefix_len, DEDUP_DEFAULT_SEED);
        snprintf(tail, sizeof tail, "..%zu:%016llx", k->prefix_len, (unsigned long long)d.lo);
    }
    int n = snprintf(buf, cap, "keys/1 field=%zu delim=%02x term=%02x%s%s%s%s%s%s%s",
                     k->field, k->field ? k->delim : 0, term, k->trim ? " trim" : "",
                     k->squeeze ? " squeeze" : "", k->fold_case ? " icase" : "",
                     plen ? " prefix=" : "", pre, tail, int_keys ? " int" : "");
    return n < 0 ? 0 : (size_t)n;
}

bool dd_keyspec_identity(const dd_keyspec *k)
{
    return k->field == 0 && !k->trim && !k->squeeze && !k->fold_case && k->prefix_len == 0;
}

/* Whether --squeeze changes p[0..n): a blank other than one space, or two
 * blanks in a row. */
static bool squeeze_changes(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (is_space(p[i]) && (p[i] != ' ' || (i + 1 < n && is_space(p[i + 1]))))
            return true;
    return false;
}

/* Whether -i changes p[0..n): an ASCII capital. */
static bool has_upper(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] >= 'A' && p[i] <= 'Z')
            return true;
    return false;
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
    /* --squeeze and -i copy the key only when they change it: a key that
     * stays a byte range of the record can be kept by reference (byref.h). */
    if (k->squeeze && squeeze_changes(p, n)) {
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
    if (k->fold_case && has_upper(p, n)) {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = p[i];
            scratch[i] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
        }
        p = scratch;
    }
    *klen = n;
    return p;
}
