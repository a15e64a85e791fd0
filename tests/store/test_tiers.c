/*
 * test_tiers.c - the stack of seen-sets (dedup/tiers.h) against the exact
 * reference, on seeded random streams through every combination of tiers:
 * a blocked Bloom filter (covering the tiers below or not), a window that
 * forgets, an exact set asked by decide() and one recorded blindly, with
 * history already in the bottom tier; trust_filter's false drops against the
 * binomial bound; shared mode; a failing tier.
 *
 * The tiers here are small seen-sets built on the library's structures and
 * wrapped with dedup_seen_wrap(), so the test states exactly what each one
 * answers.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/bloom.h"
#include "dedup/tiers.h"

#define UNIVERSE 30000u
#define STREAM 60000u

/* ---- an exact set of digests, optionally remembering the last W only ---- */
typedef struct xset {
    dedup_digest *slot;
    bool *used;
    size_t cap;
    size_t window;       /* 0 = all; else forgets keys older than W inserts */
    dedup_digest *ring;  /* the last W inserted, for forgetting */
    size_t ring_pos, items;
    int fail_after;      /* >0: the Nth decide fails with DEDUP_ERR_IO */
    uint64_t decides, records;
} xset;

static bool dig_eq(dedup_digest a, dedup_digest b)
{
    return a.lo == b.lo && a.hi == b.hi;
}

static size_t xfind(const xset *x, dedup_digest d)
{
    size_t i = d.lo & (x->cap - 1);
    while (x->used[i] && !dig_eq(x->slot[i], d))
        i = (i + 1) & (x->cap - 1);
    return i;
}

static void xdel(xset *x, dedup_digest d)
{
    size_t i = xfind(x, d);
    if (!x->used[i])
        return;
    x->used[i] = false;
    /* re-insert the cluster after i */
    for (size_t j = (i + 1) & (x->cap - 1); x->used[j]; j = (j + 1) & (x->cap - 1)) {
        dedup_digest e = x->slot[j];
        x->used[j] = false;
        size_t k = xfind(x, e);
        x->used[k] = true;
        x->slot[k] = e;
    }
}

static void xput(xset *x, dedup_digest d)
{
    size_t i = xfind(x, d);
    if (x->used[i])
        return;
    x->used[i] = true;
    x->slot[i] = d;
    x->items++;
    if (x->window) {
        if (x->items > x->window)
            xdel(x, x->ring[x->ring_pos]);
        x->ring[x->ring_pos] = d;
        x->ring_pos = (x->ring_pos + 1) % x->window;
    }
}

static dedup_status x_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    xset *x = impl;
    if (x->fail_after && ++x->decides >= (uint64_t)x->fail_after)
        return DEDUP_ERR_IO;
    for (size_t i = 0; i < b->n; i++) {
        size_t s = xfind(x, b->digests[i]);
        out[i] = x->used[s] ? DEDUP_DUPLICATE : DEDUP_NEW;
        if (!x->used[s])
            xput(x, b->digests[i]);
    }
    if (done)
        *done = b->n;
    return DEDUP_OK;
}

static dedup_status x_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    const xset *x = impl;
    for (size_t i = 0; i < b->n; i++)
        out[i] = x->used[xfind(x, b->digests[i])] ? DEDUP_DUPLICATE : DEDUP_NEW;
    return DEDUP_OK;
}

static dedup_status x_record(void *ctx, const dedup_batch *b)
{
    xset *x = ctx;
    x->records += b->n;
    for (size_t i = 0; i < b->n; i++)
        xput(x, b->digests[i]);
    return DEDUP_OK;
}

static void x_info(const void *impl, dedup_seen_info *out)
{
    const xset *x = impl;
    out->kind = DEDUP_SEEN_OTHER;
    out->seed = DEDUP_DEFAULT_SEED;
    out->items = x->items;
    out->memory = x->cap * (sizeof(dedup_digest) + 1);
}

