/* test_set.c - exact sets against a naive model, limits, counts, persistence. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/set.h"

/* Key i of a small universe: variable length, embedded NUL bytes, some empty. */

static dedup_status save_dset(const void *o, dedup_sink *k) { return dedup_digestset_save(o, k); }
static dedup_status save_u64set(const void *o, dedup_sink *k) { return dedup_u64set_save(o, k); }

/* What 'save' writes for obj, in a malloc'd buffer of *len bytes. */
static unsigned char *saved(dedup_save_fn save, const void *obj, size_t *len)
{
    uint64_t size;
    dedup_sink cs = dedup_count_sink_init(&size);
    assert_int_equal(save(obj, &cs), DEDUP_OK);
    return tu_save_blob(save, obj, size, len);
}

static size_t make_key(uint64_t id, unsigned char *buf)
{
    if (id == 0)
        return 0;
    size_t len = (size_t)(id % 37);
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)((id * 131 + i * 7) & 0xff);
    int n = snprintf((char *)buf + len, 32, "#%llu", (unsigned long long)id);
    buf[len + (size_t)n] = 0; /* the NUL is part of the key */
    return len + (size_t)n + 1;
}

static void test_strset_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    enum { UNIVERSE = 50000, OPS = 400000 };
    uint64_t *seen = calloc(UNIVERSE, sizeof *seen);
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.counts = true;
    dedup_strset *s;
    assert_int_equal(dedup_strset_create(&p, NULL, &s), DEDUP_OK);
    unsigned char key[128];
    uint64_t distinct = 0;
    for (int i = 0; i < OPS; i++) {
        uint64_t id = tu_below(&r, UNIVERSE);
        size_t len = make_key(id, key);
        dedup_verdict v;
        assert_int_equal(dedup_strset_insert(s, key, len, dedup_strset_digest(s, key, len), &v),
                         DEDUP_OK);
        assert_int_equal(v, seen[id] ? DEDUP_DUPLICATE : DEDUP_NEW);
        if (!seen[id])
            distinct++;
        seen[id]++;
    }
    assert_int_equal(dedup_strset_size(s), distinct);
    for (uint64_t id = 0; id < UNIVERSE; id++) {
        size_t len = make_key(id, key);
        dedup_digest d = dedup_strset_digest(s, key, len);
        assert_int_equal(dedup_strset_contains(s, key, len, d), seen[id] != 0);
        assert_int_equal(dedup_strset_count_of(s, key, len, d), seen[id]);
    }
    /* Round trip through the file format keeps keys, counts and order. */
    uint64_t size;
    dedup_sink cs = dedup_count_sink_init(&size);
    assert_int_equal(dedup_strset_save(s, &cs), DEDUP_OK);
    unsigned char *buf = malloc(size);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    assert_int_equal(dedup_strset_save(s, &sink), DEDUP_OK);
    assert_int_equal(ms.len, size);
    dedup_mem_source src;
    dedup_strset *t;
    assert_int_equal(dedup_strset_load(dedup_mem_source_init(&src, buf, size), NULL, &t), DEDUP_OK);
    assert_int_equal(dedup_strset_size(t), distinct);
    for (uint64_t id = 0; id < UNIVERSE; id++) {
        size_t len = make_key(id, key);
        assert_int_equal(dedup_strset_count_of(t, key, len, dedup_strset_digest(t, key, len)),
                         seen[id]);
    }
    /* Every truncation and a flipped byte are rejected. */
    for (size_t cut = 0; cut < size; cut += 1 + cut / 8) {
        dedup_strset *u = NULL;
        assert_int_not_equal(dedup_strset_load(dedup_mem_source_init(&src, buf, cut), NULL, &u),
                             DEDUP_OK);
        assert_null(u);
    }
    buf[size / 2] ^= 0x40;
    dedup_strset *u = NULL;
    assert_int_not_equal(dedup_strset_load(dedup_mem_source_init(&src, buf, size), NULL, &u),
                         DEDUP_OK);
    free(buf);
    dedup_strset_free(t);
    dedup_strset_free(s);
    free(seen);
}

typedef struct order_ctx {
    uint64_t next;
    const uint64_t *order;
} order_ctx;

static int check_order(void *ctx, const void *key, size_t len, uint64_t count)
{
    order_ctx *o = ctx;
    unsigned char expect[128];
    size_t el = make_key(o->order[o->next++], expect);
    (void)count;
    return !(el == len && memcmp(expect, key, len) == 0);
}

static void test_strset_foreach_order(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() + 1};
    dedup_strset *s;
    assert_int_equal(dedup_strset_create(NULL, NULL, &s), DEDUP_OK);
    uint64_t order[5000], n = 0;
    unsigned char key[128];
    for (int i = 0; i < 20000; i++) {
        uint64_t id = tu_below(&r, 5000);
        size_t len = make_key(id, key);
        dedup_verdict v;
        assert_int_equal(dedup_strset_insert(s, key, len, dedup_strset_digest(s, key, len), &v),
                         DEDUP_OK);
        if (v == DEDUP_NEW)
            order[n++] = id;
    }
    order_ctx o = {0, order};
    assert_int_equal(dedup_strset_foreach(s, check_order, &o), 0);
    assert_int_equal(o.next, n);
    dedup_strset_free(s);
}

