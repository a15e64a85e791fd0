/*
 * dedup/seen.h - the seen-set: one object that answers "was this seen
 * before?" for every deduplication method.
 *
 * Every method in libdedup -- exact sets, Bloom filters, cuckoo filters,
 * windows, the exact set that overflows to disk -- and every method built
 * outside it (the Redis backend, the RocksDB store, a stack of tiers) is
 * used through this one shape:
 *
 *   dedup_seen_spec sp; dedup_seen_spec_init(&sp);
 *   sp.kind = DEDUP_SEEN_BLOCKED; sp.items = 100000000; sp.fpr = 0.01;
 *   dedup_seen *s; dedup_status st = dedup_seen_create(&sp, NULL, &s);
 *   ...
 *   dedup_batch b = {.n = n, .keys = keys, .lens = lens, .digests = d};
 *   st = dedup_seen_decide(s, &b, verdicts, &done);   test-and-add, in order
 *   ...
 *   st = dedup_seen_save_file(s, "seen.dedup");       any kind, one call
 *   dedup_seen_free(s);                                NULL is a no-op
 *
 * or loaded from any file of the format without knowing what it holds:
 *
 *   st = dedup_seen_load_file("seen.dedup", NULL, &s);  dispatch on the header
 *
 * The one verb.  dedup_seen_decide() answers and records in the same step,
 * key by key in batch order, so a repeat inside one batch is a duplicate of
 * its first occurrence and no caller races between "check" and "add".
 * Verdicts:
 *   DEDUP_NEW              certainly not seen before; now recorded.
 *   DEDUP_DUPLICATE        certainly seen before (exact kinds).
 *   DEDUP_MAYBE_DUPLICATE  a probabilistic kind may have seen it; it errs
 *                          only this way (a key once recorded is never
 *                          answered NEW again while it is remembered), at
 *                          a rate bounded by dedup_seen_fpr_bound().
 *   DEDUP_LATE             window kinds: below the watermark, not decided.
 *   DEDUP_DEFERRED         the exact kind spilling to disk: recorded, the
 *                          decision and the record's output come from
 *                          dedup_seen_finish() (see "Spilling" below).
 *   DEDUP_UNCERTAIN        remote kinds: a reply was lost, so whether the key
 *                          was already present cannot be known; callers drop
 *                          it like a duplicate and count it (see seen_ops).
 *
 * Digests.  Every kind derives all of its indexes from the key's one
 * 128-bit digest (dedup/hash.h), computed by the caller with the seed
 * dedup_seen_seed() returns; exact string kinds also need the key bytes.
 * Nothing hashes a key twice.
 *
 * Thread-safety: as dedup/common.h says -- one object per writing thread;
 * queries of local kinds may run from several threads at once while no
 * thread writes.  Remote kinds (outside libdedup) say their own rule.
 */
#ifndef DEDUP_SEEN_H
#define DEDUP_SEEN_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Kinds ------------------------------------------------------------------
 * Pinned forever, append only.  A kind is never identified by comparing
 * names or function pointers: ask dedup_seen_kind_of(). */
typedef enum dedup_seen_kind {
    DEDUP_SEEN_EXACT = 1,        /* full keys in an arena (strset); exact */
    DEDUP_SEEN_FINGERPRINT = 2,  /* 128-bit digests only (digestset); ~n^2/2^129 collisions */
    DEDUP_SEEN_U64 = 3,          /* 64-bit integer keys (u64set); exact; batch.ints */
    DEDUP_SEEN_BLOOM = 4,        /* classic Bloom, k probes */
    DEDUP_SEEN_BLOCKED = 5,      /* blocked Bloom, one cache line per key */
    DEDUP_SEEN_COUNTING = 6,     /* counting Bloom, 4-bit counters, delete */
    DEDUP_SEEN_CUCKOO = 7,       /* cuckoo filter (a chain of them when it grows), delete */
    DEDUP_SEEN_SCALABLE = 8,     /* chain of Bloom filters with tightening rates */
    DEDUP_SEEN_WINDOW = 9,       /* sliding / tumbling / last-N window, exact or approximate */
    DEDUP_SEEN_EXACT_SPILL = 10, /* exact in memory, then the external engine on disk */
    DEDUP_SEEN_BITMAP = 11,      /* one bit per integer in [range_lo, range_hi]; batch.ints */
    DEDUP_SEEN_ROARING = 12,     /* compressed bitmap of integers (component, CRoaring) */
    DEDUP_SEEN_REDIS = 13,       /* a Redis backend (component libdedup_redis) */
    DEDUP_SEEN_STORE = 14,       /* a persistent store (component libdedup_store) */
    DEDUP_SEEN_TIERS = 15,       /* a stack of seen-sets (dedup/tiers.h) */
    DEDUP_SEEN_OTHER = 16        /* any other implementation of dedup_seen_ops */
} dedup_seen_kind;

