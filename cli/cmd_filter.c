/*
 * cmd_filter.c - `dedup filter ACTION FILE ...`: filter files built once
 * and then added to, queried, inspected and merged.
 *
 * This file knows nothing about any filter type: it parses options and
 * calls the library's seen-set (dedup/seen.h) for every filter; a type's
 * own options, help and messages come from its entry in filter_types.h.
 * The type of an existing file comes from its header (dedup_peek_file), so
 * every action works on every registered type.  Files and items are read
 * in filter_files.c, info is filter_info.c, verify filter_verify.c.
 *
 * Items are whole lines without their terminator ("\n", or NUL with -z): a
 * last line without a terminator is still an item, an empty line is the
 * empty item, and every other byte ("\r", NUL, invalid UTF-8) is part of
 * the item unless --crlf strips one trailing "\r".  Standard input is read
 * in large blocks and split with memchr; items go to the filter in batches.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "dedup/hash.h"
#include "filter_cmd.h"
#include "state_file.h"
#include "redis_cli.h"

static const char filter_help_head[] =
    "Usage: dedup filter ACTION FILE [OPTION...] [ITEM...]\n"
    "\n"
    "Filter files: build a probabilistic set once, then add and query items.\n"
    "\n"
    "Actions:\n"
    "  create FILE [-t TYPE] -n N [-p P] [-m SIZE] [-k K] [--seed S] [--force]\n"
    "        create an empty filter for N items at false-positive rate P (default\n"
    "        1%); or size it by -m with -n or -p (as in 'dedup calc')\n"
    "  add FILE [ITEM...]     add the items (none given: lines of standard input)\n"
    "  query FILE [ITEM...]   print the items that might be present\n"
    "  del FILE [ITEM...]     delete items (only types that can delete)\n"
    "  info FILE... [--json]  type, size, k, fill, estimated items, rate now\n"
    "  merge OUT IN...        write the union of the IN filters to OUT; they must\n"
    "                         have the same type, size, k and seed\n"
    "  create|add|query|del|info redis://HOST:PORT[/DB]/NAME [-t bitmap|module|cuckoo]\n"
    "                         the same on a filter kept in Redis (bitmap: plain strings,\n"
    "                         any server; module: BF.* of dedup_redis.so or RedisBloom;\n"
    "                         cuckoo: their CF.*, which deletes); rediss:// over TLS\n"
    "                         (--tls-cacert, --tls-cert, --tls-key, --tls-insecure; the\n"
    "                         password from --redis-auth-file, DEDUP_REDIS_PASSWORD or\n"
    "                         REDISCLI_AUTH: see dedup --help)\n"
    "  copy SRC DST           a blocked filter file to a Redis bitmap filter or back\n"
    "  verify FILE --known K --fresh F   before going live: every item of K (added)\n"
    "                         must be found, and the rate measured on F (never\n"
    "                         added) must agree with the rate FILE claims (99.9%\n"
    "                         interval); exit 1 when either fails\n"
    "\n"
    "Types (-t/--type, default bloom):\n";

static const char filter_help_tail[] =
    "\n"
    "Options:\n"
    "  -t, --type TYPE        create: the filter type (above)\n"
    "  -n, --items N          create: items planned: 1000000, 1e6, 10M\n"
    "  -p, --fpr P            create: false-positive rate at N items: 0.01, 1%, 1e-3\n"
    "  -m, --memory SIZE      create: bytes for the filter: 512K, 64M, 2G\n"
    "  -k, --hashes K         create: hashes per item (default: optimal)\n"
    "      --seed S           create: hash seed (decimal or 0x-hex)\n"
    "  -f, --force            create: overwrite an existing FILE\n"
    "  -c, --count            query: print only the number of items selected\n"
    "  -v, --invert           query: select the items that are certainly absent\n"
    "  -q, --quiet            query: print nothing; only the exit status\n"
    "  -z, --zero-terminated  items on standard input end with NUL, not newline\n"
    "      --crlf             strip one \"\\r\" before each newline (CRLF input)\n"
    "      --on-full warn|fail  add: past the capacity, warn once (default) or fail\n"
    "                         with nothing saved\n"
    "      --known FILE, --fresh FILE  verify: items added, items never added\n"
    "      --json             info: one JSON object per file, one per line\n"
    "  -h, --help             this help;  --version: the version\n"
    "\n"
    "Items are whole lines without the newline; \"-\" among the ITEMs reads\n"
    "standard input there.  Put -- before items that begin with '-'.\n"
    "Exit status: 0 success (query: some item selected), 1 query: none selected,\n"
    "del: some item was absent, or a write failed; 2 usage or file error.\n";

void dd_filter_usage(FILE *f)
{
    fputs(filter_help_head, f);
    for (size_t i = 0; filter_types[i]; i++) {
        fprintf(f, "  %-9s %s\n", filter_types[i]->name, filter_types[i]->description);
        if (filter_types[i]->create_help)
            fputs(filter_types[i]->create_help, f);
    }
    fputs(filter_help_tail, f);
}

/* Handles the options every action accepts; returns -1 if 'c' was not one
 * of them, else the exit status to return (or -2 to continue). */
