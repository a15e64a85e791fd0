/*
 * extsort_node.c - one node of the external engine: its setup and memory
 * shares, the frozen table's prefilter, spilling the records of unknown keys
 * to its partitions (placed in regions of the depth's partition file),
 * adding records, and sending its output to the parent's result stream or to
 * emit.  Finishing a node (its partitions, then the merge) is in
 * extsort_partition.c.
 */
#define _GNU_SOURCE /* one feature set (POSIX, Linux) for every extsort source */
#include "extsort_internal.h"

/* ---- Nodes -------------------------------------------------------------- */

dedup_status ddi_es_node_init(dedup_extsort *es, node *n, int depth, writer *out)
{
    memset(n, 0, sizeof *n);
    n->depth = depth;
    n->out = out;
    n->pbuf = pbuf_size(es);
    n->P = (uint32_t)clampz(es->budget / (4 * n->pbuf), 4, 256);
    n->shift = (unsigned)(depth * 11) & 63;
    /* Partitions are only used in first-occurrence order (sorted order
     * writes sorted runs instead, see ddi_es_runs_add). */
    bool sorted = es->p.order == DEDUP_EXTSORT_SORTED;
    n->spill_flags = F_SEQ | F_KEY;
    n->res_flags = F_SEQ | (es->p.output == DEDUP_EXTSORT_COUNT ? F_COUNT : 0);
    /* What is left for the table once the spill buffers, this node's input
     * buffer, its output buffer and the DUPLICATES buffer are reserved. */
    size_t reserve = n->P * n->pbuf + (size_t)n->P * 64 + 3 * io_buf(es) + 4096;
    if (sorted && depth == 0) /* sorted runs: only the run writer's buffer */
        reserve = io_buf(es) + 8192;
    if (threaded(es)) /* the compressing thread's buffers; writers' second buffers */
        reserve += ddi_es_helper_bytes(es) + (sorted && depth == 0 ? 1 : 2) * io_buf(es);
    if (threaded(es) && depth == 0 && !sorted) /* the two-thread spill's batch (extsort_scatter.c) */
        reserve += ddi_es_sc_bytes();
    reserve += scratch_bytes(es) + ddi_es_giant_reserve(es); /* compression; giant records */
    size_t limit = es->budget > reserve + 16384 ? es->budget - reserve : 16384;
    if (!(sorted && depth == 0)) { /* the prefilter's share, once spilled */
        n->frz_cap = (limit / 64) & ~(size_t)63;
        limit -= n->frz_cap;
    }
    dedup_status s = ddi_es_table_init(es, &n->t, limit, counting(es));
    if (s == DEDUP_OK)
        n->table_live = true;
    return s;
}

/* ---- The frozen table's prefilter ---------------------------------------------
 * Once a node spills, its table is frozen: every later record is looked up in
 * it, and unless the repeats favour old keys almost all miss.  Each lookup is
 * a cache miss on a table of tens of MiB, on the engine's busiest thread.  So
 * the table's keys also go into a blocked Bloom filter of 1/64 of the table's
 * memory (at 64 MiB: 618 KiB for 393k keys, 12.9 bits a key, small enough to
 * stay in the core's cache): one 64-bit word per key, picked by bits 32-63
 * of the digest's low half (the slot tag), with 4 bits set by bits 0-23.  A
 * record the filter rules out is not looked up.  The filter has no false
 * negatives, so nothing changes but the cost; about 1% of the misses still
 * look (0.9% measured on random digests).  1.2 GB of URLs at 64 MiB, same
 * run, output identical: 5.41 -> 4.65 s (medians of 3). */

/* Builds the prefilter from the slots' tags, when the node spills; without
 * its memory (a tiny budget) every record is looked up as before. */
static void frz_build(dedup_extsort *es, node *n)
{
    size_t words = n->frz_cap / 8;
    if (words < 8 || n->t.n == 0 || words > UINT32_MAX)
        return;
    n->frz = ddi_es_alloc(es, n->frz_cap);
    if (!n->frz)
        return;
    memset(n->frz, 0, n->frz_cap);
    n->frz_words = words;
    for (size_t i = 0; i <= n->t.mask; i++) {
        const slot *sl = &n->t.slots[i];
        if (sl->e)
            n->frz[frz_word(n, sl->tag)] |= frz_mask(sl->tag);
    }
}

