/*
 * test_extsort.c - the external dedup engine against a naive in-memory
 * reference, on seeded random inputs, with budgets tiny enough to force
 * several partitioning levels; plus empty input, records larger than the
 * budget, injected write failures (no temporary file left), emit
 * cancellation, OOM injection and argument checks.
 *
 * Run as `test_extsort --driver ARGS` it is the line driver that
 * tests/cli/extsort_ref.sh compares with sort/awk/uniq.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/extsort_driver.h"
#include "dedup/extsort.h"
#include "extsort_threads.h"
#include "dedup/hash.h"

/* ---- inputs ----------------------------------------------------------- */

typedef struct rec {
    char *key, *rec;
    size_t keylen, reclen;
} rec;

typedef struct input {
    rec *r;
    size_t n;
} input;

static void input_free(input *in)
{
    for (size_t i = 0; i < in->n; i++) {
        if (in->r[i].rec != in->r[i].key)
            free(in->r[i].rec);
        free(in->r[i].key);
    }
    free(in->r);
    in->r = NULL;
    in->n = 0;
}

/* n records over about n/2 distinct keys (some of them very repeated, some
 * empty, some with NUL bytes, a few long).  With 'separate' the record is
 * the key plus a unique suffix, so "the first record of a key" matters. */
static input make_input(tu_rng *g, size_t n, bool separate, size_t maxlen)
{
    input in;
    in.n = n;
    in.r = calloc(n ? n : 1, sizeof(rec));
    assert_non_null(in.r);
    size_t vocab = n / 2 + 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t id;
        uint64_t x = tu_below(g, 100);
        if (x < 10)
            id = tu_below(g, 16); /* hot keys */
        else
            id = tu_below(g, vocab);
        tu_rng kr = {id * 0x9E3779B97F4A7C15u + 17};
        size_t len = (size_t)tu_below(&kr, 8) == 0 ? (size_t)tu_below(&kr, maxlen + 1)
                                                     : (size_t)(8 + tu_below(&kr, 60));
        if (id == 3)
            len = 0;
        char *k = malloc(len + 24);
        assert_non_null(k);
        for (size_t j = 0; j < len; j++)
            k[j] = (char)("abcdefghij/.:-_"[tu_below(&kr, 15)]);
        if (len > 4 && id % 7 == 0)
            k[len / 2] = '\0'; /* NUL is data */
        if (len >= 12) /* make distinct ids distinct keys */
            snprintf(k + len - 12, 13, "%012llu", (unsigned long long)id);
        in.r[i].key = k;
        in.r[i].keylen = len;
        if (separate) {
            char *r = malloc(len + 32);
            assert_non_null(r);
            memcpy(r, k, len);
            int m = snprintf(r + len, 32, "#%zu", i);
            in.r[i].rec = r;
            in.r[i].reclen = len + (size_t)m;
        } else {
            in.r[i].rec = k;
            in.r[i].reclen = len;
        }
    }
    return in;
}

/* ---- output capture and the reference --------------------------------- */

typedef struct outrec {
    char *p;
    size_t len;
    uint64_t count;
} outrec;

typedef struct capture {
    outrec *o;
    size_t n, cap;
    size_t stop_after; /* return 'stop_rc' at this record when nonzero */
    int stop_rc;
} capture;

static int cap_emit(void *ctx, const void *p, size_t len, uint64_t count)
{
    capture *c = ctx;
    if (c->stop_after && c->n + 1 == c->stop_after)
        return c->stop_rc;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 1024;
        c->o = realloc(c->o, c->cap * sizeof(outrec));
        assert_non_null(c->o);
    }
    outrec *o = &c->o[c->n++];
    o->p = malloc(len ? len : 1);
    assert_non_null(o->p);
    if (len)
        memcpy(o->p, p, len);
    o->len = len;
    o->count = count;
    return 0;
}

static void cap_free(capture *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->o[i].p);
    free(c->o);
    memset(c, 0, sizeof *c);
}

static int kcmp(const char *a, size_t al, const char *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    return c ? c : (al < bl ? -1 : al > bl);
}

static const input *g_sort_in;
static int idx_cmp(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    const rec *ra = &g_sort_in->r[a], *rb = &g_sort_in->r[b];
    int c = kcmp(ra->key, ra->keylen, rb->key, rb->keylen);
    if (c)
        return c;
    return a < b ? -1 : a > b;
}

/* The reference's view of an input, made once for every order and output
 * kind: its keys' groups, by sorting indexes by (key, index). */
typedef struct refgroups {
    size_t *groups; /* first index of each key, key order */
    size_t ngroups;
    uint64_t *cnt; /* count, at the first index */
    bool *isfirst;
} refgroups;

