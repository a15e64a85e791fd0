/*
 * module.c - dedup_redis.so: RedisBloom-compatible BF.* and CF.* commands
 * and expiring DEDUP.* filters on top of libdedup.
 *
 * The values live in rm_filter.c (no Redis there); this file parses
 * arguments, shapes replies like RedisBloom's, and connects the values to
 * the keyspace, RDB, AOF and replication.
 *
 * A key holds an rm_value: either a complete filter ('obj') or a dump being
 * reassembled by LOADCHUNK ('partial'); commands other than LOADCHUNK refuse
 * a key in the second state.
 */
#include "redismodule_api.h"
#include "rm_filter.h"

#include "dedup/format.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MODULE_NAME "dedup"
#define MODULE_VERSION (DEDUP_VERSION_MAJOR * 10000 + DEDUP_VERSION_MINOR * 100 + DEDUP_VERSION_PATCH)
/* Serialized form is written to RDB in pieces of at most this size. */
#define RDB_PIECE (1u << 20)

typedef struct rm_value {
    rmf_obj *obj;
    rmf_partial *partial;
} rm_value;

typedef struct family {
    rmf_kind kind;
    const char *loadchunk; /* AOF rewrite command */
    RedisModuleType *type;
} family;

static family BF = {RMF_BLOOM, "BF.LOADCHUNK", NULL};
static family CF = {RMF_CUCKOO, "CF.LOADCHUNK", NULL};
static family DD = {RMF_DEDUP, "DEDUP.LOADCHUNK", NULL};

static rmf_config config;

/* ---- allocator hook: all library memory through RedisModule_TryAlloc -------- */
static void *hook_malloc(void *ctx, size_t n)
{
    (void)ctx;
    return RedisModule_TryAlloc ? RedisModule_TryAlloc(n) : RedisModule_Alloc(n);
}
static void hook_free(void *ctx, void *p)
{
    (void)ctx;
    RedisModule_Free(p);
}
static const dedup_allocator ALLOC = {hook_malloc, NULL, NULL, hook_free, NULL};

static rm_value *value_new(void)
{
    rm_value *v = hook_malloc(NULL, sizeof *v);
    if (v)
        v->obj = NULL, v->partial = NULL;
    return v;
}

static void value_free(void *p)
{
    rm_value *v = p;
    if (!v)
        return;
    rmf_free(v->obj);
    rmf_partial_free(v->partial);
    RedisModule_Free(v);
}

/* ---- key lookup ------------------------------------------------------------- */
typedef enum { K_EMPTY, K_OK, K_WRONGTYPE } key_status;

static key_status lookup(RedisModuleKey *key, const family *f, rm_value **out)
{
    *out = NULL;
    if (!key)
        return K_EMPTY;
    int t = RedisModule_KeyType(key);
    if (t == REDISMODULE_KEYTYPE_EMPTY)
        return K_EMPTY;
    if (t != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(key) != f->type)
        return K_WRONGTYPE;
    *out = RedisModule_ModuleTypeGetValue(key);
    return K_OK;
}

#define ERR_LOADING "ERR filter is being loaded by LOADCHUNK (dump incomplete)"
#define ERR_NOT_FOUND "ERR not found"
#define ERR_EXISTS "ERR item exists"

/* Opens 'name' and finds a complete filter of family f.  Replies with an
 * error and returns NULL unless one is there; with 'missing_ok' an empty
 * key returns NULL without replying (*empty set). */
static rmf_obj *open_obj(RedisModuleCtx *ctx, RedisModuleString *name, const family *f, int mode,
                         RedisModuleKey **keyp, int missing_ok, int *empty)
{
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, mode);
    *keyp = key;
    if (empty)
        *empty = 0;
    rm_value *v;
    switch (lookup(key, f, &v)) {
    case K_EMPTY:
        if (missing_ok) {
            if (empty)
                *empty = 1;
        } else {
            RedisModule_ReplyWithError(ctx, ERR_NOT_FOUND);
        }
        return NULL;
    case K_WRONGTYPE:
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return NULL;
    case K_OK:
        break;
    }
    if (!v->obj) {
        RedisModule_ReplyWithError(ctx, ERR_LOADING);
        return NULL;
    }
    return v->obj;
}

static void close_key(RedisModuleKey *key)
{
    if (key)
        RedisModule_CloseKey(key);
}

/* Stores a new object under an empty key; frees it and returns -1 on
 * failure. */
static int store_new(RedisModuleKey *key, const family *f, rmf_obj *o)
{
    rm_value *v = value_new();
    if (!v) {
        rmf_free(o);
        return -1;
    }
    v->obj = o;
    if (RedisModule_ModuleTypeSetValue(key, f->type, v) != REDISMODULE_OK) {
        value_free(v);
        return -1;
    }
    return 0;
}

/* Creates a family's object from its parameters (the rmf_*_create calls,
 * with this module's config and allocator). */
typedef rmf_err (*create_fn)(const void *params, rmf_obj **o);
static rmf_err create_bf(const void *p, rmf_obj **o) { return rmf_bf_create(p, &config, &ALLOC, o); }
static rmf_err create_cf(const void *p, rmf_obj **o) { return rmf_cf_create(p, &config, &ALLOC, o); }
static rmf_err create_dd(const void *p, rmf_obj **o) { return rmf_dd_create(p, &config, &ALLOC, o); }

/* Creates an object and stores it under the empty key. */
static rmf_err create_stored(RedisModuleKey *key, const family *f, create_fn create,
                             const void *params, rmf_obj **o)
{
    rmf_err e = create(params, o);
    if (!e && store_new(key, f, *o) != 0)
        e = "ERR allocation failure";
    return e;
}

/* The *.RESERVE commands: a new object under a key that must not exist;
 * replies OK (and replicates) or the error. */
