/*
 * external.h - the main job under a memory budget: exact deduplication by
 * the external engine (dedup/extsort.h), which works in memory while the
 * distinct keys fit and spills to a temporary directory beyond.  cmd_dedup.c
 * sends `--mode exact` here when -m/--memory, --sort or -T/--tmpdir is given.
 */
#ifndef DEDUP_CLI_EXTERNAL_H
#define DEDUP_CLI_EXTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "keys.h"

typedef struct dd_external_opts {
    uint64_t memory;    /* budget in bytes; 0 = half the physical memory */
    const char *tmpdir; /* NULL = $TMPDIR, else /tmp */
    bool sorted;        /* --sort */
    int out;            /* 0 first, 1 duplicates, 2 count, 3 unique */
    unsigned char term;
    const dd_keyspec *key;
    uint64_t seed;
    int stats; /* 0 none, 1 text, 2 json */
    bool line_buffered;
    bool progress;
    const char *output; /* -o FILE, or NULL for stdout */
} dd_external_opts;

/* The budget used when -m is not given: half the physical memory. */
uint64_t dd_external_default_memory(void);

/* Runs the job over files[0..nfiles) ("-" = stdin); returns the exit
 * status.  The output file, when there is one, is created here and removed
 * again if the job fails (so a disk-full run never leaves output that looks
 * complete). */
int dd_run_external(const dd_external_opts *o, char **files, int nfiles);

#endif
