/*
 * fuzz_filters2_load.c - libFuzzer target for the counting Bloom, cuckoo
 * (fixed and chain) and scalable Bloom loaders.  Each input goes to all
 * three loaders through a memory source.  A filter that loads is queried,
 * written to, saved and reloaded, and the copy must answer the same.  Each
 * input is also loaded with a correct outer checksum written where the
 * header says it belongs, so mutated params and payloads reach the field
 * checks.  Seed corpus: fuzz/corpus/filters2_load/ (made by
 * fuzz/gen_filters2_corpus.c).
 */
#include "dedup/counting.h"
#include "dedup/cuckoo.h"
#include "dedup/scalable.h"

#include <stdlib.h>
#include <string.h>
#include "fuzz_util.h"


#define MAX_SAVE (1u << 24)

static void exercise_counting(dedup_counting *cb)
{
    dedup_digest d = dedup_counting_digest(cb, "fuzz", 4);
    dedup_counting_add(cb, d);
    check(dedup_counting_might_contain(cb, d));
    check(dedup_counting_count(cb, d) >= 1);
    check(dedup_counting_delete(cb, d) == DEDUP_OK);
    check(dedup_counting_saturated(cb) <= dedup_counting_counters(cb));
    double f = dedup_counting_current_fpr(cb);
    check(f >= 0.0 && f <= 1.0);
    uint64_t size = dedup_counting_serialized_size(cb);
    if (size > MAX_SAVE)
        return;
    unsigned char *buf = malloc(size);
    if (!buf)
        return;
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    check(dedup_counting_save(cb, &sink) == DEDUP_OK && ms.len == size);
    dedup_mem_source src;
    dedup_counting *back = NULL;
    check(dedup_counting_load(dedup_mem_source_init(&src, buf, size), NULL, &back) == DEDUP_OK);
    check(dedup_counting_saturated(back) == dedup_counting_saturated(cb));
    check(dedup_counting_count(back, d) == dedup_counting_count(cb, d));
    check(dedup_counting_merge(back, cb) == DEDUP_OK);
    dedup_counting_free(back);
    free(buf);
}

static void exercise_cuckoo(dedup_cuckoo *cf)
{
    dedup_digest d = dedup_cuckoo_digest(cf, "fuzz", 4);
    dedup_cuckoo_info info;
    dedup_cuckoo_get_info(cf, &info);
    check(info.items <= info.slots && info.links >= 1);
    dedup_status s = dedup_cuckoo_add(cf, d);
    check(s == DEDUP_OK || s == DEDUP_ERR_FULL || s == DEDUP_ERR_NOMEM);
    if (s == DEDUP_OK) {
        check(dedup_cuckoo_might_contain(cf, d));
        check(dedup_cuckoo_count(cf, d) >= 1);
    }
    uint64_t size = dedup_cuckoo_serialized_size(cf);
    if (size > MAX_SAVE)
        return;
    unsigned char *buf = malloc(size);
    if (!buf)
        return;
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    check(dedup_cuckoo_save(cf, &sink) == DEDUP_OK && ms.len == size);
    dedup_mem_source src;
    dedup_cuckoo *back = NULL;
    check(dedup_cuckoo_load(dedup_mem_source_init(&src, buf, size), NULL, &back) == DEDUP_OK);
    check(dedup_cuckoo_count(back, d) == dedup_cuckoo_count(cf, d));
    if (s == DEDUP_OK)
        check(dedup_cuckoo_delete(back, d) == DEDUP_OK);
    dedup_cuckoo_free(back);
    free(buf);
}

static void exercise_scalable(dedup_scalable *sb)
{
    dedup_digest d = dedup_scalable_digest(sb, "fuzz", 4);
    dedup_scalable_info info;
    dedup_scalable_get_info(sb, &info);
    check(info.links >= 1 && info.fpr_bound <= info.fpr * (1 + 1e-9));
    dedup_verdict v;
    dedup_status s = dedup_scalable_test_and_add(sb, d, &v);
    if (s == DEDUP_OK)
        check(dedup_scalable_might_contain(sb, d));
    uint64_t size = dedup_scalable_serialized_size(sb);
    if (size > MAX_SAVE)
        return;
    unsigned char *buf = malloc(size);
    if (!buf)
        return;
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    check(dedup_scalable_save(sb, &sink) == DEDUP_OK && ms.len == size);
    dedup_mem_source src;
    dedup_scalable *back = NULL;
    check(dedup_scalable_load(dedup_mem_source_init(&src, buf, size), NULL, &back) == DEDUP_OK);
    check(dedup_scalable_might_contain(back, d) == dedup_scalable_might_contain(sb, d));
    dedup_scalable_free(back);
    free(buf);
}

static void load_all(const uint8_t *data, size_t size)
{
    dedup_mem_source src;
    dedup_counting *cb = NULL;
    if (dedup_counting_load(dedup_mem_source_init(&src, data, size), NULL, &cb) == DEDUP_OK) {
        exercise_counting(cb);
        dedup_counting_free(cb);
    } else {
        check(cb == NULL);
    }
    dedup_cuckoo *cf = NULL;
    if (dedup_cuckoo_load(dedup_mem_source_init(&src, data, size), NULL, &cf) == DEDUP_OK) {
        exercise_cuckoo(cf);
        dedup_cuckoo_free(cf);
    } else {
        check(cf == NULL);
    }
    dedup_scalable *sb = NULL;
    if (dedup_scalable_load(dedup_mem_source_init(&src, data, size), NULL, &sb) == DEDUP_OK) {
        exercise_scalable(sb);
        dedup_scalable_free(sb);
    } else {
        check(sb == NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_container(data, size, load_all);
    return 0;
}
