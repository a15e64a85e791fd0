/*
 * gen_hll_corpus.c - writes the seeds of the fuzz_hll_load corpus into the
 * directory given (fuzz/corpus/hll_load/): empty, sparse and dense sketches
 * at a few precisions, and truncated and bit-flipped copies.  Not part of
 * the build; run by hand when the format changes:
 *
 *   cc -std=c11 -Iinclude fuzz/gen_hll_corpus.c build/libdedup.a -lxxhash -llz4 -lm \
 *      -o /tmp/gen && /tmp/gen fuzz/corpus/hll_load
 */
#include "dedup/hll.h"

#include <string.h>

#include "gen_util.h"

static dedup_status save_hll(const void *o, dedup_sink *s) { return dedup_hll_save(o, s); }

static unsigned char *hll_bytes(uint32_t p, uint64_t n, size_t *len)
{
    dedup_hll_params hp;
    dedup_hll_params_init(&hp);
    hp.precision = p;
    dedup_hll *h = NULL;
    if (dedup_hll_create(&hp, NULL, &h) != DEDUP_OK)
        exit(1);
    uint64_t x = 7;
    for (uint64_t i = 0; i < n; i++) {
        dedup_digest d;
        x = x * 6364136223846793005u + 1442695040888963407u;
        d.lo = x ^ (x >> 29);
        x = x * 6364136223846793005u + 1442695040888963407u;
        d.hi = x ^ (x >> 31);
        if (dedup_hll_add(h, d) != DEDUP_OK)
            exit(1);
    }
    unsigned char *buf = gen_saved(save_hll, h, (size_t)dedup_hll_serialized_size(h), len);
    dedup_hll_free(h);
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen DIR\n");
        return 2;
    }
    gen_dir = argv[1];
    static const struct { const char *name; uint32_t p; uint64_t n; } seeds[] = {
        {"p4_empty", 4, 0}, {"p4_dense", 4, 100}, {"p6_sparse", 6, 5},
        {"p8_sparse", 8, 20}, {"p8_dense", 8, 2000}, {"p10_sparse", 10, 100},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        size_t len;
        unsigned char *b = hll_bytes(seeds[i].p, seeds[i].n, &len);
        char name[64];
        snprintf(name, sizeof name, "%s.valid", seeds[i].name);
        put(name, b, len);
        snprintf(name, sizeof name, "%s.truncated", seeds[i].name);
        put(name, b, len - 9);
        b[len / 2] ^= 0x40;
        snprintf(name, sizeof name, "%s.flipped", seeds[i].name);
        put(name, b, len);
        free(b);
    }
    put("empty", (const unsigned char *)"", 0);
    return 0;
}
