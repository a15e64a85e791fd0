/*
 * fuzz_seen_util.h - what the fuzz targets that load seen-sets share: one
 * query of a loaded set, string and integer forms at once.
 */
#ifndef DEDUP_FUZZ_SEEN_UTIL_H
#define DEDUP_FUZZ_SEEN_UTIL_H

#include "dedup/seen.h"
#include "fuzz_util.h"

/* Queries one key ("x", or 42 for integer kinds): a loaded set must answer. */
static inline void fuzz_query_one(const dedup_seen *s, uint64_t seed)
{
    dedup_digest dg = dedup_hash("x", 1, seed);
    const unsigned char *key = (const unsigned char *)"x";
    size_t len = 1;
    uint64_t v = 42;
    dedup_batch b = {.n = 1, .digests = &dg, .keys = &key, .lens = &len, .ints = &v};
    dedup_verdict out;
    (void)dedup_seen_query(s, &b, &out);
}

#endif
