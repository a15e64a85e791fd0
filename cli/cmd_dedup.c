/*
 * cmd_dedup.c - the main job: `dedup [OPTIONS] [FILE...]`.
 *
 * Reads records (lines, or NUL-terminated with -z) from the files or stdin
 * in large blocks, derives each record's key (field, normalisation), hashes
 * the key once, asks the method whether it was seen, and writes records
 * according to the output kind.  Records are handled in batches so that the
 * method can prefetch every batch member's slot before deciding them in
 * input order.
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
#include "dedup/hash.h"
#include "io.h"
#include "keys.h"
#include "methods.h"

#define BATCH 64
#define READ_BLOCK ((size_t)1 << 20)
#define WRITE_BUF ((size_t)1 << 18)

enum output_kind { OUT_FIRST, OUT_DUPLICATES, OUT_COUNT, OUT_UNIQUE };
enum stats_kind { STATS_NONE, STATS_TEXT, STATS_JSON };

typedef struct opts {
    const char *mode;
    const char *output;
    const char *state;
    unsigned char term;
    dd_keyspec key;
    dd_sizing sizing;
    enum output_kind out;
    enum stats_kind stats;
    int progress; /* -1 auto, 0 off, 1 on */
    bool line_buffered;
} opts;

volatile sig_atomic_t dd_stop_signal;

static void on_signal(int sig) { dd_stop_signal = sig; }

static void usage(FILE *f)
{
    fprintf(f,
"Usage: dedup [OPTION]... [FILE]...\n"
"Write each record's first occurrence, in input order; drop the repeats.\n"
"With no FILE, or when FILE is -, read standard input.\n"
"\n"
"Method:\n"
"  --mode=METHOD          exact (default: full keys, never wrong),\n"
"                         fingerprint (128-bit digests only, ~n^2/2^129 collision odds),\n"
"                         bloom | blocked (fixed memory; may drop a new record\n"
"                         with probability at most -p, never keeps a repeat)\n"
"  -n, --items=N          keys expected (sizes filters; a hint for exact modes)\n"
"  -p, --fpr=P            false-positive rate for filters, e.g. 0.01 or 1%% (default 1%%)\n"
"  -m, --memory=SIZE      memory for a filter (K/M/G); with -n, a ceiling\n"
"  -s, --state=FILE       seen-set kept across runs: loaded if it exists, records\n"
"                         in it are dropped, saved atomically at the end\n"
"Keys:\n"
"  -f, --field=N          key is field N (1-based) instead of the whole record\n"
"  -d, --delimiter=C      field delimiter (default TAB)\n"
"  -i, --ignore-case      ASCII case-insensitive keys\n"
"      --trim             ignore leading and trailing whitespace (including \\r)\n"
"      --squeeze          runs of whitespace compare as one space\n"
"      --strip-prefix=S   ignore S at the start of keys\n"
"Output:\n"
"  -D, --duplicates       write every occurrence after the first instead\n"
"  -c, --count            write each distinct record once, prefixed by its count\n"
"  -u, --unique           write only records that occur exactly once\n"
"  -o, --output=FILE      write to FILE instead of standard output\n"
"  -z, --zero-terminated  records end with NUL, not newline\n"
"      --line-buffered    flush after every record written\n"
"      --stats[=json]     print counts, memory and rates to stderr at the end\n"
"      --progress, --no-progress  progress on stderr (default: when it is a terminal)\n"
"  -q, --quiet            only errors on stderr\n"
"  -v, --verbose          more detail on stderr\n"
"      --help             show this help and exit\n"
"      --version          show the version and exit\n"
"\n"
"Subcommands: dedup calc (size a filter), dedup filter (filter files). See dedup(1).\n"
"Exit status: 0 success, 1 failure while running (e.g. write error), 2 bad usage or input.\n");
}

enum {
    OPT_TRIM = 256, OPT_SQUEEZE, OPT_PREFIX, OPT_MODE, OPT_STATS, OPT_PROGRESS, OPT_NO_PROGRESS,
    OPT_HELP, OPT_VERSION, OPT_LINEBUF, OPT_SEED
};

