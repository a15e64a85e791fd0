/*
 * extsort_internal.h - what the external engine's sources share; not public
 * API (the public side is dedup/extsort.h, which also says how the engine
 * works and what it costs).
 *
 * Vocabulary.  A *node* deduplicates one stream of records: the top node gets
 * the caller's pushes, a node at depth d > 0 reads one partition written by
 * its parent.  Each node owns an in-memory table; when it is full the node
 * spills the records of unknown keys into P partitions held in a temporary
 * file shared by every node of the same depth (SP[depth]), and later runs
 * one child node per partition, whose outputs go, one contiguous extent each,
 * to the result file RS[depth].  The node then merges those extents (plus,
 * for DUPLICATES, the repeats it recognised itself after spilling, and for
 * sorted order its own sorted table) into its output: the emit callback for
 * the top node, the parent's result file otherwise.  Nodes of one depth run
 * one after the other, so SP/RS are truncated and reused.
 *
 * Stream encoding (all integers LEB128 varints):
 *   [seq delta]  when the stream is in sequence order
 *   [count]      result streams of DEDUP_EXTSORT_COUNT
 *   keylen, recenc (0: record == key, else record length + 1), key, record
 * First-occurrence result streams drop a key that differs from its record
 * (keylen 0): only sorted merges compare keys.
 *
 * On disk a stream is a sequence of frames (ddi_es_tf_write / ddi_es_rd_frame):
 * header (u32 stored length | FR_RAW, u32 raw length, u64 XXH3-64 of the
 * payload seeded with both lengths) + LZ4 block or raw bytes.  Extents (blk)
 * are in file bytes and always hold whole frames; readers decode whole frames.
 *
 * The sources, one concern each (a file's top comment says more):
 *   extsort.c            the engine object: memory accounting, block reuse,
 *                        the public API (create, push, finish, free, stats)
 *   extsort_tmp.c        temporary files: open, write (frames), read, reset
 *   extsort_threads.c    the compressing thread (spill and result frames)
 *                        and the final merge's decode-ahead thread
 *   extsort_stream.c     record streams: the buffered writer and the reader
 *                        over a list of extents
 *   extsort_table.c      the in-memory table and its sort by key
 *   extsort_node.c       a node: its table, the frozen table's prefilter,
 *                        spilling to partitions (regions), adding and
 *                        emitting records
 *   extsort_giant.c      giant records, kept out of tables and streams
 *   extsort_merge.c      the loser-tree k-way merge of a node's results, and
 *                        sorted order's sorted runs and combining merge
 *   extsort_partition.c  finishing a node: its partitions' child nodes, one
 *                        at a time or two in parallel, then the merge
 *
 * Naming: functions one source defines and others call are ddi_es_* (the
 * library's internal ddi_ prefix, es_ for this engine) and hidden from the
 * shared library's exports; small helpers needed on hot paths in several
 * sources are static inline here and keep their short names.
 */
#ifndef DEDUP_EXTSORT_INTERNAL_H
#define DEDUP_EXTSORT_INTERNAL_H

#include "dedup/extsort.h"

#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>

#include <lz4.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

/* ---- Limits, the frame header, the engine ---------------------------------- */

/* The longest key or record a stream item may name. */
#define MAX_FIELD (UINT32_MAX - 1u)

/* Frame header on disk: u32 stored length (FR_RAW: the payload is the raw
 * bytes, LZ4 did not shrink them), u32 raw length, u64 XXH3-64 of the payload
 * seeded with both lengths. */
#define FH 16u
#define FR_RAW UINT32_C(0x80000000)

/* Records per batch of the top node's two-thread spill (extsort_scatter.c). */
#define ES_SC_CHUNK 16384

/* Block reuse: how many freed blocks of at least ES_CACHE_MIN bytes are kept. */
#define ES_CACHE_N 64
#define ES_CACHE_MIN ((size_t)64 << 10)

typedef struct tfile {
    int fd;
    uint64_t size;
} tfile;

typedef struct blk {
    uint64_t off;
    uint64_t len;
} blk;

