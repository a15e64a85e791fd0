/* test_refset_mt.c - the set of keys kept by reference (dedup_refset) against
 * a naive model on seeded random spans of records, several "files" with and
 * without a last terminator, its memory bound per key, its limit, and
 * out-of-memory at every allocation; two threads inserting one part each,
 * and an EXACT_SPILL seen-set by reference decided on two threads
 * (dedup_seen_decide_part), then whole, past its quarter, into its spill
 * (run under ThreadSanitizer too, the cases with threads: the name ends in
 * _mt). */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/hash.h"
#include "dedup/seen.h"
#include "dedup/set.h"

/* A span of records: record text drawn from a small universe (so that
 * repeats are many), lengths 0..40, with NUL bytes and bytes equal to the
 * terminator's neighbours; 'nf' files, each ending with or without one. */
typedef struct span {
    unsigned char *b;
    size_t len;
    uint64_t ends[8];
    size_t nends;
    size_t *off, *rl; /* records */
    size_t n;
} span;

static void make_span(span *s, tu_rng *r, size_t nrec, size_t universe, unsigned char term)
{
    memset(s, 0, sizeof *s);
    s->b = malloc(nrec * 48 + 64);
    s->off = malloc(nrec * sizeof(size_t));
    s->rl = malloc(nrec * sizeof(size_t));
    assert_non_null(s->b);
    size_t nf = 1 + (size_t)tu_below(r, 4), per = nrec / nf + 1;
    for (size_t i = 0; i < nrec; i++) {
        uint64_t id = tu_below(r, universe);
        size_t l = (size_t)(id % 29);
        s->off[s->n] = s->len;
        for (size_t j = 0; j < l; j++) {
            unsigned char c = (unsigned char)((id * 2654435761u + j * 40503u) >> 7);
            s->b[s->len++] = c == term ? (unsigned char)(term + 1) : c;
        }
        if (id % 3) { /* most records carry their id: distinct ids, distinct records */
            int k = snprintf((char *)s->b + s->len, 16, "%llx", (unsigned long long)id);
            s->len += (size_t)k;
            l += (size_t)k;
        }
        s->rl[s->n++] = l;
        bool file_end = (i + 1) % per == 0 || i + 1 == nrec;
        if (file_end && s->nends < 8) {
            if (tu_below(r, 2))
                s->b[s->len++] = term;
            s->ends[s->nends++] = s->len;
        } else {
            s->b[s->len++] = term;
        }
    }
}

static void free_span(span *s)
{
    free(s->b);
    free(s->off);
    free(s->rl);
}

