/*
 * module.c - the module scheme: one logical filter of a Redis filter module
 * (this project's dedup_redis.so, or RedisBloom) split over S shard keys
 * (dedup/redis.h).
 *
 * Shards.  Shard s is the key "<name>:{<name>:f<s>}" (the hash tag spreads
 * the shards over a cluster's slots); a key goes to shard reduce(hi, S) of
 * its digest and is sent as its 16 digest bytes.  S comes from the size of
 * the filter: the bytes a local filter of the same kind needs for (n, p)
 * (dedup_seen_bytes_for(), as `dedup calc` computes them), one shard per
 * RD_SHARD_BYTES or part of it, at least RD_SHARDS_PER_MASTER per master on
 * a cluster so every master holds some; or --shards S.  Each shard is
 * reserved for its share of n plus four standard deviations of the
 * binomial spread (plus 16), so no shard outgrows its capacity by chance.
 *
 * Metadata.  The first client reserves the shards, then writes the shape to
 * the hash "<name>:meta" (field "shape", HSETNX: concurrent first clients
 * agree on one) as
 *   scheme=module v=2 filter=bloom|cuckoo shards=S items=n fpr=p seed=x ttl_ms=t sum=H
 * (H: 16 hex digits, the low word of dedup_hash(text before " sum=", 0);
 * version 1, written before, has no sum and is still read) and every client
 * reads it back, so all of them route keys to the same shards whatever they
 * were given.  A client that states a shape (items) must state the stored
 * one: -n, -p, the TTL, the filter kind and --shards (when given) are
 * compared, and a difference is refused naming both shapes.  A client that
 * states none (items 0) adopts the stored one.  The bitmap scheme keeps its
 * shape in the same field without the "scheme=module" prefix, so neither
 * scheme opens the other's filter.  A damaged shape (no parse, a range, the
 * sum) is refused naming the key.
 *
 * Seed.  The digests sent are keyed by the stored seed.  A client with the
 * public default seed (no --seed) creates a filter with a random seed from
 * the OS and adopts a stored seed; a client with another seed creates with
 * it and must match a stored one.  The module's own hashing of the 16-byte
 * items needs no secret: an attacker who cannot predict the digests cannot
 * aim at its slots.
 *
 * Shards.  Every open checks that each shard exists and is a filter of the
 * stored kind (TYPE): a shard deleted or evicted under an existing meta
 * would otherwise be recreated empty and its keys output again.  Decides
 * use BF.INSERT ... NOCREATE (CF.INSERTNX NOCREATE; DEDUP.MADD never
 * creates), so a shard lost during a run is an error naming it too.
 *
 * A failed decide (a lost server, an error reply, a failed WAIT) answers for
 * every key of the batch: the verdicts that came back are kept (a NEW one
 * is UNCERTAIN after a failed WAIT: not promised to survive a failover), and
 * the keys of every shard left without a usable reply are UNCERTAIN (their
 * command may have been carried out), so the caller writes out or lists
 * each one and none is recorded in Redis unknown to the output.
 *
 * Commands, one per shard touched, all pipelined:
 *   bloom   decide BF.INSERT key NOCREATE ITEMS d...   query BF.MEXISTS key d...
 *   cuckoo  decide CF.INSERTNX key NOCREATE ITEMS d...   (1 added, 0 present,
 *                  -1 full)                    query CF.MEXISTS key d...
 *           add    CF.INSERT key NOCREATE ITEMS d... (a copy per add, 1 or -1)
 *           delete CF.DEL key d (one per key; the module has no multi-delete)
 *   ttl     decide DEDUP.MADD key d...         query DEDUP.EXISTS key d (per key)
 */
#define _DEFAULT_SOURCE
#include "rd.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODULE_FORMAT_VERSION 2 /* 1: no sum; still read */
#define RD_SHARD_BYTES (UINT64_C(64) << 20)
#define RD_SHARDS_PER_MASTER 4u
#define RD_MAX_SHARDS 65536u

static const char *filter_name(dedup_redis_filter f)
{
    return f == DEDUP_REDIS_FILTER_CUCKOO ? "cuckoo" : "bloom";
}