/* The kind's name as --mode and messages spell it ("exact", "fingerprint",
 * "u64", "bloom", "blocked", "counting", "cuckoo", "scalable", "window",
 * "exact-spill", "bitmap", "roaring", "redis", "store", "tiers", "other");
 * "unknown" for other values. */
const char *dedup_seen_kind_name(dedup_seen_kind kind);
/* The kind named 'name' (as above), or 0 when none is. */
dedup_seen_kind dedup_seen_kind_from_name(const char *name);
/* The kind that keeps files of structure type 'file_type' (dedup/format.h),
 * or 0 when no kind does. */
dedup_seen_kind dedup_seen_kind_of_file_type(uint32_t file_type);
/* The structure type a kind saves as (CUCKOO: DEDUP_TYPE_CUCKOO; a
 * chain that can grow saves as DEDUP_TYPE_CUCKOO_CHAIN), or 0 when the kind
 * saves nothing of its own. */
uint32_t dedup_seen_file_type(dedup_seen_kind kind);

/* What a fixed-size probabilistic kind does once it holds its planned
 * capacity ('items'), beyond which its false-positive rate climbs. */
typedef enum dedup_on_full {
    DEDUP_ON_FULL_WARN = 0, /* go on; dedup_seen_info.over_capacity turns true
                               and fpr_bound reports the rate now in force */
    DEDUP_ON_FULL_FAIL = 1, /* refuse: decide() stops before the first key past
                               capacity with DEDUP_ERR_FULL (*done says where) */
    DEDUP_ON_FULL_GROW = 2  /* go on in a scalable chain whose bound stays <= fpr */
} dedup_on_full;
/* How each kind applies it:
 * BLOOM / BLOCKED with GROW are a scalable chain from the first key (its
 * first link planned for 'items' at about fpr/2 with the default
 * tightening 0.5), so dedup_seen_kind_of() says SCALABLE and the file is a
 * scalable one.  COUNTING cannot grow: GROW is DEDUP_ERR_INVALID_ARG.
 * CUCKOO: FAIL makes the filter fixed (DEDUP_ERR_FULL when a key finds no
 * room), GROW a chain of links (expansion >= 1); a cuckoo filter never
 * holds more than its slots, so over_capacity stays false. */

/* The callback through which EXACT_SPILL hands out its deferred records
 * (see "Spilling" below); nonzero stops it. */
typedef int (*dedup_seen_emit_fn)(void *ctx, const void *rec, size_t len, uint64_t count);

/* ---- Spec -------------------------------------------------------------------
 * One spec creates every kind.  dedup_seen_spec_init() sets the defaults
 * named here; a field a kind does not use is ignored. */