void ddi_es_frz_free(dedup_extsort *es, node *n)
{
    ddi_es_free(es, n->frz, n->frz_cap);
    n->frz = NULL;
    n->frz_words = 0;
}

/* Records that 'dlen' file bytes at 'off' hold 'rawlen' bytes of p's stream. */
dedup_status ddi_es_part_extent(dedup_extsort *es, part *p, uint64_t off, uint64_t dlen,
                               size_t rawlen)
{
    if (p->nblk > 0 && p->blocks[p->nblk - 1].off + p->blocks[p->nblk - 1].len == off) {
        p->blocks[p->nblk - 1].len += dlen; /* contiguous with the previous block */
    } else {
        blk *nb = ddi_es_grow(es, p->blocks, p->nblk, &p->capblk, sizeof(blk), 8);
        if (!nb)
            return ddi_es_fail(es, DEDUP_ERR_NOMEM);
        p->blocks = nb;
        p->blocks[p->nblk++] = (blk){off, dlen};
    }
    p->bytes += rawlen;
    return DEDUP_OK;
}

/* ---- Regions ------------------------------------------------------------------
 * The partitions' frames are written in the order they fill, all partitions
 * mixed, so if each were appended to the file a partition's extent list would
 * hold one entry per frame (16 bytes per 2-64 KiB frame, memory that grows
 * with the input whatever the budget).  Instead the file is handed out in
 * regions of REGION_FRAMES frame buffers (64 KiB - 1 MiB), one partition's
 * each: a frame goes at the end of its partition's current region, or starts
 * a new region at the end of the file, so the list holds one entry per
 * region.  A region's unused tail is a hole: never written or read, and no
 * disk space where the filesystem has sparse files.  Placing a frame
 * needs its packed length: with the compressing thread it is done there
 * (hb_write), and the partition's region is touched by no other thread until
 * the batch is reaped. */
#define REGION_FRAMES 16

/* Where a packed frame of 'dlen' bytes of partition p goes in file f. */
uint64_t ddi_es_part_place(const dedup_extsort *es, tfile *f, part *p, uint64_t dlen)
{
    if (p->rleft < dlen) {
        uint64_t r = REGION_FRAMES * (uint64_t)pbuf_size(es);
        if (r < dlen)
            r = dlen;
        p->roff = f->size;
        p->rleft = r;
        f->size += r;
    }
    uint64_t off = p->roff;
    p->roff += dlen;
    p->rleft -= dlen;
    return off;
}

dedup_status ddi_es_part_flush(dedup_extsort *es, node *n, part *p, const void *data, size_t len)
{
    tfile *f = &es->sp[n->depth];
    dedup_status s = ddi_es_tf_open(es, f);
    if (s != DEDUP_OK)
        return s;
    if (es->hp && data == p->buf) { /* the thread packs and writes it; p takes a spare */
        uint8_t *spare = ddi_es_hp_spare(es, &s);
        if (!spare)
            return s != DEDUP_OK ? s : ddi_es_fail(es, DEDUP_ERR_NOMEM);
        uint8_t *full = p->buf;
        p->buf = spare;
        return ddi_es_hp_add(es, f, full, len, p, full);
    }
    if ((s = ddi_es_hp_sync(es)) != DEDUP_OK)
        return s;
    return ddi_es_frames_write(es, f, p, data, len);
}

static dedup_status part_put(dedup_extsort *es, node *n, part *p, const void *data, size_t len)
{
    if (len <= n->pbuf - p->len) {
        memcpy(p->buf + p->len, data, len);
        p->len += len;
        return DEDUP_OK;
    }
    dedup_status s;
    if (p->len) {
        if ((s = ddi_es_part_flush(es, n, p, p->buf, p->len)) != DEDUP_OK)
            return s;
        p->len = 0;
    }
    if (len >= n->pbuf)
        return ddi_es_part_flush(es, n, p, data, len);
    memcpy(p->buf, data, len);
    p->len = len;
    return DEDUP_OK;
}

