/* preflight.c - see preflight.h. */
#define _GNU_SOURCE /* O_TMPFILE */
#include "preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Whether the temporary directory can take the engine's files: a nameless
 * file is made and closed again (what the engine will do), so the reason a
 * spill would fail -- missing, not a directory, read-only, no permission --
 * is found before any input is read.  False after printing it. */
bool dd_tmpdir_usable(const char *dir, bool given)
{
    struct stat st;
    int err = 0;
    if (stat(dir, &st) != 0)
        err = errno;
    else if (!S_ISDIR(st.st_mode))
        err = ENOTDIR;
    else {
        int fd = -1;
#ifdef O_TMPFILE
        fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
            err = errno;
#endif
        if (fd < 0 && !err) {
            char path[4096];
            snprintf(path, sizeof path, "%s/dedup-probe.XXXXXX", dir);
            fd = mkstemp(path);
            if (fd < 0)
                err = errno;
            else
                unlink(path);
        }
        if (fd >= 0)
            close(fd);
    }
    if (!err)
        return true;
    if (!given) {
        /* Not asked for: most runs never spill, so a warning, not a refusal. */
        cli_warn("temporary files would go to %s, which cannot hold them: %s; this run fails if "
                 "its keys outgrow memory (give -T/--tmpdir DIR)", dir, strerror(err));
        return true;
    }
    cli_error("-T/--tmpdir %s cannot hold temporary files: %s (a run whose keys do not fit in "
              "memory writes them there; give a writable directory)", dir, strerror(err));
    return false;
}

/* Whether the state file can be written where it is named, before any work:
 * its directory must exist and take a new file. */
bool dd_state_writable(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    struct stat st;
    int err = 0;
    if (stat(dir, &st) != 0)
        err = errno;
    else if (!S_ISDIR(st.st_mode))
        err = ENOTDIR;
    else if (access(dir, W_OK | X_OK) != 0)
        err = errno;
    if (!err)
        return true;
    cli_error("--state %s cannot be saved: %s: %s (checked before reading any input)", path, dir,
              strerror(err));
    return false;
}

