/*
 * cmd_plan.c - `dedup plan`: the five questions, answered with numbers.
 *
 * The answers come from options, or (with none of --items/--sample and a
 * terminal on standard input) are asked one by one on stderr.  --sample
 * measures distinct keys (with the HyperLogLog sketch, dedup/hll.h), key
 * and record length from a file, with the main job's key options.  The
 * decision and every figure are dedup_plan_make()'s (dedup/plan.h), which
 * the tests call directly; this file only asks and prints.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "dedup/hll.h"
#include "dedup/plan.h"
#include "feeder.h"
#include "key_header.h"

static const char plan_help[] =
    "Usage: dedup plan [QUESTIONS] [--json]\n"
    "\n"
    "Choose a deduplication method before running anything, from five answers;\n"
    "print the recommended method with its figures (memory, bits per key, hashes k,\n"
    "expected false-positive rate; disk and IO for the external path; machines and\n"
    "memory per machine for a sharded or Redis plan), the exact dedup command line,\n"
    "and every other method considered with the reason it lost.  With no --items or\n"
    "--sample and a terminal, the questions are asked one by one.\n"
    "\n"
    "1. How much data:\n"
    "  -n, --items N         distinct keys (per window with --window): 1e8, 10M\n"
    "      --sample FILE     measure distinct keys, key and record length in FILE\n"
    "                        (with -f/-d/-i/--trim as the job will use them); the\n"
    "                        distinct count is the items unless -n is given\n"
    "      --records N       records in all, for disk and IO (default 2 x items)\n"
    "      --key-bytes N     mean key length (default 40, or the sample's)\n"
    "      --keys int        keys are integers; --range LO..HI when they lie in one\n"
    "2. How much memory:\n"
    "  -m, --memory SIZE     bytes each machine may use: 4G, 512M (default: no budget)\n"
    "3. Can a new key be taken for a duplicate:\n"
    "  -p, --fpr P           yes, at most this often: 1e-5, 0.1%\n"
    "      --exact           no (the default)\n"
    "4. Batch or stream:\n"
    "      --stream, --batch records arrive as a stream, or are a batch (the default)\n"
    "      --window D        a repeat counts only within D: 10m, 24h (implies --stream)\n"
    "5. Deletes, and what infrastructure:\n"
    "      --delete          keys must be removable later\n"
    "      --infra WHERE     local (default), redis (machines share a Redis), or\n"
    "                        cluster (machines each take a shard)\n"
    "      --nodes N         machines available (default: as many as needed)\n"
    "Output:\n"
    "      --json            one JSON object: question, recommended, alternatives\n"
    "  -f, --field LIST, -d, --delimiter C, -i, --ignore-case, --trim, --squeeze,\n"
    "  --strip-prefix S, -z, --csv, --header, --json-paths P, --url: keys of --sample\n"
    "  (as dedup takes them)\n"
    "  -h, --help            this help\n"
    "\n"
    "Examples:\n"
    "  dedup plan -n 1e10 -p 1e-5                     10^10 URLs, 1 in 100,000\n"
    "  dedup plan -n 1e8 --key-bytes 36 -m 4G --exact  10^8 UUIDs in 4 GB, exact\n"
    "  dedup plan -n 5e5 --window 10m                  once per user per 10 minutes\n"
    "  dedup plan -n 1e7 --infra redis --window 24h    idempotency keys, many machines\n"
    "  dedup plan -n 1e6 -p 0.1% --delete              a blacklist with deletes\n";

enum {
    OPT_SAMPLE = 256,
    OPT_RECORDS,
    OPT_KEY_BYTES,
    OPT_KEYS,
    OPT_RANGE,
    OPT_EXACT,
    OPT_STREAM,
    OPT_BATCH,
    OPT_WINDOW,
    OPT_DELETE,
    OPT_INFRA,
    OPT_NODES,
    OPT_JSON,
    OPT_HELP,
};

static const struct option plan_opts[] = {
    {"items", required_argument, NULL, 'n'},
    {"sample", required_argument, NULL, OPT_SAMPLE},
    {"records", required_argument, NULL, OPT_RECORDS},
    {"key-bytes", required_argument, NULL, OPT_KEY_BYTES},
    {"keys", required_argument, NULL, OPT_KEYS},
    {"range", required_argument, NULL, OPT_RANGE},
    {"memory", required_argument, NULL, 'm'},
    {"fpr", required_argument, NULL, 'p'},
    {"exact", no_argument, NULL, OPT_EXACT},
    {"stream", no_argument, NULL, OPT_STREAM},
    {"batch", no_argument, NULL, OPT_BATCH},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"delete", no_argument, NULL, OPT_DELETE},
    {"infra", required_argument, NULL, OPT_INFRA},
    {"nodes", required_argument, NULL, OPT_NODES},
    {"json", no_argument, NULL, OPT_JSON},
    DD_KEY_LONG_OPTIONS,
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

typedef struct plan_args {
    dedup_plan_question q;
    const char *sample;
    bool items_given, key_bytes_given, exact_given, fpr_given, json;
    dd_keyspec key;
    unsigned char term;
} plan_args;

static bool parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
    char *end;
    errno = 0;
    unsigned long long a = strtoull(s, &end, 0);
    if (errno || end == s || end[0] != '.' || end[1] != '.' || *s == '-')
        return false;
    const char *t = end + 2;
    unsigned long long b = strtoull(t, &end, 0);
    if (errno || end == t || *end || *t == '-' || b < a)
        return false;
    *lo = a;
    *hi = b;
    return true;
}

static bool parse_infra(const char *s, dedup_plan_infra *out)
{
    if (strcmp(s, "local") == 0)
        *out = DEDUP_PLAN_LOCAL;
    else if (strcmp(s, "redis") == 0)
        *out = DEDUP_PLAN_REDIS;
    else if (strcmp(s, "cluster") == 0)
        *out = DEDUP_PLAN_CLUSTER;
    else
        return false;
    return true;
}

/* Returns -1 (usage error), 1 (help shown) or 0. */
static int parse(int argc, char **argv, plan_args *a)
{
    memset(a, 0, sizeof *a);
    dedup_plan_question_init(&a->q);
    a->key.delim = '\t';
    a->term = '\n';
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":n:m:p:f:d:izh", plan_opts, NULL)) != -1) {
        uint64_t v;
        switch (c) {
        case 'n':
            if (!arg_count("plan", "-n/--items", optarg, &a->q.items))
                return -1;
            a->items_given = true;
            break;
        case OPT_SAMPLE: a->sample = optarg; break;
        case OPT_RECORDS:
            if (!arg_count("plan", "--records", optarg, &a->q.records))
                return -1;
            break;
        case OPT_KEY_BYTES:
            if (!arg_uint("plan", "--key-bytes", optarg, 1, UINT32_MAX, &v))
                return -1;
            a->q.key_bytes = (double)v;
            a->key_bytes_given = true;
            break;
        case OPT_KEYS:
            if (strcmp(optarg, "int") == 0)
                a->q.int_keys = true;
            else if (strcmp(optarg, "string") != 0) {
                cli_error("plan: --keys must be int or string (got '%s')", optarg);
                return -1;
            }
            break;
        case OPT_RANGE:
            if (!parse_range(optarg, &a->q.range_lo, &a->q.range_hi)) {
                cli_error("plan: --range must be LO..HI with LO <= HI, decimal or 0x-hex (got '%s')",
                          optarg);
                return -1;
            }
            a->q.int_keys = true;
            break;
        case 'm':
            if (!arg_size("plan", "-m/--memory", optarg, &a->q.memory))
                return -1;
            break;
        case 'p':
            if (!arg_prob("plan", "-p/--fpr", optarg, &a->q.fpr))
                return -1;
            if (a->q.fpr > 0.5) {
                cli_error("plan: -p/--fpr must be at most 0.5 (got '%s')", optarg);
                return -1;
            }
            a->fpr_given = true;
            break;
        case OPT_EXACT: a->exact_given = true; break;
        case OPT_STREAM: a->q.stream = true; break;
        case OPT_BATCH: a->q.stream = false; break;
        case OPT_WINDOW:
            if (!cli_parse_duration(optarg, &a->q.window_us)) {
                cli_error("plan: --window must be a duration like 10s, 10m, 24h or 7d (got '%s')",
                          optarg);
                return -1;
            }
            a->q.stream = true;
            break;
        case OPT_DELETE: a->q.deletes = true; break;
        case OPT_INFRA:
            if (!parse_infra(optarg, &a->q.infra)) {
                cli_error("plan: --infra must be local, redis or cluster (got '%s')", optarg);
                return -1;
            }
            break;
        case OPT_NODES:
            if (!arg_uint("plan", "--nodes", optarg, 1, 1000000, &v))
                return -1;
            a->q.nodes = (uint32_t)v;
            break;
        case OPT_JSON: a->json = true; break;
        case 'h':
        case OPT_HELP: fputs(plan_help, stdout); return 1;
        default: {
            int k = dd_key_option(c, optarg, "plan", &a->key, &a->term);
            if (k < 0)
                return -1;
            if (k == 0) {
                arg_bad_option("plan", c, argv, "dedup plan --help");
                return -1;
            }
            break;
        }
        }
    }
    if (optind < argc) {
        cli_error("plan: unexpected argument '%s' (a sample file is given with --sample)",
                  argv[optind]);
        return -1;
    }
    if (a->exact_given && a->fpr_given) {
        cli_error("plan: --exact and -p/--fpr answer the same question two ways; give one");
        return -1;
    }
    if (a->q.range_hi > a->q.range_lo && !a->q.int_keys) {
        cli_error("plan: --range needs integer keys (--keys int)");
        return -1;
    }
    return 0;
}

