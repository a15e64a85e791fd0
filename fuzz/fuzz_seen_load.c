/*
 * fuzz_seen_load.c - dedup_seen_load() (dedup/seen.h) on arbitrary bytes:
 * the one loader that dispatches on the header's type to every kind.  A
 * load must fail cleanly or give a seen-set that answers, reports itself
 * and re-saves to exactly the input (nothing may follow the container:
 * dedup_seen_load refuses trailing bytes), but for a bitmap of the first
 * params layout, which re-saves 8 bytes longer in the second.
 */
#include <stdint.h>
#include <stdlib.h>

#include "dedup/seen.h"
#include "fuzz_seen_util.h"

static void load(const uint8_t *d, size_t n)
{
    dedup_mem_source m;
    dedup_seen *s = NULL;
    if (dedup_seen_load(dedup_mem_source_init(&m, d, n), NULL, &s) != DEDUP_OK) {
        check(s == NULL);
        return;
    }
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    check(in.kind == dedup_seen_kind_of_file_type(in.file_type));
    fuzz_query_one(s, in.seed);
    if (in.kind == DEDUP_SEEN_BITMAP)
        check(in.range_hi - in.range_lo + 1 == in.bits);
    uint64_t size = 0;
    dedup_sink cs = dedup_count_sink_init(&size);
    /* A bitmap of the first params layout (8 bytes, no origin) re-saves in
     * the second (16 bytes). */
    uint64_t grown = in.kind == DEDUP_SEEN_BITMAP && n >= 24 && dedup_get_u32(d + 20) == 8 ? 8 : 0;
    check(dedup_seen_save(s, &cs) == DEDUP_OK && size == n + grown);
    dedup_seen_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_container(data, size, load);
    return 0;
}