static void x_free(void *impl)
{
    xset *x = impl;
    free(x->slot);
    free(x->used);
    free(x->ring);
    free(x);
}

static const dedup_seen_ops xset_ops = {.kind = DEDUP_SEEN_OTHER,
                                        .decide = x_decide,
                                        .query = x_query,
                                        .info = x_info,
                                        .free = x_free};

static dedup_seen *new_xset(size_t window, xset **raw)
{
    xset *x = calloc(1, sizeof *x);
    x->cap = 1u << 19; /* load <= 0.4 for the largest test */
    x->slot = calloc(x->cap, sizeof *x->slot);
    x->used = calloc(x->cap, 1);
    x->window = window;
    if (window)
        x->ring = calloc(window, sizeof *x->ring);
    dedup_seen *s = NULL;
    assert_int_equal(dedup_seen_wrap(&xset_ops, x, NULL, &s), DEDUP_OK);
    if (raw)
        *raw = x;
    return s;
}

/* ---- a blocked Bloom filter ------------------------------------------------ */
static dedup_status f_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    for (size_t i = 0; i < b->n; i++)
        out[i] = dedup_bloom_test_and_add(impl, b->digests[i]) ? DEDUP_MAYBE_DUPLICATE : DEDUP_NEW;
    if (done)
        *done = b->n;
    return DEDUP_OK;
}

static dedup_status f_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    for (size_t i = 0; i < b->n; i++)
        out[i] = dedup_bloom_might_contain(impl, b->digests[i]) ? DEDUP_MAYBE_DUPLICATE : DEDUP_NEW;
    return DEDUP_OK;
}

static void f_info(const void *impl, dedup_seen_info *out)
{
    out->kind = DEDUP_SEEN_BLOCKED;
    out->probabilistic = true;
    out->seed = DEDUP_DEFAULT_SEED;
    out->fpr_target = out->fpr_bound = dedup_bloom_target_fpr(impl);
}

static void f_free(void *impl)
{
    dedup_bloom_free(impl);
}

static const dedup_seen_ops filter_ops = {.kind = DEDUP_SEEN_BLOCKED,
                                          .decide = f_decide,
                                          .query = f_query,
                                          .info = f_info,
                                          .free = f_free};

static dedup_seen *new_filter(uint64_t capacity, double fpr)
{
    dedup_bloom_params p;
    dedup_bloom_params_init(&p);
    p.kind = DEDUP_BLOOM_BLOCKED;
    p.capacity = capacity;
    p.fpr = fpr;
    dedup_bloom *bf = NULL;
    assert_int_equal(dedup_bloom_create(&p, NULL, &bf), DEDUP_OK);
    dedup_seen *s = NULL;
    assert_int_equal(dedup_seen_wrap(&filter_ops, bf, NULL, &s), DEDUP_OK);
    return s;
}

/* ---- the stream and the reference -------------------------------------------- */
static dedup_digest key_digest(uint32_t id)
{
    char k[16];
    int n = snprintf(k, sizeof k, "key%u", id);
    return dedup_hash(k, (size_t)n, DEDUP_DEFAULT_SEED);
}

typedef enum { T_FILTER, T_FILTER_COLD, T_WINDOW, T_EXACT, T_EXACT_BLIND } tkind;
static const char *const tnames[] = {"filter", "filter(cold)", "window", "exact", "exact(blind)"};

/* Feeds 'hist' keys to the bottom tier (and to covering filters, as a
 * rebuild from the store would), then the stream; every verdict must be the
 * reference's. */
