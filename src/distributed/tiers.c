/*
 * tiers.c - a stack of seen-sets answering as one (dedup/tiers.h).
 *
 * A batch is cut into chunks; for each chunk the keys still open are
 * gathered into a sub-batch and given to one tier after the other, top
 * down, each tier's verdicts closing some keys and passing the rest on.
 * Keys a covering filter ended as NEW are remembered with the filter's
 * level; once the walk is over, each lower tier records the keys ended
 * above it (blind write, or decide() whose DUPLICATE is believed).
 */
#define _POSIX_C_SOURCE 200809L
#include "dedup/tiers.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define CHUNK 4096u
#define NOT_ENDED 0xFFu

typedef struct tier {
    dedup_seen *seen;
    bool probabilistic, forgets, covers_below;
    dedup_tier_record_fn record;
    void *record_ctx;
} tier;

struct dedup_tiers {
    dedup_allocator a;
    size_t n;
    tier t[DEDUP_TIERS_MAX];
    bool trust_filter, shared, exact;
    dedup_tiers_stats st;
    /* chunk scratch */
    uint32_t *pending, *next;
    uint8_t *ended_at;
    dedup_verdict *v;
    dedup_digest *digests;
    const unsigned char **keys;
    size_t *lens;
    int64_t *times;
    uint64_t *ints;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Builds in 'sub' the keys idx[0..m) of b (offset 'off'). */
static void gather(dedup_tiers *t, const dedup_batch *b, size_t off, const uint32_t *idx,
                   size_t m, dedup_batch *sub)
{
    memset(sub, 0, sizeof *sub);
    sub->n = m;
    for (size_t j = 0; j < m; j++) {
        size_t i = off + idx[j];
        if (b->digests)
            t->digests[j] = b->digests[i];
        if (b->keys) {
            t->keys[j] = b->keys[i];
            t->lens[j] = b->lens[i];
        }
        if (b->times)
            t->times[j] = b->times[i];
        if (b->ints)
            t->ints[j] = b->ints[i];
    }
    if (b->digests)
        sub->digests = t->digests;
    if (b->keys) {
        sub->keys = (const unsigned char *const *)t->keys;
        sub->lens = t->lens;
    }
    if (b->times)
        sub->times = t->times;
    if (b->ints)
        sub->ints = t->ints;
}

/* Asks tier 'k' about the sub-batch: decide (record) or query. */
static dedup_status ask(dedup_tiers *t, size_t k, const dedup_batch *sub, bool record)
{
    uint64_t t0 = now_ns();
    dedup_status s = record ? dedup_seen_decide(t->t[k].seen, sub, t->v, NULL)
                            : dedup_seen_query(t->t[k].seen, sub, t->v);
    t->st.tier[k].ns += now_ns() - t0;
    t->st.tier[k].lookups += sub->n;
    return s;
}

/* Records in tier u (with 'record') the keys a filter above it ended as NEW,
 * before tier u is asked about anything of the chunk: a later occurrence of
 * such a key, passed down as a MAYBE, must find it there. */
static dedup_status record_ended(dedup_tiers *t, const dedup_batch *b, size_t off, size_t m,
                                 size_t u, dedup_verdict *out)
{
    dedup_batch sub;
    size_t nr = 0;
    for (size_t i = 0; i < m; i++)
        if (t->ended_at[i] < u && out[i] == DEDUP_NEW)
            t->next[nr++] = (uint32_t)i;
    if (!nr)
        return DEDUP_OK;
    gather(t, b, off, t->next, nr, &sub);
    tier *tu = &t->t[u];
    uint64_t t0 = now_ns();
    dedup_status s;
    if (tu->record) {
        s = tu->record(tu->record_ctx, &sub);
    } else {
        s = dedup_seen_decide(tu->seen, &sub, t->v, NULL);
        for (size_t j = 0; s == DEDUP_OK && j < nr; j++)
            if (t->v[j] == DEDUP_DUPLICATE) {
                out[t->next[j]] = DEDUP_DUPLICATE;
                t->ended_at[t->next[j]] = NOT_ENDED;
                t->st.contradicted++;
            }
    }
    t->st.tier[u].ns += now_ns() - t0;
    t->st.tier[u].records += nr;
    return s;
}

/* The walk down for one chunk of m keys at b[off..): out[0..m) receives the
 * verdicts; with 'record', the tiers record, the lower ones also the keys a
 * filter above them ended. */
static dedup_status walk(dedup_tiers *t, const dedup_batch *b, size_t off, size_t m,
                         dedup_verdict *out, bool record)
{
    size_t np = m;
    for (size_t i = 0; i < m; i++) {
        t->pending[i] = (uint32_t)i;
        t->ended_at[i] = NOT_ENDED;
    }
    dedup_batch sub;
    for (size_t k = 0; k < t->n; k++) {
        if (record && k > 0) {
            dedup_status s = record_ended(t, b, off, m, k, out);
            if (s != DEDUP_OK)
                return s;
        }
        if (!np) {
            if (!record)
                break;
            continue;
        }
        tier *tk = &t->t[k];
        dedup_tier_stats *ts = &t->st.tier[k];
        bool last = k + 1 == t->n;
        bool final_new = last || (tk->probabilistic && tk->covers_below && !tk->forgets &&
                                  !t->shared);
        gather(t, b, off, t->pending, np, &sub);
        dedup_status s = ask(t, k, &sub, record);
        if (s != DEDUP_OK)
            return s;
        size_t nn = 0;
        for (size_t j = 0; j < np; j++) {
            uint32_t i = t->pending[j];
            switch (t->v[j]) {
            case DEDUP_DUPLICATE:
                ts->hits++;
                out[i] = DEDUP_DUPLICATE;
                break;
            case DEDUP_MAYBE_DUPLICATE:
                ts->hits++;
                if (t->trust_filter || last) {
                    ts->trusted += t->trust_filter;
                    out[i] = DEDUP_MAYBE_DUPLICATE;
                } else {
                    t->next[nn++] = i;
                }
                break;
            case DEDUP_NEW:
                if (final_new) {
                    ts->ended_new++;
                    out[i] = DEDUP_NEW;
                    if (!last)
                        t->ended_at[i] = (uint8_t)k;
                } else {
                    t->next[nn++] = i;
                }
                break;
            case DEDUP_LATE:
            case DEDUP_UNCERTAIN:
                out[i] = t->v[j];
                break;
            default: /* DEFERRED: refused at create, never expected */
                return DEDUP_ERR_UNSUPPORTED;
            }
        }
        ts->passed_down += nn;
        uint32_t *sw = t->pending;
        t->pending = t->next;
        t->next = sw;
        np = nn;
    }
    return DEDUP_OK;
}

static void count(dedup_tiers *t, const dedup_verdict *out, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        t->st.keys++;
        switch (out[i]) {
        case DEDUP_NEW:
            t->st.new_keys++;
            t->st.reads_avoided += t->ended_at[i] != NOT_ENDED;
            break;
        case DEDUP_DUPLICATE:
            t->st.duplicates++;
            break;
        case DEDUP_MAYBE_DUPLICATE:
            t->st.maybe_duplicates++;
            break;
        default:
            t->st.other++;
        }
    }
}

