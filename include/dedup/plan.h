/*
 * dedup/plan.h - the five questions, answered with numbers.
 *
 * Before anything runs, a deduplication job is decided by five answers:
 * how many distinct keys (and how long), how much memory, whether a false
 * "duplicate" is acceptable and how often, whether the records are a batch
 * or a stream (and over what window a repeat counts), whether keys must be
 * deleted, and what infrastructure there is (one machine, a Redis, a
 * cluster).  dedup_plan_make() turns them into a recommendation: a method
 * with its exact figures -- memory, bits per key, hashes k and expected
 * false-positive rate from the library's own sizing functions (the numbers
 * `dedup calc` and `dedup --mode ...` use); disk and IO for the external
 * path; nodes and memory per node for a sharded or Redis plan -- the exact
 * `dedup` command line, and every alternative considered with the reason
 * it lost.
 *
 * The rules, in order (the articles' advice, made exact):
 *   1. a stream deduplicated within a window keeps only the window's keys:
 *      a window (exact when it fits, else approximate if a rate is
 *      accepted), or Redis keys with a TTL when machines share it;
 *   2. a Redis infrastructure shares the seen-set between machines: Redis
 *      keys (exact, optional TTL) or a Bloom filter on Redis strings;
 *   3. deletes need a kind that can forget: cuckoo (smallest) or counting
 *      Bloom, a bitmap for integer keys;
 *   4. when the exact set fits (the budget, or 1 GiB when none is given and
 *      a rate is accepted), use it: a filter's errors buy nothing then;
 *   5. exact required and the exact set does not fit: the fingerprint set
 *      (16-byte digests; collision odds n^2 / 2^129, stated) if it fits,
 *      else shards on a cluster, else the external sort-merge on disk;
 *   6. a rate accepted: the blocked Bloom filter (one cache line per key)
 *      unless it needs over 25% more memory than the classic one, which
 *      then wins; if neither fits, shards on a cluster, else external.
 * Integer keys with a known range add the bitmap (one bit per possible
 * value) and the 64-bit integer set.
 *
 * Memory figures are the structures' documented upper bounds (dedup/set.h,
 * dedup/window.h, dedup/bloom.h, dedup/cuckoo.h), not averages, so a plan
 * that fits does fit.  Pure functions; thread-safe; no allocation.
 */
#ifndef DEDUP_PLAN_H
#define DEDUP_PLAN_H

#include "dedup/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dedup_plan_infra {
    DEDUP_PLAN_LOCAL = 0,   /* one machine */
    DEDUP_PLAN_REDIS = 1,   /* machines that share a Redis (or a Redis Cluster) */
    DEDUP_PLAN_CLUSTER = 2  /* many machines, each deduplicating its shard */
} dedup_plan_infra;

typedef struct dedup_plan_question {
    uint64_t items;       /* distinct keys (per window when window_us > 0); required */
    uint64_t records;     /* records in all, for disk and IO; 0 = 2 * items */
    double key_bytes;     /* mean key length in bytes; 0 = 40 */
    double record_bytes;  /* mean record length with its newline; 0 = key_bytes + 1 */
    uint64_t memory;      /* bytes each machine may use; 0 = no budget given */
    double fpr;           /* acceptable false-positive rate in (0, 0.5]; 0 = exact */
    bool stream;          /* records arrive as a stream (else a batch) */
    uint64_t window_us;   /* stream: a repeat counts only within this; 0 = ever */
    bool deletes;         /* keys must be removable */
    dedup_plan_infra infra;
    uint32_t nodes;       /* cluster/Redis machines available; 0 = as many as needed */
    bool int_keys;        /* keys are 64-bit integers ... */
    uint64_t range_lo, range_hi; /* ... in [lo, hi] when range_hi > range_lo */
} dedup_plan_question;

/* Zeroes every field: a local batch, exact, 40-byte keys. */
void dedup_plan_question_init(dedup_plan_question *q);

