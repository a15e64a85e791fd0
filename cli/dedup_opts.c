/*
 * dedup_opts.c - the main job's --help, its option table and the parser
 * that checks every option against the others before any input is read.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "keep_last.h"
#include "preflight.h"
#include "progress.h"
#include "dedup/extsort.h"
#include "dedup/hash.h"
#include "dedup/hll.h"
#include "dedup/seen.h"
#include "dedup/timeparse.h"
#include "dedup/window.h"
#include "io.h"
#include "external.h"
#include "feeder.h"
#include "cli_args.h"
#include "intkeys.h"
#include "keys.h"
#include "seen_spec.h"
#include "redis_cli.h"
#include "tier_spec.h"
#include "dedup_opts.h"
#include "outfile.h"

static void usage(FILE *f)
{
    char hb[32];
    const char *src;
    uint64_t budget = dd_external_default_memory(&src);
    cli_human_size(budget, hb, sizeof hb);
    fprintf(f,
"Usage: dedup [OPTION]... [FILE]...\n"
"Write each record's first occurrence, in input order; drop the repeats.\n"
"With no FILE, or when FILE is -, read standard input.\n"
"\n"
"Method:\n"
"  --mode=METHOD          exact (default: full keys, never wrong),\n"
"                         fingerprint (128-bit digests only, ~n^2/2^129 collision odds),\n"
"                         bloom | blocked (fixed memory; may drop a new record\n"
"                         with probability at most -p, never keeps a repeat),\n"
"                         scalable (Bloom filters that grow: no -n needed, the\n"
"                         rate stays under -p), cuckoo (grows unless sized by -m)\n"
"  -n, --items=N          keys expected (sizes filters; a hint for exact modes)\n"
"      --on-full=warn|grow|fail  a bloom, blocked or cuckoo filter past -n keys:\n"
"                         warn once and go on at a climbing rate (default),\n"
"                         grow into a chain whose rate stays under -p, or fail\n"
"                         (exit 1) before a record past it\n"
"  -p, --fpr=P            false-positive rate for filters, e.g. 0.01 or 1%% (default 1%%)\n"
"  -m, --memory=SIZE      memory for a filter (K/M/G); with -n, a ceiling.  In exact\n"
"                         mode, the budget: while the distinct keys fit it works in\n"
"                         memory, beyond it spills to --tmpdir and finishes on disk\n"
"                         (peak about SIZE + 16M).  Without -m: %s here\n"
"                         (%s; $DEDUP_MEMORY sets it)\n"
"  -T, --tmpdir=DIR       temporary files for -m/--sort (default $TMPDIR, else /tmp)\n"
"  -s, --state=FILE       seen-set kept across runs: loaded if it exists, records\n"
"                         in it are dropped, saved atomically at the end; one run\n"
"                         at a time (FILE.lock); a new one gets a secret seed\n"
"      --seed=S           hash seed (decimal or 0x-hex) instead of a new state's,\n"
"                         store's or run's secret one\n"
"Keys:\n"
DD_KEY_HELP
"      --force-keys       use these key options on a --state or --store made\n"
"                         with others (they are recorded from then on)\n"
"Integer keys:\n"
"      --keys=int         the key is an integer (decimal, or hex with 0x); then\n"
"                         --mode exact (64-bit integer set, ~10 bytes a key with -n),\n"
"                         bitmap (one bit per possible ID, needs --range) or roaring\n"
"                         (compressed bitmaps, for sparse IDs)\n"
"      --range=LO..HI     the IDs a bitmap holds (refused when it needs more than -m)\n"
"      --on-bad-key=fail|skip|keep  a key that is not an integer (or is outside\n"
"                         --range), or a record with no key (malformed CSV,\n"
"                         bad JSON, not a URL) stops the run naming file, line\n"
"                         and value\n"
"                         (default, exit 1), or its record is dropped, or written\n", hb, src);
    fputs(
"Windows (streams: a record is a duplicate only within a window of time):\n"
"      --window=DURATION  duplicate when the same key was kept less than DURATION\n"
"                         before or after it (500ms, 10s, 10m, 1h, 7d); a key that\n"
"                         keeps arriving is kept once per DURATION\n"
"      --window-type=T    sliding (default) or tumbling (same aligned window:\n"
"                         windows start at multiples of DURATION from the epoch)\n"
"      --refresh-on-dup   a repeat inside the window renews its key: a key that\n"
"                         keeps arriving less than DURATION (or N records) apart\n"
"                         is kept once and suppressed while it keeps coming\n"
"                         (sliding windows and --last; --lateness below DURATION)\n"
"      --last=N           duplicate when the same key was kept in the previous N records\n"
"      --time-field=N     event time is field N (-d delimiter), a column name\n"
"                         (--header) or a JSON path (--json); default: arrival time\n"
"      --time-format=F    epoch | epoch_ms | epoch_us | iso8601 (default: detect\n"
"                         epoch seconds or milliseconds on the first record)\n"
"      --lateness=DURATION  records up to DURATION behind the newest event time are\n"
"                         still decided (default 0); older ones are late\n"
"      --late=keep|drop|FILE  late records are written (default), dropped, or\n"
"                         written to FILE\n"
"      --on-bad-time=fail|drop|keep  a record whose time field cannot be read\n"
"                         stops the run (default, exit 1), is dropped, or is kept\n"
"  With --mode bloom|blocked a window is approximate (-n: keys per window, -p);\n"
"  -s/--state saves and resumes the window.\n", f);
    fputs(
"Persistent store and tiers (history across runs, beyond memory):\n"
"      --store=DIR        exact seen-set in DIR (RocksDB), kept across runs: a run\n"
"                         reads what it must and writes only its new keys; with\n"
"                         --mode bloom|blocked|cuckoo|scalable (-n/-p/-m) that filter\n"
"                         goes in front of it\n"
"      --sync=MODE        the store's durability: batch (default: a kill -9 loses\n"
"                         nothing, a power loss the last batches), always (fsync per\n"
"                         batch: no key ever written out as new is lost), none\n"
"      --tier=SPEC        one tier of a stack, top first (repeat the option):\n"
"                           bloom|blocked|cuckoo|scalable[:n=N,p=P,m=SIZE,file=PATH]\n"
"                           file:PATH   a filter file (saved back after the run)\n"
"                           exact       this run's keys in memory\n"
"                           redis://HOST:PORT[/DB][,ttl=D,reserve=D,name=P,retries=N]\n"
"                                       Redis (exact keys; ttl=: the recent keys)\n"
"                           redis-sentinel://HOST:PORT[,...]/MASTER[/DB][,ttl=D,...]\n"
"                                       the same, on the master the sentinels name\n"
"                           rocksdb:DIR[,sync=MODE,keys=digest|whole,expire=DURATION,\n"
"                                       cache=SIZE]\n"
"                         a key goes down until a tier settles it: a filter's\n"
"                         'certainly new' (when it knows the store's keys), an exact\n"
"                         tier's 'seen'; --window/--last put the window on top\n"
"      --rebuild-filter   fill the filters from the stores below them at start\n"
"      --trust-filter     a filter's 'maybe' counts as a duplicate (not exact: drops\n"
"                         new keys at the filter's rate, saves the store's reads)\n"
"      --shared           other processes write the tiers below: a filter's 'new'\n"
"                         is always checked there\n"
"  --stats adds each tier's lookups, hits, keys passed down and time.\n", f);
    fprintf(f,
"Output:\n"
"      --keep=first|last  write each key's first occurrence (default) or its last,\n"
"                         in the order of those last ones (two passes; standard\n"
"                         input is copied to --tmpdir first)\n"
"  -D, --duplicates       write every occurrence after the first instead\n"
"  -c, --count            write each distinct record once, prefixed by its count\n"
"  -u, --unique           write only records that occur exactly once\n"
"      --sort             write the distinct records sorted bytewise instead of in\n"
"                         input order (as LC_ALL=C sort -u; with -c as sort | uniq -c)\n"
"  -o, --output=FILE      write to FILE instead of standard output\n"
"  -z, --zero-terminated  records end with NUL, not newline\n"
"      --line-buffered    flush after every record written\n"
"      --stats[=json]     print counts, memory and rates to stderr at the end\n"
"      --progress, --no-progress  progress on stderr (default: when it is a terminal)\n"
"  -q, --quiet            only errors on stderr\n"
"  -v, --verbose          more detail on stderr\n"
"  -h, --help             show this help and exit\n"
"      --version          show the version and exit\n"
"\n"
"%s"
"\n"
"Subcommands: dedup calc (size a filter), dedup filter (filter files), dedup split\n"
"(partition by key for many machines), dedup ring (what a change of nodes moves),\n"
"dedup count (distinct keys), dedup plan (which method, with its figures), dedup\n"
"store info DIR (a persistent store).  Each takes --help.  See dedup(1).\n"
"Exit status: 0 success, 1 failure while running (e.g. write error), 2 bad usage or input.\n",
            dd_redis_help);
}

enum {
    OPT_MODE = 256, OPT_STATS, OPT_PROGRESS, OPT_NO_PROGRESS,
    OPT_HELP, OPT_VERSION, OPT_LINEBUF, OPT_SEED, OPT_SORT,
    OPT_WINDOW, OPT_WINDOW_TYPE, OPT_LAST, OPT_TIME_FIELD, OPT_TIME_FORMAT, OPT_LATENESS,
    OPT_LATE, OPT_BAD_TIME, OPT_KEYS, OPT_BAD_KEY, OPT_RANGE,
    OPT_ON_FULL, OPT_KEEP, OPT_REFRESH,
    OPT_TIER, OPT_STORE, OPT_SYNC, OPT_TRUST_FILTER, OPT_REBUILD_FILTER, OPT_SHARED,
    OPT_FORCE_KEYS
};

static const struct option long_opts[] = {
    {"mode", required_argument, NULL, OPT_MODE},
    {"items", required_argument, NULL, 'n'},
    {"fpr", required_argument, NULL, 'p'},
    {"memory", required_argument, NULL, 'm'},
    {"tmpdir", required_argument, NULL, 'T'},
    {"sort", no_argument, NULL, OPT_SORT},
    {"state", required_argument, NULL, 's'},
    DD_KEY_LONG_OPTIONS,
    {"duplicates", no_argument, NULL, 'D'},
    {"count", no_argument, NULL, 'c'},
    {"unique", no_argument, NULL, 'u'},
    {"output", required_argument, NULL, 'o'},
    {"line-buffered", no_argument, NULL, OPT_LINEBUF},
    {"stats", optional_argument, NULL, OPT_STATS},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"window-type", required_argument, NULL, OPT_WINDOW_TYPE},
    {"refresh-on-dup", no_argument, NULL, OPT_REFRESH},
    {"last", required_argument, NULL, OPT_LAST},
    {"time-field", required_argument, NULL, OPT_TIME_FIELD},
    {"time-format", required_argument, NULL, OPT_TIME_FORMAT},
    {"lateness", required_argument, NULL, OPT_LATENESS},
    {"late", required_argument, NULL, OPT_LATE},
    {"on-bad-time", required_argument, NULL, OPT_BAD_TIME},
    {"keys", required_argument, NULL, OPT_KEYS},
    {"on-bad-key", required_argument, NULL, OPT_BAD_KEY},
    {"range", required_argument, NULL, OPT_RANGE},
    {"on-full", required_argument, NULL, OPT_ON_FULL},
    {"keep", required_argument, NULL, OPT_KEEP},
    {"tier", required_argument, NULL, OPT_TIER},
    {"store", required_argument, NULL, OPT_STORE},
    {"sync", required_argument, NULL, OPT_SYNC},
    {"trust-filter", no_argument, NULL, OPT_TRUST_FILTER},
    {"rebuild-filter", no_argument, NULL, OPT_REBUILD_FILTER},
    {"shared", no_argument, NULL, OPT_SHARED},
    {"force-keys", no_argument, NULL, OPT_FORCE_KEYS},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    DD_REDIS_LONG_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* "0", "0s", "0.0ms"...: a zero duration, which cli_parse_duration() refuses
 * but --lateness accepts. */
