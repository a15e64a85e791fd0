/*
 * test_extsort_giant.c - records far larger than the external engine's
 * budget (256 KiB here), pushed in pieces (push_begin/part/end) or whole, and
 * emitted through emit_piece: both orders and every output kind against a
 * naive reference, with repeats and near-repeats (differing only in the last
 * byte, or a prefix of another), and proof that none is held whole: the
 * engine's peak accounting and largest allocation, and, in a child process
 * that generates its giants on the fly, the kernel's ru_maxrss.
 * A separate program so that its ru_maxrss is its own.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dedup/extsort.h"
#include "extsort_threads.h"
#include "dedup/hash.h"

#define BUDGET (UINT64_C(256) << 10)
#define GIANT ((size_t)4 << 20)

/* Byte i of generated content 'base'. */
static unsigned char gen_byte(unsigned base, size_t i)
{
    uint64_t x = (uint64_t)i / 64 * 0x9E3779B97F4A7C15u + base * 0xBF58476D1CE4E5B9u;
    x ^= x >> 29;
    return (unsigned char)("abcdefghijklmnopqrstuvwxyz/._-0123456789"[(x + i) % 40]);
}

/* ---- an allocator that remembers its largest block ----------------------- */

typedef struct big_alloc {
    size_t largest;
} big_alloc;

static void *ba_malloc(void *ctx, size_t n)
{
    big_alloc *b = ctx;
    if (n > b->largest)
        b->largest = n;
    return malloc(n);
}
static void *ba_calloc(void *ctx, size_t c, size_t n)
{
    big_alloc *b = ctx;
    if (c * n > b->largest)
        b->largest = c * n;
    return calloc(c, n);
}
static void *ba_realloc(void *ctx, void *p, size_t n)
{
    big_alloc *b = ctx;
    if (n > b->largest)
        b->largest = n;
    return realloc(p, n);
}
static void ba_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* ---- output capture: a hash of each record, never the record -------------- */

typedef struct orec {
    uint64_t h, len, count;
    bool pieces;
} orec;

typedef struct capture {
    orec *o;
    size_t n, cap;
    uint64_t h, len; /* the giant being received */
    bool open;
    int bad;         /* piece protocol violations */
} capture;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *q = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ q[i]) * 0x100000001b3u;
    return h;
}
#define FNV0 0xcbf29ce484222325u

static void cap_push(capture *c, uint64_t h, uint64_t len, uint64_t count, bool pieces)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->o = realloc(c->o, c->cap * sizeof(orec));
        assert_non_null(c->o);
    }
    c->o[c->n++] = (orec){h, len, count, pieces};
}

static int cap_emit(void *ctx, const void *rec, size_t len, uint64_t count)
{
    capture *c = ctx;
    if (c->open)
        c->bad++;
    cap_push(c, fnv(FNV0, rec, len), len, count, false);
    return 0;
}

static int cap_piece(void *ctx, const void *p, size_t len, bool first, bool last, uint64_t count)
{
    capture *c = ctx;
    if (first != !c->open)
        c->bad++;
    if (first) {
        c->h = FNV0;
        c->len = 0;
        c->open = true;
    }
    c->h = fnv(c->h, p, len);
    c->len += len;
    if (last) {
        cap_push(c, c->h, c->len, count, true);
        c->open = false;
    }
    return 0;
}

/* ---- the input ------------------------------------------------------------ */

typedef struct rec {
    const unsigned char *p;
    size_t len;
    int how; /* 0 push, 1 pieces, 2 push of a giant whole */
} rec;

static int kcmp(const rec *a, const rec *b)
{
    size_t m = a->len < b->len ? a->len : b->len;
    int c = m ? memcmp(a->p, b->p, m) : 0;
    return c ? c : (a->len < b->len ? -1 : a->len > b->len);
}

static const rec *g_recs;
static int idx_cmp(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    int c = kcmp(&g_recs[a], &g_recs[b]);
    return c ? c : (a < b ? -1 : a > b);
}