typedef struct dedup_seen_spec {
    dedup_seen_kind kind;   /* required */
    uint64_t items;         /* n: planned distinct keys; 0 = not given */
    double fpr;             /* p in (0, 0.5]: target false-positive rate; default 0.01 */
    uint64_t memory;        /* bytes: a budget.  Filters sized from it when items
                               is 0; growing kinds fail with DEDUP_ERR_FULL past it
                               (EXACT_SPILL: half in memory, then disk); 0 = none */
    uint64_t seed;          /* hash seed; default DEDUP_DEFAULT_SEED */
    bool counts;            /* keep per-key counts (EXACT, FINGERPRINT, EXACT_SPILL) */
    uint32_t hashes;        /* k for BLOOM / COUNTING; 0 = optimal */
    dedup_on_full on_full;  /* default DEDUP_ON_FULL_WARN */
    /* CUCKOO */
    uint32_t fingerprint_bits; /* 0 = from fpr */
    uint32_t expansion;     /* growth factor of a chain; 0 = fixed size; default 2
                               when sized by items, 0 when sized by memory */
    /* SCALABLE */
    uint32_t growth;        /* capacity ratio between links; default 2 */
    double tightening;      /* fpr ratio between links; default 0.5 */
    /* WINDOW (dedup/window.h gives the ranges) */
    int window_type;        /* dedup_window_type; default sliding */
    bool approximate;       /* window remembers fingerprints, not keys */
    uint64_t duration;      /* microseconds, or records for a count window */
    uint64_t lateness;      /* microseconds */
    bool refresh_on_dup;    /* a repeat inside the window extends the key's life
                               (dedup/window.h, refresh): sliding and last-N windows
                               with lateness < duration; INVALID_ARG otherwise */
    /* BITMAP */
    uint64_t range_lo, range_hi; /* integer keys allowed, inclusive */
    /* EXACT_SPILL: where the external engine writes and how it emits */
    const char *tmpdir;     /* NULL: $TMPDIR or /tmp */
    unsigned threads;       /* engine threads; 0 or 1 = the caller's only */
    bool sorted_output;     /* finish() emits in key order rather than first occurrence */
    /* EXACT_SPILL (required by it): where the engine's records go.
     * Those it can emit early (first occurrences while its own table holds
     * them, so that a pipe keeps streaming) arrive during decide(), the rest
     * during finish() (whose 'emit', when not NULL, replaces this one).  A
     * nonzero return stops the engine: decide() or finish() then fails with
     * DEDUP_ERR_CANCELLED. */
    dedup_seen_emit_fn emit;
    void *emit_ctx;
    /* EXACT_SPILL with counts: finish() emits only the records whose
     * key occurred once (uniq -u), the engine keeping nothing else for
     * output. */
    bool unique_only;
    /* EXACT_SPILL: when set, a record that is its own key and
     * longer than the engine's giant threshold (dedup/extsort.h, "giant
     * records") never enters memory whole: it goes to this callback in
     * pieces ('first' on the first, 'last' on the last, 'count' as for emit),
     * with emit_ctx.  NULL: every record goes to emit whole. */
    int (*emit_piece)(void *ctx, const void *piece, size_t len, bool first, bool last,
                      uint64_t count);
    /* EXACT_SPILL: the allocator of the external engine, which may
     * allocate from its own threads; NULL = the one given to create.  (A
     * caller may give the set an allocator made for one growing object.) */
    const dedup_allocator *engine_alloc;
    /* EXACT_SPILL: keys by reference.  When ref_base
     * is set, every key decide() is given must be a whole record lying in
     * [ref_base, ref_base + ref_span) (a mapped input; the record is its own
     * key, followed by ref_term or ending at one of ref_ends, sorted offsets
     * of the files' ends), and the set keeps references to those bytes (a
     * dedup_refset, dedup/set.h: 11 to 21 bytes per distinct key) instead of
     * copies; the bytes must stay readable and unchanged until the seen-set
     * is freed.  ref_expected plans it (0 = ref_span / 64).  Nothing else
     * changes: past half of 'memory' it freezes and spills as usual.
     * With ref_keys, each record must lie in the span but its key
     * may be any byte range of it (a field, a trimmed record: kept by
     * reference with its length) or lie elsewhere (a normalised key whose
     * bytes differ from the file's: copied into the set, as the copying set
     * would).  Counts (spec.counts), save (the format of EXACT) and
     * dedup_seen_merge() of an EXACT set into a new one (a loaded state:
     * its keys are copied) work by reference too. */
    const void *ref_base;
    uint64_t ref_span;
    unsigned char ref_term;
    const uint64_t *ref_ends;
    size_t ref_nends;
    uint64_t ref_expected;
    bool ref_keys;
    /* The filters' own shape, for a caller that sets it option by
     * option (`dedup filter create`); 0 everywhere keeps the sizing above.
     * 'size' is an exact size rather than one from items or memory: bits
     * for BLOOM (rounded up to a multiple of 64) and BLOCKED (of 512),
     * counters for COUNTING, buckets for CUCKOO (which then grows only by
     * 'expansion').  With it, 'items' is only the planned capacity (0: what
     * the size holds at fpr) and 'memory' is not consulted. */
    uint64_t size;
    uint32_t bucket_size;   /* CUCKOO: slots per bucket; 0 = 4 */
    uint32_t max_kicks;     /* CUCKOO: relocations before full; 0 = the default
                               (500), DEDUP_SEEN_NO_KICKS = none */
    uint32_t max_links;     /* SCALABLE: links at most; 0 = DEDUP_MAX_CHAIN */
    bool classic_links;     /* SCALABLE: classic Bloom links (default blocked) */
} dedup_seen_spec;

/* spec.max_kicks for a cuckoo filter that never relocates. */
#define DEDUP_SEEN_NO_KICKS UINT32_MAX

void dedup_seen_spec_init(dedup_seen_spec *spec);

typedef struct dedup_seen dedup_seen;

