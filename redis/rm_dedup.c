/*
 * rm_dedup.c - DEDUP.* values (see rm_filter.h for the guarantees) on the
 * library's time window, dedup/window.h.
 *
 * A value is a sliding window of D = window_ms over the server clock in
 * milliseconds, with refresh on duplicate (an add of an item seen within
 * the window renews it: "seen" means "last seen within the window") and no
 * lateness.  Approximate values are the window's tagged fingerprint table
 * (G generations, default 5, of span ceil(D / G); planned for 'capacity'
 * keys per window at fpr = error rate, at most 0.5): an item added at t
 * answers "seen" until at least t + D and at most t + D + span
 * (D * (1 + 1/G)); a new item is called seen with probability at most the
 * error rate.  EXACT values are the exact window (G default 4): digests and
 * last-seen times, seen exactly while t + D is in the future.
 *
 * The server clock can go back (an NTP step, a replica, an AOF replay on
 * another machine): every time given to the window is first raised to the
 * newest time it holds, so no item is ever LATE (the window's "no decision")
 * and nothing is forgotten early because of a step back; the items then
 * live until the clock passes their time plus D again.
 *
 * MAX_MEMORY: the window allocates through the object's allocator wrapped
 * in a budget (below), so a table or stash that would pass the limit is
 * refused by the window as an allocation failure, which leaves it usable
 * and the key unrecorded; the add then answers ERR_MAXMEM, except for an
 * item already seen within the window (its renewal could not be stored: it
 * answers 0, and is remembered from its previous sighting).
 *
 * EXACT values reserved for more than DD_PART_ITEMS items are split by
 * digest into parts, each a window of its own (the envelope's blobs), so
 * that a table grows by rebuilding one part of a few MiB, never the whole
 * value in one command; the parts share the seed and the newest time.
 *
 * Values saved before the port (envelope version 2) load through
 * legacy/rm_dedup_legacy.c: EXACT tables become exact windows there, approximate
 * ones keep their own engine.
 *
 * Memory, measured (bench/results/redis.md): DEDUP.RESERVE events 60000
 * 0.01 100000 after 100,000 items holds 481,760 bytes in the generations of
 * Bloom chains this file replaced, and the figure given there on the
 * window.
 */
#define _DEFAULT_SOURCE /* getrandom() */
#include "rm_internal.h"

#include "dedup/limits.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#define DD_DEFAULT_GEN 5u /* approximate values; EXACT takes the window's (4) */
/* EXACT: the bytes one item takes at the least (its digest and time), and
 * the largest capacity the window is told, so a generation's first table
 * is at most about 1 MiB and grows with what is added, not what was asked. */
#define DD_EXACT_ITEM_BYTES 24u
#define DD_EXACT_HINT_MAX (UINT64_C(1) << 16)
/* EXACT values are split into parts of about DD_PART_ITEMS items (by their
 * digest), each a window of its own: a table grows by rebuilding one part,
 * a few MiB at capacity, so no single command rebuilds more (an unsplit
 * table of a million items took one command tens of milliseconds). */
#define DD_PART_ITEMS (UINT64_C(1) << 16)
#define DD_PART_HINT 4096u /* the capacity a part is told: its first tables stay small */

/* ---- the window's allocator: the object's, within MAX_MEMORY --------------------
 * Each block carries its size in a 16-byte header (alignment stays 16), so
 * frees can be counted: win_bytes is what the window holds, headers
 * included, and what MEMORY USAGE reports. */
#define WA_HDR 16u

static void *wa_alloc(void *ctx, size_t n, bool zero)
{
    rmf_obj *o = ctx;
    rmf_dd *dd = o->dd;
    uint64_t fixed = sizeof *o + sizeof *dd;
    if (n > SIZE_MAX - WA_HDR)
        return NULL;
    if (o->max_memory < fixed || dd->win_bytes + n + WA_HDR > o->max_memory - fixed) {
        dd->refused = true;
        return NULL;
    }
    unsigned char *p = zero ? rmf_calloc(rmf_obj_allocator(o), n + WA_HDR)
                            : rmf_alloc(rmf_obj_allocator(o), n + WA_HDR);
    if (!p)
        return NULL;
    uint64_t sz = n;
    memcpy(p, &sz, sizeof sz);
    dd->win_bytes += n + WA_HDR;
    return p + WA_HDR;
}

