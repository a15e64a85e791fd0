/*
 * sentinel.c - asking Redis Sentinel for a master's address (sentinel.h).
 *
 * Each call opens a short-lived connection to one sentinel at a time: a
 * sentinel is asked rarely (at open, and after the master failed), so a
 * connection kept open would buy nothing and would have to be watched.
 * Replies are not trusted: the address must be two bulk strings, a host
 * that fits and a port in 1..65535.
 */
#include "sentinel.h"

#include <stdio.h>
#include <string.h>

static redisReply *ask(redisContext *ctx, const char *master)
{
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", master};
    size_t lens[3] = {8, 23, strlen(master)};
    return redisCommandArgv(ctx, 3, argv, lens);
}

static bool auth(redisContext *ctx, const dedup_redis_url *url)
{
    const char *argv[3] = {"AUTH", url->user, url->pass};
    size_t lens[3] = {4, strlen(url->user), strlen(url->pass)};
    redisReply *r = url->user[0] ? redisCommandArgv(ctx, 3, argv, lens)
                                 : redisCommandArgv(ctx, 2, (const char *[]){"AUTH", url->pass},
                                                    (size_t[]){4, lens[2]});
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (r)
        freeReplyObject(r);
    return ok;
}

static bool is_error(const redisReply *r, const char *prefix)
{
    size_t n = strlen(prefix);
    return r->type == REDIS_REPLY_ERROR && r->len >= n && memcmp(r->str, prefix, n) == 0;
}

/* Parses [host, port] into host/port; false if it is anything else. */
static bool parse_addr(const redisReply *r, char *host, int *port)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return false;
    const redisReply *h = r->element[0], *p = r->element[1];
    if (h->type != REDIS_REPLY_STRING || p->type != REDIS_REPLY_STRING || h->len == 0 ||
        h->len > DEDUP_REDIS_MAX_HOST || memchr(h->str, 0, h->len) || p->len == 0 || p->len > 5)
        return false;
    long v = 0;
    for (size_t i = 0; i < p->len; i++) {
        if (p->str[i] < '0' || p->str[i] > '9')
            return false;
        v = v * 10 + (p->str[i] - '0');
    }
    if (v < 1 || v > 65535)
        return false;
    memcpy(host, h->str, h->len);
    host[h->len] = 0;
    *port = (int)v;
    return true;
}

/* One sentinel: DEDUP_OK with the address, NOT_FOUND (it does not know the
 * master), IO (unreachable, or an answer that is not an address). */
static dedup_status ask_one(const dedup_redis_url *url, size_t i, struct timeval ct,
                            struct timeval it, char *host, int *port, char *why, size_t whycap)
{
    const char *sh = url->seeds[i].host;
    int sp = url->seeds[i].port;
    redisContext *ctx = redisConnectWithTimeout(sh, sp, ct);
    if (!ctx || ctx->err) {
        snprintf(why, whycap, "cannot connect to the sentinel at %s:%d: %s", sh, sp,
                 ctx ? ctx->errstr : "out of memory");
        if (ctx)
            redisFree(ctx);
        return DEDUP_ERR_IO;
    }
    redisSetTimeout(ctx, it);
    redisReply *r = ask(ctx, url->master);
    if (r && is_error(r, "NOAUTH") && url->pass[0]) {
        freeReplyObject(r);
        r = auth(ctx, url) ? ask(ctx, url->master) : NULL;
    }
    dedup_status st = DEDUP_ERR_IO;
    if (!r)
        snprintf(why, whycap, "the sentinel at %s:%d: %s", sh, sp,
                 ctx->errstr[0] ? ctx->errstr : "connection lost or AUTH refused");
    else if (r->type == REDIS_REPLY_NIL)
        st = DEDUP_ERR_NOT_FOUND;
    else if (r->type == REDIS_REPLY_ERROR)
        snprintf(why, whycap, "the sentinel at %s:%d answered: %s", sh, sp, r->str);
    else if (parse_addr(r, host, port))
        st = DEDUP_OK;
    else
        snprintf(why, whycap, "the sentinel at %s:%d answered something other than an address",
                 sh, sp);
    if (r)
        freeReplyObject(r);
    redisFree(ctx);
    return st;
}

dedup_status rs_master_addr(const dedup_redis_url *url, uint32_t connect_ms, uint32_t io_ms,
                            char *host, int *port, char *why, size_t whycap)
{
    struct timeval ct = {(time_t)(connect_ms / 1000), (long)(connect_ms % 1000) * 1000};
    struct timeval it = {(time_t)(io_ms / 1000), (long)(io_ms % 1000) * 1000};
    char last[384] = "";
    bool unknown = false;
    for (size_t i = 0; i < url->nseeds; i++) {
        dedup_status st = ask_one(url, i, ct, it, host, port, last, sizeof last);
        if (st == DEDUP_OK)
            return DEDUP_OK;
        unknown |= st == DEDUP_ERR_NOT_FOUND;
    }
    if (unknown) {
        snprintf(why, whycap, "no sentinel of %zu knows a master named '%s'%s%s", url->nseeds,
                 url->master, last[0] ? "; " : "", last);
        return DEDUP_ERR_NOT_FOUND;
    }
    snprintf(why, whycap, "no sentinel of %zu named the master '%s' (last: %s)", url->nseeds,
             url->master, last);
    return DEDUP_ERR_IO;
}

bool rs_role_is_master(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
           r->element[0]->type == REDIS_REPLY_STRING && r->element[0]->len == 6 &&
           memcmp(r->element[0]->str, "master", 6) == 0;
}

const char *rs_role_name(const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING)
        return r->element[0]->str;
    if (r && r->type == REDIS_REPLY_ERROR)
        return r->str;
    return "?";
}
