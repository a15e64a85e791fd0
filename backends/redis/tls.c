/*
 * tls.c - OpenSSL under hiredis' reader and output buffer (tls.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/sds.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define TLS_READ_CHUNK 16384

static void ssl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "no detail");
    ERR_clear_error();
}

static dedup_status ctx_fail(SSL_CTX *sc, char *why, size_t whycap, const char *what,
                             const char *file)
{
    char reason[256];
    ssl_reason(reason, sizeof reason);
    snprintf(why, whycap, "%s '%s': %s", what, file, reason);
    SSL_CTX_free(sc);
    return DEDUP_ERR_INVALID_ARG;
}

dedup_status rc_tls_ctx_new(const dedup_redis_params *o, SSL_CTX **out, char *why, size_t whycap)
{
    *out = NULL;
    if (!o->tls_cert != !o->tls_key) {
        snprintf(why, whycap, "a TLS client certificate needs its key and a key its certificate "
                           "(got only the %s)", o->tls_cert ? "certificate" : "key");
        return DEDUP_ERR_INVALID_ARG;
    }
    SSL_CTX *sc = SSL_CTX_new(TLS_client_method());
    if (!sc)
        return DEDUP_ERR_NOMEM;
    SSL_CTX_set_min_proto_version(sc, TLS1_2_VERSION);
    SSL_CTX_set_mode(sc, SSL_MODE_AUTO_RETRY);
    if (o->tls_cacert) {
        if (SSL_CTX_load_verify_locations(sc, o->tls_cacert, NULL) != 1)
            return ctx_fail(sc, why, whycap, "TLS CA file", o->tls_cacert);
    } else if (SSL_CTX_set_default_verify_paths(sc) != 1) {
        return ctx_fail(sc, why, whycap, "TLS CA directory", "(system default)");
    }
    if (o->tls_cert) {
        if (SSL_CTX_use_certificate_chain_file(sc, o->tls_cert) != 1)
            return ctx_fail(sc, why, whycap, "TLS certificate", o->tls_cert);
        if (SSL_CTX_use_PrivateKey_file(sc, o->tls_key, SSL_FILETYPE_PEM) != 1)
            return ctx_fail(sc, why, whycap, "TLS key", o->tls_key);
        if (SSL_CTX_check_private_key(sc) != 1)
            return ctx_fail(sc, why, whycap, "TLS key (does not match the certificate)",
                            o->tls_key);
    }
    SSL_CTX_set_verify(sc, o->tls_insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    *out = sc;
    return DEDUP_OK;
}

void rc_tls_ctx_free(SSL_CTX *sc) { SSL_CTX_free(sc); }

void rc_tls_free(SSL *ssl) { SSL_free(ssl); }

/* ctx's error, cut to hiredis' errstr (128 bytes) when longer. */
static void set_err(redisContext *ctx, int type, const char *fmt, const char *a, const char *b)
{
    char tmp[512];
    ctx->err = type;
    snprintf(tmp, sizeof tmp, fmt, a, b);
    size_t n = strlen(tmp);
    if (n >= sizeof ctx->errstr)
        n = sizeof ctx->errstr - 1;
    memcpy(ctx->errstr, tmp, n);
    ctx->errstr[n] = 0;
}

/* Maps a failed SSL_read / SSL_write / SSL_connect onto ctx's error. */
static void io_error(SSL *ssl, redisContext *ctx, int ret, const char *during)
{
    int e = SSL_get_error(ssl, ret);
    char why[160];
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 &&
                                       (ret == 0 || errno == 0))) {
        ERR_clear_error();
        set_err(ctx, REDIS_ERR_EOF, "TLS: server closed the connection (%s)%s", during, "");
        return;
    }
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        const char *s = errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : strerror(errno);
        set_err(ctx, REDIS_ERR_IO, "TLS %s: %s", during, s);
        return;
    }
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) { /* SO_RCVTIMEO ran out */
        ERR_clear_error();
        set_err(ctx, REDIS_ERR_IO, "TLS %s: %s", during, "timed out");
        return;
    }
    ssl_reason(why, sizeof why);
    set_err(ctx, REDIS_ERR_OTHER, "TLS %s failed: %s", during, why);
}

