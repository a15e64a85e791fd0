/*
 * module.c - dedup_redis.so: RedisBloom-compatible BF.* and CF.* commands
 * and expiring DEDUP.* filters on top of libdedup (module.h names the
 * files).  This file loads the module (arguments, data types, commands)
 * and holds what every command shares: key lookup and creation, argument
 * parsing and the allocator hook.  The values live in rm_*.c (no Redis
 * there).
 */
#include "module.h"

#include "dedup/format.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define CALLOC_FRESH ((size_t)1 << 20) /* from here the allocator maps fresh pages */
#define MODULE_VERSION (DEDUP_VERSION_MAJOR * 10000 + DEDUP_VERSION_MINOR * 100 + DEDUP_VERSION_PATCH)

family BF = {RMF_BLOOM, "BF.LOADCHUNK", NULL, NULL};
family CF = {RMF_CUCKOO, "CF.LOADCHUNK", NULL, NULL};
family DD = {RMF_DEDUP, "DEDUP.LOADCHUNK", NULL, NULL};

rmf_config config;

/* The memory guard's probe (rm_mem.c): used_memory and maxmemory from the
 * server's INFO memory, the machine's memory without a maxmemory. */
static bool server_memory(uint64_t *used, uint64_t *limit, bool *is_max)
{
    if (!RedisModule_GetServerInfo || !RedisModule_ServerInfoGetFieldUnsigned ||
        !RedisModule_FreeServerInfo)
        return false;
    RedisModuleServerInfoData *d = RedisModule_GetServerInfo(NULL, "memory");
    if (!d)
        return false;
    int e1 = REDISMODULE_ERR, e2 = REDISMODULE_ERR;
    unsigned long long u = RedisModule_ServerInfoGetFieldUnsigned(d, "used_memory", &e1);
    unsigned long long m = RedisModule_ServerInfoGetFieldUnsigned(d, "maxmemory", &e2);
    RedisModule_FreeServerInfo(NULL, d);
    if (e1 != REDISMODULE_OK)
        return false;
    *used = u;
    *is_max = e2 == REDISMODULE_OK && m > 0;
    *limit = *is_max ? m : rmf_mem_phys_bytes();
    return true;
}

/* ---- allocator hook: all library memory through RedisModule_TryAlloc, within
 * the server's maxmemory (rm_mem.c) ------------------------------------------- */
void *hook_malloc(void *ctx, size_t n)
{
    (void)ctx;
    if (!rmf_mem_allow(n))
        return NULL;
    return RedisModule_TryAlloc ? RedisModule_TryAlloc(n) : RedisModule_Alloc(n);
}
static void hook_free(void *ctx, void *p)
{
    (void)ctx;
    RedisModule_Free(p);
}
/* Zeroed memory without writing it: for a large request the server's
 * allocator hands out fresh pages that the kernel zeroes when first
 * touched, so a filter of any size is created in constant time and its
 * pages are paid for by the commands that use them.  RedisModule_TryCalloc
 * (Redis 7.4+) fails with NULL; older servers have only RedisModule_Calloc,
 * which aborts the server on failure, so the request is first tried with
 * RedisModule_TryAlloc and released: what just succeeded is then taken
 * again, from the extent the allocator has just got back.  Small requests
 * are zeroed by hand. */
static void *hook_calloc(void *ctx, size_t count, size_t size)
{
    (void)ctx;
    if (size && count > SIZE_MAX / size)
        return NULL;
    size_t n = count * size;
    if (!rmf_mem_allow(n))
        return NULL;
    if (RedisModule_TryCalloc)
        return RedisModule_TryCalloc(count, size);
    if (n >= CALLOC_FRESH && RedisModule_TryAlloc) {
        void *probe = RedisModule_TryAlloc(n);
        if (!probe)
            return NULL;
        RedisModule_Free(probe);
        return RedisModule_Calloc(count, size);
    }
    void *p = RedisModule_TryAlloc ? RedisModule_TryAlloc(n) : RedisModule_Alloc(n);
    if (p)
        memset(p, 0, n);
    return p;
}
const dedup_allocator ALLOC = {hook_malloc, hook_calloc, NULL, hook_free, NULL};

rm_value *value_new(void)
{
    rm_value *v = hook_malloc(NULL, sizeof *v);
    if (v)
        v->obj = NULL, v->partial = NULL, v->dump = NULL, v->dump_tag = 0;
    return v;
}

