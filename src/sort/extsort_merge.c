/*
 * extsort_merge.c - the external engine's merges: the loser-tree k-way
 * merge of a node's result extents in sequence order, and sorted order's
 * sorted runs with their combining merge by key (in several passes when the
 * budget cannot read every run at once).
 */
#define _GNU_SOURCE /* O_TMPFILE, O_CLOEXEC, pread, pwritev */
#include "extsort_internal.h"

/* ---- k-way merge with a loser tree ---------------------------------------- */

typedef struct merger {
    reader *src;
    int *tree;
    uint64_t *seq; /* sequence order: each source's head (mg_seq) */
    size_t k;
    bool by_key;
} merger;

static inline bool mg_less(const merger *m, int a, int b)
{
    const reader *x = &m->src[a], *y = &m->src[b];
    if (!x->valid)
        return false;
    if (!y->valid)
        return true;
    if (m->by_key) {
        int c = key_cmp(x->it.key, x->it.keylen, y->it.key, y->it.keylen);
        return c < 0 || (c == 0 && a < b);
    }
    return x->it.seq < y->it.seq || (x->it.seq == y->it.seq && a < b);
}

static void mg_adjust(merger *m, int s)
{
    size_t t = ((size_t)s + m->k) >> 1;
    while (t > 0) {
        if (m->tree[t] < 0) { /* building: park until the other side arrives */
            m->tree[t] = s;
            return;
        }
        if (mg_less(m, m->tree[t], s)) {
            int w = m->tree[t];
            m->tree[t] = s;
            s = w;
        }
        t >>= 1;
    }
    m->tree[0] = s;
}

/* mg_adjust for sequence order, on the built tree: the heads' sequence
 * numbers sit in one small array, all distinct (see mg_seq), and the winner
 * of each match is chosen without a branch: which way a match goes is a coin
 * toss, and the mispredictions cost more than the comparisons. */
static void mg_adjust_seq(merger *m, int s)
{
    const uint64_t *q = m->seq;
    uint64_t ks = q[s];
    for (size_t t = ((size_t)s + m->k) >> 1; t > 0; t >>= 1) {
        int o = m->tree[t];
        uint64_t ko = q[o];
        int ow = -(int)(ko < ks); /* all ones when the parked one wins */
        int w = (o & ow) | (s & ~ow);
        m->tree[t] = o ^ s ^ w;
        s = w;
        ks = q[w];
    }
    m->tree[0] = s;
}

/* Source i's head for mg_adjust_seq: its sequence number, or once it has
 * ended one of k values above every sequence number, distinct per source. */
static inline uint64_t mg_seq(const merger *m, size_t i)
{
    return m->src[i].valid ? m->src[i].it.seq : UINT64_MAX - m->k + i;
}

