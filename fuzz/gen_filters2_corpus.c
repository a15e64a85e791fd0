/*
 * gen_filters2_corpus.c - writes the seed corpus of fuzz_filters2_load:
 * small valid blobs of each type (counting, cuckoo, cuckoo chain, scalable
 * classic and blocked) and damaged copies (truncated, a flipped byte, a bad
 * field with a correct checksum).  Not built by CMake; run by hand:
 *   cc -std=c11 -Iinclude fuzz/gen_filters2_corpus.c build/libdedup.a -lxxhash -lm \
 *      -o /tmp/gen && /tmp/gen fuzz/corpus/filters2_load
 */
#define _POSIX_C_SOURCE 200809L
#include "dedup/counting.h"
#include "dedup/cuckoo.h"
#include "dedup/scalable.h"

#include <string.h>
#include <xxhash.h>

#include "gen_util.h"

/* The blob, plus damaged variants. */
static void variants(const char *base, unsigned char *b, size_t n)
{
    char name[256];
    snprintf(name, sizeof name, "%s.valid", base);
    put(name, b, n);
    snprintf(name, sizeof name, "%s.truncated", base);
    put(name, b, n / 2);
    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    c[n / 3] ^= 0x10;
    snprintf(name, sizeof name, "%s.flipped", base);
    put(name, c, n);
    /* first params word changed, checksum fixed up */
    memcpy(c, b, n);
    c[DEDUP_HEADER_SIZE] ^= 0xFF;
    dedup_put_u64(c + n - 8, XXH3_64bits(c, n - 8));
    snprintf(name, sizeof name, "%s.badparam", base);
    put(name, c, n);
    free(c);
}

static void emit(const char *base, uint64_t size, gen_save_fn save, const void *obj)
{
    size_t len;
    unsigned char *b = gen_saved(save, obj, (size_t)size, &len);
    variants(base, b, len);
    free(b);
}

static dedup_status save_counting(const void *o, dedup_sink *s) { return dedup_counting_save(o, s); }
static dedup_status save_cuckoo(const void *o, dedup_sink *s) { return dedup_cuckoo_save(o, s); }
static dedup_status save_scalable(const void *o, dedup_sink *s) { return dedup_scalable_save(o, s); }

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    gen_dir = argv[1];
    dedup_counting_params cp;
    dedup_counting_params_init(&cp);
    cp.capacity = 100;
    dedup_counting *cb;
    dedup_counting_create(&cp, NULL, &cb);
    for (uint64_t i = 0; i < 60; i++)
        dedup_counting_add(cb, dedup_hash_u64(i, cp.seed));
    for (int i = 0; i < 16; i++)
        dedup_counting_add(cb, dedup_hash_u64(7, cp.seed)); /* saturate some counters */
    emit("counting", dedup_counting_serialized_size(cb), save_counting, cb);
    dedup_counting_free(cb);

    for (int grow = 0; grow < 2; grow++) {
        dedup_cuckoo_params kp;
        dedup_cuckoo_params_init(&kp);
        kp.buckets = 13;
        kp.expansion = (uint32_t)grow;
        kp.fingerprint_bits = grow ? 12 : 7;
        kp.bucket_size = grow ? 4 : 3;
        dedup_cuckoo *cf;
        dedup_cuckoo_create(&kp, NULL, &cf);
        for (uint64_t i = 0; i < 70; i++)
            dedup_cuckoo_add(cf, dedup_hash_u64(i, kp.seed));
        emit(grow ? "cuckoo_chain" : "cuckoo", dedup_cuckoo_serialized_size(cf), save_cuckoo, cf);
        dedup_cuckoo_free(cf);
    }

    for (int kind = 0; kind < 2; kind++) {
        dedup_scalable_params sp;
        dedup_scalable_params_init(&sp);
        sp.kind = (dedup_bloom_kind)kind;
        sp.capacity = 8;
        sp.fpr = 0.05;
        dedup_scalable *sb;
        dedup_scalable_create(&sp, NULL, &sb);
        for (uint64_t i = 0; i < (kind ? 30u : 100u); i++)
            dedup_scalable_add(sb, dedup_hash_u64(i, sp.seed));
        emit(kind ? "scalable_blocked" : "scalable", dedup_scalable_serialized_size(sb), save_scalable,
             sb);
        dedup_scalable_free(sb);
    }
    return 0;
}