static void ref_groups(const input *in, refgroups *rg)
{
    size_t n = in->n;
    size_t *idx = malloc((n ? n : 1) * sizeof(size_t));
    size_t *first = malloc((n ? n : 1) * sizeof(size_t)); /* index of the key's first record */
    rg->cnt = calloc(n ? n : 1, sizeof(uint64_t));
    rg->isfirst = calloc(n ? n : 1, sizeof(bool));
    rg->groups = malloc((n ? n : 1) * sizeof(size_t));
    assert_true(idx && first && rg->cnt && rg->isfirst && rg->groups);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    g_sort_in = in;
    qsort(idx, n, sizeof(size_t), idx_cmp);
    rg->ngroups = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = idx[i];
        if (i == 0 || kcmp(in->r[j].key, in->r[j].keylen, in->r[idx[i - 1]].key,
                           in->r[idx[i - 1]].keylen) != 0) {
            rg->groups[rg->ngroups++] = j;
            rg->isfirst[j] = true;
        }
        first[j] = rg->groups[rg->ngroups - 1];
        rg->cnt[first[j]]++;
    }
    free(idx);
    free(first);
}

static void ref_groups_free(refgroups *rg)
{
    free(rg->groups);
    free(rg->cnt);
    free(rg->isfirst);
    memset(rg, 0, sizeof *rg);
}

/* The expected output for 'order' and 'kind', from the input's groups. */
static void ref_output(const input *in, const refgroups *rg, dedup_extsort_order order,
                       dedup_extsort_output kind, capture *out)
{
    size_t n = in->n;
    const uint64_t *cnt = rg->cnt;
    memset(out, 0, sizeof *out);
    if (kind == DEDUP_EXTSORT_DUPLICATES) {
        for (size_t i = 0; i < n; i++)
            if (!rg->isfirst[i])
                cap_emit(out, in->r[i].rec, in->r[i].reclen, 1);
    } else if (order == DEDUP_EXTSORT_SORTED) {
        for (size_t g = 0; g < rg->ngroups; g++) {
            size_t j = rg->groups[g];
            if (kind == DEDUP_EXTSORT_UNIQUE && cnt[j] != 1)
                continue;
            cap_emit(out, in->r[j].rec, in->r[j].reclen, kind == DEDUP_EXTSORT_COUNT ? cnt[j] : 1);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            if (!rg->isfirst[i] || (kind == DEDUP_EXTSORT_UNIQUE && cnt[i] != 1))
                continue;
            cap_emit(out, in->r[i].rec, in->r[i].reclen, kind == DEDUP_EXTSORT_COUNT ? cnt[i] : 1);
        }
    }
}

/* The expected output of one run. */
static void reference(const input *in, dedup_extsort_order order, dedup_extsort_output kind,
                      capture *out)
{
    refgroups rg;
    ref_groups(in, &rg);
    ref_output(in, &rg, order, kind, out);
    ref_groups_free(&rg);
}

static void assert_same(const capture *got, const capture *want, const char *what)
{
    if (got->n != want->n)
        fprintf(stderr, "%s: %zu records, want %zu\n", what, got->n, want->n);
    assert_int_equal(got->n, want->n);
    for (size_t i = 0; i < got->n; i++) {
        if (got->o[i].len != want->o[i].len || got->o[i].count != want->o[i].count ||
            (got->o[i].len && memcmp(got->o[i].p, want->o[i].p, got->o[i].len))) {
            fprintf(stderr, "%s: record %zu differs (len %zu/%zu count %llu/%llu)\n", what, i,
                    got->o[i].len, want->o[i].len, (unsigned long long)got->o[i].count,
                    (unsigned long long)want->o[i].count);
            fail();
        }
    }
}

/* ---- helpers -------------------------------------------------------------- */

static char *make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char *t = malloc(4096);
    assert_non_null(t);
    snprintf(t, 4096, "%s/dedup-extsort-test.XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(t));
    return t;
}