static dedup_status node_start_spill(dedup_extsort *es, node *n)
{
    if (n->depth >= DEDUP_EXTSORT_MAX_DEPTH)
        return ddi_es_fail(es, DEDUP_ERR_LIMIT);
    n->parts = ddi_es_alloc(es, n->P * sizeof(part));
    if (!n->parts)
        return ddi_es_fail(es, DEDUP_ERR_NOMEM);
    memset(n->parts, 0, n->P * sizeof(part));
    for (uint32_t i = 0; i < n->P; i++) {
        n->parts[i].buf = ddi_es_alloc(es, n->pbuf);
        if (!n->parts[i].buf)
            return ddi_es_fail(es, DEDUP_ERR_NOMEM);
    }
    if (es->p.output == DEDUP_EXTSORT_DUPLICATES) {
        dedup_status s = ddi_es_wr_init(es, &n->direct, &es->rs[n->depth], io_buf(es), F_SEQ);
        if (s != DEDUP_OK)
            return s;
        if ((s = ddi_es_tf_open(es, &es->rs[n->depth])) != DEDUP_OK)
            return s;
        n->direct_live = true;
        if ((s = ddi_es_hp_sync(es)) != DEDUP_OK)
            return s;
        n->direct_start = es->rs[n->depth].size;
    }
    n->spilled = true;
    frz_build(es, n);
    if (n->depth == 0)
        ddi_es_sc_start(es);
    if ((uint64_t)n->depth + 1 > es->st.max_depth)
        es->st.max_depth = (uint64_t)n->depth + 1;
    return DEDUP_OK;
}

void ddi_es_node_free(dedup_extsort *es, node *n)
{
    if (n->parts) /* queued frames name its partitions */
        (void)ddi_es_hp_sync(es);
    if (n->table_live)
        ddi_es_table_free(es, &n->t);
    n->table_live = false;
    ddi_es_frz_free(es, n);
    if (n->parts) {
        for (uint32_t i = 0; i < n->P; i++) {
            ddi_es_free(es, n->parts[i].buf, n->pbuf);
            ddi_es_free(es, n->parts[i].blocks, n->parts[i].capblk * sizeof(blk));
        }
        ddi_es_free(es, n->parts, n->P * sizeof(part));
        n->parts = NULL;
    }
    if (n->direct_live)
        ddi_es_wr_free(es, &n->direct);
    n->direct_live = false;
}

/* Sends one output item of node 'n' to its parent's result stream or to emit. */
dedup_status ddi_es_node_out(dedup_extsort *es, node *n, const item *it)
{
    if (!n->out) {
        if (es->ng) {
            dedup_status s = ddi_es_giants_before(es, it);
            if (s != DEDUP_OK)
                return s;
        }
        es->st.records_out++;
        int rc = es->p.emit(es->p.emit_ctx, it->rec, it->reclen,
                            es->p.output == DEDUP_EXTSORT_COUNT ? it->count : 1);
        if (rc) {
            es->emit_rc = rc;
            return ddi_es_fail(es, DEDUP_ERR_CANCELLED);
        }
        return DEDUP_OK;
    }
    return ddi_es_wr_item(es, n->out, it);
}

