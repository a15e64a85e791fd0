/*
 * redis/rm_filter.h - the values the Redis module stores under a key, with
 * no dependency on Redis: Bloom (BF.*), cuckoo (CF.*) and expiring dedup
 * (DEDUP.*) objects, their serialized form (used by RDB, SCANDUMP/LOADCHUNK
 * and AOF rewrite) and the incremental chunk loader.  Compiled into the
 * module and, without Redis, into fuzz/fuzz_redis_chunks.c.
 *
 * Serialized form ("envelope"), all integers little-endian:
 *
 *   offset size field
 *   0      4    magic "DDRM"
 *   4      1    kind: 1 Bloom, 2 cuckoo, 3 expiring dedup
 *   5      1    envelope version: 3 for DEDUP values on the library
 *               window, 2 for every other value (1 is still read: see
 *               below; a DEDUP value in version 2 is one saved before the
 *               window, read by legacy/rm_dedup_legacy.c)
 *   6      2    flags: bit 0 NONSCALING (Bloom), bit 1 EXACT (dedup); others zero
 *   8      8    items inserted
 *   16     8    items deleted (cuckoo), else 0
 *   24     8    capacity asked for at creation
 *   32     8    error rate asked for (f64 bit pattern; 0 for cuckoo)
 *   40     4    expansion
 *   44     4    bucket size (cuckoo), else 0
 *   48     4    max iterations (cuckoo) / generations (dedup; v2: approximate only) /
 *               split schedule (Bloom, 2: rm_bloom.c), else 0
 *   52     4    number of blobs that follow, N (dedup v3: 1, or for an
 *               EXACT value its parts, 1 to 65536)
 *   56     8    window length in ms (dedup) / items in the newest link
 *               (Bloom), else 0
 *   64     8    slot index of the newest generation (dedup v2), else 0
 *   72     8    total length B of the N blobs
 *   80     8    checksum of bytes [0, 80): the low 64 bits of dedup_hash()
 *               (XXH3-128, seed 0) of those bytes
 *   88     B    N blobs, back to back: Bloom, one classic Bloom container
 *               (docs/FORMAT.md type 2) per link, oldest first (version 1:
 *               one scalable Bloom container, type 6, converted to links on
 *               load); cuckoo, one cuckoo container (type 5
 *               or 11); dedup v3, one time window container (docs/FORMAT.md
 *               type WINDOW: sliding, refresh, no lateness, window_ms as
 *               its duration, EXACT as its mode, the generations above;
 *               the value's seed, the same in every part) per part: an
 *               item lives in part reduce(digest.hi, N);
 *               dedup v2 (legacy/rm_dedup_legacy.c): approximate, one scalable
 *               chain of blocked Bloom (type 6) per generation, in slot
 *               order; EXACT, the table blob (magic "DDEX", entries, XXH3-64)
 *
 * Every field is checked against its legal range and against the module's
 * limits before anything is allocated; each blob is loaded by the library's
 * own validating loader (checksum included), or by the EXACT table's, which
 * checks its sizes before allocating, every entry and its checksum; then
 * the blobs are checked for consistency with the envelope.  A load either yields a complete object or
 * an error message, never a partial object.
 *
 * Not thread-safe: Redis calls the module from one thread (the fork child
 * of BGSAVE works on its own copy).
 */
#ifndef DEDUP_RM_FILTER_H
#define DEDUP_RM_FILTER_H

#include "dedup/bloom.h"
#include "dedup/common.h"
#include "dedup/format.h"

#include <stdbool.h>
#include <stdint.h>

#define RMF_ENVELOPE_SIZE 88u
#define RMF_ENVELOPE_VERSION 2u
#define RMF_ENVELOPE_DD_WINDOW 3u /* DEDUP values on the library window */

typedef enum rmf_kind { RMF_BLOOM = 1, RMF_CUCKOO = 2, RMF_DEDUP = 3 } rmf_kind;

