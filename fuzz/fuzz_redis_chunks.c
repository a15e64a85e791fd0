/*
 * fuzz_redis_chunks.c - the Redis module's load paths without Redis.
 *
 * An input starting "DDRM" is a serialized module value (what BF/CF/
 * DEDUP.SCANDUMP hand out, RDB stores and AOF rewrite emits as LOADCHUNK
 * commands).  It is fed (1) whole to rmf_load(), as RDB and RESTORE do, and
 * (2) to the LOADCHUNK reassembler: the first 88 bytes as the header chunk,
 * the rest in chunks whose sizes come from the input itself.  Whatever
 * loads must then answer queries, take adds, serialize back to the same
 * bytes it was loaded from (for kinds whose state is all in the dump, in
 * the current envelope version) and free cleanly.
 *
 * RedisBloom's layouts (legacy/rm_redisbloom.h) come in a framing of this file's:
 *   "RBBF" / "RBCF", u32 header length L, the SCANDUMP header (L bytes),
 *     then the arrays, fed as LOADCHUNK chunks sized from the input;
 *   "RBRB" / "RBRC", u8 encoding, then an RDB value read as a stream of
 *     u64 (8 bytes), double (8 bytes) and string (u32 length + bytes).
 * What loads must answer, take adds, dump and reload to the same answers.
 *
 * The module's sources are compiled in directly (they do not need Redis).
 */
#include "../redis/rm_bloom.c"
#include "../redis/rm_cuckoo.c"
#include "../redis/rm_dedup.c"
#include "../redis/legacy/rm_dedup_legacy.c"
#include "../redis/rm_envelope.c"
#include "../redis/rm_obj.c"
#include "../redis/legacy/rm_redisbloom.c"
#include "../redis/rm_mem.c"

#include <stdint.h>

static void exercise(rmf_obj *o, const uint8_t *data, size_t size)
{
    int added;
    rmf_err err;
    char item[8] = "fuzzkey";
    size_t n = rmf_serialized_size(o);
    /* serialize back: the result must load again, and for kinds whose dump
     * is canonical (Bloom, approximate dedup) be the very bytes loaded; a
     * cuckoo or EXACT table may lay out equal contents differently */
    if (n <= size) {
        unsigned char *buf = malloc(n ? n : 1);
        size_t got = 0;
        if (buf && rmf_serialize_range(o, 0, buf, n, NULL, &got) == DEDUP_OK && got == n) {
            bool canonical = data[5] == RMF_ENVELOPE_VERSION &&
                             (rmf_obj_kind(o) == RMF_BLOOM ||
                              (rmf_obj_kind(o) == RMF_DEDUP && !rmf_dd_exact(o)));
            if (canonical && memcmp(buf, data, n) != 0)
                __builtin_trap();
            rmf_config cfg;
            rmf_config_init(&cfg);
            cfg.max_memory = UINT64_MAX;
            cfg.max_capacity = UINT64_MAX;
            cfg.cf_max_expansions = DEDUP_MAX_CHAIN;
            dedup_mem_source m;
            rmf_obj *again = NULL;
            if (rmf_load(dedup_mem_source_init(&m, buf, n), rmf_obj_kind(o), &cfg, NULL, &again))
                __builtin_trap(); /* what we save, we load */
            rmf_free(again);
        }
        free(buf);
    }
    (void)rmf_memory_usage(o);
    switch (rmf_obj_kind(o)) {
    case RMF_BLOOM:
        for (int i = 0; i < 4; i++) {
            item[0] = (char)('a' + i);
            err = rmf_bf_add(o, item, sizeof item, &added);
            if (!err && !rmf_bf_exists(o, item, sizeof item))
                __builtin_trap(); /* a false negative */
        }
        (void)rmf_bf_capacity(o);
        break;
    case RMF_CUCKOO: {
        rmf_cf_info ci;
        rmf_cf_get_info(o, &ci);
        if (!rmf_cf_can_grow(o)) {
            int rc = rmf_cf_add(o, item, sizeof item, false, &err);
            if (rc == 1 && !rmf_cf_exists(o, item, sizeof item))
                __builtin_trap();
            if (rc == 1 && !rmf_cf_del(o, item, sizeof item))
                __builtin_trap();
        }
        (void)rmf_cf_count(o, item, sizeof item);
        break;
    }
    case RMF_DEDUP: {
        int is_new;
        uint64_t now = rmf_dd_slot_ms(o) * 3;
        if (rmf_dd_add(o, item, sizeof item, now, &is_new) == NULL &&
            !rmf_dd_exists(o, item, sizeof item, now))
            __builtin_trap();
        (void)rmf_dd_current_fpr(o, now);
        break;
    }
    }
    rmf_obj *c = rmf_copy(o);
    rmf_free(c);
}

