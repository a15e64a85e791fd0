/*
 * test_seen.c - every kind of dedup/seen.h through the one interface.
 *
 * One table of configurations (kinds, and the variants of a kind: cuckoo
 * chains, windows of each type and mode), and for each: no false negative,
 * the false-positive rate of the kind's own model from both sides, save ->
 * load -> the same answers, every truncation and byte change of a saved
 * file refused, allocation failures that leak nothing, delete where the
 * kind can and DEDUP_ERR_UNSUPPORTED where it cannot, and the exact kinds
 * against a naive model on seeded random inputs.  The seed is printed
 * (DEDUP_TEST_SEED replays it).
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/seen.h"
#include "dedup/window.h"

typedef struct cfg {
    const char *name;
    dedup_seen_kind kind;
    uint64_t items, memory;
    int window_type;
    bool approximate;
    uint64_t duration;
    uint32_t expansion;
    bool ints;       /* keys are batch.ints */
    bool model;      /* exact: compared with the naive model */
    bool fpr_two;    /* fpr_bound is an estimate: tested from both sides */
} cfg;

#define CAP 4000
static const cfg cfgs[] = {
    {"exact", DEDUP_SEEN_EXACT, 0, 0, 0, false, 0, 2, false, true, false},
    {"exact-sized", DEDUP_SEEN_EXACT, CAP, 0, 0, false, 0, 2, false, true, false},
    {"fingerprint", DEDUP_SEEN_FINGERPRINT, 0, 0, 0, false, 0, 2, false, true, false},
    {"u64", DEDUP_SEEN_U64, 0, 0, 0, false, 0, 2, true, true, false},
    {"bitmap", DEDUP_SEEN_BITMAP, 0, 0, 0, false, 0, 2, true, true, false},
    {"bloom", DEDUP_SEEN_BLOOM, CAP, 0, 0, false, 0, 2, false, false, true},
    {"bloom-by-memory", DEDUP_SEEN_BLOOM, 0, 4096, 0, false, 0, 2, false, false, true},
    {"blocked", DEDUP_SEEN_BLOCKED, CAP, 0, 0, false, 0, 2, false, false, true},
    {"counting", DEDUP_SEEN_COUNTING, CAP, 0, 0, false, 0, 2, false, false, true},
    {"cuckoo", DEDUP_SEEN_CUCKOO, CAP, 0, 0, false, 0, 0, false, false, true},
    {"cuckoo-chain", DEDUP_SEEN_CUCKOO, CAP / 4, 0, 0, false, 0, 2, false, false, true},
    {"cuckoo-by-memory", DEDUP_SEEN_CUCKOO, 0, 8192, 0, false, 0, 0, false, false, true},
    {"scalable", DEDUP_SEEN_SCALABLE, CAP / 8, 0, 0, false, 0, 2, false, false, true},
    {"window-sliding", DEDUP_SEEN_WINDOW, 0, 0, DEDUP_WINDOW_SLIDING, false, 1000000, 2, false, true, false},
    {"window-tumbling", DEDUP_SEEN_WINDOW, 0, 0, DEDUP_WINDOW_TUMBLING, false, 1000000, 2, false, true, false},
    {"window-last", DEDUP_SEEN_WINDOW, 0, 0, DEDUP_WINDOW_COUNT, false, 1000000, 2, false, true, false},
    {"window-sliding-approx", DEDUP_SEEN_WINDOW, CAP, 0, DEDUP_WINDOW_SLIDING, true, 1000000, 2, false, false, false},
    {"window-tumbling-approx", DEDUP_SEEN_WINDOW, CAP, 0, DEDUP_WINDOW_TUMBLING, true, 1000000, 2, false, false, false},
    {"window-last-approx", DEDUP_SEEN_WINDOW, CAP, 0, DEDUP_WINDOW_COUNT, true, 1000000, 2, false, false, false},
};
#define NCFG (sizeof cfgs / sizeof cfgs[0])

static uint64_t run_seed;

static void spec_of(const cfg *c, dedup_seen_spec *sp)
{
    dedup_seen_spec_init(sp);
    sp->kind = c->kind;
    sp->items = c->items;
    sp->memory = c->memory;
    sp->window_type = c->window_type;
    sp->approximate = c->approximate;
    sp->duration = c->duration;
    sp->expansion = c->expansion;
    sp->range_lo = 0;
    sp->range_hi = 1u << 20;
    sp->seed = 12345;
}

/* A batch over key ids: key bytes "key:<id>", its digest, the id as integer,
 * event time 0 (all inside one window). */
typedef struct kb {
    size_t n;
    unsigned char buf[512][24];
    const unsigned char *keys[512];
    size_t lens[512];
    dedup_digest d[512];
    uint64_t ints[512];
    int64_t times[512];
    dedup_batch b;
} kb;

static void kb_fill(kb *k, const uint64_t *ids, size_t n, uint64_t seed)
{
    assert_true(n <= 512);
    k->n = n;
    for (size_t i = 0; i < n; i++) {
        int l = snprintf((char *)k->buf[i], sizeof k->buf[i], "key:%llu", (unsigned long long)ids[i]);
        k->keys[i] = k->buf[i];
        k->lens[i] = (size_t)l;
        k->d[i] = dedup_hash(k->buf[i], (size_t)l, seed);
        k->ints[i] = ids[i] % (1u << 20);
        k->times[i] = 0;
    }
    k->b = (dedup_batch){.n = n, .digests = k->d, .keys = k->keys, .lens = k->lens,
                         .times = k->times, .ints = k->ints, .records = k->keys, .rlens = k->lens};
}

