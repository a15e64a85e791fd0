/*
 * fuzz_roaring_load.c - the roaring component's loader on arbitrary bytes
 * (and again with the checksum recomputed, so mutations reach the bucket
 * and portable-format checks).  A load must fail cleanly or give a seen-set
 * that answers, takes more keys, deletes, and saves to as many bytes as it
 * read.  Built only with the component (fuzz/CMakeLists.txt).
 */
#include <stdint.h>
#include <stdlib.h>

#include "dedup/roaring.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load_one(const uint8_t *d, size_t n)
{
    dedup_mem_source m;
    dedup_seen *s = NULL;
    if (dedup_roaring_seen_load(dedup_mem_source_init(&m, d, n), NULL, &s) != DEDUP_OK) {
        check(s == NULL);
        return;
    }
    uint64_t size;
    dedup_sink cs = dedup_count_sink_init(&size);
    check(dedup_seen_save(s, &cs) == DEDUP_OK && size == m.pos);
    uint64_t ints[64];
    dedup_verdict v[64];
    for (size_t i = 0; i < 64; i++)
        ints[i] = (i < n ? d[i] : i) * UINT64_C(0x10001) + (i & 3) * (UINT64_C(1) << 32);
    dedup_batch b = {.n = 64, .ints = ints};
    check(dedup_seen_query(s, &b, v) == DEDUP_OK);
    check(dedup_seen_decide(s, &b, v, NULL) == DEDUP_OK);
    check(dedup_seen_delete(s, &b, NULL) == DEDUP_OK);
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    check(in.distinct_exact);
    dedup_seen_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_container(data, size, load_one);
    return 0;
}
