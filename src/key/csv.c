/* csv.c - RFC 4180 record and field splitting (see dedup/key.h).
 *
 * The record splitter is a five-state machine over the bytes; only a quote
 * at a field's start opens a quoted field, so outside quotes it runs a
 * memchr for the next '"' and takes every terminator before it as a record
 * end without looking at the bytes in between; inside quotes it runs a
 * memchr for the closing quote. */
#define _GNU_SOURCE /* memrchr */
#include "dedup/key.h"

#include <stdint.h>
#include <string.h>

enum { REC_START = 0, FIELD_START, UNQUOTED, QUOTED, QUOTE_SEEN };

/* Bytes looked at eight at a time before a search falls back to memchr:
 * CSV records and fields are short, and a memchr call costs more than the
 * few words they take; past this, memchr's wide loads win. */
#define NEAR_BYTES 96

/* The offset of the first byte a or b in p[i, min(len, i + NEAR_BYTES)), or
 * that bound when there is none. */
static inline size_t near_stop(size_t i, size_t len)
{
    return len - i > NEAR_BYTES ? i + NEAR_BYTES : len;
}

static inline size_t find2_near(const unsigned char *p, size_t i, size_t len, unsigned char a,
                                unsigned char b)
{
    size_t stop = near_stop(i, len);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    const uint64_t ma = ones * a, mb = ones * b;
    while (i + 8 <= stop) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        uint64_t xa = w ^ ma, xb = w ^ mb;
        /* a zero byte of xa or xb sets its high bit; bits above the first
         * may be false, the lowest (the first byte in memory) never is */
        uint64_t z = (((xa - ones) & ~xa) | ((xb - ones) & ~xb)) & highs;
        if (z)
            return i + (size_t)(__builtin_ctzll(z) >> 3);
        i += 8;
    }
#endif
    while (i < stop && p[i] != a && p[i] != b)
        i++;
    return i;
}

/* The first byte c in p[i, len): its pointer, or NULL. */
static inline const unsigned char *find1(const unsigned char *p, size_t i, size_t len,
                                         unsigned char c)
{
    size_t j = find2_near(p, i, len, c, c);
    if (j < near_stop(i, len))
        return p + j;
    return j < len ? memchr(p + j, c, len - j) : NULL;
}

void dedup_csv_scan_init(dedup_csv_scan *s) { s->state = REC_START; }

bool dedup_csv_scan_at_start(const dedup_csv_scan *s) { return s->state == REC_START; }

/* Records the terminators in p[from, to) (outside quotes) as record ends;
 * false when the cap is reached (*stop = the last end reported). */
static bool ends_in(const unsigned char *p, size_t from, size_t to, unsigned char term,
                    size_t *all_ends, size_t cap, size_t *n, size_t *last)
{
    if (!all_ends) {
        const unsigned char *t = from < to ? memrchr(p + from, term, to - from) : NULL;
        if (t)
            *last = (size_t)(t - p) + 1;
        return true;
    }
    while (from < to) {
        const unsigned char *t = memchr(p + from, term, to - from);
        if (!t)
            break;
        if (*n == cap)
            return false;
        from = (size_t)(t - p) + 1;
        all_ends[(*n)++] = from;
        *last = from;
    }
    return true;
}

/* The state after p[from, to), which holds no quote, starting in an
 * unquoted state 'st'. */
static int state_after(const unsigned char *p, size_t from, size_t to, int st, unsigned char delim,
                       unsigned char term)
{
    if (from == to)
        return st;
    unsigned char c = p[to - 1];
    return c == term ? REC_START : c == delim ? FIELD_START : UNQUOTED;
}

