/*
 * dedup/extsort.h - exact deduplication of data larger than memory, under a
 * fixed memory budget: in memory while the keys fit, then hash partitions
 * (first-occurrence order) or sorted runs (sorted order) in temporary files.
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
 * spilled record back, rather than spend 8-16 bytes of disk IO a record), or
 * another 128-bit digest that is the same for equal keys and as evenly spread
 * when every key embeds it (the CLI's references below pass their record's
 * key digest, which the reference key holds); a key pushed both ways, or in
 * pieces (push_begin, which computes dedup_hash()) as well, needs dedup_hash().
 *
 * HOW IT WORKS
 *  1. In memory.  Keys go into an exact hash table (digest tag + full key in
 *     an arena) until the table would exceed its share of the budget.  In
 *     first-occurrence order a new key is emitted at once (FIRST) and a
 *     repeated one at once (DUPLICATES), so `tail -f | dedup` streams.
 *  2. First-occurrence order, when the table is full: it is frozen: keys
 *     already in it keep being recognised (and counted), and every record
 *     whose key is not in it is appended, tagged with its input sequence
 *     number, to one of P partitions chosen by digest bits (P = 4..256 from
 *     the budget).  The partitions share one temporary file, each as a
 *     list of regions of it (16 frame buffers each; a region's unused tail
 *     is a hole), so the engine holds two file descriptors per level
 *     whatever P is.  All occurrences of a key land in one partition, and
 *     every key first seen after the spill point is absent from the frozen
 *     table.
 *     A blocked Bloom filter of the frozen keys (1/64 of the table's share,
 *     about 13 bits a key) answers first, so most records that are not in
 *     the table cost no lookup in it (no false negatives: nothing changes
 *     but the speed).
 *     At finish() the frozen table's entries go first (their first
 *     occurrences all precede the spill point); then each partition is
 *     deduplicated by the same procedure one level down (partitioned again
 *     by other digest bits if its distinct keys still do not fit), its
 *     result (first occurrences with sequence numbers and counts) written to
 *     a result file, and a loser-tree k-way merge of the results by sequence
 *     number emits them in input order.
 *  3. Sorted order, when the table is full: its entries are sorted (a
 *     multikey quicksort on 8-byte words) and written as a sorted run with
 *     their counts, and the table is cleared.  finish() merges the runs with
 *     the loser tree, combining equal keys (counts summed, the oldest run's
 *     record kept), in several passes when there are more runs than the
 *     budget has read buffers of two frames (at least 8 KiB) for (one pass
 *     up to ~500 runs, ~30 GB of distinct keys, at 64 MiB).  Keys compare
 *     as memcmp then length, so with key == record the output is
 *     byte-identical to `LC_ALL=C sort -u`; with a separate key the output
 *     is sorted by key and the record written is the key's first.
 *  4. On disk every stream (partitions, per-partition results, sorted runs,
 *     giant records) is cut into frames of at most F = budget/1024 raw bytes
 *     (2-64 KiB), each compressed on its own with LZ4 (LZ4_compress_fast,
 *     acceleration 8; stored raw when that does not shrink it) behind a
 *     16-byte header: stored length, raw length, and an XXH3-64 of the
 *     payload seeded with both lengths.  A frame that fails its check, its
 *     lengths or its decompression is DEDUP_ERR_CORRUPT, never output.
 *     Readers decode whole frames into buffers of at least 2F.
 *
 * IO COST, beyond reading the input once (the caller) and writing the output,
 * with c = the compressed share of a stream (LZ4 on shuffled URL-like lines:
 * c ~ 0.61 for partitions and results, ~0.5 for sorted runs):
 *  - first-occurrence order: c(S + R) written and read back once each, where
 *    S = the records not recognised by the frozen table (about the whole
 *    input when repeats are spread uniformly; ~3-5 bytes of framing each)
 *    and R = the distinct records among them.  One level of partitions
 *    suffices up to ~P x budget/2 of distinct keys (~8 GB at 64 MiB); each
 *    further level costs the same again for the partitions that need it.
 *    With half the input repeated uniformly: 1 + 2c(1 + 0.5) + 0.5 times
 *    the input.
 *  - sorted order: the runs (each record not repeated within its run's
 *    window, once) written and read back once: 1 + 2c + 0.5 at most for the
 *    same input, plus the runs again per extra merge pass.
 *  - nothing when the distinct keys fit in memory.
 *  - CPU: compressing and decompressing every frame of the spilled streams.
 *
 * RECORDS BY REFERENCE: a caller whose records sit in files it can read
 * again may push references instead of records, as the dedup CLI does for
 * regular files (cli/extref.h): key = the key's digest and length (17-21
 * bytes), record = the record's offset and length (2-15 bytes), with
 * params.raw_frames (digests do not compress), and it writes the records the
 * engine emits by reading them back, forward, since every first-occurrence
 * output comes in input order.  IO then, with the same S and R: about 25
 * bytes per record of S and 8 per record of R written and read back once,
 * uncompressed, plus the input read a second time for the output (up to
 * its last kept record); 20M URL lines of 62 bytes at 64 MiB: 3.30x the
 * input against 3.15x with the records, for half the CPU.  Two keys are then
 * equal when their digests and lengths are (about n^2 / 2^129 for n
 * distinct keys), not byte for byte.  Not for sorted order (the runs are
 * sorted by the key's bytes), nor for input that cannot be read again.
 *
 * MEMORY: the engine's own allocations stay within memory_limit except for
 * (a) 16 bytes per spill region (16 x budget/1024 bytes of the file,
 * 64 KiB - 1 MiB: up to 0.025% of the bytes spilled at tiny budgets,
 * 0.0016% or 16 KiB per GiB from 64 MiB) and per sorted run, (b) 64 bytes
 * per distinct giant record (72 in sorted order) and per repeated one for
 * DUPLICATES, and (c) without params.emit_piece, a single key + record
 * pair larger than its table share, which is held whole while it is
 * processed (the caller passes it whole in any case).  The compression
 * scratch (LZ4 state + one compressed frame, ~82 KiB at 64 MiB) and, with
 * emit_piece, the giants' staging buffer (giant_min) and two frame readers
 * are taken out of the budget.  dedup_extsort_stats_get() reports the
 * measured peak.
 *
 * GIANT RECORDS: with params.emit_piece set, a record that is its own key
 * (push() with key NULL or equal to the record, or push_begin/part/end) and
 * is longer than dedup_extsort_giant_min() = budget/16 bytes (at least 2F,
 * at most 1 MiB) is never held whole: its pieces go straight to a
 * temporary file (compressed frames), and only a 64-byte entry (sequence
 * number, digest, extent, length, count) stays in memory.  It is compared
 * with earlier giants of the same digest and length by streaming both from the file; a repeat is
 * counted and its bytes dropped again (kept for DUPLICATES, which writes it
 * out).  Giants are emitted through emit_piece, streamed from the file in
 * pieces of at most 2F bytes: at once while first-occurrence output
 * streams, else in input order among the other records (by sequence
 * number), or in sorted order by key (no ordinary key is that long, so a
 * giant's first giant_min bytes place it; the giants are sorted among
 * themselves by streaming comparisons, O(G log G) of them, at finish).
 * Limits: a separate key longer than giant_min is refused (DEDUP_ERR_LIMIT);
 * each new giant scans the list of earlier giants (O(G) digest compares;
 * bytes are streamed only on an equal digest and length); each giant's
 * bytes are written once and read back once to be emitted (plus once per
 * streaming comparison), so a giant costs its compressed size 2x in IO.
 *
 * TEMPORARY FILES are created unlinked (O_TMPFILE, else mkstemp then unlink
 * at once), so nothing is left in the directory after success, error, a
 * signal or even kill -9; the space is released when the engine is freed (or
 * the process ends).  No signal handler is needed or installed.  With
 * params.tmp_in_memory (or dedup_extsort_set_tmp_in_memory() before the
 * files are opened) they are anonymous memory files instead: the same
 * frames and checks, no disk space, and their bytes are the process's
 * memory (shared memory, outside peak_memory and memory_limit) until the
 * engine is freed.  The engine does not move them to disk: the caller
 * chooses this only for temporary data it knows fits.
 *
 * THREADS: with params.threads >= 2 the engine starts, at its first spill,
 * one thread of its own that compresses and writes the frames of the
 * partitions, the per-partition results and the sorted runs while the
 * caller's thread goes on (and compresses frames too rather than wait for
 * it); in first-occurrence order a second one that appends the records
 * of each push_batch() call to the top node's partition buffers beside the
 * caller's thread, once it has spilled (up to 16,384 records a pass,
 * ~330 KiB taken out of the table's share; see src/sort/extsort_scatter.c;
 * push() one record at a time stays on the caller's thread); and the
 * partitions are then deduplicated two at a time (the caller's thread and one more, each in
 * half of the budget left); the final merge (the one whose output goes to
 * emit) has a thread of its own decode each source's next frame while the
 * caller's thread merges, when the readers' share of the budget leaves a
 * frame per source for it (see src/sort/extsort_threads.c and
 * src/sort/extsort_partition.c).  The output and the
 * statistics are the same as with one thread, except peak_memory, which
 * then adds up both partition threads' peaks, and bytes_spilled /
 * bytes_read_back, as the two-thread spill may cut the same streams into
 * frames at other points (a frame header more or less); write errors may be reported
 * by a later call than the one whose data failed (still before finish()
 * returns).  The compressing thread
 * costs 3F frame buffers, three areas of F compressed frames (a queue of
 * three batches) and an LZ4 state (F = 8 frames per batch while that is at
 * most 1/16 of the budget: ~3.1 MiB at 64 MiB; then 4 or 2), taken out of
 * the table's share, and per buffered writer a second buffer.  Budgets under
 * ~860 KiB, too small for F = 2, get no thread, and the partitions go one at
 * a time below ~1.2 MiB.
 * params.write_fn is then called from these threads too, one call at a time
 * (the engine serialises them), for one frame per call at most where the
 * thread writes; the allocator's functions may be called from
 * two threads at once while the partitions are deduplicated, so they must be
 * thread-safe (malloc is).  The second partition thread and the decoding
 * thread end before finish() returns, the compressing thread in free().
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

/* Receives one giant output record (see GIANT RECORDS) piece by piece:
 * 'first' on its first piece, 'last' on its last (both on a single piece);
 * 'count' as for emit, the same on every piece.  Pieces are valid only during
 * the call.  A nonzero return stops the engine as for emit. */
