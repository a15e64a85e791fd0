/*
 * format.c - the container: header, running checksum, sinks and sources,
 * atomic file replacement.
 *
 * The checksum is XXH3-64 over every byte before it, computed while the
 * bytes stream past, so neither saving nor loading needs a second copy of a
 * payload that may be many gigabytes.
 */
#define _GNU_SOURCE /* O_TMPFILE, linkat flags */
#include "dedup/format.h"

#include "dedup/hash.h"
#include "dedup/limits.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

_Static_assert(sizeof(XXH3_state_t) <= 640, "XXH3 state does not fit the encoder storage");

static const unsigned char MAGIC[8] = {0x89, 'D', 'D', 'P', '\r', '\n', 0x1A, '\n'};

static XXH3_state_t *state_of(unsigned char *storage) { return (XXH3_state_t *)(void *)storage; }

void dedup_put_f64(unsigned char *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    dedup_put_u64(p, u);
}

double dedup_get_f64(const unsigned char *p)
{
    uint64_t u = dedup_get_u64(p);
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* ---- memory and counting streams ---------------------------------------- */

static dedup_status mem_read(void *ctx, void *buf, size_t len)
{
    dedup_mem_source *m = ctx;
    if (len > m->len - m->pos)
        return DEDUP_ERR_TRUNCATED;
    if (len)
        memcpy(buf, m->data + m->pos, len);
    m->pos += len;
    return DEDUP_OK;
}

static uint64_t mem_remaining(void *ctx)
{
    dedup_mem_source *m = ctx;
    return m->len - m->pos;
}

dedup_source dedup_mem_source_init(dedup_mem_source *m, const void *data, size_t len)
{
    m->data = data;
    m->len = data ? len : 0;
    m->pos = 0;
    dedup_source s = {mem_read, mem_remaining, m};
    return s;
}

static dedup_status memsink_write(void *ctx, const void *buf, size_t len)
{
    dedup_mem_sink *m = ctx;
    if (len > m->cap - m->len)
        return DEDUP_ERR_FULL;
    if (len)
        memcpy(m->data + m->len, buf, len);
    m->len += len;
    return DEDUP_OK;
}

dedup_sink dedup_mem_sink_init(dedup_mem_sink *m, void *buf, size_t cap)
{
    m->data = buf;
    m->cap = buf ? cap : 0;
    m->len = 0;
    dedup_sink s = {memsink_write, m};
    return s;
}

static dedup_status count_write(void *ctx, const void *buf, size_t len)
{
    (void)buf;
    *(uint64_t *)ctx += len;
    return DEDUP_OK;
}

dedup_sink dedup_count_sink_init(uint64_t *counter)
{
    *counter = 0;
    dedup_sink s = {count_write, counter};
    return s;
}

static dedup_status range_write(void *ctx, const void *data, size_t n)
{
    dedup_range_sink *r = ctx;
    const unsigned char *p = data;
    uint64_t end = r->pos + n;
    if (end > r->off && r->pos < r->off + r->len) {
        uint64_t from = r->pos > r->off ? r->pos : r->off;
        uint64_t to = end < r->off + r->len ? end : r->off + r->len;
        memcpy(r->buf + (from - r->off), p + (from - r->pos), (size_t)(to - from));
        r->copied += (size_t)(to - from);
    }
    r->pos = end;
    return r->copied == r->len ? DEDUP_ERR_CANCELLED : DEDUP_OK;
}

dedup_sink dedup_range_sink_next(dedup_range_sink *r, uint64_t off, void *buf, size_t len)
{
    r->pos = 0;
    r->off = off;
    r->buf = buf;
    r->len = buf ? len : 0;
    r->copied = 0;
    dedup_sink s = {range_write, r};
    return s;
}

dedup_sink dedup_range_sink_init(dedup_range_sink *r, uint64_t off, void *buf, size_t len)
{
    r->kept_start = r->kept_at = UINT64_MAX;
    return dedup_range_sink_next(r, off, buf, len);
}

/* ---- encoder ------------------------------------------------------------- */

/* Into a range sink only the bytes not yet covered by the state and not
 * past the range's end are hashed (a save is stopped at the range's end,
 * so the checksum is written only when every byte before it is hashed);
 * when the sink stops the save, the state is kept in it for the next
 * range. */
static dedup_status enc_raw(dedup_encoder *e, const void *buf, size_t len)
{
    if (e->error)
        return e->error;
    dedup_range_sink *r = e->range;
    uint64_t at = r ? r->pos : 0;
    dedup_status s = e->sink.write(e->sink.ctx, buf, len);
    if (!r) {
        if (s)
            return e->error = s;
        XXH3_64bits_update(state_of(e->state), buf, len);
        return DEDUP_OK;
    }
    if (s && s != DEDUP_ERR_CANCELLED)
        return e->error = s;
    uint64_t lo = at > e->hashed ? at : e->hashed;
    uint64_t hi = at + len < r->off + r->len ? at + len : r->off + r->len;
    if (hi > lo) {
        XXH3_64bits_update(state_of(e->state), (const unsigned char *)buf + (lo - at),
                           (size_t)(hi - lo));
        e->hashed = hi;
    }
    if (s) {
        r->kept_start = e->start;
        r->kept_at = e->hashed;
        memcpy(r->kept, e->state, sizeof r->kept);
        e->error = s;
    }
    return s;
}

dedup_status dedup_encoder_begin(dedup_encoder *e, dedup_sink sink, uint16_t type,
                                 uint64_t seed, const void *params, uint32_t params_len,
                                 uint64_t payload_len)
{
    if (!e || !sink.write || params_len > DEDUP_MAX_PARAMS_LEN || (params_len && !params))
        return DEDUP_ERR_INVALID_ARG;
    e->sink = sink;
    e->expected = payload_len;
    e->written = 0;
    e->error = DEDUP_OK;
    e->range = sink.write == range_write ? sink.ctx : NULL;
    e->start = e->hashed = e->range ? e->range->pos : 0;
    if (e->range && e->range->kept_start == e->start) {
        memcpy(e->state, e->range->kept, sizeof e->state);
        e->hashed = e->range->kept_at;
    } else {
        XXH3_64bits_reset(state_of(e->state));
    }

    unsigned char h[DEDUP_HEADER_SIZE];
    memcpy(h, MAGIC, 8);
    h[8] = (unsigned char)DEDUP_FORMAT_VERSION;
    h[9] = (unsigned char)(DEDUP_FORMAT_VERSION >> 8);
    h[10] = (unsigned char)type;
    h[11] = (unsigned char)(type >> 8);
    dedup_put_u32(h + 12, 0);
    dedup_put_u32(h + 16, DEDUP_HASH_XXH3_128);
    dedup_put_u32(h + 20, params_len);
    dedup_put_u64(h + 24, seed);
    dedup_put_u64(h + 32, payload_len);
    dedup_status s = enc_raw(e, h, sizeof h);
    if (!s && params_len)
        s = enc_raw(e, params, params_len);
    return s;
}

bool ddi_encoder_can_skip(const dedup_encoder *e, uint64_t n)
{
    const dedup_range_sink *r = e->range;
    if (!r || e->error || n > e->expected - e->written || n > UINT64_MAX - r->pos)
        return false;
    return r->pos + n <= r->off && r->pos + n <= e->hashed;
}

dedup_status ddi_encoder_skip(dedup_encoder *e, uint64_t n)
{
    if (!ddi_encoder_can_skip(e, n))
        return e->error ? e->error : (e->error = DEDUP_ERR_INVALID_ARG);
    e->written += n;
    e->range->pos += n;
    return DEDUP_OK;
}

dedup_status dedup_encoder_write(dedup_encoder *e, const void *buf, size_t len)
{
    if (e->error)
        return e->error;
    if (len > e->expected - e->written)
        return e->error = DEDUP_ERR_INVALID_ARG;
    e->written += len;
    return enc_raw(e, buf, len);
}

dedup_status dedup_encoder_write_u64s(dedup_encoder *e, const uint64_t *words, size_t count)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    size_t bytes;
    if (!ddi_mul_size(count, 8, &bytes))
        return e->error = DEDUP_ERR_INVALID_ARG;
    return dedup_encoder_write(e, words, bytes);
#else
    unsigned char tmp[4096];
    while (count) {
        size_t n = count < sizeof tmp / 8 ? count : sizeof tmp / 8;
        for (size_t i = 0; i < n; i++)
            dedup_put_u64(tmp + 8 * i, words[i]);
        dedup_status s = dedup_encoder_write(e, tmp, n * 8);
        if (s)
            return s;
        words += n;
        count -= n;
    }
    return DEDUP_OK;
#endif
}

