/*
 * test_redis_backend.c - libdedup_redis against a real server or cluster.
 *
 *   test_redis_backend url                       URL parsing (no server)
 *   test_redis_backend keys    URL               exact scheme vs a reference
 *   test_redis_backend ttl     URL               reserve, commit, expiry
 *   test_redis_backend bitmap  URL               identical to a local blocked filter
 *   test_redis_backend module  URL               BF.* and CF.* shards: no false
 *                                                negatives, metadata, deletes
 *   test_redis_backend errors  URL               metadata mismatch, wrong type, AUTH
 *   test_redis_backend lost    URL PROXYURL      replies cut by a proxy -> UNCERTAIN
 *   test_redis_backend lost-repeats SCHEME URL PROXYURL [gone]
 *                                                a batch full of repeats through a
 *                                                reply-cutting proxy (gone: one that
 *                                                then refuses): a repeat is never
 *                                                UNCERTAIN; a failed call's decided
 *                                                prefix is right and in Redis
 *
 * The servers are started by the calling scripts (single.sh, cluster.sh).
 * Random inputs are seeded; the seed is printed ($DEDUP_TEST_SEED fixes it).
 */
#define _POSIX_C_SOURCE 200809L
#include "dedup/bloom.h"
#include "dedup/redis.h"
#include "rtest.h"
#include "dedup/seen.h"

#include <hiredis/hiredis.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* A monotonic clock in milliseconds: a check that only holds within a time
 * is judged only when the process did not stall past it. */
static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A unique name per run so reruns against one server never meet old keys. */
static char run_name[64];

static dedup_redis *open_or_die(dedup_redis_params *o)
{
    char err[512];
    dedup_redis *r = NULL;
    dedup_status st = dedup_redis_create(o, NULL, &r, err, sizeof err);
    if (st != DEDUP_OK) {
        fprintf(stderr, "open %s failed: %s: %s\n", o->url, dedup_strerror(st), err);
        exit(1);
    }
    return r;
}

/* Keys "k<j>" for j drawn from [0, distinct): repeats at a known rate. */
typedef struct input {
    size_t n;
    char (*text)[24];
    const unsigned char **keys;
    size_t *lens;
    dedup_digest *d;
    uint64_t *id;
} input;

static input make_input(size_t n, uint64_t distinct, uint64_t seed)
{
    input in = {n, malloc(n * 24), malloc(n * sizeof(void *)), malloc(n * sizeof(size_t)),
                malloc(n * sizeof(dedup_digest)), malloc(n * sizeof(uint64_t))};
    for (size_t i = 0; i < n; i++) {
        in.id[i] = rnd() % distinct;
        in.lens[i] = (size_t)sprintf(in.text[i], "k%llu", (unsigned long long)in.id[i]);
        in.keys[i] = (const unsigned char *)in.text[i];
        in.d[i] = dedup_hash(in.text[i], in.lens[i], seed);
    }
    return in;
}

static void free_input(input *in)
{
    free(in->text);
    free(in->keys);
    free(in->lens);
    free(in->d);
    free(in->id);
}

static dedup_batch slice(const input *in, size_t from, size_t n)
{
    dedup_batch b = {.n = n, .digests = in->d + from, .keys = in->keys + from, .lens = in->lens + from};
    return b;
}

/* Options for 'url' under the name "<run_name>:<tag>", written to 'name'
 * ('cap' bytes, which must outlive the options). */
static void opts_init(dedup_redis_params *o, const char *url, char *name, size_t cap,
                      const char *tag)
{
    dedup_redis_params_init(o);
    o->url = url;
    snprintf(name, cap, "%s:%s", run_name, tag);
    o->name = name;
}

/* Checks that every verdict of v[0 .. n-1] is (is_x) or is not (!is_x)
 * 'x', naming the first that is not as "what: key i". */
static void check_all(const dedup_verdict *v, size_t n, dedup_verdict x, bool is_x, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if ((v[i] == x) != is_x) {
            CHECK((v[i] == x) == is_x, "%s: key %zu answered %d", what, i, (int)v[i]);
            return;
        }
}

/* For a filter scheme: checks that no key seen before in 'in' was answered
 * NEW, counts the keys answered for the first time (*fresh) and returns
 * how many of those were dropped all the same (false drops). */
static size_t false_drops(const input *in, const dedup_verdict *v, uint64_t distinct, size_t *fresh)
{
    unsigned char *seen = calloc(distinct, 1);
    size_t fp = 0;
    *fresh = 0;
    for (size_t i = 0; i < in->n; i++) {
        if (seen[in->id[i]])
            CHECK(v[i] != DEDUP_NEW, "false negative at %zu", i);
        else {
            (*fresh)++;
            fp += v[i] != DEDUP_NEW;
        }
        seen[in->id[i]] = 1;
    }
    free(seen);
    return fp;
}


/* ---- url ---- */
static void test_url(void)
{
    dedup_redis_url u;
    char why[256];
    CHECK(dedup_redis_url_parse("redis://127.0.0.1:7000/3", &u, why, sizeof why) == DEDUP_OK, "%s", why);
    CHECK(!u.cluster && u.nseeds == 1 && u.seeds[0].port == 7000 && u.db == 3 &&
              strcmp(u.seeds[0].host, "127.0.0.1") == 0, "fields");
    CHECK(dedup_redis_url_parse("redis://bob:s%40cret@h:1", &u, why, sizeof why) == DEDUP_OK, "%s", why);
    CHECK(strcmp(u.user, "bob") == 0 && strcmp(u.pass, "s@cret") == 0 && u.db == 0, "creds");
    CHECK(dedup_redis_url_parse("redis://:pw@h", &u, why, sizeof why) == DEDUP_OK && u.user[0] == 0 &&
              strcmp(u.pass, "pw") == 0 && u.seeds[0].port == 6379, "default user");
    CHECK(dedup_redis_url_parse("redis-cluster://a:1,b:2,c", &u, why, sizeof why) == DEDUP_OK &&
              u.cluster && u.nseeds == 3 && u.seeds[2].port == 6379, "seeds");
    const char *bad[] = {"http://h:1", "redis://", "redis://h:0", "redis://h:65536", "redis://h:1/x",
                         "redis://h:1,g:2", "redis-cluster://h:1/2", "redis://h:1/2/3",
                         "redis://h h:1", "redis://u:%zz@h", "redis-cluster://a:1,", NULL};
    for (int i = 0; bad[i]; i++) {
        why[0] = 0;
        CHECK(dedup_redis_url_parse(bad[i], &u, why, sizeof why) == DEDUP_ERR_INVALID_ARG && why[0],
              "'%s' accepted", bad[i]);
    }
    /* TLS URLs (issue 40) */
    CHECK(dedup_redis_url_parse("rediss://h:1/2", &u, why, sizeof why) == DEDUP_OK && u.tls &&
              !u.cluster && u.db == 2, "rediss");
    CHECK(dedup_redis_url_parse("rediss-cluster://a:1,b:2", &u, why, sizeof why) == DEDUP_OK &&
              u.tls && u.cluster && u.nseeds == 2, "rediss-cluster");
    CHECK(dedup_redis_url_parse("redis://h:1", &u, why, sizeof why) == DEDUP_OK && !u.tls, "plain");
    /* a password never in a message: redacted, and out of the parser's errors */
    char shown[128];
    const char *red[][2] = {{"redis://bob:s3cret@h:1/2", "redis://bob:***@h:1/2"},
                            {"rediss://:s3cret@h", "rediss://:***@h"},
                            {"redis://s3cret@h", "redis://***@h"},
                            {"redis-cluster://h:1,g:2", "redis-cluster://h:1,g:2"},
                            {"redis://u:s3cret@h/x@y", "redis://u:***@h/x@y"}};
    for (size_t i = 0; i < sizeof red / sizeof red[0]; i++) {
        dedup_redis_url_redact(red[i][0], shown, sizeof shown);
        CHECK(strcmp(shown, red[i][1]) == 0, "redact '%s' -> '%s'", red[i][0], shown);
    }
    why[0] = 0;
    CHECK(dedup_redis_url_parse("redis://bob:s3cret@h:99999", &u, why, sizeof why) != DEDUP_OK &&
              why[0] && !strstr(why, "s3cret"), "the password in a parse error: %s", why);
    /* redis-sentinel:// (issue 40): sentinels, then the master's name */
    CHECK(dedup_redis_url_parse("redis-sentinel://:pw@a,b:26380/my%2Dmaster/4", &u, why,
                                sizeof why) == DEDUP_OK, "%s", why);
    CHECK(u.sentinel && !u.cluster && u.nseeds == 2 && u.seeds[0].port == 26379 &&
              u.seeds[1].port == 26380 && strcmp(u.master, "my-master") == 0 && u.db == 4 &&
              strcmp(u.pass, "pw") == 0, "sentinel fields");
    const char *sbad[] = {"redis-sentinel://a:1", "redis-sentinel://a:1/", "redis-sentinel://a:1//2",
                          "redis-sentinel://a:1/m/x", "redis-sentinel://a:1/m/1/2",
                          "redis-sentinel://a:1/%00", NULL};
    for (int i = 0; sbad[i]; i++) {
        why[0] = 0;
        CHECK(dedup_redis_url_parse(sbad[i], &u, why, sizeof why) == DEDUP_ERR_INVALID_ARG && why[0],
              "'%s' accepted", sbad[i]);
    }
}

