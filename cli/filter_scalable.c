/*
 * filter_scalable.c - `dedup filter` operations for the scalable Bloom
 * filter (dedup/scalable.h): a chain of Bloom filters that grows, with the
 * rate split so that the whole chain stays within -p.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dedup/scalable.h"
#include "filter_types.h"

static int scalable_create(const filter_create_opts *o, dedup_seen **out)
{
    dedup_scalable_params sp;
    dedup_scalable_params_init(&sp);
    sp.seed = o->seed;
    if (o->has_k || o->has_m) {
        cli_error("filter create: %s does not apply to --type scalable (each sub-filter is sized "
                  "from its capacity and rate; give -n for the first one and -p for the chain)",
                  o->has_k ? "-k/--hashes" : "-m/--memory");
        return CLI_EXIT_USAGE;
    }
    if (o->has_n)
        sp.capacity = o->n;
    if (o->has_p) {
        if (o->p < DEDUP_MIN_FPR) {
            cli_error("filter create: -p/--fpr must be at least %g (got %g)", DEDUP_MIN_FPR, o->p);
            return CLI_EXIT_USAGE;
        }
        sp.fpr = o->p;
    }
    for (size_t i = 0; i < o->nextra; i++) {
        const filter_kv *kv = &o->extra[i];
        char *e = NULL;
        errno = 0;
        bool ok = kv->value && *kv->value && kv->value[0] != '-';
        if (strcmp(kv->name, "growth") == 0) {
            unsigned long long v = ok ? strtoull(kv->value, &e, 10) : 0;
            ok = ok && !*e && !errno && v >= 1 && v <= DEDUP_SCALABLE_MAX_GROWTH;
            sp.growth = (uint32_t)v;
        } else if (strcmp(kv->name, "tightening") == 0) {
            double v = ok ? strtod(kv->value, &e) : 0;
            ok = ok && !*e && !errno && v > 0 && v < 1;
            sp.tightening = v;
        } else if (strcmp(kv->name, "max-links") == 0) {
            unsigned long long v = ok ? strtoull(kv->value, &e, 10) : 0;
            ok = ok && !*e && !errno && v >= 1 && v <= DEDUP_MAX_CHAIN;
            sp.max_links = (uint32_t)v;
        } else if (strcmp(kv->name, "blocked") == 0) {
            ok = true;
            sp.kind = DEDUP_BLOOM_BLOCKED;
        } else {
            cli_error("filter create: --%s does not apply to --type scalable", kv->name);
            return CLI_EXIT_USAGE;
        }
        if (!ok) {
            cli_error("filter create: bad value '%s' for --%s (see dedup filter --help)",
                      kv->value ? kv->value : "", kv->name);
            return CLI_EXIT_USAGE;
        }
    }
    dedup_seen_spec ss;
    dedup_seen_spec_init(&ss);
    ss.kind = DEDUP_SEEN_SCALABLE;
    ss.items = sp.capacity;
    ss.fpr = sp.fpr;
    ss.growth = sp.growth;
    ss.tightening = sp.tightening;
    ss.max_links = sp.max_links;
    ss.classic_links = sp.kind == DEDUP_BLOOM_CLASSIC;
    ss.seed = sp.seed;
    dedup_seen *sn = NULL;
    dedup_status s = dedup_seen_create(&ss, NULL, &sn);
    if (s == DEDUP_ERR_INVALID_ARG || s == DEDUP_ERR_LIMIT) {
        cli_error("filter create: cannot create a scalable filter with n = %" PRIu64
                  ", p = %g: %s",
                  sp.capacity, sp.fpr, dedup_strerror(s));
        return CLI_EXIT_USAGE;
    }
    if (s) {
        cli_error("filter create: %s: %s", o->path, dedup_strerror(s));
        return CLI_EXIT_FAIL;
    }
    *out = sn;
    return CLI_EXIT_OK;
}

static void scalable_info(const dedup_seen *s, filter_info_out *o)
{
    dedup_seen_filter_info in;
    dedup_seen_get_filter_info(s, &in);
    info_str(o, "type", "type", "scalable");
    info_str(o, "layout", "layout",
             in.blocked_links ? "chain of blocked Bloom filters" : "chain of classic Bloom filters");
    info_u64(o, "n", "first sub-filter items (n)", in.capacity);
    info_prob(o, "p", "false-positive rate promised (p)", in.fpr_target);
    info_u64(o, "growth", "growth per sub-filter", in.growth);
    info_f64(o, "tightening", "tightening ratio (r)", in.tightening);
    info_u64(o, "max_links", "sub-filters at most", in.max_links);
    info_str(o, "split", "rate of sub-filter i", "p (1 - r) r^i / (1 - r^max): all of them sum to p");
    info_u64(o, "links", "sub-filters", in.links);
    info_u64(o, "capacity", "capacity of the sub-filters", in.links_capacity);
    info_u64(o, "items", "items added", in.items);
    info_u64(o, "bits", "bits", in.bits);
    if (in.items)
        info_f64(o, "bits_per_item", "bits per item", (double)in.bits / (double)in.items);
    info_hex(o, "seed", "seed", in.seed);
    info_prob(o, "fpr_current", "false-positive rate now", in.fpr_current);
    info_prob(o, "fpr_bound", "false-positive bound in force",
              in.fpr_bound);
    info_bytes(o, "memory_bytes", "memory when loaded", in.structure_memory);
    for (uint32_t t = 0; t < in.links; t++) {
        dedup_seen_link_info li;
        if (dedup_seen_get_link_info(s, t, &li))
            break;
        char key[48], label[80];
        snprintf(key, sizeof key, "link%u_capacity", t);
        snprintf(label, sizeof label, "sub-filter %u capacity", t);
        info_u64(o, key, label, li.capacity);
        snprintf(key, sizeof key, "link%u_items", t);
        snprintf(label, sizeof label, "sub-filter %u items", t);
        info_u64(o, key, label, li.items);
        snprintf(key, sizeof key, "link%u_bits", t);
        snprintf(label, sizeof label, "sub-filter %u bits", t);
        info_u64(o, key, label, li.bits);
        snprintf(key, sizeof key, "link%u_k", t);
        snprintf(label, sizeof label, "sub-filter %u hashes (k)", t);
        info_u64(o, key, label, li.hashes);
        snprintf(key, sizeof key, "link%u_fpr", t);
        snprintf(label, sizeof label, "sub-filter %u rate (p_%u)", t, t);
        info_prob(o, key, label, li.fpr);
        snprintf(key, sizeof key, "link%u_fpr_current", t);
        snprintf(label, sizeof label, "sub-filter %u rate now", t);
        info_prob(o, key, label, li.fpr_current);
    }
}

static const struct option scalable_options[] = {
    {"growth", required_argument, NULL, 0},
    {"tightening", required_argument, NULL, 0},
    {"max-links", required_argument, NULL, 0},
    {"blocked", no_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};

const filter_type filter_type_scalable = {
    .name = "scalable",
    .description = "scalable Bloom: grows without -n (default first sub-filter 1000 items); "
                   "the whole chain stays within -p",
    .file_type = DEDUP_TYPE_SCALABLE_BLOOM,
    .noun = "scalable Bloom filter",
    .create_options = scalable_options,
    .create_help = "            --growth G       each sub-filter holds G times the previous (default 2)\n"
                   "            --tightening R   sub-filter i gets p(1-R)R^i/(1-R^max) (default 0.9)\n"
                   "            --max-links L    at most L sub-filters, 1..64 (default 64)\n"
                   "            --blocked        blocked Bloom sub-filters (faster, more bits)\n",
    .create = scalable_create,
    .no_delete_reason = "its sub-filters are Bloom filters: clearing an item's bits would also "
                        "clear bits other items share (false negatives)",
    .info = scalable_info,
    .no_merge_reason = "two chains hold different items in sub-filters of different sizes and "
                       "rates, so no merged chain could keep the rate promised by -p",
};
