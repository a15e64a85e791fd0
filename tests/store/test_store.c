/*
 * test_store.c - the RocksDB store (dedup/store.h) against a naive
 * reference: seeded random streams across reopenings, whole keys, blind
 * records, expiry on a fake clock, the iteration that rebuilds filters, and
 * every refusal (foreign or damaged DIR, another mode or seed, the lock);
 * the store through the seen-set alone (add, flush, error, stats, fill);
 * the pending keys of sync BATCH/NONE: whole keys of every length sorted
 * into the ingested table, and the log replayed after a process died.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dedup/store.h"
#include "store_testutil.h"

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
    return tst_open(&p);
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
        dedup_store_free(s);
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
    dedup_store_free(s);
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
    dedup_store_free(s);
    rmtree(dir);
}

/* The store through the seen-set alone (dedup/seen.h's component calls):
 * add is a blind record (each add counted), stats report the store's keys
 * and bytes, flush ingests, fill hands every key to a filter in front;
 * a local kind answers those with zeros, "" and UNSUPPORTED. */
static void test_seen_interface(void **state)
{
    (void)state;
    char *dir = tmpdir();
    dedup_seen *ss = NULL;
    dedup_store *st = open_store(dir, DEDUP_STORE_KEYS_DIGEST, DEDUP_STORE_SYNC_BATCH);
    assert_int_equal(dedup_store_as_seen(st, NULL, &ss), DEDUP_OK);
    static kb b;
    static dedup_verdict v[DEDUP_STORE_CHUNK * 3];
    b.n = 3000;
    for (size_t i = 0; i < b.n; i++) {
        b.lens[i] = (size_t)snprintf(b.text[i], 16, "s%zu", i);
        b.keys[i] = (const unsigned char *)b.text[i];
        b.d[i] = dedup_hash(b.text[i], b.lens[i], DEDUP_DEFAULT_SEED);
    }
    dedup_batch x = as_batch(&b);
    size_t done = 0;
    for (int round = 0; round < 2; round++) {
        assert_int_equal(dedup_seen_add(ss, &x, &done), DEDUP_OK);
        assert_int_equal(done, b.n);
    }
    assert_int_equal(dedup_seen_decide(ss, &x, v, NULL), DEDUP_OK);
    for (size_t i = 0; i < b.n; i++)
        assert_int_equal(v[i], DEDUP_DUPLICATE);
    assert_int_equal(dedup_seen_flush(ss), DEDUP_OK);
    assert_string_equal(dedup_seen_error(ss), "");
    dedup_seen_stats sst;
    dedup_seen_get_stats(ss, &sst);
    assert_true(sst.persistent);
    assert_false(sst.remote);
    assert_int_equal(sst.stored_keys, 2 * b.n); /* a blind record counts every add */
    assert_true(sst.bytes_on_disk > 0);

    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_BLOCKED;
    sp.items = 10000;
    dedup_seen *f = NULL;
    assert_int_equal(dedup_seen_create(&sp, NULL, &f), DEDUP_OK);
    uint64_t filled = 0;
    assert_int_equal(dedup_seen_fill(ss, f, &filled), DEDUP_OK);
    assert_int_equal(filled, b.n);
    assert_int_equal(dedup_seen_query(f, &x, v), DEDUP_OK);
    for (size_t i = 0; i < b.n; i++)
        assert_int_equal(v[i], DEDUP_MAYBE_DUPLICATE);
    dedup_seen_get_stats(f, &sst);
    assert_false(sst.persistent || sst.remote || sst.stored_keys || sst.uncertain);
    assert_string_equal(dedup_seen_error(f), "");
    assert_int_equal(dedup_seen_flush(f), DEDUP_OK);
    assert_int_equal(dedup_seen_fill(f, ss, &filled), DEDUP_ERR_UNSUPPORTED);
    dedup_seen_free(f);
    dedup_seen_free(ss);
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
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_OK);
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
    dedup_store_free(s);
    /* another expiry is refused, naming both */
    p.expire = 200;
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
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
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_ERR_BAD_MAGIC);
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
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_ERR_BAD_MAGIC);
    assert_non_null(strstr(why, "RocksDB database but not a dedup store"));
    rmtree(dir);

    /* a damaged marker */
    dir = tmpdir();
    p.dir = dir;
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_OK);
    dedup_store_free(s);
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
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_ERR_CHECKSUM);
    assert_non_null(strstr(why, "damaged"));
    rmtree(dir);

    /* another seed, another key mode, the lock */
    dir = tmpdir();
    p.dir = dir;
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_OK);
    dedup_store_params q = p;
    q.read_only = true;
    assert_int_equal(dedup_store_create(&q, NULL, &s2, why, sizeof why), DEDUP_OK); /* no lock */
    dedup_store_free(s2);
    assert_int_equal(dedup_store_create(&p, NULL, &s2, why, sizeof why), DEDUP_ERR_IO);
    assert_non_null(strstr(why, "in use by PID"));
    dedup_store_free(s);
    q = p;
    q.seed = 42;
    assert_int_equal(dedup_store_create(&q, NULL, &s, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
    assert_non_null(strstr(why, "seed"));
    q = p;
    q.keys = DEDUP_STORE_KEYS_WHOLE;
    assert_int_equal(dedup_store_create(&q, NULL, &s, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
    assert_non_null(strstr(why, "digest keys, asked whole"));
    /* missing, not to be created */
    q = p;
    q.dir = "/nonexistent/dedup/store";
    q.create = false;
    assert_int_equal(dedup_store_create(&q, NULL, &s, why, sizeof why), DEDUP_ERR_IO);
    rmtree(dir);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_options_destroy(o);
    dedup_store_free(NULL);
}

static void test_whole_keys_batch(void **state)
{
    (void)state;
    stream_equals_reference(DEDUP_STORE_KEYS_WHOLE, DEDUP_STORE_SYNC_BATCH);
}

/* Whole keys of 0..40 bytes with shared prefixes and zero bytes ("ab",
 * "ab\0", "ab\0\0", "ab\0c": equal in their zero-padded first words):
 * the pending table tells them apart and the ingestion sorts them in
 * RocksDB's bytewise order (the table writer refuses any other). */
static void test_long_keys_sorted(void **state)
{
    (void)state;
    enum { N = 3000 };
    static unsigned char kbuf[N][48];
    static const unsigned char *keys[N];
    static size_t lens[N];
    static dedup_digest d[N];
    static dedup_verdict v[N];
    const char *zs[4] = {"ab", "ab\0", "ab\0\0", "ab\0c"};
    const size_t zl[4] = {2, 3, 4, 4};
    for (size_t i = 0; i < N; i++) {
        if (i < 4) {
            memcpy(kbuf[i], zs[i], zl[i]);
            lens[i] = zl[i];
        } else if (i == 4) {
            lens[i] = 0; /* the empty key */
        } else {
            size_t xs = i % 30;
            memset(kbuf[i], 'x', xs);
            lens[i] = xs + (size_t)snprintf((char *)kbuf[i] + xs, 16, "#%zu", i);
        }
        keys[i] = kbuf[i];
        d[i] = dedup_hash(kbuf[i], lens[i], DEDUP_DEFAULT_SEED);
    }
    dedup_batch x = {.n = N, .digests = d, .keys = keys, .lens = lens};
    char *dir = tmpdir();
    for (int round = 0; round < 3; round++) {
        dedup_store *s = open_store(dir, DEDUP_STORE_KEYS_WHOLE, DEDUP_STORE_SYNC_BATCH);
        size_t done = 0;
        assert_int_equal(dedup_store_decide(s, &x, v, &done), DEDUP_OK);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(v[i], round == 0 ? DEDUP_NEW : DEDUP_DUPLICATE);
        assert_int_equal(dedup_store_flush(s), DEDUP_OK); /* ingests */
        assert_int_equal(dedup_store_query(s, &x, v), DEDUP_OK);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(v[i], DEDUP_DUPLICATE);
        dedup_store_info info;
        assert_int_equal(dedup_store_get_info(s, &info), DEDUP_OK);
        assert_int_equal(info.keys, N);
        dedup_store_free(s);
    }
    rmtree(dir);
}

/* A child decides keys with sync BATCH and dies without closing (_exit: no
 * ingestion, no flush); the next open replays DIR/dedup-pending.log, so
 * every key the child answered NEW is a duplicate and counted once.  A torn
 * record at the log's end (a crash mid-write) is ignored; a log with a
 * damaged header is refused. */
static void child_decides(const char *dir, uint64_t seed, size_t n, bool *seen)
{
    static kb b;
    static dedup_verdict v[DEDUP_STORE_CHUNK * 3];
    tu_rng r = {seed};
    fill_batch(&b, &r, n);
    for (size_t i = 0; i < n; i++)
        seen[b.id[i]] = true;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dedup_store *s = open_store(dir, DEDUP_STORE_KEYS_DIGEST, DEDUP_STORE_SYNC_BATCH);
        dedup_batch x = as_batch(&b);
        size_t done = 0;
        _exit(dedup_store_decide(s, &x, v, &done) == DEDUP_OK && done == n ? 0 : 3);
    }
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
}

static void check_holds(const char *dir, const bool *seen)
{
    static kb b;
    static dedup_verdict v[DEDUP_STORE_CHUNK * 3];
    uint64_t distinct = 0;
    for (uint32_t i = 0; i < UNIVERSE; i++)
        distinct += seen[i];
    dedup_store *s = open_store(dir, DEDUP_STORE_KEYS_AUTO, DEDUP_STORE_SYNC_BATCH);
    dedup_store_info info;
    assert_int_equal(dedup_store_get_info(s, &info), DEDUP_OK);
    assert_int_equal(info.keys, distinct);
    tu_rng r = {tu_seed() + 99};
    fill_batch(&b, &r, DEDUP_STORE_CHUNK * 3);
    dedup_batch x = as_batch(&b);
    assert_int_equal(dedup_store_query(s, &x, v), DEDUP_OK);
    for (size_t i = 0; i < b.n; i++)
        assert_int_equal(v[i], seen[b.id[i]] ? DEDUP_DUPLICATE : DEDUP_NEW);
    dedup_store_free(s);
}

static void test_batch_log_replay(void **state)
{
    (void)state;
    char *dir = tmpdir(), log[256];
    snprintf(log, sizeof log, "%s/dedup-pending.log", dir);
    bool *seen = calloc(UNIVERSE, 1);
    uint64_t seed = tu_seed();
    child_decides(dir, seed, 7000, seen);
    struct stat st;
    assert_int_equal(stat(log, &st), 0);
    assert_true(st.st_size > 7000 * 16); /* the keys are in the log, not in RocksDB */
    check_holds(dir, seen);
    check_holds(dir, seen); /* and stay after the ingestion that replay made */

    child_decides(dir, seed + 1, 5000, seen);
    FILE *f = fopen(log, "ab"); /* a torn record: a header promising more than follows */
    assert_non_null(f);
    const unsigned char torn[20] = {0x00, 0x10, 0x00, 0x00, 0x05};
    assert_int_equal(fwrite(torn, 1, sizeof torn, f), sizeof torn);
    fclose(f);
    check_holds(dir, seen);

    child_decides(dir, seed + 2, 100, seen);
    f = fopen(log, "r+b");
    assert_non_null(f);
    fputs("NOTALOG!", f); /* the magic */
    fclose(f);
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    dedup_store *s = NULL;
    char why[512];
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_ERR_CORRUPT);
    assert_non_null(strstr(why, "dedup-pending.log"));
    assert_null(s);
    free(seen);
    rmtree(dir);
}

/* The caller's identity: kept at creation, refused when another is asked
 * (naming both), recorded anew with identity_force, adopted by a store
 * that had none.  A new store's seed is random, params.seed fixes it. */
static void test_identity_and_seed(void **state)
{
    (void)state;
    char why[768];
    dedup_store *s = NULL;
    dedup_store_params p;
    dedup_store_params_init(&p);
    char *dir = tmpdir();
    p.dir = dir;
    s = tst_open(&p); /* no identity: an older caller */
    dedup_store_info in;
    assert_int_equal(dedup_store_get_info(s, &in), DEDUP_OK);
    uint64_t seed1 = in.seed;
    assert_true(seed1 != 0 && seed1 != DEDUP_DEFAULT_SEED);
    assert_string_equal(in.identity, "");
    dedup_store_free(s);
    p.identity = "keys A";
    s = tst_open(&p);
    assert_int_equal(dedup_store_get_info(s, &in), DEDUP_OK);
    assert_true(in.identity_adopted);
    assert_string_equal(in.identity, "keys A");
    assert_int_equal(in.seed, seed1); /* kept */
    dedup_store_free(s);
    s = tst_open(&p);
    assert_int_equal(dedup_store_get_info(s, &in), DEDUP_OK);
    assert_false(in.identity_adopted);
    dedup_store_free(s);
    p.identity = "keys B";
    assert_int_equal(dedup_store_create(&p, NULL, &s, why, sizeof why), DEDUP_ERR_INCOMPATIBLE);
    assert_non_null(strstr(why, "[keys A]"));
    assert_non_null(strstr(why, "[keys B]"));
    p.identity_force = true;
    s = tst_open(&p);
    dedup_store_free(s);
    p.identity_force = false;
    s = tst_open(&p); /* B is the store's now */
    dedup_store_free(s);
    rmtree(dir);

    /* two new stores, two seeds; params.seed fixes one */
    char *d2 = tmpdir(), *d3 = tmpdir();
    dedup_store_params_init(&p);
    p.dir = d2;
    s = tst_open(&p);
    assert_int_equal(dedup_store_get_info(s, &in), DEDUP_OK);
    assert_true(in.seed != seed1);
    dedup_store_free(s);
    p.dir = d3;
    p.seed = 42;
    s = tst_open(&p);
    assert_int_equal(dedup_store_get_info(s, &in), DEDUP_OK);
    assert_int_equal(in.seed, 42);
    dedup_store_free(s);
    rmtree(d2);
    rmtree(d3);
}

/* caller_commits: keys decided but never committed are forgotten at
 * close; committed ones stay.  The lock names the holder's PID.  A missing
 * DIR is created whole, the leftover of a dead creator removed. */
static void test_commit_lock_create(void **state)
{
    (void)state;
    static kb b;
    static dedup_verdict v[DEDUP_STORE_CHUNK * 3];
    tu_rng r = {tu_seed() + 5};
    char *base = tmpdir(), dir[128], stale[160], why[512];
    snprintf(dir, sizeof dir, "%s/st", base);
    snprintf(stale, sizeof stale, "%s/st.dedup-new.999999999", base);
    assert_int_equal(mkdir(stale, 0755), 0); /* a creator that died (no such PID) */
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    p.caller_commits = true;
    dedup_store *s = tst_open(&p);
    struct stat st;
    assert_int_equal(stat(stale, &st), -1); /* removed */
    fill_batch(&b, &r, 100);
    dedup_batch x = as_batch(&b);
    x.n = 50;
    assert_int_equal(dedup_store_decide(s, &x, v, NULL), DEDUP_OK);
    assert_int_equal(dedup_store_commit(s), DEDUP_OK);
    dedup_batch y = as_batch(&b);
    y.digests += 50, y.keys += 50, y.lens += 50, y.n = 50;
    assert_int_equal(dedup_store_decide(s, &y, v, NULL), DEDUP_OK);

    dedup_store *s2 = NULL;
    assert_int_equal(dedup_store_create(&p, NULL, &s2, why, sizeof why), DEDUP_ERR_IO);
    char pid[64];
    snprintf(pid, sizeof pid, "in use by PID %ld", (long)getpid());
    assert_non_null(strstr(why, pid));
    dedup_store_free(s); /* the second 50 never committed: forgotten */

    p.caller_commits = false;
    s = tst_open(&p);
    dedup_batch all = as_batch(&b);
    assert_int_equal(dedup_store_query(s, &all, v), DEDUP_OK);
    bool first_half[UNIVERSE] = {0};
    for (size_t i = 0; i < 50; i++)
        first_half[b.id[i]] = true;
    for (size_t i = 0; i < 100; i++)
        assert_int_equal(v[i], first_half[b.id[i]] ? DEDUP_DUPLICATE : DEDUP_NEW);
    dedup_store_free(s);
    rmtree(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_log_replay), /* first: forks before RocksDB's threads */
        cmocka_unit_test(test_whole_keys_batch), cmocka_unit_test(test_long_keys_sorted),
        cmocka_unit_test(test_digest_keys),    cmocka_unit_test(test_whole_keys),
        cmocka_unit_test(test_sync_none),      cmocka_unit_test(test_record_and_foreach),
        cmocka_unit_test(test_seen_interface),
        cmocka_unit_test(test_expiry),         cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_identity_and_seed), cmocka_unit_test(test_commit_lock_create),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
