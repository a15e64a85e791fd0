/*
 * dedup/store.h - a persistent, exact seen-set on RocksDB (component
 * libdedup_store, pkg-config dedup-store; built only when Debian's
 * librocksdb-dev is found).
 *
 * Conventions, libdedup's own (dedup/common.h) and the same in every
 * component (dedup/store.h, dedup/redis.h, dedup/roaring.h):
 *  - dedup_X_params p; dedup_X_params_init(&p); fill in what you need;
 *    dedup_X_create(&p, alloc_or_NULL, &x, why, whycap) makes the object
 *    and dedup_X_free(x) releases it, dedup_X_free(NULL) a no-op.
 *  - Every call that can fail returns a dedup_status (dedup_strerror()
 *    names it).  A text buffer for the reason is 'char *why, size_t whycap'
 *    (why may be NULL; the sentence is cut to whycap bytes, NUL included);
 *    once the object exists, dedup_X_last_error(x) gives the sentence of
 *    its last failure ("" if none, never NULL).
 *  - dedup_X_as_seen(x, alloc, &seen) wraps the object as a seen-set
 *    (dedup/seen.h), which owns it from then on.
 *  - No global state, no printing, no exit.  The library libdedup_X
 *    exports dedup_* only; a program builds with
 *    `pkg-config --cflags --libs dedup-X`.
 * Here X is store.
 *
 * The store remembers every key it ever recorded, across runs, in a
 * directory: a run reads what it must and writes only its new keys, so a
 * seen-set of billions of keys costs disk, not memory, and no run rewrites
 * the history (unlike a saved filter or set, which is written whole).
 *
 *   dedup_store_params p; dedup_store_params_init(&p);
 *   p.dir = "seen.db"; p.sync = DEDUP_STORE_SYNC_ALWAYS;
 *   dedup_store *st; char why[256];
 *   dedup_status s = dedup_store_create(&p, NULL, &st, why, sizeof why);
 *   s = dedup_store_decide(st, &batch, verdicts, &done);   test-and-add
 *   dedup_store_free(st);                                  NULL is a no-op
 *
 * or used through the seen-set interface (dedup/seen.h, kind
 * DEDUP_SEEN_STORE) by dedup_store_as_seen(), alone or as the bottom tier
 * of a stack (dedup/tiers.h).
 *
 * ---- What is stored ----------------------------------------------------------
 * One RocksDB key per recorded key: the 16-byte digest (lo then hi, both
 * little-endian; the digest is keyed by the store's seed, 64 random bits
 * from the OS at creation unless params.seed fixes one, so that nobody who
 * does not know it can craft two keys the store takes for one) by default, or the whole key bytes (DEDUP_STORE_KEYS_WHOLE:
 * exact even against digest collisions, ~n^2/2^129, at the cost of the key's
 * length on disk).  The value is empty, or with expiry a 4-byte
 * little-endian write time in seconds.  A column family "dedup" holds the
 * marker that makes a directory a dedup store -- magic, format version, key
 * mode, seed, expiry, checksum --, the caller's identity (params.identity,
 * with a checksum) and the count of keys recorded, updated with each
 * ingestion (see pending.c for how a crash keeps it exact).  A directory
 * without the marker (empty of RocksDB, a foreign RocksDB database, a
 * marker with a bad checksum or another version) is refused with a message
 * naming the reason.  Stores made before seeds were random keep the public
 * seed their marker holds.
 *
 * ---- RocksDB options ----------------------------------------------------------
 * The options are chosen for write-once keys whose costly operation is the
 * point read of a present key (a repeat): 16 KiB LZ4 data blocks, a full
 * ribbon filter per table and a memtable Bloom (an absent key reads no data
 * block), filters and indexes held by the table readers, a block cache for
 * data blocks (params.block_cache, default 32 MiB: size it to the working
 * set), leveled compaction with dynamic level bytes, two background jobs.
 * params.absent_screened (set when a filter tier above the store knows
 * every key of the store) drops the bottom level's filters, since the keys
 * that reach the store are then mostly repeats.  Lookups are one MultiGet
 * of a chunk (4096 keys) sorted by key bytes; params.read_threads 2 reads
 * the sorted keys in two halves at once.  backends/rocksdb/store.c gives
 * the reasons.
 *
 * ---- How keys are written (params.sync) ---------------------------------------
 * Every mode answers from a pending table in memory first: the keys
 * decided or recorded since the last ingestion.  Keys become durable at a
 * commit: dedup_store_commit(), called by decide() and record() before
 * they return, or -- with params.caller_commits -- by the caller once the
 * records of those keys are written out (the CLI: after the batch's output
 * left the process, and was fdatasync()ed with ALWAYS when it is a file).
 * A commit appends one record of the new keys to DIR/dedup-pending.log
 * (one write(2)); every ~2 M keys (and at flush and close) the pending
 * keys are sorted, written as one table file and ingested by RocksDB whole
 * (IngestExternalFile), and a new log starts.  Why not the memtable:
 * random digests make each skiplist insert a walk over cold cache lines,
 * where the sorted file is written sequentially.
 *  - DEDUP_STORE_SYNC_BATCH (default): a kill -9 loses no committed key (the
 *    log is in the kernel and the next open replays it); a power loss may
 *    lose the keys since the last ingestion.
 *  - DEDUP_STORE_SYNC_ALWAYS: each commit's record is fdatasync()ed before
 *    the commit returns: a power loss loses no committed key either.
 *  - DEDUP_STORE_SYNC_NONE: no log: a kill -9 forgets the keys since the
 *    last ingestion (their records are then written again by a later run);
 *    for rebuildable data.
 * The order, for a caller that writes records: decide, write the records
 * of the NEW keys, commit.  A crash before the commit makes the next run
 * answer those keys NEW again (their records are written twice: at most
 * what was decided since the last commit), never a key recorded whose
 * record was not written.  With caller_commits, keys never committed are
 * forgotten at flush and close (a failed run did not confirm their
 * records), and a caller that decides more than ~3 M keys between commits
 * has them committed early (the pending table's room).
 * A read-only open reads a pending log left by a killed run (or being
 * written by the run that holds the store) into its pending table: those
 * keys are answered present and counted in info.keys; the log stays for
 * the next writable open, which ingests it and reports the count in
 * info.recovered.  The log's records each carry a number and checksums;
 * only a torn last record (past the length the log's header declares: the
 * write a kill cut) is ignored, and reported in info.torn_bytes.
 *
 * ---- Damage ---------------------------------------------------------------------
 * Refused, never read as fewer keys: a damaged marker, identity or pending
 * log record (DEDUP_ERR_CHECKSUM, DEDUP_ERR_CORRUPT, 'why' naming the file
 * and byte); a table file (NNNNNN.sst) whose metaindex or properties block
 * fails its checksum, checked before RocksDB opens it since RocksDB parses
 * the properties block before checking it (DEDUP_ERR_CORRUPT, 'why' naming
 * the file; a table whose footer is not whole is left to RocksDB, which
 * refuses it when the MANIFEST lists it); what RocksDB's paranoid checks
 * report (DEDUP_ERR_CORRUPT); and,
 * without expiry, a store whose tables hold fewer keys than it counted (a
 * table file or the MANIFEST's record of one lost; RocksDB reads a
 * MANIFEST cut short as one that ended there).  record() of a key already
 * held counts it twice, which only raises the count.
 *
 * ---- Expiry (params.expire) ---------------------------------------------------
 * "The last N seconds of history": each key carries its write time and the
 * age is checked on read, so an expired key is answered absent (and
 * recorded anew) at once -- RocksDB's own TTL only drops keys at compaction
 * and would still answer them.  A compaction filter removes expired keys
 * from disk as compaction reaches them.  A repeat does not extend a key's
 * life.  Expiry is fixed when the store is created.
 *
 * ---- Locking and creation ----------------------------------------------------------
 * A writable store holds flock() on DIR/dedup.lock for the life of the
 * object, its PID written there: a second process (or a second open in
 * this one) gets DEDUP_ERR_IO with "DIR: in use by PID N".
 * params.read_only opens without the lock (dedup store info on a store in
 * use) and refuses every write.  A new store is built whole in
 * "DIR.dedup-new.PID" beside DIR and renamed into place, so a kill at any
 * instant of its creation leaves no store (the next run creates it; the
 * leftover of a dead PID is removed then) or a complete one.
 *
 * Thread-safety: one thread at a time per store object.  RocksDB itself is
 * thread-safe, the object's buffers are not.  With params.read_threads 2,
 * a lookup (decide, query, record's reads) of 256 keys or more starts one
 * helper thread that reads half of them and joins it before returning; the
 * helper touches only that lookup's halves of the object's buffers.
 */