static bool is_ip(const char *host)
{
    unsigned char b[16];
    return inet_pton(AF_INET, host, b) == 1 || inet_pton(AF_INET6, host, b) == 1;
}

int rc_tls_start(SSL_CTX *sc, redisContext *ctx, const char *host, bool insecure, SSL **out)
{
    *out = NULL;
    SSL *ssl = SSL_new(sc);
    if (!ssl) {
        set_err(ctx, REDIS_ERR_OOM, "TLS: %s%s", "out of memory", "");
        return REDIS_ERR;
    }
    if (!is_ip(host))
        SSL_set_tlsext_host_name(ssl, host);
    /* OpenSSL 3 checks an IP literal against the IP addresses of the
     * certificate, a name against its DNS names. */
    if (!insecure && SSL_set1_host(ssl, host) != 1) {
        SSL_free(ssl);
        set_err(ctx, REDIS_ERR_OTHER, "TLS: cannot check the certificate against '%s'%s", host,
                "");
        return REDIS_ERR;
    }
    if (SSL_set_fd(ssl, ctx->fd) != 1) {
        SSL_free(ssl);
        set_err(ctx, REDIS_ERR_OTHER, "TLS: %s%s", "SSL_set_fd failed", "");
        return REDIS_ERR;
    }
    ERR_clear_error();
    int rc = SSL_connect(ssl);
    if (rc != 1) {
        long v = SSL_get_verify_result(ssl);
        if (v != X509_V_OK) {
            ERR_clear_error();
            set_err(ctx, REDIS_ERR_OTHER, "TLS handshake failed: the server's certificate was "
                                          "refused: %s%s", X509_verify_cert_error_string(v), "");
        } else {
            io_error(ssl, ctx, rc, "handshake");
        }
        SSL_free(ssl);
        return REDIS_ERR;
    }
    *out = ssl;
    return REDIS_OK;
}

int rc_tls_flush(SSL *ssl, redisContext *ctx)
{
    size_t len = sdslen(ctx->obuf), off = 0;
    while (off < len) {
        size_t chunk = len - off > INT_MAX ? INT_MAX : len - off;
        ERR_clear_error();
        int n = SSL_write(ssl, ctx->obuf + off, (int)chunk);
        if (n <= 0) {
            io_error(ssl, ctx, n, "write");
            /* A server that refused us (no client certificate: TLS 1.3
             * says so after the handshake) sent its alert before closing:
             * read it, it says why better than "connection reset". */
            if (ctx->err != REDIS_ERR_OTHER) {
                char one;
                int saved = ctx->err;
                char msg[sizeof ctx->errstr];
                memcpy(msg, ctx->errstr, sizeof msg);
                ERR_clear_error();
                int r = SSL_read(ssl, &one, 1);
                if (r <= 0 && SSL_get_error(ssl, r) == SSL_ERROR_SSL) {
                    io_error(ssl, ctx, r, "connection");
                } else {
                    ctx->err = saved;
                    memcpy(ctx->errstr, msg, sizeof msg);
                }
            }
            return REDIS_ERR;
        }
        off += (size_t)n;
    }
    sdsclear(ctx->obuf);
    return REDIS_OK;
}

int rc_tls_get_reply(SSL *ssl, redisContext *ctx, void **reply)
{
    *reply = NULL;
    if (redisReaderGetReply(ctx->reader, reply) != REDIS_OK)
        goto protocol;
    if (*reply)
        return REDIS_OK;
    if (sdslen(ctx->obuf) && rc_tls_flush(ssl, ctx) != REDIS_OK)
        return REDIS_ERR;
    char buf[TLS_READ_CHUNK];
    while (!*reply) {
        ERR_clear_error();
        int n = SSL_read(ssl, buf, sizeof buf);
        if (n <= 0) {
            io_error(ssl, ctx, n, "read");
            return REDIS_ERR;
        }
        if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK ||
            redisReaderGetReply(ctx->reader, reply) != REDIS_OK)
            goto protocol;
    }
    return REDIS_OK;
protocol:
    set_err(ctx, REDIS_ERR_PROTOCOL, "protocol error: %s%s", ctx->reader->errstr, "");
    return REDIS_ERR;
}

bool rc_tls_fatal(const redisContext *ctx) { return ctx && ctx->err == REDIS_ERR_OTHER; }
