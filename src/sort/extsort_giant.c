/*
 * extsort_giant.c - giant records of the external engine: records longer
 * than es->giant_min (with params.emit_piece) are kept out of tables and
 * streams, deduplicated by streaming comparisons from their own temporary
 * file, and written out among the other output in its order.
 */
#define _GNU_SOURCE /* O_TMPFILE, O_CLOEXEC, pread, pwritev */
#include "extsort_internal.h"

#include <unistd.h>

/* ---- Giant records ------------------------------------------------------------
 * With params.emit_piece set, a record that is its own key and is longer than
 * es->giant_min (pushed in pieces, or whole by push()) never enters a table or
 * a stream: its bytes go, as compressed frames, straight to the giant file GF
 * and an entry (sequence number, digest, extent, length, count) stays in
 * memory.  A new giant is compared with the earlier distinct giants of the
 * same digest and length by streaming both from GF (two frame readers); a
 * repeat only counts (its bytes are truncated away again, except for
 * DUPLICATES output, which must write it later).  Giants are written out by
 * streaming them from GF to emit_piece: at once while first-occurrence output
 * streams, else interleaved with the other output at the top level in
 * sequence order (ddi_es_node_out) or, in sorted order, in key order: no ordinary
 * key is longer than giant_min, so the giant's first giant_min bytes decide
 * where it goes, and the giants are sorted among themselves by streaming
 * comparisons before the final merge. */

/* The giants' share of the budget: the staging buffer, two frame readers and
 * the streaming digest state. */
size_t ddi_es_giant_reserve(const dedup_extsort *es)
{
    return es->p.emit_piece ? es->giant_min + 4 * es->frame + 2 * sizeof(reader) +
                                  sizeof(XXH3_state_t) + 64
                            : 0;
}

/* Drops what was appended to 'f' from 'off' on (a repeated giant). */
static void tf_truncate(tfile *f, uint64_t off)
{
    if (f->fd >= 0 && f->size > off && ftruncate(f->fd, (off_t)off) == 0 &&
        lseek(f->fd, (off_t)off, SEEK_SET) == (off_t)off)
        f->size = off;
}

/* Makes the next bytes of a raw-stream reader available; false at its end. */
static dedup_status rd_more(dedup_extsort *es, reader *r, bool *more)
{
    dedup_status s = DEDUP_OK;
    if (r->lo == r->hi)
        s = ddi_es_rd_fill(es, r, 1);
    *more = s == DEDUP_OK && r->lo < r->hi;
    return s;
}

/* Streams giants a and b from GF and compares them as keys (memcmp, then
 * shorter first). */
static dedup_status giant_cmp(dedup_extsort *es, const giant *a, const giant *b, int *res)
{
    blk ea = {a->off, a->dlen}, eb = {b->off, b->dlen};
    reader ra, rb;
    memset(&rb, 0, sizeof rb);
    dedup_status s = ddi_es_rd_init(es, &ra, &es->gf, &ea, 1, 2 * es->frame, 0);
    if (s == DEDUP_OK)
        s = ddi_es_rd_init(es, &rb, &es->gf, &eb, 1, 2 * es->frame, 0);
    *res = 0;
    while (s == DEDUP_OK) {
        bool ma, mb;
        if ((s = rd_more(es, &ra, &ma)) != DEDUP_OK || (s = rd_more(es, &rb, &mb)) != DEDUP_OK)
            break;
        if (!ma || !mb) {
            *res = ma ? 1 : mb ? -1 : 0;
            break;
        }
        size_t na = ra.hi - ra.lo, nb = rb.hi - rb.lo, m = na < nb ? na : nb;
        int c = memcmp(ra.buf + ra.lo, rb.buf + rb.lo, m);
        if (c) {
            *res = c;
            break;
        }
        ra.lo += m;
        rb.lo += m;
    }
    ddi_es_rd_free(es, &ra);
    ddi_es_rd_free(es, &rb);
    return s;
}