int dd_filter_common_option(int c, const char *cmd, char **argv)
{
    switch (c) {
    case 'h': dd_filter_usage(stdout); return out_finish("filter", NULL);
    case OPT_VERSION: cli_print_version(); return out_finish("filter", NULL);
    case '?':
    case ':': arg_bad_option(cmd, c, argv, "dedup filter"); return CLI_EXIT_USAGE;
    default: return -1;
    }
}

/* ---- create -------------------------------------------------------------------- */

static int filter_create(int argc, char **argv)
{
    const char *cmd = "filter create";
    static const struct option base[] = {
        {"type", required_argument, NULL, 't'},   {"items", required_argument, NULL, 'n'},
        {"fpr", required_argument, NULL, 'p'},    {"memory", required_argument, NULL, 'm'},
        {"hashes", required_argument, NULL, 'k'}, {"seed", required_argument, NULL, OPT_SEED},
        {"force", no_argument, NULL, 'f'},        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION}};
    const size_t nbase = sizeof base / sizeof base[0];

    /* The option table: the common options, then every type's own, each
     * name once. */
    size_t nextra_opts = 0;
    for (size_t i = 0; filter_types[i]; i++)
        for (const struct option *o = filter_types[i]->create_options; o && o->name; o++)
            nextra_opts++;
    struct option *longopts = calloc(nbase + nextra_opts + 1, sizeof *longopts);
    filter_kv *extra = calloc((size_t)argc + 1, sizeof *extra);
    int rc = CLI_EXIT_USAGE;
    dedup_seen *made = NULL;
    const filter_type *t = NULL;
    if (!longopts || !extra) {
        cli_error("%s: out of memory", cmd);
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    memcpy(longopts, base, sizeof base);
    size_t nl = nbase;
    for (size_t i = 0; filter_types[i]; i++) {
        for (const struct option *o = filter_types[i]->create_options; o && o->name; o++) {
            bool dup = false;
            for (size_t j = 0; j < nl; j++)
                dup |= strcmp(longopts[j].name, o->name) == 0;
            if (dup)
                continue;
            longopts[nl].name = o->name;
            longopts[nl].has_arg = o->has_arg;
            longopts[nl].val = OPT_EXTRA + (int)nl;
            nl++;
        }
    }

    filter_create_opts co;
    memset(&co, 0, sizeof co);
    co.type = "bloom";
    co.seed = DEDUP_DEFAULT_SEED;
    bool seed_given = false;
    co.extra = extra;
    bool force = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":t:n:p:m:k:fh", longopts, NULL)) != -1) {
        int r = dd_filter_common_option(c, cmd, argv);
        if (r >= 0) {
            rc = r;
            goto out;
        }
        uint64_t v;
        switch (c) {
        case 't': co.type = optarg; break;
        case 'n':
            if (!arg_count(cmd, "-n/--items", optarg, &co.n))
                goto out;
            co.has_n = true;
            break;
        case 'p':
            if (!arg_prob(cmd, "-p/--fpr", optarg, &co.p))
                goto out;
            co.has_p = true;
            break;
        case 'm':
            if (!arg_size(cmd, "-m/--memory", optarg, &co.m))
                goto out;
            co.has_m = true;
            break;
        case 'k':
            if (!arg_uint(cmd, "-k/--hashes", optarg, 1, 64, &v))
                goto out;
            co.k = (uint32_t)v;
            co.has_k = true;
            break;
        case OPT_SEED:
            if (!arg_seed(cmd, "--seed", optarg, &co.seed))
                goto out;
            seed_given = true;
            break;
        case 'f': force = true; break;
        default:
            /* A type-specific option: kept for the type to parse. */
            extra[co.nextra].name = longopts[c - OPT_EXTRA].name;
            extra[co.nextra].value = optarg;
            co.nextra++;
            break;
        }
    }
    if (optind >= argc) {
        cli_error("%s: missing FILE (usage: dedup filter create FILE -t TYPE -n N -p P)", cmd);
        goto out;
    }
    if (argc - optind > 1) {
        cli_error("%s: one FILE only (unexpected '%s')", cmd, argv[optind + 1]);
        goto out;
    }
    co.path = argv[optind];
    t = filter_type_by_name(co.type);
    if (!t) {
        char names[256] = "";
        for (size_t i = 0; filter_types[i]; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, filter_types[i]->name, sizeof names - strlen(names) - 1);
        }
        cli_error("%s: -t/--type must be one of %s (got '%s')", cmd, names, co.type);
        goto out;
    }
    /* Type-specific options given for another type. */
    for (size_t i = 0; i < co.nextra; i++) {
        bool mine = false;
        for (const struct option *o = t->create_options; o && o->name; o++)
            mine |= strcmp(o->name, extra[i].name) == 0;
        if (!mine) {
            char owners[256] = "";
            for (size_t j = 0; filter_types[j]; j++)
                for (const struct option *o = filter_types[j]->create_options; o && o->name; o++)
                    if (strcmp(o->name, extra[i].name) == 0) {
                        strncat(owners, owners[0] ? "|" : "", sizeof owners - strlen(owners) - 1);
                        strncat(owners, filter_types[j]->name, sizeof owners - strlen(owners) - 1);
                    }
            cli_error("%s: --%s applies to --type %s, not to --type %s", cmd, extra[i].name,
                      owners, t->name);
            goto out;
        }
    }
    if (co.has_p && co.p > 0.5) {
        cli_error("%s: -p/--fpr must be at most 0.5 (got %g): past it a filter takes more new "
                  "items for old ones than it lets through", cmd, co.p);
        goto out;
    }
    struct stat st;
    if (!force && stat(co.path, &st) == 0) {
        cli_error("%s: %s already exists (use -f/--force to overwrite it)", cmd, co.path);
        goto out;
    }
    /* A new filter is keyed by a secret unless --seed fixes one: a crafted
     * collision then needs the seed, which only the file holds. */
    if (!seed_given && !dd_fresh_seed(&co.seed)) {
        cli_error("%s: no random seed from the system (%s): give --seed", cmd, strerror(errno));
        goto out;
    }
    rc = t->create(&co, &made);
    if (rc)
        goto out;
    rc = dd_filter_save(made, co.path) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (!rc && cli_verbosity >= 2) {
        filter_info_out io = {.f = stderr, .json = false, .first = true};
        t->info(made, &io);
    }
