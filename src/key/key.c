/* key.c - key specs: compiling a selection, applying it to records (see
 * dedup/key.h).
 *
 * A single field or the whole record takes the pointer path: the key stays
 * a byte range of the record unless a normalisation changes it (so callers
 * may keep it by reference); a tuple is written element by element into the
 * caller's buffer, each element normalised in place there. */
#include "dedup/key.h"

#include <limits.h>
#include <string.h>

#include "internal.h"
#include "key_parsers.h"

typedef struct item {
    size_t lo, hi; /* 1-based, inclusive; hi == SIZE_MAX: open range */
} item;

struct dedup_key {
    dedup_allocator a;
    dedup_key_format fmt;
    unsigned char delim;
    bool whole;     /* no selection */
    bool single;    /* exactly one field: its bytes, no framing */
    bool ordered;   /* items increasing and disjoint: one pass over the fields */
    bool identity;
    bool trim, squeeze, fold;
    bool plain_elems; /* no normalisation of an element (put_elem copies it) */
    bool json_norm; /* JSON with a normalisation of its string values */
    unsigned char *prefix;
    size_t prefix_len;
    size_t n_items;
    item *items;
    ddi_key_parsers parsers; /* URL and JSON (key_parsers.h) */
    size_t mem;
};

static inline bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

void dedup_key_params_init(dedup_key_params *p)
{
    memset(p, 0, sizeof *p);
    p->delim = -1;
}

/* ---- compiling ------------------------------------------------------- */

/* Parses the decimal p[0..n) into *v (1..DEDUP_KEY_MAX_FIELD). */
static bool parse_num(const char *p, size_t n, size_t *v)
{
    if (n == 0 || n > 7)
        return false;
    size_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        x = x * 10 + (size_t)(p[i] - '0');
    }
    if (x == 0 || x > DEDUP_KEY_MAX_FIELD)
        return false;
    *v = x;
    return true;
}

/* Whether p[0..n) has the shape of a number or range (digits and '-'). */
static bool numeric_shape(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || p[i] == '-'))
            return false;
    return true;
}

/* The 1-based number of the header field named p[0..n), or 0. */
static size_t find_name(const dedup_key *k, const unsigned char *h, size_t hlen, const char *p,
                        size_t n, dedup_status *st)
{
    size_t pos = 0, idx = 0;
    unsigned char tmp[256];
    *st = DEDUP_OK;
    if (hlen && h[hlen - 1] == '\r')
        hlen--; /* a CRLF header */
    for (;;) {
        idx++;
        const unsigned char *fp;
        size_t fl;
        if (k->fmt == DEDUP_KEY_CSV) {
            dedup_csv_field f;
            dedup_status s = dedup_csv_field_next(h, hlen, k->delim, &pos, &f);
            if (s == DEDUP_ERR_RANGE)
                return 0;
            if (s) {
                *st = s;
                return 0;
            }
            if (f.len > sizeof tmp) {
                if (pos > hlen)
                    return 0;
                continue;
            }
            fl = dedup_csv_unquote(&f, tmp);
            fp = tmp;
        } else {
            if (pos > hlen)
                return 0;
            const unsigned char *d = memchr(h + pos, k->delim, hlen - pos);
            size_t end = d ? (size_t)(d - h) : hlen;
            fp = h + pos;
            fl = end - pos;
            pos = d ? end + 1 : hlen + 1;
        }
        if (fl == n && memcmp(fp, p, n) == 0)
            return idx;
        if (pos > hlen)
            return 0;
    }
}

static dedup_status parse_fields(dedup_key *k, const char *spec, const unsigned char *h,
                                 size_t hlen, size_t *err_pos)
{
    size_t n = 1;
    for (const char *c = spec; *c; c++)
        n += *c == ',';
    if (n > DEDUP_KEY_MAX_ITEMS)
        return DEDUP_ERR_LIMIT;
    k->items = ddi_calloc(&k->a, n, sizeof *k->items);
    if (!k->items)
        return DEDUP_ERR_NOMEM;
    k->mem += n * sizeof *k->items;
    const char *p = spec;
    for (size_t i = 0; i < n; i++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        *err_pos = (size_t)(p - spec);
        item it;
        const char *dash = memchr(p, '-', len);
        if (len == 0)
            return DEDUP_ERR_INVALID_ARG;
        if (numeric_shape(p, len)) {
            if (!dash) {
                if (!parse_num(p, len, &it.lo))
                    return DEDUP_ERR_INVALID_ARG;
                it.hi = it.lo;
            } else {
                size_t a = (size_t)(dash - p);
                if (a == 0)
                    it.lo = 1; /* "-M" as cut: 1-M */
                else if (!parse_num(p, a, &it.lo))
                    return DEDUP_ERR_INVALID_ARG;
                if (a + 1 == len)
                    it.hi = SIZE_MAX;
                else if (!parse_num(dash + 1, len - a - 1, &it.hi) || it.hi < it.lo)
                    return DEDUP_ERR_INVALID_ARG;
                if (a == 0 && a + 1 == len)
                    return DEDUP_ERR_INVALID_ARG; /* "-" alone */
            }
        } else {
            if (!h)
                return DEDUP_ERR_INVALID_ARG; /* a name needs a header */
            dedup_status st;
            size_t f = find_name(k, h, hlen, p, len, &st);
            if (st)
                return st;
            if (!f)
                return DEDUP_ERR_NOT_FOUND;
            it.lo = it.hi = f;
        }
        k->items[i] = it;
        p = e ? e + 1 : p + len;
    }
    k->n_items = n;
    k->single = n == 1 && k->items[0].lo == k->items[0].hi;
    k->ordered = true;
    for (size_t i = 1; i < n; i++)
        if (k->items[i].lo <= k->items[i - 1].hi)
            k->ordered = false;
    return DEDUP_OK;
}

