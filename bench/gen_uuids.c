/*
 * gen_uuids.c - writes N random version-4 UUIDs, one per line, a given
 * fraction of them repeats of earlier ones, deterministically from a seed:
 * the message-ID / device-ID workload.
 *
 *   gen_uuids N [-r REPEAT_FRACTION=0.1] [-S SEED=1]
 *
 * A repeat copies a uniformly chosen earlier distinct UUID; UUIDs are derived
 * from their index by hashing, so nothing is kept in memory.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void uuid(char *o, uint64_t id, uint64_t seed)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t a = mix(id ^ seed), b = mix(a);
    a = (a & ~0xF000ull) | 0x4000ull;                      /* version 4 */
    b = (b & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull; /* variant */
    unsigned char bytes[16];
    for (int i = 0; i < 8; i++) {
        bytes[i] = (unsigned char)(a >> (56 - 8 * i));
        bytes[8 + i] = (unsigned char)(b >> (56 - 8 * i));
    }
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            o[k++] = '-';
        o[k++] = hex[bytes[i] >> 4];
        o[k++] = hex[bytes[i] & 15];
    }
    o[k++] = '\n';
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gen_uuids N [-r REPEAT_FRACTION] [-S SEED]\n");
        return 2;
    }
    uint64_t n = strtoull(argv[1], NULL, 10), seed = 1;
    double repeat = 0.1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-r") == 0)
            repeat = atof(argv[i + 1]);
        else if (strcmp(argv[i], "-S") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
    }
    static char buf[1 << 16];
    size_t len = 0;
    uint64_t distinct = 0, rng = seed * 0x2545F4914F6CDD1Dull + 1;
    for (uint64_t i = 0; i < n; i++) {
        rng = mix(rng);
        uint64_t id;
        if (distinct && (double)(rng >> 11) * 0x1.0p-53 < repeat)
            id = mix(rng ^ 0xABCDEFull) % distinct;
        else
            id = distinct++;
        if (len + 37 > sizeof buf) {
            fwrite(buf, 1, len, stdout);
            len = 0;
        }
        uuid(buf + len, id, seed);
        len += 37;
    }
    fwrite(buf, 1, len, stdout);
    return fflush(stdout) ? 1 : 0;
}
