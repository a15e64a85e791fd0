/*
 * extsort_table.c - the external engine's in-memory table (an exact hash
 * table of entries in an arena, probed with table_find in
 * extsort_internal.h) and its sort by key for sorted output and sorted runs.
 * Each node owns one (extsort_node.c).
 */
#define _GNU_SOURCE /* one feature set (POSIX, Linux) for every extsort source */
#include "extsort_internal.h"

/* ---- The in-memory table ---------------------------------------------------
 * Open addressing with linear probing; a slot is the digest's low 64 bits and
 * a pointer to the entry in an arena of chunks laid out in insertion order:
 *   u64 seq, [u64 count], u32 keylen, u32 recenc, key, [record]
 * Why not dedup_strset: an entry here also carries the first occurrence's
 * sequence number and its record (which may differ from the key), the arena
 * is walked in insertion order, and the slot array is reused in place as the
 * sort array of sorted order; strset keeps keys only, and parallel arrays
 * for the rest would cost more memory than this whole table. */

#define TABLE_MIN_SLOTS 256

dedup_status ddi_es_table_init(dedup_extsort *es, table *t, size_t limit, bool counting)
{
    memset(t, 0, sizeof *t);
    t->limit = limit;
    t->counting = counting;
    t->hdr = counting ? 24 : 16;
    /* Chunks of limit/32 (at least 4 KiB); from 32 MiB limits on, of 2 MiB
     * less 128 bytes with their header, so that an allocator that maps large
     * blocks on huge pages (the CLI's) fits each, with its own header, in one
     * 2 MiB page.  Entries are probed at random, and on 4 KiB pages nearly
     * every probe also missed the TLB. */
    t->chunk_size = limit / 32 < ((size_t)1 << 20) ? clampz(limit / 32, 4096, (size_t)1 << 20)
                                                    : ((size_t)2 << 20) - 128 - sizeof(chunk);
    t->slots = ddi_es_alloc(es, TABLE_MIN_SLOTS * sizeof(slot));
    if (!t->slots)
        return ddi_es_fail(es, DEDUP_ERR_NOMEM);
    memset(t->slots, 0, TABLE_MIN_SLOTS * sizeof(slot));
    t->mask = TABLE_MIN_SLOTS - 1;
    return DEDUP_OK;
}

void ddi_es_table_free(dedup_extsort *es, table *t)
{
    chunk *c = t->head;
    while (c) {
        chunk *nx = c->next;
        ddi_es_free(es, c, sizeof(chunk) + c->cap);
        c = nx;
    }
    t->head = t->tail = NULL;
    if (t->slots)
        ddi_es_free(es, t->slots, (t->mask + 1) * sizeof(slot));
    t->slots = NULL;
    t->n = 0;
}

void ddi_es_e_item(const table *t, const uint8_t *e, item *it)
{
    it->seq = rd64(e);
    it->count = t->counting ? rd64(e + 8) : 1;
    it->keylen = e_keylen(t, e);
    it->key = e + t->hdr;
    uint32_t re = e_recenc(t, e);
    if (re == 0) {
        it->rec = it->key;
        it->reclen = it->keylen;
    } else {
        it->rec = it->key + it->keylen;
        it->reclen = re - 1;
    }
}

static size_t table_bytes(const table *t) { return t->arena + (t->mask + 1) * sizeof(slot); }

/* Inserts a new key (known absent; 's' is its empty slot).  Returns
 * DEDUP_ERR_FULL when the entry does not fit the table's share of the
 * budget; an empty table always takes its first entry. */
dedup_status ddi_es_table_insert(dedup_extsort *es, table *t, slot *s, dedup_digest d, uint64_t seq,
                                const item *it)
{
    bool same = it->rec == it->key && it->reclen == it->keylen;
    size_t esz = t->hdr + it->keylen + (same ? 0 : it->reclen);
    bool empty = t->n == 0;
    /* Grow the slot array first (old and new arrays live together briefly). */
    if ((t->n + 1) * 4 > (t->mask + 1) * 3) {
        size_t oldn = t->mask + 1, newn = oldn * 2;
        if (!empty && table_bytes(t) + newn * sizeof(slot) + esz > t->limit)
            return DEDUP_ERR_FULL;
        slot *ns = ddi_es_alloc(es, newn * sizeof(slot));
        if (!ns)
            return ddi_es_fail(es, DEDUP_ERR_NOMEM);
        memset(ns, 0, newn * sizeof(slot));
        for (size_t i = 0; i < oldn; i++) {
            if (!t->slots[i].e)
                continue;
            size_t j = (size_t)t->slots[i].tag & (newn - 1);
            while (ns[j].e)
                j = (j + 1) & (newn - 1);
            ns[j] = t->slots[i];
        }
        ddi_es_free(es, t->slots, oldn * sizeof(slot));
        t->slots = ns;
        t->mask = newn - 1;
        s = table_find(t, d, it->key, it->keylen);
    }
    if (!t->tail || t->tail->cap - t->tail->used < esz) {
        size_t cap = esz > t->chunk_size ? esz : t->chunk_size;
        if (!empty && table_bytes(t) + sizeof(chunk) + cap > t->limit)
            return DEDUP_ERR_FULL;
        chunk *c = ddi_es_alloc(es, sizeof(chunk) + cap);
        if (!c)
            return ddi_es_fail(es, DEDUP_ERR_NOMEM);
        c->next = NULL;
        c->cap = cap;
        c->used = 0;
        if (t->tail)
            t->tail->next = c;
        else
            t->head = c;
        t->tail = c;
        t->arena += sizeof(chunk) + cap;
    }
    uint8_t *e = CHUNK_DATA(t->tail) + t->tail->used;
    t->tail->used += esz;
    wr64(e, seq);
    if (t->counting)
        wr64(e + 8, 1);
    uint32_t kl = (uint32_t)it->keylen, re = same ? 0 : (uint32_t)it->reclen + 1;
    memcpy(e + t->hdr - 8, &kl, 4);
    memcpy(e + t->hdr - 4, &re, 4);
    if (it->keylen)
        memcpy(e + t->hdr, it->key, it->keylen);
    if (!same && it->reclen)
        memcpy(e + t->hdr + it->keylen, it->rec, it->reclen);
    s->tag = d.lo;
    s->e = e;
    t->n++;
    return DEDUP_OK;
}