void value_free(void *p)
{
    rm_value *v = p;
    if (!v)
        return;
    rmf_free(v->obj);
    rmf_partial_free(v->partial);
    if (v->dump)
        RedisModule_Free(v->dump);
    RedisModule_Free(v);
}

/* ---- key lookup ------------------------------------------------------------- */
key_status lookup(RedisModuleKey *key, const family *f, rm_value **out)
{
    *out = NULL;
    if (!key)
        return K_EMPTY;
    int t = RedisModule_KeyType(key);
    if (t == REDISMODULE_KEYTYPE_EMPTY)
        return K_EMPTY;
    if (t != REDISMODULE_KEYTYPE_MODULE)
        return K_WRONGTYPE;
    RedisModuleType *mt = RedisModule_ModuleTypeGetType(key);
    if (mt != f->type && (!f->rb_type || mt != f->rb_type))
        return K_WRONGTYPE;
    *out = RedisModule_ModuleTypeGetValue(key);
    return K_OK;
}

/* Opens 'name' and finds a complete filter of family f.  Replies with an
 * error and returns NULL unless one is there; with 'missing_ok' an empty
 * key returns NULL without replying (*empty set). */
rmf_obj *open_obj(RedisModuleCtx *ctx, RedisModuleString *name, const family *f, int mode,
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
    if (!v->obj || rmf_loading(v->obj)) {
        RedisModule_ReplyWithError(ctx, ERR_LOADING);
        return NULL;
    }
    return v->obj;
}

void close_key(RedisModuleKey *key)
{
    if (key)
        RedisModule_CloseKey(key);
}

RedisModuleType *type_for(const family *f, const rmf_obj *o)
{
    return o && rmf_is_redisbloom(o) && f->rb_type ? f->rb_type : f->type;
}

/* Stores a new object under an empty key; frees it and returns -1 on
 * failure. */
int store_new(RedisModuleKey *key, const family *f, rmf_obj *o)
{
    rm_value *v = value_new();
    if (!v) {
        rmf_free(o);
        return -1;
    }
    v->obj = o;
    if (RedisModule_ModuleTypeSetValue(key, type_for(f, o), v) != REDISMODULE_OK) {
        value_free(v);
        return -1;
    }
    return 0;
}

/* Creates a family's object from its parameters (the rmf_*_create calls,
 * with this module's config and allocator). */
rmf_err create_bf(const void *p, rmf_obj **o) { return rmf_bf_create(p, &config, &ALLOC, o); }
rmf_err create_cf(const void *p, rmf_obj **o) { return rmf_cf_create(p, &config, &ALLOC, o); }
rmf_err create_dd(const void *p, rmf_obj **o) { return rmf_dd_create(p, &config, &ALLOC, o); }

/* Creates an object and stores it under the empty key. */
static rmf_err create_stored(RedisModuleKey *key, const family *f, create_fn create,
                             const void *params, rmf_obj **o)
{
    rmf_err e = create(params, o);
    if (!e && store_new(key, f, *o) != 0)
        e = rmf_err_nomem();
    return e;
}

/* The *.RESERVE commands: a new object under a key that must not exist;
 * replies OK (and replicates) or the error. */
int reserve_new(RedisModuleCtx *ctx, RedisModuleString *name, const family *f,
                       create_fn create, const void *params)
{
    return reserve_new_ex(ctx, name, f, create, params, NULL);
}