/* The naive model: the first earlier record with the same bytes. */
static const span *sort_ctx;
static int cmp_rec(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    const span *s = sort_ctx;
    size_t lx = s->rl[x], ly = s->rl[y], m = lx < ly ? lx : ly;
    int c = m ? memcmp(s->b + s->off[x], s->b + s->off[y], m) : 0;
    if (c)
        return c;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* first[i]: whether record i is the first of its bytes. */
static bool *model(const span *s)
{
    size_t *ix = malloc(s->n * sizeof *ix);
    bool *first = calloc(s->n ? s->n : 1, 1);
    for (size_t i = 0; i < s->n; i++)
        ix[i] = i;
    sort_ctx = s;
    qsort(ix, s->n, sizeof *ix, cmp_rec);
    for (size_t i = 0; i < s->n; i++) {
        size_t a = ix[i];
        bool same = i > 0 && s->rl[ix[i - 1]] == s->rl[a] &&
                    (s->rl[a] == 0 || memcmp(s->b + s->off[ix[i - 1]], s->b + s->off[a], s->rl[a]) == 0);
        first[a] = !same;
    }
    free(ix);
    return first;
}

static dedup_refset *make_set(const span *s, unsigned char term, uint64_t limit, uint64_t expected,
                              const dedup_allocator *a)
{
    dedup_refset_params p;
    dedup_refset_params_init(&p);
    p.base = s->b;
    p.span = s->len;
    p.term = term;
    p.ends = s->ends;
    p.nends = s->nends;
    p.memory_limit = limit;
    p.expected = expected;
    dedup_refset *set = NULL;
    dedup_status st = dedup_refset_create(&p, a, &set);
    if (st != DEDUP_OK)
        return NULL;
    return set;
}

static void run_model(tu_rng *r, size_t nrec, size_t universe, unsigned char term, uint64_t expected)
{
    span s;
    make_span(&s, r, nrec, universe, term);
    bool *first = model(&s);
    dedup_refset *set = make_set(&s, term, 0, expected, NULL);
    assert_non_null(set);
    uint64_t distinct = 0;
    for (size_t i = 0; i < s.n; i++) {
        dedup_digest d = dedup_hash(s.b + s.off[i], s.rl[i], 7);
        if (i + 4 < s.n)
            dedup_refset_prefetch(set, dedup_hash(s.b + s.off[i + 4], s.rl[i + 4], 7));
        dedup_refset_prefetch_key(set, d, s.rl[i]);
        dedup_verdict v;
        assert_int_equal(dedup_refset_insert(set, s.off[i], s.rl[i], d, &v), DEDUP_OK);
        if ((v == DEDUP_NEW) != first[i])
            fail_msg("record %zu (len %zu): %s, the model says %s", i, s.rl[i],
                     v == DEDUP_NEW ? "new" : "duplicate", first[i] ? "new" : "duplicate");
        distinct += first[i];
        assert_true(dedup_refset_contains(set, s.b + s.off[i], s.rl[i], d));
    }
    assert_int_equal(dedup_refset_size(set), distinct);
    /* absent keys: each record with its terminator and one more byte (no
     * record holds a terminator), and the prefix of a record that no record
     * equals: the bytes match, the stored record goes on */
    unsigned char tmp[64];
    for (size_t i = 0; i < s.n && i < 20000; i++) {
        memcpy(tmp, s.b + s.off[i], s.rl[i]);
        tmp[s.rl[i]] = term;
        tmp[s.rl[i] + 1] = 'x';
        assert_false(dedup_refset_contains(set, tmp, s.rl[i] + 2, dedup_hash(tmp, s.rl[i] + 2, 7)));
    }
    dedup_refset_free(set);
    free(first);
    free_span(&s);
}

TU_ONE_THREAD_FN static void test_refset_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    run_model(&r, 200000, 60000, '\n', 0);
    run_model(&r, 50000, 300, '\n', 0);  /* few keys, many repeats */
    run_model(&r, 100000, 1u << 30, 0, 0); /* nearly all distinct, NUL terminator */
    run_model(&r, 100000, 50000, '\n', 1); /* planned far too small: one shard grows */
    run_model(&r, 10, 5, '\n', 0);
}

/* Memory: exact; a shard's load stays within [3/8, 3/4] once it has grown
 * (8 / (3/8) = 21.3 bytes per key at worst, 10.7 at best), plus 16 bytes
 * per shard. */
TU_ONE_THREAD_FN static void test_refset_memory(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    span s;
    make_span(&s, &r, 600000, UINT64_C(1) << 40, '\n');
    dedup_refset *set = make_set(&s, '\n', 0, 600000, NULL);
    assert_non_null(set);
    for (size_t i = 0; i < s.n; i++) {
        dedup_verdict v;
        dedup_digest d = dedup_hash(s.b + s.off[i], s.rl[i], 7);
        assert_int_equal(dedup_refset_insert(set, s.off[i], s.rl[i], d, &v), DEDUP_OK);
    }
    uint64_t n = dedup_refset_size(set);
    size_t mem = dedup_refset_memory_usage(set);
    printf("refset: %llu keys, %zu bytes, %.2f B/key\n", (unsigned long long)n, mem,
           (double)mem / (double)n);
    assert_true(n > 300000);
    assert_true((double)mem <= 8.0 * 8 / 3 * (double)n + 16.0 * 64 + 4096);
    assert_true((double)mem >= 8.0 * 4 / 3 * (double)n);
    dedup_refset_free(set);
    free_span(&s);
}

/* A memory limit: DEDUP_ERR_FULL, nothing changed, the keys held so far
 * still answered. */
