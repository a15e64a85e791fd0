/*
 * seen_spill.c - EXACT_SPILL of dedup/seen.h: the exact set that goes on
 * on disk.
 *
 * Keys go into a dedup_strset limited to half of spec.memory.  The first
 * insert the limit refuses freezes the set: from then on it still answers
 * DUPLICATE for the keys it holds (and, with counts, counts their repeats,
 * which needs no memory), and every other record is pushed to the external
 * engine (dedup/extsort.h) with the other half of the budget, with verdict
 * DEFERRED.  The engine emits through spec.emit: first occurrences at once
 * while its own table holds them, the rest (and, with counts, every
 * distinct record with its count) at dedup_seen_finish().  Every record it
 * emits comes after all those the set answered NEW, in first-occurrence
 * order (key order with sorted_output), so the caller writes NEW records as
 * they come and the engine's after them.  For that, the records deferred by
 * the call in which the set freezes are only copied aside (the caller has
 * yet to write that call's NEW records) and reach the engine at the start
 * of the next decide() or finish().
 */
#include "seen_internal.h"

#include <string.h>

#include "dedup/extsort.h"
#include "dedup/set.h"

#define PUSH 64 /* records gathered per dedup_extsort_push_batch */
#define PART_RUN 32 /* keys of a part a decide_part pipeline stage covers */

typedef struct spill {
    dedup_allocator alloc;
    dedup_allocator engine_alloc;
    dedup_strset *set;   /* the keys, copied; or */
    dedup_refset *refs;  /* references to them (spec.ref_base) */
    const unsigned char *ref_base;
    uint64_t ref_span;
    bool ref_keys;     /* keys are any byte ranges of their records, or copies */
    uint64_t next_seq; /* the place of a key taken from a loaded set (spill_take) */
    dedup_extsort *es; /* NULL until the set is frozen */
    uint64_t seed, memory;
    bool counts, sorted, unique_only;
    unsigned threads;
    char *tmpdir; /* a copy, or NULL */
    dedup_seen_emit_fn emit;
    void *emit_ctx;
    dedup_extsort_emit_piece_fn emit_piece;
    /* deferred records not yet pushed: [u64 rlen][u64 klen][digest][rec][key] */
    unsigned char *held;
    size_t held_len, held_cap;
    /* decide_part: each part's thread's list of its keys in a batch */
    size_t *part_ix[2];
    size_t part_cap[2];
} spill;

static void spill_free(void *impl)
{
    spill *s = impl;
    if (!s)
        return;
    dedup_extsort_free(s->es);
    dedup_strset_free(s->set);
    dedup_refset_free(s->refs);
    dedup_allocator a = s->alloc;
    ddi_free(&a, s->tmpdir);
    ddi_free(&a, s->held);
    ddi_free(&a, s->part_ix[0]);
    ddi_free(&a, s->part_ix[1]);
    ddi_free(&a, s);
}

static dedup_status spill_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    if (!sp->memory || sp->memory / 2 < DEDUP_EXTSORT_MIN_MEMORY || !sp->emit)
        return DEDUP_ERR_INVALID_ARG;
    spill *s = ddi_calloc(a, 1, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->alloc = *a;
    ddi_allocator_resolve(&s->engine_alloc, sp->engine_alloc ? sp->engine_alloc : a);
    s->seed = sp->seed;
    s->memory = sp->memory;
    s->counts = sp->counts;
    s->unique_only = sp->counts && sp->unique_only;
    s->sorted = sp->sorted_output;
    s->threads = sp->threads ? sp->threads : 1;
    s->emit = sp->emit;
    s->emit_ctx = sp->emit_ctx;
    s->emit_piece = sp->emit_piece;
    if (sp->tmpdir) {
        size_t n = strlen(sp->tmpdir) + 1;
        s->tmpdir = ddi_malloc(a, n);
        if (!s->tmpdir) {
            spill_free(s);
            return DEDUP_ERR_NOMEM;
        }
        memcpy(s->tmpdir, sp->tmpdir, n);
    }
    if (sp->ref_base) {
        dedup_refset_params rp;
        dedup_refset_params_init(&rp);
        rp.base = sp->ref_base;
        rp.span = sp->ref_span;
        rp.term = sp->ref_term;
        rp.ends = sp->ref_ends;
        rp.nends = sp->ref_nends;
        rp.expected = sp->ref_expected;
        rp.memory_limit = sp->memory / 2;
        rp.seed = sp->seed;
        rp.lengths = sp->ref_keys;
        rp.counts = sp->counts;
        s->ref_base = sp->ref_base;
        s->ref_span = sp->ref_span;
        s->ref_keys = sp->ref_keys;
        dedup_status st = dedup_refset_create(&rp, a, &s->refs);
        if (st) {
            spill_free(s);
            return st;
        }
        *impl = s;
        return DEDUP_OK;
    }
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.capacity = sp->items;
    p.seed = sp->seed;
    p.counts = sp->counts;
    p.memory_limit = sp->memory / 2;
    dedup_status st = dedup_strset_create(&p, a, &s->set);
    if (st) {
        spill_free(s);
        return st;
    }
    *impl = s;
    return DEDUP_OK;
}

