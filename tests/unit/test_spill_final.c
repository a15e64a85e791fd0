/*
 * test_spill_final.c - EXACT_SPILL (dedup/seen.h) finishing right after the
 * call that froze it: the records that call deferred are still held aside
 * (they reach the engine only at the next decide() or at finish()), so
 * finish() alone must hand them to the engine.  Every run's whole output
 * (the records answered NEW, then those the engine emits) is compared with
 * the model (the first occurrences, in order; with counts, each distinct
 * key's count).  The freeze is placed in the last batch at many offsets:
 * first key of the batch, last key, middle, and a last batch of one key.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/seen.h"

enum { MAXB = 4096, UNIVERSE = 200000 };

typedef struct out_log {
    unsigned char *buf;
    size_t len, cap, records;
    uint64_t *counts; /* per id, with counts */
} out_log;

static uint64_t id_of(const void *rec, size_t len)
{
    char tmp[32];
    assert_true(len > 4 && len < sizeof tmp);
    memcpy(tmp, rec, len);
    tmp[len] = 0;
    return strtoull(tmp + 4, NULL, 10);
}

static void log_rec(out_log *l, const void *rec, size_t len)
{
    if (l->len + len + 1 > l->cap) {
        l->cap = (l->len + len + 1) * 2;
        l->buf = realloc(l->buf, l->cap);
        assert_non_null(l->buf);
    }
    memcpy(l->buf + l->len, rec, len);
    l->buf[l->len + len] = '\n';
    l->len += len + 1;
    l->records++;
}

static int emit_rec(void *ctx, const void *rec, size_t len, uint64_t count)
{
    out_log *l = ctx;
    log_rec(l, rec, len);
    if (l->counts)
        l->counts[id_of(rec, len)] += count;
    return 0;
}

typedef struct kb {
    unsigned char buf[MAXB][24];
    const unsigned char *keys[MAXB];
    size_t lens[MAXB];
    dedup_digest d[MAXB];
    dedup_batch b;
} kb;

static void kb_fill(kb *k, const uint64_t *ids, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        int l = snprintf((char *)k->buf[i], sizeof k->buf[i], "key:%llu", (unsigned long long)ids[i]);
        k->keys[i] = k->buf[i];
        k->lens[i] = (size_t)l;
        k->d[i] = dedup_hash(k->buf[i], (size_t)l, seed);
    }
    k->b = (dedup_batch){.n = n, .digests = k->d, .keys = k->keys, .lens = k->lens,
                         .records = k->keys, .rlens = k->lens};
}

/* Batches of 'bsize' random keys until the set freezes; the freezing batch
 * is cut so the freeze falls at 'where' of it (0 = first key, 1 = last
 * key, 2 = middle, 3 = a batch of that one key), then finish(). */
