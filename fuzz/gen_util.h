/*
 * gen_util.h - shared by the corpus generators (fuzz/gen_*_corpus.c): write
 * a seed file into the corpus directory, and serialise a structure into a
 * malloc'd buffer.  The generators are tools run by hand when a format
 * changes; any failure ends them with a message.
 */
#ifndef DEDUP_FUZZ_GEN_UTIL_H
#define DEDUP_FUZZ_GEN_UTIL_H

#include "dedup/format.h"

#include <stdio.h>
#include <stdlib.h>

static const char *gen_dir; /* the corpus directory, from argv[1] */

static void put(const char *name, const unsigned char *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", gen_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

typedef dedup_status (*gen_save_fn)(const void *obj, dedup_sink *sink);

/* obj saved by 'save' into a new buffer of 'size' bytes (its serialized
 * size); *len gets the bytes written. */
static unsigned char *gen_saved(gen_save_fn save, const void *obj, size_t size, size_t *len)
{
    unsigned char *buf = malloc(size ? size : 1);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, buf, size);
    if (!buf || save(obj, &sink) != DEDUP_OK) {
        fprintf(stderr, "gen: cannot serialise\n");
        exit(1);
    }
    *len = ms.len;
    return buf;
}

#endif