struct dedup_extsort {
    dedup_allocator alloc;
    dedup_extsort_params p;
    char *tmpdir;
    size_t budget;
    dedup_status err;
    int io_errno;
    uint64_t io_needed;
    int emit_rc;
    bool finished;
    uint64_t seq;
    size_t mem_cur;
    /* Large blocks freed and kept for reuse (see "Block reuse" in extsort.c). */
    struct cached_blk {
        void *p;
        size_t n;
    } cache[ES_CACHE_N];
    size_t ncache, cached;
    struct helper *hp; /* the compressing thread (params.threads >= 2), once spilled */
    struct decoder *dec; /* the final merge's decode-ahead thread, while it runs */
    struct scatter *sc; /* the top node's second scattering thread, once it spilled */
    size_t hb_frames;  /* frames per batch for it; 0: no thread (none asked for, too
                          small a budget, or it could not be started) */
    pthread_mutex_t wlock; /* serialises params.write_fn between threads */
    pthread_mutex_t *wl;   /* &wlock once initialised, or the parent's in a shadow engine */
    size_t shadow_held;    /* what the shadow engines still hold (their peaks while they run) */
    dedup_extsort_stats st;
    tfile sp[DEDUP_EXTSORT_MAX_DEPTH + 1];
    tfile rs[DEDUP_EXTSORT_MAX_DEPTH + 1];
    struct node *top;
    blk *runs; /* sorted order: the sorted runs written so far, oldest first */
    size_t nruns, capruns;
    /* Compression scratch, shared by every stream (one thread): the LZ4
     * state and one frame's header + worst-case compressed payload, used to
     * compress on write and to read a frame before decompressing it. */
    size_t frame;          /* raw bytes per frame at most */
    uint8_t *zbuf;         /* FH + LZ4_COMPRESSBOUND(frame) bytes */
    size_t zcap;
    void *zstate;          /* LZ4_sizeofState() bytes */
    size_t zstate_n;
    /* Giant records (see extsort_giant.c). */
    size_t giant_min;      /* longer records that are their own key are giants */
    tfile gf;
    struct giant *g;       /* every distinct giant, and DUPLICATES' repeats, by seq */
    size_t ng, capg;
    size_t *gord, ngord, gordcap; /* sorted order: distinct giants by key */
    size_t gnext;          /* first giant (of g or gord) not yet written out */
    bool gpre_ok;          /* gbuf holds the prefix of that giant */
    uint8_t *gbuf;         /* giant_min bytes: staging of pieces, then prefixes */
    uint8_t *xsmem;        /* the streaming digest state, 64-byte aligned inside */
    bool in_piece, piece_giant; /* between push_begin and push_end; spilled to GF */
    size_t plen;
    uint64_t poff, ptotal;
};

/* Bytes the compression scratch takes once the engine has spilled. */
static inline size_t scratch_bytes(const dedup_extsort *es) { return es->zcap + es->zstate_n; }

/* Where ddi_es_write_iov writes: at the descriptor's offset (appending). */
#define AT_END UINT64_MAX

/* ---- Small helpers ----------------------------------------------------------- */

/* Unaligned loads and stores in host byte order (temporary files never
 * leave the process that wrote them). */
static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* A frame's checksum: XXH3-64 of its payload seeded with both lengths. */
static inline uint64_t frame_check(const void *payload, size_t n, uint32_t stored, uint32_t raw)
{
    return XXH3_64bits_withSeed(payload, n, ((uint64_t)raw << 32) | stored);
}

/* v, clamped to [lo, hi]. */
static inline size_t clampz(size_t v, size_t lo, size_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Bytes of a partition's buffer (also the compressing thread's spares). */
static inline size_t pbuf_size(const dedup_extsort *es)
{
    return clampz(es->budget / 1024, 4096, 64 << 10);
}

/* Whether the compressing thread is in use: asked for (params.threads >= 2),
 * affordable within the budget, and not refused at start. */
static inline bool threaded(const dedup_extsort *es) { return es->hb_frames >= 2; }

/* ---- Varints and items ---------------------------------------------------- */

static inline size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Returns bytes consumed, 0 if the varint does not end within [p, end). */
static inline size_t get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    unsigned shift = 0;
    size_t n = 0;
    while (p + n < end && shift < 64) {
        uint8_t b = p[n++];
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return n;
        }
        shift += 7;
    }
    return 0;
}