static void test_strset_limit(void **state)
{
    (void)state;
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.memory_limit = 6u << 20;
    dedup_strset *s;
    assert_int_equal(dedup_strset_create(&p, NULL, &s), DEDUP_OK);
    unsigned char key[64];
    uint64_t inserted = 0;
    dedup_status st = DEDUP_OK;
    for (uint64_t i = 1; st == DEDUP_OK; i++) {
        int len = snprintf((char *)key, sizeof key, "limit-key-%llu", (unsigned long long)i);
        dedup_verdict v;
        st = dedup_strset_insert(s, key, (size_t)len, dedup_strset_digest(s, key, (size_t)len), &v);
        if (st == DEDUP_OK)
            inserted++;
        assert_true(dedup_strset_memory_usage(s) <= p.memory_limit);
    }
    assert_int_equal(st, DEDUP_ERR_FULL);
    assert_int_equal(dedup_strset_size(s), inserted);
    /* FULL changed nothing: existing keys are still duplicates. */
    int len = snprintf((char *)key, sizeof key, "limit-key-%d", 1);
    dedup_verdict v;
    assert_int_equal(dedup_strset_insert(s, key, (size_t)len, dedup_strset_digest(s, key, (size_t)len), &v),
                     DEDUP_OK);
    assert_int_equal(v, DEDUP_DUPLICATE);
    dedup_strset_free(s);
}

