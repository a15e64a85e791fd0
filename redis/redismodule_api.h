/*
 * redis/redismodule_api.h - the part of the Redis module ABI dedup uses.
 *
 * Debian ships no redismodule.h, and Redis's own header is not ours to copy.
 * An ABI is a set of facts (function names, signatures, constants, struct
 * layouts), so these declarations are written here from scratch, from the
 * public module API documentation, and cover only what dedup_redis.so uses.
 *
 * How a module reaches the server: the first word of the RedisModuleCtx
 * passed to RedisModule_OnLoad is a pointer to the server's GetApi function.
 * GetApi("RedisModule_Name", &pointer) stores the address of the named API
 * function into 'pointer' and returns REDISMODULE_OK, or REDISMODULE_ERR when
 * this server does not have it (rm_api_fetch() below treats the optional ones
 * so).  Every API function is therefore a function pointer here, defined
 * once (in the translation unit that defines RM_API_DEFINE) and fetched at
 * load time.
 *
 * Target: Redis 7.0 (Debian 12).  The functions required exist since Redis
 * 6.0 and the type-methods version 3 since 6.2; RedisModule_TryAlloc,
 * RedisModule_GetCommand and RedisModule_SetCommandInfo (7.0), and the ACL
 * category calls (7.2/7.4) are optional
 * (without TryAlloc an allocation failure aborts the server, as
 * RedisModule_Alloc does).
 */
#ifndef DEDUP_REDISMODULE_API_H
#define DEDUP_REDISMODULE_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- Status and versions ------------------------------------------------ */
#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1

/* RedisModuleTypeMethods.version this header lays out (fields through
 * 'defrag'; the server reads only the fields the version says exist). */
#define REDISMODULE_TYPE_METHOD_VERSION 3

/* ---- Key access ----------------------------------------------------------- */
#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_STRING 1
#define REDISMODULE_KEYTYPE_LIST 2
#define REDISMODULE_KEYTYPE_HASH 3
#define REDISMODULE_KEYTYPE_SET 4
#define REDISMODULE_KEYTYPE_ZSET 5
#define REDISMODULE_KEYTYPE_MODULE 6
#define REDISMODULE_KEYTYPE_STREAM 7

/* Reply length to pass to ReplyWithArray when it is set later with
 * ReplySetArrayLength. */
#define REDISMODULE_POSTPONED_ARRAY_LEN -1L

#define REDISMODULE_ERRORMSG_WRONGTYPE \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

/* RedisModule_SetModuleOptions: the module checks RedisModule_IsIOError()
 * after RDB reads instead of letting the server abort on short reads. */
#define REDISMODULE_OPTIONS_HANDLE_IO_ERRORS (1 << 0)

/* aux_save_triggers (unused: no aux data). */
#define REDISMODULE_AUX_BEFORE_RDB (1 << 0)
#define REDISMODULE_AUX_AFTER_RDB (1 << 1)

/* ---- Opaque server objects --------------------------------------------- */
typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleType RedisModuleType;
typedef struct RedisModuleIO RedisModuleIO;
typedef struct RedisModuleDigest RedisModuleDigest;
typedef struct RedisModuleCommand RedisModuleCommand;
typedef struct RedisModuleServerInfoData RedisModuleServerInfoData;

/* ---- Callbacks ---------------------------------------------------------- */
typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

typedef void *(*RedisModuleTypeLoadFunc)(RedisModuleIO *rdb, int encver);
typedef void (*RedisModuleTypeSaveFunc)(RedisModuleIO *rdb, void *value);
typedef void (*RedisModuleTypeRewriteFunc)(RedisModuleIO *aof, RedisModuleString *key,
                                           void *value);
typedef size_t (*RedisModuleTypeMemUsageFunc)(const void *value);
typedef void (*RedisModuleTypeDigestFunc)(RedisModuleDigest *digest, void *value);
typedef void (*RedisModuleTypeFreeFunc)(void *value);
typedef int (*RedisModuleTypeAuxLoadFunc)(RedisModuleIO *rdb, int encver, int when);
typedef void (*RedisModuleTypeAuxSaveFunc)(RedisModuleIO *rdb, int when);
typedef size_t (*RedisModuleTypeFreeEffortFunc)(RedisModuleString *key, const void *value);
typedef void (*RedisModuleTypeUnlinkFunc)(RedisModuleString *key, const void *value);
typedef void *(*RedisModuleTypeCopyFunc)(RedisModuleString *fromkey, RedisModuleString *tokey,
                                         const void *value);
typedef int (*RedisModuleTypeDefragFunc)(void *ctx, RedisModuleString *key, void **value);

