/*
 * seen_wrap.c - the remote set as a dedup_seen (dedup/seen.h, kind
 * DEDUP_SEEN_REDIS).  Kept in its own object file so a program that uses
 * only dedup/redis.h does not need the seen-set's dispatch.
 */
#include "rd.h"

#include <stdlib.h>
#include <string.h>

static dedup_status w_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    return dedup_redis_decide(impl, b, out, done);
}

static dedup_status w_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    /* A query changes no remote state, but the connections and scratch
     * buffers are the object's: hence one object per thread. */
    return dedup_redis_query((dedup_redis *)impl, b, out);
}

static dedup_status w_remove(void *impl, const dedup_batch *b, bool *removed)
{
    return dedup_redis_delete(impl, b, removed);
}

static dedup_status w_commit(void *impl, const dedup_batch *b)
{
    return dedup_redis_commit(impl, b);
}

static void w_info(const void *impl, dedup_seen_info *out)
{
    const dedup_redis *r = impl;
    memset(out, 0, sizeof *out);
    out->kind = DEDUP_SEEN_REDIS;
    out->probabilistic = r->o.scheme != DEDUP_REDIS_KEYS;
    out->seed = r->shape.seed;
    out->capacity = r->shape.items;
    out->items = r->recorded;
    out->distinct = r->recorded; /* the keys this object recorded; others record too */
    out->distinct_exact = r->o.scheme == DEDUP_REDIS_KEYS;
    out->distinct_known = true;
    out->fpr_target = r->o.scheme == DEDUP_REDIS_KEYS ? 0 : r->shape.fpr;
    out->fpr_bound = out->fpr_target;
    out->memory = dedup_redis_memory_usage(r);
    out->bits = r->shape.bits;
    out->hashes = r->shape.k;
    out->can_delete = r->o.scheme == DEDUP_REDIS_MODULE && r->o.filter == DEDUP_REDIS_FILTER_CUCKOO;
}

/* A filter's add (dedup_redis_add): the verdicts are not the caller's. */
static dedup_status w_add(void *impl, const dedup_batch *b, size_t *done)
{
    dedup_verdict *v = malloc((b->n ? b->n : 1) * sizeof *v);
    if (!v)
        return DEDUP_ERR_NOMEM;
    dedup_status st = dedup_redis_add(impl, b, v);
    free(v);
    *done = st ? 0 : b->n;
    return st;
}

static const char *w_error(const void *impl) { return dedup_redis_last_error(impl); }

static void w_stats(const void *impl, dedup_seen_stats *out)
{
    dedup_redis_stats rs;
    dedup_redis_get_stats(impl, &rs);
    out->remote = true;
    out->uncertain = rs.uncertain;
}

static void w_free(void *impl) { dedup_redis_free(impl); }

static const dedup_seen_ops OPS = {
    .kind = DEDUP_SEEN_REDIS,
    .decide = w_decide,
    .query = w_query,
    .remove = w_remove,
    .commit = w_commit,
    .info = w_info,
    .free = w_free,
    .add = w_add,
    .error = w_error,
    .stats = w_stats,
};

dedup_status dedup_redis_as_seen(dedup_redis *r, const dedup_allocator *alloc, dedup_seen **out)
{
    return dedup_seen_wrap(&OPS, r, alloc, out);
}
