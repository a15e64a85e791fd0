/*
 * rm_obj.c - the parts of an rmf_obj (rm_internal.h) every kind shares:
 * the module-wide config, allocation through the hook, free, memory, the
 * common accessors and the deep copy.
 */
#include "rm_internal.h"
#include "legacy/rm_redisbloom.h"

#include <stdlib.h>
#include <string.h>

void rmf_config_init(rmf_config *c)
{
    c->bf_error_rate = 0.01;
    c->bf_initial_size = 100;
    c->bf_expansion = 2;
    c->cf_initial_size = 1024;
    c->cf_bucket_size = 4;       /* RedisBloom: 2; 4 reaches 95% load, 12.8 bits/item */
    c->cf_max_iterations = 500;  /* RedisBloom: 20; 500 is what 95% load needs */
    c->cf_expansion = 1;
    c->cf_max_expansions = 32;
    c->cf_error_rate = 0.01;
    /* No per-key cap unless asked for (MAX_MEMORY): RedisBloom has none, and
     * a drop-in must not refuse the filters it creates. */
    c->max_memory = UINT64_MAX;
    c->max_capacity = UINT64_MAX;
}

void *rmf_alloc(const dedup_allocator *a, size_t n)
{
    if (a && a->malloc_fn)
        return a->malloc_fn(a->ctx, n);
    return malloc(n);
}

void *rmf_calloc(const dedup_allocator *a, size_t n)
{
    if (a && a->malloc_fn && a->calloc_fn)
        return a->calloc_fn(a->ctx, 1, n);
    if (a && a->malloc_fn) {
        void *p = a->malloc_fn(a->ctx, n);
        if (p)
            memset(p, 0, n);
        return p;
    }
    return calloc(1, n);
}

void rmf_dealloc(const dedup_allocator *a, void *p)
{
    if (!p)
        return;
    if (a && a->free_fn)
        a->free_fn(a->ctx, p);
    else
        free(p);
}

rmf_obj *rmf_obj_new(rmf_kind kind, const dedup_allocator *a)
{
    rmf_obj *o = rmf_alloc(a, sizeof *o);
    if (!o)
        return NULL;
    memset(o, 0, sizeof *o);
    o->kind = kind;
    if (a)
        o->alloc = *a;
    if (kind == RMF_DEDUP) {
        o->dd = rmf_alloc(a, sizeof *o->dd);
        if (!o->dd) {
            rmf_dealloc(a, o);
            return NULL;
        }
        memset(o->dd, 0, sizeof *o->dd);
        o->dd->seed = DEDUP_DEFAULT_SEED; /* a value saved before per-value seeds */
    }
    return o;
}

const dedup_allocator *rmf_obj_allocator(const rmf_obj *o)
{
    return o->alloc.malloc_fn ? &o->alloc : NULL;
}

void rmf_free(rmf_obj *o)
{
    if (!o)
        return;
    const dedup_allocator *a = rmf_obj_allocator(o);
    dedup_allocator copy = o->alloc;
    if (a)
        a = &copy;
    rmf_bf_free_links(o);
    dedup_seen_free(o->cfs);
    rmf_dd_free_state(o);
    rb_bloom_free(o->rbf);
    rb_cuckoo_free(o->rcf);
    rmf_dealloc(a, o);
}

rmf_err rmf_status_err(dedup_status s)
{
    switch (s) {
    case DEDUP_ERR_NOMEM:
        return rmf_err_nomem();
    case DEDUP_ERR_LIMIT:
        return "ERR filter would exceed the library's size limit";
    case DEDUP_ERR_INVALID_ARG:
        return "ERR invalid filter parameters";
    case DEDUP_ERR_FULL:
        return "ERR filter is full";
    default:
        return "ERR corrupted or unsupported payload";
    }
}

size_t rmf_memory_usage(const rmf_obj *o)
{
    size_t n = sizeof *o + rmf_bf_memory(o) + rmf_dd_memory(o);
    if (o->cfs)
        n += dedup_seen_memory_usage(o->cfs);
    if (o->rbf)
        n += rb_bloom_memory(o->rbf);
    if (o->rcf)
        n += rb_cuckoo_memory(o->rcf);
    return n;
}

rmf_kind rmf_obj_kind(const rmf_obj *o) { return o->kind; }
uint64_t rmf_items(const rmf_obj *o)
{
    if (o->rbf)
        return rb_bloom_items(o->rbf);
    if (o->rcf)
        return rb_cuckoo_items(o->rcf);
    if (o->cf) {
        dedup_cuckoo_info ci;
        dedup_cuckoo_get_info(o->cf, &ci);
        return ci.items;
    }
    return o->items;
}
uint64_t rmf_capacity_asked(const rmf_obj *o) { return o->capacity; }
bool rmf_is_redisbloom(const rmf_obj *o) { return o->rbf || o->rcf; }
bool rmf_loading(const rmf_obj *o)
{
    /* a cuckoo filter is usable from its header on, as in RedisBloom */
    return o->rbf && !rb_bloom_complete(o->rbf);
}

rmf_obj *rmf_copy(const rmf_obj *o)
{
    if (o->rbf || o->rcf) {
        rmf_obj *c = rmf_obj_new(o->kind, rmf_obj_allocator(o));
        if (!c)
            return NULL;
        c->max_memory = o->max_memory;
        c->rbf = o->rbf ? rb_bloom_copy(o->rbf, rmf_obj_allocator(o)) : NULL;
        c->rcf = o->rcf ? rb_cuckoo_copy(o->rcf, rmf_obj_allocator(o)) : NULL;
        if (!c->rbf && !c->rcf) {
            rmf_free(c);
            return NULL;
        }
        return c;
    }
    /* Round trip through the serialized form: the library has no clone,
     * and this reuses the validated load path. */
    uint64_t n = rmf_serialized_size(o);
    if (n > SIZE_MAX)
        return NULL;
    unsigned char *buf = rmf_alloc(rmf_obj_allocator(o), (size_t)n);
    if (!buf)
        return NULL;
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, (size_t)n);
    rmf_obj *c = NULL;
    if (rmf_save(o, &sink) == DEDUP_OK) {
        rmf_config cfg;
        rmf_config_init(&cfg);
        cfg.cf_max_expansions = DEDUP_MAX_CHAIN;
        dedup_mem_source src;
        if (rmf_load(dedup_mem_source_init(&src, buf, ms.len), o->kind, &cfg,
                     rmf_obj_allocator(o), &c) != NULL)
            c = NULL;
    }
    rmf_dealloc(rmf_obj_allocator(o), buf);
    if (c) {
        c->max_memory = o->max_memory;
        c->cf_max_links = o->cf_max_links;
        c->cf_mem_bound = o->cf_mem_bound;
        c->deleted = o->deleted;
    }
    return c;
}
