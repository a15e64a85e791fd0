/*
 * dedup/scalable.h - scalable Bloom filter: a Bloom filter that grows.
 *
 * A chain of Bloom filters (dedup/bloom.h), the "links".  Link i (0 is the
 * first) is planned for n_i = capacity * growth^i new keys at rate p_i, and
 * is sized by the Bloom formulas for (n_i, p_i): dedup_bloom_bits_for, made
 * a little larger when needed so that the exact rate with the integer k,
 * dedup_bloom_fpr_for, is within p_i (classic links); dedup_blocked_bits_for
 * (blocked links, already exact).  New keys go into the newest
 * link; when it has received n_i new keys the next new key starts link
 * i+1.  A query checks every link, newest first.
 *
 * How the rate p is split (the promise): with tightening ratio r and at
 * most L links (params.max_links),
 *
 *     p_i = p * (1 - r) * r^i / (1 - r^L)
 *
 * so that p_0 + p_1 + ... + p_(L-1) = p exactly.  A key that was never
 * added is a false positive only if some link says yes, so the chain's
 * rate is at most the sum of the rates of its links: at most p, for any
 * number of items, as long as each link stays within its planned capacity
 * (which the chain guarantees).  Worked example, the defaults (p = 1%,
 * r = 0.9, L = 64): p_0 = 0.1001%, p_1 = 0.0901%, p_2 = 0.0811%, ...;
 * a non-growing chain (L = 1) gives its only link the whole p.
 * dedup_scalable_get_link_info() reports each p_i, and dedup_scalable_get_info()
 * reports both the bound in force (the sum of p_i over the links that exist,
 * always <= p) and the rate expected at the current fill
 * (1 - prod_i (1 - fill_i^k_i), from the links' actual bit counts).
 *
 * Why r = 0.9 and not 0.5 (RedisBloom's default): growing from 1,000 to 10M
 * keys at p = 1% with growth 2 takes 14 links; with r = 0.5 the later links
 * pay log2(1/r) = 1 extra bit of rate per link, about 1.44 bits per key
 * each, so the whole chain needs far more bits per key than with r = 0.9.
 * The first link is tighter (p/10) and so about 1.5x the size of a plain
 * filter for p, which only matters while the chain is small.
 *
 * Counting: a key counts towards a link's capacity only when it was new to
 * the whole chain: dedup_scalable_test_and_add() answers
 * DEDUP_MAYBE_DUPLICATE without adding anything when any link might contain
 * the key.  Keys cannot be deleted.
 *
 * Thread-safety: queries may run concurrently with each other; adds,
 * clear and load need exclusive access.
 */
#ifndef DEDUP_SCALABLE_H
#define DEDUP_SCALABLE_H

#include "dedup/bloom.h"
#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUP_SCALABLE_DEFAULT_CAPACITY 1000u
#define DEDUP_SCALABLE_DEFAULT_GROWTH 2u
#define DEDUP_SCALABLE_MAX_GROWTH 1024u
#define DEDUP_SCALABLE_DEFAULT_TIGHTENING 0.9

typedef struct dedup_scalable dedup_scalable;

typedef struct dedup_scalable_params {
    dedup_bloom_kind kind; /* layout of every link; default DEDUP_BLOOM_CLASSIC */
    uint64_t capacity;     /* n_0, new keys in the first link, >= 1; default 1000 */
    double fpr;            /* p, the promise for the whole chain, in [DEDUP_MIN_FPR, 1);
                              default 0.01 */
    uint32_t growth;       /* n_(i+1) = growth * n_i, 1..1024; default 2 */
    double tightening;     /* r, in (0, 1); default 0.9 */
    uint32_t max_links;    /* L, 1..DEDUP_MAX_CHAIN; default DEDUP_MAX_CHAIN.  With
                              L = 1 the filter never grows (see test_and_add) */
    uint64_t seed;         /* hash seed; default DEDUP_DEFAULT_SEED */
} dedup_scalable_params;

void dedup_scalable_params_init(dedup_scalable_params *params);

/* Creates a chain with its first link allocated.
 * Errors: DEDUP_ERR_INVALID_ARG (a field out of range), DEDUP_ERR_LIMIT (the
 * first link would exceed DEDUP_MAX_BITS bits, or p_0 < DEDUP_MIN_FPR),
 * DEDUP_ERR_NOMEM. */
dedup_status dedup_scalable_create(const dedup_scalable_params *params,
                                   const dedup_allocator *alloc, dedup_scalable **out);
/* Frees the chain; NULL is a no-op. */
void dedup_scalable_free(dedup_scalable *sb);

/* The digest of a key under this chain's seed. */
dedup_digest dedup_scalable_digest(const dedup_scalable *sb, const void *key, size_t len);

/* ---- Operations ----------------------------------------------------------- */

/* The one verb: DEDUP_MAYBE_DUPLICATE (nothing changed) if any link might
 * contain the key; otherwise the key is added to the newest link, a new
 * link being appended first when the newest is at its capacity, and
 * *verdict is DEDUP_NEW.
 * Errors (the key was not added, the chain is unchanged, *verdict unset):
 * DEDUP_ERR_FULL (max_links links exist and the last is at capacity),
 * DEDUP_ERR_LIMIT (the next link would exceed DEDUP_MAX_BITS bits, or its
 * p_i would be below DEDUP_MIN_FPR), DEDUP_ERR_NOMEM. */
