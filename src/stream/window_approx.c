/*
 * window_approx.c - the approximate window's table of tagged fingerprints
 * and its stash: insertion (kick chains), opening and closing generation
 * tags, sweeping dead tags, and settling the stash after expiry; the lookup
 * (ap_lookup) and the slot layout are in window_internal.h.
 *
 * Approximate windows keep one table of short fingerprints for all
 * generations (partial-key cuckoo hashing, 4 slots per bucket, 2 candidate
 * buckets, as dedup/cuckoo.h); each slot is f bits of fingerprint and t bits
 * of generation tag (id mod 2^t), packed back to back.  A slot whose tag is
 * not a live generation's counts as empty, so a generation is dropped in
 * O(1) like an exact one; its tag's slots are cleared by one sequential
 * sweep just before the tag is reused (skipped when none is left).  A lookup
 * compares the fingerprint with the 8 slots of the key's two buckets and
 * accepts a match only if its tag is a live generation the lookup consults:
 * one union bound over 8 slots instead of one per generation.  When a kick
 * chain fails (more keys than planned) the key goes to an exact stash, a
 * hash table on (bucket pair, fingerprint, more digest bits).  When
 * generations expire, their stash entries are removed in place (one
 * sequential pass); the others move back into the table only when the
 * table's free slots are at least half the stash (a window a little past
 * its plan, whose stash then drains), in the order of (bucket, entry), so
 * each expiry costs at most about what it freed.  Far past the plan the
 * stash stays as it is, and its entries leave with their generations, or
 * for the table when a duplicate renews one while its buckets have room.
 * Which slot or stash holds an entry never changes a verdict except through
 * the stash's longer fingerprints; where an entry goes depends only on the
 * table's live slots, the set of stash entries and the kick generator, all
 * saved, so a resumed window places everything as the original would have
 * (the stash's own layout never matters).
 */
#include "window_internal.h"

#include <stdlib.h>