static dedup_seen *make(const cfg *c, const dedup_allocator *a)
{
    dedup_seen_spec sp;
    spec_of(c, &sp);
    dedup_seen *s = NULL;
    dedup_status st = dedup_seen_create(&sp, a, &s);
    if (st)
        fprintf(stderr, "%s: create: %s\n", c->name, dedup_strerror(st));
    assert_int_equal(st, DEDUP_OK);
    assert_int_equal(dedup_seen_kind_of(s), c->kind);
    return s;
}

/* Decides ids [from, from+n) in batches of 256; returns how many were NEW. */
static uint64_t decide_range(dedup_seen *s, uint64_t from, uint64_t n, uint64_t id_mul)
{
    static kb k;
    uint64_t ids[256], fresh = 0;
    dedup_verdict v[256];
    for (uint64_t off = 0; off < n; off += 256) {
        size_t c = n - off < 256 ? (size_t)(n - off) : 256;
        for (size_t i = 0; i < c; i++)
            ids[i] = (from + off + i) * id_mul;
        kb_fill(&k, ids, c, dedup_seen_seed(s));
        size_t done = 0;
        assert_int_equal(dedup_seen_decide(s, &k.b, v, &done), DEDUP_OK);
        assert_int_equal(done, c);
        for (size_t i = 0; i < c; i++)
            fresh += v[i] == DEDUP_NEW;
    }
    return fresh;
}

static unsigned char *save_blob(const dedup_seen *s, size_t *len)
{
    uint64_t size = 0;
    dedup_sink cs = dedup_count_sink_init(&size);
    assert_int_equal(dedup_seen_save(s, &cs), DEDUP_OK);
    unsigned char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, (size_t)size);
    assert_int_equal(dedup_seen_save(s, &sink), DEDUP_OK);
    assert_int_equal(ms.len, size);
    *len = (size_t)size;
    return buf;
}

static dedup_status load_blob(const unsigned char *buf, size_t len, const dedup_allocator *a,
                              dedup_seen **out)
{
    dedup_mem_source m;
    return dedup_seen_load(dedup_mem_source_init(&m, buf, len), a, out);
}

/* ---- no false negative; answers after a round trip ------------------------------------ */

static void test_no_false_negative_and_round_trip(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        dedup_seen *s = make(c, NULL);
        uint64_t n = CAP;
        uint64_t fresh = decide_range(s, 0, n, 7);
        if (c->model || c->kind == DEDUP_SEEN_CUCKOO)
            assert_true(fresh >= n - n / 50);
        /* every key decided again: never NEW */
        static kb k;
        uint64_t ids[256];
        dedup_verdict v[256], w[256];
        for (uint64_t off = 0; off < n; off += 256) {
            size_t cnt = n - off < 256 ? (size_t)(n - off) : 256;
            for (size_t i = 0; i < cnt; i++)
                ids[i] = (off + i) * 7;
            kb_fill(&k, ids, cnt, dedup_seen_seed(s));
            dedup_status st = dedup_seen_query(s, &k.b, v); /* windows: at time 0 */
            assert_int_equal(st, DEDUP_OK);
            for (size_t i = 0; i < cnt; i++)
                if (v[i] == DEDUP_NEW)
                    fail_msg("%s: key %llu recorded but answered NEW", c->name,
                             (unsigned long long)ids[i]);
        }
        /* save -> load -> same answers on known and fresh keys */
        size_t len;
        unsigned char *blob = save_blob(s, &len);
        dedup_seen *t = NULL;
        assert_int_equal(load_blob(blob, len, NULL, &t), DEDUP_OK);
        dedup_seen_kind want = c->kind;
        assert_int_equal(dedup_seen_kind_of(t), want);
        if (dedup_seen_seed(t) != dedup_seen_seed(s))
            fail_msg("%s: seed %llu after load, %llu before", c->name,
                     (unsigned long long)dedup_seen_seed(t), (unsigned long long)dedup_seen_seed(s));
        dedup_seen_info a, b;
        dedup_seen_get_info(s, &a);
        dedup_seen_get_info(t, &b);
        assert_int_equal(a.file_type, b.file_type);
        assert_true(a.distinct == b.distinct);
        tu_rng r = {run_seed ^ ci};
        for (int round = 0; round < 8; round++) {
            for (size_t i = 0; i < 256; i++)
                ids[i] = i % 2 ? tu_below(&r, n) * 7 : tu_next(&r) | 1;
            kb_fill(&k, ids, 256, dedup_seen_seed(s));
            if (c->kind == DEDUP_SEEN_WINDOW) { /* decide on both: the same verdicts */
                assert_int_equal(dedup_seen_decide(s, &k.b, v, NULL), DEDUP_OK);
                assert_int_equal(dedup_seen_decide(t, &k.b, w, NULL), DEDUP_OK);
            } else {
                assert_int_equal(dedup_seen_query(s, &k.b, v), DEDUP_OK);
                assert_int_equal(dedup_seen_query(t, &k.b, w), DEDUP_OK);
            }
            assert_memory_equal(v, w, sizeof v);
        }
        /* a byte after the checksum is refused */
        blob[len] = 0;
        dedup_seen *u = NULL;
        assert_int_equal(load_blob(blob, len + 1, NULL, &u), DEDUP_ERR_TRAILING);
        assert_null(u);
        free(blob);
        dedup_seen_free(t);
        dedup_seen_free(s);
    }
    dedup_seen_free(NULL);
}

/* ---- the rate of false positives ------------------------------------------------------- */

