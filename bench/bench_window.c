/*
 * bench_window.c - windowed dedup: events per CPU-second and bytes per live
 * key, exact and approximate, against the usual hand-written alternative (a
 * hash map of key -> last kept time whose expired keys are removed by a
 * periodic full scan).
 *
 * The stream: event i has event time i microseconds and a key drawn
 * uniformly from U = 2 * LIVE keys; the sliding window is D = 2 * LIVE
 * microseconds.  Each key is then kept once per D + (mean gap U), so about
 * U * D / (D + U) = LIVE distinct keys are kept within any window and half
 * the events are duplicates.  The first D events fill the window; speeds are
 * over the whole stream; memory is sampled every 2^20 events from event 2D
 * on (the steady state: the clock is then anywhere within a generation's
 * span) and reported as mean and largest; "live keys" are counted exactly
 * at the end (distinct keys kept within the last D), outside the timed
 * loop.
 *
 *   bench_window [--live N] [--events N] [--fpr P] [--generations G (both modes;
 *                default: the library's, 4 exact and 7 approximate)]
 *                [--plan N] [--approx-only] [--no-baseline]
 *
 * --plan N gives the windows a capacity of N keys instead of LIVE: below
 * LIVE, the approximate window runs LIVE / N times past its plan (its table
 * full, the rest in its stash).  --approx-only runs the approximate window
 * alone (no exact runs, no baseline; its false duplicates are still
 * counted), for A/B runs of that path.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>

#include "dedup/window.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint64_t key_of(uint64_t *rng, uint64_t U)
{
    return dedup_reduce(splitmix(rng), U);
}

/* ---- the alternative: key -> last kept time, expired by a full scan ---------- */
typedef struct scan_map {
    uint64_t *lo, *hi;
    int64_t *t;
    uint64_t mask, n;
} scan_map;

static void sm_alloc(scan_map *m, uint64_t slots)
{
    m->lo = calloc(slots, 8);
    m->hi = calloc(slots, 8);
    m->t = calloc(slots, 8);
    if (!m->lo || !m->hi || !m->t) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    m->mask = slots - 1;
    m->n = 0;
}

static void sm_free(scan_map *m)
{
    free(m->lo);
    free(m->hi);
    free(m->t);
}

static int64_t *sm_slot(scan_map *m, dedup_digest d, bool *found)
{
    uint64_t i = d.lo & m->mask;
    for (;;) {
        if (m->lo[i] == 0 && m->hi[i] == 0) {
            *found = false;
            m->lo[i] = d.lo;
            m->hi[i] = d.hi | 1;
            m->n++;
            return &m->t[i];
        }
        if (m->lo[i] == d.lo && m->hi[i] == (d.hi | 1)) {
            *found = true;
            return &m->t[i];
        }
        i = (i + 1) & m->mask;
    }
}

/* Rebuilds the map without keys kept at or before 'cutoff' (a full scan). */
static void sm_expire(scan_map *m, int64_t cutoff)
{
    uint64_t live = 0;
    for (uint64_t i = 0; i <= m->mask; i++)
        if ((m->lo[i] | m->hi[i]) && m->t[i] > cutoff)
            live++;
    uint64_t slots = 1024;
    while (slots < live * 2 + 1024)
        slots *= 2;
    scan_map n;
    sm_alloc(&n, slots);
    for (uint64_t i = 0; i <= m->mask; i++)
        if ((m->lo[i] | m->hi[i]) && m->t[i] > cutoff) {
            bool f;
            dedup_digest d = {m->lo[i], m->hi[i]};
            *sm_slot(&n, d, &f) = m->t[i];
        }
    sm_free(m);
    *m = n;
}

/* ---- runs ------------------------------------------------------------------------ */
typedef struct result {
    double cpu, events_per_s;
    size_t bytes;     /* at the end */
    double bytes_mean; /* mean of samples every 2^20 events from event 2D on */
    size_t bytes_max;
    double fpr_now_mean; /* approximate: mean of dedup_window_fpr_now() at the same samples */
    uint64_t kept, live, gens;
    uint32_t G;    /* generations the window ran with */
    uint64_t span; /* its generation span */
} result;

#define BATCH 256

