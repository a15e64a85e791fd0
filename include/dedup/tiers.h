/*
 * dedup/tiers.h - a stack of seen-sets: a local filter in front, then
 * exact tiers (Redis with recent keys, a persistent store with all of the
 * history), answering as one seen-set (kind DEDUP_SEEN_TIERS).
 *
 *   dedup_tier t[2] = {{.seen = filter, .covers_below = true},
 *                      {.seen = store, .record = dedup_store_record, .record_ctx = st}};
 *   dedup_tiers_spec sp = {.tiers = t, .n = 2};
 *   dedup_seen *stack; const dedup_tiers *view;
 *   s = dedup_tiers_create(&sp, NULL, &stack, &view);   stack owns filter and store
 *   s = dedup_seen_decide(stack, &batch, verdicts, &done);
 *
 * The stack is pure composition: it knows the tiers only through dedup/seen.h
 * (and an optional record callback), so it lives in libdedup and depends on
 * nothing; the Redis and RocksDB tiers come from their components.
 *
 * ---- How a key goes down ------------------------------------------------------
 * Each tier is asked (dedup_seen_decide(): test and record) about the keys
 * no tier above settled, top to bottom:
 *  - an exact tier's DUPLICATE ends the lookup: DUPLICATE.
 *  - a probabilistic tier's MAYBE_DUPLICATE goes to the next tier (or, with
 *    spec.trust_filter, ends it as MAYBE_DUPLICATE: the stack's false-drop
 *    rate is then the filter's, and the stats and info say so).
 *  - a probabilistic tier's NEW ("certainly never seen") ends the lookup as
 *    NEW -- when the tier's covers_below is set and spec.shared is not: the
 *    filter has seen every key the tiers below hold (it was fed from their
 *    start, rebuilt from the store, or loaded from a copy saved with it) and
 *    this process owns its keys (one process, or input routed by the ring so
 *    that each node sees all of its keys).  Every tier below then records
 *    the key, through its record callback (a blind write: a store reads
 *    nothing) or else through decide(), whose answer is believed: a
 *    DUPLICATE there turns the verdict into DUPLICATE and is counted
 *    (dedup_tiers_stats.contradicted), so a tier asked this way keeps the
 *    stack exact even when the filter missed a key.
 *  - an exact tier's NEW, a window's NEW, and any NEW of a tier that
 *    forgets (TTL, window) or does not cover the tiers below, go down: only
 *    the bottom tier's NEW is final.
 *  - LATE (windows) and UNCERTAIN (remote tiers) end the lookup as they are.
 * With spec.shared (several processes share the tiers below without routing
 * their keys), a local filter's NEW proves nothing about the others' keys,
 * so it goes down like a MAYBE: the shared tier is consulted for every key
 * and the filter saves no reads -- the stack stays exact.
 *
 * So the stack is exact (DUPLICATE means seen, NEW means never seen) when
 * its bottom tier is exact and trust_filter is off; a repeat is never kept
 * in any configuration, because every tier a key passes records it.
 *
 * ---- Windows -----------------------------------------------------------------------
 * A window tier (kind DEDUP_SEEN_WINDOW) forgets: its DUPLICATE is exact
 * inside the window, its NEW goes down to the filter or store behind it,
 * which answer across windows ("exact inside the window, a filter behind
 * it").
 *
 * ---- Failures and the output ------------------------------------------------------
 * decide() returns only after every tier has recorded the batch's new keys
 * (the store durably, as its sync mode says), so a caller that writes a
 * key's record after decide() returned never outputs a key some tier could
 * answer NEW again.  The batch is walked down the tiers in chunks; when a
 * tier fails, decide() fails with its status and *done counts the keys of
 * the chunks decided before the failing one (out[0..*done) valid, recorded
 * in every tier): the caller writes their records and stops.  The tiers
 * that answered before the failure may have recorded some keys of the
 * failing chunk, whose records are then lost to later runs (at most one
 * chunk, never a repeat).  commit() passes the delivered keys to every tier (Redis's
 * reserve-then-commit).
 *
 * Thread-safety: one thread at a time per stack.
 */
#ifndef DEDUP_TIERS_H
#define DEDUP_TIERS_H

#include "dedup/common.h"
#include "dedup/seen.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUP_TIERS_MAX 8u

/* Records keys without asking (the store's dedup_store_record). */
typedef dedup_status (*dedup_tier_record_fn)(void *ctx, const dedup_batch *b);

typedef struct dedup_tier {
    dedup_seen *seen;        /* required; owned by the stack once created */
    const char *name;        /* shown in the stats (copied); NULL = the kind's name */
    bool covers_below;       /* a probabilistic tier holds every key the tiers below
                                hold: its NEW may end the lookup */
    bool forgets;            /* holds recent keys only (a TTL): its NEW goes down.
                                Window kinds always forget. */
    dedup_tier_record_fn record; /* blind write for keys a filter above ended NEW;
                                    NULL = dedup_seen_decide() */
    void *record_ctx;
} dedup_tier;

typedef struct dedup_tiers_spec {
    const dedup_tier *tiers; /* top first */
    size_t n;                /* 1 .. DEDUP_TIERS_MAX */
    bool trust_filter;       /* a filter's MAYBE ends the lookup as MAYBE_DUPLICATE */
    bool shared;             /* the tiers below are shared with processes whose keys
                                this one does not own: no filter's NEW is final */
} dedup_tiers_spec;

typedef struct dedup_tiers dedup_tiers;

/* Creates the stack.  On success it owns every tier's seen-set (freed with
 * the stack); on failure the caller keeps them.  *view (may be NULL)
 * receives the stack's own object for the calls below, valid as long as
 * the seen-set.  Errors: DEDUP_ERR_INVALID_ARG (n out of range, a NULL
 * seen-set, a tier of kind EXACT_SPILL, which defers its answers),
 * DEDUP_ERR_INCOMPATIBLE (tiers with different seeds: one digest serves
 * them all), DEDUP_ERR_NOMEM. */
dedup_status dedup_tiers_create(const dedup_tiers_spec *spec, const dedup_allocator *alloc,
                                dedup_seen **out, const dedup_tiers **view);

/* The seen-set of tier i (0 = top), or NULL; still owned by the stack. */
dedup_seen *dedup_tiers_tier(const dedup_tiers *t, size_t i);

typedef struct dedup_tier_stats {
    char name[64];
    dedup_seen_kind kind;
    bool probabilistic;
    uint64_t lookups;      /* keys asked (decide or query) */
    uint64_t hits;         /* answered present: DUPLICATE or MAYBE_DUPLICATE */
    uint64_t ended_new;    /* lookups this tier ended as NEW */
    uint64_t passed_down;  /* keys sent to the next tier */
    uint64_t records;      /* keys recorded without a lookup, after a filter above */
    uint64_t trusted;      /* MAYBE_DUPLICATE kept as the answer (trust_filter) */
    uint64_t ns;           /* time spent in this tier's calls */
} dedup_tier_stats;

typedef struct dedup_tiers_stats {
    size_t n;
    dedup_tier_stats tier[DEDUP_TIERS_MAX];
    uint64_t keys, new_keys, duplicates, maybe_duplicates, other;
    /* new keys some filter ended before any lower tier was asked: the reads
     * of the tiers below that the filter saved (their writes remain) */
    uint64_t reads_avoided;
    uint64_t contradicted; /* a filter's NEW that a tier below answered DUPLICATE */
    bool exact;            /* the answers are exact (see above) */
    bool trust_filter, shared;
} dedup_tiers_stats;

void dedup_tiers_get_stats(const dedup_tiers *t, dedup_tiers_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_TIERS_H */
