/* test_timeparse.c - event times from text (dedup/timeparse.h), checked
 * against known values and against the C library's timegm() on random
 * dates. */
#define _DEFAULT_SOURCE
#include "testutil.h"

#include "dedup/timeparse.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t ok(const char *s, dedup_time_format f)
{
    int64_t v = 12345;
    dedup_status st = dedup_time_parse(s, strlen(s), f, &v);
    if (st != DEDUP_OK)
        fprintf(stderr, "failed to parse '%s' as %s: %s\n", s, dedup_time_format_name(f),
                dedup_strerror(st));
    assert_int_equal(st, DEDUP_OK);
    return v;
}

static void bad(const char *s, dedup_time_format f, dedup_status want)
{
    int64_t v = 777;
    dedup_status st = dedup_time_parse(s, strlen(s), f, &v);
    if (st != want)
        fprintf(stderr, "'%s' as %s: got %d want %d\n", s, dedup_time_format_name(f), (int)st,
                (int)want);
    assert_int_equal(st, want);
    assert_int_equal(v, 777); /* untouched on error */
}

static void test_epoch(void **state)
{
    (void)state;
    assert_int_equal(ok("0", DEDUP_TIME_EPOCH_S), 0);
    assert_int_equal(ok("1700000000", DEDUP_TIME_EPOCH_S), INT64_C(1700000000000000));
    assert_int_equal(ok("1700000000.25", DEDUP_TIME_EPOCH_S), INT64_C(1700000000250000));
    assert_int_equal(ok("1.0000019", DEDUP_TIME_EPOCH_S), 1000001); /* truncated */
    assert_int_equal(ok("-1.5", DEDUP_TIME_EPOCH_S), -1500000);
    assert_int_equal(ok("  42\r", DEDUP_TIME_EPOCH_S), 42000000);
    assert_int_equal(ok("1700000000123", DEDUP_TIME_EPOCH_MS), INT64_C(1700000000123000));
    assert_int_equal(ok("1700000000123.5", DEDUP_TIME_EPOCH_MS), INT64_C(1700000000123500));
    assert_int_equal(ok("1700000000123456", DEDUP_TIME_EPOCH_US), INT64_C(1700000000123456));
    assert_int_equal(ok("4611686018427387903", DEDUP_TIME_EPOCH_US), DEDUP_TIME_MAX_US);
    assert_int_equal(ok("1.000000000001", DEDUP_TIME_EPOCH_S), 1000000);
    bad("4611686018427387904", DEDUP_TIME_EPOCH_US, DEDUP_ERR_RANGE);
    bad("99999999999999999999999", DEDUP_TIME_EPOCH_S, DEDUP_ERR_RANGE);
    bad("4611686018428", DEDUP_TIME_EPOCH_S, DEDUP_ERR_RANGE);
    bad("", DEDUP_TIME_EPOCH_S, DEDUP_ERR_INVALID_ARG);
    bad("-", DEDUP_TIME_EPOCH_S, DEDUP_ERR_INVALID_ARG);
    bad("12a", DEDUP_TIME_EPOCH_S, DEDUP_ERR_INVALID_ARG);
    bad("12.", DEDUP_TIME_EPOCH_S, DEDUP_ERR_INVALID_ARG);
    bad(".5", DEDUP_TIME_EPOCH_S, DEDUP_ERR_INVALID_ARG);
    bad("1e9", DEDUP_TIME_EPOCH_S, DEDUP_ERR_INVALID_ARG);
    bad("1.5", DEDUP_TIME_EPOCH_US, DEDUP_ERR_INVALID_ARG);
    bad("2024-01-01", DEDUP_TIME_EPOCH_S, DEDUP_ERR_INVALID_ARG);
}

static void test_detect(void **state)
{
    (void)state;
    assert_int_equal(dedup_time_detect("1700000000", 10), DEDUP_TIME_EPOCH_S);
    assert_int_equal(dedup_time_detect("1700000000.5", 12), DEDUP_TIME_EPOCH_S);
    assert_int_equal(dedup_time_detect("99999999999", 11), DEDUP_TIME_EPOCH_S);
    assert_int_equal(dedup_time_detect("100000000000", 12), DEDUP_TIME_EPOCH_MS);
    assert_int_equal(dedup_time_detect("1700000000123", 13), DEDUP_TIME_EPOCH_MS);
    assert_int_equal(dedup_time_detect("1700000000123456", 16), DEDUP_TIME_EPOCH_US);
    assert_int_equal(dedup_time_detect("0000001", 7), DEDUP_TIME_EPOCH_S);
    assert_int_equal(dedup_time_detect("2024-05-06T07:08:09Z", 20), DEDUP_TIME_ISO8601);
    assert_int_equal(dedup_time_detect("hello", 5), DEDUP_TIME_AUTO);
    assert_int_equal(dedup_time_detect("", 0), DEDUP_TIME_AUTO);
    assert_int_equal(ok("1700000000123", DEDUP_TIME_AUTO), INT64_C(1700000000123000));
    assert_int_equal(ok("2024-05-06", DEDUP_TIME_AUTO), INT64_C(1714953600000000));
    bad("soon", DEDUP_TIME_AUTO, DEDUP_ERR_INVALID_ARG);
    dedup_time_format f;
    assert_true(dedup_time_format_from_name("epoch_ms", &f));
    assert_int_equal(f, DEDUP_TIME_EPOCH_MS);
    assert_true(dedup_time_format_from_name("iso8601", &f));
    assert_int_equal(f, DEDUP_TIME_ISO8601);
    assert_false(dedup_time_format_from_name("rfc2822", &f));
}

