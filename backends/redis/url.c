/*
 * url.c - redis://, redis-cluster:// and redis-sentinel:// URLs
 * (dedup/redis.h).
 *
 * Grammar: scheme "://" [user [":" pass] "@"] hostport *("," hostport)
 * ["/" db], hostport = host [":" port]; redis-sentinel:// has "/" master
 * ["/" db] instead of ["/" db].  The credentials end at the last '@'
 * so a password may hold '@' when escaped or not.  Nothing is trusted: every
 * length is checked against its buffer before copying.
 */
#include "dedup/redis.h"

#include <stdio.h>
#include <string.h>

static dedup_status fail(char *why, size_t cap, const char *fmt, const char *arg)
{
    if (why && cap)
        snprintf(why, cap, fmt, arg);
    return DEDUP_ERR_INVALID_ARG;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Copies p[0..n) percent-decoded into dst (cap bytes with the NUL). */
static bool decode(const char *p, size_t n, char *dst, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == '%') {
            if (i + 2 >= n)
                return false;
            int a = hexval(p[i + 1]), b = hexval(p[i + 2]);
            if (a < 0 || b < 0)
                return false;
            ch = (char)(a * 16 + b);
            if (ch == 0)
                return false;
            i += 2;
        }
        if (k + 1 >= cap)
            return false;
        dst[k++] = ch;
    }
    dst[k] = 0;
    return true;
}

