/*
 * dedup_opts.h - the main job's options: what `dedup [OPTIONS] [FILE...]`
 * was asked, parsed and checked against each other before any input is
 * read (dedup_opts.c), for cmd_dedup.c to run.
 */
#ifndef DEDUP_CLI_DEDUP_OPTS_H
#define DEDUP_CLI_DEDUP_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/timeparse.h"
#include "intkeys.h"
#include "keys.h"
#include "redis_cli.h"
#include "seen_spec.h"

enum output_kind { OUT_FIRST, OUT_DUPLICATES, OUT_COUNT, OUT_UNIQUE };
enum late_policy { LATE_KEEP, LATE_DROP, LATE_FILE };
enum bad_time_policy { BAD_TIME_FAIL, BAD_TIME_DROP, BAD_TIME_KEEP };
enum stats_kind { STATS_NONE, STATS_TEXT, STATS_JSON };

typedef struct opts {
    const char *mode;
    dedup_seen_kind kind; /* what --mode names */
    const char *output;
    const char *state;
    unsigned char term;
    dd_keyspec key;
    dd_seen_opts sizing;
    enum output_kind out;
    enum stats_kind stats;
    int progress; /* -1 auto, 0 off, 1 on */
    bool line_buffered;
    bool sorted;        /* --sort */
    const char *tmpdir; /* -T/--tmpdir */
    bool external;      /* exact mode under a budget: external.c */
    /* Windows (dedup/window.h): --window or --last makes this a windowed run. */
    uint64_t window_us;          /* --window, 0 = none */
    uint64_t last_n;             /* --last, 0 = none */
    bool tumbling;               /* --window-type tumbling */
    bool refresh_on_dup;         /* --refresh-on-dup: a repeat renews its key */
    uint64_t lateness_us;        /* --lateness */
    size_t time_field;           /* --time-field, 0 = arrival time */
    const char *time_spec;       /* --time-field as given: a number, a column name
                                    (--header) or a JSON path (--json) */
    dedup_key *time_key;         /* its key spec, for CSV, JSON and names */
    dedup_time_format time_format; /* --time-format; AUTO = detect on the first value */
    enum late_policy late;       /* --late */
    const char *late_file;
    enum bad_time_policy bad_time; /* --on-bad-time */
    bool window_opts;            /* some window option was given */
    dd_redis_opts redis;         /* --redis URL ...: the seen-set in Redis (redis_cli.h) */
    /* Integer keys (--keys int): the key is parsed to a 64-bit integer. */
    bool int_keys;
    dd_bad_key bad_key;          /* --on-bad-key */
    bool bad_key_given, range_given;
    bool on_full_given;          /* --on-full was given */
    bool keep_last;              /* --keep last */
    bool seed_given;             /* --seed: no fresh secret seed for a new state */
    bool force_keys;             /* --force-keys: other key options than a state's */
} opts;

/* Parses and checks the command line into *o (usage errors are printed).
 * Returns 0 to run, 1 when --help or --version was answered (exit 0), -1
 * on a usage error (exit 2). */
int dd_dedup_parse_args(int argc, char **argv, opts *o);

#endif
