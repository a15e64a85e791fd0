/*
 * test_ring.c - the consistent-hash ring and jump hash (dedup/ring.h).
 *
 * What is checked:
 *   - the stability promise: owners and jump buckets of fixed keys, pinned;
 *   - routing against a brute-force reference built from the header's
 *     definition alone (points from dedup_hash(name || index), the nearest
 *     point wins), on seeded random positions;
 *   - balance: peak/mean <= 1.25 for every 2 <= n <= 100 nodes over 10M
 *     keys; adding a node moves at most (1/(n+1))(1 + 3/sqrt(160)) of the
 *     keys, all of them to the new node; removing one moves only its keys;
 *     jump hash moves exactly the keys of the new bucket; weighted nodes get
 *     shares within 10% of their weight;
 *   - order independence, diff, copy, save/load round trips and corrupt
 *     files, argument errors with the ring unchanged, out-of-memory at every
 *     allocation.
 *
 * Key counts over the 10M keys are exact and cheap: the keys' positions are
 * sorted once, and a node's keys are those inside the ranges it owns, which
 * dedup_ring_diff() against an empty ring lists (each range counted by two
 * binary searches).  That the ranges agree with dedup_ring_lookup() key by
 * key is checked on all 10M keys for a few rings.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/ring.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NKEYS 10000000u

static uint64_t *keypos; /* sorted positions of the NKEYS keys */
static dedup_digest *keydig; /* the digests, in key order */

static dedup_digest key_digest(uint64_t i) { return dedup_hash_u64(i, DEDUP_DEFAULT_SEED); }

static void radix_sort(uint64_t *a, size_t n)
{
    uint64_t *tmp = malloc(n * sizeof *tmp);
    size_t *count = malloc(65536 * sizeof *count);
    assert_non_null(tmp);
    assert_non_null(count);
    for (unsigned shift = 0; shift < 64; shift += 16) {
        memset(count, 0, 65536 * sizeof *count);
        for (size_t i = 0; i < n; i++)
            count[(a[i] >> shift) & 0xFFFF]++;
        size_t sum = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(a[i] >> shift) & 0xFFFF]++] = a[i];
        memcpy(a, tmp, n * sizeof *a);
    }
    free(tmp);
    free(count);
}

static int setup_keys(void **state)
{
    (void)state;
    keypos = malloc(NKEYS * sizeof *keypos);
    keydig = malloc(NKEYS * sizeof *keydig);
    if (!keypos || !keydig)
        return -1;
    for (uint64_t i = 0; i < NKEYS; i++) {
        keydig[i] = key_digest(i);
        keypos[i] = dedup_ring_position(keydig[i]);
    }
    radix_sort(keypos, NKEYS);
    return 0;
}

static int teardown_keys(void **state)
{
    (void)state;
    free(keypos);
    free(keydig);
    return 0;
}

/* Keys at positions <= x. */
static size_t keys_upto(uint64_t x)
{
    size_t lo = 0, hi = NKEYS;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keypos[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t keys_in(uint64_t first, uint64_t last)
{
    return keys_upto(last) - (first ? keys_upto(first - 1) : 0);
}

/* ---- Counting keys per node through the ranges ------------------------------ */

typedef struct counter {
    uint64_t *per_node; /* indexed by 'to' */
    uint64_t total;
    uint32_t only_from, only_to; /* every range must have these (NONE: any) */
    bool bad;
} counter;

static int count_range(void *ctx, const dedup_ring_range *r)
{
    counter *c = ctx;
    size_t n = keys_in(r->first, r->last);
    if (c->per_node)
        c->per_node[r->to] += n;
    c->total += n;
    if ((c->only_from != DEDUP_RING_NONE && r->from != c->only_from) ||
        (c->only_to != DEDUP_RING_NONE && r->to != c->only_to))
        c->bad = true;
    return 0;
}

static dedup_ring *empty_ring(void)
{
    dedup_ring *e = NULL;
    assert_int_equal(dedup_ring_create(NULL, NULL, &e), DEDUP_OK);
    return e;
}

/* Keys owned by each node of r, into per_node[0..count). */
static void owned_keys(const dedup_ring *r, uint64_t *per_node)
{
    dedup_ring *e = empty_ring();
    memset(per_node, 0, dedup_ring_node_count(r) * sizeof *per_node);
    counter c = {.per_node = per_node, .only_from = DEDUP_RING_NONE, .only_to = DEDUP_RING_NONE};
    double moved;
    assert_int_equal(dedup_ring_diff(e, r, count_range, &c, &moved), DEDUP_OK);
    assert_int_equal(c.total, NKEYS);
    assert_true(moved == 1.0);
    dedup_ring_free(e);
}

static dedup_ring *ring_of(uint32_t n)
{
    dedup_ring *r = empty_ring();
    char name[32];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "node-%u", i);
        assert_int_equal(dedup_ring_add(r, name, 1.0), DEDUP_OK);
    }
    return r;
}

