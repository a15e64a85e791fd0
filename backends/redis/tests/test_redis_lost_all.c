/*
 * test_redis_lost_all.c - every command libdedup_redis sends, with its
 * replies cut by the proxy (proxy.py: the first connection forwards every
 * request but only the first bytes of the replies, then closes).  A lost
 * reply may cost a retry, an UNCERTAIN verdict or an error, never a wrong
 * definite answer: a key certainly present is never answered "absent" or
 * "not removed", a key certainly absent never "present" (exact scheme),
 * and a call that returns DEDUP_OK has done all of its work.
 *
 *   test_redis_lost_all CASE DIRECT_URL PROXY_URL
 *
 * CASE is SCHEME-OP: SCHEME keys, keys-ttl, bitmap, bitmap-ttl, module,
 * module-ttl (the project's DEDUP.* filters), cuckoo; OP decide, query,
 * commit (keys-ttl), add and del (cuckoo).  The state each case starts from
 * is written through DIRECT_URL; the operation goes through PROXY_URL; the
 * result is read back through DIRECT_URL.  Each case checks that a reply
 * was really lost (retries, or an error).  Keys are random per run (the
 * seed is printed; DEDUP_TEST_SEED fixes it).
 */
#define _POSIX_C_SOURCE 200809L
#include "dedup/redis.h"
#include "rtest.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 3000u /* replies well past the proxy's cut */
#define TTL_MS 3600000u
#define RESERVE_MS 60000u


static char text[N][24];
static const unsigned char *keys[N];
static size_t lens[N];
static dedup_digest dig[N];

static dedup_batch slice(size_t from, size_t n)
{
    return (dedup_batch){.n = n, .digests = dig + from, .keys = keys + from, .lens = lens + from};
}

static dedup_redis *open_or_die(const dedup_redis_params *o)
{
    char err[512];
    dedup_redis *r = NULL;
    if (dedup_redis_create(o, NULL, &r, err, sizeof err) != DEDUP_OK) {
        fprintf(stderr, "open %s failed: %s\n", o->url, err);
        exit(1);
    }
    return r;
}

/* The keys scheme's entry for d: "<name>:" and the 16 digest bytes. */
static long long pttl(const char *url, const char *name, dedup_digest d)
{
    dedup_redis_url u;
    if (dedup_redis_url_parse(url, &u, NULL, 0) != DEDUP_OK)
        return -100;
    redisContext *c = redisConnect(u.seeds[0].host, u.seeds[0].port);
    if (!c || c->err)
        return -100;
    redisReply *x = redisCommand(c, "SELECT %d", u.db);
    freeReplyObject(x);
    char key[256];
    size_t kl = rtest_entry_key(key, name, d);
    x = redisCommand(c, "PTTL %b", key, kl);
    long long t = x && x->type == REDIS_REPLY_INTEGER ? x->integer : -100;
    freeReplyObject(x);
    redisFree(c);
    return t;
}

/* Was a reply lost?  The call failed, or it retried. */
static void check_cut(dedup_redis *r, dedup_status st, const char *what)
{
    dedup_redis_stats s;
    dedup_redis_get_stats(r, &s);
    fprintf(stderr, "%s: %s, %" PRIu64 " retries, %" PRIu64 " uncertain\n", what,
            dedup_strerror(st), s.retries, s.uncertain);
    CHECK(st != DEDUP_OK || s.retries > 0, "%s: no reply was lost: the case tests nothing", what);
}

/* Every key of [0, n) is present, read directly. */
static void check_present(const dedup_redis_params *direct, size_t n, const char *what)
{
    dedup_redis *d = open_or_die(direct);
    dedup_verdict *v = malloc(n * sizeof *v);
    dedup_batch b = slice(0, n);
    CHECK(dedup_redis_query(d, &b, v) == DEDUP_OK, "%s: direct query", what);
    size_t absent = 0;
    for (size_t i = 0; i < n; i++)
        absent += v[i] == DEDUP_NEW;
    CHECK(absent == 0, "%s: %zu of %zu keys the call reported done are absent", what, absent, n);
    free(v);
    dedup_redis_free(d);
}

