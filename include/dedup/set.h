/*
 * dedup/set.h - exact hash sets: strings, 128-bit digests, 64-bit integers.
 *
 * Exact sets answer "seen before?" with no error: DEDUP_NEW or
 * DEDUP_DUPLICATE.  All three are open-addressing tables (linear probing)
 * whose slot is derived from the key's digest; nothing is hashed twice.
 *
 *  - dedup_strset: full keys, stored once in an append-only arena of 4 MiB
 *    chunks.  A slot is 16 bytes: the digest's low 64 bits (which reject a
 *    different key before the arena is touched) and the key's arena
 *    reference.  Slots live in segments of 131,068 (2 MiB) reached through
 *    a directory on the top bits of the digest (extendible hashing; see
 *    the strset section below).
 *  - dedup_digestset: only the 128-bit digest of each key ("fingerprint"
 *    mode): 16 bytes a slot, kept sorted, growing in place (see its
 *    section below): 18.8 to 23.6 bytes per key, peak included.  Two
 *    distinct keys collide with probability about n^2 / 2^129 over n keys
 *    (1e-20 at n = 1e9).
 *  - dedup_u64set: 64-bit integer keys, 8 bytes a slot.
 *  - dedup_refset: whole records that stay in the caller's memory (a mapped
 *    file), 8 bytes a slot: a 40-bit offset and 24 digest bits (see its
 *    section below).
 *
 * The string set grows one 2 MiB segment at a time when a segment's load
 * passes 3/4; the integer set grows by half at 4/5; the digest set grows by 1/4,
 * in place, at 17/20.  With a memory limit, an insert that would need more than the
 * limit fails with DEDUP_ERR_FULL and changes nothing, so the caller can
 * spill (see dedup/extsort.h).  Sizing up front with params.capacity avoids
 * every rehash.
 *
 * Each entry can carry a 64-bit occurrence count (params.counts), used for
 * uniq -c style output.
 *
 * Thread-safety: one writer, or many readers; no internal locking.
 */
#ifndef DEDUP_SET_H
#define DEDUP_SET_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dedup_set_params {
    uint64_t capacity;     /* keys expected; 0 = start small and grow */
    uint64_t memory_limit; /* bytes; 0 = no limit */
    uint64_t seed;         /* hash seed; default DEDUP_DEFAULT_SEED */
    bool counts;           /* keep an occurrence count per key */
} dedup_set_params;

void dedup_set_params_init(dedup_set_params *params);

/* ---- Strings --------------------------------------------------------------
 * Extendible hashing: a directory of 2^D segment indices (D <= 32) is
 * indexed by the top D bits of digest.lo; a segment is 131,068 slots of 16
 * bytes (2 MiB less 64 bytes, so that one huge page holds it and an
 * allocator's header), linear probing inside it from a home slot taken from the
 * low 32 bits.  When an insert would load a segment past 3/4 it splits into
 * itself and one new segment by the next digest bit (the directory doubles
 * first when needed).  Below one segment (up to 98,301 keys) the set is a
 * single table that doubles from 64 slots.
 *
 * Memory (dedup_strset_memory_usage, exact):
 *     arena: 4 MiB chunks holding each key's length + 4 bytes (+ 8 with
 *            params.counts), plus 24 bytes a chunk for their array
 *   + tables: 16 bytes a slot; a segment holds between 3/8 (just split) and
 *            3/4 of its slots, so 21.3 to 42.7 bytes per key.  Segments at
 *            one depth fill at the same pace with a seeded hash, so the
 *            total moves between those bounds much as a doubling table's
 *            did, but in 2 MiB steps
 *   + directory: 4 bytes an entry, 2^D entries (about one to two per
 *            segment), + 40 bytes a segment descriptor, + the set object.
 * Peak during growth: the tables + one new segment (and, for a moment, the
 * old directory while it doubles); no second table exists at any time.
 * The memory ever touched is the final tables (with the small table's
 * doublings, at most 2 MiB more), where a doubling table touched about
 * twice its final size.  Below one segment the doubling table's old and
 * new copies coexist: at most 3 MiB.  params.capacity sizes the segments
 * (or the small table) up front so that no growth happens before that many
 * keys; a capacity over one segment gives 2^D full segments, 2^D the least
 * power of two with capacity * 33/32 / 2^D <= 98,301.
 *
 * Limits: DEDUP_ERR_LIMIT when a full segment already has local depth 32
 * (over 98,301 digests sharing their top 32 bits of lo, which a seeded hash
 * does not produce).  Digests crowded on their top bits can make a split
 * leave the new key's half full; the set then splits again, and if the
 * memory limit stops a later split the keys are unchanged but the splits
 * already made stay (memory_usage counts them).
 */
