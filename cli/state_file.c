/*
 * state_file.c - the --state FILE container, its lock and its identity, and
 * fresh seeds (see state_file.h).
 */
#define _GNU_SOURCE /* getrandom() */
#include "state_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli.h"
#include "keys.h"
#ifdef DEDUP_HAVE_ROARING
#include "dedup/roaring.h"
#endif

/* The identity params: u32 version, u32 text length, the text. */
#define IDENT_VERSION 1u
#define IDENT_PREFIX 8u

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
    if (cap > DD_STATE_IDENT_MAX + 1)
        cap = DD_STATE_IDENT_MAX + 1;
    size_t n = dd_keyspec_describe(k, term, int_keys, buf, cap);
    if (n >= cap)
        return false;
    int m = snprintf(buf + n, cap - n, " mode=%s", mode);
    return m >= 0 && (size_t)m < cap - n;
}

/* The identity in params p[0..len): false when it is not one this version
 * writes (a length that disagrees, bytes that are not printable). */
static dedup_status parse_identity(const unsigned char *p, uint32_t len, char *ident, size_t cap)
{
    if (len < IDENT_PREFIX)
        return DEDUP_ERR_CORRUPT;
    if (dedup_get_u32(p) != IDENT_VERSION)
        return DEDUP_ERR_VERSION;
    uint32_t t = dedup_get_u32(p + 4);
    if (t != len - IDENT_PREFIX || t == 0 || t > DD_STATE_IDENT_MAX)
        return DEDUP_ERR_CORRUPT;
    for (uint32_t i = 0; i < t; i++)
        if (p[IDENT_PREFIX + i] < 0x20 || p[IDENT_PREFIX + i] > 0x7e)
            return DEDUP_ERR_CORRUPT;
    if (ident && cap) {
        size_t c = t < cap - 1 ? t : cap - 1;
        memcpy(ident, p + IDENT_PREFIX, c);
        ident[c] = '\0';
    }
    return DEDUP_OK;
}

/* ---- the nested file, read through the outer decoder ------------------------ */

/* The nested file is read and written in blocks, so that the outer
 * checksum runs over large spans rather than once per key. */
#define NESTED_BLOCK (1u << 16)

typedef struct nested_in {
    dedup_decoder *d;
    size_t pos, len;
    unsigned char buf[NESTED_BLOCK];
} nested_in;

static uint64_t nested_remaining(void *ctx)
{
    nested_in *n = ctx;
    return n->d->header.payload_len - n->d->consumed + (n->len - n->pos);
}

static dedup_status nested_read(void *ctx, void *buf, size_t len)
{
    nested_in *n = ctx;
    if (len > nested_remaining(n))
        return DEDUP_ERR_TRUNCATED;
    unsigned char *out = buf;
    size_t take = n->len - n->pos < len ? n->len - n->pos : len;
    memcpy(out, n->buf + n->pos, take);
    n->pos += take;
    out += take;
    len -= take;
    if (len >= NESTED_BLOCK)
        return dedup_decoder_read(n->d, out, len);
    if (len) {
        uint64_t left = n->d->header.payload_len - n->d->consumed;
        size_t fill = left < NESTED_BLOCK ? (size_t)left : NESTED_BLOCK;
        dedup_status st = dedup_decoder_read(n->d, n->buf, fill);
        if (st)
            return st;
        n->len = fill;
        memcpy(out, n->buf, len);
        n->pos = len;
    }
    return DEDUP_OK;
}

typedef struct nested_out {
    dedup_encoder *e;
    size_t len;
    unsigned char buf[NESTED_BLOCK];
} nested_out;

static dedup_status nested_flush(nested_out *n)
{
    dedup_status st = n->len ? dedup_encoder_write(n->e, n->buf, n->len) : DEDUP_OK;
    n->len = 0;
    return st;
}

static dedup_status nested_write(void *ctx, const void *buf, size_t len)
{
    nested_out *n = ctx;
    if (len > NESTED_BLOCK - n->len) {
        dedup_status st = nested_flush(n);
        if (st)
            return st;
    }
    if (len >= NESTED_BLOCK)
        return dedup_encoder_write(n->e, buf, len);
    memcpy(n->buf + n->len, buf, len);
    n->len += len;
    return DEDUP_OK;
}

/* An open state file: its source and, wrapped, its container's decoder. */
typedef struct state_reader {
    dedup_file_source f;
    dedup_decoder d;
    dedup_source src;
} state_reader;

/* Opens 'path'; 'wrapped': also begins its --state container and parses
 * its identity into ident.  *out is NULL on failure. */
static dedup_status reader_open(const char *path, bool wrapped, char *ident, size_t identcap,
                                state_reader **out)
{
    *out = NULL;
    state_reader *r = malloc(sizeof *r);
    if (!r)
        return DEDUP_ERR_NOMEM;
    dedup_status st = dedup_file_source_open(&r->f, path, &r->src);
    if (st) {
        free(r);
        return st;
    }
    if (wrapped) {
        st = dedup_decoder_begin(&r->d, r->src, DEDUP_TYPE_STATE);
        if (!st)
            st = parse_identity(r->d.params, r->d.header.params_len, ident, identcap);
    }
    if (st) {
        dedup_file_source_close(&r->f);
        free(r);
        return st;
    }
    *out = r;
    return DEDUP_OK;
}

