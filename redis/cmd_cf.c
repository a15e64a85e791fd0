/*
 * cmd_cf.c - the CF.* commands: arguments and replies as RedisBloom 2.4's
 * (the defaults differ on purpose: README.md).
 */
#include "module.h"

#include <stdio.h>
#include <string.h>


static void cf_defaults(rmf_cf_params *p)
{
    p->capacity = config.cf_initial_size;
    p->bucket_size = config.cf_bucket_size;
    p->max_iterations = config.cf_max_iterations;
    p->expansion = config.cf_expansion;
    p->rb_bucket_size = 2; /* RedisBloom's default bucket size */
}

/* CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e] */
int cf_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3 || argc % 2 == 0)
        return RedisModule_WrongArity(ctx);
    rmf_cf_params p;
    cf_defaults(&p);
    long long v;
    int have_bs = 0;
    if (!arg_ll(argv[2], &v) || v < 0)
        return RedisModule_ReplyWithError(ctx, "ERR Bad capacity");
    p.capacity = (uint64_t)v;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (arg_is(argv[i], "BUCKETSIZE")) {
            have_bs = 1;
            if (!arg_ll(argv[i + 1], &v))
                return RedisModule_ReplyWithError(ctx, "ERR Couldn't parse BUCKETSIZE");
            if (v <= 0 || v > 255)
                return RedisModule_ReplyWithError(
                    ctx, "ERR BUCKETSIZE parameter needs to be a positive integer (at most 255)");
            p.bucket_size = p.rb_bucket_size = (uint32_t)v;
        } else if (arg_is(argv[i], "MAXITERATIONS")) {
            if (!arg_ll(argv[i + 1], &v))
                return RedisModule_ReplyWithError(ctx, "ERR Couldn't parse MAXITERATIONS");
            if (v <= 0 || v > 65535)
                return RedisModule_ReplyWithError(
                    ctx, "ERR MAXITERATIONS parameter needs to be a positive integer (at most 65535)");
            p.max_iterations = (uint32_t)v;
        } else if (arg_is(argv[i], "EXPANSION")) {
            if (!arg_ll(argv[i + 1], &v))
                return RedisModule_ReplyWithError(ctx, "ERR Couldn't parse EXPANSION");
            if (v < 0 || v > 32768)
                return RedisModule_ReplyWithError(
                    ctx, "ERR EXPANSION parameter needs to be a non-negative integer (at most 32768)");
            p.expansion = (uint32_t)v;
        } else {
            return RedisModule_ReplyWithError(ctx, "ERR unknown argument received");
        }
    }
    /* RedisBloom's rule, with its bucket size (2) unless one was given: any
     * capacity it accepts is accepted here whatever our bucket size. */
    if (p.capacity < 2ull * (have_bs ? p.bucket_size : 2u))
        return RedisModule_ReplyWithError(ctx, "ERR Capacity must be at least (BucketSize * 2)");
    return reserve_new(ctx, argv[1], &CF, create_cf, &p);
}

static int cf_insert_common(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleString **items,
                            int nitems, int multi, int nx, int autocreate,
                            const rmf_cf_params *p)
{
    RedisModuleKey *key;
    rmf_obj *o = open_or_create(ctx, name, &CF, autocreate ? create_cf : NULL, p, &key);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    rmf_err e = rmf_cf_can_grow(o);
    if (e) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, e);
    }
    if (multi)
        RedisModule_ReplyWithArray(ctx, nitems);
    if (!nx && nitems > 1) {
        /* CF.INSERT: batches, so the library hashes a batch and prefetches
         * its buckets before inserting (see rmf_cf_add_many). */
        enum { CHUNK = 1024 };
        const void *ptr[CHUNK];
        size_t lens[CHUNK];
        int rc[CHUNK];
        rmf_err errs[CHUNK];
        for (int i0 = 0; i0 < nitems; i0 += CHUNK) {
            int k = nitems - i0 < CHUNK ? nitems - i0 : CHUNK;
            for (int j = 0; j < k; j++)
                ptr[j] = RedisModule_StringPtrLen(items[i0 + j], &lens[j]);
            rmf_cf_add_many(o, ptr, lens, (size_t)k, rc, errs);
            for (int j = 0; j < k; j++) {
                if (rc[j] == -2)
                    RedisModule_ReplyWithError(ctx, errs[j] ? errs[j]
                                                            : "ERR Maximum expansions reached");
                else
                    RedisModule_ReplyWithLongLong(ctx, rc[j]);
            }
        }
        close_key(key);
        RedisModule_ReplicateVerbatim(ctx);
        return REDISMODULE_OK;
    }
    for (int i = 0; i < nitems; i++) {
        size_t len;
        const char *s = RedisModule_StringPtrLen(items[i], &len);
        /* Checked per item: one add grows by at most one sub-filter, so
         * the filter never passes CF_MAX_EXPANSIONS or MAX_MEMORY. */
        if (i > 0 && (e = rmf_cf_can_grow(o)) != NULL) {
            RedisModule_ReplyWithError(ctx, e);
            continue;
        }
        int rc = rmf_cf_add(o, s, len, nx, &e);
        if (rc == -2)
            RedisModule_ReplyWithError(ctx, e);
        else if (rc == -1 && !multi)
            RedisModule_ReplyWithError(ctx, "ERR Filter is full");
        else
            RedisModule_ReplyWithLongLong(ctx, rc);
    }
    close_key(key);
    RedisModule_ReplicateVerbatim(ctx);
    return REDISMODULE_OK;
}

