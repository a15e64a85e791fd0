/*
 * client.c - connections, the cluster slot map and the pipeline engine
 * (client.h).
 *
 * One rc_exec() call runs rounds until every command has a reply:
 *   1. route each pending command (slot map, or the node an ASK named);
 *   2. append up to 'pipeline' of them per node (ASKING before an ASK
 *      retry, WAIT after a node's writes when asked) and flush every node;
 *   3. read each node's replies in order.  MOVED updates the map, ASK marks
 *      the command for its target, TRYAGAIN / CLUSTERDOWN / LOADING /
 *      MASTERDOWN leave it pending for the next round; a broken or timed-out
 *      connection marks every command written there and unanswered as
 *      'lost' (it may have run) and drops the connection.
 * A round that met a failure costs one retry: pause (backoff doubling up to
 * 2 s), reload the slot map from any node that answers, go on.  Past
 * 'retries' such rounds the call fails naming the node.  A sentinel URL's
 * client has one node, the master; a round that met a failure asks the
 * sentinels where the master is now (sentinel_locate) instead of reloading
 * a slot map.
 */
#define _POSIX_C_SOURCE 200809L
#include "client.h"
#include "tls.h"
#include "sentinel.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NSLOTS 16384
#define NO_NODE 0xFFFFu
#define MAX_NODES 1024
#define MAX_BACKOFF_MS 2000u

typedef struct rc_node {
    char host[DEDUP_REDIS_MAX_HOST + 1];
    int port;
    redisContext *ctx;
    struct ssl_st *ssl; /* rediss: the TLS session over ctx's socket */
    bool tls_fatal;     /* the last connection failed in TLS itself */
    char lost_why[160]; /* why the last connection was dropped */
    size_t sent;     /* commands appended this round */
    bool wrote;      /* a command other than a read went out this round */
    bool failed;
    bool short_wait; /* WAIT answered fewer replicas than asked */
    bool wait_lost;  /* the connection failed in a round with WAIT: the writes
                        answered there this call are not known replicated */
} rc_node;

struct rc_client {
    dedup_redis_url url;
    dedup_redis_params o;
    bool cluster;
    rc_node *nodes;
    size_t nnodes;
    uint16_t *slots; /* cluster: slot -> node */
    rc_counters cnt;
    struct ssl_ctx_st *tls; /* rediss: every node, redirections too */
    char err[512];
};

static const uint16_t CRC16TAB[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7,
    0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef,
    0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
    0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de,
    0x2462, 0x3443, 0x0420, 0x1401, 0x64e6, 0x74c7, 0x44a4, 0x5485,
    0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
    0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4,
    0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d, 0xc7bc,
    0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b,
    0x5af5, 0x4ad4, 0x7ab7, 0x6a96, 0x1a71, 0x0a50, 0x3a33, 0x2a12,
    0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
    0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41,
    0xedae, 0xfd8f, 0xcdec, 0xddcd, 0xad2a, 0xbd0b, 0x8d68, 0x9d49,
    0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
    0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78,
    0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e, 0xe16f,
    0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e,
    0x02b1, 0x1290, 0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256,
    0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405,
    0xa7db, 0xb7fa, 0x8799, 0x97b8, 0xe75f, 0xf77e, 0xc71d, 0xd73c,
    0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
    0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab,
    0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882, 0x28a3,
    0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92,
    0xfd2e, 0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9,
    0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
    0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8,
    0x6e17, 0x7e36, 0x4e55, 0x5e74, 0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

static uint16_t crc16(const char *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++)
        crc = (uint16_t)((crc << 8) ^ CRC16TAB[((crc >> 8) ^ (unsigned char)p[i]) & 0xFF]);
    return crc;
}

int rc_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & (NSLOTS - 1);
    }
    return crc16(key, len) & (NSLOTS - 1);
}

/* ---- batches ---- */

void rc_batch_init(rc_batch *b) { memset(b, 0, sizeof *b); }

void rc_batch_reset(rc_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->cmds[i].reply)
            freeReplyObject(b->cmds[i].reply);
    b->n = 0;
    b->used = 0;
    b->wait_replicas = 0;
}

void rc_batch_free(rc_batch *b)
{
    rc_batch_reset(b);
    free(b->arena);
    free(b->cmds);
    memset(b, 0, sizeof *b);
}

static bool arena_reserve(rc_batch *b, size_t more)
{
    if (b->cap - b->used >= more)
        return true;
    size_t nc = b->cap ? b->cap : 65536;
    while (nc - b->used < more)
        nc *= 2;
    char *p = realloc(b->arena, nc);
    if (!p)
        return false;
    b->arena = p;
    b->cap = nc;
    return true;
}