/* Distinct keys (sketch), records and mean lengths of the sample. */
static bool measure_sample_keyed(plan_args *a);

/* Measures the sample with the key spec compiled for it. */
static bool measure_sample(plan_args *a)
{
    if (!a->key.header && !dd_keyspec_compile(&a->key, NULL, 0, NULL))
        return false;
    bool ok = measure_sample_keyed(a);
    dd_keyspec_release(&a->key);
    return ok;
}

static bool measure_sample_keyed(plan_args *a)
{
    dedup_hll_params hp;
    dedup_hll_params_init(&hp);
    dedup_hll *h = NULL;
    if (dedup_hll_create(&hp, NULL, &h) != DEDUP_OK)
        return false;
    dd_feeder *fd = NULL;
    dd_feeder_opts fo = {.term = a->term, .key = &a->key, .hash = true, .seed = hp.seed};
    /* --header, and records without a key (malformed CSV, ...): left out
     * of the sample's figures, and counted. */
    dd_key_header kh = {.key = &a->key, .cmd = "plan", .file = a->sample};
    dd_keyed_block kb = {0};
    const bool key_errs = a->key.csv || a->key.json || a->key.url;
    if (a->key.header) {
        fo.header = dd_key_header_cb;
        fo.header_ctx = &kh;
    }
    int e = dd_feeder_open(&fd, a->sample, &fo);
    if (e) {
        cli_error("plan: --sample %s: %s", a->sample, strerror(e));
        dedup_hll_free(h);
        return false;
    }
    uint64_t records = 0;
    double kbytes = 0, rbytes = 0;
    const dd_block *b;
    bool okay = true;
    while (okay && (b = dd_feeder_next(fd)) != NULL) {
        if (key_errs && (b = dd_keyed_only(&kb, &kh, b, a->term, true)) == NULL) {
            okay = false;
            break;
        }
        okay = dedup_hll_add_batch(h, b->dig, b->n) == DEDUP_OK;
        for (size_t i = 0; i < b->n; i++) {
            kbytes += (double)b->klen[i];
            rbytes += (double)b->rlen[i] + 1;
        }
        records += b->n;
    }
    e = dd_feeder_error(fd);
    dd_feeder_close(fd);
    dd_keyed_free(&kb);
    dd_key_header_free(&kh);
    if (kh.skipped)
        cli_warn("plan: --sample %s: %llu record%s with no key left out", a->sample,
                 (unsigned long long)kh.skipped, kh.skipped == 1 ? "" : "s");
    if (e == -1) { /* the header callback said why */
        dedup_hll_free(h);
        return false;
    }
    if (e || !okay) {
        cli_error("plan: --sample %s: %s", a->sample, e ? strerror(e) : "out of memory");
        dedup_hll_free(h);
        return false;
    }
    if (records == 0) {
        cli_error("plan: --sample %s holds no records", a->sample);
        dedup_hll_free(h);
        return false;
    }
    double distinct = floor(dedup_hll_estimate(h) + 0.5);
    cli_info(1, "plan: sample %s: %" PRIu64 " records, about %.0f distinct keys, keys %.1f bytes, "
                "records %.1f bytes on average",
             a->sample, records, distinct, kbytes / (double)records, rbytes / (double)records);
    if (!a->items_given) {
        a->q.items = distinct < 1 ? 1 : (uint64_t)distinct;
        if (!a->q.records)
            a->q.records = records;
    }
    if (!a->key_bytes_given)
        a->q.key_bytes = kbytes / (double)records > 0 ? kbytes / (double)records : 1;
    a->q.record_bytes = rbytes / (double)records;
    if (!a->q.records && a->items_given && distinct > 0)
        a->q.records = (uint64_t)((double)a->q.items * (double)records / distinct);
    dedup_hll_free(h);
    return true;
}

