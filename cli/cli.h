/*
 * cli.h - what the `dedup` command's files share.
 *
 * One file per subcommand (cmd_*.c), each an `int cmd_X(int argc, char
 * **argv)` returning the process exit status; main.c dispatches.  Exit
 * statuses: 0 success, 1 failure during the job (write error, disk full, a
 * query that found nothing), 2 usage or input error (bad option, unreadable
 * file, bad state file).  Data goes to stdout, everything else to stderr.
 */
#ifndef DEDUP_CLI_H
#define DEDUP_CLI_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dedup/common.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* Display level: 0 quiet (-q: errors only), 1 normal (warnings), 2 verbose
 * (-v), 3 debug (-vv). */
extern int cli_verbosity;
extern const char *cli_progname; /* "dedup" */

/* Subcommands. */
int cmd_dedup(int argc, char **argv);  /* the main job: dedup [OPTIONS] [FILE...] */
int cmd_calc(int argc, char **argv);   /* dedup calc */
int cmd_filter(int argc, char **argv); /* dedup filter create|add|query|del|info|merge */
int cmd_count(int argc, char **argv);  /* dedup count: distinct keys (HyperLogLog or exact) */
int cmd_plan(int argc, char **argv);   /* dedup plan: the five questions, answered */
int cmd_split(int argc, char **argv);  /* dedup split: partition records by key */
int cmd_ring(int argc, char **argv);   /* dedup ring: shares and what a change moves */
int cmd_store(int argc, char **argv);  /* dedup store info DIR */

/* "dedup: <message>\n" on stderr (always shown). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "dedup: warning: <message>\n" unless -q. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Shown at verbosity >= level. */
void cli_info(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sizes in bytes: "512", "64K", "1.5M", "2G", "1T" (binary multiples, optional
 * trailing "B"/"iB").  False on syntax error, zero or overflow. */
bool cli_parse_size(const char *s, uint64_t *out);
/* Item counts: "1000000", "1e6", "10M", "2.5k" (decimal multiples: k/K =
 * 10^3, M = 10^6, G/B = 10^9, T = 10^12).  False on error or zero. */
bool cli_parse_count(const char *s, uint64_t *out);
/* Probabilities: "0.01", "1%", "1e-3".  False unless 0 < p < 1. */
bool cli_parse_prob(const char *s, double *out);
/* Durations: "500ms", "10s", "10m", "1h", "7d", "250us"; a bare number is
 * seconds.  Result in microseconds.  False on error or zero. */
bool cli_parse_duration(const char *s, uint64_t *out_us);
/* A human-readable size: "1.15 MiB".  Returns buf. */
const char *cli_human_size(uint64_t bytes, char *buf, size_t cap);
/* The indefinite article for a word: "an" before a vowel ("an exact-set",
 * "an unknown type"), else "a". */
const char *cli_a(const char *word);

/* Whether fd is a regular file: only those are removed when a run fails
 * and its -o output must not look complete (never /dev/full, a FIFO...). */
bool cli_fd_regular(int fd);

/* A secret 64-bit seed from the operating system (getrandom).  False, with
 * errno set, when the system gives none. */
bool dd_fresh_seed(uint64_t *out);

/* A seed from the kernel's random source (getrandom), else from the clock
 * and the process id: unknown to whoever wrote the input. */
uint64_t cli_run_seed(void);

/* Writes s as a JSON string literal (with quotes) to f. */
void cli_json_string(FILE *f, const char *s);

/* The allocator the tool gives the library: huge pages for big blocks
 * (hugealloc.c). */
const dedup_allocator *cli_allocator(void);
/* The same for a set that grows block by block (the exact set): its large
 * blocks come one after another from one region whose pages a thread of
 * its own populates ahead of use.  One object at a time; not for
 * concurrent allocation. */
const dedup_allocator *cli_allocator_growing(void);
/* Stops the populating thread (before exit; the blocks stay valid). */
void cli_allocator_shutdown(void);

/* Condition variables of the tool's threads: initialised on the monotonic
 * clock, so that a timed wait is not moved by a change of the wall clock,
 * and waited on for at most 'ns' nanoseconds (callers wake to look at
 * dd_stop_signal).  Called with mu held, as pthread_cond_timedwait. */
int cli_cond_init(pthread_cond_t *cv);
void cli_cond_wait_ns(pthread_cond_t *cv, pthread_mutex_t *mu, long ns);

/* Standard --help/--version handling shared by subcommands. */
void cli_print_version(void);

#endif
