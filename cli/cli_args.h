/*
 * cli_args.h - option parsing with the error messages `dedup calc` and
 * `dedup filter` share.  Each arg_* parses one option value; on failure it
 * prints "dedup: CMD: -x/--long must be ... (got 'VALUE')" ("dedup: -x/--long
 * ..." when CMD is NULL or "dedup", the main job) and returns false, and
 * the caller exits with CLI_EXIT_USAGE.
 */
#ifndef DEDUP_CLI_ARGS_H
#define DEDUP_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* "-n/--items" style names are passed as 'opt'. */
bool arg_count(const char *cmd, const char *opt, const char *v, uint64_t *out);
bool arg_prob(const char *cmd, const char *opt, const char *v, double *out);
bool arg_size(const char *cmd, const char *opt, const char *v, uint64_t *out);
/* A whole number in [lo, hi]. */
bool arg_uint(const char *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi,
              uint64_t *out);
/* A 64-bit seed: decimal or 0x-hex.  'cmd' (NULL for the main job)
 * prefixes the error. */
bool arg_seed(const char *cmd, const char *opt, const char *v, uint64_t *out);

/* After getopt_long returned '?' or ':' (optstring must start with ':' and
 * opterr be 0): prints what was wrong with the option and a hint. */
void arg_bad_option(const char *cmd, int c, char **argv, const char *help_cmd);

/* Doubles for JSON: the shortest of %.15g/%.17g that reads back exactly;
 * null for NaN/inf. */
void json_double(FILE *f, double v);
/* Decimal multiples: "1.20 MB". */
const char *human_size_si(uint64_t bytes, char *buf, size_t cap);

/* fwrite to stdout that remembers the errno of the first failure; false
 * once writing has failed (stop producing output then). */
bool out_write(const void *buf, size_t len);

/* Flushes stdout.  Returns 0 when all output was written or the reader
 * went away (EPIPE: `... | head` ends quietly); otherwise prints
 * "dedup: CMD: write error: REASON" and returns 1.  Sets *epipe (may be
 * NULL) when the pipe was closed. */
int out_finish(const char *cmd, bool *epipe);

#endif
