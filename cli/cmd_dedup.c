/*
 * cmd_dedup.c - the main job: `dedup [OPTIONS] [FILE...]`.
 *
 * Reads records (lines, or NUL-terminated with -z) from the files or stdin
 * in large blocks, derives each record's key (field, normalisation), hashes
 * the key once, asks the method whether it was seen, and writes records
 * according to the output kind.  Records are handled in batches so that the
 * method can prefetch every batch member's slot before deciding them in
 * input order.  The options, --help and their checks are in dedup_opts.c,
 * windowed runs in dedup_window.c, the --stats report in dedup_stats.c;
 * the run they share is in dedup_run.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "byref.h"
#include "cli.h"
#include "state_file.h"
#include "dedup/hash.h"
#include "dedup_run.h"
#include "external.h"
#include "feeder.h"
#include "keep_last.h"
#include "keys.h"
#include "outfile.h"
#include "preflight.h"
#include "tier_spec.h"

#define WRITE_BUF ((size_t)1 << 18)

volatile sig_atomic_t dd_stop_signal;

/* ---- progress ---------------------------------------------------------------- */

static double now_sec(void) { return dd_now(); }


#define FIRST_REF (UINT64_C(1) << 63) /* a first record kept by reference */

/* Keeps a first record for --count/--unique: a copy, or by reference when
 * it lies in the mapped inputs. */
static bool firsts_append(run *r, const unsigned char *rec, size_t len)
{
    uintptr_t a = (uintptr_t)rec, b = (uintptr_t)r->ref_base;
    bool ref = r->ref_base && a >= b && a - b < r->ref_span;
    size_t need = r->firsts_len + 8 + (ref ? 8 : len);
    if (need > r->firsts_cap) {
        size_t nc = r->firsts_cap ? r->firsts_cap : (size_t)1 << 20;
        while (nc < need)
            nc *= 2;
        unsigned char *nb = realloc(r->firsts, nc);
        if (!nb)
            return false;
        r->firsts = nb;
        r->firsts_cap = nc;
    }
    uint64_t l = len | (ref ? FIRST_REF : 0), off = (uint64_t)(a - b);
    memcpy(r->firsts + r->firsts_len, &l, 8);
    memcpy(r->firsts + r->firsts_len + 8, ref ? (const void *)&off : (const void *)rec, ref ? 8 : len);
    r->firsts_len = need;
    return true;
}

/* Writes (or keeps for --count/--unique) records [from, to) of the batch,
 * whose verdicts are decided.  False to stop. */
static bool emit_decided(run *r, size_t from, size_t to)
{
    opts *o = r->o;
    for (size_t i = from; i < to; i++) {
        if (r->verdict[i] == DEDUP_DEFERRED)
            continue; /* the engine's now: counted in its statistics */
        r->records_in++;
        if (o->int_keys && r->ikmark[i]) { /* a bad integer key: dropped, or written undecided */
            if (r->ikmark[i] == 2) {
                r->records_out++;
                if (!dd_writer_record(&r->w, r->rec[i], r->rlen[i], o->term))
                    return false;
            }
            continue;
        }
        bool is_new = r->verdict[i] == DEDUP_NEW;
        if (!is_new)
            r->duplicates++;
        else
            r->news++;
        switch (o->out) {
        case OUT_FIRST:
            if (is_new) {
                r->records_out++;
                if (!dd_writer_record(&r->w, r->rec[i], r->rlen[i], o->term))
                    return false;
            }
            break;
        case OUT_DUPLICATES:
            if (!is_new) {
                r->records_out++;
                if (!dd_writer_record(&r->w, r->rec[i], r->rlen[i], o->term))
                    return false;
            }
            break;
        case OUT_COUNT:
        case OUT_UNIQUE:
            if (is_new && !firsts_append(r, r->rec[i], r->rlen[i])) {
                cli_error("out of memory keeping first records for --count/--unique");
                r->failed = true;
                return false;
            }
            break;
        }
    }
    return true;
}

/* Where the engine's records go once the exact set is frozen: after every
 * record the set answered NEW, in first-occurrence order.  Nonzero stops
 * the engine (1 broken pipe, 2 write error, 3 signal). */
static int spill_emit(void *ctx, const void *rec, size_t len, uint64_t count)
{
    run *r = ctx;
    if (dd_stop_signal)
        return 3;
    if (r->o->out == OUT_UNIQUE && count != 1)
        return 0;
    r->spill_out++;
    if (r->o->out == OUT_COUNT) {
        char prefix[32];
        int pl = snprintf(prefix, sizeof prefix, "%7llu ", (unsigned long long)count);
        if (!dd_writer_bytes(&r->w, prefix, (size_t)pl))
            return r->w.broken_pipe ? 1 : 2;
    }
    if (!dd_writer_record(&r->w, rec, len, r->o->term))
        return r->w.broken_pipe ? 1 : 2;
    return 0;
}

static unsigned char o_term(const run *r) { return r->o->term; }
/* Integer keys: parses the batch's keys into r->ikey (the good ones,
 * packed) and marks the bad ones by --on-bad-key; false (after naming the
 * first bad key's file, line and value) when the policy is to fail, with
 * *n cut to the records before it. */
static bool int_keys_of(run *r, size_t *n, size_t *m)
{
    opts *o = r->o;
    const bool bitmap = r->info.kind == DEDUP_SEEN_BITMAP;
    *m = 0;
    for (size_t i = 0; i < *n; i++) {
        uint64_t v;
        bool ok = dd_int_key(r->key[i], r->klen[i], &v);
        bool out = ok && bitmap && (v < o->sizing.range_lo || v > o->sizing.range_hi);
        r->ikmark[i] = 0;
        if (ok && !out) {
            r->ikey[(*m)++] = v;
            continue;
        }
        r->bad_keys++;
        char val[80], where[48] = "";
        dd_key_for_message(r->key[i], r->klen[i], val, sizeof val);
        if (o->key.field)
            snprintf(where, sizeof where, " in field %zu", o->key.field);
        if (o->bad_key == DD_BAD_KEY_FAIL) {
            cli_error("%s:%llu: %s%s: '%s'%s", r->file_name,
                      (unsigned long long)(r->file_records + i + 1 + r->hdr_lines),
                      out ? "key outside --range" : "not an integer key", where, val,
                      " (--on-bad-key skip or keep lets the run go on)");
            *n = i;
            return false;
        }
        r->ikmark[i] = o->bad_key == DD_BAD_KEY_KEEP ? 2 : 1;
    }
    return true;
}

