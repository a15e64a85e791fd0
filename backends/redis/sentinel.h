/*
 * sentinel.h - asking Redis Sentinel for a master's address (private to
 * libdedup_redis; the client connects the address it gives as it connects
 * any server).
 */
#ifndef DEDUP_REDIS_SENTINEL_H
#define DEDUP_REDIS_SENTINEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "dedup/common.h"
#include "dedup/redis.h"

/* Asks the sentinels of 'url' (url->seeds) in turn, each connection bounded
 * by 'connect_ms' and 'io_ms', for the address of master url->master
 * (SENTINEL GET-MASTER-ADDR-BY-NAME).  A sentinel answering NOAUTH is asked
 * again after AUTH with the URL's credentials.  DEDUP_OK: host (a buffer of
 * DEDUP_REDIS_MAX_HOST + 1 bytes) and *port from the first sentinel that
 * names one.  DEDUP_ERR_NOT_FOUND: every sentinel that answered does not
 * know the master; DEDUP_ERR_IO: none answered (or none with an address).
 * On an error 'err' says which sentinel (host:port) and why. */
dedup_status rs_master_addr(const dedup_redis_url *url, uint32_t connect_ms, uint32_t io_ms,
                            char *host, int *port, char *why, size_t whycap);

/* True when 'r', a reply to ROLE, says "master". */
bool rs_role_is_master(const redisReply *r);

/* The role a ROLE reply names ("slave", "sentinel"...), or "?" . */
const char *rs_role_name(const redisReply *r);

#endif