/* Merges the k result extents ext[] (in files[], or all in RS[depth]). */
dedup_status ddi_es_node_merge(dedup_extsort *es, node *n, const blk *ext, tfile *const *files,
                              size_t k)
{
    dedup_status s = DEDUP_OK;
    merger m = {0};
    m.k = k;
    m.by_key = false; /* partition results are in sequence order */
    /* Read buffers get what the budget has left beside the output buffer,
     * this merge's bookkeeping and the node's partition array. */
    size_t fixed = (n->out ? (n->out->buf2 ? 2 : 1) * n->out->cap : 0) +
                   k * (sizeof(reader) + sizeof(int) + sizeof(blk)) + n->P * sizeof(part) +
                   scratch_bytes(es) + ddi_es_giant_reserve(es) + ddi_es_helper_bytes(es) + 8192;
    size_t avail = es->budget > fixed ? es->budget - fixed : 4096;
    bool use_ahead = ddi_es_dec_reserve(es, !n->out, k, &avail);
    size_t rb = clampz(avail / (k ? k : 1), 4096, 1 << 20);
    m.src = ddi_es_alloc(es, k * sizeof(reader));
    if (m.src) /* zeroed at once: the cleanup below frees every reader */
        memset(m.src, 0, k * sizeof(reader));
    m.tree = ddi_es_alloc(es, k * sizeof(int));
    m.seq = ddi_es_alloc(es, k * sizeof(uint64_t));
    if (!m.src || !m.tree || !m.seq) {
        s = ddi_es_fail(es, DEDUP_ERR_NOMEM);
        goto done;
    }
    for (size_t i = 0; i < k; i++)
        m.tree[i] = -1;
    for (size_t i = 0; i < k && s == DEDUP_OK; i++) {
        s = ddi_es_rd_init(es, &m.src[i], files ? files[i] : &es->rs[n->depth], &ext[i], 1, rb,
                          n->res_flags);
        if (s == DEDUP_OK)
            s = ddi_es_rd_next(es, &m.src[i]);
        m.seq[i] = mg_seq(&m, i);
    }
    if (s != DEDUP_OK)
        goto done;
    if (use_ahead)
        (void)ddi_es_dec_start(es, m.src, k);
    es->st.merge_passes++;
    for (size_t i = 0; i < k; i++)
        mg_adjust(&m, (int)i);
    for (;;) {
        int w = m.tree[0];
        if (!m.src[w].valid)
            break;
        if ((s = ddi_es_node_out(es, n, &m.src[w].it)) != DEDUP_OK)
            break;
        if ((s = ddi_es_rd_next(es, &m.src[w])) != DEDUP_OK)
            break;
        m.seq[w] = mg_seq(&m, (size_t)w);
        mg_adjust_seq(&m, w);
    }
done:
    ddi_es_dec_stop(es);
    if (m.src)
        for (size_t i = 0; i < k; i++)
            ddi_es_rd_free(es, &m.src[i]);
    ddi_es_free(es, m.src, k * sizeof(reader));
    ddi_es_free(es, m.tree, k * sizeof(int));
    ddi_es_free(es, m.seq, k * sizeof(uint64_t));
    return s;
}

/* ---- Sorted order: sorted runs and a combining k-way merge -----------------
 * In sorted order nothing can be emitted before the end, so the full table is
 * not frozen as in first-occurrence order: it is written out as a sorted run
 * (its distinct keys, their counts and first records) and cleared.  finish()
 * merges the runs with the loser tree, combining equal keys (counts summed,
 * the record of the oldest run kept, since ties go to the lower run index),
 * in several passes when there are more runs than the budget has read
 * buffers of max(8 KiB, 2 frames) for.  IO: each record not repeated within
 * its run's window is written once and read once, plus once more per extra
 * merge pass (none below ~budget^2 / 128 KiB of distinct data: ~30 GB at 64
 * MiB, since a reader decodes whole 64 KiB frames). */

static int run_flags(const dedup_extsort *es) { return F_KEY | (counting(es) ? F_COUNT : 0); }

static dedup_status runs_flush(dedup_extsort *es, node *n)
{
    tfile *f = &es->sp[0];
    dedup_status s = ddi_es_tf_open(es, f);
    if (s != DEDUP_OK)
        return s;
    blk *nr = ddi_es_grow(es, es->runs, es->nruns, &es->capruns, sizeof(blk), 16);
    if (!nr)
        return ddi_es_fail(es, DEDUP_ERR_NOMEM);
    es->runs = nr;
    writer w;
    if ((s = ddi_es_hp_sync(es)) != DEDUP_OK)
        return s;
    uint64_t start = f->size;
    if ((s = ddi_es_wr_init(es, &w, f, io_buf(es), run_flags(es))) != DEDUP_OK)
        return s;
    s = ddi_es_table_out_sorted(es, n, &w, false);
    if (s == DEDUP_OK)
        s = ddi_es_wr_close(es, &w);
    ddi_es_wr_free(es, &w);
    if (s != DEDUP_OK)
        return s;
    es->runs[es->nruns++] = (blk){start, f->size - start};
    es->st.runs_written++;
    es->st.max_depth = 1;
    size_t limit = n->t.limit;
    ddi_es_table_free(es, &n->t);
    n->table_live = false;
    if ((s = ddi_es_table_init(es, &n->t, limit, counting(es))) != DEDUP_OK)
        return s;
    n->table_live = true;
    return DEDUP_OK;
}

