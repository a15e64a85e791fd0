/*
 * cmd_count.c - `dedup count`: how many distinct keys, without writing them.
 *
 *   dedup count [KEY OPTIONS] [FILE...]     HyperLogLog estimate (dedup/hll.h)
 *   dedup count --exact [KEY OPTIONS] ...   exact, with the string set
 *   dedup count --merge A.hll B.hll ...     union of saved sketches
 *
 * Keys are made exactly as the main job makes them (keys.c, through the
 * feeder, which hashes each key once with the sketch's seed), so a count
 * here is the number of lines `dedup` with the same options would keep.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "intkeys.h"
#include "key_header.h"
#include "dedup/hll.h"
#include "dedup/set.h"
#include "feeder.h"
#include "io.h"
#include "outfile.h"

static const char count_help[] =
    "Usage: dedup count [OPTIONS] [FILE...]\n"
    "       dedup count --merge SKETCH.hll... [-o OUT.hll]\n"
    "\n"
    "Count the distinct keys of the input (standard input when no FILE, or -),\n"
    "without keeping or writing them: a HyperLogLog sketch of 2^P registers gives\n"
    "an estimate with a relative standard error of 1.04/sqrt(2^P) (0.81% at the\n"
    "default P = 14, 16 KiB), almost exact below 2^P/8 keys.  Prints the count, a\n"
    "tab, and its standard error (or \"exact\").\n"
    "\n"
    "Counting:\n"
    "  -P, --precision P     registers 2^P, P from 4 to 18 (default 14)\n"
    "      --exact           count exactly with the exact set (memory grows with\n"
    "                        the keys: about 20 bytes + the key's length each)\n"
    "  -o, --output FILE     save the sketch to FILE (atomically), for --merge later\n"
    "      --merge           the FILEs are saved sketches: print the count of their\n"
    "                        union (same precision and seed, else an error)\n"
    "      --json            one JSON object: distinct, exact, std_error (keys),\n"
    "                        relative_std_error, precision, records, sketches\n"
    "\n"
    "Keys (as in the main job):\n"
    "  -f, --field LIST      key is these fields (N, N,M, N-M, N-, names with --header)\n"
    "      --csv, --header, --json-paths PATHS, --url: as in the main job\n"
    "  -d, --delimiter C     field delimiter (default TAB; \\t and \\0 accepted)\n"
    "  -i, --ignore-case     ASCII case-insensitive keys\n"
    "      --trim            strip leading/trailing whitespace from keys\n"
    "      --squeeze         runs of whitespace in keys count as one space\n"
    "      --strip-prefix S  remove prefix S from keys that start with it\n"
    "  -z, --zero-terminated records end with NUL, not newline\n"
    "      --on-bad-key=fail|skip|keep  a record with no key (malformed CSV, invalid\n"
    "                        JSON or a missing path, not a URL): stop naming file\n"
    "                        and line (fail, the default), leave it out (skip), or\n"
    "                        count it as one more distinct record, as the main job\n"
    "                        writes it (keep; not with -o)\n"
    "      --seed N          hash seed (sketches merge only with the same seed)\n"
    "  -q, --quiet           errors only\n"
    "  -h, --help            this help\n"
    "\n"
    "Examples:\n"
    "  dedup count -f 2 access.log                 distinct users (field 2)\n"
    "  dedup count -o monday.hll mon.log; dedup count -o tuesday.hll tue.log\n"
    "  dedup count --merge monday.hll tuesday.hll  distinct over both days\n";

enum {
    OPT_EXACT = 256,
    OPT_MERGE,
    OPT_JSON,
    OPT_SEED,
    OPT_HELP,
    OPT_BAD_KEY,
};

static const struct option count_opts[] = {
    {"precision", required_argument, NULL, 'P'},
    {"exact", no_argument, NULL, OPT_EXACT},
    {"output", required_argument, NULL, 'o'},
    {"merge", no_argument, NULL, OPT_MERGE},
    {"json", no_argument, NULL, OPT_JSON},
    DD_KEY_LONG_OPTIONS,
    {"seed", required_argument, NULL, OPT_SEED},
    {"on-bad-key", required_argument, NULL, OPT_BAD_KEY},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

typedef struct count_opts_t {
    uint32_t precision;
    bool exact, merge, json;
    const char *output;
    dd_keyspec key;
    unsigned char term;
    uint64_t seed;
    dd_bad_key bad_key;
    bool bad_key_given;
} count_opts_t;

/* Parses the options; returns -1 (usage error), 1 (help shown) or 0. */
static int parse(int argc, char **argv, count_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->precision = DEDUP_HLL_DEFAULT_PRECISION;
    dd_keyspec_init(&o->key);
    o->term = '\n';
    o->seed = DEDUP_DEFAULT_SEED;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":P:o:" DD_KEY_SHORT_OPTIONS "qh", count_opts, NULL)) != -1) {
        int kr = dd_key_option(c, optarg, "count", &o->key, &o->term);
        if (kr < 0)
            return -1;
        if (kr)
            continue;
        uint64_t v;
        switch (c) {
        case 'P':
            if (!arg_uint("count", "-P/--precision", optarg, DEDUP_HLL_MIN_PRECISION,
                          DEDUP_HLL_MAX_PRECISION, &v))
                return -1;
            o->precision = (uint32_t)v;
            break;
        case OPT_EXACT: o->exact = true; break;
        case 'o': o->output = optarg; break;
        case OPT_MERGE: o->merge = true; break;
        case OPT_JSON: o->json = true; break;
        case OPT_SEED:
            if (!arg_seed("count", "--seed", optarg, &o->seed))
                return -1;
            break;
        case OPT_BAD_KEY:
            if (!dd_bad_key_from_name(optarg, &o->bad_key)) {
                cli_error("count: --on-bad-key must be fail, skip or keep (got '%s')", optarg);
                return -1;
            }
            o->bad_key_given = true;
            break;
        case 'q': cli_verbosity = 0; break;
        case 'h':
        case OPT_HELP: fputs(count_help, stdout); return 1;
        default: arg_bad_option("count", c, argv, "dedup count --help"); return -1;
        }
    }
    if (o->exact && (o->merge || o->output)) {
        cli_error("count: --exact keeps no sketch, so it cannot be used with %s",
                  o->merge ? "--merge" : "-o/--output");
        return -1;
    }
    if (o->bad_key_given && !o->key.csv && !o->key.json && !o->key.url) {
        cli_error("count: --on-bad-key is for keys a record may lack: --csv, --json-paths, "
                  "--url");
        return -1;
    }
    if (o->bad_key == DD_BAD_KEY_KEEP && o->output) {
        cli_error("count: --on-bad-key keep counts records without a key apart from the "
                  "sketch, which could not hold them: -o/--output is refused with it");
        return -1;
    }
    if (o->merge && optind >= argc) {
        cli_error("count: --merge needs the sketch files to merge (dedup count --merge A.hll B.hll)");
        return -1;
    }
    return 0;
}