/* A stream's flags: which optional fields its items carry (F_SEQ, F_COUNT),
 * and whether a key that differs from its record is kept (F_KEY). */
enum { F_SEQ = 1, F_COUNT = 2, F_KEY = 4 };

typedef struct item {
    uint64_t seq, count;
    const uint8_t *key, *rec;
    size_t keylen, reclen;
} item;

/* An item header's longest encoding: four varints of at most 10 bytes. */
#define ITEM_HEADER_MAX 40

/* Encodes an item's header into 'h' (at most ITEM_HEADER_MAX bytes); returns
 * its length.  '*keep_key' tells whether the key bytes follow. */
static inline size_t item_header(uint8_t *h, int flags, uint64_t seq_delta, const item *it,
                                 bool *keep_key)
{
    size_t n = 0;
    bool same = it->rec == it->key && it->reclen == it->keylen;
    if (flags & F_SEQ)
        n += put_varint(h + n, seq_delta);
    if (flags & F_COUNT)
        n += put_varint(h + n, it->count);
    *keep_key = same || (flags & F_KEY);
    n += put_varint(h + n, *keep_key ? it->keylen : 0);
    n += put_varint(h + n, same ? 0 : (uint64_t)it->reclen + 1);
    return n;
}

/* ---- Record streams (extsort_stream.c) -------------------------------------- */

typedef struct writer {
    tfile *f;
    uint8_t *buf;
    uint8_t *buf2; /* with the compressing thread: the buffer it may be writing */
    size_t buf2_seq; /* buf2's frames are all in batches numbered below this */
    size_t cap, len;
    uint64_t prev_seq;
    int flags;
} writer;

/* A reader's decode-ahead slot and its states (see extsort_threads.c). */
enum { RA_EMPTY, RA_BUSY, RA_READY, RA_END, RA_ERR };

typedef struct ahead {
    atomic_int state;
    uint8_t *buf; /* es->frame bytes */
    size_t len;   /* READY: the frame's raw length */
    dedup_status err; /* ERR: what failed, and its errno */
    int eno;
} ahead;

typedef struct reader {
    tfile *f;
    const blk *ext;
    /* The cursor: the next frame is at 'off' with 'left' bytes of extent
     * next - 1 after it.  With decode-ahead (ra) it belongs to whichever
     * thread holds the slot (RA_BUSY), and the others do not read it. */
    size_t next, n;
    uint64_t off, left;
    uint8_t *buf;
    size_t cap, lo, hi;
    uint8_t *big; /* an item larger than the buffer */
    size_t bigcap;
    uint64_t prev_seq;
    int flags;
    bool valid;
    struct ahead *ra; /* the final merge's decode-ahead slot, or NULL */
    item it;
} reader;

/* An item's header as it is encoded (see the stream encoding at the top). */
typedef struct ihead {
    uint64_t seq_delta, count, keylen, recenc;
    size_t len; /* header bytes */
} ihead;

/* Parses the header at p for a stream with 'flags'; false when it does not
 * end before 'end' or names a field longer than MAX_FIELD. */
static inline bool item_head(const uint8_t *p, const uint8_t *end, int flags, ihead *h)
{
    const uint8_t *p0 = p;
    size_t k;
    h->seq_delta = 0;
    h->count = 1;
    if ((flags & F_SEQ) && !(k = get_varint(p, end, &h->seq_delta)))
        return false;
    p += (flags & F_SEQ) ? k : 0;
    if ((flags & F_COUNT) && !(k = get_varint(p, end, &h->count)))
        return false;
    p += (flags & F_COUNT) ? k : 0;
    if (!(k = get_varint(p, end, &h->keylen)))
        return false;
    p += k;
    if (!(k = get_varint(p, end, &h->recenc)))
        return false;
    p += k;
    h->len = (size_t)(p - p0);
    return h->keylen <= MAX_FIELD && h->recenc <= (uint64_t)MAX_FIELD + 1;
}

/* Whether frames of the reader's extents are still to be decoded. */
static inline bool rd_frames_left(const reader *r)
{
    if (r->ra)
        return atomic_load_explicit(&r->ra->state, memory_order_acquire) != RA_END;
    return r->left > 0 || r->next < r->n;
}

/* True when ddi_es_rd_next will return the next item without refilling the buffer,
 * which moves its bytes: the items taken before it stay where they are. */
