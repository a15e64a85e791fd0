/*
 * bench_ints.c - integer keys: the 64-bit integer set (sized with -n and
 * growing), the bitmap and the roaring component, against the string path
 * (the exact string set, each ID written in decimal and hashed once, as
 * `dedup` does with lines of IDs) on the same IDs in the same run; and the
 * HyperLogLog sketch's digests per second.
 *
 * Inputs (seeded, the same for every method):
 *   dense:  N IDs drawn uniformly from [0, N)       (~0.63 N distinct)
 *   sparse: N IDs drawn uniformly from [0, 100 N)   (~0.995 N distinct)
 * Each method decides all N IDs in batches of 4096 through dedup/seen.h;
 * keys/s is per CPU-second of the decisions (the string path's formatting
 * and hashing included; CPU time, because the machine is shared), and
 * bytes/key is dedup_seen_memory_usage() / distinct at the end.  "Sized"
 * means created with items = the expected distinct count + 2%, as a user
 * giving -n from an estimate would.
 * The median of --reps runs (default 3) is printed, as a Markdown table.
 *
 *   bench_ints [--n N (default 1e8)] [--reps R] [--only dense|sparse] [--hll-only]
 *              [--method PREFIX]   (only the methods whose name starts so: "u64", "roaring")
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dedup/hll.h"
#include "dedup/seen.h"
#ifdef DEDUP_HAVE_ROARING
#include "dedup/roaring.h"
#endif

#define BATCH 4096

static double now(void)
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

typedef struct result {
    double keys_per_s;
    double bytes_per_key;
    uint64_t distinct;
    const char *note;
} result;

typedef enum method { M_U64_SIZED, M_U64_GROWING, M_BITMAP, M_ROARING, M_STRING, M_COUNT } method;
static const char *const method_names[M_COUNT] = {
    "u64 set, sized (-n)", "u64 set, growing", "bitmap (--range)", "roaring", "string path (exact set)",
};

static result run(method m, const uint64_t *ids, size_t n, uint64_t range, uint64_t distinct)
{
    result r = {0, 0, 0, NULL};
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    dedup_seen *s = NULL;
    dedup_status st;
    switch (m) {
    case M_U64_SIZED: sp.kind = DEDUP_SEEN_U64; sp.items = distinct + distinct / 50; break;
    case M_U64_GROWING: sp.kind = DEDUP_SEEN_U64; break;
    case M_BITMAP: sp.kind = DEDUP_SEEN_BITMAP; sp.range_lo = 0; sp.range_hi = range - 1; break;
    case M_ROARING: sp.kind = DEDUP_SEEN_ROARING; break;
    case M_STRING: sp.kind = DEDUP_SEEN_EXACT; sp.items = distinct + distinct / 50; break;
    default: break;
    }
    if (m == M_BITMAP && range / 8 > (UINT64_C(16) << 30)) {
        char b[64];
        snprintf(b, sizeof b, "refused: %.0f GiB for the range", (double)range / 8 / (1 << 30));
        r.note = strdup(b);
        return r;
    }
#ifdef DEDUP_HAVE_ROARING
    if (m == M_ROARING)
        st = dedup_roaring_seen_create(&sp, NULL, &s);
    else
#else
    if (m == M_ROARING) {
        r.note = "not built (no libroaring-dev)";
        return r;
    }
#endif
        st = dedup_seen_create(&sp, NULL, &s);
    if (st) {
        r.note = dedup_strerror(st);
        return r;
    }
    static dedup_verdict v[BATCH];
    static char text[BATCH][24];
    static const unsigned char *keys[BATCH];
    static size_t lens[BATCH];
    static dedup_digest dig[BATCH];
    uint64_t seed = dedup_seen_seed(s);
    double t0 = now();
    for (size_t off = 0; off < n; off += BATCH) {
        size_t k = n - off < BATCH ? n - off : BATCH;
        dedup_batch b = {.n = k, .ints = ids + off};
        if (m == M_STRING) {
            for (size_t i = 0; i < k; i++) {
                int l = snprintf(text[i], sizeof text[i], "%llu", (unsigned long long)ids[off + i]);
                keys[i] = (const unsigned char *)text[i];
                lens[i] = (size_t)l;
                dig[i] = dedup_hash(text[i], (size_t)l, seed);
            }
            b.ints = NULL;
            b.keys = keys;
            b.lens = lens;
            b.digests = dig;
        }
        size_t done;
        st = dedup_seen_decide(s, &b, v, &done);
        if (st) {
            r.note = dedup_strerror(st);
            dedup_seen_free(s);
            return r;
        }
    }
    double dt = now() - t0;
    bool exact;
    dedup_seen_distinct(s, &r.distinct, &exact);
    r.keys_per_s = (double)n / dt;
    r.bytes_per_key = (double)dedup_seen_memory_usage(s) / (double)r.distinct;
    dedup_seen_free(s);
    return r;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench_hll(size_t n, int reps)
{
    const size_t chunk = 1 << 22; /* 64 MiB of digests, fed n / chunk times */
    dedup_digest *d = malloc(chunk * sizeof *d);
    uint64_t s = 42;
    for (size_t i = 0; i < chunk; i++) {
        d[i].lo = splitmix(&s);
        d[i].hi = splitmix(&s);
    }
    double rates[16];
    for (int r = 0; r < reps; r++) {
        dedup_hll_params hp;
        dedup_hll_params_init(&hp);
        dedup_hll *h = NULL;
        dedup_hll_create(&hp, NULL, &h);
        double t0 = now();
        for (size_t done = 0; done < n; done += chunk)
            dedup_hll_add_batch(h, d, n - done < chunk ? n - done : chunk);
        rates[r] = (double)n / (now() - t0);
        if (r == 0)
            fprintf(stderr, "hll: estimate %.0f of %zu distinct digests\n", dedup_hll_estimate(h),
                    chunk);
        dedup_hll_free(h);
    }
    qsort(rates, (size_t)reps, sizeof rates[0], cmp_d);
    printf("\n| HyperLogLog, precision 14 | digests/s (median of %d) |\n|---|---|\n", reps);
    printf("| add_batch over %zu digests (per CPU-second) | %.1fM |\n", n, rates[reps / 2] / 1e6);
    free(d);
}

