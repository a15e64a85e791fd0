/*
 * split.h - what cmd_split.c shares with split_file.c: a part (one output
 * of `dedup split`) and the two-thread engine for a regular input file.
 */
#ifndef DEDUP_CLI_SPLIT_H
#define DEDUP_CLI_SPLIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dedup/ring.h"
#include "io.h"
#include "keys.h"
#include "outfile.h"

typedef struct split_part {
    char label[24];   /* the number, for -N */
    const char *name; /* node name or label */
    char *path;       /* the -o name (final) */
    dd_outfile out;   /* the -o part: a temporary renamed at the end (outfile.h) */
    int fd;
    pid_t pid;        /* filter, or 0 */
    bool eof_early;   /* the filter stopped reading */
    dd_writer w;
    uint64_t records, bytes, dropped;
} split_part;

/* How records are routed and cut: parts[0..n-1], the ring (NULL: jump hash
 * over n), the key options, the terminator. */
typedef struct split_route {
    split_part *parts;
    size_t n;
    const dedup_ring *ring;
    const dd_keyspec *key;
    unsigned char term;
} split_route;

/* Outcome of split_file(). */
enum {
    SPLIT_FILE_DONE = 0,   /* the whole file went into the parts */
    SPLIT_FILE_NOT_USED,   /* not a case for it (not a regular file, empty,
                              cannot be opened): nothing was read */
    SPLIT_FILE_STOPPED,    /* a stop signal came: the parts are incomplete */
    SPLIT_FILE_WRITE_ERROR,/* a part's writer failed (its w.error says why) */
    SPLIT_FILE_NOMEM,
    SPLIT_FILE_SHRANK,     /* the file ended before the size it had at the start */
    SPLIT_FILE_READ_ERROR  /* a read failed (errno in *read_errno) */
};

/* Splits the regular file 'path' on two threads (the caller's and one
 * more): each thread reads (pread), cuts, keys, hashes and routes every
 * other 1 MiB block of the file, and writes the block's records, grouped
 * by part, with pwrite(2) at the offsets the blocks before it leave.  Only
 * for parts that are
 * regular files being written (no filter: a write to them never blocks for
 * long, so a stop signal is seen within a block); the writers are flushed
 * first and each part file's offset is left at its end.  The records go
 * into each part in input order, as the feeder's path puts them.  The file
 * is split up to the size it has when opened. */
int split_file(const split_route *r, const char *path, int *read_errno);

#endif