dedup_status dedup_key_create(const dedup_key_params *p, const unsigned char *header,
                              size_t header_len, const dedup_allocator *alloc, dedup_key **out,
                              size_t *err_pos)
{
    size_t dummy;
    if (!err_pos)
        err_pos = &dummy;
    *err_pos = 0;
    *out = NULL;
    if (!p || p->format > DEDUP_KEY_JSON || p->delim < -1 || p->delim > 255 ||
        (p->prefix_len && !p->prefix))
        return DEDUP_ERR_INVALID_ARG;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_key *k = ddi_calloc(&a, 1, sizeof *k);
    if (!k)
        return DEDUP_ERR_NOMEM;
    k->a = a;
    k->mem = sizeof *k;
    k->fmt = p->format;
    k->delim = p->delim >= 0 ? (unsigned char)p->delim : p->format == DEDUP_KEY_CSV ? ',' : '\t';
    k->trim = p->trim;
    k->squeeze = p->squeeze;
    k->fold = p->fold_case;
    dedup_status st = DEDUP_OK;
    bool has_fields = p->fields && *p->fields;
    if (p->format == DEDUP_KEY_CSV && (k->delim == '"' || k->delim == '\n' || k->delim == '\r'))
        st = DEDUP_ERR_INVALID_ARG;
    else if (p->format == DEDUP_KEY_JSON && (has_fields || !p->json_paths))
        st = DEDUP_ERR_INVALID_ARG;
    else if (p->format != DEDUP_KEY_JSON && p->json_paths)
        st = DEDUP_ERR_INVALID_ARG;
    if (!st && has_fields)
        st = parse_fields(k, p->fields, header, header_len, err_pos);
    k->whole = !has_fields;
    if (!st && p->prefix_len) {
        k->prefix = ddi_malloc(&a, p->prefix_len);
        if (!k->prefix)
            st = DEDUP_ERR_NOMEM;
        else {
            memcpy(k->prefix, p->prefix, p->prefix_len);
            k->prefix_len = p->prefix_len;
            k->mem += p->prefix_len;
        }
    }
    if (!st)
        st = ddi_key_parsers_init(&k->parsers, p, &a, err_pos);
    if (st) {
        dedup_key_free(k);
        return st;
    }
    k->mem += k->parsers.mem;
    k->json_norm = k->fmt == DEDUP_KEY_JSON && (k->trim || k->squeeze || k->fold ||
                                                k->prefix_len || k->parsers.url);
    k->identity = k->fmt == DEDUP_KEY_PLAIN && k->whole && !k->trim && !k->squeeze && !k->fold &&
                  !k->prefix_len && !k->parsers.url;
    k->plain_elems = !k->trim && !k->squeeze && !k->fold && !k->prefix_len && !k->parsers.url;
    *out = k;
    return DEDUP_OK;
}

void dedup_key_free(dedup_key *k)
{
    if (!k)
        return;
    ddi_key_parsers_free(&k->parsers, &k->a);
    ddi_free(&k->a, k->items);
    ddi_free(&k->a, k->prefix);
    dedup_allocator a = k->a;
    ddi_free(&a, k);
}

size_t dedup_key_memory_usage(const dedup_key *k) { return k ? k->mem : 0; }

bool dedup_key_is_identity(const dedup_key *k) { return k->identity; }