size_t rd_shard_key(const dedup_redis *r, uint32_t s, char *buf)
{
    return (size_t)sprintf(buf, "%s:{%s:f%u}", r->name, r->name, s);
}

/* The checksum of a version-2 shape: the low word of dedup_hash(body, 0),
 * as the keys and bitmap schemes seal theirs (kept local: module.c shares
 * no helper with those files). */
static unsigned long long shape_sum(const char *body, size_t len)
{
    return (unsigned long long)dedup_hash(body, len, 0).lo;
}

static int shape_format(char *buf, size_t cap, const rd_mod_shape *t)
{
    int n = snprintf(buf, cap, "scheme=module v=%u filter=%s shards=%u items=%llu fpr=%.17g seed=%llu "
                               "ttl_ms=%llu",
                     t->version, t->filter, t->shards, t->items, t->fpr, t->seed, t->ttl_ms);
    if (n < 0 || (size_t)n >= cap || t->version < 2)
        return n;
    int m = snprintf(buf + n, cap - (size_t)n, " sum=%016llx", shape_sum(buf, (size_t)n));
    return m < 0 ? m : n + m;
}

dedup_status rd_module_shape_parse(const char *s, rd_mod_shape *t)
{
    memset(t, 0, sizeof *t);
    if (strncmp(s, "scheme=module ", 14) != 0)
        return DEDUP_ERR_WRONG_TYPE;
    int used = 0;
    if (sscanf(s, "scheme=module v=%u filter=%15s shards=%u items=%llu fpr=%lg seed=%llu ttl_ms=%llu%n",
               &t->version, t->filter, &t->shards, &t->items, &t->fpr, &t->seed, &t->ttl_ms,
               &used) != 7)
        return t->version && t->version > MODULE_FORMAT_VERSION ? DEDUP_ERR_VERSION
                                                                : DEDUP_ERR_CORRUPT;
    if (t->version < 1 || t->version > MODULE_FORMAT_VERSION)
        return DEDUP_ERR_VERSION;
    const char *rest = s + used;
    if (t->version == 1 && *rest)
        return DEDUP_ERR_CORRUPT;
    if (t->version == 2) {
        char want[24];
        snprintf(want, sizeof want, " sum=%016llx", shape_sum(s, (size_t)used));
        if (strcmp(rest, want) != 0)
            return DEDUP_ERR_CHECKSUM;
    }
    if (t->shards < 1 || t->shards > RD_MAX_SHARDS || t->items < 1 || !(t->fpr > 0 && t->fpr < 1) ||
        (strcmp(t->filter, "bloom") != 0 && strcmp(t->filter, "cuckoo") != 0) ||
        (t->ttl_ms && strcmp(t->filter, "bloom") != 0))
        return DEDUP_ERR_CORRUPT;
    return DEDUP_OK;
}

uint32_t dedup_redis_module_shards(dedup_redis_filter f, uint64_t items, double fpr,
                                   size_t masters)
{
    bool cluster = masters > 0;
    uint64_t bytes = dedup_seen_bytes_for(f == DEDUP_REDIS_FILTER_CUCKOO ? DEDUP_SEEN_CUCKOO
                                                                         : DEDUP_SEEN_BLOOM,
                                          items, fpr);
    uint64_t s = bytes ? (bytes + RD_SHARD_BYTES - 1) / RD_SHARD_BYTES : 1;
    if (cluster && s < RD_SHARDS_PER_MASTER * (uint64_t)masters)
        s = RD_SHARDS_PER_MASTER * (uint64_t)masters;
    if (s < 1)
        s = 1;
    return s > RD_MAX_SHARDS ? RD_MAX_SHARDS : (uint32_t)s;
}

/* The capacity each shard is reserved for. */
static uint64_t shard_capacity(uint64_t items, uint32_t shards)
{
    double per = (double)items / shards;
    uint64_t cap = (uint64_t)ceil(per + 4 * sqrt(per)) + 16;
    return cap;
}