static dedup_status tiers_decide(void *impl, const dedup_batch *b, dedup_verdict *out,
                                 size_t *done)
{
    dedup_tiers *t = impl;
    if (done)
        *done = 0;
    if (!b || !out)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t off = 0; off < b->n; off += CHUNK) {
        size_t m = b->n - off < CHUNK ? b->n - off : CHUNK;
        dedup_status s = walk(t, b, off, m, out + off, true);
        if (s != DEDUP_OK)
            return s;
        count(t, out + off, m);
        if (done)
            *done = off + m;
    }
    return DEDUP_OK;
}

static dedup_status tiers_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    dedup_tiers *t = (dedup_tiers *)impl; /* scratch and stats only */
    if (!b || !out)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t off = 0; off < b->n; off += CHUNK) {
        size_t m = b->n - off < CHUNK ? b->n - off : CHUNK;
        dedup_status s = walk(t, b, off, m, out + off, false);
        if (s != DEDUP_OK)
            return s;
    }
    return DEDUP_OK;
}

static dedup_status tiers_commit(void *impl, const dedup_batch *b)
{
    dedup_tiers *t = impl;
    dedup_status first = DEDUP_OK;
    for (size_t k = 0; k < t->n; k++) {
        dedup_status s = dedup_seen_commit(t->t[k].seen, b);
        if (s != DEDUP_OK && first == DEDUP_OK)
            first = s;
    }
    return first;
}

static size_t own_memory(const dedup_tiers *t)
{
    return sizeof *t + CHUNK * (2 * sizeof(uint32_t) + 1 + sizeof(dedup_verdict) +
                                sizeof(dedup_digest) + sizeof(void *) + sizeof(size_t) +
                                sizeof(int64_t) + sizeof(uint64_t));
}

static void tiers_info(const void *impl, dedup_seen_info *out)
{
    const dedup_tiers *t = impl;
    memset(out, 0, sizeof *out);
    out->kind = DEDUP_SEEN_TIERS;
    out->probabilistic = !t->exact;
    out->seed = dedup_seen_seed(t->t[0].seen);
    out->items = t->st.new_keys;
    out->distinct = t->st.new_keys;
    out->distinct_exact = t->exact;
    out->distinct_known = true;
    out->memory = own_memory(t);
    double bound = 0;
    for (size_t k = 0; k < t->n; k++) {
        out->memory += dedup_seen_memory_usage(t->t[k].seen);
        bool counts = t->trust_filter ? t->t[k].probabilistic
                                      : (k + 1 == t->n && t->t[k].probabilistic);
        if (counts)
            bound += dedup_seen_fpr_bound(t->t[k].seen);
    }
    out->fpr_bound = bound < 1 ? bound : 1;
    out->fpr_target = out->fpr_bound;
}