static void test_fpr_within_model(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        if (!c->fpr_two && !c->approximate)
            continue;
        dedup_seen *s = make(c, NULL);
        dedup_seen_info in;
        dedup_seen_get_info(s, &in);
        uint64_t fill = in.capacity ? in.capacity : CAP;
        if (c->kind == DEDUP_SEEN_SCALABLE)
            fill = 20 * c->items; /* a few links */
        decide_range(s, 0, fill, 3);
        dedup_seen_get_info(s, &in);
        assert_true(in.probabilistic);
        double p = in.fpr_bound;
        assert_true(p > 0 && p < 0.2);
        /* fresh keys (odd ids never used above: ids there are multiples of 3
         * shifted far away) */
        uint64_t trials = (uint64_t)(400.0 / p) + 20000, fp = 0;
        static kb k;
        uint64_t ids[256];
        dedup_verdict v[256];
        uint64_t base = UINT64_C(1) << 40;
        for (uint64_t off = 0; off < trials; off += 256) {
            size_t cnt = trials - off < 256 ? (size_t)(trials - off) : 256;
            for (size_t i = 0; i < cnt; i++)
                ids[i] = base + off + i;
            kb_fill(&k, ids, cnt, dedup_seen_seed(s));
            if (c->kind == DEDUP_SEEN_WINDOW) {
                assert_int_equal(dedup_seen_decide(s, &k.b, v, NULL), DEDUP_OK);
            } else {
                assert_int_equal(dedup_seen_query(s, &k.b, v), DEDUP_OK);
            }
            for (size_t i = 0; i < cnt; i++)
                fp += v[i] != DEDUP_NEW;
        }
        uint64_t hi = tu_binomial_upper(trials, p);
        uint64_t lo = tu_binomial_lower(trials, p);
        fprintf(stderr, "%s: %llu false positives in %llu fresh keys, model %.5g (bounds %llu..%llu)\n",
                c->name, (unsigned long long)fp, (unsigned long long)trials, p,
                (unsigned long long)(c->fpr_two ? lo : 0), (unsigned long long)hi);
        assert_true(fp <= hi);
        if (c->fpr_two)
            assert_true(fp >= lo);
        dedup_seen_free(s);
    }
}

/* ---- every truncation and every byte change refused ------------------------------------ */

static void test_corrupt_files_refused(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        cfg small = *c;
        if (small.items)
            small.items = 64;
        if (small.memory)
            small.memory = 512;
        dedup_seen_spec sp;
        spec_of(&small, &sp);
        sp.range_hi = 4095;
        dedup_seen *s;
        assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
        decide_range(s, 0, 50, 5);
        size_t len;
        unsigned char *blob = save_blob(s, &len);
        dedup_seen *t = NULL;
        assert_int_equal(load_blob(blob, len, NULL, &t), DEDUP_OK);
        dedup_seen_free(t);
        for (size_t cut = 0; cut < len; cut++) {
            t = NULL;
            if (load_blob(blob, cut, NULL, &t) == DEDUP_OK)
                fail_msg("%s: a file cut to %zu of %zu bytes was accepted", c->name, cut, len);
            assert_null(t);
        }
        for (size_t i = 0; i < len; i++) {
            unsigned char old = blob[i];
            blob[i] ^= (unsigned char)(1u << (i % 8));
            t = NULL;
            if (load_blob(blob, len, NULL, &t) == DEDUP_OK)
                fail_msg("%s: a file with byte %zu changed was accepted", c->name, i);
            assert_null(t);
            blob[i] = old;
        }
        free(blob);
        dedup_seen_free(s);
    }
}

/* ---- allocation failures ---------------------------------------------------------------- */

static void test_allocation_failures(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        cfg small = *c;
        dedup_seen_spec sp;
        spec_of(&small, &sp);
        sp.range_hi = 4095;
        size_t blen = 0;
        unsigned char *blob = NULL;
        {
            dedup_seen *s;
            assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
            decide_range(s, 0, 3000, 1);
            blob = save_blob(s, &blen);
            dedup_seen_free(s);
        }
        bool finished = false;
        for (uint64_t n = 1; !finished && n < 100000; n++) {
            tu_failing_alloc fa;
            dedup_allocator a = tu_failing_allocator(&fa, n);
            dedup_seen *s = NULL;
            dedup_status st = dedup_seen_create(&sp, &a, &s);
            if (st == DEDUP_OK) {
                static kb k;
                uint64_t ids[256];
                dedup_verdict v[256];
                for (uint64_t off = 0; off < 3000 && st == DEDUP_OK; off += 250) {
                    for (size_t i = 0; i < 250; i++)
                        ids[i] = off + i;
                    kb_fill(&k, ids, 250, dedup_seen_seed(s));
                    size_t done = 0;
                    st = dedup_seen_decide(s, &k.b, v, &done);
                }
                if (st == DEDUP_OK) {
                    dedup_seen *t = NULL;
                    st = load_blob(blob, blen, &a, &t);
                    dedup_seen_free(t);
                }
            }
            if (st != DEDUP_OK && st != DEDUP_ERR_NOMEM)
                fail_msg("%s: allocation %llu failed: %s, not NOMEM", c->name,
                         (unsigned long long)n, dedup_strerror(st));
            dedup_seen_free(s);
            if (fa.live != 0)
                fail_msg("%s: %lld bytes leaked after allocation %llu failed", c->name,
                         (long long)fa.live, (unsigned long long)n);
            finished = st == DEDUP_OK && fa.calls < n;
        }
        assert_true(finished);
        free(blob);
    }
}

static int emit_nothing(void *ctx, const void *rec, size_t len, uint64_t count)
{
    (void)rec;
    (void)len;
    (void)count;
    ++*(uint64_t *)ctx;
    return 0;
}

