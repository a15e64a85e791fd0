/*
 * redis.c - the remote seen-set: open, the keys and module schemes, stats
 * (dedup/redis.h).  The bitmap scheme is in bitmap.c, the transport in
 * client.c.
 *
 * Keys scheme: a batch is n SET commands in one pipeline per node:
 *   SET <name>:<digest16> 1 NX [PX reserve_ms | ttl_ms]
 * "OK" = NEW, nil = DUPLICATE (or UNCERTAIN if the command had been sent
 * once and its reply lost: the first attempt may be what set it).
 * Module scheme: one BF.MADD per shard, items the 16-byte digests; 1 = NEW,
 * 0 = MAYBE_DUPLICATE (UNCERTAIN after a lost reply).
 */
#include "rd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rd_error(dedup_redis *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
}

dedup_status rd_reply_error(dedup_redis *r, const redisReply *rep, const char *what)
{
    bool wrong = rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "WRONGTYPE", 9) == 0;
    rd_error(r, "Redis %s: %s", what,
             rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    return wrong ? DEDUP_ERR_WRONG_TYPE : DEDUP_ERR_IO;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need == 0)
        need = 1;
    if (p && *cap >= need)
        return p;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    void *q = realloc(p, nc * elem);
    if (q)
        *cap = nc;
    return q;
}

dedup_status rd_scratch(dedup_redis *r, size_t n, size_t args, size_t bytes)
{
    if (n > r->scratch_n) {
        uint32_t *a = realloc(r->seg_of, n * sizeof *a);
        if (!a)
            return DEDUP_ERR_NOMEM;
        r->seg_of = a;
        uint32_t *b = realloc(r->pos_in, n * sizeof *b);
        if (!b)
            return DEDUP_ERR_NOMEM;
        r->pos_in = b;
        uint32_t *c = realloc(r->seg_next, n * sizeof *c);
        if (!c)
            return DEDUP_ERR_NOMEM;
        r->seg_next = c;
        r->scratch_n = n;
    }
    size_t acap = r->argv_cap;
    const char **av = grow((void *)r->argv, &acap, args, sizeof *r->argv);
    if (!av)
        return DEDUP_ERR_NOMEM;
    r->argv = av;
    size_t lcap = r->argv_cap;
    size_t *lv = grow(r->lens, &lcap, args, sizeof *r->lens);
    if (!lv)
        return DEDUP_ERR_NOMEM;
    r->lens = lv;
    r->argv_cap = acap < lcap ? acap : lcap;
    char *ab = grow(r->argbuf, &r->argbuf_cap, bytes, 1);
    if (!ab)
        return DEDUP_ERR_NOMEM;
    r->argbuf = ab;
    return DEDUP_OK;
}

