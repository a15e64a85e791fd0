/*
 * client.h - the pipelining Redis / Redis Cluster client under the schemes
 * (private to libdedup_redis).
 *
 * A caller fills an rc_batch with commands (each formatted once in RESP into
 * the batch's arena, with the key that routes it) and runs rc_exec(): every
 * command goes to its node, all nodes are written before any is read, up to
 * 'pipeline' commands per node per round trip.  rc_exec() follows MOVED and
 * ASK, waits out TRYAGAIN / CLUSTERDOWN / LOADING, reconnects and reloads the
 * slot map after a lost connection, and resends commands whose replies were
 * lost, marking them 'lost' so the scheme can answer UNCERTAIN.  Each
 * command ends with its reply (owned by the batch) or rc_exec() fails.
 */
#ifndef DEDUP_REDIS_CLIENT_H
#define DEDUP_REDIS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "dedup/common.h"
#include "dedup/redis.h"

typedef struct rc_client rc_client;

typedef struct rc_cmd {
    size_t off, len;    /* RESP bytes in the batch arena */
    int slot;           /* -1: any node (single server: always node 0) */
    int node;           /* where it went last */
    int ask_node;       /* asking: the node an ASK named */
    bool asking;        /* send ASKING first, to ask_node */
    bool lost;          /* was written once and its reply lost */
    bool done;
    uint32_t tag;       /* the caller's */
    redisReply *reply;
} rc_cmd;

typedef struct rc_batch {
    char *arena;
    size_t used, cap;
    rc_cmd *cmds;
    size_t n, ncap;
    uint32_t wait_replicas; /* WAIT after the commands on every node written */
} rc_batch;

void rc_batch_init(rc_batch *b);
void rc_batch_reset(rc_batch *b); /* frees replies; keeps memory */
void rc_batch_free(rc_batch *b);

/* Appends a command of 'argc' arguments; the routing key is argv[keyarg]
 * (keyarg < 0: none).  Returns false on NOMEM. */
bool rc_batch_add(rc_batch *b, int argc, const char *const *argv, const size_t *lens,
                  int keyarg, uint32_t tag);

/* The CRC16 slot of a key (its {hash tag} if it has a non-empty one). */
int rc_key_slot(const char *key, size_t len);

dedup_status rc_open(const dedup_redis_url *url, const dedup_redis_params *o, rc_client **out,
                     char *why, size_t whycap);
void rc_free(rc_client *c);

/* Runs every command of 'b'.  DEDUP_OK: each has its reply (which may be an
 * error reply the caller interprets).  DEDUP_ERR_IO: a node stayed
 * unreachable past the retries, or WAIT was short; rc_error() says. */
dedup_status rc_exec(rc_client *c, rc_batch *b);

/* Runs one command on every master; replies[i] for master i (count in
 * *n, at most cap), owned by the caller (freeReplyObject). */
dedup_status rc_each_master(rc_client *c, int argc, const char *const *argv, const size_t *lens,
                            redisReply **replies, size_t cap, size_t *n);

size_t rc_masters(const rc_client *c);
const char *rc_error(const rc_client *c);
/* "host:port" of node 'node' (as in rc_cmd.node; out of range: the first
 * seed's) into buf. */
void rc_node_name(const rc_client *c, int node, char *buf, size_t cap);
void rc_set_error(rc_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct rc_counters {
    uint64_t round_trips, commands, retries, moved, ask;
} rc_counters;
const rc_counters *rc_get_counters(const rc_client *c);

#endif
