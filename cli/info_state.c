/*
 * info_state.c - `dedup filter info` of the files that are not filters:
 * seen-set state files (exact sets, integer sets, bitmaps, windows...),
 * the roaring component's files, and HyperLogLog sketches.  Each is loaded
 * (so it is validated whole) and described through the seen-set interface
 * or the sketch's own calls.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dedup/hll.h"
#include "dedup/seen.h"
#include "filter_types.h"
#include "state_file.h"



static void describe_seen(const dedup_seen *s, uint32_t type, filter_info_out *o)
{
    dedup_seen_info in;
    dedup_seen_get_info(s, &in);
    info_str(o, "type", "type", dedup_type_name(type));
    info_u64(o, "type_id", "type id", type);
    info_str(o, "kind", "kind", dedup_seen_kind_name(in.kind));
    info_hex(o, "seed", "seed", in.seed);
    info_u64(o, "distinct", in.distinct_exact ? "distinct keys" : "distinct keys (estimate)",
             in.distinct);
    info_bool(o, "distinct_exact", "distinct exact", in.distinct_exact);
    if (in.capacity)
        info_u64(o, "capacity", "capacity", in.capacity);
    if (in.kind == DEDUP_SEEN_BITMAP) { /* the integers it covers: --range to resume it */
        if (o->json) {
            info_u64(o, "range_lo", "range low", in.range_lo);
            info_u64(o, "range_hi", "range high", in.range_hi);
        } else {
            char r[48];
            snprintf(r, sizeof r, "%llu..%llu", (unsigned long long)in.range_lo,
                     (unsigned long long)in.range_hi);
            info_str(o, "range", "range (--range)", r);
        }
    }
    info_bytes(o, "memory_bytes", "memory when loaded", in.memory);
    if (in.distinct)
        info_f64(o, "bytes_per_key", "bytes per key", (double)in.memory / (double)in.distinct);
    info_bool(o, "can_delete", "can delete", in.can_delete);
    info_str(o, "note", "note", "a seen-set state, not a filter: 'dedup filter' only describes it");
}

/* Describes the file at 'path' when it is one of those; false (with *err
 * set when loading failed, DEDUP_OK when it is none of them) otherwise. */
bool dd_info_state(const char *path, const dedup_header *hdr, filter_info_out *o, dedup_status *err)
{
    *err = DEDUP_OK;
    if (hdr->type == DEDUP_TYPE_HLL) {
        dedup_hll *h = NULL;
        errno = 0;
        *err = dedup_hll_load_file(path, NULL, &h);
        if (*err)
            return false;
        double est = dedup_hll_estimate(h), se = dedup_hll_std_error(h);
        info_str(o, "type", "type", "hll");
        info_u64(o, "type_id", "type id", hdr->type);
        info_hex(o, "seed", "seed", dedup_hll_seed(h));
        info_u64(o, "precision", "precision", dedup_hll_precision(h));
        info_u64(o, "registers", "registers", dedup_hll_registers(h));
        info_str(o, "form", "form", dedup_hll_is_sparse(h) ? "sparse" : "dense");
        info_f64(o, "distinct", "distinct keys (estimate)", est);
        info_f64(o, "std_error", "standard error (keys)", est * se);
        info_prob(o, "relative_std_error", "relative standard error", se);
        info_bytes(o, "memory_bytes", "memory when loaded", dedup_hll_memory_usage(h));
        info_str(o, "note", "note", "a HyperLogLog sketch: dedup count --merge combines them");
        dedup_hll_free(h);
        return true;
    }
    dedup_seen *s = NULL;
    bool known = dedup_seen_kind_of_file_type(hdr->type) != 0;
#ifdef DEDUP_HAVE_ROARING
    known = known || hdr->type == DEDUP_TYPE_ROARING;
#endif
    if (!known)
        return false;
    /* a state container or a bare file: 'hdr' is the seen-set's own */
    bool has_ident;
    errno = 0;
    *err = dd_state_load(path, NULL, &s, &has_ident, NULL, 0);
    if (*err)
        return false;
    describe_seen(s, hdr->type, o);
    dedup_seen_free(s);
    return true;
}
