/*
 * url.c - canonical URLs (see url.h for the rules).
 *
 * One left-to-right pass writes the canonical form into 'out': the scheme
 * and host lower-cased through a table, escapes normalised as they are
 * copied, dot segments then removed in place over the path just written
 * (the result only shrinks, so a read and a write index over the same bytes
 * suffice).  With drop patterns or sorting, one pass over the query
 * normalises each parameter into its place in 'out' and notes where its
 * name ends; one the patterns name is taken back.  Sorting needs the
 * parameters' places only: their normalised text is compared where it lies
 * in 'out', and only when they are out of order is each one normalised
 * again from the input into its new place, so no copy of the query is kept
 * anywhere.
 */
#include "url.h"

#include <stdint.h>
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

/* Writes the escape at in[*ip] (in[*ip] == '%', in[..end) readable) to
 * out[w..) with the escape rule, advances *ip past it; returns the new w.
 * 'fold' lower-cases a decoded byte (the host). */
static inline size_t put_escape(const unsigned char *in, size_t *ip, size_t end,
                                unsigned char *out, size_t w, bool fold)
{
    size_t i = *ip;
    if (end - i >= 3 && (cls(in[i + 1]) & C_HEX) && (cls(in[i + 2]) & C_HEX)) {
        unsigned char d = (unsigned char)(hexval(in[i + 1]) * 16 + hexval(in[i + 2]));
        if ((cls(d) & C_UNRESERVED) && !((cls(d) & C_HEX) && makes_escape(out, w))) {
            out[w++] = fold ? lower(d) : d;
        } else {
            out[w++] = '%';
            out[w++] = upper(in[i + 1]);
            out[w++] = upper(in[i + 2]);
        }
        *ip = i + 3;
    } else {
        out[w++] = '%';
        *ip = i + 1;
    }
    return w;
}

/* Copies the bytes of in[i..end) before the first '%' to out[w..),
 * lower-cased; returns the input's new i, *wp the output's new w.  Eight
 * bytes at a time where the host is little-endian (a word holding a '%' is
 * left to the byte loop). */
static inline size_t fold_run(const unsigned char *in, size_t i, size_t end, unsigned char *out,
                              size_t *wp)
{
    size_t w = *wp;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    while (end - i >= 8) {
        uint64_t x, p;
        memcpy(&x, in + i, 8);
        p = x ^ (ones * '%');
        if (((p - ones) & ~p) & highs)
            break;
        /* per byte below 0x80: the high bit of (b + 0x80 - 'A') says b >= 'A',
         * that of (b + 0x80 - 'Z' - 1) says b > 'Z'; no carry crosses bytes */
        uint64_t h = x & ~highs;
        uint64_t up = (h + ones * (0x80 - 'A')) & ~(h + ones * (0x80 - 'Z' - 1)) & ~x & highs;
        x |= up >> 2;
        memcpy(out + w, &x, 8);
        i += 8;
        w += 8;
    }
#endif
    while (i < end && in[i] != '%')
        out[w++] = lower(in[i++]);
    *wp = w;
    return i;
}

/* Copies in[i..end) to out[w..) with the escape rule; 'fold' lower-cases
 * the bytes that are not escapes (the host).  Returns the new w.  Runs
 * without '%' are copied whole. */