static void tiers_free(void *impl)
{
    dedup_tiers *t = impl;
    if (!t)
        return;
    for (size_t k = 0; k < t->n; k++)
        dedup_seen_free(t->t[k].seen);
    dedup_allocator a = t->a;
    ddi_free(&a, t->pending);
    ddi_free(&a, t->next);
    ddi_free(&a, t->ended_at);
    ddi_free(&a, t->v);
    ddi_free(&a, t->digests);
    ddi_free(&a, t->keys);
    ddi_free(&a, t->lens);
    ddi_free(&a, t->times);
    ddi_free(&a, t->ints);
    ddi_free(&a, t);
}

static const dedup_seen_ops tiers_ops = {
    .kind = DEDUP_SEEN_TIERS,
    .decide = tiers_decide,
    .query = tiers_query,
    .commit = tiers_commit,
    .info = tiers_info,
    .free = tiers_free,
};

dedup_status dedup_tiers_create(const dedup_tiers_spec *spec, const dedup_allocator *alloc,
                                dedup_seen **out, const dedup_tiers **view)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (view)
        *view = NULL;
    if (!spec || !spec->tiers || spec->n == 0 || spec->n > DEDUP_TIERS_MAX)
        return DEDUP_ERR_INVALID_ARG;
    uint64_t seed = 0;
    for (size_t k = 0; k < spec->n; k++) {
        const dedup_seen *s = spec->tiers[k].seen;
        if (!s || dedup_seen_kind_of(s) == DEDUP_SEEN_EXACT_SPILL)
            return DEDUP_ERR_INVALID_ARG;
        uint64_t sk = dedup_seen_seed(s);
        if (sk && seed && sk != seed)
            return DEDUP_ERR_INCOMPATIBLE;
        if (sk)
            seed = sk;
    }
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_tiers *t = ddi_calloc(&a, 1, sizeof *t);
    if (!t)
        return DEDUP_ERR_NOMEM;
    t->a = a;
    t->pending = ddi_malloc(&a, CHUNK * sizeof *t->pending);
    t->next = ddi_malloc(&a, CHUNK * sizeof *t->next);
    t->ended_at = ddi_malloc(&a, CHUNK);
    t->v = ddi_malloc(&a, CHUNK * sizeof *t->v);
    t->digests = ddi_malloc(&a, CHUNK * sizeof *t->digests);
    t->keys = ddi_malloc(&a, CHUNK * sizeof *t->keys);
    t->lens = ddi_malloc(&a, CHUNK * sizeof *t->lens);
    t->times = ddi_malloc(&a, CHUNK * sizeof *t->times);
    t->ints = ddi_malloc(&a, CHUNK * sizeof *t->ints);
    if (!t->pending || !t->next || !t->ended_at || !t->v || !t->digests || !t->keys ||
        !t->lens || !t->times || !t->ints) {
        tiers_free(t); /* n is 0: frees no tier */
        return DEDUP_ERR_NOMEM;
    }
    t->trust_filter = spec->trust_filter;
    t->shared = spec->shared;
    t->st.trust_filter = spec->trust_filter;
    t->st.shared = spec->shared;
    t->st.n = spec->n;
    for (size_t k = 0; k < spec->n; k++) {
        const dedup_tier *in = &spec->tiers[k];
        dedup_seen_info info;
        dedup_seen_get_info(in->seen, &info);
        tier *tk = &t->t[k];
        tk->probabilistic = info.probabilistic;
        tk->forgets = in->forgets || info.kind == DEDUP_SEEN_WINDOW;
        tk->covers_below = in->covers_below;
        tk->record = in->record;
        tk->record_ctx = in->record_ctx;
        dedup_tier_stats *ts = &t->st.tier[k];
        ts->kind = info.kind;
        ts->probabilistic = info.probabilistic;
        snprintf(ts->name, sizeof ts->name, "%s",
                 in->name ? in->name : dedup_seen_kind_name(info.kind));
    }
    t->exact = !t->trust_filter && !t->t[spec->n - 1].probabilistic;
    t->st.exact = t->exact;
    dedup_status s = dedup_seen_wrap(&tiers_ops, t, alloc, out);
    if (s != DEDUP_OK) {
        tiers_free(t);
        return s;
    }
    /* Owned from here on. */
    for (size_t k = 0; k < spec->n; k++)
        t->t[k].seen = spec->tiers[k].seen;
    t->n = spec->n;
    if (view)
        *view = t;
    return DEDUP_OK;
}

dedup_seen *dedup_tiers_tier(const dedup_tiers *t, size_t i)
{
    return t && i < t->n ? t->t[i].seen : NULL;
}

void dedup_tiers_get_stats(const dedup_tiers *t, dedup_tiers_stats *out)
{
    *out = t->st;
}
