/*
 * dedup/window.h - deduplication of a stream over a window of event time.
 *
 * In a stream the question is not "ever seen?" but "seen in the last
 * DURATION?".  A dedup_window answers it for each record in one call,
 *
 *     dedup_window_seen(w, digest, event_time, &verdict)
 *
 * and its memory follows the keys inside the window, not the history.
 *
 * ---- Semantics (exact mode) ----------------------------------------------
 * Time is an int64 count of microseconds (any epoch; the CLI uses the Unix
 * epoch).  A record is KEPT when the verdict is DEDUP_NEW; only kept records
 * are remembered (keep-first, anchored at the kept record, as Beam's
 * Deduplicate and Flink's keep-first deduplication).  With D = duration:
 *
 *  - DEDUP_WINDOW_SLIDING: a record with event time u is a DUPLICATE iff a
 *    record with the same key was kept at a time t with |u - t| < D.
 *    "Apart" is symmetric, so an out-of-order record at u = 95 that arrives
 *    after one kept at t = 100 (D = 10) is a duplicate.  A key that never
 *    stops arriving is kept once per D: at t0, then at the first arrival
 *    u >= t0 + D, and so on.
 *  - DEDUP_WINDOW_TUMBLING: a DUPLICATE iff a record with the same key was
 *    kept in the same aligned window, floor(u / D) == floor(t / D): windows
 *    start at multiples of D from time 0 (floor also for negative times).
 *  - DEDUP_WINDOW_COUNT ("last N", N = duration): time is the record index
 *    i = 0, 1, 2, ... counted by the object (the event_time argument is
 *    ignored).  A DUPLICATE iff the same key was kept at an index j with
 *    i - j <= N, i.e. within the previous N records.  Nothing is ever late.
 *
 * Refresh on duplicate (params.refresh: "suppress while it keeps coming"):
 * a duplicate also renews its key: the key's time becomes max(t, u), where
 * t is the time it had and u the duplicate's.  A key that keeps arriving
 * less than D apart is then kept once and suppressed for as long as it
 * keeps coming; it is NEW again only after a gap of at least D in its own
 * records.  (Without refresh it is kept again D after its last kept record,
 * however often it came in between.)  Equivalently: a record is a
 * DUPLICATE iff a record with the same key, kept or duplicate but not late,
 * had a time t with |u - t| < D.  That holds because refresh requires
 * lateness < D: a non-late record is then never a whole window behind a
 * record that moved its key's time forward.  Sliding and count windows
 * only; a tumbling window forgets a key at the end of its aligned window
 * whatever its time in it, so refresh would change nothing there, and
 * create refuses it (DEDUP_ERR_INVALID_ARG), as it refuses lateness >= D
 * with refresh.
 *
 * Out-of-order events and the watermark: T is the largest event time seen
 * so far (over all non-late records, duplicates included) and the watermark
 * is W = max(T - lateness, the last value given to
 * dedup_window_advance_watermark()).  A record with u < W is LATE: no
 * decision is made, nothing is recorded, it is only counted (the caller
 * decides whether to write it).  A record with u >= W is decided exactly as
 * above, however out of order it is; records kept more than D before W can
 * never make a non-late record a duplicate, and are forgotten.
 *
 * Keys: each record enters as its 128-bit digest (dedup/hash.h) under the
 * window's seed (dedup_window_digest()).  Exact mode compares full digests:
 * two distinct keys collide with probability about n^2 / 2^129 over n keys
 * held at once.  The digest {0, 0} is stored as {0, 1}.
 *
 * ---- Memory: generations -----------------------------------------------
 * Kept records are grouped into generations by event time: for sliding and
 * count windows generation g holds the records kept at t in [g*s, (g+1)*s)
 * with s = ceil(D / G) (G = params.generations; D = N + 1 for count
 * windows, whose "time" is the record index), for tumbling windows one
 * generation is one aligned window.  A generation is dropped whole, in O(1)
 * per generation and without looking at its keys, as soon as the watermark
 * makes all its records irrelevant ((g+1)*s <= W - D + 1 for sliding,
 * (g+1)*D <= W for tumbling).  So a window holds the keys kept in the last
 * D + s + lateness of event time, no per-key timer is ever scanned, and a
 * stream with a constant number of keys in its window runs in constant
 * memory.
 *
 * Exact mode: each generation is an ordered open-addressing table of
 * 24-byte entries (digest + kept time) at up to 85% load, compacted when the
 * generation stops being the newest; dedup_window_memory_usage() reports what
 * it takes, which depends on where the clock is within a span.  With
 * refresh a renewed key moves to the newest generation and leaves its slot
 * in an older table, which is rebuilt at its size once it falls below 65%
 * load.  A lookup probes each generation that
 * can hold a time within D of u: at most G + 1 in order, at most 2G + 1 out
 * of order.  Tables of 8 MB and more are advised to use huge pages
 * (madvise, Linux), which removes a TLB miss from each probe.
 *
 * ---- Approximate mode (DEDUP_WINDOW_APPROX) --------------------------------
 * One table of short fingerprints serves all generations (partial-key
 * cuckoo hashing, as dedup/cuckoo.h: nb buckets of 4 slots, a key may live
 * in 2 buckets).  Each slot holds f bits of fingerprint and t bits of tag,
 * the generation id mod 2^t, so the A generations that can be alive at once
 * have distinct tags:
 *     A = ceil((L + D - 1) / s) + 1   (sliding, count; G + 1 when L = 0 and
 *                                      G divides D),
 *     A = ceil(L / D) + 1             (tumbling; 1 when L = 0),
 *     t = ceil(log2 A) (0 .. 10),  f = the smallest with 8 / (2^f - 1) <= fpr
 *     (10 at 1%).
 * All indexes come from the key's digest: bucket b1 = dedup_reduce(lo, nb),
 * fingerprint 1 + dedup_reduce(hi, 2^f - 1), b2 = (h(fp) - b1) mod nb.
 * A slot whose tag is not a live generation's counts as empty, so a
 * generation is still dropped in O(1); the slots it leaves are cleared by
 * one sequential pass over the table just before its tag is reused (skipped
 * if new entries already overwrote them all).  A lookup compares the
 * fingerprint with the 8 slots of the key's two buckets and accepts a match
 * only if its tag is that of a live generation the lookup consults.
 *
 * Memory: the table is sized for the keys the live generations are planned
 * to hold, A * ceil(capacity * s / D) (A * capacity for tumbling windows),
 * at 95% load:
 *     bytes ~= A * ceil(capacity * s / D) / 0.95 * (f + t) / 8
 * plus under 20 KB.  With the default G = 7 and no lateness: 8/7 / 0.95 *
 * 13 bits = 1.96 bytes per planned key at fpr = 1% (2.14 at G = 4, which
 * needs the same 3 tag bits; G = 6: 2.00).  Lateness adds generations (and
 * possibly a tag bit).
 *
 * More keys than planned: when the key's buckets are full and a kick chain
 * (at most 500 moves) finds no room, the entry goes to an exact stash
 * (16 bytes per entry, at most half full): it keeps the key's bucket pair,
 * tag, fingerprint and 64 - f - t more bits of the digest, so it adds
 * nothing measurable to the rate and never loses a key.  When generations
 * expire, their stash entries are removed in place (one sequential pass
 * over the stash), and the others move back into the table where it has
 * room if its free slots are at least half as many as they (a window a
 * little past its plan); far past the plan they stay, and leave with their
 * generation, or for the table when a duplicate renews one (refresh) while
 * its buckets have room.  A stash under 1/8 full shrinks, an empty one is
 * freed.  So memory exceeds the formula above only while the window holds
 * more keys than the table fits (a few percent above the plan) and until
 * the keys that overflowed expire or move back, by 16 to 64 bytes per key
 * in the stash at its fullest.  A probe of the stash reads about one cache
 * line however far past the plan the window runs, and an expiry costs
 * about what it freed.  Nothing fails except DEDUP_ERR_NOMEM.
 *
 * The verdicts are DEDUP_NEW and DEDUP_MAYBE_DUPLICATE, with these
 * guarantees, at any load:
 *
 *  - never a false NEW: a record with the same key as a kept record at t is
 *    never NEW when |u - t| < D (sliding/count) or in t's window (tumbling);
 *  - with refresh, "kept record" above reads "record decided (kept or
 *    MAYBE_DUPLICATE)": a duplicate moves the entry it matched to its own
 *    generation, so the no-false-NEW promise holds for every record that
 *    renewed the key (a false match renews the other key's entry, which
 *    only lengthens that key's life);
 *  - granularity (sliding/count only): a kept record may also make a record
 *    a MAYBE_DUPLICATE when D <= |u - t| < D + s, because whole generations
 *    are consulted; so a key is remembered at least D and at most
 *    D + s = D * (1 + 1/G) (rounded up to whole time units);
 *  - otherwise a record whose key was never kept (in the consulted
 *    generations) is a MAYBE_DUPLICATE with probability at most
 *    8 * load / (2^f - 1) <= fpr (0.74% at 95% load and f = 10).  The rate
 *    is per new key: a key wrongly reported collides with the same entries
 *    at its next occurrences while they live, so the share of records
 *    wrongly dropped can exceed fpr (bench/bench_window.c measures both).
 *
 * The stats then count keys kept (fingerprints cannot tell keys apart
 * exactly), and a key expires with its generation as above.  A window
 * resumed from a saved state gives exactly the verdicts of an uninterrupted
 * run (the table, the stash, the kick generator's state are saved), except
 * after an allocation failure while moving stash entries back, which can
 * change which entries sit where, and so which false duplicates occur.
 *
 * Thread-safety: one writer.  seen(), advance_watermark(), load and free need
 * exclusive access; the const functions may run concurrently with each other
 * but not with a writer.
 */
