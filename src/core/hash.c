/* hash.c - the 128-bit XXH3 digest (Debian's libxxhash).
 *
 * XXH_INLINE_ALL compiles XXH3 into this file (from the same Debian header)
 * instead of calling into libxxhash.so: for the 8- to 64-byte keys dedup
 * hashes, the call and its dispatch were a third of the hashing time. */
#include "dedup/hash.h"

#include <string.h>

#define XXH_INLINE_ALL
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
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(b, &key, sizeof b);
#else
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(key >> (8 * i));
#endif
    return dedup_hash(b, sizeof b, seed);
}