static void run_combo(tkind *kinds, size_t n, bool shared, tu_rng *r)
{
    dedup_tier t[4];
    memset(t, 0, sizeof t);
    bool *seen = calloc(UNIVERSE, 1);
    uint32_t *ids = malloc(STREAM * sizeof *ids);
    dedup_digest *d = malloc(STREAM * sizeof *d);
    dedup_verdict *v = malloc(STREAM * sizeof *v);
    /* history: a third of the universe already in the bottom tier */
    size_t nh = UNIVERSE / 3;
    dedup_digest *hd = malloc(nh * sizeof *hd);
    for (size_t i = 0; i < nh; i++) {
        uint32_t id = (uint32_t)tu_below(r, UNIVERSE);
        seen[id] = true;
        hd[i] = key_digest(id);
    }
    dedup_batch hb = {.n = nh, .digests = hd};
    dedup_verdict *hv = malloc(nh * sizeof *hv);
    for (size_t k = 0; k < n; k++) {
        bool bottom = k + 1 == n;
        xset *raw = NULL;
        switch (kinds[k]) {
        case T_FILTER:
        case T_FILTER_COLD:
            t[k].seen = new_filter(UNIVERSE, 0.02);
            t[k].covers_below = kinds[k] == T_FILTER;
            if (kinds[k] == T_FILTER)
                assert_int_equal(dedup_seen_decide(t[k].seen, &hb, hv, NULL), DEDUP_OK);
            break;
        case T_WINDOW:
            t[k].seen = new_xset(500, &raw);
            t[k].forgets = true;
            break;
        case T_EXACT:
        case T_EXACT_BLIND:
            t[k].seen = new_xset(0, &raw);
            if (kinds[k] == T_EXACT_BLIND) {
                t[k].record = x_record;
                t[k].record_ctx = raw;
            }
            break;
        }
        if (bottom)
            assert_int_equal(dedup_seen_decide(t[k].seen, &hb, hv, NULL), DEDUP_OK);
    }
    /* A blind-recorded tier is correct only below a filter that covers it. */
    dedup_tiers_spec sp = {.tiers = t, .n = n, .shared = shared};
    dedup_seen *stack = NULL;
    const dedup_tiers *view = NULL;
    assert_int_equal(dedup_tiers_create(&sp, NULL, &stack, &view), DEDUP_OK);
    for (size_t i = 0; i < STREAM; i++) {
        ids[i] = (uint32_t)tu_below(r, UNIVERSE);
        d[i] = key_digest(ids[i]);
    }
    size_t off = 0;
    while (off < STREAM) {
        size_t m = 1 + tu_below(r, 9000);
        if (m > STREAM - off)
            m = STREAM - off;
        dedup_batch b = {.n = m, .digests = d + off};
        size_t done = 0;
        assert_int_equal(dedup_seen_decide(stack, &b, v + off, &done), DEDUP_OK);
        assert_int_equal(done, m);
        off += m;
    }
    uint64_t want_new = 0;
    for (size_t i = 0; i < STREAM; i++) {
        dedup_verdict want = seen[ids[i]] ? DEDUP_DUPLICATE : DEDUP_NEW;
        if (v[i] != want) {
            char desc[128] = "";
            for (size_t k = 0; k < n; k++)
                snprintf(desc + strlen(desc), sizeof desc - strlen(desc), "%s%s", k ? " > " : "",
                         tnames[kinds[k]]);
            fail_msg("stack [%s]%s key %zu (id %u): got %d want %d", desc, shared ? " shared" : "",
                     i, ids[i], v[i], want);
        }
        want_new += !seen[ids[i]];
        seen[ids[i]] = true;
    }
    dedup_tiers_stats st;
    dedup_tiers_get_stats(view, &st);
    assert_int_equal(st.keys, STREAM);
    assert_int_equal(st.new_keys, want_new);
    assert_true(st.exact);
    if (shared)
        assert_int_equal(st.reads_avoided, 0);
    if (kinds[0] == T_FILTER && !shared) {
        /* the covering filter settles most new keys itself (2% filter) */
        assert_true(st.reads_avoided * 100 >= want_new * 90);
        assert_int_equal(st.contradicted, 0);
    }
    dedup_seen_info info;
    dedup_seen_get_info(stack, &info);
    assert_int_equal(info.kind, DEDUP_SEEN_TIERS);
    assert_false(info.probabilistic);
    dedup_seen_free(stack);
    free(seen), free(ids), free(d), free(v), free(hd), free(hv);
}

