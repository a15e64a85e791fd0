/*
 * bench_lz4.c - LZ4 block compression of a file cut into frames, at several
 * accelerations: ratio, packing and unpacking speed (best of 3 passes).
 *
 * This is how the external engine's LZ4_ACCEL (src/sort/extsort.c) was
 * chosen: spill streams are records in hash order, so the sample should be
 * shuffled lines, e.g.
 *
 *   shuf -n 2000000 --random-source=<(yes) urls-20000000.txt > sample.txt
 *   build/bench/bench_lz4 sample.txt 65536
 *
 * Usage: bench_lz4 FILE [FRAME_BYTES]   (FILE: a regular, non-empty file;
 * frame default 65536, as the engine uses from 64 MiB budgets on)
 */
#define _POSIX_C_SOURCE 200809L
#include <lz4.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The whole of a regular file (its size from fstat, one read). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (buf = malloc((size_t)st.st_size)) != NULL &&
        fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = buf ? (size_t)st.st_size : 0;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: bench_lz4 FILE [FRAME_BYTES]\n");
        return 2;
    }
    size_t frame = argc == 3 ? strtoul(argv[2], NULL, 10) : 65536;
    if (frame < 1024 || frame > (1u << 24)) {
        fprintf(stderr, "bench_lz4: frame bytes must be 1024..16777216, not %s\n", argv[2]);
        return 2;
    }
    size_t n;
    errno = 0;
    char *in = slurp(argv[1], &n);
    if (!in) {
        fprintf(stderr, "bench_lz4: %s: %s\n", argv[1],
                errno ? strerror(errno) : "not a regular, non-empty file");
        return 2;
    }
    int bound = LZ4_compressBound((int)frame);
    char *packed = malloc((n / frame + 1) * (size_t)bound);
    int *plen = malloc((n / frame + 1) * sizeof(int));
    char *out = malloc(frame);
    void *state = malloc((size_t)LZ4_sizeofState());
    if (!packed || !plen || !out || !state) {
        fprintf(stderr, "bench_lz4: out of memory\n");
        return 2;
    }
    printf("%s: %zu bytes in frames of %zu\n", argv[1], n, frame);
    printf("%5s %8s %12s %12s\n", "accel", "ratio", "pack MB/s", "unpack MB/s");
    static const int accels[] = {1, 2, 4, 6, 8, 16};
    for (size_t a = 0; a < sizeof accels / sizeof accels[0]; a++) {
        double best_p = 1e30, best_u = 1e30;
        size_t total = 0;
        for (int pass = 0; pass < 3; pass++) {
            double t0 = now();
            total = 0;
            size_t j = 0;
            for (size_t off = 0; off < n; off += frame, j++) {
                size_t raw = n - off < frame ? n - off : frame;
                plen[j] = LZ4_compress_fast_extState(state, in + off, packed + j * (size_t)bound,
                                                     (int)raw, bound, accels[a]);
                total += (size_t)plen[j];
            }
            double t1 = now();
            int bad = 0;
            j = 0;
            for (size_t off = 0; off < n; off += frame, j++) {
                size_t raw = n - off < frame ? n - off : frame;
                bad |= LZ4_decompress_safe(packed + j * (size_t)bound, out, plen[j], (int)frame) !=
                       (int)raw;
            }
            double t2 = now();
            j = 0;
            for (size_t off = 0; pass == 0 && off < n; off += frame, j++) {
                size_t raw = n - off < frame ? n - off : frame;
                bad |= LZ4_decompress_safe(packed + j * (size_t)bound, out, plen[j], (int)frame) !=
                           (int)raw ||
                       memcmp(out, in + off, raw) != 0;
            }
            if (bad) {
                fprintf(stderr, "bench_lz4: round trip failed at acceleration %d\n", accels[a]);
                return 1;
            }
            if (t1 - t0 < best_p)
                best_p = t1 - t0;
            if (t2 - t1 < best_u)
                best_u = t2 - t1;
        }
        printf("%5d %8.3f %12.0f %12.0f\n", accels[a], (double)total / (double)n,
               (double)n / best_p / 1e6, (double)n / best_u / 1e6);
    }
    free(in);
    free(packed);
    free(plen);
    free(out);
    free(state);
    return 0;
}
