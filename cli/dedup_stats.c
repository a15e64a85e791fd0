/*
 * dedup_stats.c - the main job's report (--stats, text or JSON, on
 * stderr) for a run that is not windowed, with the estimate of the new
 * records a filter took for repeats.  See dedup_run.h.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dedup/extsort.h"
#include "dedup_run.h"

/* Samples the filter's rate now and then (it may scan the filter): the
 * new records since the last sample are taken to have met the mean of the
 * two rates, and each kept one stood for 1 / (1 - rate) new records, the
 * rest of which were wrongly dropped.  'final' samples whatever is left. */
void dd_stats_sample_false_drops(run *r, bool final)
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

/* The estimated false drops, never more than the records dropped.  False
 * when none can be made: past a rate of one half, the few records still
 * answered NEW say too little about how many new ones were dropped. */
static bool false_drops_of(const run *r, uint64_t dropped, uint64_t *out)
{
    double f = r->false_drops + 0.5;
    *out = f >= (double)dropped ? dropped : (uint64_t)f;
    return r->fd_rate < 0.5;
}

void dd_stats_print(run *r, double seconds)
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