typedef int (*dedup_extsort_emit_piece_fn)(void *ctx, const void *piece, size_t len, bool first,
                                           bool last, uint64_t count);

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
    dedup_extsort_emit_piece_fn emit_piece; /* NULL: no giant records (push_begin
                                               is refused); shares emit_ctx */
    unsigned threads;            /* 1 (default): everything on the caller's thread;
                                    2 or more: see THREADS (more than 2 are not used) */
    bool raw_frames;             /* false (default): frames LZ4-compressed as in HOW IT
                                    WORKS step 4; true: stored raw (same header and
                                    check), for streams LZ4 cannot shrink, such as
                                    records that are digests and file offsets (the
                                    CLI's references): saves its CPU, costs no bytes */
    bool tmp_in_memory;          /* false (default): temporary files in tmpdir; true:
                                    anonymous memory files (memfd_create; tmpdir where
                                    the system has none), for a caller that knows its
                                    temporary data fits in the memory it may use beyond
                                    memory_limit: see TEMPORARY FILES */
} dedup_extsort_params;

typedef struct dedup_extsort_stats {
    uint64_t records_in;      /* records pushed */
    uint64_t records_out;     /* records emitted */
    uint64_t distinct;        /* distinct keys (known after finish) */
    uint64_t runs_written;    /* partitions (first-occurrence order, every level) or
                                 sorted runs (sorted order) written to disk */
    uint64_t merge_passes;    /* k-way merges: one per partitioned node, or one per
                                 group of runs merged (> 1 group: several passes) */
    uint64_t max_depth;       /* deepest partitioning level used (0: none; sorted
                                 order: 1 once runs are written) */
    uint64_t bytes_spilled;   /* bytes written to temporary files (compressed
                                 frames with their headers: what reaches the disk) */
    uint64_t bytes_read_back; /* bytes read from temporary files (same measure) */
    uint64_t bytes_spilled_raw; /* the spilled streams' size before compression */
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
 * more, or partitioning deeper than DEDUP_EXTSORT_MAX_DEPTH; with params.emit_piece
 * set, a key longer than dedup_extsort_giant_min() that is not the record
 * itself), DEDUP_ERR_NOMEM,
 * DEDUP_ERR_IO (temporary file; see dedup_extsort_io_error), DEDUP_ERR_CANCELLED
 * (emit returned nonzero), DEDUP_ERR_INVALID_ARG (after finish).  After an
 * error the engine only accepts free(); every call repeats the error. */
