/*
 * rm_envelope.c - the serialized form of a value (the envelope of
 * rm_filter.h and the library containers after it), its validating
 * loader, SCANDUMP's byte ranges and LOADCHUNK's reassembly.
 */
#include "rm_internal.h"

#include "dedup/hash.h"
#include "dedup/limits.h"

#include <string.h>

/* ---- serialization --------------------------------------------------------------- */

static uint64_t blobs_size(const rmf_obj *o)
{
    if (o->cf)
        return dedup_cuckoo_serialized_size(o->cf);
    if (o->kind == RMF_BLOOM)
        return rmf_bf_blobs_size(o);
    if (o->dd->legacy)
        return rmf_ddl_blobs_size(o);
    uint64_t n = 0;
    for (uint32_t i = 0; i < o->dd->nparts; i++)
        n += dedup_window_serialized_size(o->dd->parts[i]);
    return n;
}

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
    if (o->cf) {
        dedup_cuckoo_info ci;
        dedup_cuckoo_get_info(o->cf, &ci);
        dedup_put_u64(h + 8, ci.inserted);
        dedup_put_u64(h + 16, ci.deleted);
        dedup_put_u32(h + 44, ci.bucket_size);
        dedup_put_u32(h + 48, ci.max_kicks);
        dedup_put_u32(h + 52, 1);
    } else if (o->kind == RMF_BLOOM) {
        dedup_put_u32(h + 48, o->schedule);
        dedup_put_u32(h + 52, o->bl_n);
        dedup_put_u64(h + 56, o->bl_last_items);
    } else if (o->dd->legacy) {
        dedup_put_u32(h + 48, o->dd->nlinks);
        dedup_put_u32(h + 52, o->dd->nlinks);
        dedup_put_u64(h + 56, o->dd->window_ms);
        dedup_put_u64(h + 64, o->dd->cur_slot);
    } else {
        h[5] = RMF_ENVELOPE_DD_WINDOW;
        h[6] = o->exact ? 2 : 0;
        dedup_put_u32(h + 48, o->dd->generations);
        dedup_put_u32(h + 52, o->dd->nparts); /* EXACT: its parts, one window each */
        dedup_put_u64(h + 56, o->dd->window_ms);
    }
    dedup_put_u64(h + 72, blobs_size(o));
    dedup_put_u64(h + 80, dedup_hash(h, 80, 0).lo);
}