/* ---- Stability promise ------------------------------------------------------- */

static const char *const pinned_nodes[4] = {"alpha", "beta", "gamma", "delta"};
static const double pinned_weights[4] = {1, 1, 2, 0.5};
static const char *const pinned_owner[32] = {
    "alpha", "gamma", "gamma", "gamma", "beta", "gamma", "beta", "alpha", "beta", "beta",
    "alpha", "alpha", "beta", "gamma", "alpha", "gamma", "alpha", "gamma", "gamma", "beta",
    "beta", "alpha", "gamma", "gamma", "gamma", "gamma", "beta", "gamma", "gamma", "gamma",
    "gamma", "alpha"
};
static const uint32_t pinned_jump10[32] = {
    8, 2, 0, 2, 1, 8, 6, 5, 4, 0, 7, 2, 1, 3, 9, 0, 6, 8, 9, 3, 0, 0, 3, 9, 2, 2, 6, 1, 4, 3, 6,
    7
};
static const uint32_t pinned_jump1000[32] = {
    723, 237, 377, 535, 141, 572, 982, 584, 630, 93, 81, 555, 554, 603, 318, 615, 684, 437, 246,
    32, 285, 550, 855, 106, 863, 554, 518, 366, 705, 839, 105, 902
};

static dedup_digest pinned_key(int i)
{
    char k[32];
    int n = snprintf(k, sizeof k, "key-%d", i);
    return dedup_hash(k, (size_t)n, DEDUP_DEFAULT_SEED);
}

static void test_pinned(void **state)
{
    (void)state;
    dedup_digest d = {1, 2};
    assert_true(dedup_ring_position(d) == UINT64_C(0xC72C0D73624B3F8E));
    dedup_ring *r = empty_ring();
    assert_int_equal(dedup_ring_add_nodes(r, pinned_nodes, pinned_weights, 4, NULL), DEDUP_OK);
    assert_int_equal(dedup_ring_point_count(r), 160 + 160 + 320 + 80);
    for (int i = 0; i < 32; i++) {
        dedup_digest k = pinned_key(i);
        assert_string_equal(dedup_ring_node_name(r, dedup_ring_lookup(r, k)), pinned_owner[i]);
        assert_int_equal(dedup_jump_digest(k, 10), pinned_jump10[i]);
        assert_int_equal(dedup_jump_digest(k, 1000), pinned_jump1000[i]);
    }
    assert_int_equal(dedup_jump(0, 1000), 0);
    assert_int_equal(dedup_jump(UINT64_MAX, 1000), 313);
    assert_int_equal(dedup_jump(12345, 7), 1);
    dedup_ring_free(r);
}

/* ---- The definition, brute force ------------------------------------------ */

typedef struct ref_point {
    uint64_t pos;
    uint32_t node;
} ref_point;

/* Owner of x by the header's words: the nearest point; half way between
 * two points, the earlier one (the one x is after). */
static uint32_t ref_owner(const ref_point *p, size_t n, uint64_t x)
{
    size_t succ = 0, pred = 0;
    uint64_t fwd = UINT64_MAX, back = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t f = p[i].pos - x, b = x - p[i].pos; /* distances mod 2^64 */
        if (f == 0)
            return p[i].node; /* on a point (positions here are distinct) */
        if (f < fwd) {
            fwd = f;
            succ = i;
        }
        if (b < back) {
            back = b;
            pred = i;
        }
    }
    uint64_t gap = fwd + back; /* from the point before x to the one after */
    return back <= gap / 2 ? p[pred].node : p[succ].node;
}