static const struct option long_opts[] = {
    {"mode", required_argument, NULL, OPT_MODE},
    {"items", required_argument, NULL, 'n'},
    {"fpr", required_argument, NULL, 'p'},
    {"memory", required_argument, NULL, 'm'},
    {"state", required_argument, NULL, 's'},
    {"field", required_argument, NULL, 'f'},
    {"delimiter", required_argument, NULL, 'd'},
    {"ignore-case", no_argument, NULL, 'i'},
    {"trim", no_argument, NULL, OPT_TRIM},
    {"squeeze", no_argument, NULL, OPT_SQUEEZE},
    {"strip-prefix", required_argument, NULL, OPT_PREFIX},
    {"duplicates", no_argument, NULL, 'D'},
    {"count", no_argument, NULL, 'c'},
    {"unique", no_argument, NULL, 'u'},
    {"output", required_argument, NULL, 'o'},
    {"zero-terminated", no_argument, NULL, 'z'},
    {"line-buffered", no_argument, NULL, OPT_LINEBUF},
    {"stats", optional_argument, NULL, OPT_STATS},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode = "exact";
    o->term = '\n';
    o->key.delim = '\t';
    o->progress = -1;
    o->sizing.seed = DEDUP_DEFAULT_SEED;
    int kinds = 0;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":n:p:m:s:f:d:iDcuo:zqv", long_opts, NULL)) != -1) {
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
        case 'f': {
            uint64_t f;
            if (!cli_parse_count(optarg, &f) || f > 1000000) {
                cli_error("-f/--field must be a field number from 1 (got '%s')", optarg);
                return -1;
            }
            o->key.field = (size_t)f;
            break;
        }
        case 'd':
            if (strlen(optarg) == 1)
                o->key.delim = (unsigned char)optarg[0];
            else if (strcmp(optarg, "\\t") == 0)
                o->key.delim = '\t';
            else if (strcmp(optarg, "\\0") == 0)
                o->key.delim = '\0';
            else {
                cli_error("-d/--delimiter must be one character (got '%s')", optarg);
                return -1;
            }
            break;
        case 'i': o->key.fold_case = true; break;
        case OPT_TRIM: o->key.trim = true; break;
        case OPT_SQUEEZE: o->key.squeeze = true; break;
        case OPT_PREFIX:
            o->key.prefix = optarg;
            o->key.prefix_len = strlen(optarg);
            break;
        case 'D': o->out = OUT_DUPLICATES; kinds++; break;
        case 'c': o->out = OUT_COUNT; kinds++; break;
        case 'u': o->out = OUT_UNIQUE; kinds++; break;
        case 'o': o->output = optarg; break;
        case 'z': o->term = '\0'; break;
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
        case OPT_SEED: {
            char *end;
            errno = 0;
            o->sizing.seed = strtoull(optarg, &end, 0);
            if (errno || *end || !*optarg) {
                cli_error("--seed must be a 64-bit number (got '%s')", optarg);
                return -1;
            }
            break;
        }
        case 'q': cli_verbosity = 0; break;
        case 'v': cli_verbosity++; break;
        case OPT_HELP: usage(stdout); return 1;
        case OPT_VERSION: cli_print_version(); return 1;
        case ':':
            cli_error("option '%s' needs a value (see dedup --help)", argv[optind - 1]);
            return -1;
        default:
            if (optopt)
                cli_error("unknown option '-%c' (see dedup --help)", optopt);
            else
                cli_error("unknown option '%s' (see dedup --help)", argv[optind - 1]);
            return -1;
        }
    }
    if (kinds > 1) {
        cli_error("choose one of -D/--duplicates, -c/--count and -u/--unique");
        return -1;
    }
    o->sizing.counts = o->out == OUT_COUNT || o->out == OUT_UNIQUE;
    bool probabilistic = strcmp(o->mode, "bloom") == 0 || strcmp(o->mode, "blocked") == 0;
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
    if (!probabilistic && o->sizing.fpr > 0)
        cli_warn("-p/--fpr has no effect in --mode %s (it never errs)", o->mode);
    return 0;
}

/* ---- progress ---------------------------------------------------------------- */

typedef struct progress {
    bool on;
    double start, last;
    uint64_t total_bytes; /* 0 = unknown */
} progress;

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void progress_show(progress *p, uint64_t bytes, uint64_t records, bool final)
{
    if (!p->on)
        return;
    double t = now_sec();
    if (!final && t - p->last < 0.25)
        return;
    p->last = t;
    double el = t - p->start;
    char hb[32];
    fprintf(stderr, "\rdedup: %s, %llu records, %.1fM records/s", cli_human_size(bytes, hb, sizeof hb),
            (unsigned long long)records, el > 0 ? (double)records / el / 1e6 : 0.0);
    if (p->total_bytes && bytes <= p->total_bytes) {
        double frac = (double)bytes / (double)p->total_bytes;
        fprintf(stderr, ", %3.0f%%", frac * 100);
        if (frac > 0.01 && !final) {
            double eta = el / frac - el;
            fprintf(stderr, ", ETA %d:%02d", (int)eta / 60, (int)eta % 60);
        }
    }
    fputs("   ", stderr);
    if (final)
        fputc('\n', stderr);
}

