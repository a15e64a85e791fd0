/*
 * test_extsort_mt.c - test_extsort.c again with the engine's compressing thread
 * (params.threads = 2): same cases, same expected results.
 */
#define EXTSORT_THREADS 2
#include "test_extsort.c"