out:
    dedup_seen_free(made);
    free(longopts);
    free(extra);
    return rc;
}

/* ---- add / query / del ------------------------------------------------------------ */

typedef struct item_job {
    const char *path;
    const filter_type *t;
    dedup_seen *s;     /* the file's seen-set */
    uint64_t seed;     /* its hash seed */
    dedup_digest *dig;
    dedup_verdict *verdict;
    /* add */
    uint64_t added;
    dedup_status error;
    /* query */
    bool invert, count_only, quiet;
    char delim;
    uint64_t selected;
    bool out_failed;
    bool *answers;
    /* del */
    uint64_t absent;
} item_job;

/* The batch of n items as the seen-set takes them: their digests. */
static dedup_batch digest_batch(item_job *j, const filter_key *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        j->dig[i] = dedup_hash(keys[i].data, keys[i].len, j->seed);
    return (dedup_batch){.n = n, .digests = j->dig};
}

/* Adds through dedup_seen_add: counting and cuckoo filters count every
 * add (an item added twice is deleted twice), the others hold a set. */
static bool add_batch(void *ctx, const filter_key *keys, size_t n)
{
    item_job *j = ctx;
    size_t done = 0;
    dedup_batch b = digest_batch(j, keys, n);
    dedup_status s = dedup_seen_add(j->s, &b, &done);
    j->added += done;
    if (s) {
        j->error = s;
        return false;
    }
    return true;
}