static void reference(const rec *r, size_t n, dedup_extsort_order order, dedup_extsort_output kind,
                      size_t giant_min, capture *out)
{
    size_t *idx = malloc(n * sizeof(size_t)), *grp = malloc(n * sizeof(size_t));
    uint64_t *cnt = calloc(n, sizeof(uint64_t));
    bool *first = calloc(n, sizeof(bool));
    size_t *firstof = malloc(n * sizeof(size_t));
    assert_true(idx && grp && cnt && first && firstof);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    g_recs = r;
    qsort(idx, n, sizeof(size_t), idx_cmp);
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = idx[i];
        if (i == 0 || kcmp(&r[j], &r[idx[i - 1]]) != 0) {
            grp[ng++] = j;
            first[j] = true;
        }
        firstof[j] = grp[ng - 1];
        cnt[grp[ng - 1]]++;
    }
    memset(out, 0, sizeof *out);
#define OUT(j, c) cap_push(out, fnv(FNV0, r[j].p, r[j].len), r[j].len, (c), r[j].len > giant_min)
    if (kind == DEDUP_EXTSORT_DUPLICATES) {
        for (size_t i = 0; i < n; i++)
            if (!first[i])
                OUT(i, 1);
    } else {
        for (size_t k = 0; k < (order == DEDUP_EXTSORT_SORTED ? ng : n); k++) {
            size_t j = order == DEDUP_EXTSORT_SORTED ? grp[k] : k;
            if (!first[j] || (kind == DEDUP_EXTSORT_UNIQUE && cnt[j] != 1))
                continue;
            OUT(j, kind == DEDUP_EXTSORT_COUNT ? cnt[j] : 1);
        }
    }
#undef OUT
    free(idx);
    free(grp);
    free(cnt);
    free(first);
    free(firstof);
}

static void push_rec(dedup_extsort *es, const rec *r, tu_rng *g, uint64_t seed)
{
    if (r->how == 0 || r->how == 2) {
        assert_int_equal(dedup_extsort_push(es, r->p, r->len, NULL, 0, dedup_hash(r->p, r->len, seed)),
                         DEDUP_OK);
        return;
    }
    assert_int_equal(dedup_extsort_push_begin(es), DEDUP_OK);
    size_t at = 0;
    while (at < r->len) {
        size_t k = 1 + (size_t)tu_below(g, tu_below(g, 4) == 0 ? 300000 : 5000);
        if (k > r->len - at)
            k = r->len - at;
        assert_int_equal(dedup_extsort_push_part(es, r->p + at, k), DEDUP_OK);
        if (tu_below(g, 8) == 0)
            assert_int_equal(dedup_extsort_push_part(es, r->p, 0), DEDUP_OK);
        at += k;
    }
    assert_int_equal(dedup_extsort_push_end(es), DEDUP_OK);
}

static const char *kind_names[] = {"first", "duplicates", "count", "unique"};