dedup_status dedup_extsort_push(dedup_extsort *es, const void *rec, size_t len, const void *key,
                                size_t keylen, dedup_digest digest);

/* Pushes n records as n calls of push() would (same errors; stops at the
 * first error), but prefetches the table slots of records further ahead so
 * that their cache misses overlap: faster when the table is larger than the
 * cache.  'keys' may be NULL (keys are the records; keylens is ignored). */
dedup_status dedup_extsort_push_batch(dedup_extsort *es, size_t n, const void *const *recs,
                                      const size_t *lens, const void *const *keys,
                                      const size_t *keylens, const dedup_digest *digests);

/* Pushes one record in pieces: push_begin(), any number of push_part() (of
 * any sizes, empty ones too), push_end().  The record is its own key; its
 * digest is computed here, with XXH3's streaming API (equal to dedup_hash()
 * of the whole record under params.seed).  Up to dedup_extsort_giant_min()
 * bytes it is buffered and then pushed as push() would; longer, it is a
 * giant (see GIANT RECORDS): its bytes go to a temporary file as they come
 * and it is emitted through emit_piece.  No other call but push_part/
 * push_end (and free) is accepted in between.  Errors: as push();
 * DEDUP_ERR_INVALID_ARG without params.emit_piece, out of order, or after
 * finish. */
dedup_status dedup_extsort_push_begin(dedup_extsort *es);
dedup_status dedup_extsort_push_part(dedup_extsort *es, const void *data, size_t len);
dedup_status dedup_extsort_push_end(dedup_extsort *es);

/* Records longer than this many bytes (budget / 16, at least two frames, at
 * most 1 MiB) are giants when params.emit_piece is set. */
size_t dedup_extsort_giant_min(const dedup_extsort *es);

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

/* Sets params.tmp_in_memory of engine 'es' to 'in_memory' for the
 * temporary files opened from now on (a file already open stays where it
 * is; no error): a caller that learns the size of
 * its data from its first records decides before pushing them.  Not while
 * another thread uses the engine. */
void dedup_extsort_set_tmp_in_memory(dedup_extsort *es, bool in_memory);

/* Counters; valid at any time. */
void dedup_extsort_stats_get(const dedup_extsort *es, dedup_extsort_stats *out);

/* Bytes the engine holds now. */
size_t dedup_extsort_memory_usage(const dedup_extsort *es);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_EXTSORT_H */