static dedup_status reserve_shards(dedup_redis *r)
{
    bool cuckoo = r->o.filter == DEDUP_REDIS_FILTER_CUCKOO;
    char fpr[32], cap[24], win[24];
    snprintf(fpr, sizeof fpr, "%.17g", r->o.fpr);
    size_t caplen = (size_t)sprintf(cap, "%llu", (unsigned long long)shard_capacity(r->o.items, r->o.shards));
    size_t winlen = (size_t)sprintf(win, "%llu", (unsigned long long)r->o.ttl_ms);
    const char *what = r->o.ttl_ms ? "DEDUP.RESERVE" : cuckoo ? "CF.RESERVE" : "BF.RESERVE";
    rc_batch_reset(&r->b);
    char kb[2 * RD_MAX_NAME + 32];
    for (uint32_t s = 0; s < r->o.shards; s++) {
        size_t kl = rd_shard_key(r, s, kb);
        const char *bf[4] = {"BF.RESERVE", kb, fpr, cap};
        size_t bl[4] = {10, kl, strlen(fpr), caplen};
        const char *cf[3] = {"CF.RESERVE", kb, cap};
        size_t cl[3] = {10, kl, caplen};
        const char *dd[5] = {"DEDUP.RESERVE", kb, win, fpr, cap};
        size_t dl[5] = {13, kl, winlen, strlen(fpr), caplen};
        bool ok = r->o.ttl_ms ? rc_batch_add(&r->b, 5, dd, dl, 1, s)
                  : cuckoo    ? rc_batch_add(&r->b, 3, cf, cl, 1, s)
                              : rc_batch_add(&r->b, 4, bf, bl, 1, s);
        if (!ok)
            return DEDUP_ERR_NOMEM;
    }
    /* With --wait-replicas the shards reach the replicas before the meta
     * is written: a failover between the two would leave a meta whose
     * shards the new master never had (refused by every later run). */
    r->b.wait_replicas = r->o.wait_replicas;
    dedup_status st = rd_exec(r);
    if (st != DEDUP_OK)
        return st;
    for (size_t j = 0; j < r->b.n; j++) {
        redisReply *rep = r->b.cmds[j].reply;
        if (rep->type != REDIS_REPLY_ERROR || strstr(rep->str, "exists"))
            continue;
        if (strstr(rep->str, "unknown command")) {
            rd_error(r, r->o.ttl_ms ? "Redis has no DEDUP.RESERVE (the module scheme with a TTL "
                                      "needs this project's module, dedup_redis.so)"
                                    : "Redis has no %s: load this project's module "
                                      "(dedup_redis.so) or RedisBloom, or use --redis-scheme "
                                      "keys|bitmap", what);
            return DEDUP_ERR_UNSUPPORTED;
        }
        return rd_reply_error(r, rep, what);
    }
    rc_batch_reset(&r->b);
    return DEDUP_OK;
}

/* A client asking for a secret seed (secret_seed) gets a random one for a
 * new filter and adopts a stored one; else its 'seed', whatever its value. */
static bool seed_is_secret(const dedup_redis *r) { return r->o.secret_seed; }


/* Runs the pipeline in r->b; its last command's reply must be HGET's: a
 * copy of the shape into 'text' (empty when absent).  An error reply (a
 * meta of another type) is refused naming the key. */
static dedup_status exec_meta(dedup_redis *r, const char *meta, char *text, size_t cap)
{
    dedup_status st = rd_exec(r);
    if (st != DEDUP_OK)
        return st;
    for (size_t j = 0; j < r->b.n; j++) {
        const redisReply *e = r->b.cmds[j].reply;
        if (e->type == REDIS_REPLY_ERROR) {
            rd_error(r, "%s in Redis is not the module filter's metadata hash (%s): refusing to "
                        "use the name '%s'", meta, e->str, r->name);
            return strstr(e->str, "WRONGTYPE") ? DEDUP_ERR_WRONG_TYPE : DEDUP_ERR_IO;
        }
    }
    const redisReply *got = r->b.cmds[r->b.n - 1].reply;
    text[0] = 0;
    if (got->type == REDIS_REPLY_STRING) {
        if (got->len == 0 || got->len >= cap || memchr(got->str, 0, got->len)) {
            rd_error(r, "%s in Redis is damaged (its shape is %zu bytes): refusing to use the "
                        "name '%s'", meta, (size_t)got->len, r->name);
            return DEDUP_ERR_CORRUPT;
        }
        memcpy(text, got->str, got->len + 1);
    }
    return DEDUP_OK;
}