static int reserve_new(RedisModuleCtx *ctx, RedisModuleString *name, const family *f,
                       create_fn create, const void *params)
{
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    rm_value *v;
    key_status ks = lookup(key, f, &v);
    if (ks != K_EMPTY) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, ks == K_WRONGTYPE ? REDISMODULE_ERRORMSG_WRONGTYPE
                                                                 : ERR_EXISTS);
    }
    rmf_obj *o;
    rmf_err e = create_stored(key, f, create, params, &o);
    close_key(key);
    if (e)
        return RedisModule_ReplyWithError(ctx, e);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* The object under 'name' for writing; an empty key gets a new one when
 * 'create' is given (BF.ADD, CF.ADD and the like), else ERR_NOT_FOUND.
 * NULL once the error has been replied; the caller closes *keyp. */
static rmf_obj *open_or_create(RedisModuleCtx *ctx, RedisModuleString *name, const family *f,
                               create_fn create, const void *params, RedisModuleKey **keyp)
{
    int empty;
    rmf_obj *o = open_obj(ctx, name, f, REDISMODULE_READ | REDISMODULE_WRITE, keyp, 1, &empty);
    if (o || !empty)
        return o;
    if (!create) {
        RedisModule_ReplyWithError(ctx, ERR_NOT_FOUND);
        return NULL;
    }
    rmf_err e = create_stored(*keyp, f, create, params, &o);
    if (e) {
        RedisModule_ReplyWithError(ctx, e);
        return NULL;
    }
    return o;
}

/* ---- argument helpers ---------------------------------------------------------- */
static int arg_is(RedisModuleString *s, const char *word)
{
    size_t n;
    const char *p = RedisModule_StringPtrLen(s, &n);
    return n == strlen(word) && strncasecmp(p, word, n) == 0;
}

static int arg_ll(RedisModuleString *s, long long *v)
{
    return RedisModule_StringToLongLong(s, v) == REDISMODULE_OK;
}

static int arg_double(RedisModuleString *s, double *v)
{
    return RedisModule_StringToDouble(s, v) == REDISMODULE_OK && !isnan(*v);
}

/* ==== BF.* ======================================================================= */

/* BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] */
static int bf_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 4 || argc > 7)
        return RedisModule_WrongArity(ctx);
    rmf_bf_params p = {0, 0, config.bf_expansion, false};
    long long cap;
    int have_exp = 0;
    if (!arg_double(argv[2], &p.error_rate))
        return RedisModule_ReplyWithError(ctx, "ERR bad error rate");
    if (!(p.error_rate > 0 && p.error_rate < 1))
        return RedisModule_ReplyWithError(ctx, "ERR (0 < error rate range < 1)");
    if (!arg_ll(argv[3], &cap))
        return RedisModule_ReplyWithError(ctx, "ERR bad capacity");
    if (cap <= 0)
        return RedisModule_ReplyWithError(ctx, "ERR (capacity should be larger than 0)");
    p.capacity = (uint64_t)cap;
    for (int i = 4; i < argc; i++) {
        if (arg_is(argv[i], "NONSCALING")) {
            p.nonscaling = true;
        } else if (arg_is(argv[i], "EXPANSION")) {
            long long e;
            if (i + 1 == argc)
                return RedisModule_ReplyWithError(ctx, "ERR no expansion");
            if (!arg_ll(argv[++i], &e))
                return RedisModule_ReplyWithError(ctx, "ERR bad expansion");
            if (e < 1 || e > (long long)config.max_expansion)
                return RedisModule_ReplyWithError(ctx, "ERR expansion should be greater or equal to 1");
            p.expansion = (uint32_t)e;
            have_exp = 1;
        } else {
            return RedisModule_ReplyWithError(ctx, "ERR unknown argument received");
        }
    }
    if (p.nonscaling && have_exp)
        return RedisModule_ReplyWithError(ctx, "ERR Nonscaling filters cannot expand");

    return reserve_new(ctx, argv[1], &BF, create_bf, &p);
}

/* Adds items; 'multi' replies with an array that stops after the first
 * error, like RedisBloom. */
static int bf_add_items(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleString **items,
                        int nitems, int multi, int autocreate, const rmf_bf_params *p)
{
    RedisModuleKey *key;
    rmf_obj *o = open_or_create(ctx, name, &BF, autocreate ? create_bf : NULL, p, &key);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    if (multi)
        RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_ARRAY_LEN);
    long n = 0;
    for (int i = 0; i < nitems; i++) {
        size_t len;
        const char *s = RedisModule_StringPtrLen(items[i], &len);
        int added;
        rmf_err e = rmf_bf_add(o, s, len, &added);
        n++;
        if (e) {
            RedisModule_ReplyWithError(ctx, e);
            break;
        }
        RedisModule_ReplyWithLongLong(ctx, added);
    }
    if (multi)
        RedisModule_ReplySetArrayLength(ctx, n);
    close_key(key);
    RedisModule_ReplicateVerbatim(ctx);
    return REDISMODULE_OK;
}

static void bf_defaults(rmf_bf_params *p)
{
    p->error_rate = config.bf_error_rate;
    p->capacity = config.bf_initial_size;
    p->expansion = config.bf_expansion;
    p->nonscaling = false;
}

static int bf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    rmf_bf_params p;
    bf_defaults(&p);
    return bf_add_items(ctx, argv[1], argv + 2, 1, 0, 1, &p);
}

static int bf_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    rmf_bf_params p;
    bf_defaults(&p);
    return bf_add_items(ctx, argv[1], argv + 2, argc - 2, 1, 1, &p);
}

/* BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item... */
static int bf_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 4)
        return RedisModule_WrongArity(ctx);
    rmf_bf_params p;
    bf_defaults(&p);
    int autocreate = 1, items = -1, have_exp = 0;
    for (int i = 2; i < argc && items < 0; i++) {
        if (arg_is(argv[i], "ITEMS")) {
            items = i + 1;
        } else if (arg_is(argv[i], "NOCREATE")) {
            autocreate = 0;
        } else if (arg_is(argv[i], "NONSCALING")) {
            p.nonscaling = true;
        } else if (arg_is(argv[i], "CAPACITY") || arg_is(argv[i], "ERROR") ||
                   arg_is(argv[i], "EXPANSION")) {
            if (i + 1 == argc)
                return RedisModule_WrongArity(ctx);
            if (arg_is(argv[i], "CAPACITY")) {
                long long c;
                if (!arg_ll(argv[i + 1], &c))
                    return RedisModule_ReplyWithError(ctx, "ERR bad capacity");
                if (c <= 0)
                    return RedisModule_ReplyWithError(ctx, "ERR (capacity should be larger than 0)");
                p.capacity = (uint64_t)c;
            } else if (arg_is(argv[i], "ERROR")) {
                if (!arg_double(argv[i + 1], &p.error_rate))
                    return RedisModule_ReplyWithError(ctx, "ERR bad error rate");
                if (!(p.error_rate > 0 && p.error_rate < 1))
                    return RedisModule_ReplyWithError(ctx, "ERR (0 < error rate range < 1)");
            } else {
                long long e;
                if (!arg_ll(argv[i + 1], &e))
                    return RedisModule_ReplyWithError(ctx, "ERR bad expansion");
                if (e < 1 || e > (long long)config.max_expansion)
                    return RedisModule_ReplyWithError(ctx, "ERR expansion should be greater or equal to 1");
                p.expansion = (uint32_t)e;
                have_exp = 1;
            }
            i++;
        } else {
            return RedisModule_ReplyWithError(ctx, "ERR unknown argument received");
        }
    }
    if (items < 0 || items >= argc)
        return RedisModule_WrongArity(ctx);
    if (p.nonscaling && have_exp)
        return RedisModule_ReplyWithError(ctx, "ERR Nonscaling filters cannot expand");
    return bf_add_items(ctx, argv[1], argv + items, argc - items, 1, autocreate, &p);
}

static int bf_exists_common(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int multi)
{
    RedisModuleKey *key;
    int empty;
    rmf_obj *o = open_obj(ctx, argv[1], &BF, REDISMODULE_READ, &key, 1, &empty);
    if (!o && !empty) {
        close_key(key);
        return REDISMODULE_OK;
    }
    if (multi)
        RedisModule_ReplyWithArray(ctx, argc - 2);
    for (int i = 2; i < argc; i++) {
        size_t len;
        const char *s = RedisModule_StringPtrLen(argv[i], &len);
        RedisModule_ReplyWithLongLong(ctx, o ? rmf_bf_exists(o, s, len) : 0);
    }
    close_key(key);
    return REDISMODULE_OK;
}

static int bf_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    return bf_exists_common(ctx, argv, argc, 0);
}

static int bf_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    return bf_exists_common(ctx, argv, argc, 1);
}

static size_t value_memory(const rm_value *v)
{
    return sizeof *v + (v->obj ? rmf_memory_usage(v->obj) : 0) +
           (v->partial ? rmf_partial_memory_usage(v->partial) : 0);
}

/* BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION] */
static int bf_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2 && argc != 3)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    rmf_obj *o = open_obj(ctx, argv[1], &BF, REDISMODULE_READ, &key, 0, NULL);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    long long size = (long long)(sizeof(rm_value) + rmf_memory_usage(o));
    if (argc == 3) {
        if (arg_is(argv[2], "CAPACITY") || arg_is(argv[2], "SIZE") ||
            arg_is(argv[2], "FILTERS") || arg_is(argv[2], "ITEMS") ||
            arg_is(argv[2], "EXPANSION")) {
            RedisModule_ReplyWithArray(ctx, 1);
            if (arg_is(argv[2], "CAPACITY"))
                RedisModule_ReplyWithLongLong(ctx, (long long)rmf_bf_capacity(o));
            else if (arg_is(argv[2], "SIZE"))
                RedisModule_ReplyWithLongLong(ctx, size);
            else if (arg_is(argv[2], "FILTERS"))
                RedisModule_ReplyWithLongLong(ctx, rmf_bf_filters(o));
            else if (arg_is(argv[2], "ITEMS"))
                RedisModule_ReplyWithLongLong(ctx, (long long)rmf_items(o));
            else if (rmf_bf_nonscaling(o))
                RedisModule_ReplyWithNull(ctx);
            else
                RedisModule_ReplyWithLongLong(ctx, rmf_bf_expansion(o));
        } else {
            RedisModule_ReplyWithError(ctx, "ERR Invalid information value");
        }
        close_key(key);
        return REDISMODULE_OK;
    }
    RedisModule_ReplyWithArray(ctx, 10);
    RedisModule_ReplyWithSimpleString(ctx, "Capacity");
    RedisModule_ReplyWithLongLong(ctx, (long long)rmf_bf_capacity(o));
    RedisModule_ReplyWithSimpleString(ctx, "Size");
    RedisModule_ReplyWithLongLong(ctx, size);
    RedisModule_ReplyWithSimpleString(ctx, "Number of filters");
    RedisModule_ReplyWithLongLong(ctx, rmf_bf_filters(o));
    RedisModule_ReplyWithSimpleString(ctx, "Number of items inserted");
    RedisModule_ReplyWithLongLong(ctx, (long long)rmf_items(o));
    RedisModule_ReplyWithSimpleString(ctx, "Expansion rate");
    if (rmf_bf_nonscaling(o))
        RedisModule_ReplyWithNull(ctx);
    else
        RedisModule_ReplyWithLongLong(ctx, rmf_bf_expansion(o));
    close_key(key);
    return REDISMODULE_OK;
}

/* BF.CARD key: items inserted; 0 for a missing key. */
static int bf_card(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    int empty;
    rmf_obj *o = open_obj(ctx, argv[1], &BF, REDISMODULE_READ, &key, 1, &empty);
    if (o || empty)
        RedisModule_ReplyWithLongLong(ctx, o ? (long long)rmf_items(o) : 0);
    close_key(key);
    return REDISMODULE_OK;
}

/* ==== SCANDUMP / LOADCHUNK (all families) ========================================= */

