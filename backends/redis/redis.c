/*
 * redis.c - the remote seen-set: open, the keys and module schemes, stats
 * (dedup/redis.h).  The bitmap scheme is in bitmap.c, the transport in
 * client.c.
 *
 * Keys scheme: a batch is n SET commands in one pipeline per node:
 *   SET <name>:<digest16> <value> NX GET [PX reserve_ms | ttl_ms]
 * nil = NEW (it was absent, now set), one of our values = DUPLICATE (or
 * UNCERTAIN if the command had been sent once and its reply lost: the
 * first attempt may be what set it); anything else, or WRONGTYPE, is a key
 * that is not ours under the name: an error naming it, never "seen".
 * "<name>:meta" (field "shape") holds "scheme=keys v=1 seed=S sum=H".
 * The module scheme is in module.c.
 */
#define _DEFAULT_SOURCE
#include "rd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

void rd_error(dedup_redis *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
}

dedup_status rd_exec(dedup_redis *r)
{
    dedup_status st = rc_exec(r->c, &r->b);
    if (st != DEDUP_OK)
        rd_error(r, "%s", rc_error(r->c));
    return st;
}

dedup_status rd_reply_error(dedup_redis *r, const redisReply *rep, const char *what)
{
    bool wrong = rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "WRONGTYPE", 9) == 0;
    rd_error(r, "Redis %s: %s", what,
             rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    return wrong ? DEDUP_ERR_WRONG_TYPE : DEDUP_ERR_IO;
}

void rd_error_on(dedup_redis *r, const rc_cmd *cm)
{
    char where[DEDUP_REDIS_MAX_HOST + 16];
    rc_node_name(r->c, cm->node, where, sizeof where);
    size_t n = strlen(r->err);
    snprintf(r->err + n, sizeof r->err - n, " (on %s)", where);
}