static void test_giants_against_reference(void **state)
{
    (void)state;
    tu_rng g = {tu_seed() + 4242};
    size_t giant_min = (size_t)(BUDGET / 16);
    /* distinct contents */
    unsigned char *A = malloc(GIANT), *A2 = malloc(GIANT), *B = malloc(3 * GIANT / 4);
    unsigned char *M = malloc(giant_min + 1);
    assert_true(A && A2 && B && M);
    for (size_t i = 0; i < GIANT; i++)
        A[i] = A2[i] = gen_byte(1, i);
    A2[GIANT - 1] = (unsigned char)(A[GIANT - 1] ^ 1); /* differs in the last byte only */
    for (size_t i = 0; i < 3 * GIANT / 4; i++)
        B[i] = gen_byte(2, i);
    for (size_t i = 0; i <= giant_min; i++)
        M[i] = gen_byte(3, i);
    /* small records: ~20000 over 8000 keys (spills at this budget) */
    size_t nsmall = 20000, n = 0;
    rec *r = calloc(nsmall + 64, sizeof(rec));
    char *sm = malloc(nsmall * 48);
    assert_true(r && sm);
    for (size_t i = 0; i < nsmall; i++) {
        uint64_t id = tu_below(&g, 8000);
        int len = snprintf(sm + i * 48, 48, "https://h%llu.example/%llu", (unsigned long long)(id % 97),
                           (unsigned long long)id);
        r[n++] = (rec){(unsigned char *)sm + i * 48, (size_t)len, tu_below(&g, 50) == 0};
    }
    /* giants and their relatives, spliced in at random places */
    rec extra[] = {
        {A, GIANT, 1},      {A, GIANT, 1},          {A2, GIANT, 1},     {A, GIANT, 2},
        {B, 3 * GIANT / 4, 1}, {A2, GIANT, 1},      {A, GIANT / 2, 1},  /* a prefix of A */
        {A, 40, 1},         {A, 40, 0},             /* a short prefix: an ordinary record */
        {M, giant_min, 1},  {M, giant_min + 1, 1},  {M, giant_min + 1, 2}, {M, giant_min, 0},
        {A, GIANT / 2, 2},  {B, 3 * GIANT / 4, 1},
    };
    for (size_t e = 0; e < sizeof extra / sizeof *extra; e++) {
        size_t at = e == 0 ? 0 : (size_t)tu_below(&g, n + 1); /* one giant first of all */
        memmove(r + at + 1, r + at, (n - at) * sizeof(rec));
        r[at] = extra[e];
        n++;
    }
    for (int order = 0; order < 2; order++) {
        for (int k = 0; k < 4; k++) {
            if (order == DEDUP_EXTSORT_SORTED && k == DEDUP_EXTSORT_DUPLICATES)
                continue;
            big_alloc ba = {0};
            dedup_allocator al = {ba_malloc, ba_calloc, ba_realloc, ba_free, &ba};
            capture got = {0}, want;
            dedup_extsort_params p;
            tu_extsort_params(&p);
            p.memory_limit = BUDGET;
            p.order = (dedup_extsort_order)order;
            p.output = (dedup_extsort_output)k;
            p.emit = cap_emit;
            p.emit_piece = cap_piece;
            p.emit_ctx = &got;
            dedup_extsort *es;
            assert_int_equal(dedup_extsort_create(&p, &al, &es), DEDUP_OK);
            assert_int_equal(dedup_extsort_giant_min(es), giant_min);
            for (size_t i = 0; i < n; i++)
                push_rec(es, &r[i], &g, p.seed);
            assert_int_equal(dedup_extsort_finish(es), DEDUP_OK);
            dedup_extsort_stats st;
            dedup_extsort_stats_get(es, &st);
            dedup_extsort_free(es);
            reference(r, n, p.order, p.output, giant_min, &want);
            fprintf(stderr, "order %d %s: %zu out (want %zu), peak %llu of %llu, largest block %zu, "
                            "spilled %llu (raw %llu)\n",
                    order, kind_names[k], got.n, want.n, (unsigned long long)st.peak_memory,
                    (unsigned long long)BUDGET, ba.largest, (unsigned long long)st.bytes_spilled,
                    (unsigned long long)st.bytes_spilled_raw);
            assert_int_equal(got.bad, 0);
            assert_false(got.open);
            assert_int_equal(got.n, want.n);
            for (size_t i = 0; i < got.n; i++) {
                if (got.o[i].h != want.o[i].h || got.o[i].len != want.o[i].len ||
                    got.o[i].count != want.o[i].count || got.o[i].pieces != want.o[i].pieces)
                    fprintf(stderr, "record %zu: len %llu/%llu count %llu/%llu pieces %d/%d\n", i,
                            (unsigned long long)got.o[i].len, (unsigned long long)want.o[i].len,
                            (unsigned long long)got.o[i].count, (unsigned long long)want.o[i].count,
                            got.o[i].pieces, want.o[i].pieces);
                assert_int_equal(got.o[i].h, want.o[i].h);
                assert_int_equal(got.o[i].len, want.o[i].len);
                assert_int_equal(got.o[i].count, want.o[i].count);
                assert_int_equal(got.o[i].pieces, want.o[i].pieces);
            }
            assert_true(st.spilled);
            /* never held whole: the engine stays within its budget and
             * never asks for a block anywhere near a giant's size */
            assert_true(st.peak_memory <= BUDGET + BUDGET / 50);
            assert_true(ba.largest < BUDGET);
            free(got.o);
            free(want.o);
        }
    }
    free(r);
    free(sm);
    free(A);
    free(A2);
    free(B);
    free(M);
}

