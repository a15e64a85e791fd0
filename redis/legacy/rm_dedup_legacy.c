/*
 * rm_dedup_legacy.c - DEDUP values saved before DEDUP.* ran on the
 * library's window (envelope version 2, RDB encver 1): their read path,
 * kept apart from rm_dedup.c so that nothing new is built on it.
 *
 * EXACT values were a table of (digest, last-seen time): exactly what an
 * exact window holds, so they are converted on load (rmf_ddl_load_exact)
 * and saved as a window from then on.
 *
 * Approximate values were G generations of scalable chains of blocked
 * Bloom links, each covering a slot of s = ceil(window / (G-2)) ms, the
 * newest one recording every add.  A Bloom filter cannot list its keys, so
 * they cannot become a window's fingerprint table without either forgetting
 * keys (a false "new") or inventing some.  Such a value therefore keeps
 * running here, as it did: an add records in the newest generation, a
 * query looks at the G newest slots, so an item seen at t0 answers "seen"
 * until at least t0 + window and at most t0 + G*s; it is saved back in its
 * own layout (envelope v2, byte for byte what it was loaded from when
 * nothing was added).  A key recreated with DEDUP.RESERVE runs on the
 * window.  Times before the newest slot (a clock that went back) are taken
 * as the newest slot: nothing is cleared and nothing is forgotten early.
 */
#include "../rm_internal.h"

#include "dedup/hash.h"
#include "dedup/limits.h"

#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

static uint64_t bloom_bytes_for(uint64_t n, double p)
{
    uint64_t bits = dedup_blocked_bits_for(n, p);
    if (bits == 0)
        return UINT64_MAX;
    return (bits + 511) / 8 + 256; /* + struct and alignment slack */
}

/* Generations: chains of blocked links, r = 0.5 over at most 16 links, so
 * the first link gets about half the generation's rate. */
#define DD_TIGHTENING 0.5
#define DD_GEN_LINKS 16u
#define DD_GROWTH 2u

void rmf_ddl_gen_params(dedup_scalable_params *sp, uint64_t n0, double p)
{
    dedup_scalable_params_init(sp);
    sp->kind = DEDUP_BLOOM_BLOCKED;
    sp->capacity = n0;
    sp->fpr = p;
    sp->growth = DD_GROWTH;
    sp->tightening = DD_TIGHTENING;
    sp->max_links = DD_GEN_LINKS;
}

/* ---- loading and saving --------------------------------------------------------- */

rmf_err rmf_ddl_load(dedup_source src, uint32_t nblobs, uint64_t cur_slot, rmf_obj *o)
{
    rmf_dd *dd = o->dd;
    dd->legacy = true;
    dd->cur_slot = cur_slot;
    uint64_t seed0 = 0;
    uint32_t g = nblobs;
    for (uint32_t i = 0; i < g; i++) {
        dedup_status s = dedup_scalable_load(src, rmf_obj_allocator(o), &dd->links[i]);
        if (s != DEDUP_OK)
            return s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : "ERR corrupted filter in dump";
        dd->nlinks = i + 1;
        dedup_scalable_params want;
        rmf_ddl_gen_params(&want, (o->capacity + (g - 2) - 1) / (g - 2), o->error_rate / g);
        dedup_scalable_info si;
        dedup_scalable_get_info(dd->links[i], &si);
        if (i == 0)
            seed0 = si.seed;
        if (si.kind != want.kind || si.initial_capacity != want.capacity ||
            si.fpr != want.fpr || si.growth != want.growth ||
            si.tightening != want.tightening || si.max_links != want.max_links)
            return "ERR corrupted dump (generation shape)";
        if (si.seed != seed0)
            return "ERR corrupted dump (seeds differ)";
        if (rmf_memory_usage(o) > o->max_memory)
            return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
        dd->gen_items[i] = si.items;
        dd->gen_capacity[i] = si.capacity;
        dd->gen_links[i] = si.links;
    }
    dd->generations = g;
    dd->slot_ms = (dd->window_ms + (g - 2) - 1) / (g - 2);
    return NULL;
}

uint64_t rmf_ddl_blobs_size(const rmf_obj *o)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < o->dd->nlinks; i++)
        n += dedup_scalable_serialized_size(o->dd->links[i]);
    return n;
}

dedup_status rmf_ddl_save(const rmf_obj *o, dedup_sink *sink)
{
    dedup_status s = DEDUP_OK;
    for (uint32_t i = 0; s == DEDUP_OK && i < o->dd->nlinks; i++)
        s = dedup_scalable_save(o->dd->links[i], sink);
    return s;
}

/* The EXACT table blob of envelope v2:
 *   0  4  magic "DDEX"     4  4  version 1
 *   8  8  slots (a power of two, >= 16)
 *   16 8  n, entries that follow
 *   24 24n entries (lo, hi, last_ms), non-empty slots in slot order
 *   .. 8  XXH3-64 (seed 0) of everything before
 * Every entry is checked (no {0,0} digest, no key twice, the checksum)
 * before the entries go, oldest first, into an exact window: a key keeps
 * the time it was last seen, so it is "seen" exactly as long as before. */