static inline bool rd_ready(const reader *r)
{
    if (r->hi - r->lo < 48 && rd_frames_left(r))
        return false;
    ihead h; /* a bad header: ddi_es_rd_next reports it */
    if (!item_head(r->buf + r->lo, r->buf + r->hi, r->flags, &h))
        return false;
    return h.len + h.keylen + (h.recenc ? h.recenc - 1 : 0) <= r->hi - r->lo;
}

/* ---- The in-memory table (extsort_table.c) ---------------------------------
 * Open addressing with linear probing; a slot is the digest's low 64 bits and
 * a pointer to the entry in an arena of chunks laid out in insertion order:
 *   u64 seq, [u64 count], u32 keylen, u32 recenc, key, [record] */

typedef struct slot {
    uint64_t tag;
    uint8_t *e;
} slot;

typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
} chunk;

typedef struct table {
    slot *slots;
    size_t mask, n;
    chunk *head, *tail;
    size_t arena, limit, chunk_size, hdr;
    bool counting;
} table;

#define CHUNK_DATA(c) ((uint8_t *)((c) + 1))

static inline uint32_t e_keylen(const table *t, const uint8_t *e) { return rd32(e + t->hdr - 8); }
static inline uint32_t e_recenc(const table *t, const uint8_t *e) { return rd32(e + t->hdr - 4); }
static inline const uint8_t *e_key(const table *t, const uint8_t *e) { return e + t->hdr; }

/* Finds the key's entry, or the empty slot where it belongs. */
static inline slot *table_find(const table *t, dedup_digest d, const uint8_t *key, size_t keylen)
{
    size_t i = (size_t)d.lo & t->mask;
    for (;;) {
        slot *s = &t->slots[i];
        if (!s->e)
            return s;
        if (s->tag == d.lo && e_keylen(t, s->e) == keylen &&
            memcmp(e_key(t, s->e), key, keylen) == 0)
            return s;
        i = (i + 1) & t->mask;
    }
}

/* Walks every entry 'e' of table 't' in insertion order. */
#define TABLE_FOREACH(t, e)                                                          \
    for (chunk *c_ = (t)->head; c_; c_ = c_->next)                                   \
        for (uint8_t *e = CHUNK_DATA(c_); e < CHUNK_DATA(c_) + c_->used;             \
             e += (t)->hdr + e_keylen((t), e) +                                      \
                  (e_recenc((t), e) ? e_recenc((t), e) - 1 : 0))

/* Compares two keys in memcmp order, a prefix first. */
static inline int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

/* An entry of the sort array (reuses the slot array; see extsort_table.c). */
typedef struct sel {
    uint64_t w; /* big-endian key bytes [8 * depth, 8 * depth + 8), zero padded */
    uint8_t *e;
} sel;

/* ---- Nodes and partitions (extsort_node.c) ---------------------------------- */

typedef struct part {
    uint8_t *buf;
    size_t len;
    uint64_t prev_seq, bytes;
    blk *blocks;
    size_t nblk, capblk;
    uint64_t roff, rleft; /* its current region of the file: next frame's place, room left */
} part;

typedef struct node {
    int depth;
    table t;
    bool spilled, table_live;
    uint32_t P;
    size_t pbuf;
    part *parts;
    writer direct; /* DUPLICATES after the spill point */
    bool direct_live;
    uint64_t direct_start;
    writer *out; /* NULL at the top: emit */
    int spill_flags, res_flags;
    unsigned shift;
    uint64_t *frz; /* once spilled: the frozen table's prefilter (see frz_build) */
    size_t frz_words, frz_cap;
} node;

/* Whether tables count repeats (COUNT and UNIQUE output). */
static inline bool counting(const dedup_extsort *es)
{
    return es->p.output == DEDUP_EXTSORT_COUNT || es->p.output == DEDUP_EXTSORT_UNIQUE;
}

/* Read/write buffer size for a node's input and output streams. */
static inline size_t io_buf(const dedup_extsort *es)
{
    return clampz(es->budget / 16, 4096, 1 << 20);
}

/* The frozen table's prefilter (see extsort_node.c): the bits a digest
 * sets, and the word they are in. */
