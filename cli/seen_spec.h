/*
 * seen_spec.h - the command line's method options as a dedup_seen_spec.
 *
 * `dedup` turns -m/-n/-p/--mode/--window... into one dedup_seen_spec here
 * and from then on only calls dedup/seen.h.  A new way to keep the seen-set
 * (a Redis backend, a store, tiers, integer keys) is one more case in
 * dd_seen_spec() and, if it needs one, one more field in dd_seen_opts.
 */
#ifndef DEDUP_CLI_SEEN_SPEC_H
#define DEDUP_CLI_SEEN_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/seen.h"

typedef struct dd_seen_opts {
    dedup_seen_kind kind; /* from --mode (dd_mode_kind) */
    const char *mode;     /* --mode as given, for messages */
    uint64_t items;       /* -n, 0 = not given */
    double fpr;           /* -p, 0 = not given */
    uint64_t memory;      /* -m, 0 = not given */
    uint64_t seed;
    bool seed_given;      /* --seed: 'seed' was chosen (else the sets' own, or a fresh one) */
    dedup_on_full on_full; /* --on-full: what a fixed-size filter does past -n */
    bool counts;          /* -c / -u: per-key counts */
    bool unique_only;     /* -u */
    /* windows (--window / --last) */
    bool windowed;
    int window_type;      /* dedup_window_type */
    uint64_t duration;    /* microseconds, or records for --last */
    uint64_t lateness;
    bool refresh_on_dup;  /* --refresh-on-dup */
    /* integer keys in a bitmap (--range) */
    uint64_t range_lo, range_hi;
    /* exact mode past half of this budget goes on on disk (EXACT_SPILL); 0 = never */
    uint64_t spill_budget;
    const char *tmpdir;
    unsigned threads;
    dedup_seen_emit_fn emit;
    int (*emit_piece)(void *ctx, const void *piece, size_t len, bool first, bool last,
                      uint64_t count); /* records that are their own keys */
    void *emit_ctx;
    /* exact mode by reference (byref.h): the mapped span the keys lie in */
    const void *ref_base;
    uint64_t ref_span;
    unsigned char ref_term;
    const uint64_t *ref_ends;
    size_t ref_nends;
    uint64_t ref_expected; /* 0: the span / 64 */
    bool ref_keys;         /* keys are byte ranges of the records, or copies */
    /* --store / --tier (tier_spec.h): a stack of seen-sets instead of one */
    struct dd_tiers_cli *tiers;
} dd_seen_opts;

/* The names --mode accepts, in the order of the help. */
extern const char *const dd_mode_names[];
/* The kind --mode 'name' selects, or 0 when it names none. */
dedup_seen_kind dd_mode_kind(const char *name);
/* "unknown --mode 'name' (choose exact, ... or scalable)" into buf. */
void dd_mode_unknown(char *buf, size_t cap, const char *name);

/* Fills 'sp' for the options.  Never fails: what is out of range is said
 * by dedup_seen_create(), and dd_seen_create() words it. */
void dd_seen_spec(const dd_seen_opts *o, dedup_seen_spec *sp);

/* The allocator the command gives a kind (hugealloc.c: the growing one for
 * the exact set). */
const dedup_allocator *dd_seen_allocator(dedup_seen_kind kind);

/* Creates the seen-set for the options; on failure writes a sentence for
 * the user into err. */
dedup_status dd_seen_create(const dd_seen_opts *o, dedup_seen **out, char *err, size_t errcap);
/* Loads a state file (state_file.h: a state container or a bare seen-set
 * file), which must hold what --mode (or a window) keeps; its identity goes
 * to ident (identcap bytes, "" and *has_ident false when it has none).  On
 * failure writes a sentence into err (empty for DEDUP_ERR_IO: see errno). */
dedup_status dd_seen_load(const dd_seen_opts *o, const char *path, dedup_seen **out,
                          bool *has_ident, char *ident, size_t identcap, char *err,
                          size_t errcap);

#endif
