/*
 * store_testutil.h - shared by the store's tests: open a store from
 * params, or fail the test with RocksDB's reason on stderr.
 */
#ifndef DEDUP_STORE_TESTUTIL_H
#define DEDUP_STORE_TESTUTIL_H

#include <stdio.h>

#include "testutil.h"
#include "dedup/store.h"

static inline dedup_store *tst_open(const dedup_store_params *p)
{
    dedup_store *s = NULL;
    char why[512];
    dedup_status st = dedup_store_create(p, NULL, &s, why, sizeof why);
    if (st != DEDUP_OK)
        fprintf(stderr, "open %s: %s\n", p->dir, why);
    assert_int_equal(st, DEDUP_OK);
    return s;
}

#endif
