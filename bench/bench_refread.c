/*
 * bench_refread.c - what one comparison against a key kept by reference
 * costs when the key's bytes are read back from the file: through a
 * mapping of the file (what exact mode by reference does, cli/byref.c:
 * every page it touches counts in the process's peak RSS) or with one
 * pread(2) of the key into a small buffer (which keeps the resident size
 * to the buffers, at one system call a comparison).  Reads N keys of LEN
 * bytes at random line starts of FILE (page cache warm: the file is read
 * once first), each compared with memcmp against a copy, and prints CPU ns
 * a key for both (the mapping's page faults included), and the peak RSS
 * after each.
 *
 *   cc -O2 -o bench_refread bench/bench_refread.c
 *   bench_refread FILE [N=10000000] [LEN=70]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* CPU seconds of the process (user + system): a shared machine's load
 * stretches the wall clock, not this. */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static long peak_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_refread FILE [N] [LEN]\n");
        return 2;
    }
    size_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000000;
    size_t len = argc > 3 ? strtoull(argv[3], NULL, 10) : 70;
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size < len * 2) {
        perror(argv[1]);
        return 1;
    }
    size_t size = (size_t)st.st_size;
    /* warm the page cache, and pick the offsets (line starts) */
    uint64_t *off = malloc(n * sizeof *off);
    unsigned char *buf = malloc(1 << 20), *want = malloc(len), *got = malloc(len + 1);
    if (!off || !buf || !want || !got)
        return 1;
    for (ssize_t r; (r = read(fd, buf, 1 << 20)) > 0;)
        ;
    uint64_t seed = 1;
    for (size_t i = 0; i < n; i++)
        off[i] = rng(&seed) % (size - len);
    memset(want, 'x', len);
    printf("file %s, %zu bytes; %zu keys of %zu bytes at random offsets; peak RSS before: %ld MB\n",
           argv[1], size, n, len, peak_mb());
    unsigned long eq = 0;
    double t0 = now();
    for (size_t i = 0; i < n; i++) {
        if (pread(fd, got, len + 1, (off_t)off[i]) < (ssize_t)len)
            return 1;
        eq += memcmp(got, want, len) == 0;
    }
    double tp = now() - t0;
    printf("pread:  %.0f ns a key, peak RSS %ld MB\n", tp / (double)n * 1e9, peak_mb());
    const unsigned char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        return 1;
    t0 = now();
    for (size_t i = 0; i < n; i++)
        eq += memcmp(m + off[i], want, len) == 0;
    double tm = now() - t0;
    printf("mapped: %.0f ns a key, peak RSS %ld MB (its pages touched count)\n",
           tm / (double)n * 1e9, peak_mb());
    printf("pread / mapped: %.2fx the time (%lu equal)\n", tp / tm, eq);
    return 0;
}
