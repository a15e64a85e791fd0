/*
 * timeparse.c - Unix epochs and ISO 8601 to microseconds, without libc time.
 *
 * dedup_days_from_civil() counts days in 400-year eras (146097 days each):
 * shifting the year to start in March puts the leap day at the end, so the
 * day of the year is a closed formula of the month, (153 * m' + 2) / 5.
 */
#include "dedup/timeparse.h"

#include <string.h>

int64_t dedup_days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                /* [0, 399] */
    int64_t mp = (int64_t)m + (m > 2 ? -3 : 9);                 /* March = 0 */
    int64_t doy = (153 * mp + 2) / 5 + (int64_t)d - 1;          /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;        /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Exactly n digits at s[*i]; advances *i. */
static bool digits(const char *s, size_t len, size_t *i, int n, int *out)
{
    int v = 0;
    for (int k = 0; k < n; k++) {
        if (*i >= len || !is_digit(s[*i]))
            return false;
        v = v * 10 + (s[(*i)++] - '0');
    }
    *out = v;
    return true;
}

/* An optional fraction after '.' or ',' (1..9 digits) as microseconds. */
static bool fraction_us(const char *s, size_t len, size_t *i, int64_t *us)
{
    *us = 0;
    if (*i >= len || (s[*i] != '.' && s[*i] != ','))
        return true;
    (*i)++;
    int n = 0;
    int64_t scale = 100000;
    while (*i < len && is_digit(s[*i])) {
        if (++n > 9)
            return false;
        *us += (s[*i] - '0') * scale;
        scale /= 10;
        (*i)++;
    }
    return n > 0;
}

static void trim(const char **s, size_t *len)
{
    while (*len && ((*s)[0] == ' ' || (*s)[0] == '\t')) {
        (*s)++;
        (*len)--;
    }
    while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t' || (*s)[*len - 1] == '\r'))
        (*len)--;
}

static bool leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static dedup_status parse_iso(const char *s, size_t len, int64_t *out)
{
    static const unsigned char mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    size_t i = 0;
    int Y, M, Dd, h = 0, mi = 0, sec = 0;
    int64_t frac = 0;
    if (!digits(s, len, &i, 4, &Y) || i >= len || s[i++] != '-' || !digits(s, len, &i, 2, &M) ||
        i >= len || s[i++] != '-' || !digits(s, len, &i, 2, &Dd))
        return DEDUP_ERR_INVALID_ARG;
    if (M < 1 || M > 12 || Dd < 1 || Dd > mdays[M - 1] + (M == 2 && leap(Y)))
        return DEDUP_ERR_INVALID_ARG;
    int64_t offset_s = 0;
    if (i < len && (s[i] == 'T' || s[i] == 't' || s[i] == ' ')) {
        i++;
        if (!digits(s, len, &i, 2, &h) || i >= len || s[i++] != ':' || !digits(s, len, &i, 2, &mi))
            return DEDUP_ERR_INVALID_ARG;
        if (i < len && s[i] == ':') {
            i++;
            if (!digits(s, len, &i, 2, &sec) || !fraction_us(s, len, &i, &frac))
                return DEDUP_ERR_INVALID_ARG;
        }
        if (mi > 59 || sec > 60 || h > 24 || (h == 24 && (mi || sec || frac)))
            return DEDUP_ERR_INVALID_ARG;
        if (i < len) {
            char c = s[i];
            if (c == 'Z' || c == 'z') {
                i++;
            } else if (c == '+' || c == '-') {
                i++;
                int oh, om = 0;
                if (!digits(s, len, &i, 2, &oh))
                    return DEDUP_ERR_INVALID_ARG;
                if (i < len && s[i] == ':') {
                    i++;
                    if (!digits(s, len, &i, 2, &om))
                        return DEDUP_ERR_INVALID_ARG;
                } else if (i < len && is_digit(s[i])) {
                    if (!digits(s, len, &i, 2, &om))
                        return DEDUP_ERR_INVALID_ARG;
                }
                if (oh > 23 || om > 59)
                    return DEDUP_ERR_INVALID_ARG;
                offset_s = (int64_t)(oh * 3600 + om * 60) * (c == '+' ? 1 : -1);
            }
        }
    }
    if (i != len)
        return DEDUP_ERR_INVALID_ARG;
    int64_t days = dedup_days_from_civil(Y, (unsigned)M, (unsigned)Dd);
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_s;
    *out = secs * 1000000 + frac; /* |secs| < 2^39: no overflow */
    return DEDUP_OK;
}

