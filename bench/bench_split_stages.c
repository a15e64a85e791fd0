/*
 * bench_split_stages.c - what each step of `dedup split -N 16` costs, alone,
 * on one thread: the same steps as cli/split_file.c, one more per stage,
 * so the CPU seconds of consecutive stages (from /usr/bin/time) give each
 * step's price.  bench_split.sh runs it after the split/cat rounds.
 *
 *   bench_split_stages STAGE FILE [DIR]
 *
 *   lines  read FILE (1 MiB blocks, as split does), find every line end
 *          (64 bytes at a time, a bit mask of the newlines: SSE2, as
 *          split_file.c)
 *   hash   + XXH3-128 of every line (dedup_hash, the seed split uses)
 *   jump   + its part among 16 (dedup_jump_digest_batch, 8192 keys a call)
 *   copy   + append the line to its part's 1 MiB buffer (emptied, not
 *            written, when full)
 *   write  + write full buffers to DIR/0 .. DIR/15
 *
 * and, for comparison, the steps as they were before:
 *
 *   memchr  line ends with one memchr() a line
 *   jump1   + XXH3-128 + dedup_jump_digest() a key at a time
 *
 * Prints the line count and a checksum of the parts chosen.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "dedup/hash.h"
#include "dedup/ring.h"

#define PARTS 16u
#define CAP ((size_t)1 << 20)
#define BATCH 8192u
#define BLOCK ((size_t)1 << 20)

enum { LINES, HASH, JUMP, COPY, WRITE, MEMCHR, JUMP1, NSTAGES };

typedef struct run {
    int stage;
    const unsigned char *rp[BATCH];
    size_t rl[BATCH];
    dedup_digest dig[BATCH];
    uint32_t own[BATCH];
    size_t n;
    unsigned char *buf[PARTS];
    size_t len[PARTS];
    int out[PARTS];
    unsigned long long lines, sum;
} run;

/* The records gathered so far: their parts, then the copies and writes. */
static int flush(run *r)
{
    if (r->stage == JUMP || r->stage >= COPY)
        dedup_jump_digest_batch(r->dig, r->n, PARTS, r->own);
    for (size_t i = 0; r->stage >= JUMP && r->stage <= WRITE && i < r->n; i++) {
        uint32_t o = r->own[i];
        size_t n = r->rl[i];
        r->sum += o;
        if (r->stage < COPY)
            continue;
        if (r->len[o] + n + 1 > CAP) {
            if (r->stage == WRITE && write(r->out[o], r->buf[o], r->len[o]) != (ssize_t)r->len[o]) {
                perror("write");
                return 1;
            }
            r->len[o] = 0;
        }
        if (n + 1 <= CAP) { /* longer lines are only counted */
            memcpy(r->buf[o] + r->len[o], r->rp[i], n);
            r->buf[o][r->len[o] + n] = '\n';
            r->len[o] += n + 1;
        }
    }
    r->n = 0;
    return 0;
}

/* One line [p, p + n). */
static int line(run *r, const unsigned char *p, size_t n)
{
    r->lines++;
    if (r->stage == LINES || r->stage == MEMCHR)
        return 0;
    dedup_digest d = dedup_hash(p, n, DEDUP_DEFAULT_SEED);
    if (r->stage == HASH) {
        r->sum += d.lo ^ d.hi;
        return 0;
    }
    if (r->stage == JUMP1) {
        r->sum += dedup_jump_digest(d, PARTS);
        return 0;
    }
    r->rp[r->n] = p;
    r->rl[r->n] = n;
    r->dig[r->n++] = d;
    return r->n == BATCH ? flush(r) : 0;
}

/* The lines of in[0, len): all of them at the end of the file, else those
 * with their terminator.  Returns the bytes used, SIZE_MAX on a failure. */
static size_t scan(run *r, const unsigned char *in, size_t len, bool eof)
{
    const unsigned char *rec = in, *c = in, *end = in + len;
#ifdef __SSE2__
    const __m128i nl = _mm_set1_epi8('\n');
    for (; r->stage != MEMCHR && end - c >= 64; c += 64) {
        uint64_t mask = 0;
        for (int k = 0; k < 4; k++)
            mask |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(
                        _mm_loadu_si128((const __m128i *)(const void *)(c + 16 * k)), nl))
                    << (16 * k);
        while (mask) {
            const unsigned char *q = c + __builtin_ctzll(mask);
            mask &= mask - 1;
            if (line(r, rec, (size_t)(q - rec)))
                return SIZE_MAX;
            rec = q + 1;
        }
    }
#endif
    for (;;) {
        const unsigned char *q = c < end ? memchr(c, '\n', (size_t)(end - c)) : NULL;
        if (!q)
            break;
        if (line(r, rec, (size_t)(q - rec)))
            return SIZE_MAX;
        rec = c = q + 1;
    }
    if (eof && rec < end) {
        if (line(r, rec, (size_t)(end - rec)))
            return SIZE_MAX;
        rec = end;
    }
    return (size_t)(rec - in);
}

int main(int argc, char **argv)
{
    static const char *const names[NSTAGES] = {"lines", "hash", "jump", "copy",
                                               "write", "memchr", "jump1"};
    static run r;
    r.stage = -1;
    for (int i = 0; argc >= 3 && i < NSTAGES; i++)
        if (strcmp(argv[1], names[i]) == 0)
            r.stage = i;
    if (r.stage < 0 || (r.stage == WRITE && argc < 4)) {
        fputs("usage: bench_split_stages lines|hash|jump|copy|write|memchr|jump1 FILE [DIR]\n",
              stderr);
        return 2;
    }
    int fd = open(argv[2], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        perror(argv[2]);
        return 2;
    }
    for (unsigned i = 0; i < PARTS; i++) {
        r.buf[i] = malloc(CAP);
        if (!r.buf[i])
            return 2;
        r.out[i] = -1;
        if (r.stage == WRITE) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%u", argv[3], i);
            r.out[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (r.out[i] < 0) {
                perror(path);
                return 2;
            }
        }
    }
    /* the file in blocks of 1 MiB, as split reads it; the last, incomplete
     * line of a block moves to the front of the buffer for the next */
    size_t cap = 2 * BLOCK, have = 0;
    unsigned char *in = malloc(cap);
    if (!in)
        return 2;
    for (bool eof = false; !eof;) {
        if (have + BLOCK > cap) { /* a line longer than a block */
            unsigned char *g = realloc(in, cap *= 2);
            if (!g)
                return 2;
            in = g;
        }
        ssize_t got = read(fd, in + have, BLOCK);
        if (got < 0) {
            perror("read");
            return 1;
        }
        eof = got == 0;
        have += (size_t)got;
        size_t used = scan(&r, in, have, eof);
        if (used == SIZE_MAX || flush(&r)) /* no pointer into 'in' left */
            return 1;
        memmove(in, in + used, have - used);
        have -= used;
    }
    free(in);
    if (flush(&r))
        return 1;
    for (unsigned i = 0; i < PARTS; i++) {
        if (r.stage == WRITE &&
            (write(r.out[i], r.buf[i], r.len[i]) != (ssize_t)r.len[i] || close(r.out[i]) != 0)) {
            perror("write");
            return 1;
        }
        free(r.buf[i]);
    }
    printf("%llu lines, checksum %llx\n", r.lines, r.sum);
    return 0;
}
