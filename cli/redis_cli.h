/*
 * redis_cli.h - the command line's Redis backend (dedup --redis URL ...) and
 * `dedup filter ... redis://host:port/NAME`.
 *
 * Everything here is compiled in only when the Redis backend was built
 * (DEDUP_HAVE_REDIS, set by backends/redis/CMakeLists.txt); without it the
 * options are still parsed and refused with one clear sentence.
 *
 * The main job uses it in four places: its long options (DD_REDIS_LONG_OPTIONS
 * and dd_redis_option()), the seen-set (dd_redis_create(), instead of
 * dd_seen_create()), the records answered DEDUP_UNCERTAIN
 * (dd_redis_uncertain()), and --stats (dd_redis_print_stats()).
 */
#ifndef DEDUP_CLI_REDIS_H
#define DEDUP_CLI_REDIS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dedup/seen.h"

enum {
    DD_OPT_REDIS = 0x5200,
    DD_OPT_REDIS_SCHEME,
    DD_OPT_REDIS_NAME,
    DD_OPT_REDIS_TTL,
    DD_OPT_REDIS_UNCERTAIN,
    DD_OPT_REDIS_WAIT,
    DD_OPT_REDIS_WHOLE,
    DD_OPT_REDIS_SHARDS,
    DD_OPT_REDIS_SEGMENTS,
    DD_OPT_REDIS_PIPELINE,
    DD_OPT_REDIS_RESERVE,
    DD_OPT_REDIS_FILTER,
    DD_OPT_REDIS_RETRIES,
    DD_OPT_REDIS_JOURNAL,
    DD_OPT_REDIS_NO_JOURNAL,
    DD_OPT_REDIS_FAILOVER_WAIT, /* redis-sentinel:// */
    /* Connection (redis_conn.c) */
    DD_OPT_REDIS_TLS_CACERT = 0x5280,
    DD_OPT_REDIS_TLS_CERT,
    DD_OPT_REDIS_TLS_KEY,
    DD_OPT_REDIS_TLS_INSECURE,
    DD_OPT_REDIS_AUTH_FILE
};

/* How every Redis connection of the process is made: TLS files and the
 * password's file; `dedup` and `dedup filter` both take them. */
#define DD_REDIS_CONN_LONG_OPTIONS                                            \
    {"tls-cacert", required_argument, NULL, DD_OPT_REDIS_TLS_CACERT},         \
    {"tls-cert", required_argument, NULL, DD_OPT_REDIS_TLS_CERT},             \
    {"tls-key", required_argument, NULL, DD_OPT_REDIS_TLS_KEY},               \
    {"tls-insecure", no_argument, NULL, DD_OPT_REDIS_TLS_INSECURE},           \
    {"redis-auth-file", required_argument, NULL, DD_OPT_REDIS_AUTH_FILE}

#define DD_REDIS_LONG_OPTIONS                                                 \
    {"redis", required_argument, NULL, DD_OPT_REDIS},                         \
    {"redis-scheme", required_argument, NULL, DD_OPT_REDIS_SCHEME},           \
    {"name", required_argument, NULL, DD_OPT_REDIS_NAME},                     \
    {"ttl", required_argument, NULL, DD_OPT_REDIS_TTL},                       \
    {"uncertain", required_argument, NULL, DD_OPT_REDIS_UNCERTAIN},           \
    {"wait-replicas", required_argument, NULL, DD_OPT_REDIS_WAIT},            \
    {"redis-whole-keys", no_argument, NULL, DD_OPT_REDIS_WHOLE},              \
    {"shards", required_argument, NULL, DD_OPT_REDIS_SHARDS},                 \
    {"segments", required_argument, NULL, DD_OPT_REDIS_SEGMENTS},             \
    {"pipeline", required_argument, NULL, DD_OPT_REDIS_PIPELINE},             \
    {"reserve", required_argument, NULL, DD_OPT_REDIS_RESERVE},               \
    {"redis-filter", required_argument, NULL, DD_OPT_REDIS_FILTER},           \
    {"redis-retries", required_argument, NULL, DD_OPT_REDIS_RETRIES},         \
    {"journal", required_argument, NULL, DD_OPT_REDIS_JOURNAL},               \
    {"no-journal", no_argument, NULL, DD_OPT_REDIS_NO_JOURNAL},               \
    {"redis-failover-wait", required_argument, NULL, DD_OPT_REDIS_FAILOVER_WAIT}, \
    DD_REDIS_CONN_LONG_OPTIONS

/* Keys the main job hands to Redis at once (each batch is then pipelined
 * --pipeline commands per round trip and node). */
#define DD_REDIS_BATCH 8192

/* The lines of `dedup --help` for these options. */
extern const char dd_redis_help[];

/* --redis-scheme and --redis-filter, parsed; the values are dedup/redis.h's
 * dedup_redis_scheme and dedup_redis_filter (0 = not given). */
enum { DD_REDIS_KEYS = 1, DD_REDIS_BITMAP = 2, DD_REDIS_MODULE = 3 };
enum { DD_REDIS_BLOOM = 1, DD_REDIS_CUCKOO = 2 };

typedef struct dd_redis_opts {
    const char *url;            /* --redis; NULL = not used */
    char url_copy[4096];        /* its copy (the argument's password is masked) */
    int scheme;                 /* DD_REDIS_KEYS (default), _BITMAP, _MODULE; 0 = not given */
    int filter;                 /* --redis-filter: DD_REDIS_BLOOM or _CUCKOO; 0 = not given */
    const char *name;           /* --name; default "dedup" */
    const char *uncertain_path; /* --uncertain FILE */
    uint64_t ttl_us;            /* --ttl */
    uint64_t reserve_us;        /* --reserve */
    uint32_t wait_replicas;
    bool whole_keys;
    uint32_t shards, segments, pipeline;
    int retries;                /* --redis-retries; -1 = the default (8) */
    bool retries_given;
    const char *journal_dir;    /* --journal DIR; NULL = the per-user state dir */
    bool no_journal;            /* --no-journal */
    uint64_t failover_wait_us;  /* --redis-failover-wait; 0 = the default */
} dd_redis_opts;

