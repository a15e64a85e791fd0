/*
 * test_store.c - the RocksDB store (dedup/store.h) against a naive
 * reference: seeded random streams across reopenings, whole keys, blind
 * records, expiry on a fake clock, the iteration that rebuilds filters, and
 * every refusal (foreign or damaged DIR, another mode or seed, the lock).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dedup/store.h"

#define UNIVERSE 20000u

static char *tmpdir(void)
{
    static char buf[8][64];
    static int next;
    char *d = buf[next++ % 8];
    snprintf(d, 64, "/tmp/dedup_store_test.XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void rmtree(const char *d)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    assert_int_equal(system(cmd), 0);
}

static dedup_store *open_store(const char *dir, dedup_store_keys keys, dedup_store_sync sync)
{
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    p.keys = keys;
    p.sync = sync;
    dedup_store *s = NULL;
    char why[512];
    dedup_status st = dedup_store_open(&p, NULL, &s, why, sizeof why);
    if (st != DEDUP_OK)
        fprintf(stderr, "open %s: %s\n", dir, why);
    assert_int_equal(st, DEDUP_OK);
    return s;
}

/* A batch of n keys drawn from [0, UNIVERSE): text keys "k<i>". */
typedef struct kb {
    size_t n;
    char text[DEDUP_STORE_CHUNK * 3][16];
    const unsigned char *keys[DEDUP_STORE_CHUNK * 3];
    size_t lens[DEDUP_STORE_CHUNK * 3];
    dedup_digest d[DEDUP_STORE_CHUNK * 3];
    uint32_t id[DEDUP_STORE_CHUNK * 3];
} kb;

static void fill_batch(kb *b, tu_rng *r, size_t n)
{
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        b->id[i] = (uint32_t)tu_below(r, UNIVERSE);
        b->lens[i] = (size_t)snprintf(b->text[i], 16, "k%u", b->id[i]);
        b->keys[i] = (const unsigned char *)b->text[i];
        b->d[i] = dedup_hash(b->text[i], b->lens[i], DEDUP_DEFAULT_SEED);
    }
}

static dedup_batch as_batch(const kb *b)
{
    dedup_batch x = {.n = b->n, .digests = b->d, .keys = b->keys, .lens = b->lens};
    return x;
}

/* Runs 'rounds' batches through a store reopened before each round; every
 * verdict must equal the reference's. */
static void stream_equals_reference(dedup_store_keys keys, dedup_store_sync sync)
{
    tu_rng r = {tu_seed()};
    char *dir = tmpdir();
    bool *seen = calloc(UNIVERSE, 1);
    static kb b;
    static dedup_verdict v[DEDUP_STORE_CHUNK * 3];
    uint64_t distinct = 0;
    for (int round = 0; round < 4; round++) {
        dedup_store *s = open_store(dir, keys, sync);
        for (int k = 0; k < 3; k++) {
            /* sizes around the chunk so chunk borders are crossed */
            size_t n = 1 + tu_below(&r, DEDUP_STORE_CHUNK * 3 - 1);
            fill_batch(&b, &r, n);
            dedup_batch x = as_batch(&b);
            size_t done = 0;
            assert_int_equal(dedup_store_decide(s, &x, v, &done), DEDUP_OK);
            assert_int_equal(done, n);
            for (size_t i = 0; i < n; i++) {
                dedup_verdict want = seen[b.id[i]] ? DEDUP_DUPLICATE : DEDUP_NEW;
                if (v[i] != want)
                    fail_msg("round %d key %zu (k%u): got %d want %d", round, i, b.id[i], v[i],
                             want);
                if (!seen[b.id[i]])
                    distinct++;
                seen[b.id[i]] = true;
            }
        }
        dedup_store_info info;
        assert_int_equal(dedup_store_get_info(s, &info), DEDUP_OK);
        assert_int_equal(info.keys, distinct);
        assert_true(info.bytes_on_disk > 0);
        assert_int_equal(info.keys_mode, keys ? keys : DEDUP_STORE_KEYS_DIGEST);
        dedup_store_close(s);
    }
    /* query agrees and records nothing */
    dedup_store *s = open_store(dir, DEDUP_STORE_KEYS_AUTO, sync);
    fill_batch(&b, &r, 1000);
    dedup_batch x = as_batch(&b);
    assert_int_equal(dedup_store_query(s, &x, v), DEDUP_OK);
    for (size_t i = 0; i < b.n; i++)
        assert_int_equal(v[i], seen[b.id[i]] ? DEDUP_DUPLICATE : DEDUP_NEW);
    dedup_store_info info;
    assert_int_equal(dedup_store_get_info(s, &info), DEDUP_OK);
    assert_int_equal(info.keys, distinct);
    dedup_store_close(s);
    free(seen);
    rmtree(dir);
}