/* ---- ru_maxrss: a child generates its giants on the fly -------------------- */

static uint64_t g_bytes, g_recs_out;
static int count_piece(void *ctx, const void *p, size_t len, bool first, bool last, uint64_t count)
{
    (void)ctx; (void)p; (void)first; (void)count;
    g_bytes += len;
    g_recs_out += last;
    return 0;
}
static int count_emit(void *ctx, const void *p, size_t len, uint64_t count)
{
    (void)ctx; (void)p; (void)count;
    g_bytes += len;
    g_recs_out++;
    return 0;
}

static int child(void)
{
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    dedup_extsort_params p;
    tu_extsort_params(&p);
    p.memory_limit = BUDGET;
    p.emit = count_emit;
    p.emit_piece = count_piece;
    dedup_extsort *es;
    if (dedup_extsort_create(&p, NULL, &es) != DEDUP_OK)
        return 10;
    /* 8 giants of 4 MiB over 3 contents: base 1, base 1 with its last byte
     * changed, base 2; plus small records */
    static const int base[] = {1, 1, 9, 2, 1, 9, 2, 9}; /* 9: base 1, last byte changed */
    unsigned char piece[4096];
    char line[64];
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < 2000; i++) {
            int len = snprintf(line, sizeof line, "small-%d-%d", i, k % 2);
            if (dedup_extsort_push(es, line, (size_t)len, NULL, 0, dedup_hash(line, (size_t)len, p.seed)))
                return 11;
        }
        if (dedup_extsort_push_begin(es))
            return 12;
        for (size_t at = 0; at < GIANT; at += sizeof piece) {
            for (size_t i = 0; i < sizeof piece; i++)
                piece[i] = gen_byte(base[k] == 9 ? 1 : (unsigned)base[k], at + i);
            if (base[k] == 9 && at + sizeof piece == GIANT)
                piece[sizeof piece - 1] ^= 1;
            if (dedup_extsort_push_part(es, piece, sizeof piece))
                return 13;
        }
        if (dedup_extsort_push_end(es))
            return 14;
    }
    if (dedup_extsort_finish(es))
        return 15;
    dedup_extsort_stats st;
    dedup_extsort_stats_get(es, &st);
    dedup_extsort_free(es);
    getrusage(RUSAGE_SELF, &ru1);
    long grew = ru1.ru_maxrss - ru0.ru_maxrss; /* KiB */
    fprintf(stderr, "child: %llu records out, %llu bytes, peak_memory %llu, ru_maxrss %ld -> %ld KiB\n",
            (unsigned long long)g_recs_out, (unsigned long long)g_bytes,
            (unsigned long long)st.peak_memory, ru0.ru_maxrss, ru1.ru_maxrss);
    if (g_recs_out != 4000 + 3 || g_bytes != 3 * GIANT + 2 * (10 * 9 + 90 * 10 + 900 * 11 + 1000 * 12))
        return 16;
    if (st.peak_memory > BUDGET + BUDGET / 50)
        return 17;
#if !defined(DEDUP_SANITIZED) && !defined(DEDUP_TSANITIZED) /* sanitizer shadow memory */
    if (grew * 1024 >= (long)GIANT / 2) /* a giant held whole would add 4 MiB */
        return 18;
#else
    (void)grew;
#endif
    return 0;
}

