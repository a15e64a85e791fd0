/*
 * external.h - the main job under a memory budget: exact deduplication by
 * the external engine (dedup/extsort.h), which works in memory while the
 * distinct keys fit and spills to a temporary directory beyond.  cmd_dedup.c
 * sends `--mode exact` here when -m/--memory, --sort or -T/--tmpdir is given
 * (and for -D/--duplicates); otherwise its exact seen-set
 * (DEDUP_SEEN_EXACT_SPILL, dedup/seen.h) hands the rest of the input to the
 * same engine once it holds half the default budget.
 */
#ifndef DEDUP_CLI_EXTERNAL_H
#define DEDUP_CLI_EXTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dedup/extsort.h"
#include "feeder.h"
#include "io.h"
#include "keys.h"

typedef struct dd_external_opts {
    uint64_t memory;    /* budget in bytes; 0 = half the physical memory */
    const char *tmpdir; /* NULL = $TMPDIR, else /tmp */
    bool sorted;        /* --sort */
    int out;            /* 0 first, 1 duplicates, 2 count, 3 unique */
    unsigned char term;
    dd_keyspec *key;    /* compiled here from the header with key->header */
    int bad_key;        /* a record with no key: 0 fail, 1 skip, 2 keep */
    uint64_t seed;
    bool seed_given; /* --seed: 'seed' was chosen on purpose */
    int stats; /* 0 none, 1 text, 2 json */
    bool line_buffered;
    bool progress;
    uint64_t total_bytes; /* the input's size for the progress line; 0 = unknown */
    const char *output; /* -o FILE, or NULL for stdout */
} dd_external_opts;

/* The budget used when -m is not given: $DEDUP_MEMORY (a size, K/M/G) if
 * set, else half of the usable memory (physical memory, or a cgroup's limit
 * when lower).  *source, if not NULL, names which one for messages. */
uint64_t dd_external_default_memory(const char **source);

/* Engine threads for a budget: 2 (compressing and writing the temporary
 * files on a thread of its own) on a machine with more than one core and a
 * budget of 32 MiB or more, else 1 (bench/results/extsort.md). */
unsigned dd_external_threads(uint64_t budget);

/* The directory the engine writes to for a --tmpdir of 't' (NULL: $TMPDIR,
 * else /tmp), for messages. */
const char *dd_external_tmpdir(const char *t);

/* Prints the error of the engine 'es' (may be NULL) writing in 'tmpdir':
 * for DEDUP_ERR_IO the directory, the bytes written and the space left. */
void dd_engine_report(const dedup_extsort *es, const char *tmpdir, dedup_status st);

/* Runs the job over files[0..nfiles) ("-" = stdin); returns the exit
 * status.  The output file, when there is one, is created here and removed
 * again if the job fails (so a disk-full run never leaves output that looks
 * complete). */
int dd_run_external(const dd_external_opts *o, char **files, int nfiles);

#endif
