/*
 * state.c - the state container (dedup/state.h): a seen-set file nested in
 * a container whose params hold an identity.
 */
#include <string.h>

#include "dedup/state.h"

#include "internal.h"

/* The identity params: u32 version, u32 text length, the text. */
#define IDENT_VERSION 1u
#define IDENT_PREFIX 8u

/* The identity in params p[0..len): false when it is not one this version
 * writes (a length that disagrees, bytes that are not printable). */
static dedup_status parse_identity(const unsigned char *p, uint32_t len, char *ident, size_t cap)
{
    if (len < IDENT_PREFIX)
        return DEDUP_ERR_CORRUPT;
    if (dedup_get_u32(p) != IDENT_VERSION)
        return DEDUP_ERR_VERSION;
    uint32_t t = dedup_get_u32(p + 4);
    if (t != len - IDENT_PREFIX || t == 0 || t > DEDUP_STATE_IDENT_MAX)
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
static dedup_status reader_open(const dedup_allocator *a, const char *path, bool wrapped,
                                char *ident, size_t identcap, state_reader **out)
{
    *out = NULL;
    state_reader *r = ddi_malloc(a, sizeof *r);
    if (!r)
        return DEDUP_ERR_NOMEM;
    dedup_status st = dedup_file_source_open(&r->f, path, &r->src);
    if (st) {
        ddi_free(a, r);
        return st;
    }
    if (wrapped) {
        st = dedup_decoder_begin(&r->d, r->src, DEDUP_TYPE_STATE);
        if (!st)
            st = parse_identity(r->d.params, r->d.header.params_len, ident, identcap);
    }
    if (st) {
        dedup_file_source_close(&r->f);
        ddi_free(a, r);
        return st;
    }
    *out = r;
    return DEDUP_OK;
}

static void reader_close(const dedup_allocator *a, state_reader *r)
{
    dedup_file_source_close(&r->f);
    ddi_free(a, r);
}

dedup_status dedup_state_peek(const char *path, dedup_header *inner, bool *has_ident, char *ident,
                              size_t identcap)
{
    *has_ident = false;
    if (ident && identcap)
        ident[0] = '\0';
    dedup_status st = dedup_peek_file(path, inner);
    if (st || inner->type != DEDUP_TYPE_STATE)
        return st;
    dedup_allocator a;
    ddi_allocator_resolve(&a, NULL);
    state_reader *r;
    st = reader_open(&a, path, true, ident, identcap, &r);
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
        dedup_decoder *hd = ddi_malloc(&a, sizeof *hd);
        if (!hd)
            st = DEDUP_ERR_NOMEM;
        else {
            st = dedup_decoder_begin(hd, dedup_mem_source_init(&ms, h, sizeof h), 0);
            if (st == DEDUP_ERR_TRUNCATED || !st) { /* only the header is here */
                st = DEDUP_OK;
                *inner = hd->header;
            }
            ddi_free(&a, hd);
        }
    }
    reader_close(&a, r);
    if (!st)
        *has_ident = true;
    return st;
}

static dedup_status load_seen(dedup_state_loader loader, dedup_source src, uint16_t type,
                              const dedup_allocator *alloc, dedup_seen **out)
{
    if (loader)
        return loader(src, type, alloc, out);
    return dedup_seen_load(src, alloc, out);
}

dedup_status dedup_state_load(const char *path, const dedup_allocator *alloc,
                              dedup_state_loader loader, dedup_seen **out, bool *has_ident,
                              char *ident, size_t identcap)
{
    *out = NULL;
    *has_ident = false;
    if (ident && identcap)
        ident[0] = '\0';
    /* The nested header first: its type chooses the loader. */
    dedup_header inner;
    bool wrapped;
    dedup_status st = dedup_state_peek(path, &inner, &wrapped, NULL, 0);
    if (st)
        return st;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    state_reader *r;
    st = reader_open(&a, path, wrapped, ident, identcap, &r);
    if (st)
        return st;
    dedup_seen *s = NULL;
    if (!wrapped) {
        st = load_seen(loader, r->src, inner.type, alloc, &s);
    } else {
        nested_in *ni = ddi_malloc(&a, sizeof *ni);
        if (!ni) {
            st = DEDUP_ERR_NOMEM;
        } else {
            ni->d = &r->d;
            ni->pos = ni->len = 0;
            dedup_source ns = {nested_read, nested_remaining, ni};
            st = load_seen(loader, ns, inner.type, alloc, &s);
            if (!st && nested_remaining(ni) != 0)
                st = DEDUP_ERR_TRAILING;
            ddi_free(&a, ni);
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
    reader_close(&a, r);
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
    unsigned char params[IDENT_PREFIX + DEDUP_STATE_IDENT_MAX];
    if (t == 0 || t > DEDUP_STATE_IDENT_MAX)
        return DEDUP_ERR_INVALID_ARG;
    for (size_t i = 0; i < t; i++)
        if ((unsigned char)c->ident[i] < 0x20 || (unsigned char)c->ident[i] > 0x7e)
            return DEDUP_ERR_INVALID_ARG;
    dedup_put_u32(params, IDENT_VERSION);
    dedup_put_u32(params + 4, (uint32_t)t);
    memcpy(params + IDENT_PREFIX, c->ident, t);
    dedup_allocator a;
    ddi_allocator_resolve(&a, NULL);
    dedup_encoder *e = ddi_malloc(&a, sizeof *e);
    if (!e)
        return DEDUP_ERR_NOMEM;
    dedup_status st = dedup_encoder_begin(e, *sink, DEDUP_TYPE_STATE, dedup_seen_seed(c->s), params,
                                          (uint32_t)(IDENT_PREFIX + t), c->inner_len);
    nested_out *no = st ? NULL : ddi_malloc(&a, sizeof *no);
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
    if (no)
        ddi_free(&a, no);
    if (!st)
        st = dedup_encoder_end(e);
    ddi_free(&a, e);
    return st;
}

dedup_status dedup_state_save(const dedup_seen *s, const char *path, const char *ident)
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

