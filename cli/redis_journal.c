/*
 * redis_journal.c - the intent journal of `dedup --redis` (redis_journal.h).
 */
#define _GNU_SOURCE
#include "redis_journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dedup/hash.h"

#define J_MAGIC "DDUPJRNL"
#define J_VERSION 1u
#define J_TYPE 1u
#define J_HEADER 48
#define B_MAGIC 0x54424A44u /* "DJBT" */
#define B_HEADER 32

struct dd_journal {
    int fd;
    char path[4096];
    uint64_t t0, seq;
    bool pending;
    unsigned char *buf;
    size_t cap;
};

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const unsigned char *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}
static uint32_t sum32(const void *p, size_t n, uint64_t seed)
{
    return (uint32_t)dedup_hash(p, n, seed).lo;
}
/* A batch's checksums are seeded by the journal's creation time and the
 * batch's number: a batch copied from another journal fails them. */
static uint64_t batch_seed(uint64_t t0, uint64_t seq)
{
    return t0 ^ (seq * 0x9E3779B97F4A7C15ull);
}

uint64_t dd_journal_key_hash(const char *key)
{
    return dedup_hash(key, strlen(key), 0x4A524E4Cu).lo;
}

static bool mkdirs(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            int rc = mkdir(path, 0700);
            *p = c;
            if (rc != 0 && errno != EEXIST)
                return false;
            if (!c)
                break;
        }
    }
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? true : (errno = ENOTDIR, false);
}

bool dd_journal_dir(const char *base, const char *key, const char *name, bool create,
                    char *out, size_t cap, bool *exists)
{
    *exists = false;
    out[0] = 0;
    char b[4096];
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int bl;
    if (base)
        bl = snprintf(b, sizeof b, "%s", base);
    else if (xdg && xdg[0] == '/')
        bl = snprintf(b, sizeof b, "%s/dedup", xdg);
    else if (home && home[0])
        bl = snprintf(b, sizeof b, "%s/.local/state/dedup", home);
    else {
        if (create)
            cli_error("--redis: no journal directory: neither XDG_STATE_HOME nor HOME is set; "
                      "give --journal DIR (or --no-journal)");
        return !create;
    }
    char nm[65];
    size_t k = 0;
    for (; name[k] && k < 64; k++) {
        char c = name[k];
        nm[k] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == '-' || c == '_' || (c == '.' && k > 0)
                    ? c
                    : '_';
    }
    nm[k] = 0;
    int n = snprintf(out, cap, "%s/%s-%016llx", b, nm,
                     (unsigned long long)dd_journal_key_hash(key));
    if (bl < 0 || (size_t)bl >= sizeof b || n < 0 || (size_t)n >= cap || n > 3900) {
        if (create)
            cli_error("--journal '%s': the path is too long", b);
        out[0] = 0;
        return !create;
    }
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
        *exists = true;
        return true;
    }
    if (!create)
        return true;
    if (!mkdirs(out)) {
        cli_error("--redis: cannot create the journal directory '%s': %s (give --journal DIR, "
                  "or --no-journal to run without: a kill -9 may then lose up to one batch)",
                  out, strerror(errno));
        return false;
    }
    *exists = true;
    return true;
}

static bool read_at(int fd, void *p, size_t n, off_t off)
{
    unsigned char *c = p;
    while (n) {
        ssize_t r = pread(fd, c, n, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        c += r;
        n -= (size_t)r;
        off += r;
    }
    return true;
}

static bool write_at(int fd, const void *p, size_t n, off_t off)
{
    const unsigned char *c = p;
    while (n) {
        ssize_t w = pwrite(fd, c, n, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        c += w;
        n -= (size_t)w;
        off += w;
    }
    return true;
}

static bool damaged(const char *path, const char *what)
{
    cli_error("journal '%s' is damaged (%s): it may hold records whose keys a killed run sent to "
              "Redis but never wrote out; it was left as it is -- look at it, then move it away "
              "to go on (its records are then given up)",
              path, what);
    return false;
}

/* Writes a dead run's batch to 'uncertain' or to a .recovered file beside
 * the journal ('stem' is the path without ".journal"). */
static bool deliver(const unsigned char *p, size_t n, FILE *uncertain, const char *upath,
                    const char *stem, char *where, size_t wcap)
{
    if (uncertain) {
        snprintf(where, wcap, "%s", upath);
        if (fwrite(p, 1, n, uncertain) != n || fflush(uncertain) != 0) {
            cli_error("--uncertain '%s': %s", upath, strerror(errno));
            return false;
        }
        return true;
    }
    char tmp[4200];
    snprintf(where, wcap, "%s.recovered", stem);
    snprintf(tmp, sizeof tmp, "%s.recovered.tmp", stem);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write_at(fd, p, n, 0) && fsync(fd) == 0;
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, where) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        cli_error("cannot write '%s': %s", where, strerror(e));
        unlink(tmp);
    }
    return ok;
}