/* The set's operations on key i of a batch, whichever set it is. */
static inline void set_prefetch(const spill *s, dedup_digest d)
{
    if (s->refs)
        dedup_refset_prefetch(s->refs, d);
    else
        dedup_strset_prefetch(s->set, d);
}

static inline bool set_contains(const spill *s, const unsigned char *k, size_t len, dedup_digest d)
{
    return s->refs ? dedup_refset_contains(s->refs, k, len, d)
                   : dedup_strset_contains(s->set, k, len, d);
}

/* Whether bytes [k, k + len) lie in the span of a by-reference run. */
static inline bool in_span(const spill *s, const unsigned char *k, size_t len)
{
    uintptr_t a = (uintptr_t)k, b = (uintptr_t)s->ref_base;
    return a >= b && (uint64_t)(a - b) <= s->ref_span && len <= s->ref_span - (uint64_t)(a - b);
}

/* Records key i of a by-reference batch: by reference when it lies in the
 * span, else copied (a normalised key whose bytes differ from the file's),
 * in its record's place in first-occurrence order. */
static inline dedup_status ref_insert(spill *s, const dedup_batch *b, size_t i, bool limited,
                                      dedup_verdict *v)
{
    const unsigned char *k = b->keys[i];
    if (in_span(s, k, b->lens[i])) {
        uint64_t off = (uint64_t)((uintptr_t)k - (uintptr_t)s->ref_base);
        return limited ? dedup_refset_insert(s->refs, off, b->lens[i], b->digests[i], v)
                       : dedup_refset_insert_unlimited(s->refs, off, b->lens[i], b->digests[i], v);
    }
    uint64_t rec = (uint64_t)((uintptr_t)b->records[i] - (uintptr_t)s->ref_base);
    return dedup_refset_insert_copy(s->refs, k, b->lens[i], b->digests[i],
                                    DEDUP_REFSET_SPAN_SEQ + rec, limited, v);
}

static int engine_emit(void *ctx, const void *rec, size_t len, uint64_t count)
{
    spill *s = ctx;
    return s->emit(s->emit_ctx, rec, len, count);
}

static int engine_emit_piece(void *ctx, const void *piece, size_t len, bool first, bool last,
                             uint64_t count)
{
    spill *s = ctx;
    return s->emit_piece(s->emit_ctx, piece, len, first, last, count);
}

static dedup_status start_engine(spill *s)
{
    dedup_extsort_params p;
    dedup_extsort_params_init(&p);
    p.memory_limit = s->memory - s->memory / 2;
    p.tmpdir = s->tmpdir;
    p.order = s->sorted ? DEDUP_EXTSORT_SORTED : DEDUP_EXTSORT_FIRST_OCCURRENCE;
    p.output = s->unique_only ? DEDUP_EXTSORT_UNIQUE
               : s->counts    ? DEDUP_EXTSORT_COUNT
                              : DEDUP_EXTSORT_FIRST;
    p.seed = s->seed;
    p.emit = engine_emit;
    p.emit_ctx = s;
    if (s->emit_piece)
        p.emit_piece = engine_emit_piece;
    p.threads = s->threads;
    return dedup_extsort_create(&p, &s->engine_alloc, &s->es);
}

