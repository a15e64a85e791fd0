/*
 * persist.c - the data type callbacks: RDB save/load (the module's types
 * and RedisBloom's), AOF rewrite, MEMORY USAGE and COPY.
 */
#include "module.h"

#include "dedup/format.h"

#include <string.h>

/* Serialized form is written to RDB in pieces of at most this size. */
#define RDB_PIECE (1u << 20)


/* RDB layout of a value (encver: module.h; the same layout in every one):
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

static void rdb_save_value(RedisModuleIO *io, void *value);

/* Saves run with the memory guard off (rm_mem.c): a refused temporary
 * buffer would cut the value short in the RDB file. */
void rdb_save(RedisModuleIO *io, void *value)
{
    rmf_mem_unguarded(true);
    rdb_save_value(io, value);
    rmf_mem_unguarded(false);
}

static void rdb_save_value(RedisModuleIO *io, void *value)
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
    if (encver < 1 || encver > (f->kind == RMF_DEDUP ? RM_DD_ENCVER : (int)DEDUP_FORMAT_VERSION)) {
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
    rmf_err e = v ? NULL : rmf_err_nomem();
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

/* Loads run with the memory guard off (rm_mem.c): Redis loads a dataset
 * past maxmemory, and a refusal here would lose a saved key. */
static void *rdb_load_unguarded(RedisModuleIO *io, int encver, const family *f)
{
    rmf_mem_unguarded(true);
    void *v = rdb_load_family(io, encver, f);
    rmf_mem_unguarded(false);
    return v;
}

void *bf_rdb_load(RedisModuleIO *io, int encver) { return rdb_load_unguarded(io, encver, &BF); }
void *cf_rdb_load(RedisModuleIO *io, int encver) { return rdb_load_unguarded(io, encver, &CF); }
void *dd_rdb_load(RedisModuleIO *io, int encver) { return rdb_load_unguarded(io, encver, &DD); }

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

/* A key in RedisBloom's layout: its header and chunks, as RedisBloom's
 * own AOF rewrite emits them (LOADCHUNK takes both sequences). */
static void aof_rewrite_rb(RedisModuleIO *io, RedisModuleString *key, const rmf_obj *o,
                           const family *f)
{
    size_t n = rmf_rb_header(o, NULL, 0);
    unsigned char *h = RedisModule_Alloc(n);
    rmf_rb_header(o, h, n);
    RedisModule_EmitAOF(io, f->loadchunk, "slb", key, 1LL, (const char *)h, n);
    RedisModule_Free(h);
    long long it = 1;
    size_t len;
    const unsigned char *p;
    while ((p = rmf_rb_chunk(o, &it, &len, RB_CHUNK)) != NULL)
        RedisModule_EmitAOF(io, f->loadchunk, "slb", key, it, (const char *)p, len);
}

static void aof_rewrite_value(RedisModuleIO *io, RedisModuleString *key, void *value,
                              const family *f);

/* AOF rewrites run with the memory guard off, as saves (rdb_save()). */
static void aof_rewrite_family(RedisModuleIO *io, RedisModuleString *key, void *value,
                               const family *f)
{
    rmf_mem_unguarded(true);
    aof_rewrite_value(io, key, value, f);
    rmf_mem_unguarded(false);
}

static void aof_rewrite_value(RedisModuleIO *io, RedisModuleString *key, void *value,
                              const family *f)
{
    rm_value *v = value;
    if (v->obj && rmf_is_redisbloom(v->obj)) {
        aof_rewrite_rb(io, key, v->obj, f);
        return;
    }
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

void bf_aof(RedisModuleIO *io, RedisModuleString *key, void *value)
{
    aof_rewrite_family(io, key, value, &BF);
}
void cf_aof(RedisModuleIO *io, RedisModuleString *key, void *value)
{
    aof_rewrite_family(io, key, value, &CF);
}
void dd_aof(RedisModuleIO *io, RedisModuleString *key, void *value)
{
    aof_rewrite_family(io, key, value, &DD);
}

size_t mem_usage(const void *value) { return value_memory(value); }

void *copy_value(RedisModuleString *from, RedisModuleString *to, const void *value)
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


/* ---- RedisBloom's types ("MBbloom--", "MBbloomCF") --------------------------------
 * Values in RedisBloom's RDB encodings (legacy/rm_redisbloom.h), read and written
 * through these adapters. */
static uint64_t io_load_u64(void *ctx) { return RedisModule_LoadUnsigned(ctx); }
static double io_load_double(void *ctx) { return RedisModule_LoadDouble(ctx); }
static char *io_load_buf(void *ctx, size_t *len) { return RedisModule_LoadStringBuffer(ctx, len); }
static void io_free_buf(void *ctx, char *buf)
{
    (void)ctx;
    RedisModule_Free(buf);
}
static int io_error(void *ctx) { return RedisModule_IsIOError(ctx); }
static void io_save_u64(void *ctx, uint64_t v) { RedisModule_SaveUnsigned(ctx, v); }
static void io_save_double(void *ctx, double v) { RedisModule_SaveDouble(ctx, v); }
static void io_save_buf(void *ctx, const void *buf, size_t len)
{
    RedisModule_SaveStringBuffer(ctx, buf, len);
}

static rb_io rb_io_for(RedisModuleIO *io)
{
    rb_io r = {io,          io_load_u64,    io_load_double, io_load_buf, io_free_buf,
               io_error,    io_save_u64,    io_save_double, io_save_buf};
    return r;
}

static void *rb_rdb_load(RedisModuleIO *io, int encver, rmf_kind kind)
{
    rb_io r = rb_io_for(io);
    rmf_mem_unguarded(true);
    rm_value *v = value_new();
    rmf_err e = v ? rmf_rb_rdb_load(kind, encver, &r, &config, &ALLOC, &v->obj)
                  : rmf_err_nomem();
    rmf_mem_unguarded(false);
    if (e) {
        RedisModule_LogIOError(io, "warning", "dedup: cannot load RedisBloom value: %s", e);
        value_free(v);
        return NULL;
    }
    return v;
}

void *rb_bf_rdb_load(RedisModuleIO *io, int encver) { return rb_rdb_load(io, encver, RMF_BLOOM); }
void *rb_cf_rdb_load(RedisModuleIO *io, int encver) { return rb_rdb_load(io, encver, RMF_CUCKOO); }

void rb_rdb_save(RedisModuleIO *io, void *value)
{
    rb_io r = rb_io_for(io);
    rmf_mem_unguarded(true); /* as rdb_save() */
    rmf_rb_rdb_save(((rm_value *)value)->obj, &r);
    rmf_mem_unguarded(false);
}
