/*
 * external.c - `dedup --mode exact` under a memory budget (see external.h).
 *
 * Records are read, keyed and hashed on the feeder's thread (feeder.h),
 * and pushed to the engine, which emits through the buffered writer: first
 * occurrences as they arrive while the keys fit (so pipes keep streaming),
 * the rest at the end.  A signal or a broken pipe stops the engine through
 * the emit callback; temporary files are nameless, so nothing is left
 * behind in any case.  cmd_dedup.c has SIGINT, SIGTERM and SIGHUP end the
 * process at once for this path, the -o temporary removed first
 * (outfile.h): the finishing phase may not read or write for a long time.
 * dd_stop_signal is still honoured if a caller sets it.
 */
#define _POSIX_C_SOURCE 200809L
#include "external.h"
#include "key_header.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dedup/extsort.h"
#include "dedup/hash.h"
#include "extref.h"
#include "outfile.h"
#include "feeder.h"
#include "io.h"
#include "progress.h"

#define WRITE_BUF ((size_t)1 << 18)
#define EXT_BATCH 16384 /* records per push_batch: once spilled, a batch is spilled on two threads (extsort_scatter.c), one hand-off each */

/* The memory this process may use: physical memory, or less when a cgroup
 * (v2 memory.max, v1 memory.limit_in_bytes) says so, as in a container, or
 * an address-space limit (ulimit -v). */
static uint64_t usable_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    uint64_t phys = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : UINT64_C(2) << 30;
    static const char *const limits[] = {"/sys/fs/cgroup/memory.max",
                                         "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) {
        FILE *f = fopen(limits[i], "r");
        if (!f)
            continue;
        unsigned long long v;
        if (fscanf(f, "%llu", &v) == 1 && v > 0 && v < phys)
            phys = v;
        fclose(f);
    }
    /* An address-space limit (ulimit -v) caps it too: a share of it goes to
     * the program, its libraries and its buffers, so count three quarters. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)rl.rlim_cur / 4 * 3 < phys)
        phys = (uint64_t)rl.rlim_cur / 4 * 3;
    return phys;
}

uint64_t dd_external_default_memory(const char **source)
{
    const char *env = getenv("DEDUP_MEMORY");
    uint64_t v;
    if (env && *env && cli_parse_size(env, &v) && v > 0) {
        if (source)
            *source = "DEDUP_MEMORY";
        return v;
    }
    if (source)
        *source = "half of the usable memory";
    return usable_memory() / 2;
}

typedef struct ext_run {
    const dd_external_opts *o;
    dd_writer *w;
    dd_extref *xr; /* records go by reference (extref.h), or NULL */
} ext_run;

static int ext_emit(void *ctx, const void *rec, size_t len, uint64_t count)
{
    ext_run *r = ctx;
    if (dd_stop_signal)
        return 3;
    if (r->o->out == 2) {
        char prefix[32];
        int pl = snprintf(prefix, sizeof prefix, "%7llu ", (unsigned long long)count);
        if (!dd_writer_bytes(r->w, prefix, (size_t)pl))
            return r->w->broken_pipe ? 1 : 2;
    }
    if (r->xr)
        return dd_extref_emit(r->xr, r->w, rec, len);
    if (!dd_writer_record(r->w, rec, len, r->o->term))
        return r->w->broken_pipe ? 1 : 2;
    return 0;
}

/* A giant record (longer than dedup_extsort_giant_min), written as the
 * engine streams it from its temporary file. */
static int ext_emit_piece(void *ctx, const void *piece, size_t len, bool first, bool last,
                          uint64_t count)
{
    ext_run *r = ctx;
    if (dd_stop_signal)
        return 3;
    if (first && r->o->out == 2) {
        char prefix[32];
        int pl = snprintf(prefix, sizeof prefix, "%7llu ", (unsigned long long)count);
        if (!dd_writer_bytes(r->w, prefix, (size_t)pl))
            return r->w->broken_pipe ? 1 : 2;
    }
    if (!dd_writer_bytes(r->w, piece, len) || (last && !dd_writer_bytes(r->w, &r->o->term, 1)))
        return r->w->broken_pipe ? 1 : 2;
    return 0;
}