static dedup_status hold(spill *s, const unsigned char *rec, size_t rlen, const unsigned char *key,
                         size_t klen, dedup_digest d)
{
    size_t need = s->held_len + 32 + rlen + klen;
    if (need < s->held_len)
        return DEDUP_ERR_NOMEM;
    if (need > s->held_cap) {
        size_t nc = need * 2;
        unsigned char *nb = ddi_realloc(&s->alloc, s->held, s->held_cap, nc);
        if (!nb)
            return DEDUP_ERR_NOMEM;
        s->held = nb;
        s->held_cap = nc;
    }
    unsigned char *p = s->held + s->held_len;
    uint64_t l[4] = {rlen, klen, d.lo, d.hi};
    memcpy(p, l, 32);
    memcpy(p + 32, rec, rlen);
    memcpy(p + 32 + rlen, key, klen);
    s->held_len = need;
    return DEDUP_OK;
}

/* Pushes the records held aside by the call that froze the set. */
static dedup_status push_held(spill *s)
{
    const unsigned char *rec[PUSH], *key[PUSH];
    size_t rlen[PUSH], klen[PUSH];
    dedup_digest dig[PUSH];
    size_t off = 0;
    dedup_status st = DEDUP_OK;
    while (off < s->held_len && !st) {
        size_t np = 0;
        while (np < PUSH && off < s->held_len) {
            uint64_t l[4];
            memcpy(l, s->held + off, 32);
            rlen[np] = (size_t)l[0];
            klen[np] = (size_t)l[1];
            dig[np] = (dedup_digest){l[2], l[3]};
            rec[np] = s->held + off + 32;
            key[np] = rec[np] + rlen[np];
            off += 32 + rlen[np] + klen[np];
            np++;
        }
        st = dedup_extsort_push_batch(s->es, np, (const void *const *)rec, rlen,
                                      (const void *const *)key, klen, dig);
    }
    ddi_free(&s->alloc, s->held);
    s->held = NULL;
    s->held_len = s->held_cap = 0;
    return st;
}

/* Records [from, n) once the set is frozen: pushed to the engine, or held
 * aside when 'held' (the call that froze the set). */
static dedup_status spill_rest(spill *s, const dedup_batch *b, size_t from, dedup_verdict *out,
                               size_t *done, bool held)
{
    const unsigned char *rec[PUSH], *key[PUSH];
    size_t rlen[PUSH], klen[PUSH];
    dedup_digest dig[PUSH];
    for (size_t off = from; off < b->n; off += PUSH) {
        size_t c = b->n - off < PUSH ? b->n - off : PUSH;
        for (size_t i = off; i < off + c; i++)
            set_prefetch(s, b->digests[i]);
        size_t np = 0;
        for (size_t i = off; i < off + c; i++) {
            if (set_contains(s, b->keys[i], b->lens[i], b->digests[i])) {
                out[i] = DEDUP_DUPLICATE;
                if (s->counts) {
                    dedup_verdict v; /* counts the repeat; a present key needs no memory */
                    if (s->refs)
                        (void)ref_insert(s, b, i, false, &v);
                    else
                        (void)dedup_strset_insert(s->set, b->keys[i], b->lens[i], b->digests[i], &v);
                }
                continue;
            }
            out[i] = DEDUP_DEFERRED;
            if (held) {
                dedup_status st = hold(s, b->records[i], b->rlens[i], b->keys[i], b->lens[i],
                                       b->digests[i]);
                if (st) {
                    *done = i;
                    return st;
                }
                continue;
            }
            rec[np] = b->records[i];
            rlen[np] = b->rlens[i];
            key[np] = b->keys[i];
            klen[np] = b->lens[i];
            dig[np] = b->digests[i];
            np++;
        }
        dedup_status st = np ? dedup_extsort_push_batch(s->es, np, (const void *const *)rec, rlen,
                                                        (const void *const *)key, klen, dig)
                             : DEDUP_OK;
        if (st) {
            *done = off;
            return st;
        }
    }
    return DEDUP_OK;
}

/* Record i of a by-reference batch lies in the span, and its key is that
 * record (whole-record keys) or (ref_keys) a byte range of it or a copy. */
static inline bool ref_valid(const spill *s, const dedup_batch *b, size_t i)
{
    return in_span(s, b->records[i], b->rlens[i]) &&
           (s->ref_keys || (b->keys[i] == b->records[i] && b->lens[i] == b->rlens[i]));
}

