/*
 * fuzz_set_load.c - the exact-set loaders (strings, digests, u64) on
 * arbitrary bytes.  The first byte picks the loader; the rest is the blob.
 * A load must either fail cleanly or give a set that answers queries and
 * re-saves to as many bytes as it read.  A memory source may hold more
 * after the container (an RDB stream does), so that is what it read, not
 * the whole input; files with trailing bytes are refused by the file loader
 * (src/core/format.c), not here.
 */
#include <stdint.h>
#include <stdlib.h>

#include "dedup/set.h"

static void check_strset(const uint8_t *d, size_t n)
{
    dedup_mem_source m;
    dedup_strset *s = NULL;
    if (dedup_strset_load(dedup_mem_source_init(&m, d, n), NULL, &s) != DEDUP_OK)
        return;
    (void)dedup_strset_contains(s, "x", 1, dedup_strset_digest(s, "x", 1));
    uint64_t size;
    dedup_sink cs = dedup_count_sink_init(&size);
    if (dedup_strset_save(s, &cs) != DEDUP_OK || size != m.pos)
        abort();
    dedup_strset_free(s);
}

static void check_digestset(const uint8_t *d, size_t n)
{
    dedup_mem_source m;
    dedup_digestset *s = NULL;
    if (dedup_digestset_load(dedup_mem_source_init(&m, d, n), NULL, &s) != DEDUP_OK)
        return;
    dedup_digest x = {1, 2};
    (void)dedup_digestset_contains(s, x);
    uint64_t size;
    dedup_sink cs = dedup_count_sink_init(&size);
    if (dedup_digestset_save(s, &cs) != DEDUP_OK || size != m.pos)
        abort();
    dedup_digestset_free(s);
}

static void check_u64set(const uint8_t *d, size_t n)
{
    dedup_mem_source m;
    dedup_u64set *s = NULL;
    if (dedup_u64set_load(dedup_mem_source_init(&m, d, n), NULL, &s) != DEDUP_OK)
        return;
    (void)dedup_u64set_contains(s, 42);
    uint64_t size;
    dedup_sink cs = dedup_count_sink_init(&size);
    if (dedup_u64set_save(s, &cs) != DEDUP_OK || size != m.pos)
        abort();
    dedup_u64set_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: check_strset(data + 1, size - 1); break;
    case 1: check_digestset(data + 1, size - 1); break;
    default: check_u64set(data + 1, size - 1); break;
    }
    return 0;
}
