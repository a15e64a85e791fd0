/*
 * extsort_stream.c - the external engine's record streams: the buffered
 * writer of result streams and sorted runs, and the reader over a list of
 * extents of a temporary file, which decodes whole frames (with decode-ahead,
 * extsort_threads.c, in the final merge) and parses items.  The encoding of
 * items is described in extsort_internal.h.
 */
#define _GNU_SOURCE /* O_TMPFILE, O_CLOEXEC, pread, pwritev */
#include "extsort_internal.h"

/* ---- Buffered writer (result streams) ------------------------------------- */

dedup_status ddi_es_wr_init(dedup_extsort *es, writer *w, tfile *f, size_t cap, int flags)
{
    w->f = f;
    w->cap = cap;
    w->len = 0;
    w->prev_seq = 0;
    w->flags = flags;
    w->buf = ddi_es_alloc(es, cap);
    w->buf2 = NULL;
    w->buf2_seq = 0;
    if (w->buf && es->hp && !(w->buf2 = ddi_es_alloc(es, cap))) {
        ddi_es_free(es, w->buf, cap);
        w->buf = NULL;
    }
    return w->buf ? DEDUP_OK : ddi_es_fail(es, DEDUP_ERR_NOMEM);
}

/* With the compressing thread the buffer is queued whole and the writer goes
 * on in the other one, once the batches holding that one are reaped. */
static dedup_status wr_flush(dedup_extsort *es, writer *w)
{
    if (w->len == 0)
        return DEDUP_OK;
    dedup_status s;
    if (w->buf2 && es->hp && w->f->fd >= 0) {
        s = ddi_es_hp_add(es, w->f, w->buf, w->len, NULL, NULL);
        if (s == DEDUP_OK)
            s = ddi_es_hp_submit(es);
        uint8_t *t = w->buf;
        w->buf = w->buf2;
        w->buf2 = t;
        size_t need = w->buf2_seq;
        w->buf2_seq = ddi_es_hp_submitted(es);
        if (s == DEDUP_OK)
            s = ddi_es_hp_reap_upto(es, need);
    } else {
        s = ddi_es_tf_write(es, w->f, w->buf, w->len);
    }
    w->len = 0;
    return s;
}

/* Flushes and waits until the stream is on disk: the file's size is final. */
dedup_status ddi_es_wr_close(dedup_extsort *es, writer *w)
{
    dedup_status s = wr_flush(es, w);
    dedup_status r = ddi_es_hp_sync(es);
    return s != DEDUP_OK ? s : r;
}

void ddi_es_wr_free(dedup_extsort *es, writer *w)
{
    if (w->buf2) /* the thread may still read them (an error here is sticky) */
        (void)ddi_es_hp_sync(es);
    ddi_es_free(es, w->buf, w->cap);
    ddi_es_free(es, w->buf2, w->cap);
    w->buf = w->buf2 = NULL;
}

static dedup_status wr_bytes(dedup_extsort *es, writer *w, const void *p, size_t n)
{
    if (n <= w->cap - w->len) {
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        return DEDUP_OK;
    }
    dedup_status s = wr_flush(es, w);
    if (s != DEDUP_OK)
        return s;
    if (n >= w->cap)
        return ddi_es_tf_write(es, w->f, p, n);
    memcpy(w->buf, p, n);
    w->len = n;
    return DEDUP_OK;
}

dedup_status ddi_es_wr_item(dedup_extsort *es, writer *w, const item *it)
{
    uint8_t h[ITEM_HEADER_MAX];
    bool keep_key;
    size_t hn = item_header(h, w->flags, it->seq - w->prev_seq, it, &keep_key);
    w->prev_seq = it->seq;
    bool same = it->rec == it->key && it->reclen == it->keylen;
    size_t total = hn + (keep_key ? it->keylen : 0) + (same ? 0 : it->reclen);
    if (total <= w->cap - w->len) { /* fast path */
        uint8_t *o = w->buf + w->len;
        memcpy(o, h, hn);
        o += hn;
        if (keep_key && it->keylen) {
            memcpy(o, it->key, it->keylen);
            o += it->keylen;
        }
        if (!same && it->reclen)
            memcpy(o, it->rec, it->reclen);
        w->len += total;
        return DEDUP_OK;
    }
    dedup_status s = wr_bytes(es, w, h, hn);
    if (s == DEDUP_OK && keep_key)
        s = wr_bytes(es, w, it->key, it->keylen);
    if (s == DEDUP_OK && !same)
        s = wr_bytes(es, w, it->rec, it->reclen);
    return s;
}

