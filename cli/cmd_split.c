/*
 * cmd_split.c - `dedup split`: partition records by key, so that every
 * occurrence of a key lands in the same part and each part can be
 * deduplicated alone (on its own machine) with the same result as the
 * whole input.
 *
 *   input -> feeder (cli/feeder.c: blocks, keys, one XXH3-128 digest per
 *   key with the fixed seed DEDUP_DEFAULT_SEED) -> owner (jump hash for -N,
 *   the ring for named nodes: dedup/ring.h) -> that part's buffered writer
 *   -> a file (-o) or a filter's standard input (--filter)
 *
 * A regular input file split into -o files takes the faster road of
 * split_file.c instead (both threads reading, cutting, hashing, routing
 * and writing); pipes, standard input and filters take the feeder's.  Both
 * put the same records in the same parts in the same order.
 *
 * Input order is kept inside each part because records are appended in the
 * order the feeder hands them over.  Nothing is left half: every output and
 * every filter is set up before the first record is read (a bad pattern,
 * an unwritable directory, a filter that cannot start: exit 2, no output);
 * -o files are written under temporary names beside their targets and
 * renamed over them only when the whole run succeeded, else removed; on a
 * failure the filters still running get SIGTERM (their process group)
 * instead of an end of input that would make their part look complete.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "dedup/hash.h"
#include "dedup/ring.h"
#include "feeder.h"
#include "intkeys.h"
#include "io.h"
#include "key_header.h"
#include "keys.h"
#include "nodes.h"
#include "split.h"

#define CMD "split"
#define DEFAULT_PATTERN "part-%s"

static const char split_help[] =
"Usage: dedup split [OPTION]... (-N COUNT | --nodes LIST | --nodes-file FILE) [FILE]...\n"
"Partition records by key: every record goes to exactly one part, all records\n"
"with the same key to the same part, in input order.  Deduplicate each part\n"
"alone (with the same key options) and concatenate: exact global dedup.\n"
"With no FILE, or when FILE is -, read standard input.\n"
"\n"
"Parts:\n"
"  -N, --shards=COUNT     COUNT numbered parts 0..COUNT-1 (jump consistent hash)\n"
"      --nodes=LIST       named parts: name[=weight],... (consistent-hash ring,\n"
"                         160 virtual nodes per unit of weight; weight default 1)\n"
"      --nodes-file=FILE  the same, one name[=weight] a line ('#' comments)\n"
"      --ring=FILE        the nodes of a ring saved by 'dedup ring --save'\n"
"Keys (use the same options when deduplicating the parts):\n"
DD_KEY_HELP
"  -z, --zero-terminated  records end with NUL, not newline\n"
"      --on-bad-key=fail|skip|keep  a record with no key (malformed CSV, invalid\n"
"                         JSON or a missing path, not a URL): stop naming file\n"
"                         and line (fail, the default), drop it (skip), or keep\n"
"                         it in the part its whole record picks (keep)\n"
"Output:\n"
"  -o, --output=PATTERN   part files: %s becomes the node name or number\n"
"                         (default 'part-%s'; '%%' for a literal %)\n"
"      --filter=COMMAND   pipe each part into 'sh -c COMMAND' instead, with the\n"
"                         node in $DEDUP_NODE and the -o name in $FILE (as GNU\n"
"                         split --filter); a filter that fails ends the run with\n"
"                         its exit status\n"
"      --stats[=json]     records and bytes per part and the peak/mean balance,\n"
"                         on stderr at the end\n"
"  -q, --quiet            only errors on stderr\n"
"  -v, --verbose          more detail on stderr\n"
"  -h, --help             show this help and exit\n"
"\n"
"Routing is fixed on every machine and version: the key's XXH3-128 digest with\n"
"seed 0x9E3779B97F4A7C15, placed on the ring or given to jump hash as dedup(3)'s\n"
"dedup_ring_position() says.  See 'dedup ring' for what a change of nodes moves.\n"
"Example: dedup split --nodes a,b,c -f 1 -d , -o 'part-%s.csv' events.csv\n"
"Exit status: 0 success, 1 failure while running, 2 bad usage or input, or a\n"
"failed filter's own status.\n";

enum {
    OPT_NODES = 256, OPT_NODES_FILE, OPT_RING, OPT_FILTER,
    OPT_STATS, OPT_BAD_KEY
};

static const struct option long_opts[] = {
    {"shards", required_argument, NULL, 'N'},
    {"nodes", required_argument, NULL, OPT_NODES},
    {"nodes-file", required_argument, NULL, OPT_NODES_FILE},
    {"ring", required_argument, NULL, OPT_RING},
    DD_KEY_LONG_OPTIONS,
    {"output", required_argument, NULL, 'o'},
    {"filter", required_argument, NULL, OPT_FILTER},
    {"stats", optional_argument, NULL, OPT_STATS},
    {"on-bad-key", required_argument, NULL, OPT_BAD_KEY},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef split_part part;

typedef struct split_opts {
    uint64_t shards;
    dd_nodelist nodes;
    dd_keyspec key;
    unsigned char term;
    const char *ring_file;
    const char *pattern;
    const char *filter;
    int stats; /* 0 none, 1 text, 2 json */
    dd_bad_key bad_key;
} split_opts;

