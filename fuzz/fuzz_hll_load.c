/*
 * fuzz_hll_load.c - dedup_hll_load() on arbitrary bytes (and again with the
 * checksum recomputed, so mutations reach the field checks).  A load must
 * fail cleanly or give a sketch that estimates, takes more digests, merges
 * with itself and a fresh sketch, and re-saves to as many bytes as it read.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "dedup/hll.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load_one(const uint8_t *d, size_t n)
{
    dedup_mem_source m;
    dedup_hll *h = NULL;
    if (dedup_hll_load(dedup_mem_source_init(&m, d, n), NULL, &h) != DEDUP_OK) {
        check(h == NULL);
        return;
    }
    uint64_t size;
    dedup_sink cs = dedup_count_sink_init(&size);
    check(dedup_hll_save(h, &cs) == DEDUP_OK && size == m.pos);
    check(dedup_hll_serialized_size(h) == m.pos);
    double e = dedup_hll_estimate(h);
    check(e >= 0 && !isnan(e));
    for (uint64_t r = 0; r < dedup_hll_registers(h); r++)
        check(dedup_hll_register(h, r) <= DEDUP_HLL_MAX_RANK);
    dedup_hll_params p;
    dedup_hll_params_init(&p);
    p.precision = dedup_hll_precision(h);
    p.seed = dedup_hll_seed(h);
    dedup_hll *fresh = NULL;
    check(dedup_hll_create(&p, NULL, &fresh) == DEDUP_OK);
    check(dedup_hll_merge(fresh, h, NULL, 0) == DEDUP_OK);
    check(dedup_hll_equal(fresh, h));
    check(dedup_hll_merge(h, h, NULL, 0) == DEDUP_OK);
    for (uint64_t i = 0; i < 64; i++) {
        dedup_digest dg = {i * 0x9E3779B97F4A7C15u, ~i * 0xBF58476D1CE4E5B9u};
        check(dedup_hll_add(h, dg) == DEDUP_OK);
    }
    dedup_hll_free(fresh);
    dedup_hll_free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_container(data, size, load_one);
    return 0;
}
