/*
 * blacklist.c - a two-layer blacklist: a blocked Bloom filter in memory in
 * front, the exact list in a persistent store (RocksDB) behind it.
 *
 *   blacklist [DIR [BAD [CHECKS]]]
 *
 * Puts BAD synthetic "bad" URLs into the store in DIR (created if missing),
 * rebuilds the filter from the store (the articles' "rebuild, then
 * switch"), then checks CHECKS URLs, a tenth of them bad, through the stack
 * (dedup/tiers.h): the filter's "certainly not listed" lets an item through
 * without touching the store; its "maybe" is confirmed by the store, so a
 * false positive of the filter never blocks a good item.  Exits 1 if any
 * bad item passed or any good item was blocked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/seen.h"
#include "dedup/store.h"
#include "dedup/tiers.h"

#define BATCH 1024

static int die(const char *what, dedup_status st, const char *why)
{
    fprintf(stderr, "blacklist: %s: %s%s%s\n", what, dedup_strerror(st), why ? ": " : "",
            why ? why : "");
    return 1;
}

/* URL i: "http://bad.example/<i>" for the listed ones, ".../good/<i>" else. */
static size_t url(char *buf, size_t cap, unsigned long i, int bad)
{
    return (size_t)snprintf(buf, cap, "http://%s.example/page/%lu", bad ? "bad" : "good", i);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "blacklist.db";
    unsigned long nbad = argc > 2 ? strtoul(argv[2], NULL, 10) : 100000;
    unsigned long nchk = argc > 3 ? strtoul(argv[3], NULL, 10) : 200000;
    static char text[BATCH][64];
    static const unsigned char *keys[BATCH];
    static size_t lens[BATCH];
    static dedup_digest dig[BATCH];
    static dedup_verdict v[BATCH];
    static int is_bad[BATCH];

    /* 1. The exact list, on disk. */
    dedup_store_params sp;
    dedup_store_params_init(&sp);
    sp.dir = dir;
    dedup_store *store;
    char why[512];
    dedup_status st = dedup_store_create(&sp, NULL, &store, why, sizeof why);
    if (st)
        return die("open the store", st, why);
    /* A new store draws a secret seed; every digest of this program and the
     * filter in front use it, so the filter and the store agree. */
    dedup_seen *store_seen;
    if ((st = dedup_store_as_seen(store, NULL, &store_seen)))
        return die("wrap the store", st, NULL);
    uint64_t seed = dedup_seen_seed(store_seen);
    for (unsigned long i = 0; i < nbad; i += BATCH) {
        size_t n = nbad - i < BATCH ? nbad - i : BATCH;
        for (size_t j = 0; j < n; j++) {
            lens[j] = url(text[j], sizeof text[j], i + j, 1);
            dig[j] = dedup_hash(text[j], lens[j], seed);
        }
        dedup_batch b = {.n = n, .digests = dig};
        if ((st = dedup_store_decide(store, &b, v, NULL)))
            return die("add to the store", st, dedup_store_last_error(store));
    }

    /* 2. The filter in front, rebuilt from the store. */
    dedup_seen_spec fs;
    dedup_seen_spec_init(&fs);
    fs.kind = DEDUP_SEEN_BLOCKED;
    fs.items = nbad ? nbad : 1;
    fs.fpr = 0.01;
    fs.seed = seed;
    dedup_seen *filter;
    if ((st = dedup_seen_create(&fs, NULL, &filter)))
        return die("create the filter", st, NULL);
    uint64_t loaded = 0;
    if ((st = dedup_store_fill(store, filter, &loaded)))
        return die("rebuild the filter", st, dedup_store_last_error(store));
    dedup_tier tiers[2] = {{.seen = filter, .name = "filter", .covers_below = true},
                           {.seen = store_seen, .name = "store"}};
    dedup_tiers_spec ts = {.tiers = tiers, .n = 2};
    dedup_seen *stack;
    const dedup_tiers *view;
    if ((st = dedup_tiers_create(&ts, NULL, &stack, &view)))
        return die("build the stack", st, NULL);

    /* 3. Check: query only (a check records nothing). */
    unsigned long blocked = 0, passed = 0, wrong = 0;
    for (unsigned long i = 0; i < nchk; i += BATCH) {
        size_t n = nchk - i < BATCH ? nchk - i : BATCH;
        for (size_t j = 0; j < n; j++) {
            unsigned long k = i + j;
            is_bad[j] = k % 10 == 0 && nbad;
            lens[j] = url(text[j], sizeof text[j], is_bad[j] ? (k / 10) % nbad : k, is_bad[j]);
            keys[j] = (const unsigned char *)text[j];
            dig[j] = dedup_hash(text[j], lens[j], seed);
        }
        dedup_batch b = {.n = n, .digests = dig, .keys = keys, .lens = lens};
        if ((st = dedup_seen_query(stack, &b, v)))
            return die("check", st, NULL);
        for (size_t j = 0; j < n; j++) {
            int block = v[j] != DEDUP_NEW; /* listed */
            blocked += block;
            passed += !block;
            if (block != is_bad[j]) {
                wrong++;
                fprintf(stderr, "blacklist: WRONG: %s %s\n", text[j], block ? "blocked" : "passed");
            }
        }
    }
    dedup_tiers_stats s;
    dedup_tiers_get_stats(view, &s);
    printf("blacklist: %lu listed (filter rebuilt from the store: %llu keys)\n", nbad,
           (unsigned long long)loaded);
    printf("checked %lu: %lu blocked, %lu passed, %lu wrong\n", nchk, blocked, passed, wrong);
    printf("filter: %llu 'maybe' sent to the store, of which %llu were false positives the "
           "store cleared; %llu good items passed without a store read (%.1f%%)\n",
           (unsigned long long)s.tier[0].passed_down,
           (unsigned long long)(s.tier[0].passed_down - s.tier[1].hits),
           (unsigned long long)s.tier[0].ended_new,
           passed ? 100.0 * (double)s.tier[0].ended_new / (double)passed : 0.0);
    dedup_seen_free(stack);
    return wrong ? 1 : 0;
}
