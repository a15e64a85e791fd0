/*
 * test_tiers_commit.c - the final state of a tier stack (dedup/tiers.h)
 * after its last batch, with no server: every tier holds every key decided
 * (query), and a tier that reserves its new keys until they are committed
 * (as a Redis keys tier with a TTL does) has, at the end, exactly the keys
 * of the committed batches committed and exactly those of the last,
 * uncommitted batch only reserved -- wherever it sits in the stack (top,
 * middle, bottom), under a covering filter or not.  Batches of random sizes
 * up to 2.2 chunks; the seed is printed (DEDUP_TEST_SEED fixes it).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/tiers.h"

#define UNIVERSE 12000u
#define STREAM 30000u
#define TAIL 300u

/* ---- a tier that reserves, then commits: state[id] 0 absent, 1 reserved,
 * 2 committed (ids are the digests' lo, by construction below) ---- */
typedef struct rtier {
    unsigned char state[2 * UNIVERSE];
    uint64_t commits; /* keys given to commit */
} rtier;

static size_t id_of(dedup_digest d) { return (size_t)(d.lo % (2 * UNIVERSE)); }

static dedup_status r_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    rtier *t = impl;
    for (size_t i = 0; i < b->n; i++) {
        unsigned char *s = &t->state[id_of(b->digests[i])];
        out[i] = *s ? DEDUP_DUPLICATE : DEDUP_NEW;
        if (!*s)
            *s = 1;
    }
    if (done)
        *done = b->n;
    return DEDUP_OK;
}

static dedup_status r_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    const rtier *t = impl;
    for (size_t i = 0; i < b->n; i++)
        out[i] = t->state[id_of(b->digests[i])] ? DEDUP_DUPLICATE : DEDUP_NEW;
    return DEDUP_OK;
}

static dedup_status r_commit(void *impl, const dedup_batch *b)
{
    rtier *t = impl;
    t->commits += b->n;
    for (size_t i = 0; i < b->n; i++) {
        unsigned char *s = &t->state[id_of(b->digests[i])];
        if (*s == 1)
            *s = 2;
    }
    return DEDUP_OK;
}

static void r_info(const void *impl, dedup_seen_info *out)
{
    (void)impl;
    out->kind = DEDUP_SEEN_OTHER;
    out->seed = DEDUP_DEFAULT_SEED;
}

static void r_free(void *impl) { free(impl); }

static const dedup_seen_ops rtier_ops = {.kind = DEDUP_SEEN_OTHER, .decide = r_decide,
                                         .query = r_query, .commit = r_commit,
                                         .info = r_info, .free = r_free};

static dedup_seen *local_tier(dedup_seen_kind kind)
{
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = kind;
    sp.items = 2 * UNIVERSE;
    dedup_seen *s = NULL;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
    return s;
}

/* Digest of key id: lo carries the id (so the reserving tier can index
 * it), hi and lo's high bits are mixed so filters see random bits. */
static dedup_digest key_digest(uint32_t id)
{
    dedup_digest h = dedup_hash(&id, sizeof id, 7);
    h.lo = h.lo / (2 * UNIVERSE) * (2 * UNIVERSE) + id;
    return h;
}

enum { FILTER, EXACT, RESERVE };

static void run(const int *kinds, size_t n, tu_rng *r)
{
    dedup_tier t[4];
    memset(t, 0, sizeof t);
    rtier *rt[4] = {0};
    for (size_t k = 0; k < n; k++) {
        if (kinds[k] == FILTER) {
            t[k] = (dedup_tier){.seen = local_tier(DEDUP_SEEN_BLOCKED), .covers_below = true};
        } else if (kinds[k] == EXACT) {
            t[k] = (dedup_tier){.seen = local_tier(DEDUP_SEEN_FINGERPRINT)};
        } else {
            rt[k] = calloc(1, sizeof *rt[k]);
            assert_non_null(rt[k]);
            assert_int_equal(dedup_seen_wrap(&rtier_ops, rt[k], NULL, &t[k].seen), DEDUP_OK);
        }
    }
    dedup_tiers_spec sp = {.tiers = t, .n = n};
    dedup_seen *stack = NULL;
    const dedup_tiers *view = NULL;
    assert_int_equal(dedup_tiers_create(&sp, NULL, &stack, &view), DEDUP_OK);
    static dedup_digest d[STREAM + TAIL], cd[STREAM + TAIL];
    static dedup_verdict v[STREAM + TAIL];
    static unsigned char model[2 * UNIVERSE]; /* 0, 1 uncommitted NEW, 2 committed */
    memset(model, 0, sizeof model);
    for (size_t i = 0; i < STREAM; i++)
        d[i] = key_digest((uint32_t)tu_below(r, UNIVERSE));
    for (size_t i = 0; i < TAIL; i++)
        d[STREAM + i] = key_digest(UNIVERSE + (uint32_t)i);
    for (size_t off = 0; off < STREAM + TAIL;) {
        bool last = off >= STREAM;
        size_t m = last ? TAIL : 1 + (size_t)tu_below(r, 9000);
        if (!last && off + m > STREAM)
            m = STREAM - off;
        dedup_batch b = {.n = m, .digests = d + off};
        assert_int_equal(dedup_seen_decide(stack, &b, v, NULL), DEDUP_OK);
        size_t nc = 0;
        for (size_t i = 0; i < m; i++) {
            size_t id = id_of(d[off + i]);
            if (v[i] != (model[id] ? DEDUP_DUPLICATE : DEDUP_NEW))
                fail_msg("key %zu answered %d, the model %d", id, (int)v[i], model[id] != 0);
            if (v[i] == DEDUP_NEW) {
                model[id] = last ? 1 : 2;
                cd[nc++] = d[off + i];
            }
        }
        if (!last) {
            dedup_batch cb = {.n = nc, .digests = cd};
            assert_int_equal(dedup_seen_commit(stack, &cb), DEDUP_OK);
        }
        off += m;
    }
    /* the final state: every tier holds every key; each reserving tier has
     * the committed batches' keys committed, the last batch's reserved */
    for (size_t k = 0; k < n; k++) {
        dedup_batch b = {.n = STREAM + TAIL, .digests = d};
        assert_int_equal(dedup_seen_query(dedup_tiers_tier(view, k), &b, v), DEDUP_OK);
        for (size_t i = 0; i < STREAM + TAIL; i++)
            if (v[i] == DEDUP_NEW)
                fail_msg("stack of %zu, tier %zu (kind %d) does not hold key %zu after the last "
                         "batch", n, k, kinds[k], id_of(d[i]));
        if (!rt[k])
            continue;
        for (size_t id = 0; id < 2 * UNIVERSE; id++)
            if (rt[k]->state[id] != model[id])
                fail_msg("stack of %zu, reserving tier %zu: key %zu is %s, the model %s", n, k, id,
                         rt[k]->state[id] == 2 ? "committed" : rt[k]->state[id] ? "reserved" : "absent",
                         model[id] == 2 ? "committed" : model[id] ? "reserved" : "absent");
    }
    dedup_seen_free(stack);
}

static void test_final_state(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    const int stacks[][3] = {{FILTER, EXACT, RESERVE}, {FILTER, RESERVE, EXACT},
                             {RESERVE, EXACT, -1},     {EXACT, RESERVE, -1},
                             {FILTER, RESERVE, -1},    {RESERVE, -1, -1}};
    for (size_t s = 0; s < sizeof stacks / sizeof *stacks; s++) {
        size_t n = 0;
        while (n < 3 && stacks[s][n] >= 0)
            n++;
        run(stacks[s], n, &r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_final_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
