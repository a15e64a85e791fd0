/* test_version.c - the version is written once and every copy agrees: the
 * header's macros, CMake's project(VERSION) (DEDUP_CMAKE_VERSION, given by
 * tests/CMakeLists.txt) and the runtime twins of the library linked. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static void test_version_agrees(void **state)
{
    (void)state;
    char made[32];
    snprintf(made, sizeof made, "%d.%d.%d", DEDUP_VERSION_MAJOR, DEDUP_VERSION_MINOR,
             DEDUP_VERSION_PATCH);
    assert_string_equal(DEDUP_VERSION_STRING, made);
    assert_string_equal(DEDUP_CMAKE_VERSION, made);
    assert_string_equal(dedup_version_string(), made);
    assert_int_equal(dedup_version_number(), DEDUP_VERSION_NUMBER);
    assert_int_equal(DEDUP_VERSION_NUMBER,
                     DEDUP_VERSION_MAJOR * 10000 + DEDUP_VERSION_MINOR * 100 + DEDUP_VERSION_PATCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_version_agrees)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
