/*
 * redis/rm_internal.h - what the files behind rm_filter.h share: the
 * object's layout and the allocation helpers.  Not for module.c: the
 * command files see only rm_filter.h.
 *
 *   rm_obj.c       config, allocation, free, memory, copy, common accessors
 *   rm_bloom.c     BF values: a chain of classic Bloom links (the split of p)
 *   rm_cuckoo.c    CF values: the library's cuckoo filter
 *   rm_dedup.c     DEDUP values: the library's time window (EXACT or not)
 *   legacy/rm_dedup_legacy.c  DEDUP values saved before the window: read path
 *   rm_envelope.c  the serialized form, its loader and the chunk loader
 *   legacy/rm_redisbloom.c  values kept in RedisBloom's own layout (migrated keys)
 */
#ifndef DEDUP_RM_INTERNAL_H
#define DEDUP_RM_INTERNAL_H

#include "rm_filter.h"

#include "dedup/bloom.h"
#include "dedup/cuckoo.h"
#include "dedup/scalable.h"
#include "dedup/seen.h"
#include "dedup/window.h"

#define DD_MAX_GEN 16u
#define DD_MIN_GEN 3u
/* Most parts an EXACT value is split into (rm_dedup.c). */
#define RMF_DD_MAX_PARTS 65536u

/* The DEDUP state, allocated only for DEDUP values (so BF and CF keys do
 * not carry it).  A value runs on the library's window (dedup/window.h),
 * except an approximate value saved before the port (envelope version 2),
 * which keeps its generations of Bloom chains (legacy/rm_dedup_legacy.c). */
typedef struct rmf_dd {
    dedup_window *win;      /* NULL for a legacy value; parts[0] */
    dedup_window **parts;   /* EXACT: the value's windows, an item in part
                               reduce(digest.hi, nparts) (rm_dedup.c) */
    uint32_t nparts;        /* 1 unless EXACT with a large capacity */
    bool has_newest;
    int64_t newest;         /* the newest time any part holds */
    dedup_allocator walloc; /* the window's allocator: the object's, within
                               MAX_MEMORY (rm_dedup.c) */
    uint64_t win_bytes;     /* bytes the window holds through it */
    bool refused;           /* the last allocation was refused for MAX_MEMORY */
    uint64_t seed;          /* the window's hash seed: random at creation, kept
                               in its dump (rm_dedup.c) */
    uint32_t generations;   /* G */
    uint64_t window_ms;
    /* legacy: the generations, links[slot % nlinks], each a scalable chain
     * of blocked Bloom links, with its item count and capacity beside it */
    bool legacy;
    uint32_t nlinks;
    dedup_scalable *links[DD_MAX_GEN];
    uint64_t gen_items[DD_MAX_GEN];
    uint64_t gen_capacity[DD_MAX_GEN];
    uint32_t gen_links[DD_MAX_GEN];
    uint64_t slot_ms;
    uint64_t cur_slot;
} rmf_dd;

/* Bloom split schedules (how p is shared among a chain's links). */
#define BF_SCHEDULE_V1 1u /* envelope v1: p(1-r)r^i/(1-r^64), r = 0.9 */
#define BF_SCHEDULE_V2 2u /* 3p/4 for link 0, then p/2^(i+3) for link i >= 1 */
/* Links a v2 dump may declare (the rates reach DEDUP_MIN_FPR well before). */
#define BF_MAX_LINKS 64u

struct rmf_obj {
    rmf_kind kind;
    bool nonscaling;
    bool exact;
    uint8_t schedule; /* Bloom: BF_SCHEDULE_* */
    dedup_allocator alloc;
    uint64_t items;
    uint64_t deleted;
    uint64_t capacity; /* as asked */
    double error_rate; /* as asked */
    uint32_t expansion;
    uint64_t max_memory; /* ceiling copied from the config at creation */
    /* Bloom: the links, oldest first; their total capacity; new items in
     * the newest link */
    dedup_bloom **bl;
    uint32_t bl_n, bl_cap;
    uint64_t bl_capacity;
    uint64_t bl_last_items;
    /* cuckoo: a seen-set of kind DEDUP_SEEN_CUCKOO (dedup/seen.h), and the
     * library cuckoo filter behind it (dedup_seen_impl) for what seen.h has
     * no call for: adding another copy, counting copies, the shape */
    dedup_seen *cfs;
    dedup_cuckoo *cf;
    uint64_t cf_seed;      /* dedup_seen_seed(cfs), kept: asked once per item */
    uint32_t cf_max_links; /* links allowed by CF_MAX_EXPANSIONS and MAX_MEMORY */
    bool cf_mem_bound;     /* ... and MAX_MEMORY is the one that binds */
    /* expiring dedup */
    rmf_dd *dd;
    /* RedisBloom layouts (a key migrated from RedisBloom) */
    struct rb_bloom *rbf;
    struct rb_cuckoo *rcf;
};