/* Parses one option of DD_REDIS_LONG_OPTIONS into 'o': 1 = taken, 0 = not
 * one of ours, -1 = bad value (an error was printed; exit 2). */
int dd_redis_option(dd_redis_opts *o, int code, const char *arg);

/* Whether any --redis option was given. */
bool dd_redis_used(const dd_redis_opts *o);

/* The main job's other options that cannot go with --redis, found before
 * any work: 0 fine, -1 an error was printed (exit 2). */
int dd_redis_check_args(const dd_redis_opts *o, bool mode_given, bool windowed, bool state,
                        bool bounded, bool counts);

/* The state of one run against Redis. */
typedef struct dd_redis_run dd_redis_run;

/* Checks the options, opens --uncertain (before any output), connects and
 * wraps the remote set as a seen-set; 'items', 'fpr', 'seed' are -n, -p
 * (0 = not given) and the seed.  Keys and bitmap schemes: without
 * 'seed_given' a new name gets a secret seed kept in NAME:meta and an
 * existing name's stored seed is used (the seen-set's info.seed: digest
 * with that); with it, 'seed' creates a name and must match the stored one.
 * On failure an error naming the server, file or value has been printed
 * and the exit status is returned (2 usage, 1 server); on success 0 and
 * *out. */
int dd_redis_create(const dd_redis_opts *o, uint64_t items, double fpr, uint64_t seed,
                    bool seed_given, dd_redis_run **run, dedup_seen **out);

struct dd_writer;
/* Bitmap and module schemes (which record a key for good when it is
 * sent): before a batch is decided, its records rec[i] (rlen[i] bytes) +
 * term, i < n, go to the run's journal (cli/redis_journal.h).  True
 * without a journal (keys scheme, --no-journal); false with an error
 * printed when the journal cannot be written: the batch must not be
 * sent. */
bool dd_redis_batch_start(dd_redis_run *run, const unsigned char *const *rec, const size_t *rlen,
                          size_t n, unsigned char term);

/* After dd_redis_after_batch() of a whole batch: the writer and
 * --uncertain are flushed, then the journal's batch is cleared.  False on
 * an error (printed, or the writer's, for the caller to report). */
bool dd_redis_batch_done(dd_redis_run *run, struct dd_writer *w);

/* A decide that failed part way: out[0..done) were handled as a batch
 * (dd_redis_after_batch); the records [done, b->n) were not written out
 * and their keys may be recorded in Redis: each goes to --uncertain (then,
 * with the writer 'w' flushed, the journal's batch is cleared), or without
 * --uncertain stays in the journal for the next run; one error line says
 * how many and where they are. */
void dd_redis_failed_batch(dd_redis_run *run, const dedup_batch *b, size_t done,
                           const unsigned char *const *rec, const size_t *rlen, unsigned char term,
                           struct dd_writer *w);

/* Writes a record answered DEDUP_UNCERTAIN to --uncertain (with its
 * terminator), if given.  False on a write error (printed). */
bool dd_redis_uncertain(dd_redis_run *run, const void *rec, size_t len, int term);

/* After a batch's records were handed to the writer: writes the UNCERTAIN
 * ones to --uncertain, and (keys scheme) flushes the writer and commits the
 * NEW keys, so a key is recorded (for good, or for --ttl) only once its
 * record has left the process.  False on an error (printed; exit 1). */
bool dd_redis_after_batch(dd_redis_run *run, dedup_seen *s, const dedup_batch *b,
                          const dedup_verdict *v, const unsigned char *const *rec,
                          const size_t *rlen, unsigned char term, struct dd_writer *w);

/* The last Redis error's sentence (names host:port). */
const char *dd_redis_error(const dd_redis_run *run);

/* The --stats lines (text) or JSON members (json: ',"redis":{...}'). */
void dd_redis_print_stats(const dd_redis_run *run, FILE *f, bool json);

/* Closes --uncertain (false on a write error, printed) and the journal
 * (removed, unless a batch is still in it: then kept for the next run,
 * and said so), and frees the run (not the seen-set, which the caller
 * frees).  NULL is a no-op (true). */
bool dd_redis_close(dd_redis_run *run);

/* ---- Connection (redis_conn.c) ----
 * One option of DD_REDIS_CONN_LONG_OPTIONS: 1 taken, 0 not one of them. */
int dd_redis_conn_option(int code, const char *arg);
struct dedup_redis_params;
/* Fills o's credentials (--redis-auth-file, else the URL's own, else
 * DEDUP_REDIS_PASSWORD, else REDISCLI_AUTH) and TLS files from the options
 * above; warns once about a password in the URL and about --tls-insecure.
 * 0, or the exit status with an error printed (an auth file unreadable,
 * readable by group or others, or empty). */
int dd_redis_conn_apply(struct dedup_redis_params *o);
/* 'url' for a message: its password, if any, shown as "***". */
void dd_redis_url_shown(const char *url, char *buf, size_t cap);
/* Overwrites the password of a URL given on the command line with '*', so
 * ps no longer shows it (the caller keeps a copy). */
void dd_redis_hide_url_password(char *arg);

/* `dedup filter ACTION redis://...` and `dedup filter copy SRC DST`:
 * argv[0] is the action. */
int dd_filter_redis(int argc, char **argv);
/* Whether a filter argument names Redis rather than a file. */
bool dd_is_redis_url(const char *s);

#endif
