/*
 * keys.h - the key options of every subcommand, turned into a library key
 * spec (dedup/key.h, which says what a key is).
 */
#ifndef DEDUP_CLI_KEYS_H
#define DEDUP_CLI_KEYS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include "dedup/key.h"

typedef struct dd_keyspec {
    size_t field;         /* 0 = whole record or a selection in 'fields', else the
                             one 1-based field number -f gave */
    const char *fields;   /* -f as given when it is not one number: a list, ranges,
                             names */
    bool delim_given;     /* -d was given (else TAB, or ',' with --csv) */
    bool csv;             /* --csv */
    bool header;          /* --header: the first record names the fields */
    const char *json;     /* --json PATHS */
    bool url;             /* --url */
    const char *url_drop; /* --url-drop-params GLOBS */
    bool url_sort;        /* --url-sort-params */
    dedup_key *compiled;  /* dd_keyspec_compile()'s result (not owned by copies) */
    unsigned char delim;  /* field delimiter (default TAB) */
    bool trim;            /* strip leading/trailing whitespace (space \t \r \n \v \f) */
    bool squeeze;         /* runs of whitespace count as one space */
    bool fold_case;       /* ASCII case-insensitive */
    const char *prefix;   /* removed from the start of the key when present */
    size_t prefix_len;
} dd_keyspec;

/* The key options, the same in every subcommand that reads keys (the main
 * job, split, count): one table fragment for getopt_long, their short
 * letters, their --help lines, and dd_key_option() to apply one.  The codes
 * of the long-only ones sit far above the 256.. a caller numbers its own. */
enum {
    DD_KEY_OPT_TRIM = 0x4b00, DD_KEY_OPT_SQUEEZE, DD_KEY_OPT_PREFIX, DD_KEY_OPT_CSV,
    DD_KEY_OPT_HEADER, DD_KEY_OPT_JSON, DD_KEY_OPT_URL, DD_KEY_OPT_URL_DROP, DD_KEY_OPT_URL_SORT
};

#define DD_KEY_LONG_OPTIONS                                                                     \
    {"field", required_argument, NULL, 'f'}, {"delimiter", required_argument, NULL, 'd'},       \
    {"ignore-case", no_argument, NULL, 'i'}, {"trim", no_argument, NULL, DD_KEY_OPT_TRIM},      \
    {"squeeze", no_argument, NULL, DD_KEY_OPT_SQUEEZE},                                         \
    {"strip-prefix", required_argument, NULL, DD_KEY_OPT_PREFIX},                               \
    {"zero-terminated", no_argument, NULL, 'z'}, {"csv", no_argument, NULL, DD_KEY_OPT_CSV},      \
    {"header", no_argument, NULL, DD_KEY_OPT_HEADER},                                           \
    {"json", required_argument, NULL, DD_KEY_OPT_JSON},                                         \
    {"json-paths", required_argument, NULL, DD_KEY_OPT_JSON},                                   \
    {"url", no_argument, NULL, DD_KEY_OPT_URL},                                                 \
    {"url-drop-params", required_argument, NULL, DD_KEY_OPT_URL_DROP},                          \
    {"url-sort-params", no_argument, NULL, DD_KEY_OPT_URL_SORT}

/* The short letters of DD_KEY_LONG_OPTIONS, for getopt_long's optstring. */
#define DD_KEY_SHORT_OPTIONS "f:d:iz"

/* The --help lines of the key options (-z is said with the records). */
#define DD_KEY_HELP                                                                  \
    "  -f, --field=LIST       key is these fields, not the whole record: N, N,M, N-M,\n" \
    "                         N- (as cut -f), or column names with --header\n"        \
    "  -d, --delimiter=C      field delimiter (default TAB; ',' with --csv)\n"         \
    "      --csv              records are CSV (RFC 4180: quoted fields may hold the\n" \
    "                         delimiter, quotes and newlines)\n"                      \
    "      --header           the first record names the fields; written out once\n"  \
    "      --json=PATHS       records are JSON Lines; key is the values at PATHS\n"    \
    "                         (.user.id,.items[0].sku); also --json-paths, which\n"     \
    "                         count and plan take (their --json is their output)\n"    \
    "      --url              key is a canonical URL (RFC 3986 6.2.2)\n"               \
    "      --url-drop-params=GLOBS  with --url: drop these query parameters\n"        \
    "      --url-sort-params  with --url: sort the query parameters\n"                 \
    "  -i, --ignore-case      ASCII case-insensitive keys\n"                           \
    "      --trim             ignore leading and trailing whitespace (including \\r)\n" \
    "      --squeeze          runs of whitespace compare as one space\n"               \
    "      --strip-prefix=S   ignore S at the start of keys\n"

