/*
 * gen_bloom_corpus.c - writes the seed corpus of fuzz_bloom_load into the
 * directory given (fuzz/corpus/bloom_load/): small valid classic, blocked
 * and bitmap files, and truncated, bit-flipped and hand-corrupted copies.
 * The bitmap_v1_* files are not made here: bitmaps of the first params
 * layout (no origin), kept as libdedup wrote them, so that old files stay
 * loadable.
 * Not part of the build; run by hand when the format changes:
 *
 *   cc -std=c11 -Iinclude fuzz/gen_bloom_corpus.c build/libdedup.a -lxxhash -lm \
 *      -o /tmp/gen && /tmp/gen fuzz/corpus/bloom_load
 */
#include "dedup/bitmap.h"
#include "dedup/bloom.h"

#include <string.h>

#include "gen_util.h"

static dedup_status save_bloom(const void *o, dedup_sink *s) { return dedup_bloom_save(o, s); }
static dedup_status save_bitmap(const void *o, dedup_sink *s) { return dedup_bitmap_save(o, s); }

static unsigned char *bloom_bytes(dedup_bloom_kind kind, uint64_t n, double p, uint64_t bits,
                                  size_t *len)
{
    dedup_bloom_params pa;
    dedup_bloom_params_init(&pa);
    pa.kind = kind;
    pa.capacity = n;
    pa.fpr = p;
    pa.bits = bits;
    dedup_bloom *bf;
    if (dedup_bloom_create(&pa, NULL, &bf))
        exit(1);
    for (uint64_t i = 0; i < n; i++)
        dedup_bloom_add(bf, dedup_hash_u64(i, dedup_bloom_seed(bf)));
    unsigned char *buf = gen_saved(save_bloom, bf, (size_t)dedup_bloom_serialized_size(bf), len);
    dedup_bloom_free(bf);
    return buf;
}

static unsigned char *bitmap_bytes(uint64_t nbits, uint64_t origin, size_t *len)
{
    dedup_bitmap_params pa = {.nbits = nbits, .origin = origin};
    dedup_bitmap *bm;
    if (dedup_bitmap_create(&pa, NULL, &bm))
        exit(1);
    for (uint64_t i = 0; i < nbits; i += 7)
        dedup_bitmap_set(bm, i);
    unsigned char *buf = gen_saved(save_bitmap, bm, (size_t)dedup_bitmap_serialized_size(bm), len);
    dedup_bitmap_free(bm);
    return buf;
}

/* Valid file plus damaged variants. */
static void family(const char *stem, unsigned char *buf, size_t len)
{
    char name[128];
    snprintf(name, sizeof name, "%s_valid", stem);
    put(name, buf, len);
    snprintf(name, sizeof name, "%s_trunc_header", stem);
    put(name, buf, 20);
    snprintf(name, sizeof name, "%s_trunc_params", stem);
    put(name, buf, 50);
    snprintf(name, sizeof name, "%s_trunc_payload", stem);
    put(name, buf, len - 9 - (len - 48) / 2);
    snprintf(name, sizeof name, "%s_trunc_checksum", stem);
    put(name, buf, len - 3);
    unsigned char *c = malloc(len + 4);
    memcpy(c, buf, len);
    c[len / 2] ^= 0x10;
    snprintf(name, sizeof name, "%s_flip_payload", stem);
    put(name, c, len);
    memcpy(c, buf, len);
    c[40 + 16] ^= 0x01; /* bits / nbits field */
    snprintf(name, sizeof name, "%s_flip_params", stem);
    put(name, c, len);
    memcpy(c, buf, len);
    c[32] += 8; /* payload length lies */
    snprintf(name, sizeof name, "%s_payload_len", stem);
    put(name, c, len);
    memcpy(c, buf, len);
    memcpy(c + len, "junk", 4);
    snprintf(name, sizeof name, "%s_trailing", stem);
    put(name, c, len + 4);
    free(c);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    gen_dir = argv[1];
    size_t len;
    unsigned char *b;
    b = bloom_bytes(DEDUP_BLOOM_CLASSIC, 100, 0.01, 0, &len);
    family("classic_100_1pct", b, len);
    free(b);
    b = bloom_bytes(DEDUP_BLOOM_CLASSIC, 50, 0.001, 1001, &len);
    put("classic_bits1001_valid", b, len);
    free(b);
    b = bloom_bytes(DEDUP_BLOOM_BLOCKED, 200, 0.01, 0, &len);
    family("blocked_200_1pct", b, len);
    free(b);
    b = bloom_bytes(DEDUP_BLOOM_BLOCKED, 20, 0.0001, 0, &len);
    put("blocked_20_001pct_valid", b, len);
    free(b);
    b = bitmap_bytes(1000, 0, &len);
    family("bitmap_1000", b, len);
    free(b);
    b = bitmap_bytes(64, 0, &len);
    put("bitmap_64_valid", b, len);
    free(b);
    b = bitmap_bytes(1001, 1000, &len);
    family("bitmap_origin_1000", b, len);
    dedup_put_u64(b + 48, UINT64_MAX - 999); /* the last integer would pass 2^64 - 1 */
    put("bitmap_origin_overflow", b, len);
    free(b);
    put("empty", (const unsigned char *)"", 0);
    return 0;
}