static void *wa_malloc(void *ctx, size_t n) { return wa_alloc(ctx, n, false); }

static void *wa_calloc(void *ctx, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    return wa_alloc(ctx, count * size, true);
}

static void wa_free(void *ctx, void *ptr)
{
    if (!ptr)
        return;
    rmf_obj *o = ctx;
    unsigned char *p = (unsigned char *)ptr - WA_HDR;
    uint64_t sz;
    memcpy(&sz, p, sizeof sz);
    o->dd->win_bytes -= sz + WA_HDR;
    rmf_dealloc(rmf_obj_allocator(o), p);
}

static void budget_init(rmf_obj *o)
{
    o->dd->walloc = (dedup_allocator){wa_malloc, wa_calloc, NULL, wa_free, o};
}

static rmf_err window_err(const rmf_obj *o, dedup_status s)
{
    if (s == DEDUP_ERR_NOMEM && o->dd->refused)
        return ERR_MAXMEM;
    return rmf_status_err(s);
}

static void window_params(const rmf_obj *o, bool exact, uint32_t g, dedup_window_params *wp)
{
    dedup_window_params_init(wp);
    wp->type = DEDUP_WINDOW_SLIDING;
    wp->mode = exact ? DEDUP_WINDOW_EXACT : DEDUP_WINDOW_APPROX;
    wp->duration = o->dd->window_ms;
    wp->generations = g ? g : exact ? 0 : DD_DEFAULT_GEN;
    wp->capacity = o->capacity;
    if (exact) { /* a hint for the first table: small, grown as items come */
        bool split = o->dd->nparts > 1;
        uint64_t share = split ? o->capacity / o->dd->nparts + 1 : o->capacity;
        uint64_t most = split ? DD_PART_HINT : DD_EXACT_HINT_MAX;
        wp->capacity = share < most ? share : most;
    }
    if (!exact)
        wp->fpr = o->error_rate < 0.5 ? o->error_rate : 0.5;
    wp->refresh = true;
    wp->seed = o->dd->seed;
}

/* A secret seed for a new value (DEDUP.RESERVE without SEED), from the OS:
 * the items of a DEDUP value are hashed with it, so no item can be crafted
 * to share another's digest (and be answered "seen") or its fingerprint
 * slot. */
bool rmf_random_seed(uint64_t *out)
{
    unsigned char b[8];
    ssize_t got;
    do
        got = getrandom(b, sizeof b, 0);
    while (got < 0 && errno == EINTR);
    if (got != (ssize_t)sizeof b)
        return false;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    *out = v;
    return true;
}

/* Parts for an EXACT value of 'capacity' items. */
static uint32_t parts_for(uint64_t capacity)
{
    uint64_t k = (capacity + DD_PART_ITEMS - 1) / DD_PART_ITEMS;
    return k < 1 ? 1 : k > RMF_DD_MAX_PARTS ? RMF_DD_MAX_PARTS : (uint32_t)k;
}

/* Allocates the parts array (through the budget). */
static rmf_err parts_alloc(rmf_obj *o, uint32_t k)
{
    o->dd->parts = wa_calloc(o, k, sizeof *o->dd->parts);
    if (!o->dd->parts)
        return o->dd->refused ? ERR_MAXMEM : rmf_err_nomem();
    o->dd->nparts = k;
    return NULL;
}

static void note_time(rmf_obj *o, const dedup_window *w)
{
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    if (st.has_time && (!o->dd->has_newest || st.max_time > o->dd->newest)) {
        o->dd->newest = st.max_time;
        o->dd->has_newest = true;
    }
}

