/*
 * test_extsort_mem.c - the external engine's peak memory, measured by the
 * kernel: a child process deduplicates an input 20x its budget (generated on
 * the fly, never stored) and its ru_maxrss must stay under budget + 16 MiB.
 * A separate program, and a child process, so nothing else's memory counts.
 * Under the sanitizers (whose shadow memory and quarantine inflate RSS) the
 * engine's own accounting (stats.peak_memory) is checked instead, and is
 * checked in every build: budget + 1% (spill region lists).  A second test
 * holds that accounting to budget + 2% at a 256 KiB budget on an input 128x
 * the budget, where a list entry per spilled frame (the engine before spill
 * regions) took more than half the budget again.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dedup/extsort.h"
#include "extsort_threads.h"
#include "dedup/hash.h"

#define BUDGET (UINT64_C(4) << 20)
#define INPUT (20 * BUDGET)

static uint64_t g_out;
static int count_emit(void *ctx, const void *rec, size_t len, uint64_t count)
{
    (void)ctx; (void)rec; (void)len; (void)count;
    g_out++;
    return 0;
}

/* Pushes d distinct ~60-byte lines, each twice, in two differently permuted
 * passes; '*pushed' gets the bytes pushed. */
static dedup_status push_urls(dedup_extsort *es, const dedup_extsort_params *p, uint64_t d,
                              uint64_t seed, uint64_t *pushed)
{
    char line[128];
    *pushed = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t i = 0; i < d; i++) {
            uint64_t id = pass == 0 ? i : (i * 7919 + seed) % d; /* 7919 prime, d not a multiple */
            int n = snprintf(line, sizeof line,
                             "https://www.example%03llu.com/some/path/%012llu.html?x=%llu",
                             (unsigned long long)(id % 997), (unsigned long long)id,
                             (unsigned long long)(id * 31 % 1000));
            dedup_status s = dedup_extsort_push(es, line, (size_t)n, NULL, 0,
                                                dedup_hash(line, (size_t)n, p->seed));
            if (s != DEDUP_OK)
                return s;
            *pushed += (uint64_t)n;
        }
    }
    return DEDUP_OK;
}

/* Returns 0 when every bound holds; prints what it measured. */
static int child(uint64_t seed)
{
    dedup_extsort_params p;
    tu_extsort_params(&p);
    p.memory_limit = BUDGET;
    p.emit = count_emit;
    dedup_extsort *es;
    if (dedup_extsort_create(&p, NULL, &es) != DEDUP_OK)
        return 10;
    /* 2 * d * 60 bytes = INPUT */
    uint64_t d = INPUT / 2 / 60, pushed;
    if (push_urls(es, &p, d, seed, &pushed) != DEDUP_OK)
        return 11;
    if (dedup_extsort_finish(es) != DEDUP_OK)
        return 12;
    dedup_extsort_stats st;
    dedup_extsort_stats_get(es, &st);
    dedup_extsort_free(es);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t rss = (uint64_t)ru.ru_maxrss * 1024;
    fprintf(stderr, "input %llu bytes, budget %llu, peak_memory %llu, ru_maxrss %llu, spilled %llu, out %llu/%llu\n",
            (unsigned long long)pushed, (unsigned long long)BUDGET,
            (unsigned long long)st.peak_memory, (unsigned long long)rss,
            (unsigned long long)st.bytes_spilled, (unsigned long long)g_out, (unsigned long long)d);
    if (g_out != d || !st.spilled || pushed < INPUT * 9 / 10)
        return 13;
    if (st.peak_memory > BUDGET + BUDGET / 100)
        return 14;
#if !defined(DEDUP_SANITIZED) && !defined(DEDUP_TSANITIZED) /* sanitizer shadow memory */
    if (rss > BUDGET + (UINT64_C(16) << 20))
        return 15;
#endif
    return 0;
}

static void test_peak_rss(void **state)
{
    (void)state;
    uint64_t seed = tu_seed() % 1000;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child(seed));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_tiny_budget_bookkeeping(void **state)
{
    (void)state;
    enum { TINY = 256 << 10 };
    uint64_t seed = tu_seed();
    dedup_extsort_params p;
    tu_extsort_params(&p);
    p.memory_limit = TINY;
    p.emit = count_emit;
    g_out = 0;
    dedup_extsort *es;
    assert_int_equal(dedup_extsort_create(&p, NULL, &es), DEDUP_OK);
    /* 2 * d * 60 bytes: 128x the budget */
    uint64_t d = (uint64_t)TINY * 128 / 2 / 60, pushed;
    assert_int_equal(push_urls(es, &p, d, seed, &pushed), DEDUP_OK);
    assert_int_equal(dedup_extsort_finish(es), DEDUP_OK);
    dedup_extsort_stats st;
    dedup_extsort_stats_get(es, &st);
    dedup_extsort_free(es);
    fprintf(stderr, "budget %d, peak_memory %llu, spilled %llu, depth %llu, out %llu/%llu\n", TINY,
            (unsigned long long)st.peak_memory, (unsigned long long)st.bytes_spilled,
            (unsigned long long)st.max_depth, (unsigned long long)g_out, (unsigned long long)d);
    assert_int_equal(g_out, d);
    assert_true(st.spilled);
    assert_true(st.peak_memory <= TINY + TINY / 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_peak_rss),
                                       cmocka_unit_test(test_tiny_budget_bookkeeping)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
