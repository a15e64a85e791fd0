/*
 * rm_envelope.c - the serialized form of a value (the envelope of
 * rm_filter.h and the library containers after it), its validating
 * loader, SCANDUMP's byte ranges and LOADCHUNK's reassembly.  The common
 * header fields are handled here; each kind's fields and blobs by its
 * family's operations (rmf_family_ops, rm_internal.h).
 */
#include "rm_internal.h"

#include "dedup/hash.h"
#include "dedup/limits.h"

#include <string.h>

/* ---- serialization --------------------------------------------------------------- */

/* The operations of each kind, indexed by rmf_kind. */
static const rmf_family_ops *ops_of(rmf_kind kind)
{
    switch (kind) {
    case RMF_BLOOM:
        return &rmf_bf_ops;
    case RMF_CUCKOO:
        return &rmf_cf_ops;
    case RMF_DEDUP:
        return &rmf_dd_ops;
    }
    return NULL;
}

static uint64_t blobs_size(const rmf_obj *o) { return ops_of(o->kind)->blobs_size(o); }

uint64_t rmf_serialized_size(const rmf_obj *o) { return RMF_ENVELOPE_SIZE + blobs_size(o); }

static void envelope_encode(const rmf_obj *o, unsigned char h[RMF_ENVELOPE_SIZE])
{
    memset(h, 0, RMF_ENVELOPE_SIZE);
    memcpy(h, "DDRM", 4);
    h[4] = (unsigned char)o->kind;
    h[5] = RMF_ENVELOPE_VERSION;
    h[6] = o->nonscaling ? 1 : 0;
    dedup_put_u64(h + 8, o->items);
    dedup_put_u64(h + 16, o->deleted);
    dedup_put_u64(h + 24, o->capacity);
    dedup_put_f64(h + 32, o->error_rate);
    dedup_put_u32(h + 40, o->expansion);
    ops_of(o->kind)->encode(o, h);
    dedup_put_u64(h + 72, blobs_size(o));
    dedup_put_u64(h + 80, dedup_hash(h, 80, 0).lo);
}

dedup_status rmf_save(const rmf_obj *o, dedup_sink *sink)
{
    unsigned char h[RMF_ENVELOPE_SIZE];
    envelope_encode(o, h);
    dedup_status s = sink->write(sink->ctx, h, sizeof h);
    return s == DEDUP_OK ? ops_of(o->kind)->save_blobs(o, sink) : s;
}

/* Bytes [off, off+len) through a range sink (dedup/format.h): 'cursor',
 * when given, carries the checksum state from the range before, so a
 * sequence of ranges costs the size of the value, not its square. */
dedup_status rmf_serialize_range(const rmf_obj *o, uint64_t off, void *buf, size_t len,
                                 dedup_range_sink *cursor, size_t *copied)
{
    *copied = 0;
    uint64_t total = rmf_serialized_size(o);
    if (off >= total || len == 0)
        return DEDUP_OK;
    if (len > total - off)
        len = (size_t)(total - off);
    dedup_range_sink local;
    dedup_sink sink = cursor ? dedup_range_sink_next(cursor, off, buf, len)
                             : dedup_range_sink_init(&local, off, buf, len);
    dedup_range_sink *r = cursor ? cursor : &local;
    dedup_status s = rmf_save(o, &sink);
    if (s != DEDUP_OK && s != DEDUP_ERR_CANCELLED)
        return s;
    *copied = r->copied;
    return r->copied == len ? DEDUP_OK : DEDUP_ERR_CORRUPT;
}

/* ---- loading ------------------------------------------------------------------- */

static rmf_err envelope_decode(const unsigned char *h, size_t len, rmf_kind expect,
                               const rmf_config *c, rmf_envelope *e)
{
    if (len != RMF_ENVELOPE_SIZE || memcmp(h, "DDRM", 4) != 0)
        return "ERR invalid header (not a dedup filter dump)";
    if (h[5] < 1 || h[5] > RMF_ENVELOPE_DD_WINDOW || (h[5] == RMF_ENVELOPE_DD_WINDOW && h[4] != RMF_DEDUP))
        return "ERR unsupported dump version";
    e->version = h[5];
    if (dedup_get_u64(h + 80) != dedup_hash(h, 80, 0).lo)
        return "ERR header checksum mismatch";
    e->kind = (rmf_kind)h[4];
    if (e->kind != RMF_BLOOM && e->kind != RMF_DEDUP && e->kind != RMF_CUCKOO)
        return "ERR unknown filter kind in dump";
    if (expect && e->kind != expect)
        return "ERR dump holds another filter kind";
    e->flags = (uint32_t)h[6] | (uint32_t)h[7] << 8;
    e->items = dedup_get_u64(h + 8);
    e->deleted = dedup_get_u64(h + 16);
    e->capacity = dedup_get_u64(h + 24);
    e->error_rate = dedup_get_f64(h + 32);
    e->expansion = dedup_get_u32(h + 40);
    e->bucket_size = dedup_get_u32(h + 44);
    e->aux = dedup_get_u32(h + 48);
    e->nblobs = dedup_get_u32(h + 52);
    e->window_ms = dedup_get_u64(h + 56);
    e->cur_slot = dedup_get_u64(h + 64);
    e->blobs_len = dedup_get_u64(h + 72);
    if (e->capacity < 1 || e->capacity > c->max_capacity)
        return "ERR dump capacity out of range";
    if (e->blobs_len > c->max_memory)
        return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    return ops_of(e->kind)->check(e);
}