void dedup_redis_options_init(dedup_redis_options *o)
{
    memset(o, 0, sizeof *o);
    o->scheme = DEDUP_REDIS_KEYS;
    o->name = "dedup";
    o->reserve_ms = 60000;
    o->wait_timeout_ms = 1000;
    o->connect_timeout_ms = 2000;
    o->io_timeout_ms = 5000;
    o->retries = 8;
    o->backoff_ms = 50;
    o->pipeline = 1024;
    o->seed = DEDUP_DEFAULT_SEED;
    o->fpr = 0.01;
    o->generations = 4;
    o->shards = 0;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* "<name>:" + digest or key bytes into buf; returns the length. */
static size_t key_name(const dedup_redis *r, const dedup_batch *b, size_t i, char *buf)
{
    memcpy(buf, r->name, r->namelen);
    buf[r->namelen] = ':';
    size_t k = r->namelen + 1;
    if (r->o.whole_keys) {
        memcpy(buf + k, b->keys[i], b->lens[i]);
        return k + b->lens[i];
    }
    put_le64((unsigned char *)buf + k, b->digests[i].lo);
    put_le64((unsigned char *)buf + k + 8, b->digests[i].hi);
    return k + 16;
}

static size_t max_key_name(const dedup_redis *r, const dedup_batch *b)
{
    size_t m = 16;
    if (r->o.whole_keys)
        for (size_t i = 0; i < b->n; i++)
            m = b->lens[i] > m ? b->lens[i] : m;
    return r->namelen + 1 + m;
}

static size_t put_u64(char *buf, uint64_t v) { return (size_t)sprintf(buf, "%llu", (unsigned long long)v); }

/* ---- keys ---- */

typedef enum { KEYS_DECIDE, KEYS_QUERY, KEYS_COMMIT } keys_op;

static dedup_status keys_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, keys_op op)
{
    size_t cap = max_key_name(r, b);
    char *kb = malloc(cap);
    if (!kb)
        return DEDUP_ERR_NOMEM;
    rc_batch_reset(&r->b);
    char px[24];
    size_t pxlen = 0;
    if (op == KEYS_DECIDE && r->o.ttl_ms) {
        uint64_t res = r->o.reserve_ms && r->o.reserve_ms < r->o.ttl_ms ? r->o.reserve_ms : r->o.ttl_ms;
        pxlen = put_u64(px, res);
    } else if (op == KEYS_COMMIT) {
        pxlen = put_u64(px, r->o.ttl_ms);
    }
    dedup_status st = DEDUP_OK;
    for (size_t i = 0; i < b->n && st == DEDUP_OK; i++) {
        size_t kl = key_name(r, b, i, kb);
        const char *argv[6];
        size_t lens[6];
        int argc;
        if (op == KEYS_QUERY) {
            argv[0] = "EXISTS"; lens[0] = 6;
            argv[1] = kb; lens[1] = kl;
            argc = 2;
        } else {
            argv[0] = "SET"; lens[0] = 3;
            argv[1] = kb; lens[1] = kl;
            argv[2] = "1"; lens[2] = 1;
            argc = 3;
            if (op == KEYS_DECIDE) {
                argv[argc] = "NX"; lens[argc++] = 2;
            }
            if (pxlen) {
                argv[argc] = "PX"; lens[argc++] = 2;
                argv[argc] = px; lens[argc++] = pxlen;
            }
        }
        if (!rc_batch_add(&r->b, argc, argv, lens, 1, (uint32_t)i))
            st = DEDUP_ERR_NOMEM;
    }
    free(kb);
    if (st != DEDUP_OK)
        return st;
    r->b.wait_replicas = op == KEYS_QUERY ? 0 : r->o.wait_replicas;
    st = rc_exec(r->c, &r->b);
    if (st != DEDUP_OK) {
        rd_error(r, "%s", rc_error(r->c));
        return st;
    }
    for (size_t j = 0; j < r->b.n; j++) {
        rc_cmd *cm = &r->b.cmds[j];
        redisReply *rep = cm->reply;
        if (rep->type == REDIS_REPLY_ERROR)
            return rd_reply_error(r, rep, op == KEYS_QUERY ? "EXISTS" : "SET");
        if (op == KEYS_COMMIT)
            continue;
        dedup_verdict v;
        if (op == KEYS_QUERY)
            v = rep->type == REDIS_REPLY_INTEGER && rep->integer ? DEDUP_DUPLICATE : DEDUP_NEW;
        else if (rep->type == REDIS_REPLY_STATUS)
            v = DEDUP_NEW;
        else
            v = cm->lost ? DEDUP_UNCERTAIN : DEDUP_DUPLICATE;
        out[cm->tag] = v;
    }
    return DEDUP_OK;
}

/* ---- module ---- */

static size_t shard_key(const dedup_redis *r, uint32_t s, char *buf)
{
    return (size_t)sprintf(buf, "%s:{%s:f%u}", r->name, r->name, s);
}

