/*
 * fuzz_state_load.c - dedup_state_peek() and dedup_state_load()
 * (dedup/state.h) on arbitrary bytes, given as a file (the calls take a
 * path): a state container (an identity and a nested seen-set file) or a
 * bare seen-set file.  A load must fail cleanly, or succeed where the peek
 * did, with the same identity, giving a seen-set that answers.
 */
#define _GNU_SOURCE /* memfd_create() */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dedup/state.h"
#include "fuzz_seen_util.h"

static void load(const uint8_t *d, size_t n)
{
    int fd = memfd_create("fuzz_state", MFD_CLOEXEC);
    check(fd >= 0);
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, d + off, n - off);
        check(w > 0);
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    dedup_header h;
    bool has_p = false, has_l = false;
    char id_p[DEDUP_STATE_IDENT_MAX + 1], id_l[DEDUP_STATE_IDENT_MAX + 1];
    dedup_status ps = dedup_state_peek(path, &h, &has_p, id_p, sizeof id_p);
    dedup_seen *s = NULL;
    dedup_status ls = dedup_state_load(path, NULL, NULL, &s, &has_l, id_l, sizeof id_l);
    if (ls != DEDUP_OK) {
        check(s == NULL);
    } else {
        check(ps == DEDUP_OK && has_p == has_l && strcmp(id_p, id_l) == 0);
        dedup_seen_info in;
        dedup_seen_get_info(s, &in);
        check(in.file_type == h.type);
        fuzz_query_one(s, in.seed);
        dedup_seen_free(s);
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_container(data, size, load);
    return 0;
}