/* ---- Sorting entries by key --------------------------------------------------
 * A multikey quicksort (Bentley & Sedgewick) whose "characters" are 8-byte
 * big-endian words of the key, cached next to the entry pointer: a
 * partitioning step reads only the contiguous array, and an entry is touched
 * once per 8 bytes of the prefix that tells it apart (instead of once per
 * byte and per level), which matters when the table is far larger than the
 * cache.  A key ending inside a word sorts before the longer keys sharing
 * that word (memcmp order: a prefix first). */

static inline uint64_t key_word(const table *t, const uint8_t *e, size_t wd)
{
    size_t kl = e_keylen(t, e), off = wd * 8;
    const uint8_t *k = e_key(t, e) + off;
    uint64_t v = 0;
    if (off + 8 <= kl) {
        memcpy(&v, k, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        v = __builtin_bswap64(v);
#endif
        return v;
    }
    for (size_t i = 0; off + i < kl; i++)
        v |= (uint64_t)k[i] << (56 - 8 * i);
    return v;
}

/* Whether x sorts before y, both sharing their bytes before 8 * wd (their
 * words w are those of word wd). */
static inline bool sel_less(const table *t, const sel *x, const sel *y, size_t wd)
{
    if (x->w != y->w)
        return x->w < y->w;
    size_t off = wd * 8;
    return key_cmp(e_key(t, x->e) + off, e_keylen(t, x->e) - off, e_key(t, y->e) + off,
                   e_keylen(t, y->e) - off) < 0;
}

static void sift_down(const table *t, sel *a, size_t i, size_t n, size_t wd)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && sel_less(t, &a[c], &a[c + 1], wd))
            c++;
        if (!sel_less(t, &a[i], &a[c], wd))
            return;
        sel tmp = a[i];
        a[i] = a[c];
        a[c] = tmp;
        i = c;
    }
}

/* The fallback when partitioning degenerates: a heapsort on whole keys,
 * O(n log n) comparisons whatever the order. */
static void heap_sort(const table *t, sel *a, size_t n, size_t wd)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(t, a, i, n, wd);
    for (size_t m = n; m > 1; m--) {
        sel tmp = a[0];
        a[0] = a[m - 1];
        a[m - 1] = tmp;
        sift_down(t, a, 0, m - 1, wd);
    }
}

static inline uint64_t med3(uint64_t c0, uint64_t c1, uint64_t c2)
{
    return c0 < c1 ? (c1 < c2 ? c1 : (c0 < c2 ? c2 : c0)) : (c0 < c2 ? c0 : (c1 < c2 ? c2 : c1));
}

/* 'depth' partitioning steps are left before the heapsort takes over (as
 * in introsort).  The pivot is the median of the words at a quarter, half
 * and three quarters of the range (a ninther on large ranges), not of the
 * first, middle and last words: input often arrives sorted (insertion
 * order is the input's), and the three-way partition leaves the upper part
 * of a sorted range rotated by one, smallest last, so a pivot taken at the
 * ends would be its second smallest word and each step would split off one
 * entry.  A step that splits nothing off (every word equal) moves
 * on to the next word and costs none of 'depth'. */
