/*
 * ring.c - consistent-hash ring and jump hash (include/dedup/ring.h).
 *
 * Layout.  The points are one array sorted by (position, node name, point
 * index), 16 bytes each; the cells (see cells_build) another, the same
 * shape, holding where each point's keys end and the owning node's index
 * side by side, so resolving a key reads one cache line of cells.  Beside
 * them a table of 2^tbits slots indexed by the top tbits of a position: a
 * slot whose span holds no cell end stores its owner directly
 * (SLOT_OWNER | node: the owner of the first cell ending after the span),
 * any other slot the index of the first cell ending inside its span.  With at least two slots per
 * point at least 60% of the slots are direct (e^-0.5), and a scan from a
 * slot's first cell stops within one or two cells.
 *
 * Changes.  Adding nodes generates their points, sorts only those and
 * merges them into the existing array; removing filters the array.  Either
 * way a new array and table are built beside the old ones and swapped in
 * only when everything succeeded, so a failed call leaves the ring as it
 * was.  A small open-addressing table maps names to indexes.
 */
#include "dedup/ring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SLOT_OWNER UINT32_C(0x80000000)
#define MIN_TABLE_BITS 8u

typedef struct ring_point {
    uint64_t pos;
    uint32_t node;
    uint32_t index; /* the point's number within its node */
} ring_point;

typedef struct ring_node {
    char *name;
    uint32_t name_len;
    uint32_t points;
    double weight;
} ring_node;

struct dedup_ring {
    dedup_allocator alloc;
    uint32_t ppw;
    uint64_t seed;
    ring_node *nodes;
    uint32_t nnodes, node_cap;
    ring_point *pts;   /* sorted by (position, name, index) */
    ring_point *cells; /* cell ends (see cells_build), sorted; what lookups read */
    uint32_t npts;
    uint32_t *table;
    unsigned tbits; /* table slots = 2^tbits; a slot is pos >> (64 - tbits) */
    uint32_t *names;  /* name table: node index + 1, 0 = empty */
    uint32_t names_cap; /* a power of two >= 2 * nnodes, or 0 */
};

/* ---- Points --------------------------------------------------------------- */

static uint64_t point_position(const char *name, size_t len, uint32_t i, uint64_t seed,
                               unsigned char *buf)
{
    memcpy(buf, name, len);
    dedup_put_u32(buf + len, i);
    return dedup_hash(buf, len + 4, seed).lo;
}

/* Order of points: position, then node name bytewise, then point index. */
static int point_cmp(const ring_point *a, const ring_point *b, const ring_node *na,
                     const ring_node *nb)
{
    if (a->pos != b->pos)
        return a->pos < b->pos ? -1 : 1;
    if (na != nb) {
        size_t la = na->name_len, lb = nb->name_len;
        int c = memcmp(na->name, nb->name, la < lb ? la : lb);
        if (c)
            return c;
        if (la != lb)
            return la < lb ? -1 : 1;
    }
    return a->index < b->index ? -1 : a->index > b->index;
}

/* qsort has no context argument, so each new point is sorted with a
 * pointer to its node (for the name in ties). */
typedef struct sort_item {
    ring_point p;
    const ring_node *node;
} sort_item;

static int sort_item_cmp(const void *x, const void *y)
{
    const sort_item *a = x, *b = y;
    return point_cmp(&a->p, &b->p, a->node, b->node);
}

/* Points of a node of 'weight': INVALID_ARG for a weight that is not a
 * positive number or rounds to no point, LIMIT beyond the ring's ceiling. */
static dedup_status points_for(double weight, uint32_t ppw, uint32_t *out)
{
    if (!(weight > 0) || !isfinite(weight))
        return DEDUP_ERR_INVALID_ARG;
    double p = round(weight * (double)ppw);
    if (!(p >= 1))
        return DEDUP_ERR_INVALID_ARG;
    if (p > (double)DEDUP_RING_MAX_POINTS)
        return DEDUP_ERR_LIMIT;
    *out = (uint32_t)p;
    return DEDUP_OK;
}

/* ---- Name table ------------------------------------------------------------ */

static uint64_t name_hash(const char *name, size_t len)
{
    return dedup_hash(name, len, 0).lo;
}

static uint32_t names_find(const dedup_ring *r, const char *name, size_t len)
{
    if (!r->names_cap)
        return DEDUP_RING_NONE;
    uint32_t mask = r->names_cap - 1;
    for (uint32_t i = (uint32_t)name_hash(name, len) & mask;; i = (i + 1) & mask) {
        uint32_t e = r->names[i];
        if (!e)
            return DEDUP_RING_NONE;
        const ring_node *n = &r->nodes[e - 1];
        if (n->name_len == len && memcmp(n->name, name, len) == 0)
            return e - 1;
    }
}