/* Streams giant g from GF to emit_piece. */
static dedup_status giant_emit(dedup_extsort *es, giant *g)
{
    blk e = {g->off, g->dlen};
    reader r;
    dedup_status s = ddi_es_rd_init(es, &r, &es->gf, &e, 1, 2 * es->frame, 0);
    uint64_t left = g->rawlen;
    bool first = true;
    while (s == DEDUP_OK && left > 0) {
        bool more;
        if ((s = rd_more(es, &r, &more)) != DEDUP_OK)
            break;
        size_t n = r.hi - r.lo;
        if (!more || n > left) {
            s = ddi_es_fail(es, more ? DEDUP_ERR_CORRUPT : DEDUP_ERR_TRUNCATED);
            break;
        }
        left -= n;
        int rc = es->p.emit_piece(es->p.emit_ctx, r.buf + r.lo, n, first, left == 0,
                                  es->p.output == DEDUP_EXTSORT_COUNT ? g->count : 1);
        r.lo = r.hi;
        first = false;
        if (rc) {
            es->emit_rc = rc;
            s = ddi_es_fail(es, DEDUP_ERR_CANCELLED);
        }
    }
    ddi_es_rd_free(es, &r);
    if (s == DEDUP_OK) {
        es->st.records_out++;
        g->flags |= G_DONE;
    }
    return s;
}

/* Whether giant g is still to be written out. */
static bool giant_due(const dedup_extsort *es, const giant *g)
{
    if (g->flags & G_DONE)
        return false;
    if (es->p.output == DEDUP_EXTSORT_DUPLICATES)
        return (g->flags & G_DUP) != 0;
    return !(g->flags & G_DUP) && (es->p.output != DEDUP_EXTSORT_UNIQUE || g->count == 1);
}

/* Reads the first giant_min bytes of g into es->gpre. */
static dedup_status giant_prefix(dedup_extsort *es, const giant *g)
{
    blk e = {g->off, g->dlen};
    reader r;
    dedup_status s = ddi_es_rd_init(es, &r, &es->gf, &e, 1, 2 * es->frame, 0);
    size_t have = 0;
    while (s == DEDUP_OK && have < es->giant_min) {
        bool more;
        if ((s = rd_more(es, &r, &more)) != DEDUP_OK)
            break;
        if (!more) {
            s = ddi_es_fail(es, DEDUP_ERR_TRUNCATED);
            break;
        }
        size_t n = r.hi - r.lo;
        if (n > es->giant_min - have)
            n = es->giant_min - have;
        memcpy(es->gbuf + have, r.buf + r.lo, n);
        r.lo += n;
        have += n;
    }
    ddi_es_rd_free(es, &r);
    return s;
}

/* Writes out the due giants that come before 'it' at the top level (all of
 * them when it is NULL): by sequence number, or in sorted order by key. */
dedup_status ddi_es_giants_before(dedup_extsort *es, const item *it)
{
    bool sorted = es->p.order == DEDUP_EXTSORT_SORTED;
    size_t end = sorted ? es->ngord : es->ng;
    while (es->gnext < end) {
        giant *g = &es->g[sorted ? es->gord[es->gnext] : es->gnext];
        if (!giant_due(es, g)) {
            es->gnext++;
            es->gpre_ok = false;
            continue;
        }
        if (it) {
            if (!sorted && g->seq > it->seq)
                break;
            if (sorted) {
                if (!es->gpre_ok) {
                    dedup_status s = giant_prefix(es, g);
                    if (s != DEDUP_OK)
                        return s;
                    es->gpre_ok = true;
                }
                /* it->keylen <= giant_min < g->rawlen: the giant comes first
                 * only if its prefix is smaller */
                if (it->keylen == 0 || memcmp(es->gbuf, it->key, it->keylen) >= 0)
                    break;
            }
        }
        dedup_status s = giant_emit(es, g);
        if (s != DEDUP_OK)
            return s;
        es->gnext++;
        es->gpre_ok = false;
    }
    return DEDUP_OK;
}

/* Sorted order, at finish: orders the distinct giants by key (binary
 * insertion, O(G log G) streaming comparisons). */
dedup_status ddi_es_giants_sort(dedup_extsort *es)
{
    size_t nd = 0;
    for (size_t i = 0; i < es->ng; i++)
        nd += !(es->g[i].flags & G_DUP);
    if (nd == 0)
        return DEDUP_OK;
    es->gord = ddi_es_alloc(es, nd * sizeof(size_t));
    if (!es->gord)
        return ddi_es_fail(es, DEDUP_ERR_NOMEM);
    es->gordcap = nd;
    for (size_t i = 0; i < es->ng; i++) {
        if (es->g[i].flags & G_DUP)
            continue;
        size_t lo = 0, hi = es->ngord;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c;
            dedup_status s = giant_cmp(es, &es->g[es->gord[mid]], &es->g[i], &c);
            if (s != DEDUP_OK)
                return s;
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(es->gord + lo + 1, es->gord + lo, (es->ngord - lo) * sizeof(size_t));
        es->gord[lo] = i;
        es->ngord++;
    }
    return DEDUP_OK;
}