static int scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const family *f,
                    int null_at_end)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    long long it;
    if (!arg_ll(argv[2], &it) || it < 0)
        return RedisModule_ReplyWithError(ctx, "ERR Second argument must be numeric");
    RedisModuleKey *key;
    rmf_obj *o = open_obj(ctx, argv[1], f, REDISMODULE_READ, &key, 0, NULL);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    uint64_t total = rmf_serialized_size(o);
    uint64_t off = it == 0 ? 0 : (uint64_t)it - 1;
    if (off >= total) {
        RedisModule_ReplyWithArray(ctx, 2);
        RedisModule_ReplyWithLongLong(ctx, 0);
        if (null_at_end)
            RedisModule_ReplyWithNull(ctx);
        else
            RedisModule_ReplyWithStringBuffer(ctx, "", 0);
        close_key(key);
        return REDISMODULE_OK;
    }
    size_t want = it == 0 ? RMF_ENVELOPE_SIZE : RMF_CHUNK;
    if (want > total - off)
        want = (size_t)(total - off);
    char *buf = hook_malloc(NULL, want);
    if (!buf) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, "ERR allocation failure");
    }
    size_t got;
    dedup_status s = rmf_serialize_range(o, off, buf, want, &got);
    close_key(key);
    if (s != DEDUP_OK) {
        RedisModule_Free(buf);
        return RedisModule_ReplyWithError(ctx, "ERR could not serialize the filter");
    }
    RedisModule_ReplyWithArray(ctx, 2);
    RedisModule_ReplyWithLongLong(ctx, (long long)(off + got + 1));
    RedisModule_ReplyWithStringBuffer(ctx, buf, got);
    RedisModule_Free(buf);
    return REDISMODULE_OK;
}

static int loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const family *f)
{
    if (argc != 4)
        return RedisModule_WrongArity(ctx);
    long long it;
    if (!arg_ll(argv[2], &it))
        return RedisModule_ReplyWithError(ctx, "ERR Second argument must be numeric");
    size_t len;
    const char *data = RedisModule_StringPtrLen(argv[3], &len);
    if (it < 1 || (uint64_t)it - 1 < len)
        return RedisModule_ReplyWithError(ctx, "ERR invalid iterator");
    uint64_t off = (uint64_t)it - 1 - len;

    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    rm_value *v;
    key_status ks = lookup(key, f, &v);
    rmf_err e = NULL;
    if (ks == K_WRONGTYPE) {
        e = REDISMODULE_ERRORMSG_WRONGTYPE;
    } else if (off == 0) {
        /* The header: starts a load on an empty key (or restarts one). */
        if (ks == K_OK && v->obj) {
            e = ERR_EXISTS;
        } else {
            rmf_partial *p;
            e = rmf_partial_begin(data, len, f->kind, &config, &ALLOC, &p);
            if (!e) {
                if (ks == K_OK) {
                    rmf_partial_free(v->partial);
                    v->partial = p;
                } else {
                    rm_value *nv = value_new();
                    if (!nv) {
                        rmf_partial_free(p);
                        e = "ERR allocation failure";
                    } else {
                        nv->partial = p;
                        if (RedisModule_ModuleTypeSetValue(key, f->type, nv) != REDISMODULE_OK) {
                            value_free(nv);
                            e = "ERR allocation failure";
                        } else {
                            v = nv;
                        }
                    }
                }
            }
        }
    } else if (ks == K_EMPTY) {
        e = ERR_NOT_FOUND;
    } else if (!v->partial) {
        e = "ERR no LOADCHUNK in progress for this key (send the first chunk of the dump first)";
    } else {
        e = rmf_partial_append(v->partial, off, data, len);
    }
    if (!e && v->partial && rmf_partial_received(v->partial) == rmf_partial_total(v->partial)) {
        rmf_obj *o;
        e = rmf_partial_finish(v->partial, &config, &o);
        if (e) {
            RedisModule_DeleteKey(key);
        } else {
            rmf_partial_free(v->partial);
            v->partial = NULL;
            v->obj = o;
        }
    }
    close_key(key);
    if (e)
        return RedisModule_ReplyWithError(ctx, e);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int bf_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return scandump(ctx, argv, argc, &BF, 0);
}
static int bf_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return loadchunk(ctx, argv, argc, &BF);
}

/* ==== CF.* ======================================================================= */

static void cf_defaults(rmf_cf_params *p)
{
    p->capacity = config.cf_initial_size;
    p->bucket_size = config.cf_bucket_size;
    p->max_iterations = config.cf_max_iterations;
    p->expansion = config.cf_expansion;
}

/* CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e] */
static int cf_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3 || argc % 2 == 0)
        return RedisModule_WrongArity(ctx);
    rmf_cf_params p;
    cf_defaults(&p);
    long long v;
    if (!arg_ll(argv[2], &v) || v < 0)
        return RedisModule_ReplyWithError(ctx, "ERR Bad capacity");
    p.capacity = (uint64_t)v;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (arg_is(argv[i], "BUCKETSIZE")) {
            if (!arg_ll(argv[i + 1], &v))
                return RedisModule_ReplyWithError(ctx, "ERR Couldn't parse BUCKETSIZE");
            if (v <= 0 || v > 255)
                return RedisModule_ReplyWithError(
                    ctx, "ERR BUCKETSIZE parameter needs to be a positive integer (at most 255)");
            p.bucket_size = (uint32_t)v;
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
    if (p.capacity < 2ull * p.bucket_size)
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

static int cf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    rmf_cf_params p;
    cf_defaults(&p);
    return cf_insert_common(ctx, argv[1], argv + 2, 1, 0, 0, 1, &p);
}

static int cf_addnx(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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
            if ((uint64_t)c < 2ull * p.bucket_size)
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

static int cf_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return cf_insert_cmd(ctx, argv, argc, 0);
}
static int cf_insertnx(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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

static int cf_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    return cf_query(ctx, argv, argc, 0, 0);
}
static int cf_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    return cf_query(ctx, argv, argc, 1, 0);
}
static int cf_count(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    return cf_query(ctx, argv, argc, 0, 1);
}

static int cf_del(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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
    if (!v->obj) {
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

static int cf_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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

static int cf_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return scandump(ctx, argv, argc, &CF, 1);
}
static int cf_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return loadchunk(ctx, argv, argc, &CF);
}

/* ==== DEDUP.* ====================================================================== */