static rmf_err load_blobs(dedup_source src, const rmf_envelope *e, const rmf_config *c,
                          const dedup_allocator *a, rmf_obj **out)
{
    rmf_obj *o = rmf_obj_new(e->kind, a);
    if (!o)
        return rmf_err_nomem();
    o->items = e->items;
    o->deleted = e->deleted;
    o->capacity = e->capacity;
    o->error_rate = e->error_rate;
    o->expansion = e->expansion;
    o->nonscaling = e->flags & 1;
    if (o->dd)
        o->dd->window_ms = e->window_ms;
    o->max_memory = c->max_memory;
    uint64_t before = src.remaining ? src.remaining(src.ctx) : UINT64_MAX;
    if (before != UINT64_MAX && before < e->blobs_len) {
        rmf_free(o);
        return "ERR dump truncated";
    }
    rmf_err err = ops_of(e->kind)->load(src, e, c, o);
    if (!err) {
        uint64_t after = src.remaining ? src.remaining(src.ctx) : UINT64_MAX;
        if (before != UINT64_MAX && before - after != e->blobs_len)
            err = "ERR corrupted dump (blob lengths)";
    }
    if (err) {
        rmf_free(o);
        return err;
    }
    *out = o;
    return NULL;
}

rmf_err rmf_load(dedup_source src, rmf_kind expect, const rmf_config *c,
                 const dedup_allocator *a, rmf_obj **out)
{
    *out = NULL;
    unsigned char h[RMF_ENVELOPE_SIZE];
    if (src.read(src.ctx, h, sizeof h) != DEDUP_OK)
        return "ERR dump truncated";
    rmf_envelope e;
    rmf_err err = envelope_decode(h, sizeof h, expect, c, &e);
    if (err)
        return err;
    return load_blobs(src, &e, c, a, out);
}

/* ---- chunked loading ---------------------------------------------------------- */

struct rmf_partial {
    dedup_allocator alloc;
    rmf_kind kind;
    uint64_t total, received;
    unsigned char *data;
};

rmf_err rmf_partial_begin(const void *hdr, size_t len, rmf_kind expect, const rmf_config *c,
                          const dedup_allocator *a, rmf_partial **out)
{
    *out = NULL;
    rmf_envelope e;
    rmf_err err = envelope_decode(hdr, len, expect, c, &e);
    if (err)
        return err;
    rmf_partial *p = rmf_alloc(a, sizeof *p);
    if (!p)
        return rmf_err_nomem();
    memset(p, 0, sizeof *p);
    if (a)
        p->alloc = *a;
    p->kind = e.kind;
    p->total = RMF_ENVELOPE_SIZE + e.blobs_len;
    if (p->total > SIZE_MAX || !(p->data = rmf_alloc(a, (size_t)p->total))) {
        rmf_dealloc(a, p);
        return rmf_err_nomem();
    }
    memcpy(p->data, hdr, RMF_ENVELOPE_SIZE);
    p->received = RMF_ENVELOPE_SIZE;
    *out = p;
    return NULL;
}

rmf_err rmf_partial_append(rmf_partial *p, uint64_t offset, const void *data, size_t len)
{
    /* A last chunk that lost bytes still carries the iterator of the dump's
     * end: it starts after what was received and ends exactly at the end. */
    if (offset > p->received && len <= p->total && offset == p->total - len)
        return "ERR chunk truncated (the last chunk is shorter than its iterator says)";
    if (offset != p->received)
        return "ERR chunk out of order (LOADCHUNK expects the chunks SCANDUMP returned, in order)";
    if (len > p->total - p->received)
        return "ERR chunk goes past the end of the dump";
    if (len)
        memcpy(p->data + p->received, data, len);
    p->received += len;
    return NULL;
}

uint64_t rmf_partial_received(const rmf_partial *p) { return p->received; }
uint64_t rmf_partial_total(const rmf_partial *p) { return p->total; }
const unsigned char *rmf_partial_data(const rmf_partial *p) { return p->data; }

rmf_err rmf_partial_finish(const rmf_partial *p, const rmf_config *c, rmf_obj **out)
{
    *out = NULL;
    if (p->received != p->total)
        return "ERR dump incomplete";
    dedup_mem_source m;
    dedup_source src = dedup_mem_source_init(&m, p->data, (size_t)p->total);
    rmf_err err = rmf_load(src, p->kind, c, p->alloc.malloc_fn ? &p->alloc : NULL, out);
    if (!err && m.pos != m.len) {
        rmf_free(*out);
        *out = NULL;
        return "ERR trailing bytes after the dump";
    }
    return err;
}

size_t rmf_partial_memory_usage(const rmf_partial *p) { return sizeof *p + (size_t)p->total; }

void rmf_partial_free(rmf_partial *p)
{
    if (!p)
        return;
    dedup_allocator a = p->alloc;
    const dedup_allocator *ap = a.malloc_fn ? &a : NULL;
    rmf_dealloc(ap, p->data);
    rmf_dealloc(ap, p);
}