typedef struct dedup_strset dedup_strset;

dedup_status dedup_strset_create(const dedup_set_params *params, const dedup_allocator *alloc,
                                 dedup_strset **out);
void dedup_strset_free(dedup_strset *set);

/* The digest of a key under this set's seed. */
dedup_digest dedup_strset_digest(const dedup_strset *set, const void *key, size_t len);

/* Records key (of 'len' bytes, any bytes including NUL) whose digest is 'd'
 * (as returned by dedup_strset_digest) and sets *verdict to DEDUP_NEW or
 * DEDUP_DUPLICATE.  With counts, the key's count is incremented.
 * Errors: DEDUP_ERR_FULL (memory limit; nothing changed), DEDUP_ERR_NOMEM,
 * DEDUP_ERR_LIMIT (key longer than 2^32-1 bytes). */
dedup_status dedup_strset_insert(dedup_strset *set, const void *key, size_t len, dedup_digest d,
                                 dedup_verdict *verdict);
/* Prefetches the slot 'd' maps to; call ahead of insert for many keys. */
void dedup_strset_prefetch(const dedup_strset *set, dedup_digest d);
/* Second stage, once the slot is in cache: prefetches the stored key that
 * the slot's tag says may be equal (the key bytes a duplicate is compared
 * with).  A hint only; never changes the set. */
void dedup_strset_prefetch_key(const dedup_strset *set, dedup_digest d);
bool dedup_strset_contains(const dedup_strset *set, const void *key, size_t len, dedup_digest d);
/* Count of a key (0 if absent, 1 if present without counts). */
uint64_t dedup_strset_count_of(const dedup_strset *set, const void *key, size_t len,
                               dedup_digest d);

uint64_t dedup_strset_size(const dedup_strset *set); /* distinct keys */
size_t dedup_strset_memory_usage(const dedup_strset *set);
/* Bytes the set would hold after inserting one more new key of 'len' bytes,
 * at the peak of any growth that insert may cause (a small-table rehash with
 * both tables, or a split's new segment and doubled directory).  The key's
 * segment is not known, so this assumes the largest growth step of any full
 * segment: an upper bound. */
size_t dedup_strset_memory_after_insert(const dedup_strset *set, size_t len);
void dedup_strset_clear(dedup_strset *set);

/* Calls fn for every key in insertion order; stops early if fn returns
 * nonzero and returns that value. */
typedef int (*dedup_strset_visit)(void *ctx, const void *key, size_t len, uint64_t count);
int dedup_strset_foreach(const dedup_strset *set, dedup_strset_visit fn, void *ctx);

dedup_status dedup_strset_save(const dedup_strset *set, dedup_sink *sink);
dedup_status dedup_strset_load(dedup_source src, const dedup_allocator *alloc, dedup_strset **out);

