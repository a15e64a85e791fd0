/*
 * seen_window.c - WINDOW of dedup/seen.h: the sliding, tumbling and last-N
 * windows of dedup/window.h, exact or approximate.
 *
 * The window is the implementation itself.  decide() needs batch.times for
 * sliding and tumbling windows (microseconds); a last-N window counts
 * records and ignores them.  query answers at batch.times without recording
 * or moving the clock (dedup_window_query); spec.refresh_on_dup is the
 * window's refresh on duplicate.  A window forgets by time, not by delete.
 */
#include "seen_internal.h"

#include "dedup/window.h"

static dedup_status win_create(const dedup_seen_spec *sp, const dedup_allocator *a, void **impl)
{
    if (sp->window_type != DEDUP_WINDOW_SLIDING && sp->window_type != DEDUP_WINDOW_TUMBLING &&
        sp->window_type != DEDUP_WINDOW_COUNT)
        return DEDUP_ERR_INVALID_ARG;
    dedup_window_params p;
    dedup_window_params_init(&p);
    p.type = (dedup_window_type)sp->window_type;
    p.mode = sp->approximate ? DEDUP_WINDOW_APPROX : DEDUP_WINDOW_EXACT;
    p.duration = sp->duration;
    p.lateness = p.type == DEDUP_WINDOW_COUNT ? 0 : sp->lateness;
    p.capacity = sp->items;
    p.fpr = sp->fpr;
    p.seed = sp->seed;
    p.refresh = sp->refresh_on_dup; /* tumbling, or lateness >= duration: INVALID_ARG */
    dedup_status st = dedup_window_create(&p, a, (dedup_window **)impl);
    if (!st && sp->memory && dedup_window_memory_usage(*impl) > sp->memory) {
        dedup_window_free(*impl);
        *impl = NULL;
        st = DEDUP_ERR_LIMIT;
    }
    return st;
}

static dedup_status win_load(dedup_source src, const dedup_allocator *a, uint64_t seed, void **impl)
{
    (void)seed;
    return dedup_window_load(src, a, (dedup_window **)impl);
}

static dedup_status win_decide(void *impl, const dedup_batch *b, dedup_verdict *out, size_t *done)
{
    dedup_window_params p;
    dedup_window_get_params(impl, &p);
    if (b->n && (!b->digests || (!b->times && p.type != DEDUP_WINDOW_COUNT)))
        return DEDUP_ERR_INVALID_ARG;
    return dedup_window_seen_batch(impl, b->digests, b->times, b->n, out, done);
}

static dedup_status win_query(const void *impl, const dedup_batch *b, dedup_verdict *out)
{
    dedup_window_params p;
    dedup_window_get_params(impl, &p);
    bool count = p.type == DEDUP_WINDOW_COUNT;
    if (b->n && (!b->digests || !out || (!b->times && !count)))
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < b->n; i++) {
        dedup_status s = dedup_window_query(impl, b->digests[i], count ? 0 : b->times[i], &out[i]);
        if (s)
            return s;
    }
    return DEDUP_OK;
}

static void win_info(const void *impl, dedup_seen_info *in)
{
    dedup_window_params p;
    dedup_window_get_params(impl, &p);
    dedup_window_stats s;
    dedup_window_get_stats(impl, &s);
    bool approx = p.mode == DEDUP_WINDOW_APPROX;
    in->file_type = DEDUP_TYPE_WINDOW;
    in->probabilistic = approx;
    in->can_save = true;
    in->seed = p.seed;
    in->capacity = approx ? p.capacity : 0;
    in->items = s.kept;
    in->distinct = s.live;
    in->distinct_exact = !approx;
    in->fpr_target = approx ? p.fpr : 0;
    in->fpr_bound = approx ? p.fpr : 0; /* the window's promise at any load (dedup/window.h) */
    in->memory = dedup_window_memory_usage(impl);
}

static dedup_status win_save(const void *impl, dedup_sink *sink)
{
    return dedup_window_save(impl, sink);
}

static dedup_status win_advance(void *impl, int64_t watermark)
{
    return dedup_window_advance_watermark(impl, watermark);
}

static void win_free(void *impl) { dedup_window_free(impl); }

static void *same(const void *impl) { return (void *)impl; }

static uint64_t win_seed(const void *impl)
{
    dedup_window_params p;
    dedup_window_get_params(impl, &p);
    return p.seed;
}

static size_t win_memory(const void *impl) { return dedup_window_memory_usage(impl); }

const ddi_seen_class ddi_seen_class_window = {
    .ops = {.kind = DEDUP_SEEN_WINDOW, .decide = win_decide, .query = win_query, .info = win_info, .save = win_save,
            .free = win_free},
    .file_types = {DEDUP_TYPE_WINDOW, 0},
    .create = win_create,
    .load = win_load,
    .advance = win_advance,
    .structure = same,
    .seed = win_seed,
    .memory = win_memory,
};

const dedup_window *dedup_window_of_seen(const struct dedup_seen *s)
{
    return dedup_seen_kind_of(s) == DEDUP_SEEN_WINDOW ? dedup_seen_impl(s) : NULL;
}
