/* test_window_refresh.c - refresh on duplicate and the query without
 * recording of dedup/window.h, and windows saved before refresh existed.
 *
 * The reference model is the definition the header gives: with refresh, a
 * record is a duplicate iff a record of the same key, kept or duplicate but
 * not late, had a time within D of it.  It remembers every such record
 * forever; the exact window must give its verdicts, the approximate one
 * never a NEW where it says duplicate, and false duplicates at most at the
 * rate asked.  Seeded (the seed is printed; DEDUP_TEST_SEED repeats it).
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/seen.h"
#include "dedup/window.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#ifdef DEDUP_SANITIZED
#define SCALE 1
#else
#define SCALE 5
#endif

/* ---- the reference model ------------------------------------------------------ */

typedef struct rkey {
    int64_t *t; /* every record that renewed the key (refresh) or was kept */
    size_t n, cap;
} rkey;

typedef struct rmodel {
    bool count, refresh;
    int64_t D, L;
    bool has_T, has_W;
    int64_t T, W, counter;
    uint64_t kept, dups, late;
    rkey *keys;
    size_t nkeys;
} rmodel;

static void rm_init(rmodel *m, dedup_window_type type, int64_t duration, int64_t lateness,
                    bool refresh, size_t nkeys)
{
    memset(m, 0, sizeof *m);
    m->count = type == DEDUP_WINDOW_COUNT;
    m->refresh = refresh;
    m->D = duration + (m->count ? 1 : 0);
    m->L = m->count ? 0 : lateness;
    m->keys = calloc(nkeys, sizeof(rkey));
    assert_non_null(m->keys);
    m->nkeys = nkeys;
}

static void rm_free(rmodel *m)
{
    for (size_t i = 0; i < m->nkeys; i++)
        free(m->keys[i].t);
    free(m->keys);
}

static void rm_watermark(rmodel *m, int64_t wm)
{
    if (!m->has_W || wm > m->W) {
        m->W = wm;
        m->has_W = true;
    }
}

/* The key's nearest recorded time to u: true if one is closer than 'within'. */
static bool rm_near(const rmodel *m, size_t key, int64_t u, int64_t within)
{
    const rkey *k = &m->keys[key];
    for (size_t i = 0; i < k->n; i++)
        if (u - k->t[i] < within && k->t[i] - u < within)
            return true;
    return false;
}

static void rm_push(rkey *k, int64_t u)
{
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 8;
        k->t = realloc(k->t, k->cap * sizeof(int64_t));
        assert_non_null(k->t);
    }
    k->t[k->n++] = u;
}

/* The verdict for a record; with 'dup_anyway' (the approximate window said
 * MAYBE_DUPLICATE where the model says NEW) the record is recorded as the
 * window recorded it: as a renewal with refresh, as a kept record without
 * (the approximate window keeps nothing then, so the model must not
 * either: it records nothing).  Returns NEW, DUPLICATE or LATE. */
static dedup_verdict rm_seen(rmodel *m, size_t key, int64_t u, int64_t *u_out)
{
    if (m->count)
        u = m->counter++;
    else if (m->has_W && u < m->W) {
        m->late++;
        return DEDUP_LATE;
    }
    if (!m->has_T || u > m->T) {
        m->T = u;
        m->has_T = true;
        rm_watermark(m, u - m->L);
    }
    *u_out = u;
    if (rm_near(m, key, u, m->D)) {
        m->dups++;
        if (m->refresh)
            rm_push(&m->keys[key], u);
        return DEDUP_DUPLICATE;
    }
    m->kept++;
    rm_push(&m->keys[key], u);
    return DEDUP_NEW;
}

/* ---- helpers ---------------------------------------------------------------------- */

static dedup_window *make(dedup_window_type type, dedup_window_mode mode, uint64_t duration,
                          uint64_t lateness, uint32_t gens, uint64_t capacity, bool refresh)
{
    dedup_window_params p;
    dedup_window_params_init(&p);
    p.type = type;
    p.mode = mode;
    p.duration = duration;
    p.lateness = lateness;
    p.generations = gens;
    p.capacity = capacity;
    p.refresh = refresh;
    dedup_window *w = NULL;
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_OK);
    return w;
}