static uint64_t now_ms(void) { return (uint64_t)RedisModule_Milliseconds(); }

/* DEDUP.RESERVE key window_ms error_rate capacity [GENERATIONS g] [EXACT] */
static int dd_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 5)
        return RedisModule_WrongArity(ctx);
    rmf_dd_params p = {0, 0, 0, 0, 0, false};
    long long w, cap;
    if (!arg_ll(argv[2], &w) || w < 1)
        return RedisModule_ReplyWithError(ctx, "ERR bad window (a positive number of milliseconds)");
    if (!arg_double(argv[3], &p.error_rate))
        return RedisModule_ReplyWithError(ctx, "ERR bad error rate");
    if (!(p.error_rate > 0 && p.error_rate < 1))
        return RedisModule_ReplyWithError(ctx, "ERR (0 < error rate range < 1)");
    if (!arg_ll(argv[4], &cap))
        return RedisModule_ReplyWithError(ctx, "ERR bad capacity");
    if (cap <= 0)
        return RedisModule_ReplyWithError(ctx, "ERR (capacity should be larger than 0)");
    p.window_ms = (uint64_t)w;
    p.capacity = (uint64_t)cap;
    for (int i = 5; i < argc; i++) {
        if (arg_is(argv[i], "GENERATIONS") && i + 1 < argc) {
            long long g;
            if (!arg_ll(argv[++i], &g) || g < 3 || g > 16)
                return RedisModule_ReplyWithError(ctx, "ERR GENERATIONS must be between 3 and 16");
            p.generations = (uint32_t)g;
        } else if (arg_is(argv[i], "EXACT")) {
            p.exact = true;
        } else {
            return RedisModule_ReplyWithError(ctx, "ERR unknown argument received");
        }
    }
    p.now_ms = now_ms();
    return reserve_new(ctx, argv[1], &DD, create_dd, &p);
}

static int dd_add_common(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int multi)
{
    RedisModuleKey *key;
    rmf_obj *o = open_obj(ctx, argv[1], &DD, REDISMODULE_READ | REDISMODULE_WRITE, &key, 0, NULL);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    uint64_t now = now_ms();
    if (multi)
        RedisModule_ReplyWithArray(ctx, argc - 2);
    for (int i = 2; i < argc; i++) {
        size_t len;
        const char *s = RedisModule_StringPtrLen(argv[i], &len);
        int is_new = 0;
        rmf_err e = rmf_dd_add(o, s, len, now, &is_new);
        if (e)
            RedisModule_ReplyWithError(ctx, e); /* EXACT: the table cannot grow */
        else
            RedisModule_ReplyWithLongLong(ctx, is_new);
    }
    close_key(key);
    RedisModule_ReplicateVerbatim(ctx);
    return REDISMODULE_OK;
}

static int dd_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    return dd_add_common(ctx, argv, argc, 0);
}

static int dd_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    return dd_add_common(ctx, argv, argc, 1);
}

static int dd_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    int empty;
    rmf_obj *o = open_obj(ctx, argv[1], &DD, REDISMODULE_READ, &key, 1, &empty);
    if (o || empty) {
        size_t len;
        const char *s = RedisModule_StringPtrLen(argv[2], &len);
        RedisModule_ReplyWithLongLong(ctx, o ? rmf_dd_exists(o, s, len, now_ms()) : 0);
    }
    close_key(key);
    return REDISMODULE_OK;
}

static int dd_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    rmf_obj *o = open_obj(ctx, argv[1], &DD, REDISMODULE_READ, &key, 0, NULL);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    uint64_t now = now_ms();
    RedisModule_ReplyWithArray(ctx, 20);
    RedisModule_ReplyWithSimpleString(ctx, "Window");
    RedisModule_ReplyWithLongLong(ctx, (long long)rmf_dd_window_ms(o));
    RedisModule_ReplyWithSimpleString(ctx, "Error rate");
    RedisModule_ReplyWithDouble(ctx, rmf_dd_error_rate(o));
    RedisModule_ReplyWithSimpleString(ctx, "Capacity");
    RedisModule_ReplyWithLongLong(ctx, (long long)rmf_capacity_asked(o));
    RedisModule_ReplyWithSimpleString(ctx, "Generations");
    RedisModule_ReplyWithLongLong(ctx, rmf_dd_generations(o));
    RedisModule_ReplyWithSimpleString(ctx, "Generation span");
    RedisModule_ReplyWithLongLong(ctx, (long long)rmf_dd_slot_ms(o));
    RedisModule_ReplyWithSimpleString(ctx, "Size");
    RedisModule_ReplyWithLongLong(ctx, (long long)(sizeof(rm_value) + rmf_memory_usage(o)));
    RedisModule_ReplyWithSimpleString(ctx, "Number of items inserted");
    RedisModule_ReplyWithLongLong(ctx, (long long)rmf_items(o));
    RedisModule_ReplyWithSimpleString(ctx, "Current error rate");
    RedisModule_ReplyWithDouble(ctx, rmf_dd_current_fpr(o, now));
    RedisModule_ReplyWithSimpleString(ctx, "Mode");
    RedisModule_ReplyWithSimpleString(ctx, rmf_dd_exact(o) ? "exact" : "approximate");
    RedisModule_ReplyWithSimpleString(ctx, "Keys in window");
    if (rmf_dd_exact(o))
        RedisModule_ReplyWithLongLong(ctx, (long long)rmf_dd_live(o, now));
    else
        RedisModule_ReplyWithNull(ctx);
    close_key(key);
    return REDISMODULE_OK;
}

static int dd_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return scandump(ctx, argv, argc, &DD, 0);
}
static int dd_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return loadchunk(ctx, argv, argc, &DD);
}

/* ==== data type callbacks ============================================================ */

/* RDB layout of a value (encver = DEDUP_FORMAT_VERSION):
 *   unsigned state (0 complete, 1 LOADCHUNK in progress)
 *   unsigned length of what follows (serialized form, or bytes received)
 *   string buffers of at most RDB_PIECE bytes carrying those bytes */
typedef struct rdb_sink {
    RedisModuleIO *io;
    char *buf;
    size_t len;
} rdb_sink;