static void test_strset_huge_key(void **state)
{
    (void)state;
    size_t big = 9u << 20; /* larger than an arena chunk */
    unsigned char *k = malloc(big);
    memset(k, 'x', big);
    dedup_strset *s;
    assert_int_equal(dedup_strset_create(NULL, NULL, &s), DEDUP_OK);
    dedup_verdict v;
    assert_int_equal(dedup_strset_insert(s, k, big, dedup_strset_digest(s, k, big), &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_NEW);
    k[big - 1] = 'y';
    assert_int_equal(dedup_strset_insert(s, k, big, dedup_strset_digest(s, k, big), &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_NEW);
    assert_int_equal(dedup_strset_insert(s, k, big, dedup_strset_digest(s, k, big), &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_DUPLICATE);
    dedup_strset_free(s);
    free(k);
}

static void test_digestset_and_u64set_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() + 2};
    enum { UNIVERSE = 100000, OPS = 500000 };
    unsigned char *seen = calloc(UNIVERSE, 1);
    uint32_t *cnt = calloc(UNIVERSE, sizeof *cnt);
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.counts = true;
    dedup_digestset *ds;
    assert_int_equal(dedup_digestset_create(&p, NULL, &ds), DEDUP_OK);
    p.counts = false;
    dedup_u64set *us;
    assert_int_equal(dedup_u64set_create(&p, NULL, &us), DEDUP_OK);
    for (int i = 0; i < OPS; i++) {
        uint64_t id = tu_below(&r, UNIVERSE);
        dedup_digest d = dedup_hash_u64(id, 7);
        if (id == 5)
            d.lo = d.hi = 0; /* the all-zero digest is a key like any other */
        dedup_verdict v1, v2;
        assert_int_equal(dedup_digestset_insert(ds, d, &v1), DEDUP_OK);
        assert_int_equal(dedup_u64set_insert(us, id, &v2), DEDUP_OK);
        assert_int_equal(v1, seen[id] ? DEDUP_DUPLICATE : DEDUP_NEW);
        assert_int_equal(v2, seen[id] ? DEDUP_DUPLICATE : DEDUP_NEW);
        seen[id] = 1;
        cnt[id]++;
    }
    /* round trips */
    size_t size;
    unsigned char *buf = saved(save_dset, ds, &size);
    dedup_mem_source src;
    dedup_digestset *ds2;
    assert_int_equal(dedup_digestset_load(dedup_mem_source_init(&src, buf, size), NULL, &ds2), DEDUP_OK);
    free(buf);
    buf = saved(save_u64set, us, &size);
    dedup_u64set *us2;
    assert_int_equal(dedup_u64set_load(dedup_mem_source_init(&src, buf, size), NULL, &us2), DEDUP_OK);
    free(buf);
    for (uint64_t id = 0; id < UNIVERSE; id++) {
        dedup_digest d = dedup_hash_u64(id, 7);
        if (id == 5)
            d.lo = d.hi = 0;
        assert_int_equal(dedup_digestset_contains(ds2, d), seen[id]);
        assert_int_equal(dedup_digestset_count_of(ds2, d), cnt[id]);
        assert_int_equal(dedup_u64set_contains(us2, id), seen[id]);
    }
    dedup_digestset_free(ds);
    dedup_digestset_free(ds2);
    dedup_u64set_free(us);
    dedup_u64set_free(us2);
    free(seen);
    free(cnt);
}

/* ---- Digest set: ordered table that grows in place ------------------------ */

/* A naive model: open addressing on a hash of its own, never resized. */
typedef struct dmodel {
    dedup_digest *k;
    uint64_t *c;
    unsigned char *used;
    uint64_t cap, n;
} dmodel;

static void dm_init(dmodel *m, uint64_t cap)
{
    m->cap = cap;
    m->n = 0;
    m->k = calloc(cap, sizeof *m->k);
    m->c = calloc(cap, sizeof *m->c);
    m->used = calloc(cap, 1);
    assert_non_null(m->k);
    assert_non_null(m->c);
    assert_non_null(m->used);
}
static void dm_free(dmodel *m)
{
    free(m->k);
    free(m->c);
    free(m->used);
}
static uint64_t *dm_slot(dmodel *m, dedup_digest d, bool add)
{
    uint64_t h = (d.lo ^ (d.hi * UINT64_C(0x9E3779B97F4A7C15))) * UINT64_C(0xBF58476D1CE4E5B9);
    uint64_t i = (h >> 20) % m->cap;
    while (m->used[i]) {
        if (m->k[i].lo == d.lo && m->k[i].hi == d.hi)
            return &m->c[i];
        i = (i + 1) % m->cap;
    }
    if (!add)
        return NULL;
    assert_true(m->n + 1 < m->cap);
    m->used[i] = 1;
    m->k[i] = d;
    m->n++;
    return &m->c[i];
}

/* Digests of several shapes: uniform; sharing the top bits of lo (one home
 * slot, long clusters); lo near 2^64 (clusters at the end of the table, in
 * the overflow tail); equal lo with different hi; the all-zero and all-ones
 * digests. */
static dedup_digest dm_draw(tu_rng *r, uint64_t universe, unsigned shape_mask)
{
    uint64_t id = tu_below(r, universe);
    tu_rng k = {id * 0x1000193u + 17};
    dedup_digest d = {tu_next(&k), tu_next(&k)};
    unsigned shape = (unsigned)(tu_next(&k) % 16) & shape_mask;
    switch (shape) {
    case 1: d.lo = UINT64_C(0x1234500000000000) | (d.lo >> 44); break; /* same top 20 bits */
    case 2: d.lo = UINT64_MAX - (d.lo >> 48); break;                   /* the very end */
    case 3: d.lo = UINT64_C(42); break;                                /* equal lo */
    case 4: d.lo = 0; break;                                           /* lo 0 */
    case 5:
        if (id % 97 == 0)
            d.lo = d.hi = (id & 1) ? 0 : UINT64_MAX; /* the two special digests */
        break;
    default: break;
    }
    return d;
}

static void dm_check_all(const dedup_digestset *s, dmodel *m)
{
    assert_int_equal(dedup_digestset_size(s), m->n);
    for (uint64_t i = 0; i < m->cap; i++) {
        if (!m->used[i])
            continue;
        assert_true(dedup_digestset_contains(s, m->k[i]));
        assert_int_equal(dedup_digestset_count_of(s, m->k[i]), m->c[i]);
    }
}

/* Under a sanitizer the model runs a third of the keys: the growth passes
 * still cross many 1,024-slot segments and several doublings (the checks
 * are exact, not statistics). */
#if defined(DEDUP_SANITIZED) || defined(DEDUP_TSANITIZED)
#define DM_SCALE 3
#else
#define DM_SCALE 1
#endif

static void digestset_model_run(uint64_t seed, unsigned shape_mask, uint64_t capacity)
{
    tu_rng r = {seed};
    enum { UNIVERSE = 60000 / DM_SCALE, OPS = 150000 / DM_SCALE };
    dmodel m;
    dm_init(&m, 4 * UNIVERSE);
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.counts = true;
    p.capacity = capacity;
    dedup_digestset *s;
    assert_int_equal(dedup_digestset_create(&p, NULL, &s), DEDUP_OK);
    for (int i = 0; i < OPS; i++) {
        dedup_digest d = dm_draw(&r, UNIVERSE, shape_mask);
        uint64_t *c = dm_slot(&m, d, false);
        dedup_verdict v;
        if (i % 3 == 0) { /* lookups of present and absent keys */
            assert_int_equal(dedup_digestset_contains(s, d), c != NULL);
            assert_int_equal(dedup_digestset_count_of(s, d), c ? *c : 0);
        }
        assert_int_equal(dedup_digestset_insert(s, d, &v), DEDUP_OK);
        assert_int_equal(v, c ? DEDUP_DUPLICATE : DEDUP_NEW);
        if (!c)
            c = dm_slot(&m, d, true);
        (*c)++;
        if ((i & (i - 1)) == 0) /* at powers of two: the whole set */
            dm_check_all(s, &m);
    }
    dm_check_all(s, &m);
    /* absent keys: never inserted ids */
    for (uint64_t id = UNIVERSE; id < UNIVERSE + 20000; id++) {
        tu_rng k = {id * 0x1000193u + 17};
        dedup_digest d = {tu_next(&k), tu_next(&k)};
        if (!dm_slot(&m, d, false))
            assert_false(dedup_digestset_contains(s, d));
    }
    /* round trip */
    size_t size;
    unsigned char *buf = saved(save_dset, s, &size);
    dedup_mem_source src;
    dedup_digestset *t;
    assert_int_equal(dedup_digestset_load(dedup_mem_source_init(&src, buf, size), NULL, &t),
                     DEDUP_OK);
    dm_check_all(t, &m);
    /* saving the loaded set gives the same bytes (records in digest order) */
    size_t size2;
    unsigned char *buf2 = saved(save_dset, t, &size2);
    assert_int_equal(size2, size);
    assert_memory_equal(buf, buf2, size);
    free(buf);
    free(buf2);
    dedup_digestset_free(t);
    dedup_digestset_free(s);
    dm_free(&m);
}

static void test_digestset_grow_model(void **state)
{
    (void)state;
    uint64_t seed = tu_seed() + 10;
    digestset_model_run(seed, 0, 0);          /* uniform digests, many growth steps */
    digestset_model_run(seed + 1, 15, 0);     /* every shape */
    digestset_model_run(seed + 2, 15, 50000 / DM_SCALE); /* sized up front, then grows */
}

/* Counts live and peak bytes; a real realloc, like the CLI's allocator. */
typedef struct peak_alloc {
    size_t live, peak;
} peak_alloc;
static void pa_note(peak_alloc *a, size_t add, size_t sub)
{
    a->live = a->live + add - sub;
    if (a->live > a->peak)
        a->peak = a->live;
}
static void *pa_malloc(void *ctx, size_t n)
{
    size_t *p = malloc(n + 16);
    if (!p)
        return NULL;
    *p = n;
    pa_note(ctx, n, 0);
    return (unsigned char *)p + 16;
}
static void pa_free(void *ctx, void *q)
{
    if (!q)
        return;
    size_t *p = (size_t *)((unsigned char *)q - 16);
    pa_note(ctx, 0, *p);
    free(p);
}
static void *pa_realloc(void *ctx, void *q, size_t n)
{
    if (!q)
        return pa_malloc(ctx, n);
    size_t *p = (size_t *)((unsigned char *)q - 16);
    size_t old = *p;
    p = realloc(p, n + 16); /* counted as growing in place */
    if (!p)
        return NULL;
    *p = n;
    pa_note(ctx, n, old);
    return (unsigned char *)p + 16;
}

static void test_digestset_memory(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() + 11};
    for (int counts = 0; counts < 2; counts++) {
        peak_alloc pa = {0, 0};
        dedup_allocator a = {pa_malloc, NULL, pa_realloc, pa_free, &pa};
        dedup_set_params p;
        dedup_set_params_init(&p);
        p.counts = counts;
        dedup_digestset *s;
        assert_int_equal(dedup_digestset_create(&p, &a, &s), DEDUP_OK);
        size_t per = counts ? 24 : 16;
        size_t prev = dedup_digestset_memory_usage(s);
        for (uint64_t i = 1; i <= 400000; i++) {
            dedup_digest d = {tu_next(&r), tu_next(&r)};
            dedup_verdict v;
            assert_int_equal(dedup_digestset_insert(s, d, &v), DEDUP_OK);
            size_t mem = dedup_digestset_memory_usage(s);
            /* exact: everything the set holds is counted */
            assert_int_equal(mem, pa.live);
            if (mem != prev) { /* a growth step: home range x1.25 (+16 at small sizes) */
                assert_true(mem - 128 <= (prev - 128) * 5 / 4 + 16 * per + 128 * per);
                prev = mem;
            }
            /* never below load 2/3 of the table once past the start, peak included */
            if (i >= 20000) {
                assert_true(mem <= i * per * 3 / 2);
                assert_true(pa.peak <= i * per * 3 / 2);
            }
            /* and never above 17/20 of the home range (+1 for rounding) */
            assert_true(i * 20 <= (mem / per) * 17 + 20);
        }
        dedup_digestset_free(s);
        assert_int_equal(pa.live, 0);
    }
}