dedup_status rd_random_seed(dedup_redis *r, uint64_t *out)
{
    unsigned char b[8];
    ssize_t got;
    do
        got = getrandom(b, sizeof b, 0);
    while (got < 0 && errno == EINTR);
    if (got != (ssize_t)sizeof b) {
        rd_error(r, "no random seed from the OS (getrandom: %s)", strerror(errno));
        return DEDUP_ERR_IO;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    *out = v;
    return DEDUP_OK;
}

static unsigned long long meta_sum(const char *body, size_t len)
{
    return (unsigned long long)dedup_hash(body, len, 0).lo;
}

int rd_meta_seal(char *out, size_t cap, const char *body)
{
    return snprintf(out, cap, "%s sum=%016llx", body, meta_sum(body, strlen(body)));
}

dedup_status rd_meta_open_seal(dedup_redis *r, const char *meta, const char *text,
                               size_t *body_len)
{
    size_t n = strlen(text);
    char want[17];
    if (n >= 21 && strncmp(text + n - 21, " sum=", 5) == 0) {
        snprintf(want, sizeof want, "%016llx", meta_sum(text, n - 21));
        if (memcmp(want, text + n - 16, 16) == 0) {
            *body_len = n - 21;
            return DEDUP_OK;
        }
    }
    rd_error(r, "%s in Redis is damaged (its checksum does not match '%s'): refusing to use "
                "the name '%s'; restore it, or delete the name's keys to start over",
             meta, text, r->name);
    return DEDUP_ERR_CHECKSUM;
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
    o->failover_wait_ms = 60000;
    o->backoff_ms = 50;
    o->pipeline = 1024;
    o->seed = DEDUP_DEFAULT_SEED;
    o->fpr = 0.01;
    o->generations = 4;
    o->shards = 0;
    o->filter = DEDUP_REDIS_FILTER_DEFAULT;
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

typedef struct occ {
    uint64_t lo, hi;
    size_t i;
} occ;

static int occ_cmp(const void *a, const void *b)
{
    const occ *x = a, *y = b;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* A later occurrence answered UNCERTAIN was found present because of the
 * earlier occurrence (sent in the same pipeline, or again after the
 * reconnection). */
static dedup_status repeats_not_uncertain(const dedup_batch *b, dedup_verdict *out,
                                          dedup_verdict present)
{
    occ *o = malloc(b->n * sizeof *o);
    if (!o)
        return DEDUP_ERR_NOMEM;
    for (size_t i = 0; i < b->n; i++)
        o[i] = (occ){b->digests[i].lo, b->digests[i].hi, i};
    qsort(o, b->n, sizeof *o, occ_cmp);
    for (size_t j = 1; j < b->n; j++)
        if (o[j].lo == o[j - 1].lo && o[j].hi == o[j - 1].hi && out[o[j].i] == DEDUP_UNCERTAIN)
            out[o[j].i] = present;
    free(o);
    return DEDUP_OK;
}

/* first[i] = the index of key i's first occurrence in the batch (i itself
 * for a first one): equal digests, and equal bytes for whole keys. */
static size_t *first_occurrences(const dedup_redis *r, const dedup_batch *b)
{
    size_t *first = malloc((b->n ? b->n : 1) * sizeof *first);
    occ *o = malloc((b->n ? b->n : 1) * sizeof *o);
    if (!first || !o) {
        free(first);
        free(o);
        return NULL;
    }
    for (size_t i = 0; i < b->n; i++) {
        o[i] = (occ){b->digests[i].lo, b->digests[i].hi, i};
        first[i] = i;
    }
    qsort(o, b->n, sizeof *o, occ_cmp);
    /* each run of one digest, in input order: a member is a repeat of the
     * run's earliest member with the same bytes (whole keys: distinct bytes
     * under one digest stay apart; there is almost never more than one) */
    for (size_t s = 0, e; s < b->n; s = e) {
        for (e = s + 1; e < b->n && o[e].lo == o[s].lo && o[e].hi == o[s].hi; e++)
            ;
        for (size_t j = s + 1; j < e; j++) {
            size_t c = o[j].i;
            for (size_t k = s; k < j; k++) {
                size_t a = o[k].i;
                if (first[a] != a)
                    continue;
                if (!r->o.whole_keys || (b->lens[a] == b->lens[c] &&
                                         memcmp(b->keys[a], b->keys[c], b->lens[a]) == 0)) {
                    first[c] = a;
                    break;
                }
            }
        }
    }
    free(o);
    return first;
}

dedup_status rd_finish(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, size_t upto,
                       bool lost, dedup_verdict present, dedup_status failed)
{
    dedup_batch head = *b;
    head.n = upto;
    dedup_status st = lost ? repeats_not_uncertain(&head, out, present) : DEDUP_OK;
    if (st != DEDUP_OK)
        return st;
    if (failed != DEDUP_OK)
        r->decided = upto;
    return failed;
}

size_t rd_decided_prefix(const dedup_redis *r, const uint32_t *first, size_t n)
{
    if (r->b.wait_replicas)
        return 0;
    size_t p = n;
    for (size_t j = 0; j < r->b.n; j++) {
        const rc_cmd *cm = &r->b.cmds[j];
        size_t i = first ? first[cm->tag] : cm->tag;
        if (!cm->done && i < p)
            p = i;
    }
    return p;
}

typedef enum { KEYS_DECIDE, KEYS_QUERY, KEYS_COMMIT } keys_op;

/* Whether NEW keys are reserved (short expiry, a value of their own) until
 * dedup_redis_commit(). */
static bool reserving(const dedup_redis *r) { return r->o.reserve || r->o.ttl_ms; }

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
    bool res = reserving(r);
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

static dedup_status keys_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, keys_op op)
{
    /* A key repeated within the batch is decided here from its first
     * occurrence, not asked again: a reservation that ran out between the
     * two commands would answer NEW twice and write the record twice. */
    size_t *first = NULL;
    if (op == KEYS_DECIDE && b->n > 1 && b->digests && !(first = first_occurrences(r, b)))
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
        if (o->scheme == DEDUP_REDIS_KEYS)
            st = rd_keys_open(r);
        else if (o->scheme == DEDUP_REDIS_BITMAP)
            st = rd_bitmap_open(r);
        else if (o->scheme == DEDUP_REDIS_MODULE)
            st = rd_module_open(r);
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
    r->decided = 0;
    switch (r->o.scheme) {
    case DEDUP_REDIS_KEYS: st = keys_run(r, b, out, record ? KEYS_DECIDE : KEYS_QUERY); break;
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
    if (r->o.scheme != DEDUP_REDIS_KEYS || !reserving(r) || !b || b->n == 0)
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