/* Layout of the type-methods table, versions 1 to 3, in server order. */
typedef struct RedisModuleTypeMethods {
    uint64_t version;
    /* version 1 */
    RedisModuleTypeLoadFunc rdb_load;
    RedisModuleTypeSaveFunc rdb_save;
    RedisModuleTypeRewriteFunc aof_rewrite;
    RedisModuleTypeMemUsageFunc mem_usage;
    RedisModuleTypeDigestFunc digest;
    RedisModuleTypeFreeFunc free;
    /* version 2 */
    RedisModuleTypeAuxLoadFunc aux_load;
    RedisModuleTypeAuxSaveFunc aux_save;
    int aux_save_triggers;
    /* version 3 */
    RedisModuleTypeFreeEffortFunc free_effort;
    RedisModuleTypeUnlinkFunc unlink;
    RedisModuleTypeCopyFunc copy;
    RedisModuleTypeDefragFunc defrag;
} RedisModuleTypeMethods;

/* ---- Command documentation (Redis 7.0 RedisModule_SetCommandInfo) -------
 * Only the scalar fields are used; history, key specs and args stay NULL
 * (the key position given to CreateCommand remains the key spec). */
typedef struct RedisModuleCommandInfoVersion {
    int version;                /* 1 */
    size_t sizeof_historyentry; /* sizes of the array element structs, */
    size_t sizeof_keyspec;      /* unused here since the arrays are NULL */
    size_t sizeof_arg;
} RedisModuleCommandInfoVersion;

typedef struct RedisModuleCommandInfo {
    const RedisModuleCommandInfoVersion *version;
    const char *summary;
    const char *complexity;
    const char *since;
    void *history;  /* RedisModuleCommandHistoryEntry[] */
    const char *tips;
    int arity;      /* like CreateCommand's -N: at least N arguments */
    void *key_specs; /* RedisModuleCommandKeySpec[] */
    void *args;      /* RedisModuleCommandArg[] */
} RedisModuleCommandInfo;

/* ---- API function pointers ------------------------------------------------ */
#ifdef RM_API_DEFINE
#define RM_API
#else
#define RM_API extern
#endif

RM_API int (*RedisModule_GetApi)(const char *name, void *funcptr);

/* Memory (counted by INFO memory and maxmemory). */
RM_API void *(*RedisModule_Alloc)(size_t bytes);
RM_API void *(*RedisModule_TryAlloc)(size_t bytes); /* 7.0+; NULL on failure */
RM_API void *(*RedisModule_Calloc)(size_t nmemb, size_t size);
RM_API void *(*RedisModule_TryCalloc)(size_t nmemb, size_t size); /* 7.4+; NULL on failure */
RM_API void *(*RedisModule_Realloc)(void *ptr, size_t bytes);
RM_API void (*RedisModule_Free)(void *ptr);

/* Module and commands. */
RM_API void (*RedisModule_SetModuleAttribs)(RedisModuleCtx *ctx, const char *name, int ver,
                                            int apiver);
RM_API int (*RedisModule_IsModuleNameBusy)(const char *name);
RM_API void (*RedisModule_SetModuleOptions)(RedisModuleCtx *ctx, int options);
RM_API int (*RedisModule_CreateCommand)(RedisModuleCtx *ctx, const char *name,
                                        RedisModuleCmdFunc cmdfunc, const char *strflags,
                                        int firstkey, int lastkey, int keystep);
RM_API RedisModuleCommand *(*RedisModule_GetCommand)(RedisModuleCtx *ctx, const char *name);
RM_API int (*RedisModule_SetCommandInfo)(RedisModuleCommand *command,
                                         const RedisModuleCommandInfo *info);
/* Module ACL categories, optional (NULL on servers without them; the
 * Redis module API reference gives RedisModule_SetCommandACLCategories
 * since 7.2 and RedisModule_AddACLCategory since 7.4).  Both are only
 * allowed inside RedisModule_OnLoad.  AddACLCategory creates the category
 * 'name' (REDISMODULE_ERR if the name is invalid or already taken);
 * SetCommandACLCategories puts the command in the space-separated
 * categories (REDISMODULE_ERR if one is unknown). */
RM_API int (*RedisModule_AddACLCategory)(RedisModuleCtx *ctx, const char *name);
RM_API int (*RedisModule_SetCommandACLCategories)(RedisModuleCommand *command,
                                                  const char *categories);
RM_API void (*RedisModule_Log)(RedisModuleCtx *ctx, const char *level, const char *fmt, ...);
RM_API void (*RedisModule_LogIOError)(RedisModuleIO *io, const char *levelstr, const char *fmt,
                                      ...);
RM_API long long (*RedisModule_Milliseconds)(void);
/* Server INFO fields (6.0+; optional: without them the memory guard of
 * rm_mem.c is off).  A NULL context is allowed (no automatic memory). */