/* A name table for nodes[0..n): false on NOMEM. */
static bool names_build(const dedup_allocator *a, const ring_node *nodes, uint32_t n,
                        uint32_t **out, uint32_t *out_cap)
{
    uint32_t cap = 0;
    uint32_t *t = NULL;
    if (n) {
        cap = 4;
        while (cap < 2 * n)
            cap *= 2;
        t = ddi_calloc(a, cap, sizeof *t);
        if (!t)
            return false;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t i = (uint32_t)name_hash(nodes[k].name, nodes[k].name_len) & (cap - 1);
            while (t[i])
                i = (i + 1) & (cap - 1);
            t[i] = k + 1;
        }
    }
    *out = t;
    *out_cap = cap;
    return true;
}

/* ---- Cells ------------------------------------------------------------------
 * A key belongs to the point nearest to its position on the circle, not to
 * the next one clockwise as in the original ketama: a point then owns half
 * the gap on each side instead of one whole gap, which halves the variance
 * of a node's share (relative standard deviation 1/sqrt(2P) instead of
 * 1/sqrt(P) for P points), and keeps every property of the ring: a new
 * node's points only take keys that are now nearest to them, a removed
 * node's keys go to the points around it, nothing else moves.
 *
 * Point i's cell ends at b_i = p_i + floor((p_{i+1} - p_i) / 2) (mod 2^64,
 * the last point's successor being the first): a key at x goes to the
 * first cell end >= x, wrapping to the first.  So a position exactly half
 * way between two points goes to the earlier one.  Only the last cell end
 * can wrap past 2^64 - 1; it then moves to the front, which keeps the
 * array sorted. */
static ring_point *cells_build(const dedup_allocator *a, const ring_point *pts, uint32_t npts)
{
    ring_point *c = ddi_malloc(a, (npts ? npts : 1) * sizeof *c);
    if (!c || !npts)
        return c;
    for (uint32_t i = 0; i < npts; i++) {
        uint64_t next = pts[i + 1 < npts ? i + 1 : 0].pos;
        c[i].pos = pts[i].pos + (next - pts[i].pos) / 2;
        c[i].node = pts[i].node;
        c[i].index = pts[i].index;
    }
    if (npts > 1 && c[npts - 1].pos < pts[npts - 1].pos) {
        ring_point last = c[npts - 1];
        memmove(c + 1, c, (size_t)(npts - 1) * sizeof *c);
        c[0] = last;
    }
    return c;
}

/* ---- Lookup table ----------------------------------------------------------- */

static unsigned table_bits_for(uint32_t npts)
{
    unsigned b = MIN_TABLE_BITS;
    while (b < 26 && (UINT64_C(1) << b) < 2 * (uint64_t)npts)
        b++;
    return b;
}

static uint32_t *table_build(const dedup_allocator *a, const ring_point *pts, uint32_t npts,
                             unsigned tbits)
{
    size_t slots = (size_t)1 << tbits;
    uint32_t *t = ddi_malloc(a, slots * sizeof *t);
    if (!t || !npts)
        return t;
    unsigned shift = 64 - tbits;
    uint32_t i = 0;
    for (size_t s = 0; s < slots; s++) {
        /* first cell end at or after the slot's start */
        while (i < npts && (pts[i].pos >> shift) < s)
            i++;
        if (i == npts)
            t[s] = SLOT_OWNER | pts[0].node; /* wraps to the first cell */
        else if ((pts[i].pos >> shift) != s)
            t[s] = SLOT_OWNER | pts[i].node;
        else
            t[s] = i;
    }
    return t;
}

/* ---- Create / free ------------------------------------------------------------ */

void dedup_ring_params_init(dedup_ring_params *p)
{
    if (!p)
        return;
    p->points_per_weight = DEDUP_RING_DEFAULT_POINTS;
    p->seed = DEDUP_RING_POINT_SEED;
}

dedup_status dedup_ring_create(const dedup_ring_params *params, const dedup_allocator *alloc,
                               dedup_ring **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_ring_params def;
    if (!params) {
        dedup_ring_params_init(&def);
        params = &def;
    }
    if (params->points_per_weight < 1 || params->points_per_weight > DEDUP_RING_MAX_POINTS_PER_WEIGHT)
        return DEDUP_ERR_INVALID_ARG;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_ring *r = ddi_calloc(&a, 1, sizeof *r);
    if (!r)
        return DEDUP_ERR_NOMEM;
    r->alloc = a;
    r->ppw = params->points_per_weight;
    r->seed = params->seed;
    r->tbits = MIN_TABLE_BITS;
    r->table = table_build(&a, NULL, 0, r->tbits);
    if (!r->table) {
        ddi_free(&a, r);
        return DEDUP_ERR_NOMEM;
    }
    *out = r;
    return DEDUP_OK;
}

