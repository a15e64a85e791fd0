/*
 * filter_files.c - `dedup filter`'s files and items: filter files opened,
 * validated and saved through the seen-set, errors that name the file, and
 * items read from arguments or standard input in large blocks (see
 * filter_cmd.h and cmd_filter.c for what an item is).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "filter_cmd.h"
#include "state_file.h"

/* First size of the stdin buffer; doubled while one item does not fit. */
#define READ_BLOCK (1u << 20)

/* ---- Files -------------------------------------------------------------- */

/* True when the file at 'path' is too short to hold a header but does not
 * even begin like a dedup file: "not a dedup file" says more than
 * "truncated" then. */
static bool short_and_foreign(const char *path)
{
    static const unsigned char magic[8] = {0x89, 'D', 'D', 'P', '\r', '\n', 0x1a, '\n'};
    unsigned char b[8];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t r = read(fd, b, sizeof b);
    close(fd);
    return r >= 0 && (r == 0 || memcmp(b, magic, (size_t)r) != 0);
}

/* "dedup: PATH: what is wrong".  'err' is the errno of an IO failure. */
void dd_filter_file_error(const char *path, dedup_status s, int err)
{
    struct stat st;
    if (s == DEDUP_ERR_TRUNCATED && stat(path, &st) == 0 && st.st_size == 0) {
        cli_error("%s: file is empty (not a dedup file)", path);
        return;
    }
    if (s == DEDUP_ERR_TRUNCATED && short_and_foreign(path))
        s = DEDUP_ERR_BAD_MAGIC;
    switch (s) {
    case DEDUP_ERR_IO:
        cli_error("%s: %s", path, err ? strerror(err) : dedup_strerror(s));
        break;
    case DEDUP_ERR_TRUNCATED:
        cli_error("%s: file is truncated (it ends before the lengths its header declares)", path);
        break;
    case DEDUP_ERR_NOMEM:
        cli_error("%s: out of memory loading the filter", path);
        break;
    default:
        cli_error("%s: %s", path, dedup_strerror(s));
        break;
    }
}

/* Reads the header of 'path' and finds its type's entry.  Prints the
 * error and returns false on failure. */
bool dd_filter_peek_type(const char *path, dedup_header *hdr, const filter_type **t)
{
    errno = 0;
    bool has_ident;
    dedup_status s = dedup_state_peek(path, hdr, &has_ident, NULL, 0); /* a state's filter too */
    if (s) {
        dd_filter_file_error(path, s, errno);
        return false;
    }
    *t = filter_type_by_file_type(hdr->type);
    if (!*t) {
        cli_error("%s: holds a structure of type %s (%u), not a filter 'dedup filter' can "
                  "open",
                  path, dedup_type_name(hdr->type), (unsigned)hdr->type);
        return false;
    }
    return true;
}

/* Loads 'path' through the library's seen-set (dedup/seen.h), which
 * validates all of it (header, params, payload, checksum, nothing after),
 * and finds the type's entry (its options, help and messages). */
bool dd_filter_load(const char *path, const filter_type **t, dedup_seen **s)
{
    dedup_header hdr;
    if (!dd_filter_peek_type(path, &hdr, t))
        return false;
    errno = 0;
    bool has_ident;
    dedup_status st = dd_state_load(path, NULL, s, &has_ident, NULL, 0);
    if (st) {
        dd_filter_file_error(path, st, errno);
        return false;
    }
    return true;
}

bool dd_filter_save_error(const char *path, dedup_status s, int err)
{
    if (s == DEDUP_ERR_IO)
        cli_error("%s: cannot save: %s (the previous file, if any, is unchanged)", path,
                  err ? strerror(err) : dedup_strerror(s));
    else
        cli_error("%s: cannot save: %s", path, dedup_strerror(s));
    return false;
}

