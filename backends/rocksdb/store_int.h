/*
 * store_int.h - the store object and the helpers its files share
 * (store.c: open, options, decide; pending.c: the keys recorded since the
 * last ingestion, their log, and the ingestion itself).
 */
#ifndef DEDUP_STORE_INT_H
#define DEDUP_STORE_INT_H

#include "dedup/store.h"

#include "rdb_lazy.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MARKER_KEY "store"
#define COUNT_KEY "count"
#define META_CF "dedup"
#define MARKER_LEN 40u
#define NO_SLOT UINT32_MAX

static const char marker_magic[8] = {'D', 'D', 'U', 'P', 'S', 'T', 'O', 'R'};

/* One recorded key waiting for the next ingestion, and its write time.  A
 * key of at most 16 bytes (every digest) is held in the entry itself, as
 * two big-endian words, so sorting and comparing never leave the entries;
 * a longer one has its bytes in the arena at 'rest'. */
typedef struct ddr_entry {
    uint64_t pfx;  /* bytes 0..7, big-endian, zero-padded */
    uint64_t rest; /* bytes 8..15 likewise, or the arena offset of a longer key */
    uint32_t len;
    uint32_t ts;
} ddr_entry;

/* The key bytes of entry e (into buf[16] when held inline). */
static inline const unsigned char *ddr_entry_key(const unsigned char *arena, const ddr_entry *e,
                                                 unsigned char buf[16])
{
    if (e->len > 16)
        return arena + e->rest;
    for (int i = 0; i < 8; i++) {
        buf[i] = (unsigned char)(e->pfx >> (56 - 8 * i));
        buf[8 + i] = (unsigned char)(e->rest >> (56 - 8 * i));
    }
    return buf;
}

/* Bytes from..from+7 of a key as a big-endian word, zero-padded. */
static inline uint64_t ddr_be_word(const char *k, size_t len, size_t from)
{
    uint64_t w = 0;
    for (size_t i = from; i < from + 8; i++)
        w = w << 8 | (i < len ? (unsigned char)k[i] : 0);
    return w;
}

/* A key of a lookup, in RocksDB's order (store.c sorts a chunk's keys so
 * MultiGet takes them as sorted_input). */
typedef struct ddr_ord {
    uint64_t pfx, rest; /* ddr_be_word at 0 and 8 */
    const char *k;
    uint32_t len, i;    /* i: the key's place in the caller's order */
} ddr_ord;

typedef struct ddr_pending {
    unsigned char *arena;             /* the bytes of keys longer than 16 */
    size_t used, cap;
    ddr_entry *e;                     /* in recording order */
    size_t n, ecap;
    uint64_t added;                   /* committed NEW answers since the last ingestion */
    uint64_t uadded;                  /* NEW answers since the last commit */
    size_t committed;                 /* entries [0, committed) are committed */
    uint64_t seq;                     /* the next log record's number */
    uint64_t log_bytes;               /* the log's length through its last record */
    uint64_t recovered;               /* keys replayed from a log at open */
    uint64_t torn_bytes;              /* bytes of a torn last record ignored at open */
    uint32_t *table;                  /* DDR_PENDING_SLOTS entry indices, NO_SLOT empty */
    unsigned char *logbuf;            /* one chunk's log record */
    size_t loglen, logcap;
    int log_fd;                       /* sync BATCH: DIR/DDR_LOG_NAME; else -1 */
    uint64_t gen;                     /* this log's generation */
    uint64_t ingested;                /* the last generation counted in 'count' */
} ddr_pending;

/* An ingestion every DDR_PENDING_KEYS keys or DDR_PENDING_BYTES of key
 * bytes: one sorted table file of ~2 M digests (~60 MB) per ingestion, so
 * level 0 sees few files; the table below holds them at load <= 1/2. */
#define DDR_PENDING_KEYS (1u << 21)
#define DDR_PENDING_BYTES (64u << 20)
#define DDR_PENDING_SLOTS (1u << 22)
/* Table options for point reads of random digests (reasons in store.h). */
#define DDR_BLOCK_SIZE (16u << 10)
#define DDR_DIGEST_COMPRESSION rocksdb_lz4_compression
#define DDR_LOG_NAME "dedup-pending.log"
#define DDR_SST_NAME "dedup-ingest.sst"
#define INGEST_KEY "ingested"
#define IDENTITY_KEY "identity"