static void nodes_free(const dedup_allocator *a, ring_node *nodes, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ddi_free(a, nodes[i].name);
    ddi_free(a, nodes);
}

void dedup_ring_free(dedup_ring *r)
{
    if (!r)
        return;
    dedup_allocator a = r->alloc;
    nodes_free(&a, r->nodes, r->nnodes);
    ddi_free(&a, r->pts);
    ddi_free(&a, r->cells);
    ddi_free(&a, r->table);
    ddi_free(&a, r->names);
    ddi_free(&a, r);
}

/* Installs a new state (nodes, points, names table, lookup table) built by
 * the caller, freeing the old one.  Takes ownership of everything passed. */
static void ring_install(dedup_ring *r, ring_node *nodes, uint32_t nnodes, uint32_t node_cap,
                         ring_point *pts, ring_point *cells, uint32_t npts, uint32_t *table,
                         unsigned tbits, uint32_t *names, uint32_t names_cap)
{
    ddi_free(&r->alloc, r->nodes); /* the names themselves moved into 'nodes' */
    ddi_free(&r->alloc, r->pts);
    ddi_free(&r->alloc, r->cells);
    r->cells = cells;
    ddi_free(&r->alloc, r->table);
    ddi_free(&r->alloc, r->names);
    r->nodes = nodes;
    r->nnodes = nnodes;
    r->node_cap = node_cap;
    r->pts = pts;
    r->npts = npts;
    r->table = table;
    r->tbits = tbits;
    r->names = names;
    r->names_cap = names_cap;
}

/* ---- Add / remove ---------------------------------------------------------------- */

dedup_status dedup_ring_add_nodes(dedup_ring *r, const char *const *names, const double *weights,
                                  size_t n, size_t *bad)
{
    if (bad)
        *bad = n;
    if (!r || (n && !names))
        return DEDUP_ERR_INVALID_ARG;
    if (n == 0)
        return DEDUP_OK;
    if (n > DEDUP_RING_MAX_NODES - r->nnodes)
        return DEDUP_ERR_LIMIT;
    const dedup_allocator *a = &r->alloc;
    uint32_t total = r->nnodes + (uint32_t)n;
    uint64_t newpts = 0;
    ring_node *nodes = ddi_calloc(a, total, sizeof *nodes);
    if (!nodes)
        return DEDUP_ERR_NOMEM;
    if (r->nnodes)
        memcpy(nodes, r->nodes, (size_t)r->nnodes * sizeof *nodes);
    dedup_status s = DEDUP_OK;
    uint32_t made = 0; /* new names allocated */
    uint32_t *ntab = NULL, ncap = 0;
    sort_item *items = NULL;
    ring_point *pts = NULL, *cells = NULL;
    uint32_t *table = NULL;
    for (size_t k = 0; k < n; k++) {
        const char *name = names[k];
        double w = weights ? weights[k] : 1.0;
        size_t len = name ? strlen(name) : 0;
        uint32_t np = 0;
        s = !name || len == 0 || len > DEDUP_RING_MAX_NAME ? DEDUP_ERR_INVALID_ARG
                                                            : points_for(w, r->ppw, &np);
        if (s) {
            if (bad)
                *bad = k;
            goto fail;
        }
        ring_node *nd = &nodes[r->nnodes + k];
        nd->name = ddi_malloc(a, len + 1);
        if (!nd->name) {
            s = DEDUP_ERR_NOMEM;
            goto fail;
        }
        made++;
        memcpy(nd->name, name, len + 1);
        nd->name_len = (uint32_t)len;
        nd->points = np;
        nd->weight = w;
        newpts += np;
    }
    if (newpts > DEDUP_RING_MAX_POINTS - r->npts) {
        s = DEDUP_ERR_LIMIT;
        goto fail;
    }
    if (!names_build(a, nodes, total, &ntab, &ncap)) {
        s = DEDUP_ERR_NOMEM;
        goto fail;
    }
    /* duplicates: a second node of the same name finds the first */
    {
        dedup_ring tmp = *r;
        tmp.nodes = nodes;
        tmp.names = ntab;
        tmp.names_cap = ncap;
        for (size_t k = 0; k < n; k++) {
            const ring_node *nd = &nodes[r->nnodes + k];
            if (names_find(&tmp, nd->name, nd->name_len) != r->nnodes + k) {
                s = DEDUP_ERR_INVALID_ARG;
                if (bad)
                    *bad = k;
                goto fail;
            }
        }
    }
    items = ddi_malloc(a, (size_t)newpts * sizeof *items);
    pts = ddi_malloc(a, ((size_t)r->npts + (size_t)newpts) * sizeof *pts);
    if (!items || !pts) {
        s = DEDUP_ERR_NOMEM;
        goto fail;
    }
    {
        unsigned char buf[DEDUP_RING_MAX_NAME + 4];
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            uint32_t idx = r->nnodes + (uint32_t)k;
            const ring_node *nd = &nodes[idx];
            for (uint32_t i = 0; i < nd->points; i++, m++) {
                items[m].p.pos = point_position(nd->name, nd->name_len, i, r->seed, buf);
                items[m].p.node = idx;
                items[m].p.index = i;
                items[m].node = nd;
            }
        }
        qsort(items, (size_t)newpts, sizeof *items, sort_item_cmp);
        /* merge the old points (already in order) with the new ones */
        size_t i = 0, j = 0, o = 0;
        while (i < r->npts || j < newpts) {
            if (j == newpts ||
                (i < r->npts && point_cmp(&r->pts[i], &items[j].p, &nodes[r->pts[i].node],
                                          items[j].node) < 0))
                pts[o++] = r->pts[i++];
            else
                pts[o++] = items[j++].p;
        }
    }
    uint32_t npts = r->npts + (uint32_t)newpts;
    unsigned tbits = table_bits_for(npts);
    cells = cells_build(a, pts, npts);
    table = cells ? table_build(a, cells, npts, tbits) : NULL;
    if (!table) {
        s = DEDUP_ERR_NOMEM;
        goto fail;
    }
    ddi_free(a, items);
    ring_install(r, nodes, total, total, pts, cells, npts, table, tbits, ntab, ncap);
    return DEDUP_OK;
