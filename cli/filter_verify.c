/*
 * filter_verify.c - `dedup filter verify FILE --known K --fresh F`: the check
 * to run before a filter goes live (no false negative on the known items,
 * the rate measured on fresh ones within the interval of the rate claimed).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "filter_cmd.h"

/* ---- verify ------------------------------------------------------------------------------ */

/* What `filter verify` counts while the items stream past. */
typedef struct verify_job {
    dedup_seen *s;
    uint64_t seed;
    bool known; /* the known pass (else fresh) */
    uint64_t items, missing, present;
    dedup_digest *dig;
    dedup_verdict *verdict;
    const char *name;
} verify_job;

static bool verify_batch(void *ctx, const filter_key *keys, size_t n)
{
    verify_job *v = ctx;
    for (size_t i = 0; i < n; i++)
        v->dig[i] = dedup_hash(keys[i].data, keys[i].len, v->seed);
    dedup_batch b = {.n = n, .digests = v->dig};
    if (dedup_seen_query(v->s, &b, v->verdict) != DEDUP_OK)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool in = v->verdict[i] != DEDUP_NEW;
        v->items++;
        if (v->known && !in) {
            v->missing++;
            if (v->missing <= 10)
                cli_warn("filter verify: '%.*s' of %s is not in the filter: a false negative",
                         (int)(keys[i].len > 200 ? 200 : keys[i].len), (const char *)keys[i].data,
                         v->name);
        }
        if (!v->known && in)
            v->present++;
    }
    return true;
}

/* The Wilson score interval of a rate measured as k of n, at normal
 * quantile z: [*lo, *hi]. */
static void wilson(uint64_t k, uint64_t n, double z, double *lo, double *hi)
{
    if (!n) {
        *lo = 0;
        *hi = 1;
        return;
    }
    double p = (double)k / (double)n, nn = (double)n, z2 = z * z;
    double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
    double half = z / (1 + z2 / nn) * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
    *lo = centre - half < 0 ? 0 : centre - half;
    *hi = centre + half > 1 ? 1 : centre + half;
}

