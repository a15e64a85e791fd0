/*
 * filter_bloom.c - `dedup filter` operations for classic and blocked Bloom
 * filters (dedup/bloom.h).  One set of functions serves both layouts; the
 * two table entries at the end differ only in name, file type and kind.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dedup/bloom.h"
#include "filter_types.h"

static const char *kind_flag(dedup_bloom_kind kind)
{
    return kind == DEDUP_BLOOM_BLOCKED ? "blocked" : "bloom";
}

static dedup_seen_kind seen_kind(dedup_bloom_kind kind)
{
    return kind == DEDUP_BLOOM_BLOCKED ? DEDUP_SEEN_BLOCKED : DEDUP_SEEN_BLOOM;
}

/* Builds the filter from any two of -n/-p/-m (or -n alone, p = 1%). */
static int create_kind(dedup_bloom_kind kind, const filter_create_opts *o, dedup_seen **out)
{
    const char *tname = kind_flag(kind);
    char hb[32];
    if (o->nextra) {
        cli_error("filter create: --%s does not apply to --type %s", o->extra[0].name, tname);
        return CLI_EXIT_USAGE;
    }
    uint32_t kmax = kind == DEDUP_BLOOM_BLOCKED ? 16 : DEDUP_MAX_BLOOM_K;
    if (o->has_k && (o->k < 1 || o->k > kmax)) {
        cli_error("filter create: -k/--hashes must be between 1 and %u for --type %s (got %u)",
                  kmax, tname, o->k);
        return CLI_EXIT_USAGE;
    }
    if (o->has_p && o->p < DEDUP_MIN_FPR) {
        cli_error("filter create: -p/--fpr must be at least %g (got %g): below it the "
                  "128-bit digest's own collisions dominate",
                  DEDUP_MIN_FPR, o->p);
        return CLI_EXIT_USAGE;
    }

    dedup_bloom_params bp;
    dedup_bloom_params_init(&bp);
    bp.kind = kind;
    bp.seed = o->seed;
    if (o->has_k)
        bp.k = o->k;

    uint64_t bits = 0;
    if (o->has_m) {
        uint64_t unit = kind == DEDUP_BLOOM_BLOCKED ? 512 : 64;
        if (o->m > DEDUP_MAX_BITS / 8) {
            cli_error("filter create: -m/--memory %s exceeds the limit of %s per filter",
                      cli_human_size(o->m, hb, sizeof hb), "128 GiB (2^40 bits)");
            return CLI_EXIT_USAGE;
        }
        /* Round down so the bit array fits in the memory given. */
        bits = o->m * 8 / unit * unit;
        if (bits == 0) {
            cli_error("filter create: -m/--memory %s is too small for --type %s (at least %u bytes)",
                      cli_human_size(o->m, hb, sizeof hb), tname, (unsigned)(unit / 8));
            return CLI_EXIT_USAGE;
        }
        bp.bits = bits;
    }

    if (o->has_n && o->has_m) {
        bp.capacity = o->n;
        double reached = dedup_seen_fpr_for(seen_kind(kind), o->n, bits, o->has_k ? o->k : 0);
        if (o->has_p) {
            bp.fpr = o->p;
            if (reached > o->p * 1.0001)
                cli_warn("filter create: %s (-m) holds %" PRIu64 " items at a false-positive "
                         "rate of %.4g, above -p %g",
                         cli_human_size(o->m, hb, sizeof hb), o->n, reached, o->p);
        } else {
            if (!(reached < 0.5)) {
                cli_error("filter create: -m/--memory %s is too small for %" PRIu64
                          " items (false-positive rate would be %.3g)",
                          cli_human_size(o->m, hb, sizeof hb), o->n, reached);
                return CLI_EXIT_USAGE;
            }
            bp.fpr = reached < DEDUP_MIN_FPR ? DEDUP_MIN_FPR : reached;
        }
    } else if (o->has_n) {
        bp.capacity = o->n;
        bp.fpr = o->has_p ? o->p : 0.01;
    } else if (o->has_m && o->has_p) {
        uint64_t cap = dedup_seen_capacity_for_size(seen_kind(kind), bits, o->p);
        if (cap == 0) {
            cli_error("filter create: -m/--memory %s cannot hold even one item at -p %g",
                      cli_human_size(o->m, hb, sizeof hb), o->p);
            return CLI_EXIT_USAGE;
        }
        bp.capacity = cap;
        bp.fpr = o->p;
    } else {
        cli_error("filter create: -n/--items is required for --type %s "
                  "(or give both -m/--memory and -p/--fpr)",
                  tname);
        return CLI_EXIT_USAGE;
    }

    if (!bits) {
        uint64_t need = dedup_seen_size_for(seen_kind(kind), bp.capacity, bp.fpr);
        if (need == 0 || need > DEDUP_MAX_BITS) {
            cli_error("filter create: %" PRIu64 " items at p = %g need %.4g bits, beyond the "
                      "limit of 2^40 bits (128 GiB) per filter",
                      bp.capacity, bp.fpr, need ? (double)need : INFINITY);
            return CLI_EXIT_USAGE;
        }
    }

    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = seen_kind(kind);
    sp.items = bp.capacity;
    sp.fpr = bp.fpr;
    sp.size = bp.bits; /* from -m; 0: sized for n at p */
    sp.hashes = bp.k;
    sp.seed = bp.seed;
    dedup_seen *sn = NULL;
    dedup_status s = dedup_seen_create(&sp, NULL, &sn);
    if (s == DEDUP_ERR_INVALID_ARG || s == DEDUP_ERR_LIMIT) {
        cli_error("filter create: cannot create a %s filter with n = %" PRIu64 ", p = %g%s: %s",
                  tname, bp.capacity, bp.fpr, bits ? " and the -m given" : "", dedup_strerror(s));
        return CLI_EXIT_USAGE;
    }
    if (s) {
        cli_error("filter create: %s: %s", o->path, dedup_strerror(s));
        return CLI_EXIT_FAIL;
    }
    *out = sn;
    return CLI_EXIT_OK;
}