/* EXACT_SPILL: the set, the held records and the engine all allocate. */
static void test_allocation_failures_spill(void **state)
{
    (void)state;
    bool finished = false;
    for (uint64_t n = 1; !finished && n < 100000; n++) {
        tu_failing_alloc fa;
        dedup_allocator a = tu_failing_allocator(&fa, n);
        uint64_t emitted = 0;
        dedup_seen_spec sp;
        dedup_seen_spec_init(&sp);
        sp.kind = DEDUP_SEEN_EXACT_SPILL;
        sp.memory = 256 << 10;
        sp.emit = emit_nothing;
        sp.emit_ctx = &emitted;
        dedup_seen *s = NULL;
        dedup_status st = dedup_seen_create(&sp, &a, &s);
        static kb k;
        uint64_t ids[256];
        dedup_verdict v[256];
        uint64_t news = 0;
        for (uint64_t off = 0; off < 12000 && st == DEDUP_OK; off += 200) {
            for (size_t i = 0; i < 200; i++)
                ids[i] = (off + i) % 9000;
            kb_fill(&k, ids, 200, dedup_seen_seed(s));
            size_t done = 0;
            st = dedup_seen_decide(s, &k.b, v, &done);
            for (size_t i = 0; i < done; i++)
                news += v[i] == DEDUP_NEW;
        }
        if (st == DEDUP_OK)
            st = dedup_seen_finish(s, NULL, NULL);
        if (st == DEDUP_OK)
            assert_true(news + emitted == 9000 && dedup_seen_spilled(s));
        if (st != DEDUP_OK && st != DEDUP_ERR_NOMEM)
            fail_msg("exact-spill: allocation %llu failed: %s, not NOMEM", (unsigned long long)n,
                     dedup_strerror(st));
        dedup_seen_free(s);
        if (fa.live != 0)
            fail_msg("exact-spill: %lld bytes leaked after allocation %llu failed",
                     (long long)fa.live, (unsigned long long)n);
        finished = st == DEDUP_OK && fa.calls < n;
    }
    assert_true(finished);
}

/* ---- delete ------------------------------------------------------------------------------ */

/* Loading alone, with the Nth allocation failing for every N: NOMEM (or
 * success once N passes what a load allocates), nothing leaked, and the
 * loaded set answers as the saved one.  Every allocation of a load goes
 * through the caller's hook, the loader's scratch included. */
static void test_allocation_failures_load(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        dedup_seen *orig = make(c, NULL);
        decide_range(orig, 0, 3000, 1);
        size_t blen = 0;
        unsigned char *blob = save_blob(orig, &blen);
        static kb k;
        uint64_t ids[256];
        for (size_t i = 0; i < 256; i++)
            ids[i] = i * 7;
        kb_fill(&k, ids, 256, dedup_seen_seed(orig));
        dedup_verdict want[256], got[256];
        bool can_query = dedup_seen_query(orig, &k.b, want) == DEDUP_OK;
        bool finished = false, failed_once = false;
        for (uint64_t n = 1; !finished && n < 100000; n++) {
            tu_failing_alloc fa;
            dedup_allocator a = tu_failing_allocator(&fa, n);
            dedup_seen *t = NULL;
            dedup_status st = load_blob(blob, blen, &a, &t);
            if (st != DEDUP_OK && st != DEDUP_ERR_NOMEM)
                fail_msg("%s: load with allocation %llu failing: %s, not NOMEM", c->name,
                         (unsigned long long)n, dedup_strerror(st));
            failed_once |= st == DEDUP_ERR_NOMEM;
            if (st == DEDUP_OK && can_query) {
                assert_int_equal(dedup_seen_query(t, &k.b, got), DEDUP_OK);
                for (size_t i = 0; i < 256; i++)
                    if ((got[i] == DEDUP_NEW) != (want[i] == DEDUP_NEW))
                        fail_msg("%s: key %zu answered differently after a load", c->name, i);
            }
            dedup_seen_free(t);
            if (fa.live != 0)
                fail_msg("%s: %lld bytes leaked after load allocation %llu failed", c->name,
                         (long long)fa.live, (unsigned long long)n);
            finished = st == DEDUP_OK && fa.calls < n;
        }
        assert_true(finished);
        assert_true(failed_once);
        free(blob);
        dedup_seen_free(orig);
    }
}

/* dedup_seen_add: the kinds that count (they can delete) hold a key added
 * twice until it is deleted twice; the others hold a set, where adding is
 * deciding. */
static void test_add(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        dedup_seen *s = make(c, NULL);
        static kb k;
        uint64_t ids[128];
        for (size_t i = 0; i < 128; i++)
            ids[i] = 1000 + i;
        kb_fill(&k, ids, 128, dedup_seen_seed(s));
        size_t done = 0;
        assert_int_equal(dedup_seen_add(s, &k.b, &done), DEDUP_OK);
        assert_int_equal(done, 128);
        assert_int_equal(dedup_seen_add(s, &k.b, &done), DEDUP_OK);
        dedup_seen_info in;
        dedup_seen_get_info(s, &in);
        dedup_verdict v[128];
        if (c->kind == DEDUP_SEEN_WINDOW) { /* no query: a decide says it */
            assert_int_equal(dedup_seen_decide(s, &k.b, v, &done), DEDUP_OK);
            for (size_t i = 0; i < 128; i++)
                assert_int_not_equal(v[i], DEDUP_NEW);
            dedup_seen_free(s);
            continue;
        }
        assert_int_equal(dedup_seen_query(s, &k.b, v), DEDUP_OK);
        for (size_t i = 0; i < 128; i++)
            assert_int_not_equal(v[i], DEDUP_NEW);
        if (in.can_delete && !in.probabilistic) { /* a set: one delete removes it */
            bool removed[128];
            assert_int_equal(dedup_seen_delete(s, &k.b, removed), DEDUP_OK);
            assert_int_equal(dedup_seen_query(s, &k.b, v), DEDUP_OK);
            for (size_t i = 0; i < 128; i++)
                assert_int_equal(v[i], DEDUP_NEW);
        } else if (in.can_delete) {
            bool removed[128];
            assert_int_equal(dedup_seen_delete(s, &k.b, removed), DEDUP_OK);
            assert_int_equal(dedup_seen_query(s, &k.b, v), DEDUP_OK);
            for (size_t i = 0; i < 128; i++)
                if (v[i] == DEDUP_NEW)
                    fail_msg("%s: key %zu added twice is gone after one delete", c->name, i);
            assert_int_equal(dedup_seen_delete(s, &k.b, removed), DEDUP_OK);
            for (size_t i = 0; i < 128; i++)
                assert_true(removed[i]);
            assert_int_equal(dedup_seen_query(s, &k.b, v), DEDUP_OK);
            size_t still = 0;
            for (size_t i = 0; i < 128; i++)
                still += v[i] != DEDUP_NEW;
            assert_true(still <= 8);
        }
        dedup_seen_free(s);
    }
}

