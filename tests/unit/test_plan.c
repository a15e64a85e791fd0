/*
 * test_plan.c - dedup_plan_make() on the articles' cases, with the
 * recommendation each must give and its figures checked against the
 * library's own sizing functions; the invariants of every plan over a
 * grid of answers; and argument errors.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/bloom.h"
#include "dedup/cuckoo.h"
#include "dedup/plan.h"
#include "dedup/seen.h"
#include "dedup/window.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define GIB (UINT64_C(1) << 30)

static dedup_plan plan_of(const dedup_plan_question *q)
{
    dedup_plan p;
    assert_int_equal(dedup_plan_make(q, &p), DEDUP_OK);
    return p;
}

static const dedup_plan_choice *rec(const dedup_plan *p) { return &p->choices[p->chosen]; }

/* What every plan must satisfy. */
static void invariants(const dedup_plan_question *q, const dedup_plan *p)
{
    const dedup_plan_choice *w = rec(p);
    assert_true(w->considered);
    assert_true(strlen(w->reason) > 20);
    assert_non_null(strstr(w->command, "dedup"));
    size_t considered = 0;
    for (size_t m = 0; m < DEDUP_PLAN_METHODS; m++) {
        const dedup_plan_choice *c = &p->choices[m];
        if (!c->considered)
            continue;
        considered++;
        assert_int_equal(c->method, m);
        if (m != (size_t)p->chosen)
            assert_true(strlen(c->reason) > 10); /* every alternative says why it lost */
        assert_true(c->nodes >= 1);
        assert_true((double)c->node_memory * c->nodes >= (double)c->memory * 0.999);
        if (c->feasible && q->memory)
            assert_true(c->node_memory <= q->memory);
        if (c->feasible && q->fpr == 0)
            assert_true(c->exact);
        /* The classic formula with a whole k reaches p within a fraction of a
         * percent (1.0019e-5 for 1e-5); the plan reports what the command gets. */
        if (c->feasible && !c->exact)
            assert_true(c->fpr <= q->fpr * 1.01);
        if (c->memory && c->memory != UINT64_MAX)
            assert_true(fabs(c->bits_per_key - (double)c->memory * 8 / (double)q->items) < 1e-6);
    }
    assert_int_equal(considered, p->count);
    /* The recommendation meets every answer whenever some method does. */
    bool any = false;
    for (size_t m = 0; m < DEDUP_PLAN_METHODS; m++)
        any |= p->choices[m].considered && p->choices[m].feasible;
    if (any && !w->feasible)
        fail_msg("n=%llu p=%g m=%llu stream=%d window=%llu del=%d infra=%d: %s is not feasible (%s)",
                 (unsigned long long)q->items, q->fpr, (unsigned long long)q->memory, q->stream,
                 (unsigned long long)q->window_us, q->deletes, q->infra,
                 dedup_plan_method_name(w->method), w->reason);
}

/* 10^10 URLs at 1 in 100,000: a Bloom filter, with its memory figure. */
static void test_urls_1e10_at_1e5(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan_question_init(&q);
    q.items = 10000000000ull;
    q.key_bytes = 80;
    q.fpr = 1e-5;
    dedup_plan p = plan_of(&q);
    invariants(&q, &p);
    const dedup_plan_choice *w = rec(&p);
    assert_true(w->method == DEDUP_PLAN_BLOCKED || w->method == DEDUP_PLAN_BLOOM);
    /* The figures are exactly the library's sizing. */
    uint64_t bits = w->method == DEDUP_PLAN_BLOCKED ? dedup_blocked_bits_for(q.items, q.fpr)
                                                    : dedup_bloom_bits_for(q.items, q.fpr);
    assert_int_equal(w->memory, (bits + 7) / 8);
    uint32_t k = w->method == DEDUP_PLAN_BLOCKED ? dedup_blocked_k_for(q.items, bits)
                                                 : dedup_bloom_k_for(q.items, bits);
    assert_int_equal(w->hashes, k);
    assert_true(w->fpr <= 1.01e-5 && w->fpr > 0);
    /* Classic: ceil(-n ln p / ln^2 2) = 239.6e9 bits = 27.90 GiB. */
    const dedup_plan_choice *bl = &p.choices[DEDUP_PLAN_BLOOM];
    assert_true(fabs((double)bl->memory - 1e10 * -log(1e-5) / (log(2) * log(2)) / 8) < 64);
    assert_true(w->memory < 40 * GIB);
    assert_non_null(strstr(w->command, "-n 10000000000"));
    assert_non_null(strstr(w->command, "-p 1e-05"));
    /* The exact set loses on memory, saying how much. */
    const dedup_plan_choice *ex = &p.choices[DEDUP_PLAN_EXACT];
    assert_true(ex->memory > 20 * w->memory);
    assert_non_null(strstr(ex->reason, "needs"));
    fprintf(stderr, "  %s: %s\n", dedup_plan_method_name(w->method), w->reason);
}