static void test_digestset_oom(void **state)
{
    (void)state;
    for (uint64_t fail = 1; fail < 60; fail++) {
        for (int counts = 0; counts < 2; counts++) {
            tu_failing_alloc fa;
            dedup_allocator a = tu_failing_allocator(&fa, fail);
            dedup_set_params p;
            dedup_set_params_init(&p);
            p.counts = counts;
            dedup_digestset *s = NULL;
            dedup_status st = dedup_digestset_create(&p, &a, &s);
            uint64_t n = 0;
            tu_rng r = {fail};
            dedup_digest d = {0, 0};
            for (; st == DEDUP_OK && n < 30000; n++) {
                d.lo = tu_next(&r);
                d.hi = tu_next(&r);
                dedup_verdict v;
                st = dedup_digestset_insert(s, d, &v);
            }
            if (st != DEDUP_OK) {
                assert_int_equal(st, DEDUP_ERR_NOMEM);
                if (s) {
                    /* the failed insert changed nothing; the set still answers */
                    n--;
                    assert_int_equal(dedup_digestset_size(s), n);
                    assert_false(dedup_digestset_contains(s, d));
                    tu_rng q = {fail};
                    for (uint64_t i = 0; i < n; i++) {
                        dedup_digest x = {tu_next(&q), tu_next(&q)};
                        assert_true(dedup_digestset_contains(s, x));
                        assert_int_equal(dedup_digestset_count_of(s, x), 1);
                        dedup_verdict v;
                        assert_int_equal(dedup_digestset_insert(s, x, &v), DEDUP_OK);
                        assert_int_equal(v, DEDUP_DUPLICATE);
                    }
                }
            }
            dedup_digestset_free(s);
            assert_int_equal(fa.live, 0);
        }
    }
}

