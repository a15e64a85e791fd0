/*
 * rd.h - the remote set's object, shared by the scheme files (private).
 */
#ifndef DEDUP_REDIS_RD_H
#define DEDUP_REDIS_RD_H

#include "client.h"
#include "dedup/redis.h"

#define RD_MAX_NAME 200
#define RD_MAX_GEN 64

struct dedup_redis {
    dedup_redis_params o;
    dedup_redis_url url;
    char name[RD_MAX_NAME + 1];
    size_t namelen;
    rc_client *c;
    rc_batch b;
    dedup_redis_shape shape;
    uint64_t keys, uncertain, recorded;
    size_t decided; /* after a failed decide: the keys decided from the start */
    char err[512];
    /* bitmap */
    uint64_t blocks, blocks_per_seg;
    uint64_t gen_ms;
    char sha[41];
    bool sentinels;     /* bitmap: each segment carries RD_SENTINEL (format 2) */
    bool legacy_values; /* keys: "1" is a recorded key too (names of the public seed) */
    /* scratch, grown as batches need */
    uint32_t *seg_of;   /* per key: its segment (bitmap) or shard (module) */
    uint32_t *pos_in;   /* per key: its index inside its segment's command */
    uint32_t *seg_count, *seg_first, *seg_next;
    size_t scratch_n, seg_cap;
    const char **argv;
    size_t *lens;
    char *argbuf;
    size_t argv_cap, argbuf_cap;
};

void rd_error(dedup_redis *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The values the keys scheme writes: a reservation, a recorded key.  Small
 * integers, which Redis stores without an allocation of their own.  Any
 * other value (or type) at a key's name is not ours. */
#define RD_KEY_RESERVED "4217"
#define RD_KEY_RECORDED "4219"
/* The byte a bitmap segment of format 2 holds just past its blocks. */
#define RD_SENTINEL 165

/* A seed for a new name, from the OS; IO (message set) if none. */
dedup_status rd_random_seed(dedup_redis *r, uint64_t *out);
/* Metadata text with its checksum: writes "<body> sum=<16 hex>" to out. */
int rd_meta_seal(char *out, size_t cap, const char *body);
/* Checks the " sum=<16 hex>" that ends 'text': DEDUP_OK with *body_len, or
 * CHECKSUM (message naming 'meta'). */
dedup_status rd_meta_open_seal(dedup_redis *r, const char *meta, const char *text,
                               size_t *body_len);

/* keys.c: the keys scheme.  open reads (or creates) NAME:meta; run decides,
 * queries or commits a batch; reserving: whether a NEW key is reserved
 * until dedup_redis_commit() (reserve or a TTL). */
typedef enum { KEYS_DECIDE, KEYS_QUERY, KEYS_COMMIT } keys_op;
dedup_status rd_keys_open(dedup_redis *r);
dedup_status rd_keys_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, keys_op op);
bool rd_keys_reserving(const dedup_redis *r);

/* first[i] = the index of key i's first occurrence in the batch (i itself
 * for a first one): equal digests, and equal bytes with whole keys.
 * Allocated (free()), NULL when out of memory. */
size_t *rd_first_occurrences(const dedup_redis *r, const dedup_batch *b);
/* Appends " (on host:port)" of the node command 'cm' went to to the error. */
void rd_error_on(dedup_redis *r, const rc_cmd *cm);
/* Makes room for n keys' scratch and 'args' arguments of 'bytes' bytes. */
dedup_status rd_scratch(dedup_redis *r, size_t n, size_t args, size_t bytes);
/* Interprets an error reply: WRONGTYPE -> DEDUP_ERR_WRONG_TYPE, else IO;
 * the message names the command's node-independent context 'what'. */
/* Sends r->b's pipeline (rc_exec) and, when it fails, keeps the client's
 * message (host:port and why) as r's error. */
dedup_status rd_exec(dedup_redis *r);
dedup_status rd_reply_error(dedup_redis *r, const redisReply *rep, const char *what);

/* The end of a scheme's decide, its verdicts out[0..upto) filled (upto =
 * b->n unless the call 'failed' part way).  With 'lost' (a reply was lost),
 * the later occurrences in out[0..upto) of a key answered UNCERTAIN become
 * 'present' (DUPLICATE for the keys scheme, MAYBE_DUPLICATE for the
 * filters): each is a repeat of the first occurrence, sent in the same
 * pipeline, whose own verdict (NEW, or UNCERTAIN and kept aside by the
 * caller) covers the key.  Without this a key could be written out (first
 * occurrence NEW) and also reported uncertain, or reported uncertain twice.
 * Then a failed call keeps upto as r->decided.  Returns 'failed', or NOMEM. */
dedup_status rd_finish(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, size_t upto,
                       bool lost, dedup_verdict present, dedup_status failed);
/* After rd_exec() failed on a decide of n keys: how many keys from the start
 * of the batch have their verdict, i.e. the smallest first key (first[tag],
 * or the tag itself when first is NULL) of a command left without a reply.
 * 0 when the batch waited for replicas (a reply is then not a promise). */
size_t rd_decided_prefix(const dedup_redis *r, const uint32_t *first, size_t n);

size_t rd_segment_key(const dedup_redis *r, uint32_t s, uint64_t gen, char *buf);
uint64_t rd_current_gen(const dedup_redis *r);
dedup_status rd_bitmap_open(dedup_redis *r);
dedup_status rd_bitmap_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, bool record);
dedup_status rd_bitmap_read(dedup_redis *r, unsigned char *buf, uint64_t len);
dedup_status rd_bitmap_write(dedup_redis *r, const unsigned char *buf, uint64_t len);

/* The module scheme's stored shape (module.c). */
typedef struct rd_mod_shape {
    unsigned version;
    char filter[16];
    unsigned shards;
    unsigned long long items, seed, ttl_ms;
    double fpr;
} rd_mod_shape;
/* Parses and checks the text of "<name>:meta" field "shape": DEDUP_OK (every
 * field in range), WRONG_TYPE (not the module scheme's), VERSION, CORRUPT. */
dedup_status rd_module_shape_parse(const char *text, rd_mod_shape *out);
size_t rd_shard_key(const dedup_redis *r, uint32_t s, char *buf);
dedup_status rd_module_open(dedup_redis *r);
typedef enum { RD_QUERY, RD_DECIDE, RD_ADD } rd_op;
dedup_status rd_module_run(dedup_redis *r, const dedup_batch *b, dedup_verdict *out, rd_op op);
dedup_status rd_module_delete(dedup_redis *r, const dedup_batch *b, bool *removed);

#endif
