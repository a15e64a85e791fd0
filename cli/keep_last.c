/* keep_last.c - see keep_last.h. */
#define _GNU_SOURCE /* O_TMPFILE */
#include "keep_last.h"
#include "key_header.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "feeder.h"
#include "io.h"
#include "outfile.h"
#include "seen_spec.h"

#define WRITE_BUF (1u << 20)

/* An input that can be read twice: a regular file as it is, anything else
 * copied into a nameless temporary file (its /proc path in 'path'). */
typedef struct reread {
    int fd; /* the copy's descriptor, or -1 */
    char path[64];
    const char *name;
} reread;

static int make_rereadable(const char *file, const char *tmpdir, reread *r)
{
    r->fd = -1;
    r->name = file;
    bool is_stdin = strcmp(file, "-") == 0;
    struct stat st;
    if (!is_stdin && stat(file, &st) == 0 && S_ISREG(st.st_mode))
        return 0;
    int in = is_stdin ? STDIN_FILENO : open(file, O_RDONLY);
    if (in < 0) {
        cli_error("%s: %s", file, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    int fd = -1;
#ifdef O_TMPFILE
    fd = open(tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) {
        char tmpl[4096];
        snprintf(tmpl, sizeof tmpl, "%s/dedup-keep.XXXXXX", tmpdir);
        fd = mkstemp(tmpl);
        if (fd >= 0)
            unlink(tmpl); /* nameless from now on */
    }
    if (fd < 0) {
        cli_error("--keep last: cannot copy %s to a temporary file in %s: %s (give "
                  "-T/--tmpdir DIR)", is_stdin ? "standard input" : file, tmpdir, strerror(errno));
        if (!is_stdin)
            close(in);
        return CLI_EXIT_USAGE;
    }
    static char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cli_error("%s: read error: %s", is_stdin ? "(standard input)" : file, strerror(errno));
            close(fd);
            return CLI_EXIT_USAGE;
        }
        if (n == 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                cli_error("--keep last: temporary copy in %s: %s", tmpdir, strerror(errno));
                close(fd);
                return CLI_EXIT_FAIL;
            }
            off += w;
        }
    }
    if (!is_stdin)
        close(in);
    r->fd = fd;
    snprintf(r->path, sizeof r->path, "/proc/self/fd/%d", fd);
    return 0;
}

/* One pass: every record's key into 'set' (with counts); in the second
 * pass ('total' not NULL) a record is written when its key's count in
 * 'set' reaches its count in 'total'. */
/* --header and records without keys, over both passes. */
typedef struct keying {
    dd_key_header kh;
    dd_keyed_block kb;
    bool hdr_written;
} keying;

/* Records [lo, hi) of b, which all have keys: into 'set' and, in the
 * second pass, written when they are their key's last occurrence.  0, -1
 * (the reader went away) or an exit status. */
static int decide_range(const dd_keep_last_opts *o, const dd_block *b, size_t lo, size_t hi,
                        dedup_seen *set, const dedup_seen *total, dd_writer *w,
                        uint64_t *records, uint64_t *written)
{
    enum { B = 256 };
    dedup_verdict v[B];
    for (size_t off = lo; off < hi; off += B) {
        size_t n = hi - off < B ? hi - off : B;
        dedup_batch bt = {.n = n, .digests = b->dig + off, .keys = b->key + off,
                          .lens = b->klen + off};
        dedup_status st = dedup_seen_decide(set, &bt, v, NULL);
        if (st) {
            cli_error("--keep last: %s", st == DEDUP_ERR_NOMEM ? "out of memory"
                                                               : dedup_strerror(st));
            return CLI_EXIT_FAIL;
        }
        *records += n;
        if (!total)
            continue;
        for (size_t i = off; i < off + n; i++) {
            /* a later record of this batch with the same key is the later
             * occurrence (the counts are the batch's end's) */
            bool later = false;
            for (size_t j = i + 1; j < off + n && !later; j++)
                later = b->dig[j].lo == b->dig[i].lo && b->dig[j].hi == b->dig[i].hi &&
                        b->klen[j] == b->klen[i] &&
                        (o->kind == DEDUP_SEEN_FINGERPRINT ||
                         memcmp(b->key[j], b->key[i], b->klen[i]) == 0);
            if (later)
                continue;
            uint64_t seen = dedup_seen_count_of(set, b->key[i], b->klen[i], b->dig[i]);
            uint64_t all = dedup_seen_count_of(total, b->key[i], b->klen[i], b->dig[i]);
            if (seen != all)
                continue;
            (*written)++;
            if (!dd_writer_record(w, b->rec[i], b->rlen[i], o->term))
                return w->broken_pipe ? -1 : CLI_EXIT_FAIL;
        }
    }
    return 0;
}