static size_t dir_entries(const char *path)
{
    DIR *d = opendir(path);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static dedup_status run_engine(const input *in, dedup_extsort_params *p, capture *got,
                               dedup_extsort_stats *st, const dedup_allocator *alloc)
{
    memset(got, 0, sizeof *got);
    p->emit = cap_emit;
    p->emit_ctx = got;
    dedup_extsort *es;
    dedup_status s = dedup_extsort_create(p, alloc, &es);
    if (s != DEDUP_OK)
        return s;
    for (size_t i = 0; i < in->n && s == DEDUP_OK; i++) {
        const rec *r = &in->r[i];
        s = dedup_extsort_push(es, r->rec, r->reclen, r->key, r->keylen,
                               dedup_hash(r->key, r->keylen, p->seed));
    }
    if (s == DEDUP_OK)
        s = dedup_extsort_finish(es);
    if (st)
        dedup_extsort_stats_get(es, st);
    dedup_extsort_free(es);
    return s;
}

/* Frames stored raw (params.raw_frames) in compare_all's runs. */
static bool g_raw_frames;

static const dedup_extsort_output kinds[] = {DEDUP_EXTSORT_FIRST, DEDUP_EXTSORT_DUPLICATES,
                                              DEDUP_EXTSORT_COUNT, DEDUP_EXTSORT_UNIQUE};
static const char *kind_names[] = {"first", "duplicates", "count", "unique"};

/* Every order x output kind x (key == record, key != record) against the
 * reference, with 'budget' bytes. */
static void compare_all(size_t n, uint64_t budget, size_t maxlen, bool expect_spill,
                        uint64_t min_depth)
{
    char *dir = make_tmpdir();
    tu_rng g = {tu_seed() ^ n ^ budget};
    for (int sep = TU_TSAN_FIRST(2); sep < 2; sep += TU_TSAN_STEP(2)) {
        input in = make_input(&g, n, sep, maxlen);
        refgroups rg;
        ref_groups(&in, &rg);
        for (int order = 0; order < 2; order++) {
            for (int k = 0; k < 4; k++) {
                if (order == DEDUP_EXTSORT_SORTED && kinds[k] == DEDUP_EXTSORT_DUPLICATES)
                    continue;
                dedup_extsort_params p;
                tu_extsort_params(&p);
                p.memory_limit = budget;
                p.order = (dedup_extsort_order)order;
                p.output = kinds[k];
                p.tmpdir = dir;
                p.raw_frames = g_raw_frames;
                capture got, want;
                dedup_extsort_stats st;
                assert_int_equal(run_engine(&in, &p, &got, &st, NULL), DEDUP_OK);
                /* raw frames: every stream byte on disk, plus 16-byte headers */
                if (g_raw_frames && expect_spill)
                    assert_true(st.bytes_spilled > st.bytes_spilled_raw);
                ref_output(&in, &rg, p.order, p.output, &want);
                char what[128];
                snprintf(what, sizeof what, "n=%zu budget=%llu sep=%d order=%d %s", n,
                         (unsigned long long)budget, sep, order, kind_names[k]);
                assert_same(&got, &want, what);
                assert_int_equal(st.spilled, expect_spill);
                /* first-occurrence order recurses into partitions; sorted
                 * order merges runs in passes */
                if (order == DEDUP_EXTSORT_FIRST_OCCURRENCE)
                    assert_true(st.max_depth >= min_depth);
                else if (min_depth >= 2)
                    assert_true(st.merge_passes >= 2 && st.runs_written > st.merge_passes);
                assert_int_equal(st.records_in, n);
                assert_int_equal(st.records_out, got.n);
                if (budget >= (1u << 20)) /* below, fixed minimums may exceed it */
                    assert_true(st.peak_memory <= budget + budget / 64);
                if (!expect_spill)
                    assert_int_equal(st.bytes_spilled, 0);
                else
                    assert_int_equal(st.bytes_spilled, st.bytes_read_back);
                assert_int_equal(dir_entries(dir), 0);
                cap_free(&got);
                cap_free(&want);
            }
        }
        ref_groups_free(&rg);
        input_free(&in);
    }
    assert_int_equal(rmdir(dir), 0);
    free(dir);
}

/* ---- tests ------------------------------------------------------------------ */

/* The cases at budgets of 1-2 MiB exist for the _mt build's threads and, in
 * the optimised build, for the peak-memory bound at real budgets.  Under
 * AddressSanitizer without threads they would run the one-level and
 * multi-level paths that test_one_level and test_tiny_budget_multilevel
 * already run there (at several times the cost); test_extsort_mt runs them
 * with threads under both sanitizers. */
#if defined(DEDUP_SANITIZED) && EXTSORT_THREADS <= 1
#define SKIP_SANITIZED_SINGLE() skip()
#else
#define SKIP_SANITIZED_SINGLE() ((void)0)
#endif

static void test_in_memory(void **state)
{
    (void)state;
    compare_all(20000, 64 << 20, 300, false, 0);
}

/* 128 KiB with ~2.5 MB of input: many spills and at least two levels. */
static void test_tiny_budget_multilevel(void **state)
{
    (void)state;
    compare_all(40000, 128 << 10, 300, true, 2);
}

/* Just above the budget: one level. */
static void test_one_level(void **state)
{
    (void)state;
    compare_all(15000, 256 << 10, 200, true, 1);
}

/* Records (and keys) larger than the budget, among small ones. */
static void test_record_larger_than_budget(void **state)
{
    (void)state;
    char *dir = make_tmpdir();
    tu_rng g = {tu_seed() + 99};
    input in = make_input(&g, 6000, false, 100);
    /* Replace some records by three distinct 200 KiB keys, the last two
     * differing only in their last byte; each repeated. */
    size_t big = 200 << 10;
    for (int v = 0; v < 3; v++) {
        for (int rep = 0; rep < 3; rep++) {
            size_t at = (size_t)tu_below(&g, in.n);
            free(in.r[at].key);
            char *k = malloc(big);
            assert_non_null(k);
            memset(k, 'x', big);
            k[big - 1] = (char)('a' + (v == 0 ? 0 : v));
            k[0] = v == 0 ? 'y' : 'x';
            in.r[at].key = in.r[at].rec = k;
            in.r[at].keylen = in.r[at].reclen = big;
        }
    }
    refgroups rg;
    ref_groups(&in, &rg);
    for (int order = 0; order < 2; order++) {
        for (int k = 0; k < 4; k++) {
            if (order == DEDUP_EXTSORT_SORTED && kinds[k] == DEDUP_EXTSORT_DUPLICATES)
                continue;
            dedup_extsort_params p;
            tu_extsort_params(&p);
            p.memory_limit = 64 << 10;
            p.order = (dedup_extsort_order)order;
            p.output = kinds[k];
            p.tmpdir = dir;
            capture got, want;
            dedup_extsort_stats st;
            assert_int_equal(run_engine(&in, &p, &got, &st, NULL), DEDUP_OK);
            ref_output(&in, &rg, p.order, p.output, &want);
            assert_same(&got, &want, "large records");
            assert_true(st.spilled);
            cap_free(&got);
            cap_free(&want);
        }
    }
    ref_groups_free(&rg);
    input_free(&in);
    assert_int_equal(dir_entries(dir), 0);
    assert_int_equal(rmdir(dir), 0);
    free(dir);
}

static void test_empty_input(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        dedup_extsort_params p;
        tu_extsort_params(&p);
        p.output = kinds[k];
        p.memory_limit = DEDUP_EXTSORT_MIN_MEMORY;
        capture got;
        input in = {0};
        dedup_extsort_stats st;
        assert_int_equal(run_engine(&in, &p, &got, &st, NULL), DEDUP_OK);
        assert_int_equal(got.n, 0);
        assert_false(st.spilled);
        cap_free(&got);
    }
    /* one empty record is a record */
    dedup_extsort_params p;
    tu_extsort_params(&p);
    capture got = {0};
    p.emit = cap_emit;
    p.emit_ctx = &got;
    dedup_extsort *es;
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dedup_extsort_push(es, "", 0, NULL, 0, dedup_hash("", 0, p.seed)),
                         DEDUP_OK);
    assert_int_equal(dedup_extsort_finish(es), DEDUP_OK);
    assert_int_equal(got.n, 1);
    assert_int_equal(got.o[0].len, 0);
    assert_int_equal(dedup_extsort_push(es, "a", 1, NULL, 0, dedup_hash("a", 1, p.seed)),
                     DEDUP_ERR_INVALID_ARG);
    dedup_extsort_free(es);
    cap_free(&got);
}