static size_t sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
static size_t sat_mul(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

size_t dedup_key_bound(const dedup_key *k, size_t len)
{
    size_t temp = k->parsers.url ? sat_add(len, 1) : 0;
    if (k->single || (k->whole && k->fmt == DEDUP_KEY_PLAIN))
        return sat_add(sat_add(len, temp), 1);
    if (k->fmt == DEDUP_KEY_JSON)
        return sat_add(sat_mul(len, 2), 64);
    /* Elements: every closed item's width, and up to one per field (len + 1)
     * for an open range or the whole CSV record; each element's bytes come
     * from at most one field, and no item covers more than the record. */
    size_t elems = 0, items = k->whole ? 1 : k->n_items;
    if (k->whole)
        elems = sat_add(len, 1);
    for (size_t i = 0; i < k->n_items; i++)
        elems = sat_add(elems, k->items[i].hi == SIZE_MAX ? sat_add(len, 1)
                                                          : k->items[i].hi - k->items[i].lo + 1);
    return sat_add(sat_add(sat_mul(elems, 4), sat_mul(items, len)), sat_add(temp, 1));
}

/* ---- applying ---------------------------------------------------------- */

/* Whether --squeeze changes p[0..n). */
static bool squeeze_changes(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (is_space(p[i]) && (p[i] != ' ' || (i + 1 < n && is_space(p[i + 1]))))
            return true;
    return false;
}

static bool has_upper(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] >= 'A' && p[i] <= 'Z')
            return true;
    return false;
}

/* Normalises the element *p[0..*n), which lies in the record or at the
 * start of 'area' (cap bytes, room for *n bytes and, with URLs, *n + 1
 * more), leaving it in the record or in the area. */
static dedup_status normalise(const dedup_key *k, const unsigned char **pp, size_t *np,
                              unsigned char *area, size_t cap)
{
    const unsigned char *p = *pp;
    size_t n = *np;
    if (k->trim) {
        while (n && is_space(*p)) {
            p++;
            n--;
        }
        while (n && is_space(p[n - 1]))
            n--;
    }
    if (k->squeeze && squeeze_changes(p, n)) {
        size_t o = 0;
        bool in_space = false;
        for (size_t i = 0; i < n; i++) { /* in place when p is in the area: o <= i */
            if (is_space(p[i])) {
                if (!in_space)
                    area[o++] = ' ';
                in_space = true;
            } else {
                area[o++] = p[i];
                in_space = false;
            }
        }
        p = area;
        n = o;
    }
    if (k->parsers.url) {
        /* The canonical form goes after the element when the element is in
         * the area already, else to the area's start. */
        unsigned char *dst = (p >= area && p < area + cap) ? area + (p - area) + n : area;
        size_t olen = 0;
        if ((size_t)(dst - area) + n + 1 > cap)
            return DEDUP_ERR_FULL;
        dedup_status st = ddi_key_url(&k->parsers, p, n, dst, &olen);
        if (st)
            return st;
        p = dst;
        n = olen;
    }
    if (k->prefix_len && n >= k->prefix_len && memcmp(p, k->prefix, k->prefix_len) == 0) {
        p += k->prefix_len;
        n -= k->prefix_len;
    }
    if (k->fold && has_upper(p, n)) {
        for (size_t i = 0; i < n; i++) { /* forward: p >= area when in it */
            unsigned char c = p[i];
            area[i] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
        }
        p = area;
    }
    *pp = p;
    *np = n;
    return DEDUP_OK;
}

/* Field f (1-based) of a plain record: *p and *n, or empty past the last. */
static void plain_field(const dedup_key *k, const unsigned char *rec, size_t len, size_t f,
                        const unsigned char **p, size_t *n)
{
    const unsigned char *q = rec;
    size_t m = len;
    for (size_t i = 1; i < f; i++) {
        const unsigned char *d = memchr(q, k->delim, m);
        if (!d) {
            *p = q + m;
            *n = 0;
            return;
        }
        m -= (size_t)(d - q) + 1;
        q = d + 1;
    }
    const unsigned char *d = memchr(q, k->delim, m);
    *p = q;
    *n = d ? (size_t)(d - q) : m;
}

/* Output of a tuple: elements appended while they fit; past the room only
 * the size needed is counted. */
typedef struct tuple {
    unsigned char *out;
    size_t cap, pos;
    bool over;
} tuple;

/* Appends one element, the field p[0..n) (quoted: a CSV field still to be
 * unquoted). */
static dedup_status put_elem(const dedup_key *k, tuple *t, const unsigned char *p, size_t n,
                             bool quoted)
{
    size_t room = sat_add(sat_add(4, n), k->parsers.url ? sat_add(n, 1) : 0);
    if (t->over || room > t->cap - t->pos) {
        t->over = true;
        t->pos = sat_add(t->pos, room);
        return DEDUP_OK;
    }
    unsigned char *area = t->out + t->pos + 4;
    if (!quoted && k->plain_elems) { /* nothing to normalise: the bytes as they are */
        uint32_t l = (uint32_t)n;
        unsigned char *o = t->out + t->pos;
        o[0] = (unsigned char)l;
        o[1] = (unsigned char)(l >> 8);
        o[2] = (unsigned char)(l >> 16);
        o[3] = (unsigned char)(l >> 24);
        if (n)
            memmove(area, p, n);
        t->pos += 4 + n;
        return DEDUP_OK;
    }
    if (quoted) {
        dedup_csv_field f = {.p = p, .len = n, .quoted = true};
        n = dedup_csv_unquote(&f, area);
        p = area;
    }
    dedup_status st = normalise(k, &p, &n, area, t->cap - t->pos - 4);
    if (st)
        return st;
    if (n && p != area)
        memmove(area, p, n);
    uint32_t l = (uint32_t)n;
    unsigned char le[4] = {(unsigned char)l, (unsigned char)(l >> 8), (unsigned char)(l >> 16),
                           (unsigned char)(l >> 24)};
    memcpy(t->out + t->pos, le, 4);
    t->pos += 4 + n;
    return DEDUP_OK;
}