/* 10^8 UUIDs in 4 GB, exact: the exact set does not fit; 16-byte digests
 * do, and the reason says so; with 1 GB the external path. */
static void test_uuids_1e8_in_4g_exact(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan_question_init(&q);
    q.items = 100000000;
    q.key_bytes = 36;
    q.memory = 4 * GIB;
    dedup_plan p = plan_of(&q);
    invariants(&q, &p);
    const dedup_plan_choice *w = rec(&p);
    assert_true(w->method == DEDUP_PLAN_FINGERPRINT || w->method == DEDUP_PLAN_EXTERNAL);
    assert_false(p.choices[DEDUP_PLAN_EXACT].feasible);
    assert_non_null(strstr(p.choices[DEDUP_PLAN_EXACT].reason, "over the 4.00 GiB budget"));
    assert_non_null(strstr(w->reason, "exact set needs"));
    assert_true(w->memory <= q.memory);
    assert_int_equal(w->method, DEDUP_PLAN_FINGERPRINT);
    assert_true(w->fpr < 1e-20); /* 10^16 / 2^129 */
    fprintf(stderr, "  %s: %s\n", dedup_plan_method_name(w->method), w->reason);

    q.memory = GIB; /* digests no longer fit: the disk */
    p = plan_of(&q);
    invariants(&q, &p);
    w = rec(&p);
    assert_int_equal(w->method, DEDUP_PLAN_EXTERNAL);
    assert_true(w->disk >= q.items * 37 && w->io >= 3 * w->disk);
    assert_non_null(strstr(w->command, "-m 1G"));
    assert_non_null(strstr(p.choices[DEDUP_PLAN_FINGERPRINT].reason, "over the"));
}

/* Ad clicks, once per user per 10 minutes: a window. */
static void test_ad_clicks_window(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan_question_init(&q);
    q.items = 500000; /* users clicking within 10 minutes */
    q.stream = true;
    q.window_us = UINT64_C(600000000);
    dedup_plan p = plan_of(&q);
    invariants(&q, &p);
    const dedup_plan_choice *w = rec(&p);
    assert_int_equal(w->method, DEDUP_PLAN_WINDOW);
    assert_non_null(strstr(w->command, "--window 10m"));
    assert_false(p.choices[DEDUP_PLAN_EXACT].feasible); /* forever is wrong here */
    assert_non_null(strstr(p.choices[DEDUP_PLAN_EXACT].reason, "forever"));
    /* Accepting 1%: the exact window still fits in memory, and wins. */
    q.fpr = 0.01;
    p = plan_of(&q);
    invariants(&q, &p);
    assert_int_equal(rec(&p)->method, DEDUP_PLAN_WINDOW);
    /* 10^9 users a window in 8 GB at 1%: only the approximate one fits. */
    q.items = 1000000000;
    q.memory = 8 * GIB;
    p = plan_of(&q);
    invariants(&q, &p);
    assert_int_equal(rec(&p)->method, DEDUP_PLAN_WINDOW_APPROX);
    assert_true(rec(&p)->bits_per_key < 8 * 2.2);
}

