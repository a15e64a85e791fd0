/*
 * redis_journal.h - the intent journal of `dedup --redis` (bitmap and
 * module schemes): the records of the batch in flight, kept on local disk
 * from before their keys are sent to Redis until they are written out, so
 * that a dedup killed in between loses nothing: the next run on the same
 * server(s) and name recovers them.
 *
 * Where: one directory per server(s) and name, BASE/NAME-HASH, where BASE
 * is --journal DIR, else $XDG_STATE_HOME/dedup, else ~/.local/state/dedup,
 * and HASH is 16 hex digits of the servers as written in the URL (scheme,
 * host:port list, db) and the name.  In it each run owns one file,
 * PID-NANOS.journal, created as PID-NANOS.tmp, locked (flock, exclusive)
 * and only then renamed, and locked until the run ends; a journal whose lock
 * can be taken belongs to a run that died (an unlocked .tmp older than a
 * minute too: it is removed, it never held a batch).
 *
 * The file (little-endian): a 48-byte header -- magic "DDUPJRNL", u32
 * version (1), u32 type (1: record batches), u64 PID, u64 hash of the
 * servers and name, u64 creation time (ns, seeds the batch checksums),
 * u32 zero, u32 checksum of the 44 bytes before it -- then at most one
 * batch: a 32-byte batch header -- u32 magic "DJBT", u32 records, u64
 * payload bytes, u64 batch number, u32 payload checksum, u32 checksum of
 * the 28 bytes before it -- and the payload: the records as the output
 * would get them, each with its terminator.  A batch is written with one
 * pwrite(2) before its keys are sent; once the batch's records are written
 * out the file is cut back to its header (ftruncate), so it never holds
 * more than one batch.  No fsync: the journal guards against a killed
 * process, not a power loss.
 *
 * Recovery (dd_journal_recover): a file that ends inside its batch (the
 * kill cut the pwrite) holds a batch never sent to Redis: removed with a
 * note.  A whole, valid batch is written to the run's --uncertain file, or
 * to BASE/NAME-HASH/PID-NANOS.recovered, then the journal is removed.  Any
 * other damage -- a short header, a bad magic, version or checksum,
 * another name's hash, bytes past the batch -- is refused naming the file.
 *
 * Not thread-safe: one run, one thread.
 */
#ifndef DEDUP_CLI_REDIS_JOURNAL_H
#define DEDUP_CLI_REDIS_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct dd_journal dd_journal;

/* The directory of the journals of 'key' (the servers and name as one
 * string) and 'name' under 'base' (NULL: the per-user state directory),
 * created (mode 0700, parents too) when 'create'.  With 'create': false
 * with an error printed (the directory named) when it cannot be formed or
 * made.  Without: true, and *exists says whether it is there ('out' is ""
 * when no path could be formed). */
bool dd_journal_dir(const char *base, const char *key, const char *name, bool create,
                    char *out, size_t cap, bool *exists);

/* The 64-bit hash a journal of 'key' carries in its header. */
uint64_t dd_journal_key_hash(const char *key);

/* Recovers the journals of dead runs in 'dir' (see above): their records
 * go to 'uncertain' (flushed before the journal is removed) when not NULL,
 * else to a .recovered file beside each; one line on stderr per journal
 * says how many records of which PID went where.  False, with an error
 * naming the file, on damage or an I/O error (the journal is left). */
bool dd_journal_recover(const char *dir, uint64_t key_hash, FILE *uncertain,
                        const char *uncertain_path);

/* Creates and locks this run's journal in 'dir'.  NULL with an error
 * printed (naming the file) on failure. */
dd_journal *dd_journal_open(const char *dir, uint64_t key_hash);

/* Appends records rec[i] (rlen[i] bytes) + term, i < n, as the batch in
 * flight, with one pwrite(2).  False with an error printed on failure
 * (the batch must then not be sent). */
bool dd_journal_write(dd_journal *j, const unsigned char *const *rec, const size_t *rlen,
                      size_t n, unsigned char term);

/* The batch in flight was written out: the file is cut back to its
 * header.  False with an error printed. */
bool dd_journal_clear(dd_journal *j);

/* Whether a batch is in the journal, not yet cleared. */
bool dd_journal_pending(const dd_journal *j);

/* The journal's path. */
const char *dd_journal_path(const dd_journal *j);

/* Ends the run's journal: removed unless 'keep' (then left, unlocked, for
 * the next run to recover).  NULL is a no-op. */
void dd_journal_close(dd_journal *j, bool keep);

#endif