/* The one message a fixed-size filter gives when it passes its capacity. */
static void check_capacity(run *r)
{
    if (r->full_warned || !r->info.probabilistic || !r->info.capacity || r->win ||
        r->info.items + r->news <= r->info.capacity)
        return;
    r->full_warned = true;
    opts *o = r->o;
    double now = dedup_seen_fpr_bound(r->s);
    cli_warn("the %s filter passed its capacity of %llu keys%s by record %llu of %s: from here "
             "new records are dropped at a rate that climbs as it fills (%.3g%% now, %.3g%% "
             "planned); --on-full grow keeps it under -p, --on-full fail stops there%s",
             o->mode, (unsigned long long)r->info.capacity,
             o->sizing.items ? " (-n)" : " (what -m holds at -p)",
             (unsigned long long)r->file_records, r->file_name, now * 100, r->info.fpr_target * 100,
             o->stats ? "" : "; --stats gives the rate at the end");
}

/* A giant record (its own key, longer than the engine's threshold), written
 * as the engine streams it from its temporary file. */
static int spill_emit_piece(void *ctx, const void *piece, size_t len, bool first, bool last,
                            uint64_t count)
{
    run *r = ctx;
    if (dd_stop_signal)
        return 3;
    if (first && r->o->out == OUT_UNIQUE && count != 1)
        r->skip_giant = true;
    if (first && !r->skip_giant) {
        r->spill_out++;
        if (r->o->out == OUT_COUNT) {
            char prefix[32];
            int pl = snprintf(prefix, sizeof prefix, "%7llu ", (unsigned long long)count);
            if (!dd_writer_bytes(&r->w, prefix, (size_t)pl))
                return r->w.broken_pipe ? 1 : 2;
        }
    }
    if (!r->skip_giant &&
        (!dd_writer_bytes(&r->w, piece, len) || (last && !dd_writer_bytes(&r->w, &r->o->term, 1))))
        return r->w.broken_pipe ? 1 : 2;
    if (last)
        r->skip_giant = false;
    return 0;
}

/* Decides and writes one batch.  False to stop (error or broken pipe). */
static bool process_good(run *r, size_t n)
{
    if (r->win)
        return dd_window_batch(r, n);
    if (r->o->int_keys) {
        size_t m, keep_n = n;
        bool go_on = int_keys_of(r, &keep_n, &m);
        dedup_verdict iv[BATCH];
        size_t done = 0;
        dedup_batch ib = {.n = m, .ints = r->ikey};
        dedup_status st = dedup_seen_decide(r->s, &ib, iv, &done);
        if (st) {
            cli_error("%s", st == DEDUP_ERR_FULL ? "the integer set needs more memory than "
                                                   "-m/--memory allows; raise it, or use --mode "
                                                   "roaring or bitmap"
                                                 : dedup_strerror(st));
            go_on = false;
        }
        for (size_t i = 0, j = 0; i < keep_n; i++)
            if (!r->ikmark[i]) {
                if (j == done) { /* the decide failed here: write what was decided */
                    keep_n = i;
                    break;
                }
                r->verdict[i] = iv[j++];
            }
        r->file_records += n;
        bool ok = emit_decided(r, 0, keep_n);
        if (!go_on)
            r->failed = true;
        return ok && go_on;
    }
    dedup_batch b = {.n = n, .digests = r->dig, .keys = r->key, .lens = r->klen,
                     .records = r->rec, .rlens = r->rlen};
    size_t done = 0;
    /* --redis bitmap/module: the batch goes to the journal before Redis. */
    if (r->redis && !dd_redis_batch_start(r->redis, r->rec, r->rlen, n, o_term(r))) {
        r->failed = true;
        return false;
    }
    dedup_status st = dedup_seen_decide(r->s, &b, r->verdict, &done);
    if (r->hll && !st)
        (void)dedup_hll_add_batch(r->hll, r->dig, n); /* dense from the start: cannot fail */
    if (!r->spilled && dedup_seen_spilled(r->s)) {
        r->spilled = true;
        char hh[32], hb[32];
        cli_info(2, "the distinct keys filled their %s of memory (half of %s, %s); the rest goes "
                 "through temporary files in %s",
                 cli_human_size(r->budget / 2, hh, sizeof hh), cli_human_size(r->budget, hb, sizeof hb),
                 r->budget_source, r->tmpdir);
    }
    if (st == DEDUP_ERR_CANCELLED && r->w.broken_pipe)
        return false;
    if (st == DEDUP_ERR_FULL && r->o->sizing.on_full == DEDUP_ON_FULL_FAIL && r->info.capacity &&
        r->info.probabilistic) {
        /* The records decided before the one past capacity are written. */
        if (!emit_decided(r, 0, done))
            return false;
        cli_error("the %s filter holds its capacity of %llu keys and --on-full fail stops before "
                  "record %llu of %s, the first new one past it: nothing was dropped for want of "
                  "room; give a larger -n, or --on-full grow",
                  r->o->mode, (unsigned long long)r->info.capacity,
                  (unsigned long long)(r->file_records + done + 1), r->file_name);
        r->failed = true;
        return false;
    }
    /* A shared or persistent seen-set (--redis, --tier) has recorded the
     * keys of the records decided before the failing part of the batch:
     * they are written out, or they would be lost to the next run; their
     * uncertain records go to --uncertain and their new keys are committed
     * as for a whole batch (the error below ends the run either way). */
    if (st && done && (r->redis || r->o->sizing.tiers)) {
        if (!emit_decided(r, 0, done))
            return false;
        dedup_batch head = b;
        head.n = done;
        if (r->redis)
            (void)dd_redis_after_batch(r->redis, r->s, &head, r->verdict, r->rec, r->rlen, o_term(r), &r->w);
        if (r->o->sizing.tiers)
            (void)dd_tiers_after_batch(r->o->sizing.tiers, r->s, &head, r->verdict, r->rec, r->rlen, o_term(r), &r->w);
    }
    if (st) {
        if (r->spilled && !r->w.error)
            dd_engine_report(dedup_seen_spill_engine(r->s), r->tmpdir, st);
        else if (st == DEDUP_ERR_FULL)
            cli_error("%s", r->info.kind == DEDUP_SEEN_CUCKOO
                                ? "the cuckoo filter is full (it was sized by -m/--memory, so it "
                                  "does not grow): give -n/--items instead, or more memory"
                                : !r->info.probabilistic
                                      ? "the distinct keys need more memory than -m/--memory allows; raise it, "
                                        "or use --mode blocked (fixed size) or --mode exact -m (spills to disk)"
                                      : "the filter grew past -m/--memory; raise it, or size a fixed "
                                        "filter with --mode blocked -n N -p P");
        else if (r->redis)
            cli_error("%s", dd_redis_error(r->redis));
        else if (r->o->sizing.tiers && *dd_tiers_error(r->o->sizing.tiers))
            cli_error("%s", dd_tiers_error(r->o->sizing.tiers));
        else if (!r->w.error)
            cli_error("%s", st == DEDUP_ERR_NOMEM && r->spilled ? "out of memory" : dedup_strerror(st));
        if (r->redis && !r->w.error)
            dd_redis_failed_batch(r->redis, &b, done, r->rec, r->rlen, o_term(r), &r->w);
        r->failed = true;
        return false;
    }
    if (!emit_decided(r, 0, n))
        return false;
    if (r->redis && (!dd_redis_after_batch(r->redis, r->s, &b, r->verdict, r->rec, r->rlen, o_term(r), &r->w) ||
                     !dd_redis_batch_done(r->redis, &r->w))) {
        r->failed = true;
        return false;
    }
    if (r->o->sizing.tiers && !dd_tiers_after_batch(r->o->sizing.tiers, r->s, &b, r->verdict, r->rec, r->rlen, o_term(r), &r->w)) {
        r->failed = true;
        return false;
    }
    r->file_records += n;
    dd_stats_sample_false_drops(r, false);
    check_capacity(r);
    return true;
}

