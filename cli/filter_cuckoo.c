/*
 * filter_cuckoo.c - `dedup filter` operations for the cuckoo filter
 * (dedup/cuckoo.h).  Two table entries share these functions: "cuckoo"
 * (fixed size; DEDUP_TYPE_CUCKOO files; with --expansion it creates a
 * growable chain instead) and "cuckoo-chain" (growable, expansion 1 unless
 * given; DEDUP_TYPE_CUCKOO_CHAIN files), because the registry maps each
 * file type to one entry.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dedup/cuckoo.h"
#include "filter_types.h"

static bool parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    if (!s || !*s)
        return false;
    char *e;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 10);
    if (*e || errno || v < lo || v > hi || s[0] == '-')
        return false;
    *out = (uint32_t)v;
    return true;
}

static int create_common(const filter_create_opts *o, bool chain, dedup_seen **out)
{
    char hb[32];
    const char *tname = chain ? "cuckoo-chain" : "cuckoo";
    dedup_cuckoo_params kp;
    dedup_cuckoo_params_init(&kp);
    kp.seed = o->seed;
    kp.expansion = chain ? 1 : 0;
    if (o->has_k) {
        cli_error("filter create: -k/--hashes does not apply to --type %s (it has two buckets "
                  "per item; see --fingerprint-bits and --bucket-size)",
                  tname);
        return CLI_EXIT_USAGE;
    }
    for (size_t i = 0; i < o->nextra; i++) {
        const filter_kv *kv = &o->extra[i];
        bool ok = true;
        if (strcmp(kv->name, "fingerprint-bits") == 0)
            ok = parse_u32(kv->value, DEDUP_CUCKOO_MIN_FP_BITS, DEDUP_CUCKOO_MAX_FP_BITS,
                           &kp.fingerprint_bits);
        else if (strcmp(kv->name, "bucket-size") == 0)
            ok = parse_u32(kv->value, 1, DEDUP_CUCKOO_MAX_BUCKET_SIZE, &kp.bucket_size);
        else if (strcmp(kv->name, "max-kicks") == 0)
            ok = parse_u32(kv->value, 0, DEDUP_CUCKOO_MAX_KICKS, &kp.max_kicks);
        else if (strcmp(kv->name, "expansion") == 0)
            ok = parse_u32(kv->value, chain ? 1 : 0, DEDUP_CUCKOO_MAX_EXPANSION, &kp.expansion);
        else {
            cli_error("filter create: --%s does not apply to --type %s", kv->name, tname);
            return CLI_EXIT_USAGE;
        }
        if (!ok) {
            cli_error("filter create: bad value '%s' for --%s (see dedup filter --help)",
                      kv->value ? kv->value : "", kv->name);
            return CLI_EXIT_USAGE;
        }
    }
    if (o->has_p && (o->p < DEDUP_MIN_FPR || (!kp.fingerprint_bits &&
                                              !dedup_seen_fingerprint_bits_for(o->p, kp.bucket_size)))) {
        cli_error("filter create: -p/--fpr %g is too small for a cuckoo filter with %u slots per "
                  "bucket (32-bit fingerprints reach %.3g)",
                  o->p, kp.bucket_size, dedup_seen_fingerprint_fpr(32, kp.bucket_size, 1.0));
        return CLI_EXIT_USAGE;
    }
    if (o->has_p)
        kp.fpr = o->p;
    uint32_t f = kp.fingerprint_bits ? kp.fingerprint_bits
                                     : dedup_seen_fingerprint_bits_for(kp.fpr, kp.bucket_size);
    if (o->has_m) {
        uint64_t per_bucket = (uint64_t)kp.bucket_size * f; /* bits */
        uint64_t nb = o->m * 8 / per_bucket;
        if (nb == 0 || o->m > DEDUP_MAX_BITS / 8) {
            cli_error("filter create: -m/--memory %s is out of range for --type %s",
                      cli_human_size(o->m, hb, sizeof hb), tname);
            return CLI_EXIT_USAGE;
        }
        kp.buckets = nb;
        if (o->has_n && o->n > nb * kp.bucket_size)
            cli_warn("filter create: %s (-m) has %" PRIu64 " slots, fewer than -n %" PRIu64,
                     cli_human_size(o->m, hb, sizeof hb), nb * kp.bucket_size, o->n);
    }
    if (o->has_n)
        kp.capacity = o->n;
    if (!o->has_n && !o->has_m) {
        cli_error("filter create: -n/--items (or -m/--memory) is required for --type %s", tname);
        return CLI_EXIT_USAGE;
    }
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = DEDUP_SEEN_CUCKOO;
    sp.items = kp.capacity;
    sp.fpr = kp.fpr;
    sp.size = kp.buckets; /* from -m; 0: sized for n */
    sp.fingerprint_bits = kp.fingerprint_bits;
    sp.bucket_size = kp.bucket_size;
    sp.max_kicks = kp.max_kicks ? kp.max_kicks : DEDUP_SEEN_NO_KICKS;
    sp.expansion = kp.expansion;
    sp.seed = kp.seed;
    dedup_seen *sn = NULL;
    dedup_status s = dedup_seen_create(&sp, NULL, &sn);
    if (s == DEDUP_ERR_INVALID_ARG || s == DEDUP_ERR_LIMIT) {
        cli_error("filter create: cannot create a %s filter with n = %" PRIu64 ": %s", tname,
                  kp.capacity, dedup_strerror(s));
        return CLI_EXIT_USAGE;
    }
    if (s) {
        cli_error("filter create: %s: %s", o->path, dedup_strerror(s));
        return CLI_EXIT_FAIL;
    }
    *out = sn;
    return CLI_EXIT_OK;
}

