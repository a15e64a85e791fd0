/*
 * state_file.h - the main job's --state FILE: its lock, its identity (the
 * key options it was filled with) and its container.
 *
 * The container itself is the library's (dedup/state.h): dedup_state_peek
 * and dedup_state_save are called directly; loads go through
 * dd_state_load, which also knows the component kinds (roaring).
 */
#ifndef DEDUP_CLI_STATE_FILE_H
#define DEDUP_CLI_STATE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/format.h"
#include "dedup/seen.h"
#include "dedup/state.h"

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
 * Returns false when it does not fit in 'cap' (or DEDUP_STATE_IDENT_MAX). */
struct dd_keyspec;
bool dd_state_identity(const struct dd_keyspec *k, unsigned char term, bool int_keys,
                       const char *mode, char *buf, size_t cap);

/* ---- Files ----------------------------------------------------------------
 * dedup_state_load() with the CLI's component kinds (roaring) known. */
dedup_status dd_state_load(const char *path, const dedup_allocator *alloc, dedup_seen **out,
                           bool *has_ident, char *ident, size_t identcap);

#endif