static dedup_status rdb_sink_write(void *ctx, const void *data, size_t n)
{
    rdb_sink *r = ctx;
    const char *p = data;
    while (n) {
        size_t take = RDB_PIECE - r->len;
        if (take > n)
            take = n;
        memcpy(r->buf + r->len, p, take);
        r->len += take;
        p += take;
        n -= take;
        if (r->len == RDB_PIECE) {
            RedisModule_SaveStringBuffer(r->io, r->buf, r->len);
            r->len = 0;
        }
    }
    return DEDUP_OK;
}

static void rdb_save(RedisModuleIO *io, void *value)
{
    rm_value *v = value;
    rdb_sink r = {io, RedisModule_Alloc(RDB_PIECE), 0};
    dedup_sink sink = {rdb_sink_write, &r};
    if (v->obj) {
        RedisModule_SaveUnsigned(io, 0);
        RedisModule_SaveUnsigned(io, rmf_serialized_size(v->obj));
        rmf_save(v->obj, &sink);
    } else {
        RedisModule_SaveUnsigned(io, 1);
        RedisModule_SaveUnsigned(io, rmf_partial_received(v->partial));
        rdb_sink_write(&r, rmf_partial_data(v->partial), (size_t)rmf_partial_received(v->partial));
    }
    if (r.len)
        RedisModule_SaveStringBuffer(io, r.buf, r.len);
    RedisModule_Free(r.buf);
}

/* A dedup_source over the RDB pieces. */
typedef struct rdb_source {
    RedisModuleIO *io;
    uint64_t remaining; /* bytes not yet handed out */
    char *piece;
    size_t len, pos;
    int error;
} rdb_source;

static dedup_status rdb_read(void *ctx, void *buf, size_t n)
{
    rdb_source *r = ctx;
    char *out = buf;
    if (n > r->remaining)
        return DEDUP_ERR_TRUNCATED;
    while (n) {
        if (r->pos == r->len) {
            if (r->piece)
                RedisModule_Free(r->piece);
            r->piece = NULL;
            size_t len = 0;
            r->piece = RedisModule_LoadStringBuffer(r->io, &len);
            if (RedisModule_IsIOError(r->io) || !r->piece || len == 0 || len > RDB_PIECE ||
                len > r->remaining) {
                r->error = 1;
                return DEDUP_ERR_TRUNCATED;
            }
            r->len = len;
            r->pos = 0;
        }
        size_t take = r->len - r->pos;
        if (take > n)
            take = n;
        memcpy(out, r->piece + r->pos, take);
        r->pos += take;
        out += take;
        n -= take;
        r->remaining -= take;
    }
    return DEDUP_OK;
}

static uint64_t rdb_remaining(void *ctx) { return ((rdb_source *)ctx)->remaining; }

static void *rdb_load_family(RedisModuleIO *io, int encver, const family *f)
{
    if (encver < 1 || encver > (int)DEDUP_FORMAT_VERSION) {
        RedisModule_LogIOError(io, "warning", "dedup: unsupported encoding version %d", encver);
        return NULL;
    }
    uint64_t state = RedisModule_LoadUnsigned(io);
    uint64_t len = RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io) || state > 1 || len < RMF_ENVELOPE_SIZE ||
        len - RMF_ENVELOPE_SIZE > config.max_memory) {
        RedisModule_LogIOError(io, "warning", "dedup: corrupted value header");
        return NULL;
    }
    rdb_source r = {io, len, NULL, 0, 0, 0};
    dedup_source src = {rdb_read, rdb_remaining, &r};
    rm_value *v = value_new();
    rmf_err e = v ? NULL : "ERR allocation failure";
    if (!e && state == 0) {
        e = rmf_load(src, f->kind, &config, &ALLOC, &v->obj);
        if (!e && (r.remaining != 0 || r.pos != r.len))
            e = "trailing bytes";
    } else if (!e) {
        char hdr[RMF_ENVELOPE_SIZE];
        if (rdb_read(&r, hdr, sizeof hdr) != DEDUP_OK)
            e = "truncated";
        else
            e = rmf_partial_begin(hdr, sizeof hdr, f->kind, &config, &ALLOC, &v->partial);
        while (!e && r.remaining) {
            char tmp[4096];
            size_t take = r.remaining < sizeof tmp ? (size_t)r.remaining : sizeof tmp;
            uint64_t off = rmf_partial_received(v->partial);
            if (rdb_read(&r, tmp, take) != DEDUP_OK)
                e = "truncated";
            else
                e = rmf_partial_append(v->partial, off, tmp, take);
        }
    }
    if (r.piece)
        RedisModule_Free(r.piece);
    if (e) {
        RedisModule_LogIOError(io, "warning", "dedup: cannot load value: %s", e);
        value_free(v);
        return NULL;
    }
    return v;
}

static void *bf_rdb_load(RedisModuleIO *io, int encver) { return rdb_load_family(io, encver, &BF); }
static void *cf_rdb_load(RedisModuleIO *io, int encver) { return rdb_load_family(io, encver, &CF); }
static void *dd_rdb_load(RedisModuleIO *io, int encver) { return rdb_load_family(io, encver, &DD); }

/* AOF rewrite: the serialized form as LOADCHUNK commands, the header first,
 * then pieces of at most RMF_CHUNK bytes. */
typedef struct aof_sink {
    RedisModuleIO *io;
    RedisModuleString *key;
    const char *cmd;
    char *buf;
    size_t len, cap;
    uint64_t off; /* bytes emitted before buf */
} aof_sink;

static void aof_flush(aof_sink *a)
{
    if (!a->len)
        return;
    a->off += a->len;
    RedisModule_EmitAOF(a->io, a->cmd, "slb", a->key, (long long)(a->off + 1), a->buf, a->len);
    a->len = 0;
}

