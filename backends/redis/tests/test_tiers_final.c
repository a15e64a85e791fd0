/*
 * test_tiers_final.c - the final state of a tier stack (dedup/tiers.h) whose
 * bottom tier is a Redis keys tier with a TTL, against a model.
 *
 *   test_tiers_final URL
 *
 * Stacks: [blocked filter covering below, exact set, Redis ttl],
 * [exact set, Redis ttl] and [Redis ttl] alone.  Seeded batches of random
 * sizes (1 .. 2.2 chunks, so a batch ends anywhere in a chunk) go through
 * decide(); the keys answered NEW are committed as the CLI does once their
 * records are written out.  The last batch is decided but never committed
 * (a run that failed before writing it).  After the last batch, and again
 * after the stack is freed (close), the test reads what each tier holds:
 *   - every local tier answers every distinct key as present (query), and
 *     the exact tier answers a never-seen key as NEW;
 *   - Redis (its own db) holds exactly the distinct keys, each committed one
 *     with the one-hour TTL (PTTL in (ttl - 10 min, ttl]), each key of the
 *     uncommitted last batch with the 30 s reservation only (PTTL <= 30 s).
 * Any key left with the reservation, missing, or extra fails, naming it.
 * The seed is printed; DEDUP_TEST_SEED fixes it.
 */
#define _POSIX_C_SOURCE 200809L
#include "dedup/redis.h"
#include "rtest.h"
#include "dedup/seen.h"
#include "dedup/tiers.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNIVERSE 12000u
#define STREAM 30000u
#define TTL_MS 3600000u
#define RESERVE_MS 30000u
#define SEED UINT64_C(0x5EED5EED12345678)


/* Keys "key<id>": ids drawn from [0, UNIVERSE) for the stream, the last
 * batch from [UNIVERSE, 2 * UNIVERSE) (fresh keys, never committed). */
typedef struct stream {
    size_t n;
    uint32_t *id;
    char (*text)[16];
    const unsigned char **keys;
    size_t *lens;
    dedup_digest *d;
} stream;

static void set_key(stream *s, size_t i, uint32_t id)
{
    s->id[i] = id;
    s->lens[i] = (size_t)snprintf(s->text[i], sizeof s->text[i], "key%" PRIu32, id);
    s->keys[i] = (const unsigned char *)s->text[i];
    s->d[i] = dedup_hash(s->text[i], s->lens[i], SEED);
}

static stream make_stream(size_t n, size_t tail)
{
    stream s = {n + tail, malloc((n + tail) * sizeof(uint32_t)), malloc((n + tail) * 16),
                malloc((n + tail) * sizeof(void *)), malloc((n + tail) * sizeof(size_t)),
                malloc((n + tail) * sizeof(dedup_digest))};
    if (!s.id || !s.text || !s.keys || !s.lens || !s.d) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        set_key(&s, i, (uint32_t)(rnd() % UNIVERSE));
    for (size_t i = 0; i < tail; i++)
        set_key(&s, n + i, UNIVERSE + (uint32_t)i);
    return s;
}

static void free_stream(stream *s)
{
    free(s->id);
    free(s->text);
    free(s->keys);
    free(s->lens);
    free(s->d);
}

static dedup_batch slice(const stream *s, size_t from, size_t n)
{
    dedup_batch b = {.n = n, .digests = s->d + from, .keys = s->keys + from,
                     .lens = s->lens + from};
    return b;
}


static redisContext *connect_db(const dedup_redis_url *u)
{
    redisContext *c = redisConnect(u->seeds[0].host, u->seeds[0].port);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect to %s:%d\n", u->seeds[0].host, u->seeds[0].port);
        exit(1);
    }
    redisReply *x = redisCommand(c, "SELECT %d", u->db);
    freeReplyObject(x);
    return c;
}

static long long integer_reply(redisContext *c, const char *fmt, const char *key, size_t kl)
{
    redisReply *x = key ? redisCommand(c, fmt, key, kl) : redisCommand(c, fmt);
    long long v = x && x->type == REDIS_REPLY_INTEGER ? x->integer : -100;
    freeReplyObject(x);
    return v;
}

