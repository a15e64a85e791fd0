/*
 * outfile.h - a named output of the CLI (-o FILE, --late FILE, the parts
 * of `dedup split`): written to a temporary file beside its target and
 * renamed over it only when the run succeeded, so that a failed or
 * interrupted run leaves the previous file as it was and no temporary.
 *
 * The temporary is "TARGET.dedup-tmp-XXXXXX" in the target's directory
 * (TARGET being, for a name too long to take the suffix within NAME_MAX,
 * its first bytes, '~' and 8 hex digits of a hash of the whole name; the
 * same for "TARGET.partial-XXXXXX" below)
 * (a symbolic link as target: beside the file it points to, which is
 * replaced; the link stays).  It is created with O_EXCL | O_NOFOLLOW, with
 * the mode of a new file (0666 less the umask), or the target's mode when
 * the target exists.  A target that exists and is not a regular file (a
 * FIFO, /dev/null, a terminal) is written in place.  Standard output
 * ("-" or no name) is written as it is.
 *
 * A run holds a flock on its temporary; at open, a temporary of the same
 * target that nobody holds (left by a run killed with SIGKILL) is kept as
 * "TARGET.partial-XXXXXX" with a warning, since its records' keys may be
 * recorded in a store or Redis already (an empty one is removed).
 *
 * The signals SIGINT, SIGTERM and SIGHUP (dd_out_signals) set
 * dd_stop_signal, and the run ends at its next check with 128 + the
 * signal; a run that cannot check often (the external engine's merge)
 * asks for 'at_once': the handler then removes every temporary still
 * open and ends the process by that signal.  Not thread-safe: one thread
 * opens, commits and aborts.
 */
#ifndef DEDUP_CLI_OUTFILE_H
#define DEDUP_CLI_OUTFILE_H

#include <stdbool.h>

typedef struct dd_outfile {
    int fd;           /* where to write; -1 once closed */
    const char *name; /* the target as given, or "(standard output)": for messages */
    char *path;       /* the file renamed over (the target, links followed) */
    char *tmp;        /* the temporary, or NULL when written in place */
    char *kept;       /* dd_outfile_keep_partial's file */
    bool is_stdout;
} dd_outfile;

/* Refuses an output that is also one of the inputs 'files' (the same
 * device and inode: the same name, a hard link, a symbolic link; "-" is
 * standard input): false after a message naming it ("CMD: FILE is both an
 * input and the output"), before anything is read or written.  A
 * character device (/dev/null) is never refused.  'output' NULL or "-"
 * (standard output) is never refused either. */
bool dd_outfile_check_inputs(const char *cmd, const char *output, char *const *files,
                             int nfiles);

/* Refuses two files a run writes that are one file: 'a', given as option
 * 'a_what' ("-o", "--late"), and 'b', given as 'b_what' ("--state",
 * "--uncertain"); either NULL when not given.  One file means the same
 * device and inode, or the same name in the same directory when neither
 * exists yet.  False after a message naming both, before anything is read
 * or written.  A character device and "-" are never refused. */
bool dd_outfile_check_other(const char *a, const char *a_what, const char *b, const char *b_what);

/* Opens the output 'output' (NULL or "-": standard output).  0, or
 * CLI_EXIT_USAGE after a message naming it (a directory, a directory that
 * does not take files): "OUTPUT: REASON", or with 'cmd' "CMD: cannot
 * write 'OUTPUT': REASON". */
int dd_outfile_open(dd_outfile *o, const char *cmd, const char *output);

/* Closes the output and renames the temporary over the target.  0, or
 * CLI_EXIT_FAIL after a message (a failed close or rename), the temporary
 * then left for dd_outfile_abort() or dd_outfile_keep_partial().
 * Standard output is left open. */
int dd_outfile_commit(dd_outfile *o);

/* Closes the output and removes the temporary: the target stays as it was.
 * Harmless on an output already committed, aborted, or never opened
 * (zeroed). */
void dd_outfile_abort(dd_outfile *o);

/* Closes the output and keeps what was written, when there is something,
 * under "TARGET.partial-XXXXXX" (the temporary's suffix), whose name it
 * returns (valid until dd_outfile_free): for a run whose keys are already
 * recorded in a store or Redis, whose records would otherwise be lost.
 * NULL when nothing was written (the temporary is removed) or the output
 * was written in place. */
const char *dd_outfile_keep_partial(dd_outfile *o);

/* Frees the names (after commit, abort or keep_partial). */
void dd_outfile_free(dd_outfile *o);

/* Installs the handlers of SIGINT, SIGTERM and SIGHUP (see above). */
void dd_out_signals(bool at_once);

#endif