/* ---- the run ------------------------------------------------------------------- */

typedef struct run {
    opts *o;
    dd_method *m;
    dd_writer w;
    progress prog;
    uint64_t records_in, records_out, duplicates, bytes_in;
    bool identity_key;
    /* batch */
    const unsigned char *rec[BATCH];
    size_t rlen[BATCH];
    const unsigned char *key[BATCH];
    size_t klen[BATCH];
    dedup_digest dig[BATCH];
    dedup_verdict verdict[BATCH];
    unsigned char *scratch;
    size_t scratch_cap;
    /* first records for --count/--unique: [u64 len][bytes] entries */
    unsigned char *firsts;
    size_t firsts_len, firsts_cap;
    bool failed; /* method error already reported */
} run;

static bool firsts_append(run *r, const unsigned char *rec, size_t len)
{
    size_t need = r->firsts_len + 8 + len;
    if (need > r->firsts_cap) {
        size_t nc = r->firsts_cap ? r->firsts_cap : (size_t)1 << 20;
        while (nc < need)
            nc *= 2;
        unsigned char *nb = realloc(r->firsts, nc);
        if (!nb)
            return false;
        r->firsts = nb;
        r->firsts_cap = nc;
    }
    uint64_t l = len;
    memcpy(r->firsts + r->firsts_len, &l, 8);
    memcpy(r->firsts + r->firsts_len + 8, rec, len);
    r->firsts_len = need;
    return true;
}

/* Decides and writes one batch.  False to stop (error or broken pipe). */
static bool process_batch(run *r, size_t n)
{
    opts *o = r->o;
    if (r->identity_key) {
        for (size_t i = 0; i < n; i++) {
            r->key[i] = r->rec[i];
            r->klen[i] = r->rlen[i];
        }
    } else {
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += r->rlen[i];
        if (total > r->scratch_cap) {
            size_t nc = total * 2;
            unsigned char *nb = realloc(r->scratch, nc ? nc : 1);
            if (!nb) {
                cli_error("out of memory");
                r->failed = true;
                return false;
            }
            r->scratch = nb;
            r->scratch_cap = nc;
        }
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            r->key[i] = dd_key_of(&o->key, r->rec[i], r->rlen[i], r->scratch + off, &r->klen[i]);
            off += r->rlen[i];
        }
    }
    for (size_t i = 0; i < n; i++)
        r->dig[i] = dedup_hash(r->key[i], r->klen[i], r->m->seed);
    dedup_status st = r->m->decide(r->m, n, r->key, r->klen, r->dig, r->verdict);
    if (st) {
        if (st == DEDUP_ERR_FULL)
            cli_error("the distinct keys exceed the memory allowed (-m/--memory %llu bytes); "
                      "raise it or use --mode fingerprint or blocked",
                      (unsigned long long)o->sizing.memory);
        else
            cli_error("%s", dedup_strerror(st));
        r->failed = true;
        return false;
    }
    r->records_in += n;
    for (size_t i = 0; i < n; i++) {
        bool is_new = r->verdict[i] == DEDUP_NEW;
        if (!is_new)
            r->duplicates++;
        switch (o->out) {
        case OUT_FIRST:
            if (is_new) {
                r->records_out++;
                if (!dd_writer_record(&r->w, r->rec[i], r->rlen[i], o->term))
                    return false;
            }
            break;
        case OUT_DUPLICATES:
            if (!is_new) {
                r->records_out++;
                if (!dd_writer_record(&r->w, r->rec[i], r->rlen[i], o->term))
                    return false;
            }
            break;
        case OUT_COUNT:
        case OUT_UNIQUE:
            if (is_new && !firsts_append(r, r->rec[i], r->rlen[i])) {
                cli_error("out of memory keeping first records for --count/--unique");
                r->failed = true;
                return false;
            }
            break;
        }
    }
    return true;
}

