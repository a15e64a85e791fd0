/*
 * state_file.c - the --state FILE's lock and identity, and its loads with
 * the component kinds known (see state_file.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "state_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "keys.h"
#ifdef DEDUP_HAVE_ROARING
#include "dedup/roaring.h"
#endif

/* ---- lock ------------------------------------------------------------------ */

int dd_state_lock(const char *path)
{
    size_t n = strlen(path) + sizeof ".lock";
    char *lp = malloc(n);
    if (!lp) {
        cli_error("%s: out of memory", path);
        return -1;
    }
    snprintf(lp, n, "%s.lock", path);
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        cli_error("%s: cannot make its lock file %s: %s", path, lp, strerror(errno));
        free(lp);
        return -1;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int e = errno;
        struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        if ((e == EAGAIN || e == EACCES) && fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK)
            cli_error("%s: in use by PID %ld (another run holds %s; one run at a time per state "
                      "or filter file)", path, (long)q.l_pid, lp);
        else if (e == EAGAIN || e == EACCES)
            cli_error("%s: in use by another process (it holds %s)", path, lp);
        else
            cli_error("%s: cannot lock %s: %s", path, lp, strerror(e));
        close(fd);
        free(lp);
        return -1;
    }
    /* For people looking at the file; the lock itself is the kernel's. */
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        cli_info(2, "%s: could not write the pid into it: %s", lp, strerror(errno));
    free(lp);
    return fd;
}

void dd_state_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* ---- identity --------------------------------------------------------------- */

bool dd_state_identity(const dd_keyspec *k, unsigned char term, bool int_keys, const char *mode,
                       char *buf, size_t cap)
{
    if (cap > DEDUP_STATE_IDENT_MAX + 1)
        cap = DEDUP_STATE_IDENT_MAX + 1;
    size_t n = dd_keyspec_describe(k, term, int_keys, buf, cap);
    if (n >= cap)
        return false;
    int m = snprintf(buf + n, cap - n, " mode=%s", mode);
    return m >= 0 && (size_t)m < cap - n;
}

/* Loads the seen-set 'src' holds: roaring by its own loader, every other
 * kind through the seen-set's dispatch. */
static dedup_status load_seen(dedup_source src, uint16_t type, const dedup_allocator *alloc,
                              dedup_seen **out)
{
#ifdef DEDUP_HAVE_ROARING
    if (type == DEDUP_TYPE_ROARING)
        return dedup_roaring_seen_load(src, alloc, out);
#else
    (void)type;
#endif
    return dedup_seen_load(src, alloc, out);
}

dedup_status dd_state_load(const char *path, const dedup_allocator *alloc, dedup_seen **out,
                           bool *has_ident, char *ident, size_t identcap)
{
    return dedup_state_load(path, alloc, load_seen, out, has_ident, ident, identcap);
}
