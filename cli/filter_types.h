/*
 * filter_types.h - the filter types `dedup filter` knows: for each, its
 * --type name, help, options and messages.
 *
 * Every operation on a filter goes through the library's seen-set
 * (dedup/seen.h): create (dedup_seen_create from a spec the type's entry
 * builds out of -n/-p/-m/-k and its own options), add, query, del, merge,
 * info (dedup_seen_get_filter_info, printed by the entry) and save.  What is
 * left here is what only a command line has: names, descriptions, the
 * options `filter create` takes for one type, and the sentences that say
 * why a type cannot delete or merge.  The entries are registered in
 * filter_registry.c.
 *
 * Adding a type (say "cuckoo") is one new file plus one line:
 *   1. cli/filter_cuckoo.c defines `const filter_type filter_type_cuckoo`
 *      (see filter_bloom.c for a complete example);
 *   2. cli/filter_registry.c gains `X(cuckoo)` in FILTER_TYPE_LIST.
 * The CLI sources are globbed by CMake, so nothing else changes: `filter
 * create --type cuckoo` finds it by name, add/query/del/info/merge find it
 * by the structure type in the file's header (dedup_peek_file), and
 * `dedup filter --help` lists it.  Options only that type takes (cuckoo's
 * fingerprint bits, scalable's growth) go in its create_options; the
 * common -n/-p/-m/-k/--seed arrive parsed in filter_create_opts.  Update
 * docs/dedup.1 (filter create --type) and add the type to
 * tests/cli/filter.sh.
 *
 * Keys reach the seen-set in batches (filter_key arrays) so that its
 * batch/prefetch calls can be used.
 */
#ifndef DEDUP_CLI_FILTER_TYPES_H
#define DEDUP_CLI_FILTER_TYPES_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/seen.h"

/* One item: bytes, not NUL-terminated, may contain NUL. */
typedef struct filter_key {
    const void *data;
    size_t len;
} filter_key;

/* A type-specific option given to `filter create` ("--growth 4"). */
typedef struct filter_kv {
    const char *name;  /* long option name without dashes */
    const char *value; /* its argument, or NULL for a flag */
} filter_kv;

/* What `dedup filter create` parsed.  The has_* flags say which were given. */
typedef struct filter_create_opts {
    const char *path;    /* the file to create (for messages) */
    const char *type;    /* --type name as given */
    bool has_n, has_p, has_m, has_k;
    uint64_t n;          /* -n/--items: planned capacity */
    double p;            /* -p/--fpr: target false-positive rate (0,1) */
    uint64_t m;          /* -m/--memory: bytes for the bit array / table */
    uint32_t k;          /* -k/--hashes: probes (types that have them) */
    uint64_t seed;       /* --seed, or DEDUP_DEFAULT_SEED */
    size_t nextra;       /* type-specific options, in command-line order */
    const filter_kv *extra;
} filter_create_opts;

/* Where an info printer writes: text ("label: value" lines) or the members
 * of one JSON object.  Use the helpers below, never print directly, so text
 * and JSON stay in step. */
typedef struct filter_info_out {
    FILE *f;
    bool json;
    bool first; /* JSON: no member written yet */
    /* Members written so far (the first 64), so that shared fields are
     * written once: a JSON object must not name a member twice. */
    char keys[64][40];
    int nkeys;
} filter_info_out;

/* Whether member 'key' was already written to 'o'. */
bool info_has(const filter_info_out *o, const char *key);

void info_str(filter_info_out *o, const char *key, const char *label, const char *v);
void info_u64(filter_info_out *o, const char *key, const char *label, uint64_t v);
/* Doubles: JSON number (non-finite values become null); text "%.6g". */
void info_f64(filter_info_out *o, const char *key, const char *label, double v);
/* A probability: text shows it also as a percentage. */
void info_prob(filter_info_out *o, const char *key, const char *label, double v);
/* A byte count: text adds the human-readable size. */
void info_bytes(filter_info_out *o, const char *key, const char *label, uint64_t v);
void info_bool(filter_info_out *o, const char *key, const char *label, bool v);
/* Seeds in hex: text "0x...", JSON a number (and a "<key>_hex" string). */
void info_hex(filter_info_out *o, const char *key, const char *label, uint64_t v);

/* `dedup filter info` of a file that is not a filter (a seen-set state, a
 * roaring file, a HyperLogLog sketch; cli/info_state.c): true when it was
 * described; false with *err set when it could not be loaded, or DEDUP_OK
 * when it is none of those. */
bool dd_info_state(const char *path, const dedup_header *hdr, filter_info_out *o, dedup_status *err);

typedef struct filter_type {
    /* --type name ("bloom") and a one-line description for --help. */
    const char *name;
    const char *description;
    /* The dedup_type stored in its files (DEDUP_TYPE_BLOOM, ...).  Each
     * file type belongs to one entry; one load function may serve several
     * entries (filter_bloom.c loads both Bloom layouts). */
    uint16_t file_type;
    /* What it is, for messages ("classic Bloom filter"). */
    const char *noun;

    /* Extra long options `filter create` accepts for this type, terminated
     * by a zeroed entry; NULL if none.  Only name and has_arg are used.
     * Their values reach create() in opts->extra, in command-line order;
     * the same option given to another --type is refused before create()
     * runs.  create_help is printed under the type's line in --help, one
     * option per line indented 12 spaces ("            --growth G  ..."),
     * or NULL. */
    const struct option *create_options;
    const char *create_help;

    /* Builds an empty filter from the options, through the seen-set's
     * spec (dedup_seen_create).  On a bad or missing argument, prints an
     * error naming it (cli_error) and returns CLI_EXIT_USAGE; on a library
     * error returns CLI_EXIT_FAIL after printing.  Returns CLI_EXIT_OK and
     * sets *out on success. */
    int (*create)(const filter_create_opts *opts, dedup_seen **out);

    /* Why the kind cannot delete (NULL: it can: dedup_seen_delete), as a
     * sentence ending without a period, used in the error ("a cleared bit
     * may belong to other items ..."). */
    const char *no_delete_reason;

    /* Writes the filter's fields (type, capacity, fpr, bits, fill, ...),
     * from dedup_seen_get_filter_info(). */
    void (*info)(const dedup_seen *s, filter_info_out *out);

    /* Why the kind cannot merge (NULL: it can: dedup_seen_merge). */
    const char *no_merge_reason;
} filter_type;

/* The registry (filter_registry.c): NULL-terminated. */
extern const filter_type *const filter_types[];
/* By --type name / by file type; NULL if unknown. */
const filter_type *filter_type_by_name(const char *name);
const filter_type *filter_type_by_file_type(uint32_t file_type);

#endif
