/*
 * dedup/format.h - the one container every structure is saved in.
 *
 * docs/FORMAT.md is the normative description.  In short, all integers are
 * little-endian:
 *
 *   offset  size  field
 *   0       8     magic 89 44 44 50 0D 0A 1A 0A   ("\x89DDP\r\n\x1a\n")
 *   8       2     format version (DEDUP_FORMAT_VERSION)
 *   10      2     structure type (dedup_type)
 *   12      4     flags: reserved, must be zero
 *   16      4     hash id (DEDUP_HASH_XXH3_128)
 *   20      4     params length P (<= DEDUP_MAX_PARAMS_LEN)
 *   24      8     hash seed
 *   32      8     payload length L
 *   40      P     structure parameters
 *   40+P    L     payload
 *   40+P+L  8     checksum: XXH3-64 (seed 0) of bytes [0, 40+P+L)
 *
 * Structures write through a dedup_sink and read through a dedup_source, so
 * one implementation serves files, memory buffers and Redis RDB streams.
 * The encoder/decoder below do the header, the running checksum and all
 * length checks; a structure's save/load only supplies params and payload.
 */
#ifndef DEDUP_FORMAT_H
#define DEDUP_FORMAT_H

#include "dedup/common.h"
#include "dedup/limits.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUP_FORMAT_VERSION 1u
#define DEDUP_HEADER_SIZE 40u
#define DEDUP_TRAILER_SIZE 8u

/* Structure types.  Pinned forever; append only. */
typedef enum dedup_type {
    DEDUP_TYPE_BITMAP = 1,
    DEDUP_TYPE_BLOOM = 2,         /* classic Bloom, k probes over m bits */
    DEDUP_TYPE_BLOCKED_BLOOM = 3, /* one 512-bit block per key */
    DEDUP_TYPE_COUNTING_BLOOM = 4,
    DEDUP_TYPE_CUCKOO = 5,
    DEDUP_TYPE_SCALABLE_BLOOM = 6,
    DEDUP_TYPE_SET_U64 = 7,
    DEDUP_TYPE_SET_DIGEST = 8,
    DEDUP_TYPE_SET_STRING = 9,
    DEDUP_TYPE_WINDOW = 10,
    DEDUP_TYPE_CUCKOO_CHAIN = 11,
    DEDUP_TYPE_ROTATING_BLOOM = 12,
    DEDUP_TYPE_RING = 13,         /* consistent-hash ring: nodes and weights */
    DEDUP_TYPE_HLL = 14,          /* HyperLogLog sketch (dedup/hll.h) */
    DEDUP_TYPE_ROARING = 15,      /* roaring bitmaps of integers (backends/roaring) */
    DEDUP_TYPE_STATE = 16         /* a command's state: an identity in the params, a
                                   * whole container file (the seen-set) as payload */
} dedup_type;

/* Name of a type ("bloom", "blocked", "cuckoo", ...), or "unknown". */
const char *dedup_type_name(uint32_t type);

/* ---- Byte streams ----------------------------------------------------- */

/* Writes exactly 'len' bytes or returns an error. */
typedef struct dedup_sink {
    dedup_status (*write)(void *ctx, const void *buf, size_t len);
    void *ctx;
} dedup_sink;

/* Reads exactly 'len' bytes, or returns DEDUP_ERR_TRUNCATED if fewer remain.
 * 'remaining' (may be NULL) returns how many bytes are left, or UINT64_MAX
 * if unknown; loaders use it to refuse lengths the input cannot hold before
 * allocating. */
typedef struct dedup_source {
    dedup_status (*read)(void *ctx, void *buf, size_t len);
    uint64_t (*remaining)(void *ctx);
    void *ctx;
} dedup_source;

/* A source over a caller's memory buffer.  Never reads past 'len'. */
typedef struct dedup_mem_source {
    const unsigned char *data;
    size_t len;
    size_t pos;
} dedup_mem_source;
dedup_source dedup_mem_source_init(dedup_mem_source *m, const void *data, size_t len);

/* A sink into a caller's fixed buffer.  Writes past 'cap' fail with
 * DEDUP_ERR_FULL; 'len' counts bytes written. */
typedef struct dedup_mem_sink {
    unsigned char *data;
    size_t cap;
    size_t len;
} dedup_mem_sink;
dedup_sink dedup_mem_sink_init(dedup_mem_sink *m, void *buf, size_t cap);

/* A sink that only counts: used to learn a structure's serialized size. */
dedup_sink dedup_count_sink_init(uint64_t *counter);

/* A sink that keeps bytes [off, off+len) of a save in 'buf' and stops the
 * save with DEDUP_ERR_CANCELLED once it has them; 'copied' counts the bytes
 * kept (fewer than 'len' when the save ends first).  It lets a save be
 * read a range at a time without each range costing the whole prefix:
 * when a range is complete, the checksum state of the container being
 * written at its end is kept in the sink, and a save of the next range
 * into the same sink takes it up instead of hashing that container's
 * bytes again.  This holds only while the structure is unchanged between
 * the ranges; dedup_range_sink_init() forgets the kept state (call it when
 * a sequence of ranges starts or the structure may have changed), and
 * dedup_range_sink_next() aims the sink at another range keeping it.  A
 * range may be any, in any order: a kept state is taken up only by the
 * container it belongs to, and one past a range's start only skips
 * hashing bytes it already covers.  The struct is opaque storage. */