static dedup_digest kd(const dedup_window *w, uint64_t key)
{
    return dedup_window_digest(w, &key, sizeof key);
}

static dedup_verdict seen(dedup_window *w, uint64_t key, int64_t t)
{
    dedup_verdict v;
    assert_int_equal(dedup_window_seen(w, kd(w, key), t, &v), DEDUP_OK);
    return v;
}

static unsigned char *save_blob(const dedup_window *w, size_t *len)
{
    uint64_t size = dedup_window_serialized_size(w);
    unsigned char *buf = malloc((size_t)size);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    assert_int_equal(dedup_window_save(w, &sink), DEDUP_OK);
    assert_int_equal(ms.len, size);
    *len = (size_t)size;
    return buf;
}

static dedup_status load_blob(const unsigned char *b, size_t len, dedup_window **out)
{
    dedup_mem_source src;
    return dedup_window_load(dedup_mem_source_init(&src, b, len), NULL, out);
}

static void fix_checksum(unsigned char *buf, size_t len)
{
    dedup_put_u64(buf + len - 8, XXH3_64bits(buf, len - 8));
}

/* Saves and loads again: the loaded window replaces *w. */
static void round_trip(dedup_window **w)
{
    size_t len;
    unsigned char *b = save_blob(*w, &len);
    dedup_window *l = NULL;
    assert_int_equal(load_blob(b, len, &l), DEDUP_OK);
    size_t len2;
    unsigned char *b2 = save_blob(l, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(b, b2, len);
    free(b);
    free(b2);
    dedup_window_free(*w);
    *w = l;
}

/* ---- the semantics spelt out ---------------------------------------------------- */

static void test_semantics(void **state)
{
    (void)state;
    /* D = 10: a key every 9 units is suppressed for as long as it comes with
     * refresh, kept again 10 after its last kept record without. */
    dedup_window *r = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_EXACT, 10, 0, 0, 0, true);
    dedup_window *p = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_EXACT, 10, 0, 0, 0, false);
    const int64_t times[] = {0, 9, 18, 27, 36};
    const dedup_verdict with[] = {DEDUP_NEW, DEDUP_DUPLICATE, DEDUP_DUPLICATE, DEDUP_DUPLICATE,
                                  DEDUP_DUPLICATE};
    const dedup_verdict without[] = {DEDUP_NEW, DEDUP_DUPLICATE, DEDUP_NEW, DEDUP_DUPLICATE,
                                     DEDUP_NEW};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(seen(r, 1, times[i]), with[i]);
        assert_int_equal(seen(p, 1, times[i]), without[i]);
    }
    /* A gap of exactly D ends it: 36 + 10. */
    assert_int_equal(seen(r, 1, 45), DEDUP_DUPLICATE);
    assert_int_equal(seen(r, 1, 55), DEDUP_NEW);
    dedup_window_stats st;
    dedup_window_get_stats(r, &st);
    assert_int_equal(st.kept, 2);
    assert_int_equal(st.duplicates, 5);
    assert_int_equal(st.live + st.expired, st.kept);
    dedup_window_free(r);
    dedup_window_free(p);

    /* Last N: a key every N records stays suppressed. */
    r = make(DEDUP_WINDOW_COUNT, DEDUP_WINDOW_EXACT, 3, 0, 0, 0, true);
    const uint64_t keys[] = {7, 1, 2, 7, 1, 2, 7, 3, 4, 5, 7};
    const dedup_verdict cv[] = {DEDUP_NEW, DEDUP_NEW, DEDUP_NEW, DEDUP_DUPLICATE,
                                DEDUP_DUPLICATE, DEDUP_DUPLICATE, DEDUP_DUPLICATE, DEDUP_NEW,
                                DEDUP_NEW, DEDUP_NEW, DEDUP_NEW};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        assert_int_equal(seen(r, keys[i], 0), cv[i]);
    dedup_window_free(r);

    /* Out of order (lateness < D): an earlier duplicate does not move the
     * key's time back. */
    r = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_EXACT, 10, 5, 0, 0, true);
    assert_int_equal(seen(r, 1, 100), DEDUP_NEW);
    assert_int_equal(seen(r, 1, 96), DEDUP_DUPLICATE);
    assert_int_equal(seen(r, 1, 109), DEDUP_DUPLICATE); /* 109 - 100 < 10 */
    assert_int_equal(seen(r, 1, 118), DEDUP_DUPLICATE); /* renewed at 109 */
    assert_int_equal(seen(r, 1, 128), DEDUP_NEW);
    dedup_window_free(r);

    /* Refused: tumbling windows (nothing to extend), lateness >= duration. */
    dedup_window_params q;
    dedup_window_params_init(&q);
    q.duration = 10;
    q.refresh = true;
    dedup_window *w = NULL;
    q.type = DEDUP_WINDOW_TUMBLING;
    assert_int_equal(dedup_window_create(&q, NULL, &w), DEDUP_ERR_INVALID_ARG);
    q.type = DEDUP_WINDOW_SLIDING;
    q.lateness = 10;
    assert_int_equal(dedup_window_create(&q, NULL, &w), DEDUP_ERR_INVALID_ARG);
    q.lateness = 9;
    assert_int_equal(dedup_window_create(&q, NULL, &w), DEDUP_OK);
    dedup_window_params got;
    dedup_window_get_params(w, &got);
    assert_true(got.refresh);
    dedup_window_free(w);
    q.type = DEDUP_WINDOW_COUNT;
    q.lateness = 1000; /* ignored by count windows */
    assert_int_equal(dedup_window_create(&q, NULL, &w), DEDUP_OK);
    dedup_window_free(w);
    dedup_window_params_init(&q);
    assert_false(q.refresh);
}