static void run(tu_rng *r, size_t bsize, int where, bool counts)
{
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_EXACT_SPILL;
    sp.memory = 1u << 20;
    sp.counts = counts;
    out_log log = {0};
    log.counts = counts ? calloc(UNIVERSE, sizeof *log.counts) : NULL;
    sp.emit = emit_rec;
    sp.emit_ctx = &log;
    dedup_seen *s;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
    uint64_t seed = dedup_seen_seed(s);

    /* A probe on a copy finds where the set freezes: the same keys into an
     * identical set, one at a time. */
    dedup_seen *probe;
    assert_int_equal(dedup_seen_create(&sp, NULL, &probe), DEDUP_OK);
    uint64_t *ids = malloc(UNIVERSE * 4 * sizeof *ids);
    size_t nids = 0, freeze_at = 0;
    static kb k;
    dedup_verdict v[MAXB];
    while (!dedup_seen_spilled(probe)) {
        assert_true(nids < UNIVERSE * 4);
        ids[nids] = tu_below(r, UNIVERSE);
        kb_fill(&k, &ids[nids], 1, seed);
        assert_int_equal(dedup_seen_decide(probe, &k.b, v, NULL), DEDUP_OK);
        if (v[0] == DEDUP_DEFERRED)
            freeze_at = nids;
        nids++;
    }
    dedup_seen_free(probe);
    free(log.buf);
    log.buf = NULL;
    log.len = log.cap = log.records = 0;
    if (counts)
        memset(log.counts, 0, UNIVERSE * sizeof *log.counts);
    /* the last batch: [start, end) with the freeze (freeze_at) in it */
    size_t start, end;
    switch (where) {
    case 0: start = freeze_at; end = freeze_at + bsize; break;
    case 1: start = freeze_at + 1 > bsize ? freeze_at + 1 - bsize : 0; end = freeze_at + 1; break;
    case 2: start = freeze_at > bsize / 2 ? freeze_at - bsize / 2 : 0; end = start + bsize; break;
    default: start = freeze_at; end = freeze_at + 1; break;
    }
    while (nids < end)
        ids[nids++] = tu_below(r, UNIVERSE);
    uint64_t *model_count = calloc(UNIVERSE, sizeof *model_count);
    out_log model = {0};
    for (size_t i = 0; i < end; i++)
        if (model_count[ids[i]]++ == 0) {
            char key[24];
            int kl = snprintf(key, sizeof key, "key:%llu", (unsigned long long)ids[i]);
            log_rec(&model, key, (size_t)kl);
        }
    /* batches of bsize before 'start', then [start, end): the freezing one, last */
    for (size_t off = 0; off < end;) {
        size_t n = off < start ? (start - off < bsize ? start - off : bsize) : end - off;
        kb_fill(&k, ids + off, n, seed);
        assert_int_equal(dedup_seen_decide(s, &k.b, v, NULL), DEDUP_OK);
        for (size_t i = 0; i < n; i++)
            if (v[i] == DEDUP_NEW)
                log_rec(&log, k.keys[i], k.lens[i]);
        if (off < start)
            assert_false(dedup_seen_spilled(s));
        off += n;
    }
    assert_true(dedup_seen_spilled(s));
    if (!counts) {
        assert_int_equal(dedup_seen_finish(s, NULL, NULL), DEDUP_OK);
        if (log.records != model.records || log.len != model.len ||
            memcmp(log.buf, model.buf, log.len) != 0)
            fail_msg("bsize %zu where %d: output %zu records, the model %zu", bsize, where,
                     log.records, model.records);
    } else {
        /* the set's keys are counted in the set, the rest by the engine */
        out_log fin = {0};
        fin.counts = log.counts;
        assert_int_equal(dedup_seen_finish(s, emit_rec, &fin), DEDUP_OK);
        uint64_t distinct = 0;
        bool exact = false;
        assert_true(dedup_seen_distinct(s, &distinct, &exact));
        assert_int_equal(fin.records + distinct, model.records);
        for (size_t id = 0; id < UNIVERSE; id++) {
            if (!model_count[id])
                continue;
            char key[24];
            size_t kl = (size_t)snprintf(key, sizeof key, "key:%zu", id);
            uint64_t got = log.counts[id] +
                           dedup_seen_count_of(s, key, kl, dedup_hash(key, kl, seed));
            if (got != model_count[id])
                fail_msg("bsize %zu where %d: key:%zu counted %llu, the model %llu", bsize,
                         where, id, (unsigned long long)got,
                         (unsigned long long)model_count[id]);
        }
        free(fin.buf);
    }
    free(model.buf);
    free(model_count);
    free(log.buf);
    free(log.counts);
    free(ids);
    dedup_seen_free(s);
}

static void test_finish_with_records_held(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    const size_t sizes[] = {1, 2, 7, 64, 65, 1000, MAXB};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int where = 0; where < 4; where++)
            for (int counts = 0; counts < 2; counts++)
                run(&r, sizes[si], where, counts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finish_with_records_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