typedef enum dedup_plan_method {
    DEDUP_PLAN_EXACT = 0,       /* exact string set */
    DEDUP_PLAN_FINGERPRINT,     /* 128-bit digest set */
    DEDUP_PLAN_U64,             /* 64-bit integer set */
    DEDUP_PLAN_BITMAP,          /* one bit per integer in a range */
    DEDUP_PLAN_BLOCKED,         /* blocked Bloom */
    DEDUP_PLAN_BLOOM,           /* classic Bloom */
    DEDUP_PLAN_CUCKOO,          /* cuckoo filter */
    DEDUP_PLAN_COUNTING,        /* counting Bloom */
    DEDUP_PLAN_WINDOW,          /* exact window */
    DEDUP_PLAN_WINDOW_APPROX,   /* approximate window */
    DEDUP_PLAN_EXTERNAL,        /* exact in memory, then sort-merge on disk */
    DEDUP_PLAN_SHARDED,         /* dedup split over nodes, exact set on each */
    DEDUP_PLAN_REDIS_KEYS,      /* one Redis key per seen key, optional TTL */
    DEDUP_PLAN_REDIS_BITMAP,    /* blocked Bloom on Redis strings */
    DEDUP_PLAN_METHODS
} dedup_plan_method;

/* "exact", "fingerprint", "u64", "bitmap", "blocked", "bloom", "cuckoo",
 * "counting", "window", "window-approx", "external", "sharded",
 * "redis-keys", "redis-bitmap"; "unknown" for other values. */
const char *dedup_plan_method_name(dedup_plan_method m);

typedef struct dedup_plan_choice {
    dedup_plan_method method;
    bool considered;        /* false: does not apply to these answers at all */
    bool feasible;          /* meets every answer (exactness, deletes, memory ...) */
    bool exact;             /* never a false duplicate (fingerprint: but for collisions) */
    uint64_t memory;        /* bytes in memory, all nodes together */
    double bits_per_key;    /* memory * 8 / items */
    uint32_t hashes;        /* k, or 0 */
    double fpr;             /* expected false-positive rate (fingerprint: collision odds) */
    uint64_t disk;          /* external: temporary bytes on disk */
    uint64_t io;            /* external: bytes read and written, input included */
    uint32_t nodes;         /* machines (1 for local methods) */
    uint64_t node_memory;   /* bytes per machine */
    char command[400];      /* the `dedup` command line (placeholders in CAPITALS) */
    char reason[400];       /* chosen: why; others: why it lost */
} dedup_plan_choice;

/* choices[m] is method m's; only those with 'considered' apply (windows
 * only for a windowed stream, u64/bitmap only for integer keys, sharded
 * only for a cluster, the Redis schemes only for Redis). */
typedef struct dedup_plan {
    dedup_plan_method chosen; /* the recommendation: choices[chosen] */
    size_t count;             /* methods considered */
    dedup_plan_choice choices[DEDUP_PLAN_METHODS];
} dedup_plan;

/* Answers 'q' into 'out'.  Errors: DEDUP_ERR_INVALID_ARG (NULL, items 0,
 * fpr outside [0, 0.5], window_us without stream, a range with hi < lo
 * or not int_keys), DEDUP_ERR_LIMIT (items beyond 2^48). */
dedup_status dedup_plan_make(const dedup_plan_question *q, dedup_plan *out);

/* Memory figures behind the plan, per key, exposed for tests and docs. */
double dedup_plan_exact_bytes_per_key(double key_bytes); /* string set, upper bound */
#define DEDUP_PLAN_WINDOW_BYTES 37.0       /* exact window, per key (dedup/window.h) */
#define DEDUP_PLAN_REDIS_KEY_BYTES 90.0    /* a 16-byte Redis key with a TTL, about */
#define DEDUP_PLAN_EXTERNAL_IO 3.5         /* IO per input byte, upper (bench/RESULTS.md) */

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_PLAN_H */
