/*
 * test_rm_dedup.c - the Redis module's DEDUP values (redis/rm_dedup.c) on
 * the library window, without Redis, so the clock can be moved by hand:
 * a server clock that steps back, seeded random streams against a naive
 * model of "seen within the window, last sighting counts", the exact count
 * of keys in the window, and save -> load round trips of the new envelope
 * (version 3) in the middle of the stream.
 */
#include "rm_filter.h"

#include "dedup/limits.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D 1000
#define NKEYS 300

static rmf_obj *make(bool exact)
{
    rmf_config c;
    rmf_config_init(&c);
    rmf_dd_params p = {D, 0.01, 200, 0, exact, 0};
    rmf_obj *o = NULL;
    assert_null(rmf_dd_create(&p, &c, NULL, &o));
    return o;
}

/* Saves and loads back; the envelope is version 3 (the library window). */
static void round_trip(rmf_obj **o)
{
    uint64_t n = rmf_serialized_size(*o);
    unsigned char *buf = malloc((size_t)n);
    assert_non_null(buf);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, (size_t)n);
    assert_int_equal(rmf_save(*o, &sink), DEDUP_OK);
    assert_int_equal(ms.len, n);
    assert_int_equal(buf[5], RMF_ENVELOPE_DD_WINDOW);
    rmf_config c;
    rmf_config_init(&c);
    dedup_mem_source m;
    rmf_obj *back = NULL;
    assert_null(rmf_load(dedup_mem_source_init(&m, buf, (size_t)n), RMF_DEDUP, &c, NULL, &back));
    assert_int_equal(rmf_items(back), rmf_items(*o));
    assert_int_equal(rmf_dd_generations(back), rmf_dd_generations(*o));
    rmf_free(*o);
    *o = back;
    free(buf);
}

static void test_clock_step_back(void **state)
{
    (void)state;
    for (int exact = 0; exact < 2; exact++) {
        rmf_obj *o = make(exact);
        int is_new = -1;
        assert_null(rmf_dd_add(o, "a", 1, 10000, &is_new));
        assert_int_equal(is_new, 1);
        /* the clock goes back 5 s: "a" is still seen, "b" is new, not late */
        assert_true(rmf_dd_exists(o, "a", 1, 5000));
        assert_null(rmf_dd_add(o, "b", 1, 5000, &is_new));
        assert_int_equal(is_new, 1);
        assert_null(rmf_dd_add(o, "b", 1, 5001, &is_new));
        assert_int_equal(is_new, 0);
        /* "b" counts from the newest time, 10000: seen until 10000 + D */
        assert_true(rmf_dd_exists(o, "b", 1, 10000 + D - 1));
        assert_true(rmf_dd_exists(o, "a", 1, 10000 + D - 1));
        if (exact) {
            assert_int_equal(rmf_dd_live(o, 3000), 2);
            assert_false(rmf_dd_exists(o, "a", 1, 10000 + D));
            assert_false(rmf_dd_exists(o, "b", 1, 10000 + D));
        }
        round_trip(&o);
        assert_true(rmf_dd_exists(o, "b", 1, 2000)); /* still behind: still seen */
        rmf_free(o);
    }
}

/* Random streams whose clock steps back, against the model. */
static void run(tu_rng *r, bool exact)
{
    rmf_obj *o = make(exact);
    int64_t last[NKEYS];
    for (int k = 0; k < NKEYS; k++)
        last[k] = INT64_MIN;
    int64_t t = 100000, newest = INT64_MIN;
    uint64_t span = rmf_dd_slot_ms(o), trials = 0, fps = 0;
    for (int i = 0; i < 40000; i++) {
        t += (int64_t)tu_below(r, 40) - 15; /* mostly forward, often back */
        if (tu_below(r, 1000) == 0 && t > 3000)
            t -= 3000; /* a big step back (the walk still drifts forward) */
        /* the time the window is given: t, or its newest time (only adds
         * move the window's clock; a query leaves it) */
        int64_t eff = t > newest ? t : newest;
        char key[16];
        int k = (int)tu_below(r, NKEYS);
        size_t len = (size_t)snprintf(key, sizeof key, "k%d", k);
        bool seen = last[k] != INT64_MIN && eff - last[k] < D;
        bool fresh = last[k] == INT64_MIN || eff - last[k] >= D + (int64_t)span;
        bool got;
        if (tu_below(r, 4) == 0) {
            got = rmf_dd_exists(o, key, len, (uint64_t)t);
        } else {
            int is_new = -1;
            assert_null(rmf_dd_add(o, key, len, (uint64_t)t, &is_new));
            got = !is_new;
            newest = eff;
            last[k] = eff; /* recorded or renewed at the newest time */
        }
        if (seen && !got) {
            fprintf(stderr, "false new: exact %d op %d key %d t %lld eff %lld last %lld\n",
                    exact, i, k, (long long)t, (long long)eff, (long long)last[k]);
            fail();
        }
        if (exact && got != seen)
            fail_msg("exact: op %d key %d: got %d want %d", i, k, got, seen);
        if (fresh) {
            trials++;
            fps += got;
        }
        if (i % 4001 == 0) {
            if (exact) {
                uint64_t want = 0;
                for (int j = 0; j < NKEYS; j++)
                    want += last[j] != INT64_MIN && eff - last[j] < D;
                assert_int_equal(rmf_dd_live(o, (uint64_t)t), want);
            }
            round_trip(&o);
        }
    }
    if (!exact) {
        double mu = 0.01 * (double)trials;
        printf("approximate: %llu false seen in %llu fresh (bound 1%%)\n",
               (unsigned long long)fps, (unsigned long long)trials);
        assert_true((double)fps <= mu + 4 * sqrt(mu) + 4);
    } else {
        assert_int_equal(fps, 0);
    }
    rmf_free(o);
}

static void test_streams_vs_model(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    run(&r, true);
    run(&r, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock_step_back),
        cmocka_unit_test(test_streams_vs_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
