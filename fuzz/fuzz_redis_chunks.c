/*
 * fuzz_redis_chunks.c - the Redis module's load paths without Redis.
 *
 * The input is a serialized module value (what BF/CF/DEDUP.SCANDUMP hand
 * out, RDB stores and AOF rewrite emits as LOADCHUNK commands).  It is fed
 * (1) whole to rmf_load(), as RDB and RESTORE do, and (2) to the LOADCHUNK
 * reassembler: the first 88 bytes as the header chunk, the rest in chunks
 * whose sizes come from the input itself.  Whatever loads must then answer
 * queries, take adds, serialize back to the same bytes it was loaded from
 * (for kinds whose state is all in the dump) and free cleanly.
 *
 * The module's sources are compiled in directly (they do not need Redis).
 */
#include "../redis/rm_filter.c"

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
        if (buf && rmf_serialize_range(o, 0, buf, n, &got) == DEDUP_OK && got == n) {
            bool canonical = rmf_obj_kind(o) == RMF_BLOOM ||
                             (rmf_obj_kind(o) == RMF_DEDUP && !rmf_dd_exact(o));
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rmf_config cfg;
    rmf_config_init(&cfg);
    cfg.max_memory = 64u << 20; /* keep the fuzzer's allocations small */

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
