/*
 * bench_bloom.c - classic and blocked Bloom vs Debian's libbloom, same keys,
 * same run.
 *
 *   bench_bloom [--n N[,N...]] [--p P[,P...]] [--queries Q] [--seed S]
 *
 * Defaults: n = 10M,100M; p = 0.01,0.001; Q = 10M present and 10M absent
 * queries (fewer if n is smaller).  For every (n, p) it builds, one after
 * the other (only one filter in memory at a time):
 *
 *   classic        dedup_hash_u64 + dedup_bloom_add / might_contain
 *   classic-batch  digests of 1024 keys, then dedup_bloom_*_batch
 *   blocked        the same as classic, blocked layout
 *   blocked-batch  the same as classic-batch, blocked layout
 *   libbloom       bloom_add / bloom_check on the key's 8 bytes
 *
 * Keys are random 64-bit values from a counter-based generator (splitmix64
 * of seed + i), so every filter sees exactly the same keys without storing
 * them; "absent" keys come from a disjoint counter range (seed' + i), and
 * the fraction reported present is the measured FPR.  Times are CPU time
 * (CLOCK_PROCESS_CPUTIME_ID, so that time the shared machine gives to other
 * processes is not counted; memory stalls are) in ns per key, and include
 * generating the key (reported separately as "keygen") and hashing it.  "hash" is dedup_hash_u64 alone over the n keys; its share is
 * hash / blocked insert time.  Ratios are libbloom time / dedup time.
 */
#define _POSIX_C_SOURCE 200809L
#include "dedup/bloom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_LIBBLOOM
#include <bloom.h>
#endif

#define CHUNK 1024

