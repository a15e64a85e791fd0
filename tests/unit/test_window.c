/* test_window.c - stream deduplication over time windows (dedup/window.h).
 *
 * The exact window is checked against a brute-force model that remembers
 * every kept record forever; the approximate one against the model of its
 * own kept records (no false NEW, false duplicates within a binomial bound).
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/window.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#ifdef DEDUP_SANITIZED
#define SCALE 1
#else
#define SCALE 10
#endif

/* ---- the reference model ----------------------------------------------------- */

typedef struct ref_key {
    int64_t *t;
    size_t n, cap;
} ref_key;

typedef struct ref {
    dedup_window_type type;
    int64_t D; /* effective: N + 1 for COUNT */
    int64_t L;
    int64_t s; /* generation span, to check what is still remembered */
    bool has_T, has_W;
    int64_t T, W;
    int64_t counter;
    uint64_t late, kept, dups;
    int64_t late_max_behind;
    ref_key *keys;
    size_t nkeys;
} ref;

static int64_t fdiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b) != 0 && a < 0)
        q--;
    return q;
}

static void ref_init(ref *r, dedup_window_type type, int64_t duration, int64_t L, int64_t s,
                     size_t nkeys)
{
    memset(r, 0, sizeof *r);
    r->type = type;
    r->D = duration + (type == DEDUP_WINDOW_COUNT ? 1 : 0);
    r->L = type == DEDUP_WINDOW_COUNT ? 0 : L;
    r->s = s;
    r->keys = calloc(nkeys, sizeof(ref_key));
    assert_non_null(r->keys);
    r->nkeys = nkeys;
}

static void ref_free(ref *r)
{
    for (size_t i = 0; i < r->nkeys; i++)
        free(r->keys[i].t);
    free(r->keys);
}

static void ref_watermark(ref *r, int64_t wm)
{
    if (!r->has_W || wm > r->W) {
        r->W = wm;
        r->has_W = true;
    }
}

static dedup_verdict ref_seen(ref *r, size_t key, int64_t u)
{
    if (r->type == DEDUP_WINDOW_COUNT)
        u = r->counter++;
    else if (r->has_W && u < r->W) {
        r->late++;
        if (r->has_T && r->T - u > r->late_max_behind)
            r->late_max_behind = r->T - u;
        return DEDUP_LATE;
    }
    if (!r->has_T || u > r->T) {
        r->T = u;
        r->has_T = true;
        ref_watermark(r, u - r->L);
    }
    ref_key *k = &r->keys[key];
    for (size_t i = 0; i < k->n; i++) {
        int64_t t = k->t[i];
        bool dup = r->type == DEDUP_WINDOW_TUMBLING ? fdiv(t, r->D) == fdiv(u, r->D)
                                                    : (u - t < r->D && t - u < r->D);
        if (dup) {
            r->dups++;
            return DEDUP_DUPLICATE;
        }
    }
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 4;
        k->t = realloc(k->t, k->cap * sizeof(int64_t));
        assert_non_null(k->t);
    }
    k->t[k->n++] = u;
    r->kept++;
    return DEDUP_NEW;
}

/* Kept records the window must still hold: those in generations at or above
 * the floor of the watermark. */
static uint64_t ref_remembered(const ref *r)
{
    if (!r->has_W)
        return r->kept;
    int64_t floor_id = r->type == DEDUP_WINDOW_TUMBLING ? fdiv(r->W, r->D)
                                                        : fdiv(r->W - r->D + 1, r->s);
    uint64_t n = 0;
    for (size_t i = 0; i < r->nkeys; i++)
        for (size_t j = 0; j < r->keys[i].n; j++)
            if (fdiv(r->keys[i].t[j], r->s) >= floor_id)
                n++;
    return n;
}

/* ---- helpers -------------------------------------------------------------------- */

static dedup_digest key_digest(const dedup_window *w, size_t key)
{
    uint64_t k = key;
    return dedup_window_digest(w, &k, sizeof k);
}

static dedup_window *make(dedup_window_type type, dedup_window_mode mode, uint64_t duration,
                          uint64_t lateness, uint32_t gens, uint64_t capacity, double fpr)
{
    dedup_window_params p;
    dedup_window_params_init(&p);
    p.type = type;
    p.mode = mode;
    p.duration = duration;
    p.lateness = lateness;
    p.generations = gens;
    p.capacity = capacity;
    p.fpr = fpr;
    dedup_window *w = NULL;
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_OK);
    assert_non_null(w);
    return w;
}

/* An event stream: a base clock that moves forward by random steps, with
 * jitter (some of it far behind, so some records are late). */
typedef struct event {
    size_t key;
    int64_t t;
    int64_t advance; /* != INT64_MIN: call advance_watermark(advance) first */
} event;

static event *gen_stream(tu_rng *r, size_t n, size_t nkeys, int64_t start, int64_t step,
                         int64_t jitter, bool advances)
{
    event *ev = malloc(n * sizeof *ev);
    assert_non_null(ev);
    int64_t base = start;
    for (size_t i = 0; i < n; i++) {
        base += (int64_t)tu_below(r, (uint64_t)step + 1);
        int64_t t = base;
        uint64_t c = tu_below(r, 100);
        if (c < 30)
            t -= (int64_t)tu_below(r, (uint64_t)jitter + 1);
        else if (c < 33)
            t -= (int64_t)tu_below(r, (uint64_t)(4 * jitter) + 1);
        ev[i].key = (size_t)tu_below(r, nkeys);
        ev[i].t = t;
        ev[i].advance = INT64_MIN;
        if (advances && tu_below(r, 500) == 0)
            ev[i].advance = base - (int64_t)tu_below(r, (uint64_t)jitter + 1);
    }
    return ev;
}

static void save_to(const dedup_window *w, unsigned char **buf, size_t *len)
{
    uint64_t size = dedup_window_serialized_size(w);
    *buf = malloc(size ? size : 1);
    assert_non_null(*buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, *buf, size);
    assert_int_equal(dedup_window_save(w, &sink), DEDUP_OK);
    assert_int_equal(ms.len, size);
    *len = (size_t)size;
}

static dedup_status load_from(const unsigned char *buf, size_t len, const dedup_allocator *a,
                              dedup_window **out)
{
    dedup_mem_source src;
    return dedup_window_load(dedup_mem_source_init(&src, buf, len), a, out);
}

/* ---- exact: identical decisions to the model ------------------------------------ */

