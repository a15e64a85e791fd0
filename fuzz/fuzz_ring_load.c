/*
 * fuzz_ring_load.c - dedup_ring_load() on arbitrary bytes.
 *
 * Whatever the input, loading must either fail cleanly (and leave *out
 * NULL) or give a ring that routes: every lookup returns a node of the
 * ring, the shares add up to one, a diff against itself moves nothing, and
 * it saves to exactly dedup_ring_serialized_size() bytes, which are the
 * bytes it was loaded from.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/ring.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load(const uint8_t *data, size_t size)
{
    dedup_mem_source ms;
    dedup_ring *r = (dedup_ring *)1;
    if (dedup_ring_load(dedup_mem_source_init(&ms, data, size), NULL, &r) != DEDUP_OK) {
        check(r == NULL);
        return;
    }
    uint32_t n = dedup_ring_node_count(r);
    for (uint64_t i = 0; i < 64; i++) {
        dedup_digest d = dedup_hash_u64(i, 7);
        uint32_t o = dedup_ring_lookup(r, d);
        check(n ? o < n : o == DEDUP_RING_NONE);
    }
    if (n) {
        double s = 0;
        for (uint32_t i = 0; i < n && i < 64; i++)
            s += dedup_ring_node_share(r, i);
        check(n > 64 || fabs(s - 1) < 1e-9);
    }
    double moved = 1;
    check(dedup_ring_diff(r, r, NULL, NULL, &moved) == DEDUP_OK && moved == 0);
    uint64_t want = dedup_ring_serialized_size(r);
    check(want == ms.pos);
    unsigned char *buf = malloc(want);
    if (buf) {
        dedup_mem_sink sm;
        dedup_sink sink = dedup_mem_sink_init(&sm, buf, want);
        check(dedup_ring_save(r, &sink) == DEDUP_OK && sm.len == want);
        check(memcmp(buf, data, want) == 0);
        free(buf);
    }
    dedup_ring_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_container(data, size, load);
    return 0;
}