static inline uint64_t frz_mask(uint64_t lo)
{
    return (UINT64_C(1) << (lo & 63)) | (UINT64_C(1) << ((lo >> 6) & 63)) |
           (UINT64_C(1) << ((lo >> 12) & 63)) | (UINT64_C(1) << ((lo >> 18) & 63));
}

static inline size_t frz_word(const node *n, uint64_t lo)
{
    return (size_t)(((lo >> 32) * (uint64_t)n->frz_words) >> 32);
}

/* Fetches the prefilter word frz_maybe() will read for digest d. */
static inline void frz_prefetch(const node *n, dedup_digest d)
{
    if (n->frz)
        DD_PREFETCH(&n->frz[frz_word(n, d.lo)]);
}

/* False only for a digest whose key is not in the frozen table. */
static inline bool frz_maybe(const node *n, dedup_digest d)
{
    if (!n->frz)
        return true;
    uint64_t m = frz_mask(d.lo);
    return (n->frz[frz_word(n, d.lo)] & m) == m;
}

/* The partition of node n that a digest spills to: digest bits this depth
 * has not used. */
static inline uint32_t node_part(const node *n, dedup_digest d)
{
    uint64_t x = n->shift ? (d.hi << n->shift) | (d.hi >> (64 - n->shift)) : d.hi;
    return (uint32_t)dedup_reduce(x, n->P);
}

/* ---- Giant records (extsort_giant.c) ---------------------------------------- */

enum { G_DUP = 1, G_DONE = 2 };

typedef struct giant {
    uint64_t seq, count, off, dlen, rawlen;
    dedup_digest d;
    unsigned flags;
} giant;

/* ---- Functions shared between the sources ------------------------------------
 * Each is documented where it is defined. */

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* extsort.c */
void ddi_es_cache_clear(dedup_extsort *es);
void ddi_es_note_peak(dedup_extsort *es);
void *ddi_es_alloc(dedup_extsort *es, size_t n);
void ddi_es_free(dedup_extsort *es, void *p, size_t n);
void *ddi_es_grow(dedup_extsort *es, void *arr, size_t n, size_t *cap, size_t elem, size_t first);
dedup_status ddi_es_fail(dedup_extsort *es, dedup_status s);

/* extsort_tmp.c */
dedup_status ddi_es_tf_open(dedup_extsort *es, tfile *f);
int ddi_es_write_iov(const dedup_extsort *es, int fd, struct iovec *iov, size_t n, uint64_t off,
                    uint64_t *written);
size_t ddi_es_frame_pack(void *zstate, const uint8_t *q, size_t raw, uint8_t *out, size_t zcap);
dedup_status ddi_es_frames_write(dedup_extsort *es, tfile *f, struct part *p, const void *buf,
                                size_t len);
dedup_status ddi_es_tf_write(dedup_extsort *es, tfile *f, const void *buf, size_t len);
dedup_status ddi_es_pread_full(int fd, void *buf, size_t len, uint64_t off, uint64_t *nread,
                              int *eno);
dedup_status ddi_es_read_failed(dedup_extsort *es, dedup_status s, int eno);
void ddi_es_tf_reset(dedup_extsort *es, tfile *f);

/* extsort_threads.c */
size_t ddi_es_hb_frames_for(const dedup_extsort *es);
size_t ddi_es_helper_bytes(const dedup_extsort *es);
void ddi_es_hp_start(dedup_extsort *es);
dedup_status ddi_es_hp_reap_upto(dedup_extsort *es, size_t upto);
dedup_status ddi_es_hp_submit(dedup_extsort *es);
dedup_status ddi_es_hp_sync(dedup_extsort *es);
size_t ddi_es_hp_submitted(const dedup_extsort *es);
dedup_status ddi_es_hp_add(dedup_extsort *es, tfile *f, const uint8_t *raw, size_t len,
                          struct part *p, uint8_t *recycle);
uint8_t *ddi_es_hp_spare(dedup_extsort *es, dedup_status *s);
void ddi_es_hp_stop(dedup_extsort *es);
dedup_status ddi_es_ra_take(dedup_extsort *es, reader *r, uint8_t *dst, size_t *got);
bool ddi_es_dec_reserve(const dedup_extsort *es, bool final, size_t k, size_t *avail);
bool ddi_es_dec_start(dedup_extsort *es, reader *src, size_t k);
void ddi_es_dec_stop(dedup_extsort *es);