static void run_vs_model(tu_rng *r, dedup_window_type type, int64_t duration, int64_t lateness,
                         uint32_t gens, size_t n, size_t nkeys, int64_t start, int64_t step,
                         int64_t jitter)
{
    bool advances = type != DEDUP_WINDOW_COUNT;
    dedup_window *w = make(type, DEDUP_WINDOW_EXACT, (uint64_t)duration, (uint64_t)lateness,
                           gens, 0, 0.01);
    ref m;
    ref_init(&m, type, duration, lateness, (int64_t)dedup_window_span(w), nkeys);
    event *ev = gen_stream(r, n, nkeys, start, step, jitter, advances);
    uint64_t checks = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].advance != INT64_MIN) {
            ref_watermark(&m, ev[i].advance);
            assert_int_equal(dedup_window_advance_watermark(w, ev[i].advance), DEDUP_OK);
        }
        dedup_verdict want = ref_seen(&m, ev[i].key, ev[i].t), got;
        assert_int_equal(dedup_window_seen(w, key_digest(w, ev[i].key), ev[i].t, &got), DEDUP_OK);
        if (got != want) {
            fprintf(stderr, "type %d D %lld L %lld G %u: event %zu key %zu t %lld: got %d want %d\n",
                    (int)type, (long long)duration, (long long)lateness, gens, i, ev[i].key,
                    (long long)ev[i].t, (int)got, (int)want);
            fail();
        }
        if (i % 997 == 0) {
            dedup_window_stats st;
            dedup_window_get_stats(w, &st);
            assert_int_equal(st.live, ref_remembered(&m));
            checks++;
        }
    }
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    assert_int_equal(st.records, n);
    assert_int_equal(st.kept, m.kept);
    assert_int_equal(st.duplicates, m.dups);
    assert_int_equal(st.late, m.late);
    assert_int_equal(st.late_max_behind, m.late_max_behind);
    assert_int_equal(st.live, ref_remembered(&m));
    assert_int_equal(st.live + st.expired, st.kept);
    assert_true(st.peak_live >= st.live);
    assert_true(checks > 0);
    if (type == DEDUP_WINDOW_COUNT)
        assert_int_equal(st.late, 0);
    free(ev);
    ref_free(&m);
    dedup_window_free(w);
}

static void test_exact_vs_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    const dedup_window_type types[] = {DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_TUMBLING,
                                       DEDUP_WINDOW_COUNT};
    for (int round = 0; round < 6 * SCALE; round++) {
        for (size_t ti = 0; ti < 3; ti++) {
            int64_t duration = 1 + (int64_t)tu_below(&r, 60);
            const int64_t lateness[] = {0, duration / 3, duration, 3 * duration + 7};
            for (size_t li = 0; li < 4; li++) {
                uint32_t gens = 1 + (uint32_t)tu_below(&r, 8);
                size_t nkeys = 2 + (size_t)tu_below(&r, 60);
                int64_t start = -300 + (int64_t)tu_below(&r, 600); /* negative times too */
                int64_t step = (int64_t)tu_below(&r, 4);
                int64_t jitter = 1 + (int64_t)tu_below(&r, (uint64_t)(2 * duration + 4));
                run_vs_model(&r, types[ti], duration, lateness[li], gens, 3000, nkeys, start,
                             step, jitter);
            }
        }
    }
}

/* Larger windows and key sets: tables that grow, compact and spill. */
static void test_exact_vs_model_large(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x51};
    run_vs_model(&r, DEDUP_WINDOW_SLIDING, 5000, 2000, 4, 20000 * SCALE, 20000, 0, 2, 3000);
    run_vs_model(&r, DEDUP_WINDOW_TUMBLING, 5000, 1000, 4, 20000 * SCALE, 20000, -100000, 2,
                 3000);
    run_vs_model(&r, DEDUP_WINDOW_COUNT, 3000, 0, 3, 20000 * SCALE, 5000, 0, 1, 1);
}

/* ---- exact: the semantics spelt out --------------------------------------------- */

static dedup_verdict seen(dedup_window *w, size_t key, int64_t t)
{
    dedup_verdict v;
    assert_int_equal(dedup_window_seen(w, key_digest(w, key), t, &v), DEDUP_OK);
    return v;
}

static void test_semantics(void **state)
{
    (void)state;
    /* Sliding, symmetric: kept at 100, an event at 95 arriving later and not
     * late is a duplicate. */
    dedup_window *w = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_EXACT, 10, 20, 4, 0, 0.01);
    assert_int_equal(seen(w, 1, 100), DEDUP_NEW);
    assert_int_equal(seen(w, 1, 95), DEDUP_DUPLICATE);
    assert_int_equal(seen(w, 1, 90), DEDUP_NEW);       /* |90 - 100| = 10: not < 10 */
    assert_int_equal(seen(w, 1, 109), DEDUP_DUPLICATE); /* 9 from 100 */
    assert_int_equal(seen(w, 1, 110), DEDUP_NEW);       /* anchored at the kept 100 */
    assert_int_equal(seen(w, 1, 79), DEDUP_LATE);       /* watermark 110 - 20 = 90 */
    assert_int_equal(seen(w, 1, 90), DEDUP_DUPLICATE);  /* = the watermark: not late */
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    assert_int_equal(st.late, 1);
    assert_int_equal(st.late_max_behind, 31);
    assert_int_equal(st.watermark, 90);
    assert_int_equal(st.max_time, 110);
    /* A key that never stops arriving is kept once per window. */
    for (int64_t t = 200; t < 300; t++)
        assert_int_equal(seen(w, 2, t), (t - 200) % 10 == 0 ? DEDUP_NEW : DEDUP_DUPLICATE);
    /* Explicit watermark. */
    assert_int_equal(dedup_window_advance_watermark(w, 1000), DEDUP_OK);
    assert_int_equal(seen(w, 2, 999), DEDUP_LATE);
    assert_int_equal(seen(w, 2, 1000), DEDUP_NEW);
    dedup_window_get_stats(w, &st);
    assert_int_equal(st.live, 1); /* everything before 1000 - 10 forgotten */
    assert_int_equal(dedup_window_advance_watermark(w, 500), DEDUP_OK); /* lower: ignored */
    assert_int_equal(seen(w, 3, 999), DEDUP_LATE);
    assert_int_equal(dedup_window_seen(w, key_digest(w, 1), DEDUP_WINDOW_MAX_TIME + 1, &(dedup_verdict){0}),
                     DEDUP_ERR_RANGE);
    assert_int_equal(dedup_window_advance_watermark(w, DEDUP_WINDOW_MIN_TIME - 1), DEDUP_ERR_RANGE);
    dedup_window_free(w);

    /* Tumbling: aligned at multiples of D from 0, negative times included. */
    w = make(DEDUP_WINDOW_TUMBLING, DEDUP_WINDOW_EXACT, 10, 100, 4, 0, 0.01);
    assert_int_equal(seen(w, 1, -11), DEDUP_NEW); /* window [-20, -10) */
    assert_int_equal(seen(w, 1, -20), DEDUP_DUPLICATE);
    assert_int_equal(seen(w, 1, -10), DEDUP_NEW); /* window [-10, 0) */
    assert_int_equal(seen(w, 1, -1), DEDUP_DUPLICATE);
    assert_int_equal(seen(w, 1, 0), DEDUP_NEW);
    assert_int_equal(seen(w, 1, 9), DEDUP_DUPLICATE);
    assert_int_equal(seen(w, 1, 10), DEDUP_NEW);
    assert_int_equal(dedup_window_span(w), 10);
    dedup_window_free(w);

    /* Last N = 1 over "a a a a b a": kept, dup, kept, dup, kept, kept. */
    w = make(DEDUP_WINDOW_COUNT, DEDUP_WINDOW_EXACT, 1, 0, 4, 0, 0.01);
    const dedup_verdict want[] = {DEDUP_NEW, DEDUP_DUPLICATE, DEDUP_NEW, DEDUP_DUPLICATE,
                                  DEDUP_NEW, DEDUP_NEW};
    const size_t keys[] = {1, 1, 1, 1, 2, 1};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(seen(w, keys[i], 12345), want[i]); /* time is ignored */
    assert_int_equal(dedup_window_advance_watermark(w, 5), DEDUP_ERR_UNSUPPORTED);
    dedup_window_free(w);

    /* Last 3. */
    w = make(DEDUP_WINDOW_COUNT, DEDUP_WINDOW_EXACT, 3, 0, 2, 0, 0.01);
    assert_int_equal(seen(w, 1, 0), DEDUP_NEW);       /* index 0 */
    assert_int_equal(seen(w, 2, 0), DEDUP_NEW);       /* 1 */
    assert_int_equal(seen(w, 3, 0), DEDUP_NEW);       /* 2 */
    assert_int_equal(seen(w, 1, 0), DEDUP_DUPLICATE); /* 3: 3 - 0 <= 3 */
    assert_int_equal(seen(w, 1, 0), DEDUP_NEW);       /* 4: 4 - 0 > 3 */
    dedup_window_free(w);
}