static size_t put_num(char *p, char lead, size_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    size_t k = 0;
    p[k++] = lead;
    while (n)
        p[k++] = tmp[--n];
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

bool rc_batch_add(rc_batch *b, int argc, const char *const *argv, const size_t *lens,
                  int keyarg, uint32_t tag)
{
    size_t need = 24;
    for (int i = 0; i < argc; i++)
        need += lens[i] + 26;
    if (!arena_reserve(b, need))
        return false;
    if (b->n == b->ncap) {
        size_t nc = b->ncap ? b->ncap * 2 : 1024;
        rc_cmd *p = realloc(b->cmds, nc * sizeof *p);
        if (!p)
            return false;
        b->cmds = p;
        b->ncap = nc;
    }
    char *p = b->arena + b->used;
    size_t k = put_num(p, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        k += put_num(p + k, '$', lens[i]);
        memcpy(p + k, argv[i], lens[i]);
        k += lens[i];
        p[k++] = '\r';
        p[k++] = '\n';
    }
    rc_cmd *c = &b->cmds[b->n++];
    memset(c, 0, sizeof *c);
    c->off = b->used;
    c->len = k;
    c->slot = keyarg >= 0 ? rc_key_slot(argv[keyarg], lens[keyarg]) : -1;
    c->node = -1;
    c->ask_node = -1;
    c->tag = tag;
    b->used += k;
    return true;
}

/* ---- errors and small helpers ---- */

void rc_set_error(rc_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

const char *rc_error(const rc_client *c) { return c->err; }
const rc_counters *rc_get_counters(const rc_client *c) { return &c->cnt; }

size_t rc_masters(const rc_client *c)
{
    if (!c->cluster)
        return 1;
    size_t n = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        bool owns = false;
        for (size_t s = 0; s < NSLOTS && !owns; s++)
            owns = c->slots[s] == i;
        n += owns;
    }
    return n;
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static bool reply_is(const redisReply *r, const char *prefix)
{
    size_t n = strlen(prefix);
    return r && r->type == REDIS_REPLY_ERROR && r->len >= n && memcmp(r->str, prefix, n) == 0;
}

static void drop_conn(rc_node *nd)
{
    if (nd->ctx) {
        nd->tls_fatal = nd->ssl && rc_tls_fatal(nd->ctx);
        snprintf(nd->lost_why, sizeof nd->lost_why, "%s",
                 nd->ctx->err && nd->ctx->errstr[0] ? nd->ctx->errstr : "connection lost");
        redisFree(nd->ctx);
    }
    rc_tls_free(nd->ssl);
    nd->ssl = NULL;
    nd->ctx = NULL;
}

/* The transport: hiredis' own socket IO, or TLS (tls.h) under its reader
 * and output buffer. */
static int node_get_reply(rc_node *nd, void **rep)
{
    return nd->ssl ? rc_tls_get_reply(nd->ssl, nd->ctx, rep) : redisGetReply(nd->ctx, rep);
}

static void flush_node(rc_node *nd)
{
    if (nd->ssl && nd->ctx) {
        (void)rc_tls_flush(nd->ssl, nd->ctx); /* the read below sees the error */
        return;
    }
    int done = 0;
    while (nd->ctx && !done)
        if (redisBufferWrite(nd->ctx, &done) != REDIS_OK)
            break; /* the read below sees the error */
}

static int node_find(rc_client *c, const char *host, size_t hlen, int port, bool add)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].port == port && strlen(c->nodes[i].host) == hlen &&
            memcmp(c->nodes[i].host, host, hlen) == 0)
            return (int)i;
    if (!add || c->nnodes >= MAX_NODES || hlen > DEDUP_REDIS_MAX_HOST)
        return -1;
    rc_node *nd = &c->nodes[c->nnodes];
    memset(nd, 0, sizeof *nd);
    memcpy(nd->host, host, hlen);
    nd->host[hlen] = 0;
    nd->port = port;
    return (int)c->nnodes++;
}

/* Runs one command on a connected node (setup only, not the hot path). */
static redisReply *node_cmd(rc_node *nd, int argc, const char **argv, const size_t *lens)
{
    void *r = NULL;
    if (!nd->ctx)
        return NULL;
    if (redisAppendCommandArgv(nd->ctx, argc, argv, lens) != REDIS_OK ||
        node_get_reply(nd, &r) != REDIS_OK) {
        drop_conn(nd);
        return NULL;
    }
    return r;
}

/* Connects node i, AUTH, SELECT.  On failure the message names host:port;
 * 'fatal' is set when retrying cannot help (AUTH / SELECT refused). */