/* state[id]: 0 never seen, 1 committed, 2 decided in the last (uncommitted) batch. */
static void check_redis(const dedup_redis_url *u, const char *name, const stream *s,
                        const unsigned char *state, const char *when)
{
    redisContext *c = connect_db(u);
    size_t want = 0, bad = 0;
    for (uint32_t id = 0; id < 2 * UNIVERSE; id++)
        want += state[id] != 0;
    /* the records' keys: every key but the name's NAME:meta (its shape and seed) */
    redisReply *x = redisCommand(c, "EVAL %s 0",
                                 "local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do "
                                 "if not string.find(k, ':meta$') then n = n + 1 end end return n");
    long long keys = x && x->type == REDIS_REPLY_INTEGER ? x->integer : -100;
    freeReplyObject(x);
    CHECK(keys == (long long)want, "%s: Redis holds %lld record keys, the model %zu", when, keys,
          want);
    unsigned char *done = calloc(2 * UNIVERSE, 1);
    for (size_t i = 0; i < s->n && bad < 5; i++) {
        uint32_t id = s->id[i];
        if (done[id])
            continue;
        done[id] = 1;
        char key[256];
        size_t kl = rtest_entry_key(key, name, s->d[i]);
        long long t = integer_reply(c, "PTTL %b", key, kl);
        if (state[id] == 1 && !(t > (long long)TTL_MS - 600000 && t <= (long long)TTL_MS)) {
            CHECK(0, "%s: committed %s has PTTL %lld ms, want the %u ms TTL", when, s->text[i],
                  t, TTL_MS);
            bad++;
        } else if (state[id] == 2 && !(t > 0 && t <= (long long)RESERVE_MS)) {
            CHECK(0, "%s: uncommitted %s has PTTL %lld ms, want the reservation (0, %u]",
                  when, s->text[i], t, RESERVE_MS);
            bad++;
        }
    }
    free(done);
    redisFree(c);
}

/* Every distinct key of the committed stream is present in every local tier;
 * the exact tier ('exact_at', or -1) answers key "never" as NEW. */
static void check_local(const dedup_tiers *view, size_t ntiers, const stream *s, size_t n,
                        int exact_at, const char *label)
{
    dedup_verdict *v = malloc(n * sizeof *v);
    for (size_t k = 0; k + 1 < ntiers; k++) {
        dedup_seen *t = dedup_tiers_tier(view, k);
        dedup_batch b = slice(s, 0, n);
        CHECK(dedup_seen_query(t, &b, v) == DEDUP_OK, "%s: query tier %zu", label, k);
        for (size_t i = 0; i < n; i++)
            if (v[i] == DEDUP_NEW) {
                CHECK(0, "%s: tier %zu does not hold %s", label, k, s->text[i]);
                break;
            }
    }
    if (exact_at >= 0) {
        const unsigned char *nk = (const unsigned char *)"never";
        size_t nl = 5;
        dedup_digest nd = dedup_hash("never", 5, SEED);
        dedup_batch b = {.n = 1, .digests = &nd, .keys = &nk, .lens = &nl};
        CHECK(dedup_seen_query(dedup_tiers_tier(view, (size_t)exact_at), &b, v) == DEDUP_OK &&
                  v[0] == DEDUP_NEW,
              "%s: the exact tier holds a key never given", label);
    }
    free(v);
}

static dedup_seen *local_tier(dedup_seen_kind kind)
{
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = kind;
    sp.items = 2 * UNIVERSE;
    sp.fpr = 0.01;
    sp.seed = SEED;
    dedup_seen *s = NULL;
    if (dedup_seen_create(&sp, NULL, &s) != DEDUP_OK) {
        fprintf(stderr, "cannot create a local tier\n");
        exit(1);
    }
    return s;
}