/* ---- Keys by reference ------------------------------------------------------
 * dedup_refset: the keys stay in
 * the caller's memory (a mapped input file, or several mapped one after the
 * other), and the set keeps one 8-byte slot per distinct key: the key's
 * offset in that span (40 bits) and 24 bits of its digest.  It holds whole
 * records only: the key at offset 'off' of 'len' bytes must be followed by
 * params.term, or end at one of params.ends (the end of a file whose last
 * record has no terminator) or at the span's end; that is how a stored key's
 * length is known without storing it.  A candidate equal in its digest bits
 * is compared byte for byte with the span, so the answers are exact.
 *
 * Preconditions: the span's bytes stay readable and unchanged while the set
 * lives (a mapped file that shrinks raises SIGBUS in the caller; the caller
 * must detect a file that changed).
 *
 * Other keys: with params.lengths a slot also keeps its key's
 * length (8 more bytes), so a key may be any byte range of the span (a
 * field of a record, a record without its blanks).  A key that is not in
 * the span (a normalised key that differs from the file's bytes, a key of a
 * state loaded from a file) is copied (dedup_refset_insert_copy) into the
 * set's own memory: 16 bytes + the key, counted in the memory usage, in
 * chunks of 256 KiB.  With params.counts a slot also counts its key's
 * occurrences (8 more bytes).  dedup_refset_foreach() and
 * dedup_refset_save() give the keys in first-occurrence order: a key by
 * reference at DEDUP_REFSET_SPAN_SEQ + its offset, a copy at the 'seq' its
 * insert gave; save writes the file dedup_strset_save() would for the same
 * keys (type DEDUP_TYPE_SET_STRING; dedup_strset_load() reads it).
 *
 * Memory (dedup_refset_memory_usage, exact): 8 bytes a slot at a load of
 * 3/8 to 3/4 (shards double at 3/4, and being planned alike they double at
 * about the same time): 10.7 to 21.3 bytes per distinct key depending on
 * where the shards are in their doubling, plus 16 bytes per shard; params.expected plans the shards (each
 * for about 2^14 slots; default span / 64).  DEDUP_ERR_FULL when a growth
 * would pass params.memory_limit or a shard would pass 2^24 slots (far more
 * keys than planned): nothing is changed and the caller can go on another
 * way (EXACT_SPILL freezes the set and spills).
 *
 * Thread-safety: one thread at a time per set (queries included), except
 * that the keys fall into two parts (dedup_refset_part() of the digest) and
 * two threads may insert at once if each inserts only keys of its own part;
 * dedup_refset_size() and dedup_refset_memory_usage() may be read by any
 * thread meanwhile.  The memory limit is then the callers' to keep
 * (dedup_refset_insert_unlimited()): two parts growing at once cannot both
 * be refused at the same point of the input. */
typedef struct dedup_refset_params {
    const void *base;        /* start of the span; required */
    uint64_t span;           /* its bytes (< 2^40 - 1) */
    unsigned char term;      /* the record terminator; default '\n' */
    const uint64_t *ends;    /* sorted offsets where a record may end without a
                                terminator (copied); may be NULL with nends 0 */
    size_t nends;
    uint64_t expected;       /* planned distinct keys; 0 = span / 64 */
    uint64_t memory_limit;   /* bytes; 0 = none */
    uint64_t seed;           /* the digests' seed (kept for the caller) */
    bool lengths;            /* keys are any byte ranges: lengths kept */
    bool counts;             /* count each key's occurrences */
} dedup_refset_params;

/* Where a key by reference at offset 'off' sorts in first-occurrence order
 * (dedup_refset_foreach); a copied key from the span is given its record's
 * DEDUP_REFSET_SPAN_SEQ + offset, one from elsewhere inserted before them
 * a smaller seq. */
#define DEDUP_REFSET_SPAN_SEQ (UINT64_C(1) << 62)

typedef struct dedup_refset dedup_refset;

void dedup_refset_params_init(dedup_refset_params *p);
/* Errors: DEDUP_ERR_INVALID_ARG (no base, span too large), DEDUP_ERR_NOMEM. */
dedup_status dedup_refset_create(const dedup_refset_params *params, const dedup_allocator *alloc,
                                 dedup_refset **out);
void dedup_refset_free(dedup_refset *set); /* NULL is harmless */
/* Records the whole record at offset 'off' of 'len' bytes, whose digest is
 * 'd' (dedup_hash of those bytes with the caller's seed), and sets *verdict
 * to DEDUP_NEW or DEDUP_DUPLICATE.  The empty record is one key wherever it
 * lies (kept as a flag, not by reference: at the end of a file without a
 * last terminator it shares its offset with the next file's first record).
 * Errors: DEDUP_ERR_FULL (see above; nothing changed), DEDUP_ERR_NOMEM,
 * DEDUP_ERR_INVALID_ARG (outside the span). */
dedup_status dedup_refset_insert(dedup_refset *set, uint64_t off, size_t len, dedup_digest d,
                                 dedup_verdict *verdict);
/* As dedup_refset_insert(), but a growth may pass params.memory_limit (never
 * DEDUP_ERR_FULL for memory; still past 2^24 slots a shard): for two
 * threads inserting one part each, which watch dedup_refset_memory_usage()
 * against dedup_refset_memory_limit() themselves. */
dedup_status dedup_refset_insert_unlimited(dedup_refset *set, uint64_t off, size_t len,
                                           dedup_digest d, dedup_verdict *verdict);
/* Records a key by copy, wherever its bytes are, with 'seq' its
 * place in first-occurrence order; as dedup_refset_insert() otherwise
 * ('limited': as dedup_refset_insert(), else as _unlimited()).  A copy
 * equal to a key by reference is that key (DEDUP_DUPLICATE).  Also
 * DEDUP_ERR_FULL when the offsets past the span (2^40 bytes in all) are
 * used up. */