/* Decides records [0, n) of the batch: the ones with keys through the
 * seen-set in runs, the ones without by --on-bad-key. */
static bool process_batch(run *r, size_t n)
{
    if (!r->key_errs)
        return process_good(r, n);
    const unsigned char *const *rec = r->rec, *const *key = r->key;
    const size_t *rlen = r->rlen, *klen = r->klen;
    const dedup_digest *dig = r->dig;
    bool ok = true;
    size_t i = 0;
    while (i < n && ok) {
        size_t j = i;
        while (j < n && key[j])
            j++;
        r->rec = rec + i;
        r->rlen = rlen + i;
        r->key = key + i;
        r->klen = klen + i;
        r->dig = dig + i;
        uint64_t lines = r->o->key.csv ? dd_run_batch_lines(r, j - i) : j - i;
        if (j > i)
            ok = process_good(r, j - i); /* adds its records to file_records */
        if (ok && j < n) {
            r->file_lines += lines;
            r->rec = rec + j;
            r->rlen = rlen + j;
            r->key = key + j;
            r->klen = klen + j;
            ok = dd_run_bad_key(r, 0);
            r->file_records++;
            r->file_lines += r->o->key.csv ? dd_run_batch_lines(r, 1) : 1;
            j++;
        } else if (ok) {
            r->file_lines += lines;
        }
        i = j;
    }
    r->rec = rec;
    r->rlen = rlen;
    r->key = key;
    r->klen = klen;
    r->dig = dig;
    return ok;
}

static dedup_batch block_batch(const dd_block *b)
{
    return (dedup_batch){.n = b->n, .digests = b->dig, .keys = b->key, .lens = b->klen,
                         .records = b->rec, .rlens = b->rlen};
}

/* The set decided on two threads (dedup_seen_parts() in dedup/seen.h):
 * the feeder's half, on its thread, after it split and hashed the block:
 * the keys of part 1, while the set says to go on; from the first block it
 * does not, none (the caller decides whole blocks from there, and may
 * spill).  Returns 1 when it decided part 1, 0 when not, -status on an
 * error. */
static int decide_part_one(void *ctx, dd_block *b)
{
    run *r = ctx;
    if (r->parts_stopped || dedup_seen_parts(r->s) != 2) {
        r->parts_stopped = true;
        return 0;
    }
    dedup_batch bb = block_batch(b);
    dedup_status st = dedup_seen_decide_part(r->s, &bb, 1, b->verdict);
    return st ? -(int)st : 1;
}

/* Points the run's batch at records [off, off + n) of block b; returns n. */
static size_t at_block(run *r, const dd_block *b, size_t off)
{
    r->rec = b->rec + off;
    r->rlen = b->rlen + off;
    r->key = b->key + off;
    r->klen = b->klen + off;
    r->dig = b->dig + off;
    return b->n - off < r->batch ? b->n - off : r->batch;
}

/* The caller's half of a block the feeder decided part 1 of: part 0 here,
 * then the block's records written in order. */
static bool process_parts(run *r, const dd_block *b)
{
    dedup_batch bb = block_batch(b);
    dedup_status st = b->work < 0 ? (dedup_status)-b->work
                                  : dedup_seen_decide_part(r->s, &bb, 0, b->verdict);
    if (st) {
        cli_error("%s", dedup_strerror(st));
        r->failed = true;
        return false;
    }
    dedup_verdict *own = r->verdict;
    bool ok = true;
    for (size_t off = 0; off < b->n && ok; off += r->batch) {
        size_t n = at_block(r, b, off);
        r->verdict = b->verdict + off;
        ok = !dd_stop_signal && emit_decided(r, 0, n);
        r->file_records += n;
    }
    r->verdict = own;
    return ok;
}

/* Writes the --count / --unique output from the first records kept. */
static bool write_counts(run *r)
{
    opts *o = r->o;
    size_t off = 0;
    unsigned char *scratch = NULL;
    size_t scap = 0;
    bool ok = true;
    while (off < r->firsts_len && ok) {
        uint64_t len, at;
        memcpy(&len, r->firsts + off, 8);
        const unsigned char *rec = r->firsts + off + 8;
        if (len & FIRST_REF) {
            len &= ~FIRST_REF;
            memcpy(&at, rec, 8);
            rec = r->ref_base + at;
            off += 16;
        } else {
            off += 8 + len;
        }
        if (len >= scap) { /* never NULL, even for an empty record */
            free(scratch);
            scap = len * 2 + 16;
            scratch = malloc(scap);
            if (!scratch) {
                cli_error("out of memory");
                r->failed = true;
                return false;
            }
        }
        size_t klen = len;
        const unsigned char *key = rec;
        if (!r->identity_key &&
            dd_key_get(&o->key, rec, len, &scratch, &scap, &key, &klen) == DEDUP_ERR_NOMEM) {
            cli_error("out of memory");
            r->failed = true;
            free(scratch);
            return false;
        }
        if (!key)
            continue; /* a record without a key was never kept */
        uint64_t count = dedup_seen_count_of(r->s, key, klen, dedup_hash(key, klen, r->info.seed));
        if (o->out == OUT_COUNT) {
            char prefix[32];
            int pl = snprintf(prefix, sizeof prefix, "%7llu ", (unsigned long long)count);
            ok = dd_writer_bytes(&r->w, prefix, (size_t)pl) && dd_writer_record(&r->w, rec, len, o->term);
            r->records_out++;
        } else if (count == 1) {
            ok = dd_writer_record(&r->w, rec, len, o->term);
            r->records_out++;
        }
    }
    free(scratch);
    return ok;
}

