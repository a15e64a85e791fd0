/*
 * byref.h - exact mode by reference: the input files mapped one after the
 * other into one span of address space, so that the exact set keeps
 * references to its keys (dedup_refset, dedup/set.h) instead of copies.
 *
 * Used when every input is a regular file (cmd_dedup.c decides; pipes and
 * integer keys keep the copying set), with any key options, -c/-u and
 * --state (seen.h's ref_keys: a key that differs from the file's bytes is
 * copied into the set).  Each file is
 * mapped read-only at its place in a reserved span, a guard page after it.
 * The feeder cuts its blocks out of the mapping, and two threads decide
 * them (dedup_seen_decide_part, dedup/seen.h): the feeder's thread the keys
 * of one half of the digests, the main thread the other half and the
 * output, until the set holds a quarter of the budget.
 *
 * A file changed while it is read: its size and modification time are
 * taken when it is mapped and checked again when its records are all read
 * and at the end of the run (dd_byref_check): a difference is an error
 * (exit 1) naming the file.  A file cut shorter makes reading its mapped
 * pages past the new end raise SIGBUS: the handler dd_byref_open installs
 * says which file shrank, and ends the process with status 1.
 */
#ifndef DEDUP_CLI_BYREF_H
#define DEDUP_CLI_BYREF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dd_byref dd_byref;

/* Maps files[0..nfiles) ("-": standard input, when it is a regular file
 * at its start, as with `dedup < FILE`); NULL when one is not a regular
 * file (a pipe, a terminal), cannot be mapped, or the span would pass the
 * set's 2^40-byte limit: the caller then keeps the copying path. */
dd_byref *dd_byref_open(char **files, int nfiles);

/* The span: its base, its length, and the offsets where each file ends. */
const unsigned char *dd_byref_base(const dd_byref *b);
uint64_t dd_byref_span(const dd_byref *b);
const uint64_t *dd_byref_ends(const dd_byref *b, size_t *n);

/* File i's bytes in the span (NULL with *len 0 for an empty file). */
const unsigned char *dd_byref_file(const dd_byref *b, int i, size_t *len);

/* True when file i (i < 0: every file) still has the size and
 * modification time it had when it was mapped; else prints the error. */
bool dd_byref_check(const dd_byref *b, int i);

/* Unmaps everything and restores SIGBUS.  Accepts NULL. */
void dd_byref_close(dd_byref *b);

#endif