dedup_status dedup_scalable_test_and_add(dedup_scalable *sb, dedup_digest d,
                                         dedup_verdict *verdict);
/* test_and_add without the verdict. */
dedup_status dedup_scalable_add(dedup_scalable *sb, dedup_digest d);
/* Whether any link might contain the key (newest link first). */
bool dedup_scalable_might_contain(const dedup_scalable *sb, dedup_digest d);
/* out[i] = might_contain(d[i]), with each link's batch query (prefetch). */
void dedup_scalable_might_contain_batch(const dedup_scalable *sb, const dedup_digest *d,
                                        size_t n, bool *out);

/* Batch of the one verb: the same verdicts and the same chain as calling
 * test_and_add on d[0..n-1] in order (a key repeated inside the batch is
 * MAYBE_DUPLICATE the second time), but the links' memory for many keys is
 * fetched ahead, several times faster on large chains.  On error, stops:
 * *done (may be NULL) = keys processed (verdicts out[0..*done-1] are set;
 * d[*done] was not added) and the error is returned as test_and_add's. */
dedup_status dedup_scalable_test_and_add_batch(dedup_scalable *sb, const dedup_digest *d,
                                               size_t n, dedup_verdict *out, size_t *done);

dedup_status dedup_scalable_test_and_add_key(dedup_scalable *sb, const void *key, size_t len,
                                             dedup_verdict *verdict);
dedup_status dedup_scalable_add_key(dedup_scalable *sb, const void *key, size_t len);
bool dedup_scalable_might_contain_key(const dedup_scalable *sb, const void *key, size_t len);

/* ---- Shape and state -------------------------------------------------------- */
typedef struct dedup_scalable_info {
    dedup_bloom_kind kind;
    uint32_t links;            /* >= 1 */
    uint32_t max_links;        /* L */
    uint32_t growth;
    double tightening;         /* r */
    double fpr;                /* p, the promise */
    double fpr_bound;          /* sum of p_i over existing links, <= p */
    double fpr_current;        /* 1 - prod(1 - fill_i^k_i): expected at the current fill */
    uint64_t initial_capacity; /* n_0 */
    uint64_t capacity;         /* sum of n_i over existing links */
    uint64_t items;            /* keys that were new to the chain when added */
    uint64_t bits;             /* over all links */
    uint64_t seed;
    size_t memory;             /* bytes held (dedup_scalable_memory_usage) */
} dedup_scalable_info;

typedef struct dedup_scalable_link_info {
    uint64_t capacity;  /* n_i */
    uint64_t items;     /* new keys added to this link, <= n_i */
    uint64_t bits;
    uint32_t k;
    double fpr;         /* p_i, the rate this link was sized for */
    double fpr_current; /* expected at its current fill (dedup_bloom_current_fpr) */
    size_t memory;
} dedup_scalable_link_info;

/* O(total bits): fpr_current counts the set bits of every link.  Everything
 * else in the info is O(links); dedup_scalable_link_info's fpr_current is
 * O(bits of that link). */
void dedup_scalable_get_info(const dedup_scalable *sb, dedup_scalable_info *info);
/* Link 0 is the oldest.  DEDUP_ERR_RANGE if link >= links. */
dedup_status dedup_scalable_get_link_info(const dedup_scalable *sb, uint32_t link,
                                          dedup_scalable_link_info *info);
/* Read-only access to a link's Bloom filter (NULL if link >= links); valid
 * until the next write to the chain. */
const dedup_bloom *dedup_scalable_link(const dedup_scalable *sb, uint32_t link);
/* Bytes held, the struct included. */
size_t dedup_scalable_memory_usage(const dedup_scalable *sb);
/* Back to one empty first link. */
void dedup_scalable_clear(dedup_scalable *sb);

/* The rate p_i of link i for (p, r, L), as above (pure; 0 when arguments are
 * out of range). */
double dedup_scalable_link_fpr(double p, double tightening, uint32_t max_links, uint32_t link);

/* ---- Persistence (docs/FORMAT.md: type SCALABLE_BLOOM) ----------------------
 * save writes the chain params, per-link params (capacity, items, bits, k,
 * rate) and each link as an embedded Bloom container.  For a SCANDUMP, save
 * into a dedup_mem_sink of dedup_scalable_serialized_size() bytes and split
 * the blob; load it back from a mem source.  load checks every chain and
 * link field (against each other and against what each embedded link
 * declares) before allocating the link, and the checksums.
 * Load errors: the decoder's (BAD_MAGIC, VERSION, WRONG_TYPE, TRUNCATED,
 * CORRUPT, CHECKSUM), LIMIT, NOMEM, IO. */
dedup_status dedup_scalable_save(const dedup_scalable *sb, dedup_sink *sink);
uint64_t dedup_scalable_serialized_size(const dedup_scalable *sb);
dedup_status dedup_scalable_load(dedup_source src, const dedup_allocator *alloc,
                                 dedup_scalable **out);
dedup_status dedup_scalable_save_file(const dedup_scalable *sb, const char *path);
dedup_status dedup_scalable_load_file(const char *path, const dedup_allocator *alloc,
                                      dedup_scalable **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_SCALABLE_H */
