/* hash.c - the 128-bit XXH3 digest (Debian's libxxhash).
 *
 * XXH_INLINE_ALL compiles XXH3 into this file (from the same Debian header)
 * instead of calling into libxxhash.so: for the 8- to 64-byte keys dedup
 * hashes, the call and its dispatch were a third of the hashing time. */
#define _GNU_SOURCE /* getrandom() */
#include "dedup/hash.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

dedup_status dedup_secret_seed(uint64_t *seed)
{
    uint64_t v;
    do {
        unsigned char b[8];
        size_t got = 0;
        while (got < sizeof b) {
            ssize_t n = getrandom(b + got, sizeof b - got, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return DEDUP_ERR_IO;
            got += (size_t)n;
        }
        v = 0;
        for (int i = 7; i >= 0; i--)
            v = v << 8 | b[i];
    } while (v == 0 || v == DEDUP_DEFAULT_SEED);
    *seed = v;
    return DEDUP_OK;
}

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