/* ---- exact: the model's verdicts --------------------------------------------------- */

typedef struct ev {
    uint64_t key;
    int64_t t;
    int64_t advance; /* INT64_MIN: none */
} ev;

/* A clock moving forward by random steps, with jitter behind it (some of
 * it beyond the lateness: late records), and now and then a watermark. */
static ev *stream(tu_rng *r, size_t n, size_t nkeys, int64_t start, int64_t step,
                  int64_t jitter)
{
    ev *e = malloc(n * sizeof *e);
    assert_non_null(e);
    int64_t base = start;
    for (size_t i = 0; i < n; i++) {
        base += (int64_t)tu_below(r, (uint64_t)step + 1);
        int64_t t = base;
        uint64_t c = tu_below(r, 100);
        if (c < 30)
            t -= (int64_t)tu_below(r, (uint64_t)jitter + 1);
        else if (c < 33)
            t -= (int64_t)tu_below(r, (uint64_t)(3 * jitter) + 1);
        e[i].key = tu_below(r, nkeys);
        e[i].t = t;
        e[i].advance = tu_below(r, 400) == 0 ? base - (int64_t)tu_below(r, (uint64_t)jitter + 1)
                                             : INT64_MIN;
    }
    return e;
}

static void exact_run(tu_rng *r, dedup_window_type type, int64_t D, int64_t L, uint32_t gens,
                      size_t n, size_t nkeys, int64_t step, int64_t jitter)
{
    dedup_window *w = make(type, DEDUP_WINDOW_EXACT, (uint64_t)D, (uint64_t)L, gens, 0, true);
    rmodel m;
    rm_init(&m, type, D, L, true, nkeys);
    ev *e = stream(r, n, nkeys, -(int64_t)tu_below(r, 500), step, jitter);
    bool count = type == DEDUP_WINDOW_COUNT;
    for (size_t i = 0; i < n; i++) {
        if (e[i].advance != INT64_MIN && !count) {
            rm_watermark(&m, e[i].advance);
            assert_int_equal(dedup_window_advance_watermark(w, e[i].advance), DEDUP_OK);
        }
        int64_t u = 0;
        dedup_verdict q;
        assert_int_equal(dedup_window_query(w, kd(w, e[i].key), e[i].t, &q), DEDUP_OK);
        dedup_verdict want = rm_seen(&m, e[i].key, e[i].t, &u);
        dedup_verdict got = seen(w, e[i].key, e[i].t);
        if (got != want || q != want) {
            fprintf(stderr, "type %d D %lld L %lld G %u: event %zu key %llu t %lld: got %d "
                            "query %d want %d\n", (int)type, (long long)D, (long long)L, gens, i,
                    (unsigned long long)e[i].key, (long long)e[i].t, (int)got, (int)q, (int)want);
            fail();
        }
        if (i % 1009 == 0 && m.has_T) {
            /* the keys a query at T calls DUPLICATE, counted both ways */
            uint64_t want_n = 0, got_n = 1;
            /* a watermark past T makes a query at T LATE: it calls none */
            for (size_t k = 0; k < nkeys && !(m.has_W && m.T < m.W); k++)
                want_n += rm_near(&m, k, m.T, m.D);
            assert_int_equal(dedup_window_count_within(w, m.T, &got_n), DEDUP_OK);
            assert_int_equal(got_n, want_n);
            assert_true(dedup_window_fpr_now(w) == 0.0);
        }
        if (i % 1009 == 0)
            round_trip(&w); /* a resumed window gives the same verdicts */
    }
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    assert_int_equal(st.records, n);
    assert_int_equal(st.kept, m.kept);
    assert_int_equal(st.duplicates, m.dups);
    assert_int_equal(st.late, m.late);
    assert_int_equal(st.live + st.expired, st.kept);
    free(e);
    rm_free(&m);
    dedup_window_free(w);
}

