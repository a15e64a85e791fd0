/*
 * extref.h - the external engine's records by reference: when every input
 * is a regular file, each record goes to the engine (dedup/extsort.h) as a
 * reference instead of its bytes, and the records the engine keeps are read
 * again from the files for the output.
 *
 * A reference is two byte strings the engine treats as key and record:
 *   key    = the key's 128-bit digest (16 bytes, little-endian halves) and
 *            the key's length (varint): 17-21 bytes whatever the key's length;
 *   record = the record's offset in the inputs taken one after the other
 *            (varint) and its length (varint): 2-15 bytes.
 * The engine deduplicates, spills, partitions and merges them as it would
 * records, with its frames stored raw (params.raw_frames: digests do not
 * compress), and emits the kept references in input order (every
 * first-occurrence output kind, -D/-c/-u included, is in input order).
 * dd_extref_emit() turns each back into the record's bytes: from the block
 * the feeder has just handed over while the engine still works in memory,
 * else by reading the files forward (pread, a window of DD_EXTREF_WINDOW
 * bytes; a record longer than the window is streamed through it).
 *
 * Equality.  Two records are the same key when their keys have the same
 * digest and length: the engine compares the references' bytes, not the
 * keys' (reading both keys back would be a random read per repeat, 2-5 us
 * each through pread: 20-50 s for 10M repeats).  Two different keys of one
 * length collide with probability 2^-128 per pair (about n^2 / 2^129 for n
 * distinct keys: 1.5e-21 at 10^9); the record-carrying path
 * (DEDUP_NO_EXTREF=1) compares bytes.  XXH3 is not built to resist chosen
 * collisions, so unless --seed names one the run hashes with a seed of its
 * own from the kernel's random source (external.c): an input cannot be
 * written to make two keys collide.
 *
 * IO.  Beyond the record-carrying path's input read and output write: the
 * files are read a second time up to the last kept record (all of it when
 * the kept records are spread out, as the window moves forward in steps of
 * DD_EXTREF_WINDOW from each record it needs), and the spill streams carry
 * about 25 bytes a spilled record and 8 a kept one, uncompressed, instead
 * of the records' LZ4-compressed bytes.  It pays when records are long:
 * dd_extref_open() declines when the first 64 KiB of the first file hold
 * records shorter than DD_EXTREF_MIN_AVG bytes on average (DEDUP_EXTREF=1
 * takes references whatever the length; DEDUP_NO_EXTREF=1 never).
 *
 * Not used (the records are carried): for standard input or any input that
 * is not a regular file, with --sort (sorted runs need the keys' bytes),
 * and for short records as above.
 *
 * A file changed while it is read: its size and modification time are taken
 * when it is opened and checked after its records are all read and at the
 * end (dd_extref_check); a record read back must end with the terminator
 * where the reference says.  Either difference is an error naming the file
 * (exit 1).
 */
#ifndef DEDUP_CLI_EXTREF_H
#define DEDUP_CLI_EXTREF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/hash.h"
#include "feeder.h"
#include "io.h"

#define DD_EXTREF_MIN_AVG 32                /* bytes per record, terminator included */
#define DD_EXTREF_WINDOW ((size_t)1 << 20)  /* read-back window */
#define DD_EXTREF_KEY_MAX 21                /* 16 + varint of a 32-bit length */
#define DD_EXTREF_REC_MAX 15                /* varint offset (10) + varint length (5) */

typedef struct dd_extref dd_extref;

/* Opens files[0..nfiles) for references; NULL when they are not to be used
 * (see above: a non-regular input or "-", short records, DEDUP_NO_EXTREF,
 * no memory).  'term' is the record terminator. */
dd_extref *dd_extref_open(char **files, int nfiles, unsigned char term);

/* Turns block 'b' of file 'fi' (blocks in input order) into references:
 * the returned arrays (valid until the next call) replace the block's
 * records and keys for dedup_extsort_push_batch(); the digests are the
 * block's own (a reference key holds its key's digest and length, so the
 * key's digest is as good as the reference's and is not made again).  NULL
 * when out of memory. */
typedef struct dd_extref_batch {
    const unsigned char **rec, **key;
    size_t *rlen, *klen;
    const dedup_digest *dig; /* the block's own: the keys' digests */
} dd_extref_batch;
const dd_extref_batch *dd_extref_block(dd_extref *x, int fi, const dd_block *b);

/* Writes the record that reference 'ref' (a record as made above, emitted
 * by the engine) names, followed by 'term', to 'w'.  Returns 0, 1 on a
 * broken pipe, 2 on a write error, 4 when the input changed or cannot be
 * read (dd_extref_error() says what; the caller reports it). */
int dd_extref_emit(dd_extref *x, dd_writer *w, const void *ref, size_t len);

/* Block 'b' of file 'fi' is a piece of a record longer than the feeder's
 * buffer (b->piece): such records are carried whole to the engine's giant
 * path (dd_spill_push_piece), not referenced, so that memory stays bounded
 * whatever a record's length; this only moves the offsets past it.  Equal
 * records have equal lengths, so they always take the same road. */
void dd_extref_piece(dd_extref *x, int fi, const dd_block *b);

/* Ends the current block's life (the feeder reuses it). */
void dd_extref_block_done(dd_extref *x);

/* True when file fi (fi < 0: every file) still has the size and
 * modification time it had when opened; else prints the error. */
bool dd_extref_check(const dd_extref *x, int fi);

/* After dd_extref_emit() returned 4: prints what went wrong, naming the file. */
void dd_extref_report(const dd_extref *x);

/* Bytes read back from the files so far. */
uint64_t dd_extref_reread(const dd_extref *x);

void dd_extref_close(dd_extref *x);

#endif