/* The Redis types a shard of the stored kind may have: this module's, or
 * RedisBloom's (its BF and CF keys; not DEDUP). */
static bool shard_type_ok(const dedup_redis *r, const char *type)
{
    if (r->o.ttl_ms)
        return strcmp(type, "dedup-DD1") == 0;
    if (r->o.filter == DEDUP_REDIS_FILTER_CUCKOO)
        return strcmp(type, "dedup-CF1") == 0 || strcmp(type, "MBbloomCF") == 0;
    return strcmp(type, "dedup-BF1") == 0 || strcmp(type, "MBbloom--") == 0;
}

/* Checks that every shard exists and holds a filter of the stored kind:
 * NOT_FOUND naming a missing one (deleted, evicted, lost in a failover),
 * WRONG_TYPE naming one of another type. */
static dedup_status check_shards(dedup_redis *r, const char *meta)
{
    char kb[2 * RD_MAX_NAME + 32];
    rc_batch_reset(&r->b);
    for (uint32_t s = 0; s < r->o.shards; s++) {
        size_t kl = rd_shard_key(r, s, kb);
        const char *argv[2] = {"TYPE", kb};
        size_t lens[2] = {4, kl};
        if (!rc_batch_add(&r->b, 2, argv, lens, 1, s))
            return DEDUP_ERR_NOMEM;
    }
    dedup_status st = rd_exec(r);
    if (st != DEDUP_OK)
        return st;
    const char *kind = r->o.ttl_ms ? "DEDUP (expiring)" : r->o.filter == DEDUP_REDIS_FILTER_CUCKOO
                                                              ? "cuckoo (CF)"
                                                              : "Bloom (BF)";
    for (size_t j = 0; j < r->b.n; j++) {
        const redisReply *e = r->b.cmds[j].reply;
        rd_shard_key(r, r->b.cmds[j].tag, kb);
        if (e->type != REDIS_REPLY_STATUS && e->type != REDIS_REPLY_STRING)
            return rd_reply_error(r, e, "TYPE of a module filter shard");
        if (strcmp(e->str, "none") == 0) {
            rd_error(r, "shard %s of the module filter '%s' is missing while %s remains (deleted, "
                        "evicted, or lost in a failover): the keys it recorded are forgotten and "
                        "would be output again; restore it, or delete %s and the filter's shards "
                        "to start over", kb, r->name, meta, meta);
            return DEDUP_ERR_NOT_FOUND;
        }
        if (!shard_type_ok(r, e->str)) {
            rd_error(r, "%s holds a Redis '%s', not a %s filter: it is not shard %u of the module "
                        "filter '%s' (%s); remove or rename it", kb, e->str, kind,
                     r->b.cmds[j].tag, r->name, meta);
            return DEDUP_ERR_WRONG_TYPE;
        }
    }
    rc_batch_reset(&r->b);
    return DEDUP_OK;
}

/* Creates the filter: reserves its shards (a shard that exists is kept),
 * then offers the shape (HSETNX) and reads back the one that won into
 * 'text'. */
static dedup_status create_filter(dedup_redis *r, rd_mod_shape *want, const char *meta, size_t ml,
                                  char *text, size_t cap)
{
    uint64_t seed;
    if (seed_is_secret(r)) {
        if (rd_random_seed(r, &seed) != DEDUP_OK)
            return DEDUP_ERR_IO;
        want->seed = seed;
    }
    r->o.shards = want->shards;
    dedup_status st = reserve_shards(r);
    if (st != DEDUP_OK)
        return st;
    char offer[320];
    int tl = shape_format(offer, sizeof offer, want);
    rc_batch_reset(&r->b);
    const char *a1[4] = {"HSETNX", meta, "shape", offer};
    size_t l1[4] = {6, ml, 5, (size_t)tl};
    const char *a2[3] = {"HGET", meta, "shape"};
    size_t l2[3] = {4, ml, 5};
    if (!rc_batch_add(&r->b, 4, a1, l1, 1, 0) || !rc_batch_add(&r->b, 3, a2, l2, 1, 1))
        return DEDUP_ERR_NOMEM;
    return exec_meta(r, meta, text, cap);
}