static void test_digestset_limit(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() + 12};
    const uint64_t limit = 1u << 20;
    for (int with_realloc = 0; with_realloc < 2; with_realloc++) {
        peak_alloc pa = {0, 0};
        dedup_allocator a = {pa_malloc, NULL, with_realloc ? pa_realloc : NULL, pa_free, &pa};
        dedup_set_params p;
        dedup_set_params_init(&p);
        p.memory_limit = limit;
        dedup_digestset *s;
        assert_int_equal(dedup_digestset_create(&p, &a, &s), DEDUP_OK);
        dedup_status st = DEDUP_OK;
        uint64_t n = 0;
        dedup_digest d;
        while (st == DEDUP_OK) {
            d.lo = tu_next(&r);
            d.hi = tu_next(&r);
            dedup_verdict v;
            st = dedup_digestset_insert(s, d, &v);
            n += st == DEDUP_OK;
        }
        assert_int_equal(st, DEDUP_ERR_FULL);
        assert_int_equal(dedup_digestset_size(s), n);
        assert_false(dedup_digestset_contains(s, d));
        assert_true(dedup_digestset_memory_usage(s) <= limit);
        assert_true(pa.peak <= limit); /* the limit holds at every moment */
        /* ... and is not wasted: load >= 2/3 of a table that fits (a table and
         * its 1.25x successor must fit at once when the allocator cannot
         * grow a block in place) */
        assert_true(n > (with_realloc ? limit / 16 / 2 : limit / 16 / 4));
        dedup_verdict v;
        assert_int_equal(dedup_digestset_insert(s, d, &v), DEDUP_ERR_FULL);
        dedup_digestset_free(s);
    }
    /* Too small for the initial table. */
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.memory_limit = 100;
    dedup_digestset *s = NULL;
    assert_int_equal(dedup_digestset_create(&p, NULL, &s), DEDUP_ERR_FULL);
    assert_null(s);
}

/* ---- strset segments: many splits and directory doublings ---------------- */

static size_t short_key(uint64_t id, unsigned char *buf)
{
    return (size_t)snprintf((char *)buf, 32, "s%llx", (unsigned long long)id);
}

typedef struct seq_ctx {
    const uint64_t *order;
    const uint64_t *seen;
    uint64_t next;
} seq_ctx;

static int check_seq(void *ctx, const void *key, size_t len, uint64_t count)
{
    seq_ctx *o = ctx;
    unsigned char expect[32];
    uint64_t id = o->order[o->next++];
    size_t el = short_key(id, expect);
    return !(el == len && memcmp(expect, key, len) == 0 && count == o->seen[id]);
}

static dedup_status save_strset(const void *o, dedup_sink *k) { return dedup_strset_save(o, k); }