static void test_reference(void **state)
{
    (void)state;
    uint64_t seed = tu_seed();
    tu_rng rng = {seed};
    const char *names[] = {"cache-a", "cache-b", "x", "a-much-longer-node-name.example.org", "e"};
    const double weights[] = {1, 2, 0.25, 1.5, 3};
    dedup_ring *r = empty_ring();
    assert_int_equal(dedup_ring_add_nodes(r, names, weights, 5, NULL), DEDUP_OK);
    size_t np = dedup_ring_point_count(r);
    ref_point *pts = malloc(np * sizeof *pts);
    assert_non_null(pts);
    size_t m = 0;
    for (uint32_t k = 0; k < 5; k++) {
        uint32_t want = (uint32_t)round(weights[k] * 160);
        assert_int_equal(dedup_ring_node_points(r, k), want);
        unsigned char buf[64];
        size_t len = strlen(names[k]);
        memcpy(buf, names[k], len);
        for (uint32_t i = 0; i < want; i++) {
            buf[len] = (unsigned char)i;
            buf[len + 1] = (unsigned char)(i >> 8);
            buf[len + 2] = (unsigned char)(i >> 16);
            buf[len + 3] = (unsigned char)(i >> 24);
            pts[m].pos = dedup_hash(buf, len + 4, DEDUP_RING_POINT_SEED).lo;
            pts[m++].node = k;
        }
    }
    assert_int_equal(m, np);
    for (int t = 0; t < 20000; t++) {
        uint64_t x;
        if (t % 4 == 0) /* near a point: on it, or a step either side */
            x = pts[tu_below(&rng, np)].pos + (tu_below(&rng, 3) - 1);
        else if (t % 4 == 1) { /* half way between two points */
            uint64_t a = pts[tu_below(&rng, np)].pos, b = pts[tu_below(&rng, np)].pos;
            x = a + (b - a) / 2 + (tu_below(&rng, 3) - 1);
        } else
            x = tu_next(&rng);
        uint32_t got = dedup_ring_lookup_position(r, x);
        if (got != ref_owner(pts, np, x))
            fail_msg("position 0x%016llx: ring says %u, reference %u (seed %llu)",
                     (unsigned long long)x, got, ref_owner(pts, np, x), (unsigned long long)seed);
    }
    free(pts);
    dedup_ring_free(r);
}

/* ---- Ranges agree with lookups, key by key -------------------------------- */

static void test_ranges_match_lookup(void **state)
{
    (void)state;
    const uint32_t sizes[] = {1, 2, 13, 100};
    uint32_t *owner = malloc(NKEYS * sizeof *owner);
    assert_non_null(owner);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        dedup_ring *r = ring_of(sizes[s]);
        uint32_t n = sizes[s];
        uint64_t *by_range = calloc(n, sizeof *by_range), *by_lookup = calloc(n, sizeof *by_lookup);
        assert_non_null(by_range);
        assert_non_null(by_lookup);
        owned_keys(r, by_range);
        dedup_ring_lookup_batch(r, keydig, NKEYS, owner);
        for (size_t i = 0; i < NKEYS; i++) {
            assert_true(owner[i] < n);
            by_lookup[owner[i]]++;
        }
        for (size_t i = 0; i < NKEYS; i += 997) /* the one-key path agrees with the batch */
            assert_int_equal(dedup_ring_lookup(r, keydig[i]), owner[i]);
        for (uint32_t k = 0; k < n; k++) {
            assert_int_equal(by_range[k], by_lookup[k]);
            double share = dedup_ring_node_share(r, k);
            assert_true(fabs(share - (double)by_range[k] / NKEYS) < 0.002);
        }
        free(by_range);
        free(by_lookup);
        dedup_ring_free(r);
    }
    free(owner);
}

/* ---- Balance and movement ------------------------------------------------------- */

static void test_balance_and_add(void **state)
{
    (void)state;
    dedup_ring *r = ring_of(1);
    uint64_t per[101];
    double worst = 0, worst_move = 0;
    for (uint32_t n = 2; n <= 100; n++) {
        dedup_ring *before = NULL;
        assert_int_equal(dedup_ring_copy(r, NULL, &before), DEDUP_OK);
        char name[32];
        snprintf(name, sizeof name, "node-%u", n - 1);
        assert_int_equal(dedup_ring_add(r, name, 1.0), DEDUP_OK);
        /* every range that changes owner goes to the new node (index n-1) */
        counter c = {.only_from = DEDUP_RING_NONE, .only_to = n - 1};
        double moved;
        assert_int_equal(dedup_ring_diff(before, r, count_range, &c, &moved), DEDUP_OK);
        assert_false(c.bad);
        double bound = (1.0 / n) * (1 + 3 / sqrt(160.0));
        double frac = (double)c.total / NKEYS;
        if (frac * n > worst_move)
            worst_move = frac * n;
        if (frac > bound)
            fail_msg("1 -> %u nodes moved %.5f of the keys, bound %.5f", n, frac, bound);
        assert_true(fabs(moved - frac) < 0.002);
        dedup_ring_free(before);

        owned_keys(r, per);
        uint64_t peak = 0;
        for (uint32_t k = 0; k < n; k++)
            peak = per[k] > peak ? per[k] : peak;
        double ratio = (double)peak * n / NKEYS;
        if (ratio > worst)
            worst = ratio;
        if (ratio > 1.25)
            fail_msg("%u nodes: peak/mean %.4f > 1.25", n, ratio);
    }
    print_message("worst peak/mean %.4f; worst moved x (n+1) %.4f (bound %.4f)\n", worst,
                  worst_move, 1 + 3 / sqrt(160.0));
    dedup_ring_free(r);
}