/* extsort_stream.c */
dedup_status ddi_es_wr_init(dedup_extsort *es, writer *w, tfile *f, size_t cap, int flags);
dedup_status ddi_es_wr_close(dedup_extsort *es, writer *w);
void ddi_es_wr_free(dedup_extsort *es, writer *w);
dedup_status ddi_es_wr_item(dedup_extsort *es, writer *w, const item *it);
dedup_status ddi_es_rd_init(dedup_extsort *es, reader *r, tfile *f, const blk *ext, size_t n,
                           size_t cap, int flags);
void ddi_es_rd_free(dedup_extsort *es, reader *r);
dedup_status ddi_es_rd_frame(const dedup_extsort *es, reader *r, uint8_t *zbuf, uint8_t *dst,
                            size_t *got, uint64_t *nread, int *eno);
dedup_status ddi_es_rd_fill(dedup_extsort *es, reader *r, size_t need);
dedup_status ddi_es_rd_next(dedup_extsort *es, reader *r);

/* extsort_table.c */
dedup_status ddi_es_table_init(dedup_extsort *es, table *t, size_t limit, bool counting);
void ddi_es_table_free(dedup_extsort *es, table *t);
void ddi_es_e_item(const table *t, const uint8_t *e, item *it);
dedup_status ddi_es_table_insert(dedup_extsort *es, table *t, slot *s, dedup_digest d, uint64_t seq,
                                const item *it);
sel *ddi_es_table_sorted(table *t);

/* extsort_node.c */
dedup_status ddi_es_node_init(dedup_extsort *es, node *n, int depth, writer *out);
void ddi_es_frz_free(dedup_extsort *es, node *n);
dedup_status ddi_es_part_extent(dedup_extsort *es, part *p, uint64_t off, uint64_t dlen,
                               size_t rawlen);
uint64_t ddi_es_part_place(const dedup_extsort *es, tfile *f, part *p, uint64_t dlen);
dedup_status ddi_es_part_flush(dedup_extsort *es, node *n, part *p, const void *data, size_t len);
void ddi_es_node_free(dedup_extsort *es, node *n);
dedup_status ddi_es_node_out(dedup_extsort *es, node *n, const item *it);
dedup_status ddi_es_node_add(dedup_extsort *es, node *n, const item *it, dedup_digest d);
dedup_status ddi_es_part_item(dedup_extsort *es, node *n, part *p, const item *it, uint64_t delta);
dedup_status ddi_es_table_out_ordered(dedup_extsort *es, node *n);
dedup_status ddi_es_table_out_sorted(dedup_extsort *es, node *n, writer *w, bool filter);

/* extsort_giant.c */
size_t ddi_es_giant_reserve(const dedup_extsort *es);
dedup_status ddi_es_giants_before(dedup_extsort *es, const item *it);
dedup_status ddi_es_giants_sort(dedup_extsort *es);
dedup_status ddi_es_giant_add(dedup_extsort *es, uint64_t off, uint64_t rawlen, dedup_digest d);
dedup_status ddi_es_giant_buffers(dedup_extsort *es);
XXH3_state_t *ddi_es_xstate(dedup_extsort *es);
dedup_status ddi_es_giant_push_whole(dedup_extsort *es, const void *rec, size_t len, dedup_digest d);

/* extsort_merge.c */
dedup_status ddi_es_node_merge(dedup_extsort *es, node *n, const blk *ext, tfile *const *files,
                              size_t k);
dedup_status ddi_es_runs_add(dedup_extsort *es, const item *it, dedup_digest d);
dedup_status ddi_es_runs_finish(dedup_extsort *es);

/* extsort_scatter.c */
size_t ddi_es_sc_bytes(void);
void ddi_es_sc_start(dedup_extsort *es);
dedup_status ddi_es_sc_push(dedup_extsort *es, size_t n, const void *const *recs,
                            const size_t *lens, const void *const *keys, const size_t *keylens,
                            const dedup_digest *digests, bool *done);
void ddi_es_sc_stop(dedup_extsort *es);

/* extsort_partition.c */
dedup_status ddi_es_node_finish(dedup_extsort *es, node *n);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