dedup_status rmf_save(const rmf_obj *o, dedup_sink *sink)
{
    unsigned char h[RMF_ENVELOPE_SIZE];
    envelope_encode(o, h);
    dedup_status s = sink->write(sink->ctx, h, sizeof h);
    if (s == DEDUP_OK && o->cfs)
        return dedup_seen_save(o->cfs, sink);
    if (s == DEDUP_OK && o->kind == RMF_BLOOM)
        return rmf_bf_save_blobs(o, sink);
    if (s == DEDUP_OK && o->dd->legacy)
        return rmf_ddl_save(o, sink);
    for (uint32_t i = 0; s == DEDUP_OK && i < o->dd->nparts; i++)
        s = dedup_window_save(o->dd->parts[i], sink);
    return s;
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

typedef struct envelope {
    unsigned version;
    rmf_kind kind;
    uint32_t flags;
    uint64_t items, deleted, capacity;
    double error_rate;
    uint32_t expansion, bucket_size, aux, nblobs;
    uint64_t window_ms, cur_slot, blobs_len;
} envelope;

static rmf_err envelope_decode(const unsigned char *h, size_t len, rmf_kind expect,
                               const rmf_config *c, envelope *e)
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
    if (e->kind == RMF_BLOOM && e->version == 1) {
        bool ns = e->flags & 1;
        if ((e->flags & ~1u) || e->deleted || e->bucket_size || e->aux || e->window_ms ||
            e->cur_slot)
            return "ERR corrupted dump header";
        if (!(e->error_rate >= DEDUP_MIN_FPR && e->error_rate < 1))
            return "ERR corrupted dump header (error rate)";
        if (e->nblobs != 1 ||
            (ns ? e->expansion != 0
                : (e->expansion < 1 || e->expansion > DEDUP_SCALABLE_MAX_GROWTH)))
            return "ERR corrupted dump header (links)";
    } else if (e->kind == RMF_BLOOM) {
        bool ns = e->flags & 1;
        if ((e->flags & ~1u) || e->deleted || e->bucket_size || e->cur_slot)
            return "ERR corrupted dump header";
        if (!(e->error_rate > 0 && e->error_rate < 1))
            return "ERR corrupted dump header (error rate)";
        if ((e->aux != BF_SCHEDULE_V1 && e->aux != BF_SCHEDULE_V2) || e->nblobs < 1 || e->nblobs > BF_MAX_LINKS ||
            (ns ? (e->expansion != 0 || e->nblobs != 1) : e->expansion < 1))
            return "ERR corrupted dump header (links)";
    } else if (e->kind == RMF_DEDUP && e->version == RMF_ENVELOPE_DD_WINDOW) {
        if ((e->flags != 0 && e->flags != 2) || e->deleted || e->bucket_size || e->expansion ||
            e->cur_slot || e->nblobs < 1 || e->nblobs > RMF_DD_MAX_PARTS ||
            (e->flags == 0 && e->nblobs != 1))
            return "ERR corrupted dump header";
        if (e->aux > DD_MAX_GEN || e->aux < 1 || (e->flags == 0 && e->aux < DD_MIN_GEN))
            return "ERR corrupted dump header (generations)";
        if (!(e->error_rate >= DEDUP_MIN_FPR && e->error_rate < 1))
            return "ERR corrupted dump header (error rate)";
        if (e->window_ms < 1 || e->window_ms > UINT64_C(1) << 50)
            return "ERR corrupted dump header (window)";
    } else if (e->kind == RMF_DEDUP && e->flags == 2) { /* EXACT */
        if (e->deleted || e->bucket_size || e->expansion || e->aux || e->cur_slot ||
            e->nblobs != 1)
            return "ERR corrupted dump header";
        if (!(e->error_rate > 0 && e->error_rate < 1))
            return "ERR corrupted dump header (error rate)";
        if (e->window_ms < 1 || e->window_ms > UINT64_C(1) << 50)
            return "ERR corrupted dump header (window)";
    } else if (e->kind == RMF_DEDUP) {
        if (e->flags || e->deleted || e->bucket_size || e->expansion)
            return "ERR corrupted dump header";
        if (e->aux < DD_MIN_GEN || e->aux > DD_MAX_GEN || e->nblobs != e->aux)
            return "ERR corrupted dump header (generations)";
        if (!(e->error_rate > 0 && e->error_rate < 1) || e->error_rate / e->aux < DEDUP_MIN_FPR)
            return "ERR corrupted dump header (error rate)";
        if (e->window_ms < 1 || e->window_ms > UINT64_C(1) << 50)
            return "ERR corrupted dump header (window)";
    } else {
        if (e->flags || e->window_ms || e->cur_slot || e->nblobs != 1)
            return "ERR corrupted dump header";
        if (e->bucket_size < 1 || e->bucket_size > DEDUP_CUCKOO_MAX_BUCKET_SIZE ||
            e->aux > DEDUP_CUCKOO_MAX_KICKS || e->expansion > DEDUP_CUCKOO_MAX_EXPANSION ||
            !(e->error_rate >= DEDUP_MIN_FPR && e->error_rate < 1))
            return "ERR corrupted dump header (cuckoo shape)";
    }
    return NULL;
}

/* Envelope v1: the library's scalable chain (r = 0.9 over 64 links), whose
 * links become the module's (each through its own validated container). */
static rmf_err load_bloom_v1(dedup_source src, const envelope *e, const rmf_config *c,
                             rmf_obj *o)
{
    dedup_scalable *sb;
    dedup_status s = dedup_scalable_load(src, rmf_obj_allocator(o), &sb);
    if (s != DEDUP_OK)
        return s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : "ERR corrupted filter in dump";
    dedup_scalable_info si;
    dedup_scalable_get_info(sb, &si);
    bool ns = e->flags & 1;
    rmf_err err = NULL;
    if (si.kind != DEDUP_BLOOM_CLASSIC || si.max_links != (ns ? 1u : DEDUP_MAX_CHAIN) ||
        si.growth != (ns ? 1u : e->expansion) ||
        si.tightening != DEDUP_SCALABLE_DEFAULT_TIGHTENING || si.fpr != e->error_rate ||
        si.initial_capacity != e->capacity || si.items != e->items)
        err = "ERR corrupted dump (Bloom filter differs from its header)";
    o->schedule = BF_SCHEDULE_V1;
    for (uint32_t i = 0; !err && i < si.links; i++) {
        const dedup_bloom *l = dedup_scalable_link(sb, i);
        dedup_scalable_link_info li;
        uint64_t n = dedup_bloom_serialized_size(l);
        unsigned char *buf = n <= SIZE_MAX ? rmf_alloc(rmf_obj_allocator(o), (size_t)n) : NULL;
        if (!buf || dedup_scalable_get_link_info(sb, i, &li) != DEDUP_OK) {
            rmf_dealloc(rmf_obj_allocator(o), buf);
            err = rmf_err_nomem();
            break;
        }
        dedup_mem_sink ms;
        dedup_sink sink = dedup_mem_sink_init(&ms, buf, (size_t)n);
        dedup_bloom *b = NULL;
        dedup_mem_source m;
        if (dedup_bloom_save(l, &sink) != DEDUP_OK ||
            dedup_bloom_load(dedup_mem_source_init(&m, buf, ms.len), rmf_obj_allocator(o), &b) !=
                DEDUP_OK)
            err = rmf_err_nomem();
        rmf_dealloc(rmf_obj_allocator(o), buf);
        if (!err)
            err = rmf_bf_push_link(o, b);
        o->bl_last_items = li.items;
    }
    dedup_scalable_free(sb);
    if (!err && rmf_memory_usage(o) > c->max_memory)
        err = "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    return err;
}