/* ---- keys: every distinct key NEW exactly once, in order ---- */
static void test_keys(const char *url, bool whole)
{
    dedup_redis_params o;
    char name[96];
    opts_init(&o, url, name, sizeof name, whole ? "keys1" : "keys0");
    o.whole_keys = whole;
    o.pipeline = 256;
    dedup_redis *r = open_or_die(&o);
    size_t n = 50000;
    input in = make_input(n, 20000, o.seed);
    dedup_verdict *v = malloc(n * sizeof *v);
    unsigned char *seen = calloc(20000, 1);
    size_t pos = 0, batches = 0;
    while (pos < n) {
        size_t m = 1 + rnd() % 3000;
        if (m > n - pos)
            m = n - pos;
        dedup_batch b = slice(&in, pos, m);
        size_t done = 7;
        dedup_status st = dedup_redis_decide(r, &b, v + pos, &done);
        CHECK(st == DEDUP_OK && done == m, "decide: %s", dedup_redis_last_error(r));
        pos += m;
        batches++;
    }
    size_t news = 0;
    for (size_t i = 0; i < n; i++) {
        dedup_verdict want = seen[in.id[i]] ? DEDUP_DUPLICATE : DEDUP_NEW;
        seen[in.id[i]] = 1;
        news += want == DEDUP_NEW;
        if (v[i] != want) {
            CHECK(v[i] == want, "key %zu (%s): got %d want %d", i, in.text[i], v[i], want);
            break;
        }
    }
    dedup_redis_stats s;
    dedup_redis_get_stats(r, &s);
    fprintf(stderr, "keys%s: %zu keys, %zu new, %llu round trips in %zu batches, %llu nodes\n",
            whole ? " (whole)" : "", n, news, (unsigned long long)s.round_trips, batches,
            (unsigned long long)s.nodes);
    CHECK(s.recorded == news && s.uncertain == 0 && s.keys == n, "stats");
    /* Pipelined: a batch of m keys costs ceil(m / 256) round trips per node. */
    CHECK(s.round_trips <= batches * s.nodes * (3000 / 256 + 1) + s.retries, "round trips %llu",
          (unsigned long long)s.round_trips);
    CHECK(s.round_trips * 50 < n, "pipelining: %llu round trips for %zu keys",
          (unsigned long long)s.round_trips, n);
    /* query: all present; fresh keys absent */
    dedup_batch b = slice(&in, 0, 1000);
    CHECK(dedup_redis_query(r, &b, v) == DEDUP_OK, "query");
    for (size_t i = 0; i < 1000; i++)
        CHECK(v[i] == DEDUP_DUPLICATE, "query of recorded key %zu", i);
    input fresh = make_input(1000, 1000, o.seed);
    for (size_t i = 0; i < 1000; i++) {
        fresh.lens[i] = (size_t)sprintf(fresh.text[i], "fresh%zu", i);
        fresh.d[i] = dedup_hash(fresh.text[i], fresh.lens[i], o.seed);
    }
    b = slice(&fresh, 0, 1000);
    CHECK(dedup_redis_query(r, &b, v) == DEDUP_OK, "query");
    for (size_t i = 0; i < 1000; i++)
        CHECK(v[i] == DEDUP_NEW, "query of fresh key %zu", i);
    /* A second client sees the first's keys. */
    dedup_redis *r2 = open_or_die(&o);
    b = slice(&in, 0, n);
    CHECK(dedup_redis_decide(r2, &b, v, NULL) == DEDUP_OK, "decide 2");
    check_all(v, n, DEDUP_DUPLICATE, true, "second client");
    dedup_redis_free(r2);
    /* The same through the seen-set interface: every key now a duplicate. */
    dedup_redis *r3 = open_or_die(&o);
    dedup_seen *s3 = NULL;
    CHECK(dedup_redis_as_seen(r3, NULL, &s3) == DEDUP_OK, "wrap");
    CHECK(dedup_seen_kind_of(s3) == DEDUP_SEEN_REDIS, "kind");
    b = slice(&in, 0, 5000);
    size_t done = 0;
    CHECK(dedup_seen_decide(s3, &b, v, &done) == DEDUP_OK && done == 5000, "seen decide");
    check_all(v, 5000, DEDUP_DUPLICATE, true, "seen");
    b = slice(&fresh, 0, 1000);
    CHECK(dedup_seen_decide(s3, &b, v, &done) == DEDUP_OK, "seen decide fresh");
    CHECK(dedup_seen_commit(s3, &b) == DEDUP_OK, "seen commit");
    check_all(v, 1000, DEDUP_NEW, true, "seen: fresh");
    dedup_seen_info si;
    dedup_seen_get_info(s3, &si);
    CHECK(si.kind == DEDUP_SEEN_REDIS && !si.probabilistic && si.items == 1000, "info");
    dedup_seen_free(s3);
    free_input(&fresh);
    free_input(&in);
    free(v);
    free(seen);
    dedup_redis_free(r);
}

/* A direct connection to the node owning 'key' (single server: the URL). */
static redisContext *raw(const char *url, const char *key, size_t klen)
{
    dedup_redis_url u;
    if (dedup_redis_url_parse(url, &u, NULL, 0) != DEDUP_OK)
        return NULL;
    redisContext *c = redisConnect(u.seeds[0].host, u.seeds[0].port);
    if (!c || c->err)
        return NULL;
    if (u.db) {
        redisReply *x = redisCommand(c, "SELECT %d", u.db);
        freeReplyObject(x);
    }
    if (!u.cluster)
        return c;
    /* follow one MOVED */
    redisReply *x = redisCommand(c, "EXISTS %b", key, klen);
    if (x && x->type == REDIS_REPLY_ERROR && strncmp(x->str, "MOVED", 5) == 0) {
        char host[64];
        int slot, port;
        if (sscanf(x->str, "MOVED %d %63[^:]:%d", &slot, host, &port) == 3) {
            redisFree(c);
            c = redisConnect(host, port);
        }
    }
    freeReplyObject(x);
    return c;
}