static void test_every_combination(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    const tkind upper[] = {T_FILTER, T_FILTER_COLD, T_WINDOW, T_EXACT};
    const tkind bottom[] = {T_EXACT, T_EXACT_BLIND};
    unsigned combos = 0;
    for (size_t nb = 0; nb < 2; nb++) {
        /* one tier */
        tkind one[1] = {bottom[nb]};
        if (bottom[nb] == T_EXACT)
            run_combo(one, 1, false, &r), combos++;
        for (size_t a = 0; a < 4; a++) {
            tkind two[2] = {upper[a], bottom[nb]};
            /* a blind bottom is only ever below a covering filter */
            bool blind_ok = bottom[nb] != T_EXACT_BLIND || upper[a] == T_FILTER;
            if (blind_ok) {
                run_combo(two, 2, false, &r), combos++;
                if (upper[a] == T_FILTER && bottom[nb] == T_EXACT)
                    run_combo(two, 2, true, &r), combos++;
            }
            for (size_t c = 0; c < 4; c++) {
                tkind three[3] = {upper[a], upper[c], bottom[nb]};
                bool ok = bottom[nb] != T_EXACT_BLIND || upper[a] == T_FILTER ||
                          upper[c] == T_FILTER;
                if (ok)
                    run_combo(three, 3, false, &r), combos++;
            }
        }
    }
    print_message("%u stacks equal the exact reference\n", combos);
}

/* A filter marked covering that was never fed: the exact tier below,
 * recorded through decide(), corrects every false "certainly new". */
static void test_contradiction_corrected(void **state)
{
    (void)state;
    dedup_tier t[2] = {{.seen = new_filter(1000, 0.01), .covers_below = true},
                       {.seen = new_xset(0, NULL)}};
    dedup_digest d[100];
    dedup_verdict v[100];
    for (uint32_t i = 0; i < 100; i++)
        d[i] = key_digest(i);
    dedup_batch b = {.n = 100, .digests = d};
    assert_int_equal(dedup_seen_decide(t[1].seen, &b, v, NULL), DEDUP_OK); /* history */
    dedup_tiers_spec sp = {.tiers = t, .n = 2};
    dedup_seen *stack;
    const dedup_tiers *view;
    assert_int_equal(dedup_tiers_create(&sp, NULL, &stack, &view), DEDUP_OK);
    assert_int_equal(dedup_seen_decide(stack, &b, v, NULL), DEDUP_OK);
    for (int i = 0; i < 100; i++)
        assert_int_equal(v[i], DEDUP_DUPLICATE);
    dedup_tiers_stats st;
    dedup_tiers_get_stats(view, &st);
    assert_int_equal(st.contradicted, 100);
    dedup_seen_free(stack);
}

/* trust_filter: the filter's MAYBE ends the lookup.  Never a repeat kept;
 * new keys dropped within the binomial bound of the filter's rate. */
