/*
 * cmd_dedup.c - the main job: `dedup [OPTIONS] [FILE...]`.
 *
 * Reads records (lines, or NUL-terminated with -z) from the files or stdin
 * in large blocks, derives each record's key (field, normalisation), hashes
 * the key once, asks the method whether it was seen, and writes records
 * according to the output kind.  Records are handled in batches so that the
 * method can prefetch every batch member's slot before deciding them in
 * input order.  The options, --help and their checks are in dedup_opts.c.
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

#include "cli.h"
#include "dedup_opts.h"
#include "keep_last.h"
#include "preflight.h"
#include "progress.h"
#include "dedup/extsort.h"
#include "dedup/hash.h"
#include "dedup/hll.h"
#include "dedup/seen.h"
#include "dedup/timeparse.h"
#include "dedup/window.h"
#include "io.h"
#include "external.h"
#include "feeder.h"
#include "intkeys.h"
#include "keys.h"
#include "seen_spec.h"
#include "redis_cli.h"
#include "tier_spec.h"

#define BATCH 64
#define WRITE_BUF ((size_t)1 << 18)

volatile sig_atomic_t dd_stop_signal;

static void on_signal(int sig) { dd_stop_signal = sig; }

/* ---- progress ---------------------------------------------------------------- */

static double now_sec(void) { return dd_now(); }

/* ---- the run ------------------------------------------------------------------- */

typedef struct run {
    opts *o;
    dedup_seen *s;        /* the seen-set (dedup/seen.h) */
    dedup_seen_info info; /* what it is (kind, probabilistic), taken once */
    dd_writer w;
    dd_progress prog;
    uint64_t records_in, records_out, duplicates, bytes_in;
    bool identity_key;
    /* batch: records, keys and digests come from the feeder's block */
    const unsigned char *const *rec;
    const size_t *rlen;
    const unsigned char *const *key;
    const size_t *klen;
    const dedup_digest *dig;
    dedup_verdict *verdict;   /* verdict_buf, or a larger one for --redis */
    dedup_verdict verdict_buf[BATCH];
    size_t batch;             /* keys decided at once: BATCH, more for --redis */
    /* first records for --count/--unique: [u64 len][bytes] entries */
    unsigned char *firsts;
    size_t firsts_len, firsts_cap;
    bool failed; /* method error already reported */
    /* a fixed-size filter's capacity: keys answered NEW against it, the
     * warning said once, and the false drops estimated from its rate */
    uint64_t news;            /* NEW verdicts in this run */
    bool full_warned;
    uint64_t fd_news;         /* news at the last rate sample */
    uint64_t fd_records;      /* records_in then */
    double fd_rate;           /* the rate in force then */
    double false_drops;       /* estimated new records answered MAYBE_DUPLICATE */
    /* exact mode past its in-memory share (DEDUP_SEEN_EXACT_SPILL): the
     * library freezes the set and hands the other records to the external
     * engine, whose output comes through spill_emit() */
    bool can_spill;
    bool spilled;
    uint64_t spill_out;       /* records the engine had written (-u: its uniques only) */
    bool skip_giant;          /* -u: the giant being streamed occurs more than once */
    uint64_t budget;
    const char *budget_source;
    const char *tmpdir;       /* where the engine writes, for messages */
    /* windowed runs: the window behind the seen-set, for its stats */
    const dedup_window *win;
    dd_redis_run *redis;      /* --redis: uncertain records, commits, stats */
    dedup_time_format tfmt;   /* the format in use (detected once when AUTO) */
    bool tfmt_detected;
    int64_t wtime[BATCH];     /* event times of the records to decide */
    size_t widx[BATCH];       /* their indexes in the batch */
    dedup_digest wdig[BATCH];
    dedup_verdict wverdict[BATCH];
    unsigned char wskip[BATCH]; /* 0 decided, 1 bad time dropped, 2 bad time kept */
    const char *file_name;    /* for messages naming a record */
    uint64_t file_records;    /* records of the current file before this batch */
    uint64_t bad_times, late_out, late_dropped;
    dd_writer late_w;
    int late_fd;
    /* integer keys: the parsed keys of the batch, and for each record
     * 0 (decided), 1 (bad key, dropped) or 2 (bad key, written) */
    uint64_t ikey[BATCH];
    unsigned char ikmark[BATCH];
    uint64_t bad_keys;
    /* --stats of a probabilistic method: distinct keys from a HyperLogLog
     * sketch of every key's digest (the filter's own count misses the keys
     * it took for duplicates) */
    dedup_hll *hll;
} run;

static bool firsts_append(run *r, const unsigned char *rec, size_t len)
{
    size_t need = r->firsts_len + 8 + len;
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
    uint64_t l = len;
    memcpy(r->firsts + r->firsts_len, &l, 8);
    memcpy(r->firsts + r->firsts_len + 8, rec, len);
    r->firsts_len = need;
    return true;
}

/* ---- windows ------------------------------------------------------------------ */

static int64_t realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Field 'n' (1-based) of rec split by 'delim'; false if it has fewer fields. */
static bool field_of(const unsigned char *rec, size_t len, size_t n, unsigned char delim,
                     const unsigned char **f, size_t *flen)
{
    const unsigned char *p = rec, *end = rec + len;
    for (size_t i = 1; i < n; i++) {
        const unsigned char *d = memchr(p, delim, (size_t)(end - p));
        if (!d)
            return false;
        p = d + 1;
    }
    const unsigned char *d = memchr(p, delim, (size_t)(end - p));
    *f = p;
    *flen = (size_t)((d ? d : end) - p);
    return true;
}