dedup_status dedup_refset_insert_copy(dedup_refset *set, const void *key, size_t len,
                                      dedup_digest d, uint64_t seq, bool limited,
                                      dedup_verdict *verdict);
/* The key's occurrences (params.counts; else 1 when present), 0
 * when absent. */
uint64_t dedup_refset_count_of(const dedup_refset *set, const void *key, size_t len,
                               dedup_digest d);
/* Calls fn for every key in first-occurrence order (see above):
 * sorts 24 bytes a key first (*st DEDUP_ERR_NOMEM if it cannot; else
 * DEDUP_OK); stops early if fn returns nonzero and returns that value. */
typedef int (*dedup_refset_visit)(void *ctx, const void *key, size_t len, uint64_t count);
int dedup_refset_foreach(const dedup_refset *set, dedup_refset_visit fn, void *ctx,
                         dedup_status *st);
/* Writes the keys as dedup_strset_save() would (the state format of
 * the exact sets).  Errors: the sink's, DEDUP_ERR_NOMEM (the sort above),
 * DEDUP_ERR_LIMIT (a key of 4 GiB or more, as for dedup_strset). */
dedup_status dedup_refset_save(const dedup_refset *set, dedup_sink *sink);
/* The part (0 or 1) of a key with digest 'd': the top bit of d.hi. */
unsigned dedup_refset_part(dedup_digest d);
/* params.memory_limit (0: none). */
uint64_t dedup_refset_memory_limit(const dedup_refset *set);
/* Whether the key (bytes anywhere, 'len' long, digest 'd') is in the set. */
bool dedup_refset_contains(const dedup_refset *set, const void *key, size_t len, dedup_digest d);
/* Prefetch hints ahead of insert: the slot, then the stored key bytes the
 * slot may name (the lines of 'len' bytes and the terminator after them:
 * the length of the key about to be compared). */
void dedup_refset_prefetch(const dedup_refset *set, dedup_digest d);
void dedup_refset_prefetch_key(const dedup_refset *set, dedup_digest d, size_t len);
uint64_t dedup_refset_size(const dedup_refset *set);
size_t dedup_refset_memory_usage(const dedup_refset *set);

/* ---- 128-bit digests ------------------------------------------------------
 * An ordered linear-probing table: slots hold the digests sorted by (lo, hi),
 * a digest's home slot is dedup_reduce(lo, H) for a home range of H slots,
 * and an overflow tail of T >= 64 slots follows the home range (no
 * wrap-around).  Lookups of absent digests stop at the first larger one.
 *
 * Memory (dedup_digestset_memory_usage, exact):
 *     (H + T) * (16, + 8 with params.counts) + the set object (136 B on LP64)
 *   - created with H = max(64, ceil(capacity * 20/17)) + 1, T = 64;
 *   - when an insert of a new digest would raise the size past 17/20 of H,
 *     H grows by 1/4 (at least 16 slots) first, so the load of the home
 *     range stays between 17/25 (0.68) and 17/20 (0.85) once past the
 *     first growth: 18.8 to 23.6 bytes per digest without counts, 28.2 to
 *     35.3 with counts, when T is small against H (T = 64: from about
 *     100,000 digests on);
 *   - T grows only if the last cluster of the table runs past it (digests
 *     crowded at the very top of the lo range), by half of itself.
 * Growth needs no second table and no scratch memory: the blocks are
 * enlarged through the allocator's realloc_fn and the digests are moved to
 * their new slots in place (one pass over the table, right to left).  With
 * the malloc family (NULL allocator) or any realloc_fn that can extend a
 * block without copying (glibc does for large blocks, with mremap), the
 * peak is the grown table; an allocator hook without realloc_fn makes the
 * library copy (old and new block both live for a moment, and a memory
 * limit counts both).  A fresh table is filled with 0xff bytes (the empty
 * mark) at creation, so all of it is touched up front.
 *
 * Limits and errors: insert returns DEDUP_ERR_FULL (memory limit: the grown
 * table, and the old one too without realloc_fn, would pass
 * params.memory_limit), DEDUP_ERR_NOMEM (the allocator failed) or
 * DEDUP_ERR_LIMIT (more than 2^40 slots); in every case the set is
 * unchanged and usable (a block may have grown and memory_usage says so).
 * Insert is O(1) expected (it shifts the rest of the digest's cluster one
 * slot right, about 5 to 20 slots at these loads); a growth step is O(H)
 * sequential work, about 5 table passes in total over the life of a set.
 * Digests crowded on nearly equal lo values (which a seeded hash does not
 * produce) make one long cluster: inserts and growth then cost time in
 * proportion to its length, never correctness.
 * The all-ones digest (lo = hi = 2^64 - 1) marks empty slots and is kept
 * aside, so every digest is a valid key.
 *
 * Insertion order: digests of real keys arrive in random order.  Digests
 * inserted in increasing order crowd the left part of the table beyond
 * its share unless the table is sized for all of them up front
 * (params.capacity): without that, inserts slow down in proportion to the
 * keys still to come.  load sizes for the declared key count for this
 * reason (and, as a fresh table is written in full with the empty mark,
 * touches that much memory before the first key is read; the memory and
 * file sources check the declared length against the data first).
 *
 * save writes the digests in increasing (lo, hi) order; load accepts any
 * order and rebuilds the table (see docs/FORMAT.md, type 8). */
