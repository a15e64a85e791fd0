/*
 * state_file.h - the main job's --state FILE: its lock, its identity (the
 * key options it was filled with) and its container, and the fresh secret
 * seed of every persistent file the command makes.
 *
 * A state file is a container of type DEDUP_TYPE_STATE (docs/FORMAT.md)
 * whose params hold the identity text and whose payload is the whole
 * seen-set file (its own header, params, payload and checksum).  The outer
 * checksum covers the identity and the nested file, so any damage to
 * either is refused.  A bare seen-set file (what versions before the
 * identity wrote, or `dedup filter create`) is read as a state with no
 * identity.
 */
#ifndef DEDUP_CLI_STATE_FILE_H
#define DEDUP_CLI_STATE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/format.h"
#include "dedup/seen.h"

/* Longest identity text kept (params minus the 8-byte prefix). */
#define DD_STATE_IDENT_MAX 1024u

/* ---- Lock -----------------------------------------------------------------
 * One process at a time per state file (and per filter file that `dedup
 * filter add|del` changes): an exclusive fcntl() record lock on
 * "FILE.lock" beside it.  The lock file, not FILE, carries the lock because
 * every save replaces FILE by rename(): a lock on FILE's old inode would
 * not stop a process that opens the new one.  The lock file is never
 * removed (removing it would let two processes lock two different inodes);
 * it holds the pid of its last holder, for people only.  The kernel drops
 * the lock when the process ends, however it ends. */

/* Takes the lock of 'path', or prints "PATH: in use by PID N" (or why the
 * lock file cannot be made) and returns -1.  Returns the lock's descriptor,
 * held until dd_state_unlock() or the process ends. */
int dd_state_lock(const char *path);
void dd_state_unlock(int fd);

/* ---- Identity ---------------------------------------------------------- */

/* The identity text of a run: dd_keyspec_describe()'s text and " mode=M".
 * Returns false when it does not fit in 'cap' (or DD_STATE_IDENT_MAX). */
struct dd_keyspec;
bool dd_state_identity(const struct dd_keyspec *k, unsigned char term, bool int_keys,
                       const char *mode, char *buf, size_t cap);

/* ---- Files ----------------------------------------------------------------
 * dd_state_peek() reads the header of the seen-set 'path' holds (the nested
 * one of a state container) and its identity: *has_ident false and ident ""
 * for a bare seen-set file.  Nothing past the headers is checked; the load
 * checks everything. */
dedup_status dd_state_peek(const char *path, dedup_header *inner, bool *has_ident, char *ident,
                           size_t identcap);

/* Loads 'path' whole (a state container or a bare seen-set file): every
 * header, the identity, the nested file, both checksums, nothing after. */
dedup_status dd_state_load(const char *path, const dedup_allocator *alloc, dedup_seen **out,
                           bool *has_ident, char *ident, size_t identcap);

/* Saves 's' atomically (dedup_save_file) as a state container holding
 * 'ident', or as a bare seen-set file when 'ident' is NULL. */
dedup_status dd_state_save(const dedup_seen *s, const char *path, const char *ident);

/* ---- Seeds ------------------------------------------------------------- */


#endif