rmf_err rmf_dd_window_new(rmf_obj *o, bool exact, uint32_t g, uint32_t k)
{
    budget_init(o);
    o->dd->refused = false;
    rmf_err e = parts_alloc(o, k);
    dedup_window_params wp;
    window_params(o, exact, g, &wp);
    uint64_t hint = wp.capacity;
    for (uint32_t i = 0; !e && i < k; i++) {
        /* Parts fill alike (the digest spreads items evenly), so parts told
         * one size would all grow in the same few commands: part i is told
         * 1 + i/2k times the size, which spreads their growths over the
         * time the items take to grow by half. */
        if (k > 1)
            wp.capacity = hint + hint * i / (2 * (uint64_t)k);
        dedup_status s = dedup_window_create(&wp, &o->dd->walloc, &o->dd->parts[i]);
        if (s != DEDUP_OK)
            e = window_err(o, s);
        else if (exact) /* a new generation's table grows from there too */
            dedup_window_limit_first_table(o->dd->parts[i], wp.capacity);
    }
    if (e)
        return e;
    o->dd->win = o->dd->parts[0];
    dedup_window_get_params(o->dd->win, &wp);
    o->dd->generations = wp.generations;
    o->exact = exact;
    return NULL;
}

rmf_err rmf_dd_load_window(rmf_obj *o, dedup_source src, uint32_t g, uint32_t k)
{
    budget_init(o);
    o->dd->refused = false;
    if (k < 1 || k > RMF_DD_MAX_PARTS || (k > 1 && !o->exact))
        return "ERR corrupted dump header (parts)";
    rmf_err e = parts_alloc(o, k);
    if (e)
        return e;
    for (uint32_t i = 0; i < k; i++) {
        dedup_status s = dedup_window_load(src, &o->dd->walloc, &o->dd->parts[i]);
        if (s != DEDUP_OK)
            return o->dd->refused ? "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)"
                   : s == DEDUP_ERR_NOMEM ? rmf_err_nomem()
                                          : "ERR corrupted filter in dump";
        dedup_window_params want, got;
        dedup_window_get_params(o->dd->parts[i], &got);
        if (i == 0)
            o->dd->seed = got.seed; /* any: each value has its own */
        window_params(o, o->exact, g, &want);
        if (got.type != want.type || got.mode != want.mode || got.duration != want.duration ||
            got.lateness != 0 || got.generations != g || !got.refresh || got.seed != want.seed ||
            (!o->exact && (got.capacity != want.capacity || got.fpr != want.fpr)))
            return "ERR corrupted dump (window differs from its header)";
        if (o->exact) /* not saved with the window */
            dedup_window_limit_first_table(o->dd->parts[i], want.capacity);
        note_time(o, o->dd->parts[i]);
    }
    o->dd->win = o->dd->parts[0];
    o->dd->generations = g;
    return NULL;
}

rmf_err rmf_dd_create(const rmf_dd_params *p, const rmf_config *c, const dedup_allocator *a,
                      rmf_obj **out)
{
    *out = NULL;
    uint32_t g = p->generations;
    if (p->window_ms < 1 || p->window_ms > UINT64_C(1) << 50)
        return "ERR bad window (milliseconds, 1 to 2^50)";
    if (!(p->error_rate > 0 && p->error_rate < 1))
        return "ERR (0 < error rate range < 1)";
    if (p->error_rate < DEDUP_MIN_FPR)
        return "ERR error rate below the smallest supported";
    if (p->capacity < 1)
        return "ERR (capacity should be larger than 0)";
    if (p->capacity > c->max_capacity)
        return "ERR capacity above the module's limit (module argument MAX_CAPACITY)";
    if (g && (g < DD_MIN_GEN || g > DD_MAX_GEN))
        return "ERR GENERATIONS must be between 3 and 16";
    /* An EXACT value that could never hold its capacity is refused now, not
     * at the add that runs out of room. */
    if (p->exact) {
        uint64_t room = rmf_mem_room();
        if (p->capacity > c->max_memory / DD_EXACT_ITEM_BYTES)
            return "ERR capacity would exceed the per-key memory limit (module argument "
                   "MAX_MEMORY): EXACT keeps 24 bytes per item at the least";
        if (p->capacity > room / DD_EXACT_ITEM_BYTES)
            return "ERR capacity cannot fit in the server's memory (maxmemory, or the machine's "
                   "without one): EXACT keeps 24 bytes per item at the least";
    }
    rmf_obj *o = rmf_obj_new(RMF_DEDUP, a);
    if (!o)
        return rmf_err_nomem();
    o->capacity = p->capacity;
    o->error_rate = p->error_rate;
    o->dd->window_ms = p->window_ms;
    o->max_memory = c->max_memory;
    o->dd->seed = p->seed;
    rmf_err e = rmf_dd_window_new(o, p->exact, g, p->exact ? parts_for(p->capacity) : 1);
    if (e) {
        rmf_free(o);
        return e;
    }
    *out = o;
    return NULL;
}