/* Writes the --count / --unique output from the first records kept. */
static bool write_counts(run *r)
{
    opts *o = r->o;
    size_t off = 0;
    unsigned char *scratch = NULL;
    size_t scap = 0;
    bool ok = true;
    while (off < r->firsts_len && ok) {
        uint64_t len;
        memcpy(&len, r->firsts + off, 8);
        const unsigned char *rec = r->firsts + off + 8;
        off += 8 + len;
        if (len > scap) {
            free(scratch);
            scap = len * 2;
            scratch = malloc(scap);
            if (!scratch) {
                cli_error("out of memory");
                r->failed = true;
                return false;
            }
        }
        size_t klen;
        const unsigned char *key = r->identity_key ? rec : dd_key_of(&o->key, rec, len, scratch, &klen);
        if (r->identity_key)
            klen = len;
        uint64_t count = r->m->count_of(r->m, key, klen, dedup_hash(key, klen, r->m->seed));
        if (o->out == OUT_COUNT) {
            char prefix[32];
            int pl = snprintf(prefix, sizeof prefix, "%7llu ", (unsigned long long)count);
            ok = dd_writer_bytes(&r->w, prefix, (size_t)pl) && dd_writer_record(&r->w, rec, len, o->term);
            r->records_out++;
        } else if (count == 1) {
            ok = dd_writer_record(&r->w, rec, len, o->term);
            r->records_out++;
        }
    }
    free(scratch);
    return ok;
}

static void print_stats(run *r, double seconds)
{
    opts *o = r->o;
    uint64_t distinct = r->m->distinct(r->m);
    size_t mem = r->m->memory(r->m);
    double rate = r->records_in ? (double)r->duplicates / (double)r->records_in : 0.0;
    if (o->stats == STATS_JSON) {
        fprintf(stderr,
                "{\"records_in\":%llu,\"records_out\":%llu,\"duplicates\":%llu,"
                "\"duplicate_rate\":%.6f,\"distinct\":%llu,\"mode\":",
                (unsigned long long)r->records_in, (unsigned long long)r->records_out,
                (unsigned long long)r->duplicates, rate, (unsigned long long)distinct);
        cli_json_string(stderr, r->m->name);
        fprintf(stderr, ",\"memory_bytes\":%zu,\"bytes_in\":%llu,\"seconds\":%.3f", mem,
                (unsigned long long)r->bytes_in, seconds);
        if (r->m->probabilistic)
            fprintf(stderr, ",\"fpr\":%.6g,\"distinct_is_estimate\":true", r->m->fpr(r->m));
        fputs("}\n", stderr);
        return;
    }
    char hb[32], hm[32];
    fprintf(stderr, "dedup: %llu records in (%s), %llu out, %llu duplicates (%.2f%%)\n",
            (unsigned long long)r->records_in, cli_human_size(r->bytes_in, hb, sizeof hb),
            (unsigned long long)r->records_out, (unsigned long long)r->duplicates, rate * 100);
    fprintf(stderr, "dedup: %s%llu distinct keys, mode %s, memory %s, %.2f s (%.1fM records/s)\n",
            r->m->probabilistic ? "about " : "", (unsigned long long)distinct, r->m->name,
            cli_human_size(mem, hm, sizeof hm), seconds,
            seconds > 0 ? (double)r->records_in / seconds / 1e6 : 0.0);
    if (r->m->probabilistic)
        fprintf(stderr, "dedup: estimated false-positive rate at the final fill: %.4g%%\n",
                r->m->fpr(r->m) * 100);
}