/* An envelope header (rm_filter.h), decoded; the common fields checked. */
typedef struct rmf_envelope {
    unsigned version;
    rmf_kind kind;
    uint32_t flags;
    uint64_t items, deleted, capacity;
    double error_rate;
    uint32_t expansion, bucket_size, aux, nblobs;
    uint64_t window_ms, cur_slot, blobs_len;
} rmf_envelope;

/* What the envelope (rm_envelope.c) asks of each kind: one table per
 * family, in the family's file, so the envelope never looks inside one.
 *   blobs_size  bytes of the blobs after the header
 *   encode      the kind's header fields (after the common ones: items,
 *               deleted, capacity, error rate, expansion); may set the
 *               version byte and the flags
 *   save_blobs  writes the blobs
 *   check       the kind's header fields against their ranges
 *   load        reads the blobs into 'o' (common fields set) and checks
 *               them against the header */
typedef struct rmf_family_ops {
    uint64_t (*blobs_size)(const rmf_obj *o);
    void (*encode)(const rmf_obj *o, unsigned char h[RMF_ENVELOPE_SIZE]);
    dedup_status (*save_blobs)(const rmf_obj *o, dedup_sink *sink);
    rmf_err (*check)(const rmf_envelope *e);
    rmf_err (*load)(dedup_source src, const rmf_envelope *e, const rmf_config *c, rmf_obj *o);
} rmf_family_ops;

extern const rmf_family_ops rmf_bf_ops; /* rm_bloom.c */
extern const rmf_family_ops rmf_cf_ops; /* rm_cuckoo.c */
extern const rmf_family_ops rmf_dd_ops; /* rm_dedup.c */

void *rmf_alloc(const dedup_allocator *a, size_t n);
/* n zeroed bytes: the allocator's calloc_fn when it has one (which may hand
 * out fresh pages without writing them), malloc and memset otherwise. */
void *rmf_calloc(const dedup_allocator *a, size_t n);
void rmf_dealloc(const dedup_allocator *a, void *p);
/* A zeroed object of 'kind' (with its DEDUP state for RMF_DEDUP). */
rmf_obj *rmf_obj_new(rmf_kind kind, const dedup_allocator *a);
/* The object's allocator, or NULL for malloc. */
const dedup_allocator *rmf_obj_allocator(const rmf_obj *o);
rmf_err rmf_status_err(dedup_status s);

#define ERR_MAXMEM "ERR filter would exceed the per-key memory limit (module argument MAX_MEMORY)"

/* rm_bloom.c */
double rmf_bf_link_fpr(unsigned schedule, double p, bool nonscaling, uint32_t link);
uint64_t rmf_bf_link_bits(uint64_t n, double p); /* 0 if too large */
void rmf_bf_free_links(rmf_obj *o);
size_t rmf_bf_memory(const rmf_obj *o);
/* Appends a loaded link (takes ownership, frees it on failure). */
rmf_err rmf_bf_push_link(rmf_obj *o, dedup_bloom *b);

/* rm_cuckoo.c */
void rmf_cf_set_max_links(rmf_obj *o, const rmf_config *c);

/* rm_dedup.c */
/* A library window for the object (its o->dd->walloc budget): EXACT or
 * approximate, G generations, sliding with refresh, times in ms. */
rmf_err rmf_dd_window_new(rmf_obj *o, bool exact, uint32_t g, uint32_t parts);
/* Loads the window blob of an envelope v3 value and checks it against the
 * envelope's fields (set in 'o' and 'g'). */
rmf_err rmf_dd_load_window(rmf_obj *o, dedup_source src, uint32_t g, uint32_t parts);
/* Records the digest 'd' at time 'ms' (old EXACT tables being converted). */
rmf_err rmf_dd_window_put(rmf_obj *o, dedup_digest d, int64_t ms);
void rmf_dd_free_state(rmf_obj *o);
size_t rmf_dd_memory(const rmf_obj *o);

/* legacy/rm_dedup_legacy.c: values saved before the port (envelope version 2) */
void rmf_ddl_gen_params(dedup_scalable_params *sp, uint64_t n0, double p);
/* Loads an approximate value's generations, or converts an EXACT table to
 * an exact window. */
rmf_err rmf_ddl_load(dedup_source src, uint32_t nblobs, uint64_t cur_slot, rmf_obj *o);
rmf_err rmf_ddl_load_exact(dedup_source src, uint64_t blob_len, rmf_obj *o);
uint64_t rmf_ddl_blobs_size(const rmf_obj *o);
void rmf_ddl_encode(const rmf_obj *o, unsigned char h[RMF_ENVELOPE_SIZE]);
rmf_err rmf_ddl_check(const rmf_envelope *e);
dedup_status rmf_ddl_save(const rmf_obj *o, dedup_sink *sink);
rmf_err rmf_ddl_add(rmf_obj *o, const void *item, size_t len, uint64_t now_ms, int *is_new);
bool rmf_ddl_exists(const rmf_obj *o, const void *item, size_t len, uint64_t now_ms);
double rmf_ddl_current_fpr(const rmf_obj *o, uint64_t now_ms);
void rmf_ddl_free(rmf_obj *o);
size_t rmf_ddl_memory(const rmf_obj *o);

#endif /* DEDUP_RM_INTERNAL_H */
