/*
 * methods.h - the deduplication methods behind `dedup --mode`, one interface.
 *
 * A method answers the one verb for a batch of keys, in order: was this key
 * seen before (by this run or by the loaded state)?  It may prefetch for the
 * whole batch first, since a batch's keys are independent until decided in
 * order.  Methods are created from the command line's sizing options or
 * loaded from a state file, and saved back to one.
 */
#ifndef DEDUP_CLI_METHODS_H
#define DEDUP_CLI_METHODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dedup/common.h"
#include "dedup/hash.h"

typedef struct dd_sizing {
    uint64_t items;  /* -n, 0 = not given */
    double fpr;      /* -p, 0 = not given */
    uint64_t memory; /* -m, 0 = not given */
    uint64_t seed;
    bool counts;     /* keep per-key counts (exact, fingerprint) */
    uint64_t spill_at; /* exact without -m: the set stops growing at this many bytes
                          (decide fails with DEDUP_ERR_FULL) so the run can go on on disk */
} dd_sizing;

typedef struct dd_method dd_method;
struct dd_method {
    const char *name;
    bool probabilistic; /* answers MAYBE_DUPLICATE, never DUPLICATE */
    uint64_t seed;      /* digests must use this seed */
    uint64_t memory_limit; /* -m: a growing method fails with DEDUP_ERR_FULL past it; 0 = none */
    size_t done;        /* after decide() failed: how many keys it decided first */
    /* Decides n keys in order; out[i] = DEDUP_NEW / DEDUP_DUPLICATE /
     * DEDUP_MAYBE_DUPLICATE.  keys/lens are the key bytes (exact methods need
     * them), d the digests. */
    dedup_status (*decide)(dd_method *m, size_t n, const unsigned char *const *keys,
                           const size_t *lens, const dedup_digest *d, dedup_verdict *out);
    uint64_t (*distinct)(const dd_method *m);  /* distinct keys recorded (estimate for filters) */
    size_t (*memory)(const dd_method *m);
    double (*fpr)(const dd_method *m);          /* current FPR; 0 for exact methods */
    dedup_status (*save)(const dd_method *m, const char *path);
    /* Count of a key already decided (counts mode only). */
    uint64_t (*count_of)(const dd_method *m, const unsigned char *key, size_t len, dedup_digest d);
    void (*destroy)(dd_method *m);
    void *impl;
};

/* Names accepted by --mode, for help and errors. */
extern const char *const dd_method_names[];

/* Whether 'name' is one of dd_method_names. */
bool dd_method_known(const char *name);

/* Writes "unknown --mode 'name' (choose exact, ... or scalable)" into buf. */
void dd_method_unknown(char *buf, size_t cap, const char *name);

/* Creates the method 'name' sized by 's'.  On failure returns a status and
 * writes a sentence for the user into err. */
dedup_status dd_method_create(const char *name, const dd_sizing *s, dd_method **out, char *err,
                              size_t errcap);
/* Loads a state file saved by a method of the same name.  A file holding
 * another structure gives DEDUP_ERR_WRONG_TYPE with a sentence in err naming
 * both. */
dedup_status dd_method_load(const char *name, const char *path, dd_method **out,
                            char *err, size_t errcap);
void dd_method_free(dd_method *m);

#endif