/* 10^7 user-profile IDs that must be exact: the hash set. */
static void test_profile_ids_exact(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan_question_init(&q);
    q.items = 10000000;
    q.key_bytes = 20;
    dedup_plan p = plan_of(&q);
    invariants(&q, &p);
    assert_int_equal(rec(&p)->method, DEDUP_PLAN_EXACT);
    assert_true(rec(&p)->exact);
    assert_non_null(strstr(rec(&p)->command, "dedup -n 10000000"));
    assert_false(p.choices[DEDUP_PLAN_BLOOM].feasible);
    assert_non_null(strstr(p.choices[DEDUP_PLAN_BLOOM].reason, "not exact"));
}

/* Idempotency keys across machines with a TTL: Redis keys. */
static void test_idempotency_redis_ttl(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan_question_init(&q);
    q.items = 20000000; /* requests a day */
    q.stream = true;
    q.window_us = UINT64_C(86400000000);
    q.infra = DEDUP_PLAN_REDIS;
    dedup_plan p = plan_of(&q);
    invariants(&q, &p);
    const dedup_plan_choice *w = rec(&p);
    assert_int_equal(w->method, DEDUP_PLAN_REDIS_KEYS);
    assert_non_null(strstr(w->command, "dedup --redis redis://"));
    assert_non_null(strstr(w->command, "--redis-scheme keys"));
    assert_non_null(strstr(w->command, "--ttl 1d"));
    assert_true(w->memory >= q.items * 64);
    /* Local methods lose because other machines' keys would pass. */
    assert_non_null(strstr(p.choices[DEDUP_PLAN_WINDOW].reason, "another machine"));
    /* A Redis node holds 1 GiB: as many nodes as the keys need. */
    q.memory = GIB;
    p = plan_of(&q);
    invariants(&q, &p);
    w = rec(&p);
    assert_int_equal(w->method, DEDUP_PLAN_REDIS_KEYS);
    assert_int_equal(w->nodes, (uint32_t)ceil(q.items * DEDUP_PLAN_REDIS_KEY_BYTES / (double)GIB));
    assert_true(w->node_memory <= GIB);
}

