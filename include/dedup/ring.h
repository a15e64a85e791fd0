/*
 * dedup/ring.h - route every key to one owner: a consistent-hash ring of
 * named, weighted nodes (ketama-style, with virtual nodes), and jump
 * consistent hashing for numbered shards.
 *
 * What it is for: N machines (or processes) deduplicate one stream exactly
 * when every occurrence of a key reaches the same machine.  Each machine
 * then deduplicates its part alone, and the concatenation of their outputs
 * is the global answer.  `dedup split` is this header's client.
 *
 * Positions.  A key is placed on a circle of 2^64 positions by
 * dedup_ring_position() of the 128-bit digest it already has (no second
 * hash of the key): a fixed mix of both digest halves, so the keys a node
 * owns stay uniform in the digest bits that sets and filters index by.
 * Node NAME with P points has points i = 0 .. P-1 at
 *
 *     dedup_hash(NAME bytes followed by i as 4 little-endian bytes,
 *                seed).lo
 *
 * with the ring's seed (DEDUP_RING_POINT_SEED unless the params say
 * otherwise), and P = round(weight * points_per_weight) (half away from
 * zero; 160 per unit of weight by default).  A key belongs to the node of
 * the first point at or after its position, wrapping past 2^64 - 1 to the
 * smallest point.  Points at the same position are ordered by node name
 * (bytewise), then by point index, so the ring depends only on its set of
 * (name, weight) pairs, never on the order nodes were added.
 *
 * Stability promise (as xxHash makes for XXH3): for the same nodes,
 * weights, points per weight and seed, a digest is routed to the same node
 * by every version of this library on every host.  dedup_ring_position(),
 * the point positions above and dedup_jump() are frozen;
 * tests/unit/test_ring.c pins the owners of fixed keys.
 *
 * Jump hash (Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash
 * Algorithm", 2014) maps a key to one of 'buckets' numbered shards with no
 * table at all; going from n to n + 1 buckets moves exactly the keys that
 * land in the new bucket n, about 1/(n+1) of them.  It cannot remove a
 * shard other than the last, and shards carry no name or weight: use the
 * ring for those.  This version computes each jump in exact integer
 * arithmetic (no floating point), so it is the same on every host.
 *
 * Cost: lookup is O(1) expected: a table indexed by the position's top bits
 * gives the owner directly for most keys (at least 60%: the table has two
 * slots or more per point) or the first point of a short run to scan.
 * Memory is 32 bytes per point (the points and their cells) plus 4 bytes
 * per table slot (the power of two at or above twice the points, at least
 * 256): 1,000 nodes x 160 points take about 7 MiB.  Adding or removing nodes
 * rebuilds the points and the table in O(points) time; add several nodes
 * at once with dedup_ring_add_nodes() (one rebuild).
 *
 * Node indexes: nodes are numbered 0 .. count-1 in the order they were
 * added; removing a node shifts the later ones down by one.  Lookups return
 * these indexes; dedup_ring_node_name() turns one into its name.
 *
 * Thread-safety: lookups, queries, diff, copy and save on one ring may run
 * concurrently; add, remove and load need exclusive access.
 */
#ifndef DEDUP_RING_H
#define DEDUP_RING_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Seed of the point positions.  Frozen: part of the stability promise. */
#define DEDUP_RING_POINT_SEED UINT64_C(0x6B6574616D613136) /* "ketama16" */
/* Virtual nodes per unit of weight, the ketama convention. */
#define DEDUP_RING_DEFAULT_POINTS 160u

/* Limits.  Nodes: 65,536, far beyond any cluster one ring routes for, and
 * node indexes fit 31 bits in the lookup table.  Names: 1..255 bytes (a
 * host name is at most 253).  Points per weight: 1..65,536.  Points in the
 * whole ring: 2^24 (16.7M: 256 MiB of points and table), which bounds what
 * a weight or a loaded file can make the library allocate. */
#define DEDUP_RING_MAX_NODES 65536u
#define DEDUP_RING_MAX_NAME 255u
#define DEDUP_RING_MAX_POINTS_PER_WEIGHT 65536u
#define DEDUP_RING_MAX_POINTS (UINT32_C(1) << 24)

