/*
 * filecheck.h - whether an input file stayed put while it was read: the
 * paths that read a regular file twice or keep references into it
 * (byref.h, extref.h) take its size and modification time when they open
 * it and compare them again later.
 */
#ifndef DEDUP_CLI_FILECHECK_H
#define DEDUP_CLI_FILECHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* True when 'fd' (the file 'name') still has 'size' bytes and modification
 * time 'mtime'; else prints an error naming the file and what changed. */
bool cli_file_unchanged(const char *name, int fd, uint64_t size, const struct timespec *mtime);

#endif
