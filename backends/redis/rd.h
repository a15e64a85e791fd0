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
    dedup_redis_options o;
    dedup_redis_url url;
    char name[RD_MAX_NAME + 1];
    size_t namelen;
    rc_client *c;
    rc_batch b;
    dedup_redis_shape shape;
    uint64_t keys, uncertain, recorded;
    char err[512];
    /* bitmap */
    uint64_t blocks, blocks_per_seg;
    uint64_t gen_ms;
    char sha[41];
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
/* Makes room for n keys' scratch and 'args' arguments of 'bytes' bytes. */
dedup_status rd_scratch(dedup_redis *r, size_t n, size_t args, size_t bytes);
/* Interprets an error reply: WRONGTYPE -> DEDUP_ERR_WRONG_TYPE, else IO;
 * the message names the command's node-independent context 'what'. */
/* Sends r->b's pipeline (rc_exec) and, when it fails, keeps the client's
 * message (host:port and why) as r's error. */
dedup_status rd_exec(dedup_redis *r);
dedup_status rd_reply_error(dedup_redis *r, const redisReply *rep, const char *what);

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
