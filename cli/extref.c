/* extref.c - the external engine's records by reference (see extref.h). */
#define _GNU_SOURCE
#include "extref.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "filecheck.h"

struct dd_extref {
    cli_infile *f; /* off: its place among the inputs taken one after the other */
    int n;
    unsigned char term;
    /* the block being pushed: its first record's offset, and its bytes */
    const unsigned char *blk;
    uint64_t blk_off, blk_end;
    uint64_t next_off; /* the next record's offset while blocks are cut */
    int bfi;           /* the file blocks come from */
    int efi;           /* the file of the last record emitted */
    /* the read-back window: file wf's bytes [woff, woff + wlen) */
    unsigned char *win;
    int wf;
    uint64_t woff;
    size_t wlen;
    uint64_t reread;
    /* what went wrong (emit returned 4) */
    int bad_file, bad_errno;
    const char *bad_what;
    /* the references of the current block */
    size_t cap;
    unsigned char *kb, *rb;
    dd_extref_batch b;
};

static size_t put_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

static size_t get_varint(const unsigned char *p, const unsigned char *end, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t n = 0; p + n < end && n < 10; n++) {
        x |= (uint64_t)(p[n] & 0x7f) << (7 * n);
        if (!(p[n] & 0x80)) {
            *v = x;
            return n + 1;
        }
    }
    return 0;
}

void dd_extref_close(dd_extref *x)
{
    if (!x)
        return;
    for (int i = 0; i < x->n; i++)
        if (x->f[i].fd >= 0)
            close(x->f[i].fd);
    free(x->f);
    free(x->win);
    free(x->kb);
    free(x->rb);
    free(x->b.rec);
    free(x->b.key);
    free(x->b.rlen);
    free(x->b.klen);
    free(x);
}

/* Whether the first 64 KiB of the first non-empty file hold records of at
 * least DD_EXTREF_MIN_AVG bytes on average. */
static bool long_records(const dd_extref *x)
{
    enum { SAMPLE = 64 << 10 };
    for (int i = 0; i < x->n; i++) {
        if (!x->f[i].size)
            continue;
        unsigned char *s = malloc(SAMPLE);
        if (!s)
            return false;
        ssize_t got = pread(x->f[i].fd, s, SAMPLE, 0);
        size_t recs = 0;
        for (ssize_t j = 0; j < got; j++)
            recs += s[j] == x->term;
        free(s);
        if (got <= 0)
            return false;
        return recs == 0 || (size_t)got / recs >= DD_EXTREF_MIN_AVG;
    }
    return false; /* nothing to read: no gain */
}

dd_extref *dd_extref_open(char **files, int nfiles, unsigned char term)
{
    const char *no = getenv("DEDUP_NO_EXTREF"), *yes = getenv("DEDUP_EXTREF");
    if ((no && *no && strcmp(no, "0") != 0) || nfiles <= 0)
        return NULL;
    dd_extref *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->term = term;
    x->wf = -1;
    x->bfi = -1;
    x->bad_file = -1;
    x->f = calloc((size_t)nfiles, sizeof *x->f);
    if (!x->f) {
        free(x);
        return NULL;
    }
    uint64_t pos = 0;
    for (int i = 0; i < nfiles; i++) {
        cli_infile *f = &x->f[i];
        f->fd = -1;
        x->n = i + 1;
        struct stat st;
        /* stat() first: opening a named FIFO would wait for its writer, and
         * closing it again could cost the writer its pipe */
        if (strcmp(files[i], "-") == 0 || stat(files[i], &st) != 0 || !S_ISREG(st.st_mode) ||
            (f->fd = open(files[i], O_RDONLY | O_CLOEXEC)) < 0 || fstat(f->fd, &st) != 0 ||
            !S_ISREG(st.st_mode)) {
            dd_extref_close(x); /* the feeder says why it cannot be read, if it cannot */
            return NULL;
        }
        f->name = files[i];
        f->off = pos;
        f->size = (uint64_t)st.st_size;
        f->mtime = st.st_mtim;
        pos += f->size;
    }
    bool forced = yes && *yes && strcmp(yes, "0") != 0;
    if (!forced && !long_records(x)) {
        dd_extref_close(x);
        return NULL;
    }
    x->win = malloc(DD_EXTREF_WINDOW);
    if (!x->win) {
        dd_extref_close(x);
        return NULL;
    }
    return x;
}