static bool refs_valid(const spill *s, const dedup_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (!ref_valid(s, b, i))
            return false;
    return true;
}

/* Two threads, one part each, while the references take less than half
 * their share of the budget (dedup_seen_parts() in dedup/seen.h). */
static unsigned spill_parts(const void *impl)
{
    const spill *s = impl;
    return s->refs && !s->es &&
                   dedup_refset_memory_usage(s->refs) < dedup_refset_memory_limit(s->refs) / 2
               ? 2
               : 1;
}

static dedup_status spill_decide_part(void *impl, const dedup_batch *b, unsigned part,
                                      dedup_verdict *out)
{
    spill *s = impl;
    if (!s->refs || s->es)
        return DEDUP_ERR_UNSUPPORTED;
    if (b->n && (!b->digests || !b->keys || !b->lens || !b->records || !b->rlens))
        return DEDUP_ERR_INVALID_ARG;
    /* This part's keys, in order (each thread checks its own). */
    size_t *ix = s->part_ix[part], m = 0;
    if (s->part_cap[part] < b->n) {
        ddi_free(&s->alloc, ix);
        ix = s->part_ix[part] = ddi_malloc(&s->alloc, b->n * sizeof *ix);
        s->part_cap[part] = ix ? b->n : 0;
        if (!ix)
            return DEDUP_ERR_NOMEM;
    }
    const dedup_digest *d = b->digests;
    for (size_t i = 0; i < b->n; i++)
        if (dedup_refset_part(d[i]) == part) {
            if (!ref_valid(s, b, i))
                return DEDUP_ERR_INVALID_ARG;
            ix[m++] = i;
        }
    /* The three passes of spill_decide, as a pipeline of runs of PART_RUN
     * keys: the slots of run j + 2 are prefetched, then the stored keys the
     * slots of run j + 1 name and those keys' own lines, while run j
     * is inserted, so each miss has a whole run's work to arrive in. */
    for (size_t j = 0; j < m + 2 * PART_RUN; j += PART_RUN) {
        for (size_t i = j + 2 * PART_RUN; i < j + 3 * PART_RUN && i < m; i++)
            dedup_refset_prefetch(s->refs, d[ix[i]]);
        for (size_t i = j + PART_RUN; i < j + 2 * PART_RUN && i < m; i++) {
            dedup_refset_prefetch_key(s->refs, d[ix[i]], b->lens[ix[i]]);
            /* the new key, first and last line: the other thread read it
             * last (a prefetch past a mapping's end is harmless) */
            DD_PREFETCH(b->keys[ix[i]]);
            DD_PREFETCH(b->keys[ix[i]] + b->lens[ix[i]]);
        }
        for (size_t i = j; i < j + PART_RUN && i < m; i++) {
            size_t k = ix[i];
            dedup_status st = ref_insert(s, b, k, false, &out[k]);
            if (st)
                return st;
        }
    }
    return DEDUP_OK;
}

static dedup_status spill_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    spill *s = impl;
    if (b->n && (!b->digests || !b->keys || !b->lens || !b->records || !b->rlens))
        return DEDUP_ERR_INVALID_ARG;
    if (s->es) {
        dedup_status st = s->held ? push_held(s) : DEDUP_OK;
        return st ? st : spill_rest(s, b, 0, out, done, false);
    }
    const dedup_digest *d = b->digests;
    /* By reference (a mapped input) or by copy: the same three passes. */
    const bool byref = s->refs != NULL;
    if (byref && !refs_valid(s, b))
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++) {
        if (byref)
            dedup_refset_prefetch(s->refs, d[i]);
        else
            dedup_strset_prefetch(s->set, d[i]);
    }
    for (size_t i = 0; i < b->n; i++) {
        if (byref)
            dedup_refset_prefetch_key(s->refs, d[i], b->lens[i]);
        else
            dedup_strset_prefetch_key(s->set, d[i]);
    }
    for (size_t i = 0; i < b->n; i++) {
        dedup_status st = byref ? ref_insert(s, b, i, true, &out[i])
                                : dedup_strset_insert(s->set, b->keys[i], b->lens[i], d[i], &out[i]);
        if (st == DEDUP_ERR_FULL) {
            st = start_engine(s);
            if (!st)
                return spill_rest(s, b, i, out, done, true);
        }
        if (st) {
            *done = i;
            return st;
        }
    }
    return DEDUP_OK;
}