dedup_status ddi_es_node_add(dedup_extsort *es, node *n, const item *it, dedup_digest d)
{
    dedup_status s;
    slot *sl = NULL;
    if (!n->spilled || frz_maybe(n, d))
        sl = table_find(&n->t, d, it->key, it->keylen);
    if (sl && sl->e) { /* a repeat */
        if (n->t.counting) {
            uint64_t c = rd64(sl->e + 8);
            wr64(sl->e + 8, c + 1);
        }
        if (es->p.output == DEDUP_EXTSORT_DUPLICATES) {
            if (!n->spilled)
                return ddi_es_node_out(es, n, it);
            return ddi_es_wr_item(es, &n->direct, it);
        }
        return DEDUP_OK;
    }
    if (!n->spilled) {
        s = ddi_es_table_insert(es, &n->t, sl, d, it->seq, it);
        if (s == DEDUP_OK) {
            if (es->p.output == DEDUP_EXTSORT_FIRST &&
                es->p.order == DEDUP_EXTSORT_FIRST_OCCURRENCE)
                return ddi_es_node_out(es, n, it);
            return DEDUP_OK;
        }
        if (s != DEDUP_ERR_FULL)
            return s;
        if ((s = node_start_spill(es, n)) != DEDUP_OK)
            return s;
    }
    /* spill to the partition picked by digest bits this depth has not used */
    part *p = &n->parts[node_part(n, d)];
    uint64_t delta = it->seq - p->prev_seq;
    p->prev_seq = it->seq;
    return ddi_es_part_item(es, n, p, it, delta);
}

/* Appends item 'it' to partition p of node n, 'delta' after the partition's
 * previous item; flushes the buffer as it fills. */
dedup_status ddi_es_part_item(dedup_extsort *es, node *n, part *p, const item *it, uint64_t delta)
{
    dedup_status s;
    uint8_t h[ITEM_HEADER_MAX];
    bool keep_key;
    bool same = it->rec == it->key && it->reclen == it->keylen;
    size_t body = it->keylen + (same ? 0 : it->reclen);
    size_t room = n->pbuf - p->len, hn;
    uint8_t *o = p->buf + p->len;
    if (body <= room && room - body >= ITEM_HEADER_MAX) {
        /* the header goes straight to the buffer: staged in h[] and read back
         * right after its byte stores, it stalled the copy */
        hn = item_header(o, n->spill_flags, delta, it, &keep_key);
    } else {
        hn = item_header(h, n->spill_flags, delta, it, &keep_key);
        if (hn + body > room)
            goto split;
        memcpy(o, h, hn);
    }
    if (it->keylen)
        memcpy(o + hn, it->key, it->keylen);
    if (!same && it->reclen)
        memcpy(o + hn + it->keylen, it->rec, it->reclen);
    p->len += hn + body;
    return DEDUP_OK;
split:
    if ((s = part_put(es, n, p, h, hn)) != DEDUP_OK)
        return s;
    if ((s = part_put(es, n, p, it->key, it->keylen)) != DEDUP_OK)
        return s;
    if (!same)
        s = part_put(es, n, p, it->rec, it->reclen);
    return s;
}

/* Emits the table's entries that belong in the output, in insertion order. */
dedup_status ddi_es_table_out_ordered(dedup_extsort *es, node *n)
{
    if (es->p.output != DEDUP_EXTSORT_COUNT && es->p.output != DEDUP_EXTSORT_UNIQUE)
        return DEDUP_OK; /* FIRST went out on insertion; DUPLICATES never lists keys */
    item it;
    TABLE_FOREACH(&n->t, e)
    {
        ddi_es_e_item(&n->t, e, &it);
        if (es->p.output == DEDUP_EXTSORT_UNIQUE && it.count != 1)
            continue;
        dedup_status s = ddi_es_node_out(es, n, &it);
        if (s != DEDUP_OK)
            return s;
    }
    return DEDUP_OK;
}

/* Emits (or writes to 'w' when not NULL) the table's entries sorted by key. */
dedup_status ddi_es_table_out_sorted(dedup_extsort *es, node *n, writer *w, bool filter)
{
    size_t cnt = n->t.n;
    sel *arr = ddi_es_table_sorted(&n->t);
    item it;
    for (size_t i = 0; i < cnt; i++) {
        if (i + 8 < cnt)
            DD_PREFETCH(arr[i + 8].e);
        ddi_es_e_item(&n->t, arr[i].e, &it);
        if (filter && es->p.output == DEDUP_EXTSORT_UNIQUE && it.count != 1)
            continue;
        dedup_status s = w ? ddi_es_wr_item(es, w, &it) : ddi_es_node_out(es, n, &it);
        if (s != DEDUP_OK)
            return s;
    }
    return DEDUP_OK;
}
