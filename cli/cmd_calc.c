/*
 * cmd_calc.c - `dedup calc`: size a Bloom filter from any two of
 * (items n, false-positive rate p, memory m), for the classic and the
 * blocked layout, with the library's one set of sizing functions
 * (dedup/seen.h, "Sizing from a budget"), so the numbers are exactly those
 * `dedup filter create` and `dedup --mode bloom|blocked` would use.
 *
 *   n, p -> bits = size_for(n, p)
 *   n, m -> bits = m*8 rounded down to the layout's unit; p = fpr reached
 *   m, p -> bits as above; n = capacity_for_size(bits, p)
 * and then k = hashes_for(n, bits), fpr = fpr_for(n, bits, k): the rate
 * actually reached with the whole number of hashes.
 *
 * --json writes JSON Lines: one object per filter kind, one per line.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "dedup/limits.h"
#include "dedup/seen.h"

static const char calc_help[] =
    "Usage: dedup calc [-n ITEMS] [-p FPR] [-m MEMORY] [--type bloom|blocked] [--json]\n"
    "\n"
    "Size a Bloom filter from any two of:\n"
    "  -n, --items N      items to hold: 1000000, 1e6, 10M (k=10^3, M=10^6, G=10^9)\n"
    "  -p, --fpr P        false-positive rate: 0.01, 1%, 1e-3\n"
    "  -m, --memory SIZE  bytes for the bit array: 4096, 512K, 64M, 2G (K=2^10)\n"
    "and print, for classic and blocked Bloom, the bits, bytes, hashes k and the\n"
    "false-positive rate reached with that whole k:\n"
    "  -n and -p  -> the memory needed;  -n and -m -> the rate reached;\n"
    "  -m and -p  -> the items that fit.\n"
    "\n"
    "  -t, --type T       only this layout: bloom (classic) or blocked\n"
    "      --json         JSON Lines: one object per layout with the keys type, given,\n"
    "                     n, p, bits, bytes, k, fpr, bits_per_item, within_limits\n"
    "  -h, --help         this help\n"
    "\n"
    "Example: dedup calc -n 1e8 -p 0.01%\n";

typedef struct calc_row {
    bool blocked;
    const char *type;
    uint64_t n;
    double p;
    uint64_t bits;
    uint64_t bytes;
    uint32_t k;
    double fpr;
} calc_row;

/* Fills 'r' for one layout; false (after an error message) when the
 * combination has no answer. */
static bool size_one(bool blocked, bool has_n, bool has_p, bool has_m, uint64_t n, double p,
                     uint64_t m, calc_row *r)
{
    const dedup_seen_kind kind = blocked ? DEDUP_SEEN_BLOCKED : DEDUP_SEEN_BLOOM;
    const uint64_t unit = blocked ? 512 : 64;
    char hb[32];

    memset(r, 0, sizeof *r);
    r->blocked = blocked;
    r->type = blocked ? "blocked" : "bloom";
    uint64_t bits = 0;
    if (has_m) {
        if (m > UINT64_MAX / 8 / unit) {
            cli_error("calc: -m/--memory is too large (got %" PRIu64 " bytes)", m);
            return false;
        }
        /* Round down: the filter must fit in the memory given. */
        bits = m * 8 / unit * unit;
        if (bits == 0) {
            cli_error("calc: -m/--memory %s is too small for a %s filter (at least %u bytes)",
                      cli_human_size(m, hb, sizeof hb), r->type, (unsigned)(unit / 8));
            return false;
        }
    }
    if (has_n && has_p) {
        bits = dedup_seen_size_for(kind, n, p);
        if (bits == 0) {
            cli_error("calc: no %s filter holds %" PRIu64 " items at p = %g", r->type, n, p);
            return false;
        }
    } else if (has_m && has_p) {
        n = dedup_seen_capacity_for_size(kind, bits, p);
        if (n == 0) {
            cli_error("calc: -m/--memory %s holds no item at p = %g in a %s filter",
                      cli_human_size(m, hb, sizeof hb), p, r->type);
            return false;
        }
    }
    r->n = n;
    r->bits = bits;
    r->bytes = bits / 8 + (bits % 8 != 0);
    r->k = dedup_seen_hashes_for(kind, n, bits);
    r->fpr = dedup_seen_fpr_for(kind, n, bits, r->k);
    r->p = has_p ? p : r->fpr;
    return true;
}