static dedup_status module_open(dedup_redis *r)
{
    if (r->o.shards == 0)
        r->o.shards = r->url.cluster ? 16 : 1;
    if (r->o.shards > 65536) {
        rd_error(r, "shards must be in 1..65536 (got %u)", r->o.shards);
        return DEDUP_ERR_INVALID_ARG;
    }
    if (r->o.items == 0) {
        rd_error(r, "the module scheme needs the planned number of keys (items)");
        return DEDUP_ERR_INVALID_ARG;
    }
    uint64_t per = (r->o.items + r->o.shards - 1) / r->o.shards;
    char fpr[32], cap[24], win[24];
    snprintf(fpr, sizeof fpr, "%.17g", r->o.fpr);
    size_t caplen = put_u64(cap, per ? per : 1);
    size_t winlen = put_u64(win, r->o.ttl_ms);
    rc_batch_reset(&r->b);
    char kb[2 * RD_MAX_NAME + 32];
    for (uint32_t s = 0; s < r->o.shards; s++) {
        size_t kl = shard_key(r, s, kb);
        /* With a TTL: the module's expiring filter (DEDUP.*), else BF. */
        const char *bf[4] = {"BF.RESERVE", kb, fpr, cap};
        size_t bl[4] = {10, kl, strlen(fpr), caplen};
        const char *dd[5] = {"DEDUP.RESERVE", kb, win, fpr, cap};
        size_t dl[5] = {13, kl, winlen, strlen(fpr), caplen};
        if (!(r->o.ttl_ms ? rc_batch_add(&r->b, 5, dd, dl, 1, s) : rc_batch_add(&r->b, 4, bf, bl, 1, s)))
            return DEDUP_ERR_NOMEM;
    }
    dedup_status st = rc_exec(r->c, &r->b);
    if (st != DEDUP_OK) {
        rd_error(r, "%s", rc_error(r->c));
        return st;
    }
    for (size_t j = 0; j < r->b.n; j++) {
        redisReply *rep = r->b.cmds[j].reply;
        if (rep->type != REDIS_REPLY_ERROR || strstr(rep->str, "exists"))
            continue;
        if (strstr(rep->str, "unknown command")) {
            rd_error(r, r->o.ttl_ms ? "Redis has no DEDUP.RESERVE (the module scheme with a TTL "
                                      "needs this project's module, dedup_redis.so)"
                                    : "Redis has no BF.RESERVE: load this project's module "
                                      "(dedup_redis.so) or RedisBloom, or use --redis-scheme "
                                      "keys|bitmap");
            return DEDUP_ERR_UNSUPPORTED;
        }
        return rd_reply_error(r, rep, r->o.ttl_ms ? "DEDUP.RESERVE" : "BF.RESERVE");
    }
    r->shape.shards = r->o.shards;
    r->shape.items = r->o.items;
    r->shape.fpr = r->o.fpr;
    return DEDUP_OK;
}