TU_ONE_THREAD_FN static void test_refset_limit(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    span s;
    make_span(&s, &r, 100000, UINT64_C(1) << 40, '\n');
    bool *first = model(&s);
    dedup_refset *set = make_set(&s, '\n', 256 << 10, 0, NULL);
    assert_non_null(set);
    size_t i = 0;
    dedup_status st = DEDUP_OK;
    for (; i < s.n; i++) {
        dedup_verdict v;
        dedup_digest d = dedup_hash(s.b + s.off[i], s.rl[i], 7);
        uint64_t before = dedup_refset_size(set);
        st = dedup_refset_insert(set, s.off[i], s.rl[i], d, &v);
        if (st == DEDUP_ERR_FULL) {
            assert_int_equal(dedup_refset_size(set), before);
            assert_false(dedup_refset_contains(set, s.b + s.off[i], s.rl[i], d));
            break;
        }
        assert_int_equal(st, DEDUP_OK);
        assert_int_equal(v == DEDUP_NEW, first[i]);
    }
    assert_int_equal(st, DEDUP_ERR_FULL);
    assert_true(dedup_refset_memory_usage(set) <= 256 << 10);
    for (size_t j = 0; j < i; j++)
        assert_true(dedup_refset_contains(set, s.b + s.off[j], s.rl[j],
                                          dedup_hash(s.b + s.off[j], s.rl[j], 7)));
    dedup_refset_free(set);
    free(first);
    free_span(&s);
}

TU_ONE_THREAD_FN static void test_refset_oom(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    span s;
    make_span(&s, &r, 20000, 10000, '\n');
    /* one thread: under ThreadSanitizer a quarter of the failure points,
     * from an offset the seed picks (testutil.h) */
    for (uint64_t k = (uint64_t)TU_TSAN_FIRST(4); k < 400; k += TU_TSAN_STEP(4)) {
        tu_failing_alloc fa;
        dedup_allocator a = tu_failing_allocator(&fa, k);
        dedup_refset *set = make_set(&s, '\n', 0, 0, &a);
        if (!set)
            continue;
        for (size_t i = 0; i < s.n; i++) {
            dedup_verdict v;
            dedup_digest d = dedup_hash(s.b + s.off[i], s.rl[i], 7);
            dedup_status st = dedup_refset_insert(set, s.off[i], s.rl[i], d, &v);
            if (st != DEDUP_OK) {
                assert_int_equal(st, DEDUP_ERR_NOMEM);
                break;
            }
        }
        dedup_refset_free(set);
    }
    dedup_refset_free(NULL);
    free_span(&s);
}