static result run_window(dedup_window_mode mode, uint64_t live, uint64_t plan, uint64_t events,
                         double fpr, uint32_t gens, bool batch, unsigned char *verdicts)
{
    uint64_t U = 2 * live, D = 2 * live;
    dedup_window_params p;
    dedup_window_params_init(&p);
    p.mode = mode;
    p.duration = D;
    p.capacity = plan;
    p.fpr = fpr;
    p.generations = gens;
    dedup_window *w = NULL;
    if (dedup_window_create(&p, NULL, &w) != DEDUP_OK) {
        fprintf(stderr, "create failed\n");
        exit(1);
    }
    uint64_t rng = 42, mn = 0;
    double msum = 0, fsum = 0;
    size_t mmax = 0;
    double c0 = cpu_now();
    if (batch) {
        /* As a reader would: digest a block of records, then decide them. */
        dedup_digest d[BATCH];
        int64_t t[BATCH];
        dedup_verdict v[BATCH];
        for (uint64_t i = 0; i < events; i += BATCH) {
            size_t n = events - i < BATCH ? (size_t)(events - i) : BATCH;
            for (size_t j = 0; j < n; j++) {
                d[j] = dedup_hash_u64(key_of(&rng, U), p.seed);
                t[j] = (int64_t)(i + j);
            }
            if (dedup_window_seen_batch(w, d, t, n, v, NULL) != DEDUP_OK) {
                fprintf(stderr, "seen failed\n");
                exit(1);
            }
            if (i >= 2 * D && (i & ((1u << 20) - 1)) < BATCH) {
                size_t m = dedup_window_memory_usage(w);
                msum += (double)m;
                fsum += dedup_window_fpr_now(w);
                mn++;
                if (m > mmax)
                    mmax = m;
            }
            if (verdicts)
                for (size_t j = 0; j < n; j++)
                    if (v[j] == DEDUP_NEW)
                        verdicts[(i + j) >> 3] |= (unsigned char)(1u << ((i + j) & 7));
        }
    } else {
        for (uint64_t i = 0; i < events; i++) {
            uint64_t k = key_of(&rng, U);
            dedup_verdict v;
            if (dedup_window_seen(w, dedup_hash_u64(k, p.seed), (int64_t)i, &v) != DEDUP_OK) {
                fprintf(stderr, "seen failed\n");
                exit(1);
            }
            if (i >= 2 * D && (i & ((1u << 20) - 1)) == 0) {
                size_t m = dedup_window_memory_usage(w);
                msum += (double)m;
                fsum += dedup_window_fpr_now(w);
                mn++;
                if (m > mmax)
                    mmax = m;
            }
            if (verdicts && v == DEDUP_NEW)
                verdicts[i >> 3] |= (unsigned char)(1u << (i & 7));
        }
    }
    result r;
    r.cpu = cpu_now() - c0;
    r.events_per_s = (double)events / r.cpu;
    r.bytes = dedup_window_memory_usage(w);
    r.bytes_mean = mn ? msum / (double)mn : (double)r.bytes;
    r.fpr_now_mean = mn ? fsum / (double)mn : dedup_window_fpr_now(w);
    r.bytes_max = mmax > r.bytes ? mmax : r.bytes;
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    r.kept = st.kept;
    r.live = st.live;
    r.gens = st.generations;
    dedup_window_params wp;
    dedup_window_get_params(w, &wp);
    r.G = wp.generations;
    r.span = dedup_window_span(w);
    dedup_window_free(w);
    return r;
}

static result run_scan_map(uint64_t live, uint64_t events, uint32_t gens)
{
    uint64_t U = 2 * live, D = 2 * live, s = D / gens;
    scan_map m;
    uint64_t slots = 1024;
    while (slots < live * 2)
        slots *= 2;
    sm_alloc(&m, slots);
    uint64_t rng = 42, kept = 0;
    size_t peak = 0;
    double c0 = cpu_now();
    for (uint64_t i = 0; i < events; i++) {
        uint64_t k = key_of(&rng, U);
        bool found;
        if (m.n * 4 > m.mask * 3) /* grow by a rebuild */
            sm_expire(&m, INT64_MIN);
        int64_t *t = sm_slot(&m, dedup_hash_u64(k, DEDUP_DEFAULT_SEED), &found);
        if (!found || (int64_t)i - *t >= (int64_t)D) {
            *t = (int64_t)i;
            kept++;
        }
        if (i % s == s - 1) {
            size_t b = (size_t)(m.mask + 1) * 24;
            if (b > peak)
                peak = b;
            sm_expire(&m, (int64_t)i - (int64_t)D);
        }
    }
    result r;
    r.cpu = cpu_now() - c0;
    r.events_per_s = (double)events / r.cpu;
    r.bytes = (size_t)(m.mask + 1) * 24;
    r.bytes_max = peak > r.bytes ? peak : r.bytes;
    r.bytes_mean = (double)r.bytes_max;
    r.fpr_now_mean = 0;
    r.kept = kept;
    r.live = m.n;
    r.gens = 1;
    sm_free(&m);
    return r;
}

