/*
 * roaring_format.c - a validator of the Roaring portable serialization
 * (dedup/roaring.h), so that CRoaring only ever reads bytes known to be a
 * well-formed bitmap: its 0.2 "safe" reader bounds its reads but does not
 * check that arrays are sorted or runs disjoint, which later operations
 * rely on.
 *
 * The layout, from the Roaring format specification:
 *   cookie u32: 12346 (no run containers), then the container count u32;
 *               or 12347 | (count - 1) << 16, then ceil(count / 8) bytes of
 *               run flags (bit i of byte i / 8: container i is a run);
 *   count x (key u16, cardinality - 1 u16), keys strictly increasing;
 *   offsets: count x u32 (always with 12346; with 12347 when count >= 4),
 *            each the container's byte position from the start;
 *   containers: run: nruns u16, then nruns x (start u16, length - 1 u16);
 *               array (cardinality <= 4096): cardinality x u16, increasing;
 *               bitset: 8192 bytes, popcount = cardinality.
 */
#include "dedup/roaring.h"

#include <string.h>

#define COOKIE_NO_RUN 12346u
#define COOKIE_RUN 12347u
#define NO_OFFSET_THRESHOLD 4u
#define ARRAY_MAX 4096u

static inline uint32_t rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t rd32(const unsigned char *p)
{
    return rd16(p) | rd16(p + 2) << 16;
}

bool dedup_roaring_portable_valid(const void *buf, size_t len, uint64_t *cardinality)
{
    const unsigned char *p = buf;
    if (cardinality)
        *cardinality = 0;
    if (!p || len < 4)
        return false;
    uint32_t cookie = rd32(p);
    size_t pos = 4;
    uint32_t n;
    const unsigned char *runs = NULL;
    bool offsets;
    if ((cookie & 0xFFFFu) == COOKIE_RUN) {
        n = (cookie >> 16) + 1;
        size_t rb = (n + 7) / 8;
        if (len - pos < rb)
            return false;
        runs = p + pos;
        pos += rb;
        offsets = n >= NO_OFFSET_THRESHOLD;
    } else if (cookie == COOKIE_NO_RUN) {
        if (len - pos < 4)
            return false;
        n = rd32(p + pos);
        pos += 4;
        offsets = true;
        if (n > 65536)
            return false;
    } else {
        return false;
    }
    const size_t head = pos;
    if ((len - pos) / 4 < n)
        return false;
    pos += (size_t)n * 4;
    const size_t offs = pos;
    if (offsets) {
        if ((len - pos) / 4 < n)
            return false;
        pos += (size_t)n * 4;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t key = rd16(p + head + 4 * (size_t)i);
        uint32_t card = rd16(p + head + 4 * (size_t)i + 2) + 1;
        if (i > 0 && key <= rd16(p + head + 4 * (size_t)(i - 1)))
            return false;
        if (offsets && rd32(p + offs + 4 * (size_t)i) != pos)
            return false;
        bool is_run = runs && (runs[i / 8] >> (i % 8)) & 1;
        if (is_run) {
            if (len - pos < 2)
                return false;
            uint32_t nr = rd16(p + pos);
            pos += 2;
            if ((len - pos) / 4 < nr || nr == 0)
                return false;
            uint64_t sum = 0;
            int64_t prev_end = -1;
            for (uint32_t r = 0; r < nr; r++) {
                uint32_t start = rd16(p + pos), l = rd16(p + pos + 2);
                pos += 4;
                if ((int64_t)start <= prev_end || start + l > 65535u)
                    return false; /* overlapping, unsorted, or past the chunk */
                prev_end = (int64_t)(start + l);
                sum += (uint64_t)l + 1;
            }
            if (sum != card)
                return false;
        } else if (card <= ARRAY_MAX) {
            if ((len - pos) / 2 < card)
                return false;
            for (uint32_t j = 1; j < card; j++)
                if (rd16(p + pos + 2 * (size_t)j) <= rd16(p + pos + 2 * (size_t)(j - 1)))
                    return false;
            pos += (size_t)card * 2;
        } else {
            if (len - pos < 8192)
                return false;
            uint64_t pop = 0;
            for (size_t w = 0; w < 8192; w += 8) {
                uint64_t x;
                memcpy(&x, p + pos + w, 8); /* popcount does not care about byte order */
                pop += (uint64_t)__builtin_popcountll(x);
            }
            if (pop != card)
                return false;
            pos += 8192;
        }
        total += card;
    }
    if (pos != len)
        return false;
    if (cardinality)
        *cardinality = total;
    return true;
}