dedup_status dedup_encoder_end(dedup_encoder *e)
{
    if (e->error)
        return e->error;
    if (e->written != e->expected)
        return e->error = DEDUP_ERR_INVALID_ARG;
    unsigned char t[8];
    dedup_put_u64(t, XXH3_64bits_digest(state_of(e->state)));
    dedup_status s = e->sink.write(e->sink.ctx, t, sizeof t);
    if (s)
        e->error = s;
    return s;
}

/* ---- decoder ------------------------------------------------------------- */

static dedup_status dec_raw(dedup_decoder *d, void *buf, size_t len)
{
    if (d->error)
        return d->error;
    dedup_status s = d->src.read(d->src.ctx, buf, len);
    if (s)
        return d->error = s;
    XXH3_64bits_update(state_of(d->state), buf, len);
    return DEDUP_OK;
}

static dedup_status parse_header(const unsigned char *h, dedup_header *out)
{
    if (memcmp(h, MAGIC, 8) != 0)
        return DEDUP_ERR_BAD_MAGIC;
    out->version = (uint16_t)(h[8] | h[9] << 8);
    out->type = (uint16_t)(h[10] | h[11] << 8);
    out->flags = dedup_get_u32(h + 12);
    out->hash_id = dedup_get_u32(h + 16);
    out->params_len = dedup_get_u32(h + 20);
    out->seed = dedup_get_u64(h + 24);
    out->payload_len = dedup_get_u64(h + 32);
    if (out->version != DEDUP_FORMAT_VERSION)
        return DEDUP_ERR_VERSION;
    if (out->flags != 0 || out->hash_id != DEDUP_HASH_XXH3_128 ||
        out->params_len > DEDUP_MAX_PARAMS_LEN)
        return DEDUP_ERR_CORRUPT;
    return DEDUP_OK;
}

