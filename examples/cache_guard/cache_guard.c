/*
 * cache_guard.c - a cache-penetration guard: a blocked Bloom filter of the
 * IDs that exist, in front of a real database (SQLite), so that lookups of
 * IDs that do not exist -- a scan, a bug, an attack -- never reach it.
 *
 *   cache_guard [DBFILE [ROWS [LOOKUPS]]]
 *
 * Creates DBFILE (default: a temporary file) with ROWS users under sparse
 * random IDs, builds the filter from a scan of the table, then serves
 * LOOKUPS requests, 80% of them for IDs that do not exist: the filter's
 * "certainly absent" answers without a query, its "maybe" asks SQLite.
 * Reports the queries saved, and exits 1 if any existing ID was not found.
 */
#define _POSIX_C_SOURCE 200809L
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dedup/seen.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* The IDs that exist are those whose hash has low bits 0..1 of 8: a sparse
 * quarter of [0, 4*ROWS); no list needs to be kept to know the truth. */
static int exists(uint64_t id, uint64_t rows)
{
    return id < 4 * rows && (dedup_hash_u64(id, 7).lo & 7) < 2;
}

static int fail(const char *what, sqlite3 *db)
{
    fprintf(stderr, "cache_guard: %s: %s\n", what, db ? sqlite3_errmsg(db) : "error");
    return 1;
}

int main(int argc, char **argv)
{
    char tmp[] = "/tmp/cache_guard.XXXXXX";
    const char *path = argc > 1 && argv[1][0] ? argv[1] : NULL;
    uint64_t rows = argc > 2 ? strtoull(argv[2], NULL, 10) : 50000;
    uint64_t lookups = argc > 3 ? strtoull(argv[3], NULL, 10) : 200000;
    if (!path) {
        int fd = mkstemp(tmp);
        if (fd < 0)
            return fail("temporary file", NULL);
        close(fd);
        path = tmp;
    }
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return fail("open", db);
    sqlite3_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;", NULL, NULL, NULL);
    if (sqlite3_exec(db, "DROP TABLE IF EXISTS users; CREATE TABLE users(id INTEGER PRIMARY KEY, "
                         "name TEXT); BEGIN;", NULL, NULL, NULL) != SQLITE_OK)
        return fail("create", db);
    sqlite3_stmt *ins, *sel, *scan;
    sqlite3_prepare_v2(db, "INSERT INTO users VALUES(?, ?)", -1, &ins, NULL);
    uint64_t nrows = 0;
    for (uint64_t id = 0; id < 4 * rows; id++) {
        if (!exists(id, rows))
            continue;
        char name[32];
        snprintf(name, sizeof name, "user%llu", (unsigned long long)id);
        sqlite3_bind_int64(ins, 1, (sqlite3_int64)id);
        sqlite3_bind_text(ins, 2, name, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(ins) != SQLITE_DONE)
            return fail("insert", db);
        sqlite3_reset(ins);
        nrows++;
    }
    sqlite3_finalize(ins);
    sqlite3_exec(db, "COMMIT;", NULL, NULL, NULL);

    /* The filter of existing IDs, from a scan of the table. */
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_BLOCKED;
    sp.items = nrows ? nrows : 1;
    sp.fpr = 0.01;
    dedup_seen *filter;
    dedup_status st = dedup_seen_create(&sp, NULL, &filter);
    if (st) {
        fprintf(stderr, "cache_guard: filter: %s\n", dedup_strerror(st));
        return 1;
    }
    uint64_t seed = dedup_seen_seed(filter);
    sqlite3_prepare_v2(db, "SELECT id FROM users", -1, &scan, NULL);
    while (sqlite3_step(scan) == SQLITE_ROW) {
        dedup_digest d = dedup_hash_u64((uint64_t)sqlite3_column_int64(scan, 0), seed);
        dedup_batch b = {.n = 1, .digests = &d};
        dedup_verdict v;
        dedup_seen_decide(filter, &b, &v, NULL);
    }
    sqlite3_finalize(scan);

    /* Serve the lookups. */
    sqlite3_prepare_v2(db, "SELECT name FROM users WHERE id = ?", -1, &sel, NULL);
    uint64_t queries = 0, found = 0, false_pos = 0, lost = 0, real = 0;
    for (uint64_t i = 0; i < lookups; i++) {
        uint64_t id;
        if (next() % 10 < 2) { /* a real user */
            do
                id = next() % (4 * rows);
            while (!exists(id, rows));
        } else { /* an ID that does not exist: far outside, or a gap */
            do
                id = next() % (8 * rows);
            while (exists(id, rows));
        }
        int want = exists(id, rows);
        real += want;
        dedup_digest d = dedup_hash_u64(id, seed);
        dedup_batch b = {.n = 1, .digests = &d};
        dedup_verdict v;
        dedup_seen_query(filter, &b, &v);
        int hit = 0;
        if (v != DEDUP_NEW) { /* maybe there: ask the database */
            queries++;
            sqlite3_bind_int64(sel, 1, (sqlite3_int64)id);
            hit = sqlite3_step(sel) == SQLITE_ROW;
            sqlite3_reset(sel);
            found += hit;
            false_pos += !hit;
        }
        lost += want && !hit;
    }
    sqlite3_finalize(sel);
    sqlite3_close(db);
    if (path == tmp)
        unlink(tmp);
    uint64_t absent = lookups - real;
    printf("cache_guard: %llu rows in SQLite, filter %zu bytes\n", (unsigned long long)nrows,
           dedup_seen_memory_usage(filter));
    printf("%llu lookups (%llu of existing IDs): %llu reached the database (%llu found there), "
           "%llu saved (%.1f%%)\n",
           (unsigned long long)lookups, (unsigned long long)real, (unsigned long long)queries,
           (unsigned long long)found, (unsigned long long)(lookups - queries),
           lookups ? 100.0 * (double)(lookups - queries) / (double)lookups : 0.0);
    printf("of the %llu lookups of absent IDs, %llu got through the filter (%.2f%%, target 1%%); "
           "existing IDs not found: %llu\n",
           (unsigned long long)absent, (unsigned long long)false_pos,
           absent ? 100.0 * (double)false_pos / (double)absent : 0.0, (unsigned long long)lost);
    dedup_seen_free(filter);
    return lost ? 1 : 0;
}