static long long pttl(const char *url, const char *name, dedup_digest d)
{
    char key[256];
    size_t kl = rtest_entry_key(key, name, d);
    redisContext *c = raw(url, key, kl);
    redisReply *x = redisCommand(c, "PTTL %b", key, kl);
    long long t = x && x->type == REDIS_REPLY_INTEGER ? x->integer : -100;
    freeReplyObject(x);
    redisFree(c);
    return t;
}

static void test_ttl(const char *url)
{
    dedup_redis_params o;
    char name[96];
    opts_init(&o, url, name, sizeof name, "ttl");
    o.ttl_ms = 3600000;
    o.reserve_ms = 400;
    dedup_redis *r = open_or_die(&o);
    input in = make_input(200, 1000000000, o.seed);
    dedup_verdict v[200];
    dedup_batch b = slice(&in, 0, 100);
    double t0 = mono_ms();
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide");
    long long t = pttl(url, name, in.d[0]);
    /* (gone already only if this process stalled past the reservation) */
    CHECK((t > 0 && t <= 400) || (t == -2 && mono_ms() - t0 > 400),
          "reserved key's PTTL %lld, want (0, 400]", t);
    /* Commit the first 50 only: they get the TTL; the other 50 die. */
    b = slice(&in, 0, 50);
    CHECK(dedup_redis_commit(r, &b) == DEDUP_OK, "commit");
    t = pttl(url, name, in.d[0]);
    CHECK(t > 3000000, "committed key's PTTL %lld", t);
    struct timespec ts = {0, 700 * 1000000L};
    nanosleep(&ts, NULL);
    b = slice(&in, 0, 100);
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide again");
    for (size_t i = 0; i < 100; i++) {
        bool dupid = false;
        for (size_t j = 0; j < i; j++)
            dupid |= in.id[j] == in.id[i];
        if (dupid)
            continue;
        CHECK(v[i] == (i < 50 ? DEDUP_DUPLICATE : DEDUP_NEW),
              "key %zu after the reserve expired: %d", i, v[i]);
    }
    free_input(&in);
    dedup_redis_free(r);
}

/* ---- bitmap: the same decisions as a local blocked filter ---- */
static void test_bitmap(const char *url)
{
    dedup_redis_params o;
    char name[96];
    opts_init(&o, url, name, sizeof name, "bm");
    o.scheme = DEDUP_REDIS_BITMAP;
    o.items = 20000;
    o.fpr = 0.01;
    o.segments = 3;
    dedup_redis *r = open_or_die(&o);
    dedup_redis_shape sh;
    dedup_redis_get_shape(r, &sh);
    CHECK(sh.bits == dedup_blocked_bits_for(20000, 0.01) && sh.k == dedup_blocked_k_for(20000, sh.bits),
          "sized as dedup calc: bits %llu k %u", (unsigned long long)sh.bits, sh.k);
    dedup_bloom_params bp;
    dedup_bloom_params_init(&bp);
    bp.kind = DEDUP_BLOOM_BLOCKED;
    bp.bits = sh.bits;
    bp.k = sh.k;
    bp.seed = o.seed;
    bp.capacity = 20000;
    dedup_bloom *local;
    CHECK(dedup_bloom_create(&bp, NULL, &local) == DEDUP_OK, "local");
    size_t n = 40000;
    input in = make_input(n, 25000, o.seed);
    dedup_verdict *v = malloc(n * sizeof *v);
    bool *want = malloc(n * sizeof *want);
    dedup_bloom_test_and_add_batch(local, in.d, n, want);
    size_t pos = 0;
    while (pos < n) {
        size_t m = 1 + rnd() % 4000;
        if (m > n - pos)
            m = n - pos;
        dedup_batch b = slice(&in, pos, m);
        { dedup_status st_ = dedup_redis_decide(r, &b, v + pos, NULL); CHECK(st_ == DEDUP_OK, "decide: %s %s", dedup_strerror(st_), dedup_redis_last_error(r)); if (st_) exit(1); }
        pos += m;
    }
    size_t diff = 0, fp = 0;
    unsigned char *seen = calloc(25000, 1);
    for (size_t i = 0; i < n; i++) {
        bool present = v[i] != DEDUP_NEW;
        diff += present != want[i];
        if (seen[in.id[i]])
            CHECK(present, "false negative at %zu", i);
        else
            fp += present;
        seen[in.id[i]] = 1;
    }
    CHECK(diff == 0, "%zu of %zu decisions differ from the local blocked filter", diff, n);
    fprintf(stderr, "bitmap: bits %llu k %u segments %u; identical to local on %zu keys; %zu false drops\n",
            (unsigned long long)sh.bits, sh.k, sh.segments, n, fp);
    /* The bytes in Redis are the local filter's words. */
    unsigned char *buf = malloc(sh.bits / 8);
    CHECK(dedup_redis_bitmap_read(r, buf, sh.bits / 8) == DEDUP_OK, "read: %s", dedup_redis_last_error(r));
    /* ... compared through queries: a copy written under another name answers alike. */
    dedup_redis_params o2 = o;
    char name2[100];
    snprintf(name2, sizeof name2, "%s:bm2", run_name);
    o2.name = name2;
    dedup_redis *r2 = open_or_die(&o2);
    CHECK(dedup_redis_bitmap_write(r2, buf, sh.bits / 8) == DEDUP_OK, "write: %s", dedup_redis_last_error(r2));
    input fresh = make_input(20000, 1ull << 60, o.seed ^ 1);
    for (size_t i = 0; i < 20000; i++)
        fresh.d[i] = dedup_hash(&i, sizeof i, o.seed + 99);
    dedup_batch b = slice(&fresh, 0, 20000);
    dedup_verdict *v2 = malloc(20000 * sizeof *v2);
    bool *lw = malloc(20000 * sizeof *lw);
    CHECK(dedup_redis_query(r2, &b, v2) == DEDUP_OK, "query copy");
    dedup_bloom_might_contain_batch(local, fresh.d, 20000, lw);
    size_t qd = 0;
    for (size_t i = 0; i < 20000; i++)
        qd += (v2[i] != DEDUP_NEW) != lw[i];
    CHECK(qd == 0, "the copy answers %zu queries differently", qd);
    b = slice(&in, 0, n < 20000 ? n : 20000);
    CHECK(dedup_redis_query(r2, &b, v2) == DEDUP_OK, "query copy");
    check_all(v2, b.n, DEDUP_NEW, false, "copy lost");
    /* Metadata: a client asking another size is refused, naming both. */
    dedup_redis_params o3 = o;
    o3.items = 30000;
    char err[512];
    dedup_redis *r3 = NULL;
    dedup_status st = dedup_redis_create(&o3, NULL, &r3, err, sizeof err);
    char b1[64], b2[64];
    snprintf(b1, sizeof b1, "bits=%llu", (unsigned long long)sh.bits);
    snprintf(b2, sizeof b2, "bits=%llu", (unsigned long long)dedup_blocked_bits_for(30000, 0.01));
    CHECK(st == DEDUP_ERR_INCOMPATIBLE && strstr(err, b1) && strstr(err, b2), "mismatch: %s", err);
    /* A client giving no size adopts the stored one. */
    o3.items = 0;
    st = dedup_redis_create(&o3, NULL, &r3, err, sizeof err);
    CHECK(st == DEDUP_OK, "adopt: %s", err);
    if (st == DEDUP_OK) {
        dedup_redis_shape s3;
        dedup_redis_get_shape(r3, &s3);
        CHECK(s3.bits == sh.bits && s3.k == sh.k && s3.segments == sh.segments, "adopted shape");
        dedup_redis_free(r3);
    }
    free(seen); free(buf); free(v2); free(lw); free(v); free(want);
    free_input(&fresh);
    free_input(&in);
    dedup_bloom_free(local);
    dedup_redis_free(r2);
    dedup_redis_free(r);
}

