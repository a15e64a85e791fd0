/*
 * gen_roaring_corpus.c - writes the seeds of the fuzz_roaring_load corpus
 * into the directory given (fuzz/corpus/roaring_load/): empty, arrays,
 * a bitset, runs, several high-32-bit buckets, and truncated and
 * bit-flipped copies.  Not part of the build; run by hand when the format
 * changes:
 *
 *   cc -std=c11 -Iinclude fuzz/gen_roaring_corpus.c \
 *      build/backends/roaring/libdedup_roaring.a build/libdedup.a -lroaring -lxxhash -llz4 -lm \
 *      -o /tmp/gen && /tmp/gen fuzz/corpus/roaring_load
 */
#include "dedup/roaring.h"

#include <string.h>

#include "gen_util.h"

static dedup_status save_seen(const void *o, dedup_sink *s) { return dedup_seen_save(o, s); }

static unsigned char *bytes(int shape, size_t *len)
{
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_ROARING;
    dedup_seen *s = NULL;
    if (dedup_roaring_seen_create(&sp, NULL, &s) != DEDUP_OK)
        exit(1);
    uint64_t ints[6000];
    size_t n = 0;
    if (shape == 1)
        for (; n < 20; n++)
            ints[n] = n * 1000 + 3;
    if (shape == 2)
        for (; n < 5000; n++)
            ints[n] = n * 7;
    if (shape == 3)
        for (; n < 6000; n++)
            ints[n] = 100000 + n;
    if (shape == 4)
        for (; n < 40; n++)
            ints[n] = (n % 4) << 32 | n;
    dedup_verdict v[6000];
    dedup_batch b = {.n = n, .ints = ints};
    if (dedup_seen_decide(s, &b, v, NULL) != DEDUP_OK)
        exit(1);
    uint64_t size = 0;
    dedup_sink cs = dedup_count_sink_init(&size);
    if (dedup_seen_save(s, &cs) != DEDUP_OK)
        exit(1);
    unsigned char *buf = gen_saved(save_seen, s, (size_t)size, len);
    dedup_seen_free(s);
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen DIR\n");
        return 2;
    }
    gen_dir = argv[1];
    static const char *const names[] = {"empty", "arrays", "bitset", "run", "buckets"};
    for (int i = 0; i < 5; i++) {
        size_t len;
        unsigned char *b = bytes(i, &len);
        char name[64];
        snprintf(name, sizeof name, "%s.valid", names[i]);
        put(name, b, len);
        snprintf(name, sizeof name, "%s.truncated", names[i]);
        put(name, b, len - 9);
        b[len / 2] ^= 0x04;
        snprintf(name, sizeof name, "%s.flipped", names[i]);
        put(name, b, len);
        free(b);
    }
    put("zero", (const unsigned char *)"", 0);
    return 0;
}
