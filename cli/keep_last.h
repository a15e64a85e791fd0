/*
 * keep_last.h - `dedup --keep last`: each key's last occurrence, in the order
 * of those last occurrences (what `tac | dedup | tac` gives, without holding
 * the input in a pipe).
 */
#ifndef DEDUP_CLI_KEEP_LAST_H
#define DEDUP_CLI_KEEP_LAST_H

#include <stdbool.h>
#include <stdint.h>

#include "dedup/seen.h"
#include "keys.h"

typedef struct dd_keep_last_opts {
    dedup_seen_kind kind;   /* DEDUP_SEEN_EXACT or DEDUP_SEEN_FINGERPRINT */
    uint64_t items;         /* -n hint */
    uint64_t seed;
    unsigned char term;
    dd_keyspec *key;        /* compiled here from the header with key->header */
    int bad_key;            /* a record with no key: 0 fail, 1 skip, 2 keep */
    const char *output;     /* -o FILE or NULL */
    const char *tmpdir;     /* where standard input or a pipe is spooled */
    bool line_buffered;
    bool stats;
} dd_keep_last_opts;

/* Two passes over the input: the first counts each key's occurrences, the
 * second writes a record when its key has occurred as many times as the
 * first pass counted.  An input that cannot be read twice (standard input,
 * a pipe) is first copied to a nameless temporary file in 'tmpdir'.
 * Returns the exit status. */
int dd_run_keep_last(const dd_keep_last_opts *o, char **files, int nfiles);

#endif