/* Creates an empty seen-set of spec->kind.
 * Errors: DEDUP_ERR_INVALID_ARG (a field out of range, or a kind that needs
 * a size given neither items nor memory; or REDIS / STORE / TIERS / OTHER /
 * ROARING, which are created by their own components), DEDUP_ERR_LIMIT (the
 * size asked exceeds dedup/limits.h, or items at fpr needs more than
 * memory), DEDUP_ERR_NOMEM. */
dedup_status dedup_seen_create(const dedup_seen_spec *spec, const dedup_allocator *alloc,
                               dedup_seen **out);

/* Loads any structure file of the format whose type a kind keeps (sets,
 * Bloom, blocked, counting, cuckoo and cuckoo chains, scalable, window,
 * bitmap), validating all of it: header, params, payload, checksum and that
 * nothing follows.  Errors: those of the structure's loader, plus
 * DEDUP_ERR_WRONG_TYPE (a valid file no kind keeps) and DEDUP_ERR_TRAILING. */
dedup_status dedup_seen_load(dedup_source src, const dedup_allocator *alloc, dedup_seen **out);
dedup_status dedup_seen_load_file(const char *path, const dedup_allocator *alloc, dedup_seen **out);

/* Frees the seen-set; NULL is a no-op. */
void dedup_seen_free(dedup_seen *s);

/* ---- Batches ----------------------------------------------------------------
 * Parallel arrays of n keys.  'digests' is required except for integer kinds
 * given 'ints'; 'keys'/'lens' are required by EXACT and EXACT_SPILL (and by
 * remote kinds keeping whole keys); 'times' by event-time windows
 * (microseconds); 'records'/'rlens' by EXACT_SPILL, which must hold a
 * deferred record until finish(). */
typedef struct dedup_batch {
    size_t n;
    const dedup_digest *digests;
    const unsigned char *const *keys;
    const size_t *lens;
    const int64_t *times;
    const uint64_t *ints;
    const unsigned char *const *records;
    const size_t *rlens;
} dedup_batch;

/* Decides batch->n keys in order and records the new ones: out[i] receives
 * key i's verdict.  On error, *done (may be NULL) receives how many keys
 * were decided first (their verdicts are valid; nothing of the rest was
 * recorded) and the status says why: DEDUP_ERR_FULL (a growing kind reached
 * spec.memory, a fixed cuckoo filter found no room, or on_full FAIL),
 * DEDUP_ERR_RANGE (a window time or bitmap integer outside its range),
 * DEDUP_ERR_NOMEM, DEDUP_ERR_IO (spill or remote kinds). */
dedup_status dedup_seen_decide(dedup_seen *s, const dedup_batch *batch, dedup_verdict *out,
                               size_t *done);

/* Records batch->n keys without deciding them, for callers that
 * only fill a set (`dedup filter add`).  For the kinds that count what they
 * hold (COUNTING, CUCKOO) every add is one more occurrence, so a key added
 * twice must be deleted twice; their on_full FAIL is not applied here (a
 * fixed cuckoo filter still answers DEDUP_ERR_FULL when a key finds no
 * room; for COUNTING the caller compares items with capacity after).  For
 * every other kind it is dedup_seen_decide() with the verdicts dropped.
 * *done (may be NULL) as for decide(). */
dedup_status dedup_seen_add(dedup_seen *s, const dedup_batch *batch, size_t *done);

/* Answers without recording: out[i] is DEDUP_NEW (certainly absent),
 * DEDUP_DUPLICATE or DEDUP_MAYBE_DUPLICATE.  Local kinds cannot fail but
 * EXACT_SPILL's spilled keys (DEDUP_ERR_UNSUPPORTED once it spilled) and
 * remote kinds can.  WINDOW answers each key as "seen within the window at
 * batch.times[i]?" (a count window: as its next record) without recording
 * it and without moving its clock, DEDUP_LATE below the watermark, each key
 * on its own (dedup_window_query(); DEDUP_ERR_RANGE for a time out of
 * range, DEDUP_ERR_INVALID_ARG without times). */
dedup_status dedup_seen_query(const dedup_seen *s, const dedup_batch *batch, dedup_verdict *out);

/* Deletes batch->n keys; removed[i] (may be NULL) is false when key i was
 * certainly absent.  DEDUP_ERR_UNSUPPORTED for kinds that cannot delete
 * (Bloom, blocked, scalable, window); dedup_seen_info.can_delete says. */
dedup_status dedup_seen_delete(dedup_seen *s, const dedup_batch *batch, bool *removed);