static void test_strset_segments_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() + 2};
    /* About 970,000 distinct keys: a dozen segments, four directory
     * doublings and a dozen splits past the small table. */
    enum { UNIVERSE = 1200000, OPS = 2000000, ABSENT = 100000 };
    uint64_t *seen = calloc(UNIVERSE, sizeof *seen);
    uint64_t *order = malloc(UNIVERSE * sizeof *order);
    assert_non_null(seen);
    assert_non_null(order);
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.counts = true;
    p.seed = tu_next(&r);
    dedup_strset *s;
    assert_int_equal(dedup_strset_create(&p, NULL, &s), DEDUP_OK);
    unsigned char key[32];
    uint64_t distinct = 0;
    size_t mem = dedup_strset_memory_usage(s);
    for (int i = 0; i < OPS; i++) {
        uint64_t id = tu_below(&r, UNIVERSE);
        size_t len = short_key(id, key);
        size_t after = dedup_strset_memory_after_insert(s, len);
        dedup_verdict v;
        assert_int_equal(dedup_strset_insert(s, key, len, dedup_strset_digest(s, key, len), &v),
                         DEDUP_OK);
        assert_int_equal(v, seen[id] ? DEDUP_DUPLICATE : DEDUP_NEW);
        size_t now = dedup_strset_memory_usage(s);
        assert_true(now >= mem);
        assert_true(now <= after); /* the prediction covers splits and doublings */
        mem = now;
        if (!seen[id])
            order[distinct++] = id;
        seen[id]++;
    }
    assert_int_equal(dedup_strset_size(s), distinct);
    /* Tables of at most 43 bytes a key (load 3/8) beyond the arena. */
    assert_true(mem < distinct * (43 + 16) + (8u << 20));
    for (uint64_t id = 0; id < UNIVERSE + ABSENT; id++) {
        size_t len = short_key(id, key);
        dedup_digest d = dedup_strset_digest(s, key, len);
        uint64_t want = id < UNIVERSE ? seen[id] : 0;
        assert_int_equal(dedup_strset_contains(s, key, len, d), want != 0);
        assert_int_equal(dedup_strset_count_of(s, key, len, d), want);
    }
    seq_ctx o = {order, seen, 0};
    assert_int_equal(dedup_strset_foreach(s, check_seq, &o), 0);
    assert_int_equal(o.next, distinct);

    /* Save, load, save again: the same bytes, the same keys and counts. */
    size_t n1, n2;
    unsigned char *f1 = saved(save_strset, s, &n1);
    dedup_mem_source src;
    dedup_strset *t;
    assert_int_equal(dedup_strset_load(dedup_mem_source_init(&src, f1, n1), NULL, &t), DEDUP_OK);
    unsigned char *f2 = saved(save_strset, t, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(f1, f2, n1);
    for (uint64_t id = 0; id < UNIVERSE + ABSENT; id += 7) {
        size_t len = short_key(id, key);
        assert_int_equal(dedup_strset_count_of(t, key, len, dedup_strset_digest(t, key, len)),
                         id < UNIVERSE ? seen[id] : 0);
    }
    free(f1);
    free(f2);
    dedup_strset_free(t);

    /* clear keeps the tables and forgets every key. */
    dedup_strset_clear(s);
    assert_int_equal(dedup_strset_size(s), 0);
    for (uint64_t id = 0; id < 1000; id++) {
        size_t len = short_key(id, key);
        dedup_digest d = dedup_strset_digest(s, key, len);
        assert_false(dedup_strset_contains(s, key, len, d));
        dedup_verdict v;
        assert_int_equal(dedup_strset_insert(s, key, len, d, &v), DEDUP_OK);
        assert_int_equal(v, DEDUP_NEW);
    }
    dedup_strset_free(s);
    free(order);
    free(seen);
}

/* A memory limit past several segments: FULL changes nothing, and the set
 * still answers for every key it took. */
static void test_strset_segments_limit(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() + 3};
    for (int counts = 0; counts < 2; counts++) {
        dedup_set_params p;
        dedup_set_params_init(&p);
        p.memory_limit = (size_t)(20 + tu_below(&r, 12)) << 20;
        p.counts = counts;
        p.seed = tu_next(&r);
        dedup_strset *s;
        assert_int_equal(dedup_strset_create(&p, NULL, &s), DEDUP_OK);
        unsigned char key[32];
        uint64_t n = 0;
        dedup_status st = DEDUP_OK;
        size_t len = 0;
        while (st == DEDUP_OK) {
            len = short_key(n, key);
            dedup_verdict v;
            st = dedup_strset_insert(s, key, len, dedup_strset_digest(s, key, len), &v);
            assert_true(dedup_strset_memory_usage(s) <= p.memory_limit);
            if (st == DEDUP_OK) {
                assert_int_equal(v, DEDUP_NEW);
                n++;
            }
        }
        assert_int_equal(st, DEDUP_ERR_FULL);
        assert_true(n > 200000); /* several segments */
        size_t mem = dedup_strset_memory_usage(s);
        assert_true(dedup_strset_memory_after_insert(s, len) > p.memory_limit);
        dedup_verdict v;
        assert_int_equal(dedup_strset_insert(s, key, len, dedup_strset_digest(s, key, len), &v),
                         DEDUP_ERR_FULL);
        assert_int_equal(dedup_strset_size(s), n);
        assert_int_equal(dedup_strset_memory_usage(s), mem);
        assert_false(dedup_strset_contains(s, key, len, dedup_strset_digest(s, key, len)));
        for (uint64_t id = 0; id < n; id++) {
            size_t l = short_key(id, key);
            dedup_digest d = dedup_strset_digest(s, key, l);
            assert_true(dedup_strset_contains(s, key, l, d));
            if (id % 16 == 0) {
                assert_int_equal(dedup_strset_insert(s, key, l, d, &v), DEDUP_OK);
                assert_int_equal(v, DEDUP_DUPLICATE);
                assert_int_equal(dedup_strset_count_of(s, key, l, d), counts ? 2 : 1);
            }
        }
        assert_int_equal(dedup_strset_memory_usage(s), mem);
        dedup_strset_free(s);
    }
}

