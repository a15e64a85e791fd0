/*
 * read_floor.c - the work every dedup mode does before deciding anything,
 * and nothing else: read standard input in 1 MiB blocks, find each line's
 * end and take its 128-bit XXH3 digest, on one thread.  bench_lines.sh runs
 * it beside `cat FILE > /dev/null` so that a run shows how much of the
 * 1.5x-of-cat budget is already spent before a single probe or write.
 *
 *   read_floor < FILE      prints the line count and a checksum of the digests
 *   read_floor -m FILE     the same through mmap(2) instead of read(2)
 *
 * The -m form shows that mapping does not make the file cheaper: the first
 * touch of page-cache memory costs what read(2)'s copy costs, it only moves
 * from system time to user time.
 */
#define _GNU_SOURCE /* memrchr */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

static unsigned long long lines, sum;

static void lines_of(const unsigned char *p, size_t n)
{
    const unsigned char *e = p + n;
    while (p < e) {
        const unsigned char *q = memchr(p, '\n', (size_t)(e - p));
        if (!q)
            q = e;
        XXH128_hash_t h = XXH3_128bits(p, (size_t)(q - p));
        sum += h.low64 ^ h.high64;
        lines++;
        p = q + 1;
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "-m") == 0) {
        int fd = open(argv[2], O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            perror(argv[2]);
            return 2;
        }
        if (st.st_size > 0) {
            unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (m == MAP_FAILED) {
                perror("mmap");
                return 2;
            }
            lines_of(m, (size_t)st.st_size);
        }
    } else if (argc == 1) {
        size_t cap = (size_t)1 << 20, carry = 0;
        unsigned char *b = malloc(cap);
        if (!b)
            return 2;
        for (;;) {
            if (carry == cap) { /* one line fills the buffer */
                unsigned char *nb = realloc(b, cap * 2);
                if (!nb)
                    return 2;
                b = nb;
                cap *= 2;
            }
            ssize_t r = read(STDIN_FILENO, b + carry, cap - carry);
            if (r < 0) {
                perror("read");
                return 2;
            }
            if (r == 0)
                break;
            size_t len = carry + (size_t)r;
            unsigned char *t = memrchr(b, '\n', len);
            size_t used = t ? (size_t)(t - b) + 1 : 0;
            lines_of(b, used);
            carry = len - used;
            memmove(b, b + used, carry);
        }
        lines_of(b, carry);
        free(b);
    } else {
        fputs("usage: read_floor < FILE | read_floor -m FILE\n", stderr);
        return 2;
    }
    printf("%llu lines, digest sum %016llx\n", lines, sum);
    return 0;
}