#ifndef DEDUP_WINDOW_H
#define DEDUP_WINDOW_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dedup_window_type {
    DEDUP_WINDOW_SLIDING = 0,  /* |u - t| < D */
    DEDUP_WINDOW_TUMBLING = 1, /* floor(u / D) == floor(t / D) */
    DEDUP_WINDOW_COUNT = 2     /* last N records: i - j <= N */
} dedup_window_type;

typedef enum dedup_window_mode {
    DEDUP_WINDOW_EXACT = 0, /* verdicts NEW / DUPLICATE, digest-exact */
    DEDUP_WINDOW_APPROX = 1 /* verdicts NEW / MAYBE_DUPLICATE, tagged fingerprints */
} dedup_window_mode;

/* Limits.  Event times and durations are bounded so that every difference
 * of two of them fits an int64 (+-2^62 us is +-146,000 years). */
#define DEDUP_WINDOW_MAX_TIME ((INT64_C(1) << 62) - 1)
#define DEDUP_WINDOW_MIN_TIME (-(INT64_C(1) << 62))
#define DEDUP_WINDOW_MAX_DURATION (UINT64_C(1) << 62)
/* Generations per window: above 64 a lookup probes too many tables for no
 * useful gain in precision. */
#define DEDUP_WINDOW_MAX_GENERATIONS 64u
/* Approximate mode: generations that may be alive at once (A below: they
 * need distinct tags of at most 10 bits).  Reached only when lateness is
 * hundreds of times the window; create refuses such parameters with
 * DEDUP_ERR_LIMIT. */