dedup_status dedup_decoder_begin(dedup_decoder *d, dedup_source src, uint16_t expect_type)
{
    if (!d || !src.read)
        return DEDUP_ERR_INVALID_ARG;
    d->src = src;
    d->consumed = 0;
    d->error = DEDUP_OK;
    XXH3_64bits_reset(state_of(d->state));
    unsigned char h[DEDUP_HEADER_SIZE];
    dedup_status s = dec_raw(d, h, sizeof h);
    if (s)
        return s;
    s = parse_header(h, &d->header);
    if (s)
        return d->error = s;
    if (expect_type && d->header.type != expect_type)
        return d->error = DEDUP_ERR_WRONG_TYPE;
    if (src.remaining) {
        uint64_t left = src.remaining(src.ctx);
        if (left != UINT64_MAX) {
            uint64_t need = (uint64_t)d->header.params_len + DEDUP_TRAILER_SIZE;
            if (left < need || d->header.payload_len > left - need)
                return d->error = DEDUP_ERR_TRUNCATED;
        }
    }
    return dec_raw(d, d->params, d->header.params_len);
}

dedup_status dedup_decoder_read(dedup_decoder *d, void *buf, size_t len)
{
    if (d->error)
        return d->error;
    if (len > d->header.payload_len - d->consumed)
        return d->error = DEDUP_ERR_CORRUPT;
    d->consumed += len;
    return dec_raw(d, buf, len);
}

dedup_status dedup_decoder_read_u64s(dedup_decoder *d, uint64_t *words, size_t count)
{
    size_t bytes;
    if (!ddi_mul_size(count, 8, &bytes))
        return d->error = DEDUP_ERR_CORRUPT;
    dedup_status s = dedup_decoder_read(d, words, bytes);
#if !(defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
    if (!s)
        for (size_t i = 0; i < count; i++)
            words[i] = dedup_get_u64((const unsigned char *)&words[i]);
#endif
    return s;
}

dedup_status dedup_decoder_end(dedup_decoder *d)
{
    if (d->error)
        return d->error;
    if (d->consumed != d->header.payload_len)
        return d->error = DEDUP_ERR_CORRUPT;
    unsigned char t[8];
    dedup_status s = d->src.read(d->src.ctx, t, sizeof t);
    if (s)
        return d->error = s;
    if (dedup_get_u64(t) != XXH3_64bits_digest(state_of(d->state)))
        return d->error = DEDUP_ERR_CHECKSUM;
    return DEDUP_OK;
}

/* ---- files ----------------------------------------------------------------- */

typedef struct fd_sink {
    int fd;
    size_t len;
    unsigned char buf[1 << 16];
} fd_sink;

