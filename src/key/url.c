/*
 * url.c - canonical URLs (see url.h for the rules).
 *
 * One left-to-right pass writes the canonical form into 'out': the scheme
 * and host lower-cased through a table, escapes normalised as they are
 * copied, dot segments then removed in place over the path just written
 * (the result only shrinks, so a read and a write index over the same bytes
 * suffice).  Without sorting, the query is normalised whole and then
 * filtered in place.  With sorting, parameters are normalised into 'out' one
 * by one (one the drop patterns name is taken back), and sorting needs
 * their places only: their normalised text is compared where it lies in
 * 'out', and once the order is known each one is normalised again from the
 * input into its new place, so no copy of the query is kept anywhere.
 */
#include "url.h"

#include <string.h>

enum { C_UNRESERVED = 1, C_HEX = 2, C_SCHEME = 4 };

/* Character classes of RFC 3986 for the bytes that matter here: unreserved
 * (ALPHA DIGIT "-" "." "_" "~"), hex digits, scheme characters (ALPHA DIGIT
 * "+" "-" "."). */
static const unsigned char CLS[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 5, 5, 0,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0, 0, 0,
    0, 7, 7, 7, 7, 7, 7, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 0, 0, 0, 0, 1,
    0, 7, 7, 7, 7, 7, 7, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 0, 0, 0, 1, 0,
};

static inline unsigned char cls(unsigned char c)
{
    return CLS[c];
}

static int hexval(unsigned char c)
{
    if (c <= '9')
        return c - '0';
    return (c | 0x20) - 'a' + 10;
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c | 0x20) : c;
}

static unsigned char upper(unsigned char c)
{
    return (c >= 'a' && c <= 'z') ? (unsigned char)(c & ~0x20) : c;
}

/* Whether a hex digit written at out[w] would complete an escape with a
 * stray '%' before it ("%4" then a decoded "%41"): such an escape stays
 * encoded, or the canonical form would change when canonicalised again. */
static bool makes_escape(const unsigned char *out, size_t w)
{
    return (w >= 1 && out[w - 1] == '%') ||
           (w >= 2 && out[w - 2] == '%' && (cls(out[w - 1]) & C_HEX));
}

/* Copies in[i..end) to out[w..) with the escape rule; 'fold' lower-cases
 * the bytes that are not escapes (the host).  Returns the new w.  Runs
 * without '%' are copied whole. */
static size_t copy_norm(const unsigned char *in, size_t i, size_t end, unsigned char *out,
                        size_t w, bool fold)
{
    while (i < end) {
        if (fold) {
            while (i < end && in[i] != '%')
                out[w++] = lower(in[i++]);
        } else {
            const unsigned char *pct = memchr(in + i, '%', end - i);
            size_t e = pct ? (size_t)(pct - in) : end;
            memcpy(out + w, in + i, e - i);
            w += e - i;
            i = e;
        }
        if (i >= end)
            break;
        /* in[i] == '%' */
        if (end - i >= 3 && (cls(in[i + 1]) & C_HEX) && (cls(in[i + 2]) & C_HEX)) {
            unsigned char d = (unsigned char)(hexval(in[i + 1]) * 16 + hexval(in[i + 2]));
            if ((cls(d) & C_UNRESERVED) && !((cls(d) & C_HEX) && makes_escape(out, w))) {
                out[w++] = fold ? lower(d) : d;
            } else {
                out[w++] = '%';
                out[w++] = upper(in[i + 1]);
                out[w++] = upper(in[i + 2]);
            }
            i += 3;
        } else {
            out[w++] = '%';
            i++;
        }
    }
    return w;
}

/* Removes dot segments from the absolute path out[start..end) in place
 * (RFC 3986 5.2.4); returns the new end.  Segments are compared after
 * escape normalisation, which already happened. */