#define DEDUP_WINDOW_MAX_APPROX_LIVE 1024u

/* Default G: 4 for exact windows, 7 for approximate ones (memory above). */
#define DEDUP_WINDOW_DEFAULT_GENERATIONS 4u
#define DEDUP_WINDOW_DEFAULT_APPROX_GENERATIONS 7u

typedef struct dedup_window_params {
    dedup_window_type type; /* default DEDUP_WINDOW_SLIDING */
    dedup_window_mode mode; /* default DEDUP_WINDOW_EXACT */
    uint64_t duration;      /* D: microseconds, or N records for COUNT; required,
                               1 .. DEDUP_WINDOW_MAX_DURATION */
    uint64_t lateness;      /* allowed lateness in microseconds; default 0;
                               at most DEDUP_WINDOW_MAX_DURATION; ignored (0) for COUNT */
    uint32_t generations;   /* G: 1 .. DEDUP_WINDOW_MAX_GENERATIONS; 0 (what
                               params_init sets) = the mode's default, 4 exact,
                               7 approximate; ignored for TUMBLING (one
                               generation = one window) */
    uint64_t capacity;      /* distinct keys expected to be kept per window D.
                               APPROX: required (>= 1), sizes the table.
                               EXACT: optional hint for the first tables (0 = learn) */
    double fpr;             /* APPROX: false duplicates per new key, in
                               [DEDUP_MIN_FPR, 0.5]; default 0.01 */
    uint64_t seed;          /* hash seed; default DEDUP_DEFAULT_SEED */
    bool refresh;           /* refresh on duplicate (above): a duplicate's time
                               becomes its key's time; default false.  SLIDING
                               and COUNT windows with lateness < duration */
} dedup_window_params;