static dedup_status write_all(int fd, const unsigned char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return DEDUP_ERR_IO;
        }
        p += n;
        len -= (size_t)n;
    }
    return DEDUP_OK;
}

static dedup_status fd_sink_write(void *ctx, const void *buf, size_t len)
{
    fd_sink *f = ctx;
    if (len >= sizeof f->buf) {
        if (f->len) {
            dedup_status s = write_all(f->fd, f->buf, f->len);
            f->len = 0;
            if (s)
                return s;
        }
        return write_all(f->fd, buf, len);
    }
    if (len > sizeof f->buf - f->len) {
        dedup_status s = write_all(f->fd, f->buf, f->len);
        f->len = 0;
        if (s)
            return s;
    }
    memcpy(f->buf + f->len, buf, len);
    f->len += len;
    return DEDUP_OK;
}

/* The directory part of 'path' ("." if none, "/" for "/x"), malloc'd. */
static char *dir_of(const char *path)
{
    char *dir = strdup(path);
    if (!dir)
        return NULL;
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else {
        dir[0] = '.';
        dir[1] = '\0';
    }
    return dir;
}

/* Removes "<base>.tmp.<pid>" beside 'path' for every pid that is not a live
 * process here: what a save killed between naming its temporary and the
 * rename (or by the named fallback) left.  Best effort; errors are ignored. */
static void remove_stale_temporaries(const char *path, const char *dir)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t dlen = strlen(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp.", 5) != 0)
            continue;
        const char *num = n + blen + 5;
        char *end;
        errno = 0;
        long pid = strtol(num, &end, 10);
        if (errno || end == num || *end || pid <= 0 || (pid_t)pid == getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to judge */
        char *full = malloc(dlen + strlen(n) + 2);
        if (full) {
            snprintf(full, dlen + strlen(n) + 2, "%s/%s", dir, n);
            (void)unlink(full);
            free(full);
        }
    }
    closedir(d);
}

int ddi_open_named_temporary(const char *tmp)
{
    /* Created here, never an existing file or the target of a link. */
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(tmp, flags, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, flags, 0644); /* our pid's name: a dead process's, reused */
    return fd;
}

/* Opens the file a save writes: a nameless O_TMPFILE in 'dir' where the
 * file system has them (*named = false: nothing can outlive the process
 * until it is linked), else 'tmp' itself. */
static int open_temporary(const char *dir, const char *tmp, bool *named)
{
    int fd;
#ifdef O_TMPFILE
    fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) {
        *named = false;
        return fd;
    }
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT)
        return -1; /* e.g. EACCES, ENOSPC: the named file would fail too */
#endif
    *named = true;
    return ddi_open_named_temporary(tmp);
}

/* Gives the nameless file 'fd' the name 'tmp' (rename() then moves it over
 * the target: linkat cannot replace a file). */
static int link_temporary(int fd, const char *tmp)
{
    if (unlink(tmp) != 0 && errno != ENOENT) /* our pid's name: a dead process's, reused */
        return -1;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
        return 0;
#ifdef AT_EMPTY_PATH
    if (linkat(fd, "", AT_FDCWD, tmp, AT_EMPTY_PATH) == 0) /* without /proc */
        return 0;
#endif
    return -1;
}