static void run(const char *cas, const char *url, const char *proxy)
{
    char scheme[32], op[16];
    const char *dash = strrchr(cas, '-');
    if (!dash || (size_t)(dash - cas) >= sizeof scheme) {
        fprintf(stderr, "bad case %s\n", cas);
        exit(2);
    }
    memcpy(scheme, cas, (size_t)(dash - cas));
    scheme[dash - cas] = 0;
    snprintf(op, sizeof op, "%s", dash + 1);
    char name[96];
    snprintf(name, sizeof name, "lost-%s-%" PRIx64, cas, rnd());
    dedup_redis_params o;
    dedup_redis_params_init(&o);
    o.url = url;
    o.name = name;
    o.io_timeout_ms = 2000;
    o.backoff_ms = 10;
    bool exact = false;
    if (strncmp(scheme, "keys", 4) == 0) {
        exact = true;
    } else if (strncmp(scheme, "bitmap", 6) == 0) {
        o.scheme = DEDUP_REDIS_BITMAP;
        o.items = 4 * N;
    } else {
        o.scheme = DEDUP_REDIS_MODULE;
        o.items = 4 * N;
        o.shards = 2;
        if (strcmp(scheme, "cuckoo") == 0)
            o.filter = DEDUP_REDIS_FILTER_CUCKOO;
    }
    if (strstr(scheme, "-ttl")) {
        o.ttl_ms = TTL_MS;
        if (exact)
            o.reserve_ms = RESERVE_MS;
    }
    for (size_t i = 0; i < N; i++) {
        lens[i] = (size_t)snprintf(text[i], sizeof text[i], "k%016" PRIx64, rnd());
        keys[i] = (const unsigned char *)text[i];
        dig[i] = dedup_hash(text[i], lens[i], o.seed);
    }
    dedup_verdict *v = malloc(N * sizeof *v);
    dedup_redis_params po = o;
    po.url = proxy;
    /* the state before: created (and for query, commit and del, the first
     * half recorded, or all of it) through the direct URL */
    size_t pre = strcmp(op, "query") == 0 ? N / 2 : strcmp(op, "decide") == 0 ? 0
                 : strcmp(op, "add") == 0                                     ? 0
                                                                              : N;
    dedup_redis *d = open_or_die(&o);
    size_t recorded = pre; /* keys [0, recorded) answered NEW directly */
    if (pre) {
        dedup_batch b = slice(0, pre);
        CHECK(dedup_redis_decide(d, &b, v, NULL) == DEDUP_OK, "%s: setup", cas);
        /* a filter's false positive was not recorded: keys [0, recorded)
         * become those answered NEW (swapped to the front), so that an early
         * false positive cannot leave too few replies for the proxy to cut */
        recorded = 0;
        for (size_t i = 0; i < pre; i++)
            if (v[i] == DEDUP_NEW) {
                const unsigned char *k = keys[i];
                size_t l = lens[i];
                dedup_digest g = dig[i];
                keys[i] = keys[recorded], lens[i] = lens[recorded], dig[i] = dig[recorded];
                keys[recorded] = k, lens[recorded] = l, dig[recorded] = g;
                recorded++;
            }
    }
    dedup_redis_free(d);
    dedup_redis *r = open_or_die(&po);
    dedup_status st;
    if (strcmp(op, "decide") == 0 || strcmp(op, "add") == 0) {
        dedup_batch b = slice(0, N);
        st = strcmp(op, "add") == 0 ? dedup_redis_add(r, &b, v) : dedup_redis_decide(r, &b, v, NULL);
        check_cut(r, st, cas);
        if (st == DEDUP_OK) {
            size_t bad = 0;
            for (size_t i = 0; i < N; i++)
                bad += !(v[i] == DEDUP_NEW || v[i] == DEDUP_UNCERTAIN ||
                         (!exact && v[i] == DEDUP_MAYBE_DUPLICATE));
            CHECK(bad == 0, "%s: %zu fresh keys answered neither new nor uncertain", cas, bad);
            check_present(&o, N, cas);
        }
    } else if (strcmp(op, "query") == 0) {
        dedup_batch b = slice(0, N);
        st = dedup_redis_query(r, &b, v);
        check_cut(r, st, cas);
        if (st == DEDUP_OK) {
            size_t wrong_absent = 0, wrong_present = 0;
            for (size_t i = 0; i < recorded; i++)
                wrong_absent += v[i] == DEDUP_NEW;
            for (size_t i = N / 2; exact && i < N; i++)
                wrong_present += v[i] != DEDUP_NEW && v[i] != DEDUP_UNCERTAIN;
            CHECK(wrong_absent == 0, "%s: %zu present keys answered certainly absent", cas,
                  wrong_absent);
            CHECK(wrong_present == 0, "%s: %zu absent keys answered present", cas, wrong_present);
        }
    } else if (strcmp(op, "commit") == 0) {
        dedup_batch b = slice(0, recorded);
        st = dedup_redis_commit(r, &b);
        check_cut(r, st, cas);
        if (st == DEDUP_OK) {
            size_t reserved = 0;
            for (size_t i = 0; i < recorded; i++) {
                long long t = pttl(url, name, dig[i]);
                reserved += !(t > (long long)RESERVE_MS && t <= (long long)TTL_MS);
            }
            CHECK(reserved == 0, "%s: commit said done, %zu of %zu keys without their TTL", cas,
                  reserved, recorded);
        }
    } else if (strcmp(op, "del") == 0) {
        bool *removed = malloc(N * sizeof *removed);
        dedup_batch b = slice(0, recorded);
        st = dedup_redis_delete(r, &b, removed);
        check_cut(r, st, cas);
        if (st == DEDUP_OK) {
            size_t said_absent = 0;
            for (size_t i = 0; i < recorded; i++)
                said_absent += !removed[i];
            CHECK(said_absent == 0,
                  "%s: %zu of %zu keys added once reported certainly absent by their delete", cas,
                  said_absent, recorded);
            /* and gone: each was added once and deleted once (a few may
             * still answer present by a shared fingerprint) */
            dedup_redis *x = open_or_die(&o);
            CHECK(dedup_redis_query(x, &b, v) == DEDUP_OK, "%s: query after del", cas);
            size_t still = 0;
            for (size_t i = 0; i < recorded; i++)
                still += v[i] != DEDUP_NEW;
            CHECK(still <= recorded / 20, "%s: %zu of %zu deleted keys still present", cas, still,
                  recorded);
            dedup_redis_free(x);
        }
        free(removed);
    } else {
        fprintf(stderr, "bad operation in %s\n", cas);
        exit(2);
    }
    dedup_redis_free(r);
    free(v);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s SCHEME-OP DIRECT_URL PROXY_URL\n", argv[0]);
        return 2;
    }
    uint64_t seed = rtest_seed();
    run(argv[1], argv[2], argv[3]);
    if (failures) {
        fprintf(stderr, "%s: %d failure(s) (seed %" PRIu64 ")\n", argv[1], failures, seed);
        return 1;
    }
    return 0;
}