static dedup_status module_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, bool record)
{
    uint32_t S = r->o.shards;
    dedup_status st = rd_scratch(r, b->n, b->n + 2, b->n * 16);
    if (st != DEDUP_OK)
        return st;
    uint32_t *count = calloc(S, sizeof *count), *first = malloc(S * sizeof *first),
             *last = malloc(S * sizeof *last);
    if (!count || !first || !last) {
        free(count); free(first); free(last);
        return DEDUP_ERR_NOMEM;
    }
    for (size_t i = 0; i < b->n; i++) {
        uint32_t s = (uint32_t)dedup_reduce(b->digests[i].hi, S);
        r->seg_of[i] = s;
        r->seg_next[i] = UINT32_MAX;
        if (count[s]++ == 0)
            first[s] = (uint32_t)i;
        else
            r->seg_next[last[s]] = (uint32_t)i;
        last[s] = (uint32_t)i;
        put_le64((unsigned char *)r->argbuf + 16 * i, b->digests[i].lo);
        put_le64((unsigned char *)r->argbuf + 16 * i + 8, b->digests[i].hi);
    }
    rc_batch_reset(&r->b);
    char kb[2 * RD_MAX_NAME + 32];
    bool ttl = r->o.ttl_ms != 0;
    if (ttl && !record) { /* DEDUP.* has no MEXISTS: one EXISTS per key, pipelined */
        for (size_t i = 0; i < b->n && st == DEDUP_OK; i++) {
            size_t kl = shard_key(r, r->seg_of[i], kb);
            const char *argv[3] = {"DEDUP.EXISTS", kb, r->argbuf + 16 * i};
            size_t lens[3] = {12, kl, 16};
            if (!rc_batch_add(&r->b, 3, argv, lens, 1, (uint32_t)i))
                st = DEDUP_ERR_NOMEM;
        }
        free(count); free(first); free(last);
        if (st == DEDUP_OK)
            st = rc_exec(r->c, &r->b);
        if (st != DEDUP_OK) {
            if (st == DEDUP_ERR_IO)
                rd_error(r, "%s", rc_error(r->c));
            return st;
        }
        for (size_t j = 0; j < r->b.n; j++) {
            redisReply *e = r->b.cmds[j].reply;
            if (e->type != REDIS_REPLY_INTEGER)
                return rd_reply_error(r, e, "DEDUP.EXISTS");
            out[r->b.cmds[j].tag] = e->integer ? DEDUP_MAYBE_DUPLICATE : DEDUP_NEW;
        }
        return DEDUP_OK;
    }
    for (uint32_t s = 0; s < S && st == DEDUP_OK; s++) {
        if (!count[s])
            continue;
        size_t kl = shard_key(r, s, kb);
        r->argv[0] = record ? (ttl ? "DEDUP.MADD" : "BF.MADD") : "BF.MEXISTS";
        r->lens[0] = strlen(r->argv[0]);
        r->argv[1] = kb;
        r->lens[1] = kl;
        size_t a = 2;
        for (uint32_t i = first[s]; i != UINT32_MAX; i = r->seg_next[i]) {
            r->pos_in[i] = (uint32_t)(a - 2);
            r->argv[a] = r->argbuf + 16 * (size_t)i;
            r->lens[a++] = 16;
        }
        if (!rc_batch_add(&r->b, (int)a, r->argv, r->lens, 1, s))
            st = DEDUP_ERR_NOMEM;
    }
    free(count); free(first); free(last);
    if (st != DEDUP_OK)
        return st;
    r->b.wait_replicas = record ? r->o.wait_replicas : 0;
    st = rc_exec(r->c, &r->b);
    if (st != DEDUP_OK) {
        rd_error(r, "%s", rc_error(r->c));
        return st;
    }
    /* cmds are in shard order; find each key's reply by its shard. */
    redisReply **by_shard = calloc(S, sizeof *by_shard);
    bool *lost = calloc(S, sizeof *lost);
    if (!by_shard || !lost) {
        free(by_shard); free(lost);
        return DEDUP_ERR_NOMEM;
    }
    for (size_t j = 0; j < r->b.n && st == DEDUP_OK; j++) {
        rc_cmd *cm = &r->b.cmds[j];
        if (cm->reply->type != REDIS_REPLY_ARRAY)
            st = rd_reply_error(r, cm->reply, record ? "BF.MADD" : "BF.MEXISTS");
        by_shard[cm->tag] = cm->reply;
        lost[cm->tag] = cm->lost;
    }
    for (size_t i = 0; i < b->n && st == DEDUP_OK; i++) {
        redisReply *rep = by_shard[r->seg_of[i]];
        if (!rep || r->pos_in[i] >= rep->elements) {
            rd_error(r, "Redis BF.MADD: short reply");
            st = DEDUP_ERR_IO;
            break;
        }
        redisReply *e = rep->element[r->pos_in[i]];
        if (e->type == REDIS_REPLY_ERROR) {
            st = rd_reply_error(r, e, "BF.MADD");
            break;
        }
        bool present = record ? e->integer == 0 : e->integer != 0;
        out[i] = !present ? DEDUP_NEW : lost[r->seg_of[i]] && record ? DEDUP_UNCERTAIN
                                                                     : DEDUP_MAYBE_DUPLICATE;
    }
    free(by_shard);
    free(lost);
    return st;
}

/* ---- the object ---- */