int reserve_new_ex(RedisModuleCtx *ctx, RedisModuleString *name, const family *f, create_fn create,
                   const void *params, int *created)
{
    if (created)
        *created = 0;
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
    if (created)
        *created = 1; /* the caller replicates */
    else
        RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* The object under 'name' for writing; an empty key gets a new one when
 * 'create' is given (BF.ADD, CF.ADD and the like), else ERR_NOT_FOUND.
 * NULL once the error has been replied; the caller closes *keyp. */
rmf_obj *open_or_create(RedisModuleCtx *ctx, RedisModuleString *name, const family *f,
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
int arg_is(RedisModuleString *s, const char *word)
{
    size_t n;
    const char *p = RedisModule_StringPtrLen(s, &n);
    return n == strlen(word) && strncasecmp(p, word, n) == 0;
}

int arg_ll(RedisModuleString *s, long long *v)
{
    return RedisModule_StringToLongLong(s, v) == REDISMODULE_OK;
}

int arg_double(RedisModuleString *s, double *v)
{
    return RedisModule_StringToDouble(s, v) == REDISMODULE_OK && !isnan(*v);
}

size_t value_memory(const rm_value *v)
{
    return sizeof *v + (v->obj ? rmf_memory_usage(v->obj) : 0) +
           (v->partial ? rmf_partial_memory_usage(v->partial) : 0);
}


/* ==== module load ========================================================================= */


/* Module arguments, NAME VALUE pairs (README.md lists them). */
static char module_name[64] = "dedup";
static int redisbloom_types = 1;

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
        size_t vlen;
        const char *val = RedisModule_StringPtrLen(argv[i + 1], &vlen);
        const char *name = RedisModule_StringPtrLen(argv[i], NULL);
        if (arg_is(argv[i], "ERROR_RATE") && is_d && d > 0 && d < 1)
            config.bf_error_rate = d;
        else if ((arg_is(argv[i], "INITIAL_SIZE") || arg_is(argv[i], "CAPACITY")) && is_ll && ll > 0)
            config.bf_initial_size = (uint64_t)ll;
        else if (arg_is(argv[i], "EXPANSION") && is_ll && ll >= 1 && ll <= UINT32_MAX)
            config.bf_expansion = (uint32_t)ll;
        else if (arg_is(argv[i], "CF_INITIAL_SIZE") && is_ll && ll >= 1)
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
        else if (arg_is(argv[i], "MAX_MEMORY") && is_ll && (ll == 0 || ll >= 1024))
            config.max_memory = ll == 0 ? UINT64_MAX : (uint64_t)ll;
        else if (arg_is(argv[i], "MAX_CAPACITY") && is_ll && ll >= 0)
            config.max_capacity = ll == 0 ? UINT64_MAX : (uint64_t)ll;
        else if (arg_is(argv[i], "MODULE_NAME") && vlen >= 1 && vlen < sizeof module_name &&
                 strspn(val, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
                     vlen) {
            memcpy(module_name, val, vlen);
            module_name[vlen] = 0;
        } else if (arg_is(argv[i], "REDISBLOOM_TYPES") &&
                   (arg_is(argv[i + 1], "yes") || arg_is(argv[i + 1], "no")))
            redisbloom_types = arg_is(argv[i + 1], "yes");
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
    {"bf.debug", bf_debug, "readonly", "One line for the filter (size:items) and one per link, as RedisBloom's", "O(filters)", 2},
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
    {"cf.debug", cf_debug, "readonly", "One line: bucket size, buckets, items, deletes, filters, max iterations, expansion", "O(1)", 2},
    {"cf.compact", cf_compact, "write", "Moves items into older sub-filters where they fit and frees emptied ones; resets the deletes count", "O(n)", 2},
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

/* ---- ACL categories ----------------------------------------------------------
 * Where the server has module ACL categories, each family gets one, named as
 * RedisBloom names its own (bloom, cuckoo) plus dedup, so that an operator
 * can grant "+@bloom".  Servers without them (Redis 7.0) leave the pointers
 * NULL: nothing is registered and the load notice says so. */
enum { CAT_BLOOM, CAT_CUCKOO, CAT_DEDUP, CAT_COUNT };
static const char *const CATEGORY[CAT_COUNT] = {"bloom", "cuckoo", "dedup"};
static int category_added[CAT_COUNT];

static int category_of(const char *cmd)
{
    return strncmp(cmd, "bf.", 3) == 0 ? CAT_BLOOM : strncmp(cmd, "cf.", 3) == 0 ? CAT_CUCKOO : CAT_DEDUP;
}

/* Adds the categories this server can take; writes the load notice's words
 * into 'note'. */
static void add_categories(RedisModuleCtx *ctx, char *note, size_t cap)
{
    if (!RedisModule_AddACLCategory || !RedisModule_SetCommandACLCategories ||
        !RedisModule_GetCommand) {
        snprintf(note, cap, "none (this server has no module ACL categories)");
        return;
    }
    size_t n = 0;
    note[0] = 0;
    for (int i = 0; i < CAT_COUNT; i++) {
        category_added[i] = RedisModule_AddACLCategory(ctx, CATEGORY[i]) == REDISMODULE_OK;
        int w = snprintf(note + n, cap - n, "%s%s%s", i ? ", " : "", CATEGORY[i],
                         category_added[i] ? "" : " (refused)");
        if (w > 0 && (size_t)w < cap - n)
            n += (size_t)w;
    }
}

/* Puts a created command in its family's category, if that was added. */
static void set_category(RedisModuleCtx *ctx, const command *c)
{
    int cat = category_of(c->name);
    if (!category_added[cat])
        return;
    RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, c->name);
    if (!cmd || RedisModule_SetCommandACLCategories(cmd, CATEGORY[cat]) != REDISMODULE_OK)
        RedisModule_Log(ctx, "warning", "dedup: %s left out of ACL category %s", c->name,
                        CATEGORY[cat]);
}

static RedisModuleType *create_type(RedisModuleCtx *ctx, const char *name, int encver,
                                    RedisModuleTypeLoadFunc load, RedisModuleTypeSaveFunc save,
                                    RedisModuleTypeRewriteFunc aof)
{
    RedisModuleTypeMethods tm;
    memset(&tm, 0, sizeof tm);
    tm.version = REDISMODULE_TYPE_METHOD_VERSION;
    tm.rdb_load = load;
    tm.rdb_save = save;
    tm.aof_rewrite = aof;
    tm.mem_usage = mem_usage;
    tm.free = value_free;
    tm.copy = copy_value;
    return RedisModule_CreateDataType(ctx, name, encver, &tm);
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (rm_api_fetch(ctx) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    rmf_config_init(&config);
    rmf_mem_set_probe(server_memory);
    /* The arguments first: MODULE_NAME decides the name to register. */
    int parsed = parse_config(ctx, argv, argc);
    if (rm_api_register(ctx, module_name, MODULE_VERSION, REDISMODULE_APIVER_1) != REDISMODULE_OK ||
        parsed != REDISMODULE_OK)
        return REDISMODULE_ERR;
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);

    /* Type names are 9 characters; the encoding versions: module.h. */
    int ver = (int)DEDUP_FORMAT_VERSION;
    BF.type = create_type(ctx, "dedup-BF1", ver, bf_rdb_load, rdb_save, bf_aof);
    CF.type = create_type(ctx, "dedup-CF1", ver, cf_rdb_load, rdb_save, cf_aof);
    DD.type = create_type(ctx, "dedup-DD1", RM_DD_ENCVER, dd_rdb_load, rdb_save, dd_aof);
    if (!BF.type || !CF.type || !DD.type)
        return REDISMODULE_ERR;
    /* RedisBloom's own type names and encodings: its RDB files load, and
     * keys in its layout are saved so that RedisBloom can load them back. */
    if (redisbloom_types) {
        BF.rb_type = create_type(ctx, "MBbloom--", RB_BF_ENCVER, rb_bf_rdb_load, rb_rdb_save, bf_aof);
        CF.rb_type = create_type(ctx, "MBbloomCF", RB_CF_ENCVER, rb_cf_rdb_load, rb_rdb_save, cf_aof);
        if (!BF.rb_type || !CF.rb_type)
            return REDISMODULE_ERR;
    }

    char categories[160];
    add_categories(ctx, categories, sizeof categories);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
        if (RedisModule_CreateCommand(ctx, COMMANDS[i].name, COMMANDS[i].fn, COMMANDS[i].flags, 1,
                                      1, 1) != REDISMODULE_OK)
            return REDISMODULE_ERR;
        set_docs(ctx, &COMMANDS[i]);
        set_category(ctx, &COMMANDS[i]);
    }
    RedisModule_Log(ctx, "notice",
                    "dedup %s loaded as '%s' (error_rate %g, initial_size %llu, expansion %u, "
                    "max_memory %llu bytes per key (0: none), RedisBloom types %s%s; ACL categories: %s)",
                    DEDUP_VERSION_STRING, module_name, config.bf_error_rate,
                    (unsigned long long)config.bf_initial_size, config.bf_expansion,
                    (unsigned long long)(config.max_memory == UINT64_MAX ? 0 : config.max_memory),
                    redisbloom_types ? "registered" : "off",
                    RedisModule_TryAlloc ? "" : "; no TryAlloc: allocation failure aborts",
                    categories);
    return REDISMODULE_OK;
}