static inline uint64_t mix(uint64_t z)
{
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct result {
    const char *name;
    double bits_per_key;
    double ns_insert, ns_present, ns_absent;
    double fpr, model;
    uint64_t misses; /* present keys reported absent: must be 0 */
    int k;
} result;

static volatile uint64_t sink_;

static uint64_t present_seed(uint64_t seed) { return seed; }
static uint64_t absent_seed(uint64_t seed) { return seed ^ UINT64_C(0x5555555555555555); }

static void run_dedup(result *r, dedup_bloom_kind kind, bool batch, uint64_t n, double p,
                      uint64_t q, uint64_t seed)
{
    dedup_bloom_params pa;
    dedup_bloom_params_init(&pa);
    pa.kind = kind;
    pa.capacity = n;
    pa.fpr = p;
    dedup_bloom *bf;
    dedup_status s = dedup_bloom_create(&pa, NULL, &bf);
    if (s) {
        fprintf(stderr, "create: %s\n", dedup_strerror(s));
        exit(1);
    }
    uint64_t hs = dedup_bloom_seed(bf);
    uint64_t ps = present_seed(seed), as = absent_seed(seed);
    dedup_digest d[CHUNK];
    bool out[CHUNK];

    double t0 = now();
    if (batch) {
        for (uint64_t i = 0; i < n; i += CHUNK) {
            size_t c = n - i < CHUNK ? (size_t)(n - i) : CHUNK;
            for (size_t j = 0; j < c; j++)
                d[j] = dedup_hash_u64(mix(ps + i + j), hs);
            dedup_bloom_add_batch(bf, d, c);
        }
    } else {
        for (uint64_t i = 0; i < n; i++)
            dedup_bloom_add(bf, dedup_hash_u64(mix(ps + i), hs));
    }
    double t1 = now();
    uint64_t yes = 0;
    if (batch) {
        for (uint64_t i = 0; i < q; i += CHUNK) {
            size_t c = q - i < CHUNK ? (size_t)(q - i) : CHUNK;
            for (size_t j = 0; j < c; j++)
                d[j] = dedup_hash_u64(mix(ps + i + j), hs);
            dedup_bloom_might_contain_batch(bf, d, c, out);
            for (size_t j = 0; j < c; j++)
                yes += out[j];
        }
    } else {
        for (uint64_t i = 0; i < q; i++)
            yes += dedup_bloom_might_contain(bf, dedup_hash_u64(mix(ps + i), hs));
    }
    double t2 = now();
    uint64_t fp = 0;
    if (batch) {
        for (uint64_t i = 0; i < q; i += CHUNK) {
            size_t c = q - i < CHUNK ? (size_t)(q - i) : CHUNK;
            for (size_t j = 0; j < c; j++)
                d[j] = dedup_hash_u64(mix(as + i + j), hs);
            dedup_bloom_might_contain_batch(bf, d, c, out);
            for (size_t j = 0; j < c; j++)
                fp += out[j];
        }
    } else {
        for (uint64_t i = 0; i < q; i++)
            fp += dedup_bloom_might_contain(bf, dedup_hash_u64(mix(as + i), hs));
    }
    double t3 = now();
    r->bits_per_key = (double)dedup_bloom_bits(bf) / (double)n;
    r->k = (int)dedup_bloom_k(bf);
    r->ns_insert = (t1 - t0) * 1e9 / (double)n;
    r->ns_present = (t2 - t1) * 1e9 / (double)q;
    r->ns_absent = (t3 - t2) * 1e9 / (double)q;
    r->fpr = (double)fp / (double)q;
    r->misses = q - yes;
    r->model = kind == DEDUP_BLOOM_CLASSIC
                   ? dedup_bloom_fpr_for(n, dedup_bloom_bits(bf), dedup_bloom_k(bf))
                   : dedup_blocked_fpr_for(n, dedup_bloom_bits(bf), dedup_bloom_k(bf));
    dedup_bloom_free(bf);
}

#ifdef HAVE_LIBBLOOM
static void run_libbloom(result *r, uint64_t n, double p, uint64_t q, uint64_t seed)
{
    struct bloom b;
    if (n > 2000000000u || bloom_init(&b, (int)n, p) != 0) {
        fprintf(stderr, "libbloom: bloom_init failed for n=%llu p=%g\n", (unsigned long long)n, p);
        r->name = NULL;
        return;
    }
    uint64_t ps = present_seed(seed), as = absent_seed(seed);
    double t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key = mix(ps + i);
        bloom_add(&b, &key, sizeof key);
    }
    double t1 = now();
    uint64_t yes = 0;
    for (uint64_t i = 0; i < q; i++) {
        uint64_t key = mix(ps + i);
        yes += bloom_check(&b, &key, sizeof key) == 1;
    }
    double t2 = now();
    uint64_t fp = 0;
    for (uint64_t i = 0; i < q; i++) {
        uint64_t key = mix(as + i);
        fp += bloom_check(&b, &key, sizeof key) == 1;
    }
    double t3 = now();
    r->bits_per_key = (double)b.bits / (double)n;
    r->k = b.hashes;
    r->ns_insert = (t1 - t0) * 1e9 / (double)n;
    r->ns_present = (t2 - t1) * 1e9 / (double)q;
    r->ns_absent = (t3 - t2) * 1e9 / (double)q;
    r->fpr = (double)fp / (double)q;
    r->misses = q - yes;
    r->model = dedup_bloom_fpr_for(n, (uint64_t)b.bits, (uint32_t)b.hashes);
    bloom_free(&b);
}
#endif

static int parse_list(const char *s, double *out, int max)
{
    int c = 0;
    while (*s && c < max) {
        char *end;
        double v = strtod(s, &end);
        if (end == s)
            return -1;
        if (*end == 'M' || *end == 'm')
            v *= 1e6, end++;
        else if (*end == 'k' || *end == 'K')
            v *= 1e3, end++;
        else if (*end == 'G' || *end == 'g')
            v *= 1e9, end++;
        else if (*end == '%')
            v /= 100, end++;
        out[c++] = v;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        s = end;
    }
    return c;
}

int main(int argc, char **argv)
{
    double ns[8] = {1e7, 1e8}, ps[8] = {0.01, 0.001};
    int nn = 2, np = 2;
    uint64_t qmax = 10000000, seed = 42;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            nn = parse_list(argv[++i], ns, 8);
        else if (!strcmp(argv[i], "--p") && i + 1 < argc)
            np = parse_list(argv[++i], ps, 8);
        else if (!strcmp(argv[i], "--queries") && i + 1 < argc)
            qmax = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "usage: %s [--n N[,N..]] [--p P[,P..]] [--queries Q] [--seed S]\n",
                    argv[0]);
            return 2;
        }
        if (nn <= 0 || np <= 0) {
            fprintf(stderr, "bad list in %s\n", argv[i]);
            return 2;
        }
    }