/* Hashing and key generation alone, to show what the window itself costs. */
static double run_hash_only(uint64_t live, uint64_t events)
{
    uint64_t rng = 42, acc = 0, U = 2 * live;
    double c0 = cpu_now();
    for (uint64_t i = 0; i < events; i++)
        acc += dedup_hash_u64(key_of(&rng, U), DEDUP_DEFAULT_SEED).lo;
    double c = cpu_now() - c0;
    if (acc == 42)
        printf(" ");
    return c;
}

/* False duplicates of the approximate run, from its verdicts, counted once
 * the window has filled (events >= 2D):
 *  - per new key: events whose key did not occur at all within D + s (the
 *    granularity the approximate window is allowed), yet were called a
 *    duplicate.  Such tests are independent: every generation the key's
 *    previous occurrence consulted is gone.  This is the guarantee (p).
 *  - per record: events whose key was not KEPT within D + s.  A key that was
 *    wrongly dropped stays in the same filters' blocks, so it tends to be
 *    dropped again at its next occurrences; this counts each of them.
 * Returns the first rate; *trials gets its number of events. */
static double approx_fpr(uint64_t live, uint64_t events, uint64_t s, const unsigned char *verdicts,
                         uint64_t *trials, double *per_record, uint64_t *record_trials)
{
    uint64_t U = 2 * live, D = 2 * live;
    int64_t *last = malloc(U * sizeof *last), *seen = malloc(U * sizeof *seen);
    if (!last || !seen) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (uint64_t k = 0; k < U; k++)
        last[k] = seen[k] = INT64_MIN;
    uint64_t rng = 42, n = 0, fp = 0, rn = 0, rfp = 0;
    for (uint64_t i = 0; i < events; i++) {
        uint64_t k = key_of(&rng, U);
        bool kept = verdicts[i >> 3] & (1u << (i & 7));
        if (i >= 2 * D) {
            if (seen[k] == INT64_MIN || (int64_t)i - seen[k] >= (int64_t)(D + s)) {
                n++;
                fp += !kept;
            }
            if (last[k] == INT64_MIN || (int64_t)i - last[k] >= (int64_t)(D + s)) {
                rn++;
                rfp += !kept;
            }
        }
        if (kept)
            last[k] = (int64_t)i;
        seen[k] = (int64_t)i;
    }
    free(last);
    free(seen);
    *trials = n;
    *record_trials = rn;
    *per_record = rn ? (double)rfp / (double)rn : 0.0;
    return n ? (double)fp / (double)n : 0.0;
}

/* Distinct keys kept within the last D events, from the exact run's verdicts. */
static uint64_t live_in_window(uint64_t live, uint64_t events, const unsigned char *verdicts)
{
    uint64_t U = 2 * live, D = 2 * live;
    int64_t *last = malloc(U * sizeof *last);
    if (!last) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (uint64_t k = 0; k < U; k++)
        last[k] = INT64_MIN;
    uint64_t rng = 42;
    for (uint64_t i = 0; i < events; i++) {
        uint64_t k = key_of(&rng, U);
        if (verdicts[i >> 3] & (1u << (i & 7)))
            last[k] = (int64_t)i;
    }
    int64_t T = (int64_t)events - 1;
    uint64_t n = 0;
    for (uint64_t k = 0; k < U; k++)
        if (last[k] != INT64_MIN && T - last[k] < (int64_t)D)
            n++;
    free(last);
    return n;
}

static void print_row(const char *name, const result *r, uint64_t in_window)
{
    printf("%-34s %8.2f %14.0f %10.1f %10.1f %12.2f %12.2f\n", name, r->cpu, r->events_per_s,
           r->bytes_mean / 1048576.0, (double)r->bytes_max / 1048576.0,
           r->bytes_mean / (double)in_window, (double)r->bytes_max / (double)in_window);
}

