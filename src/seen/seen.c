/*
 * seen.c - the seen-set (dedup/seen.h): the registry of local kinds, the
 * dispatch through dedup_seen_ops, loading by the file's header, and the
 * one place where sizes are computed from a budget.
 *
 * A dedup_seen is a table pointer and the implementation's object: local
 * kinds and outside ones (dedup_seen_wrap) are dispatched the same way, so
 * nothing here ever compares a name or a function pointer to find a kind.
 */
#include "seen_internal.h"

#include <math.h>
#include <string.h>

#include "dedup/bloom.h"
#include "dedup/cuckoo.h"
#include "dedup/set.h"

/* ---- The registry -------------------------------------------------------------
 * Every local kind, in dedup_seen_kind order.  To add one: define
 * `const ddi_seen_class ddi_seen_class_NAME` in its own file (src/seen/) and
 * add X(NAME) here. */
#define DDI_SEEN_CLASS_LIST(X) \
    X(exact)                   \
    X(fingerprint)             \
    X(u64)                     \
    X(bloom)                   \
    X(blocked)                 \
    X(counting)                \
    X(cuckoo)                  \
    X(scalable)                \
    X(window)                  \
    X(exact_spill)             \
    X(bitmap)

#define DECLARE_CLASS(name) extern const ddi_seen_class ddi_seen_class_##name;
#define LIST_CLASS(name) &ddi_seen_class_##name,
DDI_SEEN_CLASS_LIST(DECLARE_CLASS)
static const ddi_seen_class *const classes[] = {DDI_SEEN_CLASS_LIST(LIST_CLASS) NULL};

static const ddi_seen_class *class_of(dedup_seen_kind kind)
{
    for (size_t i = 0; classes[i]; i++)
        if (classes[i]->ops.kind == kind)
            return classes[i];
    return NULL;
}

static const ddi_seen_class *class_of_file_type(uint32_t type)
{
    for (size_t i = 0; classes[i]; i++)
        for (size_t j = 0; j < 2; j++)
            if (type && classes[i]->file_types[j] == type)
                return classes[i];
    return NULL;
}

static const char *const kind_names[] = {
    NULL,     "exact",  "fingerprint", "u64",         "bloom",  "blocked", "counting", "cuckoo",
    "scalable", "window", "exact-spill", "bitmap", "roaring", "redis",   "store",    "tiers",
    "other"};
#define KIND_MAX DEDUP_SEEN_OTHER

const char *dedup_seen_kind_name(dedup_seen_kind kind)
{
    return kind >= 1 && kind <= KIND_MAX ? kind_names[kind] : "unknown";
}