static void reader_close(state_reader *r)
{
    dedup_file_source_close(&r->f);
    free(r);
}

dedup_status dd_state_peek(const char *path, dedup_header *inner, bool *has_ident, char *ident,
                           size_t identcap)
{
    *has_ident = false;
    if (ident && identcap)
        ident[0] = '\0';
    dedup_status st = dedup_peek_file(path, inner);
    if (st || inner->type != DEDUP_TYPE_STATE)
        return st;
    state_reader *r;
    st = reader_open(path, true, ident, identcap, &r);
    if (st)
        return st;
    unsigned char h[DEDUP_HEADER_SIZE];
    st = r->d.header.payload_len < sizeof h ? DEDUP_ERR_TRUNCATED
                                            : dedup_decoder_read(&r->d, h, sizeof h);
    if (!st) {
        /* The nested header, validated by the library's decoder over just
         * these 40 bytes: it then stops at the params it lacks (TRUNCATED)
         * with the header parsed. */
        dedup_mem_source ms;
        dedup_decoder *hd = malloc(sizeof *hd);
        if (!hd)
            st = DEDUP_ERR_NOMEM;
        else {
            st = dedup_decoder_begin(hd, dedup_mem_source_init(&ms, h, sizeof h), 0);
            if (st == DEDUP_ERR_TRUNCATED || !st) { /* only the header is here */
                st = DEDUP_OK;
                *inner = hd->header;
            }
            free(hd);
        }
    }
    reader_close(r);
    if (!st)
        *has_ident = true;
    return st;
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
    *out = NULL;
    *has_ident = false;
    if (ident && identcap)
        ident[0] = '\0';
    /* The nested header first: its type chooses the loader. */
    dedup_header inner;
    bool wrapped;
    dedup_status st = dd_state_peek(path, &inner, &wrapped, NULL, 0);
    if (st)
        return st;
    state_reader *r;
    st = reader_open(path, wrapped, ident, identcap, &r);
    if (st)
        return st;
    dedup_seen *s = NULL;
    if (!wrapped) {
        st = load_seen(r->src, inner.type, alloc, &s);
    } else {
        nested_in *ni = malloc(sizeof *ni);
        if (!ni) {
            st = DEDUP_ERR_NOMEM;
        } else {
            ni->d = &r->d;
            ni->pos = ni->len = 0;
            dedup_source ns = {nested_read, nested_remaining, ni};
            st = load_seen(ns, inner.type, alloc, &s);
            if (!st && nested_remaining(ni) != 0)
                st = DEDUP_ERR_TRAILING;
            free(ni);
        }
        if (!st)
            st = dedup_decoder_end(&r->d);
        if (!st && dedup_seen_seed(s) != r->d.header.seed)
            st = DEDUP_ERR_CORRUPT;
        if (!st)
            *has_ident = true;
    }
    if (!st) {
        /* nothing may follow the structure */
        uint64_t left = r->src.remaining(r->src.ctx);
        unsigned char extra;
        if (left == UINT64_MAX)
            left = r->src.read(r->src.ctx, &extra, 1) == DEDUP_OK;
        if (left != 0)
            st = DEDUP_ERR_TRAILING;
    }
    if (st)
        dedup_seen_free(s);
    else
        *out = s;
    reader_close(r);
    return st;
}

/* ---- save --------------------------------------------------------------------- */

typedef struct save_ctx {
    const dedup_seen *s;
    const char *ident;
    uint64_t inner_len;
} save_ctx;

static dedup_status save_wrapped(const void *obj, dedup_sink *sink)
{
    const save_ctx *c = obj;
    size_t t = strlen(c->ident);
    unsigned char params[IDENT_PREFIX + DD_STATE_IDENT_MAX];
    if (t == 0 || t > DD_STATE_IDENT_MAX)
        return DEDUP_ERR_INVALID_ARG;
    dedup_put_u32(params, IDENT_VERSION);
    dedup_put_u32(params + 4, (uint32_t)t);
    memcpy(params + IDENT_PREFIX, c->ident, t);
    dedup_encoder *e = malloc(sizeof *e);
    if (!e)
        return DEDUP_ERR_NOMEM;
    dedup_status st = dedup_encoder_begin(e, *sink, DEDUP_TYPE_STATE, dedup_seen_seed(c->s), params,
                                          (uint32_t)(IDENT_PREFIX + t), c->inner_len);
    nested_out *no = st ? NULL : malloc(sizeof *no);
    if (!st && !no)
        st = DEDUP_ERR_NOMEM;
    if (!st) {
        no->e = e;
        no->len = 0;
        dedup_sink ns = {nested_write, no};
        st = dedup_seen_save(c->s, &ns);
        if (!st)
            st = nested_flush(no);
    }
    free(no);
    if (!st)
        st = dedup_encoder_end(e);
    free(e);
    return st;
}

dedup_status dd_state_save(const dedup_seen *s, const char *path, const char *ident)
{
    if (!ident)
        return dedup_seen_save_file(s, path);
    /* Counted first, so that a set that cannot be saved makes no file. */
    uint64_t n = 0;
    dedup_sink cs = dedup_count_sink_init(&n);
    dedup_status st = dedup_seen_save(s, &cs);
    if (st)
        return st;
    save_ctx c = {s, ident, n};
    return dedup_save_file(path, save_wrapped, &c);
}

