/*
 * io.h - block reader and buffered writer for the line filter.
 *
 * The reader reads large blocks with read(2) and hands out records split at
 * the terminator with memchr; a record is any bytes (NUL, \r, invalid UTF-8
 * included) and may be longer than the block: the buffer then grows to hold
 * it.  A last record without a terminator is still a record.  Records point
 * into the buffer and stay valid until the next dd_reader_fill() call.
 */
#ifndef DEDUP_CLI_IO_H
#define DEDUP_CLI_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

/* Set by the signal handler: blocking reads and writes give up when set. */
extern volatile sig_atomic_t dd_stop_signal;

typedef struct dd_reader {
    int fd;
    const char *name; /* for messages; "-" shown as "(standard input)" */
    unsigned char *buf;
    size_t cap;
    size_t start; /* first unconsumed byte */
    size_t end;   /* end of valid data */
    size_t scan;  /* no terminator in [start, scan) */
    bool eof;
    unsigned char term;
    uint64_t bytes_read;
    int error; /* errno of a failed read, 0 if none */
} dd_reader;

/* Opens 'path' ("-" = stdin). Returns 0 or an errno value. */
int dd_reader_open(dd_reader *r, const char *path, unsigned char term, size_t block);
void dd_reader_close(dd_reader *r);
/* Next record: true and (rec, len) without its terminator, or false at end
 * of input or on a read error (r->error set). */
bool dd_reader_next(dd_reader *r, const unsigned char **rec, size_t *len);
/* Like dd_reader_next() but never reads: false when the next record is not
 * complete in the buffer.  Records returned since the last read all stay
 * valid together, so callers batch them. */
bool dd_reader_next_buffered(dd_reader *r, const unsigned char **rec, size_t *len);

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
