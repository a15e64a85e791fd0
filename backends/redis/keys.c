/*
 * keys.c - the keys scheme of the remote seen-set (dedup/redis.h), exact:
 * a batch is n SET commands in one pipeline per node:
 *   SET <name>:<digest16> <value> NX GET [PX reserve_ms | ttl_ms]
 * nil = NEW (it was absent, now set), one of our values = DUPLICATE (or
 * UNCERTAIN if the command had been sent once and its reply lost: the
 * first attempt may be what set it); anything else, or WRONGTYPE, is a key
 * that is not ours under the name: an error naming it, never "seen".
 * "<name>:meta" (field "shape") holds "scheme=keys v=1 seed=S sum=H".
 */
#define _DEFAULT_SOURCE
#include "rd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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


/* Whether NEW keys are reserved (short expiry, a value of their own) until
 * dedup_redis_commit(). */
bool rd_keys_reserving(const dedup_redis *r) { return r->o.reserve || r->o.ttl_ms; }

/* A key name for a message: "<name>:" then the key's text (whole keys,
 * up to 64 bytes, others as \xHH) or its digest in hex. */
static void key_for_message(const dedup_redis *r, const dedup_batch *b, size_t i, char *buf,
                            size_t cap)
{
    int n = snprintf(buf, cap, "%s:", r->name);
    size_t at = n > 0 ? (size_t)n : 0;
    if (r->o.whole_keys) {
        for (size_t j = 0; j < b->lens[i] && j < 64 && at + 5 < cap; j++) {
            unsigned char c = ((const unsigned char *)b->keys[i])[j];
            at += (size_t)snprintf(buf + at, cap - at, c >= 32 && c < 127 ? "%c" : "\\x%02x", c);
        }
    } else {
        snprintf(buf + at, cap - at, "<16-byte digest %016llx%016llx>",
                 (unsigned long long)b->digests[i].hi, (unsigned long long)b->digests[i].lo);
    }
}

static bool our_value(const dedup_redis *r, const redisReply *rep)
{
    return (rep->len == 4 && (memcmp(rep->str, RD_KEY_RESERVED, 4) == 0 ||
                              memcmp(rep->str, RD_KEY_RECORDED, 4) == 0)) ||
           (r->legacy_values && rep->len == 1 && rep->str[0] == '1');
}

/* A reply that is neither an answer nor ours: the error it makes. */
static dedup_status keys_bad_reply(dedup_redis *r, const dedup_batch *b, size_t i,
                                   const redisReply *rep)
{
    char kn[300];
    key_for_message(r, b, i, kn, sizeof kn);
    bool wrong = rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "WRONGTYPE", 9) == 0;
    if (wrong || rep->type == REDIS_REPLY_STRING) {
        bool old = !wrong && rep->len == 1 && rep->str[0] == '1';
        rd_error(r, "%s in Redis is not a key of the keys scheme (%s): another program's key "
                    "under the name '%s'; it is not taken for \"seen\" (use another name%s)",
                 kn, wrong ? "another type" : "a value it never writes", r->name,
                 old ? "; a key recorded by an older version holds 1: a name made before "
                       "NAME:meta existed is used with --seed 0x9E3779B97F4A7C15" : "");
        return DEDUP_ERR_WRONG_TYPE;
    }
    rd_error(r, "Redis SET of %s: %s", kn,
             rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    return DEDUP_ERR_IO;
}

/* Commit without ttl_ms on one server: MSET of up to MSET_KEYS keys per
 * command (each value RD_KEY_RECORDED, its expiry removed), a fraction of
 * the work of one SET per key.  A cluster would answer CROSSSLOT. */
#define MSET_KEYS 1024
static dedup_status keys_commit_mset(dedup_redis *r, const dedup_batch *b)
{
    size_t kcap = max_key_name(r, b);
    size_t per = b->n < MSET_KEYS ? b->n : MSET_KEYS;
    if (rd_scratch(r, 0, 1 + 2 * per, per * kcap) != DEDUP_OK)
        return DEDUP_ERR_NOMEM;
    rc_batch_reset(&r->b);
    for (size_t from = 0; from < b->n; from += MSET_KEYS) {
        size_t to = from + MSET_KEYS < b->n ? from + MSET_KEYS : b->n, a = 0, used = 0;
        r->argv[a] = "MSET";
        r->lens[a++] = 4;
        for (size_t i = from; i < to; i++) {
            char *kb = r->argbuf + used;
            size_t kl = key_name(r, b, i, kb);
            used += kl;
            r->argv[a] = kb;
            r->lens[a++] = kl;
            r->argv[a] = RD_KEY_RECORDED;
            r->lens[a++] = 4;
        }
        /* rc_batch_add copies the arguments: the buffers are reused */
        if (!rc_batch_add(&r->b, (int)a, r->argv, r->lens, 1, (uint32_t)from))
            return DEDUP_ERR_NOMEM;
    }
    r->b.wait_replicas = r->o.wait_replicas;
    dedup_status st = rd_exec(r);
    for (size_t j = 0; j < r->b.n && st == DEDUP_OK; j++)
        if (r->b.cmds[j].reply->type != REDIS_REPLY_STATUS) {
            st = rd_reply_error(r, r->b.cmds[j].reply, "MSET (commit)");
            rd_error_on(r, &r->b.cmds[j]);
        }
    return st;
}