#ifndef DEDUP_STORE_H
#define DEDUP_STORE_H

#include "dedup/common.h"
#include "dedup/hash.h"
#include "dedup/seen.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUP_STORE_FORMAT_VERSION 1u
/* Keys per internal chunk (one MultiGet, one WriteBatch); larger batches
 * are cut into chunks, each atomic on its own. */
#define DEDUP_STORE_CHUNK 4096u
#define DEDUP_STORE_IDENTITY_MAX 1024u

typedef enum dedup_store_sync {
    DEDUP_STORE_SYNC_BATCH = 0,
    DEDUP_STORE_SYNC_ALWAYS = 1,
    DEDUP_STORE_SYNC_NONE = 2
} dedup_store_sync;

typedef enum dedup_store_keys {
    DEDUP_STORE_KEYS_AUTO = 0,   /* as stored; digests for a new store */
    DEDUP_STORE_KEYS_DIGEST = 1, /* the 16-byte digest */
    DEDUP_STORE_KEYS_WHOLE = 2   /* the key's bytes; batches need keys/lens */
} dedup_store_keys;

typedef struct dedup_store_params {
    const char *dir;        /* required */
    bool create;            /* create the store when DIR is missing or empty; default true */
    bool read_only;         /* no lock, no writes */
    uint64_t seed;          /* 0 = as stored (random, from getrandom(), for a new
                               store); otherwise must equal the stored seed */
    dedup_store_keys keys;  /* AUTO, or must equal the stored mode */
    uint64_t expire;        /* seconds; 0 = as stored (none for a new store);
                               otherwise must equal the stored expiry */
    dedup_store_sync sync;  /* default BATCH */
    uint64_t block_cache;   /* bytes of data-block cache; default 32 MiB */
    bool absent_screened;   /* a filter in front answers most absent keys:
                               no filter in the bottom level (see above) */
    /* The caller's description of how it computes keys from records (for
     * the CLI: dd_keyspec_describe(), the key options and the record
     * terminator), at most DEDUP_STORE_IDENTITY_MAX bytes of text; NULL =
     * not checked.  A new store keeps it; a store holding another one is
     * refused (DEDUP_ERR_INCOMPATIBLE, 'why' naming both) unless
     * identity_force, which records this one instead; a store made before
     * identities were kept adopts it (info.identity_adopted). */
    const char *identity;
    bool identity_force;
    bool caller_commits;    /* keys decided or recorded become durable only at
                               dedup_store_commit() (see "How keys are
                               written"); default false: before each call
                               returns */
    unsigned read_threads;  /* 2 (default): a lookup of 256 keys or more
                               reads half of them on a helper thread (see
                               Thread-safety); 0 or 1: the caller's only */
    /* The clock for expiry, seconds since the epoch; NULL = time(). */
    int64_t (*clock)(void *ctx);
    void *clock_ctx;
} dedup_store_params;