/* Refuses a stored shape the client's options contradict (NULL: none). */
static const char *shape_differs(const dedup_redis *r, const rd_mod_shape *have,
                                 dedup_redis_filter hf)
{
    const dedup_redis_params *o = &r->o;
    bool offer = o->items > 0;
    if (!seed_is_secret(r) && have->seed != o->seed)
        return "seed";
    if (o->shards && have->shards != o->shards)
        return "--shards";
    if (o->filter != DEDUP_REDIS_FILTER_DEFAULT && hf != o->filter)
        return "filter";
    if ((offer || o->ttl_ms) && have->ttl_ms != o->ttl_ms)
        return "TTL";
    if (offer && (have->items != o->items || have->fpr != o->fpr))
        return "-n/-p";
    return NULL;
}

dedup_status rd_module_open(dedup_redis *r)
{
    const dedup_redis_params *o = &r->o;
    if (o->shards > RD_MAX_SHARDS) {
        rd_error(r, "shards must be in 1..%u (got %u)", RD_MAX_SHARDS, o->shards);
        return DEDUP_ERR_INVALID_ARG;
    }
    if (o->filter != DEDUP_REDIS_FILTER_DEFAULT && o->filter != DEDUP_REDIS_FILTER_BLOOM &&
        o->filter != DEDUP_REDIS_FILTER_CUCKOO) {
        rd_error(r, "unknown module filter %d (bloom or cuckoo)", (int)o->filter);
        return DEDUP_ERR_INVALID_ARG;
    }
    if (o->filter == DEDUP_REDIS_FILTER_CUCKOO && o->ttl_ms) {
        rd_error(r, "a cuckoo filter has no expiry: with a TTL the module scheme uses the "
                    "expiring DEDUP.* filters (bloom)");
        return DEDUP_ERR_INVALID_ARG;
    }
    bool offer = o->items > 0;
    rd_mod_shape want = {MODULE_FORMAT_VERSION, "", 0, o->items, o->seed, o->ttl_ms, o->fpr};
    snprintf(want.filter, sizeof want.filter, "%s", filter_name(o->filter));
    if (offer)
        want.shards = o->shards ? o->shards
                                : dedup_redis_module_shards(o->filter, o->items, o->fpr,
                                                            r->url.cluster ? rc_masters(r->c) : 0);
    char meta[RD_MAX_NAME + 8], text[320];
    size_t ml = (size_t)sprintf(meta, "%s:meta", r->name);
    rc_batch_reset(&r->b);
    const char *a2[3] = {"HGET", meta, "shape"};
    size_t l2[3] = {4, ml, 5};
    if (!rc_batch_add(&r->b, 3, a2, l2, 1, 1))
        return DEDUP_ERR_NOMEM;
    dedup_status st = exec_meta(r, meta, text, sizeof text);
    if (st == DEDUP_OK && !text[0] && offer)
        st = create_filter(r, &want, meta, ml, text, sizeof text);
    if (st != DEDUP_OK)
        return st;
    if (!text[0]) {
        rd_error(r, "no module filter named '%s' in Redis (%s is absent): give its size "
                    "(items, -n) to create it", r->name, meta);
        return DEDUP_ERR_NOT_FOUND;
    }
    rd_mod_shape have;
    st = rd_module_shape_parse(text, &have);
    if (st == DEDUP_ERR_WRONG_TYPE) {
        rd_error(r, "'%s' in Redis is not a module filter (%s holds '%s', another scheme's "
                    "shape): use its scheme, or another name", r->name, meta, text);
        return st;
    }
    if (st == DEDUP_ERR_VERSION) {
        rd_error(r, "%s holds a shape this version cannot use: '%s' (format version 1 or %u "
                    "expected)", meta, text, MODULE_FORMAT_VERSION);
        return st;
    }
    if (st != DEDUP_OK) {
        rd_error(r, "%s in Redis is damaged (%s: '%s'): refusing to use the module filter '%s'; "
                    "restore it, or delete %s and the filter's shards to start over", meta,
                 st == DEDUP_ERR_CHECKSUM ? "its checksum does not match" : "a field out of range",
                 text, r->name, meta);
        return st;
    }
    dedup_redis_filter hf = strcmp(have.filter, "cuckoo") == 0 ? DEDUP_REDIS_FILTER_CUCKOO
                                                               : DEDUP_REDIS_FILTER_BLOOM;
    const char *diff = shape_differs(r, &have, hf);
    if (diff) {
        char mine[320];
        if (!offer) { /* name what this client did state */
            want.shards = o->shards;
            want.items = 0;
        }
        want.version = 1; /* the fields alone, no sum */
        shape_format(mine, sizeof mine, &want);
        rd_error(r, "the module filter '%s' in Redis has %s; this run asks %s (the %s "
                    "differs: the same -n, -p, seed, --shards, filter and TTL are needed, or "
                    "another name)", r->name, text, mine, diff);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    r->o.shards = have.shards;
    r->o.items = have.items;
    r->o.fpr = have.fpr;
    r->o.ttl_ms = have.ttl_ms;
    r->o.filter = hf;
    st = check_shards(r, meta);
    if (st != DEDUP_OK)
        return st;
    r->shape.shards = have.shards;
    r->shape.items = have.items;
    r->shape.fpr = have.fpr;
    r->shape.filter = hf;
    r->shape.seed = have.seed;
    return DEDUP_OK;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Chains the keys of b by shard (r->seg_of, seg_next, first[]) and writes
 * each digest's 16 bytes into r->argbuf. */
static dedup_status route(dedup_redis *r, const dedup_batch *b, uint32_t *count, uint32_t *first,
                          uint32_t *last)
{
    dedup_status st = rd_scratch(r, b->n, b->n + 5, b->n * 16);
    if (st != DEDUP_OK)
        return st;
    uint32_t S = r->o.shards;
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
    return DEDUP_OK;
}

/* One command per key: DEDUP.EXISTS (the expiring filter has no
 * multi-key query) or CF.DEL; the integer replies into ints[i]. */
static dedup_status per_key(dedup_redis *r, const dedup_batch *b, const char *cmd, bool write,
                            long long *ints, bool *lost)
{
    char kb[2 * RD_MAX_NAME + 32];
    rc_batch_reset(&r->b);
    for (size_t i = 0; i < b->n; i++) {
        size_t kl = rd_shard_key(r, r->seg_of[i], kb);
        const char *argv[3] = {cmd, kb, r->argbuf + 16 * i};
        size_t lens[3] = {strlen(cmd), kl, 16};
        if (!rc_batch_add(&r->b, 3, argv, lens, 1, (uint32_t)i))
            return DEDUP_ERR_NOMEM;
    }
    r->b.wait_replicas = write ? r->o.wait_replicas : 0;
    dedup_status st = rd_exec(r);
    if (st != DEDUP_OK)
        return st;
    for (size_t j = 0; j < r->b.n; j++) {
        redisReply *e = r->b.cmds[j].reply;
        if (e->type != REDIS_REPLY_INTEGER)
            return rd_reply_error(r, e, cmd);
        ints[r->b.cmds[j].tag] = e->integer;
        if (lost)
            lost[r->b.cmds[j].tag] = r->b.cmds[j].lost;
    }
    return DEDUP_OK;
}

/* An error reply to shard s's command: a message naming the shard (a lost
 * shard, one of another type), else the reply's. */
static dedup_status shard_reply_error(dedup_redis *r, uint32_t s, const redisReply *rep,
                                      const char *cmd)
{
    char kb[2 * RD_MAX_NAME + 32];
    rd_shard_key(r, s, kb);
    if (rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "not found")) {
        rd_error(r, "Redis %s: shard %s of the module filter '%s' is missing (deleted, evicted or "
                    "lost in a failover during the run): its keys are forgotten; restore it, or "
                    "delete %s:meta and the filter's shards to start over", cmd, kb, r->name,
                 r->name);
        return DEDUP_ERR_NOT_FOUND;
    }
    if (rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "WRONGTYPE")) {
        rd_error(r, "Redis %s: %s holds a key of another type, not shard %u of the module filter "
                    "'%s'", cmd, kb, s, r->name);
        return DEDUP_ERR_WRONG_TYPE;
    }
    return rd_reply_error(r, rep, cmd);
}