static bool grow(dd_extref *x, size_t n)
{
    if (n <= x->cap)
        return true;
    size_t c = x->cap ? x->cap : 4096;
    while (c < n)
        c *= 2;
    unsigned char *kb = realloc(x->kb, c * DD_EXTREF_KEY_MAX);
    if (kb)
        x->kb = kb;
    unsigned char *rb = realloc(x->rb, c * DD_EXTREF_REC_MAX);
    if (rb)
        x->rb = rb;
    const unsigned char **rec = realloc(x->b.rec, c * sizeof *rec);
    if (rec)
        x->b.rec = rec;
    const unsigned char **key = realloc(x->b.key, c * sizeof *key);
    if (key)
        x->b.key = key;
    size_t *rlen = realloc(x->b.rlen, c * sizeof *rlen);
    if (rlen)
        x->b.rlen = rlen;
    size_t *klen = realloc(x->b.klen, c * sizeof *klen);
    if (klen)
        x->b.klen = klen;
    if (!kb || !rb || !rec || !key || !rlen || !klen)
        return false;
    x->cap = c;
    return true;
}

const dd_extref_batch *dd_extref_block(dd_extref *x, int fi, const dd_block *b)
{
    if (!grow(x, b->n))
        return NULL;
    if (fi != x->bfi) { /* a new file: its first block */
        x->bfi = fi;
        x->next_off = x->f[fi].off;
    }
    uint64_t off = x->next_off;
    x->blk = b->n ? b->rec[0] : NULL;
    x->blk_off = off;
    /* a reference's key is the record's key digest and length: two records
     * have the same reference key exactly when their keys have the same
     * digest and length, so the key's digest, already made, stands for the
     * reference's (nothing is hashed twice) */
    x->b.dig = b->dig;
    for (size_t i = 0; i < b->n; i++) {
        unsigned char *k = x->kb + i * DD_EXTREF_KEY_MAX, *r = x->rb + i * DD_EXTREF_REC_MAX;
        memcpy(k, &b->dig[i].lo, 8);
        memcpy(k + 8, &b->dig[i].hi, 8);
        size_t kl = 16 + put_varint(k + 16, b->klen[i]);
        size_t rl = put_varint(r, off + (uint64_t)(b->rec[i] - b->rec[0]));
        rl += put_varint(r + rl, b->rlen[i]);
        x->b.key[i] = k;
        x->b.klen[i] = kl;
        x->b.rec[i] = r;
        x->b.rlen[i] = rl;
    }
    if (b->n) {
        uint64_t span = (uint64_t)(b->rec[b->n - 1] - b->rec[0]) + b->rlen[b->n - 1];
        x->blk_end = off + span;
        x->next_off = off + span + 1; /* past the last record's terminator */
    } else {
        x->blk_end = off;
    }
    return &x->b;
}

void dd_extref_piece(dd_extref *x, int fi, const dd_block *b)
{
    if (fi != x->bfi) {
        x->bfi = fi;
        x->next_off = x->f[fi].off;
    }
    x->next_off += b->rlen[0];
    if (b->piece & DD_PIECE_LAST)
        x->next_off++; /* past the record's terminator */
}

void dd_extref_block_done(dd_extref *x)
{
    x->blk = NULL;
    x->blk_end = x->blk_off;
}

static int fail(dd_extref *x, int fi, int eno, const char *what)
{
    x->bad_file = fi;
    x->bad_errno = eno;
    x->bad_what = what;
    return 4;
}

