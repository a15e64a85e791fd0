/*
 * dedup/bitmap.h - a dense bitset of up to DEDUP_MAX_BITS (2^40) bits.
 *
 * Bit i lives in 64-bit word i / 64 at bit position i % 64 counted from the
 * least significant bit, and files hold the words little-endian: so in a
 * file, bit i is bit i % 8 (from the least significant) of byte i / 8.
 * That is NOT the order of a Redis string, where SETBIT/GETBIT offset i is
 * the most significant bit first: bit 7 - i % 8 of byte i / 8.
 * dedup_bitmap_export_redis() / dedup_bitmap_import_redis() convert, so
 * that `SET key <export>` gives a Redis string whose GETBIT i, BITCOUNT and
 * BITPOS answer as this bitmap's get, count_range and next_set/next_clear
 * do (tests/unit/test_bitmap_redis.c checks it against a real server).
 * Every index is checked: an index >= the bitmap's size is DEDUP_ERR_RANGE
 * and changes nothing.
 *
 * Thread-safety: queries (get, popcount, save) may run concurrently with
 * each other; any write (set, clear, test_and_set, and/or/xor, clear_all,
 * load) needs exclusive access.
 */
#ifndef DEDUP_BITMAP_H
#define DEDUP_BITMAP_H

#include "dedup/common.h"
#include "dedup/format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dedup_bitmap dedup_bitmap;

typedef struct dedup_bitmap_params {
    uint64_t nbits;  /* size in bits, 1 .. DEDUP_MAX_BITS; required */
    uint64_t origin; /* the integer bit 0 stands for, for a caller mapping
                        integers [origin, origin + nbits - 1] onto bits (the
                        seen-set's --range LO..HI keeps LO here); kept in the
                        file, and two bitmaps combine only when their origins
                        are equal; no other call reads it.  Default 0.
                        origin + nbits - 1 must not pass 2^64 - 1. */
} dedup_bitmap_params;

/* Defaults: nbits 0 (must be set), origin 0. */
void dedup_bitmap_params_init(dedup_bitmap_params *params);

/* Creates a bitmap with every bit 0.  Memory: ceil(nbits / 64) * 8 bytes.
 * Errors: DEDUP_ERR_INVALID_ARG (nbits 0, origin + nbits - 1 past 2^64 - 1,
 * NULL pointers), DEDUP_ERR_LIMIT
 * (nbits > DEDUP_MAX_BITS), DEDUP_ERR_NOMEM. */
dedup_status dedup_bitmap_create(const dedup_bitmap_params *params, const dedup_allocator *alloc,
                                 dedup_bitmap **out);
/* Frees the bitmap; NULL is a no-op. */
void dedup_bitmap_free(dedup_bitmap *bm);

/* Number of bits. */
uint64_t dedup_bitmap_size(const dedup_bitmap *bm);
/* The origin it was created or loaded with (params.origin; 0 for a file of
 * the first params layout and for dedup_bitmap_import_redis()). */
uint64_t dedup_bitmap_origin(const dedup_bitmap *bm);

/* Sets / clears bit 'i'.  DEDUP_ERR_RANGE if i >= size. */
dedup_status dedup_bitmap_set(dedup_bitmap *bm, uint64_t i);
dedup_status dedup_bitmap_clear(dedup_bitmap *bm, uint64_t i);
/* Stores bit 'i' in *value.  DEDUP_ERR_RANGE if i >= size (*value false). */
dedup_status dedup_bitmap_get(const dedup_bitmap *bm, uint64_t i, bool *value);
/* Sets bit 'i' and stores its previous value in *was_set (may be NULL).
 * DEDUP_ERR_RANGE if i >= size (nothing changed, *was_set false). */
dedup_status dedup_bitmap_test_and_set(dedup_bitmap *bm, uint64_t i, bool *was_set);

/* Bits set, O(size / 64). */
uint64_t dedup_bitmap_popcount(const dedup_bitmap *bm);

