/*
 * digestset.c - the exact set of 128-bit digests (dedup_digestset,
 * dedup/set.h): an ordered linear-probing table that grows in place; how it
 * works is described below.  What the three sets share is in set.c.
 *
 * Digests: a slot is the 16-byte digest itself, kept in sorted order; the
 * all-ones digest marks empty and the (astronomically unlikely) all-ones key
 * is kept in a side flag.  Counts, when asked for, live in a parallel array.
 */
#include "set_internal.h"

#include "dedup/limits.h"

#include <stdlib.h>

/*
 * How the digest set works.  The table is kept sorted by digest (lo, then
 * hi): an ordered linear-probing table (Amble and Knuth), which is Robin
 * Hood hashing with a monotone home function.  The home slot of a digest is
 * dedup_reduce(lo, nhome), monotone in lo, and there is no wrap-around:
 * 'nslots' = 'nhome' + an overflow tail, and the last slot is always empty,
 * so every scan stops without a bounds check.  An empty slot holds the
 * all-ones digest, which compares greater than every stored digest; the
 * all-ones digest itself is kept in a side flag.
 *
 * Invariants: (1) the occupied slots, read left to right, hold strictly
 * increasing digests; (2) a digest sits at or right of its home and every
 * slot between its home and it is occupied.  Together they make the layout
 * canonical: the k-th smallest digest sits at max(home(k), pos(k-1) + 1).
 *
 * Lookup: from the home slot, step over smaller digests; the first slot that
 * is not smaller holds the digest or is where it belongs (absent keys stop at
 * the first larger digest, not at the end of the cluster).  Insert: shift the
 * rest of the cluster one slot right (memmove up to the next empty slot) and
 * write the digest in the gap; if the shift would fill the last slot, the
 * tail is lengthened first.
 *
 * Growth is in place: the home range grows by 1/4 when the load passes
 * 17/20 of 'nhome', the blocks are enlarged through the allocator's realloc
 * (no second table), and every digest moves to its canonical position for
 * the new home range.  New positions are never left of old ones (homes only
 * move right and the layout is canonical), so a pass from the last digest to
 * the first never overwrites one not yet moved.  The new positions follow a
 * left-to-right recurrence, so the pass works on segments of DSET_SEG
 * slots from the right: it finds the recurrence's carry into the segment
 * from the few digests just left of it (dset_carry bounds how far to look),
 * computes the segment's new positions into a stack buffer, then moves its
 * digests right to left.  One read and one write of the table, no scratch
 * memory.  Counts move with their digests.
 */

#define DSET_SEG 1024u  /* slots per segment of the growth pass */
#define DSET_TAIL 64u   /* overflow slots past the home range */
#define DSET_LOAD_NUM 17u
#define DSET_LOAD_DEN 20u
#define DSET_MAX_SLOTS (UINT64_C(1) << 40)

struct dedup_digestset {
    dedup_allocator alloc;
    uint64_t seed;
    uint64_t limit;
    dedup_digest *slots; /* sorted, all-ones = empty; slot nslots-1 always empty */
    uint64_t *counts;    /* parallel to slots, or NULL */
    uint64_t nhome;      /* home range: home = dedup_reduce(lo, nhome) */
    uint64_t nslots;     /* nhome + tail; slots in [nslots, slots_cap) are empty */
    uint64_t slots_cap;  /* slots allocated */
    uint64_t counts_cap; /* counts allocated (0 without counts) */
    uint64_t size;
    uint64_t grow_at;
    bool has_ones; /* the all-ones digest, kept aside */
    uint64_t ones_count;
};

static inline bool dg_empty(dedup_digest d) { return (d.lo & d.hi) == UINT64_MAX; }
static inline bool dg_less(dedup_digest a, dedup_digest b)
{
    return a.lo < b.lo || (a.lo == b.lo && a.hi < b.hi);
}
static inline bool dg_equal(dedup_digest a, dedup_digest b) { return a.lo == b.lo && a.hi == b.hi; }