static int verify_pass(verify_job *v, const char *path, const item_opts *io)
{
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY);
    if (fd < 0) {
        cli_error("filter verify: %s: %s", path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    v->name = path;
    int r = dd_filter_read_items(fd, path, io, verify_batch, v);
    if (fd != STDIN_FILENO)
        close(fd);
    return r > 0 ? r : r < 0 ? CLI_EXIT_FAIL : 0;
}

/* dedup filter verify FILE --known K --fresh F: the check to run before a
 * filter goes live.  Every known item (added before) must be found, and the
 * fresh items (never added) measure the false-positive rate.  The bound in
 * force is the lower of the rate the filter claims at its fill now and the
 * rate it was planned for; the check fails when the measured rate is
 * significantly above it: a one-sided test at 99.95%, the lower end of the
 * rate's 99.9% two-sided interval lying above the bound.  A rate below the
 * claim is reported, not failed: a filter may err less than its model. */
int dd_filter_verify(int argc, char **argv)
{
    const char *cmd = "filter verify";
    static const struct option longopts[] = {
        {"known", required_argument, NULL, OPT_KNOWN}, {"fresh", required_argument, NULL, OPT_FRESH},
        {"zero-terminated", no_argument, NULL, 'z'},   {"crlf", no_argument, NULL, OPT_CRLF},
        {"help", no_argument, NULL, 'h'},              {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0}};
    item_opts io = {'\n', false};
    const char *known = NULL, *fresh = NULL;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":zh", longopts, NULL)) != -1) {
        int r = dd_filter_common_option(c, cmd, argv);
        if (r >= 0)
            return r;
        if (c == OPT_KNOWN)
            known = optarg;
        else if (c == OPT_FRESH)
            fresh = optarg;
        else if (c == 'z')
            io.delim = '\0';
        else if (c == OPT_CRLF)
            io.strip_cr = true;
    }
    if (optind + 1 != argc || (!known && !fresh)) {
        cli_error("%s: usage: dedup filter verify FILE --known ITEMS --fresh ITEMS (files of "
                  "items, one a line: known = added to FILE, fresh = never added)", cmd);
        return CLI_EXIT_USAGE;
    }
    if (known && fresh && strcmp(known, "-") == 0 && strcmp(fresh, "-") == 0) {
        cli_error("%s: --known and --fresh cannot both be standard input", cmd);
        return CLI_EXIT_USAGE;
    }
    const char *path = argv[optind];
    const filter_type *t;
    verify_job v;
    memset(&v, 0, sizeof v);
    if (!dd_filter_load(path, &t, &v.s))
        return CLI_EXIT_USAGE;
    v.seed = dedup_seen_seed(v.s);
    v.dig = malloc(ITEM_BATCH * sizeof *v.dig);
    v.verdict = malloc(ITEM_BATCH * sizeof *v.verdict);
    int rc = v.dig && v.verdict ? 0 : CLI_EXIT_FAIL;
    if (rc)
        cli_error("%s: out of memory", cmd);
    uint64_t nknown = 0;
    if (!rc && known) {
        v.known = true;
        rc = verify_pass(&v, known, &io);
        nknown = v.items;
    }
    if (!rc && fresh) {
        v.known = false;
        v.items = 0;
        rc = verify_pass(&v, fresh, &io);
    }
    if (!rc) {
        dedup_seen_info in;
        dedup_seen_get_info(v.s, &in);
        bool ok = true;
        if (known) {
            if (v.missing)
                printf("known items      %" PRIu64 ", %" PRIu64 " NOT found: false negatives, "
                       "which a filter must never give\n", nknown, v.missing);
            else
                printf("known items      %" PRIu64 ", all found: no false negative\n", nknown);
            ok = !v.missing;
        }
        if (fresh) {
            double lo, hi, rate = v.items ? (double)v.present / (double)v.items : 0;
            wilson(v.present, v.items, 3.2905, &lo, &hi);
            double claim = in.fpr_bound;
            bool inside = claim >= lo && claim <= hi; /* else below or above */
            printf("fresh items      %" PRIu64 ", %" PRIu64 " reported present: measured rate "
                   "%.4g%% (99.9%% interval %.4g%% .. %.4g%%)\n",
                   v.items, v.present, rate * 100, lo * 100, hi * 100);
            printf("claimed rate     %.4g%% at the fill now (%.4g%% planned): %s\n", claim * 100,
                   in.fpr_target * 100,
                   inside ? "within the interval"
                   : claim < lo ? "BELOW the interval: the filter errs more often than it claims "
                                  "(or some fresh items were added to it)"
                                : "ABOVE the interval: the filter errs less often than it claims "
                                  "(not a failure)");
            /* The bound in force is the lower of the claim now and the rate
             * planned: a filter filled past its capacity claims (and keeps)
             * a rate above the one it was built for, which is a failure of
             * the filter in service even though its model is right. */
            double planned = in.fpr_target;
            bool over = planned > 0 && lo > planned;
            if (planned > 0)
                printf("planned rate     %.4g%%: %s\n", planned * 100,
                       over ? "EXCEEDED" : "not significantly exceeded");
            if (over)
                printf("over plan        the measured rate is %.3gx the planned one (at least "
                       "%.3gx at 99.95%% confidence): the filter holds more than it was built "
                       "for (%" PRIu64 " planned, about %" PRIu64 " held)\n",
                       rate / planned, lo / planned, in.capacity, in.items);
            if ((double)v.items * claim < 10)
                printf("note             %" PRIu64 " fresh items expect %.3g false positives: "
                       "give at least %.0f for a test of the rate\n",
                       v.items, (double)v.items * claim, claim > 0 ? ceil(10 / claim) : 0.0);
            ok = ok && !(claim < lo) && !over;
        }
        printf("verdict          %s\n", ok ? "pass" : "FAIL");
        rc = out_finish(cmd, NULL) ? CLI_EXIT_FAIL : ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    }
    free(v.dig);
    free(v.verdict);
    dedup_seen_free(v.s);
    return rc;
}