static void test_remove_moves_only_its_keys(void **state)
{
    (void)state;
    const uint32_t gone[] = {0, 17, 39};
    uint64_t per[40];
    uint32_t *before = malloc(NKEYS / 10 * sizeof *before), *after = malloc(NKEYS / 10 * sizeof *after);
    assert_non_null(before);
    assert_non_null(after);
    for (size_t g = 0; g < 3; g++) {
        dedup_ring *r = ring_of(40), *c = NULL;
        owned_keys(r, per);
        assert_int_equal(dedup_ring_copy(r, NULL, &c), DEDUP_OK);
        char name[32];
        snprintf(name, sizeof name, "node-%u", gone[g]);
        assert_int_equal(dedup_ring_remove(c, name), DEDUP_OK);
        assert_int_equal(dedup_ring_node_count(c), 39);
        assert_int_equal(dedup_ring_find(c, name), DEDUP_RING_NONE);
        counter cnt = {.only_from = gone[g], .only_to = DEDUP_RING_NONE};
        assert_int_equal(dedup_ring_diff(r, c, count_range, &cnt, NULL), DEDUP_OK);
        assert_false(cnt.bad);
        assert_int_equal(cnt.total, per[gone[g]]); /* all its keys, and only those */
        /* key by key on a million keys, comparing names */
        dedup_ring_lookup_batch(r, keydig, NKEYS / 10, before);
        dedup_ring_lookup_batch(c, keydig, NKEYS / 10, after);
        for (size_t i = 0; i < NKEYS / 10; i++) {
            const char *a = dedup_ring_node_name(r, before[i]);
            const char *b = dedup_ring_node_name(c, after[i]);
            if (before[i] == gone[g])
                assert_string_not_equal(a, b);
            else
                assert_string_equal(a, b);
        }
        dedup_ring_free(r);
        dedup_ring_free(c);
    }
    free(before);
    free(after);
}

static void test_jump(void **state)
{
    (void)state;
    enum { K = 200000, MAXN = 300 };
    uint32_t *b = calloc(K, sizeof *b);
    uint64_t *per = calloc(MAXN + 1, sizeof *per);
    assert_non_null(b);
    assert_non_null(per);
    for (size_t i = 0; i < K; i++)
        assert_int_equal(dedup_jump_digest(keydig[i], 1), 0);
    assert_int_equal(dedup_jump(42, 0), 0);
    for (uint32_t n = 2; n <= MAXN; n++) {
        uint64_t moved = 0;
        memset(per, 0, (MAXN + 1) * sizeof *per);
        for (size_t i = 0; i < K; i++) {
            uint32_t nb = dedup_jump_digest(keydig[i], n);
            if (nb != b[i]) {
                assert_int_equal(nb, n - 1); /* only into the new bucket */
                moved++;
            }
            b[i] = nb;
            per[nb]++;
        }
        /* the new bucket holds exactly the keys that moved */
        assert_int_equal(per[n - 1], moved);
        assert_true(moved >= tu_binomial_lower(K, 1.0 / n));
        assert_true(moved <= tu_binomial_upper(K, 1.0 / n));
    }
    free(b);
    free(per);
}

/* dedup_jump_digest_batch() = dedup_jump_digest() key for key: seeded
 * random digests, counts that leave tails of every length, bucket counts
 * from 1 to past the vector path's limit (2^20). */