/* ---- Searching (the allocator's "find a free slot") ----------------------
 * The first bit at or after 'from' that is set / clear, or the bitmap's
 * size when there is none ('from' >= size included).  A word at a time:
 * O(distance / 64). */
uint64_t dedup_bitmap_next_set(const dedup_bitmap *bm, uint64_t from);
uint64_t dedup_bitmap_next_clear(const dedup_bitmap *bm, uint64_t from);
/* Bits set in [from, to), stored in *count.  DEDUP_ERR_RANGE when
 * from > to or to > size (*count 0).  O((to - from) / 64). */
dedup_status dedup_bitmap_count_range(const dedup_bitmap *bm, uint64_t from, uint64_t to,
                                      uint64_t *count);

/* ---- Redis string order ---------------------------------------------------
 * Bytes in the order of a Redis string's bits: offset i is bit 7 - i % 8
 * (the most significant first) of byte i / 8, as SETBIT writes it.
 * export writes ceil(size / 8) bytes to 'buf' (DEDUP_ERR_FULL, nothing
 * written, when 'cap' is smaller); the bits past the size in the last byte
 * are 0.  import creates a bitmap of 'nbits' bits from 'len' such bytes:
 * bytes beyond ceil(nbits / 8) must not exist and set bits past nbits are
 * refused (DEDUP_ERR_RANGE), while a shorter string (Redis trims nothing,
 * but a string may end before the last set bit's byte) reads as zeros
 * beyond its end.  Errors also: INVALID_ARG, LIMIT, NOMEM as create. */
uint64_t dedup_bitmap_redis_bytes(const dedup_bitmap *bm);
dedup_status dedup_bitmap_export_redis(const dedup_bitmap *bm, void *buf, size_t cap);
dedup_status dedup_bitmap_import_redis(const void *bytes, size_t len, uint64_t nbits,
                                       const dedup_allocator *alloc, dedup_bitmap **out);
/* Sets every bit to 0. */
void dedup_bitmap_clear_all(dedup_bitmap *bm);

/* dst = dst OP src, word by word.  DEDUP_ERR_INCOMPATIBLE unless both have
 * the same size and origin (dst unchanged).  dst == src is allowed. */
dedup_status dedup_bitmap_and(dedup_bitmap *dst, const dedup_bitmap *src);
dedup_status dedup_bitmap_or(dedup_bitmap *dst, const dedup_bitmap *src);
dedup_status dedup_bitmap_xor(dedup_bitmap *dst, const dedup_bitmap *src);

/* Bytes held, the struct included. */
size_t dedup_bitmap_memory_usage(const dedup_bitmap *bm);

/* ---- Persistence (docs/FORMAT.md: type BITMAP) ---------------------------
 * The file's hash seed field is 0 (a bitmap holds indexes, not digests).
 * save writes the second params layout (nbits, origin); load reads it and
 * the first (nbits only: files written before the origin existed), which
 * loads with origin 0. */
dedup_status dedup_bitmap_save(const dedup_bitmap *bm, dedup_sink *sink);
/* Bytes dedup_bitmap_save() writes. */
uint64_t dedup_bitmap_serialized_size(const dedup_bitmap *bm);
/* Validates every field and the checksum before returning the bitmap;
 * reads the words straight into place.  Errors: the decoder's (BAD_MAGIC,
 * VERSION, WRONG_TYPE, TRUNCATED, CORRUPT, CHECKSUM), LIMIT, NOMEM, IO.
 * Bytes after the checksum are left unread in 'src'. */
dedup_status dedup_bitmap_load(dedup_source src, const dedup_allocator *alloc,
                               dedup_bitmap **out);
/* Atomic save to a path; load from one (trailing bytes: DEDUP_ERR_TRAILING). */
dedup_status dedup_bitmap_save_file(const dedup_bitmap *bm, const char *path);
dedup_status dedup_bitmap_load_file(const char *path, const dedup_allocator *alloc,
                                    dedup_bitmap **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_BITMAP_H */
