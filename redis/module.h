/*
 * redis/module.h - what the module's command files share.
 *
 *   module.c     load: module arguments, types, the command table; keys,
 *                argument helpers and the allocator hook
 *   cmd_bf.c     BF.*            cmd_cf.c  CF.*       cmd_dedup.c  DEDUP.*
 *   cmd_dump.c   SCANDUMP / LOADCHUNK of every family, both layouts
 *   persist.c    RDB, AOF rewrite, MEMORY USAGE, COPY
 *
 * A key holds an rm_value: either a complete filter ('obj', possibly in
 * RedisBloom's layout and still receiving its chunks, rmf_loading) or a
 * dump being reassembled by LOADCHUNK ('partial'); commands other than
 * LOADCHUNK refuse a key in either loading state.
 *
 * A family (BF, CF, DEDUP) has the module's own data type and, for BF and
 * CF, RedisBloom's ("MBbloom--", "MBbloomCF"), under which keys in
 * RedisBloom's layout live, so an RDB written by RedisBloom loads and one
 * written here loads back into RedisBloom.
 */
#ifndef DEDUP_REDIS_MODULE_H
#define DEDUP_REDIS_MODULE_H

#include "redismodule_api.h"
#include "rm_filter.h"
#include "legacy/rm_redisbloom.h"

typedef struct rm_value {
    rmf_obj *obj;
    rmf_partial *partial;
    /* SCANDUMP's cursor: the checksum state where the last chunk ended,
     * taken up by the next chunk (reset by SCANDUMP key 0); NULL until the
     * key is dumped, forgotten when the value's envelope header changes */
    dedup_range_sink *dump;
    uint64_t dump_tag; /* the checksum of that header */
} rm_value;

/* RDB encoding version of each data type.  BF and CF: the file format's
 * (DEDUP_FORMAT_VERSION, 1).  DEDUP: 2 since its values are library windows
 * (envelope version 3); an encver-1 value (generations of Bloom chains, or
 * an EXACT table) still loads (legacy/rm_dedup_legacy.c), and a server with an
 * older module refuses an encver-2 value instead of misreading it. */
#define RM_DD_ENCVER 2

typedef struct family {
    rmf_kind kind;
    const char *loadchunk; /* AOF rewrite command */
    RedisModuleType *type;
    RedisModuleType *rb_type; /* RedisBloom's type (BF, CF), or NULL */
} family;

extern family BF, CF, DD;
extern rmf_config config;
extern const dedup_allocator ALLOC;

#define ERR_LOADING "ERR filter is being loaded by LOADCHUNK (dump incomplete)"
#define ERR_NOT_FOUND "ERR not found"
#define ERR_EXISTS "ERR item exists"

void *hook_malloc(void *ctx, size_t n);
rm_value *value_new(void);
void value_free(void *p);
size_t value_memory(const rm_value *v);

typedef enum { K_EMPTY, K_OK, K_WRONGTYPE } key_status;
key_status lookup(RedisModuleKey *key, const family *f, rm_value **out);
rmf_obj *open_obj(RedisModuleCtx *ctx, RedisModuleString *name, const family *f, int mode,
                  RedisModuleKey **keyp, int missing_ok, int *empty);
void close_key(RedisModuleKey *key);
/* The data type a value of family f is stored under. */
RedisModuleType *type_for(const family *f, const rmf_obj *o);
int store_new(RedisModuleKey *key, const family *f, rmf_obj *o);

typedef rmf_err (*create_fn)(const void *params, rmf_obj **o);
rmf_err create_bf(const void *p, rmf_obj **o);
rmf_err create_cf(const void *p, rmf_obj **o);
rmf_err create_dd(const void *p, rmf_obj **o);
int reserve_new(RedisModuleCtx *ctx, RedisModuleString *name, const family *f, create_fn create,
                const void *params);
/* As reserve_new, but a created key is not replicated: *created = 1 tells
 * the caller to replicate it (DEDUP.RESERVE, with the seed it chose). */
int reserve_new_ex(RedisModuleCtx *ctx, RedisModuleString *name, const family *f, create_fn create,
                   const void *params, int *created);
rmf_obj *open_or_create(RedisModuleCtx *ctx, RedisModuleString *name, const family *f,
                        create_fn create, const void *params, RedisModuleKey **keyp);

int arg_is(RedisModuleString *s, const char *word);
int arg_ll(RedisModuleString *s, long long *v);
int arg_double(RedisModuleString *s, double *v);

/* Commands */
int bf_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_card(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_debug(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int bf_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_addnx(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_insertnx(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_count(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_del(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_debug(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_compact(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cf_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int dd_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int dd_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int dd_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int dd_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int dd_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int dd_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int dd_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* cmd_dump.c: SCANDUMP/LOADCHUNK for family f ('null_at_end': CF's nil). */
int scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const family *f,
             int null_at_end);
int loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const family *f);

/* persist.c: the type callbacks */
void *bf_rdb_load(RedisModuleIO *io, int encver);
void *cf_rdb_load(RedisModuleIO *io, int encver);
void *dd_rdb_load(RedisModuleIO *io, int encver);
void *rb_bf_rdb_load(RedisModuleIO *io, int encver);
void *rb_cf_rdb_load(RedisModuleIO *io, int encver);
void rdb_save(RedisModuleIO *io, void *value);
void rb_rdb_save(RedisModuleIO *io, void *value);
void bf_aof(RedisModuleIO *io, RedisModuleString *key, void *value);
void cf_aof(RedisModuleIO *io, RedisModuleString *key, void *value);
void dd_aof(RedisModuleIO *io, RedisModuleString *key, void *value);
size_t mem_usage(const void *value);
void *copy_value(RedisModuleString *from, RedisModuleString *to, const void *value);

#endif /* DEDUP_REDIS_MODULE_H */