static dedup_status keys_exec(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, keys_op op,
                              const size_t *first)
{
    if (op == KEYS_COMMIT && !r->o.ttl_ms && !r->url.cluster)
        return keys_commit_mset(r, b);
    size_t cap = max_key_name(r, b);
    char *kb = malloc(cap);
    if (!kb)
        return DEDUP_ERR_NOMEM;
    rc_batch_reset(&r->b);
    char px[24];
    size_t pxlen = 0;
    bool res = rd_keys_reserving(r);
    if (op == KEYS_DECIDE && res) {
        uint64_t ms = r->o.ttl_ms && (!r->o.reserve_ms || r->o.reserve_ms > r->o.ttl_ms)
                          ? r->o.ttl_ms : r->o.reserve_ms ? r->o.reserve_ms : 60000;
        pxlen = put_u64(px, ms);
    } else if ((op == KEYS_DECIDE || op == KEYS_COMMIT) && r->o.ttl_ms) {
        pxlen = put_u64(px, r->o.ttl_ms);
    }
    const char *val = op == KEYS_DECIDE && res ? RD_KEY_RESERVED : RD_KEY_RECORDED;
    dedup_status st = DEDUP_OK;
    for (size_t i = 0; i < b->n && st == DEDUP_OK; i++) {
        if (first && first[i] != i)
            continue;
        size_t kl = key_name(r, b, i, kb);
        const char *argv[7];
        size_t lens[7];
        int argc;
        if (op == KEYS_QUERY) {
            argv[0] = "GET"; lens[0] = 3;
            argv[1] = kb; lens[1] = kl;
            argc = 2;
        } else {
            argv[0] = "SET"; lens[0] = 3;
            argv[1] = kb; lens[1] = kl;
            argv[2] = val; lens[2] = 4;
            argc = 3;
            if (op == KEYS_DECIDE) {
                argv[argc] = "NX"; lens[argc++] = 2;
                argv[argc] = "GET"; lens[argc++] = 3;
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
    st = rd_exec(r);
    /* A decide that failed part way: the keys before the first command
     * left unanswered keep their verdicts (the caller writes them out). */
    size_t upto = st == DEDUP_OK ? b->n : op == KEYS_DECIDE ? rd_decided_prefix(r, NULL, b->n) : 0;
    if (upto == 0 && st != DEDUP_OK)
        return st;
    /* An error reply (OOM under maxmemory, a foreign key) ends the decided
     * part at its key: the keys before it keep their verdicts, as above. */
    size_t bad = SIZE_MAX;
    const redisReply *bad_rep = NULL;
    for (size_t j = 0; j < r->b.n; j++) {
        const rc_cmd *cm = &r->b.cmds[j];
        const redisReply *rep = cm->reply;
        if (cm->tag >= upto || !rep || cm->tag >= bad)
            continue;
        bool ok = op == KEYS_COMMIT ? rep->type == REDIS_REPLY_STATUS
                                    : rep->type == REDIS_REPLY_NIL ||
                                          (rep->type == REDIS_REPLY_STRING && our_value(r, rep));
        if (!ok) {
            bad = cm->tag;
            bad_rep = rep;
        }
    }
    if (bad_rep) {
        dedup_status e = keys_bad_reply(r, b, bad, bad_rep);
        for (size_t j = 0; j < r->b.n; j++)
            if (r->b.cmds[j].reply == bad_rep)
                rd_error_on(r, &r->b.cmds[j]);
        if (op != KEYS_DECIDE)
            return e;
        upto = bad;
        st = e;
        if (upto == 0)
            return st;
    }
    if (op == KEYS_COMMIT)
        return st;
    bool lost = false;
    for (size_t j = 0; j < r->b.n; j++) {
        rc_cmd *cm = &r->b.cmds[j];
        redisReply *rep = cm->reply;
        if (cm->tag >= upto)
            continue;
        dedup_verdict v;
        if (rep->type == REDIS_REPLY_NIL)
            v = DEDUP_NEW;
        else
            v = op == KEYS_DECIDE && cm->lost ? DEDUP_UNCERTAIN : DEDUP_DUPLICATE;
        out[cm->tag] = v;
        lost |= v == DEDUP_UNCERTAIN;
    }
    for (size_t i = 0; first && i < upto; i++)
        if (first[i] != i)
            out[i] = out[first[i]] == DEDUP_UNCERTAIN ? DEDUP_UNCERTAIN : DEDUP_DUPLICATE;
    return rd_finish(r, b, out, upto, lost, DEDUP_DUPLICATE, st);
}

dedup_status rd_keys_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, keys_op op)
{
    /* A key repeated within the batch is decided here from its first
     * occurrence, not asked again: a reservation that ran out between the
     * two commands would answer NEW twice and write the record twice. */
    size_t *first = NULL;
    if (op == KEYS_DECIDE && b->n > 1 && b->digests && !(first = rd_first_occurrences(r, b)))
        return DEDUP_ERR_NOMEM;
    dedup_status st = keys_exec(r, b, out, op, first);
    free(first);
    return st;
}

/* Reads "<name>:meta", creating it first (HSETNX: the first client's seed
 * wins, every later one reads it). */
dedup_status rd_keys_open(dedup_redis *r)
{
    char meta[RD_MAX_NAME + 8], body[96], text[128];
    size_t ml = (size_t)snprintf(meta, sizeof meta, "%s:meta", r->name);
    uint64_t seed = r->o.seed;
    if (r->o.secret_seed && rd_random_seed(r, &seed) != DEDUP_OK)
        return DEDUP_ERR_IO;
    snprintf(body, sizeof body, "scheme=keys v=1 seed=%llu", (unsigned long long)seed);
    int tl = rd_meta_seal(text, sizeof text, body);
    rc_batch_reset(&r->b);
    const char *a1[4] = {"HSETNX", meta, "shape", text};
    size_t l1[4] = {6, ml, 5, (size_t)tl};
    const char *a2[3] = {"HGET", meta, "shape"};
    size_t l2[3] = {4, ml, 5};
    if (!rc_batch_add(&r->b, 4, a1, l1, 1, 0) || !rc_batch_add(&r->b, 3, a2, l2, 1, 1))
        return DEDUP_ERR_NOMEM;
    dedup_status st = rd_exec(r);
    if (st != DEDUP_OK)
        return st;
    for (size_t j = 0; j < r->b.n; j++)
        if (r->b.cmds[j].reply->type == REDIS_REPLY_ERROR)
            return rd_reply_error(r, r->b.cmds[j].reply, "metadata key");
    const redisReply *got = r->b.cmds[1].reply;
    if (got->type != REDIS_REPLY_STRING) {
        rd_error(r, "%s vanished while it was being created", meta);
        return DEDUP_ERR_IO;
    }
    if (strncmp(got->str, "scheme=keys ", 12) != 0) {
        bool other = strncmp(got->str, "v=", 2) == 0 || strncmp(got->str, "scheme=", 7) == 0;
        rd_error(r, other ? "'%s' in Redis is not a keys-scheme name (%s holds another scheme's "
                            "shape '%s'): use its scheme, or another name"
                          : "'%s' in Redis: %s holds '%s', not a shape of this program",
                 r->name, meta, got->str);
        return other ? DEDUP_ERR_WRONG_TYPE : DEDUP_ERR_CORRUPT;
    }
    size_t bl;
    st = rd_meta_open_seal(r, meta, got->str, &bl);
    if (st != DEDUP_OK)
        return st;
    unsigned v;
    unsigned long long have;
    int used = -1;
    if (sscanf(got->str, "scheme=keys v=%u seed=%llu%n", &v, &have, &used) != 2 || used != (int)bl ||
        v != 1) {
        rd_error(r, "%s holds a shape this version cannot use: '%s' (keys format 1 expected)",
                 meta, got->str);
        return v != 1 ? DEDUP_ERR_VERSION : DEDUP_ERR_CORRUPT;
    }
    if (!r->o.secret_seed && have != r->o.seed) {
        rd_error(r, "the keys-scheme name '%s' in Redis has seed=%llu; this run asks seed=%llu",
                 r->name, have, (unsigned long long)r->o.seed);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    rc_batch_reset(&r->b);
    r->shape.seed = have;
    r->legacy_values = have == DEDUP_DEFAULT_SEED;
    return DEDUP_OK;
}

