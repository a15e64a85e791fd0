/*
 * dedup/extsort.h - exact deduplication of data larger than memory, under a
 * fixed memory budget (external hash partitioning with spill files).
 *
 * Usage:
 *
 *   dedup_extsort_params p; dedup_extsort_params_init(&p);
 *   p.memory_limit = 64 << 20; p.emit = my_writer; p.emit_ctx = out;
 *   dedup_extsort *es; dedup_extsort_create(&p, NULL, &es);
 *   for each record: dedup_extsort_push(es, rec, len, key, keylen, digest);
 *   dedup_extsort_finish(es);          emits whatever is still pending
 *   dedup_extsort_free(es);
 *
 * Records and keys are byte strings of any content (the caller strips record
 * terminators).  Records are compared by their key: two records are the same
 * when their keys are equal byte for byte; the record emitted for a key is the
 * first record pushed with that key.  'digest' must be the dedup_hash() of the
 * key under params.seed (the engine recomputes it from the key when it reads a
 * spilled record back, rather than spend 8-16 bytes of disk IO a record).
 *
 * HOW IT WORKS
 *  1. In memory.  Keys go into an exact hash table (digest tag + full key in
 *     an arena) until the table would exceed its share of the budget.  In
 *     first-occurrence order a new key is emitted at once (FIRST) and a
 *     repeated one at once (DUPLICATES), so `tail -f | dedup` streams.
 *  2. Spill.  When the table is full it is frozen: keys already in it keep
 *     being recognised (and counted), and every record whose key is not in it
 *     is appended, tagged with its input sequence number, to one of P
 *     partitions chosen by digest bits (P = 16..256 from the budget).  The
 *     partitions share one temporary file as a list of blocks, so the engine
 *     holds three file descriptors per level whatever P is.  A key's
 *     occurrences all land in one partition, and every key first seen after
 *     the spill point is absent from the frozen table.
 *  3. finish().  The frozen table's entries come first in first-occurrence
 *     order (their first occurrences all precede the spill point), so they
 *     are emitted and the table freed.  Each partition is then deduplicated
 *     by the same procedure one level down (recursively partitioned by other
 *     digest bits if its distinct keys still do not fit), and its result
 *     (first occurrences with their sequence numbers and counts) is written
 *     to a result file.  A loser-tree k-way merge of the results by sequence
 *     number (first-occurrence order) or by key bytes (sorted order) emits
 *     the output.  Sorted order sorts each in-memory table with a multikey
 *     quicksort, so the result is byte-identical to `LC_ALL=C sort -u` when
 *     key == record.
 *
 * IO COST (S = bytes of the records not recognised by the frozen table, about
 * the input size when repeats are spread uniformly; R = bytes of distinct
 * records among them; each spilled record carries ~3-5 bytes of framing):
 * written S + R, read back S + R, in one partitioning level (distinct keys up
 * to ~P x budget/2, i.e. ~8 GB of distinct keys at 64 MB); each extra level
 * adds S' + R' for the partitions that needed it.  Together with reading the
 * input (1x) and writing the output (R) this is 1 + 2S + 2R + R: 3.5x the
 * input when nothing spills back, about 4.5x with half the input repeated
 * uniformly; nothing at all when the distinct keys fit in memory.
 *
 * MEMORY: the engine's own allocations stay within memory_limit except for
 * (a) 16 bytes per 64 KiB spill block (0.025% of the bytes spilled) and (b)
 * a single key + record pair larger than its table share, which is held whole
 * while its own partition is processed (records are passed whole by the
 * caller in any case).  dedup_extsort_stats() reports the measured peak.
 *
 * TEMPORARY FILES are created unlinked (O_TMPFILE, else mkstemp then unlink
 * at once), so nothing is left in the directory after success, error, a
 * signal or even kill -9; the space is released when the engine is freed (or
 * the process ends).  No signal handler is needed or installed.
 *
 * Thread-safety: one engine is used by one thread at a time.
 */
#ifndef DEDUP_EXTSORT_H
#define DEDUP_EXTSORT_H

#include "dedup/common.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Smallest accepted memory_limit, and the default. */
#define DEDUP_EXTSORT_MIN_MEMORY (UINT64_C(64) << 10)
#define DEDUP_EXTSORT_DEFAULT_MEMORY (UINT64_C(256) << 20)
/* Partitioning levels before the engine gives up with DEDUP_ERR_LIMIT; 16
 * levels of >= 16-way splits separate any set of keys whose 128-bit digests
 * differ, which only a digest collision can defeat. */
#define DEDUP_EXTSORT_MAX_DEPTH 16

typedef enum dedup_extsort_order {
    DEDUP_EXTSORT_FIRST_OCCURRENCE = 0, /* output in the order keys first appear */
    DEDUP_EXTSORT_SORTED = 1            /* sorted bytewise by key (memcmp, shorter first) */
} dedup_extsort_order;