/* First occurrences go out as they are pushed while the keys fit. */
static void test_streaming(void **state)
{
    (void)state;
    dedup_extsort_params p;
    tu_extsort_params(&p);
    capture got = {0};
    p.emit = cap_emit;
    p.emit_ctx = &got;
    dedup_extsort *es;
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
    const char *lines[] = {"a", "b", "a", "c", "b", "d"};
    size_t expect[] = {1, 2, 2, 3, 3, 4};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(dedup_extsort_push(es, lines[i], 1, NULL, 0,
                                            dedup_hash(lines[i], 1, p.seed)),
                         DEDUP_OK);
        assert_int_equal(got.n, expect[i]);
    }
    assert_int_equal(dedup_extsort_finish(es), DEDUP_OK);
    assert_int_equal(got.n, 4);
    dedup_extsort_free(es);
    cap_free(&got);
}

/* ---- write failure injection ----------------------------------------------- */

typedef struct wfail {
    uint64_t allow; /* bytes accepted before failing */
    uint64_t written;
    int err;
} wfail;

static ptrdiff_t failing_write(void *ctx, int fd, const void *buf, size_t len)
{
    wfail *w = ctx;
    if (w->written + len > w->allow) {
        size_t part = (size_t)(w->allow - w->written);
        if (part == 0) {
            errno = w->err;
            return -1;
        }
        len = part;
    }
    ptrdiff_t n = (ptrdiff_t)write(fd, buf, len);
    if (n > 0)
        w->written += (uint64_t)n;
    return n;
}

/* Injected ENOSPC after allows[a] bytes, with 'budget' bytes of memory; with
 * 'permille', allows[] are thousandths of what a run without failure writes
 * in that order (measured first). */
static void write_failure(uint64_t budget, size_t n, const uint64_t *allows, size_t nallows,
                          bool permille)
{
    tu_rng g = {tu_seed() + 5};
    input in = make_input(&g, n, false, 100);
    for (int order = 0; order < 2; order++) {
        uint64_t total = 0;
        if (permille) {
            dedup_extsort_params p;
            tu_extsort_params(&p);
            p.memory_limit = budget;
            p.order = (dedup_extsort_order)order;
            wfail w = {UINT64_MAX, 0, ENOSPC};
            p.write_fn = failing_write;
            p.write_ctx = &w;
            capture got;
            assert_int_equal(run_engine(&in, &p, &got, NULL, NULL), DEDUP_OK);
            cap_free(&got);
            total = w.written;
        }
        for (size_t a = 0; a < nallows; a++) {
            char *dir = make_tmpdir();
            wfail w = {permille ? total * allows[a] / 1000 : allows[a], 0, ENOSPC};
            dedup_extsort_params p;
            tu_extsort_params(&p);
            p.memory_limit = budget;
            p.order = (dedup_extsort_order)order;
            p.tmpdir = dir;
            p.write_fn = failing_write;
            p.write_ctx = &w;
            capture got = {0};
            p.emit = cap_emit;
            p.emit_ctx = &got;
            dedup_extsort *es;
            assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
            dedup_status s = DEDUP_OK;
            for (size_t i = 0; i < in.n && s == DEDUP_OK; i++)
                s = dedup_extsort_push(es, in.r[i].rec, in.r[i].reclen, NULL, 0,
                                       dedup_hash(in.r[i].key, in.r[i].keylen, p.seed));
            if (s == DEDUP_OK)
                s = dedup_extsort_finish(es);
            assert_int_equal(s, DEDUP_ERR_IO);
            int err = 0;
            const char *d = NULL;
            uint64_t need = 0;
            assert_true(dedup_extsort_io_error(es, &err, &d, &need));
            assert_int_equal(err, ENOSPC);
            assert_string_equal(d, dir);
            assert_true(need > w.allow);
            /* the error sticks */
            assert_int_equal(dedup_extsort_finish(es), DEDUP_ERR_IO);
            assert_int_equal(dir_entries(dir), 0); /* nothing visible even before free */
            dedup_extsort_free(es);
            assert_int_equal(dir_entries(dir), 0);
            assert_int_equal(rmdir(dir), 0);
            free(dir);
            cap_free(&got);
        }
    }
    input_free(&in);
}