/* A key's element that is not a verdict: missing (the array was cut by an
 * error), an error, or -1 (a full cuckoo shard). */
static dedup_status key_reply_error(dedup_redis *r, uint32_t s, const redisReply *e,
                                    const char *cmd)
{
    if (e && e->type == REDIS_REPLY_INTEGER) {
        rd_error(r, "Redis %s: shard %u of the cuckoo filter '%s' is full (no room after its "
                    "expansions): create the filter with a larger -n", cmd, s, r->name);
        return DEDUP_ERR_FULL;
    }
    if (e && e->type == REDIS_REPLY_ERROR)
        return shard_reply_error(r, s, e, cmd);
    rd_error(r, "Redis %s: short reply from shard %u of the module filter '%s'", cmd, s, r->name);
    return DEDUP_ERR_IO;
}

dedup_status rd_module_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, rd_op op)
{
    bool record = op != RD_QUERY, always = op == RD_ADD;
    uint32_t S = r->o.shards;
    uint32_t *count = calloc(S, sizeof *count), *first = malloc(S * sizeof *first),
             *last = malloc(S * sizeof *last);
    redisReply **by_shard = calloc(S, sizeof *by_shard);
    bool *lost = calloc(S, sizeof *lost);
    long long *ints = NULL;
    dedup_status st = DEDUP_OK;
    bool ttl = r->o.ttl_ms != 0, cuckoo = r->o.filter == DEDUP_REDIS_FILTER_CUCKOO;
    const char *cmd = ttl ? (record ? "DEDUP.MADD" : "DEDUP.EXISTS")
                      : cuckoo ? (always ? "CF.INSERT" : record ? "CF.INSERTNX" : "CF.MEXISTS")
                               : (record ? "BF.INSERT" : "BF.MEXISTS");
    if (!count || !first || !last || !by_shard || !lost) {
        st = DEDUP_ERR_NOMEM;
        goto out;
    }
    st = route(r, b, count, first, last);
    if (st != DEDUP_OK)
        goto out;
    if (ttl && !record) {
        ints = malloc(b->n * sizeof *ints);
        st = ints ? per_key(r, b, cmd, false, ints, NULL) : DEDUP_ERR_NOMEM;
        for (size_t i = 0; i < b->n && st == DEDUP_OK; i++)
            out[i] = ints[i] ? DEDUP_MAYBE_DUPLICATE : DEDUP_NEW;
        goto out;
    }
    rc_batch_reset(&r->b);
    char kb[2 * RD_MAX_NAME + 32];
    for (uint32_t s = 0; s < S && st == DEDUP_OK; s++) {
        if (!count[s])
            continue;
        size_t a = 0;
        r->argv[a] = cmd;
        r->lens[a++] = strlen(cmd);
        r->argv[a] = kb;
        r->lens[a++] = rd_shard_key(r, s, kb);
        if (record && !ttl) { /* never recreate a lost shard */
            r->argv[a] = "NOCREATE";
            r->lens[a++] = 8;
            r->argv[a] = "ITEMS";
            r->lens[a++] = 5;
        }
        size_t first_item = a;
        for (uint32_t i = first[s]; i != UINT32_MAX; i = r->seg_next[i]) {
            r->pos_in[i] = (uint32_t)(a - first_item);
            r->argv[a] = r->argbuf + 16 * (size_t)i;
            r->lens[a++] = 16;
        }
        if (!rc_batch_add(&r->b, (int)a, r->argv, r->lens, 1, s))
            st = DEDUP_ERR_NOMEM;
    }
    if (st != DEDUP_OK)
        goto out;
    r->b.wait_replicas = record ? r->o.wait_replicas : 0;
    dedup_status failed = rd_exec(r);
    /* A decide answers for every key even when it failed (see the top of
     * the file); a query or an add fails whole. */
    if (failed != DEDUP_OK && op != RD_DECIDE) {
        st = failed;
        goto out;
    }
    bool promised = failed == DEDUP_OK || !r->b.wait_replicas;
    dedup_status bad = failed; /* the first failure; its message is kept */
    for (size_t j = 0; j < r->b.n; j++) {
        rc_cmd *cm = &r->b.cmds[j];
        if (!cm->done)
            continue;
        if (cm->reply->type == REDIS_REPLY_ARRAY) {
            by_shard[cm->tag] = cm->reply;
            lost[cm->tag] = cm->lost;
        } else if (bad == DEDUP_OK) {
            bad = shard_reply_error(r, cm->tag, cm->reply, cmd);
        }
    }
    if (bad != DEDUP_OK && op != RD_DECIDE) {
        st = bad;
        goto out;
    }
    bool any_uncertain = false;
    for (size_t i = 0; i < b->n; i++) {
        uint32_t s = r->seg_of[i];
        redisReply *rep = by_shard[s];
        redisReply *e = rep && r->pos_in[i] < rep->elements ? rep->element[r->pos_in[i]] : NULL;
        bool full = e && e->type == REDIS_REPLY_INTEGER && cuckoo && record && e->integer < 0;
        if (!e || e->type != REDIS_REPLY_INTEGER || full) {
            if (bad == DEDUP_OK)
                bad = key_reply_error(r, s, e, cmd);
            if (op != RD_DECIDE) {
                st = bad;
                goto out;
            }
            out[i] = DEDUP_UNCERTAIN; /* its command may have been carried out */
            any_uncertain = true;
            continue;
        }
        bool present = always ? false : record ? e->integer == 0 : e->integer != 0;
        dedup_verdict v = !present ? DEDUP_NEW : lost[s] && record ? DEDUP_UNCERTAIN
                                                                   : DEDUP_MAYBE_DUPLICATE;
        if (v == DEDUP_NEW && record && !promised)
            v = DEDUP_UNCERTAIN; /* WAIT failed: the key may not survive a failover */
        any_uncertain |= v == DEDUP_UNCERTAIN;
        out[i] = v;
    }
    st = rd_finish(r, b, out, b->n, any_uncertain, DEDUP_MAYBE_DUPLICATE, bad);
out:
    free(count);
    free(first);
    free(last);
    free(by_shard);
    free(lost);
    free(ints);
    return st;
}

