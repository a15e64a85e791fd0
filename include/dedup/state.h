/*
 * dedup/state.h - a seen-set file wrapped with an identity: the container
 * the CLI's --state FILE is, readable and writable by any program.
 *
 * A state file is a container of type DEDUP_TYPE_STATE (docs/FORMAT.md)
 * whose params hold an identity text (for the CLI: the key options the set
 * was filled with, e.g. "keys/1 field=0 delim=00 term=0a mode=exact") and
 * whose payload is the whole seen-set file (its own header, params, payload
 * and checksum).  The outer checksum covers the identity and the nested
 * file, so damage to either is refused.  A bare seen-set file (what
 * dedup_seen_save_file writes, or `dedup filter create`) is read as a state
 * with no identity.
 *
 * Identity: 1 to DEDUP_STATE_IDENT_MAX printable ASCII bytes (0x20-0x7e).
 * The library keeps it and compares nothing; a caller that fills a set from
 * keys it derives (fields, formats) writes how, so that a later run with
 * other key options can refuse the file instead of mixing two key spaces.
 *
 * Errors: those of dedup_peek_file / dedup_seen_load on either container
 * (DEDUP_ERR_IO with errno, MAGIC, VERSION, TRUNCATED, CHECKSUM, CORRUPT,
 * TRAILING...), DEDUP_ERR_CORRUPT for an identity that is not one this
 * version writes or a nested set whose seed is not the container's,
 * DEDUP_ERR_INVALID_ARG for an identity out of range on save.
 *
 * Thread-safety: the calls share nothing; a file being replaced while read
 * is the caller's to prevent (the CLI locks FILE.lock).
 */
#ifndef DEDUP_STATE_H
#define DEDUP_STATE_H

#include "dedup/common.h"
#include "dedup/format.h"
#include "dedup/seen.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest identity text (the params minus their 8-byte prefix). */
#define DEDUP_STATE_IDENT_MAX 1024u

/* Loads a seen-set of structure 'type' from 'src' (for kinds that live in a
 * component, e.g. roaring); NULL in the calls below = dedup_seen_load. */
typedef dedup_status (*dedup_state_loader)(dedup_source src, uint16_t type,
                                           const dedup_allocator *alloc, dedup_seen **out);

/* The header of the seen-set 'path' holds (the nested one of a state) and
 * its identity: *has_ident false and ident "" for a bare seen-set file.
 * Nothing past the headers is checked; the load checks everything.  ident
 * (may be NULL) receives at most identcap - 1 bytes and a NUL; a buffer of
 * DEDUP_STATE_IDENT_MAX + 1 holds every identity. */
dedup_status dedup_state_peek(const char *path, dedup_header *inner, bool *has_ident, char *ident,
                              size_t identcap);

/* Loads 'path' whole (a state container or a bare seen-set file): every
 * header, the identity, the nested file, both checksums, nothing after. */
dedup_status dedup_state_load(const char *path, const dedup_allocator *alloc,
                              dedup_state_loader loader, dedup_seen **out, bool *has_ident,
                              char *ident, size_t identcap);

/* Saves 's' atomically (dedup_save_file: a temporary file, fsync, rename)
 * as a state container holding 'ident', or as a bare seen-set file when
 * 'ident' is NULL.  A set that cannot be saved makes no file. */
dedup_status dedup_state_save(const dedup_seen *s, const char *path, const char *ident);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_STATE_H */