fail:
    for (uint32_t k = 0; k < made; k++)
        ddi_free(a, nodes[r->nnodes + k].name);
    ddi_free(a, nodes);
    ddi_free(a, ntab);
    ddi_free(a, items);
    ddi_free(a, pts);
    ddi_free(a, cells);
    ddi_free(a, table);
    return s;
}

dedup_status dedup_ring_add(dedup_ring *r, const char *name, double weight)
{
    return dedup_ring_add_nodes(r, &name, &weight, 1, NULL);
}

dedup_status dedup_ring_remove(dedup_ring *r, const char *name)
{
    if (!r || !name)
        return DEDUP_ERR_INVALID_ARG;
    uint32_t gone = names_find(r, name, strlen(name));
    if (gone == DEDUP_RING_NONE)
        return DEDUP_ERR_NOT_FOUND;
    const dedup_allocator *a = &r->alloc;
    uint32_t nn = r->nnodes - 1;
    uint32_t npts = r->npts - r->nodes[gone].points;
    ring_node *nodes = ddi_malloc(a, (nn ? nn : 1) * sizeof *nodes);
    ring_point *pts = ddi_malloc(a, (npts ? npts : 1) * sizeof *pts);
    uint32_t *ntab = NULL, ncap = 0;
    uint32_t *table = NULL;
    ring_point *cells = NULL;
    if (!nodes || !pts)
        goto nomem;
    memcpy(nodes, r->nodes, (size_t)gone * sizeof *nodes);
    memcpy(nodes + gone, r->nodes + gone + 1, (size_t)(nn - gone) * sizeof *nodes);
    if (!names_build(a, nodes, nn, &ntab, &ncap))
        goto nomem;
    uint32_t o = 0;
    for (uint32_t i = 0; i < r->npts; i++) {
        ring_point p = r->pts[i];
        if (p.node == gone)
            continue;
        if (p.node > gone)
            p.node--;
        pts[o++] = p;
    }
    unsigned tbits = table_bits_for(npts);
    cells = cells_build(a, pts, npts);
    table = cells ? table_build(a, cells, npts, tbits) : NULL;
    if (!table)
        goto nomem;
    ddi_free(a, r->nodes[gone].name);
    ring_install(r, nodes, nn, nn, pts, cells, npts, table, tbits, ntab, ncap);
    return DEDUP_OK;
nomem:
    ddi_free(a, nodes);
    ddi_free(a, pts);
    ddi_free(a, cells);
    ddi_free(a, ntab);
    return DEDUP_ERR_NOMEM;
}