/* Module-wide defaults and ceilings (module arguments). */
typedef struct rmf_config {
    double bf_error_rate;        /* ERROR_RATE, default 0.01 */
    uint64_t bf_initial_size;    /* INITIAL_SIZE, default 100 */
    uint32_t bf_expansion;       /* EXPANSION, default 2 */
    uint64_t cf_initial_size;    /* CF_INITIAL_SIZE, default 1024 */
    uint32_t cf_bucket_size;     /* CF_BUCKET_SIZE, default 4 */
    uint32_t cf_max_iterations;  /* CF_MAX_ITERATIONS, default 500 */
    uint32_t cf_expansion;       /* default 1 */
    uint32_t cf_max_expansions;  /* CF_MAX_EXPANSIONS: max sub-filters, default 32 */
    double cf_error_rate;        /* CF_ERROR_RATE: picks the fingerprint size, 0.01 */
    uint64_t max_memory;         /* MAX_MEMORY: bytes per key, default none (UINT64_MAX) */
    uint64_t max_capacity;       /* MAX_CAPACITY: items per reserve, default none */
} rmf_config;

void rmf_config_init(rmf_config *c);

typedef struct rmf_obj rmf_obj;

/* Result of an operation: 0 = OK, otherwise an error text for the reply
 * ("ERR ..."), constant storage. */
typedef const char *rmf_err;

/* RedisBloom 2.4's texts (its src/rebloom.c) for a Bloom filter it cannot
 * create: an error rate outside (0, 1) in BF.RESERVE (with its trailing
 * space), and a filter too large to create in BF.RESERVE, BF.INSERT or
 * BF.ADD. */
#define ERR_BF_RATE_RANGE "ERR (0 < error rate range < 1) "
#define ERR_BF_CREATE "ERR could not create filter"

/* ---- the server's memory guard (rm_mem.c) ----------------------------------
 * rmf_mem_allow(n): false when an allocation of n bytes (1 MiB or more)
 * would take the server's used_memory past maxmemory, or past the machine's
 * physical memory without one; smaller requests always pass.  The module's
 * allocator asks it before every allocation.
 * rmf_mem_room(): the bytes the server may still allocate by that rule
 * (UINT64_MAX when it cannot tell, or while loading).
 * rmf_mem_unguarded(on): guard off while a value loads (RDB, RESTORE: Redis
 * loads past maxmemory) or saves (RDB, AOF rewrite, often in a fork child,
 * where a refusal would cut the value short); nested calls counted.
 * rmf_err_nomem(): the reply for an allocation failure, naming the limit
 * when the guard refused it (text valid until the next refusal). */
/* The server's used memory and its limit (maxmemory when set, *is_max
 * true; else the machine's); false when it cannot tell. */
typedef bool rmf_mem_probe_fn(uint64_t *used, uint64_t *limit, bool *is_max);
void rmf_mem_set_probe(rmf_mem_probe_fn *fn);
uint64_t rmf_mem_phys_bytes(void); /* UINT64_MAX when unknown */
bool rmf_mem_allow(size_t n);
uint64_t rmf_mem_room(void);
void rmf_mem_unguarded(bool on);
rmf_err rmf_err_nomem(void);

/* ---- Bloom ---------------------------------------------------------------- */
typedef struct rmf_bf_params {
    double error_rate;
    uint64_t capacity;
    uint32_t expansion;
    bool nonscaling;
} rmf_bf_params;

rmf_err rmf_bf_create(const rmf_bf_params *p, const rmf_config *c, const dedup_allocator *a,
                      rmf_obj **out);
/* 1 newly added, 0 may have existed; or an error (full, memory cap). */
rmf_err rmf_bf_add(rmf_obj *o, const void *item, size_t len, int *added);
bool rmf_bf_exists(const rmf_obj *o, const void *item, size_t len);
uint64_t rmf_bf_capacity(const rmf_obj *o);
uint32_t rmf_bf_filters(const rmf_obj *o);
bool rmf_bf_nonscaling(const rmf_obj *o);
uint32_t rmf_bf_expansion(const rmf_obj *o);
/* Line 'line' of BF.DEBUG (0: "size:N"; i >= 1: link i, RedisBloom's
 * fields) into buf; 0 past the last line.  Returns the length (snprintf). */
size_t rmf_bf_debug(const rmf_obj *o, uint32_t line, char *buf, size_t cap);