dedup_seen_kind dedup_seen_kind_from_name(const char *name)
{
    if (!name)
        return 0;
    for (int k = 1; k <= KIND_MAX; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return (dedup_seen_kind)k;
    return 0;
}

dedup_seen_kind dedup_seen_kind_of_file_type(uint32_t file_type)
{
    const ddi_seen_class *c = class_of_file_type(file_type);
    return c ? c->ops.kind : 0;
}

uint32_t dedup_seen_file_type(dedup_seen_kind kind)
{
    const ddi_seen_class *c = class_of(kind);
    return c ? c->file_types[0] : 0;
}

void ddi_seen_why(char *why, size_t whycap, const char *msg)
{
    if (!why || !whycap)
        return;
    size_t n = strlen(msg);
    if (n >= whycap)
        n = whycap - 1;
    memcpy(why, msg, n);
    why[n] = '\0';
}

/* ---- The object ------------------------------------------------------------------ */

struct dedup_seen {
    const dedup_seen_ops *ops;
    const ddi_seen_class *cls; /* NULL for an outside implementation */
    void *impl;
    dedup_allocator alloc;
};

void dedup_seen_spec_init(dedup_seen_spec *spec)
{
    if (!spec)
        return;
    memset(spec, 0, sizeof *spec);
    spec->fpr = 0.01;
    spec->seed = DEDUP_DEFAULT_SEED;
    spec->on_full = DEDUP_ON_FULL_WARN;
    spec->expansion = 2;
    spec->growth = 2;
    spec->tightening = 0.5;
}

static dedup_status new_seen(const dedup_seen_ops *ops, const ddi_seen_class *cls, void *impl,
                             const dedup_allocator *alloc, dedup_seen **out)
{
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_seen *s = ddi_malloc(&a, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    s->ops = ops;
    s->cls = cls;
    s->impl = impl;
    s->alloc = a;
    *out = s;
    return DEDUP_OK;
}

static bool spec_valid(const dedup_seen_spec *sp)
{
    if (!(sp->fpr > 0 && sp->fpr <= 0.5))
        return false;
    if (sp->on_full != DEDUP_ON_FULL_WARN && sp->on_full != DEDUP_ON_FULL_FAIL &&
        sp->on_full != DEDUP_ON_FULL_GROW)
        return false;
    if (sp->kind == DEDUP_SEEN_SCALABLE || sp->on_full == DEDUP_ON_FULL_GROW) {
        if (sp->growth < 1 || !(sp->tightening > 0 && sp->tightening < 1))
            return false;
    }
    return true;
}

dedup_status dedup_seen_create(const dedup_seen_spec *spec, const dedup_allocator *alloc,
                               dedup_seen **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (!spec || !spec_valid(spec))
        return DEDUP_ERR_INVALID_ARG;
    const ddi_seen_class *c = class_of(spec->kind);
    if (!c)
        return DEDUP_ERR_INVALID_ARG; /* remote kinds come from their components */
    /* A fixed Bloom filter asked to grow is a scalable chain from its first key. */
    if (spec->on_full == DEDUP_ON_FULL_GROW &&
        (spec->kind == DEDUP_SEEN_BLOOM || spec->kind == DEDUP_SEEN_BLOCKED))
        c = &ddi_seen_class_scalable;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    void *impl = NULL;
    dedup_status st = c->create(spec, &a, &impl);
    if (st)
        return st;
    st = new_seen(&c->ops, c, impl, &a, out);
    if (st)
        c->ops.free(impl);
    return st;
}

dedup_status dedup_seen_wrap(const dedup_seen_ops *ops, void *impl, const dedup_allocator *alloc,
                             dedup_seen **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (!ops)
        return DEDUP_ERR_INVALID_ARG;
    return new_seen(ops, NULL, impl, alloc, out);
}

void dedup_seen_free(dedup_seen *s)
{
    if (!s)
        return;
    if (s->ops->free)
        s->ops->free(s->impl);
    dedup_allocator a = s->alloc;
    ddi_free(&a, s);
}

/* ---- Loading by the header ---------------------------------------------------------
 * The header is read once to learn the type, then handed to the kind's
 * loader again through a source that replays it before the rest. */

typedef struct replay {
    dedup_source under;
    unsigned char head[DEDUP_HEADER_SIZE];
    size_t pos, len;
} replay;

static dedup_status replay_read(void *ctx, void *buf, size_t len)
{
    replay *r = ctx;
    unsigned char *p = buf;
    if (r->pos < r->len) {
        size_t c = r->len - r->pos < len ? r->len - r->pos : len;
        memcpy(p, r->head + r->pos, c);
        r->pos += c;
        p += c;
        len -= c;
    }
    return len ? r->under.read(r->under.ctx, p, len) : DEDUP_OK;
}

static uint64_t replay_remaining(void *ctx)
{
    replay *r = ctx;
    uint64_t u = r->under.remaining ? r->under.remaining(r->under.ctx) : UINT64_MAX;
    return u == UINT64_MAX ? u : u + (r->len - r->pos);
}

/* A valid container of a type no kind keeps: read it through to its checksum. */
static dedup_status validate_other(dedup_source src)
{
    dedup_decoder decoder, *d = &decoder; /* 64-byte aligned: on the stack, as in every loader */
    dedup_status st = dedup_decoder_begin(d, src, 0);
    unsigned char buf[4096];
    uint64_t left = st ? 0 : d->header.payload_len;
    while (!st && left) {
        size_t c = left < sizeof buf ? (size_t)left : sizeof buf;
        st = dedup_decoder_read(d, buf, c);
        left -= c;
    }
    if (!st)
        st = dedup_decoder_end(d);
    return st ? st : DEDUP_ERR_WRONG_TYPE;
}

dedup_status dedup_seen_load(dedup_source src, const dedup_allocator *alloc, dedup_seen **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    if (!src.read)
        return DEDUP_ERR_INVALID_ARG;
    replay r = {.under = src, .pos = 0, .len = DEDUP_HEADER_SIZE};
    dedup_status st = src.read(src.ctx, r.head, DEDUP_HEADER_SIZE);
    if (st)
        return st;
    static const unsigned char magic[8] = {0x89, 'D', 'D', 'P', '\r', '\n', 0x1a, '\n'};
    if (memcmp(r.head, magic, 8) != 0)
        return DEDUP_ERR_BAD_MAGIC;
    uint16_t type = (uint16_t)(r.head[10] | r.head[11] << 8);
    dedup_source rs = {replay_read, replay_remaining, &r};
    const ddi_seen_class *c = class_of_file_type(type);
    if (!c)
        return validate_other(rs);
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    void *impl = NULL;
    st = c->load(rs, &a, dedup_get_u64(r.head + 24), &impl);
    if (st)
        return st;
    uint64_t left = replay_remaining(&r);
    if (left == UINT64_MAX) {
        unsigned char extra;
        left = replay_read(&r, &extra, 1) == DEDUP_OK;
    }
    if (left != 0) {
        c->ops.free(impl);
        return DEDUP_ERR_TRAILING;
    }
    st = new_seen(&c->ops, c, impl, &a, out);
    if (st)
        c->ops.free(impl);
    return st;
}

dedup_status dedup_seen_load_file(const char *path, const dedup_allocator *alloc, dedup_seen **out)
{
    if (!out || !path)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_file_source *f = ddi_malloc(&a, sizeof *f);
    if (!f)
        return DEDUP_ERR_NOMEM;
    dedup_source src;
    dedup_status st = dedup_file_source_open(f, path, &src);
    if (!st) {
        st = dedup_seen_load(src, &a, out);
        dedup_file_source_close(f);
    }
    ddi_free(&a, f);
    return st;
}

/* ---- Dispatch ------------------------------------------------------------------------ */

dedup_status dedup_seen_decide(dedup_seen *s, const dedup_batch *b, dedup_verdict *out,
                               size_t *done)
{
    if (done)
        *done = 0;
    if (!s || !b || (b->n && !out))
        return DEDUP_ERR_INVALID_ARG;
    if (!s->ops->decide)
        return DEDUP_ERR_UNSUPPORTED;
    size_t d = 0;
    dedup_status st = s->ops->decide(s->impl, b, out, &d);
    if (done)
        *done = st ? d : b->n;
    return st;
}

dedup_status dedup_seen_add(dedup_seen *s, const dedup_batch *b, size_t *done)
{
    if (done)
        *done = 0;
    if (!s || !b)
        return DEDUP_ERR_INVALID_ARG;
    size_t d = 0;
    dedup_status st = DEDUP_OK;
    if (s->cls && s->cls->add) {
        st = s->cls->add(s->impl, b, &d);
    } else if (s->ops->add) {
        st = s->ops->add(s->impl, b, &d);
    } else if (!s->ops->decide) {
        return DEDUP_ERR_UNSUPPORTED;
    } else {
        /* A set: adding a key again changes nothing, so add = decide. */
        dedup_verdict v[256];
        while (d < b->n && !st) {
            size_t c = b->n - d < 256 ? b->n - d : 256, got = 0;
            dedup_batch part = *b;
            part.n = c;
#define ADV(f) part.f = b->f ? b->f + d : NULL
            ADV(digests);
            ADV(keys);
            ADV(lens);
            ADV(times);
            ADV(ints);
            ADV(records);
            ADV(rlens);
#undef ADV
            st = s->ops->decide(s->impl, &part, v, &got);
            d += st ? got : c;
        }
    }
    if (done)
        *done = st ? d : b->n;
    return st;
}

dedup_status dedup_seen_query(const dedup_seen *s, const dedup_batch *b, dedup_verdict *out)
{
    if (!s || !b || (b->n && !out))
        return DEDUP_ERR_INVALID_ARG;
    return s->ops->query ? s->ops->query(s->impl, b, out) : DEDUP_ERR_UNSUPPORTED;
}

dedup_status dedup_seen_delete(dedup_seen *s, const dedup_batch *b, bool *removed)
{
    if (!s || !b)
        return DEDUP_ERR_INVALID_ARG;
    return s->ops->remove ? s->ops->remove(s->impl, b, removed) : DEDUP_ERR_UNSUPPORTED;
}

dedup_status dedup_seen_commit(dedup_seen *s, const dedup_batch *b)
{
    if (!s || !b)
        return DEDUP_ERR_INVALID_ARG;
    return s->ops->commit ? s->ops->commit(s->impl, b) : DEDUP_OK;
}

dedup_status dedup_seen_flush(dedup_seen *s)
{
    if (!s)
        return DEDUP_ERR_INVALID_ARG;
    return s->ops->flush ? s->ops->flush(s->impl) : DEDUP_OK;
}

const char *dedup_seen_error(const dedup_seen *s)
{
    const char *e = s && s->ops->error ? s->ops->error(s->impl) : NULL;
    return e ? e : "";
}

void dedup_seen_get_stats(const dedup_seen *s, dedup_seen_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (s && s->ops->stats)
        s->ops->stats(s->impl, out);
}

dedup_status dedup_seen_fill(const dedup_seen *src, dedup_seen *dst, uint64_t *count)
{
    if (count)
        *count = 0;
    if (!src || !dst)
        return DEDUP_ERR_INVALID_ARG;
    return src->ops->fill ? src->ops->fill(src->impl, dst, count) : DEDUP_ERR_UNSUPPORTED;
}

dedup_status dedup_seen_advance(dedup_seen *s, int64_t watermark)
{
    if (!s)
        return DEDUP_ERR_INVALID_ARG;
    return s->cls && s->cls->advance ? s->cls->advance(s->impl, watermark)
                                     : DEDUP_ERR_UNSUPPORTED;
}

dedup_status dedup_seen_set_on_full(dedup_seen *s, dedup_on_full on_full)
{
    if (!s || (on_full != DEDUP_ON_FULL_WARN && on_full != DEDUP_ON_FULL_FAIL &&
               on_full != DEDUP_ON_FULL_GROW))
        return DEDUP_ERR_INVALID_ARG;
    if (s->cls && s->cls->set_on_full)
        return s->cls->set_on_full(s->impl, on_full);
    return on_full == DEDUP_ON_FULL_WARN ? DEDUP_OK : DEDUP_ERR_UNSUPPORTED;
}

dedup_status dedup_seen_finish(dedup_seen *s, dedup_seen_emit_fn emit, void *ctx)
{
    if (!s)
        return DEDUP_ERR_INVALID_ARG;
    return s->ops->finish ? s->ops->finish(s->impl, emit, ctx) : DEDUP_OK;
}

bool dedup_seen_spilled(const dedup_seen *s)
{
    return s && s->cls && s->cls->spilled && s->cls->spilled(s->impl);
}

unsigned dedup_seen_parts(const dedup_seen *s)
{
    return s && s->cls && s->cls->parts ? s->cls->parts(s->impl) : 1;
}

unsigned dedup_seen_part_of(dedup_digest d) { return dedup_refset_part(d); }

dedup_status dedup_seen_decide_part(dedup_seen *s, const dedup_batch *b, unsigned part,
                                    dedup_verdict *out)
{
    if (!s || !b || part > 1 || (b->n && !out))
        return DEDUP_ERR_INVALID_ARG;
    if (!s->cls || !s->cls->decide_part)
        return DEDUP_ERR_UNSUPPORTED;
    return s->cls->decide_part(s->impl, b, part, out);
}

const struct dedup_extsort *dedup_seen_spill_engine(const dedup_seen *s)
{
    return s && s->cls && s->cls->engine ? s->cls->engine(s->impl) : NULL;
}

void dedup_seen_get_info(const dedup_seen *s, dedup_seen_info *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->distinct_known = true;
    if (!s)
        return;
    out->kind = s->ops->kind;
    if (s->ops->info)
        s->ops->info(s->impl, out);
    out->kind = s->ops->kind;
    out->memory += sizeof *s;
    if (!out->file_type)
        out->can_save = false;
}

dedup_status dedup_seen_get_filter_info(const dedup_seen *s, dedup_seen_filter_info *out)
{
    if (!s || !out)
        return DEDUP_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!s->cls || !s->cls->filter_info)
        return DEDUP_ERR_UNSUPPORTED;
    s->cls->filter_info(s->impl, out);
    out->kind = s->ops->kind;
    return DEDUP_OK;
}

dedup_status dedup_seen_get_link_info(const dedup_seen *s, uint32_t link,
                                      dedup_seen_link_info *out)
{
    if (!s || !out)
        return DEDUP_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (!s->cls || !s->cls->link_info)
        return DEDUP_ERR_UNSUPPORTED;
    return s->cls->link_info(s->impl, link, out);
}

dedup_seen_kind dedup_seen_kind_of(const dedup_seen *s) { return s ? s->ops->kind : 0; }

uint64_t dedup_seen_seed(const dedup_seen *s)
{
    if (s && s->cls && s->cls->seed)
        return s->cls->seed(s->impl);
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    return in.seed;
}

size_t dedup_seen_memory_usage(const dedup_seen *s)
{
    if (s && s->cls && s->cls->memory)
        return s->cls->memory(s->impl) + sizeof *s;
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    return in.memory;
}

double dedup_seen_fpr_bound(const dedup_seen *s)
{
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    return in.fpr_bound;
}

bool dedup_seen_distinct(const dedup_seen *s, uint64_t *count, bool *exact)
{
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    if (count)
        *count = in.distinct_known ? in.distinct : 0;
    if (exact)
        *exact = in.distinct_known && in.distinct_exact;
    return in.distinct_known;
}

uint64_t dedup_seen_count_of(const dedup_seen *s, const void *key, size_t len, dedup_digest d)
{
    return s && s->ops->count_of ? s->ops->count_of(s->impl, key, len, d) : 0;
}

dedup_status dedup_seen_merge(dedup_seen *dst, const dedup_seen *src, char *why, size_t whycap)
{
    if (!dst || !src)
        return DEDUP_ERR_INVALID_ARG;
    /* A spilling exact set (before its first decide) takes an exact set's
     * keys: a state loaded from a file, carried on by reference. */
    if (dst->cls == &ddi_seen_class_exact_spill && src->cls == &ddi_seen_class_exact)
        return ddi_spill_take(dst->impl, src->cls->structure(src->impl), dedup_seen_seed(src), why,
                              whycap);
    if (!dst->cls || !dst->cls->merge || dst->cls != src->cls) {
        if (dst->cls && dst->cls->merge && src->cls && src->ops->kind != dst->ops->kind) {
            ddi_seen_why(why, whycap, "the two seen-sets are of different kinds");
            return DEDUP_ERR_INCOMPATIBLE;
        }
        return DEDUP_ERR_UNSUPPORTED;
    }
    return dst->cls->merge(dst->impl, src->impl, why, whycap);
}

dedup_status dedup_seen_save(const dedup_seen *s, dedup_sink *sink)
{
    if (!s || !sink)
        return DEDUP_ERR_INVALID_ARG;
    return s->ops->save ? s->ops->save(s->impl, sink) : DEDUP_ERR_UNSUPPORTED;
}

static dedup_status save_thunk(const void *obj, dedup_sink *sink)
{
    return dedup_seen_save(obj, sink);
}

dedup_status dedup_seen_save_file(const dedup_seen *s, const char *path)
{
    if (!s || !path)
        return DEDUP_ERR_INVALID_ARG;
    if (!s->ops->save)
        return DEDUP_ERR_UNSUPPORTED;
    /* Ask first, with a sink that only counts, so that an unsupported save
     * (a spilled set) never creates a temporary file. */
    uint64_t n = 0;
    dedup_sink cs = dedup_count_sink_init(&n);
    dedup_status st = s->ops->save(s->impl, &cs);
    if (st == DEDUP_ERR_UNSUPPORTED)
        return st;
    return dedup_save_file(path, save_thunk, s);
}

void *dedup_seen_impl(const dedup_seen *s)
{
    return s && s->cls && s->cls->structure ? s->cls->structure(s->impl) : NULL;
}

/* ---- Sizing from a budget ---------------------------------------------------------------- */

static bool rate_ok(double p) { return p > 0 && p <= 0.5; }

uint64_t dedup_seen_bytes_for(dedup_seen_kind kind, uint64_t items, double fpr)
{
    if (!items)
        return 0;
    if (kind == DEDUP_SEEN_FINGERPRINT)
        return dedup_digestset_memory_for(items);
    if (kind == DEDUP_SEEN_U64)
        return dedup_u64set_memory_for(items);
    if (!rate_ok(fpr))
        return 0;
    uint64_t bits = 0;
    switch (kind) {
    case DEDUP_SEEN_BLOOM: bits = dedup_bloom_bits_for(items, fpr); break;
    case DEDUP_SEEN_BLOCKED: bits = dedup_blocked_bits_for(items, fpr); break;
    case DEDUP_SEEN_COUNTING: {
        uint64_t m = dedup_bloom_bits_for(items, fpr);
        bits = m > UINT64_MAX / 4 ? 0 : ((m + 15) / 16 * 16) * 4;
        break;
    }
    case DEDUP_SEEN_CUCKOO: {
        uint32_t f = dedup_cuckoo_fingerprint_bits_for(fpr, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
        uint64_t nb = dedup_cuckoo_buckets_for(items, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
        if (!f || !nb || nb > UINT64_MAX / (4u * f))
            return 0;
        bits = nb * DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE * f;
        break;
    }
    default: return 0;
    }
    return bits ? (bits + 7) / 8 : 0;
}

uint64_t dedup_seen_capacity_for(dedup_seen_kind kind, uint64_t bytes, double fpr)
{
    if (!bytes || !rate_ok(fpr) || bytes > DEDUP_MAX_BITS / 8)
        return 0;
    switch (kind) {
    case DEDUP_SEEN_BLOOM: return dedup_bloom_capacity_for(bytes * 8, fpr);
    case DEDUP_SEEN_BLOCKED: return dedup_blocked_capacity_for(bytes * 8, fpr);
    case DEDUP_SEEN_COUNTING: return dedup_bloom_capacity_for(bytes * 2, fpr);
    case DEDUP_SEEN_CUCKOO: {
        uint32_t f = dedup_cuckoo_fingerprint_bits_for(fpr, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
        uint64_t nb = dedup_cuckoo_buckets_for_memory(bytes, f, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
        /* the planned load of 4-slot buckets (dedup/cuckoo.h) */
        return (uint64_t)floor((double)nb * DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE * 0.94);
    }
    default: return 0;
    }
}

uint64_t dedup_seen_size_for(dedup_seen_kind kind, uint64_t items, double fpr)
{
    switch (kind) {
    case DEDUP_SEEN_BLOOM:
    case DEDUP_SEEN_COUNTING: return dedup_bloom_bits_for(items, fpr);
    case DEDUP_SEEN_BLOCKED: return dedup_blocked_bits_for(items, fpr);
    default: return 0;
    }
}

uint32_t dedup_seen_hashes_for(dedup_seen_kind kind, uint64_t items, uint64_t size)
{
    switch (kind) {
    case DEDUP_SEEN_BLOOM:
    case DEDUP_SEEN_COUNTING: return dedup_bloom_k_for(items, size);
    case DEDUP_SEEN_BLOCKED: return dedup_blocked_k_for(items, size);
    default: return 0;
    }
}

double dedup_seen_fpr_for(dedup_seen_kind kind, uint64_t items, uint64_t size, uint32_t hashes)
{
    uint32_t k = hashes ? hashes : dedup_seen_hashes_for(kind, items, size);
    switch (kind) {
    case DEDUP_SEEN_BLOOM:
    case DEDUP_SEEN_COUNTING: return dedup_bloom_fpr_for(items, size, k);
    case DEDUP_SEEN_BLOCKED: return dedup_blocked_fpr_for(items, size, k);
    default: return 0.0;
    }
}

uint64_t dedup_seen_capacity_for_size(dedup_seen_kind kind, uint64_t size, double fpr)
{
    switch (kind) {
    case DEDUP_SEEN_BLOOM:
    case DEDUP_SEEN_COUNTING: return dedup_bloom_capacity_for(size, fpr);
    case DEDUP_SEEN_BLOCKED: return dedup_blocked_capacity_for(size, fpr);
    default: return 0;
    }
}

uint32_t dedup_seen_fingerprint_bits_for(double fpr, uint32_t bucket_size)
{
    return dedup_cuckoo_fingerprint_bits_for(fpr, bucket_size);
}

double dedup_seen_fingerprint_fpr(uint32_t bits, uint32_t bucket_size, double load)
{
    return dedup_cuckoo_fpr_for(bits, bucket_size, load);
}
