/* byref.c - the input files mapped into one span for exact mode by reference (see byref.h). */
#define _GNU_SOURCE
#include "byref.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "filecheck.h"

/* A file of this size or more starts at a multiple of it in the span, so
 * that the kernel can map its page cache's large folios with one page-table
 * entry each (2 MiB on x86-64).  The comparisons against stored keys land at
 * random places of the mapping; with 4 KiB entries each one also walked the
 * page tables (20M URL lines by reference: 4.92 s before, 4.13 s aligned;
 * bench/results/byref.md). */
#define HUGE_ALIGN ((uint64_t)2 << 20)

struct dd_byref {
    unsigned char *base; /* HUGE_ALIGN-aligned, inside the reservation */
    unsigned char *raw;  /* the reservation: raw_size bytes */
    size_t raw_size;
    size_t reserved;
    uint64_t span;
    cli_infile *f;
    uint64_t *ends;
    int n;
    struct sigaction old_bus;
};

/* The one mapped span, for the SIGBUS handler (a process runs one job). */
static const dd_byref *volatile bus_span;

static void put(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

/* A mapped page past a file's new end: the file was cut shorter while it
 * was read.  Only async-signal-safe calls. */
static void on_bus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const dd_byref *b = bus_span;
    const unsigned char *a = si ? (const unsigned char *)si->si_addr : NULL;
    if (b && a >= b->base && a < b->base + b->reserved) {
        uint64_t o = (uint64_t)(a - b->base);
        const char *name = "an input file";
        for (int i = 0; i < b->n; i++)
            if (o >= b->f[i].off)
                name = b->f[i].name;
        put("dedup: ");
        put(name);
        put(": the file shrank while it was being read; the output is incomplete\n");
        _exit(CLI_EXIT_FAIL);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void dd_byref_close(dd_byref *b)
{
    if (!b)
        return;
    if (bus_span == b) {
        sigaction(SIGBUS, &b->old_bus, NULL);
        bus_span = NULL;
    }
    if (b->raw)
        munmap(b->raw, b->raw_size);
    for (int i = 0; i < b->n; i++)
        if (b->f[i].fd >= 0)
            close(b->f[i].fd);
    free(b->f);
    free(b->ends);
    free(b);
}

dd_byref *dd_byref_open(char **files, int nfiles)
{
    if (nfiles <= 0)
        return NULL;
    dd_byref *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->f = calloc((size_t)nfiles, sizeof *b->f);
    b->ends = calloc((size_t)nfiles, sizeof *b->ends);
    if (!b->f || !b->ends) {
        dd_byref_close(b);
        return NULL;
    }
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t page = pg > 0 ? (uint64_t)pg : 4096, pos = 0;
    for (int i = 0; i < nfiles; i++) {
        cli_infile *f = &b->f[i];
        f->fd = -1;
        b->n = i + 1;
        struct stat st;
        bool in = strcmp(files[i], "-") == 0;
        /* stat() first: opening a named FIFO would wait for its writer, and
         * closing it again could cost the writer its pipe (and the run the
         * records it had written) */
        if (!in && (stat(files[i], &st) != 0 || !S_ISREG(st.st_mode))) {
            dd_byref_close(b);
            return NULL;
        }
        /* standard input counts when it is a regular file read from its start */
        f->fd = in ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3) : open(files[i], O_RDONLY | O_CLOEXEC);
        if (f->fd < 0 || fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
            (in && lseek(f->fd, 0, SEEK_CUR) != 0)) {
            dd_byref_close(b);
            return NULL;
        }
        f->name = in ? "(standard input)" : files[i];
        if ((uint64_t)st.st_size >= HUGE_ALIGN)
            pos = (pos + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
        f->off = pos;
        f->size = (uint64_t)st.st_size;
        f->mtime = st.st_mtim;
        b->ends[i] = pos + f->size;
        /* its pages, then a guard page: nothing reads past a file's end */
        pos += (f->size + page - 1) / page * page + page;
    }
    if (pos >= (UINT64_C(1) << 40) - 1 || pos > SIZE_MAX - HUGE_ALIGN) {
        dd_byref_close(b);
        return NULL;
    }
    b->reserved = (size_t)pos;
    b->raw_size = b->reserved + (size_t)HUGE_ALIGN;
    void *r = mmap(NULL, b->raw_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        dd_byref_close(b);
        return NULL;
    }
    b->raw = r;
    b->base = b->raw + ((HUGE_ALIGN - (uintptr_t)r % HUGE_ALIGN) % HUGE_ALIGN);
    b->span = b->ends[nfiles - 1];
    for (int i = 0; i < nfiles; i++) {
        cli_infile *f = &b->f[i];
        if (!f->size)
            continue;
        void *m = mmap(b->base + f->off, (size_t)f->size, PROT_READ, MAP_PRIVATE | MAP_FIXED,
                       f->fd, 0);
        if (m == MAP_FAILED) {
            dd_byref_close(b);
            return NULL;
        }
        (void)madvise(m, (size_t)f->size, MADV_SEQUENTIAL);
        /* pages the mapping reads in from disk come in large folios, which
         * the alignment above lets the kernel map whole */
        if (f->size >= HUGE_ALIGN)
            (void)madvise(m, (size_t)f->size, MADV_HUGEPAGE);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_bus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    bus_span = b;
    sigaction(SIGBUS, &sa, &b->old_bus);
    return b;
}

const unsigned char *dd_byref_base(const dd_byref *b) { return b->base; }
uint64_t dd_byref_span(const dd_byref *b) { return b->span; }

const uint64_t *dd_byref_ends(const dd_byref *b, size_t *n)
{
    *n = (size_t)b->n;
    return b->ends;
}

const unsigned char *dd_byref_file(const dd_byref *b, int i, size_t *len)
{
    *len = (size_t)b->f[i].size;
    return b->f[i].size ? b->base + b->f[i].off : NULL;
}

bool dd_byref_check(const dd_byref *b, int i) { return cli_infiles_unchanged(b->f, b->n, i); }