void dedup_store_params_init(dedup_store_params *p);

typedef struct dedup_store dedup_store;

/* Opens (or creates) the store in params->dir.  'why' (may be NULL)
 * receives a sentence naming DIR and the reason on failure.  Errors:
 * DEDUP_ERR_INVALID_ARG (no dir, a field out of range), DEDUP_ERR_IO
 * (DIR in use by another process; missing and create false; RocksDB's
 * IO errors), DEDUP_ERR_BAD_MAGIC (DIR holds something that is not a dedup
 * store), DEDUP_ERR_VERSION, DEDUP_ERR_CHECKSUM (a damaged marker),
 * DEDUP_ERR_CORRUPT (RocksDB reports corruption), DEDUP_ERR_INCOMPATIBLE
 * (seed, key mode or expiry differ from the stored ones; 'why' names both),
 * DEDUP_ERR_NOMEM. */
dedup_status dedup_store_create(const dedup_store_params *p, const dedup_allocator *alloc,
                                dedup_store **out, char *why, size_t whycap);

/* Makes everything recorded durable (WAL fsync, or a memtable flush with
 * sync NONE), then closes; NULL is a no-op.  A failure of that last sync
 * cannot be reported: call dedup_store_flush() first when it matters. */
void dedup_store_free(dedup_store *s);

/* Decides batch->n keys in order, as dedup_seen_decide(): out[i] is
 * DEDUP_NEW (absent or expired; now recorded) or DEDUP_DUPLICATE; a repeat
 * inside the batch is a duplicate of its first occurrence.  The batch needs
 * digests, and keys/lens with KEYS_WHOLE.  Errors: DEDUP_ERR_IO (RocksDB;
 * dedup_store_last_error() has its message) with *done the keys decided and
 * recorded before the failing chunk; DEDUP_ERR_UNSUPPORTED when read-only. */