static void test_params(void **state)
{
    (void)state;
    dedup_window_params p;
    dedup_window *w = NULL;
    dedup_window_params_init(&p);
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_ERR_INVALID_ARG); /* duration 0 */
    p.duration = DEDUP_WINDOW_MAX_DURATION + 1;
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_ERR_INVALID_ARG);
    p.duration = 10;
    p.generations = DEDUP_WINDOW_MAX_GENERATIONS + 1;
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_ERR_INVALID_ARG);
    p.generations = 4;
    p.mode = DEDUP_WINDOW_APPROX;
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_ERR_INVALID_ARG); /* capacity */
    p.capacity = 100;
    p.fpr = 0.9;
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_ERR_INVALID_ARG);
    p.fpr = 0.01;
    p.lateness = 1000000; /* 400000 generations alive */
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_ERR_LIMIT);
    p.lateness = 0;
    assert_int_equal(dedup_window_create(&p, NULL, &w), DEDUP_OK);
    assert_int_equal(dedup_window_lookups(w), 5); /* G + 1 */
    assert_true(dedup_window_memory_usage(w) > 0);
    dedup_window_free(w);
    dedup_window_free(NULL);
    /* Extreme but legal: times at the limits, the largest window. */
    w = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_EXACT, DEDUP_WINDOW_MAX_DURATION,
             DEDUP_WINDOW_MAX_DURATION, 64, 0, 0.01);
    assert_int_equal(seen(w, 1, DEDUP_WINDOW_MIN_TIME), DEDUP_NEW);
    assert_int_equal(seen(w, 1, DEDUP_WINDOW_MAX_TIME), DEDUP_NEW);
    assert_int_equal(seen(w, 1, 0), DEDUP_DUPLICATE);
    dedup_window_free(w);
    w = make(DEDUP_WINDOW_TUMBLING, DEDUP_WINDOW_EXACT, 1, 0, 1, 0, 0.01);
    assert_int_equal(seen(w, 1, DEDUP_WINDOW_MIN_TIME), DEDUP_NEW);
    assert_int_equal(seen(w, 1, DEDUP_WINDOW_MIN_TIME), DEDUP_DUPLICATE);
    assert_int_equal(seen(w, 1, DEDUP_WINDOW_MAX_TIME), DEDUP_NEW);
    assert_int_equal(seen(w, 1, DEDUP_WINDOW_MIN_TIME), DEDUP_LATE);
    dedup_window_free(w);
}

/* The batch form gives the same verdicts as one call per record. */
static void test_batch(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0xBA7C};
    for (int type = 0; type < 3; type++) {
        for (int mode = 0; mode < 2; mode++) {
            const size_t n = 20000;
            dedup_window *a = make((dedup_window_type)type, (dedup_window_mode)mode, 300, 100, 4,
                                   500, 0.01);
            dedup_window *b = make((dedup_window_type)type, (dedup_window_mode)mode, 300, 100, 4,
                                   500, 0.01);
            event *ev = gen_stream(&r, n, 2000, -50, 2, 150, false);
            dedup_digest *d = malloc(n * sizeof *d);
            int64_t *t = malloc(n * sizeof *t);
            dedup_verdict *v = malloc(n * sizeof *v);
            assert_true(d && t && v);
            for (size_t i = 0; i < n; i++) {
                d[i] = key_digest(a, ev[i].key);
                t[i] = ev[i].t;
            }
            for (size_t i = 0; i < n;) {
                size_t len = 1 + (size_t)tu_below(&r, 100), done = 99;
                if (len > n - i)
                    len = n - i;
                assert_int_equal(dedup_window_seen_batch(b, d + i, type == DEDUP_WINDOW_COUNT ? NULL : t + i,
                                                         len, v + i, &done),
                                 DEDUP_OK);
                assert_int_equal(done, len);
                i += len;
            }
            for (size_t i = 0; i < n; i++) {
                dedup_verdict one;
                assert_int_equal(dedup_window_seen(a, d[i], t[i], &one), DEDUP_OK);
                assert_int_equal(one, v[i]);
            }
            size_t done = 5;
            assert_int_equal(dedup_window_seen_batch(b, d, t, 0, v, &done), DEDUP_OK);
            assert_int_equal(done, 0);
            if (type != DEDUP_WINDOW_COUNT) {
                /* A bad time stops the batch there. */
                t[3] = DEDUP_WINDOW_MAX_TIME + 1;
                assert_int_equal(dedup_window_seen_batch(b, d, t, 10, v, &done), DEDUP_ERR_RANGE);
                assert_int_equal(done, 3);
                assert_int_equal(dedup_window_seen_batch(b, d, NULL, 10, v, &done),
                                 DEDUP_ERR_INVALID_ARG);
            }
            free(d);
            free(t);
            free(v);
            free(ev);
            dedup_window_free(a);
            dedup_window_free(b);
        }
    }
}