dedup_status dedup_redis_open(const dedup_redis_options *o, const dedup_allocator *alloc,
                              dedup_redis **out, char *err, size_t errcap)
{
    (void)alloc; /* hiredis allocates through libc; so does this object */
    if (err && errcap)
        err[0] = 0;
    if (!o || !out) {
        if (err && errcap)
            snprintf(err, errcap, "no options given");
        return DEDUP_ERR_INVALID_ARG;
    }
    *out = NULL;
    dedup_redis *r = calloc(1, sizeof *r);
    if (!r)
        return DEDUP_ERR_NOMEM;
    r->o = *o;
    rc_batch_init(&r->b);
    dedup_status st = dedup_redis_url_parse(o->url, &r->url, r->err, sizeof r->err);
    const char *name = o->name ? o->name : "dedup";
    if (st == DEDUP_OK) {
        r->namelen = strlen(name);
        if (r->namelen == 0 || r->namelen > RD_MAX_NAME || strpbrk(name, "{}")) {
            rd_error(r, "the name must be 1..%d bytes without '{' or '}' (got '%s')", RD_MAX_NAME,
                     name);
            st = DEDUP_ERR_INVALID_ARG;
        } else {
            memcpy(r->name, name, r->namelen + 1);
        }
    }
    if (st == DEDUP_OK && !dedup_redis_scheme_name(o->scheme)) {
        rd_error(r, "unknown Redis scheme %d (keys, bitmap or module)", (int)o->scheme);
        st = DEDUP_ERR_INVALID_ARG;
    }
    if (st == DEDUP_OK && (o->pipeline < 1 || o->pipeline > 65536)) {
        rd_error(r, "pipeline must be in 1..65536 (got %u)", o->pipeline);
        st = DEDUP_ERR_INVALID_ARG;
    }
    if (st == DEDUP_OK && (!(o->fpr > 0) || o->fpr >= 1)) {
        rd_error(r, "the false-positive rate must be in (0, 1) (got %g)", o->fpr);
        st = DEDUP_ERR_INVALID_ARG;
    }
    if (st == DEDUP_OK) {
        st = rc_open(&r->url, &r->o, &r->c, r->err, sizeof r->err);
    }
    r->shape.scheme = o->scheme;
    r->shape.cluster = r->url.cluster;
    r->shape.seed = o->seed;
    if (st == DEDUP_OK) {
        if (o->scheme == DEDUP_REDIS_BITMAP)
            st = rd_bitmap_open(r);
        else if (o->scheme == DEDUP_REDIS_MODULE)
            st = module_open(r);
    }
    if (st != DEDUP_OK) {
        if (err && errcap)
            snprintf(err, errcap, "%s", r->err);
        dedup_redis_free(r);
        return st;
    }
    *out = r;
    return DEDUP_OK;
}

void dedup_redis_free(dedup_redis *r)
{
    if (!r)
        return;
    rc_batch_free(&r->b);
    rc_free(r->c);
    free(r->seg_of);
    free(r->pos_in);
    free(r->seg_next);
    free(r->seg_count);
    free(r->seg_first);
    free((void *)r->argv);
    free(r->lens);
    free(r->argbuf);
    free(r);
}

static dedup_status check_batch(dedup_redis *r, const dedup_batch *b)
{
    if (!b || (b->n && !b->digests) || (r->o.whole_keys && b->n && (!b->keys || !b->lens))) {
        rd_error(r, "a batch needs digests (and keys with whole_keys)");
        return DEDUP_ERR_INVALID_ARG;
    }
    return DEDUP_OK;
}

static dedup_status run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, bool record)
{
    dedup_status st = check_batch(r, b);
    if (st != DEDUP_OK || b->n == 0)
        return st;
    r->err[0] = 0;
    switch (r->o.scheme) {
    case DEDUP_REDIS_KEYS: st = keys_run(r, b, out, record ? KEYS_DECIDE : KEYS_QUERY); break;
    case DEDUP_REDIS_BITMAP: st = rd_bitmap_run(r, b, out, record); break;
    case DEDUP_REDIS_MODULE: st = module_run(r, b, out, record); break;
    }
    rc_batch_reset(&r->b);
    if (st == DEDUP_OK) {
        r->keys += b->n;
        if (record)
            for (size_t i = 0; i < b->n; i++) {
                r->uncertain += out[i] == DEDUP_UNCERTAIN;
                r->recorded += out[i] == DEDUP_NEW;
            }
    }
    return st;
}

dedup_status dedup_redis_decide(dedup_redis *r, const dedup_batch *b, dedup_verdict *out,
                                size_t *done)
{
    dedup_status st = run(r, b, out, true);
    if (done)
        *done = st == DEDUP_OK ? b->n : 0;
    return st;
}

dedup_status dedup_redis_query(dedup_redis *r, const dedup_batch *b, dedup_verdict *out)
{
    return run(r, b, out, false);
}

