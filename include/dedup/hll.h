/*
 * dedup/hll.h - HyperLogLog: how many distinct keys, without keeping them.
 *
 * A sketch of m = 2^precision registers estimates the number of distinct
 * keys added to it with a relative standard error of about 1.04 / sqrt(m)
 * (0.81% at the default precision 14, whose registers take 16 KiB), however
 * many keys there are: up to 2^64 in principle, with a small bias that
 * only matters at the smallest precisions (see "Estimate" below).
 *
 * Digests.  The sketch takes the key's one 128-bit digest (dedup/hash.h)
 * and hashes nothing itself: the register is the top 'precision' bits of
 * digest.hi and the register's candidate value is the rank of digest.lo,
 * the number of its leading zero bits plus one (1 .. 64, or 65 when lo is
 * 0).  Register values therefore lie in 0 .. 65.  The caller computes the
 * digests with the seed the sketch was created with; the seed is kept in
 * the sketch and its file only so that two sketches of different seeds
 * refuse to merge.
 *
 * Sparse form.  A new sketch keeps a sorted list of 4-byte entries: the
 * top 25 bits of digest.hi and the rank, that is a sketch of 2^25
 * registers in which a few thousand keys almost never share one, so small
 * counts are estimated almost exactly (standard error 1.04 / 2^12.5).  The
 * list is kept while it holds at most m / 8 entries (so never more than half
 * the dense form's bytes); the next new entry turns the sketch dense (one
 * byte per register, register i being the largest rank among the entries
 * whose top bits are i).  Which form a sketch is in depends only on the set
 * of digests added, never on their order or on merges: it is dense exactly
 * when more than m / 8 distinct 25-bit prefixes were seen, or after
 * dedup_hll_densify().
 *
 * Estimate.  Ertl's improved estimator ("New cardinality estimation
 * algorithms for HyperLogLog sketches", 2017) over the histogram of
 * register values: no empirical bias tables, no switch to linear counting.
 * It is not exactly unbiased: once no register is 0 it overestimates by
 * alpha_inf / alpha_m - 1 on average (7.2% at 16 registers, 0.4% at 256,
 * about 0.01% at the default 16384), and at counts from m / 4 to 8 m by
 * between 0 and that (tests/unit/test_hll.c measures both); from precision
 * 8 on, the bias is under a tenth of the standard error.  A sparse sketch's
 * small counts are nearly exact (a few keys off at most).
 *
 * Merge.  dedup_hll_merge() takes the register-wise (entry-wise) maximum,
 * so the merge of two sketches is, register for register and in the same
 * form, the sketch of the union of their inputs.  Only sketches of the same precision and seed merge.
 *
 * Thread-safety: as dedup/common.h says (one writer, or many readers).
 */
#ifndef DEDUP_HLL_H
#define DEDUP_HLL_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/hash.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUP_HLL_MIN_PRECISION 4u  /* 16 registers: 26% standard error */
#define DEDUP_HLL_MAX_PRECISION 18u /* 256 KiB dense: 0.20%; more buys little */
#define DEDUP_HLL_DEFAULT_PRECISION 14u
#define DEDUP_HLL_MAX_RANK 65u      /* register values lie in 0 .. 65 */
#define DEDUP_HLL_SPARSE_PRECISION 25u /* the sparse form's index bits */

typedef struct dedup_hll_params {
    uint32_t precision; /* 4 .. 18; default 14 */
    uint64_t seed;      /* the digests' seed; default DEDUP_DEFAULT_SEED */
} dedup_hll_params;

void dedup_hll_params_init(dedup_hll_params *params);

typedef struct dedup_hll dedup_hll;

/* Creates an empty sketch (sparse form).
 * Errors: DEDUP_ERR_INVALID_ARG (NULL pointers, precision outside 4 .. 18),
 * DEDUP_ERR_NOMEM. */
dedup_status dedup_hll_create(const dedup_hll_params *params, const dedup_allocator *alloc,
                              dedup_hll **out);