/* The pattern has one %s and otherwise only %%. */
static bool pattern_ok(const char *p)
{
    int s = 0;
    for (; *p; p++) {
        if (*p != '%')
            continue;
        if (p[1] == 's')
            s++;
        else if (p[1] != '%')
            return false;
        p++;
    }
    return s == 1;
}

static char *expand(const char *pattern, const char *name)
{
    size_t len = strlen(pattern) + strlen(name) + 1;
    char *out = malloc(len), *o = out;
    if (!out)
        return NULL;
    for (const char *p = pattern; *p; p++) {
        if (*p == '%' && p[1] == 's') {
            size_t n = strlen(name);
            memcpy(o, name, n);
            o += n;
            p++;
        } else if (*p == '%' && p[1] == '%') {
            *o++ = '%';
            p++;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

static int parse_args(int argc, char **argv, split_opts *o)
{
    memset(o, 0, sizeof *o);
    o->term = '\n';
    dd_keyspec_init(&o->key);
    int c;
    opterr = 0;
    optind = 1;
    bool named = false;
    while ((c = getopt_long(argc, argv, ":N:" DD_KEY_SHORT_OPTIONS "o:qvh", long_opts, NULL)) != -1) {
        int kr = dd_key_option(c, optarg, CMD, &o->key, &o->term);
        if (kr < 0)
            return CLI_EXIT_USAGE;
        if (kr)
            continue;
        switch (c) {
        case 'N':
            if (!arg_uint(CMD, "-N/--shards", optarg, 1, DEDUP_RING_MAX_NODES, &o->shards))
                return CLI_EXIT_USAGE;
            break;
        case OPT_NODES:
            named = true;
            if (!dd_nodes_parse_list(CMD, "--nodes", optarg, &o->nodes))
                return CLI_EXIT_USAGE;
            break;
        case OPT_NODES_FILE:
            named = true;
            if (!dd_nodes_parse_file(CMD, optarg, &o->nodes))
                return CLI_EXIT_USAGE;
            break;
        case OPT_RING: o->ring_file = optarg; break;
        case 'o': o->pattern = optarg; break;
        case OPT_FILTER:
            if (!*optarg) {
                cli_error("%s: --filter needs a command", CMD);
                return CLI_EXIT_USAGE;
            }
            o->filter = optarg;
            break;
        case OPT_STATS:
            if (!optarg || strcmp(optarg, "text") == 0)
                o->stats = 1;
            else if (strcmp(optarg, "json") == 0)
                o->stats = 2;
            else {
                cli_error("%s: --stats takes no value or 'json' (got '%s')", CMD, optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        case OPT_BAD_KEY:
            if (!dd_bad_key_from_name(optarg, &o->bad_key)) {
                cli_error("%s: --on-bad-key must be fail, skip or keep (got '%s')", CMD, optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        case 'q': cli_verbosity = 0; break;
        case 'v': cli_verbosity++; break;
        case 'h': fputs(split_help, stdout); return -1;
        default:
            arg_bad_option(CMD, c, argv, "dedup split");
            return CLI_EXIT_USAGE;
        }
    }
    if ((o->shards != 0) + named + (o->ring_file != NULL) == 0) {
        cli_error("%s: say how to split: -N COUNT, --nodes LIST, --nodes-file FILE or --ring FILE "
                  "(see 'dedup split --help')", CMD);
        return CLI_EXIT_USAGE;
    }
    if ((o->shards != 0) + named + (o->ring_file != NULL) > 1) {
        cli_error("%s: -N, --nodes/--nodes-file and --ring are ways to name the parts; give one",
                  CMD);
        return CLI_EXIT_USAGE;
    }
    if (named && o->nodes.n > DEDUP_RING_MAX_NODES) {
        cli_error("%s: %zu nodes; at most %u", CMD, o->nodes.n, (unsigned)DEDUP_RING_MAX_NODES);
        return CLI_EXIT_USAGE;
    }
    if (o->bad_key != DD_BAD_KEY_FAIL && !o->key.csv && !o->key.json && !o->key.url) {
        cli_error("%s: --on-bad-key is for keys a record may lack: --csv, --json, --url", CMD);
        return CLI_EXIT_USAGE;
    }
    if (!o->pattern)
        o->pattern = DEFAULT_PATTERN;
    else if (!pattern_ok(o->pattern)) {
        cli_error("%s: -o/--output must hold %%s once (the node) and no other %% than %%%% "
                  "(got '%s')", CMD, o->pattern);
        return CLI_EXIT_USAGE;
    }
    if (!dd_keyspec_check(&o->key, CMD) ||
        (!o->key.header && !dd_keyspec_compile(&o->key, NULL, 0, NULL)))
        return CLI_EXIT_USAGE;
    return CLI_EXIT_OK;
}

/* ---- Outputs ---------------------------------------------------------------- */

/* Opens part p's file: a temporary beside a regular (or absent) target, the
 * target itself when it is something else (a FIFO, /dev/null): outfile.h. */
static bool open_file(part *p)
{
    if (dd_outfile_open(&p->out, CMD, p->path) != 0)
        return false;
    p->fd = p->out.fd;
    return true;
}

static bool start_filter(part *p, const char *cmd)
{
    int fds[2];
    if (pipe(fds) != 0) {
        cli_error("%s: cannot start the filter for node '%s': %s", CMD, p->name, strerror(errno));
        return false;
    }
    /* no later filter may inherit this pipe, or its reader never sees the end */
    (void)fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("%s: cannot start the filter for node '%s': %s", CMD, p->name, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        if (dup2(fds[0], STDIN_FILENO) < 0)
            _exit(126);
        if (setenv("DEDUP_NODE", p->name, 1) != 0 || setenv("FILE", p->path, 1) != 0)
            _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with a kill before the child ran */
    close(fds[0]);
    p->fd = fds[1];
    p->pid = pid;
    return true;
}

/* Room for 'need' descriptors: the soft limit raised to the hard one. */
static bool enough_fds(size_t need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return true;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need + 16) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need + 16;
}

/* A filter's exit, as an exit status of ours (0 for success). */
static int filter_status(const part *p, int st)
{
    if (WIFEXITED(st)) {
        if (WEXITSTATUS(st) == 0)
            return 0;
        cli_error("%s: the filter for node '%s' exited with status %d", CMD, p->name,
                  WEXITSTATUS(st));
        return WEXITSTATUS(st);
    }
    if (WIFSIGNALED(st)) {
        cli_error("%s: the filter for node '%s' was killed by signal %d", CMD, p->name,
                  WTERMSIG(st));
        return 128 + WTERMSIG(st);
    }
    return CLI_EXIT_FAIL;
}

/* ---- Stats ------------------------------------------------------------------------ */

static void print_stats(const split_opts *o, const part *parts, size_t n, double secs,
                        const dedup_ring *ring)
{
    uint64_t rec = 0, bytes = 0, peak_r = 0, peak_b = 0;
    for (size_t i = 0; i < n; i++) {
        rec += parts[i].records;
        bytes += parts[i].bytes;
        peak_r = parts[i].records > peak_r ? parts[i].records : peak_r;
        peak_b = parts[i].bytes > peak_b ? parts[i].bytes : peak_b;
    }
    double mean_r = (double)rec / (double)n, mean_b = (double)bytes / (double)n;
    double pm_r = rec ? (double)peak_r / mean_r : 0, pm_b = bytes ? (double)peak_b / mean_b : 0;
    if (o->stats == 2) {
        fprintf(stderr, "{\"routing\":\"%s\",\"parts\":%zu,\"records\":%llu,\"bytes\":%llu,"
                        "\"seconds\":", ring ? "ring" : "jump", n, (unsigned long long)rec,
                (unsigned long long)bytes);
        json_double(stderr, secs);
        fputs(",\"mean_records\":", stderr);
        json_double(stderr, mean_r);
        fprintf(stderr, ",\"peak_records\":%llu,\"peak_mean_records\":", (unsigned long long)peak_r);
        json_double(stderr, pm_r);
        fputs(",\"mean_bytes\":", stderr);
        json_double(stderr, mean_b);
        fprintf(stderr, ",\"peak_bytes\":%llu,\"peak_mean_bytes\":", (unsigned long long)peak_b);
        json_double(stderr, pm_b);
        fputs(",\"per_part\":[", stderr);
        for (size_t i = 0; i < n; i++) {
            fprintf(stderr, "%s{\"node\":", i ? "," : "");
            cli_json_string(stderr, parts[i].name);
            fprintf(stderr, ",\"records\":%llu,\"bytes\":%llu", (unsigned long long)parts[i].records,
                    (unsigned long long)parts[i].bytes);
            if (ring) {
                fputs(",\"share\":", stderr);
                json_double(stderr, dedup_ring_node_share(ring, (uint32_t)i));
            }
            fputc('}', stderr);
        }
        fputs("]}\n", stderr);
        return;
    }
    char hb[32];
    fprintf(stderr, "dedup split: %llu records, %s in %zu parts (%s) in %.2f s\n",
            (unsigned long long)rec, human_size_si(bytes, hb, sizeof hb), n,
            ring ? "consistent-hash ring" : "jump hash", secs);
    fprintf(stderr, "  balance: peak/mean %.4f by records, %.4f by bytes (mean %.1f records)\n",
            pm_r, pm_b, mean_r);
    fprintf(stderr, "  %-20s %14s %16s %8s\n", "part", "records", "bytes", "share");
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "  %-20s %14llu %16llu %7.3f%%\n", parts[i].name,
                (unsigned long long)parts[i].records, (unsigned long long)parts[i].bytes,
                rec ? 100.0 * (double)parts[i].records / (double)rec : 0.0);
}

/* ---- The run ------------------------------------------------------------------------ */

/* Writes the header record at the top of every part. */
static bool write_header_parts(part *parts, size_t n, const dd_key_header *kh, unsigned char term)
{
    for (size_t i = 0; i < n; i++)
        if (!parts[i].eof_early && !dd_writer_record(&parts[i].w, kh->hdr, kh->len, term) &&
            parts[i].w.error) {
            cli_error("%s: write error on %s: %s", CMD, parts[i].path, strerror(parts[i].w.error));
            return false;
        }
    return true;
}

/* The records of *b that take part, by --on-bad-key: all with keys (fail:
 * else false, the first without named); those with keys (skip: *b may
 * become kb's compacted block); all (keep: a record without a key is
 * routed by the digest of the whole record, so that it lands in one part
 * whatever part its duplicates go to).  False after an error. */
static bool keyed_records(dd_key_header *kh, dd_keyed_block *kb, const dd_block **b,
                          dd_bad_key policy, unsigned char term)
{
    if (policy == DD_BAD_KEY_FAIL)
        return dd_key_header_block_ok(kh, *b, term);
    if (policy == DD_BAD_KEY_SKIP)
        return (*b = dd_keyed_only(kb, kh, *b, term, true)) != NULL;
    const dd_block *blk = *b;
    if (dd_key_header_filter(kh, blk, term, true, NULL) == blk->n)
        return true;
    for (size_t i = 0; i < blk->n; i++)
        if (!blk->key[i])
            blk->dig[i] = dedup_hash(blk->rec[i], blk->rlen[i], DEDUP_DEFAULT_SEED);
    return true;
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Kills the filters still running (their process groups) and reaps them. */
static void kill_filters(part *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (parts[i].pid > 0)
            kill(-parts[i].pid, SIGTERM);
    for (size_t i = 0; i < n; i++) {
        if (parts[i].fd >= 0 && parts[i].pid > 0) {
            close(parts[i].fd);
            parts[i].fd = -1;
        }
        if (parts[i].pid > 0) {
            int st;
            while (waitpid(parts[i].pid, &st, 0) < 0 && errno == EINTR)
                ;
            parts[i].pid = 0;
        }
    }
}

int cmd_split(int argc, char **argv)
{
    split_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        goto out_opts;
    char **files = argv + optind;
    int nfiles = argc - optind;
    static char *dash[] = {"-"};
    if (nfiles == 0) {
        files = dash;
        nfiles = 1;
    }
    /* Every input must open before any output exists. */
    for (int i = 0; i < nfiles; i++) {
        if (strcmp(files[i], "-") == 0)
            continue;
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
            cli_error("%s: %s: %s", CMD, files[i], fd < 0 ? strerror(errno) : strerror(EISDIR));
            if (fd >= 0)
                close(fd);
            rc = CLI_EXIT_USAGE;
            goto out_opts;
        }
        close(fd);
    }
    dedup_ring *ring = NULL;
    if (o.nodes.n && !dd_nodes_ring(CMD, &o.nodes, &ring)) {
        rc = CLI_EXIT_USAGE;
        goto out_opts;
    }
    if (o.ring_file && !dd_ring_load_checked(CMD, o.ring_file, &ring)) {
        rc = CLI_EXIT_USAGE;
        goto out_opts;
    }
    size_t n = ring ? dedup_ring_node_count(ring) : (size_t)o.shards;
    part *parts = calloc(n, sizeof *parts);
    uint32_t *owner = NULL;
    size_t owner_cap = 0;
    if (!parts) {
        cli_error("%s: out of memory", CMD);
        rc = CLI_EXIT_FAIL;
        goto out_ring;
    }
    for (size_t i = 0; i < n; i++) {
        parts[i].fd = -1;
        parts[i].out.fd = -1;
        if (ring) {
            parts[i].name = dedup_ring_node_name(ring, (uint32_t)i);
        } else {
            snprintf(parts[i].label, sizeof parts[i].label, "%zu", i);
            parts[i].name = parts[i].label;
        }
    }
    if (!enough_fds(n + 4)) {
        cli_error("%s: %zu parts need %zu open files; the limit here is lower (ulimit -n)", CMD,
                  n, n + 4);
        rc = CLI_EXIT_USAGE;
        goto out_parts;
    }
    /* Buffers: 1 MiB a part up to 64 MiB in all, at least 16 KiB each. */
    size_t cap = (64u << 20) / n;
    cap = cap > (1u << 20) ? (1u << 20) : cap < (16u << 10) ? (16u << 10) : cap;
    for (size_t i = 0; i < n; i++) {
        parts[i].path = expand(o.pattern, parts[i].name);
        if (!parts[i].path) {
            cli_error("%s: out of memory", CMD);
            rc = CLI_EXIT_FAIL;
            goto out_fail;
        }
        for (size_t j = 0; !o.filter && j < i; j++) /* 'a' and 'A' may share a file */
            if (strcmp(parts[j].path, parts[i].path) == 0) {
                cli_error("%s: nodes '%s' and '%s' would both write '%s'", CMD, parts[j].name,
                          parts[i].name, parts[i].path);
                rc = CLI_EXIT_USAGE;
                goto out_fail;
            }
        if (!o.filter && !dd_outfile_check_inputs(CMD, parts[i].path, files, nfiles)) {
            rc = CLI_EXIT_USAGE;
            goto out_fail;
        }
    }
    /* SIGINT, SIGTERM, SIGHUP: the run stops, and no part is left. */
    dd_out_signals(false);
    for (size_t i = 0; i < n; i++) {
        if (!(o.filter ? start_filter(&parts[i], o.filter) : open_file(&parts[i]))) {
            rc = CLI_EXIT_USAGE;
            goto out_fail;
        }
        if (dd_writer_init(&parts[i].w, parts[i].fd, parts[i].path, cap) != 0) {
            cli_error("%s: out of memory", CMD);
            rc = CLI_EXIT_FAIL;
            goto out_fail;
        }
    }


    double t0 = now_sec();
    bool failed = false;
    int filter_rc = 0;
    /* CSV, JSON, URLs, headers and field lists go through the feeder,
     * which reads them; split_file.c cuts lines only. */
    const bool plain = !o.key.csv && !o.key.json && !o.key.url && !o.key.header && !o.key.fields;
    const bool key_errs = o.key.csv || o.key.json || o.key.url;
    dd_key_header kh = {.key = &o.key, .cmd = CMD};
    dd_keyed_block kb = {0};
    bool hdr_written = false;
    for (int fi = 0; fi < nfiles && !failed; fi++) {
        if (plain && strcmp(files[fi], "-") != 0) {
            split_route route = {.parts = parts, .n = n, .ring = ring, .key = &o.key,
                                 .term = o.term};
            int read_errno = 0;
            int m = split_file(&route, files[fi], &read_errno);
            if (m == SPLIT_FILE_DONE)
                continue;
            if (m == SPLIT_FILE_STOPPED ||
                (m == SPLIT_FILE_WRITE_ERROR && dd_stop_signal)) { /* EINTR */
                failed = true;
                break;
            }
            if (m == SPLIT_FILE_WRITE_ERROR) {
                for (size_t i = 0; i < n; i++)
                    if (parts[i].w.error) {
                        cli_error("%s: write error on %s: %s", CMD, parts[i].path,
                                  strerror(parts[i].w.error));
                        break;
                    }
                rc = CLI_EXIT_FAIL;
                failed = true;
                break;
            }
            if (m == SPLIT_FILE_SHRANK) {
                cli_error("%s: %s: the file shrank while it was being split; no part was written",
                          CMD, files[fi]);
                rc = CLI_EXIT_FAIL;
                failed = true;
                break;
            }
            if (m == SPLIT_FILE_READ_ERROR) {
                cli_error("%s: %s: read error: %s", CMD, files[fi], strerror(read_errno));
                rc = CLI_EXIT_USAGE; /* as the feeder's road */
                failed = true;
                break;
            }
            if (m == SPLIT_FILE_NOMEM) {
                cli_error("%s: out of memory", CMD);
                rc = CLI_EXIT_FAIL;
                failed = true;
                break;
            }
        }
        dd_feeder *fd = NULL;
        dd_feeder_opts fo = {.term = o.term, .key = &o.key, .hash = true, .seed = DEDUP_DEFAULT_SEED};
        if (o.key.header) {
            fo.header = dd_key_header_cb;
            fo.header_ctx = &kh;
        }
        kh.file = strcmp(files[fi], "-") == 0 ? "(standard input)" : files[fi];
        kh.lines = 0;
        int e = dd_feeder_open(&fd, files[fi], &fo);
        if (e) {
            cli_error("%s: %s: %s", CMD, files[fi], strerror(e));
            rc = CLI_EXIT_USAGE;
            failed = true;
            break;
        }
        const dd_block *b;
        while (!failed && (b = dd_feeder_next(fd)) != NULL) {
            if (kh.seen && !hdr_written) { /* the header, once at the top of every part */
                hdr_written = true;
                if (!write_header_parts(parts, n, &kh, o.term)) {
                    rc = CLI_EXIT_FAIL;
                    failed = true;
                    break;
                }
            }
            if (key_errs && !keyed_records(&kh, &kb, &b, o.bad_key, o.term)) {
                if (kb.nomem)
                    cli_error("%s: out of memory", CMD);
                rc = CLI_EXIT_FAIL;
                failed = true;
                break;
            }
            if (b->n > owner_cap) {
                free(owner);
                owner_cap = b->n * 2;
                owner = malloc(owner_cap * sizeof *owner);
                if (!owner) {
                    cli_error("%s: out of memory", CMD);
                    rc = CLI_EXIT_FAIL;
                    failed = true;
                    break;
                }
            }
            if (ring)
                dedup_ring_lookup_batch(ring, b->dig, b->n, owner);
            else
                dedup_jump_digest_batch(b->dig, b->n, (uint32_t)n, owner);
            for (size_t i = 0; i < b->n; i++) {
                part *p = &parts[owner[i]];
                p->records++;
                p->bytes += b->rlen[i] + 1;
                if (p->eof_early) {
                    p->dropped++;
                    continue;
                }
                if (__builtin_expect(dd_writer_record(&p->w, b->rec[i], b->rlen[i], o.term), 1))
                    continue;
                if (p->w.error) {
                    cli_error("%s: write error on %s: %s", CMD, o.filter ? p->name : p->path,
                              strerror(p->w.error));
                    rc = CLI_EXIT_FAIL;
                    failed = true;
                    break;
                }
                /* a filter closed its input: failed, or done early (head) */
                int st;
                while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
                    ;
                p->pid = 0;
                filter_rc = filter_status(p, st);
                if (filter_rc) {
                    failed = true;
                    break;
                }
                cli_warn("%s: the filter for node '%s' stopped reading its input", CMD, p->name);
                p->eof_early = true;
                p->dropped++;
            }
            if (dd_stop_signal)
                failed = true;
        }
        e = dd_feeder_error(fd);
        if (e == -1 && !failed) { /* the header callback said why */
            rc = CLI_EXIT_USAGE;
            failed = true;
        } else if (e && !failed) {
            cli_error("%s: %s: read error: %s", CMD, dd_feeder_name(fd), strerror(e));
            rc = CLI_EXIT_USAGE;
            failed = true;
        }
        dd_feeder_close(fd);
    }
    if (!failed && kh.seen && !hdr_written && !write_header_parts(parts, n, &kh, o.term)) {
        rc = CLI_EXIT_FAIL; /* an input of its header alone */
        failed = true;
    }
    if (kh.skipped && !failed)
        cli_warn("%s: %llu record%s had no key (%s): %s", CMD, (unsigned long long)kh.skipped,
                 kh.skipped == 1 ? "" : "s", dd_key_bad_reason(&o.key),
                 o.bad_key == DD_BAD_KEY_SKIP ? "dropped" : "each in the part of its whole record");
    dd_key_header_free(&kh);
    dd_keyed_free(&kb);
    if (dd_stop_signal)
        failed = true; /* no part is finished: not even a filter's */
    /* Flush and close every part; then the filters' verdicts. */
    for (size_t i = 0; i < n && !failed; i++) {
        part *p = &parts[i];
        if (p->eof_early)
            continue;
        if (!dd_writer_flush(&p->w) && p->w.error) {
            cli_error("%s: write error on %s: %s", CMD, o.filter ? p->name : p->path,
                      strerror(p->w.error));
            rc = CLI_EXIT_FAIL;
            failed = true;
        } else if (p->w.broken_pipe) {
            p->eof_early = true; /* judged by its exit status below */
        }
    }
    for (size_t i = 0; i < n && !failed; i++) {
        part *p = &parts[i];
        if (p->fd >= 0 && close(p->fd) != 0 && !o.filter) {
            cli_error("%s: write error on %s: %s", CMD, p->path, strerror(errno));
            rc = CLI_EXIT_FAIL;
            failed = true;
        }
        p->fd = -1;
        p->out.fd = -1;
    }
    for (size_t i = 0; i < n && !failed; i++) {
        part *p = &parts[i];
        if (p->pid <= 0)
            continue;
        int st;
        while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
            ;
        p->pid = 0;
        int r = filter_status(p, st);
        if (r && !filter_rc)
            filter_rc = r;
    }
    if (filter_rc)
        failed = true;
    if (dd_stop_signal && !filter_rc) {
        cli_info(1, o.filter ? "%s: interrupted; the filters were sent SIGTERM"
                             : "%s: interrupted; no part was written", CMD);
        rc = 128 + dd_stop_signal;
        failed = true;
    }
    if (!failed) {
        for (size_t i = 0; i < n; i++) {
            part *p = &parts[i];
            if (dd_outfile_commit(&p->out) != 0) {
                rc = CLI_EXIT_FAIL;
                failed = true;
                break;
            }
        }
    }
    if (o.stats)
        print_stats(&o, parts, n, now_sec() - t0, ring);
    if (filter_rc)
        rc = filter_rc;
    else if (failed && !rc)
        rc = CLI_EXIT_FAIL;
out_fail:
    if (rc)
        kill_filters(parts, n);
    for (size_t i = 0; i < n; i++) {
        part *p = &parts[i];
        if (p->fd >= 0)
            close(p->fd);
        p->out.fd = -1;
        dd_outfile_abort(&p->out); /* a failed run leaves no part behind */
        dd_outfile_free(&p->out);
        free(p->path);
        dd_writer_free(&p->w);
    }
out_parts:
    free(parts);
    free(owner);
out_ring:
    dedup_ring_free(ring);
out_opts:
    dd_nodes_free(&o.nodes);
    dd_keyspec_release(&o.key);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