dedup_status dedup_redis_commit(dedup_redis *r, const dedup_batch *b)
{
    if (r->o.scheme != DEDUP_REDIS_KEYS || !r->o.ttl_ms || !b || b->n == 0)
        return DEDUP_OK;
    dedup_status st = check_batch(r, b);
    if (st == DEDUP_OK)
        st = keys_run(r, b, NULL, KEYS_COMMIT);
    rc_batch_reset(&r->b);
    return st;
}

void dedup_redis_get_stats(const dedup_redis *r, dedup_redis_stats *out)
{
    const rc_counters *c = rc_get_counters(r->c);
    memset(out, 0, sizeof *out);
    out->round_trips = c->round_trips;
    out->commands = c->commands;
    out->retries = c->retries;
    out->moved = c->moved;
    out->ask = c->ask;
    out->keys = r->keys;
    out->uncertain = r->uncertain;
    out->recorded = r->recorded;
    out->nodes = rc_masters(r->c);
}

const char *dedup_redis_last_error(const dedup_redis *r) { return r ? r->err : ""; }

size_t dedup_redis_memory_usage(const dedup_redis *r)
{
    if (!r)
        return 0;
    return sizeof *r + r->b.cap + r->b.ncap * sizeof(rc_cmd) + r->scratch_n * 3 * sizeof(uint32_t) +
           r->argv_cap * (sizeof(char *) + sizeof(size_t)) + r->argbuf_cap;
}

void dedup_redis_get_shape(const dedup_redis *r, dedup_redis_shape *out) { *out = r->shape; }

dedup_status dedup_redis_remote_memory(dedup_redis *r, uint64_t *bytes)
{
    *bytes = 0;
    if (r->o.scheme == DEDUP_REDIS_KEYS) {
        redisReply *reps[1024];
        size_t n;
        const char *argv[2] = {"INFO", "memory"};
        size_t lens[2] = {4, 6};
        dedup_status st = rc_each_master(r->c, 2, argv, lens, reps, 1024, &n);
        for (size_t i = 0; i < n; i++) {
            const char *p = reps[i]->type == REDIS_REPLY_STRING ? strstr(reps[i]->str, "used_memory:") : NULL;
            if (p)
                *bytes += strtoull(p + 12, NULL, 10);
            freeReplyObject(reps[i]);
        }
        if (st != DEDUP_OK)
            rd_error(r, "%s", rc_error(r->c));
        return st;
    }
    rc_batch_reset(&r->b);
    char kb[2 * RD_MAX_NAME + 64];
    uint32_t count = r->o.scheme == DEDUP_REDIS_BITMAP ? r->shape.segments : r->shape.shards;
    uint64_t gens = r->o.scheme == DEDUP_REDIS_BITMAP && r->gen_ms ? r->shape.generations + 1 : 1;
    uint64_t cur = rd_current_gen(r);
    for (uint32_t s = 0; s < count; s++)
        for (uint64_t g = 0; g < gens; g++) {
            size_t kl;
            if (r->o.scheme == DEDUP_REDIS_BITMAP) {
                kl = rd_segment_key(r, s, cur >= g ? cur - g : 0, kb);
            } else {
                kl = shard_key(r, s, kb);
            }
            const char *argv[3] = {"MEMORY", "USAGE", kb};
            size_t lens[3] = {6, 5, kl};
            if (!rc_batch_add(&r->b, 3, argv, lens, 2, s))
                return DEDUP_ERR_NOMEM;
        }
    dedup_status st = rc_exec(r->c, &r->b);
    if (st == DEDUP_OK)
        for (size_t j = 0; j < r->b.n; j++)
            if (r->b.cmds[j].reply->type == REDIS_REPLY_INTEGER)
                *bytes += (uint64_t)r->b.cmds[j].reply->integer;
    if (st != DEDUP_OK)
        rd_error(r, "%s", rc_error(r->c));
    rc_batch_reset(&r->b);
    return st;
}

dedup_status dedup_redis_bitmap_read(dedup_redis *r, unsigned char *buf, uint64_t len)
{
    return rd_bitmap_read(r, buf, len);
}

dedup_status dedup_redis_bitmap_write(dedup_redis *r, const unsigned char *buf, uint64_t len)
{
    return rd_bitmap_write(r, buf, len);
}