/* qsort order of stash entries: by bucket, then value. */
int ddi_win_sentry_cmp(const void *a, const void *b)
{
    const sentry *x = a, *y = b;
    if (x->b != y->b)
        return x->b < y->b ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

/* Puts v into a free slot of bucket b (a slot of a dead generation is
 * free).  False if the bucket holds 4 live entries. */
static bool bucket_put(dedup_window *w, uint64_t b, uint64_t v)
{
    for (uint32_t j = 0; j < SLOTS_PER_BUCKET; j++) {
        uint64_t i = b * SLOTS_PER_BUCKET + j, old = slot_get(w, w->tab, i);
        if (slot_live(w, old))
            continue;
        if (old & w->fmask)
            w->tag_n[old >> w->fbits]--; /* overwrites a dead entry */
        slot_set(w, w->tab, i, v);
        w->tag_n[v >> w->fbits]++;
        return true;
    }
    return false;
}

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Places a live entry into a stash known to have a free slot. */
void ddi_win_st_place(dedup_window *w, uint64_t b, uint64_t v)
{
    uint64_t i = st_home(w, b, st_key(w, v));
    while (w->st[i].v)
        i = (i + 1) & (w->st_cap - 1);
    if (!w->st[i].b)
        w->st_used++; /* an empty slot, not a removed entry's */
    w->st[i].b = b;
    w->st[i].v = v;
    w->st_live++;
}

/* Rebuilds the stash with room for 'extra' more entries, keeping the
 * entries of live generations (an empty one is freed).  False on allocation
 * failure (nothing changed). */
bool ddi_win_st_rebuild(dedup_window *w, uint64_t extra)
{
    uint64_t need = extra, cap = 0;
    for (uint64_t i = 0; i < w->st_cap; i++)
        need += w->st[i].v && w->tag_state[st_tag(w, w->st[i].v)] == TAG_LIVE;
    if (need) {
        cap = 64;
        while (cap < 2 * need)
            cap *= 2;
    }
    sentry *old = w->st;
    uint64_t ocap = w->st_cap;
    sentry *n = NULL;
    if (cap) {
        n = ddi_calloc(&w->alloc, (size_t)cap, sizeof(sentry));
        if (!n)
            return false;
        /* Past the plan, most new keys probe it at a random place. */
        ddi_win_advise_huge(n, (size_t)cap * sizeof(sentry));
    }
    w->st = n;
    w->st_cap = cap;
    w->st_used = w->st_live = 0;
    for (uint64_t i = 0; i < ocap; i++)
        if (old[i].v && w->tag_state[st_tag(w, old[i].v)] == TAG_LIVE)
            ddi_win_st_place(w, old[i].b, old[i].v);
    ddi_free(&w->alloc, old);
    return true;
}

/* Puts entry v (buckets b1, b2) into the table: into a free slot of either
 * bucket, else by a kick chain (swap the entry in hand with a random one of
 * the bucket, take that one to its other bucket; undone if it fails).
 * False if there was no room (the table is then as it was). */
static bool tab_place(dedup_window *w, uint64_t b1, uint64_t b2, uint64_t v)
{
    if (bucket_put(w, b1, v) || bucket_put(w, b2, v)) {
        w->tab_live++;
        return true;
    }
    uint64_t slots = w->nb * SLOTS_PER_BUCKET;
    if (w->tab_live * 100 >= slots * NO_KICKS_ABOVE || w->tab_live >= w->kick_fail_live)
        return false;
    uint64_t path[MAX_KICKS];
    uint64_t cur = v, b = (xorshift(&w->rng) & 1) ? b2 : b1;
    for (uint32_t k = 0; k < MAX_KICKS; k++) {
        uint64_t i = b * SLOTS_PER_BUCKET + (xorshift(&w->rng) >> 62);
        uint64_t out = slot_get(w, w->tab, i);
        slot_set(w, w->tab, i, cur);
        path[k] = i;
        w->tag_n[cur >> w->fbits]++;
        w->tag_n[out >> w->fbits]--;
        cur = out;
        b = alt_bucket(w, b, cur & w->fmask);
        if (bucket_put(w, b, cur)) {
            w->tab_live++;
            return true;
        }
    }
    w->kick_fail_live = w->tab_live;
    for (uint32_t k = MAX_KICKS; k-- > 0;) { /* undo: v is in hand again */
        uint64_t back = slot_get(w, w->tab, path[k]);
        slot_set(w, w->tab, path[k], cur);
        w->tag_n[cur >> w->fbits]++;
        w->tag_n[back >> w->fbits]--;
        cur = back;
    }
    return false;
}

/* Records fingerprint fp with tag 'tag' (buckets b1, b2): in the table, or
 * in the stash when the table is full around the key.  Error:
 * DEDUP_ERR_NOMEM (the stash could not grow); then nothing changed. */
dedup_status ddi_win_ap_insert(dedup_window *w, uint64_t b1, uint64_t b2, uint64_t fp, uint64_t ext,
                              uint32_t tag)
{
    uint64_t v = fp | (uint64_t)tag << w->fbits;
    if (tab_place(w, b1, b2, v))
        return DEDUP_OK;
    if ((w->st_used + 1) * 2 > w->st_cap && !ddi_win_st_rebuild(w, 1))
        return DEDUP_ERR_NOMEM;
    ddi_win_st_place(w, b1 < b2 ? b1 : b2, v | ext << w->sbits);
    return DEDUP_OK;
}

/* Clears the table slots of dead generations' tags; those tags become
 * free.  (The stash holds no dead entry: they are removed on expiry.) */
static void ap_sweep(dedup_window *w)
{
    uint64_t n = w->nb * SLOTS_PER_BUCKET;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = slot_get(w, w->tab, i);
        if ((v & w->fmask) && w->tag_state[v >> w->fbits] == TAG_DEAD)
            slot_set(w, w->tab, i, 0);
    }
    for (uint32_t g = 0; g < w->ntags; g++)
        if (w->tag_state[g] == TAG_DEAD) {
            w->tag_n[g] = 0;
            w->tag_state[g] = TAG_FREE;
        }
}

/* Makes 'tag' live for generation 'id', sweeping first if a dead
 * generation left slots with that tag. */
void ddi_win_ap_tag_open(dedup_window *w, uint32_t tag, int64_t id)
{
    if (w->tag_state[tag] == TAG_DEAD && w->tag_n[tag])
        ap_sweep(w);
    w->tag_state[tag] = TAG_LIVE;
    w->tag_id[tag] = id;
}

/* A generation with tag 'tag' is dropped: its table slots become free at
 * once (they are cleared before the tag is reused). */
void ddi_win_ap_tag_close(dedup_window *w, uint32_t tag)
{
    w->tag_state[tag] = TAG_DEAD;
    w->tab_live -= w->tag_n[tag];
}

/* Removes the stash entry at index i: it becomes a removed slot, which
 * probes pass over and a new entry may take. */
static void st_remove(dedup_window *w, uint64_t i)
{
    w->st[i].v = 0;
    w->st[i].b = 1;
    w->st_live--;
}

/* Frees the stash when empty, or rebuilds it smaller when under 1/8 of it
 * is live (which also drops its removed slots). */
static void st_shrink(dedup_window *w)
{
    if (w->st_cap && w->st_live * 8 < w->st_cap)
        (void)ddi_win_st_rebuild(w, 0); /* shrinks, or frees; on failure keeps the array */
}

/* Moves the stash's entries into the table where it has room, in the
 * order of (bucket, entry), so that a window resumed from a file, whose
 * stash is laid out otherwise, moves the same ones; the rest are placed in
 * the stash again.  Nothing changes when the sorted copy cannot be
 * allocated. */
