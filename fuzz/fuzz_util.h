/*
 * fuzz_util.h - what the container-loader fuzz targets share.
 *
 * fuzz_container() runs 'load' on the input as it is, then once more with
 * the checksum recomputed over the bytes it covers, so that mutations of
 * the header, params and payload reach the loaders' field checks instead
 * of all stopping at the checksum.
 */
#ifndef DEDUP_FUZZ_UTIL_H
#define DEDUP_FUZZ_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/format.h"

/* Aborts (a crash libFuzzer reports) when an invariant does not hold. */
static inline void check(int cond)
{
    if (!cond)
        abort();
}

static inline void fuzz_container(const uint8_t *data, size_t size,
                                  void (*load)(const uint8_t *data, size_t size))
{
    load(data, size);
    if (size < DEDUP_HEADER_SIZE + DEDUP_TRAILER_SIZE)
        return;
    unsigned char *c = malloc(size);
    if (!c)
        return;
    memcpy(c, data, size);
    uint64_t plen = dedup_get_u32(c + 20), len = dedup_get_u64(c + 32);
    uint64_t end = size - DEDUP_TRAILER_SIZE;
    if (plen <= size && len <= size && DEDUP_HEADER_SIZE + plen + len < end)
        end = DEDUP_HEADER_SIZE + plen + len;
    dedup_put_u64(c + end, XXH3_64bits(c, (size_t)end));
    load(c, size);
    free(c);
}

#endif
