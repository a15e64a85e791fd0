/*
 * json.c - JSON Lines values by path, canonical text (see json.h).
 *
 * Two steps, neither building a document tree:
 *   1. scan: one pass over the record checks all of it and, for every path,
 *      notes where its value lies in the record.  One frame per open
 *      container (a small array on the stack) holds two 64-bit path masks:
 *      the paths this container is the value of, and the paths that may go
 *      on into its children.  A member name is decoded into a stack buffer
 *      only when some path may match it.  A member that matches a path
 *      forgets what that path found before, so the last repeated name wins.
 *   2. emit: every path's value, in spec order, is translated token by token
 *      into its canonical text in 'out' (strings re-escaped, numbers
 *      rewritten, whitespace dropped).  When an object closes, its members,
 *      already canonical, are sorted in place by a bottom-up merge sort that
 *      borrows the room right after them in 'out' (so 'out' needs that much
 *      spare room), then the earlier of equal names are removed.
 */
#include "json.h"

#include <stdint.h>
#include <string.h>

#include "internal.h"

/* ---- Compiled paths ---------------------------------------------------- */

typedef struct comp {
    size_t index;    /* array index, when is_index */
    size_t name_off; /* decoded name in names[] */
    size_t name_len;
    int is_index;
} comp;

struct dd_json_paths {
    dedup_allocator alloc;
    size_t n;
    size_t max_name; /* the longest member name of any path */
    size_t first[DD_JSON_MAX_PATHS];
    size_t ncomp[DD_JSON_MAX_PATHS];
    size_t span_off[DD_JSON_MAX_PATHS], span_len[DD_JSON_MAX_PATHS]; /* in the spec */
    comp *comps;
    unsigned char *names;
};

/* ---- Output with a running size ------------------------------------------ */

typedef struct wr {
    unsigned char *out;
    size_t cap, pos;
    size_t need; /* a size enough for everything seen, once full */
    bool full;
} wr;

static inline void put(wr *w, const void *b, size_t n)
{
    if (!w->full && n <= w->cap - w->pos)
        memcpy(w->out + w->pos, b, n);
    else
        w->full = true;
    w->pos += n;
}

static inline void put1(wr *w, unsigned char c)
{
    if (!w->full && w->pos < w->cap)
        w->out[w->pos] = c;
    else
        w->full = true;
    w->pos++;
}

/* ---- Strings ------------------------------------------------------------- */

enum { SINK_CHECK, SINK_DECODE, SINK_CANON };

/* Where a string's decoded content goes: nowhere (checked only), a buffer
 * of 'cap' bytes ('n' counts on past it), or the output as canonical text. */
typedef struct sink {
    int mode;
    unsigned char *buf;
    size_t cap, n;
    wr *w;
} sink;

static inline void sink_raw(sink *k, const unsigned char *b, size_t n)
{
    if (k->mode == SINK_DECODE) {
        if (k->n <= k->cap && n <= k->cap - k->n)
            memcpy(k->buf + k->n, b, n);
        k->n += n;
    } else if (k->mode == SINK_CANON) {
        put(k->w, b, n);
    }
}

static void sink_cp(sink *k, uint32_t cp)
{
    unsigned char u[6];
    size_t n;
    if (k->mode == SINK_CANON && (cp < 0x20 || cp == '"' || cp == '\\')) {
        static const char hex[] = "0123456789abcdef";
        static const char shortesc[32] = {['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n',
                                          ['\f'] = 'f', ['\r'] = 'r'};
        u[0] = '\\';
        if (cp == '"' || cp == '\\') {
            u[1] = (unsigned char)cp;
            n = 2;
        } else if (shortesc[cp]) {
            u[1] = (unsigned char)shortesc[cp];
            n = 2;
        } else {
            memcpy(u + 1, "u00", 3);
            u[4] = (unsigned char)hex[cp >> 4];
            u[5] = (unsigned char)hex[cp & 15];
            n = 6;
        }
    } else if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | (cp >> 6));
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | (cp >> 18));
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sink_raw(k, u, n);
}

static int hex4(const unsigned char *s, uint32_t *v)
{
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = s[i];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= (uint32_t)(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            x |= (uint32_t)((c | 0x20) - 'a' + 10);
        else
            return 0;
    }
    *v = x;
    return 1;
}