/* A duration in the largest unit that states it exactly, as --lateness reads it. */
static const char *duration_str(uint64_t us, char *buf, size_t cap)
{
    if (us % 86400000000u == 0 && us)
        snprintf(buf, cap, "%llud", (unsigned long long)(us / 86400000000u));
    else if (us % 3600000000u == 0 && us)
        snprintf(buf, cap, "%lluh", (unsigned long long)(us / 3600000000u));
    else if (us % 60000000u == 0 && us)
        snprintf(buf, cap, "%llum", (unsigned long long)(us / 60000000u));
    else if (us % 1000000u == 0)
        snprintf(buf, cap, "%llus", (unsigned long long)(us / 1000000u));
    else if (us % 1000u == 0)
        snprintf(buf, cap, "%llums", (unsigned long long)(us / 1000u));
    else
        snprintf(buf, cap, "%lluus", (unsigned long long)us);
    return buf;
}

/* One window setting as the option that gives it: "--window 10s",
 * "--last 5", "--window-type tumbling". */
static const char *window_type_name(dedup_window_type t)
{
    return t == DEDUP_WINDOW_COUNT ? "count" : t == DEDUP_WINDOW_TUMBLING ? "tumbling" : "sliding";
}

/* Says, option by option, how a saved window's parameters 'have' differ
 * from the run's 'want': "--window 10s here, 1m saved; --lateness 0s here,
 * 5s saved". */
static void window_mismatch(const dedup_window_params *have, const dedup_window_params *want,
                            char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
#define ADD(...) do { if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__); } while (0)
#define SEP() ADD("%s", n ? "; " : "")
    char a[32], b[32];
    bool count_here = want->type == DEDUP_WINDOW_COUNT, count_saved = have->type == DEDUP_WINDOW_COUNT;
    if (count_here != count_saved) {
        SEP();
        ADD("%s here, %s saved", count_here ? "--last" : "--window", count_saved ? "--last" : "--window");
    } else if (have->type != want->type) {
        SEP();
        ADD("--window-type %s here, %s saved", window_type_name(want->type), window_type_name(have->type));
    }
    if (count_here == count_saved && have->duration != want->duration) {
        SEP();
        if (count_here)
            ADD("--last %llu here, %llu saved", (unsigned long long)want->duration,
                (unsigned long long)have->duration);
        else
            ADD("--window %s here, %s saved", duration_str(want->duration, a, sizeof a),
                duration_str(have->duration, b, sizeof b));
    }
    if (have->lateness != want->lateness) {
        SEP();
        ADD("--lateness %s here, %s saved", duration_str(want->lateness, a, sizeof a),
            duration_str(have->lateness, b, sizeof b));
    }
    if (have->mode != want->mode) {
        SEP();
        ADD("--mode %s here, %s saved", want->mode == DEDUP_WINDOW_APPROX ? "bloom" : "exact",
            have->mode == DEDUP_WINDOW_APPROX ? "bloom (approximate)" : "exact");
    } else if (want->mode == DEDUP_WINDOW_APPROX) {
        if (have->capacity != want->capacity) {
            SEP();
            ADD("-n %llu here, %llu saved", (unsigned long long)want->capacity,
                (unsigned long long)have->capacity);
        }
        if (have->fpr != want->fpr) {
            SEP();
            ADD("-p %g here, %g saved", want->fpr, have->fpr);
        }
    }
    if (have->seed != want->seed) {
        SEP();
        ADD("--seed 0x%llx here, 0x%llx saved", (unsigned long long)want->seed,
            (unsigned long long)have->seed);
    }
    if (!n)
        ADD("the saved parameters differ");
#undef SEP
#undef ADD
}

/* Names a record whose time field is bad: "FILE:LINE: bad time field N: 'VALUE'". */
static void report_bad_time(run *r, size_t i, const unsigned char *f, size_t flen, bool have,
                            bool fatal)
{
    char val[80];
    size_t k = 0;
    for (size_t j = 0; have && j < flen && k + 5 < sizeof val; j++) {
        unsigned char c = f[j];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            val[k++] = (char)c;
        else
            k += (size_t)snprintf(val + k, sizeof val - k, "\\x%02x", c);
    }
    val[k] = 0;
    if (have && flen > k)
        snprintf(val + (k > sizeof val - 4 ? sizeof val - 4 : k), 4, "...");
    unsigned long long line = (unsigned long long)(r->file_records + i + 1);
    char what[160];
    if (have)
        snprintf(what, sizeof what, "bad time in field %zu: '%s' (%s)", r->o->time_field, val,
                 r->tfmt_detected || r->o->time_format ? dedup_time_format_name(r->tfmt)
                                                       : "not a time");
    else
        snprintf(what, sizeof what, "no field %zu for the time", r->o->time_field);
    if (fatal)
        cli_error("%s:%llu: %s", r->file_name, line, what);
    else if (r->bad_times <= 10)
        cli_warn("%s:%llu: %s; record %s%s", r->file_name, line, what,
                 r->o->bad_time == BAD_TIME_KEEP ? "kept" : "dropped",
                 r->bad_times == 10 ? " (further bad times are counted, not shown)" : "");
}