/* dedup_seen_get_filter_info: every filter kind describes itself; the
 * others say UNSUPPORTED. */
static void test_filter_info(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        dedup_seen *s = make(c, NULL);
        decide_range(s, 0, 2000, 1);
        dedup_seen_filter_info fi;
        dedup_status st = dedup_seen_get_filter_info(s, &fi);
        bool filter = c->kind == DEDUP_SEEN_BLOOM || c->kind == DEDUP_SEEN_BLOCKED ||
                      c->kind == DEDUP_SEEN_COUNTING || c->kind == DEDUP_SEEN_CUCKOO ||
                      c->kind == DEDUP_SEEN_SCALABLE;
        dedup_seen_link_info li;
        if (!filter) {
            assert_int_equal(st, DEDUP_ERR_UNSUPPORTED);
            assert_int_equal(dedup_seen_get_link_info(s, 0, &li), DEDUP_ERR_UNSUPPORTED);
            dedup_seen_free(s);
            continue;
        }
        assert_int_equal(st, DEDUP_OK);
        dedup_seen_info in;
        dedup_seen_get_info(s, &in);
        assert_int_equal(fi.kind, c->kind);
        assert_int_equal(fi.file_type, in.file_type);
        assert_true(fi.seed == dedup_seen_seed(s));
        assert_true(fi.structure_memory > 0 && fi.structure_memory <= in.memory);
        assert_true(fi.fpr_current > 0 && fi.fpr_current < 1);
        if (c->kind == DEDUP_SEEN_CUCKOO || c->kind == DEDUP_SEEN_SCALABLE) {
            assert_true(fi.links >= 1);
            assert_true(fi.items > 0);
            uint64_t items = 0;
            for (uint32_t l = 0; l < fi.links; l++) {
                assert_int_equal(dedup_seen_get_link_info(s, l, &li), DEDUP_OK);
                items += li.items;
            }
            if (c->kind == DEDUP_SEEN_CUCKOO)
                assert_true(items == fi.items);
            assert_int_equal(dedup_seen_get_link_info(s, fi.links, &li), DEDUP_ERR_RANGE);
        } else {
            assert_true(fi.bits > 0 && fi.hashes > 0 && fi.bits_set > 0);
            assert_true(fi.fill > 0 && fi.fill < 1);
            assert_int_equal(dedup_seen_get_link_info(s, 0, &li), DEDUP_ERR_UNSUPPORTED);
        }
        dedup_seen_free(s);
    }
}

static void test_delete(void **state)
{
    (void)state;
    for (size_t ci = 0; ci < NCFG; ci++) {
        const cfg *c = &cfgs[ci];
        dedup_seen *s = make(c, NULL);
        decide_range(s, 0, 500, 1);
        dedup_seen_info in;
        dedup_seen_get_info(s, &in);
        static kb k;
        uint64_t ids[256];
        bool removed[256];
        for (size_t i = 0; i < 256; i++)
            ids[i] = i < 128 ? i : 700000 + i; /* half held, half never added */
        kb_fill(&k, ids, 256, dedup_seen_seed(s));
        dedup_status st = dedup_seen_delete(s, &k.b, removed);
        if (!in.can_delete) {
            assert_int_equal(st, DEDUP_ERR_UNSUPPORTED);
            dedup_seen_free(s);
            continue;
        }
        assert_int_equal(st, DEDUP_OK);
        size_t wrong = 0;
        for (size_t i = 0; i < 256; i++) {
            if (i < 128)
                assert_true(removed[i]);
            else
                wrong += removed[i];
        }
        assert_true(wrong <= (in.probabilistic ? 8 : 0));
        dedup_verdict v[256];
        assert_int_equal(dedup_seen_query(s, &k.b, v), DEDUP_OK);
        size_t still = 0;
        for (size_t i = 0; i < 128; i++)
            still += v[i] != DEDUP_NEW;
        assert_true(still <= (in.probabilistic ? 8 : 0));
        dedup_seen_free(s);
    }
}

/* ---- exact kinds against a naive model ------------------------------------------------------ */

typedef struct out_log {
    unsigned char *buf;
    size_t len, cap;
    uint64_t records;
} out_log;

static void log_rec(out_log *o, const void *rec, size_t len, uint64_t count)
{
    size_t need = o->len + len + 24;
    if (need > o->cap) {
        o->cap = need * 2;
        o->buf = realloc(o->buf, o->cap);
        assert_non_null(o->buf);
    }
    o->len += (size_t)snprintf((char *)o->buf + o->len, 24, "%llu ", (unsigned long long)count);
    memcpy(o->buf + o->len, rec, len);
    o->len += len;
    o->buf[o->len++] = '\n';
    o->records++;
}

static int emit_rec(void *ctx, const void *rec, size_t len, uint64_t count)
{
    (void)count; /* the records and their order are compared, not the counts */
    log_rec(ctx, rec, len, 0);
    return 0;
}

