/*
 * extsort_threads.h - how many threads the engine tests give the engine:
 * test_extsort*.c use 1; their _mt twins define EXTSORT_THREADS 2 and
 * include them, so every case also runs with the compressing thread (and
 * under ThreadSanitizer, label "threads").
 */
#ifndef DEDUP_TEST_EXTSORT_THREADS_H
#define DEDUP_TEST_EXTSORT_THREADS_H

#include "dedup/extsort.h"

#ifndef EXTSORT_THREADS
#define EXTSORT_THREADS 1
#endif

static inline void tu_extsort_params(dedup_extsort_params *p)
{
    dedup_extsort_params_init(p);
    p->threads = EXTSORT_THREADS;
}

#endif