/* The time to give the window: 'now_ms', or the newest time any part
 * holds if the clock went back. */
static int64_t clock_ms(const rmf_obj *o, uint64_t now_ms)
{
    int64_t t = now_ms > (uint64_t)DEDUP_WINDOW_MAX_TIME ? DEDUP_WINDOW_MAX_TIME : (int64_t)now_ms;
    return o->dd->has_newest && o->dd->newest > t ? o->dd->newest : t;
}

static void saw_time(rmf_obj *o, int64_t t)
{
    if (!o->dd->has_newest || t > o->dd->newest) {
        o->dd->newest = t;
        o->dd->has_newest = true;
    }
}

/* The part that holds digest d. */
static dedup_window *part_of(const rmf_obj *o, dedup_digest d)
{
    return o->dd->nparts > 1 ? o->dd->parts[dedup_reduce(d.hi, o->dd->nparts)] : o->dd->win;
}

rmf_err rmf_dd_window_put(rmf_obj *o, dedup_digest d, int64_t ms)
{
    dedup_verdict v;
    o->dd->refused = false;
    dedup_status s = dedup_window_seen(part_of(o, d), d, ms, &v);
    if (s != DEDUP_OK)
        return window_err(o, s);
    saw_time(o, ms);
    return v == DEDUP_NEW ? NULL : "ERR corrupted dump (exact table entry)";
}

rmf_err rmf_dd_add(rmf_obj *o, const void *item, size_t len, uint64_t now_ms, int *is_new)
{
    if (o->dd->legacy)
        return rmf_ddl_add(o, item, len, now_ms, is_new);
    int64_t t = clock_ms(o, now_ms);
    dedup_digest d = dedup_window_digest(o->dd->win, item, len);
    dedup_window *w = part_of(o, d);
    dedup_verdict v;
    o->dd->refused = false;
    dedup_status s = dedup_window_seen(w, d, t, &v);
    if (s == DEDUP_OK)
        saw_time(o, t);
    if (s == DEDUP_ERR_NOMEM && dedup_window_query(w, d, t, &v) == DEDUP_OK &&
        (v == DEDUP_DUPLICATE || v == DEDUP_MAYBE_DUPLICATE)) {
        *is_new = 0; /* seen within the window; its renewal found no room */
        return NULL;
    }
    if (s != DEDUP_OK)
        return window_err(o, s);
    *is_new = v == DEDUP_NEW; /* never DEDUP_LATE: t is the newest time */
    o->items += (uint64_t)*is_new;
    return NULL;
}

bool rmf_dd_exists(rmf_obj *o, const void *item, size_t len, uint64_t now_ms)
{
    if (o->dd->legacy)
        return rmf_ddl_exists(o, item, len, now_ms);
    dedup_verdict v = DEDUP_NEW;
    dedup_digest d = dedup_window_digest(o->dd->win, item, len);
    dedup_window_query(part_of(o, d), d, clock_ms(o, now_ms), &v);
    return v == DEDUP_DUPLICATE || v == DEDUP_MAYBE_DUPLICATE;
}

uint64_t rmf_dd_window_ms(const rmf_obj *o) { return o->dd->window_ms; }
uint32_t rmf_dd_generations(const rmf_obj *o) { return o->dd->generations; }
uint64_t rmf_dd_slot_ms(const rmf_obj *o)
{
    return o->dd->legacy ? o->dd->slot_ms : dedup_window_span(o->dd->win);
}
double rmf_dd_error_rate(const rmf_obj *o) { return o->error_rate; }
bool rmf_dd_exact(const rmf_obj *o) { return o->exact; }

uint64_t rmf_dd_live(const rmf_obj *o, uint64_t now_ms)
{
    uint64_t n = 0;
    if (o->exact)
        for (uint32_t i = 0; i < o->dd->nparts; i++) {
            uint64_t m = 0;
            dedup_window_count_within(o->dd->parts[i], clock_ms(o, now_ms), &m);
            n += m;
        }
    return n;
}