/* Bitmap with a TTL: generations.  A key is remembered across generations. */
static void test_bitmap_ttl(const char *url)
{
    dedup_redis_params o;
    char name[96];
    opts_init(&o, url, name, sizeof name, "bmttl");
    o.scheme = DEDUP_REDIS_BITMAP;
    o.items = 5000;
    o.ttl_ms = 1200;
    o.generations = 3;
    dedup_redis *r = open_or_die(&o);
    input in = make_input(2000, 1ull << 60, o.seed);
    dedup_verdict v[2000];
    dedup_batch b = slice(&in, 0, 2000);
    double t0 = mono_ms();
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide: %s", dedup_redis_last_error(r));
    size_t news = 0;
    for (int i = 0; i < 2000; i++)
        news += v[i] == DEDUP_NEW;
    CHECK(news > 1900, "news %zu", news);
    struct timespec ts = {0, 500 * 1000000L}; /* past at least one generation */
    nanosleep(&ts, NULL);
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide");
    /* judged only when this process did not stall past the TTL meanwhile */
    if (mono_ms() - t0 < 1200)
        check_all(v, 2000, DEDUP_NEW, false, "forgotten within its TTL");
    else
        fprintf(stderr, "bitmap ttl: stalled past the TTL, 'remembered' not judged\n");
    struct timespec ts2 = {2, 200 * 1000000L}; /* past ttl * (1 + 1/G) */
    nanosleep(&ts2, NULL);
    CHECK(dedup_redis_query(r, &b, v) == DEDUP_OK, "query");
    size_t still = 0;
    for (int i = 0; i < 2000; i++)
        still += v[i] != DEDUP_NEW;
    CHECK(still < 200, "%zu of 2000 keys still present after the TTL", still);
    fprintf(stderr, "bitmap ttl: %zu new, %zu present after expiry\n", news, still);
    free_input(&in);
    dedup_redis_free(r);
}

/* ---- Rate checks: the filters' own rate summed over their fill ------------
 * A fresh key meets a shard holding the keys before it, so the false drops
 * expected over a run are the sum of the shard's rate at each fill, from
 * the shape the shard reports (BF.DEBUG: bits and hashes of a classic
 * Bloom link; CF.DEBUG: buckets of 'bktsize' slots, fingerprints of the
 * width the library picks for the module's 1% (CF error rate default)).
 * The count must lie in the Poisson interval of that mean, 1e-6 a side (as
 * tests/util/testutil.c's tu_count_interval). */
static void count_interval(double mean, uint64_t *lo, uint64_t *hi)
{
    *lo = *hi = 0;
    if (!(mean > 0))
        return;
    double mode = floor(mean), span = 12 * sqrt(mean) + 40, acc = 0;
    for (double j = mode - span > 0 ? mode - span : 0; j <= mode; j++) {
        double pj = exp(j * log(mean) - mean - lgamma(j + 1));
        if (acc + pj > 1e-6) {
            *lo = (uint64_t)j;
            break;
        }
        acc += pj;
    }
    acc = 0;
    for (double j = mode + span; j >= mode; j--) {
        double pj = exp(j * log(mean) - mean - lgamma(j + 1));
        if (acc + pj > 1e-6) {
            *hi = (uint64_t)j;
            break;
        }
        acc += pj;
    }
}

/* A shard's reply to BF.DEBUG / CF.DEBUG, joined into 'out'. */
static void shard_debug(const char *url, const char *name, uint32_t s, bool cuckoo, char *out,
                        size_t cap)
{
    char key[256];
    int kl = snprintf(key, sizeof key, "%s:{%s:f%u}", name, name, s);
    redisContext *c = raw(url, key, (size_t)kl);
    redisReply *x = c ? redisCommand(c, "%s %b", cuckoo ? "CF.DEBUG" : "BF.DEBUG", key, (size_t)kl)
                      : NULL;
    out[0] = 0;
    if (x && x->type == REDIS_REPLY_STRING)
        snprintf(out, cap, "%s", x->str);
    for (size_t i = 0; x && x->type == REDIS_REPLY_ARRAY && i < x->elements; i++)
        if (x->element[i]->type == REDIS_REPLY_STRING)
            snprintf(out + strlen(out), cap - strlen(out), "%s ", x->element[i]->str);
    freeReplyObject(x);
    if (c)
        redisFree(c);
}

/* False drops expected over the run of a module filter of 'shards' shards;
 * *end_rate: the rate a fresh key meets now (the shards' mean). */
static double module_expected_drops(const char *url, const char *name, uint32_t shards, bool cuckoo,
                                    double *end_rate)
{
    double mean = 0;
    *end_rate = 0;
    for (uint32_t s = 0; s < shards; s++) {
        char d[1024];
        shard_debug(url, name, s, cuckoo, d, sizeof d);
        unsigned long long items = 0, bits = 0, b = 0, nb = 0;
        unsigned k = 0;
        if (cuckoo) {
            const char *q = strstr(d, "bktsize:");
            CHECK(q && sscanf(q, "bktsize:%llu buckets:%llu items:%llu", &b, &nb, &items) == 3,
                  "CF.DEBUG: %s", d);
            uint32_t f = dedup_seen_fingerprint_bits_for(0.01, (uint32_t)b);
            /* rate 2 b load / (2^f - 1), load i / (nb b): summed over i < items */
            if (nb && f) {
                mean += 2.0 / ((double)nb * (ldexp(1.0, (int)f) - 1)) * (double)items *
                        ((double)items - 1) / 2;
                *end_rate += dedup_seen_fingerprint_fpr(f, (uint32_t)b, (double)items / (double)(nb * b)) /
                             shards;
            }
            continue;
        }
        const char *q = strstr(d, "size:"), *l = strstr(d, "bits:"), *h = strstr(d, "hashes:");
        CHECK(q && l && h && sscanf(q, "size:%llu", &items) == 1 && sscanf(l, "bits:%llu", &bits) == 1 &&
                  sscanf(h, "hashes:%u", &k) == 1, "BF.DEBUG: %s", d);
        for (unsigned long long i = 1; i < items; i++)
            mean += dedup_bloom_fpr_for(i, bits, k);
        *end_rate += dedup_bloom_fpr_for(items, bits, k) / shards;
    }
    return mean;
}

static void check_drops(const char *what, size_t fp, double mean);

/* Queries 'q' keys never added: the count present must be the shards'
 * rate now times q, two-sided (the run's own drops are too few, a few
 * here, to tell a filter twice worse). */
static void check_fresh(dedup_redis *r, const char *what, double end_rate, size_t q, uint64_t seed)
{
    dedup_digest *d = malloc(q * sizeof *d);
    dedup_verdict *v = malloc(q * sizeof *v);
    for (size_t i = 0; i < q; i++)
        d[i] = dedup_hash(&i, sizeof i, seed + 77);
    dedup_batch b = {.n = q, .digests = d};
    CHECK(dedup_redis_query(r, &b, v) == DEDUP_OK, "query fresh: %s", dedup_redis_last_error(r));
    size_t present = 0;
    for (size_t i = 0; i < q; i++)
        present += v[i] != DEDUP_NEW;
    check_drops(what, present, end_rate * (double)q);
    free(d);
    free(v);
}