/* "No node": what a lookup on an empty ring returns. */
#define DEDUP_RING_NONE UINT32_MAX

typedef struct dedup_ring dedup_ring;

typedef struct dedup_ring_params {
    uint32_t points_per_weight; /* virtual nodes per unit of weight, 1 .. 65,536 */
    uint64_t seed;              /* seed of the point positions */
} dedup_ring_params;

/* Defaults: DEDUP_RING_DEFAULT_POINTS (160) and DEDUP_RING_POINT_SEED. */
void dedup_ring_params_init(dedup_ring_params *params);

/* Creates an empty ring ('params' NULL = defaults).  Errors: INVALID_ARG
 * (out NULL, points_per_weight out of range), NOMEM. */
dedup_status dedup_ring_create(const dedup_ring_params *params, const dedup_allocator *alloc,
                               dedup_ring **out);
/* Frees the ring; NULL is a no-op. */
void dedup_ring_free(dedup_ring *ring);
/* A new ring with the same params and nodes ('alloc' NULL = malloc).  Used
 * to try a change and dedup_ring_diff() it against the original. */
dedup_status dedup_ring_copy(const dedup_ring *ring, const dedup_allocator *alloc,
                             dedup_ring **out);

/* Adds node 'name' (NUL-terminated, 1 .. DEDUP_RING_MAX_NAME bytes) with
 * 'weight' (finite, > 0; it gets round(weight * points_per_weight) points,
 * which must be at least 1).  Errors, with the ring unchanged:
 * INVALID_ARG (NULL, empty or too long name, weight not > 0 or not finite,
 * weight too small for one point, a name already in the ring), LIMIT (more
 * than DEDUP_RING_MAX_NODES nodes or DEDUP_RING_MAX_POINTS points), NOMEM. */
dedup_status dedup_ring_add(dedup_ring *ring, const char *name, double weight);
/* Adds 'n' nodes in one rebuild, all or none: the same checks as
 * dedup_ring_add() for each (a name repeated within 'names' is INVALID_ARG);
 * 'weights' NULL gives every node weight 1.  On error '*bad' (may be NULL)
 * gets the index of the offending node, or n when the error is not one
 * node's (LIMIT, NOMEM). */
dedup_status dedup_ring_add_nodes(dedup_ring *ring, const char *const *names,
                                  const double *weights, size_t n, size_t *bad);
/* Removes node 'name'; later indexes shift down by one.  Its keys go to
 * the nodes that own the next points; no other key moves.  Errors:
 * INVALID_ARG (NULL), NOT_FOUND (no such node), NOMEM (ring unchanged). */
dedup_status dedup_ring_remove(dedup_ring *ring, const char *name);

/* Number of nodes. */
uint32_t dedup_ring_node_count(const dedup_ring *ring);
/* Total points (virtual nodes) on the ring. */
uint32_t dedup_ring_point_count(const dedup_ring *ring);
/* Points per weight and seed, as created or loaded. */
uint32_t dedup_ring_points_per_weight(const dedup_ring *ring);
uint64_t dedup_ring_seed(const dedup_ring *ring);
/* Name, weight and points of node 'index' (< node count; NULL / 0 beyond). */
const char *dedup_ring_node_name(const dedup_ring *ring, uint32_t index);
double dedup_ring_node_weight(const dedup_ring *ring, uint32_t index);
uint32_t dedup_ring_node_points(const dedup_ring *ring, uint32_t index);
/* Index of node 'name', or DEDUP_RING_NONE. */
uint32_t dedup_ring_find(const dedup_ring *ring, const char *name);
/* Fraction of the key space node 'index' owns (its arcs' total length /
 * 2^64), exactly as lookups route; 0 for a bad index. */
double dedup_ring_node_share(const dedup_ring *ring, uint32_t index);

/* The position of a digest on the circle.  Frozen (stability promise). */
static inline uint64_t dedup_ring_position(dedup_digest d)
{
    uint64_t x = d.lo ^ (d.hi << 32 | d.hi >> 32);
    x ^= x >> 30;
    x *= UINT64_C(0xBF58476D1CE4E5B9);
    x ^= x >> 27;
    x *= UINT64_C(0x94D049BB133111EB);
    x ^= x >> 31;
    return x;
}