int main(int argc, char **argv)
{
    uint64_t live = 10000000, events = 50000000;
    double fpr = 0.01;
    uint32_t gens = 0; /* the library's default for each mode */
    uint64_t plan = 0;  /* the windows' capacity: 0 = live */
    bool baseline = true, approx_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--live") && i + 1 < argc)
            live = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--events") && i + 1 < argc)
            events = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--fpr") && i + 1 < argc)
            fpr = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--generations") && i + 1 < argc)
            gens = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--plan") && i + 1 < argc)
            plan = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--approx-only"))
            approx_only = true;
        else if (!strcmp(argv[i], "--no-baseline"))
            baseline = false;
        else {
            fprintf(stderr, "usage: %s [--live N] [--events N] [--fpr P] [--generations G] "
                            "[--plan N] [--approx-only] [--no-baseline]\n", argv[0]);
            return 2;
        }
    }
    printf("window dedup: %llu events, window D = %llu us (1 event/us), key universe %llu, "
           "G = %u exact, %u approx\n", (unsigned long long)events,
           (unsigned long long)(2 * live), (unsigned long long)(2 * live),
           gens ? gens : DEDUP_WINDOW_DEFAULT_GENERATIONS,
           gens ? gens : DEDUP_WINDOW_DEFAULT_APPROX_GENERATIONS);
    if (!plan)
        plan = live;
    if (plan != live)
        printf("capacity planned: %llu keys (%.1fx fewer than live)\n", (unsigned long long)plan,
               (double)live / (double)plan);
    unsigned char *verdicts = calloc(events / 8 + 1, 1);
    unsigned char *averdicts = calloc(events / 8 + 1, 1);
    if (!verdicts || !averdicts)
        return 1;
    if (approx_only) {
        result ap = run_window(DEDUP_WINDOW_APPROX, live, plan, events, fpr, gens, true, averdicts);
        uint64_t trials, rtrials;
        double rrate, rate = approx_fpr(live, events, ap.span, averdicts, &trials, &rrate, &rtrials);
        printf("approx (batch): %.2f CPU-s, %.0f events/CPU-s, %.1f MiB max, %llu live at the "
               "end; false duplicates per new key %.4f%% of %llu (table's rate %.4f%%)\n", ap.cpu,
               ap.events_per_s, (double)ap.bytes_max / 1048576.0, (unsigned long long)ap.live,
               100.0 * rate, (unsigned long long)trials, 100.0 * ap.fpr_now_mean);
        free(verdicts);
        free(averdicts);
        return 0;
    }
    double hash_cpu = run_hash_only(live, events);
    result ex = run_window(DEDUP_WINDOW_EXACT, live, plan, events, fpr, gens, true, verdicts);
    result ex1 = run_window(DEDUP_WINDOW_EXACT, live, plan, events, fpr, gens, false, NULL);
    result ap = run_window(DEDUP_WINDOW_APPROX, live, plan, events, fpr, gens, true, averdicts);
    uint64_t in_window = live_in_window(live, events, verdicts);
    printf("live keys at the end (kept within the last D): %llu\n",
           (unsigned long long)in_window);
    printf("key generation + hashing alone: %.2f CPU-s (%.1f ns/event)\n", hash_cpu,
           hash_cpu * 1e9 / (double)events);
    printf("memory: mean and largest of samples every 2^20 events in the steady state "
           "(events >= 2D), per live key at the end\n");
    printf("%-34s %8s %14s %10s %10s %12s %12s\n", "method", "CPU-s", "events/CPU-s", "MiB mean",
           "MiB max", "B/key mean", "B/key max");
    print_row("dedup window exact (batch)", &ex, in_window);
    print_row("dedup window exact (one by one)", &ex1, in_window);
    print_row("dedup window approx (batch)", &ap, in_window);
    if (ex1.kept != ex.kept)
        printf("error: batch and single calls kept different records\n");
    uint64_t span = ap.span, trials;
    uint64_t rtrials;
    double rrate;
    double rate = approx_fpr(live, events, span, averdicts, &trials, &rrate, &rtrials);
    printf("approx: %llu kept records remembered in %llu generations at the end (%.0f per "
           "generation; planned %.0f)\n", (unsigned long long)ap.live, (unsigned long long)ap.gens,
           (double)ap.live / (double)ap.gens, ceil((double)live * (double)span / (double)(2 * live)));
    printf("approx: kept %llu vs exact %llu (a key is remembered D..D+s, s = D/%u)\n",
           (unsigned long long)ap.kept, (unsigned long long)ex.kept, ap.G);
    printf("approx: false duplicates per new key (no occurrence within D+s): %.4f%% of %llu "
           "(target p = %g); per record whose key was not kept within D+s: %.4f%% of %llu "
           "(both after the first 2D events)\n", 100.0 * rate, (unsigned long long)trials, fpr,
           100.0 * rrate, (unsigned long long)rtrials);
    if (baseline) {
        result sm = run_scan_map(live, events, ex.G);
        print_row("hash map + full expiry scan", &sm, in_window);
        if (sm.kept != ex.kept)
            printf("note: the scan map kept %llu records (in-order stream: should equal exact)\n",
                   (unsigned long long)sm.kept);
        printf("ratios vs scan map: exact %.2fx events/CPU-s, %.2fx memory (max); approx %.2fx, "
               "%.3fx memory (max)\n", ex.events_per_s / sm.events_per_s,
               (double)ex.bytes_max / (double)sm.bytes_max, ap.events_per_s / sm.events_per_s,
               (double)ap.bytes_max / (double)sm.bytes_max);
    }
    printf("targets: >= 3M events/CPU-s; <= 40 B/live key exact; <= 2 B/live key approx at 1%%\n");
    free(verdicts);
    free(averdicts);
    return 0;
}
