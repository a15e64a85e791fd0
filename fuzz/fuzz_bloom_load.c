/*
 * fuzz_bloom_load.c - libFuzzer target for the Bloom filter and bitmap
 * loaders.  Each input is given to dedup_bloom_load and dedup_bitmap_load
 * through a memory source (which knows the input's length, so a lying
 * length is refused before any allocation).  When a load succeeds the
 * filter is queried, added to, measured, saved and reloaded, and the
 * reloaded copy must equal it.  Each input is also loaded a second time
 * with a correct checksum written where the header says it belongs, so the
 * fuzzer's mutations of params and payload reach the field checks instead
 * of all stopping at the checksum.  Seed corpus: fuzz/corpus/bloom_load/
 * (made by fuzz/gen_bloom_corpus.c).
 */
#include "dedup/bitmap.h"
#include "dedup/bloom.h"

#include <stdlib.h>
#include <string.h>
#include "fuzz_util.h"


static void exercise_bloom(dedup_bloom *bf)
{
    dedup_digest d = dedup_bloom_digest(bf, "fuzz", 4);
    (void)dedup_bloom_might_contain(bf, d);
    dedup_bloom_add(bf, d);
    check(dedup_bloom_might_contain(bf, d));
    check(dedup_bloom_test_and_add(bf, d));
    double fill = dedup_bloom_fill_ratio(bf);
    check(fill > 0.0 && fill <= 1.0);
    (void)dedup_bloom_estimate_count(bf);
    double f = dedup_bloom_current_fpr(bf);
    check(f >= 0.0 && f <= 1.0);

    uint64_t size = dedup_bloom_serialized_size(bf);
    if (size > (1u << 24))
        return;
    unsigned char *buf = malloc(size);
    if (!buf)
        return;
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    check(dedup_bloom_save(bf, &sink) == DEDUP_OK && ms.len == size);
    dedup_mem_source src;
    dedup_bloom *back = NULL;
    check(dedup_bloom_load(dedup_mem_source_init(&src, buf, size), NULL, &back) == DEDUP_OK);
    check(dedup_bloom_bits(back) == dedup_bloom_bits(bf) && dedup_bloom_k(back) == dedup_bloom_k(bf));
    check(dedup_bloom_popcount(back) == dedup_bloom_popcount(bf));
    check(dedup_bloom_might_contain(back, d));
    check(dedup_bloom_union(back, bf) == DEDUP_OK);
    dedup_bloom_free(back);
    free(buf);
}

static void exercise_bitmap(dedup_bitmap *bm)
{
    uint64_t n = dedup_bitmap_size(bm);
    uint64_t pop = dedup_bitmap_popcount(bm);
    check(pop <= n);
    bool was;
    check(dedup_bitmap_test_and_set(bm, n - 1, &was) == DEDUP_OK);
    check(dedup_bitmap_popcount(bm) == pop + !was);
    check(dedup_bitmap_set(bm, n) == DEDUP_ERR_RANGE);
    uint64_t size = dedup_bitmap_serialized_size(bm);
    if (size > (1u << 24))
        return;
    unsigned char *buf = malloc(size);
    if (!buf)
        return;
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    check(dedup_bitmap_save(bm, &sink) == DEDUP_OK && ms.len == size);
    dedup_mem_source src;
    dedup_bitmap *back = NULL;
    check(dedup_bitmap_load(dedup_mem_source_init(&src, buf, size), NULL, &back) == DEDUP_OK);
    check(dedup_bitmap_size(back) == n && dedup_bitmap_origin(back) == dedup_bitmap_origin(bm));
    check(n - 1 <= UINT64_MAX - dedup_bitmap_origin(bm)); /* the last integer fits */
    check(dedup_bitmap_xor(back, bm) == DEDUP_OK && dedup_bitmap_popcount(back) == 0);
    dedup_bitmap_free(back);
    free(buf);
}

static void load_both(const uint8_t *data, size_t size)
{
    dedup_mem_source src;
    dedup_bloom *bf = NULL;
    if (dedup_bloom_load(dedup_mem_source_init(&src, data, size), NULL, &bf) == DEDUP_OK) {
        exercise_bloom(bf);
        dedup_bloom_free(bf);
    } else {
        check(bf == NULL);
    }
    dedup_bitmap *bm = NULL;
    if (dedup_bitmap_load(dedup_mem_source_init(&src, data, size), NULL, &bm) == DEDUP_OK) {
        exercise_bitmap(bm);
        dedup_bitmap_free(bm);
    } else {
        check(bm == NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_container(data, size, load_both);
    return 0;
}