/* The exact set by reference (byref.h): when every input is a regular
 * file that is large against 'budget' -- a quarter of it or more, where
 * the copies would crowd it and spill -- the set keeps references into the
 * mapped files.  Below that the copying road stays: references lose when a
 * few keys repeat many times, because each repeat reads its key's first
 * line in the file, spread over the whole file, while copies sit together
 * (bench/results/byref.md has the figures); DEDUP_BYREF=1 forces references,
 * DEDUP_NO_BYREF=1 refuses them.  Keys that are fields or trimmed records
 * are references with their lengths; a normalised key whose bytes differ
 * from the file's (-i, --squeeze) is copied into the set.  NULL: the
 * copying road. */
static dd_byref *byref_choose(opts *o, char **files, int nfiles, uint64_t budget)
{
    const char *force = getenv("DEDUP_BYREF");
    if (o->int_keys || getenv("DEDUP_NO_BYREF"))
        return NULL;
    /* Mapped inputs are split by lines, with no header: the keys of CSV,
     * JSON, URLs and field lists are read through the feeder's copies. */
    if (o->key.csv || o->key.json || o->key.url || o->key.header || o->key.fields)
        return NULL;
    dd_byref *b = dd_byref_open(files, nfiles);
    if (b && !(force && *force) && dd_byref_span(b) < budget / 4) {
        dd_byref_close(b);
        b = NULL;
    }
    if (!b)
        return NULL;
    o->sizing.ref_base = dd_byref_base(b);
    o->sizing.ref_span = dd_byref_span(b);
    o->sizing.ref_term = o->term;
    o->sizing.ref_ends = dd_byref_ends(b, &o->sizing.ref_nends);
    o->sizing.ref_keys = !dd_keyspec_identity(&o->key);
    cli_info(2, "regular files: the exact set keeps references into them, not copies");
    return b;
}

/* An exact run with --state that may keep references: no budget (-m), no
 * window, no shared or layered set. */
static bool exact_state(const opts *o, bool windowed)
{
    return o->state && !windowed && o->kind == DEDUP_SEEN_EXACT && !o->sizing.tiers &&
           !o->redis.url && !o->sizing.memory;
}

/* --state in exact mode by reference: the set never spills (a state holds
 * every key), so its budget is one no run reaches. */
#define STATE_NO_SPILL (UINT64_C(1) << 60)

static dd_byref *byref_for_state(opts *o, run *r, char **files, int nfiles)
{
    dd_byref *b = byref_choose(o, files, nfiles, dd_external_default_memory(NULL));
    if (b) {
        o->sizing.spill_budget = STATE_NO_SPILL;
        o->sizing.tmpdir = o->tmpdir;
        o->sizing.threads = 1;
        o->sizing.emit = spill_emit; /* never called: nothing spills */
        o->sizing.emit_ctx = r;
    }
    return b;
}

/* Ends the outputs (-o, --late) of a run whose status so far is 'status',
 * and returns the status.  A complete run renames them into place; a
 * failed or interrupted one leaves the previous files as they were and
 * removes its temporaries -- except when a shared or persistent seen-set
 * (--redis, a store or Redis tier) has already recorded the keys of the
 * records written: those records would be lost for good (a rerun takes
 * them for repeats), so they are kept beside the output, named. */
static int finish_outputs(run *r, dd_outfile *out, dd_outfile *late, int status)
{
    const opts *o = r->o;
    if (status == CLI_EXIT_OK) {
        status = dd_outfile_commit(out);
        if (status == CLI_EXIT_OK && late->fd >= 0)
            status = dd_outfile_commit(late);
    }
    dd_outfile_abort(late);
    dd_outfile_free(late);
    bool outside = dd_redis_used(&o->redis) || dd_tiers_outside(o->sizing.tiers);
    const char *kept = outside && status != CLI_EXIT_OK ? dd_outfile_keep_partial(out) : NULL;
    if (kept)
        cli_warn("%s: left as it was; the %llu records written before the %s are in '%s': "
                 "their keys are recorded in %s, so a later run will not write them again",
                 out->name, (unsigned long long)r->records_out,
                 status > 128 ? "signal" : "failure", kept,
                 dd_redis_used(&o->redis) ? "Redis" : "the store or Redis tier");
    dd_outfile_abort(out);
    dd_outfile_free(out);
    return status;
}

/* Checks every input before any output is written: each FILE exists, is
 * not a directory and can be read ("-" is standard input).  Adds the sizes
 * of the regular files to *total_bytes, and clears *size_known when one is
 * a pipe or standard input.  False after naming the first bad one. */
static bool check_inputs(char **files, int nfiles, uint64_t *total_bytes, bool *size_known)
{
    *total_bytes = 0;
    *size_known = true;
    for (int i = 0; i < nfiles; i++) {
        if (strcmp(files[i], "-") == 0) {
            *size_known = false;
            continue;
        }
        /* stat first: opening a FIFO here and closing it again would cut
         * off its writer before the real read. */
        struct stat st;
        if (stat(files[i], &st) != 0) {
            cli_error("%s: %s", files[i], strerror(errno));
            return false;
        }
        if (S_ISDIR(st.st_mode)) {
            cli_error("%s: %s", files[i], strerror(EISDIR));
            return false;
        }
        if (S_ISREG(st.st_mode)) {
            int fd = open(files[i], O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                cli_error("%s: %s", files[i], strerror(errno));
                return false;
            }
            close(fd);
            *total_bytes += (uint64_t)st.st_size;
        } else {
            if (access(files[i], R_OK) != 0) {
                cli_error("%s: %s", files[i], strerror(errno));
                return false;
            }
            *size_known = false;
        }
    }
    return true;
}

/* A loaded state's identity against this run's key options: a state with
 * none (an older version's, or a filter file) takes this run's on save;
 * another is refused unless --force-keys. */