/* A blacklist with deletes: cuckoo (or counting). */
static void test_blacklist_deletes(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan_question_init(&q);
    q.items = 1000000;
    q.fpr = 0.001;
    q.deletes = true;
    dedup_plan p = plan_of(&q);
    invariants(&q, &p);
    const dedup_plan_choice *w = rec(&p);
    assert_true(w->method == DEDUP_PLAN_CUCKOO || w->method == DEDUP_PLAN_COUNTING);
    assert_int_equal(w->method, DEDUP_PLAN_CUCKOO);
    uint32_t f = dedup_cuckoo_fingerprint_bits_for(q.fpr, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
    uint64_t nb = dedup_cuckoo_buckets_for(q.items, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
    assert_int_equal(w->memory, (uint64_t)ceil((double)nb * 4 * f / 8.0));
    assert_true(p.choices[DEDUP_PLAN_COUNTING].memory > w->memory);
    /* The filters' figures are the seen-set's own sizing. */
    assert_int_equal(w->memory, dedup_seen_bytes_for(DEDUP_SEEN_CUCKOO, q.items, q.fpr));
    assert_int_equal(p.choices[DEDUP_PLAN_COUNTING].memory,
                     dedup_seen_bytes_for(DEDUP_SEEN_COUNTING, q.items, q.fpr));
    assert_int_equal(p.choices[DEDUP_PLAN_BLOOM].memory,
                     dedup_seen_bytes_for(DEDUP_SEEN_BLOOM, q.items, q.fpr));
    assert_int_equal(p.choices[DEDUP_PLAN_BLOCKED].memory,
                     dedup_seen_bytes_for(DEDUP_SEEN_BLOCKED, q.items, q.fpr));
    assert_non_null(strstr(p.choices[DEDUP_PLAN_BLOOM].reason, "cannot delete"));
    assert_non_null(strstr(w->command, "-t cuckoo"));
}

/* Every figure of the filters and of the approximate window is the
 * library's own: the sizing calls for the filters (bits, k, rate, bytes),
 * and for the approximate window the memory of a window created with the
 * parameters the plan's command line gives it (the plan has no sizing call
 * to ask): never under it, and over it by at most 1% and the plan's 20 KB
 * allowance for fixed parts, so a figure a few percent off fails. */
static void test_figures_are_the_librarys(void **state)
{
    (void)state;
    static const uint64_t ns[] = {1000, 100000, 1000000, 3000000};
    static const double ps[] = {0.01, 0.001, 0.00001};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
            dedup_plan_question q;
            dedup_plan_question_init(&q);
            q.items = ns[i];
            q.fpr = ps[j];
            dedup_plan p = plan_of(&q);
            invariants(&q, &p);
            const dedup_plan_choice *c = &p.choices[DEDUP_PLAN_BLOOM];
            uint64_t bits = dedup_bloom_bits_for(q.items, q.fpr);
            assert_int_equal(c->memory, dedup_seen_bytes_for(DEDUP_SEEN_BLOOM, q.items, q.fpr));
            assert_int_equal(c->hashes, dedup_bloom_k_for(q.items, bits));
            assert_true(c->fpr == dedup_bloom_fpr_for(q.items, bits, c->hashes));
            assert_true(c->fpr <= q.fpr * 1.01); /* k is whole: a little either way */
            c = &p.choices[DEDUP_PLAN_BLOCKED];
            bits = dedup_blocked_bits_for(q.items, q.fpr);
            assert_int_equal(c->memory, dedup_seen_bytes_for(DEDUP_SEEN_BLOCKED, q.items, q.fpr));
            assert_int_equal(c->hashes, dedup_blocked_k_for(q.items, bits));
            assert_true(c->fpr == dedup_blocked_fpr_for(q.items, bits, c->hashes));
            assert_true(c->fpr <= q.fpr);
            c = &p.choices[DEDUP_PLAN_CUCKOO];
            assert_int_equal(c->memory, dedup_seen_bytes_for(DEDUP_SEEN_CUCKOO, q.items, q.fpr));
            assert_int_equal(p.choices[DEDUP_PLAN_COUNTING].memory,
                             dedup_seen_bytes_for(DEDUP_SEEN_COUNTING, q.items, q.fpr));

            /* The approximate window, as `dedup --mode blocked --window 10m
             * -n N -p P` builds it. */
            q.stream = true;
            q.window_us = UINT64_C(600000000);
            p = plan_of(&q);
            invariants(&q, &p);
            c = &p.choices[DEDUP_PLAN_WINDOW_APPROX];
            dedup_window_params wp;
            dedup_window_params_init(&wp);
            wp.mode = DEDUP_WINDOW_APPROX;
            wp.duration = q.window_us;
            wp.capacity = q.items;
            wp.fpr = q.fpr;
            dedup_window *w = NULL;
            assert_int_equal(dedup_window_create(&wp, NULL, &w), DEDUP_OK);
            double real = (double)dedup_window_memory_usage(w);
            dedup_window_free(w);
            print_message("window-approx n=%llu p=%g: plan %llu bytes, the window %.0f (%+.2f%%)\n",
                          (unsigned long long)q.items, q.fpr, (unsigned long long)c->memory, real,
                          ((double)c->memory / real - 1) * 100);
            /* never under the structure's memory; over it by the plan's
             * 20 KB allowance for the window's fixed parts at most */
            assert_true((double)c->memory >= real);
            assert_true((double)c->memory <= real * 1.01 + 20480);
            assert_true(c->fpr <= q.fpr);
        }
}

static void test_integer_keys(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan_question_init(&q);
    q.items = 100000000;
    q.int_keys = true;
    q.range_lo = 0;
    q.range_hi = 199999999; /* dense: a bit each */
    dedup_plan p = plan_of(&q);
    invariants(&q, &p);
    assert_int_equal(rec(&p)->method, DEDUP_PLAN_BITMAP);
    assert_int_equal(rec(&p)->memory, 200000000 / 8);
    assert_non_null(strstr(rec(&p)->command, "--range 0..199999999"));
    q.range_hi = UINT64_C(1) << 39; /* sparse: the integer set is smaller */
    p = plan_of(&q);
    invariants(&q, &p);
    assert_int_equal(rec(&p)->method, DEDUP_PLAN_U64);
    assert_non_null(strstr(rec(&p)->command, "--keys int"));
}

static void test_cluster_shards(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan_question_init(&q);
    q.items = 10000000000ull;
    q.memory = 64 * GIB;
    q.infra = DEDUP_PLAN_CLUSTER;
    dedup_plan p = plan_of(&q);
    invariants(&q, &p);
    const dedup_plan_choice *w = rec(&p);
    assert_int_equal(w->method, DEDUP_PLAN_SHARDED);
    assert_true(w->nodes >= 2 && w->node_memory <= q.memory);
    char want[64];
    snprintf(want, sizeof want, "dedup split -N %u", w->nodes);
    assert_non_null(strstr(w->command, want));
    /* Nodes given and too few: refused with the figure. */
    q.nodes = 2;
    p = plan_of(&q);
    invariants(&q, &p);
    assert_false(p.choices[DEDUP_PLAN_SHARDED].feasible);
    assert_non_null(strstr(p.choices[DEDUP_PLAN_SHARDED].reason, "each of the 2 machines"));
}

/* Invariants over a grid of answers. */
static void test_grid(void **state)
{
    (void)state;
    /* Small enough to run under sanitizers on a loaded machine: the blocked
     * filter's sizing is a search (milliseconds, more without optimisation). */
    static const uint64_t items[] = {1, 1000, 10000000}; /* 1e8 .. 1e10: the cases above */
    static const double fprs[] = {0, 0.01, 0.5};
    static const uint64_t mems[] = {0, 1 << 20};
    unsigned plans = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 2; c++)
                for (unsigned flags = 0; flags < 24; flags++) {
                    dedup_plan_question q;
                    dedup_plan_question_init(&q);
                    q.items = items[a];
                    q.fpr = fprs[b];
                    q.memory = mems[c];
                    q.stream = flags & 1;
                    q.window_us = (flags & 2) && q.stream ? 60000000 : 0;
                    q.deletes = flags & 4;
                    q.infra = (dedup_plan_infra)(flags >> 3); /* 0 .. 2 */
                    dedup_plan p = plan_of(&q);
                    invariants(&q, &p);
                    plans++;
                }
    fprintf(stderr, "  %u plans checked\n", plans);
}

