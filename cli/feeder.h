/*
 * feeder.h - reads, splits, keys and hashes the input on a second thread.
 *
 * The command's work per record is in two halves of similar cost: getting
 * the record (read(2) copying it out of the page cache, memchr for the
 * terminator, the key's normalisation and its XXH3 digest) and deciding it
 * (the set or filter probe, a cache miss or two, and the output).  The
 * feeder runs the first half on its own thread, a block ahead of the
 * caller, so on two cores the run takes about as long as the slower half
 * instead of the sum of both.
 *
 * Blocks: the feeder reads into one of a few buffers (1 MiB; a buffer grows
 * when one record does not fit), cuts it after the last terminator (the
 * partial record goes to the front of the next buffer) and publishes the
 * complete records with their keys and, when asked, their digests.  A
 * block holds at most 16384 records, so the per-record arrays stay a few
 * MiB whatever the records' length: a buffer with more is handed over as
 * several blocks, in order (with opts.work, cut into blocks of that size).
 * Splitting and hashing are done by whichever thread has time: by the
 * feeder while the caller still has blocks queued (exact mode, where the
 * probes are the slower half), by the caller inside dd_feeder_next() when
 * it had to wait for the block (Bloom filters, where reading is).  A last
 * record without a terminator is still a record.  The caller takes blocks in
 * input order; a block stays valid until the next dd_feeder_next() call.
 *
 * CSV (key->csv): records end at a terminator outside quotes, so a record
 * may span lines; the cut after the last record is found by the CSV record
 * splitter (dedup/key.h) over the bytes as they are read.  The plain path
 * is unchanged.
 *
 * Long records: a record longer than a buffer makes the buffer grow, so it
 * is handed over whole, unless opts.pieces asks for it in pieces (blocks
 * of one piece each), as the external engine takes records larger than
 * its memory budget.
 *
 * Streaming: from a regular file the feeder fills whole buffers; from a pipe
 * or terminal it publishes after every read that completed a record, so
 * `tail -f log | dedup --line-buffered` still decides each line as it comes.
 *
 * Signals are blocked on the feeder's thread: SIGINT/SIGTERM reach the
 * caller's thread, whose waits wake up at least every 100 ms to look at
 * dd_stop_signal.  dd_feeder_close() stops the thread even when it is
 * blocked in read(2) on a pipe that never ends.
 */
#ifndef DEDUP_CLI_FEEDER_H
#define DEDUP_CLI_FEEDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/hash.h"
#include "keys.h"

#define DD_PIECE 1u       /* the block is a piece of a long record */
#define DD_PIECE_FIRST 2u /* its first piece */
#define DD_PIECE_LAST 4u  /* its last piece */

typedef struct dd_block {
    unsigned piece;                 /* 0: n records.  Else (only with opts.pieces)
                                       DD_PIECE: the block is one piece of a record
                                       longer than a buffer, rec[0]/rlen[0], with
                                       DD_PIECE_FIRST on its first piece and
                                       DD_PIECE_LAST on its last (it ends there);
                                       no key or digest */
    size_t n;                       /* records in the block */
    const unsigned char **rec;      /* record i, without its terminator */
    size_t *rlen;
    const unsigned char **key;      /* its key (== rec when keys are whole records);
                                       NULL when the record has none (malformed CSV,
                                       ...: dedup/key.h), klen then holds the
                                       dedup_status */
    size_t *klen;
    dedup_digest *dig;              /* dedup_hash(key, seed); NULL when not asked */
    dedup_verdict *verdict;         /* room for a verdict per record (for opts.work) */
    int work;                       /* opts.work's result on this block: 0 when it
                                       did nothing (or there is none), else its own
                                       value */
    uint64_t bytes_read;            /* bytes read from the input up to this block */
} dd_block;

typedef struct dd_feeder_opts {
    unsigned char term;     /* record terminator */
    const dd_keyspec *key;  /* how keys are made from records */
    bool hash;              /* compute digests */
    uint64_t seed;          /* their seed */
    bool pieces;            /* records longer than a buffer (1 MiB) come in pieces
                               instead of whole; keys must be whole records */
    bool mapped;            /* the input is already in memory (byref.h): 'map',
                               'map_len' bytes (map may be NULL when 0); the path
                               only names it.  Records and keys point into the
                               mapping (no copy, no pieces), blocks of about 1 MiB
                               cut after a terminator */
    const unsigned char *map;
    size_t map_len;
    /* Mapped inputs only: called on the feeder's thread for every block,
     * after its records are split and hashed, before the caller gets it;
     * its return value is the block's 'work' (the caller's half of a set
     * decided on two threads: cmd_dedup.c).  NULL: none. */
    int (*work)(void *ctx, dd_block *b);
    void *work_ctx;
    /* Not mapped, key->header set: called on the feeder's thread with the
     * input's first record (the header, never handed over as a record)
     * before any key is computed; returns the compiled key to use from
     * there, or NULL to stop (dd_feeder_error() then gives -1: the callback
     * said why).  Not called for an empty input. */
    const dedup_key *(*header)(void *ctx, const unsigned char *rec, size_t len);
    void *header_ctx;
} dd_feeder_opts;

typedef struct dd_feeder dd_feeder;

/* Opens 'path' ("-" = standard input) and starts the thread.  Returns 0 or
 * an errno value (the file cannot be opened, or no memory/thread). */
int dd_feeder_open(dd_feeder **out, const char *path, const dd_feeder_opts *o);

/* The next block in input order, or NULL at the end of the input, on a read
 * error (dd_feeder_error() != 0) or when dd_stop_signal is set. */
const dd_block *dd_feeder_next(dd_feeder *f);

/* errno of a failed read (ENOMEM if a buffer could not grow), -1 when the
 * header callback refused the input, 0 if none. */
int dd_feeder_error(const dd_feeder *f);

/* Name for messages: the path, or "(standard input)". */
const char *dd_feeder_name(const dd_feeder *f);

/* Stops the thread (wherever it is), closes the file and frees everything.
 * Accepts NULL. */
void dd_feeder_close(dd_feeder *f);

#endif
