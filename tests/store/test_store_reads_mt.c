/*
 * test_store_reads_mt.c - the store's lookups (dedup/store.h): each chunk's
 * keys sorted for MultiGet, and read in two halves on two threads
 * (params.read_threads 2) or one; both against a naive reference, with
 * whole keys chosen so that many are prefixes of others (bytes 0, 'a',
 * 'b') and some run past 16 bytes (the sort's two words), and digest keys.
 * The stored keys are ingested (close), so every lookup reaches RocksDB.
 * Label threads: run under TSan too.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/store.h"
#include "store_testutil.h"

#define STORED 4000u /* ids 1..STORED are stored; lookups draw from 1..2*STORED */
#define N DEDUP_STORE_CHUNK

/* Key of id >= 1: its base-3 digits, most significant first, as bytes
 * 0/'a'/'b' (no leading 0 digit, so unique; "a" is a prefix of "a\0",
 * "aa", ...), then 18 bytes 'x' when id % 3 == 0 (past the 16 bytes the
 * sort compares as words). */
static size_t key_of(uint32_t id, unsigned char *k)
{
    unsigned char d[24];
    size_t n = 0, len = 0;
    for (uint32_t v = id; v; v /= 3)
        d[n++] = (unsigned char)(v % 3 == 0 ? 0 : v % 3 == 1 ? 'a' : 'b');
    while (n)
        k[len++] = d[--n];
    if (id % 3 == 0)
        for (int i = 0; i < 18; i++)
            k[len++] = 'x';
    return len;
}

typedef struct keys {
    size_t n;
    unsigned char text[N][48];
    const unsigned char *k[N];
    size_t len[N];
    dedup_digest d[N];
    uint32_t id[N];
} keys;

static void fill(keys *b, size_t n, const uint32_t *ids)
{
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        b->id[i] = ids[i];
        b->len[i] = key_of(ids[i], b->text[i]);
        b->k[i] = b->text[i];
        b->d[i] = dedup_hash(b->text[i], b->len[i], DEDUP_DEFAULT_SEED);
    }
}

static dedup_batch batch_of(const keys *b)
{
    return (dedup_batch){.n = b->n, .digests = b->d, .keys = b->k, .lens = b->len};
}

static dedup_store *open_store(const char *dir, dedup_store_keys mode, unsigned threads)
{
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    p.keys = mode;
    p.sync = DEDUP_STORE_SYNC_NONE;
    p.read_threads = threads;
    return tst_open(&p);
}

static void lookups_equal_reference(dedup_store_keys mode)
{
    uint64_t seed = tu_seed();
    tu_rng r = {seed};
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/dedup_store_mt.XXXXXX");
    assert_non_null(mkdtemp(dir));
    static keys b;
    static dedup_verdict v[N];
    uint32_t ids[N];
    /* store ids 1..STORED (all NEW), then close: ingested */
    dedup_store *s = open_store(dir, mode, 2);
    for (uint32_t from = 1; from <= STORED; from += N) {
        size_t n = 0;
        for (uint32_t id = from; id <= STORED && n < N; id++)
            ids[n++] = id;
        fill(&b, n, ids);
        dedup_batch x = batch_of(&b);
        assert_int_equal(dedup_store_decide(s, &x, v, NULL), DEDUP_OK);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(v[i], DEDUP_NEW);
    }
    dedup_store_free(s);
    /* queries, with one and two reading threads; sizes below and above the split */
    static const size_t sizes[] = {N, 255, 256, 1000, 3};
    for (unsigned threads = 1; threads <= 2; threads++) {
        s = open_store(dir, mode, threads);
        for (size_t q = 0; q < sizeof sizes / sizeof *sizes; q++) {
            for (size_t i = 0; i < sizes[q]; i++)
                ids[i] = 1 + (uint32_t)tu_below(&r, 2 * STORED);
            fill(&b, sizes[q], ids);
            dedup_batch x = batch_of(&b);
            assert_int_equal(dedup_store_query(s, &x, v), DEDUP_OK);
            for (size_t i = 0; i < sizes[q]; i++)
                if (v[i] != (b.id[i] <= STORED ? DEDUP_DUPLICATE : DEDUP_NEW)) {
                    fprintf(stderr, "seed %llu, mode %d, %u thread(s): id %u answered %d\n",
                            (unsigned long long)seed, (int)mode, threads, b.id[i], (int)v[i]);
                    fail();
                }
        }
        dedup_store_free(s);
    }
    /* a decide with repeats inside the chunk: the first new occurrence NEW */
    s = open_store(dir, mode, 2);
    static unsigned char fresh[2 * STORED + 1];
    memset(fresh, 0, sizeof fresh);
    for (size_t i = 0; i < N; i++)
        ids[i] = 1 + (uint32_t)tu_below(&r, 2 * STORED);
    fill(&b, N, ids);
    dedup_batch x = batch_of(&b);
    assert_int_equal(dedup_store_decide(s, &x, v, NULL), DEDUP_OK);
    for (size_t i = 0; i < N; i++) {
        uint32_t id = b.id[i];
        dedup_verdict want = id <= STORED || fresh[id] ? DEDUP_DUPLICATE : DEDUP_NEW;
        fresh[id] = 1;
        if (v[i] != want) {
            fprintf(stderr, "seed %llu, mode %d: decide of id %u answered %d\n",
                    (unsigned long long)seed, (int)mode, id, (int)v[i]);
            fail();
        }
    }
    dedup_store_free(s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_whole_keys(void **state)
{
    (void)state;
    lookups_equal_reference(DEDUP_STORE_KEYS_WHOLE);
}

static void test_digest_keys(void **state)
{
    (void)state;
    lookups_equal_reference(DEDUP_STORE_KEYS_DIGEST);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_keys),
        cmocka_unit_test(test_digest_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