size_t dedup_csv_scan_block(dedup_csv_scan *s, const unsigned char *p, size_t len,
                            unsigned char delim, unsigned char term, size_t *all_ends,
                            size_t ends_cap, size_t *n_ends)
{
    size_t i = 0, last = 0, n = 0;
    int st = s->state;
    while (i < len) {
        if (st == QUOTED) {
            const unsigned char *q = find1(p, i, len, '"');
            if (!q) {
                i = len;
                break;
            }
            i = (size_t)(q - p) + 1;
            st = QUOTE_SEEN;
            continue;
        }
        if (st == QUOTE_SEEN) {
            unsigned char c = p[i];
            if (c == '"') {
                st = QUOTED;
                i++;
                continue;
            }
            st = UNQUOTED; /* a delimiter or terminator is taken below */
            if (c == delim) {
                st = FIELD_START;
                i++;
                continue;
            }
            if (c != term) {
                i++; /* text after the closing quote: malformed, the field goes on unquoted */
                continue;
            }
        }
        /* Unquoted: up to the next quote nothing but terminators matters.
         * Record by record, the quote is looked for up to the next
         * terminator only (a quote-free stream is then one pass). */
        if (all_ends) {
            /* the first terminator or quote: near by words, else by memchr */
            size_t j = find2_near(p, i, len, term, '"');
            const unsigned char *t = NULL, *q1 = NULL;
            if (j < near_stop(i, len) && p[j] == '"')
                q1 = p + j;
            else if (j < near_stop(i, len))
                t = p + j;
            else if (j < len) {
                t = memchr(p + j, term, len - j);
                q1 = memchr(p + j, '"', (t ? (size_t)(t - p) : len) - j);
            }
            size_t lim = t ? (size_t)(t - p) : len;
            if (!q1) {
                st = state_after(p, i, lim, st, delim, term);
                if (!t) {
                    i = len;
                    break;
                }
                i = lim + 1;
                all_ends[n++] = i;
                last = i;
                st = REC_START;
                if (n == ends_cap) {
                    s->state = REC_START;
                    *n_ends = n;
                    return last;
                }
                continue;
            }
            size_t to1 = (size_t)(q1 - p);
            st = state_after(p, i, to1, st, delim, term);
            st = (st == REC_START || st == FIELD_START) ? QUOTED : UNQUOTED;
            i = to1 + 1;
            continue;
        }
        const unsigned char *q = memchr(p + i, '"', len - i);
        size_t to = q ? (size_t)(q - p) : len;
        if (!ends_in(p, i, to, term, all_ends, ends_cap, &n, &last)) {
            s->state = REC_START;
            *n_ends = n;
            return last;
        }
        st = state_after(p, i, to, st, delim, term);
        if (!q) {
            i = len;
            break;
        }
        /* The quote opens a field only at the field's start. */
        st = (st == REC_START || st == FIELD_START) ? QUOTED : UNQUOTED;
        i = to + 1;
    }
    s->state = st;
    if (n_ends)
        *n_ends = n;
    return last;
}

dedup_status dedup_csv_field_next(const unsigned char *rec, size_t len, unsigned char delim,
                                  size_t *pos, dedup_csv_field *f)
{
    size_t i = *pos;
    if (i > len || (len == 0 && i == 0)) {
        *pos = len + 1;
        return DEDUP_ERR_RANGE;
    }
    if (i < len && rec[i] == '"') {
        size_t start = i + 1, j = start;
        for (;;) {
            const unsigned char *q = j < len ? memchr(rec + j, '"', len - j) : NULL;
            if (!q)
                return DEDUP_ERR_CORRUPT; /* the quote is still open at the record's end */
            j = (size_t)(q - rec);
            if (j + 1 < len && rec[j + 1] == '"') {
                j += 2;
                continue;
            }
            break;
        }
        f->p = rec + start;
        f->len = j - start;
        f->quoted = true;
        if (j + 1 == len) {
            *pos = len + 1;
            return DEDUP_OK;
        }
        if (rec[j + 1] != delim)
            return DEDUP_ERR_CORRUPT; /* text after the closing quote */
        *pos = j + 2;
        return DEDUP_OK;
    }
    const unsigned char *d = i < len ? memchr(rec + i, delim, len - i) : NULL;
    size_t end = d ? (size_t)(d - rec) : len;
    f->p = rec + i;
    f->len = end - i;
    f->quoted = false;
    *pos = d ? end + 1 : len + 1;
    return DEDUP_OK;
}

size_t dedup_csv_unquote(const dedup_csv_field *f, unsigned char *out)
{
    if (!f->quoted) {
        memcpy(out, f->p, f->len);
        return f->len;
    }
    size_t o = 0, i = 0;
    while (i < f->len) {
        const unsigned char *q = memchr(f->p + i, '"', f->len - i);
        size_t to = q ? (size_t)(q - f->p) + 1 : f->len; /* keep one quote of the pair */
        memcpy(out + o, f->p + i, to - i);
        o += to - i;
        i = q ? to + 1 : f->len;
    }
    return o;
}
