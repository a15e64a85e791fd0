/* hash.c - the 128-bit XXH3 digest (Debian's libxxhash). */
#include "dedup/hash.h"

#include <xxhash.h>

dedup_digest dedup_hash(const void *key, size_t len, uint64_t seed)
{
    XXH128_hash_t h = XXH3_128bits_withSeed(len ? key : "", len, seed);
    dedup_digest d = {h.low64, h.high64};
    return d;
}

dedup_digest dedup_hash_u64(uint64_t key, uint64_t seed)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(key >> (8 * i));
    return dedup_hash(b, sizeof b, seed);
}