/* Index of the node that owns 'd', or DEDUP_RING_NONE if the ring is
 * empty. */
uint32_t dedup_ring_lookup(const dedup_ring *ring, dedup_digest d);
/* The owner of a position (what dedup_ring_lookup() does after
 * dedup_ring_position()). */
uint32_t dedup_ring_lookup_position(const dedup_ring *ring, uint64_t position);
/* Owners of n digests into out[0..n-1], with the table and point reads
 * of several keys in flight at once: the fast path for a block of keys. */
void dedup_ring_lookup_batch(const dedup_ring *ring, const dedup_digest *d, size_t n,
                             uint32_t *out);

/* ---- Which ranges move ----------------------------------------------------
 * A range of positions [first, last] (inclusive; first <= last, a range
 * never wraps: the arc across 2^64 - 1 comes as two ranges) whose owner
 * differs between two rings: 'from' is the node index in the first ring,
 * 'to' in the second (DEDUP_RING_NONE when that ring is empty).  Nodes are
 * compared by name. */
typedef struct dedup_ring_range {
    uint64_t first, last;
    uint32_t from, to;
} dedup_ring_range;

/* Returning nonzero stops dedup_ring_diff() with DEDUP_ERR_CANCELLED. */
typedef int (*dedup_ring_range_fn)(void *ctx, const dedup_ring_range *range);

/* Calls 'fn' (may be NULL) for every maximal range of positions whose
 * owner differs between 'a' and 'b', in increasing position, and stores
 * in '*moved' (may be NULL) the fraction of the key space those ranges
 * cover: the expected fraction of keys that move from a to b.  The rings
 * may have different params.  O(points of a + points of b).  Errors:
 * INVALID_ARG (a or b NULL), CANCELLED (fn asked to stop). */
dedup_status dedup_ring_diff(const dedup_ring *a, const dedup_ring *b, dedup_ring_range_fn fn,
                             void *ctx, double *moved);

/* ---- Jump consistent hash -------------------------------------------------
 * Bucket of 'key' among 'buckets' (>= 1; 0 is treated as 1) numbered shards,
 * 0 .. buckets-1.  O(log buckets).  Frozen (stability promise). */
uint32_t dedup_jump(uint64_t key, uint32_t buckets);
/* Bucket of a digest: dedup_jump(dedup_ring_position(d), buckets). */
static inline uint32_t dedup_jump_digest(dedup_digest d, uint32_t buckets)
{
    return dedup_jump(dedup_ring_position(d), buckets);
}

/* Buckets of n digests into out[0..n-1], each exactly
 * dedup_jump_digest(d[i], buckets): the fast path for a block of keys
 * (several keys' jumps side by side where the CPU has the vector
 * instructions for it, checked at run time). */
void dedup_jump_digest_batch(const dedup_digest *d, size_t n, uint32_t buckets, uint32_t *out);

/* Bytes held, the struct included. */
size_t dedup_ring_memory_usage(const dedup_ring *ring);

/* ---- Persistence (docs/FORMAT.md: type RING) ------------------------------
 * The file holds the params and the nodes (names and weights, in index
 * order); the points are derived again when it loads, so a file is small
 * and routes exactly as the ring that saved it. */
dedup_status dedup_ring_save(const dedup_ring *ring, dedup_sink *sink);
/* Bytes dedup_ring_save() writes. */
uint64_t dedup_ring_serialized_size(const dedup_ring *ring);
/* Validates every field and the checksum before returning the ring.
 * Errors: the decoder's (BAD_MAGIC, VERSION, WRONG_TYPE, TRUNCATED,
 * CORRUPT, CHECKSUM), LIMIT, NOMEM, IO.  Bytes after the checksum are left
 * unread in 'src'. */
dedup_status dedup_ring_load(dedup_source src, const dedup_allocator *alloc, dedup_ring **out);
/* Atomic save to a path; load from one (trailing bytes: DEDUP_ERR_TRAILING). */
dedup_status dedup_ring_save_file(const dedup_ring *ring, const char *path);
dedup_status dedup_ring_load_file(const char *path, const dedup_allocator *alloc,
                                  dedup_ring **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_RING_H */