static void test_write_failure(void **state)
{
    (void)state;
    const uint64_t allows[] = {0, 1, 5000, 100000, 400000, 900000};
    write_failure(64 << 10, 20000, allows, sizeof allows / sizeof *allows, false);
}

/* A budget that gets the compressing thread in the _mt build: the failure
 * happens on that thread and is reported by a later call. */
static void test_threads_write_failure_1m(void **state)
{
    (void)state;
    const uint64_t allows[] = {0, 1, 70000, 600000};
    write_failure(1 << 20, 80000, allows, sizeof allows / sizeof *allows, false);
}

/* A write hook that damages one byte of the k-th write (one frame each):
 * what a bad disk or a stray writer would leave in a temporary file. */
typedef struct wflip {
    uint64_t calls, at_call;
    size_t at_byte;
    bool flipped;
} wflip;

static ptrdiff_t flipping_write(void *ctx, int fd, const void *buf, size_t len)
{
    wflip *w = ctx;
    if (w->calls++ != w->at_call || len == 0)
        return (ptrdiff_t)write(fd, buf, len);
    unsigned char *copy = malloc(len);
    assert_non_null(copy);
    memcpy(copy, buf, len);
    copy[w->at_byte % len] ^= 0x20;
    w->flipped = true;
    ptrdiff_t n = (ptrdiff_t)write(fd, copy, len);
    free(copy);
    return n;
}

/* A damaged temporary frame is an error (its check, lengths or LZ4 data),
 * never wrong output. */
static void corrupt_frame(uint64_t budget, size_t n)
{
    tu_rng g = {tu_seed() + 13};
    input in = make_input(&g, n, false, 100);
    size_t bytes[] = {0, 2, 5, 9, 15, 16, 17, 40, 300, 5000};
    for (int order = 0; order < 2; order++) {
        for (size_t b = (size_t)TU_TSAN_FIRST(2); b < sizeof bytes / sizeof *bytes; b += TU_TSAN_STEP(2)) {
            wflip w = {0, tu_below(&g, 30), bytes[b], false};
            dedup_extsort_params p;
            tu_extsort_params(&p);
            p.memory_limit = budget;
            p.order = (dedup_extsort_order)order;
            p.output = DEDUP_EXTSORT_COUNT;
            p.write_fn = flipping_write;
            p.write_ctx = &w;
            capture got;
            dedup_status s = run_engine(&in, &p, &got, NULL, NULL);
            assert_true(w.flipped);
            if (s != DEDUP_ERR_CORRUPT && s != DEDUP_ERR_TRUNCATED)
                fprintf(stderr, "order %d, write %llu, byte %zu: status %d\n", order,
                        (unsigned long long)w.at_call, bytes[b], (int)s);
            assert_true(s == DEDUP_ERR_CORRUPT || s == DEDUP_ERR_TRUNCATED);
            cap_free(&got);
        }
    }
    input_free(&in);
}

static void test_corrupt_frame(void **state)
{
    (void)state;
    corrupt_frame(64 << 10, 20000);
}

/* With the compressing thread (the _mt build) a write holds several frames. */
static void test_threads_corrupt_frame_1m(void **state)
{
    (void)state;
    corrupt_frame(1 << 20, 50000);
}

/* 2 MiB: in the _mt build the partitions are also deduplicated two at a
 * time, in shadow engines of ~0.9 MiB each. */
static void test_threads_parallel_2m(void **state)
{
    (void)state;
    SKIP_SANITIZED_SINGLE();
    compare_all(150000, 2 << 20, 100, true, 1);
}

/* Frames stored raw, as the CLI's references use them: the same output,
 * and nothing compressed (at 128 KiB several levels, at 2 MiB in the _mt
 * build two partitions at a time). */
