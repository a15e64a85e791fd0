/* io.c - block reader and buffered writer (see io.h). */
#define _POSIX_C_SOURCE 200809L
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int dd_reader_open(dd_reader *r, const char *path, unsigned char term, size_t block)
{
    memset(r, 0, sizeof *r);
    r->term = term;
    r->name = path;
    if (strcmp(path, "-") == 0) {
        r->fd = STDIN_FILENO;
        r->name = "(standard input)";
    } else {
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (r->fd < 0)
            return errno;
#ifdef POSIX_FADV_SEQUENTIAL
        (void)posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    }
    r->cap = block;
    r->buf = malloc(r->cap);
    if (!r->buf) {
        if (r->fd != STDIN_FILENO)
            close(r->fd);
        return ENOMEM;
    }
    return 0;
}

void dd_reader_close(dd_reader *r)
{
    if (r->fd >= 0 && r->fd != STDIN_FILENO)
        close(r->fd);
    r->fd = -1;
    free(r->buf);
    r->buf = NULL;
}

/* Reads more data, compacting or growing the buffer. False at EOF/error. */
static bool fill(dd_reader *r)
{
    if (r->eof)
        return false;
    if (r->start > 0) {
        size_t live = r->end - r->start;
        memmove(r->buf, r->buf + r->start, live);
        r->scan -= r->start;
        r->end = live;
        r->start = 0;
    }
    if (r->end == r->cap) {
        /* One record fills the whole buffer: grow it. */
        size_t ncap = r->cap * 2;
        unsigned char *nb = realloc(r->buf, ncap);
        if (!nb) {
            r->error = ENOMEM;
            return false;
        }
        r->buf = nb;
        r->cap = ncap;
    }
    for (;;) {
        ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end);
        if (n < 0) {
            if (errno == EINTR && !dd_stop_signal)
                continue;
            r->error = errno;
            return false;
        }
        if (n == 0) {
            r->eof = true;
            return false;
        }
        r->end += (size_t)n;
        r->bytes_read += (uint64_t)n;
        return true;
    }
}

bool dd_reader_next(dd_reader *r, const unsigned char **rec, size_t *len)
{
    for (;;) {
        if (r->scan < r->end) {
            unsigned char *p = memchr(r->buf + r->scan, r->term, r->end - r->scan);
            if (p) {
                *rec = r->buf + r->start;
                *len = (size_t)(p - (r->buf + r->start));
                r->start = r->scan = (size_t)(p - r->buf) + 1;
                return true;
            }
            r->scan = r->end;
        }
        if (!fill(r)) {
            if (r->error)
                return false;
            if (r->start < r->end) { /* last record without terminator */
                *rec = r->buf + r->start;
                *len = r->end - r->start;
                r->start = r->scan = r->end;
                return true;
            }
            return false;
        }
    }
}

bool dd_reader_next_buffered(dd_reader *r, const unsigned char **rec, size_t *len)
{
    if (r->scan < r->end) {
        unsigned char *p = memchr(r->buf + r->scan, r->term, r->end - r->scan);
        if (p) {
            *rec = r->buf + r->start;
            *len = (size_t)(p - (r->buf + r->start));
            r->start = r->scan = (size_t)(p - r->buf) + 1;
            return true;
        }
        r->scan = r->end;
    }
    if (r->eof && r->start < r->end) {
        *rec = r->buf + r->start;
        *len = r->end - r->start;
        r->start = r->scan = r->end;
        return true;
    }
    return false;
}

int dd_writer_init(dd_writer *w, int fd, const char *name, size_t cap)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->name = name;
    w->cap = cap;
    w->buf = malloc(cap);
    return w->buf ? 0 : ENOMEM;
}

static bool write_out(dd_writer *w, const unsigned char *p, size_t len)
{
    while (len) {
        ssize_t n = write(w->fd, p, len);
        if (n < 0) {
            if (errno == EINTR && !dd_stop_signal)
                continue;
            if (errno == EPIPE)
                w->broken_pipe = true;
            else
                w->error = errno;
            return false;
        }
        p += n;
        len -= (size_t)n;
        w->bytes_written += (uint64_t)n;
    }
    return true;
}

bool dd_writer_flush(dd_writer *w)
{
    if (w->broken_pipe || w->error)
        return false;
    bool ok = write_out(w, w->buf, w->len);
    w->len = 0;
    return ok;
}

bool dd_writer_bytes(dd_writer *w, const void *p, size_t len)
{
    if (w->broken_pipe || w->error)
        return false;
    if (len > w->cap - w->len) {
        if (!dd_writer_flush(w))
            return false;
        if (len >= w->cap)
            return write_out(w, p, len);
    }
    memcpy(w->buf + w->len, p, len);
    w->len += len;
    return true;
}

bool dd_writer_record(dd_writer *w, const void *rec, size_t len, unsigned char term)
{
    if (!dd_writer_bytes(w, rec, len) || !dd_writer_bytes(w, &term, 1))
        return false;
    if (w->line_buffered)
        return dd_writer_flush(w);
    return true;
}

void dd_writer_free(dd_writer *w)
{
    free(w->buf);
    w->buf = NULL;
}