TU_ONE_THREAD_FN static void test_refset_args(void **state)
{
    (void)state;
    unsigned char b[4] = "a\nb";
    dedup_refset_params p;
    dedup_refset_params_init(&p);
    dedup_refset *set = NULL;
    assert_int_equal(dedup_refset_create(&p, NULL, &set), DEDUP_ERR_INVALID_ARG);
    p.base = b;
    p.span = UINT64_C(1) << 40;
    assert_int_equal(dedup_refset_create(&p, NULL, &set), DEDUP_ERR_INVALID_ARG);
    p.span = 3;
    assert_int_equal(dedup_refset_create(&p, NULL, &set), DEDUP_OK);
    dedup_verdict v;
    assert_int_equal(dedup_refset_insert(set, 2, 2, dedup_hash(b, 2, 1), &v), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_refset_insert(set, 0, 1, dedup_hash("a", 1, 1), &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_NEW);
    assert_int_equal(dedup_refset_insert(set, 2, 1, dedup_hash("b", 1, 1), &v), DEDUP_OK);
    assert_int_equal(v, DEDUP_NEW);
    /* "b" at the span's end has no terminator and is still a whole record */
    assert_true(dedup_refset_contains(set, "b", 1, dedup_hash("b", 1, 1)));
    assert_false(dedup_refset_contains(set, "", 0, dedup_hash("", 0, 1)));
    dedup_refset_free(set);
}

/* ---- Two threads --------------------------------------------------------- */

typedef struct part_job {
    const span *s;
    dedup_refset *set;
    const dedup_digest *d;
    dedup_verdict *v;
    unsigned part;
    dedup_status st;
} part_job;

static void *insert_part(void *arg)
{
    part_job *j = arg;
    j->st = DEDUP_OK;
    for (size_t i = 0; i < j->s->n && !j->st; i++)
        if (dedup_refset_part(j->d[i]) == j->part) {
            dedup_refset_prefetch_key(j->set, j->d[i], j->s->rl[i]);
            j->st = dedup_refset_insert_unlimited(j->set, j->s->off[i], j->s->rl[i], j->d[i], &j->v[i]);
        }
    return NULL;
}

/* Each part inserted by its own thread at once, while this one reads the
 * counters: every verdict is the model's, the sizes add up, and the memory
 * limit is not what stops an unlimited insert. */
static void test_refset_two_threads(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    for (int round = 0; round < 3; round++) {
        span s;
        make_span(&s, &r, 150000, round == 2 ? UINT64_C(1) << 40 : 40000, '\n');
        bool *first = model(&s);
        dedup_refset *set = make_set(&s, '\n', round == 1 ? 64 << 10 : 0, round ? 1000 : 0, NULL);
        assert_non_null(set);
        dedup_digest *d = malloc(s.n * sizeof *d);
        dedup_verdict *v = malloc(s.n * sizeof *v);
        uint64_t distinct = 0, in_part[2] = {0, 0};
        for (size_t i = 0; i < s.n; i++) {
            d[i] = dedup_hash(s.b + s.off[i], s.rl[i], 7);
            assert_int_equal(dedup_refset_part(d[i]), (unsigned)(d[i].hi >> 63));
            distinct += first[i];
            in_part[dedup_refset_part(d[i])]++;
        }
        assert_true(in_part[0] > 0 && in_part[1] > 0);
        part_job j[2];
        pthread_t th[2];
        for (unsigned p = 0; p < 2; p++) {
            j[p] = (part_job){.s = &s, .set = set, .d = d, .v = v, .part = p};
            assert_int_equal(pthread_create(&th[p], NULL, insert_part, &j[p]), 0);
        }
        uint64_t seen = 0;
        for (int k = 0; k < 1000; k++) { /* the counters may be read meanwhile */
            uint64_t n = dedup_refset_size(set);
            assert_true(n >= seen && n <= distinct);
            seen = n;
            (void)dedup_refset_memory_usage(set);
        }
        for (unsigned p = 0; p < 2; p++) {
            pthread_join(th[p], NULL);
            assert_int_equal(j[p].st, DEDUP_OK);
        }
        for (size_t i = 0; i < s.n; i++)
            if ((v[i] == DEDUP_NEW) != first[i])
                fail_msg("round %d record %zu: %s, the model says %s", round, i,
                         v[i] == DEDUP_NEW ? "new" : "duplicate", first[i] ? "new" : "duplicate");
        assert_int_equal(dedup_refset_size(set), distinct);
        if (round == 1) /* past its limit: only the unlimited inserts got there */
            assert_true(dedup_refset_memory_usage(set) > dedup_refset_memory_limit(set));
        dedup_verdict x;
        dedup_status st = dedup_refset_insert(set, s.off[0], s.rl[0], d[0], &x);
        assert_int_equal(st, DEDUP_OK); /* a repeat needs no room */
        assert_int_equal(x, DEDUP_DUPLICATE);
        free(d);
        free(v);
        dedup_refset_free(set);
        free(first);
        free_span(&s);
    }
}

/* The seen-set by reference decided on two threads: the feeder's way (one
 * thread runs ahead on part 1 of every batch while the other decides part
 * 0 and "writes"), as long as dedup_seen_parts() says 2, then whole batches
 * with dedup_seen_decide(), which spills.  What is written -- the NEW
 * records in order, then what finish() emits -- is the model's first
 * occurrences, whether the budget is large (two threads to the end) or
 * small (the parts stop, the set spills). */
typedef struct seen_job {
    const span *s;
    dedup_seen *seen;
    const dedup_digest *d;
    const unsigned char **keys;
    dedup_verdict *v;
    size_t batch, nb;
    int *parted; /* per batch: 1 part 1 decided, 0 not; -1 not yet */
    size_t taken; /* batches the caller has finished */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} seen_job;

static dedup_batch batch_of(const seen_job *j, size_t b)
{
    size_t from = b * j->batch, n = j->s->n - from < j->batch ? j->s->n - from : j->batch;
    return (dedup_batch){.n = n, .digests = j->d + from, .keys = j->keys + from,
                         .lens = j->s->rl + from, .records = j->keys + from,
                         .rlens = j->s->rl + from};
}

/* Batches the thread below may decide ahead of the caller: as the CLI's
 * feeder (cli/feeder.c, NSLOT blocks in flight).  The parts insert without
 * the memory limit until the set says to stop, so a thread that could run
 * through every batch first would take the whole input past the limit
 * unchecked, and whether the set spills would be down to scheduling. */
#define AHEAD 4

static void *ahead_part_one(void *arg)
{
    seen_job *j = arg;
    bool stopped = false;
    for (size_t b = 0; b < j->nb; b++) {
        pthread_mutex_lock(&j->mu);
        while (b >= j->taken + AHEAD)
            pthread_cond_wait(&j->cv, &j->mu);
        pthread_mutex_unlock(&j->mu);
        int r = 0;
        if (!stopped && dedup_seen_parts(j->seen) == 2) {
            dedup_batch bb = batch_of(j, b);
            r = dedup_seen_decide_part(j->seen, &bb, 1, j->v + b * j->batch) == DEDUP_OK;
        }
        stopped = stopped || !r;
        pthread_mutex_lock(&j->mu);
        j->parted[b] = r;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
    }
    return NULL;
}

typedef struct out_buf {
    unsigned char *p;
    size_t len;
} out_buf;

static int collect(void *ctx, const void *rec, size_t len, uint64_t count)
{
    (void)count;
    out_buf *o = ctx;
    memcpy(o->p + o->len, rec, len);
    o->len += len;
    o->p[o->len++] = '\n';
    return 0;
}

static void run_seen_parts(tu_rng *r, uint64_t memory, bool expect_spill)
{
    span s;
    make_span(&s, r, 120000, 50000, '\n');
    bool *first = model(&s);
    out_buf want = {malloc(s.len + s.n + 1), 0}, got = {malloc(s.len + s.n + 1), 0};
    for (size_t i = 0; i < s.n; i++)
        if (first[i])
            collect(&want, s.b + s.off[i], s.rl[i], 1);
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_EXACT_SPILL;
    sp.memory = memory;
    sp.seed = 7;
    sp.emit = collect;
    sp.emit_ctx = &got;
    sp.ref_base = s.b;
    sp.ref_span = s.len;
    sp.ref_term = '\n';
    sp.ref_ends = s.ends;
    sp.ref_nends = s.nends;
    seen_job j = {.s = &s, .batch = 1000};
    assert_int_equal(dedup_seen_create(&sp, NULL, &j.seen), DEDUP_OK);
    assert_int_equal(dedup_seen_parts(j.seen), 2);
    j.nb = (s.n + j.batch - 1) / j.batch;
    dedup_digest *d = malloc(s.n * sizeof *d);
    j.keys = malloc(s.n * sizeof *j.keys);
    j.v = malloc(s.n * sizeof *j.v);
    j.parted = malloc(j.nb * sizeof *j.parted);
    for (size_t i = 0; i < s.n; i++) {
        d[i] = dedup_hash(s.b + s.off[i], s.rl[i], 7);
        j.keys[i] = s.b + s.off[i];
    }
    j.d = d;
    for (size_t b = 0; b < j.nb; b++)
        j.parted[b] = -1;
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, ahead_part_one, &j), 0);
    size_t parted = 0;
    for (size_t b = 0; b < j.nb; b++) {
        pthread_mutex_lock(&j.mu);
        while (j.parted[b] < 0)
            pthread_cond_wait(&j.cv, &j.mu);
        int p = j.parted[b];
        pthread_mutex_unlock(&j.mu);
        dedup_batch bb = batch_of(&j, b);
        dedup_verdict *v = j.v + b * j.batch;
        if (p) {
            parted++;
            assert_int_equal(dedup_seen_decide_part(j.seen, &bb, 0, v), DEDUP_OK);
        } else {
            size_t done = 0;
            assert_int_equal(dedup_seen_decide(j.seen, &bb, v, &done), DEDUP_OK);
        }
        for (size_t i = 0; i < bb.n; i++)
            if (v[i] == DEDUP_NEW)
                collect(&got, bb.keys[i], bb.lens[i], 1);
        pthread_mutex_lock(&j.mu);
        j.taken = b + 1;
        pthread_cond_broadcast(&j.cv);
        pthread_mutex_unlock(&j.mu);
    }
    pthread_join(th, NULL);
    /* After a spill the set has one part: the parts stopped there.  Whether
     * the thread ahead had already decided its part of every batch by then
     * is scheduling (a CI run saw it), so only "no spill: every batch in
     * parts" is certain. */
    assert_int_equal(dedup_seen_parts(j.seen), expect_spill ? 1 : 2);
    assert_int_equal(dedup_seen_finish(j.seen, NULL, NULL), DEDUP_OK);
    assert_true(parted > 0);
    assert_int_equal(dedup_seen_spilled(j.seen), expect_spill);
    if (!expect_spill)
        assert_int_equal(parted, j.nb);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.p, want.p, want.len);
    dedup_seen_free(j.seen);
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    free(d);
    free(j.keys);
    free(j.v);
    free(j.parted);
    free(want.p);
    free(got.p);
    free(first);
    free_span(&s);
}