typedef struct ex_entry {
    uint64_t lo, hi, last_ms;
} ex_entry;

static int ex_cmp_key(const void *a, const void *b)
{
    const ex_entry *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

static int ex_cmp_time(const void *a, const void *b)
{
    const ex_entry *x = a, *y = b;
    if (x->last_ms != y->last_ms)
        return x->last_ms < y->last_ms ? -1 : 1;
    return ex_cmp_key(a, b);
}

rmf_err rmf_ddl_load_exact(dedup_source src, uint64_t blob_len, rmf_obj *o)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    unsigned char h[24];
    if (blob_len < 32 || src.read(src.ctx, h, sizeof h) != DEDUP_OK)
        return "ERR dump truncated";
    XXH3_64bits_update(&st, h, sizeof h);
    uint64_t cap = dedup_get_u64(h + 8), n = dedup_get_u64(h + 16);
    if (memcmp(h, "DDEX", 4) != 0 || dedup_get_u32(h + 4) != 1)
        return "ERR corrupted dump (exact table header)";
    if (cap < 16 || cap > (UINT64_C(1) << 40) || (cap & (cap - 1)) || n > cap / 4 * 3 ||
        blob_len != 32 + 24 * n)
        return "ERR corrupted dump (exact table size)";
    if (24 * n > o->max_memory)
        return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    ex_entry *v = n ? rmf_alloc(rmf_obj_allocator(o), (size_t)(n * sizeof *v)) : NULL;
    if (n && !v)
        return rmf_err_nomem();
    rmf_err err = NULL;
    for (uint64_t i = 0; i < n && !err; i++) {
        unsigned char b[24];
        if (src.read(src.ctx, b, sizeof b) != DEDUP_OK) {
            err = "ERR dump truncated";
            break;
        }
        XXH3_64bits_update(&st, b, sizeof b);
        v[i] = (ex_entry){dedup_get_u64(b), dedup_get_u64(b + 8), dedup_get_u64(b + 16)};
        if (!(v[i].lo | v[i].hi) || v[i].last_ms > (uint64_t)DEDUP_WINDOW_MAX_TIME)
            err = "ERR corrupted dump (exact table entry)";
    }
    unsigned char c[8];
    if (!err && src.read(src.ctx, c, sizeof c) != DEDUP_OK)
        err = "ERR dump truncated";
    if (!err && dedup_get_u64(c) != XXH3_64bits_digest(&st))
        err = "ERR corrupted dump (exact table checksum)";
    if (!err && n)
        qsort(v, (size_t)n, sizeof *v, ex_cmp_key);
    for (uint64_t i = 1; !err && i < n; i++)
        if (v[i].lo == v[i - 1].lo && v[i].hi == v[i - 1].hi)
            err = "ERR corrupted dump (a key twice in the exact table)";
    if (!err && n)
        qsort(v, (size_t)n, sizeof *v, ex_cmp_time); /* the window takes them in time order */
    if (!err)
        err = rmf_dd_window_new(o, true, 0, 1);
    for (uint64_t i = 0; !err && i < n; i++)
        err = rmf_dd_window_put(o, (dedup_digest){v[i].lo, v[i].hi}, (int64_t)v[i].last_ms);
    rmf_dealloc(rmf_obj_allocator(o), v);
    return err;
}

/* ---- the generations at work ------------------------------------------------------- */

/* Moves the newest slot forward to 'now_ms', clearing generations whose
 * slot has left the last G slots. */
static void dd_advance(rmf_obj *o, uint64_t now_ms)
{
    rmf_dd *dd = o->dd;
    uint64_t slot = now_ms / dd->slot_ms;
    if (slot <= dd->cur_slot)
        return; /* same slot, or a clock that went back: keep everything */
    uint64_t steps = slot - dd->cur_slot;
    if (steps > dd->nlinks)
        steps = dd->nlinks;
    for (uint64_t i = 1; i <= steps; i++) {
        uint32_t gi = (uint32_t)((slot - steps + i) % dd->nlinks);
        dedup_scalable_clear(dd->links[gi]);
        dd->gen_items[gi] = 0;
        dd->gen_links[gi] = 1;
        dd->gen_capacity[gi] = dedup_bloom_capacity(dedup_scalable_link(dd->links[gi], 0));
    }
    dd->cur_slot = slot;
}

static bool dd_query(const rmf_obj *o, dedup_digest d, uint64_t now_ms)
{
    const rmf_dd *dd = o->dd;
    uint64_t now_slot = now_ms / dd->slot_ms;
    if (now_slot < dd->cur_slot)
        now_slot = dd->cur_slot;
    for (uint32_t age = 0; age < dd->nlinks && age <= dd->cur_slot; age++) {
        uint64_t slot = dd->cur_slot - age;
        if (now_slot - slot >= dd->nlinks)
            break;
        if (dedup_scalable_might_contain(dd->links[slot % dd->nlinks], d))
            return true;
    }
    return false;
}