static double now_sec(void) { return dd_now(); }

static void print_stats(const dd_external_opts *o, const dedup_extsort_stats *s, uint64_t budget,
                        uint64_t bytes_in, const char *tmpdir, double secs, const dd_extref *xr)
{
    uint64_t dups = s->records_in - s->distinct;
    double rate = s->records_in ? (double)dups / (double)s->records_in : 0.0;
    if (o->stats == 2) {
        fprintf(stderr,
                "{\"records_in\":%llu,\"records_out\":%llu,\"duplicates\":%llu,"
                "\"duplicate_rate\":%.6f,\"distinct\":%llu,\"mode\":\"exact\",\"external\":true,"
                "\"sorted\":%s,\"memory_limit\":%llu,\"memory_bytes\":%llu,\"spilled\":%s,"
                "\"runs\":%llu,\"merge_passes\":%llu,\"max_depth\":%llu,\"bytes_spilled\":%llu,"
                "\"bytes_read_back\":%llu,\"bytes_spilled_raw\":%llu,\"tmpdir\":",
                (unsigned long long)s->records_in, (unsigned long long)s->records_out,
                (unsigned long long)dups, rate, (unsigned long long)s->distinct,
                o->sorted ? "true" : "false", (unsigned long long)budget,
                (unsigned long long)s->peak_memory, s->spilled ? "true" : "false",
                (unsigned long long)s->runs_written, (unsigned long long)s->merge_passes,
                (unsigned long long)s->max_depth, (unsigned long long)s->bytes_spilled,
                (unsigned long long)s->bytes_read_back, (unsigned long long)s->bytes_spilled_raw);
        cli_json_string(stderr, tmpdir);
        fprintf(stderr, ",\"by_reference\":%s,\"bytes_reread\":%llu", xr ? "true" : "false",
                (unsigned long long)(xr ? dd_extref_reread(xr) : 0));
        fprintf(stderr, ",\"bytes_in\":%llu,\"seconds\":%.3f}\n", (unsigned long long)bytes_in,
                secs);
        return;
    }
    char hb[32], hm[32], hl[32], hs[32], hr[32], hw[32];
    fprintf(stderr, "dedup: %llu records in (%s), %llu out, %llu duplicates (%.2f%%)\n",
            (unsigned long long)s->records_in, cli_human_size(bytes_in, hb, sizeof hb),
            (unsigned long long)s->records_out, (unsigned long long)dups, rate * 100);
    /* Partitions in memory files count against the budget but are not the
     * engine's own memory: said, with their size on the next line. */
    bool mem_files = s->spilled && strcmp(tmpdir, "memory files") == 0;
    fprintf(stderr,
            "dedup: %llu distinct keys, mode exact%s, memory %s%s of %s allowed, %.2f s "
            "(%.1fM records/s)\n",
            (unsigned long long)s->distinct, o->sorted ? " (sorted)" : "",
            cli_human_size(s->peak_memory, hm, sizeof hm),
            mem_files ? " (+ the memory files below)" : "", cli_human_size(budget, hl, sizeof hl),
            secs, secs > 0 ? (double)s->records_in / secs / 1e6 : 0.0);
    if (s->spilled)
        fprintf(stderr,
                "dedup: spilled to %s: %llu runs written, %llu merge passes, %s written, %s "
                "read back (LZ4: %s before compression)\n",
                tmpdir, (unsigned long long)s->runs_written, (unsigned long long)s->merge_passes,
                cli_human_size(s->bytes_spilled, hs, sizeof hs),
                cli_human_size(s->bytes_read_back, hr, sizeof hr),
                cli_human_size(s->bytes_spilled_raw, hw, sizeof hw));
    else
        fprintf(stderr, "dedup: everything fit in memory (nothing spilled)\n");
    if (xr) {
        char hx[32];
        fprintf(stderr,
                "dedup: records went by reference (digest, offset; frames not compressed): "
                "%s of the input read again for the output\n",
                cli_human_size(dd_extref_reread(xr), hx, sizeof hx));
    }
}