static void test_exact_against_model(void **state)
{
    (void)state;
    enum { UNIVERSE = 30000, OPS = 120000 };
    for (size_t ci = 0; ci <= NCFG; ci++) {
        /* the table's exact kinds, then EXACT_SPILL with a budget it outgrows */
        bool spill = ci == NCFG;
        const cfg *c = spill ? &cfgs[0] : &cfgs[ci];
        if (!spill && (!c->model || c->kind == DEDUP_SEEN_WINDOW))
            continue;
        for (int counts = 0; counts < 2; counts++) {
            if (counts && !(c->kind == DEDUP_SEEN_EXACT || c->kind == DEDUP_SEEN_FINGERPRINT))
                continue;
            dedup_seen_spec sp;
            spec_of(c, &sp);
            sp.counts = counts;
            out_log log = {0};
            if (spill) {
                sp.kind = DEDUP_SEEN_EXACT_SPILL;
                sp.memory = 1u << 20;
                sp.emit = emit_rec;
                sp.emit_ctx = &log;
            }
            dedup_seen *s;
            assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
            uint64_t *count = calloc(UNIVERSE, sizeof *count);
            unsigned char *inset = calloc(UNIVERSE, 1);
            bool deferred = false;
            tu_rng r = {run_seed + ci * 2 + (uint64_t)counts};
            static kb k;
            uint64_t ids[256];
            dedup_verdict v[256];
            out_log model = {0};
            for (int op = 0; op < OPS; op += 256) {
                for (size_t i = 0; i < 256; i++)
                    ids[i] = tu_below(&r, UNIVERSE);
                kb_fill(&k, ids, 256, dedup_seen_seed(s));
                assert_int_equal(dedup_seen_decide(s, &k.b, v, NULL), DEDUP_OK);
                for (size_t i = 0; i < 256; i++) {
                    bool first = count[ids[i]]++ == 0;
                    if (first)
                        log_rec(&model, k.keys[i], k.lens[i], 0);
                    if (!spill) {
                        assert_int_equal(v[i], first ? DEDUP_NEW : DEDUP_DUPLICATE);
                        continue;
                    }
                    /* the set answers for what it holds, the engine for the rest */
                    if (v[i] == DEDUP_NEW) {
                        assert_true(first && !deferred);
                        inset[ids[i]] = 1;
                        log_rec(&log, k.keys[i], k.lens[i], 0);
                    } else if (v[i] == DEDUP_DUPLICATE) {
                        assert_true(inset[ids[i]]);
                    } else {
                        assert_int_equal(v[i], DEDUP_DEFERRED);
                        assert_false(inset[ids[i]]);
                        deferred = true;
                    }
                }
            }
            uint64_t distinct = 0;
            bool exact = false;
            assert_true(dedup_seen_distinct(s, &distinct, &exact));
            assert_true(exact);
            if (spill) {
                assert_true(dedup_seen_spilled(s));
                assert_non_null(dedup_seen_spill_engine(s));
                assert_int_equal(dedup_seen_save(s, &(dedup_sink){0}), DEDUP_ERR_UNSUPPORTED);
                if (!counts) {
                    assert_int_equal(dedup_seen_finish(s, NULL, NULL), DEDUP_OK);
                    assert_int_equal(log.records, model.records);
                    assert_int_equal(log.len, model.len);
                    assert_memory_equal(log.buf, model.buf, log.len);
                } else {
                    /* the set's keys counted in the set, the rest by the engine */
                    out_log fin = {0};
                    assert_int_equal(dedup_seen_finish(s, emit_rec, &fin), DEDUP_OK);
                    assert_int_equal(fin.records + distinct, model.records);
                    free(fin.buf);
                }
            } else {
                uint64_t held = 0;
                for (size_t i = 0; i < UNIVERSE; i++)
                    held += count[i] != 0;
                assert_true(distinct == held);
            }
            if (counts) {
                for (uint64_t id = 0; id < 200; id++) {
                    kb_fill(&k, &id, 1, dedup_seen_seed(s));
                    uint64_t got = dedup_seen_count_of(s, k.keys[0], k.lens[0], k.d[0]);
                    if (!spill || got)
                        assert_true(got == count[id]);
                }
            }
            free(model.buf);
            free(log.buf);
            free(count);
            free(inset);
            dedup_seen_free(s);
        }
    }
}

/* ---- on_full, distinct, sizing, names, wrap ----------------------------------------------- */