static void wsort(const table *t, sel *a, size_t n, size_t wd, unsigned depth)
{
    while (n > 1) {
        if (n < 16) { /* insertion sort on the bytes from 8 * wd on */
            size_t off = wd * 8;
            for (size_t i = 1; i < n; i++) {
                sel x = a[i];
                size_t xl = e_keylen(t, x.e) - off, j = i;
                while (j > 0) {
                    const sel *y = &a[j - 1];
                    if (y->w < x.w)
                        break;
                    if (y->w == x.w && key_cmp(e_key(t, y->e) + off, e_keylen(t, y->e) - off,
                                               e_key(t, x.e) + off, xl) <= 0)
                        break;
                    a[j] = a[j - 1];
                    j--;
                }
                a[j] = x;
            }
            return;
        }
        if (depth == 0) {
            heap_sort(t, a, n, wd);
            return;
        }
        size_t q = n / 4;
        uint64_t v;
        if (n >= 1024) {
            size_t e = n / 8;
            v = med3(med3(a[q - e].w, a[q].w, a[q + e].w), med3(a[2 * q - e].w, a[2 * q].w, a[2 * q + e].w),
                     med3(a[3 * q - e].w, a[3 * q].w, a[3 * q + e].w));
        } else {
            v = med3(a[q].w, a[2 * q].w, a[3 * q].w);
        }
        /* three-way partition: [0,lt) < v, [lt,gt) == v, [gt,n) > v */
        size_t lt = 0, i = 0, gt = n;
        while (i < gt) {
            if (a[i].w < v) {
                sel tmp = a[lt];
                a[lt++] = a[i];
                a[i++] = tmp;
            } else if (a[i].w > v) {
                sel tmp = a[--gt];
                a[gt] = a[i];
                a[i] = tmp;
            } else {
                i++;
            }
        }
        if (lt > 0 || gt < n) /* a step that only moves on to the next word is free */
            depth--;
        wsort(t, a, lt, wd, depth);
        wsort(t, a + gt, n - gt, wd, depth);
        /* equal words: keys ending within this word first (shorter first;
         * two such keys of one length would be equal keys), then the longer
         * ones, sorted on their next word */
        sel *b = a + lt;
        size_t m = gt - lt, nend = 0, lim = (wd + 1) * 8;
        for (size_t k = 0; k < m; k++) {
            if (k + 8 < m)
                DD_PREFETCH(b[k + 8].e);
            if (e_keylen(t, b[k].e) <= lim) {
                sel tmp = b[nend];
                b[nend++] = b[k];
                b[k] = tmp;
            } else {
                b[k].w = key_word(t, b[k].e, wd + 1);
            }
        }
        for (size_t k = 1; k < nend; k++) {
            sel x = b[k];
            size_t j = k;
            while (j > 0 && e_keylen(t, b[j - 1].e) > e_keylen(t, x.e)) {
                b[j] = b[j - 1];
                j--;
            }
            b[j] = x;
        }
        a = b + nend;
        n = m - nend;
        wd++;
    }
}

/* Sorts a[0..n) (distinct keys sharing their bytes before 8 * wd): input
 * already in order, or in reverse order, is recognised in one pass over the
 * array and its keys and costs no sort at all. */
static void sort_sels(const table *t, sel *a, size_t n, size_t wd)
{
    size_t i = 1;
    while (i < n && sel_less(t, &a[i - 1], &a[i], wd))
        i++;
    if (i >= n)
        return;
    if (i == 1) {
        while (i < n && sel_less(t, &a[i], &a[i - 1], wd))
            i++;
        if (i >= n) {
            for (size_t l = 0, r = n - 1; l < r; l++, r--) {
                sel tmp = a[l];
                a[l] = a[r];
                a[r] = tmp;
            }
            return;
        }
    }
    unsigned depth = 0;
    for (size_t m = n; m > 1; m >>= 1)
        depth += 2;
    wsort(t, a, n, wd, depth + 8);
}

/* Rewrites the slot array as an array of entries sorted by key and returns
 * it (the table can no longer be probed afterwards). */
_Static_assert(sizeof(sel) == sizeof(slot), "sorting reuses the slot array");
sel *ddi_es_table_sorted(table *t)
{
    sel *arr = (sel *)(void *)t->slots; /* a slot and a sel are both 16 bytes */
    /* Two sequential passes over the arena (insertion order, no random
     * access): the bytes all keys share with the first one, then the sort
     * array with each key's first word past that common prefix (URLs share
     * "https://www." and would otherwise cost a whole refill level). */
    size_t lcp = SIZE_MAX;
    const uint8_t *k0 = NULL;
    TABLE_FOREACH(t, e)
    {
        if (lcp < 8)
            break;
        const uint8_t *k = e_key(t, e);
        size_t l = e_keylen(t, e), q = 0;
        if (!k0) {
            k0 = k;
            lcp = l;
            continue;
        }
        size_t m = lcp < l ? lcp : l;
        while (q < m && k[q] == k0[q])
            q++;
        lcp = q;
    }
    size_t wd = lcp == SIZE_MAX ? 0 : lcp / 8, j = 0;
    TABLE_FOREACH(t, e)
    {
        sel x = {key_word(t, e, wd), e};
        memcpy(&arr[j++], &x, sizeof x); /* slot memory, no longer probed */
    }
    sort_sels(t, arr, j, wd);
    return arr;
}