/* The defaults: whole records, TAB-delimited fields, no normalisation. */
void dd_keyspec_init(dd_keyspec *k);

/* Applies option 'c' (a getopt_long result) with argument 'arg' when it is
 * one of the key options: -f N (1 to 1000000), -d C (one character, or the
 * two-character \t or \0), -i, --trim, --squeeze, --strip-prefix S into
 * *k, and -z into *term.  Returns 1 when it was one (applied), 0 when it is
 * not a key option (the caller's), -1 on a bad value, after an error
 * naming it, prefixed "CMD: " when 'cmd' is not NULL. */
int dd_key_option(int c, const char *arg, const char *cmd, dd_keyspec *k, unsigned char *term);

/* Writes into buf (cap bytes, always NUL-terminated when cap > 0) a
 * canonical, printable description of how keys are computed: the field and
 * delimiter, every normalisation, the record terminator and whether keys are
 * parsed as integers.  Two runs compute the same key from every record
 * exactly when their descriptions are equal, so a state file or store keeps
 * it as part of its identity and refuses a run whose description differs.
 * Returns the length the whole description needs (excluding the NUL), as
 * snprintf does. */
size_t dd_keyspec_describe(const dd_keyspec *k, unsigned char term, bool int_keys, char *buf,
                           size_t cap);

/* True when keys are whole records (no copy needed). */
bool dd_keyspec_identity(const dd_keyspec *k);

/* Checks the key options together (--header with names, --url-* with
 * --url, --json with -f, ...); false after an error naming them. */
bool dd_keyspec_check(dd_keyspec *k, const char *cmd);

/* Compiles k into k->compiled, with the header record hdr[0..hlen) when k
 * names fields ('file' names it in messages).  False after an error naming
 * the field or path, the file and the header. */
bool dd_keyspec_compile(dd_keyspec *k, const unsigned char *hdr, size_t hlen, const char *file);

/* Compiles into *out the key spec of a time field 'spec' (a number, a
 * column name of hdr, or with --json a path) in k's record format, without
 * normalisation.  False after an error naming it. */
bool dd_time_key_compile(const dd_keyspec *k, const char *spec, const unsigned char *hdr,
                         size_t hlen, const char *file, dedup_key **out);

/* Frees k->compiled. */
void dd_keyspec_release(dd_keyspec *k);

/* Computes the key of rec with a simple spec (plain records, one field or
 * the whole record, no URL: a key never longer than its record): a pointer
 * into rec or into 'scratch' (at least 'len' bytes); *klen its length. */
const unsigned char *dd_key_of(const dd_keyspec *k, const unsigned char *rec, size_t len,
                               unsigned char *scratch, size_t *klen);

/* The key of rec with any spec: into *scratch (grown as needed, *cap its
 * size) when not a range of rec.  A per-record error (dedup/key.h) is
 * returned with *key NULL; DEDUP_ERR_NOMEM when scratch cannot grow. */
dedup_status dd_key_get(const dd_keyspec *k, const unsigned char *rec, size_t len,
                        unsigned char **scratch, size_t *cap, const unsigned char **key,
                        size_t *klen);

/* Words for a per-record key error, for messages. */
const char *dd_key_error_text(const dd_keyspec *k, dedup_status st);

/* What is wrong with rec[0..len), whose key failed with 'st', for an error
 * naming its file and line: the problem and where ("malformed CSV: a quote
 * left open at byte 7", "the --json path '.user.id' is missing"); written
 * into buf (cap bytes), which is returned. */
const char *dd_key_problem_text(const dd_keyspec *k, const unsigned char *rec, size_t len,
                                dedup_status st, char *buf, size_t cap);

/* Why records may lack a key with k, for the count said at the end of a
 * run: "invalid JSON or a path missing", "malformed CSV or not a URL", ... */
const char *dd_key_bad_reason(const dd_keyspec *k);

#endif