/* Frees the sketch; NULL is a no-op. */
void dedup_hll_free(dedup_hll *h);

/* Adds one key by its digest / n keys by theirs.  Only the sparse form
 * allocates (its list grows, then it turns dense), so only it can fail:
 * DEDUP_ERR_NOMEM, in which case the digests before the failing one are
 * added and the sketch is otherwise unchanged.  Dense adds cost one byte
 * compare per digest, in a table that stays in cache. */
dedup_status dedup_hll_add(dedup_hll *h, dedup_digest d);
dedup_status dedup_hll_add_batch(dedup_hll *h, const dedup_digest *d, size_t n);

/* The estimated number of distinct keys added. */
double dedup_hll_estimate(const dedup_hll *h);
/* The relative standard error of the estimate: 1.04 / sqrt(m), the
 * asymptotic figure (m = 2^25 while the sketch is sparse).  Below precision 7 the error is skewed, with a heavier
 * tail than a normal one's and an RMS up to ~1.25 times this (at 16 registers); from 7 on,
 * estimates fall within 3 standard errors as often as a normal error does
 * (tests/unit/test_hll.c). */
double dedup_hll_std_error(const dedup_hll *h);

uint32_t dedup_hll_precision(const dedup_hll *h);
uint64_t dedup_hll_seed(const dedup_hll *h);
/* Registers: 2^precision. */
uint64_t dedup_hll_registers(const dedup_hll *h);
/* Value of register i (0 .. 65) as the dense form holds it; 0 for
 * i >= registers. */
unsigned dedup_hll_register(const dedup_hll *h, uint64_t i);
/* Whether the sketch is in its sparse form. */
bool dedup_hll_is_sparse(const dedup_hll *h);
/* Whether two sketches have the same precision, seed, form and content
 * (sparse entries, or dense registers). */
bool dedup_hll_equal(const dedup_hll *a, const dedup_hll *b);
/* Bytes held, the struct included. */
size_t dedup_hll_memory_usage(const dedup_hll *h);

/* Turns the sketch dense now (it would at m / 8 non-zero registers).
 * DEDUP_ERR_NOMEM leaves it sparse and unchanged. */
dedup_status dedup_hll_densify(dedup_hll *h);

/* dst = register-wise max(dst, src).  DEDUP_ERR_INCOMPATIBLE when the
 * precisions or seeds differ ('why', when not NULL, receives which, as a
 * sentence of at most whycap bytes); DEDUP_ERR_NOMEM when dst must turn
 * dense and cannot.  On error dst is unchanged.  dst == src is allowed. */
dedup_status dedup_hll_merge(dedup_hll *dst, const dedup_hll *src, char *why, size_t whycap);

/* Sets every register to 0 (the sketch stays in the form it is in). */
void dedup_hll_clear(dedup_hll *h);

/* ---- Persistence (docs/FORMAT.md: type HLL) ------------------------------
 * Saved in its current form: sparse as its sorted entries, dense as one
 * byte per register. */
dedup_status dedup_hll_save(const dedup_hll *h, dedup_sink *sink);
uint64_t dedup_hll_serialized_size(const dedup_hll *h);
/* Validates every field (precision, form, entry order, register values,
 * a sparse list no longer than m / 8) and the checksum.  Errors: the
 * decoder's (BAD_MAGIC, VERSION, WRONG_TYPE, TRUNCATED, CHECKSUM), CORRUPT,
 * NOMEM, IO.  Bytes after the checksum are left unread in 'src'. */
dedup_status dedup_hll_load(dedup_source src, const dedup_allocator *alloc, dedup_hll **out);
/* Atomic save to a path; load from one (trailing bytes: DEDUP_ERR_TRAILING). */
dedup_status dedup_hll_save_file(const dedup_hll *h, const char *path);
dedup_status dedup_hll_load_file(const char *path, const dedup_allocator *alloc, dedup_hll **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_HLL_H */