static void check_drops(const char *what, size_t fp, double mean)
{
    uint64_t lo, hi;
    count_interval(mean, &lo, &hi);
    fprintf(stderr, "%s: %zu false drops, %.1f expected, allowed %llu .. %llu (1e-6 a side)\n", what,
            fp, mean, (unsigned long long)lo, (unsigned long long)hi);
    CHECK(fp >= lo && fp <= hi, "%s: %zu false drops, outside %llu .. %llu", what, fp,
          (unsigned long long)lo, (unsigned long long)hi);
}

static void test_module(const char *url)
{
    dedup_redis_params o;
    char name[96];
    opts_init(&o, url, name, sizeof name, "mod");
    o.scheme = DEDUP_REDIS_MODULE;
    o.items = 30000;
    o.shards = 5;
    dedup_redis *r = open_or_die(&o);
    size_t n = 40000;
    input in = make_input(n, 30000, o.seed);
    dedup_verdict *v = malloc(n * sizeof *v);
    dedup_batch b = slice(&in, 0, n);
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide: %s", dedup_redis_last_error(r));
    size_t fresh, fp = false_drops(&in, v, 30000, &fresh);
    double end_rate;
    check_drops("module bloom, 5 shards", fp, module_expected_drops(url, name, 5, false, &end_rate));
    check_fresh(r, "module bloom, fresh keys present", end_rate, 200000, o.seed);
    fprintf(stderr, "module: %zu fresh, %zu false drops, 5 shards\n", fresh, fp);
    CHECK(dedup_redis_query(r, &b, v) == DEDUP_OK, "query");
    check_all(v, n, DEDUP_NEW, false, "query");
    dedup_redis_free(r);
    /* With a TTL: the module's expiring DEDUP.* filters. */
    snprintf(name, sizeof name, "%s:modttl", run_name);
    o.ttl_ms = 60000;
    o.shards = 3;
    r = open_or_die(&o);
    b = slice(&in, 0, 5000);
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide ttl: %s", dedup_redis_last_error(r));
    CHECK(dedup_redis_query(r, &b, v) == DEDUP_OK, "query ttl: %s", dedup_redis_last_error(r));
    check_all(v, 5000, DEDUP_NEW, false, "ttl query");
    free(v);
    free_input(&in);
    dedup_redis_free(r);
}

/* The module scheme's cuckoo filter (CF.*) and its metadata: S derived
 * from the size, a second client adopting the stored shape, mismatches
 * refused naming both, deletes. */
static void test_module_cuckoo(const char *url)
{
    dedup_redis_params o;
    char name[96], err[768];
    opts_init(&o, url, name, sizeof name, "cf");
    o.scheme = DEDUP_REDIS_MODULE;
    o.filter = DEDUP_REDIS_FILTER_CUCKOO;
    o.items = 30000;
    dedup_redis *r = open_or_die(&o);
    dedup_redis_shape sh;
    dedup_redis_get_shape(r, &sh);
    dedup_redis_stats st0;
    dedup_redis_get_stats(r, &st0);
    uint32_t want = dedup_redis_module_shards(DEDUP_REDIS_FILTER_CUCKOO, 30000, 0.01,
                                              sh.cluster ? st0.nodes : 0);
    CHECK(sh.shards == want && sh.filter == DEDUP_REDIS_FILTER_CUCKOO, "shards %u (want %u)",
          sh.shards, want);
    CHECK(sh.cluster ? sh.shards >= 4 * st0.nodes : sh.shards == 1, "derived S %u", sh.shards);
    /* The size rule itself: one shard per 64 MiB, 4 per master. */
    uint32_t big = dedup_redis_module_shards(DEDUP_REDIS_FILTER_BLOOM, UINT64_C(1) << 30, 0.01, 0);
    uint64_t bytes = dedup_seen_bytes_for(DEDUP_SEEN_BLOOM, UINT64_C(1) << 30, 0.01);
    CHECK(big == (bytes + (UINT64_C(64) << 20) - 1) / (UINT64_C(64) << 20) && big > 1,
          "2^30 keys: %u shards for %llu bytes", big, (unsigned long long)bytes);
    CHECK(dedup_redis_module_shards(DEDUP_REDIS_FILTER_BLOOM, 1000, 0.01, 3) == 12, "cluster minimum");
    size_t n = 40000;
    input in = make_input(n, 30000, o.seed);
    dedup_verdict *v = malloc(n * sizeof *v), *q = malloc(n * sizeof *q);
    dedup_batch b = slice(&in, 0, n);
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide: %s", dedup_redis_last_error(r));
    size_t fresh, fp = false_drops(&in, v, 30000, &fresh);
    double end_rate;
    check_drops("module cuckoo", fp, module_expected_drops(url, name, sh.shards, true, &end_rate));
    check_fresh(r, "module cuckoo, fresh keys present", end_rate, 200000, o.seed);
    fprintf(stderr, "module cuckoo: %zu fresh, %zu false drops, %u shard(s)\n", fresh, fp, sh.shards);
    /* A second client names no shape: it adopts the stored one. */
    dedup_redis_params o2 = o;
    o2.items = 0;
    o2.filter = DEDUP_REDIS_FILTER_DEFAULT;
    dedup_redis *r2 = open_or_die(&o2);
    dedup_redis_shape sh2;
    dedup_redis_get_shape(r2, &sh2);
    CHECK(sh2.shards == sh.shards && sh2.filter == DEDUP_REDIS_FILTER_CUCKOO && sh2.items == 30000,
          "adopted shape: %u shards, filter %d", sh2.shards, (int)sh2.filter);
    CHECK(dedup_redis_query(r2, &b, q) == DEDUP_OK, "query: %s", dedup_redis_last_error(r2));
    check_all(q, n, DEDUP_NEW, false, "second client");
    /* Delete the keys answered NEW whose id is even (each once): they are
     * gone, and every other key is still there. */
    size_t nd = 0;
    dedup_digest *dd = malloc(n * sizeof *dd);
    unsigned char *deleted = calloc(30000, 1), *added = calloc(30000, 1);
    for (size_t i = 0; i < n; i++)
        added[in.id[i]] |= v[i] == DEDUP_NEW;
    for (size_t i = 0; i < n; i++)
        if (v[i] == DEDUP_NEW && in.id[i] % 2 == 0) {
            dd[nd++] = in.d[i];
            deleted[in.id[i]] = 1;
        }
    bool *removed = malloc(nd * sizeof *removed);
    dedup_batch db = {.n = nd, .digests = dd};
    CHECK(dedup_redis_delete(r2, &db, removed) == DEDUP_OK, "delete: %s", dedup_redis_last_error(r2));
    size_t rem = 0;
    for (size_t i = 0; i < nd; i++)
        rem += removed[i];
    CHECK(rem == nd, "%zu of %zu deleted", rem, nd);
    CHECK(dedup_redis_query(r, &b, q) == DEDUP_OK, "query after delete");
    size_t back = 0, gone = 0, dn = 0;
    for (size_t i = 0; i < n; i++) {
        if (deleted[in.id[i]]) {
            dn++;
            back += q[i] != DEDUP_NEW;
        } else if (added[in.id[i]] && q[i] == DEDUP_NEW) {
            gone++; /* (a key never added, a false drop, may share a deleted one's fingerprint) */
        }
    }
    CHECK(gone == 0, "%zu keys added and not deleted answer absent (false negatives)", gone);
    CHECK(back <= dn / 50 + 20, "%zu of %zu occurrences of deleted keys still present", back, dn);
    fprintf(stderr, "module cuckoo: %zu keys deleted, %zu occurrences still present (fp)\n", nd, back);
    dedup_redis_free(r2);
    /* Mismatches, each refused naming both values. */
    dedup_redis *x = NULL;
    o2 = o;
    o2.shards = sh.shards + 1;
    dedup_status s = dedup_redis_create(&o2, NULL, &x, err, sizeof err);
    char a[96], c[32];
    snprintf(a, sizeof a, "shards=%u", sh.shards);
    snprintf(c, sizeof c, "shards=%u", sh.shards + 1);
    CHECK(s == DEDUP_ERR_INCOMPATIBLE && strstr(err, a) && strstr(err, c), "--shards mismatch: %s", err);
    o2 = o;
    o2.items = 60000;
    s = dedup_redis_create(&o2, NULL, &x, err, sizeof err);
    CHECK(s == DEDUP_ERR_INCOMPATIBLE && strstr(err, "items=30000") && strstr(err, "items=60000"),
          "-n mismatch: %s", err);
    o2 = o;
    o2.fpr = 0.001;
    s = dedup_redis_create(&o2, NULL, &x, err, sizeof err);
    CHECK(s == DEDUP_ERR_INCOMPATIBLE && strstr(err, "fpr=0.01") && strstr(err, "fpr=0.001"),
          "-p mismatch: %s", err);
    o2 = o;
    o2.items = 0;
    o2.filter = DEDUP_REDIS_FILTER_BLOOM;
    s = dedup_redis_create(&o2, NULL, &x, err, sizeof err);
    CHECK(s == DEDUP_ERR_INCOMPATIBLE && strstr(err, "filter=cuckoo") && strstr(err, "filter=bloom"),
          "filter mismatch: %s", err);
    o2 = o;
    o2.scheme = DEDUP_REDIS_BITMAP;
    s = dedup_redis_create(&o2, NULL, &x, err, sizeof err);
    CHECK(s == DEDUP_ERR_WRONG_TYPE && strstr(err, "not a bitmap filter"), "bitmap on a module filter: %s", err);
    o2 = o;
    o2.items = 0;
    snprintf(a, sizeof a, "%s:none", run_name);
    o2.name = a;
    s = dedup_redis_create(&o2, NULL, &x, err, sizeof err);
    CHECK(s == DEDUP_ERR_NOT_FOUND && strstr(err, "no module filter"), "absent: %s", err);
    o2 = o;
    o2.ttl_ms = 1000;
    s = dedup_redis_create(&o2, NULL, &x, err, sizeof err);
    CHECK(s == DEDUP_ERR_INVALID_ARG, "cuckoo with a TTL: %s", err);
    /* A Bloom filter cannot delete. */
    o2 = o;
    snprintf(a, sizeof a, "%s:bfdel", run_name);
    o2.name = a;
    o2.filter = DEDUP_REDIS_FILTER_BLOOM;
    x = open_or_die(&o2);
    CHECK(dedup_redis_delete(x, &db, removed) == DEDUP_ERR_UNSUPPORTED, "Bloom delete");
    dedup_redis_free(x);
    free(removed);
    free(dd);
    free(deleted);
    free(added);
    free(v);
    free(q);
    free_input(&in);
    dedup_redis_free(r);
}