dedup_status dedup_ring_copy(const dedup_ring *r, const dedup_allocator *alloc, dedup_ring **out)
{
    if (!r || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_ring_params p = {.points_per_weight = r->ppw, .seed = r->seed};
    dedup_ring *c = NULL;
    dedup_status s = dedup_ring_create(&p, alloc, &c);
    if (s)
        return s;
    const char **names = ddi_malloc(&c->alloc, (r->nnodes ? r->nnodes : 1) * sizeof *names);
    double *weights = ddi_malloc(&c->alloc, (r->nnodes ? r->nnodes : 1) * sizeof *weights);
    if (!names || !weights)
        s = DEDUP_ERR_NOMEM;
    for (uint32_t i = 0; !s && i < r->nnodes; i++) {
        names[i] = r->nodes[i].name;
        weights[i] = r->nodes[i].weight;
    }
    if (!s)
        s = dedup_ring_add_nodes(c, names, weights, r->nnodes, NULL);
    ddi_free(&c->alloc, names);
    ddi_free(&c->alloc, weights);
    if (s) {
        dedup_ring_free(c);
        return s;
    }
    *out = c;
    return DEDUP_OK;
}

/* ---- Queries --------------------------------------------------------------------- */

uint32_t dedup_ring_node_count(const dedup_ring *r) { return r ? r->nnodes : 0; }
uint32_t dedup_ring_point_count(const dedup_ring *r) { return r ? r->npts : 0; }
uint32_t dedup_ring_points_per_weight(const dedup_ring *r) { return r ? r->ppw : 0; }
uint64_t dedup_ring_seed(const dedup_ring *r) { return r ? r->seed : 0; }

const char *dedup_ring_node_name(const dedup_ring *r, uint32_t i)
{
    return r && i < r->nnodes ? r->nodes[i].name : NULL;
}

double dedup_ring_node_weight(const dedup_ring *r, uint32_t i)
{
    return r && i < r->nnodes ? r->nodes[i].weight : 0;
}

uint32_t dedup_ring_node_points(const dedup_ring *r, uint32_t i)
{
    return r && i < r->nnodes ? r->nodes[i].points : 0;
}

uint32_t dedup_ring_find(const dedup_ring *r, const char *name)
{
    if (!r || !name)
        return DEDUP_RING_NONE;
    return names_find(r, name, strlen(name));
}

/* Keys owned by cell i: the positions after the previous cell's end up to
 * and including its own (for the first cell, the arc across 2^64 - 1). */
static uint64_t arc_before(const dedup_ring *r, uint32_t i)
{
    uint64_t prev = r->cells[i ? i - 1 : r->npts - 1].pos;
    return r->cells[i].pos - prev; /* mod 2^64 */
}

double dedup_ring_node_share(const dedup_ring *r, uint32_t node)
{
    if (!r || node >= r->nnodes)
        return 0;
    if (r->nnodes == 1)
        return 1;
    dedup_u128_ sum = 0;
    for (uint32_t i = 0; i < r->npts; i++)
        if (r->cells[i].node == node)
            sum += arc_before(r, i);
    return (double)sum / 18446744073709551616.0;
}

static inline uint32_t resolve(const dedup_ring *r, uint32_t e, uint64_t x)
{
    if (e & SLOT_OWNER)
        return e & ~SLOT_OWNER;
    uint32_t i = e;
    while (i < r->npts && r->cells[i].pos < x)
        i++;
    return r->cells[i < r->npts ? i : 0].node;
}

uint32_t dedup_ring_lookup_position(const dedup_ring *r, uint64_t x)
{
    if (!r->npts)
        return DEDUP_RING_NONE;
    return resolve(r, r->table[x >> (64 - r->tbits)], x);
}

uint32_t dedup_ring_lookup(const dedup_ring *r, dedup_digest d)
{
    return dedup_ring_lookup_position(r, dedup_ring_position(d));
}

void dedup_ring_lookup_batch(const dedup_ring *r, const dedup_digest *d, size_t n, uint32_t *out)
{
    enum { G = 16 };
    if (!r->npts) {
        for (size_t i = 0; i < n; i++)
            out[i] = DEDUP_RING_NONE;
        return;
    }
    unsigned shift = 64 - r->tbits;
    for (size_t base = 0; base < n; base += G) {
        size_t m = n - base < G ? n - base : G;
        uint64_t x[G];
        uint32_t e[G];
        for (size_t k = 0; k < m; k++) {
            x[k] = dedup_ring_position(d[base + k]);
            DD_PREFETCH(&r->table[x[k] >> shift]);
        }
        for (size_t k = 0; k < m; k++) {
            e[k] = r->table[x[k] >> shift];
            if (!(e[k] & SLOT_OWNER))
                DD_PREFETCH(&r->cells[e[k]]);
        }
        for (size_t k = 0; k < m; k++)
            out[base + k] = resolve(r, e[k], x[k]);
    }
}

size_t dedup_ring_memory_usage(const dedup_ring *r)
{
    if (!r)
        return 0;
    size_t b = sizeof *r + (size_t)r->node_cap * sizeof(ring_node) +
               2 * (size_t)r->npts * sizeof(ring_point) + ((size_t)1 << r->tbits) * sizeof(uint32_t) +
               (size_t)r->names_cap * sizeof(uint32_t);
    for (uint32_t i = 0; i < r->nnodes; i++)
        b += r->nodes[i].name_len + 1;
    return b;
}

/* ---- Diff ------------------------------------------------------------------------ */

typedef struct diff_state {
    dedup_ring_range cur;
    bool have;
    dedup_u128_ moved;
    dedup_ring_range_fn fn;
    void *ctx;
} diff_state;

static bool diff_flush(diff_state *st)
{
    if (!st->have)
        return true;
    st->have = false;
    st->moved += (dedup_u128_)(st->cur.last - st->cur.first) + 1;
    return !st->fn || st->fn(st->ctx, &st->cur) == 0;
}

/* Segment [lo, hi] is owned by 'from' in a and 'to' in b ('same': one node). */
static bool diff_segment(diff_state *st, uint64_t lo, uint64_t hi, uint32_t from, uint32_t to,
                         bool same)
{
    if (same)
        return diff_flush(st);
    if (st->have && st->cur.from == from && st->cur.to == to && st->cur.last + 1 == lo) {
        st->cur.last = hi;
        return true;
    }
    if (!diff_flush(st))
        return false;
    st->cur = (dedup_ring_range){.first = lo, .last = hi, .from = from, .to = to};
    st->have = true;
    return true;
}

dedup_status dedup_ring_diff(const dedup_ring *a, const dedup_ring *b, dedup_ring_range_fn fn,
                             void *ctx, double *moved)
{
    if (moved)
        *moved = 0;
    if (!a || !b)
        return DEDUP_ERR_INVALID_ARG;
    /* a's node i is b's node map[i] (NONE when b has no such name) */
    uint32_t *map = ddi_malloc(&a->alloc, (a->nnodes ? a->nnodes : 1) * sizeof *map);
    if (!map)
        return DEDUP_ERR_NOMEM;
    for (uint32_t i = 0; i < a->nnodes; i++)
        map[i] = names_find(b, a->nodes[i].name, a->nodes[i].name_len);
    diff_state st = {.fn = fn, .ctx = ctx};
    uint32_t na = a->npts, nb = b->npts, ia = 0, ib = 0;
    uint32_t first_a = na ? a->cells[0].node : DEDUP_RING_NONE;
    uint32_t first_b = nb ? b->cells[0].node : DEDUP_RING_NONE;
    uint64_t lo = 0;
    bool ok = true, done = false;
    while (ok && !done) {
        uint64_t hi;
        if (ia < na && (ib >= nb || a->cells[ia].pos <= b->cells[ib].pos))
            hi = a->cells[ia].pos;
        else if (ib < nb)
            hi = b->cells[ib].pos;
        else
            hi = UINT64_MAX;
        uint32_t oa = ia < na ? a->cells[ia].node : first_a;
        uint32_t ob = ib < nb ? b->cells[ib].node : first_b;
        bool same = oa == DEDUP_RING_NONE ? ob == DEDUP_RING_NONE
                                          : ob != DEDUP_RING_NONE && map[oa] == ob;
        ok = diff_segment(&st, lo, hi, oa, ob, same);
        while (ia < na && a->cells[ia].pos == hi)
            ia++;
        while (ib < nb && b->cells[ib].pos == hi)
            ib++;
        if (hi == UINT64_MAX)
            done = true;
        else
            lo = hi + 1;
    }
    if (ok)
        ok = diff_flush(&st);
    ddi_free(&a->alloc, map);
    if (moved)
        *moved = (double)st.moved / 18446744073709551616.0;
    return ok ? DEDUP_OK : DEDUP_ERR_CANCELLED;
}

/* ---- Jump hash ----------------------------------------------------------------------
 * The key drives a 64-bit linear congruential generator; each step draws
 * r uniform in (0, 1] from its top 31 bits and jumps from bucket b to
 * floor((b + 1) / r), which is where the key would next change bucket as
 * shards are added.  The last jump below 'buckets' is the answer.  The
 * division is done exactly in integers: (b + 1) * 2^31 / (top31 + 1).  (The
 * paper's floating-point form measured 20.4 against 12.5 ns a key here.) */
uint32_t dedup_jump(uint64_t key, uint32_t buckets)
{
    uint64_t b = 0;
    for (;;) {
        key = key * UINT64_C(2862933555777941757) + 1;
        uint64_t a = (b + 1) << 31, d = (key >> 33) + 1; /* a < 2^63, d <= 2^31 */
        /* floor(a / d) >= buckets exactly when a >= buckets * d (< 2^63): the
         * last jump costs a multiplication instead of a division */
        if (a >= (uint64_t)buckets * d)
            return (uint32_t)b;
        b = a / d;
    }
}

/* Batch form of dedup_jump_digest().  The scalar loop above is a chain of
 * dependent divisions with an exit the branch predictor cannot guess (one
 * key takes 1 to 'buckets' steps): ~18 ns a key for 16 buckets.  With
 * AVX-512 (checked at run time), 8 keys go through the steps side by side,
 * four vectors at once, and each division is a double one:
 *
 *   b' = floor((b + 1) * 2^31 / d), d = (key >> 33) + 1 <= 2^31, b < buckets.
 *
 * Exact for buckets <= 2^20: (b + 1) * 2^31 <= 2^51 and d are exact
 * doubles and the division is correctly rounded, so (1) a quotient Q >=
 * buckets rounds to >= buckets (rounding is monotonic, buckets is exact)
 * and (2) a quotient Q < buckets with floor m rounds into [m, m + 1): Q is
 * at least 1/d >= 2^-31 below m + 1, and half a unit in the last place of
 * a double below 2^20 is at most 2^-33.  Lanes stop on their own; a vector
 * is done when all 8 are.  test_ring compares it with dedup_jump() on
 * millions of keys and many bucket counts. */
#define JUMP_BATCH_MAX_BUCKETS (UINT32_C(1) << 20)

static void jump_batch_scalar(const dedup_digest *d, size_t n, uint32_t buckets, uint32_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = dedup_jump_digest(d[i], buckets);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define JUMP_AVX512 1
#include <immintrin.h>

#define JUMP_GROUPS 4 /* vectors in flight */

__attribute__((target("avx512f,avx512dq"))) static void
jump_batch_avx512(const dedup_digest *dg, size_t n, uint32_t buckets, uint32_t *out)
{
    const __m512i mul = _mm512_set1_epi64((long long)UINT64_C(2862933555777941757));
    const __m512i one = _mm512_set1_epi64(1);
    const __m512d one_d = _mm512_set1_pd(1.0), two31 = _mm512_set1_pd(2147483648.0);
    const __m512d nb = _mm512_set1_pd((double)buckets);
    size_t i = 0;
    for (; i + 8 * JUMP_GROUPS <= n; i += 8 * JUMP_GROUPS) {
        __m512i k[JUMP_GROUPS];
        __m512d b[JUMP_GROUPS];
        __mmask8 live[JUMP_GROUPS];
        for (int g = 0; g < JUMP_GROUPS; g++) {
            uint64_t pos[8];
            for (int j = 0; j < 8; j++)
                pos[j] = dedup_ring_position(dg[i + 8 * (size_t)g + (size_t)j]);
            k[g] = _mm512_loadu_si512((const void *)pos);
            b[g] = _mm512_setzero_pd();
            live[g] = 0xFF;
        }
        for (;;) {
            unsigned any = 0;
            for (int g = 0; g < JUMP_GROUPS; g++) {
                k[g] = _mm512_add_epi64(_mm512_mullo_epi64(k[g], mul), one);
                __m512d dd = _mm512_cvtepu64_pd(_mm512_add_epi64(_mm512_srli_epi64(k[g], 33), one));
                __m512d q = _mm512_div_pd(_mm512_mul_pd(_mm512_add_pd(b[g], one_d), two31), dd);
                q = _mm512_roundscale_pd(q, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
                live[g] = _mm512_mask_cmp_pd_mask(live[g], q, nb, _CMP_LT_OQ);
                b[g] = _mm512_mask_mov_pd(b[g], live[g], q);
                any |= live[g];
            }
            if (!any)
                break;
        }
        for (int g = 0; g < JUMP_GROUPS; g++)
            _mm256_storeu_si256((__m256i *)(void *)(out + i + 8 * (size_t)g),
                                _mm512_cvttpd_epu32(b[g]));
    }
    jump_batch_scalar(dg + i, n - i, buckets, out + i);
}
#endif

void dedup_jump_digest_batch(const dedup_digest *d, size_t n, uint32_t buckets, uint32_t *out)
{
#ifdef JUMP_AVX512
    if (buckets >= 2 && buckets <= JUMP_BATCH_MAX_BUCKETS && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq")) {
        jump_batch_avx512(d, n, buckets, out);
        return;
    }
#endif
    if (buckets < 1)
        buckets = 1;
    jump_batch_scalar(d, n, buckets, out);
}

/* ---- Persistence --------------------------------------------------------------------
 * params: u32 points per weight, u32 nodes, u32 total points, u32 reserved.
 * payload, per node in index order: u32 name length, f64 weight, name. */
#define PARAMS_LEN 16u
#define NODE_FIXED 12u

uint64_t dedup_ring_serialized_size(const dedup_ring *r)
{
    uint64_t len = DEDUP_HEADER_SIZE + PARAMS_LEN + DEDUP_TRAILER_SIZE;
    for (uint32_t i = 0; i < r->nnodes; i++)
        len += NODE_FIXED + r->nodes[i].name_len;
    return len;
}

dedup_status dedup_ring_save(const dedup_ring *r, dedup_sink *sink)
{
    if (!r || !sink)
        return DEDUP_ERR_INVALID_ARG;
    unsigned char params[PARAMS_LEN];
    dedup_put_u32(params, r->ppw);
    dedup_put_u32(params + 4, r->nnodes);
    dedup_put_u32(params + 8, r->npts);
    dedup_put_u32(params + 12, 0);
    uint64_t payload = dedup_ring_serialized_size(r) - DEDUP_HEADER_SIZE - PARAMS_LEN -
                       DEDUP_TRAILER_SIZE;
    dedup_encoder e;
    dedup_status s =
        dedup_encoder_begin(&e, *sink, DEDUP_TYPE_RING, r->seed, params, PARAMS_LEN, payload);
    for (uint32_t i = 0; !s && i < r->nnodes; i++) {
        unsigned char fixed[NODE_FIXED];
        dedup_put_u32(fixed, r->nodes[i].name_len);
        dedup_put_f64(fixed + 4, r->nodes[i].weight);
        s = dedup_encoder_write(&e, fixed, NODE_FIXED);
        if (!s)
            s = dedup_encoder_write(&e, r->nodes[i].name, r->nodes[i].name_len);
    }
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

dedup_status dedup_ring_load(dedup_source src, const dedup_allocator *alloc, dedup_ring **out)
{
    if (!out || !src.read)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_decoder decoder, *dec = &decoder;
    dedup_ring *r = NULL;
    char **names = NULL;
    double *weights = NULL;
    uint32_t nn = 0, got = 0;
    dedup_status s = dedup_decoder_begin(dec, src, DEDUP_TYPE_RING);
    if (s)
        goto done;
    if (dec->header.params_len != PARAMS_LEN) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint32_t ppw = dedup_get_u32(dec->params);
    nn = dedup_get_u32(dec->params + 4);
    uint32_t npts = dedup_get_u32(dec->params + 8);
    uint64_t L = dec->header.payload_len;
    if (ppw < 1 || ppw > DEDUP_RING_MAX_POINTS_PER_WEIGHT || dedup_get_u32(dec->params + 12) != 0 ||
        L < (uint64_t)nn * (NODE_FIXED + 1) || L > (uint64_t)nn * (NODE_FIXED + DEDUP_RING_MAX_NAME)) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    if (nn > DEDUP_RING_MAX_NODES || npts > DEDUP_RING_MAX_POINTS) {
        s = DEDUP_ERR_LIMIT;
        goto done;
    }
    dedup_ring_params p = {.points_per_weight = ppw, .seed = dec->header.seed};
    s = dedup_ring_create(&p, &a, &r);
    if (s)
        goto done;
    names = ddi_calloc(&a, nn ? nn : 1, sizeof *names);
    weights = ddi_malloc(&a, (nn ? nn : 1) * sizeof *weights);
    if (!names || !weights) {
        s = DEDUP_ERR_NOMEM;
        goto done;
    }
    uint64_t sum = 0;
    for (got = 0; got < nn; got++) {
        unsigned char fixed[NODE_FIXED];
        s = dedup_decoder_read(dec, fixed, NODE_FIXED);
        if (s)
            goto done;
        uint32_t len = dedup_get_u32(fixed);
        double w = dedup_get_f64(fixed + 4);
        uint32_t np;
        if (len < 1 || len > DEDUP_RING_MAX_NAME || points_for(w, ppw, &np) != DEDUP_OK) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
        sum += np;
        names[got] = ddi_malloc(&a, (size_t)len + 1);
        if (!names[got]) {
            s = DEDUP_ERR_NOMEM;
            goto done;
        }
        s = dedup_decoder_read(dec, names[got], len);
        if (s) {
            got++;
            goto done;
        }
        names[got][len] = '\0';
        weights[got] = w;
        if (memchr(names[got], '\0', len)) {
            got++;
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
    }
    if (sum != npts) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    s = dedup_decoder_end(dec);
    if (s)
        goto done;
    s = dedup_ring_add_nodes(r, (const char *const *)names, weights, nn, NULL);
    if (s == DEDUP_ERR_INVALID_ARG || s == DEDUP_ERR_LIMIT)
        s = DEDUP_ERR_CORRUPT; /* a repeated name */
done:
    if (names)
        for (uint32_t i = 0; i < got; i++)
            ddi_free(&a, names[i]);
    ddi_free(&a, names);
    ddi_free(&a, weights);
    if (s) {
        dedup_ring_free(r);
        return s;
    }
    *out = r;
    return DEDUP_OK;
}

static dedup_status save_cb(const void *obj, dedup_sink *sink)
{
    return dedup_ring_save(obj, sink);
}

dedup_status dedup_ring_save_file(const dedup_ring *r, const char *path)
{
    if (!r || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_cb, r);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_ring *x = NULL;
    dedup_status s = dedup_ring_load(src, alloc, &x);
    *out = x;
    return s;
}

static void free_any(void *obj) { dedup_ring_free(obj); }

dedup_status dedup_ring_load_file(const char *path, const dedup_allocator *alloc, dedup_ring **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    void *obj = NULL;
    dedup_status s = ddi_load_file(path, alloc, load_any, free_any, &obj);
    *out = obj;
    return s;
}