static void test_seen_decide_parts(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    run_seen_parts(&r, 64 << 20, false);
    run_seen_parts(&r, 1 << 20, true);
}

/* Each thread checks its own part's keys only: a record outside the span
 * in part 1 fails part 1 (DEDUP_ERR_INVALID_ARG) and leaves part 0 to be
 * decided; a whole-record key that is not its record fails its part. */
static void test_seen_part_invalid(void **state)
{
    (void)state;
    char span[64 * 4];
    size_t len = 0;
    for (int i = 0; i < 64; i++)
        len += (size_t)snprintf(span + len, sizeof span - len, "k%d\n", i);
    const unsigned char *b = (const unsigned char *)span;
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_EXACT_SPILL;
    sp.memory = 16 << 20;
    sp.seed = 7;
    sp.emit = collect;
    out_buf got = {malloc(1024), 0};
    sp.emit_ctx = &got;
    sp.ref_base = b;
    sp.ref_span = len;
    sp.ref_term = '\n';
    dedup_seen *seen = NULL;
    assert_int_equal(dedup_seen_create(&sp, NULL, &seen), DEDUP_OK);
    assert_int_equal(dedup_seen_parts(seen), 2);
    /* the first record ("k<i>") of each part */
    const unsigned char *key[2] = {NULL, NULL};
    size_t klen[2] = {0, 0};
    dedup_digest dig[2];
    for (size_t off = 0; off < len && !(key[0] && key[1]);) {
        const unsigned char *e = memchr(b + off, '\n', len - off);
        size_t l = (size_t)(e - (b + off));
        dedup_digest d = dedup_hash(b + off, l, 7);
        unsigned p = dedup_seen_part_of(d);
        if (!key[p]) {
            key[p] = b + off;
            klen[p] = l;
            dig[p] = d;
        }
        off += l + 1;
    }
    assert_non_null(key[0]);
    assert_non_null(key[1]);
    /* part 1's record copied outside the span */
    unsigned char outside[16];
    memcpy(outside, key[1], klen[1]);
    const unsigned char *keys[2] = {key[0], outside};
    dedup_batch bb = {.n = 2, .digests = dig, .keys = keys, .lens = klen, .records = keys,
                      .rlens = klen};
    dedup_verdict v[2] = {DEDUP_DEFERRED, DEDUP_DEFERRED};
    assert_int_equal(dedup_seen_decide_part(seen, &bb, 1, v), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(v[1], DEDUP_DEFERRED);
    assert_int_equal(dedup_seen_decide_part(seen, &bb, 0, v), DEDUP_OK);
    assert_int_equal(v[0], DEDUP_NEW);
    /* a whole-record key that is not its record (one byte further on) */
    const unsigned char *recs[1] = {key[0]}, *shifted[1] = {key[0] + 1};
    size_t l1[1] = {klen[0] - 1};
    dedup_batch bad = {.n = 1, .digests = dig, .keys = shifted, .lens = l1, .records = recs,
                       .rlens = l1};
    assert_int_equal(dedup_seen_decide_part(seen, &bad, 0, v), DEDUP_ERR_INVALID_ARG);
    dedup_seen_free(seen);
    free(got.p);
}

/* Keys that are byte ranges of their records (params.lengths) or copies,
 * with counts: each record's key drops a few bytes at either end, and a
 * third of the keys go in as copies (the same bytes elsewhere), so a key
 * is met both ways.  Verdicts and counts against the model, and the saved
 * file equal, byte for byte, to the one a dedup_strset with the same keys
 * inserted in the same order writes. */
typedef struct kref {
    const unsigned char *p;
    size_t len;
} kref;

static int cmp_key(const void *a, const void *b)
{
    const kref *const *x = a, *const *y = b;
    size_t m = (*x)->len < (*y)->len ? (*x)->len : (*y)->len;
    int c = m ? memcmp((*x)->p, (*y)->p, m) : 0;
    if (c)
        return c;
    if ((*x)->len != (*y)->len)
        return (*x)->len < (*y)->len ? -1 : 1;
    return *x < *y ? -1 : *x > *y;
}

TU_ONE_THREAD_FN static void test_refset_keys(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    span s;
    make_span(&s, &r, 60000, 9000, '\n');
    kref *k = malloc(s.n * sizeof *k);
    const kref **ix = malloc(s.n * sizeof *ix);
    uint64_t *count = calloc(s.n, sizeof *count);
    bool *first = calloc(s.n, 1);
    unsigned char *copies = malloc(s.len + 1);
    assert_true(k && ix && count && first && copies);
    for (size_t i = 0; i < s.n; i++) {
        size_t a = s.rl[i] % 3 < s.rl[i] ? s.rl[i] % 3 : 0, l = s.rl[i] - a;
        l -= l > 2 ? s.rl[i] % 2 : 0;
        k[i] = (kref){s.b + s.off[i] + a, l};
        ix[i] = &k[i];
    }
    qsort(ix, s.n, sizeof *ix, cmp_key);
    for (size_t i = 0, g = 0; i < s.n; i++) { /* g: the first of i's group */
        if (ix[i]->len != ix[g]->len || (ix[i]->len && memcmp(ix[i]->p, ix[g]->p, ix[i]->len)))
            g = i;
        first[ix[i] - k] = g == i;
        count[ix[g] - k]++;
    }
    dedup_refset_params p;
    dedup_refset_params_init(&p);
    p.base = s.b;
    p.span = s.len;
    p.ends = s.ends;
    p.nends = s.nends;
    p.lengths = true;
    p.counts = true;
    p.seed = 7;
    dedup_refset *set = NULL;
    assert_int_equal(dedup_refset_create(&p, NULL, &set), DEDUP_OK);
    dedup_set_params sp;
    dedup_set_params_init(&sp);
    sp.seed = 7;
    sp.counts = true;
    dedup_strset *str = NULL;
    assert_int_equal(dedup_strset_create(&sp, NULL, &str), DEDUP_OK);
    size_t used = 0;
    for (size_t i = 0; i < s.n; i++) {
        dedup_digest d = dedup_hash(k[i].p, k[i].len, 7);
        dedup_verdict v, w;
        if (tu_below(&r, 3) == 0) {
            memcpy(copies + used, k[i].p, k[i].len);
            assert_int_equal(dedup_refset_insert_copy(set, copies + used, k[i].len, d,
                                                      DEDUP_REFSET_SPAN_SEQ + s.off[i], true, &v),
                             DEDUP_OK);
            used += k[i].len;
        } else {
            assert_int_equal(dedup_refset_insert(set, (uint64_t)(k[i].p - s.b), k[i].len, d, &v),
                             DEDUP_OK);
        }
        assert_int_equal(v, first[i] ? DEDUP_NEW : DEDUP_DUPLICATE);
        assert_int_equal(dedup_strset_insert(str, k[i].p, k[i].len, d, &w), DEDUP_OK);
    }
    memset(copies, 0, used); /* the set holds its own copies */
    for (size_t i = 0; i < s.n; i++)
        if (first[i])
            assert_int_equal(dedup_refset_count_of(set, k[i].p, k[i].len,
                                                   dedup_hash(k[i].p, k[i].len, 7)),
                             count[i]);
    assert_int_equal(dedup_refset_size(set), dedup_strset_size(str));
    size_t cap = s.len * 2 + s.n * 16 + 4096;
    unsigned char *a = malloc(cap), *b = malloc(cap);
    dedup_mem_sink ma, mb;
    dedup_sink sa = dedup_mem_sink_init(&ma, a, cap), sb = dedup_mem_sink_init(&mb, b, cap);
    assert_int_equal(dedup_refset_save(set, &sa), DEDUP_OK);
    assert_int_equal(dedup_strset_save(str, &sb), DEDUP_OK);
    assert_int_equal(ma.len, mb.len);
    assert_memory_equal(a, b, ma.len);
    free(a);
    free(b);
    dedup_strset_free(str);
    dedup_refset_free(set);
    free(k);
    free(ix);
    free(count);
    free(first);
    free(copies);
    free_span(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_ONE_THREAD(cmocka_unit_test(test_refset_model))
        TU_ONE_THREAD(cmocka_unit_test(test_refset_keys))
        TU_ONE_THREAD(cmocka_unit_test(test_refset_memory))
        TU_ONE_THREAD(cmocka_unit_test(test_refset_limit))
        TU_ONE_THREAD(cmocka_unit_test(test_refset_oom))
        TU_ONE_THREAD(cmocka_unit_test(test_refset_args))
        cmocka_unit_test(test_refset_two_threads),
        cmocka_unit_test(test_seen_decide_parts),
        cmocka_unit_test(test_seen_part_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