/* ---- approximate ------------------------------------------------------------------ */

static dedup_status save_window(const void *obj, dedup_sink *sink)
{
    return dedup_window_save(obj, sink);
}

static uint64_t get_le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* The fingerprint table's shape as the saved state records it
 * (docs/FORMAT.md, time window params at 136 and 144): the model of the
 * false-duplicate rate needs the bucket count and the fingerprint range. */
static void approx_shape(const dedup_window *w, uint64_t *nb, uint64_t *fmask)
{
    size_t len;
    unsigned char *b = tu_save_blob(save_window, w, dedup_window_serialized_size(w), &len);
    assert_true(len >= DEDUP_HEADER_SIZE + 152);
    *nb = get_le(b + DEDUP_HEADER_SIZE + 144, 8);
    *fmask = (UINT64_C(1) << get_le(b + DEDUP_HEADER_SIZE + 136, 4)) - 1;
    free(b);
}

static void run_approx(tu_rng *r, dedup_window_type type, int64_t duration, int64_t lateness,
                       uint32_t gens, uint64_t capacity, double p, uint64_t *trials_out,
                       uint64_t *fp_out, double *model_out)
{
    /* One event per time unit on average, so at most 'duration' keys are
     * kept per window: capacity = duration plans for them, less overloads
     * the table (the overflow goes to the stash). */
    const size_t n = 40000 * (size_t)SCALE;
    dedup_window *w = make(type, DEDUP_WINDOW_APPROX, (uint64_t)duration, (uint64_t)lateness,
                           gens, capacity, p);
    int64_t D = duration + (type == DEDUP_WINDOW_COUNT ? 1 : 0);
    int64_t s = (int64_t)dedup_window_span(w);
    /* Keys: 60% fresh, 40% one of the last 2D events' keys. */
    size_t *keys = malloc(n * sizeof *keys);
    assert_non_null(keys);
    ref m; /* used only as a store of this window's own kept times */
    ref_init(&m, type, duration, lateness, s, n);
    /* The model: a fresh key's fingerprint meets, in its two buckets, about
     * 2 N / nb of the N entries that the lookup's generations hold, each
     * equal with probability 1 / fmask.  N comes from the kept records per
     * generation (the ids fdiv(t, s)); expected false duplicates are summed
     * over the trials. */
    uint64_t nb, fmask;
    approx_shape(w, &nb, &fmask);
    int64_t id_off = (lateness + 2 * D) / s + 2;
    size_t nids = (size_t)((int64_t)(3 * n) / s + 2 * id_off + 4);
    uint64_t *per_id = calloc(nids, sizeof *per_id);
    assert_non_null(per_id);
    double model = 0;
    uint64_t trials = 0, fp = 0, misses = 0;
    int64_t base = 0, T = INT64_MIN, W = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        size_t key = i;
        if (i && tu_below(r, 100) < 40) {
            size_t back = 1 + (size_t)tu_below(r, (uint64_t)(2 * duration));
            key = keys[i > back ? i - back : 0];
        }
        keys[i] = key;
        base += (int64_t)tu_below(r, 3); /* mean 1 per event */
        int64_t u = base;
        if (lateness && tu_below(r, 100) < 20)
            u -= (int64_t)tu_below(r, (uint64_t)lateness + 1);
        if (type == DEDUP_WINDOW_COUNT)
            u = (int64_t)i;
        dedup_verdict v;
        assert_int_equal(dedup_window_seen(w, key_digest(w, key), u, &v), DEDUP_OK);
        if (type != DEDUP_WINDOW_COUNT && W != INT64_MIN && u < W) {
            assert_int_equal(v, DEDUP_LATE);
            continue;
        }
        if (u > T) {
            T = u;
            W = T - lateness;
        }
        assert_true(v == DEDUP_NEW || v == DEDUP_MAYBE_DUPLICATE);
        /* What the kept records say. */
        bool within = false, near = false;
        ref_key *k = &m.keys[key];
        for (size_t j = 0; j < k->n; j++) {
            int64_t t = k->t[j];
            if (type == DEDUP_WINDOW_TUMBLING) {
                if (fdiv(t, D) == fdiv(u, D))
                    within = near = true;
            } else {
                if (u - t < D && t - u < D)
                    within = true;
                if (u - t < D + s && t - u < D + s)
                    near = true;
            }
        }
        if (within && v == DEDUP_NEW)
            misses++; /* a false NEW: never allowed */
        if (!near) {
            trials++;
            if (v == DEDUP_MAYBE_DUPLICATE)
                fp++;
            int64_t first = type == DEDUP_WINDOW_TUMBLING ? fdiv(u, D) : fdiv(u - D + 1, s);
            int64_t last = type == DEDUP_WINDOW_TUMBLING ? fdiv(u, D) : fdiv(u + D - 1, s);
            uint64_t live = 0;
            for (int64_t id = first; id <= last; id++) {
                int64_t at = id + id_off;
                if (at >= 0 && (size_t)at < nids)
                    live += per_id[at];
            }
            model += 1.0 - pow(1.0 - 1.0 / (double)fmask, 2.0 * (double)live / (double)nb);
        }
        if (v == DEDUP_NEW) {
            int64_t at = fdiv(u, s) + id_off;
            assert_true(at >= 0 && (size_t)at < nids);
            per_id[at]++;
            if (k->n == k->cap) {
                k->cap = k->cap ? 2 * k->cap : 4;
                k->t = realloc(k->t, k->cap * sizeof(int64_t));
                assert_non_null(k->t);
            }
            k->t[k->n++] = u;
        }
    }
    assert_int_equal(misses, 0);
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    assert_int_equal(st.live + st.expired, st.kept);
    free(keys);
    free(per_id);
    ref_free(&m);
    dedup_window_free(w);
    *trials_out += trials;
    *fp_out += fp;
    *model_out += model;
}

/* One stream configuration for run_approx(). */
typedef struct approx_cfg {
    int64_t duration, lateness;
    uint32_t gens;
    uint64_t capacity;
} approx_cfg;

/* Every configuration for each window type: no false NEW (run_approx
 * asserts it) and at most p false duplicates per fresh key.  With
 * 'two_sided' (the table holds what it was planned for), the count is also
 * within the binomial bounds of the table's own model, widened for what the
 * model leaves out (measured 4-10% above it: buckets that coincide, the
 * stash) to 20% above and 10% below: a table with half the fingerprint
 * space (2x the rate) fails. */