static void test_jump_batch(void **state)
{
    (void)state;
    enum { K = 1000003 };
    uint64_t seed = tu_seed();
    tu_rng rng = {seed};
    dedup_digest *d = malloc(K * sizeof *d);
    uint32_t *got = malloc(K * sizeof *got);
    assert_non_null(d);
    assert_non_null(got);
    for (size_t i = 0; i < K; i++) {
        d[i].lo = tu_next(&rng);
        d[i].hi = tu_next(&rng);
    }
    d[0].lo = d[0].hi = 0;
    d[1].lo = d[1].hi = UINT64_MAX;
    static const uint32_t buckets[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 100, 1000,
                                       4095, 65536, 999983, (1u << 20) - 1, 1u << 20,
                                       (1u << 20) + 1, 1u << 24, UINT32_MAX};
    for (size_t bi = 0; bi < sizeof buckets / sizeof *buckets; bi++) {
        uint32_t nb = buckets[bi];
        size_t n = nb > (1u << 16) ? 50021 : K; /* the scalar reference is slow there */
        for (size_t len = 0; len < 70; len++) { /* short batches: every tail */
            dedup_jump_digest_batch(d + 7, len, nb, got);
            for (size_t i = 0; i < len; i++)
                assert_int_equal(got[i], dedup_jump_digest(d[7 + i], nb));
        }
        dedup_jump_digest_batch(d, n, nb, got);
        for (size_t i = 0; i < n; i++)
            if (got[i] != dedup_jump_digest(d[i], nb))
                fail_msg("key %zu, %u buckets: batch %u, dedup_jump %u (seed %llu)", i, nb,
                         got[i], dedup_jump_digest(d[i], nb), (unsigned long long)seed);
    }
    free(d);
    free(got);
}

static void test_weighted(void **state)
{
    (void)state;
    const char *names[] = {"w1", "w2", "w3", "w4"};
    const double weights[] = {1, 2, 3, 4};
    dedup_ring *r = empty_ring();
    assert_int_equal(dedup_ring_add_nodes(r, names, weights, 4, NULL), DEDUP_OK);
    uint64_t per[4];
    owned_keys(r, per);
    for (int k = 0; k < 4; k++) {
        double want = weights[k] / 10, got = (double)per[k] / NKEYS;
        print_message("weight %g: share %.4f (weight's %.4f)\n", weights[k], got, want);
        assert_true(fabs(got / want - 1) <= 0.10);
    }
    dedup_ring_free(r);
}

/* ---- Order, diff, copy ----------------------------------------------------------- */

static void test_order_independent(void **state)
{
    (void)state;
    const char *fwd[] = {"a", "b", "c", "d", "e"}, *rev[] = {"e", "d", "c", "b", "a"};
    dedup_ring *x = empty_ring(), *y = empty_ring();
    assert_int_equal(dedup_ring_add_nodes(x, fwd, NULL, 5, NULL), DEDUP_OK);
    for (int i = 0; i < 5; i++)
        assert_int_equal(dedup_ring_add(y, rev[i], 1), DEDUP_OK);
    double moved = 1;
    assert_int_equal(dedup_ring_diff(x, y, NULL, NULL, &moved), DEDUP_OK);
    assert_true(moved == 0);
    for (size_t i = 0; i < 100000; i++)
        assert_string_equal(dedup_ring_node_name(x, dedup_ring_lookup(x, keydig[i])),
                            dedup_ring_node_name(y, dedup_ring_lookup(y, keydig[i])));
    /* removing and adding back gives the same ring */
    assert_int_equal(dedup_ring_remove(x, "c"), DEDUP_OK);
    assert_int_equal(dedup_ring_add(x, "c", 1), DEDUP_OK);
    assert_int_equal(dedup_ring_diff(x, y, NULL, NULL, &moved), DEDUP_OK);
    assert_true(moved == 0);
    assert_string_equal(dedup_ring_node_name(x, 4), "c");
    dedup_ring_free(x);
    dedup_ring_free(y);
}

static int stop_after_one(void *ctx, const dedup_ring_range *r)
{
    (void)r;
    return ++*(int *)ctx >= 1;
}

