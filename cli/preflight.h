/*
 * preflight.h - what the main job checks before it reads any input, so that
 * an error found only after all the work (a state that cannot be saved, a
 * temporary directory that takes no file) is found first, with its reason.
 */
#ifndef DEDUP_CLI_PREFLIGHT_H
#define DEDUP_CLI_PREFLIGHT_H

#include <stdbool.h>

/* Whether 'dir' can take the external engine's temporary files: one nameless
 * file is made and closed again.  When it cannot, prints the reason: an
 * error when the user gave the directory ('given'; returns false), a
 * warning otherwise (returns true: most runs never spill). */
bool dd_tmpdir_usable(const char *dir, bool given);
/* Whether the state file 'path' can be saved: its directory exists and
 * takes files.  Prints the reason and returns false when not. */
bool dd_state_writable(const char *path);

#endif