static void test_errors(void **state)
{
    (void)state;
    dedup_plan_question q;
    dedup_plan p;
    dedup_plan_question_init(&q);
    assert_int_equal(dedup_plan_make(&q, &p), DEDUP_ERR_INVALID_ARG); /* items 0 */
    q.items = 10;
    assert_int_equal(dedup_plan_make(NULL, &p), DEDUP_ERR_INVALID_ARG);
    assert_int_equal(dedup_plan_make(&q, NULL), DEDUP_ERR_INVALID_ARG);
    q.fpr = 0.6;
    assert_int_equal(dedup_plan_make(&q, &p), DEDUP_ERR_INVALID_ARG);
    q.fpr = 0;
    q.window_us = 5;
    assert_int_equal(dedup_plan_make(&q, &p), DEDUP_ERR_INVALID_ARG); /* window, no stream */
    q.window_us = 0;
    q.range_lo = 5;
    q.range_hi = 9;
    assert_int_equal(dedup_plan_make(&q, &p), DEDUP_ERR_INVALID_ARG); /* range, no int keys */
    q.range_lo = q.range_hi = 0;
    q.items = (UINT64_C(1) << 48) + 1;
    assert_int_equal(dedup_plan_make(&q, &p), DEDUP_ERR_LIMIT);
    assert_string_equal(dedup_plan_method_name(DEDUP_PLAN_REDIS_KEYS), "redis-keys");
    assert_string_equal(dedup_plan_method_name(DEDUP_PLAN_METHODS), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urls_1e10_at_1e5),
        cmocka_unit_test(test_uuids_1e8_in_4g_exact),
        cmocka_unit_test(test_ad_clicks_window),
        cmocka_unit_test(test_profile_ids_exact),
        cmocka_unit_test(test_idempotency_redis_ttl),
        cmocka_unit_test(test_blacklist_deletes),
        cmocka_unit_test(test_figures_are_the_librarys),
        cmocka_unit_test(test_integer_keys),
        cmocka_unit_test(test_cluster_shards),
        cmocka_unit_test(test_grid),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