/* One stack: 'filter' and 'exact' say which local tiers sit above Redis. */
static void run_stack(const char *url, const dedup_redis_url *u, const char *label, bool filter,
                      bool exact)
{
    char name[96];
    snprintf(name, sizeof name, "final-%s-%" PRIx64, label, rnd());
    dedup_redis_params o;
    dedup_redis_params_init(&o);
    o.url = url;
    o.name = name;
    o.ttl_ms = TTL_MS;
    o.reserve_ms = RESERVE_MS;
    o.seed = SEED;
    char err[512];
    dedup_redis *r = NULL;
    dedup_seen *rs = NULL;
    if (dedup_redis_create(&o, NULL, &r, err, sizeof err) != DEDUP_OK ||
        dedup_redis_as_seen(r, NULL, &rs) != DEDUP_OK) {
        fprintf(stderr, "%s: open %s: %s\n", label, url, err);
        exit(1);
    }
    dedup_tier t[3];
    size_t n = 0;
    int exact_at = -1;
    memset(t, 0, sizeof t);
    if (filter)
        t[n++] = (dedup_tier){.seen = local_tier(DEDUP_SEEN_BLOCKED), .covers_below = true,
                              .name = "filter"};
    if (exact) {
        exact_at = (int)n;
        t[n++] = (dedup_tier){.seen = local_tier(DEDUP_SEEN_EXACT), .name = "exact"};
    }
    t[n++] = (dedup_tier){.seen = rs, .name = "redis"};
    dedup_tiers_spec sp = {.tiers = t, .n = n};
    dedup_seen *stack = NULL;
    const dedup_tiers *view = NULL;
    CHECK(dedup_tiers_create(&sp, NULL, &stack, &view) == DEDUP_OK, "%s: create", label);
    if (!stack)
        exit(1);

    size_t tail = 300;
    stream s = make_stream(STREAM, tail);
    unsigned char *state = calloc(2 * UNIVERSE, 1);
    dedup_verdict *v = malloc(s.n * sizeof *v);
    dedup_digest *cd = malloc(s.n * sizeof *cd);
    size_t wrong = 0, batches = 0;
    for (size_t off = 0; off < s.n;) {
        bool last = off >= STREAM;
        size_t m = last ? tail : 1 + (size_t)(rnd() % 9000);
        if (!last && off + m > STREAM)
            m = STREAM - off;
        dedup_batch b = slice(&s, off, m);
        CHECK(dedup_seen_decide(stack, &b, v, NULL) == DEDUP_OK, "%s: decide batch %zu: %s",
              label, batches, dedup_redis_last_error(r));
        size_t nc = 0;
        for (size_t i = 0; i < m; i++) {
            uint32_t id = s.id[off + i];
            dedup_verdict want = state[id] ? DEDUP_DUPLICATE : DEDUP_NEW;
            if (v[i] != want && wrong++ < 5)
                CHECK(0, "%s: %s answered %d, the model %d", label, s.text[off + i], (int)v[i],
                      (int)want);
            if (v[i] == DEDUP_NEW) {
                cd[nc++] = s.d[off + i];
                state[id] = last ? 2 : 1;
            }
        }
        if (!last) { /* the records are written out: commit their keys */
            dedup_batch cb = {.n = nc, .digests = cd};
            CHECK(dedup_seen_commit(stack, &cb) == DEDUP_OK, "%s: commit: %s", label,
                  dedup_redis_last_error(r));
        }
        off += m;
        batches++;
    }
    char when[128];
    snprintf(when, sizeof when, "%s, after the last batch", label);
    check_local(view, n, &s, STREAM, exact_at, label);
    check_redis(u, name, &s, state, when);
    dedup_seen_free(stack); /* closes the Redis tier too */
    snprintf(when, sizeof when, "%s, after close", label);
    check_redis(u, name, &s, state, when);
    fprintf(stderr, "%s: %zu batches, final state checked\n", label, batches);
    free(cd);
    free(v);
    free(state);
    free_stream(&s);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s redis://HOST:PORT/DB (an empty db of its own)\n", argv[0]);
        return 2;
    }
    uint64_t seed = rtest_seed();
    dedup_redis_url u;
    char why[256];
    if (dedup_redis_url_parse(argv[1], &u, why, sizeof why) != DEDUP_OK || u.cluster) {
        fprintf(stderr, "bad URL %s: %s\n", argv[1], why);
        return 2;
    }
    /* each stack in a db of its own, so DBSIZE counts its keys only */
    const struct { const char *label; bool filter, exact; } stacks[] = {
        {"filter-exact-redis", true, true}, {"exact-redis", false, true},
        {"filter-redis", true, false}, {"redis", false, false}};
    for (size_t i = 0; i < sizeof stacks / sizeof *stacks; i++) {
        char url[300];
        dedup_redis_url ui = u;
        ui.db = u.db + (int)i;
        snprintf(url, sizeof url, "redis://%s:%d/%d", u.seeds[0].host, u.seeds[0].port, ui.db);
        run_stack(url, &ui, stacks[i].label, stacks[i].filter, stacks[i].exact);
    }
    if (failures) {
        fprintf(stderr, "test_tiers_final: %d failure(s) (seed %" PRIu64 ")\n", failures, seed);
        return 1;
    }
    fprintf(stderr, "test_tiers_final: ok\n");
    return 0;
}