int cf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    rmf_cf_params p;
    cf_defaults(&p);
    return cf_insert_common(ctx, argv[1], argv + 2, 1, 0, 0, 1, &p);
}

int cf_addnx(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    rmf_cf_params p;
    cf_defaults(&p);
    return cf_insert_common(ctx, argv[1], argv + 2, 1, 0, 1, 1, &p);
}

/* CF.INSERT / CF.INSERTNX key [CAPACITY c] [NOCREATE] ITEMS item... */
static int cf_insert_cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int nx)
{
    if (argc < 4)
        return RedisModule_WrongArity(ctx);
    rmf_cf_params p;
    cf_defaults(&p);
    int autocreate = 1, items = -1;
    for (int i = 2; i < argc && items < 0; i++) {
        if (arg_is(argv[i], "ITEMS")) {
            items = i + 1;
        } else if (arg_is(argv[i], "NOCREATE")) {
            autocreate = 0;
        } else if (arg_is(argv[i], "CAPACITY")) {
            long long c;
            if (i + 1 == argc)
                return RedisModule_WrongArity(ctx);
            if (!arg_ll(argv[++i], &c) || c < 0)
                return RedisModule_ReplyWithError(ctx, "ERR Bad capacity");
            if ((uint64_t)c < 4) /* RedisBloom: 2 * its default bucket size */
                return RedisModule_ReplyWithError(ctx,
                                                  "ERR Capacity must be at least (BucketSize * 2)");
            p.capacity = (uint64_t)c;
        } else {
            return RedisModule_ReplyWithError(ctx, "ERR unknown argument received");
        }
    }
    if (items < 0 || items >= argc)
        return RedisModule_WrongArity(ctx);
    return cf_insert_common(ctx, argv[1], argv + items, argc - items, 1, nx, autocreate, &p);
}

int cf_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return cf_insert_cmd(ctx, argv, argc, 0);
}
int cf_insertnx(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return cf_insert_cmd(ctx, argv, argc, 1);
}

/* EXISTS, MEXISTS and COUNT: 0 for a missing key. */
static int cf_query(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int multi, int count)
{
    RedisModuleKey *key;
    int empty;
    rmf_obj *o = open_obj(ctx, argv[1], &CF, REDISMODULE_READ, &key, 1, &empty);
    if (!o && !empty) {
        close_key(key);
        return REDISMODULE_OK;
    }
    if (multi)
        RedisModule_ReplyWithArray(ctx, argc - 2);
    if (o && multi && !count) {
        /* CF.MEXISTS: queried in batches */
        enum { CHUNK = 1024 };
        const void *ptr[CHUNK];
        size_t lens[CHUNK];
        int out[CHUNK];
        for (int i0 = 2; i0 < argc; i0 += CHUNK) {
            int k = argc - i0 < CHUNK ? argc - i0 : CHUNK;
            for (int j = 0; j < k; j++)
                ptr[j] = RedisModule_StringPtrLen(argv[i0 + j], &lens[j]);
            rmf_cf_exists_many(o, ptr, lens, (size_t)k, out);
            for (int j = 0; j < k; j++)
                RedisModule_ReplyWithLongLong(ctx, out[j]);
        }
        close_key(key);
        return REDISMODULE_OK;
    }
    for (int i = 2; i < argc; i++) {
        size_t len;
        const char *s = RedisModule_StringPtrLen(argv[i], &len);
        long long v = 0;
        if (o)
            v = count ? (long long)rmf_cf_count(o, s, len) : rmf_cf_exists(o, s, len);
        RedisModule_ReplyWithLongLong(ctx, v);
    }
    close_key(key);
    return REDISMODULE_OK;
}

