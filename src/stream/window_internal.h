/*
 * window_internal.h - what the time window's sources share; not public API
 * (that is dedup/window.h).
 *
 * The sources:
 *   window.c          parameters, create/free, generations, the verb
 *                     (seen, seen_batch, advance_watermark) and state
 *   window_exact.c    exact generations' tables: build, resize, insert,
 *                     remove (a refreshed key moving on)
 *   window_approx.c   the approximate window's fingerprint table and stash:
 *                     insert (kick chains), tags, sweeping, settling,
 *                     retagging a refreshed entry
 *   window_persist.c  save and load (docs/FORMAT.md, "Time window")
 * The lookups the verb makes for every record (tab_find, ap_lookup) and the
 * slot helpers are static inline here, so they inline into it as they did
 * when all of this was one file; functions one source defines and others
 * call are ddi_win_* and hidden from the shared library's exports.
 */
#ifndef DEDUP_WINDOW_INTERNAL_H
#define DEDUP_WINDOW_INTERNAL_H

#include "dedup/window.h"

#include "dedup/limits.h"
#include "internal.h"

typedef struct wentry {
    uint64_t lo, hi;
    int64_t t;
} wentry;

typedef struct wgen {
    int64_t id;
    uint64_t count; /* kept records in this generation */
    uint64_t cap;   /* home slots (exact) */
    uint64_t len;   /* allocated slots: cap + tail */
    wentry *slots;  /* exact; NULL until the first insert */
} wgen;

/* Approximate: an entry the table had no room for, kept aside with the
 * smaller of its two buckets (which, with the fingerprint, names the pair).
 * v holds the slot value in its low S bits and 64 - S more bits of the
 * digest above them, so a stash entry matches another key with probability
 * about 2^-(f + 64 - S): the stash adds nothing measurable to the rate.
 * Its home is a hash of b and v without the tag (st_key), so the entries of
 * one bucket pair spread over the stash and a probe stays short however
 * many of them there are.  v = 0: an empty slot (b = 0) or a removed entry
 * (b = 1). */
typedef struct sentry {
    uint64_t b, v;
} sentry;

enum { TAG_FREE = 0, TAG_LIVE = 1, TAG_DEAD = 2 };

struct dedup_window {
    dedup_allocator alloc;
    dedup_window_params p;
    int64_t D; /* effective duration: N + 1 for COUNT windows */
    int64_t s; /* generation span */
    int64_t L; /* lateness */
    uint32_t Q; /* largest number of generations a lookup consults */

    bool has_T, has_W;
    int64_t T, W;
    uint64_t counter; /* COUNT: index of the next record */

    uint64_t records, kept, duplicates, late, live, peak_live, expired;
    int64_t late_max_behind;

    wgen *gv; /* live generations, sorted by id */
    size_t gn, gcap;

    uint64_t hint;     /* exact: expected entries of a new newest generation */
    uint64_t hint_max; /* exact: at most this hint (0: no limit) */
    size_t slot_bytes; /* exact: bytes held by all tables */

    /* approximate: tagged fingerprint tables */
    uint32_t fbits, tbits, sbits; /* fingerprint, tag and slot bits */
    uint32_t ntags;               /* 2^tbits */
    uint64_t fmask;               /* 2^fbits - 1: fingerprints are 1 .. fmask */
    uint64_t nb;                  /* buckets per table */
    size_t tab_bytes;             /* packed bytes of one table (as saved) */
    unsigned char *tab;           /* nb * 4 packed slots, then TAB_SLACK zero bytes */
    uint64_t *tag_n;              /* per tag: table slots holding it (live, or dead not swept) */
    uint64_t tab_live;            /* table slots of live generations */
    uint64_t kick_fail_live;      /* tab_live when a kick chain last failed: none is
                                     tried again until fewer are live */
    sentry *st;                   /* the stash: open addressing on mix64(b), NULL if empty */
    uint64_t st_cap, st_used, st_live; /* slots (power of 2), used incl. removed, live */
    uint8_t *tag_state;           /* TAG_* per tag */
    int64_t *tag_id;              /* the live generation holding each TAG_LIVE tag */
    uint64_t rng;                 /* xorshift64 state for kick choices (never 0) */
};