/* The fields of a CSV record, in order, through 'fn' with their 1-based
 * numbers; stops early when fn returns false. */
static dedup_status csv_each(const dedup_key *k, const unsigned char *rec, size_t len,
                             bool (*fn)(void *ctx, size_t idx, const dedup_csv_field *f),
                             void *ctx)
{
    size_t pos = 0, idx = 0;
    for (;;) {
        dedup_csv_field f;
        dedup_status st = dedup_csv_field_next(rec, len, k->delim, &pos, &f);
        if (st == DEDUP_ERR_RANGE)
            return DEDUP_OK;
        if (st)
            return st;
        if (!fn(ctx, ++idx, &f))
            return DEDUP_OK;
    }
}

typedef struct csv_pick {
    size_t want, got;
    dedup_csv_field f;
} csv_pick;

static bool pick_fn(void *ctx, size_t idx, const dedup_csv_field *f)
{
    csv_pick *c = ctx;
    if (idx != c->want)
        return true;
    c->f = *f;
    c->got = idx;
    return true; /* go on: a malformed field further on is still an error */
}

/* Puts the fields lo..hi of a CSV record into the tuple. */
typedef struct csv_all {
    const dedup_key *k;
    tuple *t;
    size_t lo, hi; /* the fields taken */
    dedup_status st;
} csv_all;

static bool all_fn(void *ctx, size_t idx, const dedup_csv_field *f)
{
    csv_all *c = ctx;
    if (idx < c->lo || idx > c->hi || c->st)
        return !c->st;
    c->st = put_elem(c->k, c->t, f->p, f->len, f->quoted);
    return !c->st;
}

/* Counts the fields of a CSV record (the walk also checks it is well formed). */
static bool count_fn(void *ctx, size_t idx, const dedup_csv_field *f)
{
    (void)f;
    *(size_t *)ctx = idx;
    return true;
}

#define CSV_FAST_FIELDS 128 /* fields parsed in one pass on the stack */

/* The fields of rec[0..len) into f[] (*nf of them), as dedup_csv_field_next
 * cuts them, in one pass: short unquoted fields by a byte loop, which costs
 * less than a memchr call on the few bytes a key field has.  DEDUP_ERR_RANGE
 * past CSV_FAST_FIELDS fields; DEDUP_ERR_CORRUPT as dedup_csv_field_next. */
static dedup_status csv_split(const unsigned char *rec, size_t len, unsigned char delim,
                              dedup_csv_field *f, size_t *nf)
{
    size_t n = 0, i = 0;
    if (len == 0) {
        *nf = 0;
        return DEDUP_OK;
    }
    for (;;) {
        if (n == CSV_FAST_FIELDS)
            return DEDUP_ERR_RANGE;
        if (i < len && rec[i] == '"') {
            size_t start = ++i;
            for (;;) {
                const unsigned char *q = memchr(rec + i, '"', len - i);
                if (!q)
                    return DEDUP_ERR_CORRUPT; /* the quote is still open */
                i = (size_t)(q - rec);
                if (i + 1 < len && rec[i + 1] == '"') {
                    i += 2;
                    continue;
                }
                break;
            }
            f[n].p = rec + start;
            f[n].len = i - start;
            f[n++].quoted = true;
            if (++i == len)
                break;
            if (rec[i] != delim)
                return DEDUP_ERR_CORRUPT; /* text after the closing quote */
            i++;
            continue;
        }
        size_t s = i, stop = len - i > 24 ? i + 24 : len;
        while (i < stop && rec[i] != delim)
            i++;
        if (i == stop && stop < len) {
            const unsigned char *d = memchr(rec + i, delim, len - i);
            i = d ? (size_t)(d - rec) : len;
        }
        f[n].p = rec + s;
        f[n].len = i - s;
        f[n++].quoted = false;
        if (i == len)
            break;
        i++;
    }
    *nf = n;
    return DEDUP_OK;
}