static void print_result(const count_opts_t *o, double distinct, bool exact, double se_rel,
                         uint32_t precision, uint64_t records, int sketches, bool have_records)
{
    if (o->json) {
        printf("{\"distinct\":%.0f,\"exact\":%s,\"std_error\":", distinct, exact ? "true" : "false");
        json_double(stdout, exact ? 0.0 : se_rel * distinct);
        printf(",\"relative_std_error\":");
        json_double(stdout, exact ? 0.0 : se_rel);
        if (exact)
            printf(",\"precision\":null");
        else
            printf(",\"precision\":%u", precision);
        if (have_records)
            printf(",\"records\":%" PRIu64, records);
        else
            printf(",\"records\":null");
        printf(",\"sketches\":%d}\n", sketches);
        return;
    }
    if (exact)
        printf("%.0f\texact\n", distinct);
    else
        printf("%.0f\t\xc2\xb1 %.0f (1 standard error, %.2f%%)\n", distinct,
               ceil(se_rel * distinct), se_rel * 100.0);
}

static int do_merge(const count_opts_t *o, int n, char **files)
{
    dedup_hll *acc = NULL;
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < n; i++) {
        dedup_hll *h = NULL;
        dedup_status s = dedup_hll_load_file(files[i], cli_allocator(), &h);
        if (s) {
            cli_error("count: %s: cannot load a sketch: %s%s%s", files[i], dedup_strerror(s),
                      s == DEDUP_ERR_IO ? ": " : "", s == DEDUP_ERR_IO ? strerror(errno) : "");
            rc = CLI_EXIT_USAGE;
            break;
        }
        if (!acc) {
            acc = h;
            continue;
        }
        char why[160] = "";
        s = dedup_hll_merge(acc, h, why, sizeof why);
        dedup_hll_free(h);
        if (s) {
            cli_error("count: %s cannot be merged with %s: %s", files[i], files[0],
                      s == DEDUP_ERR_INCOMPATIBLE ? why : dedup_strerror(s));
            rc = s == DEDUP_ERR_INCOMPATIBLE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
            break;
        }
    }
    if (rc == CLI_EXIT_OK && o->output) {
        dedup_status s = dedup_hll_save_file(acc, o->output);
        if (s) {
            cli_error("count: cannot save the sketch to %s: %s", o->output,
                      s == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(s));
            rc = CLI_EXIT_FAIL;
        }
    }
    if (rc == CLI_EXIT_OK) {
        print_result(o, dedup_hll_estimate(acc), false, dedup_hll_std_error(acc),
                     dedup_hll_precision(acc), 0, n, false);
        rc = out_finish("count", NULL);
    }
    dedup_hll_free(acc);
    return rc;
}