typedef struct dedup_range_sink {
    uint64_t pos, off;
    unsigned char *buf;
    size_t len, copied;
    uint64_t kept_start, kept_at; /* UINT64_MAX: nothing kept */
    _Alignas(64) unsigned char kept[640];
} dedup_range_sink;
dedup_sink dedup_range_sink_init(dedup_range_sink *r, uint64_t off, void *buf, size_t len);
dedup_sink dedup_range_sink_next(dedup_range_sink *r, uint64_t off, void *buf, size_t len);

/* ---- Header ------------------------------------------------------------ */
typedef struct dedup_header {
    uint16_t version;
    uint16_t type;
    uint32_t flags;
    uint32_t hash_id;
    uint32_t params_len;
    uint64_t seed;
    uint64_t payload_len;
} dedup_header;

/* ---- Encoder -----------------------------------------------------------
 * begin() writes the header and params; write() appends payload bytes;
 * end() checks that exactly payload_len bytes were written and appends the
 * checksum.  The struct is opaque storage; keep it on the stack. */
typedef struct dedup_encoder {
    dedup_sink sink;
    uint64_t expected;
    uint64_t written;
    dedup_status error;
    dedup_range_sink *range; /* the sink when it is a range sink, else NULL */
    uint64_t start, hashed;  /* range sink positions: the header, hashed up to */
    _Alignas(64) unsigned char state[640];
} dedup_encoder;

dedup_status dedup_encoder_begin(dedup_encoder *e, dedup_sink sink, uint16_t type,
                                 uint64_t seed, const void *params, uint32_t params_len,
                                 uint64_t payload_len);
dedup_status dedup_encoder_write(dedup_encoder *e, const void *buf, size_t len);
/* Writes 'count' 64-bit words little-endian. */
dedup_status dedup_encoder_write_u64s(dedup_encoder *e, const uint64_t *words, size_t count);
dedup_status dedup_encoder_end(dedup_encoder *e);

/* ---- Decoder -----------------------------------------------------------
 * begin() reads and validates the fixed header (magic, version, reserved
 * flags, hash id, params length, payload length against what the source
 * holds) and reads the params into 'params' (up to DEDUP_MAX_PARAMS_LEN).
 * If 'expect_type' is nonzero, a file of another type fails with
 * DEDUP_ERR_WRONG_TYPE.  read() takes payload bytes, never more than the
 * header declared; end() requires that all payload was read and verifies
 * the checksum. */
typedef struct dedup_decoder {
    dedup_source src;
    dedup_header header;
    uint64_t consumed;
    dedup_status error;
    unsigned char params[DEDUP_MAX_PARAMS_LEN];
    _Alignas(64) unsigned char state[640];
} dedup_decoder;

dedup_status dedup_decoder_begin(dedup_decoder *d, dedup_source src, uint16_t expect_type);
dedup_status dedup_decoder_read(dedup_decoder *d, void *buf, size_t len);
dedup_status dedup_decoder_read_u64s(dedup_decoder *d, uint64_t *words, size_t count);
dedup_status dedup_decoder_end(dedup_decoder *d);

/* Little-endian field helpers for params blocks. */
static inline void dedup_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}
static inline void dedup_put_u64(unsigned char *p, uint64_t v)
{
    dedup_put_u32(p, (uint32_t)v); dedup_put_u32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t dedup_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t dedup_get_u64(const unsigned char *p)
{
    return (uint64_t)dedup_get_u32(p) | (uint64_t)dedup_get_u32(p + 4) << 32;
}
/* Doubles are stored as their IEEE-754 bit pattern in a u64. */
void dedup_put_f64(unsigned char *p, double v);
double dedup_get_f64(const unsigned char *p);

/* ---- Files ---------------------------------------------------------------
 * dedup_save_file() writes through 'fn' into a temporary file in the same
 * directory, fsyncs it, renames it over 'path' and fsyncs the directory: a
 * crash or error at any point leaves the previous file intact.  On error
 * errno describes the failed system call when the status is DEDUP_ERR_IO.
 * The temporary has no name while it is written (O_TMPFILE, Linux) and is
 * named "<path>.tmp.<pid>" only for the instant between linkat() and
 * rename(), so a process killed while saving leaves nothing behind; where
 * the file system has no O_TMPFILE, the named file is written instead.
 * The name is created exclusively (O_EXCL) and never through a link
 * (O_NOFOLLOW); one already there under this process's pid was left by a
 * dead process that had the same pid, and is removed first.  Either way
 * each save first removes the "<path>.tmp.<pid>" files whose pid is no
 * live process on this machine (a directory shared by several hosts should
 * not hold state files saved from more than one of them at once).  One
 * process must not save one path from two threads at once. */
typedef dedup_status (*dedup_save_fn)(const void *obj, dedup_sink *sink);
dedup_status dedup_save_file(const char *path, dedup_save_fn fn, const void *obj);

/* A buffered source over an open file.  Large reads go straight into the
 * caller's buffer (one copy from the kernel, no intermediate). */
typedef struct dedup_file_source {
    int fd;
    uint64_t remaining;
    size_t buf_pos, buf_len;
    unsigned char buf[1 << 16];
} dedup_file_source;
/* Opens 'path' for reading; DEDUP_ERR_IO with errno set if it cannot. */
dedup_status dedup_file_source_open(dedup_file_source *f, const char *path, dedup_source *out);
void dedup_file_source_close(dedup_file_source *f);

/* Reads only the header of 'path' (validated as in decoder_begin). */
dedup_status dedup_peek_file(const char *path, dedup_header *out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_FORMAT_H */
