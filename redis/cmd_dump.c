/*
 * cmd_dump.c - SCANDUMP and LOADCHUNK for every family.  A key in the
 * module's layout dumps as the envelope (rm_filter.h: the header chunk at
 * iterator 89, then pieces of at most RMF_CHUNK, 1 MiB); a key in RedisBloom's layout
 * dumps as RedisBloom does (header at iterator 1, then its arrays), so a
 * filter can move either way.  LOADCHUNK accepts both sequences.
 */
#include "module.h"


/* SCANDUMP of a key in RedisBloom's layout, in RedisBloom's numbering. */
static int scandump_rb(RedisModuleCtx *ctx, RedisModuleKey *key, const rmf_obj *o, long long it,
                       int null_at_end)
{
    RedisModule_ReplyWithArray(ctx, 2);
    if (it == 0) {
        size_t n = rmf_rb_header(o, NULL, 0);
        unsigned char *h = hook_malloc(NULL, n);
        if (!h) {
            close_key(key);
            RedisModule_ReplyWithLongLong(ctx, 0);
            return RedisModule_ReplyWithError(ctx, rmf_err_nomem());
        }
        rmf_rb_header(o, h, n);
        RedisModule_ReplyWithLongLong(ctx, 1);
        RedisModule_ReplyWithStringBuffer(ctx, (const char *)h, n);
        RedisModule_Free(h);
        close_key(key);
        return REDISMODULE_OK;
    }
    size_t len;
    const unsigned char *p = rmf_rb_chunk(o, &it, &len, RB_CHUNK);
    RedisModule_ReplyWithLongLong(ctx, it);
    if (p)
        RedisModule_ReplyWithStringBuffer(ctx, (const char *)p, len);
    else if (null_at_end)
        RedisModule_ReplyWithNull(ctx);
    else
        RedisModule_ReplyWithStringBuffer(ctx, "", 0);
    close_key(key);
    return REDISMODULE_OK;
}

/* The reply to a chunk LOADCHUNK does not take outside a load of ours in
 * progress ('ours' otherwise).  RedisBloom checks the key first ("not
 * found"), then the chunk: "Couldn't load chunk!" (CF), "received bad
 * data" (BF).  Where RedisBloom would write the bytes into a live filter
 * at the position given, this module refuses them all the same: arbitrary
 * bytes would corrupt the filter. */
static const char *loadchunk_refusal(const family *f, key_status ks, const rm_value *v,
                                     const char *ours)
{
    if (!f->rb_type)
        return ours;
    if (ks == K_EMPTY)
        return ERR_NOT_FOUND;
    if (v && v->partial)
        return ours;
    return f->kind == RMF_CUCKOO ? "ERR Couldn't load chunk!" : "ERR received bad data";
}

/* LOADCHUNK of RedisBloom's chunk sequence: iterator 1 carries its header
 * (to an empty key); later chunks fill the arrays in order. */
