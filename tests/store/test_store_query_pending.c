/*
 * test_store_query_pending.c - dedup_store_query() and the store as a
 * seen-set answer for keys still in the pending table (sync BATCH and NONE:
 * recorded since the last ingestion, not yet in RocksDB), with no flush or
 * reopen in between: right after decide(), right after a blind record(),
 * and through a read-only open of a store whose writer still holds keys in
 * its pending log.  Each answer is checked against a model, key by key,
 * for keys recorded, and keys never given (which must stay NEW).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dedup/store.h"
#include "store_testutil.h"

#define N 6000u /* well under the ~2 M keys of an ingestion */

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/dedup_store_qp.XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

typedef struct keys {
    char text[2 * N][24];
    const unsigned char *k[2 * N];
    size_t len[2 * N];
    dedup_digest d[2 * N];
} keys;

/* ids [0, N) are recorded, [N, 2N) never are; the order is shuffled. */
static void make_keys(keys *ks, uint64_t seed, uint64_t salt)
{
    for (size_t i = 0; i < 2 * N; i++) {
        ks->len[i] = (size_t)snprintf(ks->text[i], sizeof ks->text[i], "k%llu-%zu",
                                      (unsigned long long)salt, i);
        ks->k[i] = (const unsigned char *)ks->text[i];
        ks->d[i] = dedup_hash(ks->text[i], ks->len[i], seed);
    }
}

static dedup_batch part(const keys *ks, size_t from, size_t n)
{
    return (dedup_batch){.n = n, .digests = ks->d + from, .keys = ks->k + from,
                         .lens = ks->len + from};
}

/* Queries all 2N keys (whole and in pieces crossing the store's chunks) and
 * checks: recorded (index < upto) DUPLICATE, the rest NEW. */
static void check_query(const dedup_store *s, dedup_seen *as_seen, const keys *ks, size_t upto,
                        const char *when)
{
    static dedup_verdict v[2 * N];
    dedup_batch b = part(ks, 0, 2 * N);
    assert_int_equal(dedup_store_query(s, &b, v), DEDUP_OK);
    for (size_t i = 0; i < 2 * N; i++)
        if (v[i] != (i < upto ? DEDUP_DUPLICATE : DEDUP_NEW))
            fail_msg("%s: %s (%s) answered %d by dedup_store_query", when, ks->text[i],
                     i < upto ? "recorded, in the pending table" : "never recorded", (int)v[i]);
    if (!as_seen)
        return;
    for (size_t from = 0; from < 2 * N; from += 1000) {
        size_t n = 2 * N - from < 1000 ? 2 * N - from : 1000;
        b = part(ks, from, n);
        assert_int_equal(dedup_seen_query(as_seen, &b, v), DEDUP_OK);
        for (size_t i = 0; i < n; i++)
            if (v[i] != (from + i < upto ? DEDUP_DUPLICATE : DEDUP_NEW))
                fail_msg("%s: %s answered %d by the store as a seen-set", when,
                         ks->text[from + i], (int)v[i]);
    }
}

static void run(dedup_store_sync sync, dedup_store_keys mode, bool blind)
{
    make_dir();
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    p.sync = sync;
    p.keys = mode;
    dedup_store *s = tst_open(&p);
    dedup_seen *seen = NULL;
    assert_int_equal(dedup_store_as_seen(s, NULL, &seen), DEDUP_OK);
    static keys ks;
    dedup_store_info info;
    assert_int_equal(dedup_store_get_info(s, &info), DEDUP_OK);
    make_keys(&ks, info.seed, (uint64_t)sync * 10 + (uint64_t)mode * 2 + blind);
    check_query(s, seen, &ks, 0, "empty store");
    /* record the first N keys in three unequal steps, querying after each */
    const size_t steps[] = {1, N / 3, N};
    size_t done = 0;
    static dedup_verdict v[N];
    for (size_t k = 0; k < 3; k++) {
        dedup_batch b = part(&ks, done, steps[k] - done);
        if (blind) {
            assert_int_equal(dedup_store_record(s, &b), DEDUP_OK);
        } else {
            assert_int_equal(dedup_store_decide(s, &b, v, NULL), DEDUP_OK);
            for (size_t i = 0; i < b.n; i++)
                assert_int_equal(v[i], DEDUP_NEW);
        }
        done = steps[k];
        char when[96];
        snprintf(when, sizeof when, "sync %d keys %d %s, %zu recorded", (int)sync, (int)mode,
                 blind ? "record()" : "decide()", done);
        check_query(s, seen, &ks, done, when);
    }
    /* a reader of the store while its writer still holds the keys pending
     * (BATCH: from the log; NONE keeps no log, so a reader cannot see them) */
    if (sync == DEDUP_STORE_SYNC_BATCH) {
        dedup_store_params rp = p;
        rp.read_only = true;
        dedup_store *r = tst_open(&rp);
        check_query(r, NULL, &ks, N, "a read-only open beside the writer");
        dedup_store_free(r);
    }
    dedup_seen_free(seen); /* owns the store: closes it */
    remove_dir();
}

static void test_query_pending_batch(void **state)
{
    (void)state;
    run(DEDUP_STORE_SYNC_BATCH, DEDUP_STORE_KEYS_DIGEST, false);
    run(DEDUP_STORE_SYNC_BATCH, DEDUP_STORE_KEYS_DIGEST, true);
    run(DEDUP_STORE_SYNC_BATCH, DEDUP_STORE_KEYS_WHOLE, false);
    run(DEDUP_STORE_SYNC_BATCH, DEDUP_STORE_KEYS_WHOLE, true);
}

static void test_query_pending_none(void **state)
{
    (void)state;
    run(DEDUP_STORE_SYNC_NONE, DEDUP_STORE_KEYS_DIGEST, false);
    run(DEDUP_STORE_SYNC_NONE, DEDUP_STORE_KEYS_WHOLE, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_pending_batch),
        cmocka_unit_test(test_query_pending_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