static int count_main(int argc, char **argv, count_opts_t *op);

int cmd_count(int argc, char **argv)
{
    count_opts_t o;
    int rc = count_main(argc, argv, &o);
    dd_keyspec_release(&o.key);
    return rc;
}

static int count_main(int argc, char **argv, count_opts_t *op)
{
    count_opts_t o;
    int pr = parse(argc, argv, op);
    o = *op;
    if (pr)
        return pr > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!dd_keyspec_check(&op->key, "count") ||
        (!op->key.header && !dd_keyspec_compile(&op->key, NULL, 0, NULL)))
        return CLI_EXIT_USAGE;
    o = *op;
    int nfiles = argc - optind;
    char **files = argv + optind;
    static char *stdin_only[] = {"-"};
    if (o.merge)
        return do_merge(&o, nfiles, files);
    if (nfiles == 0) {
        files = stdin_only;
        nfiles = 1;
    }
    /* The sketch would replace records it was made from (--merge may
     * write over one of its sketches: they are all read first). */
    if (!dd_outfile_check_inputs("count", o.output, files, nfiles))
        return CLI_EXIT_USAGE;

    dedup_hll *h = NULL;
    dedup_strset *set = NULL;
    dedup_status s;
    if (o.exact) {
        dedup_set_params sp;
        dedup_set_params_init(&sp);
        sp.seed = o.seed;
        s = dedup_strset_create(&sp, cli_allocator_growing(), &set);
    } else {
        dedup_hll_params hp;
        dedup_hll_params_init(&hp);
        hp.precision = o.precision;
        hp.seed = o.seed;
        s = dedup_hll_create(&hp, cli_allocator(), &h);
    }
    if (s) {
        cli_error("count: %s", dedup_strerror(s));
        return CLI_EXIT_FAIL;
    }

    dd_out_signals(false); /* SIGINT, SIGTERM, SIGHUP: stop, no sketch saved */

    int rc = CLI_EXIT_OK;
    uint64_t records = 0;
    const bool key_errs = o.key.csv || o.key.json || o.key.url;
    dd_key_header kh = {.key = &op->key, .cmd = "count"};
    dd_keyed_block kb = {0};
    for (int fi = 0; fi < nfiles && rc == CLI_EXIT_OK; fi++) {
        dd_feeder *fd = NULL;
        dd_feeder_opts fo = {.term = o.term, .key = &o.key, .hash = true, .seed = o.seed};
        if (o.key.header) {
            fo.header = dd_key_header_cb;
            fo.header_ctx = &kh;
        }
        kh.file = strcmp(files[fi], "-") == 0 ? "(standard input)" : files[fi];
        kh.lines = 0;
        int e = dd_feeder_open(&fd, files[fi], &fo);
        if (e) {
            cli_error("count: %s: %s", files[fi], strerror(e));
            rc = CLI_EXIT_USAGE;
            break;
        }
        const dd_block *b;
        while (rc == CLI_EXIT_OK && (b = dd_feeder_next(fd)) != NULL) {
            records += b->n;
            if (key_errs && o.bad_key == DD_BAD_KEY_FAIL && !dd_key_header_block_ok(&kh, b, o.term)) {
                rc = CLI_EXIT_FAIL;
                break;
            }
            if (key_errs && o.bad_key != DD_BAD_KEY_FAIL &&
                (b = dd_keyed_only(&kb, &kh, b, o.term, true)) == NULL) {
                cli_error("count: out of memory");
                rc = CLI_EXIT_FAIL;
                break;
            }
            if (h) {
                s = dedup_hll_add_batch(h, b->dig, b->n);
            } else {
                s = DEDUP_OK;
                for (size_t i = 0; i < b->n && !s; i++) {
                    if (i + 8 < b->n)
                        dedup_strset_prefetch(set, b->dig[i + 8]);
                    dedup_verdict v;
                    s = dedup_strset_insert(set, b->key[i], b->klen[i], b->dig[i], &v);
                }
            }
            if (s) {
                cli_error("count: %s: %s", dd_feeder_name(fd), dedup_strerror(s));
                rc = CLI_EXIT_FAIL;
            }
        }
        e = dd_feeder_error(fd);
        if (rc == CLI_EXIT_OK && dd_stop_signal)
            rc = 128 + dd_stop_signal;
        else if (rc == CLI_EXIT_OK && e == -1) /* the header callback said why */
            rc = CLI_EXIT_USAGE;
        else if (rc == CLI_EXIT_OK && e) {
            cli_error("count: %s: read error: %s", dd_feeder_name(fd), strerror(e));
            rc = CLI_EXIT_USAGE;
        }
        dd_feeder_close(fd);
    }
    dd_key_header_free(&kh);
    dd_keyed_free(&kb);
    /* --on-bad-key keep: each record without a key is one more that the
     * main job would write. */
    const uint64_t kept = o.bad_key == DD_BAD_KEY_KEEP ? kh.skipped : 0;
    if (rc == CLI_EXIT_OK && kh.skipped)
        cli_warn("count: %llu record%s had no key (%s): %s", (unsigned long long)kh.skipped,
                 kh.skipped == 1 ? "" : "s", dd_key_bad_reason(&o.key),
                 kept ? "each counted as distinct" : "left out");
    if (rc == CLI_EXIT_OK && h && o.output) {
        s = dedup_hll_save_file(h, o.output);
        if (s) {
            cli_error("count: cannot save the sketch to %s: %s", o.output,
                      s == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(s));
            rc = CLI_EXIT_FAIL;
        }
    }
    if (rc == CLI_EXIT_OK) {
        if (h) {
            double est = dedup_hll_estimate(h), all = est + (double)kept;
            print_result(&o, all, false, all > 0 ? dedup_hll_std_error(h) * est / all : 0,
                         o.precision, records, 0, true);
        } else {
            print_result(&o, (double)dedup_strset_size(set) + (double)kept, true, 0, 0, records,
                         0, true);
        }
        rc = out_finish("count", NULL);
    }
    dedup_hll_free(h);
    dedup_strset_free(set);
    return rc;
}
