/*
 * ref_access.c - what one comparison against a file's bytes costs, the
 * three ways exact mode by reference could read them (bench/results/byref.md):
 * pread(2) of 80 bytes at a random offset; a random byte of a mapping whose
 * pages are dropped (MADV_DONTNEED) every 4096 accesses, so that nearly
 * every access faults the page in again; and a random byte of a mapping
 * kept whole.  The file should be in the page cache (cat FILE > /dev/null).
 *
 *   cc -O2 -o ref_access bench/ref_access.c && ./ref_access FILE [N=2000000]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ref_access FILE [N]\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 256) {
        perror(argv[1]);
        return 1;
    }
    uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 2000000, x = 88172645463325252ull;
    uint64_t span = (uint64_t)st.st_size - 128;
    unsigned long sum = 0;
    char buf[128];
    double t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        if (pread(fd, buf, 80, (off_t)(next(&x) % span)) != 80)
            return 1;
        sum += (unsigned char)buf[3];
    }
    double t1 = now();
    printf("pread of 80 bytes:                   %6.0f ns each\n", (t1 - t0) / (double)n * 1e9);
    unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    (void)madvise(m, (size_t)st.st_size, MADV_RANDOM);
    t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        sum += m[next(&x) % span];
        if ((i & 4095) == 4095)
            (void)madvise(m, (size_t)st.st_size, MADV_DONTNEED);
    }
    t1 = now();
    printf("mapping, pages dropped behind:       %6.0f ns each\n", (t1 - t0) / (double)n * 1e9);
    t0 = now();
    for (uint64_t i = 0; i < n; i++)
        sum += m[next(&x) % span];
    t1 = now();
    printf("mapping kept whole:                  %6.0f ns each (one miss, not overlapped)\n",
           (t1 - t0) / (double)n * 1e9);
    printf("(checksum %lu)\n", sum);
    return 0;
}