typedef struct dedup_digestset dedup_digestset;

dedup_status dedup_digestset_create(const dedup_set_params *params, const dedup_allocator *alloc,
                                    dedup_digestset **out);
void dedup_digestset_free(dedup_digestset *set);
/* Records 'd' and sets *verdict to DEDUP_NEW or DEDUP_DUPLICATE; with counts
 * the digest's count is incremented.  Errors as above; nothing changes on
 * error. */
dedup_status dedup_digestset_insert(dedup_digestset *set, dedup_digest d, dedup_verdict *verdict);
/* Prefetches the cache lines 'd' is looked up in (its home slot and the next
 * 64 bytes); call ahead of insert for a batch of digests.  A hint only. */
void dedup_digestset_prefetch(const dedup_digestset *set, dedup_digest d);
bool dedup_digestset_contains(const dedup_digestset *set, dedup_digest d);
uint64_t dedup_digestset_count_of(const dedup_digestset *set, dedup_digest d);
uint64_t dedup_digestset_size(const dedup_digestset *set);
uint64_t dedup_digestset_seed(const dedup_digestset *set);
size_t dedup_digestset_memory_usage(const dedup_digestset *set);
/* What memory_usage reports for a set created with params.capacity =
 * 'capacity' (no counts), before its first growth: the bytes `n` keys
 * sized up front take.  0 past the slot limit. */
uint64_t dedup_digestset_memory_for(uint64_t capacity);
dedup_status dedup_digestset_save(const dedup_digestset *set, dedup_sink *sink);
dedup_status dedup_digestset_load(dedup_source src, const dedup_allocator *alloc,
                                  dedup_digestset **out);

/* ---- 64-bit integers ------------------------------------------------------ */
typedef struct dedup_u64set dedup_u64set;

dedup_status dedup_u64set_create(const dedup_set_params *params, const dedup_allocator *alloc,
                                 dedup_u64set **out);
void dedup_u64set_free(dedup_u64set *set);
dedup_status dedup_u64set_insert(dedup_u64set *set, uint64_t key, dedup_verdict *verdict);
bool dedup_u64set_contains(const dedup_u64set *set, uint64_t key);
/* The same for 'n' keys, verdicts[i] / found[i] for keys[i], in order (a
 * key repeated inside the batch is NEW once, then DUPLICATE), with the
 * probes of a group of keys in flight together (prefetch).  insert_batch
 * stops at the first error (as insert's), *done (may be NULL) = the keys
 * recorded before it, n on success. */
dedup_status dedup_u64set_insert_batch(dedup_u64set *set, const uint64_t *keys, size_t n,
                                       dedup_verdict *verdicts, size_t *done);
void dedup_u64set_contains_batch(const dedup_u64set *set, const uint64_t *keys, size_t n,
                                 bool *found);
uint64_t dedup_u64set_size(const dedup_u64set *set);
size_t dedup_u64set_memory_usage(const dedup_u64set *set);
/* What memory_usage reports for a set created with params.capacity =
 * 'capacity', before its first growth.  0 past the slot limit. */
uint64_t dedup_u64set_memory_for(uint64_t capacity);
dedup_status dedup_u64set_save(const dedup_u64set *set, dedup_sink *sink);
dedup_status dedup_u64set_load(dedup_source src, const dedup_allocator *alloc,
                               dedup_u64set **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_SET_H */