static void test_errors(const char *url)
{
    dedup_redis_params o;
    char name[96], err[512];
    opts_init(&o, url, name, sizeof name, "err");
    o.scheme = DEDUP_REDIS_BITMAP;
    o.items = 1000;
    o.segments = 1;
    dedup_redis *r = open_or_die(&o);
    /* Someone puts a list where segment 0 lives. */
    char key[256];
    snprintf(key, sizeof key, "%s:{%s:s0}:g0", name, name);
    redisContext *c = raw(url, key, strlen(key));
    redisReply *x = redisCommand(c, "DEL %s", key);
    freeReplyObject(x);
    x = redisCommand(c, "RPUSH %s x", key);
    freeReplyObject(x);
    input in = make_input(100, 100, o.seed);
    dedup_verdict v[100];
    dedup_batch b = slice(&in, 0, 100);
    size_t done = 5;
    dedup_status st = dedup_redis_decide(r, &b, v, &done);
    CHECK(st == DEDUP_ERR_WRONG_TYPE && done == 0 && strstr(dedup_redis_last_error(r), "WRONGTYPE"),
          "wrong type: %s (%s)", dedup_strerror(st), dedup_redis_last_error(r));
    dedup_redis_free(r);
    /* The metadata key of another type. */
    snprintf(key, sizeof key, "%s:wt:meta", name);
    redisFree(c);
    c = raw(url, key, strlen(key));
    x = redisCommand(c, "SET %s x", key);
    freeReplyObject(x);
    redisFree(c);
    free_input(&in);
    char name2[128];
    snprintf(name2, sizeof name2, "%s:wt", name);
    o.name = name2;
    st = dedup_redis_create(&o, NULL, &r, err, sizeof err);
    CHECK(st == DEDUP_ERR_WRONG_TYPE && strstr(err, "WRONGTYPE"), "meta wrong type: %s", err);
    /* Nothing listens on port 1. */
    o.url = "redis://127.0.0.1:1";
    st = dedup_redis_create(&o, NULL, &r, err, sizeof err);
    CHECK(st == DEDUP_ERR_IO && strstr(err, "127.0.0.1:1"), "unreachable: %s", err);
}

/* Replies cut by the proxy after the first few: the keys written are
 * UNCERTAIN when re-sent, never NEW twice. */
static void test_lost(const char *url, const char *proxy)
{
    dedup_redis_params o;
    char name[96];
    opts_init(&o, proxy, name, sizeof name, "lost");
    o.io_timeout_ms = 1000;
    o.backoff_ms = 10;
    dedup_redis *r = open_or_die(&o);
    size_t n = 2000;
    input in = make_input(n, 1ull << 60, o.seed);
    dedup_verdict *v = malloc(n * sizeof *v);
    dedup_batch b = slice(&in, 0, n);
    dedup_status st = dedup_redis_decide(r, &b, v, NULL);
    CHECK(st == DEDUP_OK, "decide through the proxy: %s", dedup_redis_last_error(r));
    dedup_redis_stats s;
    dedup_redis_get_stats(r, &s);
    size_t news = 0, unc = 0;
    for (size_t i = 0; i < n; i++) {
        news += v[i] == DEDUP_NEW;
        unc += v[i] == DEDUP_UNCERTAIN;
    }
    fprintf(stderr, "lost: %zu new, %zu uncertain, %llu retries\n", news, unc,
            (unsigned long long)s.retries);
    CHECK(unc > 0 && s.uncertain == unc && s.retries > 0, "some replies were lost");
    CHECK(news + unc == n, "every key NEW or UNCERTAIN (%zu + %zu != %zu)", news, unc, n);
    /* Directly: every key is there now. */
    o.url = url;
    dedup_redis *d = open_or_die(&o);
    CHECK(dedup_redis_query(d, &b, v) == DEDUP_OK, "query");
    size_t present = 0;
    for (size_t i = 0; i < n; i++)
        present += v[i] == DEDUP_DUPLICATE;
    CHECK(present == n, "%zu of %zu present", present, n);
    dedup_redis_free(d);
    free(v);
    free_input(&in);
    dedup_redis_free(r);
}

/* A batch of 3,000 keys drawn from 1,000 (so most keys repeat inside it),
 * decided in one call through the proxy, which cuts the first connection's
 * replies: each key's first occurrence is NEW or UNCERTAIN (or, for a
 * filter, a false MAYBE), every later occurrence a plain repeat (DUPLICATE
 * for keys, MAYBE_DUPLICATE for the filters) and never UNCERTAIN, so no key
 * is both new and uncertain nor uncertain twice.  With 'gone' the proxy
 * refuses every later connection, so the call fails: the keys it reports
 * decided (*done) have verdicts as above and are in Redis. */