static void check_approx(tu_rng *r, const char *label, const approx_cfg *cfg, size_t ncfg,
                         bool two_sided)
{
    const double p = 0.01;
    const dedup_window_type types[] = {DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_TUMBLING,
                                       DEDUP_WINDOW_COUNT};
    for (size_t ti = 0; ti < 3; ti++) {
        uint64_t trials = 0, fp = 0;
        double model = 0;
        for (size_t c = 0; c < ncfg; c++)
            run_approx(r, types[ti], cfg[c].duration, cfg[c].lateness, cfg[c].gens,
                       cfg[c].capacity, p, &trials, &fp, &model);
        double rate = model / (double)trials;
        fprintf(stderr,
                "%s type %d: %llu false duplicates in %llu fresh keys (%.4f%%), model %.4f%%\n",
                label, (int)types[ti], (unsigned long long)fp, (unsigned long long)trials,
                100.0 * (double)fp / (double)trials, 100.0 * rate);
        assert_true(trials > 10000);
        assert_true(fp <= tu_binomial_upper(trials, p));
        if (two_sided) {
            assert_true(fp <= tu_binomial_upper(trials, rate * 1.20));
            assert_true(fp >= tu_binomial_lower(trials, rate * 0.90));
        }
    }
}

static void test_approx_guarantees(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0xA9};
    const approx_cfg cfg[] = {
        {2000, 0, 4, 2000}, {1000, 300, 3, 1000}, {500, 2000, 8, 500},
        {1400, 0, 0, 1400}, /* default G = 7 */
    };
    check_approx(&r, "approx", cfg, sizeof cfg / sizeof *cfg, true);
}

/* More keys than planned: the table fills, the stash takes the rest, and
 * still no false NEW and no more than p false duplicates per fresh key. */
static void test_approx_overload(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x0F10};
    const approx_cfg cfg[] = {
        {2000, 0, 0, 250},   /* 8x the plan */
        {1000, 300, 5, 700}, /* 1.4x */
    };
    check_approx(&r, "overloaded approx", cfg, sizeof cfg / sizeof *cfg, false);
}

/* A key kept D - 1 ago is always a duplicate, over thousands of generation
 * rotations (every tag reused and swept many times), in order and not. */
static void test_approx_rotations(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x2071};
    for (uint32_t gens = 0; gens <= 9; gens += 3) {
        const int64_t D = 70;
        dedup_window *w = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_APPROX, (uint64_t)D, 10, gens,
                               (uint64_t)D, 0.01);
        int64_t steps = 20000 * SCALE;
        uint64_t kept_at[70] = {0}; /* key kept at time t, by t mod D */
        bool was_kept[70] = {false};
        for (int64_t t = 0; t < steps; t++) {
            size_t key = (size_t)(t + 1) * 1000003u + (size_t)tu_below(&r, 7);
            dedup_verdict v = seen(w, key, t);
            int64_t back = t - (D - 1);
            size_t slot = (size_t)(t % D);
            if (back >= 0 && was_kept[(size_t)(back % D)]) {
                /* Age D - 1: inside the window. */
                assert_int_equal(seen(w, kept_at[back % D], t), DEDUP_MAYBE_DUPLICATE);
            }
            was_kept[slot] = v == DEDUP_NEW;
            kept_at[slot] = key;
            if (t >= 5 && tu_below(&r, 4) == 0) {
                /* Out of order by up to the lateness: a key kept at t - 3
                 * is a duplicate at t - 5 too. */
                if (was_kept[(size_t)((t - 3) % D)])
                    assert_int_equal(seen(w, kept_at[(t - 3) % D], t - 5), DEDUP_MAYBE_DUPLICATE);
            }
        }
        dedup_window_stats st;
        dedup_window_get_stats(w, &st);
        assert_int_equal(st.live + st.expired, st.kept);
        assert_true(st.expired > (uint64_t)steps / 2);
        dedup_window_free(w);
    }
}

/* A full table: memory grows by the stash while the window holds more keys
 * than planned, and comes back to the table alone once they expire; a copy
 * saved and loaded in the middle decides exactly like the original. */
static void test_approx_full_table(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0xF011};
    dedup_window *w = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_APPROX, 1000, 0, 0, 100, 0.01);
    assert_int_equal(seen(w, 999999, 0), DEDUP_NEW); /* the generation array is made */
    size_t mem0 = dedup_window_memory_usage(w), mem_max = mem0;
    dedup_window *c = NULL;
    size_t *keys = malloc(20000 * sizeof *keys);
    assert_non_null(keys);
    for (int64_t t = 0; t < 20000; t++) {
        if (t == 5000) {
            unsigned char *buf;
            size_t len;
            save_to(w, &buf, &len);
            assert_int_equal(load_from(buf, len, NULL, &c), DEDUP_OK);
            free(buf);
        }
        /* 10x the plan: one fresh key per time unit, some repeats. */
        size_t key = (size_t)t;
        if (t > 0 && tu_below(&r, 3) == 0)
            key = keys[t - 1 - (int64_t)tu_below(&r, (uint64_t)(t < 999 ? t : 999))];
        keys[t] = key;
        dedup_verdict v = seen(w, key, t);
        if (c)
            assert_int_equal(seen(c, key, t), v);
        size_t m = dedup_window_memory_usage(w);
        if (m > mem_max)
            mem_max = m;
    }
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    fprintf(stderr, "full table: %zu bytes planned, up to %zu held, %llu live\n", mem0, mem_max,
            (unsigned long long)st.live);
    assert_true(st.live > 5 * 100);
    assert_true(mem_max > mem0);
    /* The keys expire: nothing but the table is left. */
    assert_int_equal(dedup_window_advance_watermark(w, 100000), DEDUP_OK);
    assert_int_equal(dedup_window_memory_usage(w), mem0);
    dedup_window_get_stats(w, &st);
    assert_int_equal(st.live, 0);
    assert_int_equal(seen(w, 1, 100000), DEDUP_NEW);
    free(keys);
    dedup_window_free(c);
    dedup_window_free(w);
}

/* ---- memory follows the window ------------------------------------------------------ */