static size_t copy_norm(const unsigned char *in, size_t i, size_t end, unsigned char *out,
                        size_t w, bool fold)
{
    while (i < end) {
        if (fold) {
            i = fold_run(in, i, end, out, &w);
        } else {
            const unsigned char *pct = memchr(in + i, '%', end - i);
            size_t e = pct ? (size_t)(pct - in) : end;
            memcpy(out + w, in + i, e - i);
            w += e - i;
            i = e;
        }
        if (i >= end)
            break;
        w = put_escape(in, &i, end, out, w, fold); /* in[i] == '%' */
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
            if (*star == 0) /* a '*' ending the pattern takes the rest */
                return true;
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

static int cmp_bytes(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c)
        return c;
    return an < bn ? -1 : an > bn;
}

typedef struct param {
    uint64_t key;            /* the name's first 8 bytes (name_key) */
    size_t in_off, in_len;   /* raw text in the input */
    size_t out_off, out_len; /* normalised text in 'out' */
    size_t name_len;         /* of the normalised name (before the first '=') */
    bool escaped;            /* holds a '%' (else raw and normalised agree) */
} param;

/* The first eight bytes of the name t[0..nl), big-endian, zero-padded:
 * where two names' keys differ, the names are in their keys' order (the
 * padding is below every byte, so a name that is a prefix of another stays
 * before it). */
static uint64_t name_key(const unsigned char *t, size_t nl)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (nl >= 8) {
        uint64_t x;
        memcpy(&x, t, 8);
        return __builtin_bswap64(x);
    }
#endif
    uint64_t k = 0;
    for (size_t i = 0; i < nl && i < 8; i++)
        k |= (uint64_t)t[i] << (56 - 8 * i);
    return k;
}

/* Order of two normalised parameters lying in 'out': by name, then by what
 * follows it ("" before "=value"), bytewise; the keys settle most pairs. */
static int cmp_param(const unsigned char *out, const param *a, const param *b)
{
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    const unsigned char *ta = out + a->out_off, *tb = out + b->out_off;
    int c = cmp_bytes(ta, a->name_len, tb, b->name_len);
    return c ? c
             : cmp_bytes(ta + a->name_len, a->out_len - a->name_len, tb + b->name_len,
                         b->out_len - b->name_len);
}

/* Whether a drop pattern names the parameter whose normalised name is
 * t[0..nl).  A pattern whose first byte is literal and differs from the
 * name's is passed over without running the glob (the usual case). */
static bool dropped(const dd_url_opts *o, const unsigned char *t, size_t nl)
{
    if (o->prepared && (nl == 0 ? !o->empty_ok : !(o->first_ok[t[0] >> 6] >> (t[0] & 63) & 1)))
        return false;
    for (size_t k = 0; k < o->n_drop; k++) {
        const char *d = o->drop[k];
        bool lit = d[0] == '\\' && d[1];
        unsigned char p0 = (unsigned char)d[lit ? 1 : 0];
        if ((lit || (p0 != '*' && p0 != '?')) && (nl == 0 ? p0 != 0 : p0 != t[0]))
            continue;
        if (dd_url_glob_match(d, t, nl))
            return true;
    }
    return false;
}

void dd_url_opts_prepare(dd_url_opts *o)
{
    o->empty_ok = false;
    memset(o->first_ok, 0, sizeof o->first_ok);
    for (size_t k = 0; k < o->n_drop; k++) { /* as dropped() passes patterns over */
        const char *d = o->drop[k];
        bool lit = d[0] == '\\' && d[1];
        unsigned char p0 = (unsigned char)d[lit ? 1 : 0];
        if (!lit && (p0 == '*' || p0 == '?')) {
            o->empty_ok = true;
            memset(o->first_ok, 0xff, sizeof o->first_ok);
        } else {
            o->first_ok[p0 >> 6] |= UINT64_C(1) << (p0 & 63);
            if (p0 == 0)
                o->empty_ok = true;
        }
    }
    o->prepared = true;
}

/* The kept parameters ps[0..np), whose normalised text lies in 'out', are
 * ordered (insertion sort: stable, and np is small in any real URL), then
 * written again from the input at out[start..); returns the end. */