static int create_fixed(const filter_create_opts *o, dedup_seen **out)
{
    return create_common(o, false, out);
}
static int create_chain(const filter_create_opts *o, dedup_seen **out)
{
    return create_common(o, true, out);
}

static void cuckoo_info(const dedup_seen *s, filter_info_out *o)
{
    dedup_seen_filter_info in;
    dedup_seen_get_filter_info(s, &in);
    info_str(o, "type", "type", in.expansion ? "cuckoo-chain" : "cuckoo");
    info_str(o, "layout", "layout",
             in.expansion ? "growable chain of cuckoo filters (partial-key cuckoo hashing)"
                          : "cuckoo filter (partial-key cuckoo hashing, fixed size)");
    info_u64(o, "n", "items planned (n)", in.capacity);
    info_u64(o, "fingerprint_bits", "fingerprint bits", in.fingerprint_bits);
    info_u64(o, "bucket_size", "slots per bucket", in.bucket_size);
    info_u64(o, "max_kicks", "max relocations per insert", in.max_kicks);
    info_u64(o, "expansion", "expansion (0 = fixed)", in.expansion);
    info_u64(o, "links", "sub-filters", in.links);
    info_u64(o, "buckets", "buckets", in.buckets);
    info_u64(o, "slots", "slots", in.slots);
    info_u64(o, "items", "items stored", in.items);
    info_u64(o, "inserted", "items inserted", in.inserted);
    info_u64(o, "deleted", "items deleted", in.deleted);
    info_f64(o, "load", "load (items / slots)", in.load);
    if (in.items)
        info_f64(o, "bits_per_item", "bits per stored item",
                 (double)in.slots * in.fingerprint_bits / (double)in.items);
    info_hex(o, "seed", "seed", in.seed);
    info_prob(o, "fpr_current", "false-positive rate now", in.fpr_current);
    info_prob(o, "fpr_full", "false-positive rate when full", in.fpr_full);
    info_bytes(o, "memory_bytes", "memory when loaded", in.structure_memory);
    for (uint32_t t = 0; t < in.links && in.links > 1; t++) {
        dedup_seen_link_info li;
        if (dedup_seen_get_link_info(s, t, &li))
            break;
        char key[48], label[64];
        snprintf(key, sizeof key, "link%u_buckets", t);
        snprintf(label, sizeof label, "sub-filter %u buckets", t);
        info_u64(o, key, label, li.buckets);
        snprintf(key, sizeof key, "link%u_items", t);
        snprintf(label, sizeof label, "sub-filter %u items", t);
        info_u64(o, key, label, li.items);
        snprintf(key, sizeof key, "link%u_load", t);
        snprintf(label, sizeof label, "sub-filter %u load", t);
        info_f64(o, key, label, li.load);
    }
}

static const struct option cuckoo_options[] = {
    {"fingerprint-bits", required_argument, NULL, 0},
    {"bucket-size", required_argument, NULL, 0},
    {"max-kicks", required_argument, NULL, 0},
    {"expansion", required_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};

#define CUCKOO_HELP                                                                              \
    "            --fingerprint-bits F  4..32 (default: 8, 12 or 16 from -p: 12 for 1%)\n"       \
    "            --bucket-size B       slots per bucket, 1..255 (default 4)\n"                  \
    "            --max-kicks K         relocations before 'full', 0..65535 (default 500)\n"     \
    "            --expansion E         grow by sub-filters of E times the previous size\n"

#define CUCKOO_NO_MERGE                                                                         \
    "a cuckoo filter keeps only fingerprints placed by the table's size, so another filter's " \
    "entries cannot be re-inserted (add the original items to one filter instead)"

const filter_type filter_type_cuckoo = {
    .name = "cuckoo",
    .description = "cuckoo: can delete items, fewer bits than Bloom below ~0.3%; fixed size "
                   "(reports 'full')",
    .file_type = DEDUP_TYPE_CUCKOO,
    .noun = "cuckoo filter",
    .create_options = cuckoo_options,
    .create_help = CUCKOO_HELP,
    .create = create_fixed,
    .info = cuckoo_info,
    .no_merge_reason = CUCKOO_NO_MERGE,
};

const filter_type filter_type_cuckoo_chain = {
    .name = "cuckoo-chain",
    .description = "growable cuckoo: adds sub-filters when full (--expansion, default 1)",
    .file_type = DEDUP_TYPE_CUCKOO_CHAIN,
    .noun = "growable cuckoo filter",
    .create_options = cuckoo_options,
    .create_help = NULL,
    .create = create_chain,
    .info = cuckoo_info,
    .no_merge_reason = CUCKOO_NO_MERGE,
};