static dedup_status node_connect(rc_client *c, size_t i, bool *fatal)
{
    rc_node *nd = &c->nodes[i];
    *fatal = false;
    if (nd->ctx)
        return DEDUP_OK;
    struct timeval ct = {(time_t)(c->o.connect_timeout_ms / 1000),
                         (long)(c->o.connect_timeout_ms % 1000) * 1000};
    struct timeval it = {(time_t)(c->o.io_timeout_ms / 1000),
                         (long)(c->o.io_timeout_ms % 1000) * 1000};
    redisContext *ctx = redisConnectWithTimeout(nd->host, nd->port, ct);
    if (!ctx || ctx->err) {
        rc_set_error(c, "cannot connect to Redis at %s:%d: %s", nd->host, nd->port,
                     ctx ? ctx->errstr : "out of memory");
        if (ctx)
            redisFree(ctx);
        return DEDUP_ERR_IO;
    }
    redisSetTimeout(ctx, it);
    redisEnableKeepAlive(ctx);
    if (c->tls && rc_tls_start(c->tls, ctx, nd->host, c->o.tls_insecure, &nd->ssl) != REDIS_OK) {
        rc_set_error(c, "TLS with Redis at %s:%d: %s", nd->host, nd->port, ctx->errstr);
        *fatal = rc_tls_fatal(ctx);
        nd->tls_fatal = *fatal;
        redisFree(ctx);
        return DEDUP_ERR_IO;
    }
    nd->ctx = ctx;
    if (c->url.pass[0]) {
        const char *argv[3] = {"AUTH", c->url.user, c->url.pass};
        size_t lens[3] = {4, strlen(c->url.user), strlen(c->url.pass)};
        redisReply *r = c->url.user[0] ? node_cmd(nd, 3, argv, lens)
                                       : node_cmd(nd, 2, (const char *[]){"AUTH", c->url.pass},
                                                  (size_t[]){4, lens[2]});
        if (!r || r->type == REDIS_REPLY_ERROR) {
            if (r)
                rc_set_error(c, "Redis at %s:%d refused AUTH: %s", nd->host, nd->port, r->str);
            else
                rc_set_error(c, "Redis at %s:%d: %s (sending AUTH)", nd->host, nd->port,
                             nd->lost_why);
            *fatal = r != NULL || nd->tls_fatal;
            if (r)
                freeReplyObject(r);
            drop_conn(nd);
            return DEDUP_ERR_IO;
        }
        freeReplyObject(r);
    }
    if (!c->cluster && c->url.db) {
        char db[16];
        int n = snprintf(db, sizeof db, "%d", c->url.db);
        const char *argv[2] = {"SELECT", db};
        size_t lens[2] = {6, (size_t)n};
        redisReply *r = node_cmd(nd, 2, argv, lens);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            rc_set_error(c, "Redis at %s:%d refused SELECT %d: %s", nd->host, nd->port,
                         c->url.db, r ? r->str : nd->lost_why);
            *fatal = r != NULL || nd->tls_fatal;
            if (r)
                freeReplyObject(r);
            drop_conn(nd);
            return DEDUP_ERR_IO;
        }
        freeReplyObject(r);
    }
    return DEDUP_OK;
}

/* Reads CLUSTER SLOTS from node i into a fresh map.  DEDUP_ERR_IO when the
 * node fails or answers an error; DEDUP_ERR_INCOMPATIBLE when it answers
 * that cluster support is disabled. */