/* Envelope v2: one classic Bloom container per link; each must be the link
 * the module would have made (capacity, rate, bits, seed), the older links
 * full, and the counts add up. */
static rmf_err load_bloom_v2(dedup_source src, const envelope *e, const rmf_config *c,
                             rmf_obj *o)
{
    o->schedule = (uint8_t)e->aux; /* a value first saved as v1 keeps its split */
    uint64_t n = e->capacity, full = 0;
    for (uint32_t i = 0; i < e->nblobs; i++) {
        if (i > 0 && __builtin_mul_overflow(n, (uint64_t)e->expansion, &n))
            return "ERR corrupted dump (link capacity)";
        double p = rmf_bf_link_fpr(o->schedule, e->error_rate, o->nonscaling, i);
        uint64_t m = p >= DEDUP_MIN_FPR ? rmf_bf_link_bits(n, p) : 0;
        if (m == 0)
            return "ERR corrupted dump (link shape)";
        if (rmf_memory_usage(o) + m / 8 > c->max_memory)
            return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
        dedup_bloom *b;
        dedup_status s = dedup_bloom_load(src, rmf_obj_allocator(o), &b);
        if (s != DEDUP_OK)
            return s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : "ERR corrupted filter in dump";
        if (dedup_bloom_capacity(b) != n || dedup_bloom_target_fpr(b) != p ||
            dedup_bloom_bits(b) != m || dedup_bloom_seed(b) != DEDUP_DEFAULT_SEED) {
            dedup_bloom_free(b);
            return "ERR corrupted dump (link shape)";
        }
        rmf_err err = rmf_bf_push_link(o, b);
        if (err)
            return err;
        if (i + 1 < e->nblobs)
            full += n;
    }
    if (e->window_ms > n || e->items != full + e->window_ms)
        return "ERR corrupted dump (item counts)";
    o->bl_last_items = e->window_ms;
    return NULL;
}

/* Loads the cuckoo blob and checks it against the envelope. */
static rmf_err load_cuckoo(dedup_source src, const envelope *e, const rmf_config *c,
                           rmf_obj *o)
{
    dedup_status s = rmf_cf_load_seen(o, src);
    if (s != DEDUP_OK)
        return s == DEDUP_ERR_NOMEM ? rmf_err_nomem() : "ERR corrupted filter in dump";
    dedup_cuckoo_info ci;
    dedup_cuckoo_get_info(o->cf, &ci);
    if (ci.bucket_size != e->bucket_size || ci.max_kicks != e->aux ||
        ci.expansion != e->expansion || ci.capacity != e->capacity ||
        ci.inserted != e->items || ci.deleted != e->deleted)
        return "ERR corrupted dump (cuckoo filter differs from its header)";
    if (rmf_memory_usage(o) > c->max_memory)
        return "ERR dump larger than the per-key memory limit (module argument MAX_MEMORY)";
    o->deleted = 0; /* the CF.COMPACT base starts over */
    rmf_cf_set_max_links(o, c);
    return NULL;
}

static rmf_err load_blobs(dedup_source src, const envelope *e, const rmf_config *c,
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
    rmf_err err;
    if (e->kind == RMF_DEDUP) {
        o->exact = e->flags == 2;
        err = e->version == RMF_ENVELOPE_DD_WINDOW ? rmf_dd_load_window(o, src, e->aux, e->nblobs)
              : o->exact ? rmf_ddl_load_exact(src, e->blobs_len, o)
                         : rmf_ddl_load(src, e->nblobs, e->cur_slot, o);
    } else if (e->kind == RMF_CUCKOO) {
        err = load_cuckoo(src, e, c, o);
    } else {
        err = e->version == 1 ? load_bloom_v1(src, e, c, o) : load_bloom_v2(src, e, c, o);
    }
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
    envelope e;
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
    envelope e;
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