/* Declares that the records of the keys in 'batch', answered NEW, have been
 * delivered.  Local kinds need nothing (DEDUP_OK); a remote kind that
 * reserves keys before committing them (Redis keys with a TTL) makes them
 * permanent here. */
dedup_status dedup_seen_commit(dedup_seen *s, const dedup_batch *batch);

/* Sets what a fixed-size filter (BLOOM, BLOCKED, COUNTING) does once
 * it holds its capacity, from the next decide() on: how a seen-set loaded
 * from a file (which starts with DEDUP_ON_FULL_WARN) gets the caller's
 * choice.  DEDUP_ON_FULL_GROW cannot be given after creation (a chain
 * starts at the first key): DEDUP_ERR_UNSUPPORTED, as is FAIL for kinds
 * without a planned capacity; WARN is accepted by every kind. */
dedup_status dedup_seen_set_on_full(dedup_seen *s, dedup_on_full on_full);

/* Windows: raises the watermark (see dedup_window_advance_watermark()).
 * DEDUP_ERR_UNSUPPORTED for other kinds. */
dedup_status dedup_seen_advance(dedup_seen *s, int64_t watermark);

/* ---- Spilling (EXACT_SPILL) ----------------------------------------------------
 * Keys are kept in memory up to half of spec.memory; past it the set is
 * frozen (it still answers DUPLICATE for the keys it holds) and every other
 * record is handed to the external engine (dedup/extsort.h) with verdict
 * DEDUP_DEFERRED.  finish() merges on disk and calls 'emit' once per kept
 * record, in first-occurrence order (or key order with sorted_output) after
 * the records already answered NEW, with the key's count.  Kinds that never
 * defer return DEDUP_OK at once. */
dedup_status dedup_seen_finish(dedup_seen *s, dedup_seen_emit_fn emit, void *ctx);
/* Whether any record has been deferred to disk. */
bool dedup_seen_spilled(const dedup_seen *s);
/* Deciding one batch on two threads.  An EXACT_SPILL seen-set that
 * keeps references (spec.ref_base) splits its keys into two parts by digest
 * (dedup_seen_part_of()); dedup_seen_decide_part(s, b, part, out) decides
 * only the keys of batch 'b' in 'part' (0 or 1), in order, and writes only
 * their out[i].  Two threads may decide the same batch at once, one part
 * each, and a thread may run ahead on later batches in its part: each
 * key's verdict is what dedup_seen_decide() would give on the whole input
 * in order, because a key and its repeats are always in the same part.
 *
 * It never spills: the set may grow past its half of spec.memory while
 * parts are decided.  dedup_seen_parts() says whether to go on: 2 while
 * the set holds less than a quarter of spec.memory, 1 for other kinds, once
 * the quarter is reached, and once the set spilled; from then on the caller
 * calls dedup_seen_decide() on whole batches, which spills as usual.  Half
 * of its share: the batches already in flight when a thread sees the
 * quarter at most double the tables, unless they bring as many new keys as
 * the set holds (a budget of a few MiB), so the share holds them.
 * A batch must be decided either in parts (both) or whole, never both.
 *
 * Thread-safety: dedup_seen_parts() and dedup_seen_decide_part() with
 * different parts may run at once; nothing else may run meanwhile.
 * Errors: DEDUP_ERR_UNSUPPORTED (dedup_seen_parts() was never 2 for this
 * set, or it spilled), DEDUP_ERR_INVALID_ARG, DEDUP_ERR_NOMEM, DEDUP_ERR_FULL
 * (a shard past 2^24 slots: far more keys than the span can hold); after an
 * error the part's keys from the failed one on are undecided and the set
 * must not be used for that batch again. */
unsigned dedup_seen_parts(const dedup_seen *s);
unsigned dedup_seen_part_of(dedup_digest d);
dedup_status dedup_seen_decide_part(dedup_seen *s, const dedup_batch *b, unsigned part,
                                    dedup_verdict *out);
/* The external engine (dedup/extsort.h) of an EXACT_SPILL seen-set
 * once it spilled, NULL before and for other kinds: its statistics
 * (dedup_extsort_stats_get) and the cause of an I/O error
 * (dedup_extsort_io_error).  For EXACT_SPILL, dedup_seen_info's items,
 * distinct and memory describe the in-memory set only; the engine's own
 * figures come from it. */
struct dedup_extsort;
const struct dedup_extsort *dedup_seen_spill_engine(const dedup_seen *s);

