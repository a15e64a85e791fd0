/*
 * filter_counting.c - `dedup filter` operations for the counting Bloom
 * filter (dedup/counting.h): 4-bit counters, so items can be deleted.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dedup/bloom.h"
#include "dedup/counting.h"
#include "filter_types.h"

/* From -n [-p], -n -m, or -m -p (m in bytes: two counters a byte). */
static int counting_create(const filter_create_opts *o, dedup_seen **out)
{
    char hb[32];
    if (o->nextra) {
        cli_error("filter create: --%s does not apply to --type counting", o->extra[0].name);
        return CLI_EXIT_USAGE;
    }
    if (o->has_k && (o->k < 1 || o->k > DEDUP_MAX_BLOOM_K)) {
        cli_error("filter create: -k/--hashes must be between 1 and %u for --type counting (got %u)",
                  DEDUP_MAX_BLOOM_K, o->k);
        return CLI_EXIT_USAGE;
    }
    if (o->has_p && o->p < DEDUP_MIN_FPR) {
        cli_error("filter create: -p/--fpr must be at least %g (got %g)", DEDUP_MIN_FPR, o->p);
        return CLI_EXIT_USAGE;
    }
    dedup_counting_params cp;
    dedup_counting_params_init(&cp);
    cp.seed = o->seed;
    if (o->has_k)
        cp.k = o->k;
    if (o->has_m) {
        if (o->m > DEDUP_MAX_BITS / 4 / 2 || o->m < 8) {
            cli_error("filter create: -m/--memory %s is out of range for --type counting "
                      "(8 bytes to 128 GiB: 2^38 counters of 4 bits)",
                      cli_human_size(o->m, hb, sizeof hb));
            return CLI_EXIT_USAGE;
        }
        cp.counters = o->m * 2 / 16 * 16;
    }
    if (o->has_n) {
        cp.capacity = o->n;
        cp.fpr = o->has_p ? o->p : 0.01;
    } else if (o->has_m && o->has_p) {
        cp.capacity = dedup_seen_capacity_for_size(DEDUP_SEEN_COUNTING, cp.counters, o->p);
        cp.fpr = o->p;
        if (cp.capacity == 0) {
            cli_error("filter create: -m/--memory %s cannot hold even one item at -p %g",
                      cli_human_size(o->m, hb, sizeof hb), o->p);
            return CLI_EXIT_USAGE;
        }
    } else {
        cli_error("filter create: -n/--items is required for --type counting "
                  "(or give both -m/--memory and -p/--fpr)");
        return CLI_EXIT_USAGE;
    }
    if (o->has_n && o->has_m && o->has_p) {
        double reached = dedup_seen_fpr_for(DEDUP_SEEN_COUNTING, o->n, cp.counters, cp.k);
        if (reached > o->p * 1.0001)
            cli_warn("filter create: %s (-m) holds %" PRIu64 " items at a false-positive rate "
                     "of %.4g, above -p %g",
                     cli_human_size(o->m, hb, sizeof hb), o->n, reached, o->p);
    }
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_COUNTING;
    sp.items = cp.capacity;
    sp.fpr = cp.fpr;
    sp.size = cp.counters; /* from -m; 0: sized for n at p */
    sp.hashes = cp.k;
    sp.seed = cp.seed;
    dedup_seen *sn = NULL;
    dedup_status s = dedup_seen_create(&sp, NULL, &sn);
    if (s == DEDUP_ERR_INVALID_ARG || s == DEDUP_ERR_LIMIT) {
        cli_error("filter create: cannot create a counting filter with n = %" PRIu64 ", p = %g: %s",
                  cp.capacity, cp.fpr, dedup_strerror(s));
        return CLI_EXIT_USAGE;
    }
    if (s) {
        cli_error("filter create: %s: %s", o->path, dedup_strerror(s));
        return CLI_EXIT_FAIL;
    }
    *out = sn;
    return CLI_EXIT_OK;
}

static void counting_info(const dedup_seen *s, filter_info_out *o)
{
    dedup_seen_filter_info fi;
    dedup_seen_get_filter_info(s, &fi);
    uint64_t m = fi.bits, cap = fi.capacity;
    info_str(o, "type", "type", "counting");
    info_str(o, "layout", "layout", "counting Bloom (4-bit counters, saturating at 15)");
    info_u64(o, "n", "items planned (n)", cap);
    info_prob(o, "p", "target false-positive rate (p)", fi.fpr_target);
    info_u64(o, "counters", "counters (m)", m);
    info_bytes(o, "bytes", "counter array", m / 2);
    info_u64(o, "k", "hashes per item (k)", fi.hashes);
    if (cap)
        info_f64(o, "bits_per_item", "bits per planned item", 4.0 * (double)m / (double)cap);
    info_hex(o, "seed", "seed", fi.seed);
    info_u64(o, "adds", "items added", fi.adds);
    info_u64(o, "deletes", "items deleted", fi.deletes);
    info_u64(o, "items", "items (added - deleted)", fi.adds > fi.deletes ? fi.adds - fi.deletes : 0);
    info_u64(o, "counters_nonzero", "non-zero counters", fi.bits_set);
    info_f64(o, "fill", "fill ratio", fi.fill);
    info_u64(o, "saturated", "saturated counters (stuck at 15)", fi.saturated);
    info_prob(o, "fpr_current", "false-positive rate now", fi.fpr_current);
    if (cap)
        info_prob(o, "fpr_at_capacity", "false-positive rate at n", fi.fpr_at_capacity);
    info_bytes(o, "memory_bytes", "memory when loaded", fi.structure_memory);
}

const filter_type filter_type_counting = {
    .name = "counting",
    .description = "counting Bloom: can delete items; 4x the bits of a classic Bloom filter",
    .file_type = DEDUP_TYPE_COUNTING_BLOOM,
    .noun = "counting Bloom filter",
    .create = counting_create,
    .info = counting_info,
};