/* Defaults as listed above; duration 0 (must be set), generations 0 (the
 * mode's default, filled in by create: get_params() shows it). */
void dedup_window_params_init(dedup_window_params *params);

typedef struct dedup_window dedup_window;

/* Creates an empty window.
 * Errors: DEDUP_ERR_INVALID_ARG (a field outside its range above; refresh
 * with a TUMBLING window or with lateness >= duration),
 * DEDUP_ERR_LIMIT (APPROX with more than DEDUP_WINDOW_MAX_APPROX_LIVE
 * generations alive at once, or a table of more than DEDUP_MAX_BITS bits),
 * DEDUP_ERR_NOMEM.  Exact mode allocates its tables lazily; approximate
 * mode allocates its table here (and a stash only if it overflows). */
dedup_status dedup_window_create(const dedup_window_params *params, const dedup_allocator *alloc,
                                 dedup_window **out);
/* Frees the window; NULL is a no-op. */
void dedup_window_free(dedup_window *w);

/* The digest of a key under this window's seed. */
dedup_digest dedup_window_digest(const dedup_window *w, const void *key, size_t len);

/* ---- The one verb -----------------------------------------------------------
 * Decides the record with key digest 'd' and event time 'time' (microseconds;
 * ignored for COUNT windows) and, when it is kept, records it.  *verdict is
 * DEDUP_NEW (kept), DEDUP_DUPLICATE (exact), DEDUP_MAYBE_DUPLICATE (approx)
 * or DEDUP_LATE (time below the watermark: not decided, not recorded).
 * A non-late record raises the maximum event time, which may advance the
 * watermark and drop generations.  Exact: O(G) expected per call, one table
 * probe per consulted generation.  Approx: two buckets (two cache lines) per
 * call, plus a kick chain of at most 500 moves when both are full, plus one
 * probe of the stash when there is one; dropping a generation costs one
 * pass over the stash when there is one (nothing otherwise; moving entries
 * back, when it does, sorts them), reusing its tag one pass over the table
 * (once per generation span).
 * Errors: DEDUP_ERR_RANGE (time outside [DEDUP_WINDOW_MIN_TIME,
 * DEDUP_WINDOW_MAX_TIME]; nothing changed), DEDUP_ERR_NOMEM (a table or
 * the stash could not be allocated: the key is not recorded and the record
 * not counted, but the watermark may have advanced as the time demanded; the
 * window stays usable). */