static bool query_batch(void *ctx, const filter_key *keys, size_t n)
{
    item_job *j = ctx;
    dedup_batch b = digest_batch(j, keys, n);
    if (dedup_seen_query(j->s, &b, j->verdict) != DEDUP_OK)
        return false; /* local filters cannot fail */
    for (size_t i = 0; i < n; i++) {
        if ((j->verdict[i] != DEDUP_NEW) == j->invert)
            continue;
        j->selected++;
        if (j->quiet || j->count_only)
            continue;
        if (!out_write(keys[i].data, keys[i].len) || !out_write(&j->delim, 1)) {
            j->out_failed = true;
            return false;
        }
    }
    return true;
}

static bool del_batch(void *ctx, const filter_key *keys, size_t n)
{
    item_job *j = ctx;
    dedup_batch b = digest_batch(j, keys, n);
    dedup_status s = dedup_seen_delete(j->s, &b, j->answers);
    if (s) {
        j->error = s;
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!j->answers[i]) {
            j->absent++;
            if (j->absent <= 10)
                cli_warn("%s: '%.*s' is not in the filter (certainly absent); nothing deleted "
                         "for it",
                         j->path, (int)(keys[i].len > 200 ? 200 : keys[i].len),
                         (const char *)keys[i].data);
        } else {
            j->added++;
        }
    }
    return true;
}

/* Explains that the file's type cannot delete, and which types can. */
static void no_delete_error(const char *path, const filter_type *t)
{
    char can[256] = "";
    for (size_t i = 0; filter_types[i]; i++) {
        if (filter_types[i]->no_delete_reason)
            continue;
        strncat(can, can[0] ? " or --type " : "--type ", sizeof can - strlen(can) - 1);
        strncat(can, filter_types[i]->name, sizeof can - strlen(can) - 1);
    }
    cli_error("filter del: %s is %s %s, which cannot delete items: %s. %s%s.", path,
              cli_a(t->noun), t->noun,
              t->no_delete_reason ? t->no_delete_reason : "the type does not support it",
              can[0] ? "Create a filter that can delete with " : "Deleting needs a counting Bloom "
                                                                "or cuckoo filter, which this "
                                                                "build of dedup does not have",
              can);
}