static void test_lost_repeats(const char *scheme, const char *url, const char *proxy, bool gone)
{
    dedup_redis_params o;
    dedup_redis_params_init(&o);
    o.url = proxy;
    char name[96];
    snprintf(name, sizeof name, "%s:lr%s%s", run_name, scheme, gone ? "g" : "");
    o.name = name;
    o.io_timeout_ms = 1000;
    o.backoff_ms = 10;
    o.retries = gone ? 2 : 8;
    bool keys = strcmp(scheme, "keys") == 0;
    if (!keys) {
        o.scheme = strcmp(scheme, "bitmap") == 0 ? DEDUP_REDIS_BITMAP : DEDUP_REDIS_MODULE;
        o.items = 20000;
        o.shards = o.scheme == DEDUP_REDIS_MODULE ? 4 : 0;
    }
    dedup_redis *r = open_or_die(&o);
    size_t n = 3000, distinct = 1000, done = 0;
    input in = make_input(n, distinct, o.seed);
    dedup_verdict *v = malloc(n * sizeof *v);
    unsigned char *seen = calloc(distinct, 1);
    dedup_batch b = slice(&in, 0, n);
    dedup_status st = dedup_redis_decide(r, &b, v, &done);
    dedup_redis_stats s;
    dedup_redis_get_stats(r, &s);
    bool module = o.scheme == DEDUP_REDIS_MODULE && !keys;
    if (gone) /* the module scheme answers for every key (UNCERTAIN when unanswered) */
        CHECK(st == DEDUP_ERR_IO && (module ? done == n : done < n),
              "%s: the call fails past its retries (%s, done %zu)", scheme, dedup_strerror(st), done);
    else
        CHECK(st == DEDUP_OK && done == n, "%s: decide through the proxy: %s", scheme,
              dedup_redis_last_error(r));
    dedup_verdict repeat = keys ? DEDUP_DUPLICATE : DEDUP_MAYBE_DUPLICATE;
    size_t news = 0, unc = 0, firsts = 0;
    for (size_t i = 0; i < done; i++) {
        news += v[i] == DEDUP_NEW;
        unc += v[i] == DEDUP_UNCERTAIN;
        if (seen[in.id[i]])
            CHECK(v[i] == repeat, "%s: key %zu repeats an earlier one: verdict %d, not %d", scheme,
                  i, (int)v[i], (int)repeat);
        else
            CHECK(v[i] == DEDUP_NEW || v[i] == DEDUP_UNCERTAIN || (!keys && v[i] == repeat),
                  "%s: first occurrence %zu: verdict %d", scheme, i, (int)v[i]);
        firsts += !seen[in.id[i]];
        seen[in.id[i]] = 1;
    }
    fprintf(stderr, "lost-repeats %s%s: %zu decided, %zu first occurrences, %zu new, %zu uncertain, "
                    "%llu retries\n", scheme, gone ? " (server gone)" : "", done, firsts, news, unc,
            (unsigned long long)s.retries);
    CHECK(s.uncertain == unc && s.retries > 0, "%s: stats %llu uncertain, %zu counted", scheme,
          (unsigned long long)s.uncertain, unc);
    if (!gone)
        CHECK(unc > 0, "%s: some replies were lost", scheme);
    if (gone && keys)
        CHECK(done > 0, "keys: the answered commands before the loss are reported");
    /* Directly: every key decided is there. */
    o.url = url;
    o.retries = 8;
    dedup_redis *d = open_or_die(&o);
    b.n = done;
    /* (a key left UNCERTAIN may not have reached Redis: only NEW ones are checked) */
    dedup_verdict *was = malloc(n * sizeof *was);
    CHECK(was != NULL, "memory");
    memcpy(was, v, n * sizeof *v);
    CHECK(dedup_redis_query(d, &b, v) == DEDUP_OK, "query");
    for (size_t i = 0; i < done; i++)
        if (was[i] == DEDUP_NEW && v[i] == DEDUP_NEW) {
            CHECK(false, "%s: decided key %zu absent from Redis", scheme, i);
            break;
        }
    free(was);
    dedup_redis_free(d);
    free(seen);
    free(v);
    free_input(&in);
    dedup_redis_free(r);
}

/* Each of n keys occurs twice, the stream cut into batches; after the first
 * quarter the file 'signal' is created (the script then kills a master).
 * With wait_replicas each key is NEW at most once and its second
 * occurrence never NEW; the run completes after the failover. */
static int test_failover(const char *url, const char *signal, unsigned wait)
{
    dedup_redis_params o;
    char name[96];
    opts_init(&o, url, name, sizeof name, "fo");
    o.wait_replicas = wait;
    o.wait_timeout_ms = 2000;
    o.retries = 12;
    o.io_timeout_ms = 2000;
    dedup_redis *r = open_or_die(&o);
    size_t distinct = 60000, n = 2 * distinct;
    input in = make_input(n, 1, o.seed);
    for (size_t i = 0; i < n; i++) {
        in.id[i] = i % distinct;
        in.lens[i] = (size_t)sprintf(in.text[i], "k%llu", (unsigned long long)in.id[i]);
        in.d[i] = dedup_hash(in.text[i], in.lens[i], o.seed);
    }
    dedup_verdict *v = malloc(n * sizeof *v);
    unsigned char *news = calloc(distinct, 1);
    bool signalled = false;
    int rc = 0;
    for (size_t pos = 0; pos < n; pos += 500) {
        size_t m = n - pos < 500 ? n - pos : 500;
        dedup_batch b = slice(&in, pos, m);
        dedup_status st = dedup_redis_decide(r, &b, v + pos, NULL);
        if (st != DEDUP_OK) {
            fprintf(stderr, "failover: decide stopped at key %zu: %s: %s\n", pos, dedup_strerror(st),
                    dedup_redis_last_error(r));
            CHECK(strstr(dedup_redis_last_error(r), "127.0.0.1:") != NULL, "the message names the node");
            rc = 3;
            n = pos;
            break;
        }
        if (!signalled && pos > n / 4) {
            FILE *f = fopen(signal, "w");
            if (f)
                fclose(f);
            signalled = true;
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
        }
        struct timespec ts = {0, 2 * 1000000L};
        nanosleep(&ts, NULL);
    }
    size_t twice = 0, unc = 0, second_new = 0;
    for (size_t i = 0; i < n; i++) {
        unc += v[i] == DEDUP_UNCERTAIN;
        if (v[i] != DEDUP_NEW)
            continue;
        if (news[in.id[i]])
            twice++;
        news[in.id[i]] = 1;
        second_new += i >= distinct;
    }
    dedup_redis_stats s;
    dedup_redis_get_stats(r, &s);
    fprintf(stderr, "failover (wait %u): %zu keys decided, %zu uncertain, %llu retries, %zu NEW twice\n",
            wait, n, unc, (unsigned long long)s.retries, twice);
    if (wait)
        CHECK(twice == 0 && second_new == 0, "with WAIT %u: %zu keys NEW twice", wait, twice);
    free(news);
    free(v);
    free_input(&in);
    dedup_redis_free(r);
    return rc;
}