static void print_text(const calc_row *r, const char *given)
{
    char h1[32], h2[32];
    printf("%s (--type %s)\n", r->blocked ? "blocked Bloom" : "classic Bloom", r->type);
    printf("  items (n):         %" PRIu64 "%s\n", r->n, strchr(given, 'n') ? "" : "  (fits)");
    printf("  target rate (p):   %.6g (%.4g%%)%s\n", r->p, r->p * 100,
           strchr(given, 'p') ? "" : "  (reached)");
    printf("  bits (m):          %" PRIu64 "\n", r->bits);
    printf("  bytes:             %" PRIu64 " (%s, %s)\n", r->bytes,
           cli_human_size(r->bytes, h1, sizeof h1), human_size_si(r->bytes, h2, sizeof h2));
    printf("  hashes (k):        %u\n", r->k);
    printf("  rate reached:      %.6g (%.4g%%) with k = %u\n", r->fpr, r->fpr * 100, r->k);
    printf("  bits per item:     %.3f\n", (double)r->bits / (double)r->n);
    if (r->bits > DEDUP_MAX_BITS)
        printf("  note:              beyond the limit of 2^40 bits (128 GiB) per filter\n");
}

static void print_json(const calc_row *r, const char *given)
{
    printf("{\"type\":\"%s\",\"given\":\"%s\",\"n\":%" PRIu64 ",\"p\":", r->type, given, r->n);
    json_double(stdout, r->p);
    printf(",\"bits\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"k\":%u,\"fpr\":", r->bits, r->bytes,
           r->k);
    json_double(stdout, r->fpr);
    printf(",\"bits_per_item\":");
    json_double(stdout, (double)r->bits / (double)r->n);
    printf(",\"within_limits\":%s}\n", r->bits <= DEDUP_MAX_BITS ? "true" : "false");
}

int cmd_calc(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"items", required_argument, NULL, 'n'}, {"fpr", required_argument, NULL, 'p'},
        {"memory", required_argument, NULL, 'm'}, {"type", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'J'},         {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0}};
    bool has_n = false, has_p = false, has_m = false, json = false;
    bool want_classic = true, want_blocked = true;
    uint64_t n = 0, m = 0;
    double p = 0;

    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":n:p:m:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (!arg_count("calc", "-n/--items", optarg, &n))
                return CLI_EXIT_USAGE;
            has_n = true;
            break;
        case 'p':
            if (!arg_prob("calc", "-p/--fpr", optarg, &p))
                return CLI_EXIT_USAGE;
            if (p < DEDUP_MIN_FPR) {
                cli_error("calc: -p/--fpr must be at least %g (got '%s'): below it the 128-bit "
                          "digest's own collisions dominate",
                          DEDUP_MIN_FPR, optarg);
                return CLI_EXIT_USAGE;
            }
            has_p = true;
            break;
        case 'm':
            if (!arg_size("calc", "-m/--memory", optarg, &m))
                return CLI_EXIT_USAGE;
            has_m = true;
            break;
        case 't':
            if (strcmp(optarg, "bloom") == 0 || strcmp(optarg, "classic") == 0) {
                want_classic = true;
                want_blocked = false;
            } else if (strcmp(optarg, "blocked") == 0) {
                want_classic = false;
                want_blocked = true;
            } else {
                cli_error("calc: -t/--type must be bloom or blocked (got '%s')", optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        case 'J': json = true; break;
        case 'h': fputs(calc_help, stdout); return CLI_EXIT_OK;
        case 'V': cli_print_version(); return CLI_EXIT_OK;
        default: arg_bad_option("calc", c, argv, "dedup calc"); return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_error("calc: unexpected argument '%s' (see 'dedup calc --help')", argv[optind]);
        return CLI_EXIT_USAGE;
    }
    int given = has_n + has_p + has_m;
    if (given != 2) {
        if (given == 3)
            cli_error("calc: give exactly two of -n/--items, -p/--fpr, -m/--memory "
                      "(the third is what calc computes); got all three");
        else
            cli_error("calc: give two of -n/--items, -p/--fpr, -m/--memory (got %s)",
                      given == 0 ? "none" : has_n ? "only -n" : has_p ? "only -p" : "only -m");
        return CLI_EXIT_USAGE;
    }
    const char *gv = has_n && has_p ? "n,p" : has_n ? "n,m" : "m,p";

    calc_row rows[2];
    int nrows = 0;
    if (want_classic && !size_one(false, has_n, has_p, has_m, n, p, m, &rows[nrows++]))
        return CLI_EXIT_USAGE;
    if (want_blocked && !size_one(true, has_n, has_p, has_m, n, p, m, &rows[nrows++]))
        return CLI_EXIT_USAGE;

    for (int i = 0; i < nrows; i++) {
        if (json) {
            print_json(&rows[i], gv);
        } else {
            if (i)
                putchar('\n');
            print_text(&rows[i], gv);
        }
    }
    return out_finish("calc", NULL) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