static void test_trust_filter(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    const uint64_t n = 200000;
    const double p = 0.01;
    dedup_tier t[2] = {{.seen = new_filter(n, p), .covers_below = true},
                       {.seen = new_xset(0, NULL)}};
    dedup_tiers_spec sp = {.tiers = t, .n = 2, .trust_filter = true};
    dedup_seen *stack;
    const dedup_tiers *view;
    assert_int_equal(dedup_tiers_create(&sp, NULL, &stack, &view), DEDUP_OK);
    /* n fresh keys, then each again: a repeat must never be NEW */
    dedup_digest *d = malloc(n * sizeof *d);
    dedup_verdict *v = malloc(n * sizeof *v);
    uint64_t base = tu_next(&r);
    for (uint64_t i = 0; i < n; i++)
        d[i] = dedup_hash_u64(base + i, DEDUP_DEFAULT_SEED);
    dedup_batch b = {.n = n, .digests = d};
    assert_int_equal(dedup_seen_decide(stack, &b, v, NULL), DEDUP_OK);
    uint64_t dropped = 0;
    for (uint64_t i = 0; i < n; i++) {
        assert_true(v[i] == DEDUP_NEW || v[i] == DEDUP_MAYBE_DUPLICATE);
        dropped += v[i] != DEDUP_NEW;
    }
    /* Each fresh key meets the filter holding the keys before it: the
     * expected drops are the model's rate, for the shape the library sizes
     * (n, p) to, summed over the run's fill. */
    uint64_t bits = dedup_blocked_bits_for(n, p);
    tu_assert_count("trust_filter: new keys dropped", dropped,
                    tu_bloom_expected_over_run(true, bits, dedup_blocked_k_for(n, bits), 0, n));
    assert_int_equal(dedup_seen_decide(stack, &b, v, NULL), DEDUP_OK);
    for (uint64_t i = 0; i < n; i++)
        assert_int_not_equal(v[i], DEDUP_NEW);
    dedup_tiers_stats st;
    dedup_tiers_get_stats(view, &st);
    assert_false(st.exact);
    assert_true(st.trust_filter);
    assert_int_equal(st.tier[0].trusted, dropped + n);
    assert_int_equal(st.tier[1].lookups, 0); /* the store was never read */
    assert_int_equal(st.tier[1].records, n - dropped);
    dedup_seen_info info;
    dedup_seen_get_info(stack, &info);
    assert_true(info.probabilistic);
    assert_true(info.fpr_bound > 0);
    dedup_seen_free(stack);
    free(d), free(v);
}

/* A tier that fails: decide fails with its status and done = 0; the tiers
 * below the failure saw nothing of the batch. */
static void test_failing_tier(void **state)
{
    (void)state;
    xset *mid, *low;
    dedup_tier t[3] = {{.seen = new_filter(1000, 0.01), .covers_below = false},
                       {.seen = new_xset(0, &mid)},
                       {.seen = new_xset(0, &low)}};
    mid->fail_after = 2;
    dedup_tiers_spec sp = {.tiers = t, .n = 3};
    dedup_seen *stack;
    assert_int_equal(dedup_tiers_create(&sp, NULL, &stack, NULL), DEDUP_OK);
    dedup_digest d[10];
    dedup_verdict v[10];
    for (uint32_t i = 0; i < 10; i++)
        d[i] = key_digest(i);
    dedup_batch b = {.n = 10, .digests = d};
    size_t done = 99;
    assert_int_equal(dedup_seen_decide(stack, &b, v, &done), DEDUP_OK);
    assert_int_equal(low->items, 10);
    for (uint32_t i = 0; i < 10; i++)
        d[i] = key_digest(100 + i);
    assert_int_equal(dedup_seen_decide(stack, &b, v, &done), DEDUP_ERR_IO);
    assert_int_equal(done, 0);
    assert_int_equal(low->items, 10);
    dedup_seen_free(stack);
}

static void test_refusals(void **state)
{
    (void)state;
    dedup_seen *stack = (dedup_seen *)1;
    dedup_tier t[1] = {{.seen = NULL}};
    dedup_tiers_spec sp = {.tiers = t, .n = 1};
    assert_int_equal(dedup_tiers_create(&sp, NULL, &stack, NULL), DEDUP_ERR_INVALID_ARG);
    assert_null(stack);
    sp.n = 0;
    assert_int_equal(dedup_tiers_create(&sp, NULL, &stack, NULL), DEDUP_ERR_INVALID_ARG);
    sp.n = DEDUP_TIERS_MAX + 1;
    assert_int_equal(dedup_tiers_create(&sp, NULL, &stack, NULL), DEDUP_ERR_INVALID_ARG);
    assert_null(dedup_tiers_tier(NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_combination), cmocka_unit_test(test_contradiction_corrected),
        cmocka_unit_test(test_trust_filter),      cmocka_unit_test(test_failing_tier),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
