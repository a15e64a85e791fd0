/*
 * dedup_run.h - the main job's run, private to the CLI: the state one
 * `dedup [OPTIONS] [FILE...]` carries from the first batch to its report,
 * shared by cmd_dedup.c (the flow: inputs, seen-set, batches, output,
 * state), dedup_window.c (a windowed run's batches, checks and report) and
 * dedup_stats.c (--stats, and the false-drop estimate it gives).
 */
#ifndef DEDUP_CLI_DEDUP_RUN_H
#define DEDUP_CLI_DEDUP_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/hll.h"
#include "dedup/seen.h"
#include "dedup/timeparse.h"
#include "dedup/window.h"
#include "dedup_opts.h"
#include "io.h"
#include "progress.h"
#include "redis_cli.h"
#include "seen_spec.h"

/* Keys decided at once (the method prefetches a batch's slots first). */
#define BATCH 64

typedef struct run {
    opts *o;
    dedup_seen *s;        /* the seen-set (dedup/seen.h) */
    dedup_seen_info info; /* what it is (kind, probabilistic), taken once */
    dd_writer w;
    dd_progress prog;
    uint64_t records_in, records_out, duplicates, bytes_in;
    bool identity_key;
    /* batch: records, keys and digests come from the feeder's block */
    const unsigned char *const *rec;
    const size_t *rlen;
    const unsigned char *const *key;
    const size_t *klen;
    const dedup_digest *dig;
    dedup_verdict *verdict;   /* verdict_buf, or a larger one for --redis */
    dedup_verdict verdict_buf[BATCH];
    size_t batch;             /* keys decided at once: BATCH, more for --redis */
    /* first records for --count/--unique: [u64 len][bytes] entries, or
     * by reference into the mapped inputs (ref_base, byref.h): [u64 len |
     * FIRST_REF][u64 offset] */
    unsigned char *firsts;
    size_t firsts_len, firsts_cap;
    const unsigned char *ref_base;
    uint64_t ref_span;
    bool failed; /* method error already reported */
    /* a fixed-size filter's capacity: keys answered NEW against it, the
     * warning said once, and the false drops estimated from its rate */
    uint64_t news;            /* NEW verdicts in this run */
    bool full_warned;
    uint64_t fd_news;         /* news at the last rate sample */
    uint64_t fd_records;      /* records_in then */
    double fd_rate;           /* the rate in force then */
    double false_drops;       /* estimated new records answered MAYBE_DUPLICATE */
    /* exact mode past its in-memory share (DEDUP_SEEN_EXACT_SPILL): the
     * library freezes the set and hands the other records to the external
     * engine, whose output comes through spill_emit() */
    bool can_spill;
    bool spilled;
    uint64_t spill_out;       /* records the engine had written (-u: its uniques only) */
    bool skip_giant;          /* -u: the giant being streamed occurs more than once */
    uint64_t budget;
    const char *budget_source;
    const char *tmpdir;       /* where the engine writes, for messages */
    /* exact mode by reference on two threads (dedup_seen_parts): set on the
     * feeder's thread, and only read there, once it stopped deciding part 1 */
    bool parts_stopped;
    uint64_t blocks, blocks_parted; /* blocks decided, and of them on two threads */
    /* windowed runs: the window behind the seen-set, for its stats */
    const dedup_window *win;
    dd_redis_run *redis;      /* --redis: uncertain records, commits, stats */
    dedup_time_format tfmt;   /* the format in use (detected once when AUTO) */
    bool tfmt_detected;
    /* a windowed batch, 'wcap' entries each (r->batch: BATCH, or
     * DD_REDIS_BATCH over tiers), allocated at its first batch and freed
     * by dd_window_free() */
    size_t wcap;
    int64_t *wtime;           /* event times of the records to decide */
    size_t *widx;             /* their indexes in the batch */
    dedup_digest *wdig;
    dedup_verdict *wverdict;
    unsigned char *wskip;     /* 0 decided, 1 bad time dropped, 2 bad time kept */
    const unsigned char **wrec; /* the decided records, for the tiers' commit */
    size_t *wrlen;
    const char *file_name;    /* for messages naming a record */
    uint64_t file_records;    /* records of the current file before this batch */
    uint64_t bad_times, late_out, late_dropped;
    dd_writer late_w;
    int late_fd;
    /* integer keys: the parsed keys of the batch, and for each record
     * 0 (decided), 1 (bad key, dropped) or 2 (bad key, written) */
    uint64_t ikey[BATCH];
    unsigned char ikmark[BATCH];
    uint64_t bad_keys;
    /* keys that may fail on a record (CSV, JSON, URLs): the file's lines
     * before this batch (a CSV record may span several), and the header */
    bool key_errs;
    unsigned char tbuf[256];    /* the time field's value through o->time_key */
    uint64_t file_lines;
    unsigned char *hdr;
    size_t hdr_len;
    uint64_t hdr_lines;
    bool hdr_seen, hdr_written, hdr_failed;
    const char *hdr_file;
    /* --stats of a probabilistic method: distinct keys from a HyperLogLog
     * sketch of every key's digest (the filter's own count misses the keys
     * it took for duplicates) */
    dedup_hll *hll;
} run;

/* ---- dedup_window.c: windowed runs ---------------------------------------- */


/* dedup_keys.c: keys that a record may lack (CSV, JSON, URLs) and --header. */
/* Whether o's keys may fail on a record. */
bool dd_run_key_errs(const opts *o);
/* Lines the batch's records [0, n) take (CSV records may span several). */
uint64_t dd_run_batch_lines(const run *r, size_t n);
/* Record i of the batch has no key: false after an error naming its file
 * and line (--on-bad-key fail); else dropped or written undecided. */
bool dd_run_bad_key(run *r, size_t i);
/* The feeder's header callback (ctx: the run): the first input's header
 * compiles the key (and the time field's), later ones must be the same. */
const dedup_key *dd_run_on_header(void *ctx, const unsigned char *rec, size_t len);
/* Writes the header once, before the first record; false on a write error. */
bool dd_run_write_header(run *r);

/* Decides and writes one batch of 'n' records of a windowed run (event
 * times from --time-field, arrival time or record count), with the late and
 * bad-time policies.  False to stop (error reported, or broken pipe). */
bool dd_window_batch(run *r, size_t n);

/* True when the saved window 'win' (loaded from 'state') has the window
 * parameters the options 'sizing' ask for; else names each difference as
 * the option that gives it, on stderr, and returns false. */
bool dd_window_matches_saved(const dd_seen_opts *sizing, const dedup_window *win,
                             const char *state);

/* Frees the windowed batch's arrays (harmless when there are none). */
void dd_window_free(run *r);

/* The warning at the end of a windowed run that had late records. */
void dd_window_warn_late(const run *r);

/* --stats of a windowed run, text or JSON, on stderr. */
void dd_window_print_stats(run *r, double seconds);

/* ---- dedup_stats.c: the report ------------------------------------------- */

/* Samples the filter's rate for the false-drop estimate now and then (it
 * may scan the filter); 'final' samples whatever is left.  A no-op for an
 * exact or windowed run, and without --stats (the only place it shows). */
void dd_stats_sample_false_drops(run *r, bool final);

/* --stats of a run that is not windowed, text or JSON, on stderr. */
void dd_stats_print(run *r, double seconds);

#endif