#ifndef HAVE_LIBBLOOM
    printf("note: built without libbloom (libbloom-dev not found); no comparison\n");
#endif
    for (int a = 0; a < nn; a++)
        for (int b = 0; b < np; b++) {
            uint64_t n = (uint64_t)ns[a];
            double p = ps[b];
            uint64_t q = qmax < n ? qmax : n;
            printf("\n== n = %llu keys, p = %g, %llu present + %llu absent queries ==\n",
                   (unsigned long long)n, p, (unsigned long long)q, (unsigned long long)q);
            /* Baselines: key generation, and key generation + hashing. */
            double t0 = now();
            uint64_t acc = 0;
            for (uint64_t i = 0; i < n; i++)
                acc += mix(seed + i);
            double t1 = now();
            for (uint64_t i = 0; i < n; i++)
                acc += dedup_hash_u64(mix(seed + i), DEDUP_DEFAULT_SEED).lo;
            double t2 = now();
            sink_ = acc;
            double keygen = (t1 - t0) * 1e9 / (double)n;
            double hash = (t2 - t1) * 1e9 / (double)n - keygen;

            enum { CL, CLB, BL, BLB, LB };
            result r[5];
            memset(r, 0, sizeof r);
            r[CL].name = "classic";
            run_dedup(&r[CL], DEDUP_BLOOM_CLASSIC, false, n, p, q, seed);
            r[CLB].name = "classic-batch";
            run_dedup(&r[CLB], DEDUP_BLOOM_CLASSIC, true, n, p, q, seed);
            r[BL].name = "blocked";
            run_dedup(&r[BL], DEDUP_BLOOM_BLOCKED, false, n, p, q, seed);
            r[BLB].name = "blocked-batch";
            run_dedup(&r[BLB], DEDUP_BLOOM_BLOCKED, true, n, p, q, seed);
            int nr = 4;
#ifdef HAVE_LIBBLOOM
            r[LB].name = "libbloom";
            run_libbloom(&r[LB], n, p, q, seed);
            if (r[LB].name)
                nr = 5;
#endif
            printf("%-14s %9s %3s %10s %10s %10s %10s %10s %8s\n", "filter", "bits/key", "k",
                   "insert ns", "present ns", "absent ns", "FPR", "model FPR", "misses");
            for (int i = 0; i < nr; i++)
                printf("%-14s %9.3f %3d %10.1f %10.1f %10.1f %10.3g %10.3g %8llu\n", r[i].name,
                       r[i].bits_per_key, r[i].k, r[i].ns_insert, r[i].ns_present,
                       r[i].ns_absent, r[i].fpr, r[i].model, (unsigned long long)r[i].misses);
            printf("keygen %.1f ns/key, dedup_hash_u64 %.1f ns/key (hash share of blocked insert"
                   " %.0f%%, of blocked-batch insert %.0f%%, of blocked-batch absent query %.0f%%)\n",
                   keygen, hash, 100 * hash / r[BL].ns_insert, 100 * hash / r[BLB].ns_insert,
                   100 * hash / r[BLB].ns_absent);
            double ideal = 1.44 * log2(1 / p);
            printf("classic bits/key %.3f vs 1.44*log2(1/p) = %.3f: %+.2f%%\n",
                   r[CL].bits_per_key, ideal, 100 * (r[CL].bits_per_key / ideal - 1));
            if (nr == 5) {
                printf("speedup vs libbloom (libbloom ns / dedup ns):\n");
                for (int i = 0; i < 4; i++)
                    printf("  %-14s insert %.2fx  present %.2fx  absent %.2fx\n", r[i].name,
                           r[LB].ns_insert / r[i].ns_insert, r[LB].ns_present / r[i].ns_present,
                           r[LB].ns_absent / r[i].ns_absent);
            }
            fflush(stdout);
        }
    return 0;
}