static void test_iso_known(void **state)
{
    (void)state;
    const dedup_time_format I = DEDUP_TIME_ISO8601;
    assert_int_equal(ok("1970-01-01T00:00:00Z", I), 0);
    assert_int_equal(ok("1970-01-01", I), 0);
    assert_int_equal(ok("2000-03-01T00:00:00Z", I), INT64_C(951868800000000));
    assert_int_equal(ok("2024-02-29T12:34:56.789012+05:30", I), INT64_C(1709190296789012));
    assert_int_equal(ok("2024-02-29T12:34:56,789012+0530", I), INT64_C(1709190296789012));
    assert_int_equal(ok("2024-02-29 07:04:56.789012", I), INT64_C(1709190296789012));
    assert_int_equal(ok("2024-02-29t07:04:56.7890129z", I), INT64_C(1709190296789012));
    assert_int_equal(ok("2024-02-29T02:04:56.789012-05", I), INT64_C(1709190296789012));
    assert_int_equal(ok("2024-02-29T07:04Z", I), INT64_C(1709190240000000));
    assert_int_equal(ok("1969-12-31T23:59:59.5Z", I), -500000);
    assert_int_equal(ok("1900-01-01T00:00:00Z", I), INT64_C(-2208988800000000));
    assert_int_equal(ok("0000-01-01T00:00:00Z", I), INT64_C(-62167219200000000));
    assert_int_equal(ok("9999-12-31T23:59:59.999999Z", I), INT64_C(253402300799999999));
    assert_int_equal(ok("2016-12-31T23:59:60Z", I), ok("2017-01-01T00:00:00Z", I));
    assert_int_equal(ok("2024-01-01T24:00:00Z", I), ok("2024-01-02T00:00:00Z", I));
    const char *invalid[] = {
        "2023-02-29", "2100-02-29", "2024-13-01", "2024-00-10", "2024-04-31", "2024-01-00",
        "2024-1-01", "24-01-01", "2024-01-01T", "2024-01-01T25:00", "2024-01-01T12",
        "2024-01-01T12:60", "2024-01-01T12:00:61", "2024-01-01T24:00:01", "2024-01-01T12:00:00.",
        "2024-01-01T12:00:00+24:00", "2024-01-01T12:00:00+05:60", "2024-01-01T12:00:00+5",
        "2024-01-01T12:00:00Zjunk", "2024-01-01T12:00:00.1234567890Z", "2024/01/01",
        "2024-01-01X12:00", "2024-01-01T12:00:00 +01:00",
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        bad(invalid[i], I, DEDUP_ERR_INVALID_ARG);
}

/* Random instants formatted with random zones, against timegm(). */
static void test_iso_vs_timegm(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    for (int i = 0; i < 200000; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        int year = 1800 + (int)tu_below(&r, 400);
        tm.tm_year = year - 1900;
        tm.tm_mon = (int)tu_below(&r, 12);
        tm.tm_mday = 1 + (int)tu_below(&r, 28);
        tm.tm_hour = (int)tu_below(&r, 24);
        tm.tm_min = (int)tu_below(&r, 60);
        tm.tm_sec = (int)tu_below(&r, 60);
        int64_t want = (int64_t)timegm(&tm);
        int oh = (int)tu_below(&r, 15), om = 15 * (int)tu_below(&r, 4);
        bool east = tu_below(&r, 2);
        int64_t off = (int64_t)(oh * 3600 + om * 60) * (east ? 1 : -1);
        /* The local wall clock of that instant in the zone. */
        time_t local = (time_t)(want + off);
        struct tm lt;
        gmtime_r(&local, &lt);
        if (lt.tm_year + 1900 < 0 || lt.tm_year + 1900 > 9999)
            continue;
        unsigned us = (unsigned)tu_below(&r, 1000000);
        char buf[64];
        snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06u%c%02d:%02d",
                 lt.tm_year + 1900, lt.tm_mon + 1, lt.tm_mday, lt.tm_hour, lt.tm_min, lt.tm_sec,
                 us, east ? '+' : '-', oh, om);
        int64_t got = ok(buf, DEDUP_TIME_ISO8601);
        if (got != want * 1000000 + (int64_t)us)
            fprintf(stderr, "%s: got %lld want %lld\n", buf, (long long)got,
                    (long long)(want * 1000000 + us));
        assert_int_equal(got, want * 1000000 + (int64_t)us);
        /* And the days function alone, every day of the range. */
        assert_int_equal(dedup_days_from_civil(year, (unsigned)tm.tm_mon + 1,
                                               (unsigned)tm.tm_mday) * 86400,
                         want - tm.tm_hour * 3600 - tm.tm_min * 60 - tm.tm_sec);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoch),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_iso_known),
        cmocka_unit_test(test_iso_vs_timegm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