#define SLOTS_PER_BUCKET 4u
#define PLANNED_LOAD 0.95 /* the table is sized for the planned keys at this load */
#define MAX_KICKS 500u
#define NO_KICKS_ABOVE 98u /* percent of slots live: a kick chain would likely fail */
#define TAB_SLACK 8u /* bytes after the packed slots: every slot is read with one 8-byte load */

#define TAIL_SLOTS 64u
#define MAX_LOAD_NUM 85u /* grow past 85% load */
#define COMPACT_BELOW 80u /* compact a closed generation below 80% load */
#define SHRINK_BELOW 65u /* refresh: rebuild an older generation its keys left below 65% load */

/* ---- time arithmetic ----------------------------------------------------- */

static inline int64_t fdiv(int64_t a, int64_t b) /* floor(a / b), b > 0 */
{
    int64_t q = a / b;
    if ((a % b) != 0 && a < 0)
        q--;
    return q;
}

static inline bool time_ok(int64_t t)
{
    return t >= DEDUP_WINDOW_MIN_TIME && t <= DEDUP_WINDOW_MAX_TIME;
}

/* ---- exact tables ---------------------------------------------------------- */

static inline bool ent_empty(const wentry *e)
{
    return (e->lo | e->hi) == 0;
}

/* -1, 0, 1 as (lo, hi) is below, equal to, above the entry. */
static inline int ent_cmp(uint64_t lo, uint64_t hi, const wentry *e)
{
    if (lo != e->lo)
        return lo < e->lo ? -1 : 1;
    if (hi != e->hi)
        return hi < e->hi ? -1 : 1;
    return 0;
}

static inline const wentry *tab_find(const wgen *g, uint64_t lo, uint64_t hi)
{
    if (!g->slots)
        return NULL;
    const wentry *e = g->slots + dedup_reduce(lo, g->cap);
    const wentry *end = g->slots + g->len;
    for (; e < end; e++) {
        if (ent_empty(e))
            return NULL;
        int c = ent_cmp(lo, hi, e);
        if (c == 0)
            return e;
        if (c < 0)
            return NULL;
    }
    return NULL;
}

/* ---- approximate tables -------------------------------------------------------
 * Slot i of a table occupies bits [i*S, (i+1)*S) of its byte string (bit k
 * is bit k mod 8 of byte k / 8); its value is fp | tag << f, and 0 when
 * empty (fingerprints are never 0).  S <= 53, so one little-endian 8-byte
 * load at byte (i*S) / 8 holds the whole slot. */

static inline uint64_t slot_get(const dedup_window *w, const unsigned char *mem, uint64_t i)
{
    uint64_t bit = i * w->sbits;
    return (dedup_get_u64(mem + (bit >> 3)) >> (bit & 7)) & ((UINT64_C(1) << w->sbits) - 1);
}

static inline void slot_set(const dedup_window *w, unsigned char *mem, uint64_t i, uint64_t v)
{
    uint64_t bit = i * w->sbits, sh = bit & 7;
    uint64_t m = ((UINT64_C(1) << w->sbits) - 1) << sh;
    uint64_t x = dedup_get_u64(mem + (bit >> 3));
    dedup_put_u64(mem + (bit >> 3), (x & ~m) | (v << sh));
}

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The key's fingerprint (1 .. fmask) and buckets, all from its digest. */
static inline uint64_t key_fp(const dedup_window *w, uint64_t hi)
{
    return dedup_reduce(hi, w->fmask) + 1;
}

/* The other bucket of fingerprint fp in bucket b: (h - b) mod nb, an
 * involution for any nb. */
static inline uint64_t alt_bucket(const dedup_window *w, uint64_t b, uint64_t fp)
{
    uint64_t h = dedup_reduce(mix64(fp + UINT64_C(0x9E3779B97F4A7C15)), w->nb);
    return h >= b ? h - b : h + w->nb - b;
}

static inline uint32_t gen_tag(const dedup_window *w, int64_t id)
{
    return (uint32_t)((uint64_t)id & (w->ntags - 1));
}

/* True if a slot holds an entry of a live generation. */
static inline bool slot_live(const dedup_window *w, uint64_t v)
{
    return (v & w->fmask) && w->tag_state[v >> w->fbits] == TAG_LIVE;
}