int main(int argc, char **argv)
{
    size_t n = 100000000;
    int reps = 3;
    const char *only = NULL, *method_prefix = NULL;
    bool hll_only = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            n = (size_t)strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--hll-only") == 0)
            hll_only = true;
        else if (strcmp(argv[i], "--method") == 0 && i + 1 < argc)
            method_prefix = argv[++i];
        else {
            fprintf(stderr, "usage: bench_ints [--n N] [--reps R] [--only dense|sparse] [--hll-only] "
                            "[--method PREFIX]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 15)
        reps = 3;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each table line as it is known, into a file too */
    if (!hll_only) {
        uint64_t *ids = malloc(n * sizeof *ids);
        if (!ids)
            return 1;
        for (int shape = 0; shape < 2; shape++) {
            const char *name = shape ? "sparse" : "dense";
            if (only && strcmp(only, name) != 0)
                continue;
            uint64_t range = shape ? (uint64_t)n * 100 : (uint64_t)n;
            uint64_t s = 7 + (uint64_t)shape;
            for (size_t i = 0; i < n; i++)
                ids[i] = splitmix(&s) % range;
            /* Expected distinct keys, for sizing with -n (as a user would). */
            double exp_distinct = (double)range * (1.0 - exp(-(double)n / (double)range));
            printf("\n### %s: %zu IDs uniform in [0, %llu), ~%.0f distinct\n\n", name, n,
                   (unsigned long long)range, exp_distinct);
            printf("| method | keys per CPU-second (median of %d) | bytes/key | vs string path |\n", reps);
            printf("|---|---|---|---|\n");
            result res[M_COUNT][16];
            bool skip[M_COUNT];
            for (int m = 0; m < M_COUNT; m++)
                skip[m] = method_prefix &&
                          strncmp(method_names[m], method_prefix, strlen(method_prefix)) != 0;
            for (int r = 0; r < reps; r++)
                for (int m = 0; m < M_COUNT; m++) {
                    if (skip[m]) {
                        res[m][r] = (result){0, 0, 0, "not run (--method)"};
                        continue;
                    }
                    res[m][r] = run((method)m, ids, n, range, (uint64_t)exp_distinct);
                    fprintf(stderr, "%s rep %d %s: %.2fM keys/s %.2f B/key %s\n", name, r,
                            method_names[m], res[m][r].keys_per_s / 1e6, res[m][r].bytes_per_key,
                            res[m][r].note ? res[m][r].note : "");
                }
            double med[M_COUNT], bpk[M_COUNT];
            for (int m = 0; m < M_COUNT; m++) {
                double k[16], b[16];
                for (int r = 0; r < reps; r++)
                    k[r] = res[m][r].keys_per_s, b[r] = res[m][r].bytes_per_key;
                qsort(k, (size_t)reps, sizeof k[0], cmp_d);
                qsort(b, (size_t)reps, sizeof b[0], cmp_d);
                med[m] = k[reps / 2];
                bpk[m] = b[reps / 2];
            }
            for (int m = 0; m < M_COUNT; m++) {
                if (res[m][0].note && med[m] == 0) {
                    printf("| %s | %s | | |\n", method_names[m], res[m][0].note);
                    continue;
                }
                if (skip[M_STRING]) {
                    printf("| %s | %.2fM | %.2f | (string path not run) |\n", method_names[m],
                           med[m] / 1e6, bpk[m]);
                    continue;
                }
                printf("| %s | %.2fM | %.2f | %.2fx faster, %.2fx the memory |\n", method_names[m],
                       med[m] / 1e6, bpk[m], med[m] / med[M_STRING], bpk[m] / bpk[M_STRING]);
            }
        }
        free(ids);
    }
    if (!method_prefix)
        bench_hll(n, reps);
    return 0;
}