RM_API RedisModuleServerInfoData *(*RedisModule_GetServerInfo)(RedisModuleCtx *ctx,
                                                              const char *section);
RM_API void (*RedisModule_FreeServerInfo)(RedisModuleCtx *ctx, RedisModuleServerInfoData *data);
RM_API unsigned long long (*RedisModule_ServerInfoGetFieldUnsigned)(
    RedisModuleServerInfoData *data, const char *field, int *out_err);

/* Replies. */
RM_API int (*RedisModule_WrongArity)(RedisModuleCtx *ctx);
RM_API int (*RedisModule_ReplyWithLongLong)(RedisModuleCtx *ctx, long long ll);
RM_API int (*RedisModule_ReplyWithError)(RedisModuleCtx *ctx, const char *err);
RM_API int (*RedisModule_ReplyWithSimpleString)(RedisModuleCtx *ctx, const char *msg);
RM_API int (*RedisModule_ReplyWithArray)(RedisModuleCtx *ctx, long len);
RM_API void (*RedisModule_ReplySetArrayLength)(RedisModuleCtx *ctx, long len);
RM_API int (*RedisModule_ReplyWithStringBuffer)(RedisModuleCtx *ctx, const char *buf,
                                                size_t len);
RM_API int (*RedisModule_ReplyWithNull)(RedisModuleCtx *ctx);
RM_API int (*RedisModule_ReplyWithDouble)(RedisModuleCtx *ctx, double d);
RM_API int (*RedisModule_ReplicateVerbatim)(RedisModuleCtx *ctx);
/* fmt letters as RedisModule_EmitAOF's below. */
RM_API int (*RedisModule_Replicate)(RedisModuleCtx *ctx, const char *cmdname, const char *fmt, ...);

/* Strings. */
RM_API const char *(*RedisModule_StringPtrLen)(const RedisModuleString *str, size_t *len);
RM_API int (*RedisModule_StringToLongLong)(const RedisModuleString *str, long long *ll);
RM_API int (*RedisModule_StringToDouble)(const RedisModuleString *str, double *d);

/* Keys and module types. */
RM_API RedisModuleKey *(*RedisModule_OpenKey)(RedisModuleCtx *ctx, RedisModuleString *keyname,
                                              int mode);
RM_API void (*RedisModule_CloseKey)(RedisModuleKey *key);
RM_API int (*RedisModule_KeyType)(RedisModuleKey *key);
RM_API int (*RedisModule_DeleteKey)(RedisModuleKey *key);
RM_API RedisModuleType *(*RedisModule_CreateDataType)(RedisModuleCtx *ctx, const char *name,
                                                      int encver,
                                                      RedisModuleTypeMethods *typemethods);
RM_API int (*RedisModule_ModuleTypeSetValue)(RedisModuleKey *key, RedisModuleType *mt,
                                             void *value);
RM_API RedisModuleType *(*RedisModule_ModuleTypeGetType)(RedisModuleKey *key);
RM_API void *(*RedisModule_ModuleTypeGetValue)(RedisModuleKey *key);

/* RDB and AOF. */
RM_API void (*RedisModule_SaveUnsigned)(RedisModuleIO *io, uint64_t value);
RM_API uint64_t (*RedisModule_LoadUnsigned)(RedisModuleIO *io);
RM_API void (*RedisModule_SaveStringBuffer)(RedisModuleIO *io, const char *str, size_t len);
/* The returned buffer is RedisModule_Alloc'ed; release with RedisModule_Free. */
RM_API char *(*RedisModule_LoadStringBuffer)(RedisModuleIO *io, size_t *lenptr);
RM_API void (*RedisModule_SaveDouble)(RedisModuleIO *io, double value);
RM_API double (*RedisModule_LoadDouble)(RedisModuleIO *io);
RM_API int (*RedisModule_IsIOError)(RedisModuleIO *io);
/* fmt letters: 's' RedisModuleString*, 'c' C string, 'b' buffer + size_t,
 * 'l' long long. */
RM_API void (*RedisModule_EmitAOF)(RedisModuleIO *io, const char *cmdname, const char *fmt, ...);

#undef RM_API

/* Fetches every pointer above.  Returns REDISMODULE_ERR if a required one is
 * missing; optional ones are left NULL.  Call first thing in
 * RedisModule_OnLoad; the string calls work from then on, so the module
 * arguments can be read before the module is named. */
int rm_api_fetch(RedisModuleCtx *ctx);
/* Names the module (MODULE LIST); REDISMODULE_ERR if the name is taken. */
int rm_api_register(RedisModuleCtx *ctx, const char *name, int ver, int apiver);

#endif /* DEDUP_REDISMODULE_API_H */
