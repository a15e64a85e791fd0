/*
 * xxh3_collide - lines that share one XXH3-128 digest under a known seed.
 *
 *   xxh3_collide pair   [--seed S] [--len L]      two different lines, one digest
 *   xxh3_collide flood N [--seed S] [--len L]     N distinct lines, one digest
 *   xxh3_collide random N [--seed S] [--len L] [--rng R]
 *                                                 N random lines of the same shape
 *
 * The seed defaults to DEDUP_DEFAULT_SEED, the public one.  Every line is L
 * bytes (default 300, at least 256) plus '\n'; it holds no NUL, '\n', '\r',
 * TAB or ','.  Each generated line is hashed with dedup_hash() here and the
 * program fails (exit 1, a message on stderr) if any digest differs from the
 * first one, so a test that uses it can trust its input is a real collision.
 *
 * How it works.  For inputs longer than 240 bytes XXH3 reads 64-byte stripes;
 * for stripe s, 64-bit lane i, with d the data word and k the secret word at
 * offset 8s + 8i, it adds d to acc[i ^ 1] and lo32(d ^ k) * hi32(d ^ k) to
 * acc[i].  If the high 32 bits of d equal those of k the product is zero and
 * the stripe adds only d.  Take the same lane in two stripes s1 and s2 of the
 * first block, fix both high halves that way, and choose their low halves x1
 * and x2 with x1 + x2 constant: every accumulator ends the same, so the
 * digest does not depend on which (x1, x2) was chosen.  Here each byte of x1
 * is 0x30 + a digit in [0, 64] and the byte of x2 beside it is 0xA0 minus
 * that, so the sum holds byte by byte without carries and every free byte is
 * printable: 65^4 distinct lines.  The fixed bytes come from the secret; a
 * lane is chosen whose fixed bytes avoid the separators above.  The stripes
 * used end before byte 192, away from the last stripe (the final 64 bytes,
 * read again with another secret offset).
 */
#include "dedup/hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEN 4096
#define DIGITS 65u /* values of one free byte */

static int bad_byte(unsigned char c)
{
    return c == 0 || c == '\n' || c == '\r' || c == '\t' || c == ',';
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The secret XXH3 derives from 'seed' (XXH3_initCustomSecret). */
static void custom_secret(unsigned char *sec, uint64_t seed)
{
    for (int i = 0; i < XXH_SECRET_DEFAULT_SIZE / 16; i++) {
        uint64_t lo = rd64(XXH3_kSecret + 16 * i) + seed;
        uint64_t hi = rd64(XXH3_kSecret + 16 * i + 8) - seed;
        for (int b = 0; b < 8; b++) {
            sec[16 * i + b] = (unsigned char)(lo >> (8 * b));
            sec[16 * i + 8 + b] = (unsigned char)(hi >> (8 * b));
        }
    }
}

struct plan {
    size_t off1, off2; /* byte offsets of the two words */
};

/* Find a lane and two stripes whose fixed bytes are no separators, and
 * write those fixed bytes into 'line'.  Returns 0, or -1 if none fits. */
static int choose(unsigned char *line, const unsigned char *sec, struct plan *pl)
{
    static const int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
    for (int p = 0; p < 3; p++) {
        for (int lane = 0; lane < 8; lane++) {
            size_t w1 = (size_t)(8 * pairs[p][0] + 8 * lane);
            size_t w2 = (size_t)(8 * pairs[p][1] + 8 * lane);
            int ok = 1;
            for (int b = 4; b < 8; b++)
                ok &= !bad_byte(sec[w1 + b]) && !bad_byte(sec[w2 + b]);
            if (!ok)
                continue;
            pl->off1 = (size_t)(64 * pairs[p][0] + 8 * lane);
            pl->off2 = (size_t)(64 * pairs[p][1] + 8 * lane);
            memcpy(line + pl->off1 + 4, sec + w1 + 4, 4);
            memcpy(line + pl->off2 + 4, sec + w2 + 4, 4);
            return 0;
        }
    }
    return -1;
}

/* Variant 'k' (< 65^4): the free low halves of the two words. */
static void variant(unsigned char *line, const struct plan *pl, uint64_t k)
{
    for (int b = 0; b < 4; b++) {
        unsigned d = (unsigned)(k % DIGITS);
        k /= DIGITS;
        line[pl->off1 + b] = (unsigned char)(0x30 + d);
        line[pl->off2 + b] = (unsigned char)(0xA0 - (0x30 + d));
    }
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int usage(void)
{
    fprintf(stderr, "usage: xxh3_collide pair|flood N|random N [--seed S] [--len L] [--rng R]\n");
    return 2;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int emit(const unsigned char *line, size_t len)
{
    return fwrite(line, 1, len, stdout) == len && putchar('\n') != EOF ? 0 : -1;
}

int main(int argc, char **argv)
{
    uint64_t seed = DEDUP_DEFAULT_SEED, len = 300, n = 2, rng = 1;
    int a = 2;
    if (argc < 2)
        return usage();
    const char *mode = argv[1];
    if (strcmp(mode, "pair") != 0) {
        if (argc < 3 || parse_u64(argv[2], &n) != 0)
            return usage();
        a = 3;
    }
    for (; a + 1 < argc; a += 2) {
        uint64_t *dst = !strcmp(argv[a], "--seed") ? &seed
                      : !strcmp(argv[a], "--len") ? &len
                      : !strcmp(argv[a], "--rng") ? &rng : NULL;
        if (!dst || parse_u64(argv[a + 1], dst) != 0)
            return usage();
    }
    if (a != argc || len < 256 || len > MAX_LEN)
        return usage();

    unsigned char line[MAX_LEN];
    if (!strcmp(mode, "random")) {
        for (uint64_t k = 0; k < n; k++) {
            for (size_t i = 0; i < len; i++)
                line[i] = (unsigned char)(0x30 + splitmix(&rng) % 0x4B); /* '0'..'z' */
            if (emit(line, len) != 0)
                return 1;
        }
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (strcmp(mode, "pair") != 0 && strcmp(mode, "flood") != 0)
        return usage();
    uint64_t most = (uint64_t)DIGITS * DIGITS * DIGITS * DIGITS;
    if (n > most) {
        fprintf(stderr, "xxh3_collide: at most %" PRIu64 " lines\n", most);
        return 2;
    }

    unsigned char sec[XXH_SECRET_DEFAULT_SIZE];
    custom_secret(sec, seed);
    for (size_t i = 0; i < len; i++)
        line[i] = (unsigned char)('a' + i % 26);
    struct plan pl;
    if (choose(line, sec, &pl) != 0) {
        fprintf(stderr, "xxh3_collide: no lane fits seed 0x%016" PRIx64 "\n", seed);
        return 1;
    }
    dedup_digest first = {0, 0};
    for (uint64_t k = 0; k < n; k++) {
        variant(line, &pl, k);
        dedup_digest d = dedup_hash(line, len, seed);
        XXH128_hash_t x = XXH3_128bits_withSeed(line, len, seed);
        if (k == 0)
            first = d;
        if (d.lo != first.lo || d.hi != first.hi || x.low64 != d.lo || x.high64 != d.hi) {
            fprintf(stderr, "xxh3_collide: line %" PRIu64 " has another digest "
                    "(%016" PRIx64 "%016" PRIx64 " vs %016" PRIx64 "%016" PRIx64 ")\n",
                    k, d.hi, d.lo, first.hi, first.lo);
            return 1;
        }
        if (emit(line, len) != 0)
            return 1;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