/* Decides and writes one batch of a windowed run.  False to stop. */
static bool window_batch(run *r, size_t n)
{
    opts *o = r->o;
    size_t stop = n, m = 0;
    bool fail = false;
    int64_t now = o->time_field || o->last_n ? 0 : realtime_us();
    for (size_t i = 0; i < n; i++) {
        r->wskip[i] = 0;
        int64_t t = now;
        if (o->time_field) {
            const unsigned char *f = NULL;
            size_t flen = 0;
            bool have = field_of(r->rec[i], r->rlen[i], o->time_field, o->key.delim, &f, &flen);
            dedup_status ts = DEDUP_ERR_INVALID_ARG;
            if (have) {
                if (!r->tfmt_detected && !o->time_format) {
                    dedup_time_format d = dedup_time_detect((const char *)f, flen);
                    if (d != DEDUP_TIME_AUTO) {
                        r->tfmt = d;
                        r->tfmt_detected = true;
                        cli_info(2, "time format detected: %s", dedup_time_format_name(d));
                    }
                }
                if (r->tfmt_detected || o->time_format)
                    ts = dedup_time_parse((const char *)f, flen, r->tfmt, &t);
            }
            if (ts) {
                r->bad_times++;
                if (o->bad_time == BAD_TIME_FAIL) {
                    report_bad_time(r, i, f, flen, have, true);
                    stop = i;
                    fail = true;
                    break;
                }
                report_bad_time(r, i, f, flen, have, false);
                r->wskip[i] = o->bad_time == BAD_TIME_KEEP ? 2 : 1;
                continue;
            }
        }
        r->wtime[m] = t;
        r->widx[m] = i;
        r->wdig[m] = r->dig[i];
        m++;
    }
    size_t done = 0;
    dedup_batch wb = {.n = m, .digests = r->wdig, .times = r->wtime};
    dedup_status st = dedup_seen_decide(r->s, &wb, r->wverdict, &done);
    if (st) {
        cli_error("%s", dedup_strerror(st));
        r->failed = true;
        /* Records before the one that failed were decided: write them. */
        stop = done < m ? r->widx[done] : stop;
        m = done;
        fail = true;
    }
    size_t j = 0;
    for (size_t i = 0; i < stop; i++) {
        bool write = false, late_file = false;
        if (r->wskip[i]) {
            write = r->wskip[i] == 2;
        } else {
            dedup_verdict v = r->wverdict[j++];
            if (v == DEDUP_LATE) {
                if (o->late == LATE_KEEP)
                    write = true;
                else if (o->late == LATE_FILE)
                    late_file = true;
                else
                    r->late_dropped++;
            } else if (v == DEDUP_NEW) {
                write = o->out == OUT_FIRST;
            } else {
                r->duplicates++;
                write = o->out == OUT_DUPLICATES;
            }
        }
        r->records_in++;
        if (write) {
            r->records_out++;
            if (!dd_writer_record(&r->w, r->rec[i], r->rlen[i], o->term))
                return false;
        } else if (late_file) {
            r->late_out++;
            if (!dd_writer_record(&r->late_w, r->rec[i], r->rlen[i], o->term)) {
                cli_error("write error on %s: %s", r->late_w.name, strerror(r->late_w.error));
                r->failed = true;
                return false;
            }
        }
    }
    r->file_records += n;
    if (fail) {
        r->failed = true;
        return false;
    }
    return true;
}

static void print_window_stats(run *r, double seconds)
{
    opts *o = r->o;
    dedup_window_stats ws;
    dedup_window_get_stats(r->win, &ws);
    dedup_window_params wp;
    dedup_window_get_params(r->win, &wp);
    size_t mem = dedup_window_memory_usage(r->win);
    double rate = r->records_in ? (double)r->duplicates / (double)r->records_in : 0.0;
    const char *type = wp.type == DEDUP_WINDOW_COUNT      ? "last"
                       : wp.type == DEDUP_WINDOW_TUMBLING ? "tumbling"
                                                          : "sliding";
    const char *tsrc = o->last_n ? "records" : o->time_field ? "field" : "arrival";
    const char *tfmt = o->time_field ? dedup_time_format_name(r->tfmt) : "none";
    bool detected = o->time_field && !o->time_format && r->tfmt_detected;
    char d1[32], d2[32];
    if (o->stats == STATS_JSON) {
        fprintf(stderr,
                "{\"records_in\":%llu,\"records_out\":%llu,\"duplicates\":%llu,"
                "\"duplicate_rate\":%.6f,\"distinct\":%llu,\"mode\":\"%s\",\"window\":\"%s\",\"window_us\":%llu,"
                "\"lateness_us\":%llu,\"time\":\"%s\",\"time_format\":\"%s\","
                "\"time_format_detected\":%s,\"keys_live\":%llu,\"keys_peak\":%llu,"
                "\"keys_expired\":%llu,\"late\":%llu,\"late_max_behind_us\":%lld,"
                "\"late_written\":%llu,\"bad_times\":%llu,\"memory_bytes\":%zu,"
                "\"bytes_in\":%llu,\"seconds\":%.3f}\n",
                (unsigned long long)r->records_in, (unsigned long long)r->records_out,
                (unsigned long long)r->duplicates, rate, (unsigned long long)ws.kept,
                wp.mode == DEDUP_WINDOW_APPROX ? "bloom" : "exact", type,
                (unsigned long long)(o->last_n ? 0 : wp.duration),
                (unsigned long long)wp.lateness, tsrc, tfmt, detected ? "true" : "false",
                (unsigned long long)ws.live, (unsigned long long)ws.peak_live,
                (unsigned long long)ws.expired, (unsigned long long)ws.late,
                (long long)ws.late_max_behind, (unsigned long long)r->late_out,
                (unsigned long long)r->bad_times, mem, (unsigned long long)r->bytes_in, seconds);
        return;
    }
    char hb[32], hm[32];
    fprintf(stderr, "dedup: %llu records in (%s), %llu out, %llu duplicates (%.2f%%)\n",
            (unsigned long long)r->records_in, cli_human_size(r->bytes_in, hb, sizeof hb),
            (unsigned long long)r->records_out, (unsigned long long)r->duplicates, rate * 100);
    if (o->last_n)
        fprintf(stderr, "dedup: window: last %llu records, mode %s\n",
                (unsigned long long)o->last_n, wp.mode == DEDUP_WINDOW_APPROX ? "bloom" : "exact");
    else {
        char tdesc[96];
        if (o->time_field)
            snprintf(tdesc, sizeof tdesc, "event time from field %zu (%s%s)", o->time_field, tfmt,
                     detected ? ", detected" : "");
        else
            snprintf(tdesc, sizeof tdesc, "arrival time");
        fprintf(stderr, "dedup: window: %s %s, lateness %s, %s, mode %s\n", type,
                duration_str(wp.duration, d1, sizeof d1), duration_str(wp.lateness, d2, sizeof d2),
                tdesc, wp.mode == DEDUP_WINDOW_APPROX ? "bloom" : "exact");
    }
    fprintf(stderr, "dedup: keys live %llu, peak %llu, expired %llu, memory %s, %.2f s\n",
            (unsigned long long)ws.live, (unsigned long long)ws.peak_live,
            (unsigned long long)ws.expired, cli_human_size(mem, hm, sizeof hm), seconds);
    if (!o->last_n)
        fprintf(stderr, "dedup: %llu late records (%s), %llu bad time fields\n",
                (unsigned long long)ws.late,
                o->late == LATE_KEEP ? "written" : o->late == LATE_DROP ? "dropped" : o->late_file,
                (unsigned long long)r->bad_times);
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
                      (unsigned long long)(r->file_records + i + 1),
                      out ? "key outside --range" : "not an integer key", where, val,
                      " (--on-bad-key skip or keep lets the run go on)");
            *n = i;
            return false;
        }
        r->ikmark[i] = o->bad_key == DD_BAD_KEY_KEEP ? 2 : 1;
    }
    return true;
}