/* A decimal in [lo, hi] spelling all of p[0..n). */
static bool number(const char *p, size_t n, long lo, long hi, long *out)
{
    if (n == 0 || n > 10)
        return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (p[i] - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* A sentinel URL's "/MASTER" at *slash (decoded into out->master); moves
 * *slash to the "/db" after it, or NULL.  False when MASTER is empty, bad
 * or over-long. */
static bool master_path(const char **slash, const char *end, dedup_redis_url *out)
{
    if (!*slash)
        return false;
    const char *m = *slash + 1;
    const char *next = memchr(m, '/', (size_t)(end - m));
    const char *mend = next ? next : end;
    if (mend == m || !decode(m, (size_t)(mend - m), out->master, sizeof out->master))
        return false;
    *slash = next;
    return true;
}

dedup_status dedup_redis_url_parse(const char *text, dedup_redis_url *out, char *why,
                                   size_t whycap)
{
    if (!text || !out)
        return fail(why, whycap, "%s", "no URL given");
    memset(out, 0, sizeof *out);
    const char *p;
    if (strncmp(text, "redis://", 8) == 0) {
        p = text + 8;
    } else if (strncmp(text, "redis-cluster://", 16) == 0) {
        p = text + 16;
        out->cluster = true;
    } else if (strncmp(text, "rediss://", 9) == 0) {
        p = text + 9;
        out->tls = true;
    } else if (strncmp(text, "rediss-cluster://", 17) == 0) {
        p = text + 17;
        out->cluster = true;
        out->tls = true;
    } else if (strncmp(text, "redis-sentinel://", 17) == 0) {
        p = text + 17;
        out->sentinel = true;
    } else {
        char shown[256];
        dedup_redis_url_redact(text, shown, sizeof shown);
        return fail(why, whycap,
                    "'%s' is not a Redis URL (redis[s]://[user@]host:port[/db] or "
                    "redis[s]-cluster://host:port[,host:port...] or "
                    "redis-sentinel://host:port[,host:port...]/MASTER[/db])",
                    shown);
    }
    char shown[512]; /* what the messages below show: the password replaced */
    dedup_redis_url_redact(text, shown, sizeof shown);
    text = shown;
    const char *end = p + strlen(p);
    const char *slash = memchr(p, '/', (size_t)(end - p));
    const char *auth_end = NULL;
    for (const char *q = p; q < (slash ? slash : end); q++)
        if (*q == '@')
            auth_end = q;
    if (auth_end) {
        const char *colon = memchr(p, ':', (size_t)(auth_end - p));
        const char *uend = colon ? colon : auth_end;
        if (!decode(p, (size_t)(uend - p), out->user, sizeof out->user))
            return fail(why, whycap, "bad or over-long user name in '%s'", text);
        if (colon && !decode(colon + 1, (size_t)(auth_end - colon - 1), out->pass,
                             sizeof out->pass))
            return fail(why, whycap, "bad or over-long password in '%s'", text);
        if (!colon) { /* "redis://pass@host" is how many clients spell it */
            memcpy(out->pass, out->user, sizeof out->pass);
            out->user[0] = 0;
        }
        p = auth_end + 1;
    }
    const char *hosts_end = slash ? slash : end;
    if (p == hosts_end)
        return fail(why, whycap, "no host in '%s'", text);
    while (p < hosts_end) {
        const char *comma = memchr(p, ',', (size_t)(hosts_end - p));
        const char *hend = comma ? comma : hosts_end;
        if (out->nseeds == DEDUP_REDIS_MAX_SEEDS)
            return fail(why, whycap, "more than 16 seed nodes in '%s'", text);
        if (out->nseeds == 1 && !out->cluster && !out->sentinel)
            return fail(why, whycap,
                        "several hosts in '%s': a cluster is named by redis-cluster://", text);
        const char *colon = NULL;
        for (const char *q = p; q < hend; q++)
            if (*q == ':')
                colon = q;
        const char *hostend = colon ? colon : hend;
        size_t hl = (size_t)(hostend - p);
        if (hl == 0 || hl > DEDUP_REDIS_MAX_HOST)
            return fail(why, whycap, "empty or over-long host in '%s'", text);
        for (size_t i = 0; i < hl; i++) {
            char ch = p[i];
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_'))
                return fail(why, whycap, "bad character in the host of '%s'", text);
        }
        long port = out->sentinel ? 26379 : 6379;
        if (colon && !number(colon + 1, (size_t)(hend - colon - 1), 1, 65535, &port))
            return fail(why, whycap, "port out of 1..65535 in '%s'", text);
        memcpy(out->seeds[out->nseeds].host, p, hl);
        out->seeds[out->nseeds].host[hl] = 0;
        out->seeds[out->nseeds].port = (int)port;
        out->nseeds++;
        if (!comma)
            break;
        p = comma + 1;
        if (p == hosts_end)
            return fail(why, whycap, "empty host after ',' in '%s'", text);
    }
    if (out->sentinel && !master_path(&slash, end, out))
        return fail(why, whycap,
                    "no master name, or a bad or over-long one, in '%s' "
                    "(redis-sentinel://host:port[,host:port...]/MASTER[/db])",
                    text);
    if (slash && slash + 1 < end) {
        long db;
        if (!number(slash + 1, (size_t)(end - slash - 1), 0, 2147483647L, &db))
            return fail(why, whycap, "database number out of range (or trailing text) in '%s'",
                        text);
        if (db && out->cluster)
            return fail(why, whycap, "a Redis Cluster has only database 0: '%s'", text);
        out->db = (int)db;
    }
    return DEDUP_OK;
}

const char *dedup_redis_scheme_name(dedup_redis_scheme s)
{
    switch (s) {
    case DEDUP_REDIS_KEYS: return "keys";
    case DEDUP_REDIS_BITMAP: return "bitmap";
    case DEDUP_REDIS_MODULE: return "module";
    }
    return NULL;
}

dedup_redis_scheme dedup_redis_scheme_from_name(const char *name)
{
    if (!name)
        return 0;
    if (strcmp(name, "keys") == 0)
        return DEDUP_REDIS_KEYS;
    if (strcmp(name, "bitmap") == 0)
        return DEDUP_REDIS_BITMAP;
    if (strcmp(name, "module") == 0)
        return DEDUP_REDIS_MODULE;
    return 0;
}

size_t dedup_redis_url_redact(const char *text, char *buf, size_t cap)
{
    if (!cap)
        return 0;
    if (!text) {
        buf[0] = 0;
        return 0;
    }
    const char *sep = strstr(text, "://");
    const char *p = sep ? sep + 3 : text;
    const char *end = p + strcspn(p, "/");
    const char *at = NULL, *colon = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q;
    if (at)
        colon = memchr(p, ':', (size_t)(at - p));
    /* "user:pass@" -> "user:***@"; "pass@" (no colon) is a password too. */
    int n;
    if (at && colon)
        n = snprintf(buf, cap, "%.*s***%s", (int)(colon + 1 - text), text, at);
    else if (at)
        n = snprintf(buf, cap, "%.*s***%s", (int)(p - text), text, at);
    else
        n = snprintf(buf, cap, "%s", text);
    return n < 0 ? 0 : (size_t)n;
}
