/*
 * redis/rm_redisbloom.h - filters kept in RedisBloom 2.x's own layout, so
 * that keys written by RedisBloom keep working after the swap: the values
 * of its RDB types ("MBbloom--" encodings 0-4, "MBbloomCF" encodings 1-4,
 * as RedisBloom 2.4 reads them) and the chunk sequences of its
 * BF.SCANDUMP / CF.SCANDUMP.  Queries hash as RedisBloom does (MurmurHash2
 * 64A, or the 32-bit MurmurHash2 of chains without the FORCE64 option) so
 * every item added under RedisBloom is still found; adds keep the layout
 * (a chain grows as RedisBloom's does), so the value can also go back.
 * No Redis dependency: RDB access goes through rb_io.
 *
 * Layouts (little-endian, packed), as RedisBloom 2.4 writes them:
 *
 *   BF.SCANDUMP header, iterator 1 (20 + 53 * nfilters bytes):
 *     u64 items, u32 nfilters, u32 options, u32 growth, then per link:
 *     u64 bytes, u64 bits, u64 items, f64 error, f64 bits per entry,
 *     u32 hashes, u64 capacity (entries), u8 n2
 *   then each link's bit array, in link order, in chunks of at most 16 MiB;
 *   a chunk returned with iterator it covers bytes [it-1-len, it-1) of the
 *   concatenated arrays, within one link.
 *   options: 1 NOROUND, 2 ENTS_IS_BITS, 4 FORCE64, 8 NO_SCALING.
 *   Bit x of a link is bit x%8 of byte x/8; item probes are
 *   x_i = (a + i*b) mod M for i < hashes (64-bit arithmetic), M = 2^n2 if
 *   n2 > 0, else bits; FORCE64: a = MurmurHash64A(item, 0xc6a4a7935bd1e995),
 *   b = MurmurHash64A(item, a); else a = MurmurHash2(item, 0x9747b28c),
 *   b = MurmurHash2(item, a).
 *
 *   CF.SCANDUMP header, iterator 1 (38 bytes): u64 items, u64 buckets,
 *     u64 deletes, u64 filters, u16 bucket size, u16 max iterations,
 *     u16 expansion; then each sub-filter's buckets (one byte per slot,
 *     buckets * bucket size bytes; sub-filter i has buckets * expansion^i
 *     buckets), chunks numbered as for BF.  h = MurmurHash64A(item, 0),
 *     fingerprint = h % 255 + 1, buckets h and h ^ (fp * 0x5bd1e995)
 *     modulo the sub-filter's bucket count (a power of two).
 *
 *   RDB "MBbloom--" (RedisModule_Save* calls): items, nfilters, options
 *   (encoding >= 2), growth (>= 4, else 2); per link: capacity, error
 *   (double), hashes, bits per entry (double), bits and n2 (>= 1; encoding
 *   0 derives bits from capacity * bits per entry), the array (string),
 *   items.
 *   RDB "MBbloomCF": filters, buckets, items; encoding >= 4: deletes,
 *   bucket size, max iterations, expansion, and per sub-filter its bucket
 *   count before its array; encodings < 4: bucket size 2, 20 iterations,
 *   expansion 1, every sub-filter 'buckets' wide.
 *
 * Every field is checked before anything is allocated (sizes against each
 * other and against the per-key memory limit); a load yields a complete
 * object or an error text.  Not thread-safe (Redis calls from one thread).
 */
#ifndef DEDUP_RM_REDISBLOOM_H
#define DEDUP_RM_REDISBLOOM_H

#include "../rm_filter.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RB_BF_ENCVER 4 /* "MBbloom--" encoding RedisBloom 2.4 writes */
#define RB_CF_ENCVER 4 /* "MBbloomCF" */
#define RB_CF_HEADER_SIZE 38u
#define RB_BF_HEADER_BASE 20u
#define RB_BF_HEADER_LINK 53u
#define RB_CHUNK (16u << 20) /* RedisBloom's SCANDUMP chunk limit */

/* The RDB primitives, so this file needs no Redis.  load_buf returns a
 * buffer that free_buf releases (NULL on error); error() is true once any
 * load failed. */
typedef struct rb_io {
    void *ctx;
    uint64_t (*load_u64)(void *ctx);
    double (*load_double)(void *ctx);
    char *(*load_buf)(void *ctx, size_t *len);
    void (*free_buf)(void *ctx, char *buf);
    int (*error)(void *ctx);
    void (*save_u64)(void *ctx, uint64_t v);
    void (*save_double)(void *ctx, double v);
    void (*save_buf)(void *ctx, const void *buf, size_t len);
} rb_io;