/* Whether output goes out as records arrive (first-occurrence FIRST or
 * DUPLICATES before the top node spills). */
static bool streaming(const dedup_extsort *es)
{
    return es->p.order == DEDUP_EXTSORT_FIRST_OCCURRENCE && !es->top->spilled &&
           (es->p.output == DEDUP_EXTSORT_FIRST || es->p.output == DEDUP_EXTSORT_DUPLICATES);
}

/* A giant's bytes are in GF from 'off' to its end: dedups it against the
 * earlier giants and records or writes it out. */
dedup_status ddi_es_giant_add(dedup_extsort *es, uint64_t off, uint64_t rawlen, dedup_digest d)
{
    dedup_status s;
    giant *ng = ddi_es_grow(es, es->g, es->ng, &es->capg, sizeof(giant), 8);
    if (!ng)
        return ddi_es_fail(es, DEDUP_ERR_NOMEM);
    es->g = ng;
    giant *g = &es->g[es->ng];
    memset(g, 0, sizeof *g);
    g->seq = es->seq++;
    g->count = 1;
    g->off = off;
    g->dlen = es->gf.size - off;
    g->rawlen = rawlen;
    g->d = d;
    es->st.records_in++;
    for (size_t i = 0; i < es->ng; i++) {
        giant *o = &es->g[i];
        if ((o->flags & G_DUP) || o->d.lo != d.lo || o->d.hi != d.hi || o->rawlen != rawlen)
            continue;
        int c;
        if ((s = giant_cmp(es, o, g, &c)) != DEDUP_OK)
            return s;
        if (c != 0)
            continue;
        o->count++; /* a repeat */
        if (es->p.output != DEDUP_EXTSORT_DUPLICATES) {
            tf_truncate(&es->gf, off);
            return DEDUP_OK;
        }
        g->flags = G_DUP;
        if (streaming(es)) {
            s = giant_emit(es, g);
            tf_truncate(&es->gf, off);
            return s;
        }
        es->ng++; /* written out later, in sequence order */
        return DEDUP_OK;
    }
    es->st.distinct++;
    es->ng++;
    if (streaming(es) && es->p.output == DEDUP_EXTSORT_FIRST)
        return giant_emit(es, &es->g[es->ng - 1]);
    return DEDUP_OK;
}

/* Lazily allocates the staging buffer and the digest state. */
dedup_status ddi_es_giant_buffers(dedup_extsort *es)
{
    if (!es->gbuf) {
        es->gbuf = ddi_es_alloc(es, es->giant_min);
        if (!es->gbuf)
            return ddi_es_fail(es, DEDUP_ERR_NOMEM);
    }
    if (!es->xsmem) {
        es->xsmem = ddi_es_alloc(es, sizeof(XXH3_state_t) + 64);
        if (!es->xsmem)
            return ddi_es_fail(es, DEDUP_ERR_NOMEM);
    }
    return DEDUP_OK;
}

XXH3_state_t *ddi_es_xstate(dedup_extsort *es)
{
    uintptr_t p = (uintptr_t)es->xsmem;
    return (XXH3_state_t *)(void *)(es->xsmem + ((64 - (p & 63)) & 63));
}

/* push() of a giant the caller holds whole. */
dedup_status ddi_es_giant_push_whole(dedup_extsort *es, const void *rec, size_t len, dedup_digest d)
{
    dedup_status s = ddi_es_giant_buffers(es); /* gbuf takes sorted order's prefixes */
    if (s == DEDUP_OK)
        s = ddi_es_tf_open(es, &es->gf);
    if (s != DEDUP_OK)
        return s;
    uint64_t off = es->gf.size;
    if ((s = ddi_es_tf_write(es, &es->gf, rec, len)) != DEDUP_OK)
        return s;
    return ddi_es_giant_add(es, off, len, d);
}