dedup_status dedup_store_decide(dedup_store *s, const dedup_batch *b, dedup_verdict *out,
                                size_t *done);

/* Answers without recording: DEDUP_NEW or DEDUP_DUPLICATE.  Errors: IO. */
dedup_status dedup_store_query(const dedup_store *s, const dedup_batch *b, dedup_verdict *out);

/* Records batch->n keys without reading (a blind write): for keys the
 * caller knows to be new, e.g. those a filter answered "certainly new".
 * Recording a present key again is harmless (it refreshes its expiry time
 * and counts it twice in 'keys').  'ctx' is the dedup_store *, so the
 * function serves as a tier's record callback (dedup/tiers.h).  Errors:
 * IO, UNSUPPORTED (read-only). */
dedup_status dedup_store_record(void *ctx, const dedup_batch *b);

/* Makes durable the keys decided or recorded since the last commit, as
 * the sync mode says (BATCH: one write(2) to the pending log; ALWAYS: that
 * write, fdatasync()ed; NONE: nothing until the next ingestion), and
 * ingests the pending keys when they are due.  With params.caller_commits
 * the caller calls it once the records of those keys are written out;
 * otherwise decide() and record() call it before they return.  Errors: IO
 * (dedup_store_last_error() names the file; with caller_commits also every
 * commit after a failed decide() or record(), whose keys cannot be told
 * from the others: none is committed, their records are written again by
 * a later run), UNSUPPORTED (read-only). */
dedup_status dedup_store_commit(dedup_store *s);

/* Makes every committed key durable in RocksDB itself (an ingestion of the
 * pending keys; a memtable flush with sync NONE).  With
 * params.caller_commits, keys decided since the last commit are forgotten
 * here (their records were not confirmed written).  Errors: IO. */
dedup_status dedup_store_flush(dedup_store *s);

typedef struct dedup_store_info {
    uint64_t keys;          /* keys recorded over the store's life (exact with
                               decide(); record() counts what it is given) */
    uint64_t bytes_on_disk; /* every file in DIR */
    uint64_t sst_bytes;     /* the tables alone */
    uint64_t seed;
    dedup_store_keys keys_mode;
    uint64_t expire;        /* seconds, 0 = none */
    uint32_t format_version;
    const char *identity;   /* the stored identity ("" = none), valid until close */
    bool identity_adopted;  /* this open recorded params.identity in a store
                               that had none */
    uint64_t recovered;     /* keys replayed at open from the pending log of
                               a run that did not finish */
    uint64_t torn_bytes;    /* bytes of a torn last log record ignored at
                               open (a crash in its write, see pending.c) */
    /* this object's life */
    uint64_t lookups;       /* keys read (MultiGet) */
    uint64_t writes;        /* keys written */
    uint64_t expired;       /* keys found but expired, answered NEW */
    size_t memory;          /* RocksDB's memtables, table readers, cache in use */
} dedup_store_info;

/* Fills 'out'; bytes_on_disk is measured by listing DIR.  Errors: IO. */
dedup_status dedup_store_get_info(const dedup_store *s, dedup_store_info *out);

/* RocksDB's message for the last failure, or "" (never NULL). */
const char *dedup_store_last_error(const dedup_store *s);

/* Calls fn with the digests of every live key, in chunks of at most
 * DEDUP_STORE_CHUNK (whole keys are hashed with the store's seed), until fn
 * returns non-zero (then DEDUP_ERR_CANCELLED).  For rebuilding a filter in
 * front of the store.  Errors: IO, CANCELLED. */
typedef int (*dedup_store_digest_fn)(void *ctx, const dedup_digest *d, size_t n);
dedup_status dedup_store_foreach(const dedup_store *s, dedup_store_digest_fn fn, void *ctx);

/* Records every live key of the store into 'filter' (dedup_seen_decide()
 * with digests only), so a filter in front of the store starts knowing the
 * history: the articles' "rebuild, then switch".  *count (may be NULL)
 * receives the keys given.  Errors: those of foreach and of the filter. */
dedup_status dedup_store_fill(const dedup_store *s, dedup_seen *filter, uint64_t *count);

/* Wraps the store in a seen-set of kind DEDUP_SEEN_STORE (exact; decide,
 * query, commit as no-op; info reports keys and bytes).  On success the
 * seen-set owns the store (dedup_seen_free() closes it) and the store
 * pointer stays valid until then; on failure the caller keeps it. */
dedup_status dedup_store_as_seen(dedup_store *s, const dedup_allocator *alloc, dedup_seen **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_STORE_H */