static void test_diff_edges(void **state)
{
    (void)state;
    dedup_ring *e = empty_ring(), *f = empty_ring(), *one = ring_of(1), *two = ring_of(2);
    double moved = 5;
    assert_int_equal(dedup_ring_diff(e, f, NULL, NULL, &moved), DEDUP_OK);
    assert_true(moved == 0);
    assert_int_equal(dedup_ring_lookup(e, keydig[0]), DEDUP_RING_NONE);
    uint32_t o[3];
    dedup_ring_lookup_batch(e, keydig, 3, o);
    assert_int_equal(o[0], DEDUP_RING_NONE);
    assert_int_equal(dedup_ring_diff(one, e, NULL, NULL, &moved), DEDUP_OK);
    assert_true(moved == 1);
    assert_int_equal(dedup_ring_diff(one, one, NULL, NULL, &moved), DEDUP_OK);
    assert_true(moved == 0);
    assert_true(dedup_ring_node_share(one, 0) == 1);
    assert_int_equal(dedup_ring_diff(one, two, NULL, NULL, &moved), DEDUP_OK);
    assert_true(fabs(moved - dedup_ring_node_share(two, 1)) < 1e-12);
    int calls = 0;
    assert_int_equal(dedup_ring_diff(one, two, stop_after_one, &calls, NULL), DEDUP_ERR_CANCELLED);
    assert_int_equal(calls, 1);
    assert_int_equal(dedup_ring_diff(NULL, two, NULL, NULL, &moved), DEDUP_ERR_INVALID_ARG);
    /* the same nodes with other points per weight: most keys move */
    dedup_ring_params p;
    dedup_ring_params_init(&p);
    p.points_per_weight = 10;
    dedup_ring *ten = NULL;
    assert_int_equal(dedup_ring_create(&p, NULL, &ten), DEDUP_OK);
    assert_int_equal(dedup_ring_add(ten, "node-0", 1), DEDUP_OK);
    assert_int_equal(dedup_ring_add(ten, "node-1", 1), DEDUP_OK);
    assert_int_equal(dedup_ring_point_count(ten), 20);
    assert_int_equal(dedup_ring_diff(two, ten, NULL, NULL, &moved), DEDUP_OK);
    assert_true(moved > 0.1 && moved < 0.9);
    double s = 0;
    for (uint32_t k = 0; k < 2; k++)
        s += dedup_ring_node_share(ten, k);
    assert_true(fabs(s - 1) < 1e-9);
    dedup_ring_free(ten);
    dedup_ring_free(e);
    dedup_ring_free(f);
    dedup_ring_free(one);
    dedup_ring_free(two);
}

/* ---- Arguments ----------------------------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    dedup_ring_params p;
    dedup_ring_params_init(&p);
    assert_int_equal(p.points_per_weight, 160);
    assert_true(p.seed == DEDUP_RING_POINT_SEED);
    dedup_ring *r = (dedup_ring *)1;
    p.points_per_weight = 0;
    assert_int_equal(dedup_ring_create(&p, NULL, &r), DEDUP_ERR_INVALID_ARG);
    assert_null(r);
    p.points_per_weight = DEDUP_RING_MAX_POINTS_PER_WEIGHT + 1;
    assert_int_equal(dedup_ring_create(&p, NULL, &r), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_ring_create(NULL, NULL, NULL), DEDUP_ERR_INVALID_ARG);
    r = ring_of(3);
    size_t mem = dedup_ring_memory_usage(r);
    assert_true(mem > 3 * 160 * 32);
    char long_name[DEDUP_RING_MAX_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(dedup_ring_add(r, "", 1), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_ring_add(r, NULL, 1), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_ring_add(r, long_name, 1), DEDUP_ERR_INVALID_ARG);
    long_name[DEDUP_RING_MAX_NAME] = '\0';
    assert_int_equal(dedup_ring_add(r, "node-1", 1), DEDUP_ERR_INVALID_ARG); /* exists */
    assert_int_equal(dedup_ring_add(r, "new", 0), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_ring_add(r, "new", -1), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_ring_add(r, "new", NAN), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_ring_add(r, "new", INFINITY), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_ring_add(r, "new", 0.001), DEDUP_ERR_INVALID_ARG); /* no point */
    assert_int_equal(dedup_ring_add(r, "new", 1e9), DEDUP_ERR_LIMIT);
    /* all or none: the bad one is named, nothing was added */
    const char *batch[] = {"p", "q", "p"};
    size_t bad = 99;
    assert_int_equal(dedup_ring_add_nodes(r, batch, NULL, 3, &bad), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(bad, 2);
    const double ws[] = {1, 0, 1};
    assert_int_equal(dedup_ring_add_nodes(r, (const char *[]){"p", "q", "s"}, ws, 3, &bad),
                     DEDUP_ERR_INVALID_ARG);
    assert_int_equal(bad, 1);
    assert_int_equal(dedup_ring_node_count(r), 3);
    assert_int_equal(dedup_ring_point_count(r), 480);
    assert_int_equal(dedup_ring_memory_usage(r), mem);
    assert_int_equal(dedup_ring_add(r, long_name, 1), DEDUP_OK); /* 255 bytes is fine */
    assert_int_equal(dedup_ring_remove(r, "nope"), DEDUP_ERR_NOT_FOUND);
    assert_int_equal(dedup_ring_remove(r, NULL), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_ring_find(r, "node-2"), 2);
    assert_int_equal(dedup_ring_remove(r, "node-0"), DEDUP_OK);
    assert_int_equal(dedup_ring_find(r, "node-2"), 1); /* later indexes shift down */
    assert_null(dedup_ring_node_name(r, 3));
    assert_true(dedup_ring_node_weight(r, 3) == 0);
    assert_true(dedup_ring_node_share(r, 3) == 0);
    dedup_ring_free(r);
    dedup_ring_free(NULL);

    /* the node limit, with one point a node */
    p.points_per_weight = 1;
    assert_int_equal(dedup_ring_create(&p, NULL, &r), DEDUP_OK);
    char **names = malloc((DEDUP_RING_MAX_NODES + 1) * sizeof *names);
    assert_non_null(names);
    for (uint32_t i = 0; i <= DEDUP_RING_MAX_NODES; i++) {
        names[i] = malloc(16);
        snprintf(names[i], 16, "%u", i);
    }
    assert_int_equal(dedup_ring_add_nodes(r, (const char *const *)names, NULL,
                                          DEDUP_RING_MAX_NODES + 1, NULL),
                     DEDUP_ERR_LIMIT);
    assert_int_equal(dedup_ring_add_nodes(r, (const char *const *)names, NULL,
                                          DEDUP_RING_MAX_NODES, NULL),
                     DEDUP_OK);
    assert_int_equal(dedup_ring_add(r, names[DEDUP_RING_MAX_NODES], 1), DEDUP_ERR_LIMIT);
    assert_int_equal(dedup_ring_find(r, "65535"), 65535);
    for (uint32_t i = 0; i <= DEDUP_RING_MAX_NODES; i++)
        free(names[i]);
    free(names);
    dedup_ring_free(r);
}

