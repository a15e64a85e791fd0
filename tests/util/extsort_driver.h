/*
 * extsort_driver.h - a minimal line-deduplicating program around the
 * external engine (dedup/extsort.h), shared by bench/bench_extsort.c and by
 * tests/unit/test_extsort.c (run as `test_extsort --driver ...` from
 * tests/cli/extsort_ref.sh) until the `dedup` command wires the engine.
 *
 *   ... [-m SIZE] [-T DIR] [--sort] [--count|--duplicates|--unique]
 *       [--stats] [FILE]
 *
 * Reads '\n'-terminated records (the last one may lack it) in 1 MiB blocks,
 * writes each output record with '\n'; --count prefixes "%7llu " like
 * `uniq -c`.  --stats prints the engine's counters to stderr.
 * Exit: 0 ok, 1 engine/IO failure, 2 usage.
 */
#ifndef DEDUP_EXTSORT_DRIVER_H
#define DEDUP_EXTSORT_DRIVER_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dedup/extsort.h"
#include "dedup/hash.h"

typedef struct xd_out {
    char *buf;
    size_t len, cap;
    int fd;
    bool count;
    int err;
} xd_out;

static int xd_flush(xd_out *o)
{
    size_t off = 0;
    while (off < o->len) {
        ssize_t n = write(o->fd, o->buf + off, o->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            o->err = errno;
            return -1;
        }
        off += (size_t)n;
    }
    o->len = 0;
    return 0;
}

static int xd_put(xd_out *o, const void *p, size_t n)
{
    if (o->len + n > o->cap && xd_flush(o))
        return -1;
    if (n > o->cap) {
        size_t off = 0;
        while (off < n) {
            ssize_t w = write(o->fd, (const char *)p + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                o->err = errno;
                return -1;
            }
            off += (size_t)w;
        }
        return 0;
    }
    if (n)
        memcpy(o->buf + o->len, p, n);
    o->len += n;
    return 0;
}

static int xd_emit(void *ctx, const void *rec, size_t len, uint64_t count)
{
    xd_out *o = ctx;
    if (o->count) {
        char num[32];
        int k = snprintf(num, sizeof num, "%7llu ", (unsigned long long)count);
        if (xd_put(o, num, (size_t)k))
            return 1;
    }
    if (xd_put(o, rec, len) || xd_put(o, "\n", 1))
        return 1;
    return 0;
}

static bool xd_size(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return false;
    switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1048576.0; end++; break;
    case 'g': case 'G': v *= 1073741824.0; end++; break;
    default: break;
    }
    if (*end)
        return false;
    *out = (uint64_t)v;
    return true;
}

static int extsort_driver_main(int argc, char **argv)
{
    dedup_extsort_params p;
    dedup_extsort_params_init(&p);
    bool stats = false;
    const char *file = NULL;
    xd_out o = {0};
    o.fd = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") && i + 1 < argc) {
            if (!xd_size(argv[++i], &p.memory_limit)) {
                fprintf(stderr, "bad size %s\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "-T") && i + 1 < argc) {
            p.tmpdir = argv[++i];
        } else if (!strcmp(a, "--sort")) {
            p.order = DEDUP_EXTSORT_SORTED;
        } else if (!strcmp(a, "--count")) {
            p.output = DEDUP_EXTSORT_COUNT;
            o.count = true;
        } else if (!strcmp(a, "--duplicates")) {
            p.output = DEDUP_EXTSORT_DUPLICATES;
        } else if (!strcmp(a, "--unique")) {
            p.output = DEDUP_EXTSORT_UNIQUE;
        } else if (!strcmp(a, "--stats")) {
            stats = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        } else {
            file = a;
        }
    }
    int in = 0;
    if (file && strcmp(file, "-") && (in = open(file, O_RDONLY)) < 0) {
        perror(file);
        return 2;
    }
    o.cap = 1 << 20;
    o.buf = malloc(o.cap);
    size_t cap = 1 << 20, have = 0;
    char *buf = malloc(cap);
    if (!o.buf || !buf)
        return 1;
    p.emit = xd_emit;
    p.emit_ctx = &o;
    dedup_extsort *es;
    dedup_status s = dedup_extsort_create(&p, NULL, &es);
    if (s != DEDUP_OK) {
        fprintf(stderr, "create: %s\n", dedup_strerror(s));
        return 2;
    }
    bool eof = false;
    while (s == DEDUP_OK && !eof) {
        if (have == cap) { /* a record longer than the buffer */
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                return 1;
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(in, buf + have, cap - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            perror("read");
            return 2;
        }
        if (n == 0)
            eof = true;
        have += (size_t)n;
        char *p0 = buf, *end = buf + have;
        while (s == DEDUP_OK) {
            char *nl = memchr(p0, '\n', (size_t)(end - p0));
            if (!nl) {
                if (eof && p0 < end) { /* last record without newline */
                    s = dedup_extsort_push(es, p0, (size_t)(end - p0), NULL, 0,
                                           dedup_hash(p0, (size_t)(end - p0), p.seed));
                    p0 = end;
                }
                break;
            }
            size_t len = (size_t)(nl - p0);
            s = dedup_extsort_push(es, p0, len, NULL, 0, dedup_hash(p0, len, p.seed));
            p0 = nl + 1;
        }
        have = (size_t)(end - p0);
        memmove(buf, p0, have);
    }
    if (s == DEDUP_OK)
        s = dedup_extsort_finish(es);
    int rc = 0;
    if (s == DEDUP_OK && xd_flush(&o))
        s = DEDUP_ERR_CANCELLED;
    if (s != DEDUP_OK) {
        int err;
        const char *dir;
        uint64_t need;
        if (dedup_extsort_io_error(es, &err, &dir, &need))
            fprintf(stderr, "temporary files in %s: %s (needed at least %llu bytes)\n", dir,
                    strerror(err), (unsigned long long)need);
        else if (s == DEDUP_ERR_CANCELLED)
            fprintf(stderr, "output: %s\n", strerror(o.err));
        else
            fprintf(stderr, "%s\n", dedup_strerror(s));
        rc = 1;
    }
    if (stats) {
        dedup_extsort_stats st;
        dedup_extsort_stats_get(es, &st);
        fprintf(stderr,
                "records_in=%llu records_out=%llu distinct=%llu spilled=%d runs=%llu "
                "merge_passes=%llu max_depth=%llu bytes_spilled=%llu bytes_read_back=%llu "
                "peak_memory=%llu\n",
                (unsigned long long)st.records_in, (unsigned long long)st.records_out,
                (unsigned long long)st.distinct, st.spilled, (unsigned long long)st.runs_written,
                (unsigned long long)st.merge_passes, (unsigned long long)st.max_depth,
                (unsigned long long)st.bytes_spilled, (unsigned long long)st.bytes_read_back,
                (unsigned long long)st.peak_memory);
    }
    dedup_extsort_free(es);
    free(buf);
    free(o.buf);
    if (in > 0)
        close(in);
    return rc;
}

#endif
