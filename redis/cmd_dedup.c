/*
 * cmd_dedup.c - the DEDUP.* commands: "seen within the last N ms?"
 */
#include "module.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t now_ms(void) { return (uint64_t)RedisModule_Milliseconds(); }

/* A SEED argument: a decimal unsigned 64-bit number. */
static bool arg_seed(RedisModuleString *s, uint64_t *out)
{
    size_t len;
    const char *p = RedisModule_StringPtrLen(s, &len);
    char buf[24];
    if (len < 1 || len > 20)
        return false;
    memcpy(buf, p, len);
    buf[len] = 0;
    for (size_t i = 0; i < len; i++)
        if (buf[i] < '0' || buf[i] > '9')
            return false;
    errno = 0;
    unsigned long long v = strtoull(buf, NULL, 10);
    if (errno)
        return false;
    *out = v;
    return true;
}

/* DEDUP.RESERVE key window_ms error_rate capacity [GENERATIONS g] [EXACT]
 * [SEED s].  Without SEED the value gets a random one; the command is
 * replicated (and written to the AOF) with the seed, so replicas and a
 * restart hash the items alike. */
int dd_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 5)
        return RedisModule_WrongArity(ctx);
    rmf_dd_params p = {0, 0, 0, 0, false, 0};
    bool seeded = false;
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
        } else if (arg_is(argv[i], "SEED") && i + 1 < argc) {
            if (!arg_seed(argv[++i], &p.seed))
                return RedisModule_ReplyWithError(ctx, "ERR SEED must be a number from 0 to 2^64-1");
            seeded = true;
        } else {
            return RedisModule_ReplyWithError(ctx, "ERR unknown argument received");
        }
    }
    if (!seeded && !rmf_random_seed(&p.seed))
        return RedisModule_ReplyWithError(ctx, "ERR no random seed from the operating system");
    int created = 0;
    int rc = reserve_new_ex(ctx, argv[1], &DD, create_dd, &p, &created);
    if (created) {
        char seed[24];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)p.seed);
        long long g = p.generations;
        if (g && p.exact)
            RedisModule_Replicate(ctx, "DEDUP.RESERVE", "sssscl" "ccc", argv[1], argv[2], argv[3],
                                  argv[4], "GENERATIONS", g, "EXACT", "SEED", seed);
        else if (g)
            RedisModule_Replicate(ctx, "DEDUP.RESERVE", "sssscl" "cc", argv[1], argv[2], argv[3],
                                  argv[4], "GENERATIONS", g, "SEED", seed);
        else if (p.exact)
            RedisModule_Replicate(ctx, "DEDUP.RESERVE", "ssss" "ccc", argv[1], argv[2], argv[3],
                                  argv[4], "EXACT", "SEED", seed);
        else
            RedisModule_Replicate(ctx, "DEDUP.RESERVE", "ssss" "cc", argv[1], argv[2], argv[3],
                                  argv[4], "SEED", seed);
    }
    return rc;
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

int dd_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    return dd_add_common(ctx, argv, argc, 0);
}

int dd_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 3)
        return RedisModule_WrongArity(ctx);
    return dd_add_common(ctx, argv, argc, 1);
}

int dd_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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

int dd_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
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

int dd_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return scandump(ctx, argv, argc, &DD, 0);
}
int dd_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return loadchunk(ctx, argv, argc, &DD);
}

