/* mem_latency.c - what one random read costs as the working set grows: a
 * pointer chase over a shuffled cycle of cache lines (each read depends on
 * the one before, so nothing overlaps), 5M steps per size, sizes doubling
 * from 256 KiB to 256 MiB.  Tells where the caches end on a machine and
 * what a miss to DRAM costs there (bench/results/byref.md).
 *
 *   cc -O2 -o mem_latency bench/mem_latency.c && ./mem_latency
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define LINE_WORDS 8 /* 64-byte lines of 8-byte words */
#define STEPS 5000000

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t next_rand(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

int main(void)
{
    uint64_t seed = 1;
    printf("working set  ns a read\n");
    for (size_t kib = 256; kib <= 256 * 1024; kib *= 2) {
        size_t lines = kib * 1024 / 64;
        uint64_t *a = aligned_alloc(64, lines * 64);
        size_t *order = malloc(lines * sizeof *order);
        if (!a || !order)
            return 1;
        for (size_t i = 0; i < lines; i++)
            order[i] = i;
        for (size_t i = lines - 1; i > 0; i--) { /* Fisher-Yates */
            size_t j = (size_t)(next_rand(&seed) % (i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (size_t i = 0; i < lines; i++) /* one cycle through every line */
            a[order[i] * LINE_WORDS] = order[(i + 1) % lines] * LINE_WORDS;
        uint64_t p = 0;
        double t0 = now();
        for (size_t i = 0; i < STEPS; i++)
            p = a[p];
        double t1 = now();
        printf("%8zu KiB  %8.1f%s\n", kib, (t1 - t0) / STEPS * 1e9, p == UINT64_MAX ? " " : "");
        free(a);
        free(order);
    }
    return 0;
}