static int loadchunk_rb(RedisModuleCtx *ctx, RedisModuleKey *key, const family *f,
                        key_status ks, rm_value *v, long long it, const char *data, size_t len)
{
    rmf_err e = NULL;
    if (it == 1) {
        rmf_obj *o;
        /* RedisBloom: a header for an existing CF key is "item exists"; for
         * a BF key it is taken as a chunk, which it refuses */
        if (ks != K_EMPTY)
            e = f->kind == RMF_CUCKOO ? ERR_EXISTS : loadchunk_refusal(f, ks, v, ERR_EXISTS);
        else if ((e = rmf_rb_begin(f->kind, data, len, &config, &ALLOC, &o)) == NULL &&
                 store_new(key, f, o) != 0)
            e = rmf_err_nomem();
    } else {
        e = rmf_rb_load_chunk(v->obj, it, data, len);
    }
    close_key(key);
    if (e)
        return RedisModule_ReplyWithError(ctx, e);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

int scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const family *f,
                    int null_at_end)
{
    if (argc != 3)
        return RedisModule_WrongArity(ctx);
    long long it;
    if (!arg_ll(argv[2], &it) || it < 0)
        return RedisModule_ReplyWithError(ctx, "ERR Second argument must be numeric");
    RedisModuleKey *key;
    rmf_obj *o = open_obj(ctx, argv[1], f, REDISMODULE_READ, &key, 0, NULL);
    rm_value *v = o ? RedisModule_ModuleTypeGetValue(key) : NULL;
    if (!o) {
        close_key(key);
        return REDISMODULE_OK;
    }
    if (null_at_end && rmf_items(o) == 0) {
        /* RedisBloom: an empty cuckoo filter dumps as (0, nil) */
        close_key(key);
        RedisModule_ReplyWithArray(ctx, 2);
        RedisModule_ReplyWithLongLong(ctx, 0);
        return RedisModule_ReplyWithNull(ctx);
    }
    if (rmf_is_redisbloom(o))
        return scandump_rb(ctx, key, o, it, null_at_end);
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
        return RedisModule_ReplyWithError(ctx, rmf_err_nomem());
    }
    /* What the cursor kept holds for the value it was kept from: a dump
     * starting at 0, or a value whose header (items, sizes) changed, starts
     * it afresh.  (A change the header does not show makes the dump's
     * checksum wrong: LOADCHUNK then refuses it, as it refuses a dump whose
     * value changed between chunks without a cursor.) */
    unsigned char h[RMF_ENVELOPE_SIZE];
    size_t hn;
    uint64_t tag = rmf_serialize_range(o, 0, h, sizeof h, NULL, &hn) == DEDUP_OK &&
                           hn == sizeof h
                       ? dedup_get_u64(h + 80)
                       : 0;
    if (v->dump && (it == 0 || tag != v->dump_tag))
        dedup_range_sink_init(v->dump, 0, NULL, 0);
    if (!v->dump && (v->dump = hook_malloc(NULL, sizeof *v->dump)) != NULL)
        dedup_range_sink_init(v->dump, 0, NULL, 0);
    v->dump_tag = tag;
    size_t got;
    dedup_status s = rmf_serialize_range(o, off, buf, want, v->dump, &got);
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

int loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const family *f)
{
    if (argc != 4)
        return RedisModule_WrongArity(ctx);
    /* RedisBloom's texts for CF.LOADCHUNK: a position that is not a number
     * or is 0 is "Invalid position" (BF.LOADCHUNK: "must be numeric"). */
    bool cf = f->rb_type && f->kind == RMF_CUCKOO;
    long long it;
    if (!arg_ll(argv[2], &it) || (cf && it == 0))
        return RedisModule_ReplyWithError(ctx, cf ? "ERR Invalid position"
                                                  : "ERR Second argument must be numeric");
    size_t len;
    const char *data = RedisModule_StringPtrLen(argv[3], &len);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    rm_value *v;
    key_status ks = lookup(key, f, &v);
    if (ks == K_WRONGTYPE) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    /* RedisBloom's sequences: the header at iterator 1 (ours starts at 89),
     * then chunks into a key already in its layout. */
    if (f->rb_type && (it == 1 || (ks == K_OK && v->obj && rmf_is_redisbloom(v->obj))))
        return loadchunk_rb(ctx, key, f, ks, v, it, data, len);
    if (it < 1 || (uint64_t)it - 1 < len) {
        close_key(key);
        return RedisModule_ReplyWithError(ctx, loadchunk_refusal(f, ks, v, "ERR invalid iterator"));
    }
    uint64_t off = (uint64_t)it - 1 - len;
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
                        e = rmf_err_nomem();
                    } else {
                        nv->partial = p;
                        if (RedisModule_ModuleTypeSetValue(key, f->type, nv) != REDISMODULE_OK) {
                            value_free(nv);
                            e = rmf_err_nomem();
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
        e = loadchunk_refusal(f, ks, v,
                              "ERR no LOADCHUNK in progress for this key (send the first chunk "
                              "of the dump first)");
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