/* ---- What it holds -------------------------------------------------------------- */
typedef struct dedup_seen_info {
    dedup_seen_kind kind;
    uint32_t file_type;      /* dedup_type it saves as; 0 if it cannot save */
    bool probabilistic;      /* answers MAYBE_DUPLICATE rather than DUPLICATE */
    bool can_delete, can_merge, can_count, can_save;
    uint64_t seed;
    uint64_t capacity;       /* planned distinct keys; 0 when it simply grows */
    uint64_t items;          /* keys recorded (answered NEW) */
    bool over_capacity;      /* a fixed-size filter holds more than its capacity */
    uint64_t distinct;       /* distinct keys held */
    bool distinct_exact;     /* distinct is exact (sets), not an estimate */
    bool distinct_known;     /* false: no estimate can be made (a saturated filter) */
    double fpr_target;       /* the rate it was built for; 0 for exact kinds */
    double fpr_bound;        /* the rate in force now (grows with fill); 0 exact */
    size_t memory;           /* bytes held, as dedup_seen_memory_usage() */
    uint64_t bits;           /* filter bits / table bytes*8; 0 when not meaningful */
    uint32_t hashes;         /* k, or 0 */
    /* BITMAP: the integers it covers, inclusive (the spec's
     * range_lo..range_hi, or a loaded file's); both 0 for other kinds */
    uint64_t range_lo, range_hi;
} dedup_seen_info;

void dedup_seen_get_info(const dedup_seen *s, dedup_seen_info *out);

/* A filter kind's own figures, field by field, for a caller that
 * describes the filter (`dedup filter info`) without its structure's
 * header.  A field a kind does not have is 0. */
typedef struct dedup_seen_filter_info {
    dedup_seen_kind kind;       /* BLOOM, BLOCKED, COUNTING, CUCKOO or SCALABLE */
    uint32_t file_type;         /* the dedup_type it saves as */
    uint64_t seed;
    uint64_t capacity;          /* n planned (CUCKOO: 0 if sized by buckets;
                                   SCALABLE: its first link's) */
    double fpr_target;          /* p: BLOOM/BLOCKED/COUNTING at n; SCALABLE the promise */
    double fpr_current;         /* expected at the fill now */
    double fpr_at_capacity;     /* BLOOM/BLOCKED/COUNTING: expected at n items */
    size_t structure_memory;    /* bytes the structure holds (its own memory_usage) */
    /* BLOOM / BLOCKED / COUNTING / SCALABLE */
    uint64_t bits;              /* bits (COUNTING: counters; SCALABLE: over all links) */
    uint32_t hashes;            /* k (not SCALABLE: see its links) */
    uint64_t bits_set;          /* BLOOM/BLOCKED: bits set; COUNTING: non-zero counters */
    double fill;                /* bits_set / bits */
    double estimated_items;     /* BLOOM/BLOCKED: from the fill; +inf when every bit is set */
    /* COUNTING */
    uint64_t adds, deletes, saturated;
    /* CUCKOO */
    uint32_t fingerprint_bits, bucket_size, max_kicks, expansion;
    uint64_t buckets, slots, inserted, deleted;
    double load, fpr_full;
    /* CUCKOO, SCALABLE */
    uint64_t items;             /* CUCKOO: occupied slots; SCALABLE: keys new to the chain */
    uint32_t links;             /* sub-filters, >= 1 */
    /* SCALABLE */
    bool blocked_links;         /* blocked Bloom links (else classic) */
    uint32_t growth, max_links;
    double tightening, fpr_bound;
    uint64_t links_capacity;    /* sum of the links' capacities */
} dedup_seen_filter_info;

/* One sub-filter of a CUCKOO or SCALABLE chain. */
typedef struct dedup_seen_link_info {
    uint64_t capacity, items, bits; /* SCALABLE: n_i, new keys, bits; CUCKOO: items */
    uint32_t hashes;                /* SCALABLE: k_i */
    double fpr;                     /* SCALABLE: p_i, the rate it was sized for */
    double fpr_current;             /* expected at its fill now */
    uint64_t buckets;               /* CUCKOO */
    double load;                    /* CUCKOO */
} dedup_seen_link_info;

/* Fills *out for a filter kind; DEDUP_ERR_UNSUPPORTED for others.
 * May scan the filter (bits set, counters in use). */
dedup_status dedup_seen_get_filter_info(const dedup_seen *s, dedup_seen_filter_info *out);
/* Link 'link' (< info.links) of a CUCKOO or SCALABLE chain;
 * DEDUP_ERR_RANGE past the last, DEDUP_ERR_UNSUPPORTED for other kinds. */
