/* outfile.c - a named output, renamed into place at the end (outfile.h). */
#define _GNU_SOURCE /* O_NOFOLLOW, realpath */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "io.h"

#define TMP_TAG ".dedup-tmp-"
#define PARTIAL_TAG ".partial-"
#define SUFFIX_LEN 6
/* Room after the target's name for the longer tag and the suffix. */
#define TAG_ROOM (sizeof TMP_TAG - 1 + SUFFIX_LEN)
#define HASH_LEN 9 /* '~' and 8 hex digits */

/* "DIR/NAME" + tag + suffix, NAME being the target's own name, or when it
 * is too long for the tag and suffix to follow it within NAME_MAX, its
 * first bytes, '~' and 8 hex digits of a hash of all of it (so two long
 * names that share their first bytes still differ).  Malloc'd, or NULL. */
static char *with_tag(const char *path, const char *tag, const char *suffix)
{
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0, blen = strlen(path + dlen);
    bool hashed = blen + TAG_ROOM > NAME_MAX;
    size_t keep = hashed ? NAME_MAX - TAG_ROOM - HASH_LEN : blen;
    size_t n = dlen + keep + HASH_LEN + strlen(tag) + strlen(suffix) + 1;
    char *out = malloc(n);
    if (!out)
        return NULL;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *c = path + dlen; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    if (hashed)
        snprintf(out, n, "%.*s~%08x%s%s", (int)(dlen + keep), path, (unsigned)h, tag, suffix);
    else
        snprintf(out, n, "%s%s%s", path, tag, suffix);
    return out;
}

/* ---- The temporaries the signal handler removes ---------------------------
 * A few slots (the -o output, --late), set and cleared with the signals
 * blocked on the thread that opens and commits. */
#define MAX_OPEN 4
static char *volatile open_tmp[MAX_OPEN];
static volatile sig_atomic_t at_once_mode;

static void on_signal(int sig)
{
    dd_stop_signal = sig;
    if (!at_once_mode)
        return;
    int saved = errno;
    for (int i = 0; i < MAX_OPEN; i++) {
        char *p = open_tmp[i];
        if (p)
            (void)unlink(p);
    }
    errno = saved;
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns: the process ends by it */
}

void dd_out_signals(bool at_once)
{
    at_once_mode = at_once;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

static void block_signals(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

static void track(char *tmp, bool on)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (on ? open_tmp[i] == NULL : open_tmp[i] == tmp) {
            open_tmp[i] = on ? tmp : NULL;
            return;
        }
}

/* ---- Inputs that are the output ------------------------------------------ */

bool dd_outfile_check_inputs(const char *cmd, const char *output, char *const *files, int nfiles)
{
    struct stat out;
    if (!output || strcmp(output, "-") == 0 || stat(output, &out) != 0 || S_ISCHR(out.st_mode))
        return true;
    for (int i = 0; i < nfiles; i++) {
        bool in = strcmp(files[i], "-") == 0;
        struct stat st;
        if ((in ? fstat(STDIN_FILENO, &st) : stat(files[i], &st)) != 0)
            continue; /* the input's own check names it */
        if (st.st_dev != out.st_dev || st.st_ino != out.st_ino)
            continue;
        const char *name = in ? "(standard input)" : files[i];
        if (in || strcmp(files[i], output) != 0)
            cli_error("%s%s'%s' (-o) is the input %s (the same file): it would be replaced "
                      "by the output before it is read; write the output elsewhere",
                      cmd ? cmd : "", cmd ? ": " : "", output, name);
        else
            cli_error("%s%s'%s' is both an input and the output (-o): it would be replaced "
                      "by the output before it is read; write the output elsewhere",
                      cmd ? cmd : "", cmd ? ": " : "", output);
        return false;
    }
    return true;
}

/* Whether a and b name one file: the same device and inode, or, when
 * neither exists yet, the same name in the same directory. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea || eb)
        return ea && eb && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *a1 = strdup(a), *a2 = strdup(a), *b1 = strdup(b), *b2 = strdup(b);
    bool same = false;
    if (a1 && a2 && b1 && b2 && strcmp(basename(a2), basename(b2)) == 0)
        same = stat(dirname(a1), &sa) == 0 && stat(dirname(b1), &sb) == 0 &&
               sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    free(a1);
    free(a2);
    free(b1);
    free(b2);
    return same;
}

static bool is_stream(const char *path)
{
    struct stat st;
    return strcmp(path, "-") == 0 || (stat(path, &st) == 0 && S_ISCHR(st.st_mode));
}

bool dd_outfile_check_other(const char *a, const char *a_what, const char *b, const char *b_what)
{
    if (!a || !b || is_stream(a) || is_stream(b) || !same_file(a, b))
        return true;
    cli_error("'%s' (%s) is also the %s file '%s': one would replace the other; write "
              "one of them elsewhere", a, a_what, b_what, b);
    return false;
}

/* ---- Temporaries of runs that were killed ----------------------------------
 * A run holds an exclusive flock on its temporary for as long as it lives,
 * so a temporary beside the target that nobody holds was left by a run that
 * was killed (SIGKILL, a power loss).  Its records may have keys already
 * recorded in a store or in Redis, which would never be written out again:
 * it is kept as "TARGET.partial-XXXXXX" (its own suffix), and said. */
static void keep_stale(const char *dir, const char *name, const char *path)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s/%s", dir, name) >= (int)sizeof tmp)
        return;
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd); /* held: a live run's */
        return;
    }
    char *kept = NULL;
    if (st.st_size == 0) {
        (void)unlink(tmp);
    } else if ((kept = with_tag(path, PARTIAL_TAG, name + strlen(name) - SUFFIX_LEN)) &&
               link(tmp, kept) == 0) {
        (void)unlink(tmp);
        cli_warn("%s: kept %lld bytes that a run killed earlier had written for '%s' "
                 "(their keys may be recorded in a store or Redis, so they are not written "
                 "out again)", kept, (long long)st.st_size, path);
    }
    free(kept);
    close(fd);
}