static int create_classic(const filter_create_opts *o, dedup_seen **out)
{
    return create_kind(DEDUP_BLOOM_CLASSIC, o, out);
}
static int create_blocked(const filter_create_opts *o, dedup_seen **out)
{
    return create_kind(DEDUP_BLOOM_BLOCKED, o, out);
}

static void bloom_info(const dedup_seen *s, filter_info_out *o)
{
    dedup_seen_filter_info fi;
    dedup_seen_get_filter_info(s, &fi);
    bool blocked = fi.kind == DEDUP_SEEN_BLOCKED;
    uint64_t bits = fi.bits, cap = fi.capacity;
    info_str(o, "type", "type", blocked ? "blocked" : "bloom");
    info_str(o, "layout", "layout",
             blocked ? "blocked Bloom (one 64-byte block per item)"
                     : "classic Bloom (k probes over the whole array)");
    info_u64(o, "n", "items planned (n)", cap);
    info_prob(o, "p", "target false-positive rate (p)", fi.fpr_target);
    info_u64(o, "bits", "bits (m)", bits);
    info_bytes(o, "bytes", "bit array", bits / 8 + (bits % 8 != 0));
    info_u64(o, "k", "hashes per item (k)", fi.hashes);
    if (cap)
        info_f64(o, "bits_per_item", "bits per planned item", (double)bits / (double)cap);
    info_hex(o, "seed", "seed", fi.seed);
    info_u64(o, "bits_set", "bits set", fi.bits_set);
    info_f64(o, "fill", "fill ratio", fi.fill);
    if (isfinite(fi.estimated_items))
        info_u64(o, "estimated_items", "estimated items", (uint64_t)llround(fi.estimated_items));
    else
        info_str(o, "estimated_items", "estimated items", "saturated (every bit set)");
    info_prob(o, "fpr_current", "false-positive rate now", fi.fpr_current);
    if (cap)
        info_prob(o, "fpr_at_capacity", "false-positive rate at n", fi.fpr_at_capacity);
    info_bytes(o, "memory_bytes", "memory when loaded", fi.structure_memory);
}

#define BLOOM_NO_DELETE                                                                    \
    "clearing an item's bits would also clear bits other items share, which would then " \
    "be reported absent (false negatives)"

const filter_type filter_type_bloom = {
    .name = "bloom",
    .description = "classic Bloom: the fewest bits for a rate, k memory reads per item",
    .file_type = DEDUP_TYPE_BLOOM,
    .noun = "classic Bloom filter",
    .create = create_classic,
    .no_delete_reason = BLOOM_NO_DELETE,
    .info = bloom_info,
};

const filter_type filter_type_blocked = {
    .name = "blocked",
    .description = "blocked Bloom: one cache line per item, fastest, somewhat more bits",
    .file_type = DEDUP_TYPE_BLOCKED_BLOOM,
    .noun = "blocked Bloom filter",
    .create = create_blocked,
    .no_delete_reason = BLOOM_NO_DELETE,
    .info = bloom_info,
};