/* Length of the valid UTF-8 sequence at s[0..n) (s[0] >= 0x80), 0 if none
 * (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t k;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < k; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return k;
}

/* The JSON string at s[*pos] (a '"') into 'k'.  DEDUP_OK with *pos after
 * the closing quote, or DEDUP_ERR_CORRUPT with *pos at the bad byte. */
/* The end of the run of plain bytes (0x20..0x7f but '"' and '\\', which a
 * canonical string holds as they are) at s[i..len): eight bytes at a time
 * where the host is little-endian. */
static inline size_t plain_run(const unsigned char *s, size_t i, size_t len)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    while (len - i >= 8) {
        uint64_t x, q, b;
        memcpy(&x, s + i, 8);
        q = x ^ (ones * '"');
        b = x ^ (ones * '\\');
        /* per byte: below 0x20, equal to '"' or '\\', or >= 0x80; the lowest
         * flagged byte is a true one (a borrow only runs upwards) */
        uint64_t m = ((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x;
        m &= highs;
        if (m)
            return i + ((unsigned)__builtin_ctzll(m) >> 3);
        i += 8;
    }
#endif
    while (i < len && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\')
        i++;
    return i;
}

static dedup_status str_scan(const unsigned char *s, size_t len, size_t *pos, sink *k)
{
    size_t i = *pos + 1;
    for (;;) {
        size_t r = i;
        i = plain_run(s, i, len);
        if (i > r)
            sink_raw(k, s + r, i - r);
        if (i >= len) {
            *pos = len;
            return DEDUP_ERR_CORRUPT;
        }
        unsigned char c = s[i];
        if (c == '"') {
            *pos = i + 1;
            return DEDUP_OK;
        }
        if (c >= 0x80) {
            size_t u = utf8_len(s + i, len - i);
            if (!u) {
                *pos = i;
                return DEDUP_ERR_CORRUPT;
            }
            sink_raw(k, s + i, u);
            i += u;
            continue;
        }
        if (c != '\\' || i + 1 >= len) { /* a control character, or '\' at the end */
            *pos = c == '\\' ? len : i;
            return DEDUP_ERR_CORRUPT;
        }
        unsigned char e = s[i + 1];
        uint32_t cp;
        switch (e) {
        case '"': case '\\': case '/': cp = e; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (len - i < 6 || !hex4(s + i + 2, &cp)) {
                *pos = i;
                return DEDUP_ERR_CORRUPT;
            }
            if (cp >= 0xDC00 && cp <= 0xDFFF) { /* a low surrogate first */
                *pos = i;
                return DEDUP_ERR_CORRUPT;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (len - i < 12 || s[i + 6] != '\\' || s[i + 7] != 'u' ||
                    !hex4(s + i + 8, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    *pos = i;
                    return DEDUP_ERR_CORRUPT;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
            i += 4;
            break;
        default:
            *pos = i;
            return DEDUP_ERR_CORRUPT;
        }
        sink_cp(k, cp);
        i += 2;
    }
}

/* ---- Numbers ------------------------------------------------------------- */

typedef struct num {
    size_t end;          /* offset after the number */
    bool neg;
    size_t i0, ni;       /* integer digits */
    size_t f0, nf;       /* fraction digits */
    bool exp_neg, exp_big;
    uint64_t exp;        /* exponent's magnitude, when not exp_big */
} num;

#define EXP_MAX UINT64_C(1000000000000000000)

static inline bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* The number at s[pos]: false with *bad at the first wrong byte. */
static bool num_scan(const unsigned char *s, size_t len, size_t pos, num *n, size_t *bad)
{
    size_t i = pos;
    memset(n, 0, sizeof *n);
    if (i < len && s[i] == '-') {
        n->neg = true;
        i++;
    }
    n->i0 = i;
    if (i < len && s[i] == '0') {
        i++;
    } else if (i < len && s[i] >= '1' && s[i] <= '9') {
        while (i < len && is_digit(s[i]))
            i++;
    } else {
        *bad = i;
        return false;
    }
    n->ni = i - n->i0;
    if (i < len && s[i] == '.') {
        i++;
        n->f0 = i;
        while (i < len && is_digit(s[i]))
            i++;
        n->nf = i - n->f0;
        if (!n->nf) {
            *bad = i;
            return false;
        }
    }
    if (i < len && (s[i] | 0x20) == 'e') {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            n->exp_neg = s[i++] == '-';
        size_t e0 = i;
        while (i < len && is_digit(s[i])) {
            if (!n->exp_big) {
                n->exp = n->exp * 10 + (uint64_t)(s[i] - '0');
                if (n->exp > EXP_MAX)
                    n->exp_big = true;
            }
            i++;
        }
        if (i == e0) {
            *bad = i;
            return false;
        }
    }
    n->end = i;
    return true;
}

static inline unsigned char num_digit(const unsigned char *s, const num *n, size_t k)
{
    return k < n->ni ? s[n->i0 + k] : s[n->f0 + (k - n->ni)];
}

static void put_i64(wr *w, int64_t v)
{
    char t[24];
    int k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        put1(w, '-');
    do {
        t[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (k)
        put1(w, (unsigned char)t[--k]);
}

/* Writes the canonical text of a scanned number (see json.h). */
static dedup_status num_canon(const unsigned char *s, const num *n, wr *w)
{
    if (n->exp_big)
        return DEDUP_ERR_LIMIT;
    size_t nd = n->ni + n->nf, first = 0, last = nd;
    while (first < nd && num_digit(s, n, first) == '0')
        first++;
    if (first == nd) {
        put1(w, '0');
        return DEDUP_OK;
    }
    while (num_digit(s, n, last - 1) == '0')
        last--;
    /* value = digits[first..last) * 10^e, e the exponent of the last digit */
    int64_t e = (n->exp_neg ? -(int64_t)n->exp : (int64_t)n->exp) - (int64_t)n->nf +
                (int64_t)(nd - last);
    size_t nsig = last - first;
    if (n->neg)
        put1(w, '-');
    if (e >= 0 && e <= 21) {
        for (size_t k = first; k < last; k++)
            put1(w, num_digit(s, n, k));
        for (int64_t z = 0; z < e; z++)
            put1(w, '0');
        return DEDUP_OK;
    }
    put1(w, num_digit(s, n, first));
    if (nsig > 1) {
        put1(w, '.');
        for (size_t k = first + 1; k < last; k++)
            put1(w, num_digit(s, n, k));
    }
    put1(w, 'e');
    put_i64(w, e + (int64_t)nsig - 1);
    return DEDUP_OK;
}

/* ---- Scan: check the record, find the paths' values ---------------------- */

typedef struct frame {
    uint64_t vmask; /* paths whose value is this container */
    uint64_t dmask; /* paths that may go on into its children */
    size_t index;   /* arrays: the current element */
    bool obj;
} frame;

typedef struct spans {
    size_t start[DD_JSON_MAX_PATHS], end[DD_JSON_MAX_PATHS];
    uint64_t found;
} spans;

static inline size_t skip_ws(const unsigned char *s, size_t len, size_t i)
{
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* The paths of 'dm' whose component 'k' is the member name[0..nlen) (or,
 * nlen == SIZE_MAX, the array element 'index'): those it ends in into *vm,
 * those going on into *dm_out.  They forget what they found before. */
static void child_masks(const dd_json_paths *p, uint64_t dm, size_t k, const unsigned char *name,
                        size_t nlen, size_t index, uint64_t *vm, uint64_t *dm_out, spans *sp)
{
    uint64_t v = 0, d = 0;
    while (dm) {
        unsigned b = (unsigned)__builtin_ctzll(dm);
        dm &= dm - 1;
        const comp *c = &p->comps[p->first[b] + k];
        bool hit = nlen == SIZE_MAX
                       ? (c->is_index && c->index == index)
                       : (!c->is_index && c->name_len == nlen &&
                          (nlen == 0 || (p->names[c->name_off] == name[0] &&
                                         memcmp(p->names + c->name_off, name, nlen) == 0)));
        if (!hit)
            continue;
        if (p->ncomp[b] == k + 1)
            v |= UINT64_C(1) << b;
        else
            d |= UINT64_C(1) << b;
    }
    sp->found &= ~(v | d);
    *vm = v;
    *dm_out = d;
}

/* A member's name and ':' at s[*pos], then the masks of its value. */
static dedup_status member(const dd_json_paths *p, const unsigned char *s, size_t len,
                           size_t *pos, const frame *f, size_t k, uint64_t *vm, uint64_t *dm,
                           spans *sp)
{
    unsigned char name[DD_JSON_MAX_NAME];
    size_t i = skip_ws(s, len, *pos);
    if (i >= len || s[i] != '"') {
        *pos = i;
        return DEDUP_ERR_CORRUPT;
    }
    sink nk = {f->dmask ? SINK_DECODE : SINK_CHECK, name, p->max_name, 0, NULL};
    dedup_status st = str_scan(s, len, &i, &nk);
    if (st != DEDUP_OK) {
        *pos = i;
        return st;
    }
    i = skip_ws(s, len, i);
    if (i >= len || s[i] != ':') {
        *pos = i;
        return DEDUP_ERR_CORRUPT;
    }
    *pos = i + 1;
    *vm = *dm = 0;
    if (f->dmask && nk.n <= p->max_name)
        child_masks(p, f->dmask, k, name, nk.n, 0, vm, dm, sp);
    return DEDUP_OK;
}

static dedup_status scan(const dd_json_paths *p, const unsigned char *s, size_t len, spans *sp,
                         size_t *bad_pos)
{
    frame st[DD_JSON_MAX_DEPTH];
    size_t depth = 0, i = 0;
    uint64_t vm = 0, dm = 0;
    for (size_t b = 0; b < p->n; b++) {
        if (p->ncomp[b])
            dm |= UINT64_C(1) << b;
        else
            vm |= UINT64_C(1) << b;
    }
    sp->found = 0;
    dedup_status e;
    for (;;) {
        /* a value, whose paths are vm (ending here) and dm (going on) */
        i = skip_ws(s, len, i);
        if (i >= len)
            goto corrupt;
        for (uint64_t m = vm; m; m &= m - 1)
            sp->start[__builtin_ctzll(m)] = i;
        unsigned char c = s[i];
        if (c == '{' || c == '[') {
            if (depth == DD_JSON_MAX_DEPTH) {
                *bad_pos = i;
                return DEDUP_ERR_LIMIT;
            }
            frame *f = &st[depth++];
            *f = (frame){vm, dm, 0, c == '{'};
            i = skip_ws(s, len, i + 1);
            if (i < len && s[i] == (c == '{' ? '}' : ']')) {
                i++;
                goto close;
            }
            if (f->obj) {
                if ((e = member(p, s, len, &i, f, depth - 1, &vm, &dm, sp)) != DEDUP_OK)
                    goto fail;
            } else if (f->dmask) {
                child_masks(p, f->dmask, depth - 1, NULL, SIZE_MAX, 0, &vm, &dm, sp);
            } else {
                vm = dm = 0;
            }
            continue;
        }
        if (c == '"') {
            sink none = {SINK_CHECK, NULL, 0, 0, NULL};
            if ((e = str_scan(s, len, &i, &none)) != DEDUP_OK)
                goto fail;
        } else if (c == '-' || is_digit(c)) {
            num n;
            if (!num_scan(s, len, i, &n, &i))
                goto corrupt;
            i = n.end;
        } else if (c == 't' && len - i >= 4 && memcmp(s + i, "true", 4) == 0) {
            i += 4;
        } else if (c == 'f' && len - i >= 5 && memcmp(s + i, "false", 5) == 0) {
            i += 5;
        } else if (c == 'n' && len - i >= 4 && memcmp(s + i, "null", 4) == 0) {
            i += 4;
        } else {
            goto corrupt;
        }
        for (uint64_t m = vm; m; m &= m - 1)
            sp->end[__builtin_ctzll(m)] = i;
        sp->found |= vm;
        /* after a value: ',' or the end of its container, or of the record */
        for (;;) {
            i = skip_ws(s, len, i);
            if (depth == 0) {
                if (i != len)
                    goto corrupt;
                return DEDUP_OK;
            }
            frame *f = &st[depth - 1];
            if (i >= len)
                goto corrupt;
            if (s[i] == ',') {
                i++;
                if (f->obj) {
                    if ((e = member(p, s, len, &i, f, depth - 1, &vm, &dm, sp)) != DEDUP_OK)
                        goto fail;
                } else if (f->dmask) {
                    f->index++;
                    child_masks(p, f->dmask, depth - 1, NULL, SIZE_MAX, f->index, &vm, &dm, sp);
                } else {
                    vm = dm = 0;
                }
                break;
            }
            if (s[i] != (f->obj ? '}' : ']'))
                goto corrupt;
            i++;
        close:
            f = &st[depth - 1];
            for (uint64_t m = f->vmask; m; m &= m - 1)
                sp->end[__builtin_ctzll(m)] = i;
            sp->found |= f->vmask;
            depth--;
        }
    }
corrupt:
    e = DEDUP_ERR_CORRUPT;
fail:
    *bad_pos = i;
    return e;
}

/* ---- Emit: canonical text of a checked value ----------------------------- */

/* End of the canonical member or element at t[i..end): the offset of the
 * ',' after it at depth 0, or 'end'. */
static size_t skip_item(const unsigned char *t, size_t i, size_t end)
{
    int depth = 0;
    for (; i < end; i++) {
        unsigned char c = t[i];
        if (c == '"') {
            for (i++; i < end && t[i] != '"'; i++)
                if (t[i] == '\\')
                    i++;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == ',' && depth == 0) {
            return i;
        }
    }
    return end;
}

/* End of the 'k' items starting at t[i] (k >= 1). */
static size_t skip_items(const unsigned char *t, size_t i, size_t end, size_t k)
{
    for (;;) {
        i = skip_item(t, i, end);
        if (--k == 0 || i >= end)
            return i;
        i++;
    }
}

/* The name of the canonical member at t[i] (a '"'): its text between the
 * quotes, t[i+1 .. *e). */
static size_t name_end(const unsigned char *t, size_t i)
{
    for (i++; t[i] != '"'; i++)
        if (t[i] == '\\')
            i++;
    return i;
}

static int name_cmp(const unsigned char *t, size_t a, size_t b)
{
    size_t ae = name_end(t, a), be = name_end(t, b);
    size_t an = ae - a - 1, bn = be - b - 1;
    int c = memcmp(t + a + 1, t + b + 1, an < bn ? an : bn);
    if (c)
        return c;
    return an < bn ? -1 : an > bn;
}

/* Merges the runs t[l0..l1) and t[r0..r1) (r0 = l1 + 1, past their ',')
 * through 'tmp', stable. */
static void merge_runs(unsigned char *t, size_t l0, size_t l1, size_t r0, size_t r1,
                       unsigned char *tmp)
{
    size_t x = l0, y = r0, o = 0;
    while (x < l1 || y < r1) {
        size_t from, to;
        if (y >= r1 || (x < l1 && name_cmp(t, x, y) <= 0)) {
            from = x;
            to = skip_item(t, x, l1);
            x = to + 1;
        } else {
            from = y;
            to = skip_item(t, y, r1);
            y = to + 1;
        }
        if (o)
            tmp[o++] = ',';
        memcpy(tmp + o, t + from, to - from);
        o += to - from;
    }
    memcpy(t + l0, tmp, o);
}

/* Sorts the canonical members out[a..b) of an object by name and keeps the
 * last of equal names; returns their new end.  Needs out[b..2b-a). */
static size_t sort_members(unsigned char *t, size_t a, size_t b)
{
    size_t m = 0;
    for (size_t i = a; i < b; i = skip_item(t, i, b) + 1)
        m++;
    for (size_t width = 1; width < m; width *= 2) {
        for (size_t i = a; i < b;) {
            size_t l1 = skip_items(t, i, b, width);
            if (l1 >= b)
                break;
            size_t r1 = skip_items(t, l1 + 1, b, width);
            merge_runs(t, i, l1, l1 + 1, r1, t + b);
            i = r1 + 1;
        }
    }
    size_t w = a;
    for (size_t x = a; x < b;) {
        size_t xe = skip_item(t, x, b), nx = xe < b ? xe + 1 : b;
        if (nx < b && name_cmp(t, x, nx) == 0) {
            x = nx; /* a later member has this name */
            continue;
        }
        if (w > a)
            t[w++] = ',';
        memmove(t + w, t + x, xe - x);
        w += xe - x;
        x = nx;
    }
    return w;
}

/* Writes the canonical text of the checked value s[i..end). */
static dedup_status emit(const unsigned char *s, size_t i, size_t end, wr *w)
{
    size_t open[DD_JSON_MAX_DEPTH + 1];
    size_t depth = 0;
    while (i < end) {
        unsigned char c = s[i];
        switch (c) {
        case ' ': case '\t': case '\n': case '\r':
            i++;
            break;
        case '{': case '[':
            put1(w, c);
            open[depth++] = w->pos;
            i++;
            break;
        case '}': {
            size_t a = open[--depth], b = w->pos;
            size_t room = b + (b - a);
            if (!w->full && room > w->cap)
                w->full = true;
            if (w->full) {
                if (room > w->need)
                    w->need = room;
            } else if (b > a) {
                w->pos = sort_members(w->out, a, b);
            }
            put1(w, '}');
            i++;
            break;
        }
        case ']':
            depth--;
            put1(w, c);
            i++;
            break;
        case ',': case ':':
            put1(w, c);
            i++;
            break;
        case '"': {
            sink k = {SINK_CANON, NULL, 0, 0, w};
            put1(w, '"');
            if (str_scan(s, end, &i, &k) != DEDUP_OK)
                return DEDUP_ERR_CORRUPT;
            put1(w, '"');
            break;
        }
        case 't':
            put(w, "true", 4);
            i += 4;
            break;
        case 'f':
            put(w, "false", 5);
            i += 5;
            break;
        case 'n':
            put(w, "null", 4);
            i += 4;
            break;
        default: {
            num n;
            size_t bad;
            if (!num_scan(s, end, i, &n, &bad))
                return DEDUP_ERR_CORRUPT;
            dedup_status st = num_canon(s, &n, w);
            if (st != DEDUP_OK)
                return st;
            i = n.end;
        }
        }
    }
    return DEDUP_OK;
}

dedup_status dd_json_extract(const dd_json_paths *p, const unsigned char *line, size_t len,
                             unsigned char *out, size_t cap, size_t *olen, size_t *bad_path,
                             size_t *bad_pos)
{
    spans sp;
    size_t dummy;
    *olen = 0;
    if (!bad_pos)
        bad_pos = &dummy;
    if (!bad_path)
        bad_path = &dummy;
    dedup_status st = scan(p, line, len, &sp, bad_pos);
    if (st != DEDUP_OK)
        return st;
    uint64_t all = p->n == 64 ? ~UINT64_C(0) : (UINT64_C(1) << p->n) - 1;
    if (sp.found != all) {
        *bad_path = (size_t)__builtin_ctzll(all & ~sp.found);
        return DEDUP_ERR_NOT_FOUND;
    }
    wr w = {out, cap, 0, 0, false};
    for (size_t b = 0; b < p->n; b++) {
        size_t at = w.pos;
        put(&w, "\0\0\0", 4);
        if ((st = emit(line, sp.start[b], sp.end[b], &w)) != DEDUP_OK)
            return st;
        size_t n = w.pos - at - 4;
        if (n > UINT32_MAX)
            return DEDUP_ERR_LIMIT;
        if (!w.full) {
            out[at] = (unsigned char)n;
            out[at + 1] = (unsigned char)(n >> 8);
            out[at + 2] = (unsigned char)(n >> 16);
            out[at + 3] = (unsigned char)(n >> 24);
        }
    }
    if (w.full) {
        *olen = w.pos > w.need ? w.pos : w.need;
        return DEDUP_ERR_FULL;
    }
    *olen = w.pos;
    return DEDUP_OK;
}

/* ---- Compiling a spec ---------------------------------------------------- */

size_t dd_json_paths_count(const dd_json_paths *p)
{
    return p->n;
}

void dd_json_paths_free(dd_json_paths *p)
{
    if (p) {
        dedup_allocator a = p->alloc;
        ddi_free(&a, p);
    }
}

/* One component at spec[*i] after a '.' or at a '['; appends it to 'p'. */
static bool parse_comp(const char *spec, size_t len, size_t *i, dd_json_paths *p, size_t *nc,
                       size_t *nn)
{
    const unsigned char *s = (const unsigned char *)spec;
    size_t j = *i;
    comp *c = &p->comps[*nc];
    memset(c, 0, sizeof *c);
    if (s[j] == '[') {
        size_t v = 0, d0 = ++j;
        while (j < len && is_digit(s[j])) {
            if (v > (SIZE_MAX - 9) / 10)
                return false;
            v = v * 10 + (size_t)(s[j++] - '0');
        }
        if (j == d0 || j >= len || s[j] != ']')
            return false;
        c->is_index = 1;
        c->index = v;
        *i = j + 1;
    } else if (s[j] == '"') {
        sink k = {SINK_DECODE, p->names + *nn, len, 0, NULL};
        if (str_scan(s, len, &j, &k) != DEDUP_OK || k.n > DD_JSON_MAX_NAME)
            return false;
        c->name_off = *nn;
        c->name_len = k.n;
        *i = j;
    } else {
        while (j < len && s[j] != '.' && s[j] != '[' && s[j] != ']' && s[j] != ',' && s[j] != '"')
            j++;
        if (j == *i || j - *i > DD_JSON_MAX_NAME)
            return false;
        memcpy(p->names + *nn, s + *i, j - *i);
        c->name_off = *nn;
        c->name_len = j - *i;
        *i = j;
    }
    *nn += c->name_len;
    if (!c->is_index && c->name_len > p->max_name)
        p->max_name = c->name_len;
    (*nc)++;
    return true;
}

dedup_status dd_json_paths_compile(const char *spec, const dedup_allocator *alloc,
                                   dd_json_paths **out, size_t *err_pos)
{
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    *out = NULL;
    *err_pos = 0;
    size_t len = strlen(spec), size;
    /* at most one component per byte and DD_JSON_MAX_DEPTH per path (the
     * loop below checks it), decoded names no longer than the spec */
    size_t maxc = len + 1 < DD_JSON_MAX_PATHS * DD_JSON_MAX_DEPTH ? len + 1
                                                                   : DD_JSON_MAX_PATHS * DD_JSON_MAX_DEPTH;
    if (!ddi_mul_size(maxc, sizeof(comp), &size) ||
        !ddi_add_size(size, sizeof(dd_json_paths) + len + 1, &size))
        return DEDUP_ERR_NOMEM;
    dd_json_paths *p = ddi_malloc(&a, size);
    if (!p)
        return DEDUP_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->alloc = a;
    p->comps = (comp *)(p + 1);
    p->names = (unsigned char *)(p->comps + maxc);
    size_t i = 0, nc = 0, nn = 0;
    for (;;) {
        if (spec[i] != '.' || p->n == DD_JSON_MAX_PATHS)
            goto bad;
        p->first[p->n] = nc;
        p->span_off[p->n] = i;
        i++;
        if (spec[i] != ',' && spec[i] != 0) {
            if (!parse_comp(spec, len, &i, p, &nc, &nn))
                goto bad;
            while (spec[i] != ',' && spec[i] != 0) {
                if (spec[i] == '.')
                    i++;
                else if (spec[i] != '[')
                    goto bad;
                if (nc - p->first[p->n] == DD_JSON_MAX_DEPTH ||
                    !parse_comp(spec, len, &i, p, &nc, &nn))
                    goto bad;
            }
        }
        p->ncomp[p->n] = nc - p->first[p->n];
        p->span_len[p->n] = i - p->span_off[p->n];
        p->n++;
        if (spec[i] == 0)
            break;
        i++;
    }
    *out = p;
    return DEDUP_OK;
bad:
    *err_pos = i;
    ddi_free(&a, p);
    return DEDUP_ERR_INVALID_ARG;
}

bool dd_json_path_span(const dd_json_paths *p, size_t i, size_t *off, size_t *len)
{
    if (!p || i >= p->n)
        return false;
    *off = p->span_off[i];
    *len = p->span_len[i];
    return true;
}