dedup_status dedup_seen_get_link_info(const dedup_seen *s, uint32_t link,
                                      dedup_seen_link_info *out);
dedup_seen_kind dedup_seen_kind_of(const dedup_seen *s);
uint64_t dedup_seen_seed(const dedup_seen *s);
size_t dedup_seen_memory_usage(const dedup_seen *s);
/* The false-positive bound in force now (0 for exact kinds). */
double dedup_seen_fpr_bound(const dedup_seen *s);
/* Distinct keys held: true with *count exact or estimated (*exact says),
 * false when no estimate can be made. */
bool dedup_seen_distinct(const dedup_seen *s, uint64_t *count, bool *exact);
/* Occurrences of a key so far (spec.counts); 0 when absent or not counted. */
uint64_t dedup_seen_count_of(const dedup_seen *s, const void *key, size_t len, dedup_digest d);

/* An EXACT_SPILL set not yet given a decide() takes an EXACT set's
 * keys (same seed), in their order: a state loaded and carried on by
 * reference; DEDUP_ERR_UNSUPPORTED with counts.
 * dst |= src for kinds that can merge (Bloom, blocked, counting, sets of
 * the same kind and seed).  DEDUP_ERR_INCOMPATIBLE when shapes differ
 * (and 'why' receives what differs), DEDUP_ERR_UNSUPPORTED otherwise. */
dedup_status dedup_seen_merge(dedup_seen *dst, const dedup_seen *src, char *why, size_t whycap);

/* Saves in the file format / atomically to a file (dedup_save_file()).
 * DEDUP_ERR_UNSUPPORTED for kinds that cannot (EXACT_SPILL after spilling,
 * remote kinds).  No file is created then.  A BITMAP's file keeps its
 * range (the bitmap's origin is range_lo), so a loaded one covers the same
 * integers; dedup_seen_get_info() tells which. */
dedup_status dedup_seen_save(const dedup_seen *s, dedup_sink *sink);
dedup_status dedup_seen_save_file(const dedup_seen *s, const char *path);

/* The structure behind a local kind, for the calls only its own header has
 * (dedup/bloom.h's union, dedup/window.h's stats ...): a dedup_strset *,
 * dedup_bloom *, dedup_window * ... as the kind says; NULL for others. */
void *dedup_seen_impl(const dedup_seen *s);

/* ---- What a component adds ------------------------------------------------------
 * Calls that matter for components (remote sets, persistent stores) and
 * answer trivially for local kinds, so that a caller handles every kind
 * through the seen-set alone. */

/* Makes every key committed so far durable where the kind keeps keys
 * between runs (a store: its pending keys ingested; keys decided but never
 * committed are forgotten).  DEDUP_OK for kinds with nothing to make
 * durable.  Errors: the component's (DEDUP_ERR_IO; dedup_seen_error() says
 * what). */
dedup_status dedup_seen_flush(dedup_seen *s);

/* The component's message for its last failure (naming the server, node or
 * file), or "" when it keeps none; never NULL.  Valid until the next call
 * on 's'. */
const char *dedup_seen_error(const dedup_seen *s);

/* Figures of a component that dedup_seen_info does not carry.  Zero
 * everywhere for local kinds. */
typedef struct dedup_seen_stats {
    bool remote;            /* it may answer DEDUP_UNCERTAIN: 'uncertain' counts them */
    uint64_t uncertain;     /* keys answered DEDUP_UNCERTAIN (a reply lost) */
    bool persistent;        /* it keeps keys on disk: the two below are its */
    uint64_t stored_keys;   /* keys recorded over its whole life, every run's */
    uint64_t bytes_on_disk;
} dedup_seen_stats;

void dedup_seen_get_stats(const dedup_seen *s, dedup_seen_stats *out);

/* Records every key 'src' holds into 'dst' (dedup_seen_decide() with
 * digests only): a filter in front of a store starts knowing its history.
 * *count (may be NULL) receives the keys given.  DEDUP_ERR_UNSUPPORTED for
 * kinds that cannot list their keys; otherwise the errors of listing
 * 'src' and of deciding into 'dst'. */
dedup_status dedup_seen_fill(const dedup_seen *src, dedup_seen *dst, uint64_t *count);