/* ---- asking on a terminal ------------------------------------------------------ */

static bool ask(const char *prompt, char *buf, size_t cap)
{
    fprintf(stderr, "%s ", prompt);
    fflush(stderr);
    if (!fgets(buf, (int)cap, stdin))
        return false;
    buf[strcspn(buf, "\r\n")] = 0;
    char *s = buf;
    while (*s == ' ')
        s++;
    memmove(buf, s, strlen(s) + 1);
    return true;
}

static int interview(plan_args *a)
{
    char line[256];
    for (;;) {
        if (!ask("1/5 How many distinct keys (e.g. 1e8), or the path of a sample file?", line,
                 sizeof line))
            return -1;
        if (cli_parse_count(line, &a->q.items)) {
            a->items_given = true;
            break;
        }
        if (access(line, R_OK) == 0) {
            a->sample = strdup(line);
            if (!a->sample || !measure_sample(a))
                return -1;
            break;
        }
        fprintf(stderr, "   a count like 1e8 or 10M, or a readable file, please\n");
    }
    for (;;) {
        if (!ask("2/5 Memory each machine may use (e.g. 4G; empty: no budget)?", line, sizeof line))
            return -1;
        if (!*line || cli_parse_size(line, &a->q.memory))
            break;
        fprintf(stderr, "   a size like 512M or 4G, or nothing\n");
    }
    for (;;) {
        if (!ask("3/5 May a new key be taken for a duplicate? 'no', or how often (e.g. 1e-5)?", line,
                 sizeof line))
            return -1;
        if (!*line || strcmp(line, "no") == 0 || strcmp(line, "n") == 0) {
            a->q.fpr = 0;
            break;
        }
        if (cli_parse_prob(line, &a->q.fpr) && a->q.fpr <= 0.5)
            break;
        fprintf(stderr, "   'no', or a rate like 0.01, 1%% or 1e-5\n");
    }
    for (;;) {
        if (!ask("4/5 A batch, a stream, or a stream with a window ('batch', 'stream', "
                 "'stream 10m')?", line, sizeof line))
            return -1;
        if (!*line || strcmp(line, "batch") == 0)
            break;
        if (strncmp(line, "stream", 6) == 0) {
            a->q.stream = true;
            const char *w = line + 6;
            while (*w == ' ')
                w++;
            if (!*w || cli_parse_duration(w, &a->q.window_us))
                break;
        }
        fprintf(stderr, "   batch, stream, or stream followed by a duration like 10m\n");
    }
    if (!ask("5/5 Must keys be deleted later (y/N)? Infrastructure: local, redis or cluster "
             "[local]? (e.g. 'n redis')", line, sizeof line))
        return -1;
    for (char *tok = strtok(line, " ,"); tok; tok = strtok(NULL, " ,")) {
        if (strcmp(tok, "y") == 0 || strcmp(tok, "yes") == 0)
            a->q.deletes = true;
        else if (!parse_infra(tok, &a->q.infra) && strcmp(tok, "n") != 0 && strcmp(tok, "no") != 0)
            fprintf(stderr, "   ignored '%s'\n", tok);
    }
    fputc('\n', stderr);
    return 0;
}