dedup_status ddi_es_runs_add(dedup_extsort *es, const item *it, dedup_digest d)
{
    node *n = es->top;
    slot *sl = table_find(&n->t, d, it->key, it->keylen);
    if (sl->e) {
        if (n->t.counting)
            wr64(sl->e + 8, rd64(sl->e + 8) + 1);
        return DEDUP_OK;
    }
    dedup_status s = ddi_es_table_insert(es, &n->t, sl, d, it->seq, it);
    if (s != DEDUP_ERR_FULL)
        return s;
    if ((s = runs_flush(es, n)) != DEDUP_OK)
        return s;
    sl = table_find(&n->t, d, it->key, it->keylen);
    return ddi_es_table_insert(es, &n->t, sl, d, it->seq, it); /* an empty table takes it */
}

/* The item being combined while the merge looks for more of its key. */
typedef struct held {
    uint8_t *buf;
    size_t cap;
    item it;
    bool have;
} held;

static dedup_status held_set(dedup_extsort *es, held *h, const item *it)
{
    bool same = it->rec == it->key && it->reclen == it->keylen;
    size_t need = it->keylen + (same ? 0 : it->reclen);
    if (need > h->cap || !h->buf) { /* never hand out NULL, even for "" */
        size_t nc = need > 2 * h->cap ? need : 2 * h->cap;
        if (nc < 256)
            nc = 256;
        uint8_t *nb = ddi_es_alloc(es, nc);
        if (!nb)
            return ddi_es_fail(es, DEDUP_ERR_NOMEM);
        ddi_es_free(es, h->buf, h->cap);
        h->buf = nb;
        h->cap = nc;
    }
    if (it->keylen)
        memcpy(h->buf, it->key, it->keylen);
    if (!same && it->reclen)
        memcpy(h->buf + it->keylen, it->rec, it->reclen);
    h->it = *it;
    h->it.key = h->buf;
    h->it.rec = same ? h->buf : h->buf + it->keylen;
    h->have = true;
    return DEDUP_OK;
}

/* Writes the combined item to 'w', or emits it when 'w' is NULL. */
static dedup_status held_out(dedup_extsort *es, held *h, writer *w)
{
    if (w)
        return ddi_es_wr_item(es, w, &h->it);
    es->st.distinct++;
    if (es->p.output == DEDUP_EXTSORT_UNIQUE && h->it.count != 1)
        return DEDUP_OK;
    return ddi_es_node_out(es, es->top, &h->it);
}

static size_t runs_fan_in(const dedup_extsort *es)
{
    size_t fixed = (threaded(es) ? 2 : 1) * io_buf(es) + scratch_bytes(es) +
                   ddi_es_giant_reserve(es) + ddi_es_helper_bytes(es) + 16384;
    size_t per = (2 * es->frame > 8192 ? 2 * es->frame : 8192) + sizeof(reader) + sizeof(int);
    return es->budget > fixed + 2 * per ? (es->budget - fixed) / per : 2;
}