/* ---- the engine bound to a writer ------------------------------------------ */

typedef struct dd_spill {
    ext_run r;
    dedup_extsort *es;
    uint64_t budget;
    const char *tmpdir;
} dd_spill;

/* Once it spills, the engine compresses and writes its temporary files on
 * a thread of its own (the reading thread leaves a core mostly idle), then
 * deduplicates its partitions two at a time and decodes ahead in its final
 * merge: on 2 cores at 64 MiB, 17-20% faster for the first, about 15% more
 * for the second, 8% for the third (bench/results/extsort.md).  Below
 * 32 MiB the batches are small and the hand-offs eat the gain (4 MiB: 3-15%
 * slower). */
static bool two_threads(uint64_t budget)
{
    return sysconf(_SC_NPROCESSORS_ONLN) > 1 && budget >= (UINT64_C(32) << 20);
}

unsigned dd_external_threads(uint64_t budget) { return two_threads(budget) ? 2 : 1; }

/* Partitions first.  In first-occurrence order the engine's table takes at
 * most this much of any budget: past it, records go to partitions, each
 * decided in cache and two at a time, which beats one large table (a DRAM
 * miss per key, and a table that fills only to freeze and spill anyway)
 * on every input larger than the table (bench/RESULTS.md, issue 37).  The
 * rest of the budget holds the partitions in memory (engine_tmp_decide()),
 * so a larger budget does the same work with less IO, never more: budgets
 * are monotone.  Sorted order keeps the whole budget for its runs. */
#define PARTITION_FIRST (UINT64_C(64) << 20)

/* Returns the engine's memory_limit for a run of options 'o' under
 * 'budget': the budget, or the partition-first mark below it. */
static uint64_t engine_limit(const dd_external_opts *o, uint64_t budget)
{
    /* DEDUP_PARTITION_FIRST=SIZE moves the mark (docs/dedup.1, ENVIRONMENT):
     * to measure it, and for tests to reach partitions in memory with
     * small inputs. */
    uint64_t cap = PARTITION_FIRST, v;
    const char *env = getenv("DEDUP_PARTITION_FIRST");
    if (env && *env && cli_parse_size(env, &v) && v >= DEDUP_EXTSORT_MIN_MEMORY)
        cap = v;
    return !o->sorted && budget > cap ? cap : budget;
}

/* Returns a bound on the temporary data a run writes, from its input's
 * size 'total' and the records per byte of its first block 'blk' (records
 * carried, or references when 'by_ref'): by reference about 21 bytes
 * a record were measured (key digest, offset, sequence, results), counted
 * as 32; with the records, their bytes at most twice (the partitions and
 * the results, before LZ4) plus 8 bytes a record of framing. */
static uint64_t spill_bound(uint64_t total, const dd_block *blk, bool by_ref)
{
    uint64_t seen = blk->bytes_read ? blk->bytes_read : 1;
    uint64_t n = blk->piece ? 1 : blk->n;
    uint64_t records = n >= seen ? total : total / seen * n + (total % seen) * n / seen + 1;
    return by_ref ? records * 32 : total * 2 + records * 8;
}

/* Decides, before the first push of block 'blk', where engine 'es' keeps
 * its partitions, and returns true for memory: when the part of 'budget'
 * the table leaves holds all of the temporary data the input can make
 * (known only when every input is a regular file), else in --tmpdir. */
static bool engine_tmp_decide(dedup_extsort *es, const dd_external_opts *o, uint64_t budget,
                              const dd_block *blk, bool by_ref)
{
    uint64_t table = engine_limit(o, budget);
    bool in_mem = o->total_bytes && table < budget &&
                  spill_bound(o->total_bytes, blk, by_ref) <= budget - table;
    dedup_extsort_set_tmp_in_memory(es, in_mem);
    return in_mem;
}