double rmf_dd_current_fpr(rmf_obj *o, uint64_t now_ms)
{
    if (o->dd->legacy)
        return rmf_ddl_current_fpr(o, now_ms);
    /* 0 for EXACT (digest collisions aside, about n^2 / 2^129) */
    return dedup_window_fpr_now(o->dd->win);
}

void rmf_dd_free_state(rmf_obj *o)
{
    if (!o->dd)
        return;
    rmf_ddl_free(o);
    /* through the budget, which needs o->dd */
    for (uint32_t i = 0; o->dd->parts && i < o->dd->nparts; i++)
        dedup_window_free(o->dd->parts[i]);
    if (o->dd->parts)
        wa_free(o, o->dd->parts);
    rmf_dealloc(rmf_obj_allocator(o), o->dd);
    o->dd = NULL;
}

size_t rmf_dd_memory(const rmf_obj *o)
{
    if (!o->dd)
        return 0;
    return sizeof *o->dd + (o->dd->legacy ? rmf_ddl_memory(o) : (size_t)o->dd->win_bytes);
}

/* ---- the envelope's operations (rm_internal.h) ------------------------------
 * A value on the library's window is envelope version 3; a value saved
 * before it (version 2) is read and written by legacy/rm_dedup_legacy.c. */

static uint64_t dd_blobs_size(const rmf_obj *o)
{
    if (o->dd->legacy)
        return rmf_ddl_blobs_size(o);
    uint64_t n = 0;
    for (uint32_t i = 0; i < o->dd->nparts; i++)
        n += dedup_window_serialized_size(o->dd->parts[i]);
    return n;
}

static void dd_encode(const rmf_obj *o, unsigned char h[RMF_ENVELOPE_SIZE])
{
    if (o->dd->legacy) {
        rmf_ddl_encode(o, h);
        return;
    }
    h[5] = RMF_ENVELOPE_DD_WINDOW;
    h[6] = o->exact ? 2 : 0;
    dedup_put_u32(h + 48, o->dd->generations);
    dedup_put_u32(h + 52, o->dd->nparts); /* EXACT: its parts, one window each */
    dedup_put_u64(h + 56, o->dd->window_ms);
}

static dedup_status dd_save_blobs(const rmf_obj *o, dedup_sink *sink)
{
    if (o->dd->legacy)
        return rmf_ddl_save(o, sink);
    dedup_status s = DEDUP_OK;
    for (uint32_t i = 0; s == DEDUP_OK && i < o->dd->nparts; i++)
        s = dedup_window_save(o->dd->parts[i], sink);
    return s;
}

static rmf_err dd_check(const rmf_envelope *e)
{
    if (e->version != RMF_ENVELOPE_DD_WINDOW)
        return rmf_ddl_check(e);
    if ((e->flags != 0 && e->flags != 2) || e->deleted || e->bucket_size || e->expansion ||
        e->cur_slot || e->nblobs < 1 || e->nblobs > RMF_DD_MAX_PARTS ||
        (e->flags == 0 && e->nblobs != 1))
        return "ERR corrupted dump header";
    if (e->aux > DD_MAX_GEN || e->aux < 1 || (e->flags == 0 && e->aux < DD_MIN_GEN))
        return "ERR corrupted dump header (generations)";
    if (!(e->error_rate >= DEDUP_MIN_FPR && e->error_rate < 1))
        return "ERR corrupted dump header (error rate)";
    if (e->window_ms < 1 || e->window_ms > UINT64_C(1) << 50)
        return "ERR corrupted dump header (window)";
    return NULL;
}

static rmf_err dd_load(dedup_source src, const rmf_envelope *e, const rmf_config *c, rmf_obj *o)
{
    (void)c;
    o->exact = e->flags == 2;
    if (e->version == RMF_ENVELOPE_DD_WINDOW)
        return rmf_dd_load_window(o, src, e->aux, e->nblobs);
    return o->exact ? rmf_ddl_load_exact(src, e->blobs_len, o)
                    : rmf_ddl_load(src, e->nblobs, e->cur_slot, o);
}

const rmf_family_ops rmf_dd_ops = {dd_blobs_size, dd_encode, dd_save_blobs, dd_check, dd_load};