static void test_exact_vs_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    for (int round = 0; round < 4 * SCALE; round++) {
        for (int ti = 0; ti < 2; ti++) {
            dedup_window_type type = ti ? DEDUP_WINDOW_COUNT : DEDUP_WINDOW_SLIDING;
            int64_t D = 1 + (int64_t)tu_below(&r, 60);
            const int64_t lateness[] = {0, D / 3, D - 1};
            for (size_t li = 0; li < 3; li++) {
                uint32_t gens = 1 + (uint32_t)tu_below(&r, 8);
                size_t nkeys = 2 + (size_t)tu_below(&r, 40);
                int64_t step = (int64_t)tu_below(&r, 4);
                int64_t jitter = 1 + (int64_t)tu_below(&r, (uint64_t)(D + 4));
                exact_run(&r, type, D, lateness[li], gens, 3000, nkeys, step, jitter);
            }
        }
    }
    /* Larger: tables that grow, compact, and lose entries to newer ones. */
    exact_run(&r, DEDUP_WINDOW_SLIDING, 4000, 1000, 4, 6000 * SCALE, 3000, 2, 1500);
    exact_run(&r, DEDUP_WINDOW_COUNT, 2000, 0, 3, 6000 * SCALE, 2500, 1, 1);
}

/* ---- approximate: no false NEW, false duplicates within p ------------------------------ */

