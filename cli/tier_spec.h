/*
 * tier_spec.h - `dedup --store DIR` and `--tier SPEC ...`: the command
 * line's persistent store and tier stack (dedup/tiers.h, dedup/store.h).
 *
 * A run with tiers collects its options here while parsing (dd_tiers_opt),
 * checks them once the other options are known (dd_tiers_check), builds the
 * stack in place of the single seen-set (dd_tiers_create, called by
 * dd_seen_create), and at the end saves filter files and makes the stores
 * durable (dd_tiers_finish) and prints per-tier statistics.
 *
 * SPEC:
 *   bloom|blocked|cuckoo|scalable[:n=N,p=P,m=SIZE,file=PATH]
 *                      a filter in memory (file= loads it when PATH exists
 *                      and saves it there after a complete run)
 *   exact | fingerprint   this run's keys in memory, exactly
 *   file:PATH          a filter loaded from PATH, saved back at the end
 *   redis://HOST:PORT[/DB][,ttl=D,reserve=D,name=PREFIX,retries=N]
 *                      Redis, keys scheme (exact); with ttl= the recent keys,
 *                      each NEW key reserved until its record is written out
 *   rocksdb:DIR[,sync=always|batch|none][,keys=digest|whole][,expire=D][,cache=SIZE]
 *                      the persistent store (needs RocksDB at build time)
 */
#ifndef DEDUP_CLI_TIER_SPEC_H
#define DEDUP_CLI_TIER_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dedup/seen.h"

struct dd_writer;

typedef struct dd_tiers_cli dd_tiers_cli;

enum {
    DD_TOPT_TIER = 1, /* --tier SPEC */
    DD_TOPT_STORE,    /* --store DIR */
    DD_TOPT_SYNC,     /* --sync always|batch|none */
    DD_TOPT_TRUST,    /* --trust-filter */
    DD_TOPT_REBUILD,  /* --rebuild-filter */
    DD_TOPT_SHARED    /* --shared */
};

/* Records one option in *t (static storage, set on first use: one run per
 * process).  False after an error message. */
bool dd_tiers_opt(dd_tiers_cli **t, int which, const char *arg);

/* Checks the tier options against the rest: 'mode_kind' is --mode's kind
 * (a filter in front of --store), items/fpr/memory -n/-p/-m, 'windowed'
 * whether --window/--last is given.  False after an error message. */
bool dd_tiers_check(dd_tiers_cli *t, dedup_seen_kind mode_kind, uint64_t items, double fpr,
                    uint64_t memory, bool windowed, bool counts, bool state);

/* Builds the stack; 'top' (may be NULL: a window) goes on top and is owned
 * by the stack from then on, also on failure.  Errors: a sentence in err. */
/* How this run computes keys (dd_keyspec_describe()): every store checks
 * it against its own, and refuses another one unless 'force'.  'desc' must
 * outlive the tiers. */
void dd_tiers_set_identity(dd_tiers_cli *t, const char *desc, bool force);
/* Opens the persistent tiers (stores, Redis names, filter files that
 * exist) before anything else, so the run's seed is theirs: each keeps
 * its own, a new store or Redis name takes a random seed from the OS, and
 * the first one opened fixes the run's, which every later one must hold
 * (else refused, naming both).  'seed_given' (--seed): *seed fixes it
 * first.  Without any persistent set *seed receives a fresh random seed
 * (new filter files and one-run tiers).  Called before dd_tiers_create(),
 * which takes them. */
dedup_status dd_tiers_open_stores(dd_tiers_cli *t, uint64_t *seed, bool seed_given, char *err,
                                  size_t cap);
dedup_status dd_tiers_create(dd_tiers_cli *t, dedup_seen *top, uint64_t seed, dedup_seen **out,
                             char *err, size_t errcap);

/* The window at the top of the stack, or NULL. */
const void *dd_tiers_window(const dd_tiers_cli *t);

/* Whether a tier records keys outside this process as they are decided (a
 * store, a Redis tier): a run that fails keeps the records it wrote.
 * False for NULL. */
bool dd_tiers_outside(const dd_tiers_cli *t);

/* After a complete run (ok): saves filter files; always: makes the stores
 * durable, closes --uncertain and says on stderr how many records were
 * dropped as uncertain.  False after an error message. */
bool dd_tiers_finish(dd_tiers_cli *t, bool ok);

/* True when some tier keeps keys for later runs (a store, a Redis name, a
 * filter file to load or to save). */
bool dd_tiers_keep(const dd_tiers_cli *t);

/* --uncertain FILE with a redis:// tier (checked and opened by
 * dd_tiers_check, before any output). */
void dd_tiers_set_uncertain(dd_tiers_cli *t, const char *path);

/* After a batch's records were emitted: counts the records a Redis tier
 * answered UNCERTAIN (a lost reply: dropped like duplicates) and writes
 * them, with their terminator, to --uncertain; with a Redis tier that has
 * a TTL, flushes the writer (the records are written out) and commits the
 * batch's NEW keys (Redis' reserve-then-commit).  False after an error
 * message (or a writer error, which the caller reports). */
bool dd_tiers_after_batch(dd_tiers_cli *t, dedup_seen *s, const dedup_batch *b,
                          const dedup_verdict *v, const unsigned char *const *rec,
                          const size_t *rlen, unsigned char term, struct dd_writer *w);

/* --uncertain FILE: the records a remote set answered DEDUP_UNCERTAIN (a
 * reply lost), dropped like duplicates and never silently. */
typedef struct dd_uncertain {
    FILE *f;          /* NULL: only counted */
    const char *path; /* --uncertain's argument, or NULL */
    uint64_t count;
    bool failed;      /* a write failed (said once) */
} dd_uncertain;

/* Counts the record and writes it, with its terminator, to u->f when open.
 * False on a write error (printed) and after one. */
bool dd_uncertain_put(dd_uncertain *u, const void *rec, size_t len, int term);

/* What happens after each batch of a shared or layered set (--redis,
 * --tier, --store), set once by its owner. */
typedef struct dd_after {
    dd_uncertain *unc;  /* a remote set's --uncertain; NULL: nothing is UNCERTAIN */
    bool commits;       /* NEW keys are committed once their records are out */
    bool sync_out;      /* and, first, the output fdatasync()ed when a regular file */
    const char *what, *where;            /* the failed commit's line: "WHAT N keys WHERE: ERR" */
    const char *(*errfn)(const void *);  /* ERR, from errfn(errctx) */
    const void *errctx;
    /* the batch's NEW keys, for the commit (zero-initialised; dd_after_free) */
    dedup_digest *d;
    const unsigned char **k;
    size_t *l, cap;
} dd_after;

/* The one after-batch path: the batch's UNCERTAIN records go to a->unc,
 * then, when it has NEW keys and a->commits, the writer is flushed (their
 * records are out of the process) and those keys are committed to 's'.
 * False on an error (printed, or the writer's, which the caller reports). */
bool dd_after_batch(dd_after *a, dedup_seen *s, const dedup_batch *b, const dedup_verdict *v,
                    const unsigned char *const *rec, const size_t *rlen, unsigned char term,
                    struct dd_writer *w);
void dd_after_free(dd_after *a);

/* The message of the tier that failed last (Redis, then stores), or "". */
const char *dd_tiers_error(const dd_tiers_cli *t);

/* Per tier statistics on f (json: one object on one line). */
void dd_tiers_print_stats(const dd_tiers_cli *t, FILE *f, bool json);

/* Ends the options' use (nothing to free; the seen-set owns the stack). */
void dd_tiers_free(dd_tiers_cli *t);

#endif
