/*
 * io.h - the buffered writer of the line filter, and the stop flag its
 * signal handlers set.  (Reading is cli/feeder.h.)
 */
#ifndef DEDUP_CLI_IO_H
#define DEDUP_CLI_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

/* Set by the signal handler: blocking reads and writes give up when set. */
extern volatile sig_atomic_t dd_stop_signal;

struct dd_wthread;

typedef struct dd_writer {
    int fd;
    const char *name;
    unsigned char *buf;
    size_t cap, len;
    bool line_buffered;
    bool broken_pipe; /* the reader went away (EPIPE): stop quietly */
    int error;        /* errno of a failed write */
    uint64_t bytes_written;
    struct dd_wthread *th; /* dd_writer_start_thread: full buffers are written there */
} dd_writer;

int dd_writer_init(dd_writer *w, int fd, const char *name, size_t cap);
/* Has a thread of the writer's own do the write(2) calls of full buffers
 * (a second buffer of 'cap' bytes), so the caller's thread goes on filling
 * the other: for a caller that is the bottleneck while a core is idle (the
 * external engine's final merge).  Not with line_buffered.  False (and the
 * writer stays as it was) if the memory or the thread is refused.  The
 * thread's errors (error, broken_pipe) show in the writer at the next
 * hand-over or flush; a flush writes everything before it returns. */
bool dd_writer_start_thread(dd_writer *w);
/* Appends rec + term. Returns false once the writer has failed or the pipe
 * is broken. */
bool dd_writer_record(dd_writer *w, const void *rec, size_t len, unsigned char term);
bool dd_writer_bytes(dd_writer *w, const void *p, size_t len);
bool dd_writer_flush(dd_writer *w);
/* Frees the buffers; stops the thread, even one blocked writing to a pipe
 * nobody reads. */
void dd_writer_free(dd_writer *w);

#endif