static void flat_run(dedup_window_mode mode, dedup_window_type type, uint64_t events)
{
    /* A constant number of keys in the window: keys drawn from a universe of
     * U, one event per microsecond, window 2U us. */
#ifdef DEDUP_SANITIZED
    const uint64_t n = events / 100;
#else
    const uint64_t n = events;
#endif
    const uint64_t U = 20000;
    dedup_window *w = make(type, mode, 2 * U, 100, 4, U, 0.01);
    tu_rng r = {tu_seed() ^ 0xF1A7};
    size_t mem_min = SIZE_MAX, mem_max = 0;
    uint64_t live_max = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key = tu_below(&r, U);
        dedup_verdict v;
        assert_int_equal(dedup_window_seen(w, dedup_hash_u64(key, 7), (int64_t)i, &v), DEDUP_OK);
        if (i >= n / 10 && (i & 4095) == 0) {
            size_t m = dedup_window_memory_usage(w);
            if (m < mem_min)
                mem_min = m;
            if (m > mem_max)
                mem_max = m;
            dedup_window_stats st;
            dedup_window_get_stats(w, &st);
            if (st.live > live_max)
                live_max = st.live;
        }
    }
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    fprintf(stderr, "mode %d type %d: %llu events, memory %zu..%zu bytes, live <= %llu, "
            "expired %llu, %.1f bytes per live key\n", (int)mode, (int)type,
            (unsigned long long)n, mem_min, mem_max, (unsigned long long)live_max,
            (unsigned long long)st.expired, (double)mem_max / (double)st.live);
    /* Flat: the largest footprint of the last 90% is within 1.5x of the
     * smallest, and the window never holds more than U keys + a generation. */
    if (type == DEDUP_WINDOW_TUMBLING) /* two windows overlap for the lateness */
        assert_true(mem_max <= 2 * mem_min + mem_min / 4);
    else
        assert_true(mem_max <= mem_min + mem_min / 2);
    assert_true(live_max <= U + U / 2 + 100);
    assert_true(st.expired > n / 4 / (2 * U) * U / 2);
    if (mode == DEDUP_WINDOW_EXACT && type == DEDUP_WINDOW_SLIDING)
        assert_true((double)mem_max / (double)st.live < 48.0);
    dedup_window_free(w);
}

static void test_memory_flat(void **state)
{
    (void)state;
    /* The 100M-event stream for both modes (1M under sanitizers). */
    flat_run(DEDUP_WINDOW_EXACT, DEDUP_WINDOW_SLIDING, 100000000);
    flat_run(DEDUP_WINDOW_EXACT, DEDUP_WINDOW_TUMBLING, 20000000);
    flat_run(DEDUP_WINDOW_APPROX, DEDUP_WINDOW_SLIDING, 100000000);
}

/* ---- a new generation's first table ------------------------------------------------- */

/* The memory one key opening a new generation takes, after 'n' keys in the
 * generation before, with the first table limited to 'limit' entries (0:
 * none). */
static size_t opening_cost(size_t n, uint64_t limit)
{
    dedup_window *w = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_EXACT, 4000, 0, 4, 0, 0.01);
    if (limit)
        assert_int_equal(dedup_window_limit_first_table(w, limit), DEDUP_OK);
    dedup_verdict v;
    for (size_t i = 0; i < n; i++) {
        dedup_digest d = {i * 0x9E3779B97F4A7C15u + 1, i};
        assert_int_equal(dedup_window_seen(w, d, 0, &v), DEDUP_OK);
        assert_int_equal(v, DEDUP_NEW);
    }
    size_t before = dedup_window_memory_usage(w);
    dedup_digest d = {7, 0xFFFFFFFFu};
    assert_int_equal(dedup_window_seen(w, d, 1500, &v), DEDUP_OK); /* a later generation */
    assert_int_equal(v, DEDUP_NEW);
    size_t after = dedup_window_memory_usage(w);
    /* the earlier keys are still answered */
    dedup_digest e = {5 * 0x9E3779B97F4A7C15u + 1, 5};
    assert_int_equal(dedup_window_seen(w, e, 1501, &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_DUPLICATE);
    dedup_window_free(w);
    return after > before ? after - before : 0;
}

static void test_first_table_limit(void **state)
{
    (void)state;
    const size_t n = 100000;
    size_t learned = opening_cost(n, 0), limited = opening_cost(n, 1000);
    /* learned: a table for as many keys as the generation before held */
    assert_true(learned >= n * 16);
    /* limited: a table for at most 1,000 entries */
    assert_true(limited <= 1000 * 64);
    assert_int_equal(dedup_window_limit_first_table(NULL, 1), DEDUP_ERR_INVALID_ARG);
}

/* ---- save / load ------------------------------------------------------------------- */

static void resume_run(tu_rng *r, dedup_window_type type, dedup_window_mode mode,
                       uint64_t capacity)
{
    const size_t n = 6000 * (size_t)SCALE;
    int64_t duration = 50 + (int64_t)tu_below(r, 200);
    int64_t lateness = (int64_t)tu_below(r, (uint64_t)duration);
    uint32_t gens = 1 + (uint32_t)tu_below(r, 6);
    event *ev = gen_stream(r, n, 500, -1000, 2, duration, type != DEDUP_WINDOW_COUNT);
    dedup_window *a = make(type, mode, (uint64_t)duration, (uint64_t)lateness, gens, capacity,
                           0.01);
    dedup_window *b = make(type, mode, (uint64_t)duration, (uint64_t)lateness, gens, capacity,
                           0.01);
    size_t cuts[3] = {n / 5, n / 2, n - 7};
    size_t ci = 0;
    for (size_t i = 0; i < n; i++) {
        if (ci < 3 && i == cuts[ci]) {
            /* b is saved, freed and loaded back: through memory twice, through
             * a file once. */
            dedup_window *c = NULL;
            if (ci == 1) {
                char path[] = "/tmp/test_window_XXXXXX";
                int fd = mkstemp(path);
                assert_true(fd >= 0);
                close(fd);
                assert_int_equal(dedup_window_save_file(b, path), DEDUP_OK);
                assert_int_equal(dedup_window_load_file(path, NULL, &c), DEDUP_OK);
                remove(path);
            } else {
                unsigned char *buf;
                size_t len;
                save_to(b, &buf, &len);
                assert_int_equal(load_from(buf, len, NULL, &c), DEDUP_OK);
                /* Saving the loaded window gives the same bytes. */
                unsigned char *buf2;
                size_t len2;
                save_to(c, &buf2, &len2);
                assert_int_equal(len, len2);
                assert_memory_equal(buf, buf2, len);
                free(buf);
                free(buf2);
            }
            dedup_window_free(b);
            b = c;
            ci++;
        }
        if (ev[i].advance != INT64_MIN) {
            assert_int_equal(dedup_window_advance_watermark(a, ev[i].advance), DEDUP_OK);
            assert_int_equal(dedup_window_advance_watermark(b, ev[i].advance), DEDUP_OK);
        }
        dedup_verdict va, vb;
        dedup_digest d = key_digest(a, ev[i].key);
        assert_int_equal(dedup_window_seen(a, d, ev[i].t, &va), DEDUP_OK);
        assert_int_equal(dedup_window_seen(b, d, ev[i].t, &vb), DEDUP_OK);
        assert_int_equal(va, vb);
    }
    dedup_window_stats sa, sb;
    dedup_window_get_stats(a, &sa);
    dedup_window_get_stats(b, &sb);
    assert_memory_equal(&sa, &sb, sizeof sa);
    free(ev);
    dedup_window_free(a);
    dedup_window_free(b);
}