static dedup_status aof_sink_write(void *ctx, const void *data, size_t n)
{
    aof_sink *a = ctx;
    const char *p = data;
    while (n) {
        /* The first command carries exactly the envelope header. */
        size_t cap = a->off == 0 ? RMF_ENVELOPE_SIZE : a->cap;
        size_t take = cap - a->len;
        if (take > n)
            take = n;
        memcpy(a->buf + a->len, p, take);
        a->len += take;
        p += take;
        n -= take;
        if (a->len == cap)
            aof_flush(a);
    }
    return DEDUP_OK;
}

static void aof_rewrite_family(RedisModuleIO *io, RedisModuleString *key, void *value,
                               const family *f)
{
    rm_value *v = value;
    aof_sink a = {io, key, f->loadchunk, NULL, 0, RMF_CHUNK, 0};
    a.buf = RedisModule_Alloc(a.cap);
    dedup_sink sink = {aof_sink_write, &a};
    if (v->obj)
        rmf_save(v->obj, &sink);
    else
        aof_sink_write(&a, rmf_partial_data(v->partial), (size_t)rmf_partial_received(v->partial));
    aof_flush(&a);
    RedisModule_Free(a.buf);
}

static void bf_aof(RedisModuleIO *io, RedisModuleString *key, void *value)
{
    aof_rewrite_family(io, key, value, &BF);
}
static void cf_aof(RedisModuleIO *io, RedisModuleString *key, void *value)
{
    aof_rewrite_family(io, key, value, &CF);
}
static void dd_aof(RedisModuleIO *io, RedisModuleString *key, void *value)
{
    aof_rewrite_family(io, key, value, &DD);
}

static size_t mem_usage(const void *value) { return value_memory(value); }

static void *copy_value(RedisModuleString *from, RedisModuleString *to, const void *value)
{
    (void)from;
    (void)to;
    const rm_value *v = value;
    if (!v->obj)
        return NULL; /* a load in progress is not copied */
    rm_value *c = value_new();
    if (!c)
        return NULL;
    c->obj = rmf_copy(v->obj);
    if (!c->obj) {
        value_free(c);
        return NULL;
    }
    return c;
}

/* ==== module load ========================================================================= */

static int parse_config(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc % 2) {
        RedisModule_Log(ctx, "warning", "dedup: module arguments come in NAME VALUE pairs");
        return REDISMODULE_ERR;
    }
    for (int i = 0; i < argc; i += 2) {
        long long ll = 0;
        double d = 0;
        int is_ll = arg_ll(argv[i + 1], &ll);
        int is_d = arg_double(argv[i + 1], &d);
        const char *name = RedisModule_StringPtrLen(argv[i], NULL);
        if (arg_is(argv[i], "ERROR_RATE") && is_d && d > 0 && d < 1)
            config.bf_error_rate = d;
        else if ((arg_is(argv[i], "INITIAL_SIZE") || arg_is(argv[i], "CAPACITY")) && is_ll && ll > 0)
            config.bf_initial_size = (uint64_t)ll;
        else if (arg_is(argv[i], "EXPANSION") && is_ll && ll >= 1 && ll <= 1024)
            config.bf_expansion = (uint32_t)ll;
        else if (arg_is(argv[i], "CF_INITIAL_SIZE") && is_ll && ll >= 2)
            config.cf_initial_size = (uint64_t)ll;
        else if (arg_is(argv[i], "CF_BUCKET_SIZE") && is_ll && ll >= 1 && ll <= 255)
            config.cf_bucket_size = (uint32_t)ll;
        else if (arg_is(argv[i], "CF_MAX_ITERATIONS") && is_ll && ll >= 1 && ll <= 65535)
            config.cf_max_iterations = (uint32_t)ll;
        else if (arg_is(argv[i], "CF_EXPANSION") && is_ll && ll >= 0 && ll <= 32768)
            config.cf_expansion = (uint32_t)ll;
        else if (arg_is(argv[i], "CF_MAX_EXPANSIONS") && is_ll && ll >= 1 && ll <= 64)
            config.cf_max_expansions = (uint32_t)ll;
        else if (arg_is(argv[i], "CF_ERROR_RATE") && is_d && d >= 1e-9 && d < 1)
            config.cf_error_rate = d;
        else if (arg_is(argv[i], "MAX_MEMORY") && is_ll && ll >= 1024)
            config.max_memory = (uint64_t)ll;
        else if (arg_is(argv[i], "MAX_CAPACITY") && is_ll && ll >= 1)
            config.max_capacity = (uint64_t)ll;
        else {
            RedisModule_Log(ctx, "warning", "dedup: bad module argument %s (or its value)", name);
            return REDISMODULE_ERR;
        }
    }
    return REDISMODULE_OK;
}

typedef struct command {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
    const char *summary;
    const char *complexity;
    int arity;
} command;

