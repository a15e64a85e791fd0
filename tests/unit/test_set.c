/* test_set.c - exact sets against a naive model, limits, counts, persistence. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/set.h"

/* Key i of a small universe: variable length, embedded NUL bytes, some empty. */
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
    uint64_t size;
    dedup_sink cs = dedup_count_sink_init(&size);
    assert_int_equal(dedup_digestset_save(ds, &cs), DEDUP_OK);
    unsigned char *buf = malloc(size);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    assert_int_equal(dedup_digestset_save(ds, &sink), DEDUP_OK);
    dedup_mem_source src;
    dedup_digestset *ds2;
    assert_int_equal(dedup_digestset_load(dedup_mem_source_init(&src, buf, size), NULL, &ds2), DEDUP_OK);
    free(buf);
    dedup_sink cs2 = dedup_count_sink_init(&size);
    assert_int_equal(dedup_u64set_save(us, &cs2), DEDUP_OK);
    buf = malloc(size);
    sink = dedup_mem_sink_init(&ms, buf, size);
    assert_int_equal(dedup_u64set_save(us, &sink), DEDUP_OK);
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
        cmocka_unit_test(test_digestset_and_u64set_model),
        cmocka_unit_test(test_oom_leaks_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