static void test_save_resume(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 0x5A7E};
    for (int round = 0; round < 2 * SCALE; round++)
        for (int type = 0; type < 3; type++)
            for (int mode = 0; mode < 2; mode++)
                resume_run(&r, (dedup_window_type)type, (dedup_window_mode)mode,
                           round % 2 ? 400 : 20); /* 20: approximate overflows */
    /* An empty window round-trips too. */
    dedup_window *w = make(DEDUP_WINDOW_SLIDING, DEDUP_WINDOW_APPROX, 10, 0, 4, 10, 0.01), *c;
    unsigned char *buf;
    size_t len;
    save_to(w, &buf, &len);
    assert_int_equal(load_from(buf, len, NULL, &c), DEDUP_OK);
    assert_int_equal(seen(c, 1, 5), DEDUP_NEW);
    assert_int_equal(seen(c, 1, 6), DEDUP_MAYBE_DUPLICATE);
    free(buf);
    dedup_window_free(c);
    dedup_window_free(w);
}

/* A buffer with a stream's state, for the corruption tests. */
static void sample_state_cap(dedup_window_mode mode, dedup_window_type type, uint64_t capacity,
                             unsigned char **buf, size_t *len)
{
    dedup_window *w = make(type, mode, 40, 15, 3, capacity, 0.01);
    tu_rng r = {42};
    event *ev = gen_stream(&r, 300, 40, 0, 2, 30, false);
    for (size_t i = 0; i < 300; i++)
        (void)seen(w, ev[i].key, ev[i].t);
    save_to(w, buf, len);
    free(ev);
    dedup_window_free(w);
}

static void sample_state(dedup_window_mode mode, dedup_window_type type, unsigned char **buf,
                         size_t *len)
{
    sample_state_cap(mode, type, 50, buf, len);
}

static void fix_checksum(unsigned char *buf, size_t len)
{
    dedup_put_u64(buf + len - 8, XXH3_64bits(buf, len - 8));
}

static void test_corrupt_rejected(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        unsigned char *buf;
        size_t len;
        sample_state((dedup_window_mode)mode, DEDUP_WINDOW_SLIDING, &buf, &len);
        dedup_window *w = NULL;
        assert_int_equal(load_from(buf, len, NULL, &w), DEDUP_OK);
        dedup_window_free(w);
        /* Every truncation fails. */
        for (size_t cut = 0; cut < len; cut += (cut < 300 ? 1 : 97)) {
            w = NULL;
            assert_int_not_equal(load_from(buf, cut, NULL, &w), DEDUP_OK);
            assert_null(w);
        }
        /* Every single-byte change fails (checksum or earlier). */
        unsigned char *copy = malloc(len);
        assert_non_null(copy);
        for (size_t i = 0; i < len; i += (i < 400 ? 1 : 13)) {
            memcpy(copy, buf, len);
            copy[i] ^= (unsigned char)(1u << (i % 8));
            w = NULL;
            assert_int_not_equal(load_from(copy, len, NULL, &w), DEDUP_OK);
            assert_null(w);
        }
        /* Semantic corruption with a valid checksum is caught by validation. */
        const size_t P = DEDUP_HEADER_SIZE; /* params start */
        struct {
            size_t off;
            uint64_t v;
            int width;
        } bad[] = {
            {P + 0, 7, 4},                      /* window type */
            {P + 4, 2, 4},                      /* mode */
            {P + 8, 0, 8},                      /* duration 0 */
            {P + 24, 0, 4},                     /* generations 0 */
            {P + 24, 65, 4},                    /* too many generations */
            {P + 28, 4, 4},                     /* unknown flag */
            {P + 48, (uint64_t)1 << 63, 8},     /* max time out of range */
            {P + 56, 0, 8},                     /* watermark far below T - L */
            {P + 72, 1, 8},                     /* records != kept + dups + late */
            {P + 112, 0, 8},                    /* peak below live */
            {P + 120, 0, 8},                    /* expired: live + expired != kept */
            {P + 128, 1000000, 4},              /* generation count */
            {P + 132, 2, 4},                    /* unknown window option (bit 0 is refresh) */
            {P + 136, (uint64_t)1 << 62, 8},    /* first generation id beyond T */
            {P + 144, 0, 8},                    /* empty generation */
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            memcpy(copy, buf, len);
            if (bad[i].width == 4)
                dedup_put_u32(copy + bad[i].off, (uint32_t)bad[i].v);
            else
                dedup_put_u64(copy + bad[i].off, bad[i].v);
            fix_checksum(copy, len);
            w = NULL;
            dedup_status s = load_from(copy, len, NULL, &w);
            if (s == DEDUP_OK)
                fprintf(stderr, "mode %d: corruption %zu accepted\n", mode, i);
            assert_int_not_equal(s, DEDUP_OK);
            assert_null(w);
        }
        if (mode == DEDUP_WINDOW_EXACT) {
            /* Entries out of order, a zero digest, a time outside its
             * generation. */
            const size_t e0 = P + 136 + 16;
            memcpy(copy, buf, len);
            memcpy(copy + e0, buf + e0 + 24, 24);
            memcpy(copy + e0 + 24, buf + e0, 24);
            fix_checksum(copy, len);
            assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_CORRUPT);
            memcpy(copy, buf, len);
            memset(copy + e0, 0, 16);
            fix_checksum(copy, len);
            assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_CORRUPT);
            memcpy(copy, buf, len);
            dedup_put_u64(copy + e0 + 16, dedup_get_u64(buf + e0 + 16) + 100000);
            fix_checksum(copy, len);
            assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_CORRUPT);
        }
        if (mode == DEDUP_WINDOW_APPROX) {
            /* The geometry must be what the params create; the stash count
             * must match the payload. */
            const size_t bad_approx[][3] = {
                {P + 136, 11, 4}, {P + 140, 4, 4}, {P + 144, 3, 8}, {P + 152, 1, 8},
                {P + 160, 0, 8},
            };
            for (size_t i = 0; i < sizeof bad_approx / sizeof bad_approx[0]; i++) {
                memcpy(copy, buf, len);
                if (bad_approx[i][2] == 4)
                    dedup_put_u32(copy + bad_approx[i][0], (uint32_t)bad_approx[i][1]);
                else
                    dedup_put_u64(copy + bad_approx[i][0], bad_approx[i][1]);
                fix_checksum(copy, len);
                w = NULL;
                assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_CORRUPT);
                assert_null(w);
            }
            /* A generation's count that its entries do not match. */
            const size_t g0 = P + 176;
            memcpy(copy, buf, len);
            dedup_put_u64(copy + g0 + 8, dedup_get_u64(buf + g0 + 8) + 1);
            fix_checksum(copy, len);
            assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_CORRUPT);
            /* An entry whose tag is no saved generation's: every slot of the
             * table gets a tag with no generation, in turn, until one is
             * found non-empty (the first byte holding a slot's tag). */
            uint32_t ng = dedup_get_u32(buf + P + 128);
            const size_t t0 = g0 + 16 * (size_t)ng;
            bool tried = false;
            for (size_t i = t0; i < t0 + 64 && !tried; i++) {
                if (!buf[i])
                    continue;
                memcpy(copy, buf, len);
                copy[i] = 0xFF;
                fix_checksum(copy, len);
                assert_int_not_equal(load_from(copy, len, NULL, &w), DEDUP_OK);
                tried = true;
            }
            /* The layout before the tagged table (params of 136 bytes) is an
             * older version. */
            memcpy(copy, buf, len);
            dedup_put_u32(copy + 20, 136);
            fix_checksum(copy, len);
            assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_VERSION);
        }
        /* Another structure type. */
        memcpy(copy, buf, len);
        copy[10] = DEDUP_TYPE_BLOOM;
        fix_checksum(copy, len);
        assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_WRONG_TYPE);
        free(copy);
        free(buf);
    }
}