int cf_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    return cf_query(ctx, argv, argc, 0, 0);
}
int cf_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    return cf_query(ctx, argv, argc, 1, 0);
}
int cf_count(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    return cf_query(ctx, argv, argc, 0, 1);
}

int cf_del(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    rm_value *v;
    key_status ks = lookup(key, &CF, &v);
    if (ks != K_OK) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, ks == K_WRONGTYPE ? REDISMODULE_ERRORMSG_WRONGTYPE
                                                                 : "ERR Not found");
    }
    if (!v->obj || rmf_loading(v->obj)) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, ERR_LOADING);
    }
    size_t len;
    const char *s = RedisModule_StringPtrLen(argv[2], &len);
    int deleted = rmf_cf_del(v->obj, s, len);
    close_key(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithLongLong(ctx, deleted);
}

int cf_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    rmf_obj *o = open_obj(ctx, argv[1], &CF, REDISMODULE_READ, &key, 0, NULL);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    rmf_cf_info i;
    rmf_cf_get_info(o, &i);
    RedisModule_ReplyWithArray(ctx, 16);
    RedisModule_ReplyWithSimpleString(ctx, "Size");
    RedisModule_ReplyWithLongLong(ctx, (long long)(sizeof(rm_value) + rmf_memory_usage(o)));
    RedisModule_ReplyWithSimpleString(ctx, "Number of buckets");
    RedisModule_ReplyWithLongLong(ctx, (long long)i.buckets);
    RedisModule_ReplyWithSimpleString(ctx, "Number of filters");
    RedisModule_ReplyWithLongLong(ctx, i.filters);
    RedisModule_ReplyWithSimpleString(ctx, "Number of items inserted");
    RedisModule_ReplyWithLongLong(ctx, (long long)i.items);
    RedisModule_ReplyWithSimpleString(ctx, "Number of items deleted");
    RedisModule_ReplyWithLongLong(ctx, (long long)i.deleted);
    RedisModule_ReplyWithSimpleString(ctx, "Bucket size");
    RedisModule_ReplyWithLongLong(ctx, i.bucket_size);
    RedisModule_ReplyWithSimpleString(ctx, "Expansion rate");
    RedisModule_ReplyWithLongLong(ctx, i.expansion);
    RedisModule_ReplyWithSimpleString(ctx, "Max iterations");
    RedisModule_ReplyWithLongLong(ctx, i.max_iterations);
    close_key(key);
    return REDISMODULE_OK;
}

int cf_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return scandump(ctx, argv, argc, &CF, 1);
}
int cf_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return loadchunk(ctx, argv, argc, &CF);
}


/* CF.DEBUG key: RedisBloom's one line. */
int cf_debug(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    rmf_obj *o = open_obj(ctx, argv[1], &CF, REDISMODULE_READ, &key, 0, NULL);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    rmf_cf_info i;
    rmf_cf_get_info(o, &i);
    char line[256];
    int n = snprintf(line, sizeof line,
                     "bktsize:%u buckets:%llu items:%llu deletes:%llu filters:%u "
                     "max_iterations:%u expansion:%u",
                     i.bucket_size, (unsigned long long)i.buckets, (unsigned long long)i.items,
                     (unsigned long long)i.deleted, i.filters, i.max_iterations, i.expansion);
    close_key(key);
    return RedisModule_ReplyWithStringBuffer(ctx, line, (size_t)n < sizeof line ? (size_t)n : 0);
}

/* CF.COMPACT key: OK (RedisBloom's reply); "Cuckoo filter was not found"
 * for a missing key. */
int cf_compact(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    rm_value *v;
    key_status ks = lookup(key, &CF, &v);
    if (ks != K_OK) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, ks == K_WRONGTYPE ? REDISMODULE_ERRORMSG_WRONGTYPE
                                                                 : "ERR Cuckoo filter was not found");
    }
    if (!v->obj || rmf_loading(v->obj)) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, ERR_LOADING);
    }
    rmf_cf_compact(v->obj);
    close_key(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}
