/*
 * bench_extsort.c - the external dedup engine as a line filter, for
 * bench/bench_extsort.sh (which compares it with `sort -u` and the IO
 * floor in one run).  Usage: see tests/util/extsort_driver.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "../tests/util/extsort_driver.h"

int main(int argc, char **argv) { return extsort_driver_main(argc - 1, argv + 1); }