static size_t remove_dots(unsigned char *p, size_t start, size_t end)
{
    /* Most paths hold no "." or ".." segment: find the first one, if any. */
    size_t r = start;
    for (;;) {
        const unsigned char *dot = memchr(p + r, '.', end - r);
        if (!dot)
            return end;
        size_t d = (size_t)(dot - p);
        size_t e = d + 1 < end && p[d + 1] == '.' ? d + 2 : d + 1;
        if (p[d - 1] == '/' && (e == end || p[e] == '/')) {
            r = d - 1;
            break;
        }
        r = d + 1;
    }
    size_t w = r;
    while (r < end) {
        size_t s = r + 1, e = s; /* p[r] == '/' */
        while (e < end && p[e] != '/')
            e++;
        size_t n = e - s;
        bool dot = n == 1 && p[s] == '.';
        bool dotdot = n == 2 && p[s] == '.' && p[s + 1] == '.';
        if (dot || dotdot) {
            if (dotdot) {
                while (w > start) {
                    w--;
                    if (p[w] == '/')
                        break;
                }
            }
            if (e == end)
                p[w++] = '/';
        } else {
            memmove(p + w, p + r, e - r);
            w += e - r;
        }
        r = e;
    }
    return w;
}

bool dd_url_glob_match(const char *pat, const unsigned char *name, size_t len)
{
    const unsigned char *p = (const unsigned char *)pat;
    size_t i = 0;
    const unsigned char *star = NULL;
    size_t star_i = 0;
    while (i < len) {
        /* '\\' makes the byte after it literal */
        bool lit = *p == '\\' && p[1];
        unsigned char c = lit ? p[1] : *p;
        if (!lit && c == '*') {
            star = ++p;
            star_i = i;
        } else if (c && ((!lit && c == '?') || c == name[i])) {
            p += lit ? 2 : 1;
            i++;
        } else if (star) {
            p = star;
            i = ++star_i;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == 0;
}

/* The name of the parameter t[0..n): the bytes before its first '='. */
static size_t name_len(const unsigned char *t, size_t n)
{
    const unsigned char *eq = memchr(t, '=', n);
    return eq ? (size_t)(eq - t) : n;
}

static int cmp_bytes(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c)
        return c;
    return an < bn ? -1 : an > bn;
}

/* Order of two normalised parameters: by name, then by what follows it
 * ("" before "=value"), bytewise. */
static int cmp_param(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
    size_t na = name_len(a, an), nb = name_len(b, bn);
    int c = cmp_bytes(a, na, b, nb);
    return c ? c : cmp_bytes(a + na, an - na, b + nb, bn - nb);
}

typedef struct param {
    size_t in_off, in_len;   /* raw text in the input */
    size_t out_off, out_len; /* normalised text in 'out' */
    bool escaped;            /* holds a '%' (else raw and normalised agree) */
} param;

/* Whether a drop pattern names the normalised parameter t[0..n).  A
 * pattern whose first byte is literal and differs from the parameter's is
 * passed over before the name's length is even known (the usual case). */
static bool dropped(const dd_url_opts *o, const unsigned char *t, size_t n)
{
    size_t nl = SIZE_MAX;
    for (size_t k = 0; k < o->n_drop; k++) {
        const char *d = o->drop[k];
        bool lit = d[0] == '\\' && d[1];
        unsigned char p0 = (unsigned char)d[lit ? 1 : 0];
        if ((lit || (p0 != '*' && p0 != '?')) && (n == 0 ? p0 != 0 : p0 != t[0]))
            continue;
        if (nl == SIZE_MAX)
            nl = name_len(t, n);
        if (dd_url_glob_match(o->drop[k], t, nl))
            return true;
    }
    return false;
}

/* Drops from the normalised query out[q..end) (out[q] == '?') the empty
 * parameters and those the patterns name, moving the others down; returns
 * the new end (q when none is left). */
static size_t drop_params(const dd_url_opts *o, unsigned char *out, size_t q, size_t end)
{
    size_t w = q;
    for (size_t i = q + 1;;) {
        const unsigned char *amp = memchr(out + i, '&', end - i);
        size_t e = amp ? (size_t)(amp - out) : end;
        if (e > i && !dropped(o, out + i, e - i)) {
            out[w] = w == q ? '?' : '&';
            if (w + 1 != i)
                memmove(out + w + 1, out + i, e - i);
            w += 1 + (e - i);
        }
        if (!amp)
            return w;
        i = e + 1;
    }
}

/* Normalises the parameter starting at in[i] (it ends at the next '&' or
 * at 'end') into out[at..).  Sets *e to its end in the input and *escaped;
 * returns its end in 'out'.  A parameter without '%' is copied whole. */
static size_t put_param(const unsigned char *in, size_t i, size_t end, unsigned char *out,
                        size_t at, size_t *e, bool *escaped)
{
    const unsigned char *amp = memchr(in + i, '&', end - i);
    size_t j = amp ? (size_t)(amp - in) : end;
    *e = j;
    *escaped = memchr(in + i, '%', j - i) != NULL;
    if (!*escaped) {
        memcpy(out + at, in + i, j - i);
        return at + (j - i);
    }
    return copy_norm(in, i, j, out, at, false);
}

/* The sorted query: the kept parameters ps[0..np), whose normalised text
 * lies in 'out', are ordered, then written again from the input at
 * out[start..); returns the end. */
static size_t sort_params(const unsigned char *in, param *ps, size_t np, unsigned char *out,
                          size_t start)
{
    /* Insertion sort: stable, and np is small in any real URL. */
    for (size_t k = 1; k < np; k++) {
        param x = ps[k];
        size_t j = k;
        while (j > 0 && cmp_param(out + ps[j - 1].out_off, ps[j - 1].out_len, out + x.out_off,
                                  x.out_len) > 0) {
            ps[j] = ps[j - 1];
            j--;
        }
        ps[j] = x;
    }
    size_t w = start;
    for (size_t k = 0; k < np; k++) {
        out[w++] = k ? '&' : '?';
        if (ps[k].escaped) {
            w = copy_norm(in, ps[k].in_off, ps[k].in_off + ps[k].in_len, out, w, false);
        } else {
            memcpy(out + w, in + ps[k].in_off, ps[k].in_len);
            w += ps[k].in_len;
        }
    }
    return w;
}

/* Writes the query in[q..end) (after its '?') at out[w..), returns the new
 * w; false when a sorted query has too many parameters. */
static bool put_query(const dd_url_opts *o, const unsigned char *in, size_t q, size_t end,
                      unsigned char *out, size_t *wp)
{
    size_t w = *wp;
    bool filter = o && (o->n_drop || o->sort_params);
    if (!filter) {
        if (q < end) {
            out[w++] = '?';
            w = copy_norm(in, q, end, out, w, false);
        }
        *wp = w;
        return true;
    }
    if (!o->sort_params) {
        /* normalised whole, then filtered in place: the escape rule gives
         * each parameter the same text either way, as it looks back no
         * further than the '?' or '&' before it */
        out[w] = '?';
        size_t e = copy_norm(in, q, end, out, w + 1, false);
        *wp = drop_params(o, out, w, e);
        return true;
    }
    param ps[DD_URL_MAX_SORT_PARAMS];
    size_t np = 0, start = w;
    for (size_t i = q; i < end;) {
        /* the separator is written first: the escape rule looks back */
        size_t at = w + 1, e;
        bool escaped;
        out[w] = w == start ? '?' : '&';
        size_t after = put_param(in, i, end, out, at, &e, &escaped);
        if (e > i && !dropped(o, out + at, after - at)) {
            if (o->sort_params) {
                if (np == DD_URL_MAX_SORT_PARAMS)
                    return false;
                ps[np++] = (param){i, e - i, at, after - at, escaped};
            }
            w = after;
        }
        i = e + 1;
    }
    if (np > 1)
        w = sort_params(in, ps, np, out, start);
    *wp = w;
    return true;
}

/* The port in[a..b) (digits only): its value without leading zeros as
 * in in[*first..*first + *nd); false when not a port. */
static bool parse_port(const unsigned char *in, size_t a, size_t b, size_t *first, size_t *nd)
{
    unsigned long v = 0;
    for (size_t i = a; i < b; i++) {
        if (in[i] < '0' || in[i] > '9')
            return false;
        v = v * 10 + (unsigned long)(in[i] - '0');
        if (v > 65535)
            return false;
    }
    while (a + 1 < b && in[a] == '0')
        a++;
    *first = a;
    *nd = b - a;
    return true;
}

static bool is_default_port(const unsigned char *scheme, size_t sn, const unsigned char *port,
                            size_t pn)
{
    if (sn == 4 && memcmp(scheme, "http", 4) == 0)
        return pn == 2 && memcmp(port, "80", 2) == 0;
    if (sn == 5 && memcmp(scheme, "https", 5) == 0)
        return pn == 3 && memcmp(port, "443", 3) == 0;
    return false;
}

dedup_status dd_url_canon(const dd_url_opts *o, const unsigned char *in, size_t len,
                          unsigned char *out, size_t *olen)
{
    *olen = 0;
    /* scheme ":" "//" */
    size_t i = 0;
    if (len == 0 || !((in[0] | 0x20) >= 'a' && (in[0] | 0x20) <= 'z'))
        return DEDUP_ERR_INVALID_ARG;
    while (i < len && (cls(in[i]) & C_SCHEME))
        i++;
    if (len - i < 3 || in[i] != ':' || in[i + 1] != '/' || in[i + 2] != '/')
        return DEDUP_ERR_INVALID_ARG;
    size_t w = 0;
    for (size_t k = 0; k < i; k++)
        out[w++] = lower(in[k]);
    size_t scheme_len = w;
    memcpy(out + w, "://", 3);
    w += 3;
    /* The fragment starts at the first '#'; before it, the authority ends
     * at the first '/' or '?', the path at the first '?' after it.  (memchr
     * over the whole URL beats a loop testing every byte for three.) */
    size_t a = i + 3;
    const unsigned char *hash = memchr(in + a, '#', len - a);
    size_t fe = hash ? (size_t)(hash - in) : len;
    const unsigned char *slash = memchr(in + a, '/', fe - a);
    size_t b = slash ? (size_t)(slash - in) : fe;
    const unsigned char *qm = memchr(in + a, '?', fe - a);
    size_t pe = qm ? (size_t)(qm - in) : fe;
    if (pe < b)
        b = pe;
    size_t h = a;
    for (size_t k = b; k > a; k--) {
        if (in[k - 1] == '@') {
            h = k;
            break;
        }
    }
    memcpy(out + w, in + a, h - a); /* userinfo, as it is */
    w += h - a;
    size_t he; /* end of the host */
    if (h < b && in[h] == '[') {
        const unsigned char *rb = memchr(in + h, ']', b - h);
        if (!rb)
            return DEDUP_ERR_INVALID_ARG;
        he = (size_t)(rb - in) + 1;
        if (he < b && in[he] != ':')
            return DEDUP_ERR_INVALID_ARG;
    } else {
        const unsigned char *colon = memchr(in + h, ':', b - h);
        he = colon ? (size_t)(colon - in) : b;
    }
    if (he == h)
        return DEDUP_ERR_INVALID_ARG;
    w = copy_norm(in, h, he, out, w, true);
    if (he < b) { /* ":" port */
        size_t pf, pn;
        if (!parse_port(in, he + 1, b, &pf, &pn))
            return DEDUP_ERR_INVALID_ARG;
        if (pn && !is_default_port(out, scheme_len, in + pf, pn)) {
            out[w++] = ':';
            memcpy(out + w, in + pf, pn);
            w += pn;
        }
    }
    /* path */
    size_t ps = w;
    w = copy_norm(in, b, pe, out, w, false);
    if (w == ps)
        out[w++] = '/';
    else
        w = remove_dots(out, ps, w);
    /* query, fragment dropped */
    if (pe < fe && !put_query(o, in, pe + 1, fe, out, &w))
        return DEDUP_ERR_INVALID_ARG;
    *olen = w;
    return DEDUP_OK;
}