/* ---- Reader over a list of extents of a temporary file --------------------- */

dedup_status ddi_es_rd_init(dedup_extsort *es, reader *r, tfile *f, const blk *ext, size_t n,
                           size_t cap, int flags)
{
    memset(r, 0, sizeof *r);
    dedup_status s0 = ddi_es_hp_sync(es); /* the file must be complete before it is read */
    if (s0 != DEDUP_OK)
        return s0;
    r->f = f;
    r->ext = ext;
    r->n = n;
    /* Whole frames are decoded into the buffer: it holds two, so that a
     * refill always makes progress and an item up to cap - frame bytes can
     * be completed in place. */
    if (cap < 2 * es->frame)
        cap = 2 * es->frame;
    r->cap = cap;
    r->flags = flags;
    r->buf = ddi_es_alloc(es, cap);
    return r->buf ? DEDUP_OK : ddi_es_fail(es, DEDUP_ERR_NOMEM);
}

void ddi_es_rd_free(dedup_extsort *es, reader *r)
{
    ddi_es_free(es, r->buf, r->cap);
    ddi_es_free(es, r->big, r->bigcap);
    r->buf = r->big = NULL;
}

/* Decodes the reader's next frame into 'dst' (room for es->frame bytes),
 * with 'zbuf' (es->zcap bytes) as scratch; *got is its raw length, 0 at the
 * end of the extents.  Touches no engine state (see ddi_es_pread_full). */
dedup_status ddi_es_rd_frame(const dedup_extsort *es, reader *r, uint8_t *zbuf, uint8_t *dst,
                            size_t *got, uint64_t *nread, int *eno)
{
    *got = 0;
    while (r->left == 0) {
        if (r->next >= r->n)
            return DEDUP_OK;
        r->off = r->ext[r->next].off;
        r->left = r->ext[r->next].len;
        r->next++;
    }
    uint8_t h[FH];
    if (r->left < FH)
        return DEDUP_ERR_CORRUPT;
    dedup_status s = ddi_es_pread_full(r->f->fd, h, FH, r->off, nread, eno);
    if (s != DEDUP_OK)
        return s;
    r->off += FH;
    r->left -= FH;
    uint32_t stored = rd32(h), raw = rd32(h + 4);
    size_t n = stored & ~FR_RAW;
    if (raw == 0 || raw > es->frame || n > es->zcap - FH || n > r->left ||
        ((stored & FR_RAW) && n != raw))
        return DEDUP_ERR_CORRUPT;
    uint8_t *src = (stored & FR_RAW) ? dst : zbuf;
    if ((s = ddi_es_pread_full(r->f->fd, src, n, r->off, nread, eno)) != DEDUP_OK)
        return s;
    r->off += n;
    r->left -= n;
    if (frame_check(src, n, stored, raw) != rd64(h + 8))
        return DEDUP_ERR_CORRUPT;
    if (!(stored & FR_RAW) &&
        LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)raw) != (int)raw)
        return DEDUP_ERR_CORRUPT;
    *got = raw;
    return DEDUP_OK;
}

/* Moves unread bytes to the front and decodes whole frames behind them: as
 * many as fit, or with decode-ahead until 'need' bytes are there (the next
 * frames are the decoding thread's to do).  The callers keep an item within
 * cap - frame bytes, so at least one frame always fits. */