static void approx_run(tu_rng *r, dedup_window_type type, int64_t D, int64_t L, uint32_t gens,
                       uint64_t capacity, size_t n, size_t nkeys, int64_t step, int64_t jitter,
                       uint64_t *trials, uint64_t *fps, double expect[2])
{
    dedup_window *w = make(type, DEDUP_WINDOW_APPROX, (uint64_t)D, (uint64_t)L, gens, capacity,
                           true);
    int64_t s = (int64_t)dedup_window_span(w);
    rmodel m;
    rm_init(&m, type, D, L, true, nkeys);
    ev *e = stream(r, n, nkeys, 0, step, jitter);
    bool count = type == DEDUP_WINDOW_COUNT;
    for (size_t i = 0; i < n; i++) {
        if (e[i].advance != INT64_MIN && !count) {
            rm_watermark(&m, e[i].advance);
            assert_int_equal(dedup_window_advance_watermark(w, e[i].advance), DEDUP_OK);
        }
        dedup_verdict q;
        assert_int_equal(dedup_window_query(w, kd(w, e[i].key), e[i].t, &q), DEDUP_OK);
        /* Fresh: no record of the key within D + s (the granularity of
         * whole generations), judged before this record is recorded. */
        int64_t u0 = count ? m.counter : e[i].t;
        bool fresh = !(m.has_W && u0 < m.W && !count) && !rm_near(&m, e[i].key, u0, m.D + s);
        int64_t u = 0;
        dedup_verdict want = rm_seen(&m, e[i].key, e[i].t, &u);
        dedup_window_stats before;
        dedup_window_get_stats(w, &before);
        double rate_now = dedup_window_fpr_now(w); /* the table's own rate, before this key */
        dedup_verdict got = seen(w, e[i].key, e[i].t);
        /* The same verdict, except where the clock this record moves
         * expires a generation and an entry leaves the stash for the table,
         * matching on its fingerprint alone: then seen() may say MAYBE where
         * the query said NEW, never the reverse (dedup/window.h). */
        if (got != q && !(q == DEDUP_NEW && got == DEDUP_MAYBE_DUPLICATE && before.max_time < u0)) {
            fprintf(stderr, "query %d seen %d: type %d D %lld L %lld s %lld event %zu key %llu t %lld T %lld W %lld\n",
                    (int)q, (int)got, (int)type, (long long)D, (long long)L, (long long)s, i,
                    (unsigned long long)e[i].key, (long long)e[i].t, (long long)before.max_time,
                    (long long)before.watermark);
            fail();
        }
        if (want == DEDUP_LATE) {
            assert_int_equal(got, DEDUP_LATE);
            continue;
        }
        if (want == DEDUP_DUPLICATE && got != DEDUP_MAYBE_DUPLICATE) {
            fprintf(stderr, "false NEW: type %d D %lld L %lld event %zu key %llu t %lld\n",
                    (int)type, (long long)D, (long long)L, i, (unsigned long long)e[i].key,
                    (long long)e[i].t);
            fail();
        }
        if (want == DEDUP_NEW && got == DEDUP_MAYBE_DUPLICATE) {
            /* The window renewed some entry: from now on the key counts as
             * seen at u, as in the model, which kept it. */
        }
        if (fresh) {
            (*trials)++;
            *fps += got == DEDUP_MAYBE_DUPLICATE;
            /* fpr_now counts every live generation's entries; a lookup
             * consults those within D (and a span) of its time, which at an
             * even pace hold at least D / (D + s + L) of them */
            expect[0] += rate_now * (double)D / (double)(D + s + (count ? 0 : L));
            expect[1] += rate_now;
        }
        if (i % 1511 == 0) {
            /* fingerprints cannot be counted; the rate now is the load's */
            uint64_t c = 1;
            assert_int_equal(dedup_window_count_within(w, u, &c), DEDUP_ERR_UNSUPPORTED);
            assert_int_equal(c, 0);
            double f = dedup_window_fpr_now(w);
            dedup_window_params wp;
            dedup_window_get_params(w, &wp);
            assert_true(f >= 0 && f <= 8.0 / 1023 * 1.0001 + wp.fpr);
            round_trip(&w);
        }
    }
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    assert_int_equal(st.live + st.expired, st.kept);
    free(e);
    rm_free(&m);
    dedup_window_free(w);
}

static void test_approx_vs_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x77};
    const double p = 0.01;
    for (int ti = 0; ti < 2; ti++) {
        dedup_window_type type = ti ? DEDUP_WINDOW_COUNT : DEDUP_WINDOW_SLIDING;
        uint64_t trials = 0, fps = 0;
        double expect[2] = {0, 0};
        /* Keys mostly fresh (many keys, each rarely back within D), some
         * arriving often enough to stay renewed. */
        approx_run(&r, type, 2000, 0, 0, 2000, 20000 * SCALE, 200000, 1, 1, &trials, &fps, expect);
        approx_run(&r, type, 1000, 300, 4, 1000, 20000 * SCALE, 100000, 1, 200, &trials, &fps, expect);
        approx_run(&r, type, 500, 499, 7, 500, 10000 * SCALE, 3000, 1, 300, &trials, &fps, expect);
        approx_run(&r, type, 300, 0, 3, 50, 10000 * SCALE, 5000, 1, 1, &trials, &fps, expect); /* overload */
        /* Keys back every ~300 on average, gaps past D now and then: most
         * stay suppressed only through their renewals. */
        approx_run(&r, type, 1000, 200, 4, 600, 10000 * SCALE, 600, 1, 100, &trials, &fps, expect);
        fprintf(stderr, "refresh approx type %d: %llu false duplicates in %llu fresh keys (%.4f%%)\n",
                (int)type, (unsigned long long)fps, (unsigned long long)trials,
                100.0 * (double)fps / (double)trials);
        assert_true(trials > 10000);
        assert_true(fps <= tu_binomial_upper(trials, p));
        /* fpr_now leaves out the stash, whose entries moving back into an
         * overloaded table match on fingerprints alone (dedup/window.h): up to
         * 10% more, measured about 4% past the plan */
        tu_assert_count_between("refresh approx: false duplicates", fps, expect[0], 1.1 * expect[1]);
    }
}