/* ---- Persistence ------------------------------------------------------------------------ */

static dedup_status save_ring(const void *o, dedup_sink *s) { return dedup_ring_save(o, s); }

static void test_save_load(void **state)
{
    (void)state;
    const char *names[] = {"alpha", "beta", "gamma", "delta"};
    const double weights[] = {1, 1, 2, 0.5};
    dedup_ring *r = empty_ring();
    assert_int_equal(dedup_ring_add_nodes(r, names, weights, 4, NULL), DEDUP_OK);
    size_t len;
    unsigned char *blob = tu_save_blob(save_ring, r, dedup_ring_serialized_size(r), &len);
    assert_int_equal(len, 40 + 16 + 4 * 12 + 5 + 4 + 5 + 5 + 8);
    dedup_mem_source ms;
    dedup_ring *back = NULL;
    assert_int_equal(dedup_ring_load(dedup_mem_source_init(&ms, blob, len), NULL, &back), DEDUP_OK);
    double moved = 1;
    assert_int_equal(dedup_ring_diff(r, back, NULL, NULL, &moved), DEDUP_OK);
    assert_true(moved == 0);
    for (uint32_t k = 0; k < 4; k++) {
        assert_string_equal(dedup_ring_node_name(back, k), names[k]);
        assert_true(dedup_ring_node_weight(back, k) == weights[k]);
    }
    size_t len2;
    unsigned char *blob2 = tu_save_blob(save_ring, back, dedup_ring_serialized_size(back), &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(blob, blob2, len);
    free(blob2);
    dedup_ring_free(back);

    /* every truncation and every flipped byte is refused */
    for (size_t cut = 0; cut < len; cut++) {
        back = (dedup_ring *)1;
        assert_int_not_equal(dedup_ring_load(dedup_mem_source_init(&ms, blob, cut), NULL, &back),
                             DEDUP_OK);
        assert_null(back);
    }
    for (size_t i = 0; i < len; i++) {
        blob[i] ^= 0x20;
        assert_int_not_equal(dedup_ring_load(dedup_mem_source_init(&ms, blob, len), NULL, &back),
                             DEDUP_OK);
        blob[i] ^= 0x20;
    }

    /* files that lie, with a correct checksum */
    unsigned char params[16], payload[64];
    size_t flen;
    unsigned char *f;
#define NODE(at, n, w, s)                                  \
    do {                                                   \
        dedup_put_u32(payload + (at), (n));                \
        dedup_put_f64(payload + (at) + 4, (w));            \
        memcpy(payload + (at) + 12, (s), (n));             \
    } while (0)
#define PARAMS(ppw, nodes, points, res)                    \
    do {                                                   \
        dedup_put_u32(params, (ppw));                      \
        dedup_put_u32(params + 4, (nodes));                \
        dedup_put_u32(params + 8, (points));               \
        dedup_put_u32(params + 12, (res));                 \
    } while (0)
#define EXPECT(status, paylen)                                                                \
    do {                                                                                      \
        f = tu_container(DEDUP_TYPE_RING, DEDUP_RING_POINT_SEED, params, 16, payload, (paylen), \
                         &flen);                                                              \
        back = (dedup_ring *)1;                                                               \
        assert_int_equal(dedup_ring_load(dedup_mem_source_init(&ms, f, flen), NULL, &back),   \
                         (status));                                                           \
        if ((status) == DEDUP_OK)                                                             \
            dedup_ring_free(back);                                                            \
        else                                                                                  \
            assert_null(back);                                                                \
        free(f);                                                                              \
    } while (0)
    NODE(0, 1, 1.0, "a");
    NODE(13, 1, 2.0, "b");
    PARAMS(160, 2, 480, 0);
    EXPECT(DEDUP_OK, 26);
    PARAMS(160, 2, 481, 0); /* points do not add up */
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    PARAMS(0, 2, 480, 0);
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    PARAMS(160, 2, 480, 1); /* reserved */
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    PARAMS(160, 3, 480, 0); /* more nodes than the payload holds */
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    PARAMS(160, DEDUP_RING_MAX_NODES + 1, 480, 0);
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    NODE(13, 1, 1.0, "a"); /* a repeated name */
    PARAMS(160, 2, 320, 0);
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    NODE(13, 1, 0.0, "b"); /* weight 0 */
    PARAMS(160, 2, 160, 0);
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    NODE(13, 1, NAN, "b");
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    NODE(13, 0, 1.0, ""); /* an empty name */
    PARAMS(160, 2, 320, 0);
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    NODE(13, 1, 1.0, "\0"); /* a NUL in a name */
    EXPECT(DEDUP_ERR_CORRUPT, 26);
    NODE(13, 2, 1.0, "bb"); /* payload longer than the nodes */
    PARAMS(160, 2, 320, 0);
    EXPECT(DEDUP_OK, 27);
    EXPECT(DEDUP_ERR_CORRUPT, 28);
    PARAMS(160, 0, 0, 0); /* an empty ring is a ring */
    EXPECT(DEDUP_OK, 0);
#undef NODE
#undef PARAMS
#undef EXPECT

    /* files: atomic save, trailing bytes refused */
    char path[] = "/tmp/test_ring_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(dedup_ring_save_file(r, path), DEDUP_OK);
    assert_int_equal(dedup_ring_load_file(path, NULL, &back), DEDUP_OK);
    assert_int_equal(dedup_ring_node_count(back), 4);
    dedup_ring_free(back);
    FILE *fp = fopen(path, "ab");
    assert_non_null(fp);
    fputc('x', fp);
    fclose(fp);
    assert_int_equal(dedup_ring_load_file(path, NULL, &back), DEDUP_ERR_TRAILING);
    unlink(path);
    free(blob);
    dedup_ring_free(r);
}

/* ---- Out of memory --------------------------------------------------------------------- */

static void test_oom(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c"};
    for (uint64_t fail = 1; fail < 64; fail++) {
        tu_failing_alloc st;
        dedup_allocator a = tu_failing_allocator(&st, 0);
        dedup_ring *r = NULL;
        assert_int_equal(dedup_ring_create(NULL, &a, &r), DEDUP_OK);
        assert_int_equal(dedup_ring_add_nodes(r, names, NULL, 2, NULL), DEDUP_OK);
        size_t mem = dedup_ring_memory_usage(r);
        st.fail_at = st.calls + fail;
        dedup_status s = dedup_ring_add(r, names[2], 1);
        if (s == DEDUP_OK) {
            assert_int_equal(dedup_ring_node_count(r), 3);
        } else {
            assert_int_equal(s, DEDUP_ERR_NOMEM);
            assert_int_equal(dedup_ring_node_count(r), 2);
            assert_int_equal(dedup_ring_memory_usage(r), mem);
            assert_int_equal(dedup_ring_find(r, "c"), DEDUP_RING_NONE);
        }
        s = dedup_ring_remove(r, "a");
        assert_true(s == DEDUP_OK || s == DEDUP_ERR_NOMEM);
        dedup_ring *c = NULL;
        s = dedup_ring_copy(r, &a, &c);
        assert_true(s == DEDUP_OK || s == DEDUP_ERR_NOMEM);
        double moved;
        s = dedup_ring_diff(r, r, NULL, NULL, &moved);
        assert_true(s == DEDUP_OK || s == DEDUP_ERR_NOMEM);
        dedup_ring_free(c);
        dedup_ring_free(r);
        assert_int_equal(st.live, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pinned),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_ranges_match_lookup),
        cmocka_unit_test(test_balance_and_add),
        cmocka_unit_test(test_remove_moves_only_its_keys),
        cmocka_unit_test(test_jump),
        cmocka_unit_test(test_jump_batch),
        cmocka_unit_test(test_weighted),
        cmocka_unit_test(test_order_independent),
        cmocka_unit_test(test_diff_edges),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}