/* ---- RedisBloom layouts ------------------------------------------------------- */

typedef struct mem_io {
    const uint8_t *p;
    size_t n, pos;
    int err;
    unsigned char *out; /* save: a growing buffer */
    size_t olen, ocap;
} mem_io;

static int io_take(mem_io *m, void *dst, size_t n)
{
    if (m->err || n > m->n - m->pos) {
        m->err = 1;
        return 0;
    }
    memcpy(dst, m->p + m->pos, n);
    m->pos += n;
    return 1;
}
static uint64_t io_u64(void *c)
{
    unsigned char b[8] = {0};
    io_take(c, b, 8);
    return dedup_get_u64(b);
}
static double io_dbl(void *c)
{
    unsigned char b[8] = {0};
    io_take(c, b, 8);
    return dedup_get_f64(b);
}
static char *io_buf(void *c, size_t *len)
{
    unsigned char b[4];
    if (!io_take(c, b, 4))
        return NULL;
    size_t n = dedup_get_u32(b);
    mem_io *m = c;
    if (n > m->n - m->pos) { /* as Redis, which reads what the length says */
        m->err = 1;
        return NULL;
    }
    char *out = malloc(n ? n : 1);
    if (!out || !io_take(c, out, n)) {
        free(out);
        return NULL;
    }
    *len = n;
    return out;
}
static void io_free(void *c, char *b)
{
    (void)c;
    free(b);
}
static int io_err(void *c) { return ((mem_io *)c)->err; }
static void io_put(mem_io *m, const void *p, size_t n)
{
    if (m->olen + n > m->ocap) {
        size_t cap = (m->ocap + n) * 2;
        unsigned char *nb = realloc(m->out, cap);
        if (!nb) {
            m->err = 1;
            return;
        }
        m->out = nb;
        m->ocap = cap;
    }
    memcpy(m->out + m->olen, p, n);
    m->olen += n;
}
static void io_su64(void *c, uint64_t v)
{
    unsigned char b[8];
    dedup_put_u64(b, v);
    io_put(c, b, 8);
}
static void io_sdbl(void *c, double v)
{
    unsigned char b[8];
    dedup_put_f64(b, v);
    io_put(c, b, 8);
}
static void io_sbuf(void *c, const void *p, size_t n)
{
    unsigned char b[4];
    dedup_put_u32(b, (uint32_t)n);
    io_put(c, b, 4);
    io_put(c, p, n);
}

static rb_io mem_rb_io(mem_io *m)
{
    rb_io r = {m, io_u64, io_dbl, io_buf, io_free, io_err, io_su64, io_sdbl, io_sbuf};
    return r;
}

/* A RedisBloom-layout object: queries and adds, then SCANDUMP and RDB round
 * trips that must load again with the same answers. */
static void exercise_rb(rmf_obj *o, const rmf_config *cfg)
{
    char item[8] = "fuzzkey";
    bool bloom = rmf_obj_kind(o) == RMF_BLOOM;
    for (int i = 0; i < 4; i++) {
        item[0] = (char)('a' + i);
        if (bloom) {
            int added;
            if (!rmf_bf_add(o, item, sizeof item, &added) && !rmf_bf_exists(o, item, sizeof item))
                __builtin_trap();
        } else {
            rmf_err err;
            if (rmf_cf_add(o, item, sizeof item, false, &err) == 1 &&
                !rmf_cf_exists(o, item, sizeof item))
                __builtin_trap();
            (void)rmf_cf_count(o, item, sizeof item);
        }
    }
    char line[256];
    if (bloom)
        (void)rmf_bf_debug(o, 1, line, sizeof line);
    else
        rmf_cf_compact(o);
    /* SCANDUMP -> LOADCHUNK */
    size_t hl = rmf_rb_header(o, NULL, 0);
    unsigned char *h = malloc(hl);
    rmf_obj *c = NULL;
    if (h && (rmf_rb_header(o, h, hl), !rmf_rb_begin(rmf_obj_kind(o), h, hl, cfg, NULL, &c))) {
        long long it = 1;
        size_t len;
        const unsigned char *p;
        while ((p = rmf_rb_chunk(o, &it, &len, 1000)) != NULL)
            if (rmf_rb_load_chunk(c, it, p, len))
                __builtin_trap();
        if (rmf_loading(c) || rmf_items(c) != rmf_items(o))
            __builtin_trap();
        for (int i = 0; i < 4; i++) {
            item[0] = (char)('a' + i);
            if (bloom ? rmf_bf_exists(o, item, sizeof item) != rmf_bf_exists(c, item, sizeof item)
                      : rmf_cf_exists(o, item, sizeof item) != rmf_cf_exists(c, item, sizeof item))
                __builtin_trap();
        }
    } else if (h) {
        __builtin_trap(); /* what we dump, we load */
    }
    rmf_free(c);
    free(h);
    /* RDB save -> load */
    mem_io m = {0};
    rb_io r = mem_rb_io(&m);
    rmf_rb_rdb_save(o, &r);
    if (!m.err) {
        mem_io in = {m.out, m.olen, 0, 0, NULL, 0, 0};
        rb_io ri = mem_rb_io(&in);
        c = NULL;
        if (rmf_rb_rdb_load(rmf_obj_kind(o), 4, &ri, cfg, NULL, &c))
            __builtin_trap();
        rmf_free(c);
    }
    free(m.out);
    c = rmf_copy(o);
    rmf_free(c);
}