static bool zero_duration(const char *s)
{
    static const char *const units[] = {"", "s", "sec", "ms", "us", "m", "min", "h", "d"};
    char *end;
    double v = strtod(s, &end);
    if (end == s || v != 0.0 || *s == '-')
        return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i]) == 0)
            return true;
    return false;
}

static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode = "exact";
    o->term = '\n';
    dd_keyspec_init(&o->key);
    o->progress = -1;
    o->sizing.seed = DEDUP_DEFAULT_SEED;
    int kinds = 0;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":n:p:m:s:" DD_KEY_SHORT_OPTIONS "Dcuo:qvT:h", long_opts,
                            NULL)) != -1) {
        int kr = dd_key_option(c, optarg, NULL, &o->key, &o->term);
        if (kr < 0)
            return -1;
        if (kr)
            continue;
        switch (c) {
        case OPT_MODE: o->mode = optarg; break;
        case 'n':
            if (!cli_parse_count(optarg, &o->sizing.items)) {
                cli_error("-n/--items must be a positive whole number like 1000000, 1e6 or 10M (got '%s')", optarg);
                return -1;
            }
            break;
        case 'p':
            if (!cli_parse_prob(optarg, &o->sizing.fpr)) {
                cli_error("-p/--fpr must be a rate between 0 and 1 exclusive, like 0.01 or 1%% (got '%s')", optarg);
                return -1;
            }
            break;
        case 'm':
            if (!cli_parse_size(optarg, &o->sizing.memory)) {
                cli_error("-m/--memory must be a size like 64M or 2G (got '%s')", optarg);
                return -1;
            }
            break;
        case 's': o->state = optarg; break;
        case 'T': o->tmpdir = optarg; break;
        case OPT_SORT: o->sorted = true; break;
        case 'D': o->out = OUT_DUPLICATES; kinds++; break;
        case 'c': o->out = OUT_COUNT; kinds++; break;
        case 'u': o->out = OUT_UNIQUE; kinds++; break;
        case 'o': o->output = optarg; break;
        case OPT_LINEBUF: o->line_buffered = true; break;
        case OPT_STATS:
            if (!optarg || strcmp(optarg, "text") == 0)
                o->stats = STATS_TEXT;
            else if (strcmp(optarg, "json") == 0)
                o->stats = STATS_JSON;
            else {
                cli_error("--stats takes no value or 'json' (got '%s')", optarg);
                return -1;
            }
            break;
        case OPT_PROGRESS: o->progress = 1; break;
        case OPT_NO_PROGRESS: o->progress = 0; break;
        case OPT_SEED:
            if (!arg_seed(NULL, "--seed", optarg, &o->sizing.seed))
                return -1;
            o->seed_given = true;
            o->sizing.seed_given = true;
            break;
        case OPT_FORCE_KEYS: o->force_keys = true; break;
        case OPT_WINDOW:
            if (!cli_parse_duration(optarg, &o->window_us) ||
                o->window_us > DEDUP_WINDOW_MAX_DURATION) {
                cli_error("--window must be a duration like 500ms, 10s, 10m, 1h or 7d (got '%s')", optarg);
                return -1;
            }
            break;
        case OPT_WINDOW_TYPE:
            if (strcmp(optarg, "sliding") != 0 && strcmp(optarg, "tumbling") != 0) {
                cli_error("--window-type must be sliding or tumbling (got '%s')", optarg);
                return -1;
            }
            o->tumbling = strcmp(optarg, "tumbling") == 0;
            o->window_opts = true;
            break;
        case OPT_REFRESH:
            o->refresh_on_dup = true;
            o->window_opts = true;
            break;
        case OPT_LAST:
            if (!cli_parse_count(optarg, &o->last_n) || o->last_n >= DEDUP_WINDOW_MAX_DURATION) {
                cli_error("--last must be a positive number of records (got '%s')", optarg);
                return -1;
            }
            break;
        case OPT_TIME_FIELD: {
            uint64_t f;
            o->time_spec = optarg;
            if (cli_parse_count(optarg, &f) && f >= 1 && f <= 1000000)
                o->time_field = (size_t)f;
            else if (*optarg && !strchr(optarg, ','))
                o->time_field = SIZE_MAX; /* a name or a JSON path: dd_time_key_compile */
            else {
                cli_error("--time-field must be a field number from 1, a column name (with "
                          "--header) or a JSON path (with --json) (got '%s')",
                          optarg);
                return -1;
            }
            o->window_opts = true;
            break;
        }
        case OPT_TIME_FORMAT:
            if (!dedup_time_format_from_name(optarg, &o->time_format)) {
                cli_error("--time-format must be epoch, epoch_ms, epoch_us or iso8601 (got '%s')", optarg);
                return -1;
            }
            o->window_opts = true;
            break;
        case OPT_LATENESS:
            if (!zero_duration(optarg) && (!cli_parse_duration(optarg, &o->lateness_us) ||
                                           o->lateness_us > DEDUP_WINDOW_MAX_DURATION)) {
                cli_error("--lateness must be a duration like 0, 500ms, 30s or 5m (got '%s')", optarg);
                return -1;
            }
            o->window_opts = true;
            break;
        case OPT_LATE:
            if (strcmp(optarg, "keep") == 0)
                o->late = LATE_KEEP;
            else if (strcmp(optarg, "drop") == 0)
                o->late = LATE_DROP;
            else if (*optarg) {
                o->late = LATE_FILE;
                o->late_file = optarg;
            } else {
                cli_error("--late must be keep, drop or a file name");
                return -1;
            }
            o->window_opts = true;
            break;
        case OPT_KEEP:
            if (strcmp(optarg, "first") == 0)
                o->keep_last = false;
            else if (strcmp(optarg, "last") == 0)
                o->keep_last = true;
            else {
                cli_error("--keep must be first or last (got '%s')", optarg);
                return -1;
            }
            break;
        case OPT_ON_FULL:
            if (strcmp(optarg, "warn") == 0)
                o->sizing.on_full = DEDUP_ON_FULL_WARN;
            else if (strcmp(optarg, "grow") == 0)
                o->sizing.on_full = DEDUP_ON_FULL_GROW;
            else if (strcmp(optarg, "fail") == 0)
                o->sizing.on_full = DEDUP_ON_FULL_FAIL;
            else {
                cli_error("--on-full must be warn, grow or fail (got '%s')", optarg);
                return -1;
            }
            o->on_full_given = true;
            break;
        case OPT_BAD_TIME:
            if (strcmp(optarg, "fail") == 0)
                o->bad_time = BAD_TIME_FAIL;
            else if (strcmp(optarg, "drop") == 0)
                o->bad_time = BAD_TIME_DROP;
            else if (strcmp(optarg, "keep") == 0)
                o->bad_time = BAD_TIME_KEEP;
            else {
                cli_error("--on-bad-time must be fail, drop or keep (got '%s')", optarg);
                return -1;
            }
            o->window_opts = true;
            break;
        case OPT_KEYS:
            if (strcmp(optarg, "int") != 0 && strcmp(optarg, "string") != 0) {
                cli_error("--keys must be int or string (got '%s')", optarg);
                return -1;
            }
            o->int_keys = strcmp(optarg, "int") == 0;
            break;
        case OPT_BAD_KEY:
            if (!dd_bad_key_from_name(optarg, &o->bad_key)) {
                cli_error("--on-bad-key must be fail, skip or keep (got '%s')", optarg);
                return -1;
            }
            o->bad_key_given = true;
            break;
        case OPT_RANGE:
            if (!dd_int_range(optarg, &o->sizing.range_lo, &o->sizing.range_hi)) {
                cli_error("--range must be LO..HI with LO <= HI, decimal or 0x-hex (got '%s')", optarg);
                return -1;
            }
            o->range_given = true;
            break;
        case OPT_TIER:
        case OPT_STORE:
        case OPT_SYNC:
        case OPT_TRUST_FILTER:
        case OPT_REBUILD_FILTER:
        case OPT_SHARED: {
            static const int which[] = {DD_TOPT_TIER, DD_TOPT_STORE, DD_TOPT_SYNC, DD_TOPT_TRUST,
                                        DD_TOPT_REBUILD, DD_TOPT_SHARED};
            if (!dd_tiers_opt(&o->sizing.tiers, which[c - OPT_TIER], optarg))
                return -1;
            break;
        }
        case 'q': cli_verbosity = 0; break;
        case 'v': cli_verbosity++; break;
        case 'h':
        case OPT_HELP: usage(stdout); return 1;
        case OPT_VERSION: cli_print_version(); return 1;
        case ':':
            cli_error("option '%s' needs a value (see dedup --help)", argv[optind - 1]);
            return -1;
        default: {
            int rr = dd_redis_option(&o->redis, c, optarg);
            if (rr > 0)
                break;
            if (rr < 0)
                return -1;
            if (optopt)
                cli_error("unknown option '-%c' (see dedup --help)", optopt);
            else
                cli_error("unknown option '%s' (see dedup --help)", argv[optind - 1]);
            return -1;
        }
        }
    }
    if (!dd_keyspec_check(&o->key, NULL))
        return -1;
    if (o->int_keys && (o->key.fields || o->key.csv || o->key.json || o->key.url)) {
        cli_error("--keys int takes one field of plain records as the integer: not with a "
                  "field list, --csv, --json or --url");
        return -1;
    }
    if (o->time_field && o->key.json && o->time_spec[0] != '.') {
        cli_error("with --json, --time-field is a JSON path such as .ts (got '%s')", o->time_spec);
        return -1;
    }
    if (o->time_field == SIZE_MAX && !o->key.json && !o->key.header) {
        cli_error("--time-field %s names a column: it needs --header", o->time_spec);
        return -1;
    }
    if (o->time_field && !o->key.header && (o->key.csv || o->key.json) &&
        !dd_time_key_compile(&o->key, o->time_spec, NULL, 0, NULL, &o->time_key))
        return -1;
    /* Keys from CSV, JSON or URLs may fail on a record: --on-bad-key says
     * what then, as for integer keys. */
    bool key_errs = o->key.csv || o->key.json || o->key.url;
    if (!o->key.header && !dd_keyspec_compile(&o->key, NULL, 0, NULL))
        return -1;
    dedup_seen_kind named = dedup_seen_kind_from_name(o->mode); /* a name, then the enum */
    if (o->int_keys || o->range_given || (o->bad_key_given && !key_errs) || named == DEDUP_SEEN_BITMAP ||
        named == DEDUP_SEEN_ROARING) {
        char msg[256];
        if (!dd_int_keys_check(o->int_keys, o->mode, o->range_given, o->bad_key_given, &o->sizing,
                               o->state, msg, sizeof msg, &o->kind)) {
            cli_error("%s", msg);
            return -1;
        }
        if (o->window_us || o->last_n || o->window_opts || o->out == OUT_COUNT ||
            o->out == OUT_UNIQUE) {
            cli_error("--keys int works with the whole input's first occurrences or -D: not with "
                      "%s", o->out == OUT_COUNT ? "-c/--count" : o->out == OUT_UNIQUE ? "-u/--unique"
                                                                                   : "a window");
            return -1;
        }
    } else {
        o->kind = dd_mode_kind(o->mode);
    }
    if (!o->kind) {
        char msg[160];
        dd_mode_unknown(msg, sizeof msg, o->mode);
        cli_error("%s", msg);
        return -1;
    }
    o->sizing.kind = o->kind;
    o->sizing.mode = o->mode;
    if (kinds > 1) {
        cli_error("choose one of -D/--duplicates, -c/--count and -u/--unique");
        return -1;
    }
    if (o->keep_last) {
        const char *no = dd_redis_used(&o->redis) ? "--redis (a shared seen-set cannot revise what was written)"
                         : o->sizing.tiers ? "--store/--tier (a store cannot revise what an earlier run wrote)"
                         : o->int_keys ? "--keys int"
                         : o->window_us || o->last_n ? "--window/--last (a window keeps first occurrences)"
                         : kinds ? "-D/--duplicates, -c/--count and -u/--unique"
                         : o->state ? "--state (a later run cannot revise what an earlier one wrote)"
                         : o->sizing.memory || o->sorted ? "-m/--memory and --sort (it needs every distinct key in memory, twice)"
                         : (o->kind != DEDUP_SEEN_EXACT && o->kind != DEDUP_SEEN_FINGERPRINT)
                             ? "a filter --mode (it needs exact counts: --mode exact or fingerprint)"
                             : NULL;
        if (no) {
            cli_error("--keep last cannot be combined with %s", no);
            return -1;
        }
    }
    /* two of the files the run writes that are one: one would replace the other */
    const char *late = o->late == LATE_FILE ? o->late_file : NULL;
    if (!dd_outfile_check_other(o->output, "-o", o->state, "--state") ||
        !dd_outfile_check_other(o->output, "-o", o->redis.uncertain_path, "--uncertain") ||
        !dd_outfile_check_other(o->output, "-o", late, "--late") ||
        !dd_outfile_check_other(late, "--late", o->state, "--state") ||
        !dd_outfile_check_other(late, "--late", o->redis.uncertain_path, "--uncertain") ||
        !dd_outfile_check_other(o->state, "--state", o->redis.uncertain_path, "--uncertain"))
        return -1;
    if (o->sizing.tiers && o->redis.uncertain_path && !o->redis.url) { /* a redis:// tier's */
        dd_tiers_set_uncertain(o->sizing.tiers, o->redis.uncertain_path);
        o->redis.uncertain_path = NULL;
    }
    if (dd_redis_used(&o->redis)) /* the seen-set is in Redis: none of the rest applies */
    {
        if (o->sizing.tiers) {
            cli_error("--redis cannot be combined with --store/--tier");
            return -1;
        }
        if (o->int_keys) { /* the Redis schemes keep digests of key bytes */
            cli_error("--redis cannot be combined with --keys int");
            return -1;
        }
        int rc = dd_redis_check_args(&o->redis, o->kind != DEDUP_SEEN_EXACT,
                                     o->window_us || o->last_n || o->window_opts, o->state != NULL,
                                     o->sizing.memory || o->sorted || o->tmpdir,
                                     o->out == OUT_COUNT || o->out == OUT_UNIQUE);
        o->mode = "redis"; /* what --stats names */
        return rc;
    }
    if (o->sizing.tiers &&
        !dd_tiers_check(o->sizing.tiers, o->kind, o->sizing.items, o->sizing.fpr, o->sizing.memory,
                        o->window_us || o->last_n, o->out == OUT_COUNT || o->out == OUT_UNIQUE,
                        o->state != NULL))
        return -1;
    if (o->sizing.tiers && (o->sorted || o->tmpdir)) {
        cli_error("--store/--tier keep every key on their own: --sort and --tmpdir do not apply");
        return -1;
    }
    if (o->window_us || o->last_n) {
        if (o->window_us && o->last_n) {
            cli_error("choose one of --window (time) and --last (records)");
            return -1;
        }
        if (o->out == OUT_COUNT || o->out == OUT_UNIQUE) {
            cli_error("--%s counts over the whole input: it cannot be combined with --%s",
                      o->out == OUT_COUNT ? "count" : "unique", o->window_us ? "window" : "last");
            return -1;
        }
        if ((o->sizing.memory && !o->sizing.tiers) || o->sorted || o->tmpdir) {
            cli_error("a window keeps only the keys inside it: -m/--memory, --sort and --tmpdir do not apply");
            return -1;
        }
        bool approx = o->kind == DEDUP_SEEN_BLOOM || o->kind == DEDUP_SEEN_BLOCKED;
        if (!approx && o->kind != DEDUP_SEEN_EXACT && o->kind != DEDUP_SEEN_FINGERPRINT) {
            cli_error("a window works with --mode exact (default), fingerprint (both exact), bloom "
                      "or blocked (both approximate: a table of fingerprints), not %s", o->mode);
            return -1;
        }
        if (approx && !o->sizing.items) {
            cli_error("--mode %s with a window needs -n/--items: the keys kept per window", o->mode);
            return -1;
        }
        if (o->last_n && (o->time_field || o->time_format || o->lateness_us || o->tumbling)) {
            cli_error("--last counts records: --time-field, --time-format, --lateness and "
                      "--window-type do not apply");
            return -1;
        }
        if (o->refresh_on_dup && o->tumbling) {
            cli_error("--refresh-on-dup renews a key within a sliding window: a tumbling window "
                      "forgets every key at its end whatever it renews, so it does not apply");
            return -1;
        }
        if (o->refresh_on_dup && o->window_us && o->lateness_us >= o->window_us) {
            cli_error("--refresh-on-dup needs --lateness below --window: a record a whole window "
                      "late could predate the renewal it would need");
            return -1;
        }
        if (o->time_field && o->time_field == o->key.field && o->key.field)
            cli_warn("the key field is also the time field");
        return 0;
    }
    if (o->window_opts) {
        cli_error("--window-type, --refresh-on-dup, --time-field, --time-format, --lateness, "
                  "--late and --on-bad-time need --window (or --last)");
        return -1;
    }
    o->sizing.counts = o->out == OUT_COUNT || o->out == OUT_UNIQUE;
    o->sizing.unique_only = o->out == OUT_UNIQUE;
    bool probabilistic = o->kind != DEDUP_SEEN_EXACT && o->kind != DEDUP_SEEN_FINGERPRINT;
    if (o->sizing.counts && probabilistic) {
        cli_error("--%s needs exact counts: use --mode exact or fingerprint (a Bloom filter cannot count)",
                  o->out == OUT_COUNT ? "count" : "unique");
        return -1;
    }
    if (o->sizing.counts && o->state) {
        cli_error("--state keeps a seen-set, not counts: it cannot be combined with --%s",
                  o->out == OUT_COUNT ? "count" : "unique");
        return -1;
    }
    bool exact = o->kind == DEDUP_SEEN_EXACT;
    if ((o->sorted || o->tmpdir) && !exact) {
        cli_error("--%s works with --mode exact only", o->sorted ? "sort" : "tmpdir");
        return -1;
    }
    /* -D writes repeats in input order as they come; past the in-memory
     * share only the engine can keep that order, so it runs from the start. */
    o->external = exact && !o->sizing.tiers && (o->sizing.memory || o->sorted || o->tmpdir ||
                            (o->out == OUT_DUPLICATES && !o->state));
    if (o->external && o->state) {
        cli_error("--state cannot be combined with -m/--memory, --sort or --tmpdir in exact mode "
                  "(a bounded run keeps no seen-set to save)");
        return -1;
    }
    if (o->sorted && o->out == OUT_DUPLICATES) {
        cli_error("--sort cannot be combined with -D/--duplicates (repeats are written in input order)");
        return -1;
    }
    if (!probabilistic && o->sizing.fpr > 0)
        cli_warn("-p/--fpr has no effect in --mode %s (it never errs)", o->mode);
    return 0;
}

int dd_dedup_parse_args(int argc, char **argv, opts *o)
{
    int rc = parse_args(argc, argv, o);
    /* A set that lives for this run only (no --state, store, tier or Redis
     * to keep a seed with) digests its keys with a secret seed of its own,
     * unless --seed chose one: no input written in advance can then share a
     * digest on purpose, to be dropped as a repeat of another record by a
     * set that decides by digest, or to pile into one chain of an exact
     * table.  What is written out does not depend on the seed. */
    if (rc == 0 && !o->seed_given && !o->state && !o->sizing.tiers && !o->redis.url)
        o->sizing.seed = cli_run_seed();
    return rc;
}