static void test_digest_keys(void **state)
{
    (void)state;
    stream_equals_reference(DEDUP_STORE_KEYS_DIGEST, DEDUP_STORE_SYNC_BATCH);
}

static void test_whole_keys(void **state)
{
    (void)state;
    stream_equals_reference(DEDUP_STORE_KEYS_WHOLE, DEDUP_STORE_SYNC_ALWAYS);
}

static void test_sync_none(void **state)
{
    (void)state;
    stream_equals_reference(DEDUP_STORE_KEYS_DIGEST, DEDUP_STORE_SYNC_NONE);
}

static int count_digests(void *ctx, const dedup_digest *d, size_t n)
{
    (void)d;
    *(uint64_t *)ctx += n;
    return 0;
}

static void test_record_and_foreach(void **state)
{
    (void)state;
    char *dir = tmpdir();
    dedup_store *s = open_store(dir, DEDUP_STORE_KEYS_WHOLE, DEDUP_STORE_SYNC_BATCH);
    static kb b;
    static dedup_verdict v[DEDUP_STORE_CHUNK * 3];
    b.n = 5000;
    for (size_t i = 0; i < b.n; i++) {
        b.lens[i] = (size_t)snprintf(b.text[i], 16, "r%zu", i);
        b.keys[i] = (const unsigned char *)b.text[i];
        b.d[i] = dedup_hash(b.text[i], b.lens[i], DEDUP_DEFAULT_SEED);
    }
    dedup_batch x = as_batch(&b);
    assert_int_equal(dedup_store_record(s, &x), DEDUP_OK);
    assert_int_equal(dedup_store_decide(s, &x, v, NULL), DEDUP_OK);
    for (size_t i = 0; i < b.n; i++)
        assert_int_equal(v[i], DEDUP_DUPLICATE);
    uint64_t n = 0;
    assert_int_equal(dedup_store_foreach(s, count_digests, &n), DEDUP_OK);
    assert_int_equal(n, b.n);
    dedup_store_close(s);
    rmtree(dir);
}