/* An allocator that counts callocs (tables) and mallocs of exactly 1 MiB
 * (a directory of 2^18 segments). */
typedef struct calloc_count {
    uint64_t callocs;
    uint64_t mib_mallocs;
} calloc_count;
static void *cc_malloc(void *ctx, size_t n)
{
    if (n == ((size_t)1 << 20))
        ((calloc_count *)ctx)->mib_mallocs++;
    return malloc(n);
}
static void *cc_calloc(void *ctx, size_t n, size_t sz)
{
    ((calloc_count *)ctx)->callocs++;
    return calloc(n, sz);
}
static void cc_free(void *ctx, void *p) { (void)ctx; free(p); }

/* Chosen digests: most keys share their top 16 tag bits (splits that move
 * nothing, local depths past 16, a directory of 2^18 and more), some share
 * their low 32 bits (one long probe run), some share a whole tag with
 * another key, and tag 0 meets tag 1. */
static dedup_digest crafted_digest(uint64_t id)
{
    uint64_t x = id * UINT64_C(0x9E3779B97F4A7C15);
    x ^= x >> 29;
    x *= UINT64_C(0xBF58476D1CE4E5B9);
    x ^= x >> 32;
    dedup_digest d = {x, id};
    if (id == 0)
        d.lo = 0;
    else if (id == 1)
        d.lo = 1;
    else if (id % 101 == 0)
        d.lo = crafted_digest(id - 1).lo; /* the same tag as another key */
    else if (id % 97 == 0)
        d.lo = (x & ~UINT64_C(0xffffffff)) | 0x5a5a5a5au; /* the same home */
    else if (id % 4 != 0)
        d.lo = (UINT64_C(0xbeef) << 48) | (x >> 16); /* the same top 16 bits */
    return d;
}

static void test_strset_crafted_digests(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() + 4};
    enum { UNIVERSE = 400000, OPS = 700000 };
    uint64_t *seen = calloc(UNIVERSE, sizeof *seen);
    assert_non_null(seen);
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.counts = true;
    calloc_count cc = {0, 0};
    dedup_allocator a = {cc_malloc, cc_calloc, NULL, cc_free, &cc};
    dedup_strset *s;
    assert_int_equal(dedup_strset_create(&p, &a, &s), DEDUP_OK);
    unsigned char key[8];
    uint64_t distinct = 0;
    for (int i = 0; i < OPS; i++) {
        uint64_t id = tu_below(&r, UNIVERSE);
        memcpy(key, &id, 8);
        size_t len = id == 0 ? 0 : 8;
        dedup_verdict v;
        assert_int_equal(dedup_strset_insert(s, key, len, crafted_digest(id), &v), DEDUP_OK);
        assert_int_equal(v, seen[id] ? DEDUP_DUPLICATE : DEDUP_NEW);
        distinct += !seen[id];
        seen[id]++;
    }
    assert_int_equal(dedup_strset_size(s), distinct);
    assert_int_equal(cc.mib_mallocs, 1); /* the directory went past 2^18 entries */
    for (uint64_t id = 0; id < UNIVERSE + 1000; id++) {
        memcpy(key, &id, 8);
        size_t len = id == 0 ? 0 : 8;
        dedup_digest d = crafted_digest(id);
        uint64_t want = id < UNIVERSE ? seen[id] : 0;
        assert_int_equal(dedup_strset_contains(s, key, len, d), want != 0);
        assert_int_equal(dedup_strset_count_of(s, key, len, d), want);
    }
    dedup_strset_free(s);
    free(seen);
}

/* Keys that differ only in their last byte, in one middle byte, or in their
 * length, all given the SAME digest: only the key comparison tells them
 * apart, so a comparison that skips a byte or ignores the length makes one
 * of them a duplicate.  Each must be NEW, counted apart, found again. */
