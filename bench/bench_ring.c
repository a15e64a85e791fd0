/*
 * bench_ring.c - ring lookups per second at 1,000 nodes x 160 points (the
 * target: >= 20M/s), one key at a time and in batches, against a plain
 * binary search over the same points (what a ring without the table costs)
 * and jump hash over 1,000 shards, in one run, alternating, median of the
 * rounds.  Keys are digests of 64-bit integers, as dedup_hash_u64 makes
 * them; the timed loop only routes (digests are made beforehand).
 *
 *   bench_ring [KEYS=10000000] [ROUNDS=5] [NODES=1000]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dedup/ring.h"

/* CPU time of this thread: the machine is shared, and time spent waiting
 * for a core is not the lookup's.  (Wall time is printed beside it.) */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The reference: successor search over sorted cell ends by plain binary
 * search, built from the ring's own ranges (dedup_ring_diff against an
 * empty ring), so it routes exactly as the ring does. */
typedef struct ref { uint64_t *end; uint32_t *node; size_t n, cap; } ref;

static int add_range(void *ctx, const dedup_ring_range *r)
{
    ref *f = ctx;
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 1024;
        f->end = realloc(f->end, f->cap * sizeof *f->end);
        f->node = realloc(f->node, f->cap * sizeof *f->node);
        if (!f->end || !f->node)
            exit(1);
    }
    f->end[f->n] = r->last;
    f->node[f->n++] = r->to;
    return 0;
}

static uint32_t ref_lookup(const ref *f, uint64_t x)
{
    size_t lo = 0, hi = f->n; /* first end >= x; the last range ends at 2^64-1 */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->end[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return f->node[lo];
}

int main(int argc, char **argv)
{
    size_t keys = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    uint32_t nodes = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 1000;
    if (rounds < 1 || rounds > 64 || keys == 0 || nodes == 0 || nodes > DEDUP_RING_MAX_NODES) {
        fprintf(stderr, "usage: bench_ring [KEYS] [ROUNDS <= 64] [NODES]\n");
        return 2;
    }
    dedup_ring *r = NULL;
    if (dedup_ring_create(NULL, NULL, &r) != DEDUP_OK)
        return 1;
    char **names = malloc(nodes * sizeof *names);
    for (uint32_t i = 0; i < nodes; i++) {
        names[i] = malloc(32);
        snprintf(names[i], 32, "cache-%04u.example.org", i);
    }
    double t = now();
    if (dedup_ring_add_nodes(r, (const char *const *)names, NULL, nodes, NULL) != DEDUP_OK)
        return 1;
    double build = now() - t;
    dedup_ring *empty = NULL;
    ref f = {0};
    dedup_ring_create(NULL, NULL, &empty);
    dedup_ring_diff(empty, r, add_range, &f, NULL);

    dedup_digest *d = malloc(keys * sizeof *d);
    uint32_t *out = malloc(keys * sizeof *out);
    if (!d || !out)
        return 1;
    for (size_t i = 0; i < keys; i++)
        d[i] = dedup_hash_u64(i, DEDUP_DEFAULT_SEED);

    double one[64], batch[64], bsearch_[64], jump[64], batch_wall[64];
    uint64_t sink = 0;
    for (int k = 0; k < rounds; k++) {
        double w;
        t = now();
        for (size_t i = 0; i < keys; i++)
            out[i] = dedup_ring_lookup(r, d[i]);
        one[k] = keys / (now() - t);
        sink += out[keys / 2];
        t = now();
        w = wall();
        for (size_t off = 0; off < keys; off += 4096)
            dedup_ring_lookup_batch(r, d + off, keys - off < 4096 ? keys - off : 4096, out + off);
        batch[k] = keys / (now() - t);
        batch_wall[k] = keys / (wall() - w);
        sink += out[keys / 3];
        t = now();
        for (size_t i = 0; i < keys; i++)
            out[i] = ref_lookup(&f, dedup_ring_position(d[i]));
        bsearch_[k] = keys / (now() - t);
        sink += out[keys / 4];
        t = now();
        for (size_t i = 0; i < keys; i++)
            out[i] = dedup_jump_digest(d[i], nodes);
        jump[k] = keys / (now() - t);
        sink += out[keys / 5];
    }
    /* the table agrees with the binary search */
    for (size_t i = 0; i < keys; i += 101)
        if (dedup_ring_lookup(r, d[i]) != ref_lookup(&f, dedup_ring_position(d[i]))) {
            fprintf(stderr, "bench_ring: lookup disagrees with the binary search\n");
            return 1;
        }
    double m1 = median(one, rounds), mb = median(batch, rounds), ms = median(bsearch_, rounds),
           mj = median(jump, rounds);
    printf("ring: %u nodes x %u points = %u points, %.2f MiB, built in %.3f s\n", nodes,
           DEDUP_RING_DEFAULT_POINTS, dedup_ring_point_count(r),
           dedup_ring_memory_usage(r) / 1048576.0, build);
    printf("%zu keys, median of %d rounds (lookups per CPU second of this thread):\n", keys,
           rounds);
    printf("  dedup_ring_lookup        %8.2f M/s\n", m1 / 1e6);
    printf("  dedup_ring_lookup_batch  %8.2f M/s\n", mb / 1e6);
    printf("  binary search, no table  %8.2f M/s   (table speedup: %.2fx one, %.2fx batch)\n",
           ms / 1e6, m1 / ms, mb / ms);
    printf("  jump hash, %u shards   %8.2f M/s\n", nodes, mj / 1e6);
    printf("  (batch by wall clock:    %8.2f M/s)\n", median(batch_wall, rounds) / 1e6);
    printf("(checksum %llu)\n", (unsigned long long)(sink & 0xFFFF));
    for (uint32_t i = 0; i < nodes; i++)
        free(names[i]);
    free(names);
    free(d);
    free(out);
    free(f.end);
    free(f.node);
    dedup_ring_free(r);
    dedup_ring_free(empty);
    return 0;
}