static void test_threads_raw_frames(void **state)
{
    (void)state;
    g_raw_frames = true;
#if EXTSORT_THREADS <= 1 /* in the _mt build 128 KiB gets no thread: the same run */
    compare_all(40000, 128 << 10, 300, true, 2);
#endif
#if !(defined(DEDUP_SANITIZED) && EXTSORT_THREADS <= 1)
    compare_all(150000, 2 << 20, 100, true, 1);
#endif
    g_raw_frames = false;
}

/* A write failing late: in first-occurrence order while the partitions are
 * done two at a time (the spill is ~2/3 of what is written). */
static void test_threads_write_failure_2m(void **state)
{
    (void)state;
    SKIP_SANITIZED_SINGLE();
    const uint64_t permille[] = {800, 999};
    write_failure(2 << 20, 150000, permille, sizeof permille / sizeof *permille, true);
}

/* 1 MiB and ~5 MB of input: one level (with two threads it would use the
 * compressing thread but one partition at a time; test_threads_parallel_2m
 * covers both, so the _mt build leaves this one out). */
static void test_one_level_1m(void **state)
{
    (void)state;
    SKIP_SANITIZED_SINGLE();
    compare_all(100000, 1 << 20, 100, true, 1);
}

static void test_tmpdir_missing(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 6};
    input in = make_input(&g, 5000, false, 50);
    dedup_extsort_params p;
    tu_extsort_params(&p);
    p.memory_limit = 64 << 10;
    p.tmpdir = "/nonexistent/dedup-extsort";
    capture got;
    assert_int_equal(run_engine(&in, &p, &got, NULL, NULL), DEDUP_ERR_IO);
    cap_free(&got);
    input_free(&in);
}

/* params.tmp_in_memory: every temporary file is a memory file, so a run
 * that spills through several levels (and, in the _mt build, on the
 * engine's threads) never needs its tmpdir, here one that does not exist
 * (any file put there would fail with DEDUP_ERR_IO), and its output is
 * the reference's; the setter does the same before the first push. */
static void test_tmp_in_memory(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 17};
    input in = make_input(&g, 20000, false, 60);
    refgroups rg;
    ref_groups(&in, &rg);
    for (int how = 0; how < 2; how++) {
        for (int k = 0; k < 4; k++) {
            dedup_extsort_params p;
            tu_extsort_params(&p);
            p.memory_limit = 128 << 10;
            p.output = kinds[k];
            p.tmpdir = "/nonexistent/dedup-extsort";
            p.tmp_in_memory = how == 0;
            capture got, want;
            memset(&got, 0, sizeof got);
            p.emit = cap_emit;
            p.emit_ctx = &got;
            dedup_extsort *es;
            assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
            if (how == 1)
                dedup_extsort_set_tmp_in_memory(es, true);
            dedup_status s = DEDUP_OK;
            for (size_t i = 0; i < in.n && s == DEDUP_OK; i++)
                s = dedup_extsort_push(es, in.r[i].rec, in.r[i].reclen, in.r[i].key,
                                       in.r[i].keylen,
                                       dedup_hash(in.r[i].key, in.r[i].keylen, p.seed));
            if (s == DEDUP_OK)
                s = dedup_extsort_finish(es);
            dedup_extsort_stats st;
            dedup_extsort_stats_get(es, &st);
            dedup_extsort_free(es);
            assert_int_equal(s, DEDUP_OK);
            assert_true(st.spilled && st.max_depth >= 2);
            ref_output(&in, &rg, p.order, p.output, &want);
            assert_same(&got, &want, kind_names[k]);
            cap_free(&got);
            cap_free(&want);
        }
    }
    ref_groups_free(&rg);
    input_free(&in);
}

static void test_emit_cancel(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 7};
    input in = make_input(&g, 20000, false, 80);
    for (int spill = 0; spill < 2; spill++) {
        dedup_extsort_params p;
        tu_extsort_params(&p);
        p.memory_limit = spill ? 64 << 10 : 64 << 20;
        capture got = {0};
        got.stop_after = 5000;
        got.stop_rc = 32; /* EPIPE */
        p.emit = cap_emit;
        p.emit_ctx = &got;
        dedup_extsort *es;
        assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
        dedup_status s = DEDUP_OK;
        for (size_t i = 0; i < in.n && s == DEDUP_OK; i++)
            s = dedup_extsort_push(es, in.r[i].rec, in.r[i].reclen, NULL, 0,
                                   dedup_hash(in.r[i].key, in.r[i].keylen, p.seed));
        if (s == DEDUP_OK)
            s = dedup_extsort_finish(es);
        assert_int_equal(s, DEDUP_ERR_CANCELLED);
        assert_int_equal(dedup_extsort_emit_result(es), 32);
        assert_int_equal(got.n, 4999);
        dedup_extsort_free(es);
        cap_free(&got);
    }
    input_free(&in);
}

