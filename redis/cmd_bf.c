/*
 * cmd_bf.c - the BF.* commands: arguments and replies as RedisBloom 2.4's.
 */
#include "module.h"

#include <string.h>

/* ==== BF.* ======================================================================= */

/* BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] */
int bf_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 4 || argc > 7)
        return RedisModule_WrongArity(ctx);
    rmf_bf_params p = {0, 0, config.bf_expansion, false};
    long long cap;
    int have_exp = 0;
    if (!arg_double(argv[2], &p.error_rate))
        return RedisModule_ReplyWithError(ctx, "ERR bad error rate");
    if (!(p.error_rate > 0 && p.error_rate < 1))
        return RedisModule_ReplyWithError(ctx, ERR_BF_RATE_RANGE);
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
            if (e < 1)
                return RedisModule_ReplyWithError(ctx, "ERR expansion should be greater or equal to 1");
            if (e > UINT32_MAX)
                return RedisModule_ReplyWithError(ctx, "ERR bad expansion (at most 4294967295)");
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

int bf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    rmf_bf_params p;
    bf_defaults(&p);
    return bf_add_items(ctx, argv[1], argv + 2, 1, 0, 1, &p);
}

int bf_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    rmf_bf_params p;
    bf_defaults(&p);
    return bf_add_items(ctx, argv[1], argv + 2, argc - 2, 1, 1, &p);
}

/* BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING] ITEMS item... */
int bf_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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
                /* RedisBloom 2.4's BF.INSERT texts: "Bad ..." when a value
                 * does not parse, "Bad argument received" when it is out
                 * of range (capacity < 1, rate outside (0, 1), expansion < 1) */
                if (!arg_ll(argv[i + 1], &c))
                    return RedisModule_ReplyWithError(ctx, "ERR Bad capacity");
                if (c <= 0)
                    return RedisModule_ReplyWithError(ctx, "ERR Bad argument received");
                p.capacity = (uint64_t)c;
            } else if (arg_is(argv[i], "ERROR")) {
                if (!arg_double(argv[i + 1], &p.error_rate))
                    return RedisModule_ReplyWithError(ctx, "ERR Bad error rate");
                if (!(p.error_rate > 0 && p.error_rate < 1))
                    return RedisModule_ReplyWithError(ctx, "ERR Bad argument received");
            } else {
                long long e;
                if (!arg_ll(argv[i + 1], &e))
                    return RedisModule_ReplyWithError(ctx, "ERR Bad expansion");
                if (e < 1)
                    return RedisModule_ReplyWithError(ctx, "ERR Bad argument received");
                if (e > UINT32_MAX)
                    return RedisModule_ReplyWithError(ctx, "ERR Bad expansion (at most 4294967295)");
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

int bf_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    return bf_exists_common(ctx, argv, argc, 0);
}

int bf_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    return bf_exists_common(ctx, argv, argc, 1);
}

/* BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION] */
int bf_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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
int bf_card(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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

int bf_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return scandump(ctx, argv, argc, &BF, 0);
}
int bf_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return loadchunk(ctx, argv, argc, &BF);
}

/* BF.DEBUG key: "size:N", then one line per link (RedisBloom's fields). */
int bf_debug(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2)
        return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    rmf_obj *o = open_obj(ctx, argv[1], &BF, REDISMODULE_READ, &key, 0, NULL);
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    uint32_t n = rmf_bf_filters(o);
    RedisModule_ReplyWithArray(ctx, 1 + (long)n);
    char line[256];
    for (uint32_t i = 0; i <= n; i++) {
        size_t len = rmf_bf_debug(o, i, line, sizeof line);
        RedisModule_ReplyWithStringBuffer(ctx, line, len < sizeof line ? len : sizeof line - 1);
    }
    close_key(key);
    return REDISMODULE_OK;
}