int cmd_dedup(int argc, char **argv)
{
    opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr != 0)
        return pr > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;

    /* Inputs: all checked before any output is written. */
    int nfiles = argc - optind;
    char *stdin_only[] = {"-"};
    char **files = nfiles > 0 ? argv + optind : stdin_only;
    if (nfiles == 0)
        nfiles = 1;
    uint64_t total_bytes = 0;
    bool size_known = true;
    for (int i = 0; i < nfiles; i++) {
        if (strcmp(files[i], "-") == 0) {
            size_known = false;
            continue;
        }
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0) {
            cli_error("%s: %s", files[i], strerror(errno));
            return CLI_EXIT_USAGE;
        }
        if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
            close(fd);
            cli_error("%s: %s", files[i], strerror(EISDIR));
            return CLI_EXIT_USAGE;
        }
        if (S_ISREG(st.st_mode))
            total_bytes += (uint64_t)st.st_size;
        else
            size_known = false;
        close(fd);
    }

    /* The method: from the state file if there is one, else new. */
    char err[512] = "";
    dd_method *m = NULL;
    dedup_status st;
    if (o.state && access(o.state, F_OK) == 0) {
        st = dd_method_load(o.mode, o.state, &m, err, sizeof err);
        if (st) {
            cli_error("%s: %s", o.state, err[0] ? err : strerror(errno));
            return CLI_EXIT_USAGE;
        }
        cli_info(2, "%s: loaded %s state", o.state, m->name);
    } else {
        st = dd_method_create(o.mode, &o.sizing, &m, err, sizeof err);
        if (st) {
            cli_error("%s", err);
            return CLI_EXIT_USAGE;
        }
    }

    int out_fd = STDOUT_FILENO;
    const char *out_name = "(standard output)";
    if (o.output && strcmp(o.output, "-") != 0) {
        out_fd = open(o.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (out_fd < 0) {
            cli_error("%s: %s", o.output, strerror(errno));
            dd_method_free(m);
            return CLI_EXIT_USAGE;
        }
        out_name = o.output;
    }

    run *r = calloc(1, sizeof *r);
    if (!r || dd_writer_init(&r->w, out_fd, out_name, WRITE_BUF) != 0) {
        cli_error("out of memory");
        free(r);
        dd_method_free(m);
        return CLI_EXIT_FAIL;
    }
    r->o = &o;
    r->m = m;
    r->w.line_buffered = o.line_buffered;
    r->identity_key = dd_keyspec_identity(&o.key);
    r->prog.on = o.progress == 1 || (o.progress == -1 && isatty(STDERR_FILENO) && cli_verbosity > 0);
    r->prog.start = r->prog.last = now_sec();
    r->prog.total_bytes = size_known ? total_bytes : 0;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int status = CLI_EXIT_OK;
    bool stopped = false; /* broken pipe, error or signal: no state save */
    for (int fi = 0; fi < nfiles && !stopped; fi++) {
        dd_reader rd;
        int e = dd_reader_open(&rd, files[fi], o.term, READ_BLOCK);
        if (e) {
            cli_error("%s: %s", files[fi], strerror(e));
            status = CLI_EXIT_USAGE;
            stopped = true;
            break;
        }
        uint64_t before = r->bytes_in;
        for (;;) {
            if (dd_stop_signal) {
                stopped = true;
                break;
            }
            size_t n = 0;
            if (!dd_reader_next(&rd, &r->rec[0], &r->rlen[0]))
                break;
            n = 1;
            while (n < BATCH && dd_reader_next_buffered(&rd, &r->rec[n], &r->rlen[n]))
                n++;
            if (!process_batch(r, n)) {
                stopped = true;
                break;
            }
            r->bytes_in = before + rd.bytes_read;
            progress_show(&r->prog, r->bytes_in, r->records_in, false);
        }
        r->bytes_in = before + rd.bytes_read;
        if (rd.error && !dd_stop_signal) {
            cli_error("%s: read error: %s", rd.name, strerror(rd.error));
            status = CLI_EXIT_USAGE;
            stopped = true;
        }
        dd_reader_close(&rd);
    }
    if (!stopped && (o.out == OUT_COUNT || o.out == OUT_UNIQUE))
        stopped = !write_counts(r);
    if (!r->w.broken_pipe && !r->w.error)
        dd_writer_flush(&r->w);
    progress_show(&r->prog, r->bytes_in, r->records_in, true);

    if (r->w.error) {
        cli_error("write error on %s: %s", r->w.name, strerror(r->w.error));
        status = CLI_EXIT_FAIL;
    } else if (r->failed) {
        status = CLI_EXIT_FAIL;
    } else if (dd_stop_signal) {
        cli_info(1, "interrupted; %s", o.state ? "the state file was left as it was" : "output is incomplete");
        status = 128 + dd_stop_signal;
    }
    if (out_fd != STDOUT_FILENO && close(out_fd) != 0 && status == CLI_EXIT_OK) {
        cli_error("write error on %s: %s", out_name, strerror(errno));
        status = CLI_EXIT_FAIL;
    }
    /* Save the seen-set only after a complete run. */
    if (o.state && !stopped && status == CLI_EXIT_OK && !r->w.broken_pipe) {
        st = m->save(m, o.state);
        if (st) {
            cli_error("%s: cannot save state: %s", o.state,
                      st == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(st));
            status = CLI_EXIT_FAIL;
        }
    }
    if (o.stats != STATS_NONE)
        print_stats(r, now_sec() - r->prog.start);

    dd_writer_free(&r->w);
    free(r->scratch);
    free(r->firsts);
    free(r);
    dd_method_free(m);
    return status;
}