/* The owner of 'key' and another master, as connections and node ids. */
static bool two_masters(const char *url, const char *key, size_t kl, redisContext **src,
                        redisContext **dst, char *src_id, char *dst_id)
{
    *src = raw(url, key, kl);
    if (!*src)
        return false;
    redisReply *x = redisCommand(*src, "CLUSTER MYID");
    snprintf(src_id, 64, "%s", x && x->type == REDIS_REPLY_STRING ? x->str : "");
    freeReplyObject(x);
    x = redisCommand(*src, "CLUSTER NODES");
    *dst = NULL;
    char *save = NULL;
    for (char *line = x && x->type == REDIS_REPLY_STRING ? strtok_r(x->str, "\n", &save) : NULL;
         line && !*dst; line = strtok_r(NULL, "\n", &save)) {
        char id[64], addr[128], flags[128];
        if (sscanf(line, "%63s %127s %127s", id, addr, flags) != 3 || !strstr(flags, "master") ||
            strstr(flags, "fail") || strcmp(id, src_id) == 0)
            continue;
        char host[64];
        int port;
        if (sscanf(addr, "%63[^:]:%d", host, &port) != 2)
            continue;
        *dst = redisConnect(host, port);
        snprintf(dst_id, 64, "%s", id);
    }
    freeReplyObject(x);
    return *dst && src_id[0];
}

/* A slot being migrated: the key's owner answers ASK for a key it lacks,
 * and once the slot has moved, MOVED; only the redirected command is
 * resent, and the answers stay exact. */
static void test_redirect(const char *url)
{
    dedup_redis_params o;
    char name[96];
    opts_init(&o, url, name, sizeof name, "redir");
    dedup_redis *r = open_or_die(&o);
    input in = make_input(200, 1ull << 60, o.seed);
    char key[256];
    size_t kl = rtest_entry_key(key, name, in.d[0]);
    redisContext *src = NULL, *dst = NULL;
    char sid[64] = "", did[64] = "";
    if (!two_masters(url, key, kl, &src, &dst, sid, did)) {
        CHECK(false, "two masters for slot of the key");
        exit(1);
    }
    redisReply *x = redisCommand(src, "CLUSTER KEYSLOT %b", key, kl);
    long long slot = x->integer;
    freeReplyObject(x);
    x = redisCommand(dst, "CLUSTER SETSLOT %lld IMPORTING %s", slot, sid);
    CHECK(x && x->type == REDIS_REPLY_STATUS, "importing: %s", x ? x->str : "?");
    freeReplyObject(x);
    x = redisCommand(src, "CLUSTER SETSLOT %lld MIGRATING %s", slot, did);
    CHECK(x && x->type == REDIS_REPLY_STATUS, "migrating: %s", x ? x->str : "?");
    freeReplyObject(x);
    dedup_verdict v[200];
    dedup_batch b = slice(&in, 0, 200);
    dedup_redis_stats s0, s1;
    dedup_redis_get_stats(r, &s0);
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide: %s", dedup_redis_last_error(r));
    dedup_redis_get_stats(r, &s1);
    CHECK(v[0] == DEDUP_NEW, "the migrating key: %d", v[0]);
    CHECK(s1.ask - s0.ask >= 1, "no ASK followed");
    CHECK(s1.commands - s0.commands == 200 + (s1.ask - s0.ask), "resent %llu commands for %llu ASK",
          (unsigned long long)(s1.commands - s0.commands - 200), (unsigned long long)(s1.ask - s0.ask));
    x = redisCommand(dst, "ASKING");
    freeReplyObject(x);
    x = redisCommand(dst, "EXISTS %b", key, kl);
    CHECK(x && x->type == REDIS_REPLY_INTEGER && x->integer == 1, "the key is on the importing node");
    freeReplyObject(x);
    /* The slot moves for good (the keys other tests left in it first, as
     * redis-cli --cluster reshard does): this client's map is stale. */
    for (int round = 0; round < 100; round++) {
        x = redisCommand(src, "CLUSTER GETKEYSINSLOT %lld 100", slot);
        size_t nk = x && x->type == REDIS_REPLY_ARRAY ? x->elements : 0;
        for (size_t i = 0; i < nk; i++) {
            redisReply *m = redisCommand(src, "MIGRATE %s %d %b 0 5000", dst->tcp.host, dst->tcp.port,
                                         x->element[i]->str, (size_t)x->element[i]->len);
            CHECK(m && m->type == REDIS_REPLY_STATUS, "MIGRATE: %s", m && m->str ? m->str : "?");
            freeReplyObject(m);
        }
        freeReplyObject(x);
        if (nk == 0)
            break;
    }
    x = redisCommand(dst, "CLUSTER SETSLOT %lld NODE %s", slot, did);
    CHECK(x && x->type == REDIS_REPLY_STATUS, "setslot on the target: %s", x ? x->str : "?");
    freeReplyObject(x);
    x = redisCommand(src, "CLUSTER SETSLOT %lld NODE %s", slot, did);
    CHECK(x && x->type == REDIS_REPLY_STATUS, "setslot on the source: %s", x ? x->str : "?");
    freeReplyObject(x);
    b = slice(&in, 0, 1);
    dedup_redis_get_stats(r, &s0);
    CHECK(dedup_redis_decide(r, &b, v, NULL) == DEDUP_OK, "decide: %s", dedup_redis_last_error(r));
    dedup_redis_get_stats(r, &s1);
    CHECK(v[0] == DEDUP_DUPLICATE, "after the move: %d", v[0]);
    /* Usually one MOVED; a slow cluster may still answer the stale route
     * with a transient error, after which the reloaded map routes it. */
    CHECK(s1.moved - s0.moved + s1.ask - s0.ask + s1.retries - s0.retries >= 1 &&
              s1.commands - s0.commands <= 3,
          "MOVED %llu, ASK %llu, retries %llu, commands %llu",
          (unsigned long long)(s1.moved - s0.moved), (unsigned long long)(s1.ask - s0.ask),
          (unsigned long long)(s1.retries - s0.retries), (unsigned long long)(s1.commands - s0.commands));
    fprintf(stderr, "redirect: slot %lld: ASK followed, then %llu MOVED, %llu retries\n", slot,
            (unsigned long long)(s1.moved - s0.moved), (unsigned long long)(s1.retries - s0.retries));
    redisFree(src);
    redisFree(dst);
    free_input(&in);
    dedup_redis_free(r);
}

int main(int argc, char **argv)
{
    rtest_seed();
    snprintf(run_name, sizeof run_name, "t%llu", (unsigned long long)(rnd() % 1000000000));
    if (argc < 2) {
        fprintf(stderr, "usage: %s url|keys|ttl|bitmap|bitmap-ttl|module|errors|lost [URL [PROXY]]\n", argv[0]);
        return 2;
    }
    const char *what = argv[1], *url = argc > 2 ? argv[2] : NULL;
    if (strcmp(what, "url") == 0)
        test_url();
    else if (!url)
        return 2;
    else if (strcmp(what, "keys") == 0) {
        test_keys(url, false);
        test_keys(url, true);
    } else if (strcmp(what, "ttl") == 0)
        test_ttl(url);
    else if (strcmp(what, "bitmap") == 0)
        test_bitmap(url);
    else if (strcmp(what, "bitmap-ttl") == 0)
        test_bitmap_ttl(url);
    else if (strcmp(what, "module") == 0) {
        test_module(url);
        test_module_cuckoo(url);
    }
    else if (strcmp(what, "redirect") == 0)
        test_redirect(url);
    else if (strcmp(what, "errors") == 0)
        test_errors(url);
    else if (strcmp(what, "failover") == 0 && argc > 3) {
        int rc = test_failover(url, argv[3], argc > 4 ? (unsigned)atoi(argv[4]) : 0);
        if (rc && !failures) {
            fprintf(stderr, "failover: exited clearly\n");
            return rc;
        }
    } else if (strcmp(what, "lost") == 0 && argc > 3)
        test_lost(url, argv[3]);
    else if (strcmp(what, "lost-repeats") == 0 && argc > 4)
        test_lost_repeats(argv[2], argv[3], argv[4], argc > 5 && strcmp(argv[5], "gone") == 0);
    else
        return 2;
    fprintf(stderr, "%s: %s\n", what, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