dedup_status dedup_save_file(const char *path, dedup_save_fn fn, const void *obj)
{
    if (!path || !fn)
        return DEDUP_ERR_INVALID_ARG;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    char *dir = dir_of(path);
    fd_sink *fs = malloc(sizeof *fs);
    if (!tmp || !dir || !fs) {
        free(tmp);
        free(dir);
        free(fs);
        return DEDUP_ERR_NOMEM;
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    remove_stale_temporaries(path, dir);
    dedup_status s = DEDUP_OK;
    int err = 0;
    bool named = true, linked = false;
    int fd = open_temporary(dir, tmp, &named);
    if (fd < 0) {
        err = errno;
        s = DEDUP_ERR_IO;
        goto out;
    }
    fs->fd = fd;
    fs->len = 0;
    dedup_sink sink = {fd_sink_write, fs};
    s = fn(obj, &sink);
    if (!s && fs->len)
        s = write_all(fd, fs->buf, fs->len);
    if (s == DEDUP_ERR_IO)
        err = errno;
    if (!s && fsync(fd) != 0) {
        err = errno;
        s = DEDUP_ERR_IO;
    }
    if (!s && !named) {
        if (link_temporary(fd, tmp) != 0) {
            err = errno;
            s = DEDUP_ERR_IO;
        } else
            linked = true;
    }
    if (close(fd) != 0 && !s) {
        err = errno;
        s = DEDUP_ERR_IO;
    }
    if (!s && rename(tmp, path) != 0) {
        err = errno;
        s = DEDUP_ERR_IO;
    }
    if (s) {
        if (named || linked)
            unlink(tmp);
        goto out;
    }
    /* Make the rename itself durable. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
out:
    free(fs);
    free(tmp);
    free(dir);
    if (s == DEDUP_ERR_IO)
        errno = err;
    return s;
}

static dedup_status file_read(void *ctx, void *buf, size_t len)
{
    dedup_file_source *f = ctx;
    unsigned char *out = buf;
    if (len > f->remaining)
        return DEDUP_ERR_TRUNCATED;
    size_t have = f->buf_len - f->buf_pos;
    size_t take = have < len ? have : len;
    memcpy(out, f->buf + f->buf_pos, take);
    f->buf_pos += take;
    f->remaining -= take;
    out += take;
    len -= take;
    while (len) {
        if (len >= sizeof f->buf) {
            /* Large payloads go straight into the destination. */
            ssize_t n = read(f->fd, out, len);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return DEDUP_ERR_IO;
            }
            if (n == 0)
                return DEDUP_ERR_TRUNCATED;
            out += n;
            len -= (size_t)n;
            f->remaining -= (uint64_t)n;
            continue;
        }
        ssize_t n = read(f->fd, f->buf, sizeof f->buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return DEDUP_ERR_IO;
        }
        if (n == 0)
            return DEDUP_ERR_TRUNCATED;
        f->buf_pos = 0;
        f->buf_len = (size_t)n;
        take = f->buf_len < len ? f->buf_len : len;
        memcpy(out, f->buf, take);
        f->buf_pos = take;
        f->remaining -= take;
        out += take;
        len -= take;
    }
    return DEDUP_OK;
}

static uint64_t file_remaining(void *ctx)
{
    return ((dedup_file_source *)ctx)->remaining;
}

dedup_status dedup_file_source_open(dedup_file_source *f, const char *path, dedup_source *out)
{
    if (!f || !path || !out)
        return DEDUP_ERR_INVALID_ARG;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return DEDUP_ERR_IO;
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        int e = errno;
        close(f->fd);
        f->fd = -1;
        errno = e;
        return DEDUP_ERR_IO;
    }
    if (S_ISDIR(st.st_mode)) {
        close(f->fd);
        f->fd = -1;
        errno = EISDIR;
        return DEDUP_ERR_IO;
    }
    f->remaining = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : UINT64_MAX;
    f->buf_pos = f->buf_len = 0;
    out->read = file_read;
    out->remaining = file_remaining;
    out->ctx = f;
    return DEDUP_OK;
}

void dedup_file_source_close(dedup_file_source *f)
{
    if (f && f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
    }
}

dedup_status dedup_peek_file(const char *path, dedup_header *out)
{
    dedup_file_source *f = malloc(sizeof *f);
    if (!f)
        return DEDUP_ERR_NOMEM;
    dedup_source src;
    dedup_status s = dedup_file_source_open(f, path, &src);
    if (s) {
        free(f);
        return s;
    }
    unsigned char h[DEDUP_HEADER_SIZE];
    s = src.read(src.ctx, h, sizeof h);
    if (!s)
        s = parse_header(h, out);
    dedup_file_source_close(f);
    free(f);
    return s;
}

dedup_status ddi_load_file(const char *path, const dedup_allocator *alloc, ddi_load_fn load,
                          ddi_free_fn destroy, void **out)
{
    if (!path || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_file_source *f = ddi_malloc(&a, sizeof *f);
    if (!f)
        return DEDUP_ERR_NOMEM;
    dedup_source src;
    dedup_status s = dedup_file_source_open(f, path, &src);
    if (!s) {
        void *obj = NULL;
        s = load(src, &a, &obj);
        if (!s) {
            uint64_t left = src.remaining(src.ctx);
            unsigned char extra;
            if (left == UINT64_MAX)
                left = src.read(src.ctx, &extra, 1) == DEDUP_OK;
            if (left != 0) {
                destroy(obj);
                obj = NULL;
                s = DEDUP_ERR_TRAILING; /* not a file we wrote */
            }
        }
        *out = obj;
        dedup_file_source_close(f);
    }
    ddi_free(&a, f);
    return s;
}