typedef struct rb_bloom rb_bloom;
typedef struct rb_cuckoo rb_cuckoo;

/* ---- Values wrapped as module objects (rmf_obj) --------------------------- */

/* Starts a migration from the header chunk of RedisBloom's SCANDUMP (kind
 * RMF_BLOOM or RMF_CUCKOO).  A Bloom object is loading (rmf_loading) until
 * every byte of its arrays has arrived through rmf_rb_load_chunk, in order;
 * a cuckoo object, as in RedisBloom, is usable at once with empty buckets
 * (the chunks, in order, then fill them).  Errors are RedisBloom's texts:
 * "ERR received bad data" (Bloom), "ERR Invalid header" / "ERR Couldn't
 * create filter!" (cuckoo), except a MAX_MEMORY or out-of-memory refusal. */
rmf_err rmf_rb_begin(rmf_kind kind, const void *hdr, size_t len, const rmf_config *c,
                     const dedup_allocator *a, rmf_obj **out);
/* A LOADCHUNK after the header: 'iter' and 'data' as SCANDUMP returned them.
 * A cuckoo object refuses a chunk out of order with "ERR Couldn't load
 * chunk!", RedisBloom's text. */
rmf_err rmf_rb_load_chunk(rmf_obj *o, long long iter, const void *data, size_t len);
/* SCANDUMP in RedisBloom's numbering: iter 0 gives the header (copied into
 * buf, at most cap bytes; returns its length, or the length needed when
 * cap is too small) with next iterator 1. */
size_t rmf_rb_header(const rmf_obj *o, unsigned char *buf, size_t cap);
/* For iter >= 1: the bytes at that position (at most 'max'), *iter moved on;
 * NULL with *iter = 0 at the end. */
const unsigned char *rmf_rb_chunk(const rmf_obj *o, long long *iter, size_t *len, size_t max);
/* RDB: RedisBloom's encodings.  Unknown encodings are refused. */
rmf_err rmf_rb_rdb_load(rmf_kind kind, int encver, const rb_io *io, const rmf_config *c,
                        const dedup_allocator *a, rmf_obj **out);
void rmf_rb_rdb_save(const rmf_obj *o, const rb_io *io);

/* ---- The layouts themselves (rm_obj.c, rm_bloom.c, rm_cuckoo.c call these) */
void rb_bloom_free(rb_bloom *b);
rb_bloom *rb_bloom_copy(const rb_bloom *b, const dedup_allocator *a);
size_t rb_bloom_memory(const rb_bloom *b);
bool rb_bloom_complete(const rb_bloom *b);
rmf_err rb_bloom_add(rb_bloom *b, const void *item, size_t len, int *added);
bool rb_bloom_exists(const rb_bloom *b, const void *item, size_t len);
uint64_t rb_bloom_items(const rb_bloom *b);
uint64_t rb_bloom_capacity(const rb_bloom *b);
uint32_t rb_bloom_filters(const rb_bloom *b);
bool rb_bloom_nonscaling(const rb_bloom *b);
uint32_t rb_bloom_expansion(const rb_bloom *b);
size_t rb_bloom_debug(const rb_bloom *b, uint32_t line, char *buf, size_t cap);

void rb_cuckoo_free(rb_cuckoo *c);
rb_cuckoo *rb_cuckoo_copy(const rb_cuckoo *c, const dedup_allocator *a);
size_t rb_cuckoo_memory(const rb_cuckoo *c);
/* 1 added, 0 present (nx), -1 no room, -2 allocation failure. */
int rb_cuckoo_add(rb_cuckoo *c, const void *item, size_t len, bool nx);
bool rb_cuckoo_exists(const rb_cuckoo *c, const void *item, size_t len);
uint64_t rb_cuckoo_count(const rb_cuckoo *c, const void *item, size_t len);
bool rb_cuckoo_del(rb_cuckoo *c, const void *item, size_t len);
uint64_t rb_cuckoo_items(const rb_cuckoo *c);
uint32_t rb_cuckoo_filters(const rb_cuckoo *c);
void rb_cuckoo_get_info(const rb_cuckoo *c, rmf_cf_info *out);
void rb_cuckoo_compact(rb_cuckoo *c);

/* The hashes, exposed for the tests' known answers. */
uint64_t rb_murmur64a(const void *key, size_t len, uint64_t seed);
uint32_t rb_murmur2(const void *key, size_t len, uint32_t seed);

#endif /* DEDUP_RM_REDISBLOOM_H */