/* ---- the query ---------------------------------------------------------------------- */

static void test_query(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        dedup_window *w = make(DEDUP_WINDOW_SLIDING, (dedup_window_mode)mode, 100, 20, 4, 1000,
                               false);
        dedup_verdict v;
        assert_int_equal(dedup_window_query(w, kd(w, 1), 0, &v), DEDUP_OK);
        assert_int_equal(v, DEDUP_NEW);
        assert_int_equal(seen(w, 1, 50), DEDUP_NEW);
        size_t len0;
        unsigned char *before = save_blob(w, &len0);
        dedup_verdict dup = mode ? DEDUP_MAYBE_DUPLICATE : DEDUP_DUPLICATE;
        struct {
            int64_t t;
            dedup_verdict want;
        } cases[] = {{50, dup}, {149, dup}, {31, dup}, {30, dup}, {29, DEDUP_LATE},
                     {-49, DEDUP_LATE}}; /* T = 50, W = T - 20 */
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            assert_int_equal(dedup_window_query(w, kd(w, 1), cases[i].t, &v), DEDUP_OK);
            assert_int_equal(v, cases[i].want);
        }
        /* Far ahead: answered as if it came, nothing moves. */
        assert_int_equal(dedup_window_query(w, kd(w, 1), 100000, &v), DEDUP_OK);
        assert_int_equal(v, DEDUP_NEW);
        if (mode == 0) {
            assert_int_equal(dedup_window_query(w, kd(w, 1), 150, &v), DEDUP_OK);
            assert_int_equal(v, DEDUP_NEW); /* 150 - 50 = D */
        }
        assert_int_equal(dedup_window_query(w, kd(w, 2), 60, &v), DEDUP_OK);
        assert_int_equal(v, DEDUP_NEW);
        assert_int_equal(dedup_window_query(w, kd(w, 1), DEDUP_WINDOW_MAX_TIME + 1, &v),
                         DEDUP_ERR_RANGE);
        assert_int_equal(dedup_window_query(NULL, kd(w, 1), 0, &v), DEDUP_ERR_INVALID_ARG);
        assert_int_equal(dedup_window_query(w, kd(w, 1), 0, NULL), DEDUP_ERR_INVALID_ARG);
        size_t len1;
        unsigned char *after = save_blob(w, &len1);
        assert_int_equal(len0, len1);
        assert_memory_equal(before, after, len0); /* nothing recorded, the clock unmoved */
        free(before);
        free(after);
        dedup_window_free(w);
    }
    /* Count windows answer for the next record. */
    dedup_window *c = make(DEDUP_WINDOW_COUNT, DEDUP_WINDOW_EXACT, 2, 0, 0, 0, false);
    dedup_verdict v;
    assert_int_equal(seen(c, 5, 0), DEDUP_NEW);
    assert_int_equal(seen(c, 6, 0), DEDUP_NEW);
    assert_int_equal(dedup_window_query(c, kd(c, 5), 12345, &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_DUPLICATE);
    assert_int_equal(seen(c, 7, 0), DEDUP_NEW);
    assert_int_equal(dedup_window_query(c, kd(c, 5), 0, &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_NEW); /* three records since */
    dedup_window_free(c);
}

/* ---- files ---------------------------------------------------------------------------- */

/* The stream tests/data/window_v1_*.dedup were made from (sliding, D 100,
 * lateness 10, capacity 50, default seed and generations): key (7 i) mod 61
 * at time i, i < 400.  They were written by the code before refresh existed. */
static dedup_window *v1_window(dedup_window_mode mode, uint64_t upto)
{
    dedup_window *w = make(DEDUP_WINDOW_SLIDING, mode, 100, 10, 0, 50, false);
    for (uint64_t i = 0; i < upto; i++)
        (void)seen(w, (i * 7) % 61, (int64_t)i);
    return w;
}

static unsigned char *read_data(const char *name, size_t *len)
{
    /* The source tree's tests/data, found from this file's path. */
    char path[4096];
    const char *me = __FILE__;
    const char *slash = strrchr(me, '/');
    int dir = slash ? (int)(slash - me) : 0;
    snprintf(path, sizeof path, "%.*s%s../data/%s", dir, me, slash ? "/" : "", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        fail();
    }
    unsigned char *b = malloc(1 << 16);
    assert_non_null(b);
    *len = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

static void test_old_files(void **state)
{
    (void)state;
    const char *names[] = {"window_v1_exact.dedup", "window_v1_approx.dedup"};
    for (int mode = 0; mode < 2; mode++) {
        size_t len;
        unsigned char *old = read_data(names[mode], &len);
        dedup_window *l = NULL;
        assert_int_equal(load_blob(old, len, &l), DEDUP_OK);
        dedup_window_params p;
        dedup_window_get_params(l, &p);
        assert_false(p.refresh);
        assert_int_equal(p.mode, mode);
        /* Today's writer writes the same bytes for the same window. */
        dedup_window *w = v1_window((dedup_window_mode)mode, 400);
        size_t nlen;
        unsigned char *now = save_blob(w, &nlen);
        assert_int_equal(nlen, len);
        assert_memory_equal(now, old, len);
        /* And the loaded window goes on as the uninterrupted one. */
        for (uint64_t i = 400; i < 700; i++) {
            uint64_t key = (i * 7) % 61;
            assert_int_equal(seen(l, key, (int64_t)i), seen(w, key, (int64_t)i));
        }
        free(now);
        free(old);
        dedup_window_free(l);
        dedup_window_free(w);
    }
}

/* The refresh option is saved, a file says what it holds, and a file that
 * claims refresh where it is refused, or unknown options, is corrupt. */
static void test_saved_option(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        dedup_window *w = make(DEDUP_WINDOW_SLIDING, (dedup_window_mode)mode, 100, 10, 0, 50, true);
        for (uint64_t i = 0; i < 400; i++)
            (void)seen(w, (i * 7) % 61, (int64_t)i);
        size_t len;
        unsigned char *b = save_blob(w, &len);
        dedup_window *l = NULL;
        assert_int_equal(load_blob(b, len, &l), DEDUP_OK);
        dedup_window_params p;
        dedup_window_get_params(l, &p);
        assert_true(p.refresh);
        for (uint64_t i = 400; i < 700; i++) {
            uint64_t key = (i * 7) % 61;
            dedup_verdict a = seen(l, key, (int64_t)i);
            assert_int_equal(a, seen(w, key, (int64_t)i));
            if (i > 450)
                assert_int_not_equal(a, DEDUP_NEW); /* every 61 < 100: always renewed */
        }
        dedup_window_free(l);
        /* Options word at params offset 132 (after the 40-byte header). */
        const size_t at = 40 + 132;
        assert_int_equal(b[at], 1);
        unsigned char *x = malloc(len);
        assert_non_null(x);
        memcpy(x, b, len);
        x[at] = 3; /* an unknown option bit */
        fix_checksum(x, len);
        assert_int_equal(load_blob(x, len, &l), DEDUP_ERR_CORRUPT);
        memcpy(x, b, len);
        x[40 + 16] = 100; /* lateness = D: refresh is refused there */
        fix_checksum(x, len);
        assert_int_equal(load_blob(x, len, &l), DEDUP_ERR_CORRUPT);
        memcpy(x, b, len);
        x[at] = 0; /* the same window without refresh: a valid file */
        fix_checksum(x, len);
        assert_int_equal(load_blob(x, len, &l), DEDUP_OK);
        dedup_window_get_params(l, &p);
        assert_false(p.refresh);
        dedup_window_free(l);
        free(x);
        free(b);
        dedup_window_free(w);
    }
}

/* Allocation failures while renewing leave a window that still saves and
 * loads, and free everything. */
static void test_oom(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        bool completed = false;
        for (uint64_t fail_at = 1; !completed; fail_at++) {
            tu_failing_alloc st;
            dedup_allocator a = tu_failing_allocator(&st, fail_at);
            dedup_window_params p;
            dedup_window_params_init(&p);
            p.mode = (dedup_window_mode)mode;
            p.duration = 100;
            p.lateness = 50;
            p.capacity = 100;
            p.refresh = true;
            dedup_window *w = NULL;
            dedup_status s = dedup_window_create(&p, &a, &w);
            bool all_ok = s == DEDUP_OK;
            if (!s) {
                tu_rng r = {fail_at};
                for (int64_t i = 0; i < 2000; i++) {
                    dedup_verdict v;
                    uint64_t key = tu_below(&r, 300);
                    s = dedup_window_seen(w, dedup_hash_u64(key, 1), i / 3 - (int64_t)tu_below(&r, 40), &v);
                    if (s) {
                        assert_int_equal(s, DEDUP_ERR_NOMEM);
                        all_ok = false;
                    }
                }
                dedup_window_stats ws;
                dedup_window_get_stats(w, &ws);
                assert_int_equal(ws.live + ws.expired, ws.kept);
                size_t want = (size_t)dedup_window_serialized_size(w);
                unsigned char *out = malloc(want);
                assert_non_null(out);
                dedup_mem_sink ms;
                dedup_sink sink = dedup_mem_sink_init(&ms, out, want);
                s = dedup_window_save(w, &sink);
                if (s) {
                    assert_int_equal(s, DEDUP_ERR_NOMEM);
                    all_ok = false;
                } else {
                    dedup_window *l = NULL;
                    assert_int_equal(load_blob(out, want, &l), DEDUP_OK);
                    dedup_window_free(l);
                }
                free(out);
                dedup_window_free(w);
            }
            assert_int_equal(st.live, 0);
            completed = all_ok;
            assert_true(fail_at < 100000);
        }
    }
}

