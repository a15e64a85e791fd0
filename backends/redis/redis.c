/*
 * redis.c - the remote seen-set (dedup/redis.h): options, open, the
 * dispatch of every call to its scheme (keys.c, bitmap.c, module.c), stats.
 * The helpers the schemes share are in common.c, the transport in client.c.
 */
#define _DEFAULT_SOURCE
#include "rd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dedup_redis_params_init(dedup_redis_params *o)
{
    memset(o, 0, sizeof *o);
    o->scheme = DEDUP_REDIS_KEYS;
    o->name = "dedup";
    o->reserve_ms = 60000;
    o->wait_timeout_ms = 1000;
    o->connect_timeout_ms = 2000;
    o->io_timeout_ms = 5000;
    o->retries = 8;
    o->failover_wait_ms = 60000;
    o->backoff_ms = 50;
    o->pipeline = 1024;
    o->seed = DEDUP_DEFAULT_SEED;
    o->fpr = 0.01;
    o->generations = 4;
    o->shards = 0;
    o->filter = DEDUP_REDIS_FILTER_DEFAULT;
}

/* ---- the object ---- */

dedup_status dedup_redis_create(const dedup_redis_params *o, const dedup_allocator *alloc,
                                dedup_redis **out, char *why, size_t whycap)
{
    (void)alloc; /* hiredis allocates through libc; so does this object */
    if (why && whycap)
        why[0] = 0;
    if (!o || !out) {
        if (why && whycap)
            snprintf(why, whycap, "no options given");
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
    if (st == DEDUP_OK && ((o->user && strlen(o->user) > DEDUP_REDIS_MAX_CRED) ||
                           (o->password && strlen(o->password) > DEDUP_REDIS_MAX_CRED))) {
        rd_error(r, "the user name or password is longer than %d bytes", DEDUP_REDIS_MAX_CRED);
        st = DEDUP_ERR_INVALID_ARG;
    }
    if (st == DEDUP_OK && o->user)
        snprintf(r->url.user, sizeof r->url.user, "%s", o->user);
    if (st == DEDUP_OK && o->password)
        snprintf(r->url.pass, sizeof r->url.pass, "%s", o->password);
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
        if (o->scheme == DEDUP_REDIS_KEYS)
            st = rd_keys_open(r);
        else if (o->scheme == DEDUP_REDIS_BITMAP)
            st = rd_bitmap_open(r);
        else if (o->scheme == DEDUP_REDIS_MODULE)
            st = rd_module_open(r);
    }
    if (st != DEDUP_OK) {
        if (why && whycap)
            snprintf(why, whycap, "%s", r->err);
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
    r->decided = 0;
    switch (r->o.scheme) {
    case DEDUP_REDIS_KEYS: st = rd_keys_run(r, b, out, record ? KEYS_DECIDE : KEYS_QUERY); break;
    case DEDUP_REDIS_BITMAP: st = rd_bitmap_run(r, b, out, record); break;
    case DEDUP_REDIS_MODULE: st = rd_module_run(r, b, out, record ? RD_DECIDE : RD_QUERY); break;
    }
    rc_batch_reset(&r->b);
    if (st != DEDUP_OK && !record)
        r->decided = 0;
    size_t n = st == DEDUP_OK ? b->n : r->decided;
    if (n) {
        r->keys += n;
        if (record)
            for (size_t i = 0; i < n; i++) {
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
        *done = st == DEDUP_OK ? b->n : r->decided;
    return st;
}

dedup_status dedup_redis_query(dedup_redis *r, const dedup_batch *b, dedup_verdict *out)
{
    return run(r, b, out, false);
}

dedup_status dedup_redis_add(dedup_redis *r, const dedup_batch *b, dedup_verdict *out)
{
    if (r->o.scheme != DEDUP_REDIS_MODULE || r->o.filter != DEDUP_REDIS_FILTER_CUCKOO)
        return dedup_redis_decide(r, b, out, NULL);
    dedup_status st = check_batch(r, b);
    if (st != DEDUP_OK || b->n == 0)
        return st;
    r->err[0] = 0;
    st = rd_module_run(r, b, out, RD_ADD);
    rc_batch_reset(&r->b);
    if (st == DEDUP_OK)
        r->keys += b->n;
    return st;
}

dedup_status dedup_redis_delete(dedup_redis *r, const dedup_batch *b, bool *removed)
{
    dedup_status st = check_batch(r, b);
    if (st != DEDUP_OK || b->n == 0)
        return st;
    r->err[0] = 0;
    if (r->o.scheme != DEDUP_REDIS_MODULE) {
        rd_error(r, "the %s scheme cannot delete keys%s (the module scheme's cuckoo filter can)",
                 dedup_redis_scheme_name(r->o.scheme),
                 r->o.scheme == DEDUP_REDIS_BITMAP ? ": a key's bits are shared with others" : "");
        return DEDUP_ERR_UNSUPPORTED;
    }
    st = rd_module_delete(r, b, removed);
    rc_batch_reset(&r->b);
    return st;
}

dedup_status dedup_redis_commit(dedup_redis *r, const dedup_batch *b)
{
    if (r->o.scheme != DEDUP_REDIS_KEYS || !rd_keys_reserving(r) || !b || b->n == 0)
        return DEDUP_OK;
    dedup_status st = check_batch(r, b);
    if (st == DEDUP_OK)
        st = rd_keys_run(r, b, NULL, KEYS_COMMIT);
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

void dedup_redis_master_addr(const dedup_redis *r, char *buf, size_t cap)
{
    if (cap)
        rc_node_name(r->c, 0, buf, cap);
}

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
                kl = rd_shard_key(r, s, kb);
            }
            const char *argv[3] = {"MEMORY", "USAGE", kb};
            size_t lens[3] = {6, 5, kl};
            if (!rc_batch_add(&r->b, 3, argv, lens, 2, s))
                return DEDUP_ERR_NOMEM;
        }
    dedup_status st = rd_exec(r);
    if (st == DEDUP_OK)
        for (size_t j = 0; j < r->b.n; j++)
            if (r->b.cmds[j].reply->type == REDIS_REPLY_INTEGER)
                *bytes += (uint64_t)r->b.cmds[j].reply->integer;
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
