/*
 * test_refset_ends.c - the by-reference set (dedup_refset, dedup/set.h)
 * over several files laid end to end, where a file's last record may have
 * no terminator: the set finds a stored key's length from the next
 * terminator or the next file end (params.ends), so every record next to a
 * file end -- the last one of a file, the first one of the next, an empty
 * file, a file of one byte -- is where a boundary search off by one shows.
 * Deterministic and exhaustive over small cases: every sequence of three
 * files drawn from a list of short contents (with and without their last
 * terminator), each record inserted in order and checked against a model
 * (its verdict, contains(), and foreach()'s keys in first-occurrence order,
 * byte for byte).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/set.h"

static const char *const contents[] = {
    "", "a", "a\n", "b", "ab", "ab\n", "a\nb", "b\na", "a\na", "b\nb\n", "ba\na", "\n", "\nb",
};
#define NC (sizeof contents / sizeof *contents)
#define SEED 42u

typedef struct rec {
    size_t off, len;
} rec;

typedef struct model {
    const char *span;
    rec keys[64]; /* the distinct records, in first-occurrence order */
    size_t n;
} model;

static bool model_has(const model *m, const char *k, size_t len)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->keys[i].len == len && memcmp(m->span + m->keys[i].off, k, len) == 0)
            return true;
    return false;
}

typedef struct visit {
    const model *m;
    size_t at;
    bool bad;
} visit;

static int on_key(void *ctx, const void *key, size_t len, uint64_t count)
{
    (void)count;
    visit *v = ctx;
    if (v->at >= v->m->n) {
        v->bad = true;
        return 1;
    }
    const rec *r = &v->m->keys[v->at++];
    if (r->len != len || memcmp(v->m->span + r->off, key, len) != 0)
        v->bad = true;
    return 0;
}

static void describe(char *out, size_t cap, const size_t *pick)
{
    size_t o = 0;
    for (int f = 0; f < 3 && o < cap; f++) {
        o += (size_t)snprintf(out + o, cap - o, "%s\"", f ? ", " : "");
        for (const char *c = contents[pick[f]]; *c && o + 3 < cap; c++)
            o += (size_t)snprintf(out + o, cap - o, *c == '\n' ? "\\n" : "%c", *c);
        o += (size_t)snprintf(out + o, cap - o, "\"");
    }
}

static void one_case(const size_t *pick, bool lengths)
{
    char span[64];
    uint64_t ends[3];
    rec recs[64];
    size_t off = 0, nr = 0;
    for (int f = 0; f < 3; f++) {
        const char *c = contents[pick[f]];
        size_t len = strlen(c), start = off;
        memcpy(span + off, c, len);
        off += len;
        ends[f] = off;
        /* the file's records: cut at '\n'; a last terminator ends the last one */
        size_t r = start;
        for (size_t i = start; i < off; i++)
            if (span[i] == '\n') {
                recs[nr++] = (rec){r, i - r};
                r = i + 1;
            }
        if (r < off)
            recs[nr++] = (rec){r, off - r};
    }
    dedup_refset_params p;
    dedup_refset_params_init(&p);
    p.base = span;
    p.span = off;
    p.ends = ends;
    p.nends = 3;
    p.lengths = lengths;
    p.seed = SEED;
    dedup_refset *s = NULL;
    assert_int_equal(dedup_refset_create(&p, NULL, &s), DEDUP_OK);
    model m = {.span = span};
    char what[128];
    for (size_t i = 0; i < nr; i++) {
        const char *k = span + recs[i].off;
        dedup_digest d = dedup_hash(k, recs[i].len, SEED);
        bool had = model_has(&m, k, recs[i].len);
        dedup_verdict v;
        assert_int_equal(dedup_refset_insert(s, recs[i].off, recs[i].len, d, &v), DEDUP_OK);
        if (v != (had ? DEDUP_DUPLICATE : DEDUP_NEW)) {
            describe(what, sizeof what, pick);
            fail_msg("files %s%s: record %zu (offset %zu, %zu bytes) answered %s", what,
                     lengths ? " (lengths)" : "", i, recs[i].off, recs[i].len,
                     v == DEDUP_NEW ? "NEW, a repeat" : "DUPLICATE, a first occurrence");
        }
        if (!had)
            m.keys[m.n++] = recs[i];
    }
    for (size_t i = 0; i < m.n; i++) {
        const char *k = span + m.keys[i].off;
        if (!dedup_refset_contains(s, k, m.keys[i].len, dedup_hash(k, m.keys[i].len, SEED))) {
            describe(what, sizeof what, pick);
            fail_msg("files %s: key %zu not found by contains()", what, i);
        }
    }
    /* keys never given: one byte longer or shorter than a stored one */
    static const char *const absent[] = {"aa", "bb", "abb", "c", "a\n"};
    for (size_t i = 0; i < sizeof absent / sizeof *absent; i++) {
        size_t len = strlen(absent[i]);
        if (!model_has(&m, absent[i], len) &&
            dedup_refset_contains(s, absent[i], len, dedup_hash(absent[i], len, SEED))) {
            describe(what, sizeof what, pick);
            fail_msg("files %s: contains() finds a key never given", what);
        }
    }
    assert_int_equal(dedup_refset_size(s), m.n);
    visit vis = {.m = &m};
    dedup_status st = DEDUP_OK;
    dedup_refset_foreach(s, on_key, &vis, &st);
    assert_int_equal(st, DEDUP_OK);
    if (vis.bad || vis.at != m.n) {
        describe(what, sizeof what, pick);
        fail_msg("files %s%s: foreach() gives other keys than the model", what,
                 lengths ? " (lengths)" : "");
    }
    dedup_refset_free(s);
}

static void test_every_three_files(void **state)
{
    (void)state;
    size_t pick[3];
    for (int lengths = 0; lengths < 2; lengths++)
        for (pick[0] = 0; pick[0] < NC; pick[0]++)
            for (pick[1] = 0; pick[1] < NC; pick[1]++)
                for (pick[2] = 0; pick[2] < NC; pick[2]++)
                    one_case(pick, lengths);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_three_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
