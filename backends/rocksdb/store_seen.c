/*
 * store_seen.c - the RocksDB store behind the seen-set interface
 * (dedup/seen.h, kind DEDUP_SEEN_STORE).
 */
#include "dedup/store.h"

#include <string.h>

static dedup_status st_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    return dedup_store_decide(impl, b, out, done);
}

static dedup_status st_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    return dedup_store_query(impl, b, out);
}

/* The batch is not needed: everything decided since the last commit is
 * committed (the CLI commits once a batch's records are written out). */
static dedup_status st_commit(void *impl, const dedup_batch *b)
{
    (void)b;
    return dedup_store_commit(impl);
}

static void st_info(const void *impl, dedup_seen_info *out)
{
    dedup_store_info si;
    memset(out, 0, sizeof *out);
    (void)dedup_store_get_info(impl, &si);
    out->kind = DEDUP_SEEN_STORE;
    out->seed = si.seed;
    out->items = si.keys;
    out->distinct = si.keys;
    out->distinct_exact = si.expire == 0;
    out->distinct_known = true;
    out->memory = si.memory;
}

static dedup_status st_add(void *impl, const dedup_batch *b, size_t *done)
{
    dedup_status st = dedup_store_record(impl, b);
    *done = st ? 0 : b->n;
    return st;
}

static dedup_status st_flush(void *impl) { return dedup_store_flush(impl); }

static const char *st_error(const void *impl) { return dedup_store_last_error(impl); }

static void st_stats(const void *impl, dedup_seen_stats *out)
{
    dedup_store_info si;
    out->persistent = true;
    if (dedup_store_get_info(impl, &si) == DEDUP_OK) {
        out->stored_keys = si.keys;
        out->bytes_on_disk = si.bytes_on_disk;
    }
}

static dedup_status st_fill(const void *impl, dedup_seen *dst, uint64_t *count)
{
    return dedup_store_fill(impl, dst, count);
}

static void st_free(void *impl)
{
    dedup_store_free(impl);
}

static const dedup_seen_ops store_ops = {
    .kind = DEDUP_SEEN_STORE,
    .decide = st_decide,
    .query = st_query,
    .commit = st_commit,
    .info = st_info,
    .free = st_free,
    .add = st_add,
    .flush = st_flush,
    .error = st_error,
    .stats = st_stats,
    .fill = st_fill,
};

dedup_status dedup_store_as_seen(dedup_store *s, const dedup_allocator *alloc, dedup_seen **out)
{
    return dedup_seen_wrap(&store_ops, s, alloc, out);
}
