/*
 * tls.h - TLS for rediss:// and rediss-cluster:// under hiredis 0.14's
 * reader and command formatting (private to libdedup_redis).
 *
 * Debian 12's hiredis (0.14) has no TLS and no hook for a transport, so a
 * TLS node keeps its redisContext for what hiredis does well - the TCP
 * connect with its timeouts, the output buffer commands are formatted into
 * (redisAppendCommandArgv, redisAppendFormattedCommand) and the RESP reader
 * - while these functions move the bytes through OpenSSL on the context's
 * socket instead of hiredis' read()/write().  A plain node never comes
 * here.  The socket stays blocking with the context's timeouts
 * (SO_RCVTIMEO / SO_SNDTIMEO), so a reply not received in time is lost as
 * it is on a plain connection.
 *
 * Errors set ctx->err and ctx->errstr as hiredis does: REDIS_ERR_IO (a
 * socket error or a timeout), REDIS_ERR_EOF (the server closed), and
 * REDIS_ERR_OTHER for a TLS protocol failure (a certificate refused on
 * either side, an alert): retrying cannot help, rc_tls_fatal() says so.
 */
#ifndef DEDUP_REDIS_TLS_H
#define DEDUP_REDIS_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "dedup/common.h"
#include "dedup/redis.h"

struct ssl_ctx_st;
struct ssl_st;

/* A client context from o->tls_cacert (NULL: the system's CAs),
 * o->tls_cert / o->tls_key (both or neither) and o->tls_insecure.  Errors:
 * INVALID_ARG (a file unreadable or not PEM, a key not matching its
 * certificate, one of cert/key without the other: 'err' names the file),
 * NOMEM. */
dedup_status rc_tls_ctx_new(const dedup_redis_params *o, struct ssl_ctx_st **out, char *why,
                            size_t whycap);
void rc_tls_ctx_free(struct ssl_ctx_st *sc);

/* Runs the handshake on ctx's connected socket: SNI for a host name, the
 * certificate checked against the CAs and against 'host' (a name or an IP
 * address) unless 'insecure'.  On failure ctx->errstr says why (the
 * verification result when the certificate was refused) and *out is NULL. */
int rc_tls_start(struct ssl_ctx_st *sc, redisContext *ctx, const char *host, bool insecure,
                 struct ssl_st **out);

/* Writes ctx's output buffer through 'ssl' (all of it, or an error). */
int rc_tls_flush(struct ssl_st *ssl, redisContext *ctx);

/* The next reply: flushes the output buffer, then reads until the reader
 * has a whole reply.  REDIS_OK with *reply, or REDIS_ERR (ctx->err set). */
int rc_tls_get_reply(struct ssl_st *ssl, redisContext *ctx, void **reply);

/* Whether ctx's error was a TLS protocol failure (see above). */
bool rc_tls_fatal(const redisContext *ctx);

void rc_tls_free(struct ssl_st *ssl);

#endif