static void recover_stale(const char *path, const char *own)
{
    char *d1 = strdup(path), *stem = with_tag(path, TMP_TAG, "");
    if (d1 && stem) {
        const char *dir = dirname(d1), *base = strrchr(stem, '/') ? strrchr(stem, '/') + 1 : stem;
        size_t blen = strlen(base);
        const char *own_base = strrchr(own, '/') ? strrchr(own, '/') + 1 : own;
        DIR *dh = opendir(dir);
        struct dirent *e;
        while (dh && (e = readdir(dh)) != NULL) {
            if (strlen(e->d_name) == blen + SUFFIX_LEN && memcmp(e->d_name, base, blen) == 0 &&
                strcmp(e->d_name, own_base) != 0)
                keep_stale(dir, e->d_name, path);
        }
        if (dh)
            closedir(dh);
    }
    free(d1);
    free(stem);
}

/* ---- Opening, committing, aborting ----------------------------------------- */

static void random_suffix(char *out)
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[SUFFIX_LEN];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        uint64_t x = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
        for (int i = 0; i < SUFFIX_LEN; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            r[i] = (unsigned char)(x >> 56);
        }
    }
    for (int i = 0; i < SUFFIX_LEN; i++)
        out[i] = abc[r[i] % (sizeof abc - 1)];
    out[SUFFIX_LEN] = '\0';
}

/* The file to replace: the target, or the file its symbolic link names. */
static char *resolve(const char *output)
{
    struct stat lst;
    if (lstat(output, &lst) == 0 && S_ISLNK(lst.st_mode))
        return realpath(output, NULL); /* NULL (ENOENT): a link to nothing */
    return strdup(output);
}

/* The message of an output that cannot be opened. */
static void cannot(const char *cmd, const char *output, const char *why)
{
    if (cmd)
        cli_error("%s: cannot write '%s': %s", cmd, output, why);
    else
        cli_error("%s: %s", output, why);
}