/* The tuple of the fields f[0..nf) of a record. */
static dedup_status csv_fields_tuple(const dedup_key *k, const dedup_csv_field *f, size_t nf,
                                     tuple *t)
{
    size_t n_items = k->whole ? 1 : k->n_items;
    for (size_t i = 0; i < n_items; i++) {
        item it = k->whole ? (item){1, SIZE_MAX} : k->items[i];
        size_t hi = it.hi == SIZE_MAX ? nf : it.hi;
        for (size_t j = it.lo; j <= hi; j++) {
            dedup_status st = j <= nf ? put_elem(k, t, f[j - 1].p, f[j - 1].len, f[j - 1].quoted)
                                      : put_elem(k, t, NULL, 0, false);
            if (st)
                return st;
        }
    }
    return DEDUP_OK;
}

/* The tuple of a record of at most CSV_FAST_FIELDS fields, from one pass;
 * DEDUP_ERR_RANGE when it has more (the caller walks it again). */
static dedup_status csv_tuple_fast(const dedup_key *k, const unsigned char *rec, size_t len,
                                   tuple *t)
{
    dedup_csv_field f[CSV_FAST_FIELDS];
    size_t nf = 0;
    dedup_status sst = csv_split(rec, len, k->delim, f, &nf);
    return sst ? sst : csv_fields_tuple(k, f, nf, t);
}

/* The fields of the CSV record at the front of p[0..avail) into f[] (*nf
 * of them, as csv_split cuts the record without its terminator and a '\r'
 * before it) and the record's length (the offset of its terminator, the
 * first 'term' outside quotes), in one pass.  DEDUP_ERR_RANGE when this
 * pass does not settle the record (more than CSV_FAST_FIELDS fields, text
 * or a '\r' after a closing quote, an empty record, no terminator): the
 * caller then finds its end and its key apart. */
static dedup_status csv_split_next(const unsigned char *p, size_t avail, unsigned char delim,
                                   unsigned char term, dedup_csv_field *f, size_t *nf,
                                   size_t *rec_len)
{
    size_t n = 0, i = 0;
    for (;;) {
        if (n == CSV_FAST_FIELDS)
            return DEDUP_ERR_RANGE;
        if (i < avail && p[i] == '"') {
            size_t start = ++i;
            for (;;) {
                const unsigned char *q = memchr(p + i, '"', avail - i);
                if (!q)
                    return DEDUP_ERR_RANGE;
                i = (size_t)(q - p);
                if (i + 1 < avail && p[i + 1] == '"') {
                    i += 2;
                    continue;
                }
                break;
            }
            f[n].p = p + start;
            f[n].len = i - start;
            f[n++].quoted = true;
            i++;
            if (i < avail && p[i] == delim) {
                i++;
                continue;
            }
            if (i < avail && p[i] == term) {
                *nf = n;
                *rec_len = i;
                return DEDUP_OK;
            }
            return DEDUP_ERR_RANGE;
        }
        size_t s = i;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* eight bytes at a time: the lowest flagged byte is a true one */
        const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
        while (avail - i >= 8) {
            uint64_t w, a, b;
            memcpy(&w, p + i, 8);
            a = w ^ (ones * delim);
            b = w ^ (ones * term);
            uint64_t z = (((a - ones) & ~a) | ((b - ones) & ~b)) & highs;
            if (z) {
                i += (unsigned)__builtin_ctzll(z) >> 3;
                break;
            }
            i += 8;
        }
#endif
        while (i < avail && p[i] != delim && p[i] != term)
            i++;
        if (i == avail)
            return DEDUP_ERR_RANGE;
        size_t e = i;
        bool last = p[i] == term;
        if (last && e > s && p[e - 1] == '\r')
            e--;
        f[n].p = p + s;
        f[n].len = e - s;
        f[n++].quoted = false;
        if (!last) {
            i++;
            continue;
        }
        if (i == 0 || (i == 1 && p[0] == '\r'))
            return DEDUP_ERR_RANGE; /* csv_split gives an empty record no field */
        *nf = n;
        *rec_len = i;
        return DEDUP_OK;
    }
}

static dedup_status csv_tuple(const dedup_key *k, const unsigned char *rec, size_t len, tuple *t)
{
    dedup_status fast = csv_tuple_fast(k, rec, len, t);
    if (fast != DEDUP_ERR_RANGE)
        return fast;
    t->pos = 0;
    t->over = false;
    size_t nf = 0;
    dedup_status st = csv_each(k, rec, len, count_fn, &nf); /* validates the whole record */
    if (st)
        return st;
    if (k->whole) {
        csv_all c = {.k = k, .t = t, .lo = 1, .hi = SIZE_MAX};
        st = csv_each(k, rec, len, all_fn, &c);
        return st ? st : c.st;
    }
    for (size_t i = 0; i < k->n_items; i++) {
        item it = k->items[i];
        size_t hi = it.hi == SIZE_MAX ? nf : it.hi;
        if (it.lo <= nf) {
            csv_all c = {.k = k, .t = t, .lo = it.lo, .hi = hi};
            st = csv_each(k, rec, len, all_fn, &c);
            if (st || c.st)
                return st ? st : c.st;
        }
        for (size_t f = it.lo > nf ? it.lo : nf + 1; f <= hi && it.hi != SIZE_MAX; f++) {
            st = put_elem(k, t, NULL, 0, false); /* past the last field: empty */
            if (st)
                return st;
        }
    }
    return DEDUP_OK;
}

