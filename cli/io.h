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

typedef struct dd_writer {
    int fd;
    const char *name;
    unsigned char *buf;
    size_t cap, len;
    bool line_buffered;
    bool broken_pipe; /* the reader went away (EPIPE): stop quietly */
    int error;        /* errno of a failed write */
    uint64_t bytes_written;
} dd_writer;

int dd_writer_init(dd_writer *w, int fd, const char *name, size_t cap);
/* Appends rec + term. Returns false once the writer has failed or the pipe
 * is broken. */
bool dd_writer_record(dd_writer *w, const void *rec, size_t len, unsigned char term);
bool dd_writer_bytes(dd_writer *w, const void *p, size_t len);
bool dd_writer_flush(dd_writer *w);
void dd_writer_free(dd_writer *w);

#endif