static bool state_identity_ok(const opts *o, bool has_ident, const char *saved, const char *ident)
{
    if (!has_ident) {
        cli_warn("%s: holds no record of the key options it was made with (an older version's "
                 "state, or a filter file): this run's (%s) are recorded when it is saved",
                 o->state, ident);
        return true;
    }
    if (strcmp(saved, ident) == 0)
        return true;
    if (o->force_keys) {
        cli_warn("%s: made with other key options (%s), used with this run's (%s) as "
                 "--force-keys asks; they are recorded when it is saved",
                 o->state, saved, ident);
        return true;
    }
    cli_error("%s: made with other key options: the file has '%s', this run '%s' (give the "
              "options it was made with, or --force-keys to use these from now on)",
              o->state, saved, ident);
    return false;
}

/* Reads every input in turn and decides its records, batch by batch.
 * Returns true when the run stopped early (broken pipe, an error, a signal;
 * *status set where the input was at fault); false after the last input. */
static bool feed_inputs(run *r, const opts *o, char **files, int nfiles, dedup_seen *s,
                        dd_byref *byref, int *status)
{
    bool stopped = false;
    for (int fi = 0; fi < nfiles && !stopped; fi++) {
        dd_feeder *fd = NULL;
        dd_feeder_opts fo = {.term = o->term, .key = &o->key, .hash = !o->int_keys,
                             .seed = r->info.seed};
        if (o->key.header) {
            fo.header = dd_run_on_header;
            fo.header_ctx = r;
        }
        if (byref) {
            fo.mapped = true;
            fo.map = dd_byref_file(byref, fi, &fo.map_len);
            if (dedup_seen_parts(s) == 2 && !r->parts_stopped) { /* two threads decide */
                fo.work = decide_part_one;
                fo.work_ctx = r;
            }
        }
        /* Named before the feeder starts: its header callback says it. */
        r->file_name = strcmp(files[fi], "-") == 0 ? "(standard input)" : files[fi];
        r->file_records = 0;
        r->file_lines = 0;
        int e = dd_feeder_open(&fd, files[fi], &fo);
        if (e) {
            if (!dd_stop_signal) { /* else a FIFO's open was interrupted */
                cli_error("%s: %s", files[fi], strerror(e));
                *status = CLI_EXIT_USAGE;
            }
            stopped = true;
            break;
        }
        uint64_t before = r->bytes_in;
        const dd_block *b;
        while (!stopped && (b = dd_feeder_next(fd)) != NULL) {
            r->blocks++;
            r->blocks_parted += b->work != 0;
            if (!dd_run_write_header(r)) {
                stopped = true;
                break;
            }
            if (b->work && !process_parts(r, b))
                stopped = true;
            for (size_t off = 0; off < b->n && !b->work; off += r->batch) {
                size_t n = at_block(r, b, off);
                if (dd_stop_signal || !process_batch(r, n)) {
                    stopped = true;
                    break;
                }
            }
            r->bytes_in = before + b->bytes_read;
            dd_progress_show(&r->prog, r->bytes_in, r->records_in, false, NULL);
        }
        if (dd_stop_signal)
            stopped = true;
        e = dd_feeder_error(fd);
        if (e == -1 && !stopped) { /* the header callback said why */
            *status = CLI_EXIT_USAGE;
            stopped = true;
        } else if (e && !stopped) {
            cli_error("%s: read error: %s", dd_feeder_name(fd), strerror(e));
            *status = CLI_EXIT_USAGE;
            stopped = true;
        }
        dd_feeder_close(fd);
        if (byref && !stopped && !dd_byref_check(byref, fi)) {
            r->failed = true;
            stopped = true;
        }
    }
    return stopped;
}

/* After the last input: the header of an input that had nothing else,
 * counts and uniques, the spilled engine's records, the writers flushed,
 * the warnings about late records and keyless ones, the mapped inputs
 * checked again.  Returns the run's 'stopped' (r->failed set on errors). */
static bool end_inputs(run *r, const opts *o, dedup_seen *s, dd_byref *byref, bool stopped)
{
    if (!stopped && !dd_run_write_header(r)) /* an input of its header alone */
        stopped = true;
    if (!stopped && (o->out == OUT_COUNT || o->out == OUT_UNIQUE))
        stopped = !write_counts(r);
    if (!stopped && r->spilled) {
        /* The engine's records all come after the frozen set's: its spilled
         * first occurrences, counts and uniques are written now. */
        dedup_status fs = dedup_seen_finish(s, NULL, NULL);
        if (fs && !(fs == DEDUP_ERR_CANCELLED && (r->w.broken_pipe || dd_stop_signal))) {
            if (!r->w.error)
                dd_engine_report(dedup_seen_spill_engine(s), r->tmpdir, fs);
            r->failed = true;
        }
        stopped = fs != DEDUP_OK;
    }
    if (!r->w.broken_pipe && !r->w.error)
        dd_writer_flush(&r->w);
    if (r->late_fd >= 0) {
        if (!r->late_w.error)
            dd_writer_flush(&r->late_w);
        if (r->late_w.error) {
            cli_error("write error on %s: %s", o->late_file, strerror(r->late_w.error));
            r->failed = true;
        }
        dd_writer_free(&r->late_w);
    }
    if (r->win)
        dd_window_warn_late(r);
    dd_progress_show(&r->prog, r->bytes_in, r->records_in, true, NULL);
    if (r->bad_keys && o->bad_key != DD_BAD_KEY_FAIL && r->key_errs)
        cli_warn("%llu record%s had no key (%s): %s", (unsigned long long)r->bad_keys,
                 r->bad_keys == 1 ? "" : "s",
                 dd_key_bad_reason(&o->key),
                 o->bad_key == DD_BAD_KEY_SKIP ? "dropped" : "written undecided");
    else if (r->bad_keys && o->bad_key != DD_BAD_KEY_FAIL)
        cli_warn("%llu record%s had a key that is not an integer%s: %s",
                 (unsigned long long)r->bad_keys, r->bad_keys == 1 ? "" : "s",
                 r->info.kind == DEDUP_SEEN_BITMAP ? " or is outside --range" : "",
                 o->bad_key == DD_BAD_KEY_SKIP ? "dropped" : "written undecided");

    if (byref && !stopped && !r->failed && !dd_byref_check(byref, -1))
        r->failed = true;
    if (byref)
        cli_info(2, "by reference: %llu of %llu blocks decided on two threads%s",
                 (unsigned long long)r->blocks_parted, (unsigned long long)r->blocks,
                 r->blocks_parted < r->blocks ? " (then the set held a quarter of the budget)" : "");
    return stopped;
}