const char *dd_external_tmpdir(const char *t)
{
    if (!t || !*t)
        t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

static dedup_status dd_spill_create(dd_spill **out, const dd_external_opts *o, uint64_t budget,
                                    dd_writer *w, dd_extref *xr)
{
    *out = NULL;
    dd_spill *s = calloc(1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->r.o = o;
    s->r.w = w;
    s->r.xr = xr;
    s->budget = budget;
    s->tmpdir = dd_external_tmpdir(o->tmpdir);
    dedup_extsort_params p;
    dedup_extsort_params_init(&p);
    p.memory_limit = engine_limit(o, budget);
    p.tmpdir = o->tmpdir;
    p.order = o->sorted ? DEDUP_EXTSORT_SORTED : DEDUP_EXTSORT_FIRST_OCCURRENCE;
    p.output = o->out == 1   ? DEDUP_EXTSORT_DUPLICATES
               : o->out == 2 ? DEDUP_EXTSORT_COUNT
               : o->out == 3 ? DEDUP_EXTSORT_UNIQUE
                             : DEDUP_EXTSORT_FIRST;
    p.seed = o->seed;
    p.emit = ext_emit;
    p.emit_ctx = &s->r;
    p.threads = two_threads(budget) ? 2 : 1;
    /* A record that is its own key and longer than budget/16 is kept by the
     * engine in a temporary file, not in its table, and written out from
     * there in pieces (the feeder hands such records over in pieces too). */
    if (dd_keyspec_identity(o->key))
        p.emit_piece = ext_emit_piece; /* by reference too: see dd_extref_piece() */
    p.raw_frames = xr != NULL; /* references are digests: LZ4 cannot shrink them */
    dedup_status st = dedup_extsort_create(&p, cli_allocator(), &s->es);
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return DEDUP_OK;
}

static dedup_status dd_spill_push(dd_spill *s, size_t n, const unsigned char *const *rec,
                                  const size_t *rlen, const unsigned char *const *key,
                                  const size_t *klen, const dedup_digest *dig)
{
    dedup_status st = DEDUP_OK;
    for (size_t off = 0; off < n && st == DEDUP_OK; off += EXT_BATCH) {
        size_t c = n - off < EXT_BATCH ? n - off : EXT_BATCH;
        st = dedup_extsort_push_batch(s->es, c, (const void *const *)(rec + off), rlen + off,
                                      (const void *const *)(key + off), klen + off, dig + off);
    }
    return st;
}

/* A block of records some of which may lack a key (--on-bad-key keep): the
 * runs with keys pushed, each record without one written at once, so that
 * while the engine holds every key in memory (and emits as it goes) it
 * stands where it was read, and later before whatever the engine emits at
 * the end.  DEDUP_ERR_CANCELLED when the writer failed (w says why). */
static dedup_status push_keeping(dd_spill *s, dd_writer *w, dd_key_header *kh,
                                 const dd_block *b, unsigned char term)
{
    if (dd_key_header_filter(kh, b, term, true, NULL) == b->n)
        return dd_spill_push(s, b->n, b->rec, b->rlen, b->key, b->klen, b->dig);
    dedup_status st = DEDUP_OK;
    for (size_t i = 0; i < b->n && st == DEDUP_OK;) {
        size_t j = i;
        while (j < b->n && b->key[j])
            j++;
        if (j > i)
            st = dd_spill_push(s, j - i, b->rec + i, b->rlen + i, b->key + i, b->klen + i,
                               b->dig + i);
        if (st == DEDUP_OK && j < b->n && !dd_writer_record(w, b->rec[j], b->rlen[j], term))
            st = DEDUP_ERR_CANCELLED;
        i = j + 1;
    }
    return st;
}

static dedup_status dd_spill_push_piece(dd_spill *s, const unsigned char *data, size_t len,
                                        unsigned flags)
{
    dedup_status st = DEDUP_OK;
    if (flags & DD_PIECE_FIRST)
        st = dedup_extsort_push_begin(s->es);
    if (st == DEDUP_OK)
        st = dedup_extsort_push_part(s->es, data, len);
    if (st == DEDUP_OK && (flags & DD_PIECE_LAST))
        st = dedup_extsort_push_end(s->es);
    return st;
}

static dedup_status dd_spill_finish(dd_spill *s) { return dedup_extsort_finish(s->es); }

static void dd_spill_stats(const dd_spill *s, dedup_extsort_stats *st)
{
    dedup_extsort_stats_get(s->es, st);
}

static const char *dd_spill_tmpdir(const dd_spill *s) { return s->tmpdir; }

void dd_engine_report(const dedup_extsort *es, const char *tmpdir, dedup_status st)
{
    if (st == DEDUP_ERR_IO && es) {
        int err = 0;
        const char *dir = tmpdir;
        uint64_t need = 0;
        dedup_extsort_io_error(es, &err, &dir, &need);
        char hn[32], hf[32];
        struct statvfs sv;
        if (err != ENOSPC && err != EDQUOT && err != EFBIG)
            cli_error("temporary files in %s: %s (after writing %s of temporary data): "
                      "choose another directory with --tmpdir",
                      dir, strerror(err), cli_human_size(need, hn, sizeof hn));
        else if (statvfs(dir, &sv) == 0)
            cli_error("temporary files in %s: %s (after writing %s of temporary data; %s "
                      "free there now): free space, or choose another directory with "
                      "--tmpdir, or give more memory with -m",
                      dir, strerror(err), cli_human_size(need, hn, sizeof hn),
                      cli_human_size((uint64_t)sv.f_bavail * sv.f_frsize, hf, sizeof hf));
        else
            cli_error("temporary files in %s: %s (after writing %s of temporary data): "
                      "choose another directory with --tmpdir",
                      dir, strerror(err), cli_human_size(need, hn, sizeof hn));
    } else {
        cli_error("%s", st == DEDUP_ERR_NOMEM ? "out of memory" : dedup_strerror(st));
    }
}

static void dd_spill_report(dd_spill *s, dedup_status st) { dd_engine_report(s->es, s->tmpdir, st); }

static void dd_spill_free(dd_spill *s)
{
    if (!s)
        return;
    dedup_extsort_free(s->es);
    free(s);
}

int dd_run_external(const dd_external_opts *o, char **files, int nfiles)
{
    uint64_t budget = o->memory ? o->memory : dd_external_default_memory(NULL);
    if (budget < DEDUP_EXTSORT_MIN_MEMORY) {
        cli_error("-m/--memory must be at least %lluK for exact deduplication",
                  (unsigned long long)(DEDUP_EXTSORT_MIN_MEMORY >> 10));
        return CLI_EXIT_USAGE;
    }
    dd_writer w;
    dd_outfile out;
    int orc = dd_outfile_open(&out, NULL, o->output);
    if (orc || dd_writer_init(&w, out.fd, out.name, WRITE_BUF) != 0) {
        if (!orc)
            cli_error("out of memory");
        dd_outfile_abort(&out);
        dd_outfile_free(&out);
        return orc ? orc : CLI_EXIT_FAIL;
    }
    w.line_buffered = o->line_buffered;

    /* Records by reference (extref.h) when every input is a regular file
     * and the records are long; never for sorted order. */
    const bool plain = !o->key->csv && !o->key->json && !o->key->url && !o->key->header &&
                       !o->key->fields;
    dd_extref *xr = o->sorted || !plain ? NULL : dd_extref_open(files, nfiles, o->term);
    /* By reference, two keys are one when their digests are (extref.h): a
     * seed of this run's own, unless --seed chose one, so that no input can
     * be made to collide on purpose.  The output does not depend on it. */
    dd_external_opts ro;
    if (xr && !o->seed_given) {
        ro = *o;
        ro.seed = cli_run_seed();
        o = &ro;
    }
    dd_spill *sp = NULL;
    dedup_status st = dd_spill_create(&sp, o, budget, &w, xr);
    if (st != DEDUP_OK) {
        cli_error("%s", st == DEDUP_ERR_INVALID_ARG && o->sorted && o->out == 1
                            ? "--sort cannot be combined with -D/--duplicates (those are in input order)"
                            : dedup_strerror(st));
        dd_writer_free(&w);
        dd_extref_close(xr);
        dd_outfile_abort(&out);
        dd_outfile_free(&out);
        return st == DEDUP_ERR_INVALID_ARG ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    const char *tmpdir = dd_spill_tmpdir(sp);
    cli_info(2, "exact mode under %llu bytes of memory, spilling to %s if needed",
             (unsigned long long)budget, tmpdir);

    double start = now_sec();
    dd_progress prog;
    dd_progress_init(&prog, o->progress, o->total_bytes);
    uint64_t bytes_in = 0, records_in = 0;
    int status = CLI_EXIT_OK;
    bool input_error = false, input_changed = false;
    /* --header, and records without a key (CSV, JSON, URLs): key_header.h */
    const bool key_errs = o->key->csv || o->key->json || o->key->url;
    dd_key_header kh = {.key = o->key};
    bool hdr_written = false;
    bool tmp_decided = false, tmp_in_mem = false;
    dd_keyed_block kb = {0};
    for (int fi = 0; fi < nfiles && st == DEDUP_OK && !dd_stop_signal; fi++) {
        dd_feeder *fd = NULL;
        /* Records longer than the feeder's buffer come in pieces and go to
         * the engine that way, never whole (when they are their own key). */
        dd_feeder_opts fo = {.term = o->term, .key = o->key, .hash = true, .seed = o->seed,
                             .pieces = dd_keyspec_identity(o->key)};
        if (o->key->header) {
            fo.header = dd_key_header_cb;
            fo.header_ctx = &kh;
        }
        kh.file = strcmp(files[fi], "-") == 0 ? "(standard input)" : files[fi];
        kh.lines = 0;
        int e = dd_feeder_open(&fd, files[fi], &fo);
        if (e) {
            cli_error("%s: %s", files[fi], strerror(e));
            status = CLI_EXIT_USAGE;
            input_error = true;
            break;
        }
        uint64_t before = bytes_in, got = 0;
        const dd_block *blk;
        while (st == DEDUP_OK && !dd_stop_signal && (blk = dd_feeder_next(fd)) != NULL) {
            if (kh.seen && !hdr_written) { /* the header, once, before any record */
                hdr_written = true;
                (void)dd_writer_record(&w, kh.hdr, kh.len, o->term);
            }
            if (key_errs && o->bad_key == 2) {
                /* --on-bad-key keep: each record without a key is written
                 * when it is read, between the pushes of its neighbours */
                st = push_keeping(sp, &w, &kh, blk, o->term);
                got = blk->bytes_read;
                records_in += blk->n;
                dd_progress_show(&prog, before + got, records_in, false, NULL);
                continue;
            }
            if (key_errs) {
                blk = dd_keyed_only(&kb, &kh, blk, o->term, o->bad_key == 1);
                if (!blk) {
                    status = CLI_EXIT_FAIL;
                    input_error = true;
                    if (kb.nomem)
                        cli_error("out of memory");
                    break;
                }
            }
            if (!tmp_decided) {
                tmp_decided = true;
                tmp_in_mem = engine_tmp_decide(sp->es, o, budget, blk, xr != NULL);
                if (tmp_in_mem)
                    cli_info(2, "partitions kept in memory (the input's fit the budget)");
            }
            if (blk->piece) {
                if (xr)
                    dd_extref_piece(xr, fi, blk);
                st = dd_spill_push_piece(sp, blk->rec[0], blk->rlen[0], blk->piece);
            }
            else if (!xr)
                st = dd_spill_push(sp, blk->n, blk->rec, blk->rlen, blk->key, blk->klen, blk->dig);
            else {
                const dd_extref_batch *b = dd_extref_block(xr, fi, blk);
                st = b ? dd_spill_push(sp, blk->n, b->rec, b->rlen, b->key, b->klen, b->dig)
                       : DEDUP_ERR_NOMEM;
                dd_extref_block_done(xr);
            }
            got = blk->bytes_read;
            records_in += blk->piece ? (blk->piece & DD_PIECE_LAST) != 0 : blk->n;
            dd_progress_show(&prog, before + got, records_in, false, NULL);
        }
        bytes_in = before + got;
        e = dd_feeder_error(fd);
        if (e == -1 && !input_error) { /* the header callback said why */
            status = CLI_EXIT_USAGE;
            input_error = true;
        } else if (e && !dd_stop_signal && !input_error) {
            cli_error("%s: read error: %s", dd_feeder_name(fd), strerror(e));
            status = CLI_EXIT_USAGE;
            input_error = true;
        }
        dd_feeder_close(fd);
        if (!input_error && xr && !dd_stop_signal && !dd_extref_check(xr, fi))
            input_error = input_changed = true;
        if (input_error)
            break;
    }
    if (kh.seen && !hdr_written && !input_error) /* an input of its header alone */
        (void)dd_writer_record(&w, kh.hdr, kh.len, o->term);
    if (kh.skipped)
        cli_warn("%llu record%s had no key (%s): %s", (unsigned long long)kh.skipped,
                 kh.skipped == 1 ? "" : "s", dd_key_bad_reason(o->key),
                 o->bad_key == 2 ? "written undecided" : "dropped");
    dd_key_header_free(&kh);
    dd_keyed_free(&kb);
    if (st == DEDUP_OK && !input_error && !dd_stop_signal) {
        /* What finish() emits comes from the final merge (or the table),
         * on this thread alone while the other core waits: the output's
         * write(2) calls, copying it into the page cache or a pipe, go to a
         * thread of their own then (the reading thread is gone). */
        if (two_threads(budget))
            (void)dd_writer_start_thread(&w);
        prog.last = 0; /* say now that the input is read */
        dd_progress_show(&prog, bytes_in, records_in, false, "input read; merging");
        st = dd_spill_finish(sp);
        if (st == DEDUP_OK && xr && !dd_extref_check(xr, -1))
            input_changed = true;
    }
    dd_progress_show(&prog, bytes_in, records_in, true, NULL);
    if (!w.broken_pipe && !w.error)
        dd_writer_flush(&w);

    if (w.error) {
        cli_error("write error on %s: %s", w.name, strerror(w.error));
        status = CLI_EXIT_FAIL;
    } else if (st == DEDUP_ERR_CANCELLED && w.broken_pipe) {
        /* the reader went away: a normal end */
    } else if (input_changed || (st == DEDUP_ERR_CANCELLED && xr && sp->es &&
                                 dedup_extsort_emit_result(sp->es) == 4)) {
        if (!input_changed) /* else dd_extref_check said it */
            dd_extref_report(xr);
        status = CLI_EXIT_FAIL;
    } else if (dd_stop_signal) {
        cli_info(1, "interrupted%s", out.tmp ? "; the output file was left as it was" : "");
        status = 128 + dd_stop_signal;
    } else if (st != DEDUP_OK) {
        dd_spill_report(sp, st);
        status = CLI_EXIT_FAIL;
    }
    /* After a stop signal the writing thread may still be inside write(2):
     * it ends before its descriptor is closed (and the number reused). */
    dd_writer_free(&w);
    /* Only a complete run replaces the output file. */
    if (status == CLI_EXIT_OK)
        status = dd_outfile_commit(&out);
    dd_outfile_abort(&out);
    dd_outfile_free(&out);
    if (o->stats) {
        dedup_extsort_stats s;
        dd_spill_stats(sp, &s);
        print_stats(o, &s, budget, bytes_in, tmp_in_mem ? "memory files" : tmpdir, now_sec() - start,
                    xr);
    }
    dd_spill_free(sp);
    dd_extref_close(xr);
    return status;
}