/* [-]digits[.fraction]; 'unit' microseconds per integer unit.  Fraction
 * digits beyond the ninth are accepted and ignored (truncation). */
static dedup_status parse_epoch(const char *s, size_t len, int64_t unit, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    size_t start = i;
    uint64_t v = 0;
    bool over = false;
    while (i < len && is_digit(s[i])) {
        if (v > (UINT64_MAX - 9) / 10)
            over = true;
        else
            v = v * 10 + (uint64_t)(s[i] - '0');
        i++;
    }
    if (i == start)
        return DEDUP_ERR_INVALID_ARG;
    int64_t frac_us = 0;
    if (i < len && s[i] == '.') {
        if (unit == 1)
            return DEDUP_ERR_INVALID_ARG; /* no fraction of a microsecond */
        i++;
        size_t fs = i;
        uint64_t num = 0, den = 1;
        while (i < len && is_digit(s[i])) {
            if (i - fs < 9) {
                num = num * 10 + (uint64_t)(s[i] - '0');
                den *= 10;
            }
            i++;
        }
        if (i == fs)
            return DEDUP_ERR_INVALID_ARG;
        frac_us = (int64_t)(num * (uint64_t)unit / den); /* num < 1e9, unit <= 1e6 */
    }
    if (i != len)
        return DEDUP_ERR_INVALID_ARG;
    if (over || v > (uint64_t)DEDUP_TIME_MAX_US / (uint64_t)unit)
        return DEDUP_ERR_RANGE;
    int64_t r = (int64_t)v * unit + frac_us;
    if (r > DEDUP_TIME_MAX_US)
        return DEDUP_ERR_RANGE;
    *out = neg ? -r : r;
    return DEDUP_OK;
}

dedup_status dedup_time_parse(const char *s, size_t len, dedup_time_format fmt, int64_t *out_us)
{
    if ((!s && len) || !out_us)
        return DEDUP_ERR_INVALID_ARG;
    trim(&s, &len);
    if (fmt == DEDUP_TIME_AUTO) {
        fmt = dedup_time_detect(s, len);
        if (fmt == DEDUP_TIME_AUTO)
            return DEDUP_ERR_INVALID_ARG;
    }
    switch (fmt) {
    case DEDUP_TIME_EPOCH_S: return parse_epoch(s, len, 1000000, out_us);
    case DEDUP_TIME_EPOCH_MS: return parse_epoch(s, len, 1000, out_us);
    case DEDUP_TIME_EPOCH_US: return parse_epoch(s, len, 1, out_us);
    case DEDUP_TIME_ISO8601: return parse_iso(s, len, out_us);
    default: return DEDUP_ERR_INVALID_ARG;
    }
}

dedup_time_format dedup_time_detect(const char *s, size_t len)
{
    if (!s)
        return DEDUP_TIME_AUTO;
    trim(&s, &len);
    if (len >= 10 && is_digit(s[0]) && is_digit(s[1]) && is_digit(s[2]) && is_digit(s[3]) &&
        s[4] == '-')
        return DEDUP_TIME_ISO8601;
    size_t i = 0;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        i++;
    size_t start = i;
    while (i < len && s[i] == '0')
        i++;
    size_t sig = i;
    while (i < len && is_digit(s[i]))
        i++;
    if (i == start)
        return DEDUP_TIME_AUTO;
    size_t ndig = i - sig; /* significant digits of the integer part */
    if (i < len && s[i] != '.')
        return DEDUP_TIME_AUTO;
    if (ndig <= 11)
        return DEDUP_TIME_EPOCH_S; /* < 10^11 */
    if (ndig <= 14)
        return DEDUP_TIME_EPOCH_MS; /* < 10^14 */
    return DEDUP_TIME_EPOCH_US;
}

const char *dedup_time_format_name(dedup_time_format fmt)
{
    switch (fmt) {
    case DEDUP_TIME_EPOCH_S: return "epoch";
    case DEDUP_TIME_EPOCH_MS: return "epoch_ms";
    case DEDUP_TIME_EPOCH_US: return "epoch_us";
    case DEDUP_TIME_ISO8601: return "iso8601";
    default: return "auto";
    }
}

bool dedup_time_format_from_name(const char *name, dedup_time_format *out)
{
    static const dedup_time_format all[] = {DEDUP_TIME_AUTO, DEDUP_TIME_EPOCH_S,
                                            DEDUP_TIME_EPOCH_MS, DEDUP_TIME_EPOCH_US,
                                            DEDUP_TIME_ISO8601};
    if (!name)
        return false;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, dedup_time_format_name(all[i])) == 0) {
            *out = all[i];
            return true;
        }
    return false;
}