static inline bool tag_consulted(const dedup_window *w, uint64_t v, int64_t first_id,
                                 int64_t last_id)
{
    uint32_t tag = (uint32_t)(v >> w->fbits);
    return w->tag_state[tag] == TAG_LIVE && w->tag_id[tag] >= first_id &&
           w->tag_id[tag] <= last_id;
}

static inline uint32_t st_tag(const dedup_window *w, uint64_t v)
{
    return (uint32_t)((v >> w->fbits) & (w->ntags - 1));
}

/* A stash entry's value without its tag: what identifies the key (with the
 * bucket), the same whatever generation the entry is in. */
static inline uint64_t st_key(const dedup_window *w, uint64_t v)
{
    return v & ~((uint64_t)(w->ntags - 1) << w->fbits);
}

/* The home slot of the stash entry (b, key), key = st_key() of its value. */
static inline uint64_t st_home(const dedup_window *w, uint64_t b, uint64_t key)
{
    return mix64(mix64(b + UINT64_C(0x9E3779B97F4A7C15)) ^ key) & (w->st_cap - 1);
}

/* True if the table holds fingerprint fp in bucket b1 or b2, or the stash
 * holds it with the pair {b1, b2}, tagged with a live generation whose id is
 * in [first_id, last_id]. */
static inline bool ap_lookup(const dedup_window *w, uint64_t b1, uint64_t b2, uint64_t fp,
                      uint64_t ext, int64_t first_id, int64_t last_id)
{
    for (int k = 0; k < 2; k++) {
        uint64_t b = k ? b2 : b1;
        for (uint32_t j = 0; j < SLOTS_PER_BUCKET; j++) {
            uint64_t v = slot_get(w, w->tab, b * SLOTS_PER_BUCKET + j);
            if ((v & w->fmask) == fp && tag_consulted(w, v, first_id, last_id))
                return true;
        }
    }
    if (w->st_live) {
        uint64_t mb = b1 < b2 ? b1 : b2, key = fp | ext << w->sbits;
        for (uint64_t i = st_home(w, mb, key);; i = (i + 1) & (w->st_cap - 1)) {
            const sentry *e = &w->st[i];
            if (!e->v && !e->b)
                return false;
            if (e->v && e->b == mb && st_key(w, e->v) == key &&
                tag_consulted(w, e->v & ((UINT64_C(1) << w->sbits) - 1), first_id, last_id))
                return true;
        }
    }
    return false;
}

/* ---- Functions shared between the sources ------------------------------------
 * Each is documented where it is defined. */

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* window.c */
int64_t ddi_win_gen_floor(const dedup_window *w, int64_t W);
bool ddi_win_tab_alloc(dedup_window *w);
dedup_status ddi_win_alloc_window(const dedup_window_params *params, const dedup_allocator *alloc,
                                 bool loading, dedup_window **out);

/* window_exact.c */
void ddi_win_advise_huge(void *p, size_t bytes);
bool ddi_win_tab_build(dedup_window *w, const wentry *src, uint64_t src_len, uint64_t cap,
                      wentry **out_slots, uint64_t *out_len);
bool ddi_win_tab_resize(dedup_window *w, wgen *g, uint64_t cap);
uint64_t ddi_win_cap_for(uint64_t entries);
bool ddi_win_tab_insert(dedup_window *w, wgen *g, uint64_t lo, uint64_t hi, int64_t t);
void ddi_win_tab_remove(wgen *g, uint64_t lo, uint64_t hi);

/* window_approx.c */
int ddi_win_sentry_cmp(const void *a, const void *b);
void ddi_win_st_place(dedup_window *w, uint64_t b, uint64_t v);
bool ddi_win_st_rebuild(dedup_window *w, uint64_t extra);
dedup_status ddi_win_ap_insert(dedup_window *w, uint64_t b1, uint64_t b2, uint64_t fp, uint64_t ext,
                              uint32_t tag);
void ddi_win_ap_tag_open(dedup_window *w, uint32_t tag, int64_t id);
void ddi_win_ap_tag_close(dedup_window *w, uint32_t tag);
void ddi_win_ap_stash_settle(dedup_window *w);
int64_t ddi_win_ap_newest(const dedup_window *w, uint64_t b1, uint64_t b2, uint64_t fp,
                          uint64_t ext, int64_t first_id, int64_t last_id, uint64_t *where,
                          bool *stash);
void ddi_win_ap_retag(dedup_window *w, uint64_t where, bool stash, uint32_t tag);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