/* ---- Cuckoo ----------------------------------------------------------------- */
typedef struct rmf_cf_params {
    uint64_t capacity;
    uint32_t bucket_size;
    uint32_t max_iterations;
    uint32_t expansion; /* 0: fixed size; rounded up to a power of two, as RedisBloom's */
    /* RedisBloom's bucket size for this reserve (BUCKETSIZE, or its
     * default 2): every sub-filter gets as many slots as RedisBloom's would,
     * nextpow2(capacity / rb_bucket_size) buckets of rb_bucket_size slots. */
    uint32_t rb_bucket_size;
} rmf_cf_params;

typedef struct rmf_cf_info {
    uint64_t buckets, items, deleted;
    uint32_t filters, bucket_size, expansion, max_iterations, fingerprint_bits;
    double fpr_full;
} rmf_cf_info;

rmf_err rmf_cf_create(const rmf_cf_params *p, const rmf_config *c, const dedup_allocator *a,
                      rmf_obj **out);
/* Whether the filter may still grow by one sub-filter (RedisBloom refuses
 * inserts once CF_MAX_EXPANSIONS sub-filters exist; so do we, and also when
 * the next one would pass MAX_MEMORY).  NULL if it may. */
rmf_err rmf_cf_can_grow(const rmf_obj *o);
/* 1 added, 0 already present (nx only), -1 no room, -2 error (*err set). */
int rmf_cf_add(rmf_obj *o, const void *item, size_t len, bool nx, rmf_err *err);
bool rmf_cf_exists(const rmf_obj *o, const void *item, size_t len);
uint64_t rmf_cf_count(const rmf_obj *o, const void *item, size_t len);
/* true if one copy was removed. */
bool rmf_cf_del(rmf_obj *o, const void *item, size_t len);
void rmf_cf_get_info(const rmf_obj *o, rmf_cf_info *out);
/* Adds n items in order (not NX), hashing a batch before probing it:
 * rc[i] = 1 added, -1 no room, -2 error (its text in errs[i]; errs[i] is
 * set only then). */
void rmf_cf_add_many(rmf_obj *o, const void *const *items, const size_t *lens, size_t n,
                     int *rc, rmf_err *errs);
/* out[i] = rmf_cf_exists(items[i]), the batch queried through the seen-set
 * (buckets prefetched). */
void rmf_cf_exists_many(const rmf_obj *o, const void *const *items, const size_t *lens, size_t n,
                        int *out);
/* CF.COMPACT: RedisBloom-layout filters move items into older sub-filters
 * and drop emptied ones; every filter's deletes count starts over. */
void rmf_cf_compact(rmf_obj *o);

/* ---- Expiring dedup ------------------------------------------------------ */
typedef struct rmf_dd_params {
    uint64_t window_ms;
    double error_rate;
    uint64_t capacity;
    uint32_t generations; /* 3..16; 0 selects 5 (EXACT: the window's 4) */
    bool exact;           /* EXACT: an exact window of digests and times */
    uint64_t seed;        /* the items' hash seed (rmf_random_seed() for a new
                             value: replication and the AOF carry it as SEED) */
} rmf_dd_params;

/* A random 64-bit seed from the OS; false if it has none to give. */
bool rmf_random_seed(uint64_t *out);

rmf_err rmf_dd_create(const rmf_dd_params *p, const rmf_config *c, const dedup_allocator *a,
                      rmf_obj **out);
/* Add-if-new at time 'now_ms': *is_new = 1 if not seen within the window. */
rmf_err rmf_dd_add(rmf_obj *o, const void *item, size_t len, uint64_t now_ms, int *is_new);
bool rmf_dd_exists(rmf_obj *o, const void *item, size_t len, uint64_t now_ms);
uint64_t rmf_dd_window_ms(const rmf_obj *o);
uint32_t rmf_dd_generations(const rmf_obj *o);
uint64_t rmf_dd_slot_ms(const rmf_obj *o);
double rmf_dd_error_rate(const rmf_obj *o);
bool rmf_dd_exact(const rmf_obj *o);
/* Keys seen within the window (EXACT; O(keys held)); 0 in approximate mode. */
uint64_t rmf_dd_live(const rmf_obj *o, uint64_t now_ms);
/* Estimated error rate of a query right now (the table's load; 0 EXACT). */
double rmf_dd_current_fpr(rmf_obj *o, uint64_t now_ms);