static uint64_t dset_grow_at(uint64_t nhome) { return nhome * DSET_LOAD_NUM / DSET_LOAD_DEN; }

/* Bytes the set holds with room for 'n' slots (at least its current blocks). */
static size_t dset_bytes_with(const dedup_digestset *s, uint64_t n)
{
    uint64_t sc = s->slots_cap > n ? s->slots_cap : n;
    uint64_t cc = s->counts ? (s->counts_cap > n ? s->counts_cap : n) : 0;
    return sizeof *s + (size_t)sc * sizeof(dedup_digest) + (size_t)cc * 8;
}

size_t dedup_digestset_memory_usage(const dedup_digestset *s)
{
    return s ? dset_bytes_with(s, 0) : 0;
}

uint64_t dedup_digestset_memory_for(uint64_t capacity)
{
    if (capacity > DSET_MAX_SLOTS)
        return 0;
    uint64_t nslots = ddi_set_slots_for(capacity, DSET_LOAD_NUM, DSET_LOAD_DEN) + DSET_TAIL;
    return nslots > DSET_MAX_SLOTS ? 0 : sizeof(dedup_digestset) + nslots * sizeof(dedup_digest);
}

/* Makes both blocks hold at least 'n' slots; new slots are empty.  On
 * failure the set is unchanged apart from a block that may have grown. */
static dedup_status dset_reserve(dedup_digestset *s, uint64_t n)
{
    if (s->slots_cap < n) {
        dedup_digest *p = ddi_realloc(&s->alloc, s->slots, (size_t)s->slots_cap * sizeof *p,
                                     (size_t)n * sizeof *p);
        if (!p)
            return DEDUP_ERR_NOMEM;
        memset(p + s->slots_cap, 0xff, (size_t)(n - s->slots_cap) * sizeof *p);
        s->slots = p;
        s->slots_cap = n;
    }
    if (s->counts && s->counts_cap < n) {
        uint64_t *c = ddi_realloc(&s->alloc, s->counts, (size_t)s->counts_cap * 8, (size_t)n * 8);
        if (!c)
            return DEDUP_ERR_NOMEM;
        s->counts = c;
        s->counts_cap = n;
    }
    return DEDUP_OK;
}

/* Whether holding 'n' slots stays within the limit.
 * Without a realloc in the allocator hook, enlarging copies the block, so
 * the old blocks count too. */
static bool dset_fits(const dedup_digestset *s, uint64_t n)
{
    if (!s->limit)
        return true;
    size_t need = dset_bytes_with(s, n);
    if (!s->alloc.realloc_fn && n > s->slots_cap)
        need += dset_bytes_with(s, 0) - sizeof *s;
    return need <= s->limit;
}

/* The table enlarged to n slots, within the limits: DEDUP_ERR_LIMIT past the
 * largest table, DEDUP_ERR_FULL past the memory limit, else dset_reserve(). */
static dedup_status dset_make_room(dedup_digestset *s, uint64_t n)
{
    if (n > DSET_MAX_SLOTS)
        return DEDUP_ERR_LIMIT;
    if (!dset_fits(s, n))
        return DEDUP_ERR_FULL;
    return dset_reserve(s, n);
}