int dd_outfile_open(dd_outfile *o, const char *cmd, const char *output)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    if (!output || strcmp(output, "-") == 0) {
        o->fd = STDOUT_FILENO;
        o->name = "(standard output)";
        o->is_stdout = true;
        return 0;
    }
    o->name = output;
    o->path = resolve(output);
    if (!o->path) {
        cannot(cmd, output, errno == ENOENT ? "a symbolic link to nothing" : strerror(errno));
        return CLI_EXIT_USAGE;
    }
    struct stat st;
    bool exists = stat(o->path, &st) == 0;
    if (!exists && errno != ENOENT) {
        cannot(cmd, output, strerror(errno));
        goto fail;
    }
    if (exists && S_ISDIR(st.st_mode)) {
        cannot(cmd, output, strerror(EISDIR));
        goto fail;
    }
    if (exists && !S_ISREG(st.st_mode)) { /* a FIFO, /dev/null: in place */
        o->fd = open(o->path, O_WRONLY | O_CLOEXEC);
        if (o->fd < 0) {
            cannot(cmd, output, strerror(errno));
            goto fail;
        }
        return 0;
    }
    sigset_t old;
    block_signals(&old);
    int e = 0;
    for (int tries = 0; tries < 100; tries++) {
        char sfx[SUFFIX_LEN + 1];
        random_suffix(sfx);
        free(o->tmp);
        o->tmp = with_tag(o->path, TMP_TAG, sfx);
        if (!o->tmp) {
            e = ENOMEM;
            break;
        }
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        e = errno;
        if (o->fd >= 0 || e != EEXIST)
            break;
    }
    if (o->fd >= 0)
        track(o->tmp, true);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (o->fd < 0) {
        cannot(cmd, output, strerror(e));
        goto fail;
    }
    (void)flock(o->fd, LOCK_EX); /* held for the run: see recover_stale */
    recover_stale(o->path, o->tmp);
    if (exists) { /* where allowed the target's owner, then its mode (a chown clears set-id bits) */
        if (st.st_uid != geteuid() || st.st_gid != getegid())
            (void)!fchown(o->fd, st.st_uid, st.st_gid);
        (void)fchmod(o->fd, st.st_mode & 07777);
    }
    return 0;
fail:
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    return CLI_EXIT_USAGE;
}

/* Closes the descriptor (not standard output); false after naming a failed close. */
static bool close_out(dd_outfile *o, bool report)
{
    if (o->fd < 0 || o->is_stdout)
        return true;
    int rc = close(o->fd);
    o->fd = -1;
    if (rc != 0 && report) {
        cli_error("write error on %s: %s", o->name, strerror(errno));
        return false;
    }
    return true;
}

/* Forgets the temporary: the handler no longer removes it. */
static void untrack(dd_outfile *o, sigset_t *old)
{
    block_signals(old);
    track(o->tmp, false);
}

int dd_outfile_commit(dd_outfile *o)
{
    if (!close_out(o, true))
        return CLI_EXIT_FAIL;
    if (!o->tmp)
        return 0;
    sigset_t old;
    block_signals(&old);
    int rc = rename(o->tmp, o->path), e = errno;
    if (rc == 0)
        track(o->tmp, false);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        cli_error("cannot rename '%s' to '%s': %s", o->tmp, o->path, strerror(e));
        return CLI_EXIT_FAIL;
    }
    free(o->tmp);
    o->tmp = NULL;
    return 0;
}

void dd_outfile_abort(dd_outfile *o)
{
    (void)close_out(o, false);
    if (!o->tmp)
        return;
    sigset_t old;
    untrack(o, &old);
    (void)unlink(o->tmp);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(o->tmp);
    o->tmp = NULL;
}

const char *dd_outfile_keep_partial(dd_outfile *o)
{
    (void)close_out(o, true);
    struct stat st;
    if (!o->tmp || stat(o->tmp, &st) != 0 || st.st_size == 0) {
        dd_outfile_abort(o);
        return NULL;
    }
    char *name = with_tag(o->path, PARTIAL_TAG, o->tmp + strlen(o->tmp) - SUFFIX_LEN);
    sigset_t old;
    untrack(o, &old);
    if (name) {
        if (link(o->tmp, name) == 0) { /* never over an existing file */
            (void)unlink(o->tmp);
            free(o->tmp);
            o->tmp = name;
            name = NULL;
        }
    }
    free(name);
    o->kept = o->tmp; /* the partial name, or the temporary's when no link could be made */
    o->tmp = NULL;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return o->kept;
}

void dd_outfile_free(dd_outfile *o)
{
    free(o->tmp);
    free(o->path);
    free(o->kept);
    o->tmp = o->path = o->kept = NULL;
}
