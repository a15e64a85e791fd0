/* io.c - the buffered writer (see io.h). */
#define _POSIX_C_SOURCE 200809L
#include "io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (w->broken_pipe || w->error)
        return false;
    if (len < w->cap - w->len) { /* the usual case: record and terminator fit */
        memcpy(w->buf + w->len, rec, len);
        w->buf[w->len + len] = term;
        w->len += len + 1;
    } else if (!dd_writer_bytes(w, rec, len) || !dd_writer_bytes(w, &term, 1)) {
        return false;
    }
    if (w->line_buffered)
        return dd_writer_flush(w);
    return true;
}

void dd_writer_free(dd_writer *w)
{
    free(w->buf);
    w->buf = NULL;
}
