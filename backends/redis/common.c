/*
 * common.c - what every scheme of the remote seen-set shares (rd.h): error
 * text, running a pipeline, the sealed NAME:meta text, a random seed, the
 * scratch arrays, and the bookkeeping of a batch's repeats and of a batch
 * cut short.  It calls nothing of the schemes nor of redis.c.
 */
#define _DEFAULT_SOURCE
#include "rd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    if (dedup_secret_seed(out) != DEDUP_OK) {
        rd_error(r, "no random seed from the OS (getrandom: %s)", strerror(errno));
        return DEDUP_ERR_IO;
    }
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
size_t *rd_first_occurrences(const dedup_redis *r, const dedup_batch *b)
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