struct dedup_store {
    dedup_allocator a;
    rocksdb_t *db;
    rocksdb_options_t *opt, *meta_opt;
    rocksdb_block_based_table_options_t *topt;
    rocksdb_cache_t *cache;
    rocksdb_compactionfilter_t *cfilter;
    rocksdb_column_family_handle_t *cf_keys, *cf_meta;
    rocksdb_readoptions_t *ro, *ro_scan;
    rocksdb_writeoptions_t *wo;
    char *dir;
    int lock_fd;                      /* DIR/dedup.lock, flock()ed; -1 read-only */
    bool read_only;
    dedup_store_keys keys;
    dedup_store_sync sync;
    bool caller_commits;
    bool failed;                      /* caller_commits: a decide/record failed */
    uint64_t seed, expire;
    uint64_t block_cache;             /* bytes */
    unsigned read_threads;            /* 1 or 2 (params.read_threads) */
    int64_t (*clock)(void *ctx);
    void *clock_ctx;
    uint64_t count;
    /* stats of this object's life (mutable from const queries) */
    uint64_t lookups, writes, expired;
    /* chunk scratch */
    unsigned char *kbuf;              /* 16 bytes per key in digest mode */
    const char **kptr;
    size_t *klen;
    rocksdb_pinnableslice_t **vals;
    char **errs;
    ddr_ord *ord;                     /* a lookup's keys, sorted */
    const char **sptr;                /* ... as MultiGet takes them */
    size_t *slen;
    /* sync BATCH and NONE: the keys recorded since the last ingestion
     * (pending.c) */
    ddr_pending pend;
    uint32_t *qidx;                   /* chunk keys that need a store read */
    const char **qptr;
    size_t *qlen;
    char identity[DEDUP_STORE_IDENTITY_MAX + 1];
    bool identity_adopted;
    char err[512];
};

/* ---- small helpers ------------------------------------------------------- */

static inline void *xmalloc(const dedup_allocator *a, size_t n)
{
    return a->malloc_fn ? a->malloc_fn(a->ctx, n) : malloc(n);
}

static inline void xfree(const dedup_allocator *a, void *p)
{
    if (!p)
        return;
    if (a->free_fn)
        a->free_fn(a->ctx, p);
    else
        free(p);
}

static inline void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline int64_t store_now(const dedup_store *s)
{
    return s->clock ? s->clock(s->clock_ctx) : (int64_t)time(NULL);
}

static inline dedup_status take_error(dedup_store *s, char *e)
{
    snprintf(s->err, sizeof s->err, "%s: %s", s->dir, e);
    free(e); /* RocksDB's strings come from malloc */
    return DEDUP_ERR_IO;
}

static inline bool value_expired(const dedup_store *s, const char *v, size_t vlen, int64_t now)
{
    if (!s->expire || vlen < 4)
        return false;
    int64_t t = (int64_t)get_u32((const unsigned char *)v);
    return now - t >= (int64_t)s->expire;
}


/* store.c: opens the store in 'dir' ('fresh': creates it there). */
dedup_status ddr_open_dir(const dedup_store_params *p, const dedup_allocator *alloc,
                          const char *dir, bool fresh, dedup_store **out, char *why, size_t cap);

/* create.c */
dedup_status ddr_take_lock(dedup_store *s, char *why, size_t cap);
dedup_status ddr_random_seed(uint64_t *seed, const char *dir, char *why, size_t cap);
dedup_status ddr_create_store(const dedup_store_params *p, const dedup_allocator *alloc,
                              char *why, size_t cap);

/* sst_check.c: checks, before RocksDB opens them, the blocks of DIR's table
 * files that RocksDB parses before checking them (the metaindex and
 * properties blocks); DEDUP_ERR_CORRUPT naming the file if one is damaged. */
dedup_status ddr_check_tables(const char *dir, char *why, size_t cap);
/* The table files of 'dir' whose global sequence number was written in
 * place by an ingestion (8 bytes no checksum covers), as "A.sst, B.sst" in
 * out ("" for none): the suspects when RocksDB finds one that disagrees
 * with the MANIFEST, which it names instead. */
void ddr_rewritten_tables(const char *dir, char *out, size_t cap);

/* pending.c */
dedup_status ddr_pending_open(dedup_store *s);
void ddr_pending_free(dedup_store *s);
size_t ddr_pending_memory(const dedup_store *s);
/* The index of the pending entry holding key (k, len) of hash h, or NO_SLOT. */
uint32_t ddr_pending_find(const dedup_store *s, const char *k, size_t len, uint64_t h);
/* Records (k, len) at time ts: a new entry, or a fresh time for one there. */
dedup_status ddr_pending_put(dedup_store *s, const char *k, size_t len, uint64_t h, uint32_t ts);
/* After a chunk of decide() or record(): commits it unless the caller
 * commits (params.caller_commits), and then even so when the pending
 * table nears its room. */
dedup_status ddr_pending_chunk_done(dedup_store *s);
/* Writes the pending keys as one sorted table file and ingests it. */
dedup_status ddr_pending_ingest(dedup_store *s);
bool ddr_pending_full(const dedup_store *s);

#endif
