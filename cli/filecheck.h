/*
 * filecheck.h - whether an input file stayed put while it was read: the
 * paths that read a regular file twice or keep references into it
 * (byref.h, extref.h) take its size and modification time when they open
 * it and compare them again later.
 */
#ifndef DEDUP_CLI_FILECHECK_H
#define DEDUP_CLI_FILECHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* One input file of such a path, as it was when opened. */
typedef struct cli_infile {
    const char *name; /* for messages */
    int fd;           /* -1 when not open */
    uint64_t off;     /* where it starts in its user's span of all inputs
                         (the user says how they are laid out) */
    uint64_t size;
    struct timespec mtime;
} cli_infile;

/* True when file 'i' of f[0..n) (i < 0: every one of them, stopping at the
 * first that differs) still has the size and modification time it had when
 * taken; else prints an error naming the file and what changed. */
bool cli_infiles_unchanged(const cli_infile *f, int n, int i);

#endif
