/* filecheck.c - whether an input file stayed put (see filecheck.h). */
#define _POSIX_C_SOURCE 200809L
#include "filecheck.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static bool unchanged(const cli_infile *f)
{
    const char *name = f->name;
    uint64_t size = f->size;
    const struct timespec *mtime = &f->mtime;
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        cli_error("%s: %s (checking that it did not change while it was read)", name,
                  strerror(errno));
        return false;
    }
    if ((uint64_t)st.st_size != size) {
        cli_error("%s: the file changed while it was being read (%llu bytes, then %llu): the "
                  "output may be wrong; run again on a file that stays put",
                  name, (unsigned long long)size, (unsigned long long)st.st_size);
        return false;
    }
    if (st.st_mtim.tv_sec != mtime->tv_sec || st.st_mtim.tv_nsec != mtime->tv_nsec) {
        cli_error("%s: the file was modified while it was being read: the output may be wrong; "
                  "run again on a file that stays put",
                  name);
        return false;
    }
    return true;
}

bool cli_infiles_unchanged(const cli_infile *f, int n, int i)
{
    if (i >= 0)
        return unchanged(&f[i]);
    for (int j = 0; j < n; j++)
        if (!unchanged(&f[j]))
            return false;
    return true;
}