dedup_status dedup_digestset_create(const dedup_set_params *params, const dedup_allocator *alloc,
                                    dedup_digestset **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_set_params def;
    if (!params) {
        dedup_set_params_init(&def);
        params = &def;
    }
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    if (params->capacity > DSET_MAX_SLOTS)
        return DEDUP_ERR_LIMIT;
    uint64_t nhome = ddi_set_slots_for(params->capacity, DSET_LOAD_NUM, DSET_LOAD_DEN);
    uint64_t nslots = nhome + DSET_TAIL;
    if (nslots > DSET_MAX_SLOTS)
        return DEDUP_ERR_LIMIT;
    if (params->memory_limit &&
        sizeof(dedup_digestset) + nslots * (sizeof(dedup_digest) + (params->counts ? 8 : 0)) >
            params->memory_limit)
        return DEDUP_ERR_FULL;
    dedup_digestset *s = ddi_calloc(&a, 1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->alloc = a;
    s->seed = params->seed;
    s->limit = params->memory_limit;
    s->slots = ddi_malloc(&a, (size_t)nslots * sizeof(dedup_digest));
    if (params->counts)
        s->counts = ddi_malloc(&a, (size_t)nslots * 8);
    if (!s->slots || (params->counts && !s->counts)) {
        ddi_free(&a, s->slots);
        ddi_free(&a, s->counts);
        ddi_free(&a, s);
        return DEDUP_ERR_NOMEM;
    }
    memset(s->slots, 0xff, (size_t)nslots * sizeof(dedup_digest));
    s->slots_cap = nslots;
    s->counts_cap = params->counts ? nslots : 0;
    s->nhome = nhome;
    s->nslots = nslots;
    s->grow_at = dset_grow_at(nhome);
    *out = s;
    return DEDUP_OK;
}

void dedup_digestset_free(dedup_digestset *s)
{
    if (!s)
        return;
    ddi_free(&s->alloc, s->slots);
    ddi_free(&s->alloc, s->counts);
    ddi_free(&s->alloc, s);
}

void dedup_digestset_prefetch(const dedup_digestset *s, dedup_digest d)
{
    /* The home slot and the next cache line: at loads of 2/3 to 17/20 the
     * scan (and an insert's shift) often runs past the home slot's line. */
    const dedup_digest *p = &s->slots[dedup_reduce(d.lo, s->nhome)];
    DD_PREFETCH(p);
    DD_PREFETCH((const unsigned char *)p + 64);
}

/* The first slot at or right of d's home that does not hold a smaller
 * digest: d's slot if present, else where d belongs.  d is not all-ones. */
static inline uint64_t dset_seek(const dedup_digestset *s, dedup_digest d)
{
    const dedup_digest *t = s->slots;
    uint64_t i = dedup_reduce(d.lo, s->nhome);
    while (dg_less(t[i], d))
        i++;
    return i;
}

/* The lowest new slot free for the first digest at or right of old slot
 * 'base' when the home range grows from 'h0' to 'h1': one more than the new
 * position of the last digest left of 'base' (0 if there is none).
 *
 * The new positions satisfy pos'(k) = max(home'(k), pos'(k-1) + 1), so the
 * answer is the maximum over digests j left of 'base' of home'(j) + (number
 * of digests from j to the last one).  Scanning j leftwards, the digests
 * still to the left can only matter through pos'(j-1) + 1 + that number,
 * and pos'(i) < (pos(i) + 1) * h1 / h0 for every digest i (by induction:
 * home'(i) < (home(i) + 1) * h1 / h0 <= (pos(i) + 1) * h1 / h0, and the
 * ratio is at least 1).  So the scan stops as soon as that bound cannot
 * beat the maximum found: a few slots past the start of the cluster, since
 * the bound falls by h1/h0 per slot and the count rises by at most 1. */
static uint64_t dset_carry(const dedup_digest *t, uint64_t base, uint64_t h0, uint64_t h1)
{
    uint64_t best = 0, count = 0;
    for (uint64_t p = base; p-- > 0;) {
        if (dg_empty(t[p]))
            continue;
        count++;
        uint64_t v = dedup_reduce(t[p].lo, h1) + count;
        if (v > best)
            best = v;
        /* digests left of p: pos'(j-1) + 1 <= ceil(p * h1 / h0) */
        uint64_t bound = (uint64_t)(((dedup_u128_)p * h1 + h0 - 1) / h0);
        if (bound + count <= best)
            break;
    }
    return best;
}

/* Grows the home range by 1/4 and moves every digest to its new canonical
 * slot in place (see "How the digest set works"). */
static dedup_status dset_grow(dedup_digestset *s)
{
    uint64_t add = s->nhome / 4 > 16 ? s->nhome / 4 : 16;
    uint64_t nh = s->nhome + add;
    uint64_t old = s->nslots;
    /* the new layout ends one slot after the last digest's new position */
    uint64_t n = dset_carry(s->slots, old, s->nhome, nh) + DSET_TAIL / 2;
    if (n < nh + DSET_TAIL)
        n = nh + DSET_TAIL;
    if (n < old)
        n = old;
    dedup_status st = dset_make_room(s, n);
    if (st)
        return st;

    /* Right to left, one segment at a time: the carry into the segment from
     * the digests left of it (still in their old slots), the segment's new
     * positions left to right, then its digests moved right to left. */
    dedup_digest *t = s->slots;
    uint64_t *c = s->counts;
    uint64_t pos[DSET_SEG];
    uint64_t nseg = (old + DSET_SEG - 1) / DSET_SEG;
    for (uint64_t g = nseg; g-- > 0;) {
        uint64_t base = g * DSET_SEG;
        uint64_t end = base + DSET_SEG < old ? base + DSET_SEG : old;
        uint64_t next = dset_carry(t, base, s->nhome, nh);
        for (uint64_t p = base; p < end; p++) {
            if (dg_empty(t[p]))
                continue;
            uint64_t h = dedup_reduce(t[p].lo, nh);
            pos[p - base] = h > next ? h : next;
            next = pos[p - base] + 1;
        }
        for (uint64_t p = end; p-- > base;) {
            if (dg_empty(t[p]))
                continue;
            uint64_t q = pos[p - base];
            if (q == p)
                continue;
            t[q] = t[p];
            t[p].lo = t[p].hi = UINT64_MAX;
            if (c)
                c[q] = c[p];
        }
    }
    s->nhome = nh;
    s->nslots = n;
    s->grow_at = dset_grow_at(nh);
    return DEDUP_OK;
}

/* Lengthens the overflow tail so that slot 'nslots - 1' is empty again. */
static dedup_status dset_extend_tail(dedup_digestset *s)
{
    uint64_t tail = s->nslots - s->nhome;
    uint64_t n = s->nslots + (tail / 2 > DSET_TAIL ? tail / 2 : DSET_TAIL);
    dedup_status st = dset_make_room(s, n);
    if (st)
        return st;
    s->nslots = n;
    return DEDUP_OK;
}

dedup_status dedup_digestset_insert(dedup_digestset *s, dedup_digest d, dedup_verdict *verdict)
{
    if (DD_UNLIKELY(dg_empty(d))) {
        *verdict = s->has_ones ? DEDUP_DUPLICATE : DEDUP_NEW;
        if (!s->has_ones)
            s->size++;
        s->has_ones = true;
        s->ones_count++;
        return DEDUP_OK;
    }
    uint64_t i = dset_seek(s, d);
    if (dg_equal(s->slots[i], d)) {
        if (s->counts)
            s->counts[i]++;
        *verdict = DEDUP_DUPLICATE;
        return DEDUP_OK;
    }
    if (s->size + 1 > s->grow_at) {
        dedup_status st = dset_grow(s);
        if (st)
            return st;
        i = dset_seek(s, d);
    }
    uint64_t j = i;
    while (!dg_empty(s->slots[j]))
        j++;
    if (DD_UNLIKELY(j == s->nslots - 1)) {
        dedup_status st = dset_extend_tail(s);
        if (st)
            return st;
    }
    dedup_digest *t = s->slots;
    memmove(t + i + 1, t + i, (size_t)(j - i) * sizeof *t);
    t[i] = d;
    if (s->counts) {
        memmove(s->counts + i + 1, s->counts + i, (size_t)(j - i) * 8);
        s->counts[i] = 1;
    }
    s->size++;
    *verdict = DEDUP_NEW;
    return DEDUP_OK;
}

bool dedup_digestset_contains(const dedup_digestset *s, dedup_digest d)
{
    if (dg_empty(d))
        return s->has_ones;
    return dg_equal(s->slots[dset_seek(s, d)], d);
}

uint64_t dedup_digestset_count_of(const dedup_digestset *s, dedup_digest d)
{
    if (dg_empty(d))
        return s->has_ones ? (s->counts ? s->ones_count : 1) : 0;
    uint64_t i = dset_seek(s, d);
    if (!dg_equal(s->slots[i], d))
        return 0;
    return s->counts ? s->counts[i] : 1;
}

uint64_t dedup_digestset_size(const dedup_digestset *s) { return s->size; }
uint64_t dedup_digestset_seed(const dedup_digestset *s) { return s->seed; }

/* File layout (type SET_DIGEST): params = keys u64, flags u32 (bit 0:
 * counts), reserved u32.  Payload: per key lo u64, hi u64, [count u64].
 * Written in increasing (lo, hi) order; read in any order. */
dedup_status dedup_digestset_save(const dedup_digestset *s, dedup_sink *sink)
{
    bool counts = s->counts != NULL;
    uint64_t per = counts ? 24 : 16;
    unsigned char p[16];
    dedup_put_u64(p, s->size);
    dedup_put_u32(p + 8, counts ? 1u : 0u);
    dedup_put_u32(p + 12, 0);
    dedup_encoder e;
    dedup_status st = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_SET_DIGEST, s->seed, p, sizeof p,
                                          s->size * per);
    unsigned char rec[24];
    for (uint64_t i = 0; !st && i < s->nslots; i++) {
        dedup_digest x = s->slots[i];
        if (dg_empty(x))
            continue;
        dedup_put_u64(rec, x.lo);
        dedup_put_u64(rec + 8, x.hi);
        if (counts)
            dedup_put_u64(rec + 16, s->counts[i]);
        st = dedup_encoder_write(&e, rec, per);
    }
    if (!st && s->has_ones) {
        memset(rec, 0xff, 16);
        dedup_put_u64(rec + 16, s->ones_count);
        st = dedup_encoder_write(&e, rec, per);
    }
    if (!st)
        st = dedup_encoder_end(&e);
    return st;
}