static int filter_items(const char *action, int argc, char **argv)
{
    enum { A_ADD, A_QUERY, A_DEL } a = strcmp(action, "add") == 0     ? A_ADD
                                       : strcmp(action, "query") == 0 ? A_QUERY
                                                                      : A_DEL;
    char cmd[32];
    snprintf(cmd, sizeof cmd, "filter %s", action);
    static const struct option longopts[] = {
        {"count", no_argument, NULL, 'c'},  {"invert", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},  {"zero-terminated", no_argument, NULL, 'z'},
        {"crlf", no_argument, NULL, OPT_CRLF}, {"help", no_argument, NULL, 'h'},
        {"on-full", required_argument, NULL, OPT_ON_FULL},
        {"version", no_argument, NULL, OPT_VERSION}, {NULL, 0, NULL, 0}};
    item_opts io = {'\n', false};
    dedup_on_full on_full = DEDUP_ON_FULL_WARN;
    item_job j;
    memset(&j, 0, sizeof j);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, a == A_QUERY ? ":cvqzh" : ":zh", longopts, NULL)) != -1) {
        int r = dd_filter_common_option(c, cmd, argv);
        if (r >= 0)
            return r;
        switch (c) {
        case 'c':
        case 'v':
        case 'q':
            if (a != A_QUERY) {
                cli_error("%s: option '%s' applies to 'filter query' only", cmd, argv[optind - 1]);
                return CLI_EXIT_USAGE;
            }
            j.count_only |= c == 'c';
            j.invert |= c == 'v';
            j.quiet |= c == 'q';
            break;
        case 'z': io.delim = '\0'; break;
        case OPT_CRLF: io.strip_cr = true; break;
        case OPT_ON_FULL:
            if (a != A_ADD) {
                cli_error("%s: --on-full applies to 'filter add' only", cmd);
                return CLI_EXIT_USAGE;
            }
            if (strcmp(optarg, "warn") == 0)
                on_full = DEDUP_ON_FULL_WARN;
            else if (strcmp(optarg, "fail") == 0)
                on_full = DEDUP_ON_FULL_FAIL;
            else if (strcmp(optarg, "grow") == 0) {
                cli_error("%s: --on-full grow: a filter file keeps the size it was created with "
                          "(create it with --type scalable or cuckoo-chain to grow); give warn or fail",
                          cmd);
                return CLI_EXIT_USAGE;
            } else {
                cli_error("%s: --on-full must be warn or fail (got '%s')", cmd, optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        default: break;
        }
    }
    if (optind >= argc) {
        cli_error("%s: missing FILE (usage: dedup filter %s FILE [ITEM...])", cmd, action);
        return CLI_EXIT_USAGE;
    }
    j.path = argv[optind++];
    j.delim = io.delim;

    if (a == A_DEL) {
        dedup_header hdr;
        if (!dd_filter_peek_type(j.path, &hdr, &j.t))
            return CLI_EXIT_USAGE;
        if (j.t->no_delete_reason) {
            no_delete_error(j.path, j.t);
            return CLI_EXIT_USAGE;
        }
    }
    /* A file changed here, a --state file or a plain filter file, takes the
     * lock (FILE.lock) a run on it holds: two changes at once would each
     * save their own, the last one losing the other's items. */
    int state_lock = -1;
    struct stat fst;
    if (a != A_QUERY && stat(j.path, &fst) == 0 && S_ISREG(fst.st_mode) &&
        (state_lock = dd_state_lock(j.path)) < 0)
        return CLI_EXIT_USAGE;
    if (!dd_filter_load(j.path, &j.t, &j.s)) {
        dd_state_unlock(state_lock);
        return CLI_EXIT_USAGE;
    }
    j.seed = dedup_seen_seed(j.s);
    dedup_seen_info before;
    dedup_seen_get_info(j.s, &before);
    if (a == A_ADD && before.capacity && dedup_seen_set_on_full(j.s, on_full) != DEDUP_OK &&
        on_full != DEDUP_ON_FULL_WARN) {
        cli_error("%s: %s: --on-full fail needs a filter with a fixed capacity", cmd, j.path);
        dedup_seen_free(j.s);
        return CLI_EXIT_USAGE;
    }
    j.answers = malloc(ITEM_BATCH * sizeof *j.answers);
    j.dig = malloc(ITEM_BATCH * sizeof *j.dig);
    j.verdict = malloc(ITEM_BATCH * sizeof *j.verdict);
    if (!j.answers || !j.dig || !j.verdict) {
        cli_error("%s: out of memory", cmd);
        free(j.answers);
        free(j.dig);
        free(j.verdict);
        dedup_seen_free(j.s);
        return CLI_EXIT_FAIL;
    }

    int rc = CLI_EXIT_OK;
    int nargs = argc - optind;
    char **args = argv + optind;
    if (a == A_ADD) {
        int r = dd_filter_for_each_item(nargs, args, &io, add_batch, &j);
        dedup_seen_info after;
        dedup_seen_get_info(j.s, &after);
        /* counting and cuckoo count their adds themselves; a FAIL there is
         * checked once all are in (nothing is saved past capacity) */
        bool past = after.capacity && after.over_capacity && after.items > before.items;
        if (!j.error && past && before.can_delete && on_full == DEDUP_ON_FULL_FAIL)
            j.error = DEDUP_ERR_FULL;
        if (r > 0) {
            rc = r; /* read error: the file is left as it was */
        } else if (j.error == DEDUP_ERR_FULL && after.capacity) {
            cli_error("%s: %s holds its capacity of %" PRIu64 " items and --on-full fail stops "
                      "(after %" PRIu64 " items of this run); nothing was saved: create a larger "
                      "filter, or one that grows (--type scalable or cuckoo-chain)",
                      cmd, j.path, after.capacity, j.added);
            rc = CLI_EXIT_FAIL;
        } else if (j.error) {
            cli_error("%s: %s after %" PRIu64 " items; nothing was saved", j.path,
                      dedup_strerror(j.error), j.added);
            rc = CLI_EXIT_FAIL;
        } else if (!dd_filter_save(j.s, j.path)) {
            rc = CLI_EXIT_FAIL;
        } else {
            if (past)
                cli_warn("%s: %s now holds %s%" PRIu64 " items, past the %" PRIu64 " it was "
                         "created for: its false-positive rate is %.3g%% now (%.3g%% planned) and "
                         "climbs with every add (--on-full fail refuses instead)",
                         cmd, j.path, after.distinct_exact ? "" : "about ", after.items,
                         after.capacity, after.fpr_bound * 100, after.fpr_target * 100);
            cli_info(2, "%s: added %" PRIu64 " items", j.path, j.added);
        }
    } else if (a == A_QUERY) {
        int r = dd_filter_for_each_item(nargs, args, &io, query_batch, &j);
        bool epipe = false;
        if (j.count_only && !j.out_failed)
            printf("%" PRIu64 "\n", j.selected);
        int w = out_finish(cmd, &epipe);
        if (r > 0)
            rc = r;
        else if (w)
            rc = CLI_EXIT_USAGE;
        else
            rc = j.selected ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    } else {
        int r = dd_filter_for_each_item(nargs, args, &io, del_batch, &j);
        if (r > 0) {
            rc = r;
        } else if (j.error) {
            cli_error("%s: %s; nothing was saved", j.path, dedup_strerror(j.error));
            rc = CLI_EXIT_FAIL;
        } else if (!dd_filter_save(j.s, j.path)) {
            rc = CLI_EXIT_FAIL;
        } else {
            if (j.absent > 10)
                cli_warn("%s: %" PRIu64 " items were not in the filter", j.path, j.absent);
            cli_info(2, "%s: deleted %" PRIu64 " items", j.path, j.added);
            rc = j.absent ? CLI_EXIT_FAIL : CLI_EXIT_OK;
        }
    }
    free(j.answers);
    free(j.dig);
    free(j.verdict);
    dedup_seen_free(j.s);
    return rc;
}

/* ---- merge ------------------------------------------------------------------------------ */

static int filter_merge(int argc, char **argv)
{
    const char *cmd = "filter merge";
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, OPT_VERSION},
                                             {NULL, 0, NULL, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int r = dd_filter_common_option(c, cmd, argv);
        if (r >= 0)
            return r;
    }
    if (argc - optind < 2) {
        cli_error("%s: needs OUT and at least one IN (usage: dedup filter merge OUT IN...)", cmd);
        return CLI_EXIT_USAGE;
    }
    const char *outp = argv[optind];
    const char *first = argv[optind + 1];
    const filter_type *t;
    dedup_seen *accs = NULL;
    if (!dd_filter_load(first, &t, &accs))
        return CLI_EXIT_USAGE;
    if (t->no_merge_reason && argc - optind > 2) {
        cli_error("%s: %s is %s %s; %s cannot be merged%s%s", cmd, first, cli_a(t->noun), t->noun,
                  t->noun, t->no_merge_reason ? ": " : "", t->no_merge_reason ? t->no_merge_reason : "");
        dedup_seen_free(accs);
        return CLI_EXIT_USAGE;
    }
    int rc = CLI_EXIT_OK;
    for (int i = optind + 2; i < argc && !rc; i++) {
        const char *path = argv[i];
        const filter_type *t2;
        dedup_seen *hs = NULL;
        if (!dd_filter_load(path, &t2, &hs)) {
            rc = CLI_EXIT_USAGE;
            break;
        }
        if (t2 != t) {
            cli_error("%s: cannot merge %s and %s: types differ (%s is %s %s, %s %s %s)", cmd,
                      first, path, first, cli_a(t->noun), t->noun, path, cli_a(t2->noun), t2->noun);
            rc = CLI_EXIT_USAGE;
        } else {
            char why[256] = "";
            dedup_status s = dedup_seen_merge(accs, hs, why, sizeof why);
            if (s == DEDUP_ERR_INCOMPATIBLE) {
                bool seeds = dedup_seen_seed(accs) != dedup_seen_seed(hs);
                cli_error("%s: cannot merge %s and %s: %s (%s)", cmd, first, path,
                          why[0] ? why : dedup_strerror(s),
                          seeds ? "their seeds differ too: each new filter gets its own secret "
                                  "seed, so create the filters to merge with the same --seed S"
                                : "filters merge only when created with the same type, size, k "
                                  "and seed");
                rc = CLI_EXIT_USAGE;
            } else if (s) {
                cli_error("%s: merging %s into %s: %s", cmd, path, first, dedup_strerror(s));
                rc = CLI_EXIT_FAIL;
            }
        }
        dedup_seen_free(hs);
    }
    if (!rc && !dd_filter_save(accs, outp))
        rc = CLI_EXIT_FAIL;
    dedup_seen_free(accs);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

int cmd_filter(int argc, char **argv)
{
    if (argc < 2) {
        cli_error("filter: missing ACTION (create, add, query, del, info or merge); "
                  "see 'dedup filter --help'");
        return CLI_EXIT_USAGE;
    }
    const char *action = argv[1];
    if (strcmp(action, "-h") == 0 || strcmp(action, "--help") == 0 ||
        strcmp(action, "help") == 0) {
        dd_filter_usage(stdout);
        return out_finish("filter", NULL);
    }
    if (strcmp(action, "--version") == 0) {
        cli_print_version();
        return out_finish("filter", NULL);
    }
    argc--;
    argv++;
    /* A Redis filter (redis://host:port/NAME) and copies to and from one. */
    if (strcmp(action, "copy") == 0 || (argc > 1 && dd_is_redis_url(argv[1])))
        return dd_filter_redis(argc, argv);
    if (strcmp(action, "create") == 0)
        return filter_create(argc, argv);
    if (strcmp(action, "add") == 0 || strcmp(action, "query") == 0)
        return filter_items(action, argc, argv);
    if (strcmp(action, "del") == 0 || strcmp(action, "delete") == 0)
        return filter_items("del", argc, argv);
    if (strcmp(action, "info") == 0)
        return dd_filter_info(argc, argv);
    if (strcmp(action, "merge") == 0)
        return filter_merge(argc, argv);
    if (strcmp(action, "verify") == 0)
        return dd_filter_verify(argc, argv);
    cli_error("filter: unknown action '%s' (create, add, query, del, info, merge or verify; see "
              "'dedup filter --help')",
              action);
    return CLI_EXIT_USAGE;
}
