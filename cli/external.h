/*
 * external.h - the main job under a memory budget: exact deduplication by
 * the external engine (dedup/extsort.h), which works in memory while the
 * distinct keys fit and spills to a temporary directory beyond.  cmd_dedup.c
 * sends `--mode exact` here when -m/--memory, --sort or -T/--tmpdir is given
 * (and for -D/--duplicates); otherwise it keeps the keys in its own exact
 * set and hands the rest of the input to a dd_spill engine only if that set
 * reaches half the default budget.
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
    const dd_keyspec *key;
    uint64_t seed;
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

/* The external engine writing through an existing writer: cmd_dedup.c's
 * exact mode continues with it when its in-memory set is full.  The engine
 * emits as dd_run_external() does (first occurrences at once while they fit,
 * the rest at dd_spill_finish(); counts and uniques at finish). */
typedef struct dd_spill dd_spill;
dedup_status dd_spill_create(dd_spill **out, const dd_external_opts *o, uint64_t budget,
                             dd_writer *w);
dedup_status dd_spill_push(dd_spill *s, size_t n, const unsigned char *const *rec, const size_t *rlen,
                           const unsigned char *const *key, const size_t *klen,
                           const dedup_digest *dig);
/* One piece of a record longer than the feeder's buffer (flags: the
 * dd_block's DD_PIECE_FIRST / DD_PIECE_LAST); the record is its own key. */
dedup_status dd_spill_push_piece(dd_spill *s, const unsigned char *data, size_t len, unsigned flags);
dedup_status dd_spill_finish(dd_spill *s);
void dd_spill_stats(const dd_spill *s, dedup_extsort_stats *st);
const char *dd_spill_tmpdir(const dd_spill *s);
/* Prints the error of a failed push or finish (disk full: directory, bytes
 * written, space left). */
void dd_spill_report(dd_spill *s, dedup_status st);
void dd_spill_free(dd_spill *s);

/* Runs the job over files[0..nfiles) ("-" = stdin); returns the exit
 * status.  The output file, when there is one, is created here and removed
 * again if the job fails (so a disk-full run never leaves output that looks
 * complete). */
int dd_run_external(const dd_external_opts *o, char **files, int nfiles);

#endif