/* ---- printing ---------------------------------------------------------------------- */

static void print_choice_json(const dedup_plan_choice *c)
{
    printf("{\"method\":");
    cli_json_string(stdout, dedup_plan_method_name(c->method));
    printf(",\"feasible\":%s,\"exact\":%s,\"memory\":%" PRIu64 ",\"bits_per_key\":",
           c->feasible ? "true" : "false", c->exact ? "true" : "false", c->memory);
    json_double(stdout, c->bits_per_key);
    printf(",\"hashes\":%u,\"fpr\":", c->hashes);
    json_double(stdout, c->fpr);
    printf(",\"disk\":%" PRIu64 ",\"io\":%" PRIu64 ",\"nodes\":%u,\"node_memory\":%" PRIu64
           ",\"command\":",
           c->disk, c->io, c->nodes, c->node_memory);
    cli_json_string(stdout, c->command);
    printf(",\"reason\":");
    cli_json_string(stdout, c->reason);
    putchar('}');
}

static void print_json(const dedup_plan_question *q, const dedup_plan *p)
{
    static const char *const infra[] = {"local", "redis", "cluster"};
    printf("{\"question\":{\"items\":%" PRIu64 ",\"records\":%" PRIu64 ",\"key_bytes\":", q->items,
           q->records ? q->records : 2 * q->items);
    json_double(stdout, q->key_bytes > 0 ? q->key_bytes : 40.0);
    printf(",\"memory\":%" PRIu64 ",\"fpr\":", q->memory);
    json_double(stdout, q->fpr);
    printf(",\"exact\":%s,\"stream\":%s,\"window_us\":%" PRIu64 ",\"delete\":%s,\"infra\":\"%s\","
           "\"nodes\":%u,\"int_keys\":%s},\"recommended\":",
           q->fpr == 0 ? "true" : "false", q->stream ? "true" : "false", q->window_us,
           q->deletes ? "true" : "false", infra[q->infra], q->nodes, q->int_keys ? "true" : "false");
    print_choice_json(&p->choices[p->chosen]);
    printf(",\"alternatives\":[");
    bool first = true;
    for (size_t m = 0; m < DEDUP_PLAN_METHODS; m++) {
        if (!p->choices[m].considered || m == (size_t)p->chosen)
            continue;
        if (!first)
            putchar(',');
        first = false;
        print_choice_json(&p->choices[m]);
    }
    printf("]}\n");
}

