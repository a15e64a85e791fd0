/*
 * window_exact.c - the exact window's tables, one per generation: building
 * (and rebuilding at another size), growth, and insertion; the lookup
 * (tab_find) is in window_internal.h.
 *
 * Exact generations are "ordered" open-addressing tables (Amble & Knuth):
 * linear probing with the home slot dedup_reduce(lo, cap), which is
 * monotonic in the digest's low word, and every cluster kept sorted by
 * (lo, hi).  The whole table is then sorted, which gives:
 *  - unsuccessful lookups stop at the first larger entry, about
 *    (1 + 1/(1-a)) / 2 slots at load a instead of (1 + 1/(1-a)^2) / 2, so
 *    the tables can run at 85% load;
 *  - rebuilding at another size is one sequential pass with no probing
 *    (each entry goes to max(its home, previous position + 1)), which is how
 *    a generation is compacted when it stops being the newest one;
 *  - tables do not wrap around: a cluster that runs past the last home slot
 *    spills into a tail that is extended on demand.
 * An insertion shifts the rest of its cluster right by one entry.
 */
#define _DEFAULT_SOURCE /* madvise() and MADV_HUGEPAGE */
#include "window_internal.h"

#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* Asks the kernel to back a large table with huge pages.  A probe into a
 * table of hundreds of MB otherwise costs a TLB miss and a page walk on top
 * of its cache miss; with 2 MB pages it is the cache miss alone.  Only the
 * whole 2 MB pages inside the block are advised; the call is a hint and its
 * failure (other kernels, other allocators) changes nothing. */
void ddi_win_advise_huge(void *p, size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (bytes < 4 * huge)
        return;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Places sorted entries 'src[0..n)' into a fresh zeroed table of 'cap' home
 * slots; extends the tail as needed.  Returns false on allocation failure
 * (then *out_slots is NULL and nothing was kept). */
bool ddi_win_tab_build(dedup_window *w, const wentry *src, uint64_t src_len, uint64_t cap,
                      wentry **out_slots, uint64_t *out_len)
{
    uint64_t len = cap + TAIL_SLOTS;
    size_t bytes;
    if (!ddi_mul_size((size_t)len, sizeof(wentry), &bytes))
        return false;
    wentry *t = ddi_calloc(&w->alloc, (size_t)len, sizeof(wentry));
    if (!t)
        return false;
    ddi_win_advise_huge(t, bytes);
    uint64_t next = 0; /* first free position */
    for (uint64_t i = 0; i < src_len; i++) {
        const wentry *e = &src[i];
        if (ent_empty(e))
            continue;
        uint64_t pos = dedup_reduce(e->lo, cap);
        if (pos < next)
            pos = next;
        if (pos >= len) {
            uint64_t nlen = len + len / 8 + TAIL_SLOTS;
            wentry *nt = ddi_realloc(&w->alloc, t, (size_t)len * sizeof(wentry),
                                    (size_t)nlen * sizeof(wentry));
            if (!nt) {
                ddi_free(&w->alloc, t);
                return false;
            }
            memset(nt + len, 0, (size_t)(nlen - len) * sizeof(wentry));
            t = nt;
            len = nlen;
        }
        t[pos] = *e;
        next = pos + 1;
    }
    *out_slots = t;
    *out_len = len;
    return true;
}

/* Rebuilds generation g with 'cap' home slots. */
bool ddi_win_tab_resize(dedup_window *w, wgen *g, uint64_t cap)
{
    wentry *t;
    uint64_t len;
    if (!ddi_win_tab_build(w, g->slots, g->slots ? g->len : 0, cap, &t, &len))
        return false;
    if (g->slots) {
        ddi_free(&w->alloc, g->slots);
        w->slot_bytes -= (size_t)g->len * sizeof(wentry);
    }
    g->slots = t;
    g->cap = cap;
    g->len = len;
    w->slot_bytes += (size_t)len * sizeof(wentry);
    return true;
}

/* Home slots for a table of 'entries' at no more than MAX_LOAD_NUM% load. */
uint64_t ddi_win_cap_for(uint64_t entries)
{
    uint64_t c = entries + entries * (100 - MAX_LOAD_NUM) / MAX_LOAD_NUM + 8;
    return c < 64 ? 64 : c;
}

/* Inserts an entry known to be absent.  False on allocation failure (the
 * table is then unchanged). */
bool ddi_win_tab_insert(dedup_window *w, wgen *g, uint64_t lo, uint64_t hi, int64_t t)
{
    if (!g->slots || (g->count + 1) * 100 > g->cap * MAX_LOAD_NUM) {
        /* A new generation starts at the size the last one needed plus 10%
         * (compacted when it closes); a full one grows by half. */
        uint64_t ncap = g->slots ? g->cap + g->cap / 2
                                 : (w->hint ? ddi_win_cap_for(w->hint + w->hint / 10) : 64);
        if (ncap < ddi_win_cap_for(g->count + 1))
            ncap = ddi_win_cap_for(g->count + 1);
        if (!ddi_win_tab_resize(w, g, ncap))
            return false;
    }
    wentry *s = g->slots;
    uint64_t pos = dedup_reduce(lo, g->cap);
    while (pos < g->len && !ent_empty(&s[pos]) && ent_cmp(lo, hi, &s[pos]) > 0)
        pos++;
    uint64_t e = pos;
    while (e < g->len && !ent_empty(&s[e]))
        e++;
    if (e >= g->len) {
        /* The cluster runs into the end: extend the tail. */
        uint64_t nlen = g->len + g->len / 8 + TAIL_SLOTS;
        wentry *ns = ddi_realloc(&w->alloc, s, (size_t)g->len * sizeof(wentry),
                                (size_t)nlen * sizeof(wentry));
        if (!ns)
            return false;
        memset(ns + g->len, 0, (size_t)(nlen - g->len) * sizeof(wentry));
        w->slot_bytes += (size_t)(nlen - g->len) * sizeof(wentry);
        g->slots = s = ns;
        g->len = nlen;
    }
    if (e > pos)
        memmove(&s[pos + 1], &s[pos], (size_t)(e - pos) * sizeof(wentry));
    s[pos].lo = lo;
    s[pos].hi = hi;
    s[pos].t = t;
    g->count++;
    return true;
}

/* Removes the entry (lo, hi), which must be present (a refreshed key moving
 * to a later generation).  The entries after it in its cluster that sit
 * past their home slot move back by one (backward-shift deletion): the
 * table stays sorted with no gap before an entry's position, which is all
 * tab_find() needs. */
void ddi_win_tab_remove(wgen *g, uint64_t lo, uint64_t hi)
{
    const wentry *f = tab_find(g, lo, hi);
    if (!f)
        return;
    wentry *s = g->slots;
    uint64_t pos = (uint64_t)(f - s);
    uint64_t next = pos + 1;
    while (next < g->len && !ent_empty(&s[next]) && dedup_reduce(s[next].lo, g->cap) < next)
        next++;
    /* s[pos + 1 .. next) all sit past their home: each moves back by one. */
    if (next > pos + 1)
        memmove(&s[pos], &s[pos + 1], (size_t)(next - pos - 1) * sizeof(wentry));
    memset(&s[next - 1], 0, sizeof(wentry));
    g->count--;
}