/* A cursor over the fields of a plain record: field 'idx' is p[0..n);
 * past the last field, fields are empty ('past'). */
typedef struct fcur {
    const unsigned char *p, *end;
    size_t idx, n;
    bool last, past;
} fcur;

static void fcur_start(fcur *c, const unsigned char *rec, size_t len, unsigned char delim)
{
    const unsigned char *d = memchr(rec, delim, len);
    c->p = rec;
    c->end = rec + len;
    c->idx = 1;
    c->n = d ? (size_t)(d - rec) : len;
    c->last = !d;
    c->past = false;
}

static void fcur_next(fcur *c, unsigned char delim)
{
    c->idx++;
    if (c->last) {
        c->past = true;
        c->p = c->end;
        c->n = 0;
        return;
    }
    c->p += c->n + 1;
    const unsigned char *d = memchr(c->p, delim, (size_t)(c->end - c->p));
    c->n = d ? (size_t)(d - c->p) : (size_t)(c->end - c->p);
    c->last = !d;
}

/* A plain record's tuple: one pass over its fields when the items are in
 * increasing order, else one from the start for each item. */
static dedup_status plain_tuple(const dedup_key *k, const unsigned char *rec, size_t len, tuple *t)
{
    fcur c;
    fcur_start(&c, rec, len, k->delim);
    for (size_t i = 0; i < k->n_items; i++) {
        item it = k->items[i];
        if (c.idx > it.lo)
            fcur_start(&c, rec, len, k->delim);
        while (c.idx < it.lo)
            fcur_next(&c, k->delim);
        for (;;) {
            if (it.hi == SIZE_MAX && c.past)
                break; /* an open range ends at the last field */
            dedup_status st = put_elem(k, t, c.p, c.n, false);
            if (st)
                return st;
            if (c.idx == it.hi)
                break;
            fcur_next(&c, k->delim);
        }
    }
    return DEDUP_OK;
}

/* The pointer path: one field or the whole record, unframed. */
static dedup_status single(const dedup_key *k, const unsigned char *rec, size_t len,
                           unsigned char *out, size_t cap, const unsigned char **key, size_t *klen)
{
    const unsigned char *p = rec;
    size_t n = len;
    bool quoted = false;
    if (k->fmt == DEDUP_KEY_CSV) {
        if (len && rec[len - 1] == '\r')
            len--;
        csv_pick c = {.want = k->items[0].lo};
        dedup_status st = csv_each(k, rec, len, pick_fn, &c);
        if (st)
            return st;
        if (c.got) {
            p = c.f.p;
            n = c.f.len;
            quoted = c.f.quoted && memchr(p, '"', n) != NULL;
        } else {
            p = rec;
            n = 0;
        }
    } else if (!k->whole) {
        plain_field(k, rec, len, k->items[0].lo, &p, &n);
    }
    size_t need = sat_add(sat_add(n, k->parsers.url ? sat_add(n, 1) : 0), 0);
    if ((quoted || k->squeeze || k->fold || k->parsers.url) && need > cap) {
        *klen = need;
        return DEDUP_ERR_FULL;
    }
    if (quoted) {
        dedup_csv_field f = {.p = p, .len = n, .quoted = true};
        n = dedup_csv_unquote(&f, out);
        p = out;
    }
    dedup_status st = normalise(k, &p, &n, out, cap);
    if (st)
        return st;
    *key = p;
    *klen = n;
    return DEDUP_OK;
}

/* ---- Normalising the string values of JSON keys ------------------------------------- */

/* The decoded bytes of the canonical JSON string text t[0..n) (quotes
 * included; json.h's one escaping) into out (n bytes); returns their count. */
static size_t json_unescape(const unsigned char *t, size_t n, unsigned char *out)
{
    size_t o = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        unsigned char c = t[i];
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        c = t[++i];
        switch (c) {
        case 'b': out[o++] = 0x08; break;
        case 't': out[o++] = 0x09; break;
        case 'n': out[o++] = 0x0a; break;
        case 'f': out[o++] = 0x0c; break;
        case 'r': out[o++] = 0x0d; break;
        case 'u': { /* \u00xx, lower-case hex */
            unsigned v = 0;
            for (int d = 0; d < 4; d++) {
                unsigned char h = t[++i];
                v = v * 16 + (unsigned)(h <= '9' ? h - '0' : h - 'a' + 10);
            }
            out[o++] = (unsigned char)v;
            break;
        }
        default: out[o++] = c; break; /* '"' and '\\' */
        }
    }
    return o;
}