static dedup_status spill_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    const spill *s = impl;
    if (s->es)
        return DEDUP_ERR_UNSUPPORTED; /* the engine answers only at the end */
    if (b->n && (!b->digests || !b->keys || !b->lens))
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++)
        out[i] = set_contains(s, b->keys[i], b->lens[i], b->digests[i])
                     ? DEDUP_DUPLICATE
                     : DEDUP_NEW;
    return DEDUP_OK;
}

static dedup_status spill_finish(void *impl, dedup_seen_emit_fn emit, void *ctx)
{
    spill *s = impl;
    if (!s->es)
        return DEDUP_OK;
    if (emit) {
        s->emit = emit;
        s->emit_ctx = ctx;
    }
    dedup_status st = s->held ? push_held(s) : DEDUP_OK;
    return st ? st : dedup_extsort_finish(s->es);
}

static void spill_info(const void *impl, dedup_seen_info *in)
{
    const spill *s = impl;
    in->file_type = DEDUP_TYPE_SET_STRING;
    in->can_count = true;
    in->can_save = !s->es;
    in->seed = s->seed;
    in->items = in->distinct = s->refs ? dedup_refset_size(s->refs) : dedup_strset_size(s->set);
    in->distinct_exact = true;
    in->memory = (s->refs ? dedup_refset_memory_usage(s->refs) : dedup_strset_memory_usage(s->set)) +
                 sizeof *s;
}

static dedup_status spill_save(const void *impl, dedup_sink *sink)
{
    const spill *s = impl;
    if (s->es)
        return DEDUP_ERR_UNSUPPORTED;
    return s->refs ? dedup_refset_save(s->refs, sink) : dedup_strset_save(s->set, sink);
}

static uint64_t spill_count(const void *impl, const void *key, size_t len, dedup_digest d)
{
    const spill *s = impl;
    if (s->refs)
        return dedup_refset_count_of(s->refs, key, len, d);
    return dedup_strset_count_of(s->set, key, len, d);
}

/* ddi_spill_take(): the keys of an EXACT set (a loaded state), before the
 * first decide, in their order. */
typedef struct take_ctx {
    spill *s;
    dedup_status st;
} take_ctx;

static int take_one(void *ctx, const void *key, size_t len, uint64_t count)
{
    (void)count;
    take_ctx *t = ctx;
    spill *s = t->s;
    dedup_digest d = dedup_hash(key, len, s->seed);
    dedup_verdict v;
    t->st = s->refs ? dedup_refset_insert_copy(s->refs, key, len, d, s->next_seq++, true, &v)
                    : dedup_strset_insert(s->set, key, len, d, &v);
    return t->st != DEDUP_OK;
}

dedup_status ddi_spill_take(void *dst, const dedup_strset *src, uint64_t src_seed, char *why,
                            size_t whycap)
{
    spill *s = dst;
    if (s->es || s->counts)
        return DEDUP_ERR_UNSUPPORTED;
    if (s->seed != src_seed) {
        ddi_seen_why(why, whycap, "the two sets were made with different seeds");
        return DEDUP_ERR_INCOMPATIBLE;
    }
    take_ctx t = {s, DEDUP_OK};
    dedup_strset_foreach(src, take_one, &t);
    return t.st;
}

static bool spill_spilled(const void *impl) { return ((const spill *)impl)->es != NULL; }
static void *spill_structure(const void *impl) { return ((const spill *)impl)->set; }
static const struct dedup_extsort *spill_engine(const void *impl)
{
    return ((const spill *)impl)->es;
}
static uint64_t spill_seed(const void *impl) { return ((const spill *)impl)->seed; }

const ddi_seen_class ddi_seen_class_exact_spill = {
    .ops = {.kind = DEDUP_SEEN_EXACT_SPILL, .decide = spill_decide, .query = spill_query,
            .finish = spill_finish, .info = spill_info, .save = spill_save,
            .count_of = spill_count, .free = spill_free},
    .file_types = {0, 0},
    .parts = spill_parts,
    .decide_part = spill_decide_part,
    .create = spill_create,
    .spilled = spill_spilled,
    .structure = spill_structure,
    .engine = spill_engine,
    .seed = spill_seed,
};
