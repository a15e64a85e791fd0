/* rdb_lazy.c - loads librocksdb on the first store opened (see rdb_lazy.h). */
#define _GNU_SOURCE
#define RDB_LAZY_NO_MACROS
#include "rdb_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef DDR_ROCKSDB_SONAME
#define DDR_ROCKSDB_SONAME "librocksdb.so"
#endif

ddr_rdb_api ddr_rdb;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error; /* NULL once loaded */
static char load_msg[512];

static void load(void)
{
    void *h = dlopen(DDR_ROCKSDB_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(load_msg, sizeof load_msg, "cannot load RocksDB (%s): %s", DDR_ROCKSDB_SONAME,
                 e ? e : "not found");
        load_error = load_msg;
        return;
    }
    /* Through memcpy: ISO C has no conversion from dlsym's object pointer
     * to a function pointer. */
#define RDB_RESOLVE(f)                                                                      \
    {                                                                                       \
        void *p = dlsym(h, #f);                                                             \
        if (!p) {                                                                           \
            snprintf(load_msg, sizeof load_msg, "cannot load RocksDB (%s): no function %s", \
                     DDR_ROCKSDB_SONAME, #f);                                               \
            load_error = load_msg;                                                          \
            return; /* the handle stays open: nothing else may unload it */                 \
        }                                                                                   \
        memcpy(&ddr_rdb.f, &p, sizeof p);                                                   \
    }
    RDB_FUNCS(RDB_RESOLVE)
#undef RDB_RESOLVE
    load_error = NULL;
}

const char *ddr_rdb_load(void)
{
    if (pthread_once(&once, load) != 0)
        return "cannot load RocksDB: pthread_once failed";
    return load_error;
}