/* Writes p[0..n) as a canonical JSON string text at out (room for 6n + 2
 * bytes); returns its length. */
static size_t json_escape(const unsigned char *p, size_t n, unsigned char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            out[o++] = c;
            continue;
        }
        out[o++] = '\\';
        switch (c) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case 0x08: out[o++] = 'b'; break;
        case 0x09: out[o++] = 't'; break;
        case 0x0a: out[o++] = 'n'; break;
        case 0x0c: out[o++] = 'f'; break;
        case 0x0d: out[o++] = 'r'; break;
        default:
            memcpy(out + o, "u00", 3);
            out[o + 3] = (unsigned char)hex[c >> 4];
            out[o + 4] = (unsigned char)hex[c & 15];
            o += 5;
            break;
        }
    }
    out[o++] = '"';
    return o;
}

/* The JSON tuple out[0..*olen) with the normalisations applied to its string
 * values (their decoded bytes, written again canonically); with --url a
 * value that is not a string is not a URL.  The new tuple is built after
 * the old one, with a scratch area after it, then moved to out. */
static dedup_status json_normalise(const dedup_key *k, unsigned char *out, size_t cap,
                                   size_t *olen)
{
    size_t n = *olen;
    size_t need = sat_add(sat_mul(n, 11), 32);
    if (need > cap) {
        *olen = need;
        return DEDUP_ERR_FULL;
    }
    unsigned char *nt = out + n, *scratch = out + n + 8 * n + 16;
    size_t w = 0;
    for (size_t i = 0; i + 4 <= n;) {
        uint32_t l = (uint32_t)out[i] | (uint32_t)out[i + 1] << 8 | (uint32_t)out[i + 2] << 16 |
                     (uint32_t)out[i + 3] << 24;
        const unsigned char *t = out + i + 4;
        i += 4 + (size_t)l;
        if (l < 2 || t[0] != '"') {
            if (k->parsers.url)
                return DEDUP_ERR_INVALID_ARG;
            memcpy(nt + w, t - 4, 4 + (size_t)l);
            w += 4 + (size_t)l;
            continue;
        }
        size_t dl = json_unescape(t, l, scratch);
        const unsigned char *p = scratch;
        dedup_status st = normalise(k, &p, &dl, scratch, 2 * (size_t)l + 2);
        if (st)
            return st;
        size_t el = json_escape(p, dl, nt + w + 4);
        nt[w] = (unsigned char)el;
        nt[w + 1] = (unsigned char)(el >> 8);
        nt[w + 2] = (unsigned char)(el >> 16);
        nt[w + 3] = (unsigned char)(el >> 24);
        w += 4 + el;
    }
    memmove(out, nt, w);
    *olen = w;
    return DEDUP_OK;
}

/* What dedup_key_of returns for a tuple built with status st. */
static dedup_status tuple_done(const tuple *t, dedup_status st, unsigned char *out,
                               const unsigned char **key, size_t *klen)
{
    if (st) {
        *key = NULL;
        *klen = 0;
        return st;
    }
    if (t->over) {
        *klen = t->pos;
        return DEDUP_ERR_FULL;
    }
    *key = out;
    *klen = t->pos;
    return DEDUP_OK;
}

dedup_status dedup_key_of_next(const dedup_key *k, const unsigned char *p, size_t avail,
                               unsigned char term, size_t *rec_len, unsigned char *out,
                               size_t cap, const unsigned char **key, size_t *klen)
{
    if (k->fmt == DEDUP_KEY_CSV && !k->identity && !k->single && k->delim != '\r' &&
        k->delim != term && k->delim != '"') {
        dedup_csv_field f[CSV_FAST_FIELDS];
        size_t nf = 0;
        if (csv_split_next(p, avail, k->delim, term, f, &nf, rec_len) == DEDUP_OK) {
            tuple t = {.out = out, .cap = cap};
            return tuple_done(&t, csv_fields_tuple(k, f, nf, &t), out, key, klen);
        }
    }
    size_t e = avail;
    if (k->fmt == DEDUP_KEY_CSV) {
        dedup_csv_scan cs;
        size_t ne = 0, end = 0;
        dedup_csv_scan_init(&cs);
        (void)dedup_csv_scan_block(&cs, p, avail, k->delim, term, &end, 1, &ne);
        if (ne)
            e = end - 1;
    } else {
        const unsigned char *t = memchr(p, term, avail);
        if (t)
            e = (size_t)(t - p);
    }
    *rec_len = e;
    return dedup_key_of(k, p, e, out, cap, key, klen);
}