/* The run's seen-set: the state file's when it exists (its seed, window and
 * identity checked against this run's options), else a new one (Redis's,
 * the tiers', or the exact set that spills past half the default budget).
 * Sets r->budget and r->budget_source for a set that may spill, *byrefp for
 * exact mode by reference.  0, or the exit status after saying why (with
 * nothing left open but r). */
static int open_seen(opts *o, run *r, char **files, int nfiles, const char *ident,
                     dedup_seen **sp, dd_byref **byrefp)
{
    char err[512] = "";
    dedup_seen *s = NULL;
    dedup_status st;
    bool windowed = o->window_us || o->last_n;
    uint64_t spill_budget = 0;
    const char *budget_source = NULL;
    dd_byref *byref = NULL; /* exact mode by reference: the mapped inputs */
    o->sizing.windowed = windowed;
    if (windowed) {
        o->sizing.window_type = o->last_n ? DEDUP_WINDOW_COUNT
                                        : o->tumbling ? DEDUP_WINDOW_TUMBLING : DEDUP_WINDOW_SLIDING;
        o->sizing.duration = o->last_n ? o->last_n : o->window_us;
        o->sizing.lateness = o->last_n ? 0 : o->lateness_us;
        o->sizing.refresh_on_dup = o->refresh_on_dup;
    }
    /* A store keeps the key options it was filled with (its identity). */
    static char keys_desc[1025]; /* DEDUP_STORE_IDENTITY_MAX + 1 */
    dd_keyspec_describe(&o->key, o->term, o->int_keys, keys_desc, sizeof keys_desc);
    dd_tiers_set_identity(o->sizing.tiers, keys_desc, o->force_keys);
    if (o->state && access(o->state, F_OK) == 0) {
        char saved[DEDUP_STATE_IDENT_MAX + 1];
        bool has_ident;
        st = dd_seen_load(&o->sizing, o->state, &s, &has_ident, saved, sizeof saved, err, sizeof err);
        if (st) {
            cli_error("%s: %s", o->state, err[0] ? err : strerror(errno));
            return CLI_EXIT_USAGE;
        }
        /* The state's own seed goes on; --seed may only repeat it. */
        if (o->seed_given && o->sizing.seed != dedup_seen_seed(s)) {
            cli_error("%s: was made with seed 0x%016llx, not the --seed 0x%016llx given (leave "
                      "--seed out to go on with the state's)", o->state,
                      (unsigned long long)dedup_seen_seed(s), (unsigned long long)o->sizing.seed);
            dedup_seen_free(s);
            return CLI_EXIT_USAGE;
        }
        o->sizing.seed = dedup_seen_seed(s);
        if (exact_state(o, windowed) && dedup_seen_kind_of(s) == DEDUP_SEEN_EXACT &&
            (byref = byref_for_state(o, r, files, nfiles)) != NULL) {
            /* carried on by reference: the saved keys are copied in first */
            dedup_seen *loaded = s;
            uint64_t n = 0;
            bool ex;
            (void)dedup_seen_distinct(loaded, &n, &ex);
            o->sizing.seed = dedup_seen_seed(loaded);
            o->sizing.ref_expected = dd_byref_span(byref) / 64 + n;
            st = dd_seen_create(&o->sizing, &s, err, sizeof err);
            if (!st)
                st = dedup_seen_merge(s, loaded, err, sizeof err);
            dedup_seen_free(loaded);
            if (st) {
                cli_error("%s: %s", o->state, err[0] ? err : dedup_strerror(st));
                dedup_seen_free(s);
                dd_byref_close(byref);
                return CLI_EXIT_FAIL;
            }
        }
        if (windowed) {
            if (!dd_window_matches_saved(&o->sizing, dedup_window_of_seen(s), o->state)) {
                dedup_seen_free(s);
                return CLI_EXIT_USAGE;
            }
            cli_info(2, "%s: loaded window state", o->state);
        } else {
            cli_info(2, "%s: loaded %s state", o->state, o->mode);
            dedup_seen_info li;
            dedup_seen_get_info(s, &li);
            if (li.probabilistic && li.capacity && o->sizing.items && o->sizing.items != li.capacity)
                cli_warn("%s: the state was made for %llu keys; -n %llu does not resize it (a "
                         "filter's size is fixed when it is made): it goes on at %llu, and "
                         "--on-full %s applies past them",
                         o->state, (unsigned long long)li.capacity,
                         (unsigned long long)o->sizing.items, (unsigned long long)li.capacity,
                         o->sizing.on_full == DEDUP_ON_FULL_FAIL   ? "fail"
                         : o->sizing.on_full == DEDUP_ON_FULL_GROW ? "grow"
                                                                  : "warn");
            st = li.probabilistic && li.capacity ? dedup_seen_set_on_full(s, o->sizing.on_full)
                                                 : DEDUP_OK;
            if (st == DEDUP_ERR_UNSUPPORTED) {
                cli_error("%s: --on-full grow cannot grow a filter made by an earlier run (a "
                          "growing chain starts with its first key): give --on-full warn or fail, "
                          "or start a new state with --mode scalable", o->state);
                dedup_seen_free(s);
                return CLI_EXIT_USAGE;
            }
        }
        /* After the checks of the method and window, which name what
         * differs in their own terms. */
        if (!state_identity_ok(o, has_ident, saved, ident)) {
            dedup_seen_free(s);
            dd_byref_close(byref);
            return CLI_EXIT_USAGE;
        }
    } else {
        /* A new state file is keyed by a secret: a crafted collision then
         * needs the seed, which only the file holds. */
        if (o->state && !o->seed_given && !dd_fresh_seed(&o->sizing.seed)) {
            cli_error("%s: no random seed from the system (%s): give --seed", o->state,
                      strerror(errno));
            return CLI_EXIT_FAIL;
        }
        /* Exact mode without -m: keys stay in memory up to half the default
         * budget, then the run goes on with the external engine. */
        if (!windowed && !o->state && o->kind == DEDUP_SEEN_EXACT && !o->sizing.tiers && !o->redis.url) {
            const char *env = getenv("DEDUP_MEMORY");
            uint64_t v;
            if (env && *env && !(cli_parse_size(env, &v) && v > 0))
                cli_warn("DEDUP_MEMORY='%s' is not a size (e.g. 8G); using the default budget", env);
            spill_budget = dd_external_default_memory(&budget_source);
            o->sizing.spill_budget = spill_budget;
            o->sizing.tmpdir = o->tmpdir;
            o->sizing.threads = dd_external_threads(spill_budget - spill_budget / 2);
            o->sizing.emit = spill_emit;
            if (dd_keyspec_identity(&o->key))
                o->sizing.emit_piece = spill_emit_piece;
            o->sizing.emit_ctx = r;
            byref = byref_choose(o, files, nfiles, spill_budget);
        } else if (exact_state(o, windowed)) {
            byref = byref_for_state(o, r, files, nfiles);
        }
        if (o->redis.url) {
            int rc = dd_redis_create(&o->redis, o->sizing.items, o->sizing.fpr, o->sizing.seed,
                                     o->seed_given, &r->redis, &s);
            if (rc) {
                return rc;
            }
        } else {
            st = dd_seen_create(&o->sizing, &s, err, sizeof err);
            if (st) {
                cli_error("%s", err);
                return CLI_EXIT_USAGE;
            }
        }
    }
    r->budget = spill_budget;
    r->budget_source = budget_source;
    *sp = s;
    *byrefp = byref;
    return CLI_EXIT_OK;
}