/* One dead run's journal, opened and locked as 'fd'. */
static bool recover_one(int fd, const char *path, uint64_t key_hash, FILE *uncertain,
                        const char *upath)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return cli_error("journal '%s': %s", path, strerror(errno)), false;
    uint64_t size = (uint64_t)st.st_size;
    unsigned char h[J_HEADER], bh[B_HEADER];
    if (size < J_HEADER)
        return damaged(path, "shorter than its 48-byte header");
    if (!read_at(fd, h, J_HEADER, 0))
        return cli_error("journal '%s': cannot read: %s", path, strerror(errno)), false;
    if (memcmp(h, J_MAGIC, 8) != 0)
        return damaged(path, "not a dedup journal: bad magic");
    if (get_u32(h + 44) != sum32(h, 44, 0))
        return damaged(path, "the header's checksum");
    if (get_u32(h + 8) != J_VERSION || get_u32(h + 12) != J_TYPE) {
        char why[96];
        snprintf(why, sizeof why, "version %u type %u; this dedup reads version %u type %u",
                 get_u32(h + 8), get_u32(h + 12), J_VERSION, J_TYPE);
        return damaged(path, why);
    }
    if (get_u64(h + 24) != key_hash)
        return damaged(path, "it belongs to other servers or another name");
    unsigned long long pid = (unsigned long long)get_u64(h + 16);
    uint64_t t0 = get_u64(h + 32);
    if (size == J_HEADER) { /* no batch in flight */
        unlink(path);
        return true;
    }
    const char *torn = NULL;
    uint64_t plen = 0;
    if (size < J_HEADER + B_HEADER)
        torn = "its batch header";
    else {
        if (!read_at(fd, bh, B_HEADER, J_HEADER))
            return cli_error("journal '%s': cannot read: %s", path, strerror(errno)), false;
        uint64_t seed = batch_seed(t0, get_u64(bh + 16));
        if (get_u32(bh) != B_MAGIC || get_u32(bh + 28) != sum32(bh, 28, seed))
            return damaged(path, "the batch header's magic or checksum");
        plen = get_u64(bh + 8);
        if (plen > size - J_HEADER - B_HEADER)
            torn = "its batch";
        else if (plen < size - J_HEADER - B_HEADER)
            return damaged(path, "bytes past its batch");
    }
    if (torn) {
        /* The batch is written whole before its keys are sent: one cut
         * while being written was never sent. */
        cli_warn("journal '%s' of a killed run (PID %llu) ends inside %s: a batch cut while being "
                 "written, never sent to Redis; nothing to recover, removed",
                 path, pid, torn);
        unlink(path);
        return true;
    }
    unsigned char *p = malloc(plen ? plen : 1);
    if (!p)
        return cli_error("journal '%s': out of memory for %llu bytes", path,
                         (unsigned long long)plen), false;
    bool ok = read_at(fd, p, plen, J_HEADER + B_HEADER);
    if (!ok) {
        cli_error("journal '%s': cannot read: %s", path, strerror(errno));
    } else if (get_u32(bh + 24) != sum32(p, plen, batch_seed(t0, get_u64(bh + 16)))) {
        ok = damaged(path, "the batch's checksum");
    } else {
        char stem[4096], where[4200];
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(path) - strlen(".journal")), path);
        ok = deliver(p, plen, uncertain, upath, stem, where, sizeof where);
        if (ok) {
            unlink(path);
            cli_error("recovered %u records of a killed run (PID %llu) into %s", get_u32(bh + 4),
                      pid, where);
        }
    }
    free(p);
    return ok;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a > b && strcmp(s + a - b, suf) == 0;
}