dedup_status dedup_key_of(const dedup_key *k, const unsigned char *rec, size_t len,
                          unsigned char *out, size_t cap, const unsigned char **key,
                          size_t *klen)
{
    if (k->identity) {
        *key = rec;
        *klen = len;
        return DEDUP_OK;
    }
    if (k->single || (k->whole && k->fmt == DEDUP_KEY_PLAIN))
        return single(k, rec, len, out, cap, key, klen);
    tuple t = {.out = out, .cap = cap};
    dedup_status st;
    if (k->fmt == DEDUP_KEY_JSON) {
        st = ddi_key_json(&k->parsers, rec, len, out, cap, &t.pos);
        if (!st && k->json_norm)
            st = json_normalise(k, out, cap, &t.pos);
        if (st == DEDUP_ERR_FULL) {
            *klen = t.pos;
            return st;
        }
    } else if (k->fmt == DEDUP_KEY_CSV) {
        if (len && rec[len - 1] == '\r')
            len--;
        st = csv_tuple(k, rec, len, &t);
    } else {
        st = plain_tuple(k, rec, len, &t);
    }
    return tuple_done(&t, st, out, key, klen);
}

dedup_status dedup_key_batch(const dedup_key *k, size_t n, const unsigned char *const *rec,
                             const size_t *len, unsigned char *arena, size_t cap,
                             const unsigned char **key, size_t *klen, dedup_status *st,
                             size_t *done, size_t *need, size_t *used)
{
    size_t u = 0;
    *need = 0;
    for (size_t i = 0; i < n; i++) {
        dedup_status s = dedup_key_of(k, rec[i], len[i], arena + u, cap - u, &key[i], &klen[i]);
        if (s == DEDUP_ERR_FULL) {
            *done = i;
            *need = klen[i];
            *used = u;
            return DEDUP_ERR_FULL;
        }
        st[i] = s;
        if (s) {
            key[i] = NULL;
            klen[i] = 0;
        } else if (key[i] >= arena + u && key[i] < arena + cap) {
            u = (size_t)(key[i] - arena) + klen[i];
        }
    }
    *done = n;
    *used = u;
    return DEDUP_OK;
}

/* The first malformed field of a CSV record: where, and what is wrong. */
static void csv_explain(const dedup_key *k, const unsigned char *rec, size_t len,
                        dedup_key_problem *pr)
{
    if (len && rec[len - 1] == '\r')
        len--;
    size_t pos = 0;
    for (;;) {
        size_t start = pos;
        dedup_csv_field f;
        dedup_status st = dedup_csv_field_next(rec, len, k->delim, &pos, &f);
        if (st == DEDUP_ERR_RANGE)
            return;
        if (st != DEDUP_ERR_CORRUPT)
            continue;
        /* a quoted field: its closing quote, if any, is the first '"' that
         * is not doubled */
        for (size_t i = start + 1; i < len; i++) {
            if (rec[i] != '"')
                continue;
            if (i + 1 < len && rec[i + 1] == '"') {
                i++;
                continue;
            }
            pr->what = "text after a closing quote";
            pr->offset = i + 1;
            return;
        }
        pr->what = "a quote left open";
        pr->offset = start;
        return;
    }
}

void dedup_key_explain(const dedup_key *k, const unsigned char *rec, size_t len,
                       dedup_status st, dedup_key_problem *pr)
{
    pr->what = dedup_strerror(st);
    pr->offset = SIZE_MAX;
    pr->spec_off = pr->spec_len = 0;
    if (k->fmt == DEDUP_KEY_JSON && k->parsers.json) {
        size_t pos, so, sl;
        dedup_status js = ddi_key_json_explain(&k->parsers, rec, len, &pos, &so, &sl);
        if (js == DEDUP_ERR_CORRUPT)
            pr->what = "not valid JSON or UTF-8";
        else if (js == DEDUP_ERR_LIMIT && pos != SIZE_MAX)
            pr->what = "JSON nested deeper than 64 levels";
        else if (js == DEDUP_ERR_LIMIT || st == DEDUP_ERR_LIMIT)
            pr->what = "a selected JSON number's exponent is out of range (or a value over 4 GiB)";
        else if (js == DEDUP_ERR_NOT_FOUND)
            pr->what = "a JSON path missing";
        else if (st == DEDUP_ERR_INVALID_ARG && k->parsers.url)
            pr->what = "a selected JSON value is not a string holding an absolute URL";
        pr->offset = js == DEDUP_ERR_CORRUPT || js == DEDUP_ERR_LIMIT ? pos : SIZE_MAX;
        if (js == DEDUP_ERR_NOT_FOUND) {
            pr->spec_off = so;
            pr->spec_len = sl;
        }
        return;
    }
    if (st == DEDUP_ERR_CORRUPT && k->fmt == DEDUP_KEY_CSV) {
        pr->what = "malformed CSV";
        csv_explain(k, rec, len, pr);
    } else if (st == DEDUP_ERR_INVALID_ARG && k->parsers.url) {
        pr->what = "not an absolute URL with a host";
    }
}
