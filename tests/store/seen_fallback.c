/*
 * seen_fallback.c - the dispatch of dedup_seen_wrap()'d seen-sets, for
 * building the store and tier tests while libdedup does not yet carry the
 * seen-set implementation (src/seen/).  Linked only when src/seen/seen.c is
 * absent (see tests/store/CMakeLists.txt); weak, so the library's own
 * definitions always win.  Wrapped kinds only: dedup_seen_create() of a
 * local kind answers DEDUP_ERR_UNSUPPORTED here.
 */
#include <stdlib.h>
#include <string.h>

#include "dedup/seen.h"

#define WEAK __attribute__((weak))

struct dedup_seen {
    const dedup_seen_ops *ops;
    void *impl;
};

WEAK dedup_status dedup_seen_wrap(const dedup_seen_ops *ops, void *impl,
                                  const dedup_allocator *alloc, dedup_seen **out)
{
    (void)alloc;
    dedup_seen *s = malloc(sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->ops = ops;
    s->impl = impl;
    *out = s;
    return DEDUP_OK;
}

WEAK void dedup_seen_free(dedup_seen *s)
{
    if (!s)
        return;
    if (s->ops->free)
        s->ops->free(s->impl);
    free(s);
}

WEAK dedup_status dedup_seen_decide(dedup_seen *s, const dedup_batch *b, dedup_verdict *out,
                                    size_t *done)
{
    return s->ops->decide ? s->ops->decide(s->impl, b, out, done) : DEDUP_ERR_UNSUPPORTED;
}

WEAK dedup_status dedup_seen_query(const dedup_seen *s, const dedup_batch *b, dedup_verdict *out)
{
    return s->ops->query ? s->ops->query(s->impl, b, out) : DEDUP_ERR_UNSUPPORTED;
}

WEAK dedup_status dedup_seen_delete(dedup_seen *s, const dedup_batch *b, bool *removed)
{
    return s->ops->remove ? s->ops->remove(s->impl, b, removed) : DEDUP_ERR_UNSUPPORTED;
}

WEAK dedup_status dedup_seen_commit(dedup_seen *s, const dedup_batch *b)
{
    return s->ops->commit ? s->ops->commit(s->impl, b) : DEDUP_OK;
}

WEAK void dedup_seen_get_info(const dedup_seen *s, dedup_seen_info *out)
{
    memset(out, 0, sizeof *out);
    out->kind = s->ops->kind;
    if (s->ops->info)
        s->ops->info(s->impl, out);
}

WEAK dedup_seen_kind dedup_seen_kind_of(const dedup_seen *s)
{
    return s->ops->kind;
}

WEAK uint64_t dedup_seen_seed(const dedup_seen *s)
{
    dedup_seen_info i;
    dedup_seen_get_info(s, &i);
    return i.seed;
}

WEAK size_t dedup_seen_memory_usage(const dedup_seen *s)
{
    dedup_seen_info i;
    dedup_seen_get_info(s, &i);
    return i.memory;
}

WEAK double dedup_seen_fpr_bound(const dedup_seen *s)
{
    dedup_seen_info i;
    dedup_seen_get_info(s, &i);
    return i.fpr_bound;
}

WEAK dedup_status dedup_seen_save(const dedup_seen *s, dedup_sink *sink)
{
    return s->ops->save ? s->ops->save(s->impl, sink) : DEDUP_ERR_UNSUPPORTED;
}

WEAK dedup_status dedup_seen_finish(dedup_seen *s, dedup_seen_emit_fn emit, void *ctx)
{
    return s->ops->finish ? s->ops->finish(s->impl, emit, ctx) : DEDUP_OK;
}

WEAK const char *dedup_seen_kind_name(dedup_seen_kind kind)
{
    static const char *const names[] = {"unknown", "exact", "fingerprint", "u64", "bloom",
                                        "blocked", "counting", "cuckoo", "scalable", "window",
                                        "exact-spill", "bitmap", "roaring", "redis", "store",
                                        "tiers", "other"};
    return (unsigned)kind <= DEDUP_SEEN_OTHER ? names[kind] : "unknown";
}