static void test_invalid_args(void **state)
{
    (void)state;
    dedup_extsort_params p;
    dedup_extsort *es = (dedup_extsort *)1;
    capture c = {0};
    tu_extsort_params(&p);
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_ERR_INVALID_ARG); /* no emit */
    p.emit = cap_emit;
    p.emit_ctx = &c;
    p.memory_limit = DEDUP_EXTSORT_MIN_MEMORY - 1;
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_ERR_INVALID_ARG);
    p.memory_limit = DEDUP_EXTSORT_MIN_MEMORY;
    p.order = DEDUP_EXTSORT_SORTED;
    p.output = DEDUP_EXTSORT_DUPLICATES;
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_ERR_INVALID_ARG);
    p.output = (dedup_extsort_output)9;
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_ERR_INVALID_ARG);
    dedup_extsort_free(NULL);
}

/* Every allocation failing in turn: a clean NOMEM (or success), no leak. */
static void test_oom(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 8};
    input in = make_input(&g, 3000, true, 60);
    char *dir = make_tmpdir();
    for (int order = 0; order < 2; order++) {
        capture want;
        reference(&in, (dedup_extsort_order)order, DEDUP_EXTSORT_COUNT, &want);
        bool succeeded = false;
        for (uint64_t at = 1; at < 5000 && !succeeded; at += (at < 200 ? 1 : 37)) {
            tu_failing_alloc fa;
            dedup_allocator al = tu_failing_allocator(&fa, at);
            dedup_extsort_params p;
            tu_extsort_params(&p);
            p.memory_limit = 64 << 10;
            p.order = (dedup_extsort_order)order;
            p.output = DEDUP_EXTSORT_COUNT;
            p.tmpdir = dir;
            capture got;
            dedup_status s = run_engine(&in, &p, &got, NULL, &al);
            if (s == DEDUP_OK) {
                assert_same(&got, &want, "oom run that succeeded");
                succeeded = true;
            } else {
                assert_int_equal(s, DEDUP_ERR_NOMEM);
            }
            assert_int_equal(fa.live, 0);
            cap_free(&got);
        }
        assert_true(succeeded);
        cap_free(&want);
    }
    assert_int_equal(dir_entries(dir), 0);
    rmdir(dir);
    free(dir);
    input_free(&in);
}

/* A seed different from the digests' still gives exact results (partitions
 * below the top level rehash with params.seed; only balance could suffer). */
static void test_seed_mismatch(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 9};
    input in = make_input(&g, 20000, true, 60);
    dedup_extsort_params p;
    tu_extsort_params(&p);
    p.memory_limit = 64 << 10;
    p.seed = 12345; /* run_engine hashes with p.seed; the engine is told another */
    capture got, want;
    memset(&got, 0, sizeof got);
    p.emit = cap_emit;
    p.emit_ctx = &got;
    dedup_extsort *es;
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
    for (size_t i = 0; i < in.n; i++)
        assert_int_equal(dedup_extsort_push(es, in.r[i].rec, in.r[i].reclen, in.r[i].key,
                                            in.r[i].keylen, dedup_hash(in.r[i].key, in.r[i].keylen, 777)),
                         DEDUP_OK);
    assert_int_equal(dedup_extsort_finish(es), DEDUP_OK);
    dedup_extsort_free(es);
    reference(&in, DEDUP_EXTSORT_FIRST_OCCURRENCE, DEDUP_EXTSORT_FIRST, &want);
    assert_same(&got, &want, "seed mismatch");
    cap_free(&got);
    cap_free(&want);
    input_free(&in);
}

/* Pushes 'in' to an engine with params 'p' in push_batch calls of 1..maxb
 * records (random sizes) and checks the output against the reference. */
static void push_batches(const input *in, dedup_extsort_params *p, tu_rng *g, size_t maxb,
                         const char *what)
{
    capture got = {0}, want;
    p->emit = cap_emit;
    p->emit_ctx = &got;
    dedup_extsort *es;
    assert_int_equal(dedup_extsort_create(p, NULL, &es), DEDUP_OK);
    const void **recs = calloc(maxb, sizeof *recs), **keys = calloc(maxb, sizeof *keys);
    size_t *lens = calloc(maxb, sizeof *lens), *klens = calloc(maxb, sizeof *klens);
    dedup_digest *dig = calloc(maxb, sizeof *dig);
    assert_true(recs && keys && lens && klens && dig);
    for (size_t i = 0; i < in->n;) {
        size_t b = 1 + (size_t)tu_below(g, (uint32_t)maxb);
        if (b > in->n - i)
            b = in->n - i;
        for (size_t j = 0; j < b; j++) {
            const rec *r = &in->r[i + j];
            recs[j] = r->rec;
            lens[j] = r->reclen;
            keys[j] = r->key;
            klens[j] = r->keylen;
            dig[j] = dedup_hash(r->key, r->keylen, p->seed);
        }
        assert_int_equal(dedup_extsort_push_batch(es, b, recs, lens, keys, klens, dig), DEDUP_OK);
        i += b;
    }
    assert_int_equal(dedup_extsort_finish(es), DEDUP_OK);
    dedup_extsort_stats st;
    dedup_extsort_stats_get(es, &st);
    assert_int_equal(st.records_in, in->n);
    assert_int_equal(st.bytes_spilled, st.bytes_read_back);
    dedup_extsort_free(es);
    reference(in, p->order, p->output, &want);
    assert_same(&got, &want, what);
    cap_free(&got);
    cap_free(&want);
    free(recs);
    free(keys);
    free(lens);
    free(klens);
    free(dig);
}