static void fuzz_redisbloom(const uint8_t *data, size_t size, const rmf_config *cfg)
{
    rmf_kind kind = data[3] == 'F' || data[3] == 'B' ? RMF_BLOOM : RMF_CUCKOO;
    rmf_obj *o = NULL;
    if (data[2] == 'R') { /* RDB */
        if (size < 5)
            return;
        mem_io m = {data + 5, size - 5, 0, 0, NULL, 0, 0};
        rb_io r = mem_rb_io(&m);
        if (!rmf_rb_rdb_load(kind, data[4], &r, cfg, NULL, &o))
            exercise_rb(o, cfg);
        rmf_free(o);
        return;
    }
    if (size < 8)
        return;
    size_t hl = dedup_get_u32(data + 4);
    if (hl > size - 8)
        return;
    if (rmf_rb_begin(kind, data + 8, hl, cfg, NULL, &o))
        return;
    size_t pos = 8 + hl;
    long long it = 1;
    unsigned step = 1;
    rmf_err e = NULL;
    while (pos < size && !e) {
        step = step * 7 + data[pos % size];
        size_t len = 1 + step % 4096;
        if (len > size - pos)
            len = size - pos;
        e = rmf_rb_load_chunk(o, it + (long long)len, data + pos, len);
        if (!e) {
            pos += len;
            it += (long long)len;
        }
    }
    if (!rmf_loading(o))
        exercise_rb(o, cfg);
    rmf_free(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rmf_config cfg;
    rmf_config_init(&cfg);
    cfg.max_memory = 64u << 20; /* keep the fuzzer's allocations small */
    if (size >= 4 && data[0] == 'R' && data[1] == 'B') {
        fuzz_redisbloom(data, size, &cfg);
        return 0;
    }

    /* (1) the whole value, as RDB and RESTORE load it */
    dedup_mem_source m;
    rmf_obj *o = NULL;
    rmf_err e = rmf_load(dedup_mem_source_init(&m, data, size), 0, &cfg, NULL, &o);
    if (!e)
        exercise(o, data, m.pos);
    rmf_free(o);

    /* (2) LOADCHUNK: header chunk, then chunks sized from the input */
    if (size < RMF_ENVELOPE_SIZE)
        return 0;
    rmf_partial *p = NULL;
    if (rmf_partial_begin(data, RMF_ENVELOPE_SIZE, 0, &cfg, NULL, &p))
        return 0;
    size_t pos = RMF_ENVELOPE_SIZE;
    unsigned step = 1;
    while (pos < size && !e) {
        step = step * 7 + data[pos % size];
        size_t len = 1 + step % 4096;
        if (len > size - pos)
            len = size - pos;
        e = rmf_partial_append(p, rmf_partial_received(p), data + pos, len);
        if (!e)
            pos += len;
    }
    /* an out-of-order chunk is always refused */
    if (rmf_partial_append(p, rmf_partial_received(p) + 1, data, 1) == NULL)
        __builtin_trap();
    if (rmf_partial_received(p) == rmf_partial_total(p)) {
        o = NULL;
        if (!rmf_partial_finish(p, &cfg, &o))
            exercise(o, rmf_partial_data(p), (size_t)rmf_partial_total(p));
        rmf_free(o);
    }
    rmf_partial_free(p);
    return 0;
}