typedef enum dedup_extsort_output {
    DEDUP_EXTSORT_FIRST = 0,      /* the first record of each distinct key */
    DEDUP_EXTSORT_DUPLICATES = 1, /* every record after the first of its key, in input order */
    DEDUP_EXTSORT_COUNT = 2,      /* the first record of each key, with its count */
    DEDUP_EXTSORT_UNIQUE = 3      /* records whose key occurs exactly once */
} dedup_extsort_output;

/* Receives one output record ('count' is the key's number of occurrences for
 * DEDUP_EXTSORT_COUNT, 1 otherwise).  'rec' is valid only during the call.
 * A nonzero return stops the engine: the call that emitted returns
 * DEDUP_ERR_CANCELLED and dedup_extsort_emit_result() returns the value. */
typedef int (*dedup_extsort_emit_fn)(void *ctx, const void *rec, size_t len, uint64_t count);

/* Replaces write(2) for temporary files (failure injection, accounting):
 * returns bytes written (>= 0) or -1 with errno set. */
typedef ptrdiff_t (*dedup_extsort_write_fn)(void *ctx, int fd, const void *buf, size_t len);

typedef struct dedup_extsort_params {
    uint64_t memory_limit;       /* bytes >= DEDUP_EXTSORT_MIN_MEMORY; default 256 MiB */
    const char *tmpdir;          /* NULL: $TMPDIR if set and non-empty, else /tmp; copied */
    dedup_extsort_order order;   /* default DEDUP_EXTSORT_FIRST_OCCURRENCE */
    dedup_extsort_output output; /* default DEDUP_EXTSORT_FIRST */
    uint64_t seed;               /* seed of the digests passed to push(); default DEDUP_DEFAULT_SEED */
    dedup_extsort_emit_fn emit;  /* required */
    void *emit_ctx;
    dedup_extsort_write_fn write_fn; /* NULL: write(2) */
    void *write_ctx;
} dedup_extsort_params;

typedef struct dedup_extsort_stats {
    uint64_t records_in;      /* records pushed */
    uint64_t records_out;     /* records emitted */
    uint64_t distinct;        /* distinct keys (known after finish) */
    uint64_t runs_written;    /* partitions written to disk, at every level */
    uint64_t merge_passes;    /* k-way merges of partition results */
    uint64_t max_depth;       /* deepest partitioning level used (0: none) */
    uint64_t bytes_spilled;   /* bytes written to temporary files */
    uint64_t bytes_read_back; /* bytes read from temporary files */
    uint64_t peak_memory;     /* most bytes the engine held at once */
    bool spilled;             /* whether anything went to disk */
} dedup_extsort_stats;

typedef struct dedup_extsort dedup_extsort;

/* Fills 'params' with the defaults above. */
void dedup_extsort_params_init(dedup_extsort_params *params);

/* Creates an engine.  No file is created until the first spill.
 * Errors: DEDUP_ERR_INVALID_ARG (no emit, memory_limit below the minimum,
 * unknown order/output, DUPLICATES with SORTED order), DEDUP_ERR_NOMEM. */
dedup_status dedup_extsort_create(const dedup_extsort_params *params, const dedup_allocator *alloc,
                                  dedup_extsort **out);

/* Frees the engine and its temporary files; NULL is a no-op. */
void dedup_extsort_free(dedup_extsort *es);

/* Adds one record.  'key' may be NULL to use the record itself as key (then
 * keylen is ignored).  May call emit (first-occurrence FIRST/DUPLICATES while
 * in memory).  Errors: DEDUP_ERR_LIMIT (key or record of 2^32-2 bytes or
 * more, or partitioning deeper than DEDUP_EXTSORT_MAX_DEPTH), DEDUP_ERR_NOMEM,
 * DEDUP_ERR_IO (temporary file; see dedup_extsort_io_error), DEDUP_ERR_CANCELLED
 * (emit returned nonzero), DEDUP_ERR_INVALID_ARG (after finish).  After an
 * error the engine only accepts free(); every call repeats the error. */
dedup_status dedup_extsort_push(dedup_extsort *es, const void *rec, size_t len, const void *key,
                                size_t keylen, dedup_digest digest);

/* Ends the input and emits everything still pending, then releases the
 * temporary files.  Same errors as push, plus DEDUP_ERR_CORRUPT or
 * DEDUP_ERR_TRUNCATED if a temporary file was altered behind the engine. */
dedup_status dedup_extsort_finish(dedup_extsort *es);

/* After DEDUP_ERR_IO: the errno of the failure (ENOSPC when the disk is full),
 * the temporary directory, and how many bytes of temporary space the engine
 * had written plus the bytes of the failed write (a lower bound of what it
 * needs).  Any output pointer may be NULL.  Returns false if no IO error
 * happened. */
bool dedup_extsort_io_error(const dedup_extsort *es, int *err, const char **dir,
                            uint64_t *bytes_needed);

/* After DEDUP_ERR_CANCELLED: the nonzero value emit returned (0 otherwise). */
int dedup_extsort_emit_result(const dedup_extsort *es);

/* Counters; valid at any time. */
void dedup_extsort_stats_get(const dedup_extsort *es, dedup_extsort_stats *out);

/* Bytes the engine holds now. */
size_t dedup_extsort_memory_usage(const dedup_extsort *es);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_EXTSORT_H */
