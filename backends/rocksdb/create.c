/*
 * create.c - a store's creation (built whole beside DIR, then renamed into
 * place), its lock (flock on DIR/dedup.lock with the holder's PID) and a
 * new store's random seed (dedup/store.h: "Locking and creation").
 */
#define _GNU_SOURCE /* flock, O_DIRECTORY */
#include "store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void set_why(char *why, size_t cap, const char *fmt, const char *dir, const char *detail)
{
    if (why && cap)
        snprintf(why, cap, fmt, dir, detail ? detail : "");
}

/* ---- the lock -------------------------------------------------------------------- */

#define LOCK_NAME "dedup.lock"

/* flock() on DIR/dedup.lock for the object's life (an open file
 * description's lock: a second open in this process conflicts too), the
 * holder's PID written in it for the message of the next one. */
dedup_status ddr_take_lock(dedup_store *s, char *why, size_t cap)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", s->dir, LOCK_NAME);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        set_why(why, cap, "%s/" LOCK_NAME ": cannot open the store's lock file (%s)", s->dir,
                strerror(errno));
        return DEDUP_ERR_IO;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = {0}, d[64];
        ssize_t r = pread(s->lock_fd, buf, sizeof buf - 1, 0);
        long pid = r > 0 ? strtol(buf, NULL, 10) : 0;
        if (pid > 0)
            snprintf(d, sizeof d, "PID %ld", pid);
        else
            snprintf(d, sizeof d, "another process");
        set_why(why, cap, "%s: in use by %s (its lock is held); one process at a time", s->dir, d);
        return DEDUP_ERR_IO;
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(s->lock_fd, 0) != 0 || pwrite(s->lock_fd, buf, (size_t)n, 0) != n) {
        set_why(why, cap, "%s/" LOCK_NAME ": cannot write the store's lock file (%s)", s->dir,
                strerror(errno));
        return DEDUP_ERR_IO;
    }
    return DEDUP_OK;
}

/* A new store's seed: 64 random bits from the OS (never 0, which means
 * "as stored"). */
dedup_status ddr_random_seed(uint64_t *seed, const char *dir, char *why, size_t cap)
{
    if (dedup_secret_seed(seed) != DEDUP_OK) {
        set_why(why, cap, "%s: no random seed from the OS (%s)", dir, strerror(errno));
        return DEDUP_ERR_IO;
    }
    return DEDUP_OK;
}

/* ---- creation ------------------------------------------------------------------- */


/* The directory holding 'dir' and the prefix of its creation names,
 * "NAME.dedup-new.", into parent/prefix. */
static void split_dir(const char *dir, char *parent, size_t pcap, char *prefix, size_t xcap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t slash = n;
    while (slash > 0 && dir[slash - 1] != '/')
        slash--;
    if (slash == 0)
        snprintf(parent, pcap, ".");
    else
        snprintf(parent, pcap, "%.*s", (int)(slash > 1 ? slash - 1 : 1), dir);
    snprintf(prefix, xcap, "%.*s.dedup-new.", (int)(n - slash), dir + slash);
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        char f[4200];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(f, sizeof f, "%s/%s", path, e->d_name);
                (void)unlink(f);
            }
        closedir(d);
    }
    (void)rmdir(path);
}

/* Removes the creation directories of runs killed while creating this
 * store: "NAME.dedup-new.PID" beside it whose PID is gone. */
static void remove_stale_creations(const char *parent, const char *prefix)
{
    DIR *d = opendir(parent);
    if (!d)
        return;
    size_t pl = strlen(prefix);
    struct dirent *e;
    char path[4400];
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, pl) != 0)
            continue;
        char *end = NULL;
        long pid = strtol(e->d_name + pl, &end, 10);
        if (pid <= 0 || *end || (kill((pid_t)pid, 0) != 0 && errno != ESRCH) ||
            kill((pid_t)pid, 0) == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        remove_tree(path);
    }
    closedir(d);
}

static void sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* A new store is built whole in "NAME.dedup-new.PID" beside DIR (RocksDB,
 * marker, lock file), synced, then renamed to DIR: a kill at any instant
 * leaves no DIR (or the empty one given) or a complete store, never a
 * half-made one that later runs would refuse.  If another process renamed
 * its own first, this one's is removed and DIR opened as it is. */
dedup_status ddr_create_store(const dedup_store_params *p, const dedup_allocator *alloc,
                              char *why, size_t cap)
{
    char parent[4096], prefix[1024], tmp[4200];
    split_dir(p->dir, parent, sizeof parent, prefix, sizeof prefix);
    remove_stale_creations(parent, prefix);
    snprintf(tmp, sizeof tmp, "%s/%s%ld", parent, prefix, (long)getpid());
    remove_tree(tmp);
    if (mkdir(tmp, 0755) != 0) {
        set_why(why, cap, "%s: cannot create the store's directory beside it (%s)", p->dir,
                strerror(errno));
        return DEDUP_ERR_IO;
    }
    dedup_store *s = NULL;
    dedup_status st = ddr_open_dir(p, alloc, tmp, true, &s, why, cap);
    if (st == DEDUP_OK) {
        dedup_store_free(s);
        sync_path(tmp);
        if (rename(tmp, p->dir) == 0) {
            sync_path(parent);
            return DEDUP_OK;
        }
        if (errno != ENOTEMPTY && errno != EEXIST) {
            char d[300];
            snprintf(d, sizeof d, "%s", strerror(errno));
            set_why(why, cap, "%s: cannot create the store (rename: %s)", p->dir, d);
            st = DEDUP_ERR_IO;
        }
    }
    remove_tree(tmp);
    return st;
}