dedup_status ddi_es_rd_fill(dedup_extsort *es, reader *r, size_t need)
{
    if (r->lo > 0) {
        memmove(r->buf, r->buf + r->lo, r->hi - r->lo);
        r->hi -= r->lo;
        r->lo = 0;
    }
    while (r->cap - r->hi >= es->frame) {
        size_t got;
        dedup_status s;
        if (r->ra) {
            if ((s = ddi_es_ra_take(es, r, r->buf + r->hi, &got)) != DEDUP_OK)
                return s;
        } else {
            int eno = 0;
            s = ddi_es_rd_frame(es, r, es->zbuf, r->buf + r->hi, &got, &es->st.bytes_read_back,
                               &eno);
            if (s != DEDUP_OK)
                return ddi_es_read_failed(es, s, eno);
        }
        if (got == 0)
            break;
        r->hi += got;
        if (r->ra && r->hi - r->lo >= need)
            break;
    }
    return DEDUP_OK;
}

static bool rd_eof(const reader *r) { return r->lo == r->hi && !rd_frames_left(r); }

/* Copies 'n' stream bytes into 'dst'. */
static dedup_status rd_copy(dedup_extsort *es, reader *r, uint8_t *dst, size_t n)
{
    while (n > 0) {
        if (r->lo == r->hi) {
            dedup_status s = ddi_es_rd_fill(es, r, 1);
            if (s != DEDUP_OK)
                return s;
            if (r->lo == r->hi)
                return ddi_es_fail(es, DEDUP_ERR_TRUNCATED);
        }
        size_t k = r->hi - r->lo;
        if (k > n)
            k = n;
        memcpy(dst, r->buf + r->lo, k);
        r->lo += k;
        dst += k;
        n -= k;
    }
    return DEDUP_OK;
}

/* Reads the next item into r->it; r->valid is false at the end. */
dedup_status ddi_es_rd_next(dedup_extsort *es, reader *r)
{
    dedup_status s;
    if (r->hi - r->lo < 48 && rd_frames_left(r)) {
        if ((s = ddi_es_rd_fill(es, r, 48)) != DEDUP_OK)
            return s;
    }
    if (rd_eof(r)) {
        r->valid = false;
        return DEDUP_OK;
    }
    const uint8_t *p = r->buf + r->lo;
    item *it = &r->it;
    ihead ih;
    if (!item_head(p, r->buf + r->hi, r->flags, &ih))
        return ddi_es_fail(es, DEDUP_ERR_CORRUPT);
    if (r->flags & F_SEQ) {
        r->prev_seq += ih.seq_delta;
        it->seq = r->prev_seq;
    }
    it->count = ih.count;
    uint64_t keylen = ih.keylen, recenc = ih.recenc;
    size_t hn = ih.len;
    p += hn;
    size_t body = (size_t)keylen + (recenc ? (size_t)(recenc - 1) : 0);
    if (hn + body > r->hi - r->lo) {
        if (hn + body <= r->cap - es->frame) {
            if ((s = ddi_es_rd_fill(es, r, hn + body)) != DEDUP_OK)
                return s;
            if (hn + body > r->hi - r->lo)
                return ddi_es_fail(es, DEDUP_ERR_TRUNCATED);
            p = r->buf + r->lo + hn;
        } else { /* larger than the buffer: assemble it in 'big' */
            if (body > r->bigcap) {
                uint8_t *nb = ddi_es_alloc(es, body);
                if (!nb)
                    return ddi_es_fail(es, DEDUP_ERR_NOMEM);
                ddi_es_free(es, r->big, r->bigcap);
                r->big = nb;
                r->bigcap = body;
            }
            r->lo += hn;
            if ((s = rd_copy(es, r, r->big, body)) != DEDUP_OK)
                return s;
            p = r->big;
            hn = 0;
            body = 0;
        }
    }
    it->key = p;
    it->keylen = (size_t)keylen;
    if (recenc == 0) {
        it->rec = p;
        it->reclen = it->keylen;
    } else {
        it->rec = p + keylen;
        it->reclen = (size_t)(recenc - 1);
    }
    if (hn + body)
        r->lo += hn + body;
    /* A merge takes the next item of this reader only after (about) one of
     * every other reader: fetch its first bytes now, or they are a cache miss
     * then, with hundreds of readers' buffers between. */
    DD_PREFETCH(r->buf + r->lo);
    if (r->hi - r->lo > 64)
        DD_PREFETCH(r->buf + r->lo + 64);
    r->valid = true;
    return DEDUP_OK;
}