static dedup_status load_slots_from(rc_client *c, size_t i)
{
    bool fatal;
    dedup_status st = node_connect(c, i, &fatal);
    if (st != DEDUP_OK)
        return st;
    rc_node *nd = &c->nodes[i];
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    size_t lens[2] = {7, 5};
    redisReply *r = node_cmd(nd, 2, argv, lens);
    if (!r) {
        rc_set_error(c, "Redis at %s:%d: %s (reading CLUSTER SLOTS)", nd->host, nd->port,
                     nd->lost_why);
        return DEDUP_ERR_IO;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        bool disabled = strstr(r->str, "cluster support disabled") != NULL;
        rc_set_error(c,
                     disabled ? "Redis at %s:%d is not a cluster node (%s): use a redis:// URL"
                              : "Redis at %s:%d refused CLUSTER SLOTS: %s",
                     nd->host, nd->port, r->str);
        freeReplyObject(r);
        return disabled ? DEDUP_ERR_INCOMPATIBLE : DEDUP_ERR_IO;
    }
    if (r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        rc_set_error(c, "Redis at %s:%d: unexpected CLUSTER SLOTS reply", nd->host, nd->port);
        return DEDUP_ERR_IO;
    }
    for (size_t s = 0; s < NSLOTS; s++)
        c->slots[s] = NO_NODE;
    char asked[DEDUP_REDIS_MAX_HOST + 1];
    snprintf(asked, sizeof asked, "%s", nd->host);
    for (size_t e = 0; e < r->elements; e++) {
        redisReply *x = r->element[e];
        if (x->type != REDIS_REPLY_ARRAY || x->elements < 3 ||
            x->element[0]->type != REDIS_REPLY_INTEGER ||
            x->element[1]->type != REDIS_REPLY_INTEGER ||
            x->element[2]->type != REDIS_REPLY_ARRAY || x->element[2]->elements < 2)
            continue;
        long long lo = x->element[0]->integer, hi = x->element[1]->integer;
        redisReply *m = x->element[2];
        if (m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_INTEGER)
            continue;
        const char *h = m->element[0]->str;
        size_t hl = m->element[0]->len;
        if (hl == 0 || (hl == 1 && h[0] == '?')) { /* "the node you asked" */
            h = asked;
            hl = strlen(asked);
        }
        int idx = node_find(c, h, hl, (int)m->element[1]->integer, true);
        if (idx < 0 || lo < 0 || hi >= NSLOTS || lo > hi)
            continue;
        for (long long s = lo; s <= hi; s++)
            c->slots[s] = (uint16_t)idx;
    }
    freeReplyObject(r);
    size_t missing = 0;
    for (size_t s = 0; s < NSLOTS; s++)
        missing += c->slots[s] == NO_NODE;
    if (missing) {
        rc_set_error(c, "Redis Cluster at %s:%d: %zu of 16384 slots are not served", nd->host,
                     nd->port, missing);
        return DEDUP_ERR_IO;
    }
    return DEDUP_OK;
}

