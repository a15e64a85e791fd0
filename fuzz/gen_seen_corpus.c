/*
 * gen_seen_corpus.c - writes the seeds of the fuzz_seen_load corpus into the
 * directory given (fuzz/corpus/seen_load/): one small saved seen-set of
 * every kind that saves (exact, fingerprint, u64, bitmap from 0 and from
 * 1000, bloom, blocked, counting, cuckoo, cuckoo chain, scalable, exact and
 * approximate windows), a truncated one and one with a byte appended.
 * "bitmap-v1" is not made here: it is a bitmap file of the first params
 * layout (no origin), kept as libdedup wrote it, so that old files stay
 * loadable.  Not part of the
 * build; run by hand when a format changes:
 *
 *   cc -std=c11 -Iinclude fuzz/gen_seen_corpus.c build/libdedup.a -lxxhash -llz4 -lm -lpthread \
 *      -o /tmp/gen && /tmp/gen fuzz/corpus/seen_load
 */
#include "dedup/seen.h"

#include <string.h>

#include "gen_util.h"

static unsigned char *seen_bytes(const dedup_seen_spec *sp, size_t *len)
{
    dedup_seen *s = NULL;
    if (dedup_seen_create(sp, NULL, &s) != DEDUP_OK)
        exit(1);
    for (uint64_t i = 0; i < 40; i++) {
        char k[32];
        size_t l = (size_t)snprintf(k, sizeof k, "key-%llu", (unsigned long long)(i % 30));
        const unsigned char *kp = (const unsigned char *)k;
        dedup_digest d = dedup_hash(k, l, dedup_seen_seed(s));
        uint64_t v = sp->range_lo + i % 30;
        int64_t t = (int64_t)i * 1000;
        dedup_batch b = {.n = 1, .digests = &d, .keys = &kp, .lens = &l, .ints = &v, .times = &t};
        dedup_verdict out;
        if (dedup_seen_decide(s, &b, &out, NULL) != DEDUP_OK)
            exit(1);
    }
    uint64_t size = 0;
    dedup_sink cs = dedup_count_sink_init(&size);
    if (dedup_seen_save(s, &cs) != DEDUP_OK)
        exit(1);
    unsigned char *p = malloc((size_t)size + 1);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, p, (size_t)size);
    if (!p || dedup_seen_save(s, &sink) != DEDUP_OK)
        exit(1);
    *len = ms.len;
    dedup_seen_free(s);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    gen_dir = argv[1];
    struct {
        const char *name;
        dedup_seen_kind kind;
        uint64_t items;
        int wtype;
        bool approx;
        uint32_t expansion;
    } k[] = {
        {"exact", DEDUP_SEEN_EXACT, 0, 0, false, 0},
        {"fingerprint", DEDUP_SEEN_FINGERPRINT, 0, 0, false, 0},
        {"u64", DEDUP_SEEN_U64, 0, 0, false, 0},
        {"bitmap", DEDUP_SEEN_BITMAP, 0, 0, false, 0},
        {"bitmap-range", DEDUP_SEEN_BITMAP, 0, 0, false, 0},
        {"bloom", DEDUP_SEEN_BLOOM, 100, 0, false, 0},
        {"blocked", DEDUP_SEEN_BLOCKED, 100, 0, false, 0},
        {"counting", DEDUP_SEEN_COUNTING, 100, 0, false, 0},
        {"cuckoo", DEDUP_SEEN_CUCKOO, 100, 0, false, 0},
        {"cuckoo-chain", DEDUP_SEEN_CUCKOO, 8, 0, false, 2},
        {"scalable", DEDUP_SEEN_SCALABLE, 8, 0, false, 0},
        {"window-sliding", DEDUP_SEEN_WINDOW, 0, 0, false, 0},
        {"window-last-approx", DEDUP_SEEN_WINDOW, 64, 2, true, 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        dedup_seen_spec sp;
        dedup_seen_spec_init(&sp);
        sp.kind = k[i].kind;
        sp.items = k[i].items;
        sp.expansion = k[i].expansion;
        sp.window_type = k[i].wtype;
        sp.approximate = k[i].approx;
        sp.duration = 10000;
        sp.range_lo = strcmp(k[i].name, "bitmap-range") == 0 ? 1000 : 0;
        sp.range_hi = sp.range_lo + 1023;
        size_t len;
        unsigned char *p = seen_bytes(&sp, &len);
        put(k[i].name, p, len);
        if (i == 0) {
            put("exact-truncated", p, len - 3);
            p[len] = 0;
            put("exact-trailing-byte", p, len + 1);
        }
        free(p);
    }
    return 0;
}