static dedup_status runs_merge(dedup_extsort *es, tfile *src, const blk *runs, size_t k, writer *w)
{
    dedup_status s = DEDUP_OK;
    merger m = {0};
    held h = {0};
    m.k = k;
    m.by_key = true;
    size_t fixed = (w ? (w->buf2 ? 2 : 1) * w->cap : 0) + k * (sizeof(reader) + sizeof(int)) +
                   scratch_bytes(es) + ddi_es_giant_reserve(es) + ddi_es_helper_bytes(es) + 16384;
    size_t avail = es->budget > fixed ? es->budget - fixed : 4096;
    bool use_ahead = ddi_es_dec_reserve(es, !w, k, &avail);
    size_t rb = clampz(avail / k, 4096, 1 << 20);
    m.src = ddi_es_alloc(es, k * sizeof(reader));
    if (m.src) /* zeroed at once: the cleanup below frees every reader */
        memset(m.src, 0, k * sizeof(reader));
    m.tree = ddi_es_alloc(es, k * sizeof(int));
    if (!m.src || !m.tree) {
        s = ddi_es_fail(es, DEDUP_ERR_NOMEM);
        goto done;
    }
    for (size_t i = 0; i < k; i++)
        m.tree[i] = -1;
    for (size_t i = 0; i < k && s == DEDUP_OK; i++) {
        s = ddi_es_rd_init(es, &m.src[i], src, &runs[i], 1, rb, run_flags(es));
        if (s == DEDUP_OK)
            s = ddi_es_rd_next(es, &m.src[i]);
    }
    if (s != DEDUP_OK)
        goto done;
    if (use_ahead)
        (void)ddi_es_dec_start(es, m.src, k);
    es->st.merge_passes++;
    for (size_t i = 0; i < k; i++)
        mg_adjust(&m, (int)i);
    for (;;) {
        int x = m.tree[0];
        if (!m.src[x].valid)
            break;
        const item *it = &m.src[x].it;
        if (h.have && key_cmp(it->key, it->keylen, h.it.key, h.it.keylen) == 0) {
            h.it.count += it->count;
        } else {
            if (h.have && (s = held_out(es, &h, w)) != DEDUP_OK)
                break;
            if ((s = held_set(es, &h, it)) != DEDUP_OK)
                break;
        }
        if ((s = ddi_es_rd_next(es, &m.src[x])) != DEDUP_OK)
            break;
        mg_adjust(&m, x);
    }
    if (s == DEDUP_OK && h.have)
        s = held_out(es, &h, w);
done:
    ddi_es_dec_stop(es);
    if (m.src)
        for (size_t i = 0; i < k; i++)
            ddi_es_rd_free(es, &m.src[i]);
    ddi_es_free(es, m.src, k * sizeof(reader));
    ddi_es_free(es, m.tree, k * sizeof(int));
    ddi_es_free(es, h.buf, h.cap);
    return s;
}

dedup_status ddi_es_runs_finish(dedup_extsort *es)
{
    node *n = es->top;
    dedup_status s = DEDUP_OK;
    if (n->t.n > 0)
        s = runs_flush(es, n);
    ddi_es_table_free(es, &n->t);
    n->table_live = false;
    tfile *a = &es->sp[0], *b = &es->rs[0];
    size_t kmax = runs_fan_in(es);
    while (s == DEDUP_OK && es->nruns > kmax) { /* an intermediate pass */
        size_t groups = (es->nruns + kmax - 1) / kmax;
        blk *nr = ddi_es_alloc(es, groups * sizeof(blk));
        if (!nr)
            return ddi_es_fail(es, DEDUP_ERR_NOMEM);
        if ((s = ddi_es_tf_open(es, b)) != DEDUP_OK) {
            ddi_es_free(es, nr, groups * sizeof(blk));
            return s;
        }
        for (size_t g = 0; g < groups && s == DEDUP_OK; g++) {
            size_t lo = g * kmax, cnt = es->nruns - lo < kmax ? es->nruns - lo : kmax;
            writer w;
            if ((s = ddi_es_hp_sync(es)) != DEDUP_OK)
                break;
            uint64_t start = b->size;
            if ((s = ddi_es_wr_init(es, &w, b, io_buf(es), run_flags(es))) != DEDUP_OK)
                break;
            s = runs_merge(es, a, &es->runs[lo], cnt, &w);
            if (s == DEDUP_OK)
                s = ddi_es_wr_close(es, &w);
            ddi_es_wr_free(es, &w);
            nr[g] = (blk){start, b->size - start};
        }
        ddi_es_tf_reset(es, a);
        ddi_es_free(es, es->runs, es->capruns * sizeof(blk));
        es->runs = nr;
        es->nruns = es->capruns = groups;
        tfile *t = a;
        a = b;
        b = t;
    }
    if (s == DEDUP_OK)
        s = runs_merge(es, a, es->runs, es->nruns, NULL);
    ddi_es_tf_reset(es, a);
    return s;
}
