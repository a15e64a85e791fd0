/*
 * bench_split_stages.c - what each step of `dedup split -N 16` costs, alone,
 * on one thread: the same steps as cli/split_mapped.c, one more per stage,
 * so the CPU seconds of consecutive stages (from /usr/bin/time) give each
 * step's price.  bench_split.sh runs it after the split/cat rounds.
 *
 *   bench_split_stages STAGE FILE [DIR]
 *
 *   lines  map FILE, find every line end (memchr)
 *   hash   + XXH3-128 of every line (dedup_hash, the seed split uses)
 *   jump   + its part among 16 (dedup_jump_digest)
 *   copy   + append the line to its part's 1 MiB buffer (emptied, not
 *            written, when full)
 *   write  + write full buffers to DIR/0 .. DIR/15
 *
 * Prints the line count and a checksum of the parts chosen.
 */
#define _DEFAULT_SOURCE /* madvise */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dedup/hash.h"
#include "dedup/ring.h"

#define PARTS 16u
#define CAP ((size_t)1 << 20)

int main(int argc, char **argv)
{
    static const char *const names[] = {"lines", "hash", "jump", "copy", "write"};
    int stage = -1;
    for (int i = 0; argc >= 3 && i < 5; i++)
        if (strcmp(argv[1], names[i]) == 0)
            stage = i;
    if (stage < 0 || (stage == 4 && argc < 4)) {
        fputs("usage: bench_split_stages lines|hash|jump|copy|write FILE [DIR]\n", stderr);
        return 2;
    }
    int fd = open(argv[2], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        perror(argv[2]);
        return 2;
    }
    size_t size = (size_t)st.st_size;
    const unsigned char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    (void)madvise((void *)(uintptr_t)m, size, MADV_SEQUENTIAL);
    unsigned char *buf[PARTS];
    size_t len[PARTS] = {0};
    int out[PARTS];
    for (unsigned i = 0; i < PARTS; i++) {
        buf[i] = malloc(CAP);
        if (!buf[i])
            return 2;
        out[i] = -1;
        if (stage == 4) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%u", argv[3], i);
            out[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (out[i] < 0) {
                perror(path);
                return 2;
            }
        }
    }
    unsigned long long lines = 0, sum = 0;
    const unsigned char *p = m, *end = m + size;
    while (p < end) {
        const unsigned char *q = memchr(p, '\n', (size_t)(end - p));
        if (!q)
            q = end;
        size_t n = (size_t)(q - p);
        lines++;
        if (stage >= 1) {
            dedup_digest d = dedup_hash(p, n, DEDUP_DEFAULT_SEED);
            if (stage == 1) {
                sum += d.lo ^ d.hi;
            } else {
                uint32_t o = dedup_jump_digest(d, PARTS);
                sum += o;
                if (stage >= 3) {
                    if (len[o] + n + 1 > CAP) {
                        if (stage == 4 && write(out[o], buf[o], len[o]) != (ssize_t)len[o]) {
                            perror("write");
                            return 1;
                        }
                        len[o] = 0;
                    }
                    if (n + 1 <= CAP) { /* longer lines are only counted */
                        memcpy(buf[o] + len[o], p, n);
                        buf[o][len[o] + n] = '\n';
                        len[o] += n + 1;
                    }
                }
            }
        }
        p = q + 1;
    }
    for (unsigned i = 0; i < PARTS; i++) {
        if (stage == 4 && (write(out[i], buf[i], len[i]) != (ssize_t)len[i] || close(out[i]) != 0)) {
            perror("write");
            return 1;
        }
        free(buf[i]);
    }
    printf("%llu lines, checksum %llx\n", lines, sum);
    return 0;
}