/* Reloads the map from the seeds, then any node known. */
static dedup_status load_slots(rc_client *c)
{
    dedup_status st = DEDUP_ERR_IO;
    for (size_t i = 0; i < c->nnodes; i++) {
        st = load_slots_from(c, i);
        if (st == DEDUP_OK || st == DEDUP_ERR_INCOMPATIBLE)
            return st;
    }
    return st;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sentinel: leaves node 0's connection.  WAIT counts the replicas holding
 * one connection's writes, so a WAIT on the next connection says nothing of
 * the writes answered on this one: they count as lost (rc_exec sends them
 * again, marked lost), as when a connection fails. */
static void sentinel_leave(rc_node *nd)
{
    if (nd->ctx)
        nd->wait_lost = true;
    drop_conn(nd);
}

/* Sentinel: one attempt to point node 0 at the master the sentinels name
 * and to see it answer ROLE "master" (connected by node_connect, as any
 * server).  *fatal when waiting cannot help (AUTH or SELECT refused, or
 * the sentinels that answer do not know the master). */
static dedup_status sentinel_try(rc_client *c, bool *fatal)
{
    *fatal = false;
    char host[DEDUP_REDIS_MAX_HOST + 1];
    int port;
    dedup_status st = rs_master_addr(&c->url, c->o.connect_timeout_ms, c->o.io_timeout_ms, host,
                                     &port, c->err, sizeof c->err);
    if (st != DEDUP_OK) {
        *fatal = st == DEDUP_ERR_NOT_FOUND; /* no sentinel up knows the name */
        return DEDUP_ERR_IO;
    }
    rc_node *nd = &c->nodes[0];
    if (strcmp(nd->host, host) != 0 || nd->port != port) {
        sentinel_leave(nd);
        memcpy(nd->host, host, strlen(host) + 1);
        nd->port = port;
    }
    st = node_connect(c, 0, fatal);
    if (st != DEDUP_OK)
        return st;
    const char *argv[1] = {"ROLE"};
    size_t lens[1] = {4};
    redisReply *r = node_cmd(nd, 1, argv, lens);
    if (rs_role_is_master(r)) {
        freeReplyObject(r);
        return DEDUP_OK;
    }
    rc_set_error(c, "Redis at %s:%d, which the sentinels name master '%s', answers ROLE %s",
                 nd->host, nd->port, c->url.master, r ? rs_role_name(r) : "(connection lost)");
    if (r)
        freeReplyObject(r);
    sentinel_leave(nd);
    return DEDUP_ERR_IO;
}

/* Sentinel: sentinel_try() until it succeeds, every 100 ms for at most
 * 'wait_ms' (a failover: the sentinels name the old master until they
 * agree it is down, then the replica they promoted). */
static dedup_status sentinel_locate(rc_client *c, uint32_t wait_ms)
{
    uint64_t start = now_ms();
    for (;;) {
        bool fatal;
        dedup_status st = sentinel_try(c, &fatal);
        if (st == DEDUP_OK || fatal || now_ms() - start >= wait_ms)
            return st;
        sleep_ms(100);
    }
}

/* After a failed round: where the commands go now.  A cluster reloads its
 * slot map (a failure is retried next round); a sentinel URL's client
 * waits for a master (its failure ends the call: the wait was the retry). */
static dedup_status relocate(rc_client *c)
{
    if (c->cluster)
        (void)load_slots(c);
    else if (c->url.sentinel) {
        dedup_status st = sentinel_locate(c, c->o.failover_wait_ms);
        if (st != DEDUP_OK) {
            char last[sizeof c->err];
            snprintf(last, sizeof last, "%s", c->err);
            rc_set_error(c, "no master '%s' within %u ms: %s", c->url.master,
                         c->o.failover_wait_ms, last);
            return DEDUP_ERR_IO;
        }
    }
    return DEDUP_OK;
}

dedup_status rc_open(const dedup_redis_url *url, const dedup_redis_params *o, rc_client **out,
                     char *why, size_t whycap)
{
    *out = NULL;
    rc_client *c = calloc(1, sizeof *c);
    if (!c)
        return DEDUP_ERR_NOMEM;
    c->url = *url;
    c->o = *o;
    c->cluster = url->cluster;
    c->nodes = calloc(MAX_NODES, sizeof *c->nodes);
    c->slots = c->cluster ? malloc(NSLOTS * sizeof *c->slots) : NULL;
    if (!c->nodes || (c->cluster && !c->slots)) {
        rc_free(c);
        return DEDUP_ERR_NOMEM;
    }
    if (url->tls) {
        char tls_why[400];
        dedup_status ts = rc_tls_ctx_new(o, &c->tls, tls_why, sizeof tls_why);
        if (ts != DEDUP_OK) {
            if (why && whycap)
                snprintf(why, whycap, "%s", ts == DEDUP_ERR_NOMEM ? "out of memory" : tls_why);
            rc_free(c);
            return ts;
        }
    }
    for (size_t i = 0; i < url->nseeds && !url->sentinel; i++)
        node_find(c, url->seeds[i].host, strlen(url->seeds[i].host), url->seeds[i].port, true);
    if (url->sentinel)
        c->nnodes = 1; /* the master, wherever sentinel_try() finds it */
    dedup_status st;
    if (c->cluster) {
        st = load_slots(c);
    } else {
        bool fatal;
        st = url->sentinel ? sentinel_try(c, &fatal) : node_connect(c, 0, &fatal);
        if (st == DEDUP_OK) {
            /* A cluster node answers only for its own slots: refuse it. */
            const char *argv[2] = {"INFO", "cluster"};
            size_t lens[2] = {4, 7};
            redisReply *r = node_cmd(&c->nodes[0], 2, argv, lens);
            if (!r) {
                rc_set_error(c, "Redis at %s:%d: %s", c->nodes[0].host, c->nodes[0].port,
                             c->nodes[0].lost_why);
                st = DEDUP_ERR_IO;
            } else {
                if (r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_enabled:1")) {
                    rc_set_error(c,
                                 "Redis at %s:%d is a Redis Cluster node: use a "
                                 "redis-cluster:// URL",
                                 c->nodes[0].host, c->nodes[0].port);
                    st = DEDUP_ERR_INCOMPATIBLE;
                }
                freeReplyObject(r);
            }
        }
    }
    if (st != DEDUP_OK) {
        if (why && whycap)
            snprintf(why, whycap, "%s", c->err);
        rc_free(c);
        return st;
    }
    *out = c;
    return DEDUP_OK;
}

void rc_free(rc_client *c)
{
    if (!c)
        return;
    if (c->nodes)
        for (size_t i = 0; i < c->nnodes; i++)
            drop_conn(&c->nodes[i]);
    free(c->nodes);
    free(c->slots);
    rc_tls_ctx_free(c->tls);
    free(c);
}

/* Parses "MOVED 3999 127.0.0.1:6381" / "ASK ..." into a node index. */
static int redirect_node(rc_client *c, const redisReply *r, int *slot)
{
    const char *p = strchr(r->str, ' ');
    if (!p)
        return -1;
    *slot = atoi(p + 1);
    const char *addr = strchr(p + 1, ' ');
    if (!addr)
        return -1;
    addr++;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return -1;
    int port = atoi(colon + 1);
    if (port <= 0 || port > 65535)
        return -1;
    return node_find(c, addr, (size_t)(colon - addr), port, true);
}

static bool retryable(const redisReply *r)
{
    return reply_is(r, "TRYAGAIN") || reply_is(r, "CLUSTERDOWN") || reply_is(r, "LOADING") ||
           reply_is(r, "MASTERDOWN") || reply_is(r, "READONLY");
}

/* WAIT answered short on some node (a replica resyncing, or none since a
 * failover): ask again, with the same bounded backoff, until it is enough.
 * WAIT counts the replicas that hold every write of this connection, so a
 * lost connection here leaves the writes' durability unknown: an error. */
static dedup_status retry_waits(rc_client *c, uint32_t want, uint32_t *failures, uint32_t backoff,
                                int *dropped)
{
    *dropped = -1;
    char n1[16], n2[16];
    snprintf(n1, sizeof n1, "%u", want);
    snprintf(n2, sizeof n2, "%u", c->o.wait_timeout_ms);
    for (size_t j = 0; j < c->nnodes; j++) {
        rc_node *nd = &c->nodes[j];
        long long got = -1;
        while (nd->short_wait) {
            if (++*failures > c->o.retries) {
                rc_set_error(c, "Redis at %s:%d: WAIT %u acknowledged by %lld replica(s) within "
                                "%u ms (gave up after %u retries)", nd->host, nd->port, want,
                             got < 0 ? 0 : got, c->o.wait_timeout_ms, c->o.retries);
                return DEDUP_ERR_IO;
            }
            c->cnt.retries++;
            const char *argv[3] = {"WAIT", n1, n2};
            size_t lens[3] = {4, strlen(n1), strlen(n2)};
            redisReply *r = node_cmd(nd, 3, argv, lens);
            if (!r) {
                rc_set_error(c, "Redis at %s:%d: connection lost waiting for %u replica(s): "
                                "whether the last writes are replicated is unknown",
                             nd->host, nd->port, want);
                drop_conn(nd);
                nd->short_wait = false;
                *dropped = (int)j;
                return DEDUP_ERR_IO;
            }
            got = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
            freeReplyObject(r);
            if (got >= (long long)want)
                nd->short_wait = false;
            else {
                sleep_ms(backoff);
                backoff = backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
            }
        }
    }
    return DEDUP_OK;
}

dedup_status rc_exec(rc_client *c, rc_batch *b)
{
    size_t pending = 0;
    for (size_t i = 0; i < b->n; i++)
        pending += !b->cmds[i].done;
    uint32_t failures = 0, backoff = c->o.backoff_ms ? c->o.backoff_ms : 1;
    size_t *order = NULL; /* per node, the commands sent this round */
    size_t order_cap = 0;
    dedup_status result = DEDUP_OK;
    static const char ASKING[] = "*1\r\n$6\r\nASKING\r\n";
    char waitcmd[96];
    size_t waitlen = 0;
    if (b->wait_replicas) {
        char n1[16], n2[16];
        int l1 = snprintf(n1, sizeof n1, "%u", b->wait_replicas);
        int l2 = snprintf(n2, sizeof n2, "%u", c->o.wait_timeout_ms);
        waitlen = (size_t)snprintf(waitcmd, sizeof waitcmd, "*3\r\n$4\r\nWAIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n",
                                   l1, n1, l2, n2);
    }
again:
    for (size_t j = 0; j < c->nnodes; j++) {
        c->nodes[j].short_wait = false;
        c->nodes[j].wait_lost = false;
    }
    while (pending) {
        bool trouble = false;
        const char *trouble_node = NULL;
        int trouble_port = 0;
        /* 1-2: route and append. */
        for (size_t j = 0; j < c->nnodes; j++) {
            c->nodes[j].sent = 0;
            c->nodes[j].wrote = false;
            c->nodes[j].failed = false;
        }
        if (order_cap < b->n) {
            free(order);
            order = malloc(b->n * sizeof *order);
            if (!order)
                return DEDUP_ERR_NOMEM;
            order_cap = b->n;
        }
        size_t norder = 0;
        for (size_t i = 0; i < b->n; i++) {
            rc_cmd *cm = &b->cmds[i];
            if (cm->done)
                continue;
            int nd_i = 0;
            if (c->cluster) {
                if (cm->asking && cm->ask_node >= 0)
                    nd_i = cm->ask_node;
                else if (cm->slot >= 0)
                    nd_i = c->slots[cm->slot];
                else
                    nd_i = 0;
                if (nd_i == (int)NO_NODE)
                    nd_i = 0;
            }
            rc_node *nd = &c->nodes[nd_i];
            if (nd->failed || nd->sent >= c->o.pipeline)
                continue;
            if (!nd->ctx) {
                bool fatal;
                if (node_connect(c, (size_t)nd_i, &fatal) != DEDUP_OK) {
                    nd->failed = true;
                    trouble = true;
                    trouble_node = nd->host;
                    trouble_port = nd->port;
                    if (fatal) {
                        free(order);
                        return DEDUP_ERR_IO;
                    }
                    continue;
                }
            }
            if (cm->asking)
                redisAppendFormattedCommand(nd->ctx, ASKING, sizeof ASKING - 1);
            redisAppendFormattedCommand(nd->ctx, b->arena + cm->off, cm->len);
            cm->node = nd_i;
            nd->sent++;
            nd->wrote = true;
            order[norder++] = i;
            c->cnt.commands++;
        }
        for (size_t j = 0; j < c->nnodes; j++) {
            rc_node *nd = &c->nodes[j];
            if (nd->sent && waitlen)
                redisAppendFormattedCommand(nd->ctx, waitcmd, waitlen);
            if (nd->sent) {
                flush_node(nd);
                c->cnt.round_trips++;
            }
        }
        /* 3: read, node by node, in the order written. */
        for (size_t j = 0; j < c->nnodes; j++) {
            rc_node *nd = &c->nodes[j];
            if (!nd->sent)
                continue;
            for (size_t q = 0; q < norder; q++) {
                rc_cmd *cm = &b->cmds[order[q]];
                if (cm->node != (int)j || cm->done)
                    continue;
                if (nd->failed) { /* written, never answered */
                    cm->lost = true;
                    cm->asking = false;
                    continue;
                }
                void *rep = NULL;
                if (cm->asking) {
                    if (node_get_reply(nd, &rep) != REDIS_OK) {
                        nd->failed = true;
                        cm->lost = true;
                        cm->asking = false;
                        continue;
                    }
                    freeReplyObject(rep);
                    rep = NULL;
                    cm->asking = false;
                }
                if (node_get_reply(nd, &rep) != REDIS_OK) {
                    nd->failed = true;
                    cm->lost = true;
                    continue;
                }
                redisReply *r = rep;
                int slot;
                if (reply_is(r, "MOVED ")) {
                    int to = redirect_node(c, r, &slot);
                    if (to >= 0 && slot >= 0 && slot < NSLOTS && c->cluster)
                        c->slots[slot] = (uint16_t)to;
                    c->cnt.moved++;
                    c->cnt.retries++;
                    freeReplyObject(r);
                    if (to < 0 || !c->cluster) {
                        rc_set_error(c, "Redis at %s:%d redirected a command (MOVED) but the URL "
                                        "is not a redis-cluster:// URL", nd->host, nd->port);
                        result = DEDUP_ERR_IO;
                    }
                    continue;
                }
                if (reply_is(r, "ASK ")) {
                    int to = redirect_node(c, r, &slot);
                    freeReplyObject(r);
                    c->cnt.ask++;
                    c->cnt.retries++;
                    if (to < 0) {
                        rc_set_error(c, "Redis at %s:%d: bad ASK redirection", nd->host, nd->port);
                        result = DEDUP_ERR_IO;
                        continue;
                    }
                    cm->asking = true;
                    cm->ask_node = to; /* cm->node stays: this round read it from j */
                    continue;
                }
                if (reply_is(r, "NOPERM")) {
                    /* The ACL user lacks the command (or key): it was not
                     * carried out, so it is neither answered nor lost; the
                     * call fails naming it, and the command stays without
                     * a reply (the caller's records not decided). */
                    rc_set_error(c, "Redis at %s:%d refused a command to this ACL user: %s "
                                    "(each scheme's commands: redis/README.md, \"ACL\")",
                                 nd->host, nd->port, r->str);
                    freeReplyObject(r);
                    result = DEDUP_ERR_IO;
                    continue;
                }
                if (retryable(r)) {
                    trouble = true;
                    trouble_node = nd->host;
                    trouble_port = nd->port;
                    rc_set_error(c, "Redis at %s:%d: %s", nd->host, nd->port, r->str);
                    freeReplyObject(r);
                    continue;
                }
                cm->reply = r;
                cm->done = true;
                pending--;
            }
            if (!nd->failed && waitlen) {
                void *rep = NULL;
                if (node_get_reply(nd, &rep) != REDIS_OK) {
                    nd->failed = true;
                } else {
                    redisReply *r = rep;
                    long long got = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
                    freeReplyObject(r);
                    /* this connection's writes, earlier rounds' too */
                    nd->short_wait = got < (long long)b->wait_replicas;
                }
            }
            if (nd->failed) {
                if (waitlen)
                    nd->wait_lost = true;
                trouble = true;
                trouble_node = nd->host;
                trouble_port = nd->port;
                rc_set_error(c, "Redis at %s:%d: %s", nd->host, nd->port,
                             nd->ctx && nd->ctx->errstr[0] ? nd->ctx->errstr : "connection lost");
                drop_conn(nd);
                if (nd->tls_fatal) /* a certificate refused: retrying cannot help */
                    result = DEDUP_ERR_IO;
            }
        }
        if (result != DEDUP_OK)
            break;
        if (trouble) {
            if (++failures > c->o.retries) {
                char last[sizeof c->err];
                snprintf(last, sizeof last, "%s", c->err);
                rc_set_error(c, "%s (gave up after %u retries on %s:%d)", last, c->o.retries,
                             trouble_node ? trouble_node : "?", trouble_port);
                result = DEDUP_ERR_IO;
                break;
            }
            c->cnt.retries++;
            sleep_ms(backoff);
            backoff = backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
            if (relocate(c) != DEDUP_OK) {
                result = DEDUP_ERR_IO;
                break;
            }
        }
    }
    if (result == DEDUP_OK && waitlen) {
        /* A connection lost before its WAIT answered: the commands answered
         * on it may die with their master (a failover), so they run again,
         * marked lost, as when a later WAIT finds the node gone. */
        bool again_lost = false;
        for (size_t i = 0; i < b->n; i++) {
            rc_cmd *cm = &b->cmds[i];
            if (cm->done && cm->node >= 0 && (size_t)cm->node < c->nnodes &&
                c->nodes[cm->node].wait_lost) {
                freeReplyObject(cm->reply);
                cm->reply = NULL;
                cm->done = false;
                cm->lost = true;
                pending++;
                again_lost = true;
            }
        }
        if (again_lost) {
            if (++failures > c->o.retries) {
                char last[sizeof c->err];
                snprintf(last, sizeof last, "%s", c->err);
                rc_set_error(c, "%s (gave up after %u retries)", last, c->o.retries);
                free(order);
                return DEDUP_ERR_IO;
            }
            c->cnt.retries++;
            sleep_ms(backoff);
            if (relocate(c) != DEDUP_OK) {
                free(order);
                return DEDUP_ERR_IO;
            }
            goto again;
        }
        int dropped;
        result = retry_waits(c, b->wait_replicas, &failures, backoff, &dropped);
        if (result != DEDUP_OK && dropped >= 0 && failures <= c->o.retries) {
            /* The node went away before its replicas acknowledged: its
             * commands may be lost with it (a failover), so they run again,
             * marked lost (their keys found present become UNCERTAIN). */
            for (size_t i = 0; i < b->n; i++) {
                rc_cmd *cm = &b->cmds[i];
                if (cm->done && cm->node == dropped) {
                    freeReplyObject(cm->reply);
                    cm->reply = NULL;
                    cm->done = false;
                    cm->lost = true;
                    pending++;
                }
            }
            result = DEDUP_OK;
            c->cnt.retries++;
            sleep_ms(backoff);
            if (relocate(c) != DEDUP_OK) {
                free(order);
                return DEDUP_ERR_IO;
            }
            goto again;
        }
    }
    free(order);
    return result;
}

dedup_status rc_each_master(rc_client *c, int argc, const char *const *argv, const size_t *lens,
                            redisReply **replies, size_t cap, size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < c->nnodes && *n < cap; i++) {
        if (c->cluster) {
            bool owns = false;
            for (size_t s = 0; s < NSLOTS && !owns; s++)
                owns = c->slots[s] == i;
            if (!owns)
                continue;
        } else if (i > 0) {
            break;
        }
        bool fatal;
        if (node_connect(c, i, &fatal) != DEDUP_OK)
            return DEDUP_ERR_IO;
        redisReply *r = node_cmd(&c->nodes[i], argc, (const char **)argv, lens);
        if (!r) {
            rc_set_error(c, "Redis at %s:%d: %s", c->nodes[i].host, c->nodes[i].port,
                         c->nodes[i].lost_why);
            return DEDUP_ERR_IO;
        }
        replies[(*n)++] = r;
    }
    return DEDUP_OK;
}

void rc_node_name(const rc_client *c, int node, char *buf, size_t cap)
{
    if (node >= 0 && (size_t)node < c->nnodes)
        snprintf(buf, cap, "%s:%d", c->nodes[node].host, c->nodes[node].port);
    else
        snprintf(buf, cap, "%s:%d", c->url.seeds[0].host, c->url.seeds[0].port);
}