/* ---- Common -------------------------------------------------------------- */
/* A value kept in RedisBloom's layout (legacy/rm_redisbloom.h): migrated by
 * LOADCHUNK of RedisBloom's SCANDUMP chunks or read from its RDB types. */
bool rmf_is_redisbloom(const rmf_obj *o);
/* A RedisBloom-layout Bloom value whose chunks have not all arrived (a
 * cuckoo value is usable from its header on). */
bool rmf_loading(const rmf_obj *o);
rmf_kind rmf_obj_kind(const rmf_obj *o);
uint64_t rmf_items(const rmf_obj *o);
uint64_t rmf_capacity_asked(const rmf_obj *o);
/* Bytes held by the object, every allocation included. */
size_t rmf_memory_usage(const rmf_obj *o);
void rmf_free(rmf_obj *o);
/* A deep copy (COPY command); NULL on allocation failure. */
rmf_obj *rmf_copy(const rmf_obj *o);

/* Bytes rmf_save() writes. */
uint64_t rmf_serialized_size(const rmf_obj *o);
dedup_status rmf_save(const rmf_obj *o, dedup_sink *sink);
/* Loads one envelope from 'src'.  'expect' 0 accepts any kind. */
rmf_err rmf_load(dedup_source src, rmf_kind expect, const rmf_config *c,
                 const dedup_allocator *a, rmf_obj **out);

/* ---- Chunked loading (LOADCHUNK, AOF replay) ------------------------------
 * The serialized form travels in chunks.  SCANDUMP numbering: the reply to
 * SCANDUMP key 0 is (1 + 88, envelope header); to SCANDUMP key i (i > 0)
 * the pair (1 + end, bytes [i-1, end)), chunks of at most RMF_CHUNK bytes;
 * (0, empty) when i-1 has reached the end.  So an iterator 'it' given with
 * 'data' to LOADCHUNK means the chunk covers [it-1-len, it-1).  Chunks must
 * arrive in order; the first one (offset 0) is exactly the envelope header. */
/* 1 MiB: a chunk is copied twice (into the reply, out of the command) and
 * its pages faulted, so its size is what one SCANDUMP blocks the server
 * for; a dump's total cost does not depend on it (rmf_serialize_range). */
#define RMF_CHUNK (1u << 20)

typedef struct rmf_partial rmf_partial;

/* Starts a load from the envelope header chunk; validates it against the
 * limits before allocating the buffer for the rest. */
rmf_err rmf_partial_begin(const void *hdr, size_t len, rmf_kind expect, const rmf_config *c,
                          const dedup_allocator *a, rmf_partial **out);
/* Appends the chunk at 'offset' (must equal rmf_partial_received()). */
rmf_err rmf_partial_append(rmf_partial *p, uint64_t offset, const void *data, size_t len);
uint64_t rmf_partial_received(const rmf_partial *p);
uint64_t rmf_partial_total(const rmf_partial *p);
const unsigned char *rmf_partial_data(const rmf_partial *p);
/* When complete: validates and builds the object.  The partial is left
 * unchanged (free it in any case). */
rmf_err rmf_partial_finish(const rmf_partial *p, const rmf_config *c, rmf_obj **out);
size_t rmf_partial_memory_usage(const rmf_partial *p);
void rmf_partial_free(rmf_partial *p);

/* Copies bytes [off, off+len) of the serialized form into 'buf' (len <=
 * RMF_CHUNK); returns the number copied (less at the end).  'cursor' (may
 * be NULL) is the range sink of the ranges read before from the same,
 * unchanged value (dedup_range_sink_init() when a sequence starts): each
 * range then costs its own length, not its offset. */
dedup_status rmf_serialize_range(const rmf_obj *o, uint64_t off, void *buf, size_t len,
                                 dedup_range_sink *cursor, size_t *copied);

#endif /* DEDUP_RM_FILTER_H */