/* ---- Implementing a seen-set outside libdedup ------------------------------------
 * Components that must not become dependencies of libdedup (Redis, RocksDB)
 * and compositions (tiers) implement the interface with this table; every
 * dedup_seen_* call above dispatches through it.  NULL entries answer
 * DEDUP_ERR_UNSUPPORTED (or do nothing, for commit/free).  'impl' is the
 * implementation's object, owned by the seen-set after dedup_seen_wrap()
 * succeeds and freed through ops->free. */
typedef struct dedup_seen_ops {
    dedup_seen_kind kind;
    dedup_status (*decide)(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done);
    dedup_status (*query)(const void *impl, const dedup_batch *b, dedup_verdict *out);
    dedup_status (*remove)(void *impl, const dedup_batch *b, bool *removed);
    dedup_status (*commit)(void *impl, const dedup_batch *b);
    dedup_status (*finish)(void *impl, dedup_seen_emit_fn emit, void *ctx);
    void (*info)(const void *impl, dedup_seen_info *out);
    dedup_status (*save)(const void *impl, dedup_sink *sink);
    uint64_t (*count_of)(const void *impl, const void *key, size_t len, dedup_digest d);
    void (*free)(void *impl);
    /* Records without deciding (dedup_seen_add); NULL: decide, verdicts dropped. */
    dedup_status (*add)(void *impl, const dedup_batch *b, size_t *done);
    /* Makes every committed key durable (dedup_seen_flush); NULL: nothing to do. */
    dedup_status (*flush)(void *impl);
    /* The last failure's own message (dedup_seen_error); NULL: none kept. */
    const char *(*error)(const void *impl);
    /* Figures beyond dedup_seen_info (dedup_seen_get_stats); NULL: none. */
    void (*stats)(const void *impl, dedup_seen_stats *out);
    /* Records every key it holds into 'dst' (dedup_seen_fill). */
    dedup_status (*fill)(const void *impl, dedup_seen *dst, uint64_t *count);
} dedup_seen_ops;

/* Wraps 'impl' in a seen-set.  'ops' must outlive it.  On failure (NOMEM)
 * 'impl' is not freed. */
dedup_status dedup_seen_wrap(const dedup_seen_ops *ops, void *impl, const dedup_allocator *alloc,
                             dedup_seen **out);

/* ---- Sizing from a budget -------------------------------------------------------
 * The one place where "how many keys fit in this memory" and "how much
 * memory do n keys need" are computed for every kind, so the CLI, `dedup
 * plan` and the components agree.  Both return 0 when the kind has no
 * fixed size or the arguments are out of range.  bytes_for also sizes
 * FINGERPRINT and U64 ('fpr' unused): the set made for 'items' keys up front
 * (spec.items), as its memory_usage reports it (dedup/set.h's
 * dedup_digestset_memory_for, dedup_u64set_memory_for). */
uint64_t dedup_seen_bytes_for(dedup_seen_kind kind, uint64_t items, double fpr);
uint64_t dedup_seen_capacity_for(dedup_seen_kind kind, uint64_t bytes, double fpr);

/* The same in the unit of spec.size, for a caller that shapes a filter
 * itself: bits for BLOOM and BLOCKED (before their rounding to 64 and 512),
 * counters for COUNTING (sized as a classic Bloom's bits).  size_for: the
 * size 'items' keys need at 'fpr'; hashes_for: the k that minimises the
 * rate of 'items' keys in 'size'; fpr_for: the rate 'items' keys reach in
 * 'size' with 'hashes' hash functions (0: hashes_for's); capacity_for_size:
 * the keys 'size' holds at 'fpr'.  0 for other kinds or arguments out of
 * the structures' ranges (dedup/bloom.h's sizing functions). */
uint64_t dedup_seen_size_for(dedup_seen_kind kind, uint64_t items, double fpr);
uint32_t dedup_seen_hashes_for(dedup_seen_kind kind, uint64_t items, uint64_t size);
double dedup_seen_fpr_for(dedup_seen_kind kind, uint64_t items, uint64_t size, uint32_t hashes);
uint64_t dedup_seen_capacity_for_size(dedup_seen_kind kind, uint64_t size, double fpr);
/* CUCKOO: the fingerprint bits that reach 'fpr' with 'bucket_size' slots a
 * bucket (0 if 32 bits do not), and the rate 'bits'-bit fingerprints give
 * at 'load' (0 to 1): 2 * bucket_size * load / (2^bits - 1) (dedup/cuckoo.h). */
uint32_t dedup_seen_fingerprint_bits_for(double fpr, uint32_t bucket_size);
double dedup_seen_fingerprint_fpr(uint32_t bits, uint32_t bucket_size, double load);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_SEEN_H */