/* Through dedup/seen.h: spec.refresh_on_dup and the query. */
static void test_seen(void **state)
{
    (void)state;
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_WINDOW;
    sp.duration = 10;
    sp.refresh_on_dup = true;
    sp.window_type = DEDUP_WINDOW_TUMBLING;
    dedup_seen *s = NULL;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_ERR_INVALID_ARG);
    sp.window_type = DEDUP_WINDOW_SLIDING;
    sp.lateness = 10;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_ERR_INVALID_ARG);
    for (int approx = 0; approx < 2; approx++) {
        sp.lateness = 0;
        sp.approximate = approx;
        sp.items = 100;
        assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
        uint64_t key = 42;
        dedup_digest d = dedup_hash(&key, sizeof key, dedup_seen_seed(s));
        const int64_t times[] = {0, 9, 18, 27};
        dedup_verdict v[4], q[4];
        for (size_t i = 0; i < 4; i++) {
            dedup_batch b = {.n = 1, .digests = &d, .times = &times[i]};
            assert_int_equal(dedup_seen_query(s, &b, &q[i]), DEDUP_OK);
            assert_int_equal(dedup_seen_decide(s, &b, &v[i], NULL), DEDUP_OK);
            assert_int_equal(q[i], v[i]);
            assert_int_equal(v[i], i == 0 ? DEDUP_NEW
                                          : approx ? DEDUP_MAYBE_DUPLICATE : DEDUP_DUPLICATE);
        }
        dedup_batch nb = {.n = 1, .digests = &d, .times = NULL};
        assert_int_equal(dedup_seen_query(s, &nb, q), DEDUP_ERR_INVALID_ARG);
        const int64_t late = -100;
        dedup_batch lb = {.n = 1, .digests = &d, .times = &late};
        assert_int_equal(dedup_seen_query(s, &lb, q), DEDUP_OK);
        assert_int_equal(q[0], DEDUP_LATE);
        /* Saved and loaded through the interface: refresh kept. */
        uint64_t size = dedup_window_serialized_size(dedup_seen_impl(s));
        unsigned char *buf = malloc((size_t)size);
        assert_non_null(buf);
        dedup_mem_sink ms;
        dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
        assert_int_equal(dedup_seen_save(s, &sink), DEDUP_OK);
        dedup_seen *t = NULL;
        dedup_mem_source src;
        assert_int_equal(dedup_seen_load(dedup_mem_source_init(&src, buf, ms.len), NULL, &t),
                         DEDUP_OK);
        dedup_window_params p;
        dedup_window_get_params(dedup_seen_impl(t), &p);
        assert_true(p.refresh);
        free(buf);
        dedup_seen_free(t);
        dedup_seen_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_exact_vs_model),
        cmocka_unit_test(test_approx_vs_model),
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_old_files),
        cmocka_unit_test(test_saved_option),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