static void print_figures(const dedup_plan_choice *c)
{
    char hb[32];
    cli_human_size(c->memory, hb, sizeof hb);
    printf("  memory:   %s (%.2f bits a key)", hb, c->bits_per_key);
    if (c->hashes)
        printf(", k = %u", c->hashes);
    if (c->method == DEDUP_PLAN_FINGERPRINT || c->method == DEDUP_PLAN_WINDOW)
        printf(", digest collision odds %.2g", c->fpr);
    else if (!c->exact)
        printf(", expected false-positive rate %.3g", c->fpr);
    else
        printf(", exact");
    putchar('\n');
    if (c->disk) {
        char db[32], ib[32];
        cli_human_size(c->disk, db, sizeof db);
        cli_human_size(c->io, ib, sizeof ib);
        printf("  disk:     up to %s of temporary files, IO about %s\n", db, ib);
    }
    if (c->nodes > 1 || c->method == DEDUP_PLAN_REDIS_KEYS || c->method == DEDUP_PLAN_REDIS_BITMAP ||
        c->method == DEDUP_PLAN_SHARDED) {
        cli_human_size(c->node_memory, hb, sizeof hb);
        printf("  nodes:    %u, %s each\n", c->nodes, hb);
    }
}

static void print_text(const dedup_plan *p)
{
    const dedup_plan_choice *w = &p->choices[p->chosen];
    printf("Recommended: %s\n", dedup_plan_method_name(w->method));
    printf("  why:      %s\n", w->reason);
    print_figures(w);
    printf("  command:  %s\n", w->command);
    printf("\nAlternatives considered:\n");
    for (size_t m = 0; m < DEDUP_PLAN_METHODS; m++) {
        const dedup_plan_choice *c = &p->choices[m];
        if (!c->considered || m == (size_t)p->chosen)
            continue;
        char hb[32];
        cli_human_size(c->memory, hb, sizeof hb);
        printf("  %-13s %10s  %s: %s\n", dedup_plan_method_name(c->method), hb,
               c->feasible ? "lost" : "ruled out", c->reason);
    }
}

int cmd_plan(int argc, char **argv)
{
    plan_args a;
    int pr = parse(argc, argv, &a);
    if (pr)
        return pr > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!dd_keyspec_check(&a.key, "plan"))
        return CLI_EXIT_USAGE;
    if (a.sample && !measure_sample(&a))
        return CLI_EXIT_USAGE;
    if (!a.items_given && !a.sample) {
        if (!isatty(STDIN_FILENO)) {
            cli_error("plan: how many keys? give -n/--items N or --sample FILE (or run on a "
                      "terminal to be asked); see 'dedup plan --help'");
            return CLI_EXIT_USAGE;
        }
        if (interview(&a) != 0) {
            cli_error("plan: no answer");
            return CLI_EXIT_USAGE;
        }
    }
    dedup_plan plan;
    dedup_status s = dedup_plan_make(&a.q, &plan);
    if (s) {
        cli_error("plan: %s", s == DEDUP_ERR_LIMIT ? "more than 2^48 keys is beyond any plan here"
                                                   : dedup_strerror(s));
        return CLI_EXIT_USAGE;
    }
    if (a.json)
        print_json(&a.q, &plan);
    else
        print_text(&plan);
    return out_finish("plan", NULL);
}