static size_t sort_params(const unsigned char *in, param *ps, size_t np, unsigned char *out,
                          size_t start)
{
    for (size_t k = 1; k < np; k++) {
        param x = ps[k];
        size_t j = k;
        while (j > 0 && cmp_param(out, &ps[j - 1], &x) > 0) {
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

/* Bytes a parameter's pass stops at. */
static const unsigned char QSTOP[256] = {['&'] = 1, ['%'] = 1, ['='] = 1};

/* Copies the bytes of in[i..end) before the first '&', '%' or '=' to
 * out[k..); returns the input's new i, *kp the output's new k.  Eight bytes
 * at a time where the host is little-endian: each word is stored whole
 * before its stop byte is known, which needs k <= i + 1 and room for len + 1
 * bytes in 'out' (dd_url_canon's output never runs ahead of its input by
 * more than the '/' of an empty path), so the store ends by out[end]. */
static inline size_t plain_copy(const unsigned char *in, size_t i, size_t end, unsigned char *out,
                                size_t *kp)
{
    size_t k = *kp;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    while (end - i >= 8) {
        uint64_t x, a, p, e;
        memcpy(&x, in + i, 8);
        memcpy(out + k, &x, 8);
        a = x ^ (ones * '&');
        p = x ^ (ones * '%');
        e = x ^ (ones * '=');
        /* the lowest flagged byte is a true one (a borrow only runs upwards) */
        uint64_t m = (((a - ones) & ~a) | ((p - ones) & ~p) | ((e - ones) & ~e)) & highs;
        if (m) {
            size_t n = (unsigned)__builtin_ctzll(m) >> 3;
            *kp = k + n;
            return i + n;
        }
        i += 8;
        k += 8;
    }
#endif
    while (i < end && !QSTOP[in[i]])
        out[k++] = in[i++];
    *kp = k;
    return i;
}

/* Writes the query in[q..end) (after its '?') at out[w..), the parameters
 * the patterns name and the empty ones left out, sorted with sort_params;
 * *wp gets the new end (unchanged when no parameter is left).  One pass
 * over the input normalises each parameter into its place (its separator
 * written first: the escape rule looks back) and notes where its name
 * ends; a sorted query is written again only when a parameter came before
 * one smaller than itself.  False when a sorted query has too many
 * parameters. */
static bool put_query_filtered(const dd_url_opts *o, const unsigned char *in, size_t q,
                               size_t end, unsigned char *out, size_t *wp)
{
    param ps[DD_URL_MAX_SORT_PARAMS];
    size_t np = 0, start = *wp, w = start, i = q;
    bool in_order = true;
    for (;;) {
        size_t at = w + 1, k = at, nl = SIZE_MAX, p0 = i;
        bool escaped = false;
        out[w] = w == start ? '?' : '&';
        for (;;) {
            i = plain_copy(in, i, end, out, &k);
            if (i >= end || in[i] == '&')
                break;
            if (in[i] == '=') {
                if (nl == SIZE_MAX)
                    nl = k - at;
                out[k++] = in[i++];
            } else {
                escaped = true;
                k = put_escape(in, &i, end, out, k, false);
            }
        }
        size_t n = k - at;
        if (nl == SIZE_MAX)
            nl = n;
        if (n && !dropped(o, out + at, nl)) {
            if (o->sort_params) {
                if (np == DD_URL_MAX_SORT_PARAMS)
                    return false;
                ps[np] = (param){name_key(out + at, nl), p0, i - p0, at, n, nl, escaped};
                if (np && in_order && cmp_param(out, &ps[np - 1], &ps[np]) > 0)
                    in_order = false;
                np++;
            }
            w = k;
        }
        if (i >= end)
            break;
        i++; /* the '&' */
    }
    if (!in_order)
        w = sort_params(in, ps, np, out, start);
    *wp = w;
    return true;
}

/* Writes the query in[q..end) (after its '?') at out[w..), returns the new
 * w; false when a sorted query has too many parameters. */
static bool put_query(const dd_url_opts *o, const unsigned char *in, size_t q, size_t end,
                      unsigned char *out, size_t *wp)
{
    if (o && (o->n_drop || o->sort_params))
        return put_query_filtered(o, in, q, end, out, wp);
    if (q < end) {
        out[*wp] = '?';
        *wp = copy_norm(in, q, end, out, *wp + 1, false);
    }
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
    size_t h = a; /* after the authority's last '@' */
    for (const unsigned char *at = memchr(in + a, '@', b - a); at;
         at = memchr(at + 1, '@', b - (size_t)(at + 1 - in)))
        h = (size_t)(at - in) + 1;
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