static const command COMMANDS[] = {
    {"bf.reserve", bf_reserve, "write deny-oom", "Creates an empty Bloom filter: BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING]", "O(1)", -4},
    {"bf.add", bf_add, "write deny-oom fast", "Adds an item, creating the filter with the module defaults if needed; 1 if new", "O(k * filters)", 3},
    {"bf.madd", bf_madd, "write deny-oom fast", "Adds items; array of 1/0 (an error element stops the array)", "O(n * k * filters)", -3},
    {"bf.insert", bf_insert, "write deny-oom", "Adds items with creation options: BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item...", "O(n * k * filters)", -4},
    {"bf.exists", bf_exists, "readonly fast", "1 if the item may have been added, 0 if certainly not", "O(k * filters)", 3},
    {"bf.mexists", bf_mexists, "readonly fast", "BF.EXISTS for several items", "O(n * k * filters)", -3},
    {"bf.info", bf_info, "readonly fast", "Capacity, Size (bytes held), Number of filters, Number of items inserted, Expansion rate", "O(1)", -2},
    {"bf.card", bf_card, "readonly fast", "Number of items added (new ones only)", "O(1)", 2},
    {"bf.scandump", bf_scandump, "readonly", "Dumps the filter in chunks: BF.SCANDUMP key iter (start with 0, stop when it returns 0)", "O(n)", 3},
    {"bf.loadchunk", bf_loadchunk, "write deny-oom", "Restores a filter from the chunks of BF.SCANDUMP, in order", "O(n)", 4},
    {"cf.reserve", cf_reserve, "write deny-oom", "Creates an empty cuckoo filter: CF.RESERVE key capacity [BUCKETSIZE b] [MAXITERATIONS m] [EXPANSION e]", "O(1)", -3},
    {"cf.add", cf_add, "write deny-oom fast", "Adds an item (again if present), creating the filter if needed; 1, or error when full", "O(1)", 3},
    {"cf.addnx", cf_addnx, "write deny-oom fast", "Adds an item only if it may not be present; 1 added, 0 present", "O(filters)", 3},
    {"cf.insert", cf_insert, "write deny-oom", "Adds items: CF.INSERT key [CAPACITY c] [NOCREATE] ITEMS item...; per item 1, or -1 when there is no room", "O(n)", -4},
    {"cf.insertnx", cf_insertnx, "write deny-oom", "CF.ADDNX for several items: per item 1, 0 or -1", "O(n * filters)", -4},
    {"cf.exists", cf_exists, "readonly fast", "1 if the item may be present, 0 if certainly not", "O(filters)", 3},
    {"cf.mexists", cf_mexists, "readonly fast", "CF.EXISTS for several items", "O(n * filters)", -3},
    {"cf.del", cf_del, "write fast", "Deletes one copy of an item; 1 deleted, 0 not found", "O(filters)", 3},
    {"cf.count", cf_count, "readonly fast", "Copies of the item's fingerprint (at least adds minus deletes)", "O(filters)", 3},
    {"cf.info", cf_info, "readonly fast", "Size, Number of buckets, Number of filters, Number of items inserted, Number of items deleted, Bucket size, Expansion rate, Max iterations", "O(1)", 2},
    {"cf.scandump", cf_scandump, "readonly", "Dumps the filter in chunks: CF.SCANDUMP key iter", "O(n)", 3},
    {"cf.loadchunk", cf_loadchunk, "write deny-oom", "Restores a filter from the chunks of CF.SCANDUMP, in order", "O(n)", 4},
    {"dedup.reserve", dd_reserve, "write deny-oom", "Creates an expiring dedup filter: DEDUP.RESERVE key window_ms error_rate capacity [GENERATIONS g] [EXACT]", "O(1)", -5},
    {"dedup.add", dd_add, "write deny-oom fast", "1 if the item was not seen within the window (and records it), else 0", "O(generations)", 3},
    {"dedup.madd", dd_madd, "write deny-oom fast", "DEDUP.ADD for several items; array of 1/0", "O(n * generations)", -3},
    {"dedup.exists", dd_exists, "readonly fast", "1 if the item may have been seen within the window, else 0 (does not record)", "O(generations)", 3},
    {"dedup.info", dd_info, "readonly fast", "Window, Error rate, Capacity, Generations, Generation span, Size, Number of items inserted, Current error rate, Mode, Keys in window", "O(generations); O(table) for EXACT", 2},
    {"dedup.scandump", dd_scandump, "readonly", "Dumps the dedup filter in chunks (as BF.SCANDUMP)", "O(n)", 3},
    {"dedup.loadchunk", dd_loadchunk, "write deny-oom", "Restores a dedup filter from DEDUP.SCANDUMP chunks", "O(n)", 4},
};

static void set_docs(RedisModuleCtx *ctx, const command *c)
{
    if (!RedisModule_GetCommand || !RedisModule_SetCommandInfo)
        return;
    RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, c->name);
    if (!cmd)
        return;
    static const RedisModuleCommandInfoVersion ver = {1, 0, 0, 0};
    RedisModuleCommandInfo info;
    memset(&info, 0, sizeof info);
    info.version = &ver;
    info.summary = c->summary;
    info.complexity = c->complexity;
    info.since = "0.1.0";
    info.arity = c->arity;
    if (RedisModule_SetCommandInfo(cmd, &info) != REDISMODULE_OK)
        RedisModule_Log(ctx, "notice", "dedup: no command docs for %s", c->name);
}

static RedisModuleType *create_type(RedisModuleCtx *ctx, const char *name,
                                    RedisModuleTypeLoadFunc load, RedisModuleTypeRewriteFunc aof)
{
    RedisModuleTypeMethods tm;
    memset(&tm, 0, sizeof tm);
    tm.version = REDISMODULE_TYPE_METHOD_VERSION;
    tm.rdb_load = load;
    tm.rdb_save = rdb_save;
    tm.aof_rewrite = aof;
    tm.mem_usage = mem_usage;
    tm.free = value_free;
    tm.copy = copy_value;
    return RedisModule_CreateDataType(ctx, name, (int)DEDUP_FORMAT_VERSION, &tm);
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (rm_api_init(ctx, MODULE_NAME, MODULE_VERSION, REDISMODULE_APIVER_1) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    rmf_config_init(&config);
    if (parse_config(ctx, argv, argc) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);

    /* Type names are 9 characters; the encoding version is the file format's. */
    BF.type = create_type(ctx, "dedup-BF1", bf_rdb_load, bf_aof);
    CF.type = create_type(ctx, "dedup-CF1", cf_rdb_load, cf_aof);
    DD.type = create_type(ctx, "dedup-DD1", dd_rdb_load, dd_aof);
    if (!BF.type || !CF.type || !DD.type)
        return REDISMODULE_ERR;

    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
        if (RedisModule_CreateCommand(ctx, COMMANDS[i].name, COMMANDS[i].fn, COMMANDS[i].flags, 1,
                                      1, 1) != REDISMODULE_OK)
            return REDISMODULE_ERR;
        set_docs(ctx, &COMMANDS[i]);
    }
    RedisModule_Log(ctx, "notice",
                    "dedup %s loaded (error_rate %g, initial_size %llu, expansion %u, "
                    "max_memory %llu bytes per key%s)",
                    DEDUP_VERSION_STRING, config.bf_error_rate,
                    (unsigned long long)config.bf_initial_size, config.bf_expansion,
                    (unsigned long long)config.max_memory,
                    RedisModule_TryAlloc ? "" : "; no TryAlloc: allocation failure aborts");
    return REDISMODULE_OK;
}