static int64_t fake_now;
static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static void test_expiry(void **state)
{
    (void)state;
    char *dir = tmpdir();
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    p.expire = 100;
    p.clock = fake_clock;
    fake_now = 1000000;
    dedup_store *s = NULL;
    char why[256];
    assert_int_equal(dedup_store_open(&p, NULL, &s, why, sizeof why), DEDUP_OK);
    dedup_digest d[2] = {dedup_hash("a", 1, DEDUP_DEFAULT_SEED), dedup_hash("b", 1, DEDUP_DEFAULT_SEED)};
    dedup_batch a = {.n = 1, .digests = &d[0]}, ab = {.n = 2, .digests = d};
    dedup_verdict v[2];
    assert_int_equal(dedup_store_decide(s, &a, v, NULL), DEDUP_OK);
    assert_int_equal(v[0], DEDUP_NEW);
    fake_now += 60;
    assert_int_equal(dedup_store_decide(s, &ab, v, NULL), DEDUP_OK);
    assert_int_equal(v[0], DEDUP_DUPLICATE); /* 60 s old */
    assert_int_equal(v[1], DEDUP_NEW);
    fake_now += 50; /* a: 110 s, expired; b: 50 s */
    assert_int_equal(dedup_store_decide(s, &ab, v, NULL), DEDUP_OK);
    assert_int_equal(v[0], DEDUP_NEW);
    assert_int_equal(v[1], DEDUP_DUPLICATE);
    uint64_t n = 0;
    fake_now += 60; /* a: 60 s (re-recorded), b: 110 s expired */
    assert_int_equal(dedup_store_foreach(s, count_digests, &n), DEDUP_OK);
    assert_int_equal(n, 1);
    dedup_store_close(s);
    /* another expiry is refused, naming both */
    p.expire = 200;
    assert_int_equal(dedup_store_open(&p, NULL, &s, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
    assert_non_null(strstr(why, "expiry 100 s, asked 200 s"));
    rmtree(dir);
}

static void test_refusals(void **state)
{
    (void)state;
    char why[512];
    dedup_store *s = NULL, *s2 = NULL;
    dedup_store_params p;
    dedup_store_params_init(&p);

    /* a directory with something else in it */
    char *dir = tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("hello\n", f);
    fclose(f);
    p.dir = dir;
    assert_int_equal(dedup_store_open(&p, NULL, &s, why, sizeof why), DEDUP_ERR_BAD_MAGIC);
    assert_non_null(strstr(why, "not a dedup store"));
    assert_null(s);
    rmtree(dir);

    /* a RocksDB database that is not a store */
    dir = tmpdir();
    rocksdb_options_t *o = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(o, 1);
    char *e = NULL;
    rocksdb_t *db = rocksdb_open(o, dir, &e);
    assert_null(e);
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_put(db, wo, "x", 1, "y", 1, &e);
    assert_null(e);
    rocksdb_close(db);
    p.dir = dir;
    assert_int_equal(dedup_store_open(&p, NULL, &s, why, sizeof why), DEDUP_ERR_BAD_MAGIC);
    assert_non_null(strstr(why, "RocksDB database but not a dedup store"));
    rmtree(dir);

    /* a damaged marker */
    dir = tmpdir();
    p.dir = dir;
    assert_int_equal(dedup_store_open(&p, NULL, &s, why, sizeof why), DEDUP_OK);
    dedup_store_close(s);
    {
        const char *names[2] = {"default", "dedup"};
        const rocksdb_options_t *opts[2] = {o, o};
        rocksdb_column_family_handle_t *h[2];
        db = rocksdb_open_column_families(o, dir, 2, names, opts, h, &e);
        assert_null(e);
        size_t vl;
        rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
        char *v = rocksdb_get_cf(db, ro, h[1], "store", 5, &vl, &e);
        assert_non_null(v);
        v[20] ^= 1; /* a seed bit */
        rocksdb_put_cf(db, wo, h[1], "store", 5, v, vl, &e);
        assert_null(e);
        free(v);
        rocksdb_readoptions_destroy(ro);
        rocksdb_column_family_handle_destroy(h[0]);
        rocksdb_column_family_handle_destroy(h[1]);
        rocksdb_close(db);
    }
    assert_int_equal(dedup_store_open(&p, NULL, &s, why, sizeof why), DEDUP_ERR_CHECKSUM);
    assert_non_null(strstr(why, "damaged"));
    rmtree(dir);

    /* another seed, another key mode, the lock */
    dir = tmpdir();
    p.dir = dir;
    assert_int_equal(dedup_store_open(&p, NULL, &s, why, sizeof why), DEDUP_OK);
    dedup_store_params q = p;
    q.read_only = true;
    assert_int_equal(dedup_store_open(&q, NULL, &s2, why, sizeof why), DEDUP_OK); /* no lock */
    dedup_store_close(s2);
    assert_int_equal(dedup_store_open(&p, NULL, &s2, why, sizeof why), DEDUP_ERR_IO);
    assert_non_null(strstr(why, "in use by another process"));
    dedup_store_close(s);
    q = p;
    q.seed = 42;
    assert_int_equal(dedup_store_open(&q, NULL, &s, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
    assert_non_null(strstr(why, "seed"));
    q = p;
    q.keys = DEDUP_STORE_KEYS_WHOLE;
    assert_int_equal(dedup_store_open(&q, NULL, &s, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
    assert_non_null(strstr(why, "digest keys, asked whole"));
    /* missing, not to be created */
    q = p;
    q.dir = "/nonexistent/dedup/store";
    q.create = false;
    assert_int_equal(dedup_store_open(&q, NULL, &s, why, sizeof why), DEDUP_ERR_IO);
    rmtree(dir);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_options_destroy(o);
    dedup_store_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_keys),    cmocka_unit_test(test_whole_keys),
        cmocka_unit_test(test_sync_none),      cmocka_unit_test(test_record_and_foreach),
        cmocka_unit_test(test_expiry),         cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
