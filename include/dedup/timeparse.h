/*
 * dedup/timeparse.h - event times from text: Unix epochs and ISO 8601.
 *
 * The window code (dedup/window.h) counts time in microseconds; these pure
 * functions turn a record's time field into that unit.  They use no locale,
 * no time zone database and no libc time conversion (the civil date is
 * turned into days arithmetically), so they are fast, thread-safe and give
 * the same result on every host.
 *
 * Accepted forms (the field may be surrounded by spaces or tabs, and may end
 * in '\r'):
 *  - DEDUP_TIME_EPOCH_S:  [-]seconds[.fraction], fraction up to 9 digits,
 *                         truncated to microseconds ("1700000000", "1.5")
 *  - DEDUP_TIME_EPOCH_MS: [-]milliseconds[.fraction] ("1700000000123")
 *  - DEDUP_TIME_EPOCH_US: [-]microseconds ("1700000000123456")
 *  - DEDUP_TIME_ISO8601:  YYYY-MM-DD, optionally followed by 'T', 't' or a
 *                         space and hh:mm[:ss[.fraction]] (',' also separates
 *                         the fraction; up to 9 digits, truncated to
 *                         microseconds), optionally followed by a zone: 'Z',
 *                         'z', +hh, +hh:mm, +hhmm (or '-').  Without a zone
 *                         the time is taken as UTC.  Years 0000-9999; the
 *                         day must exist in its month (leap years by the
 *                         Gregorian rule); hh 00-23, or 24:00[:00] meaning
 *                         the end of the day; mm 00-59; ss 00-60 (a leap
 *                         second counts as the next minute's :00, as POSIX
 *                         time does); zone offsets up to 23:59.
 *  - DEDUP_TIME_AUTO:     the format dedup_time_detect() gives the value.
 *
 * Results are microseconds since 1970-01-01T00:00:00Z, within
 * [DEDUP_TIME_MIN_US, DEDUP_TIME_MAX_US] (the window's time range).
 */
#ifndef DEDUP_TIMEPARSE_H
#define DEDUP_TIMEPARSE_H

#include "dedup/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dedup_time_format {
    DEDUP_TIME_AUTO = 0,
    DEDUP_TIME_EPOCH_S = 1,
    DEDUP_TIME_EPOCH_MS = 2,
    DEDUP_TIME_EPOCH_US = 3,
    DEDUP_TIME_ISO8601 = 4
} dedup_time_format;

#define DEDUP_TIME_MAX_US ((INT64_C(1) << 62) - 1)
#define DEDUP_TIME_MIN_US (-(INT64_C(1) << 62))

/* Parses the 'len' bytes at 's' (no NUL needed) in format 'fmt'.
 * Errors: DEDUP_ERR_INVALID_ARG (not a time in that format: syntax, a day
 * that does not exist, a field out of range), DEDUP_ERR_RANGE (a number
 * whose value lies outside the representable range).  *out_us is set only
 * on success. */
dedup_status dedup_time_parse(const char *s, size_t len, dedup_time_format fmt, int64_t *out_us);

/* The format a value looks like: DEDUP_TIME_ISO8601 if it starts with
 * YYYY-MM-DD; for a number, by the magnitude of its integer part:
 * below 10^11 seconds (until the year 5138), below 10^14 milliseconds,
 * otherwise microseconds.  DEDUP_TIME_AUTO if it is neither.  Callers that
 * read a stream detect once, on the first value, and keep the answer. */
dedup_time_format dedup_time_detect(const char *s, size_t len);

/* "epoch", "epoch_ms", "epoch_us", "iso8601" or "auto". */
const char *dedup_time_format_name(dedup_time_format fmt);
/* The inverse of the names above; false if 'name' is none of them. */
bool dedup_time_format_from_name(const char *name, dedup_time_format *out);

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (m 1-12,
 * d 1-31; not validated).  Exact for every year that fits an int32. */
int64_t dedup_days_from_civil(int64_t y, unsigned m, unsigned d);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_TIMEPARSE_H */