/* A saved approximate window with a stash: its entries must name the
 * smaller bucket of a pair, carry a live tag and come in (bucket, entry)
 * order. */
static void test_corrupt_stash(void **state)
{
    (void)state;
    unsigned char *buf;
    size_t len;
    sample_state_cap(DEDUP_WINDOW_APPROX, DEDUP_WINDOW_SLIDING, 2, &buf, &len);
    const size_t P = DEDUP_HEADER_SIZE;
    uint64_t sn = dedup_get_u64(buf + P + 152);
    fprintf(stderr, "sample: %llu stash entries\n", (unsigned long long)sn);
    assert_true(sn >= 2);
    dedup_window *w = NULL;
    assert_int_equal(load_from(buf, len, NULL, &w), DEDUP_OK);
    dedup_window_free(w);
    unsigned char *copy = malloc(len);
    assert_non_null(copy);
    const size_t s0 = len - 8 - 16 * (size_t)sn; /* first stash entry */
    /* Out of order: the first two swapped. */
    memcpy(copy, buf, len);
    memcpy(copy + s0, buf + s0 + 16, 16);
    memcpy(copy + s0 + 16, buf + s0, 16);
    fix_checksum(copy, len);
    assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_CORRUPT);
    /* A bucket beyond the table. */
    memcpy(copy, buf, len);
    dedup_put_u64(copy + s0, UINT64_C(1) << 40);
    fix_checksum(copy, len);
    assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_CORRUPT);
    /* A zero fingerprint. */
    memcpy(copy, buf, len);
    dedup_put_u64(copy + s0 + 8, 0);
    fix_checksum(copy, len);
    assert_int_equal(load_from(copy, len, NULL, &w), DEDUP_ERR_CORRUPT);
    /* One entry fewer: counts no longer add up (payload shortened too). */
    memcpy(copy, buf, len);
    dedup_put_u64(copy + P + 152, sn - 1);
    dedup_put_u64(copy + 32, dedup_get_u64(buf + 32) - 16);
    memmove(copy + len - 24, copy + len - 8, 8);
    fix_checksum(copy, len - 16);
    assert_int_equal(load_from(copy, len - 16, NULL, &w), DEDUP_ERR_CORRUPT);
    free(copy);
    free(buf);
}

/* ---- out of memory ------------------------------------------------------------------ */

static void test_oom(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        /* 0 exact, 1 approximate, 2 approximate with 20x fewer keys planned
         * than kept: the stash grows, and shrinks as its keys expire. */
        int mode = variant ? DEDUP_WINDOW_APPROX : DEDUP_WINDOW_EXACT;
        uint64_t capacity = variant == 2 ? 100 : 2000;
        unsigned char *saved;
        size_t saved_len;
        sample_state_cap((dedup_window_mode)mode, DEDUP_WINDOW_SLIDING, variant == 2 ? 2 : 50,
                         &saved, &saved_len);
        bool completed = false;
        for (uint64_t fail_at = 1; !completed; fail_at++) {
            tu_failing_alloc st;
            dedup_allocator a = tu_failing_allocator(&st, fail_at);
            dedup_window_params p;
            dedup_window_params_init(&p);
            p.mode = (dedup_window_mode)mode;
            p.duration = 100;
            p.lateness = 50;
            p.capacity = capacity;
            dedup_window *w = NULL;
            dedup_status s = dedup_window_create(&p, &a, &w);
            bool all_ok = s == DEDUP_OK;
            if (!s) {
                tu_rng r = {fail_at};
                for (int64_t i = 0; i < 3000; i++) {
                    dedup_verdict v;
                    uint64_t key = tu_below(&r, 2000);
                    s = dedup_window_seen(w, dedup_hash_u64(key, 1), i / 4, &v);
                    if (s) {
                        assert_int_equal(s, DEDUP_ERR_NOMEM);
                        all_ok = false;
                    }
                }
                dedup_window_stats ws;
                dedup_window_get_stats(w, &ws);
                assert_int_equal(ws.live + ws.expired, ws.kept);
                /* Saving may need memory too (the stash, sorted). */
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
                    assert_int_equal(ms.len, want);
                }
                free(out);
                dedup_window_free(w);
            }
            dedup_window *l = NULL;
            s = load_from(saved, saved_len, &a, &l);
            if (s)
                assert_int_equal(s, DEDUP_ERR_NOMEM);
            else
                dedup_window_free(l);
            all_ok = all_ok && s == DEDUP_OK;
            assert_int_equal(st.live, 0);
            completed = all_ok;
            assert_true(fail_at < 100000);
        }
        free(saved);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_exact_vs_model),
        cmocka_unit_test(test_exact_vs_model_large),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_approx_guarantees),
        cmocka_unit_test(test_approx_overload),
        cmocka_unit_test(test_approx_rotations),
        cmocka_unit_test(test_approx_full_table),
        cmocka_unit_test(test_save_resume),
        cmocka_unit_test(test_corrupt_rejected),
        cmocka_unit_test(test_corrupt_stash),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_memory_flat),
        cmocka_unit_test(test_first_table_limit),
    };
    const char *only = getenv("DEDUP_TEST_ONLY"); /* run one test: its name */
    if (only && *only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