static void test_giant_rss(void **state)
{
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_piece_misuse(void **state)
{
    (void)state;
    capture got = {0};
    dedup_extsort_params p;
    tu_extsort_params(&p);
    p.memory_limit = BUDGET;
    p.emit = cap_emit;
    p.emit_ctx = &got;
    dedup_extsort *es;
    /* no emit_piece: no pieces */
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_begin(es), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_extsort_push_part(es, "x", 1), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_extsort_push_end(es), DEDUP_ERR_INVALID_ARG);
    dedup_extsort_free(es);
    p.emit_piece = cap_piece;
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_begin(es), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_begin(es), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_extsort_push(es, "a", 1, NULL, 0, dedup_hash("a", 1, p.seed)),
                     DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_extsort_finish(es), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_extsort_push_part(es, "abc", 3), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_end(es), DEDUP_OK);
    /* a separate key longer than giant_min */
    size_t big = dedup_extsort_giant_min(es) + 1;
    char *k = calloc(1, big);
    assert_non_null(k);
    assert_int_equal(dedup_extsort_push(es, "r", 1, k, big, dedup_hash(k, big, p.seed)),
                     DEDUP_ERR_LIMIT);
    free(k);
    dedup_extsort_free(es);
    /* an empty record in pieces; digests agree with dedup_hash */
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_begin(es), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_end(es), DEDUP_OK);
    assert_int_equal(dedup_extsort_push(es, "", 0, NULL, 0, dedup_hash("", 0, p.seed)), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_begin(es), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_part(es, "ab", 2), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_part(es, "c", 1), DEDUP_OK);
    assert_int_equal(dedup_extsort_push_end(es), DEDUP_OK);
    assert_int_equal(dedup_extsort_push(es, "abc", 3, NULL, 0, dedup_hash("abc", 3, p.seed)), DEDUP_OK);
    assert_int_equal(dedup_extsort_finish(es), DEDUP_OK);
    dedup_extsort_free(es);
    /* "abc" from the engine freed unfinished (streamed at once), then "" and "abc" */
    assert_int_equal(got.n, 3);
    free(got.o);
}

/* Giants pushed whole only, nothing spilled, sorted order (the giant's
 * prefix buffer must exist without push_begin). */
static void test_giant_whole_sorted(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        capture got = {0};
        dedup_extsort_params p;
        tu_extsort_params(&p);
        p.memory_limit = BUDGET;
        p.order = (dedup_extsort_order)order;
        p.output = DEDUP_EXTSORT_COUNT;
        p.emit = cap_emit;
        p.emit_piece = cap_piece;
        p.emit_ctx = &got;
        dedup_extsort *es;
        assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
        size_t big = 100000;
        char *G = malloc(big);
        assert_non_null(G);
        memset(G, 'm', big);
        const char *recs[] = {"z", G, "a", G, "b"};
        for (int i = 0; i < 5; i++) {
            size_t len = recs[i] == G ? big : 1;
            assert_int_equal(dedup_extsort_push(es, recs[i], len, NULL, 0, dedup_hash(recs[i], len, p.seed)),
                             DEDUP_OK);
        }
        assert_int_equal(dedup_extsort_finish(es), DEDUP_OK);
        dedup_extsort_free(es);
        assert_int_equal(got.n, 4);
        /* sorted: a b G z; input order: z G a b */
        size_t gi = order == DEDUP_EXTSORT_SORTED ? 2 : 1;
        assert_int_equal(got.o[gi].len, big);
        assert_int_equal(got.o[gi].h, fnv(FNV0, G, big));
        assert_int_equal(got.o[gi].count, 2);
        assert_true(got.o[gi].pieces);
        assert_int_equal(got.o[order == DEDUP_EXTSORT_SORTED ? 3 : 0].h, fnv(FNV0, "z", 1));
        free(G);
        free(got.o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_giant_rss), /* first: before this process grows */
        cmocka_unit_test(test_giants_against_reference),
        cmocka_unit_test(test_piece_misuse),
        cmocka_unit_test(test_giant_whole_sorted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