/* Reads file fi's bytes from 'off' into the window. */
static int fill(dd_extref *x, int fi, uint64_t off)
{
    const cli_infile *f = &x->f[fi];
    uint64_t left = f->size > off ? f->size - off : 0;
    size_t want = left < DD_EXTREF_WINDOW ? (size_t)left : DD_EXTREF_WINDOW;
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(f->fd, x->win + got, want - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail(x, fi, errno, NULL);
        if (r == 0)
            return fail(x, fi, 0, "the file shrank while it was being read");
        got += (size_t)r;
    }
    x->reread += got;
    x->wf = fi;
    x->woff = off;
    x->wlen = got;
    return 0;
}

/* Whether file fi's byte at 'off' (just past a record) is where the record
 * ends: the terminator, or the end of the file. */
static bool ends_there(dd_extref *x, int fi, uint64_t off)
{
    if (off == x->f[fi].size)
        return true;
    if (x->wf == fi && off >= x->woff && off < x->woff + x->wlen)
        return x->win[off - x->woff] == x->term;
    unsigned char c;
    return pread(x->f[fi].fd, &c, 1, (off_t)off) == 1 && c == x->term;
}

int dd_extref_emit(dd_extref *x, dd_writer *w, const void *ref, size_t len)
{
    const unsigned char *p = ref, *end = p + len;
    uint64_t goff, rlen;
    size_t k = get_varint(p, end, &goff);
    if (!k || !get_varint(p + k, end, &rlen))
        return fail(x, -1, 0, "a reference the engine returned cannot be decoded");
    int fi = x->efi; /* references come in input order */
    while (fi + 1 < x->n && goff >= x->f[fi].off + x->f[fi].size)
        fi++;
    x->efi = fi;
    if (x->blk && goff >= x->blk_off && goff + rlen <= x->blk_end) { /* the block at hand */
        if (!dd_writer_record(w, x->blk + (goff - x->blk_off), (size_t)rlen, x->term))
            return w->broken_pipe ? 1 : 2;
        return 0;
    }
    const cli_infile *f = &x->f[fi];
    if (goff < f->off || goff - f->off + rlen > f->size)
        return fail(x, fi, 0, "the file shrank while it was being read");
    uint64_t off = goff - f->off;
    if (rlen < DD_EXTREF_WINDOW) {
        /* the record and the byte after it (its terminator) */
        uint64_t need = off + rlen + (off + rlen < f->size);
        if (!(x->wf == fi && off >= x->woff && need <= x->woff + x->wlen)) {
            int e = fill(x, fi, off);
            if (e)
                return e;
        }
        if (!ends_there(x, fi, off + rlen))
            return fail(x, fi, 0, "the file was modified while it was being read");
        if (!dd_writer_record(w, x->win + (off - x->woff), (size_t)rlen, x->term))
            return w->broken_pipe ? 1 : 2;
        return 0;
    }
    /* longer than the window: streamed through it */
    uint64_t done = 0;
    while (done < rlen) {
        int e = fill(x, fi, off + done);
        if (e)
            return e;
        size_t take = rlen - done < x->wlen ? (size_t)(rlen - done) : x->wlen;
        if (!take)
            return fail(x, fi, 0, "the file shrank while it was being read");
        if (!dd_writer_bytes(w, x->win, take))
            return w->broken_pipe ? 1 : 2;
        done += take;
    }
    if (!ends_there(x, fi, off + rlen))
        return fail(x, fi, 0, "the file was modified while it was being read");
    if (!dd_writer_bytes(w, &x->term, 1))
        return w->broken_pipe ? 1 : 2;
    return 0;
}

bool dd_extref_check(const dd_extref *x, int fi) { return cli_infiles_unchanged(x->f, x->n, fi); }

void dd_extref_report(const dd_extref *x)
{
    const char *name = x->bad_file >= 0 ? x->f[x->bad_file].name : "an input file";
    if (x->bad_what)
        cli_error("%s: %s: the output is incomplete; run again on a file that stays put", name,
                  x->bad_what);
    else
        cli_error("%s: reading it again for the output: %s", name, strerror(x->bad_errno));
}

uint64_t dd_extref_reread(const dd_extref *x) { return x->reread; }
