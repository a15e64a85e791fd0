/* io.c - the buffered writer (see io.h). */
#define _POSIX_C_SOURCE 200809L
#include "io.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int dd_writer_init(dd_writer *w, int fd, const char *name, size_t cap)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->name = name;
    w->cap = cap;
    w->buf = malloc(cap);
    return w->buf ? 0 : ENOMEM;
}

/* The outcome of writing: bytes accepted, and how it failed. */
typedef struct wres {
    uint64_t bytes;
    bool broken_pipe;
    int error;
} wres;

static bool write_all(int fd, const unsigned char *p, size_t len, wres *r)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR && !dd_stop_signal)
                continue;
            if (errno == EPIPE)
                r->broken_pipe = true;
            else
                r->error = errno;
            return false;
        }
        p += n;
        len -= (size_t)n;
        r->bytes += (uint64_t)n;
    }
    return true;
}

static void fold(dd_writer *w, const wres *r)
{
    w->bytes_written += r->bytes;
    w->broken_pipe = w->broken_pipe || r->broken_pipe;
    if (!w->error)
        w->error = r->error;
}

static bool write_out(dd_writer *w, const unsigned char *p, size_t len)
{
    wres r = {0};
    bool ok = write_all(w->fd, p, len, &r);
    fold(w, &r);
    return ok;
}

/* ---- The writing thread ----------------------------------------------------
 * One buffer is the caller's, the other the thread's: a full buffer is
 * handed over (the two swap) once the thread is done with the previous one.
 * Signals are blocked on the thread; the caller's waits wake every 100 ms
 * to look at dd_stop_signal, and dd_writer_free() cancels the thread if it
 * is still inside write(2) (the only place it can be cancelled). */
struct dd_wthread {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned char *spare;     /* the buffer the caller is not filling */
    const unsigned char *job; /* under mu: a buffer to write, or NULL */
    size_t job_len;
    bool quit;                /* under mu */
    wres res;                 /* what the writes came to, not yet folded: the
                                 thread's while job is set, else under mu */
    int fd;
};

static void *wthread_main(void *arg)
{
    struct dd_wthread *t = arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->job && !t->quit)
            pthread_cond_wait(&t->cv, &t->mu);
        if (!t->job)
            break;
        const unsigned char *p = t->job;
        size_t len = t->job_len;
        pthread_mutex_unlock(&t->mu);
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
        (void)write_all(t->fd, p, len, &t->res);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
        pthread_mutex_lock(&t->mu);
        t->job = NULL;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* Waits until the thread has no buffer and folds what its writes came to
 * into the writer; false (nothing folded) if a stop signal came first.
 * Called with mu held. */
static bool wthread_idle(dd_writer *w)
{
    struct dd_wthread *t = w->th;
    while (t->job && !dd_stop_signal)
        cli_cond_wait_ns(&t->cv, &t->mu, 100000000L);
    if (t->job)
        return false;
    fold(w, &t->res);
    t->res = (wres){0};
    return true;
}

bool dd_writer_start_thread(dd_writer *w)
{
    if (w->th || w->line_buffered)
        return false;
    struct dd_wthread *t = calloc(1, sizeof *t);
    if (!t)
        return false;
    t->spare = malloc(w->cap);
    t->fd = w->fd;
    if (t->spare) {
        pthread_mutex_init(&t->mu, NULL);
        cli_cond_init(&t->cv);
        if (pthread_create(&t->th, NULL, wthread_main, t) == 0) {
            w->th = t;
            return true;
        }
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
    }
    free(t->spare);
    free(t);
    return false;
}

/* Hands the full buffer to the thread and takes the spare one. */
static bool hand_over(dd_writer *w)
{
    struct dd_wthread *t = w->th;
    pthread_mutex_lock(&t->mu);
    bool ok = wthread_idle(w) && !w->broken_pipe && !w->error;
    if (ok && w->len) {
        t->job = w->buf;
        t->job_len = w->len;
        w->buf = t->spare;
        t->spare = (unsigned char *)t->job;
        w->len = 0;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return ok;
}

bool dd_writer_flush(dd_writer *w)
{
    if (w->broken_pipe || w->error)
        return false;
    if (w->th) { /* what the thread has first, then the rest here */
        pthread_mutex_lock(&w->th->mu);
        bool idle = wthread_idle(w);
        pthread_mutex_unlock(&w->th->mu);
        if (!idle || w->broken_pipe || w->error)
            return false;
    }
    bool ok = write_out(w, w->buf, w->len);
    w->len = 0;
    return ok;
}

bool dd_writer_bytes(dd_writer *w, const void *p, size_t len)
{
    if (w->broken_pipe || w->error)
        return false;
    if (len > w->cap - w->len) {
        if (!(w->th && len < w->cap ? hand_over(w) : dd_writer_flush(w)))
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
    struct dd_wthread *t = w->th;
    if (t) {
        pthread_mutex_lock(&t->mu);
        t->quit = true;
        bool busy = t->job != NULL;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        if (busy)
            pthread_cancel(t->th); /* it may be blocked writing to a full pipe */
        pthread_join(t->th, NULL);
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
        free(t->spare);
        free(t);
        w->th = NULL;
    }
    free(w->buf);
    w->buf = NULL;
}