bool dd_journal_recover(const char *dir, uint64_t key_hash, FILE *uncertain,
                        const char *uncertain_path)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return true;
        cli_error("journal directory '%s': %s", dir, strerror(errno));
        return false;
    }
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        bool tmp = ends_with(e->d_name, ".tmp") && !ends_with(e->d_name, ".recovered.tmp");
        if (!tmp && !ends_with(e->d_name, ".journal"))
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOENT)
                continue; /* recovered by another run meanwhile */
            cli_error("journal '%s': %s", path, strerror(errno));
            ok = false;
            break;
        }
        struct stat a, b;
        /* Locked: a live run's.  Gone or replaced once locked: another
         * run recovered it first. */
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 && lstat(path, &b) == 0 &&
            a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
            if (tmp) {
                /* A run killed before its journal was in place; a young
                 * one may be a live run's between create and lock. */
                if (time(NULL) - a.st_mtime > 60)
                    unlink(path);
            }
            else
                ok = recover_one(fd, path, key_hash, uncertain, uncertain_path);
        }
        close(fd);
    }
    closedir(d);
    return ok;
}

dd_journal *dd_journal_open(const char *dir, uint64_t key_hash)
{
    dd_journal *j = calloc(1, sizeof *j);
    if (!j) {
        cli_error("out of memory");
        return NULL;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    j->t0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    unsigned long long pid = (unsigned long long)getpid();
    char tmp[4200];
    snprintf(j->path, sizeof j->path, "%s/%llu-%llx.journal", dir, pid, (unsigned long long)j->t0);
    snprintf(tmp, sizeof tmp, "%s/%llu-%llx.tmp", dir, pid, (unsigned long long)j->t0);
    j->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    const char *fail = j->fd < 0 ? "cannot create" : NULL;
    if (!fail && flock(j->fd, LOCK_EX | LOCK_NB) != 0)
        fail = "cannot lock";
    unsigned char h[J_HEADER];
    memset(h, 0, sizeof h);
    memcpy(h, J_MAGIC, 8);
    put_u32(h + 8, J_VERSION);
    put_u32(h + 12, J_TYPE);
    put_u64(h + 16, pid);
    put_u64(h + 24, key_hash);
    put_u64(h + 32, j->t0);
    put_u32(h + 44, sum32(h, 44, 0));
    if (!fail && !write_at(j->fd, h, sizeof h, 0))
        fail = "cannot write";
    if (!fail && rename(tmp, j->path) != 0)
        fail = "cannot rename";
    if (fail) {
        cli_error("--redis: %s the journal '%s': %s (give --journal DIR, or --no-journal to run "
                  "without: a kill -9 may then lose up to one batch)",
                  fail, j->fd < 0 ? tmp : j->path, strerror(errno));
        if (j->fd >= 0) {
            close(j->fd);
            unlink(tmp);
        }
        free(j);
        return NULL;
    }
    return j;
}

bool dd_journal_write(dd_journal *j, const unsigned char *const *rec, const size_t *rlen,
                      size_t n, unsigned char term)
{
    size_t need = B_HEADER;
    for (size_t i = 0; i < n; i++)
        need += rlen[i] + 1;
    if (need > j->cap) {
        size_t nc = need + need / 4;
        unsigned char *nb = realloc(j->buf, nc);
        if (!nb) {
            cli_error("journal '%s': out of memory", j->path);
            return false;
        }
        j->buf = nb;
        j->cap = nc;
    }
    unsigned char *p = j->buf + B_HEADER;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, rec[i], rlen[i]);
        p += rlen[i];
        *p++ = term;
    }
    uint64_t plen = need - B_HEADER, seed = batch_seed(j->t0, j->seq);
    put_u32(j->buf, B_MAGIC);
    put_u32(j->buf + 4, (uint32_t)n);
    put_u64(j->buf + 8, plen);
    put_u64(j->buf + 16, j->seq);
    put_u32(j->buf + 24, sum32(j->buf + B_HEADER, plen, seed));
    put_u32(j->buf + 28, sum32(j->buf, 28, seed));
    j->seq++;
    /* Marked first: a partial write leaves the journal to the next run. */
    j->pending = true;
    if (!write_at(j->fd, j->buf, need, J_HEADER)) {
        cli_error("journal '%s': cannot write: %s; the batch was not sent to Redis", j->path,
                  strerror(errno));
        return false;
    }
    return true;
}

bool dd_journal_clear(dd_journal *j)
{
    if (!j->pending)
        return true;
    if (ftruncate(j->fd, J_HEADER) != 0) {
        cli_error("journal '%s': cannot truncate: %s", j->path, strerror(errno));
        return false;
    }
    j->pending = false;
    return true;
}

bool dd_journal_pending(const dd_journal *j)
{
    return j && j->pending;
}

const char *dd_journal_path(const dd_journal *j)
{
    return j ? j->path : "";
}

void dd_journal_close(dd_journal *j, bool keep)
{
    if (!j)
        return;
    if (!keep)
        unlink(j->path);
    close(j->fd);
    free(j->buf);
    free(j);
}
