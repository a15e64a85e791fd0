/*
 * dedup_window.c - the main job's windowed runs (--window, --last): each
 * batch's event times read and decided against the window, the late and
 * bad-time policies, the check that a saved window matches the options,
 * and the window's --stats.  See dedup_run.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "dedup_run.h"
#include "tier_spec.h"

static int64_t realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The time field of record i through the compiled time key (a CSV field,
 * a named column, a JSON path: a JSON string's quotes are not part of the
 * time); false when the record has none. */
static bool time_of(run *r, size_t i, const unsigned char **f, size_t *flen)
{
    const unsigned char *k = NULL;
    size_t kl = 0;
    if (dedup_key_of(r->o->time_key, r->rec[i], r->rlen[i], r->tbuf, sizeof r->tbuf, &k, &kl) != DEDUP_OK)
        return false;
    if (r->o->key.json) { /* one path: its length, then its canonical text */
        if (kl < 4)
            return false;
        k += 4;
        kl -= 4;
        if (kl >= 2 && k[0] == '"' && k[kl - 1] == '"') {
            k++;
            kl -= 2;
        }
    }
    *f = k;
    *flen = kl;
    return true;
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
    if (have->refresh != want->refresh) {
        SEP();
        ADD("%s", want->refresh ? "--refresh-on-dup here, not saved" : "--refresh-on-dup saved, not here");
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
        snprintf(what, sizeof what, "bad time in field %s: '%s' (%s)", r->o->time_spec, val,
                 r->tfmt_detected || r->o->time_format ? dedup_time_format_name(r->tfmt)
                                                       : "not a time");
    else
        snprintf(what, sizeof what, "no field %s for the time", r->o->time_spec);
    if (fatal)
        cli_error("%s:%llu: %s", r->file_name, line, what);
    else if (r->bad_times <= 10)
        cli_warn("%s:%llu: %s; record %s%s", r->file_name, line, what,
                 r->o->bad_time == BAD_TIME_KEEP ? "kept" : "dropped",
                 r->bad_times == 10 ? " (further bad times are counted, not shown)" : "");
}

void dd_window_free(run *r)
{
    free(r->wtime);
    free(r->widx);
    free(r->wdig);
    free(r->wverdict);
    free(r->wskip);
    free(r->wrec);
    free(r->wrlen);
    r->wtime = NULL;
    r->widx = NULL;
    r->wdig = NULL;
    r->wverdict = NULL;
    r->wskip = NULL;
    r->wrec = NULL;
    r->wrlen = NULL;
    r->wcap = 0;
}

/* Room for a batch of 'n' records in the windowed batch's arrays: as many
 * as the run decides at once (BATCH, or DD_REDIS_BATCH over tiers). */
static bool window_room(run *r, size_t n)
{
    if (n <= r->wcap)
        return true;
    dd_window_free(r);
    r->wtime = malloc(n * sizeof *r->wtime);
    r->widx = malloc(n * sizeof *r->widx);
    r->wdig = malloc(n * sizeof *r->wdig);
    r->wverdict = malloc(n * sizeof *r->wverdict);
    r->wskip = malloc(n);
    r->wrec = malloc(n * sizeof *r->wrec);
    r->wrlen = malloc(n * sizeof *r->wrlen);
    if (!r->wtime || !r->widx || !r->wdig || !r->wverdict || !r->wskip || !r->wrec || !r->wrlen) {
        dd_window_free(r);
        return false;
    }
    r->wcap = n;
    return true;
}

/* Decides and writes one batch of a windowed run.  False to stop.  Over
 * tiers the records decided are written first, then the tiers' commit and
 * uncertain keys are handled (dd_tiers_after_batch), as for a batch
 * without a window. */
bool dd_window_batch(run *r, size_t n)
{
    opts *o = r->o;
    if (!window_room(r, n)) {
        cli_error("out of memory");
        r->failed = true;
        return false;
    }
    size_t stop = n, m = 0;
    bool fail = false;
    int64_t now = o->time_field || o->last_n ? 0 : realtime_us();
    for (size_t i = 0; i < n; i++) {
        r->wskip[i] = 0;
        int64_t t = now;
        if (o->time_field) {
            const unsigned char *f = NULL;
            size_t flen = 0;
            bool have = r->o->time_key ? time_of(r, i, &f, &flen)
                                : field_of(r->rec[i], r->rlen[i], o->time_field, o->key.delim, &f, &flen);
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
        r->wrec[m] = r->rec[i];
        r->wrlen[m] = r->rlen[i];
        m++;
    }
    size_t done = 0;
    dedup_batch wb = {.n = m, .digests = r->wdig, .times = r->wtime};
    dedup_status st = dedup_seen_decide(r->s, &wb, r->wverdict, &done);
    if (st) {
        const char *why = o->sizing.tiers ? dd_tiers_error(o->sizing.tiers) : "";
        cli_error("%s", *why ? why : dedup_strerror(st));
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
    /* Every record decided is written (or buffered for the writer): now
     * the tiers commit the new keys and list the uncertain ones. */
    if (o->sizing.tiers && m) {
        dedup_batch head = {.n = m, .digests = r->wdig, .times = r->wtime};
        if (!dd_tiers_after_batch(o->sizing.tiers, r->s, &head, r->wverdict, r->wrec, r->wrlen,
                                  o->term, &r->w))
            fail = true;
    }
    r->file_records += n;
    if (fail) {
        r->failed = true;
        return false;
    }
    return true;
}

void dd_window_print_stats(run *r, double seconds)
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
            snprintf(tdesc, sizeof tdesc, "event time from field %s (%s%s)", o->time_spec, tfmt,
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

bool dd_window_matches_saved(const dd_seen_opts *sizing, const dedup_window *win,
                             const char *state)
{
    dedup_seen_spec want;
    dd_seen_spec(sizing, &want);
    dedup_window_params have;
    dedup_window_get_params(win, &have);
    bool approx = want.approximate;
    if (have.type != (dedup_window_type)want.window_type ||
        have.mode != (approx ? DEDUP_WINDOW_APPROX : DEDUP_WINDOW_EXACT) ||
        have.duration != want.duration || have.lateness != want.lateness ||
        have.seed != want.seed || have.refresh != want.refresh_on_dup ||
        (approx && (have.capacity != want.items || have.fpr != want.fpr))) {
        dedup_window_params wp = have;
        wp.type = (dedup_window_type)want.window_type;
        wp.mode = approx ? DEDUP_WINDOW_APPROX : DEDUP_WINDOW_EXACT;
        wp.duration = want.duration;
        wp.lateness = want.lateness;
        wp.seed = want.seed;
        wp.refresh = want.refresh_on_dup;
        wp.capacity = want.items;
        wp.fpr = want.fpr;
        char diff[512];
        window_mismatch(&have, &wp, diff, sizeof diff);
        cli_error("%s: the saved window was made with other options: %s; give the "
                  "saved ones to resume it", state, diff);
        return false;
    }
    return true;
}

void dd_window_warn_late(const run *r)
{
    dedup_window_stats ws;
    dedup_window_get_stats(r->win, &ws);
    if (ws.late) {
        char b1[32];
        cli_warn("%llu late record%s (event time up to %s behind the newest): %s; "
                 "--lateness %s would have covered them",
                 (unsigned long long)ws.late, ws.late == 1 ? "" : "s",
                 duration_str((uint64_t)ws.late_max_behind, b1, sizeof b1),
                 r->o->late == LATE_KEEP ? "written unchanged, not deduplicated"
                 : r->o->late == LATE_DROP ? "dropped" : "written to the --late file",
                 b1);
    }
}