rmf_err rmf_ddl_add(rmf_obj *o, const void *item, size_t len, uint64_t now_ms, int *is_new)
{
    rmf_dd *dd = o->dd;
    dd_advance(o, now_ms);
    dedup_digest d = dedup_scalable_digest(dd->links[0], item, len);
    bool seen = dd_query(o, d, now_ms);
    uint32_t gi = (uint32_t)(dd->cur_slot % dd->nlinks);
    dedup_scalable *gen = dd->links[gi];
    if (dd->gen_items[gi] >= dd->gen_capacity[gi] && !dedup_scalable_might_contain(gen, d)) {
        /* recording it needs the generation's next link: check the cap */
        uint64_t n = dedup_bloom_capacity(dedup_scalable_link(gen, dd->gen_links[gi] - 1));
        double p = dedup_scalable_link_fpr(o->error_rate / dd->nlinks, DD_TIGHTENING,
                                           DD_GEN_LINKS, dd->gen_links[gi]);
        uint64_t need = n > UINT64_MAX / DD_GROWTH ? UINT64_MAX : bloom_bytes_for(n * DD_GROWTH, p);
        if (dd->gen_links[gi] >= DD_GEN_LINKS || need == UINT64_MAX ||
            rmf_memory_usage(o) + need > o->max_memory)
            return ERR_MAXMEM;
    }
    dedup_verdict v;
    dedup_status s = dedup_scalable_test_and_add(gen, d, &v);
    if (s != DEDUP_OK)
        return rmf_status_err(s);
    if (v == DEDUP_NEW) {
        dd->gen_items[gi]++;
        const dedup_bloom *nl;
        while ((nl = dedup_scalable_link(gen, dd->gen_links[gi])) != NULL) {
            dd->gen_capacity[gi] += dedup_bloom_capacity(nl);
            dd->gen_links[gi]++;
        }
    }
    if (!seen)
        o->items++;
    *is_new = !seen;
    return NULL;
}

bool rmf_ddl_exists(const rmf_obj *o, const void *item, size_t len, uint64_t now_ms)
{
    return dd_query(o, dedup_scalable_digest(o->dd->links[0], item, len), now_ms);
}

double rmf_ddl_current_fpr(const rmf_obj *o, uint64_t now_ms)
{
    const rmf_dd *dd = o->dd;
    uint64_t now_slot = now_ms / dd->slot_ms;
    if (now_slot < dd->cur_slot)
        now_slot = dd->cur_slot;
    double miss = 1.0;
    for (uint32_t age = 0; age < dd->nlinks && age <= dd->cur_slot; age++) {
        uint64_t slot = dd->cur_slot - age;
        if (now_slot - slot >= dd->nlinks)
            break;
        dedup_scalable_info si;
        dedup_scalable_get_info(dd->links[slot % dd->nlinks], &si);
        miss *= 1.0 - si.fpr_current;
    }
    return 1.0 - miss;
}

void rmf_ddl_free(rmf_obj *o)
{
    for (uint32_t i = 0; i < o->dd->nlinks; i++)
        dedup_scalable_free(o->dd->links[i]);
    o->dd->nlinks = 0;
}

size_t rmf_ddl_memory(const rmf_obj *o)
{
    size_t n = 0;
    for (uint32_t i = 0; i < o->dd->nlinks; i++)
        n += dedup_scalable_memory_usage(o->dd->links[i]);
    return n;
}

/* The envelope header fields of a value saved before the window. */
void rmf_ddl_encode(const rmf_obj *o, unsigned char h[RMF_ENVELOPE_SIZE])
{
    dedup_put_u32(h + 48, o->dd->nlinks);
    dedup_put_u32(h + 52, o->dd->nlinks);
    dedup_put_u64(h + 56, o->dd->window_ms);
    dedup_put_u64(h + 64, o->dd->cur_slot);
}

rmf_err rmf_ddl_check(const rmf_envelope *e)
{
    if (e->flags == 2) { /* EXACT: one table blob */
        if (e->deleted || e->bucket_size || e->expansion || e->aux || e->cur_slot ||
            e->nblobs != 1)
            return "ERR corrupted dump header";
        if (!(e->error_rate > 0 && e->error_rate < 1))
            return "ERR corrupted dump header (error rate)";
    } else {
        if (e->flags || e->deleted || e->bucket_size || e->expansion)
            return "ERR corrupted dump header";
        if (e->aux < DD_MIN_GEN || e->aux > DD_MAX_GEN || e->nblobs != e->aux)
            return "ERR corrupted dump header (generations)";
        if (!(e->error_rate > 0 && e->error_rate < 1) || e->error_rate / e->aux < DEDUP_MIN_FPR)
            return "ERR corrupted dump header (error rate)";
    }
    if (e->window_ms < 1 || e->window_ms > UINT64_C(1) << 50)
        return "ERR corrupted dump header (window)";
    return NULL;
}