static void test_on_full(void **state)
{
    (void)state;
    dedup_seen_kind kinds[] = {DEDUP_SEEN_BLOOM, DEDUP_SEEN_BLOCKED, DEDUP_SEEN_COUNTING};
    for (size_t ki = 0; ki < 3; ki++) {
        dedup_seen_spec sp;
        dedup_seen_spec_init(&sp);
        sp.kind = kinds[ki];
        sp.items = 1000;
        sp.fpr = 0.01;
        /* FAIL: stops before the first key past capacity */
        sp.on_full = DEDUP_ON_FULL_FAIL;
        dedup_seen *s;
        assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
        static kb k;
        uint64_t ids[256];
        dedup_verdict v[256];
        dedup_status st = DEDUP_OK;
        uint64_t fresh = 0;
        for (uint64_t off = 0; off < 4000 && !st; off += 256) {
            for (size_t i = 0; i < 256; i++)
                ids[i] = off + i;
            kb_fill(&k, ids, 256, dedup_seen_seed(s));
            size_t done = 0;
            st = dedup_seen_decide(s, &k.b, v, &done);
            for (size_t i = 0; i < done; i++)
                fresh += v[i] == DEDUP_NEW;
        }
        assert_int_equal(st, DEDUP_ERR_FULL);
        assert_true(fresh == 1000);
        dedup_seen_info in;
        dedup_seen_get_info(s, &in);
        assert_false(in.over_capacity);
        dedup_seen_free(s);
        /* WARN: goes on, says so, and the bound rises */
        sp.on_full = DEDUP_ON_FULL_WARN;
        assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
        decide_range(s, 0, 4000, 1);
        dedup_seen_get_info(s, &in);
        assert_true(in.over_capacity);
        assert_true(in.fpr_bound > 0.05);
        dedup_seen_free(s);
        /* GROW: a chain within fpr (not for counting filters) */
        sp.on_full = DEDUP_ON_FULL_GROW;
        st = dedup_seen_create(&sp, NULL, &s);
        if (kinds[ki] == DEDUP_SEEN_COUNTING) {
            assert_int_equal(st, DEDUP_ERR_INVALID_ARG);
            continue;
        }
        assert_int_equal(st, DEDUP_OK);
        assert_int_equal(dedup_seen_kind_of(s), DEDUP_SEEN_SCALABLE);
        decide_range(s, 0, 20000, 1);
        dedup_seen_get_info(s, &in);
        assert_false(in.over_capacity);
        assert_true(in.fpr_bound <= 0.01);
        dedup_seen_free(s);
    }
}

static void test_distinct_unknown_when_saturated(void **state)
{
    (void)state;
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_BLOOM;
    sp.memory = 64; /* 512 bits */
    dedup_seen *s;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
    decide_range(s, 0, 100000, 1);
    uint64_t n = 1;
    bool exact = true;
    assert_false(dedup_seen_distinct(s, &n, &exact));
    assert_false(exact);
    dedup_seen_free(s);
}

static void test_sizing_names_and_errors(void **state)
{
    (void)state;
    for (int k = 1; k <= DEDUP_SEEN_OTHER; k++)
        assert_int_equal(dedup_seen_kind_from_name(dedup_seen_kind_name(k)), k);
    assert_string_equal(dedup_seen_kind_name(0), "unknown");
    assert_int_equal(dedup_seen_kind_from_name("nope"), 0);
    assert_int_equal(dedup_seen_kind_of_file_type(DEDUP_TYPE_CUCKOO_CHAIN), DEDUP_SEEN_CUCKOO);
    assert_int_equal(dedup_seen_kind_of_file_type(DEDUP_TYPE_ROTATING_BLOOM), 0);
    dedup_seen_kind fixed[] = {DEDUP_SEEN_BLOOM, DEDUP_SEEN_BLOCKED, DEDUP_SEEN_COUNTING,
                               DEDUP_SEEN_CUCKOO};
    for (size_t i = 0; i < 4; i++) {
        uint64_t bytes = dedup_seen_bytes_for(fixed[i], 1000000, 0.01);
        assert_true(bytes > 0);
        uint64_t cap = dedup_seen_capacity_for(fixed[i], bytes, 0.01);
        /* the two directions agree within a few percent */
        assert_true(cap >= 970000 && cap <= 1030000);
        /* and create agrees with bytes_for */
        dedup_seen_spec sp;
        dedup_seen_spec_init(&sp);
        sp.kind = fixed[i];
        sp.items = 1000000;
        sp.expansion = 0;
        dedup_seen *s;
        assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
        dedup_seen_info in;
        dedup_seen_get_info(s, &in);
        assert_true((in.bits + 7) / 8 >= bytes - 64 && (in.bits + 7) / 8 <= bytes + 64);
        dedup_seen_free(s);
        sp.memory = bytes / 2; /* too small for the items */
        assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_ERR_LIMIT);
    }
    assert_int_equal(dedup_seen_bytes_for(DEDUP_SEEN_EXACT, 1000, 0.01), 0);
    /* the digest and integer sets made for n keys up front: exactly what
     * they report once made (and `dedup plan` shows) */
    uint64_t ns[] = {1, 1000, 123457, 2000000};
    dedup_seen_kind sized[] = {DEDUP_SEEN_FINGERPRINT, DEDUP_SEEN_U64};
    for (size_t k = 0; k < 2; k++)
        for (size_t j = 0; j < 4; j++) {
            dedup_seen_spec ss;
            dedup_seen_spec_init(&ss);
            ss.kind = sized[k];
            ss.items = ns[j];
            dedup_seen *z;
            assert_int_equal(dedup_seen_create(&ss, NULL, &z), DEDUP_OK);
            dedup_seen_info zi;
            dedup_seen_get_info(z, &zi);
            uint64_t want = dedup_seen_bytes_for(sized[k], ns[j], 0);
            assert_true(want > 0);
            /* the seen-set's own few bytes around the set */
            assert_true(zi.memory >= want && zi.memory - want < 256);
            dedup_seen_free(z);
        }
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    dedup_seen *s = (dedup_seen *)1;
    sp.kind = DEDUP_SEEN_BLOOM; /* no size */
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_ERR_INVALID_ARG);
    assert_null(s);
    sp.kind = DEDUP_SEEN_REDIS;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_ERR_INVALID_ARG);
    sp.kind = DEDUP_SEEN_EXACT;
    sp.fpr = 0.7;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_ERR_INVALID_ARG);
    /* bitmap: outside the range is RANGE, and *done says where */
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_BITMAP;
    sp.range_lo = 100;
    sp.range_hi = 199;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
    uint64_t ints[3] = {150, 199, 200};
    dedup_verdict v[3];
    dedup_batch b = {.n = 3, .ints = ints};
    size_t done = 9;
    assert_int_equal(dedup_seen_decide(s, &b, v, &done), DEDUP_ERR_RANGE);
    assert_int_equal(done, 2);
    assert_int_equal(dedup_seen_advance(s, 5), DEDUP_ERR_UNSUPPORTED);
    /* its file keeps the range: the loaded copy covers 100..199 again */
    static unsigned char file[256];
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, file, sizeof file);
    assert_int_equal(dedup_seen_save(s, &sink), DEDUP_OK);
    dedup_seen_free(s);
    dedup_mem_source src;
    assert_int_equal(dedup_seen_load(dedup_mem_source_init(&src, file, ms.len), NULL, &s), DEDUP_OK);
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    assert_int_equal(in.range_lo, 100);
    assert_int_equal(in.range_hi, 199);
    uint64_t again[3] = {150, 199, 100};
    b.ints = again;
    assert_int_equal(dedup_seen_query(s, &b, v), DEDUP_OK);
    assert_int_equal(v[0], DEDUP_DUPLICATE);
    assert_int_equal(v[1], DEDUP_DUPLICATE);
    assert_int_equal(v[2], DEDUP_NEW);
    b.ints = ints;
    assert_int_equal(dedup_seen_decide(s, &b, v, &done), DEDUP_ERR_RANGE);
    assert_int_equal(done, 2);
    dedup_seen_free(s);
}