static void stash_move_back(dedup_window *w)
{
    size_t n = (size_t)w->st_live, k = 0;
    sentry *tmp = ddi_malloc(&w->alloc, n * sizeof(sentry));
    if (!tmp)
        return;
    for (uint64_t i = 0; i < w->st_cap; i++)
        if (w->st[i].v)
            tmp[k++] = w->st[i];
    qsort(tmp, n, sizeof(sentry), ddi_win_sentry_cmp);
    memset(w->st, 0, (size_t)w->st_cap * sizeof(sentry));
    w->st_used = w->st_live = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t slot = tmp[i].v & ((UINT64_C(1) << w->sbits) - 1);
        if (!tab_place(w, tmp[i].b, alt_bucket(w, tmp[i].b, tmp[i].v & w->fmask), slot))
            ddi_win_st_place(w, tmp[i].b, tmp[i].v); /* fits: no more than before */
    }
    ddi_free(&w->alloc, tmp);
}

/* After generations were dropped: the stash loses their entries, removed
 * in place by one pass over it.  The others move back into the table when
 * its free slots are at least half as many (bounded work: about what the
 * expiry freed); otherwise they stay, to leave with their own generation
 * or for the table when renewed.  A stash that is now mostly empty
 * shrinks, an empty one is freed. */
void ddi_win_ap_stash_settle(dedup_window *w)
{
    for (uint64_t i = 0; i < w->st_cap; i++) {
        const sentry *e = &w->st[i];
        if (e->v && w->tag_state[st_tag(w, e->v)] != TAG_LIVE)
            st_remove(w, i);
    }
    uint64_t free_slots = w->nb * SLOTS_PER_BUCKET - w->tab_live;
    if (w->st_live && w->st_live <= 2 * free_slots)
        stash_move_back(w);
    st_shrink(w);
}

/* Refresh: among the entries that match fingerprint fp in bucket b1 or b2
 * (or in the stash with the pair and the digest bits 'ext') with the tag of
 * a consulted live generation, in [first_id, last_id], finds the one of the
 * newest generation and returns that generation's id (INT64_MIN if none);
 * *where receives the table slot or stash index of the entry, *stash which
 * of the two. */
int64_t ddi_win_ap_newest(const dedup_window *w, uint64_t b1, uint64_t b2, uint64_t fp,
                          uint64_t ext, int64_t first_id, int64_t last_id, uint64_t *where,
                          bool *stash)
{
    int64_t best = INT64_MIN;
    *where = 0;
    *stash = false;
    for (int k = 0; k < 2; k++) {
        uint64_t b = k ? b2 : b1;
        for (uint32_t j = 0; j < SLOTS_PER_BUCKET; j++) {
            uint64_t i = b * SLOTS_PER_BUCKET + j, v = slot_get(w, w->tab, i);
            if ((v & w->fmask) == fp && tag_consulted(w, v, first_id, last_id) &&
                w->tag_id[v >> w->fbits] > best) {
                best = w->tag_id[v >> w->fbits];
                *where = i;
            }
        }
    }
    if (w->st_live) {
        uint64_t mb = b1 < b2 ? b1 : b2, mask = (UINT64_C(1) << w->sbits) - 1;
        uint64_t key = fp | ext << w->sbits;
        for (uint64_t i = st_home(w, mb, key);; i = (i + 1) & (w->st_cap - 1)) {
            const sentry *e = &w->st[i];
            if (!e->v && !e->b)
                break;
            if (e->v && e->b == mb && st_key(w, e->v) == key &&
                tag_consulted(w, e->v & mask, first_id, last_id) &&
                w->tag_id[st_tag(w, e->v)] > best) {
                best = w->tag_id[st_tag(w, e->v)];
                *where = i;
                *stash = true;
            }
        }
    }
    return best;
}

/* Gives the entry found by ddi_win_ap_newest() the live tag 'tag' (the
 * caller moves the count between the two generations).  A stash entry
 * moves into the table when one of its buckets has a free slot (no kick
 * chain: nothing else moves), so that keys renewed for ever do not stay in
 * the stash for ever once the table has room again. */
void ddi_win_ap_retag(dedup_window *w, uint64_t where, bool stash, uint32_t tag)
{
    if (stash) {
        sentry *e = &w->st[where];
        uint64_t fp = e->v & w->fmask, v = fp | (uint64_t)tag << w->fbits;
        if (bucket_put(w, e->b, v) || bucket_put(w, alt_bucket(w, e->b, fp), v)) {
            w->tab_live++;
            st_remove(w, where);
            st_shrink(w);
            return;
        }
        e->v = st_key(w, e->v) | (uint64_t)tag << w->fbits;
        return;
    }
    uint64_t v = slot_get(w, w->tab, where);
    w->tag_n[v >> w->fbits]--;
    slot_set(w, w->tab, where, (v & w->fmask) | (uint64_t)tag << w->fbits);
    w->tag_n[tag]++;
}