dedup_status dedup_window_seen(dedup_window *w, dedup_digest d, int64_t time,
                               dedup_verdict *verdict);

/* The same verdicts as calling dedup_window_seen() on (d[i], times[i]) for
 * i = 0 .. n-1 in order, but the table slots of the next records are
 * fetched while the current one is decided, so a window much larger than
 * the CPU caches runs faster (both modes).  'times' may be NULL for COUNT
 * windows.  Stops at the first error and returns it; *done (may be NULL)
 * receives the number of records decided, whose verdicts are valid. */
dedup_status dedup_window_seen_batch(dedup_window *w, const dedup_digest *d,
                                     const int64_t *times, size_t n, dedup_verdict *verdicts,
                                     size_t *done);

/* Answers "was this key seen within the window at time 'time'?" without
 * recording anything and without moving the clock: *verdict is the verdict
 * dedup_window_seen(w, d, time) would give now (DEDUP_NEW, DEDUP_DUPLICATE
 * or DEDUP_MAYBE_DUPLICATE, DEDUP_LATE below the watermark), but the key is
 * not kept, no duplicate refreshes it, the maximum event time, the
 * watermark and the stats stay as they are.  A time above the maximum is
 * answered as if it had arrived (the generations it would expire cannot
 * hold a time within D of it anyway), with one exception in approximate
 * windows whose table overflowed: the expiry seen() would run can move
 * entries from the stash into the table, where they match on the shorter
 * fingerprint alone, so seen() may then answer MAYBE_DUPLICATE where the
 * query said NEW (a false duplicate; never the reverse, and never a false
 * NEW: a key kept within D is found either way).  COUNT windows ignore 'time' and
 * answer for the next record's index.  O(G) exact, two buckets approximate.
 * Errors: DEDUP_ERR_INVALID_ARG (NULL), DEDUP_ERR_RANGE (time outside the
 * limits).  Const: may run concurrently with other const calls. */
dedup_status dedup_window_query(const dedup_window *w, dedup_digest d, int64_t time,
                                dedup_verdict *verdict);

/* Convenience: hash 'key' with the window's seed, then as above. */
dedup_status dedup_window_seen_key(dedup_window *w, const void *key, size_t len, int64_t time,
                                   dedup_verdict *verdict);

/* Raises the watermark to at least 'watermark' (lower values are ignored):
 * the caller declares that no record older than it matters any more, e.g.
 * when wall-clock time passes in an idle stream.  Generations it makes
 * irrelevant are dropped.  Records below it become LATE.
 * Errors: DEDUP_ERR_RANGE (outside the time limits), DEDUP_ERR_UNSUPPORTED
 * (COUNT windows). */
dedup_status dedup_window_advance_watermark(dedup_window *w, int64_t watermark);

/* EXACT windows: sizes each new generation's first table for at most
 * 'max_entries' entries (0, the default: for as many as the generation
 * before it held).  A generation then grows its table by half at a time as
 * keys come, so no generation's start allocates a large table at once: for
 * a caller that must answer every call within a few milliseconds (a
 * server) at the cost of more rebuilds.  Not saved with the window: set it
 * again after dedup_window_load().  No effect on APPROX windows.
 * Errors: DEDUP_ERR_INVALID_ARG (w NULL). */
dedup_status dedup_window_limit_first_table(dedup_window *w, uint64_t max_entries);

/* ---- State ------------------------------------------------------------------ */
typedef struct dedup_window_stats {
    uint64_t records;     /* seen() calls that returned DEDUP_OK */
    uint64_t kept;        /* DEDUP_NEW verdicts */
    uint64_t duplicates;  /* DEDUP_DUPLICATE or DEDUP_MAYBE_DUPLICATE verdicts */
    uint64_t late;        /* DEDUP_LATE verdicts */
    int64_t late_max_behind; /* largest (max time - time) of a late record: a
                                lateness >= this would have covered them all; 0 if none */
    uint64_t live;        /* kept records still remembered */
    uint64_t peak_live;   /* largest value 'live' has had */
    uint64_t expired;     /* kept records forgotten with their generation */
    uint64_t generations; /* generations alive */
    bool has_time;        /* a non-late record (or a watermark) has been seen */
    int64_t max_time;     /* T (COUNT: next record index - 1); valid if has_time */
    int64_t watermark;    /* W; valid if has_time */
} dedup_window_stats;

