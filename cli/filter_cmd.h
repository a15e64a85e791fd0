/*
 * filter_cmd.h - what the parts of `dedup filter` share, private to the
 * CLI: cmd_filter.c (help, create, add/query/del, merge, dispatch),
 * filter_files.c (opening and saving filter files, reading items),
 * filter_info.c (info and its output helpers) and filter_verify.c (verify).
 * Every filter is used through the library's seen-set (dedup/seen.h);
 * filter_types.h holds each type's options, help and messages.
 */
#ifndef DEDUP_CLI_FILTER_CMD_H
#define DEDUP_CLI_FILTER_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "dedup/format.h"
#include "dedup/seen.h"
#include "filter_types.h"

/* Items handed to a filter operation at once. */
#define ITEM_BATCH 4096

enum {
    OPT_SEED = 1000,
    OPT_JSON,
    OPT_CRLF,
    OPT_ON_FULL,
    OPT_KNOWN,
    OPT_FRESH,
    OPT_VERSION,
    OPT_EXTRA = 2000 /* + index of a type-specific create option */
};

/* Receives a batch of items; returns false to stop reading. */
typedef bool (*item_fn)(void *ctx, const filter_key *keys, size_t n);

typedef struct item_opts {
    char delim;    /* '\n' or '\0' */
    bool strip_cr; /* --crlf */
} item_opts;

/* The whole of `dedup filter --help`. */
void dd_filter_usage(FILE *f);

/* Handles the options every action accepts; returns -1 if 'c' was not one
 * of them, else the exit status to return. */
int dd_filter_common_option(int c, const char *cmd, char **argv);

/* "dedup: PATH: what is wrong" for a status of the format; 'err' is the
 * errno of an I/O failure. */
void dd_filter_file_error(const char *path, dedup_status s, int err);

/* Reads the header of 'path' and finds its type; prints the error and
 * returns false when it is not a filter file. */
bool dd_filter_peek_type(const char *path, dedup_header *hdr, const filter_type **t);

/* Loads 'path' through the library's seen-set, which validates all of it,
 * and finds its type.  Prints the error and returns false on failure. */
bool dd_filter_load(const char *path, const filter_type **t, dedup_seen **s);

/* Saves atomically; false after naming the file and the cause. */
bool dd_filter_save(const dedup_seen *sn, const char *path);
bool dd_filter_save_error(const char *path, dedup_status s, int err);

/* Reads items from 'fd' ('name' for messages) and passes them to fn in
 * batches.  Returns 0, CLI_EXIT_USAGE on a read error (after a message), or
 * -1 when fn asked to stop. */
int dd_filter_read_items(int fd, const char *name, const item_opts *io, item_fn fn, void *ctx);

/* Items from the arguments ("-" reads standard input there), or all of
 * standard input when there are none.  Same returns as read_items. */
int dd_filter_for_each_item(int nargs, char **args, const item_opts *io, item_fn fn, void *ctx);

/* The actions of their own files: `filter info` and `filter verify`. */
int dd_filter_info(int argc, char **argv);
int dd_filter_verify(int argc, char **argv);

#endif