static int pass(const dd_keep_last_opts *o, reread *in, int nfiles, dedup_seen *set,
                const dedup_seen *total, dd_writer *w, uint64_t *records, uint64_t *written,
                keying *ky)
{
    const bool key_errs = o->key->csv || o->key->json || o->key->url;
    for (int fi = 0; fi < nfiles; fi++) {
        const char *path = in[fi].fd >= 0 ? in[fi].path : in[fi].name;
        dd_feeder *fd = NULL;
        dd_feeder_opts fo = {.term = o->term, .key = o->key, .hash = true,
                             .seed = dedup_seen_seed(set)};
        if (o->key->header) {
            fo.header = dd_key_header_cb;
            fo.header_ctx = &ky->kh;
        }
        ky->kh.file = in[fi].name;
        ky->kh.lines = 0;
        int e = dd_feeder_open(&fd, path, &fo);
        if (e) {
            cli_error("%s: %s", in[fi].name, strerror(e));
            return CLI_EXIT_USAGE;
        }
        if (in[fi].fd >= 0)
            (void)lseek(in[fi].fd, 0, SEEK_SET);
        const dd_block *b;
        while ((b = dd_feeder_next(fd)) != NULL) {
            if (w && ky->kh.seen && !ky->hdr_written) { /* the header, once, on top */
                ky->hdr_written = true;
                (void)dd_writer_record(w, ky->kh.hdr, ky->kh.len, o->term);
            }
            if (key_errs && o->bad_key != 2 &&
                (b = dd_keyed_only(&ky->kb, &ky->kh, b, o->term, o->bad_key == 1)) == NULL) {
                if (ky->kb.nomem)
                    cli_error("out of memory");
                dd_feeder_close(fd);
                return CLI_EXIT_FAIL;
            }
            int r = 0;
            if (key_errs && o->bad_key == 2) {
                /* --on-bad-key keep: a record without a key is written where
                 * it stands in the second pass */
                (void)dd_key_header_filter(&ky->kh, b, o->term, true, NULL);
                for (size_t i = 0; i < b->n && !r;) {
                    size_t j = i;
                    while (j < b->n && b->key[j])
                        j++;
                    r = decide_range(o, b, i, j, set, total, w, records, written);
                    if (!r && j < b->n) {
                        (*records)++;
                        if (total) {
                            (*written)++;
                            if (!dd_writer_record(w, b->rec[j], b->rlen[j], o->term))
                                r = w->broken_pipe ? -1 : CLI_EXIT_FAIL;
                        }
                    }
                    i = j + 1;
                }
            } else {
                r = decide_range(o, b, 0, b->n, set, total, w, records, written);
            }
            if (r) {
                dd_feeder_close(fd);
                return r;
            }
        }
        e = dd_feeder_error(fd);
        dd_feeder_close(fd);
        if (e == -1) /* the header callback said why */
            return CLI_EXIT_USAGE;
        if (e) {
            cli_error("%s: read error: %s", in[fi].name, strerror(e));
            return CLI_EXIT_USAGE;
        }
    }
    return 0;
}

int dd_run_keep_last(const dd_keep_last_opts *o, char **files, int nfiles)
{
    int rc = CLI_EXIT_OK;
    reread *in = calloc((size_t)nfiles, sizeof *in);
    dedup_seen *all = NULL, *now = NULL;
    dd_outfile out;
    memset(&out, 0, sizeof out);
    out.fd = -1;
    bool writer = false;
    dd_writer w;
    if (!in) {
        cli_error("out of memory");
        return CLI_EXIT_FAIL;
    }
    for (int i = 0; i < nfiles; i++)
        in[i].fd = -1;
    for (int i = 0; i < nfiles && !rc; i++)
        rc = make_rereadable(files[i], o->tmpdir, &in[i]);
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = o->kind;
    sp.items = o->items;
    sp.seed = o->seed;
    sp.counts = true;
    if (!rc && (dedup_seen_create(&sp, dd_seen_allocator(sp.kind), &all) ||
                dedup_seen_create(&sp, dd_seen_allocator(sp.kind), &now))) {
        cli_error("--keep last: out of memory");
        rc = CLI_EXIT_FAIL;
    }
    if (!rc)
        rc = dd_outfile_open(&out, NULL, o->output);
    if (!rc) {
        if (dd_writer_init(&w, out.fd, out.name, WRITE_BUF) != 0) {
            cli_error("out of memory");
            rc = CLI_EXIT_FAIL;
        } else {
            writer = true;
            w.line_buffered = o->line_buffered;
        }
    }
    uint64_t records = 0, second = 0, written = 0;
    keying ky = {.kh = {.key = o->key}};
    if (!rc)
        rc = pass(o, in, nfiles, all, NULL, NULL, &records, &written, &ky);
    ky.kh.skipped = 0; /* counted again by the second pass */
    if (!rc)
        rc = pass(o, in, nfiles, now, all, &w, &second, &written, &ky);
    if (!rc && ky.kh.seen && !ky.hdr_written) /* an input of its header alone */
        (void)dd_writer_record(&w, ky.kh.hdr, ky.kh.len, o->term);
    if (ky.kh.skipped)
        cli_warn("%llu record%s had no key (%s): %s", (unsigned long long)ky.kh.skipped,
                 ky.kh.skipped == 1 ? "" : "s", dd_key_bad_reason(o->key),
                 o->bad_key == 2 ? "written undecided" : "dropped");
    dd_key_header_free(&ky.kh);
    dd_keyed_free(&ky.kb);
    if (rc == -1)
        rc = CLI_EXIT_OK; /* the reader went away: a quiet end */
    else if (writer && !w.error)
        dd_writer_flush(&w);
    if (writer && w.error) {
        cli_error("write error on %s: %s", w.name, strerror(w.error));
        rc = CLI_EXIT_FAIL;
    }
    if (!rc)
        rc = dd_outfile_commit(&out); /* only a complete run replaces the output file */
    dd_outfile_abort(&out);
    dd_outfile_free(&out);
    if (o->stats && !rc) {
        uint64_t distinct = 0;
        bool exact = true;
        dedup_seen_distinct(all, &distinct, &exact);
        fprintf(stderr, "dedup: %llu records in, %llu out (each key's last occurrence), %llu "
                "duplicates, %llu distinct keys, mode %s --keep last (two passes)\n",
                (unsigned long long)records, (unsigned long long)written,
                (unsigned long long)(records - written), (unsigned long long)distinct,
                dedup_seen_kind_name(o->kind));
    }
    if (writer)
        dd_writer_free(&w);
    dedup_seen_free(all);
    dedup_seen_free(now);
    for (int i = 0; i < nfiles; i++)
        if (in[i].fd >= 0)
            close(in[i].fd);
    free(in);
    return rc;
}