bool dd_filter_save(const dedup_seen *sn, const char *path)
{
    /* A --state file changed by 'dedup filter add' or 'del' stays a state
     * with the key options it recorded. */
    dedup_header h;
    bool has_ident = false;
    char ident[DEDUP_STATE_IDENT_MAX + 1];
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        dedup_state_peek(path, &h, &has_ident, ident, sizeof ident))
        has_ident = false;
    errno = 0;
    dedup_status s = dedup_state_save(sn, path, has_ident ? ident : NULL);
    return s ? dd_filter_save_error(path, s, errno) : true;
}

/* ---- Items ----------------------------------------------------------------- */


/* Reads items from 'fd' ('name' for messages) and passes them to fn in
 * batches.  Returns 0, CLI_EXIT_USAGE on a read error (after a message), or
 * -1 when fn asked to stop. */
int dd_filter_read_items(int fd, const char *name, const item_opts *io, item_fn fn, void *ctx)
{
    size_t cap = READ_BLOCK, len = 0, scan = 0, start = 0;
    char *buf = malloc(cap);
    filter_key *batch = malloc(ITEM_BATCH * sizeof *batch);
    size_t nb = 0;
    int rc = 0;
    bool eof = false;
    if (!buf || !batch) {
        cli_error("%s: out of memory", name);
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    while (!eof) {
        if (len == cap) {
            /* The buffer holds one unfinished item: make room. */
            size_t ncap = cap * 2;
            char *nbuf = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nbuf) {
                cli_error("%s: out of memory (an item longer than %zu bytes)", name, cap);
                rc = CLI_EXIT_FAIL;
                goto done;
            }
            buf = nbuf;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            cli_error("%s: read error: %s", name, strerror(errno));
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (r == 0)
            eof = true;
        len += (size_t)r;
        for (;;) {
            char *e = scan < len ? memchr(buf + scan, io->delim, len - scan) : NULL;
            size_t end;
            if (e) {
                end = (size_t)(e - buf);
            } else if (eof && start < len) {
                end = len; /* a last item without terminator */
            } else {
                break;
            }
            size_t ilen = end - start;
            if (io->strip_cr && ilen && buf[end - 1] == '\r')
                ilen--;
            batch[nb].data = buf + start;
            batch[nb].len = ilen;
            if (++nb == ITEM_BATCH) {
                if (!fn(ctx, batch, nb)) {
                    rc = -1;
                    goto done;
                }
                nb = 0;
            }
            start = scan = end + 1;
            if (end == len)
                break;
        }
        /* Hand over what points into buf before moving the tail. */
        if (nb) {
            if (!fn(ctx, batch, nb)) {
                rc = -1;
                goto done;
            }
            nb = 0;
        }
        if (start > len)
            start = len;
        memmove(buf, buf + start, len - start);
        len -= start;
        scan = len;
        start = 0;
    }
done:
    free(buf);
    free(batch);
    return rc;
}

/* Items from the arguments ("-" reads standard input there), or all of
 * standard input when there are none.  Same returns as read_items. */
int dd_filter_for_each_item(int nargs, char **args, const item_opts *io, item_fn fn, void *ctx)
{
    if (nargs == 0)
        return dd_filter_read_items(STDIN_FILENO, "standard input", io, fn, ctx);
    filter_key batch[256];
    size_t nb = 0;
    for (int i = 0; i < nargs; i++) {
        if (strcmp(args[i], "-") == 0) {
            if (nb && !fn(ctx, batch, nb))
                return -1;
            nb = 0;
            int rc = dd_filter_read_items(STDIN_FILENO, "standard input", io, fn, ctx);
            if (rc)
                return rc;
            continue;
        }
        batch[nb].data = args[i];
        batch[nb].len = strlen(args[i]);
        if (++nb == sizeof batch / sizeof batch[0]) {
            if (!fn(ctx, batch, nb))
                return -1;
            nb = 0;
        }
    }
    if (nb && !fn(ctx, batch, nb))
        return -1;
    return 0;
}
