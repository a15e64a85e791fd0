/*
 * key_header.h - --header for the subcommands that read keys through the
 * feeder (split, count): the first input's header compiles the key spec,
 * every later input's must be the same; and a record without a key stops
 * the command, named by file and line.
 */
#ifndef DEDUP_CLI_KEY_HEADER_H
#define DEDUP_CLI_KEY_HEADER_H

#include <stdbool.h>
#include <stdint.h>

#include "feeder.h"
#include "keys.h"

typedef struct dd_key_header {
    dd_keyspec *key;       /* compiled from the first header */
    const char *cmd;       /* for messages */
    const char *file;      /* the input being read (set before its feeder opens) */
    unsigned char *hdr;    /* the first header's bytes */
    size_t len;
    const char *first;     /* the input it came from */
    bool seen, failed;
    uint64_t lines;        /* lines of the current input before its next block */
    uint64_t skipped;      /* records without a key skipped */
} dd_key_header;

/* The feeder's header callback (dd_feeder_opts.header) with ctx a
 * dd_key_header. */
const dedup_key *dd_key_header_cb(void *ctx, const unsigned char *rec, size_t len);

/* Says which record of block b has no key (file and line) and returns
 * false; true when every record has one.  Counts b's lines into h->lines. */
bool dd_key_header_block_ok(dd_key_header *h, const dd_block *b, unsigned char term);

/* The same, except that with 'skip' a record without a key is counted in
 * h->skipped instead: returns how many records have keys (their indexes in
 * good[], when not NULL), or SIZE_MAX after the error. */
size_t dd_key_header_filter(dd_key_header *h, const dd_block *b, unsigned char term, bool skip,
                            size_t *good);

void dd_key_header_free(dd_key_header *h);

/* A block's records that have keys, compacted (dedup/key.h's per-record
 * errors leave some without). */
typedef struct dd_keyed_block {
    dd_block b;
    size_t cap, *good;
    bool nomem;
} dd_keyed_block;

/* The block's records that have keys: blk itself when all have, else
 * compacted into *k's arrays (valid until the next call); NULL after an
 * error (a record without a key and no 'skip': named; or k->nomem). */
const dd_block *dd_keyed_only(dd_keyed_block *k, dd_key_header *kh, const dd_block *blk,
                              unsigned char term, bool skip);
void dd_keyed_free(dd_keyed_block *k);

#endif