dedup_status dedup_digestset_load(dedup_source src, const dedup_allocator *alloc,
                                  dedup_digestset **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    /* Every allocation through the caller's hook; the decoder (~5 KB, 64-byte
     * aligned, which no allocator promises) on the stack, as in every loader. */
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_decoder decoder, *d = &decoder;
    dedup_digestset *s = NULL;
    dedup_status st = dedup_decoder_begin(d, src, DEDUP_TYPE_SET_DIGEST);
    if (st)
        goto done;
    if (d->header.params_len != 16) {
        st = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t nkeys = dedup_get_u64(d->params);
    uint32_t flags = dedup_get_u32(d->params + 8);
    bool counts = flags & 1u;
    uint64_t per = counts ? 24 : 16;
    if ((flags & ~1u) || dedup_get_u32(d->params + 12) || nkeys > (UINT64_C(1) << 38) ||
        nkeys * per != d->header.payload_len) {
        st = DEDUP_ERR_CORRUPT;
        goto done;
    }
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.capacity = nkeys;
    p.seed = d->header.seed;
    p.counts = counts;
    st = dedup_digestset_create(&p, &a, &s);
    for (uint64_t i = 0; !st && i < nkeys; i++) {
        unsigned char rec[24];
        st = dedup_decoder_read(d, rec, per);
        if (st)
            break;
        dedup_digest x = {dedup_get_u64(rec), dedup_get_u64(rec + 8)};
        dedup_verdict v;
        st = dedup_digestset_insert(s, x, &v);
        if (!st && v != DEDUP_NEW)
            st = DEDUP_ERR_CORRUPT;
        if (!st && counts) {
            uint64_t c = dedup_get_u64(rec + 16);
            if (c == 0)
                st = DEDUP_ERR_CORRUPT;
            else if (dg_empty(x))
                s->ones_count = c;
            else
                s->counts[dset_seek(s, x)] = c;
        }
    }
    if (!st)
        st = dedup_decoder_end(d);
done:
    if (st) {
        dedup_digestset_free(s);
        return st;
    }
    *out = s;
    return DEDUP_OK;
}