static void test_strset_forced_equal_digest(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() + 11};
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.counts = true;
    dedup_strset *s;
    assert_int_equal(dedup_strset_create(&p, NULL, &s), DEDUP_OK);
    const dedup_digest same = {UINT64_C(0x0123456789abcdef), UINT64_C(0xfedcba9876543210)};
    enum { MAXLEN = 70, NKEYS = 3 * MAXLEN + 2 };
    unsigned char keys[NKEYS][MAXLEN + 1];
    size_t lens[NKEYS];
    size_t n = 0;
    unsigned char base[MAXLEN + 1];
    for (size_t i = 0; i <= MAXLEN; i++)
        base[i] = (unsigned char)tu_below(&r, 256);
    lens[n] = 0; /* the empty key */
    n++;
    for (size_t len = 1; len <= MAXLEN; len++) {
        /* a prefix of base: differs from the others of this family only in
         * length */
        memcpy(keys[n], base, len);
        lens[n++] = len;
        /* the same length, the last byte changed */
        memcpy(keys[n], base, len);
        keys[n][len - 1] ^= 0x01;
        lens[n++] = len;
        /* the same length, a middle byte changed (len >= 3) */
        if (len >= 3) {
            memcpy(keys[n], base, len);
            keys[n][len / 2] ^= 0x80;
            lens[n++] = len;
        }
    }
    assert_true(n <= NKEYS);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < n; i++) {
            dedup_verdict v;
            assert_int_equal(dedup_strset_insert(s, keys[i], lens[i], same, &v), DEDUP_OK);
            if (v != (round == 0 ? DEDUP_NEW : DEDUP_DUPLICATE))
                fail_msg("key %zu (length %zu) round %d: verdict %d", i, lens[i], round, (int)v);
        }
        assert_int_equal(dedup_strset_size(s), n);
    }
    for (size_t i = 0; i < n; i++) {
        assert_true(dedup_strset_contains(s, keys[i], lens[i], same));
        assert_int_equal(dedup_strset_count_of(s, keys[i], lens[i], same), 3);
    }
    /* one byte past every key, and every key with its first byte changed:
     * absent under the same digest */
    for (size_t i = 1; i < n; i++) {
        unsigned char k[MAXLEN + 2];
        memcpy(k, keys[i], lens[i]);
        k[lens[i]] = 0x55;
        if (lens[i] < MAXLEN && memcmp(k, base, lens[i] + 1) != 0) {
            bool dup = false;
            for (size_t j = 0; j < n; j++)
                dup |= lens[j] == lens[i] + 1 && memcmp(keys[j], k, lens[j]) == 0;
            assert_int_equal(dedup_strset_contains(s, k, lens[i] + 1, same), dup);
        }
    }
    dedup_strset_free(s);
}

/* Sized for 'capacity' keys: no table is allocated while they go in. */
static void test_strset_capacity(void **state)
{
    (void)state;
    static const uint64_t caps[] = {1000, 98301, 98302, 300000, 1000000};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        calloc_count cc = {0, 0};
        dedup_allocator a = {cc_malloc, cc_calloc, NULL, cc_free, &cc};
        dedup_set_params p;
        dedup_set_params_init(&p);
        p.capacity = caps[c];
        dedup_strset *s;
        assert_int_equal(dedup_strset_create(&p, &a, &s), DEDUP_OK);
        uint64_t before = cc.callocs;
        unsigned char key[32];
        for (uint64_t id = 0; id < caps[c]; id++) {
            size_t len = short_key(id, key);
            dedup_verdict v;
            assert_int_equal(
                dedup_strset_insert(s, key, len, dedup_strset_digest(s, key, len), &v), DEDUP_OK);
            assert_int_equal(v, DEDUP_NEW);
        }
        assert_int_equal(cc.callocs, before); /* no growth, no split */
        assert_int_equal(dedup_strset_size(s), caps[c]);
        dedup_strset_free(s);
    }
}

static void test_oom_leaks_nothing(void **state)
{
    (void)state;
    for (uint64_t fail = 1; fail < 40; fail++) {
        tu_failing_alloc fa;
        dedup_allocator a = tu_failing_allocator(&fa, fail);
        dedup_strset *s = NULL;
        dedup_status st = dedup_strset_create(NULL, &a, &s);
        unsigned char key[64];
        for (int i = 0; st == DEDUP_OK && i < 20000; i++) {
            int len = snprintf((char *)key, sizeof key, "oom-%d", i);
            dedup_verdict v;
            st = dedup_strset_insert(s, key, (size_t)len, dedup_strset_digest(s, key, (size_t)len), &v);
        }
        if (st != DEDUP_OK)
            assert_int_equal(st, DEDUP_ERR_NOMEM);
        dedup_strset_free(s);
        assert_int_equal(fa.live, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strset_model),
        cmocka_unit_test(test_strset_foreach_order),
        cmocka_unit_test(test_strset_limit),
        cmocka_unit_test(test_strset_huge_key),
        cmocka_unit_test(test_strset_segments_model),
        cmocka_unit_test(test_strset_segments_limit),
        cmocka_unit_test(test_strset_crafted_digests),
        cmocka_unit_test(test_strset_forced_equal_digest),
        cmocka_unit_test(test_strset_capacity),
        cmocka_unit_test(test_digestset_and_u64set_model),
        cmocka_unit_test(test_oom_leaks_nothing),
        cmocka_unit_test(test_digestset_grow_model),
        cmocka_unit_test(test_digestset_memory),
        cmocka_unit_test(test_digestset_oom),
        cmocka_unit_test(test_digestset_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