void dedup_window_get_stats(const dedup_window *w, dedup_window_stats *out);
/* The parameters the window runs with (defaults filled in). */
void dedup_window_get_params(const dedup_window *w, dedup_window_params *out);
/* Generation span s in time units (D for tumbling windows). */
uint64_t dedup_window_span(const dedup_window *w);
/* Largest number of generations one seen() call consults (Q above). */
uint32_t dedup_window_lookups(const dedup_window *w);
/* Bytes held, the struct included. */
size_t dedup_window_memory_usage(const dedup_window *w);
/* Exact mode: *out = the keys whose time makes a record at 'time' a
 * duplicate now (sliding: |time - t| < D; tumbling: t in time's window;
 * count: 'time' is a record index), the keys a query at 'time' would call
 * DUPLICATE: none (0) for a time a query calls LATE.  O(entries held).  Errors: DEDUP_ERR_UNSUPPORTED (approximate
 * mode: fingerprints cannot be told apart), DEDUP_ERR_RANGE (time outside
 * the limits); *out is 0 then. */
dedup_status dedup_window_count_within(const dedup_window *w, int64_t time, uint64_t *out);
/* Approximate mode: the rate at which a new key is called a
 * MAYBE_DUPLICATE at the table's load now, 8 * load / (2^f - 1) (at most
 * params.fpr while the keys stay within the plan; the stash adds nothing
 * measurable).  0 for exact windows. */
double dedup_window_fpr_now(const dedup_window *w);

/* ---- Persistence (docs/FORMAT.md: type WINDOW) -------------------------------
 * The saved state holds the parameters (refresh included), the clock (max time, watermark,
 * record index), the stats and every live generation, so a stream resumed
 * from it gets exactly the verdicts an uninterrupted run would have got.
 * Errors: the sink's, DEDUP_ERR_LIMIT, DEDUP_ERR_NOMEM (an approximate
 * window with a stash sorts a copy of it). */
dedup_status dedup_window_save(const dedup_window *w, dedup_sink *sink);
/* Bytes dedup_window_save() writes. */
uint64_t dedup_window_serialized_size(const dedup_window *w);
/* Loads a saved window; validates every field (ranges, order, generation
 * placement, lengths against what the input holds) before allocating, and
 * the checksum.  Errors: the decoder's (BAD_MAGIC, VERSION, WRONG_TYPE,
 * TRUNCATED, CORRUPT, CHECKSUM), LIMIT, NOMEM, IO; DEDUP_ERR_VERSION also
 * for an approximate window saved in the older Bloom-generation layout
 * (before the tagged table; docs/FORMAT.md). */
dedup_status dedup_window_load(dedup_source src, const dedup_allocator *alloc,
                               dedup_window **out);
/* Atomic save to a path (temporary file, fsync, rename) and load from one
 * (trailing bytes after the structure are rejected as DEDUP_ERR_TRAILING). */
dedup_status dedup_window_save_file(const dedup_window *w, const char *path);
dedup_status dedup_window_load_file(const char *path, const dedup_allocator *alloc,
                                    dedup_window **out);

/* The window behind a seen-set of kind DEDUP_SEEN_WINDOW (dedup/seen.h),
 * for the calls above (statistics, parameters); NULL for other kinds and
 * for NULL.  Owned by the seen-set: valid until it is freed. */
struct dedup_seen;
const dedup_window *dedup_window_of_seen(const struct dedup_seen *s);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_WINDOW_H */
