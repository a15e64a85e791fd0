/*
 * redis_conn.c - how the command line reaches Redis: TLS files and
 * credentials off the command line (redis_cli.h, "Connection").
 *
 * One set of these per process: `dedup --redis`, every `--tier rediss://`
 * of the same run and `dedup filter ... rediss://` read it through
 * dd_redis_conn_apply().  The password comes from --redis-auth-file, else
 * the URL, else DEDUP_REDIS_PASSWORD, else REDISCLI_AUTH (redis-cli's
 * variable); it is never printed, and a process holding one is not
 * dumpable (no core file).
 */
#define _POSIX_C_SOURCE 200809L
#include "redis_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#ifdef DEDUP_HAVE_REDIS
#include "dedup/redis.h"
#endif

#define AUTH_MAX 1024

static struct {
    const char *cacert, *cert, *key, *auth_file;
    bool insecure, warned, warned_insecure, warned_plain, loaded;
    char user[AUTH_MAX], pass[AUTH_MAX];
} conn;

int dd_redis_conn_option(int code, const char *arg)
{
    switch (code) {
    case DD_OPT_REDIS_TLS_CACERT: conn.cacert = arg; return 1;
    case DD_OPT_REDIS_TLS_CERT: conn.cert = arg; return 1;
    case DD_OPT_REDIS_TLS_KEY: conn.key = arg; return 1;
    case DD_OPT_REDIS_TLS_INSECURE: conn.insecure = true; return 1;
    case DD_OPT_REDIS_AUTH_FILE: conn.auth_file = arg; return 1;
    default: return 0;
    }
}

void dd_redis_url_shown(const char *url, char *buf, size_t cap)
{
#ifdef DEDUP_HAVE_REDIS
    dedup_redis_url_redact(url, buf, cap);
#else
    snprintf(buf, cap, "%s", url ? url : "");
#endif
}

void dd_redis_hide_url_password(char *arg)
{
    /* "scheme://user:pass@host" or "scheme://pass@host": the bytes between
     * the last ':' (or "://") and the last '@' before the first '/'. */
    char *p = strstr(arg, "://");
    if (!p)
        return;
    p += 3;
    char *end = p + strcspn(p, "/"), *at = NULL;
    for (char *q = p; q < end; q++)
        if (*q == '@')
            at = q;
    if (!at)
        return;
    char *colon = memchr(p, ':', (size_t)(at - p));
    for (char *q = colon ? colon + 1 : p; q < at; q++)
        *q = '*';
}

#ifdef DEDUP_HAVE_REDIS
/* --redis-auth-file: "password" or "user password" on its first line, in
 * a regular file only its owner can read. */
static int load_auth_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOCTTY);
    if (fd < 0) {
        cli_error("--redis-auth-file '%s': %s", path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        cli_error("--redis-auth-file '%s': not a regular file", path);
        close(fd);
        return CLI_EXIT_USAGE;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        cli_error("--redis-auth-file '%s': group or others may read it (mode %04o); "
                  "refused: run 'chmod 600 %s'", path, (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return CLI_EXIT_USAGE;
    }
    char buf[AUTH_MAX * 2 + 2];
    size_t n = 0;
    ssize_t got;
    while (n < sizeof buf - 1 && (got = read(fd, buf + n, sizeof buf - 1 - n)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            cli_error("--redis-auth-file '%s': %s", path, strerror(errno));
            close(fd);
            return CLI_EXIT_USAGE;
        }
        n += (size_t)got;
    }
    close(fd);
    buf[n] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    char *sp = strchr(buf, ' ');
    const char *user = sp ? buf : "", *pass = sp ? sp + 1 : buf;
    if (sp)
        *sp = 0;
    int rc = 0;
    if (!*pass || strlen(user) >= AUTH_MAX || strlen(pass) >= AUTH_MAX) {
        cli_error("--redis-auth-file '%s': its first line must be 'PASSWORD' or "
                  "'USER PASSWORD' (1 to %d bytes each)", path, AUTH_MAX - 1);
        rc = CLI_EXIT_USAGE;
    } else {
        snprintf(conn.user, sizeof conn.user, "%s", user);
        snprintf(conn.pass, sizeof conn.pass, "%s", pass);
    }
    memset(buf, 0, sizeof buf);
    return rc;
}

int dd_redis_conn_apply(dedup_redis_params *o)
{
    dedup_redis_url u;
    bool url_pass = o->url && dedup_redis_url_parse(o->url, &u, NULL, 0) == DEDUP_OK &&
                    u.pass[0];
    bool tls = o->url && dedup_redis_url_parse(o->url, &u, NULL, 0) == DEDUP_OK && u.tls;
    if (!conn.loaded) {
        conn.loaded = true;
        if (conn.auth_file) {
            int rc = load_auth_file(conn.auth_file);
            if (rc) {
                conn.loaded = false;
                return rc;
            }
        }
    }
    if (conn.auth_file) {
        o->user = conn.user[0] ? conn.user : NULL;
        o->password = conn.pass;
    } else if (url_pass) {
        if (!conn.warned)
            cli_warn("a password in a Redis URL is visible to other users of this machine "
                     "(ps) until dedup starts: give it in DEDUP_REDIS_PASSWORD, REDISCLI_AUTH "
                     "or --redis-auth-file instead");
        conn.warned = true;
    } else {
        const char *env = getenv("DEDUP_REDIS_PASSWORD");
        if (!env || !*env)
            env = getenv("REDISCLI_AUTH");
        if (env && *env)
            o->password = env;
    }
    /* A process holding a password writes no core file (and other
     * processes of the user cannot read its memory or environment). */
    if ((o->password && *o->password) || url_pass)
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    o->tls_cacert = conn.cacert;
    o->tls_cert = conn.cert;
    o->tls_key = conn.key;
    o->tls_insecure = conn.insecure;
    if (!tls && o->url && (conn.cacert || conn.cert || conn.key || conn.insecure) &&
        !conn.warned_plain) {
        char shown[512];
        dd_redis_url_shown(o->url, shown, sizeof shown);
        cli_warn("--tls-* options have no effect on '%s' (plain TCP): TLS is rediss://", shown);
        conn.warned_plain = true;
    }
    if (tls && conn.insecure && !conn.warned_insecure) {
        cli_warn("--tls-insecure: the Redis server's certificate and name are not checked; "
                 "anyone on the path can read and change what dedup sends and receives");
        conn.warned_insecure = true;
    }
    return 0;
}
#endif