/* push_batch is push, batched: same output for random batch sizes. */
static void test_push_batch(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 10};
    input in = make_input(&g, 20000, true, 80);
    for (int order = 0; order < 2; order++) {
        dedup_extsort_params p;
        tu_extsort_params(&p);
        p.memory_limit = 64 << 10;
        p.order = (dedup_extsort_order)order;
        p.output = DEDUP_EXTSORT_COUNT;
        push_batches(&in, &p, &g, 100, "push_batch");
    }
    input_free(&in);
}

/* The same at 2 MiB: in the _mt build, batches after the spill are spilled
 * on two threads (extsort_scatter.c).  Batches of up to 40,000 records (more
 * than one pass of 16,384; 4 KiB partition buffers, so big batches overflow
 * some and take the one-thread pass too) or 300, every first-occurrence
 * output, keys separate or not, frames raw or not. */
static void test_threads_push_batch_2m(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 11};
    char *dir = make_tmpdir();
    for (int k = 0; k < 4; k++) {
        int sep = k % 2;
        input in = make_input(&g, 60000, sep, 100);
        dedup_extsort_params p;
        tu_extsort_params(&p);
        p.memory_limit = 2 << 20;
        p.output = kinds[k];
        p.tmpdir = dir;
        p.raw_frames = k < 2;
        char what[96];
        snprintf(what, sizeof what, "push_batch 2 MiB sep=%d %s", sep, kind_names[k]);
        push_batches(&in, &p, &g, k % 2 == 0 ? 40000 : 300, what);
        input_free(&in);
    }
    assert_int_equal(dir_entries(dir), 0);
    assert_int_equal(rmdir(dir), 0);
    free(dir);
}

/* Keys sharing a long prefix (the sort starts past it), some of them ending
 * inside it or exactly at a word boundary, in sorted order. */
static void test_sorted_common_prefix(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 11};
    const char *pre = "https://www.common-prefix.example/path/";
    size_t pl = strlen(pre);
    input in;
    in.n = 30000;
    in.r = calloc(in.n, sizeof(rec));
    assert_non_null(in.r);
    for (size_t i = 0; i < in.n; i++) {
        uint64_t id = tu_below(&g, 12000);
        size_t cut = id % 97 == 0 ? (size_t)(id % pl) : pl; /* a few end inside the prefix */
        char *k = malloc(pl + 32);
        assert_non_null(k);
        memcpy(k, pre, cut);
        size_t len = cut;
        if (cut == pl)
            len += (size_t)snprintf(k + pl, 32, "%llu", (unsigned long long)(id * 2654435761u % 100000));
        in.r[i].key = in.r[i].rec = k;
        in.r[i].keylen = in.r[i].reclen = len;
    }
    for (int k = 0; k < 4; k++) {
        if (kinds[k] == DEDUP_EXTSORT_DUPLICATES)
            continue;
        for (int big = 0; big < 2; big++) {
            dedup_extsort_params p;
            tu_extsort_params(&p);
            p.memory_limit = big ? 64 << 20 : 64 << 10;
            p.order = DEDUP_EXTSORT_SORTED;
            p.output = kinds[k];
            capture got, want;
            assert_int_equal(run_engine(&in, &p, &got, NULL, NULL), DEDUP_OK);
            reference(&in, p.order, p.output, &want);
            assert_same(&got, &want, "common prefix");
            cap_free(&got);
            cap_free(&want);
        }
    }
    input_free(&in);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--driver") == 0)
        return extsort_driver_main(argc - 2, argv + 2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_memory),
        cmocka_unit_test(test_tiny_budget_multilevel),
        cmocka_unit_test(test_one_level),
        cmocka_unit_test(test_record_larger_than_budget),
        cmocka_unit_test(test_empty_input),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_write_failure),
        cmocka_unit_test(test_threads_write_failure_1m),
        cmocka_unit_test(test_one_level_1m),
        cmocka_unit_test(test_threads_corrupt_frame_1m),
        cmocka_unit_test(test_threads_parallel_2m),
        cmocka_unit_test(test_threads_raw_frames),
        cmocka_unit_test(test_threads_write_failure_2m),
        cmocka_unit_test(test_tmpdir_missing),
        cmocka_unit_test(test_corrupt_frame),
        cmocka_unit_test(test_emit_cancel),
        cmocka_unit_test(test_tmp_in_memory),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_seed_mismatch),
        cmocka_unit_test(test_push_batch),
        cmocka_unit_test(test_threads_push_batch_2m),
        cmocka_unit_test(test_sorted_common_prefix),
    };
#if EXTSORT_THREADS > 1
    /* only the cases whose budgets get the compressing thread (>= ~860 KiB) */
    cmocka_set_test_filter("test_threads_*");
#endif
    return cmocka_run_group_tests(tests, NULL, NULL);
}