dedup_status rd_module_delete(dedup_redis *r, const dedup_batch *b, bool *removed)
{
    if (r->o.filter != DEDUP_REDIS_FILTER_CUCKOO) {
        rd_error(r, "the module filter '%s' is a Bloom filter, which cannot delete keys: "
                    "create one with the cuckoo filter (--redis-filter cuckoo, -t cuckoo)",
                 r->name);
        return DEDUP_ERR_UNSUPPORTED;
    }
    uint32_t S = r->o.shards;
    uint32_t *count = calloc(S, sizeof *count), *first = malloc(S * sizeof *first),
             *last = malloc(S * sizeof *last);
    long long *ints = malloc((b->n ? b->n : 1) * sizeof *ints);
    bool *lost = malloc((b->n ? b->n : 1) * sizeof *lost);
    dedup_status st = count && first && last && ints && lost ? route(r, b, count, first, last)
                                                             : DEDUP_ERR_NOMEM;
    if (st == DEDUP_OK)
        st = per_key(r, b, "CF.DEL", true, ints, lost);
    /* After a lost reply nothing is certainly absent: a resent delete that
     * finds nothing was most likely done by its first attempt, and one that
     * finds something may have taken the copy of another key of the batch
     * sharing its fingerprint, whose own delete then finds nothing. */
    bool any_lost = false;
    for (size_t i = 0; i < b->n && st == DEDUP_OK; i++)
        any_lost |= lost[i];
    for (size_t i = 0; i < b->n && st == DEDUP_OK; i++)
        removed[i] = ints[i] == 1 || any_lost;
    free(count);
    free(first);
    free(last);
    free(ints);
    free(lost);
    return st;
}