/* Samples the filter's rate now and then (it may scan the filter): the
 * new records since the last sample are taken to have met the mean of the
 * two rates, and each kept one stood for 1 / (1 - rate) new records, the
 * rest of which were wrongly dropped.  'final' samples whatever is left. */
static void sample_false_drops(run *r, bool final)
{
    if (!r->info.probabilistic || r->win)
        return;
    uint64_t since = r->news - r->fd_news, recs = r->records_in - r->fd_records;
    uint64_t every = r->news / 32 > 4096 ? r->news / 32 : 4096;
    uint64_t every_rec = r->records_in / 32 > 65536 ? r->records_in / 32 : 65536;
    if (!final && since < every && recs < every_rec)
        return;
    double now = dedup_seen_fpr_bound(r->s);
    double mean = (r->fd_rate + now) / 2;
    if (mean < 1)
        r->false_drops += (double)since * mean / (1 - mean);
    r->fd_news = r->news;
    r->fd_records = r->records_in;
    r->fd_rate = now;
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
static bool process_batch(run *r, size_t n)
{
    if (r->win)
        return window_batch(r, n);
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
        r->failed = true;
        return false;
    }
    if (!emit_decided(r, 0, n))
        return false;
    if (r->redis && !dd_redis_after_batch(r->redis, r->s, &b, r->verdict, r->rec, r->rlen, o_term(r), &r->w)) {
        r->failed = true;
        return false;
    }
    if (r->o->sizing.tiers && !dd_tiers_after_batch(r->o->sizing.tiers, r->s, &b, r->verdict, &r->w)) {
        r->failed = true;
        return false;
    }
    r->file_records += n;
    sample_false_drops(r, false);
    check_capacity(r);
    return true;
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
        uint64_t len;
        memcpy(&len, r->firsts + off, 8);
        const unsigned char *rec = r->firsts + off + 8;
        off += 8 + len;
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
        size_t klen;
        const unsigned char *key = r->identity_key ? rec : dd_key_of(&o->key, rec, len, scratch, &klen);
        if (r->identity_key)
            klen = len;
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

/* The estimated false drops, never more than the records dropped.  False
 * when none can be made: past a rate of one half, the few records still
 * answered NEW say too little about how many new ones were dropped. */
static bool false_drops_of(const run *r, uint64_t dropped, uint64_t *out)
{
    double f = r->false_drops + 0.5;
    *out = f >= (double)dropped ? dropped : (uint64_t)f;
    return r->fd_rate < 0.5;
}

static void print_stats(run *r, double seconds)
{
    opts *o = r->o;
    dedup_seen_info in;
    dedup_seen_get_info(r->s, &in);
    uint64_t distinct = in.distinct;
    size_t mem = in.memory;
    uint64_t in_recs = r->records_in, out = r->records_out, dups = r->duplicates;
    dedup_extsort_stats es;
    memset(&es, 0, sizeof es);
    const dedup_extsort *eng = dedup_seen_spill_engine(r->s);
    if (eng) {
        dedup_extsort_stats_get(eng, &es);
        in_recs += es.records_in;
        out += r->spill_out;
        dups += es.records_in - es.distinct;
        distinct += es.distinct;
        mem += es.peak_memory;
    }
    double rate = in_recs ? (double)dups / (double)in_recs : 0.0;
    double hll_se = 0;
    if (r->hll) {
        double e = dedup_hll_estimate(r->hll);
        distinct = (uint64_t)(e + 0.5);
        hll_se = e * dedup_hll_std_error(r->hll);
        in.distinct_known = true;
    }
    if (o->stats == STATS_JSON) {
        fprintf(stderr,
                "{\"records_in\":%llu,\"records_out\":%llu,\"duplicates\":%llu,"
                "\"duplicate_rate\":%.6f,\"distinct\":",
                (unsigned long long)in_recs, (unsigned long long)out, (unsigned long long)dups, rate);
        if (in.distinct_known)
            fprintf(stderr, "%llu", (unsigned long long)distinct);
        else
            fputs("null", stderr); /* a saturated filter: no estimate */
        fputs(",\"mode\":", stderr);
        cli_json_string(stderr, o->mode);
        fprintf(stderr, ",\"memory_bytes\":%zu,\"bytes_in\":%llu,\"seconds\":%.3f", mem,
                (unsigned long long)r->bytes_in, seconds);
        if (r->can_spill)
            fprintf(stderr,
                    ",\"memory_limit\":%llu,\"spilled\":%s,\"runs\":%llu,\"merge_passes\":%llu,"
                    "\"bytes_spilled\":%llu,\"bytes_read_back\":%llu",
                    (unsigned long long)r->budget, eng && es.spilled ? "true" : "false",
                    (unsigned long long)es.runs_written, (unsigned long long)es.merge_passes,
                    (unsigned long long)es.bytes_spilled, (unsigned long long)es.bytes_read_back);
        if (in.probabilistic) {
            uint64_t fdrops;
            bool known = false_drops_of(r, dups, &fdrops);
            fprintf(stderr, ",\"fpr\":%.6g,\"distinct_is_estimate\":true", in.fpr_bound);
            /* "duplicates" above counts every record dropped; these split it
             * (null: no estimate can be made) */
            fprintf(stderr, ",\"dropped\":%llu", (unsigned long long)dups);
            if (known)
                fprintf(stderr, ",\"repeats_estimated\":%llu,\"false_drops_estimated\":%llu",
                        (unsigned long long)(dups - fdrops), (unsigned long long)fdrops);
            else
                fputs(",\"repeats_estimated\":null,\"false_drops_estimated\":null", stderr);
            if (in.capacity)
                fprintf(stderr, ",\"capacity\":%llu,\"items\":%llu,\"over_capacity\":%s",
                        (unsigned long long)in.capacity, (unsigned long long)in.items,
                        in.items > in.capacity ? "true" : "false");
        }
        dd_redis_print_stats(r->redis, stderr, true);
        if (r->hll)
            fprintf(stderr, ",\"distinct_std_error\":%.0f,\"distinct_from\":\"hyperloglog\"",
                    hll_se);
        fputs("}\n", stderr);
        return;
    }
    char hb[32], hm[32], hl[32];
    if (in.probabilistic) {
        uint64_t fdrops;
        if (false_drops_of(r, dups, &fdrops))
            fprintf(stderr,
                    "dedup: %llu records in (%s), %llu out, %llu dropped (%.2f%%): about %llu "
                    "repeats and about %llu new records the filter took for repeats (estimated)\n",
                    (unsigned long long)in_recs, cli_human_size(r->bytes_in, hb, sizeof hb),
                    (unsigned long long)out, (unsigned long long)dups, rate * 100,
                    (unsigned long long)(dups - fdrops), (unsigned long long)fdrops);
        else
            fprintf(stderr,
                    "dedup: %llu records in (%s), %llu out, %llu dropped (%.2f%%): how many of "
                    "them were new records the filter took for repeats cannot be estimated "
                    "(its rate passed 50%%)\n",
                    (unsigned long long)in_recs, cli_human_size(r->bytes_in, hb, sizeof hb),
                    (unsigned long long)out, (unsigned long long)dups, rate * 100);
        if (in.capacity)
            fprintf(stderr, "dedup: the filter holds %s%llu keys of the %llu it was sized for%s\n",
                    in.distinct_exact ? "" : "about ", (unsigned long long)in.items,
                    (unsigned long long)in.capacity,
                    in.items > in.capacity ? ": over capacity, so its rate is above -p" : "");
    } else
        fprintf(stderr, "dedup: %llu records in (%s), %llu out, %llu duplicates (%.2f%%)\n",
                (unsigned long long)in_recs, cli_human_size(r->bytes_in, hb, sizeof hb),
                (unsigned long long)out, (unsigned long long)dups, rate * 100);
    if (r->hll)
        fprintf(stderr, "dedup: about %llu distinct keys (HyperLogLog estimate, \xc2\xb1 %.0f)",
                (unsigned long long)distinct, hll_se);
    else if (in.distinct_known)
        fprintf(stderr, "dedup: %s%llu distinct keys", in.probabilistic ? "about " : "",
                (unsigned long long)distinct);
    else
        fputs("dedup: an unknown number of distinct keys (the filter is saturated)", stderr);
    fprintf(stderr, ", mode %s, memory %s", o->mode, cli_human_size(mem, hm, sizeof hm));
    if (r->can_spill)
        fprintf(stderr, " of %s allowed (%s)", cli_human_size(r->budget, hl, sizeof hl), r->budget_source);
    fprintf(stderr, ", %.2f s (%.1fM records/s)\n", seconds, seconds > 0 ? (double)in_recs / seconds / 1e6 : 0.0);
    if (eng) {
        char hs[32], hr[32];
        fprintf(stderr,
                "dedup: %llu distinct keys kept in memory, the rest through %s: %llu runs written, "
                "%llu merge passes, %s written, %s read back\n",
                (unsigned long long)in.distinct, r->tmpdir,
                (unsigned long long)es.runs_written, (unsigned long long)es.merge_passes,
                cli_human_size(es.bytes_spilled, hs, sizeof hs),
                cli_human_size(es.bytes_read_back, hr, sizeof hr));
    }
    if (in.probabilistic)
        fprintf(stderr, "dedup: estimated false-positive rate at the final fill: %.4g%%\n",
                in.fpr_bound * 100);
    dd_redis_print_stats(r->redis, stderr, false);
}

int cmd_dedup(int argc, char **argv)
{
    opts o;
    int pr = dd_dedup_parse_args(argc, argv, &o);
    if (pr != 0)
        return pr > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;

    /* Inputs: all checked before any output is written. */
    int nfiles = argc - optind;
    char *stdin_only[] = {"-"};
    char **files = nfiles > 0 ? argv + optind : stdin_only;
    if (nfiles == 0)
        nfiles = 1;
    uint64_t total_bytes = 0;
    bool size_known = true;
    for (int i = 0; i < nfiles; i++) {
        if (strcmp(files[i], "-") == 0) {
            size_known = false;
            continue;
        }
        /* stat first: opening a FIFO here and closing it again would cut
         * off its writer before the real read. */
        struct stat st;
        if (stat(files[i], &st) != 0) {
            cli_error("%s: %s", files[i], strerror(errno));
            return CLI_EXIT_USAGE;
        }
        if (S_ISDIR(st.st_mode)) {
            cli_error("%s: %s", files[i], strerror(EISDIR));
            return CLI_EXIT_USAGE;
        }
        if (S_ISREG(st.st_mode)) {
            int fd = open(files[i], O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                cli_error("%s: %s", files[i], strerror(errno));
                return CLI_EXIT_USAGE;
            }
            close(fd);
            total_bytes += (uint64_t)st.st_size;
        } else {
            if (access(files[i], R_OK) != 0) {
                cli_error("%s: %s", files[i], strerror(errno));
                return CLI_EXIT_USAGE;
            }
            size_known = false;
        }
    }

    dd_external_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.memory = o.sizing.memory;
    eo.tmpdir = o.tmpdir;
    eo.sorted = o.sorted;
    eo.out = o.out == OUT_DUPLICATES ? 1 : o.out == OUT_COUNT ? 2 : o.out == OUT_UNIQUE ? 3 : 0;
    eo.term = o.term;
    eo.key = &o.key;
    eo.seed = o.sizing.seed;
    eo.stats = o.stats == STATS_JSON ? 2 : o.stats == STATS_TEXT ? 1 : 0;
    eo.line_buffered = o.line_buffered;
    eo.progress = o.progress == 1 || (o.progress == -1 && isatty(STDERR_FILENO) && cli_verbosity > 0);
    eo.total_bytes = size_known ? total_bytes : 0;
    eo.output = o.output;
    if (o.state && !dd_state_writable(o.state))
        return CLI_EXIT_USAGE;
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
        return dd_run_keep_last(&ko, files, nfiles);
    }
    if (o.external) {
        /* Exact mode under a memory budget.  SIGINT/SIGTERM keep their
         * default action here: the engine's finishing phase can run for
         * minutes without reading or writing, and its temporary files have
         * no name, so ending the process at once leaves nothing behind. */
        return dd_run_external(&eo, files, nfiles);
    }

    /* The seen-set: from the state file if there is one, else new. */
    run *r = calloc(1, sizeof *r);
    if (!r) {
        cli_error("out of memory");
        return CLI_EXIT_FAIL;
    }
    char err[512] = "";
    dedup_seen *s = NULL;
    dedup_status st;
    bool windowed = o.window_us || o.last_n;
    uint64_t spill_budget = 0;
    const char *budget_source = NULL;
    o.sizing.windowed = windowed;
    if (windowed) {
        o.sizing.window_type = o.last_n ? DEDUP_WINDOW_COUNT
                                        : o.tumbling ? DEDUP_WINDOW_TUMBLING : DEDUP_WINDOW_SLIDING;
        o.sizing.duration = o.last_n ? o.last_n : o.window_us;
        o.sizing.lateness = o.last_n ? 0 : o.lateness_us;
    }
    if (o.state && access(o.state, F_OK) == 0) {
        st = dd_seen_load(&o.sizing, o.state, &s, err, sizeof err);
        if (st) {
            cli_error("%s: %s", o.state, err[0] ? err : strerror(errno));
            free(r);
            return CLI_EXIT_USAGE;
        }
        if (windowed) {
            dedup_seen_spec want;
            dd_seen_spec(&o.sizing, &want);
            dedup_window_params have;
            dedup_window_get_params(dedup_seen_impl(s), &have);
            bool approx = want.approximate;
            if (have.type != (dedup_window_type)want.window_type ||
                have.mode != (approx ? DEDUP_WINDOW_APPROX : DEDUP_WINDOW_EXACT) ||
                have.duration != want.duration || have.lateness != want.lateness ||
                have.seed != want.seed ||
                (approx && (have.capacity != want.items || have.fpr != want.fpr))) {
                dedup_window_params wp = have;
                wp.type = (dedup_window_type)want.window_type;
                wp.mode = approx ? DEDUP_WINDOW_APPROX : DEDUP_WINDOW_EXACT;
                wp.duration = want.duration;
                wp.lateness = want.lateness;
                wp.seed = want.seed;
                wp.capacity = want.items;
                wp.fpr = want.fpr;
                char diff[512];
                window_mismatch(&have, &wp, diff, sizeof diff);
                cli_error("%s: the saved window was made with other options: %s; give the "
                          "saved ones to resume it", o.state, diff);
                dedup_seen_free(s);
                free(r);
                return CLI_EXIT_USAGE;
            }
            cli_info(2, "%s: loaded window state", o.state);
        } else {
            cli_info(2, "%s: loaded %s state", o.state, o.mode);
            dedup_seen_info li;
            dedup_seen_get_info(s, &li);
            if (li.probabilistic && li.capacity && o.sizing.items && o.sizing.items != li.capacity)
                cli_warn("%s: the state was made for %llu keys; -n %llu does not resize it (a "
                         "filter's size is fixed when it is made): it goes on at %llu, and "
                         "--on-full %s applies past them",
                         o.state, (unsigned long long)li.capacity,
                         (unsigned long long)o.sizing.items, (unsigned long long)li.capacity,
                         o.sizing.on_full == DEDUP_ON_FULL_FAIL   ? "fail"
                         : o.sizing.on_full == DEDUP_ON_FULL_GROW ? "grow"
                                                                  : "warn");
            st = li.probabilistic && li.capacity ? dedup_seen_set_on_full(s, o.sizing.on_full)
                                                 : DEDUP_OK;
            if (st == DEDUP_ERR_UNSUPPORTED) {
                cli_error("%s: --on-full grow cannot grow a filter made by an earlier run (a "
                          "growing chain starts with its first key): give --on-full warn or fail, "
                          "or start a new state with --mode scalable", o.state);
                dedup_seen_free(s);
                free(r);
                return CLI_EXIT_USAGE;
            }
        }
    } else {
        /* Exact mode without -m: keys stay in memory up to half the default
         * budget, then the run goes on with the external engine. */
        if (!windowed && !o.state && o.kind == DEDUP_SEEN_EXACT && !o.sizing.tiers && !o.redis.url) {
            const char *env = getenv("DEDUP_MEMORY");
            uint64_t v;
            if (env && *env && !(cli_parse_size(env, &v) && v > 0))
                cli_warn("DEDUP_MEMORY='%s' is not a size (e.g. 8G); using the default budget", env);
            spill_budget = dd_external_default_memory(&budget_source);
            o.sizing.spill_budget = spill_budget;
            o.sizing.tmpdir = o.tmpdir;
            o.sizing.threads = dd_external_threads(spill_budget - spill_budget / 2);
            o.sizing.emit = spill_emit;
            if (dd_keyspec_identity(&o.key))
                o.sizing.emit_piece = spill_emit_piece;
            o.sizing.emit_ctx = r;
        }
        if (o.redis.url) {
            int rc = dd_redis_create(&o.redis, o.sizing.items, o.sizing.fpr, o.sizing.seed,
                                     &r->redis, &s);
            if (rc) {
                free(r);
                return rc;
            }
        } else {
            st = dd_seen_create(&o.sizing, &s, err, sizeof err);
            if (st) {
                cli_error("%s", err);
                free(r);
                return CLI_EXIT_USAGE;
            }
        }
    }

    int out_fd = STDOUT_FILENO;
    const char *out_name = "(standard output)";
    bool out_removable = false; /* a regular file: removed if the run fails */
    if (o.output && strcmp(o.output, "-") != 0) {
        out_fd = open(o.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (out_fd < 0) {
            cli_error("%s: %s", o.output, strerror(errno));
            dedup_seen_free(s);
            free(r);
            return CLI_EXIT_USAGE;
        }
        out_name = o.output;
        out_removable = cli_fd_regular(out_fd);
    }

    if (dd_writer_init(&r->w, out_fd, out_name, WRITE_BUF) != 0) {
        cli_error("out of memory");
        free(r);
        dedup_seen_free(s);
        return CLI_EXIT_FAIL;
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
            free(r);
            dedup_seen_free(s);
            return CLI_EXIT_FAIL;
        }
    }
    dedup_seen_get_info(s, &r->info);
    r->win = r->info.kind == DEDUP_SEEN_WINDOW ? dedup_seen_impl(s)
                                               : dd_tiers_window(o.sizing.tiers);
    r->fd_rate = r->info.probabilistic ? r->info.fpr_bound : 0;
    r->can_spill = spill_budget != 0;
    r->budget = spill_budget;
    r->budget_source = budget_source;
    r->tmpdir = dd_external_tmpdir(o.tmpdir);
    r->tfmt = o.time_format;
    r->late_fd = -1;
    if (o.late == LATE_FILE) {
        r->late_fd = open(o.late_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (r->late_fd < 0 || dd_writer_init(&r->late_w, r->late_fd, o.late_file, WRITE_BUF) != 0) {
            cli_error("%s: %s", o.late_file, r->late_fd < 0 ? strerror(errno) : "out of memory");
            if (r->late_fd >= 0)
                close(r->late_fd);
            dd_writer_free(&r->w);
            free(r);
            dedup_seen_free(s);
            return CLI_EXIT_USAGE;
        }
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
    dd_progress_init(&r->prog,
                     o.progress == 1 || (o.progress == -1 && isatty(STDERR_FILENO) && cli_verbosity > 0),
                     size_known ? total_bytes : 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int status = CLI_EXIT_OK;
    bool stopped = false; /* broken pipe, error or signal: no state save */
    for (int fi = 0; fi < nfiles && !stopped; fi++) {
        dd_feeder *fd = NULL;
        dd_feeder_opts fo = {.term = o.term, .key = &o.key, .hash = !o.int_keys,
                             .seed = r->info.seed};
        int e = dd_feeder_open(&fd, files[fi], &fo);
        if (e) {
            cli_error("%s: %s", files[fi], strerror(e));
            status = CLI_EXIT_USAGE;
            stopped = true;
            break;
        }
        uint64_t before = r->bytes_in;
        r->file_name = strcmp(files[fi], "-") == 0 ? "(standard input)" : files[fi];
        r->file_records = 0;
        const dd_block *b;
        while (!stopped && (b = dd_feeder_next(fd)) != NULL) {
            for (size_t off = 0; off < b->n; off += r->batch) {
                size_t n = b->n - off < r->batch ? b->n - off : r->batch;
                r->rec = b->rec + off;
                r->rlen = b->rlen + off;
                r->key = b->key + off;
                r->klen = b->klen + off;
                r->dig = b->dig + off;
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
        if (e && !stopped) {
            cli_error("%s: read error: %s", dd_feeder_name(fd), strerror(e));
            status = CLI_EXIT_USAGE;
            stopped = true;
        }
        dd_feeder_close(fd);
    }
    if (!stopped && (o.out == OUT_COUNT || o.out == OUT_UNIQUE))
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
            cli_error("write error on %s: %s", o.late_file, strerror(r->late_w.error));
            r->failed = true;
        }
        if (close(r->late_fd) != 0 && !r->failed) {
            cli_error("write error on %s: %s", o.late_file, strerror(errno));
            r->failed = true;
        }
        dd_writer_free(&r->late_w);
    }
    if (r->win) {
        dedup_window_stats ws;
        dedup_window_get_stats(r->win, &ws);
        if (ws.late) {
            char b1[32];
            cli_warn("%llu late record%s (event time up to %s behind the newest): %s; "
                     "--lateness %s would have covered them",
                     (unsigned long long)ws.late, ws.late == 1 ? "" : "s",
                     duration_str((uint64_t)ws.late_max_behind, b1, sizeof b1),
                     o.late == LATE_KEEP ? "written unchanged, not deduplicated"
                     : o.late == LATE_DROP ? "dropped" : "written to the --late file",
                     b1);
        }
    }
    dd_progress_show(&r->prog, r->bytes_in, r->records_in, true, NULL);
    if (r->bad_keys && o.bad_key != DD_BAD_KEY_FAIL)
        cli_warn("%llu record%s had a key that is not an integer%s: %s",
                 (unsigned long long)r->bad_keys, r->bad_keys == 1 ? "" : "s",
                 r->info.kind == DEDUP_SEEN_BITMAP ? " or is outside --range" : "",
                 o.bad_key == DD_BAD_KEY_SKIP ? "dropped" : "written undecided");

    if (r->w.error) {
        cli_error("write error on %s: %s", r->w.name, strerror(r->w.error));
        status = CLI_EXIT_FAIL;
    } else if (r->failed) {
        status = CLI_EXIT_FAIL;
    } else if (dd_stop_signal) {
        cli_info(1, "interrupted; %s", o.state ? "the state file was left as it was" : "output is incomplete");
        status = 128 + dd_stop_signal;
    }
    if (out_fd != STDOUT_FILENO && close(out_fd) != 0 && status == CLI_EXIT_OK) {
        cli_error("write error on %s: %s", out_name, strerror(errno));
        status = CLI_EXIT_FAIL;
    }
    /* A run that failed (a write error, a full filter, a spill that failed)
     * has written only part of its output, and a file must not look
     * complete: removed in every mode, not only after a spill -- except
     * when a shared or persistent seen-set (--redis, --store, --tier) has
     * already recorded the keys of the records written: removing them
     * would lose those records for good, since a rerun takes them for
     * repeats.  The error message says the output is incomplete. */
    bool recorded_outside = dd_redis_used(&o.redis) || o.sizing.tiers;
    if (out_removable && status == CLI_EXIT_FAIL && !recorded_outside)
        unlink(o.output);
    else if (out_removable && status == CLI_EXIT_FAIL)
        cli_warn("%s: kept as written: it holds every record decided before the failure (their "
                 "keys are recorded in the shared seen-set), but not the rest of the input",
                 o.output);
    /* The reader of the output went away before the input ended: which of
     * the records written it took cannot be known, so a state saved now
     * could hold keys never delivered.  Say so rather than end quietly. */
    if (o.state && r->w.broken_pipe && status == CLI_EXIT_OK) {
        cli_error("%s: not saved: the output was closed (broken pipe) before the input ended, "
                  "so the records delivered are not known; the state is as it was before the run",
                  o.state);
        status = CLI_EXIT_FAIL;
    }
    /* Save the seen-set only after a complete run. */
    if (o.state && !stopped && status == CLI_EXIT_OK && !r->w.broken_pipe) {
        st = dedup_seen_save_file(s, o.state);
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
            print_window_stats(r, now_sec() - r->prog.start);
        else {
            sample_false_drops(r, true);
            print_stats(r, now_sec() - r->prog.start);
        }
        if (o.sizing.tiers)
            dd_tiers_print_stats(o.sizing.tiers, stderr, o.stats == STATS_JSON);
    }

    if (!dd_redis_close(r->redis) && status == CLI_EXIT_OK)
        status = CLI_EXIT_FAIL;
    dd_writer_free(&r->w);
    dedup_hll_free(r->hll);
    free(r->firsts);
    if (r->verdict != r->verdict_buf)
        free(r->verdict);
    free(r);
    dedup_seen_free(s);
    dd_tiers_free(o.sizing.tiers);
    return status;
}
