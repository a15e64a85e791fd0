/*
 * fuzz_timeparse.c - dedup_time_parse() and dedup_time_detect() on arbitrary
 * bytes: never read past the length, never accept a value outside the
 * documented range, and AUTO agrees with parsing in the detected format.
 */
#include <stdint.h>
#include <stdlib.h>

#include "dedup/timeparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    for (int f = DEDUP_TIME_AUTO; f <= DEDUP_TIME_ISO8601; f++) {
        int64_t v = 0;
        dedup_status st = dedup_time_parse(s, size, (dedup_time_format)f, &v);
        if (st == DEDUP_OK && (v < DEDUP_TIME_MIN_US || v > DEDUP_TIME_MAX_US))
            abort();
        if (st != DEDUP_OK && st != DEDUP_ERR_INVALID_ARG && st != DEDUP_ERR_RANGE)
            abort();
    }
    dedup_time_format d = dedup_time_detect(s, size);
    int64_t a = 0, b = 0;
    dedup_status sa = dedup_time_parse(s, size, DEDUP_TIME_AUTO, &a);
    if (d != DEDUP_TIME_AUTO) {
        dedup_status sb = dedup_time_parse(s, size, d, &b);
        if (sa != sb || (sa == DEDUP_OK && a != b))
            abort();
    } else if (sa == DEDUP_OK) {
        abort();
    }
    return 0;
}