static int dedup_main(int argc, char **argv, opts *op)
{
    opts o = *op;

    /* Inputs: all checked before any output is written. */
    int nfiles = argc - optind;
    char *stdin_only[] = {"-"};
    char **files = nfiles > 0 ? argv + optind : stdin_only;
    if (nfiles == 0)
        nfiles = 1;
    uint64_t total_bytes;
    bool size_known;
    if (!check_inputs(files, nfiles, &total_bytes, &size_known))
        return CLI_EXIT_USAGE;
    /* An input that is also an output would be lost: refused now. */
    if (!dd_outfile_check_inputs(NULL, o.output, files, nfiles) ||
        (o.late == LATE_FILE && !dd_outfile_check_inputs(NULL, o.late_file, files, nfiles)))
        return CLI_EXIT_USAGE;

    dd_external_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.memory = o.sizing.memory;
    eo.tmpdir = o.tmpdir;
    eo.sorted = o.sorted;
    eo.out = o.out == OUT_DUPLICATES ? 1 : o.out == OUT_COUNT ? 2 : o.out == OUT_UNIQUE ? 3 : 0;
    eo.term = o.term;
    eo.key = &o.key;
    eo.bad_key = o.bad_key == DD_BAD_KEY_SKIP ? 1 : o.bad_key == DD_BAD_KEY_KEEP ? 2 : 0;
    eo.seed = o.sizing.seed;
    eo.seed_given = o.seed_given;
    eo.stats = o.stats == STATS_JSON ? 2 : o.stats == STATS_TEXT ? 1 : 0;
    eo.line_buffered = o.line_buffered;
    eo.progress = o.progress == 1 || (o.progress == -1 && isatty(STDERR_FILENO) && cli_verbosity > 0);
    eo.total_bytes = size_known ? total_bytes : 0;
    eo.output = o.output;
    if (o.state && !dd_state_writable(o.state))
        return CLI_EXIT_USAGE;
    /* One run at a time per state file, from its load to its save (the
     * lock goes with the process, however it ends). */
    int state_lock = o.state ? dd_state_lock(o.state) : -1;
    if (o.state && state_lock < 0)
        return CLI_EXIT_USAGE;
    /* The key options are part of the state's identity. */
    char ident[DEDUP_STATE_IDENT_MAX + 1] = "";
    if (o.state && !dd_state_identity(&o.key, o.term, o.int_keys,
                                      o.kind ? dedup_seen_kind_name(o.kind) : o.mode, ident,
                                      sizeof ident)) {
        cli_error("%s: the key options are too long to record in a state file", o.state);
        return CLI_EXIT_USAGE;
    }
    /* A spill is possible in exact mode without a state (past half the
     * budget) and always in the external engine. */
    bool may_spill = !o.window_us && !o.last_n && o.kind == DEDUP_SEEN_EXACT &&
                     (o.external || !o.state);
    if (may_spill && !dd_tmpdir_usable(dd_external_tmpdir(o.tmpdir), o.tmpdir != NULL))
        return CLI_EXIT_USAGE;
    if (o.keep_last) {
        dd_keep_last_opts ko = {.kind = o.kind, .items = o.sizing.items, .seed = o.sizing.seed,
                                .term = o.term, .key = &o.key, .output = o.output,
                                .tmpdir = dd_external_tmpdir(o.tmpdir),
                                .line_buffered = o.line_buffered, .stats = o.stats != STATS_NONE};
        ko.bad_key = o.bad_key == DD_BAD_KEY_SKIP ? 1 : o.bad_key == DD_BAD_KEY_KEEP ? 2 : 0;
        dd_out_signals(true); /* two passes that do not stop between records */
        int krc = dd_run_keep_last(&ko, files, nfiles);
        op->key.compiled = o.key.compiled; /* compiled from the header: the caller frees it */
        return krc;
    }
    if (o.external) {
        /* Exact mode under a memory budget.  SIGINT, SIGTERM and SIGHUP
         * end the process at once (the output's temporary removed first):
         * the engine's finishing phase can run for minutes without reading
         * or writing, and its own temporary files have no name. */
        dd_out_signals(true);
        int xrc = dd_run_external(&eo, files, nfiles);
        op->key.compiled = o.key.compiled; /* compiled from the header: the caller frees it */
        return xrc;
    }
    /* The signals stop the run at its next batch (a state is then left as
     * it was, a store flushed). */
    dd_out_signals(false);

    /* The seen-set: from the state file if there is one, else new. */
    run *r = calloc(1, sizeof *r);
    if (!r) {
        cli_error("out of memory");
        return CLI_EXIT_FAIL;
    }
    dedup_seen *s = NULL;
    dedup_status st;
    dd_byref *byref = NULL; /* exact mode by reference: the mapped inputs */
    int orc = open_seen(&o, r, files, nfiles, ident, &s, &byref);
    if (orc) {
        free(r);
        return orc;
    }

    dd_outfile out, late;
    memset(&late, 0, sizeof late);
    late.fd = -1;
    orc = dd_outfile_open(&out, NULL, o.output);
    if (orc || dd_writer_init(&r->w, out.fd, out.name, WRITE_BUF) != 0) {
        if (!orc)
            cli_error("out of memory");
        dd_outfile_abort(&out);
        dd_outfile_free(&out);
        dedup_seen_free(s);
        dd_byref_close(byref);
        free(r);
        return orc ? orc : CLI_EXIT_FAIL;
    }
    r->o = &o;
    r->s = s;
    r->verdict = r->verdict_buf;
    r->batch = BATCH;
    if (r->redis || o.sizing.tiers) { /* a round trip, a store read: not per BATCH keys */
        r->batch = DD_REDIS_BATCH;
        r->verdict = malloc(DD_REDIS_BATCH * sizeof *r->verdict);
        if (!r->verdict) {
            cli_error("out of memory");
            dd_writer_free(&r->w);
            dd_outfile_abort(&out);
            dd_outfile_free(&out);
            free(r);
            dedup_seen_free(s);
            return CLI_EXIT_FAIL;
        }
    }
    dedup_seen_get_info(s, &r->info);
    r->win = r->info.kind == DEDUP_SEEN_WINDOW ? dedup_window_of_seen(s)
                                               : dd_tiers_window(o.sizing.tiers);
    r->fd_rate = r->info.probabilistic ? r->info.fpr_bound : 0;
    r->can_spill = r->budget != 0;
    r->tmpdir = dd_external_tmpdir(o.tmpdir);
    r->tfmt = o.time_format;
    r->late_fd = -1;
    if (o.late == LATE_FILE) {
        orc = dd_outfile_open(&late, NULL, o.late_file);
        if (orc || dd_writer_init(&r->late_w, late.fd, o.late_file, WRITE_BUF) != 0) {
            if (!orc)
                cli_error("%s: out of memory", o.late_file);
            dd_outfile_abort(&late);
            dd_outfile_free(&late);
            dd_writer_free(&r->w);
            dd_outfile_abort(&out);
            dd_outfile_free(&out);
            free(r);
            dedup_seen_free(s);
            return CLI_EXIT_USAGE;
        }
        r->late_fd = late.fd;
        r->late_w.line_buffered = o.line_buffered;
    }
    r->w.line_buffered = o.line_buffered;
    if (o.stats != STATS_NONE && r->info.probabilistic && !r->win) {
        dedup_hll_params hp;
        dedup_hll_params_init(&hp);
        hp.seed = r->info.seed;
        if (dedup_hll_create(&hp, NULL, &r->hll) == DEDUP_OK && dedup_hll_densify(r->hll) != DEDUP_OK) {
            dedup_hll_free(r->hll); /* no sketch: the filter's own estimate is shown */
            r->hll = NULL;
        }
    }
    r->identity_key = dd_keyspec_identity(&o.key);
    r->key_errs = dd_run_key_errs(&o);
    if (byref) {
        r->ref_base = dd_byref_base(byref);
        r->ref_span = dd_byref_span(byref);
    }
    dd_progress_init(&r->prog,
                     o.progress == 1 || (o.progress == -1 && isatty(STDERR_FILENO) && cli_verbosity > 0),
                     size_known ? total_bytes : 0);

    int status = CLI_EXIT_OK;
    /* broken pipe, error or signal: no state save */
    bool stopped = feed_inputs(r, &o, files, nfiles, s, byref, &status);
    stopped = end_inputs(r, &o, s, byref, stopped);
    if (r->w.error) {
        cli_error("write error on %s: %s", r->w.name, strerror(r->w.error));
        status = CLI_EXIT_FAIL;
    } else if (r->failed) {
        status = CLI_EXIT_FAIL;
    } else if (dd_stop_signal) {
        cli_info(1, "interrupted%s%s", o.state ? "; the state file was left as it was" : "",
                 out.tmp ? "; the output file was left as it was" : "");
        status = 128 + dd_stop_signal;
    }
    status = finish_outputs(r, &out, &late, status);
    /* The reader of the output went away before the input ended: which of
     * the records written it took cannot be known, so a state saved now
     * could hold keys never delivered.  Say so rather than end quietly. */
    if (o.state && r->w.broken_pipe && status == CLI_EXIT_OK) {
        cli_error("%s: not saved: the output was closed (broken pipe) before the input ended, "
                  "so the records delivered are not known; the state is as it was before the run",
                  o.state);
        status = CLI_EXIT_FAIL;
    }
    /* The same for the sets kept in tiers (a store, filter files) and Redis:
     * filter files are not saved, a store or a Redis name keeps the keys of
     * the records written, which the reader may not all have taken. */
    if (!o.state && r->w.broken_pipe && (dd_tiers_keep(o.sizing.tiers) || r->redis)) {
        cli_error("the output was closed (broken pipe) before the input ended, so the records "
                  "delivered are not known; filter files are left as they were, a store or Redis "
                  "name keeps the keys of the records written");
        status = CLI_EXIT_FAIL;
    }
    /* Save the seen-set only after a complete run. */
    if (o.state && !stopped && status == CLI_EXIT_OK && !r->w.broken_pipe) {
        st = dedup_state_save(s, o.state, ident);
        if (st) {
            cli_error("%s: cannot save state: %s", o.state,
                      st == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(st));
            status = CLI_EXIT_FAIL;
        }
    }
    /* The tiers: filter files saved after a complete run; stores durable. */
    if (o.sizing.tiers &&
        !dd_tiers_finish(o.sizing.tiers, !stopped && status == CLI_EXIT_OK && !r->w.broken_pipe) &&
        status == CLI_EXIT_OK)
        status = CLI_EXIT_FAIL;
    if (o.stats != STATS_NONE) {
        if (r->win)
            dd_window_print_stats(r, now_sec() - r->prog.start);
        else {
            dd_stats_sample_false_drops(r, true);
            dd_stats_print(r, now_sec() - r->prog.start);
        }
        if (o.sizing.tiers)
            dd_tiers_print_stats(o.sizing.tiers, stderr, o.stats == STATS_JSON);
    }

    if (!dd_redis_close(r->redis) && status == CLI_EXIT_OK)
        status = CLI_EXIT_FAIL;
    dd_writer_free(&r->w);
    dedup_hll_free(r->hll);
    free(r->firsts);
    free(r->hdr);
    op->key.compiled = o.key.compiled; /* compiled from the header: the caller frees them */
    op->time_key = o.time_key;
    dd_window_free(r);
    if (r->verdict != r->verdict_buf)
        free(r->verdict);
    free(r);
    dedup_seen_free(s);
    dd_byref_close(byref); /* after the set that refers to it */
    dd_tiers_free(o.sizing.tiers);
    dd_state_unlock(state_lock);
    return status;
}

int cmd_dedup(int argc, char **argv)
{
    opts o;
    int pr = dd_dedup_parse_args(argc, argv, &o);
    if (pr != 0) {
        dd_keyspec_release(&o.key);
        dedup_key_free(o.time_key);
        return pr > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    int rc = dedup_main(argc, argv, &o);
    dd_keyspec_release(&o.key);
    dedup_key_free(o.time_key);
    return rc;
}