/* An outside implementation: every call reaches it through the table. */
typedef struct toy {
    int decides, frees;
} toy;
static dedup_status toy_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    (void)done;
    ((toy *)impl)->decides++;
    for (size_t i = 0; i < b->n; i++)
        out[i] = DEDUP_UNCERTAIN;
    return DEDUP_OK;
}
static void toy_free(void *impl) { ((toy *)impl)->frees++; }

static void test_wrap(void **state)
{
    (void)state;
    static const dedup_seen_ops ops = {.kind = DEDUP_SEEN_OTHER, .decide = toy_decide,
                                       .free = toy_free};
    toy t = {0, 0};
    dedup_seen *s;
    assert_int_equal(dedup_seen_wrap(&ops, &t, NULL, &s), DEDUP_OK);
    assert_int_equal(dedup_seen_kind_of(s), DEDUP_SEEN_OTHER);
    dedup_digest d = {1, 2};
    dedup_verdict v;
    dedup_batch b = {.n = 1, .digests = &d};
    assert_int_equal(dedup_seen_decide(s, &b, &v, NULL), DEDUP_OK);
    assert_int_equal(v, DEDUP_UNCERTAIN);
    assert_int_equal(dedup_seen_query(s, &b, &v), DEDUP_ERR_UNSUPPORTED);
    assert_int_equal(dedup_seen_delete(s, &b, NULL), DEDUP_ERR_UNSUPPORTED);
    assert_int_equal(dedup_seen_commit(s, &b), DEDUP_OK);
    assert_int_equal(dedup_seen_finish(s, NULL, NULL), DEDUP_OK);
    assert_int_equal(dedup_seen_save_file(s, "x"), DEDUP_ERR_UNSUPPORTED);
    assert_null(dedup_seen_impl(s));
    dedup_seen_free(s);
    assert_int_equal(t.decides, 1);
    assert_int_equal(t.frees, 1);
}

/* The sizing in spec.size's unit agrees with itself: a size planned for n
 * keys at p holds them at p or better, and the size a capacity was read
 * from holds that capacity; cuckoo fingerprints reach their rate. */
static void test_sizing_in_size_units(void **state)
{
    (void)state;
    const dedup_seen_kind kinds[] = {DEDUP_SEEN_BLOOM, DEDUP_SEEN_BLOCKED, DEDUP_SEEN_COUNTING};
    const double ps[] = {0.3, 0.01, 1e-4};
    for (size_t a = 0; a < 3; a++) {
        for (size_t b = 0; b < 3; b++) {
            uint64_t n = 100000;
            uint64_t m = dedup_seen_size_for(kinds[a], n, ps[b]);
            assert_true(m > 0);
            uint32_t k = dedup_seen_hashes_for(kinds[a], n, m);
            assert_true(k >= 1);
            double f = dedup_seen_fpr_for(kinds[a], n, m, 0);
            assert_true(f == dedup_seen_fpr_for(kinds[a], n, m, k));
            assert_true(f <= ps[b] * 1.02);
            uint64_t cap = dedup_seen_capacity_for_size(kinds[a], m, ps[b]);
            assert_true(cap >= n * 99 / 100);
            assert_true(dedup_seen_size_for(kinds[a], cap, ps[b]) <= m + 512);
        }
    }
    assert_int_equal(dedup_seen_size_for(DEDUP_SEEN_EXACT, 1000, 0.01), 0);
    assert_int_equal(dedup_seen_capacity_for_size(DEDUP_SEEN_CUCKOO, 1 << 20, 0.01), 0);
    assert_true(dedup_seen_fpr_for(DEDUP_SEEN_WINDOW, 10, 1000, 0) == 0.0);
    for (uint32_t bs = 2; bs <= 8; bs *= 2) {
        uint32_t f = dedup_seen_fingerprint_bits_for(0.01, bs);
        assert_true(f >= 1 && f <= 32);
        assert_true(dedup_seen_fingerprint_fpr(f, bs, 1.0) <= 0.01);
    }
    assert_int_equal(dedup_seen_fingerprint_bits_for(1e-12, 4), 0);
}

int main(void)
{
    run_seed = tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_false_negative_and_round_trip),
        cmocka_unit_test(test_fpr_within_model),
        cmocka_unit_test(test_corrupt_files_refused),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_allocation_failures_spill),
        cmocka_unit_test(test_allocation_failures_load),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_filter_info),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_exact_against_model),
        cmocka_unit_test(test_on_full),
        cmocka_unit_test(test_distinct_unknown_when_saturated),
        cmocka_unit_test(test_sizing_names_and_errors),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_sizing_in_size_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
