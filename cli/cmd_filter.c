/*
 * cmd_filter.c - `dedup filter ACTION FILE ...`: filter files built once
 * and then added to, queried, inspected and merged.
 *
 * This file knows nothing about any filter type: it parses options, reads
 * items, prints, and calls the type's operations from the table in
 * filter_types.h.  The type of an existing file comes from its header
 * (dedup_peek_file), so every action works on every registered type.
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
#include "dedup/format.h"
#include "dedup/hash.h"
#include "dedup/seen.h"
#include "filter_types.h"
#include "redis_cli.h"

/* Items handed to a filter operation at once. */
#define ITEM_BATCH 4096
/* First size of the stdin buffer; doubled while one item does not fit. */
#define READ_BLOCK (1u << 20)

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
    "                         cuckoo: their CF.*, which deletes)\n"
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

static void filter_usage(FILE *f)
{
    fputs(filter_help_head, f);
    for (size_t i = 0; filter_types[i]; i++) {
        fprintf(f, "  %-9s %s\n", filter_types[i]->name, filter_types[i]->description);
        if (filter_types[i]->create_help)
            fputs(filter_types[i]->create_help, f);
    }
    fputs(filter_help_tail, f);
}

/* ---- Info output helpers (declared in filter_types.h) ----------------- */

static void info_key(filter_info_out *o, const char *key, const char *label)
{
    if (o->json) {
        fputs(o->first ? "" : ",", o->f);
        cli_json_string(o->f, key);
        fputc(':', o->f);
    } else {
        fprintf(o->f, "%-32s ", label);
    }
    o->first = false;
}

void info_str(filter_info_out *o, const char *key, const char *label, const char *v)
{
    info_key(o, key, label);
    if (o->json)
        cli_json_string(o->f, v);
    else
        fprintf(o->f, "%s\n", v);
}

void info_u64(filter_info_out *o, const char *key, const char *label, uint64_t v)
{
    info_key(o, key, label);
    fprintf(o->f, o->json ? "%" PRIu64 : "%" PRIu64 "\n", v);
}

void info_f64(filter_info_out *o, const char *key, const char *label, double v)
{
    info_key(o, key, label);
    if (o->json)
        json_double(o->f, v);
    else
        fprintf(o->f, "%.6g\n", v);
}

void info_prob(filter_info_out *o, const char *key, const char *label, double v)
{
    info_key(o, key, label);
    if (o->json)
        json_double(o->f, v);
    else
        fprintf(o->f, "%.6g (%.4g%%)\n", v, v * 100.0);
}

void info_bytes(filter_info_out *o, const char *key, const char *label, uint64_t v)
{
    char h[32];
    info_key(o, key, label);
    if (o->json)
        fprintf(o->f, "%" PRIu64, v);
    else
        fprintf(o->f, "%" PRIu64 " (%s)\n", v, cli_human_size(v, h, sizeof h));
}

void info_bool(filter_info_out *o, const char *key, const char *label, bool v)
{
    info_key(o, key, label);
    fprintf(o->f, o->json ? "%s" : "%s\n", v ? (o->json ? "true" : "yes") : (o->json ? "false" : "no"));
}

void info_hex(filter_info_out *o, const char *key, const char *label, uint64_t v)
{
    info_key(o, key, label);
    if (o->json) {
        char buf[64];
        fprintf(o->f, "%" PRIu64 ",", v);
        snprintf(buf, sizeof buf, "%s_hex", key);
        cli_json_string(o->f, buf);
        fprintf(o->f, ":\"0x%016" PRIx64 "\"", v);
    } else {
        fprintf(o->f, "0x%016" PRIx64 "\n", v);
    }
}

/* ---- Files -------------------------------------------------------------- */

/* True when the file at 'path' is too short to hold a header but does not
 * even begin like a dedup file: "not a dedup file" says more than
 * "truncated" then. */
static bool short_and_foreign(const char *path)
{
    static const unsigned char magic[8] = {0x89, 'D', 'D', 'P', '\r', '\n', 0x1a, '\n'};
    unsigned char b[8];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t r = read(fd, b, sizeof b);
    close(fd);
    return r >= 0 && (r == 0 || memcmp(b, magic, (size_t)r) != 0);
}

/* "dedup: PATH: what is wrong".  'err' is the errno of an IO failure. */
static void file_error(const char *path, dedup_status s, int err)
{
    struct stat st;
    if (s == DEDUP_ERR_TRUNCATED && stat(path, &st) == 0 && st.st_size == 0) {
        cli_error("%s: file is empty (not a dedup file)", path);
        return;
    }
    if (s == DEDUP_ERR_TRUNCATED && short_and_foreign(path))
        s = DEDUP_ERR_BAD_MAGIC;
    switch (s) {
    case DEDUP_ERR_IO:
        cli_error("%s: %s", path, err ? strerror(err) : dedup_strerror(s));
        break;
    case DEDUP_ERR_TRUNCATED:
        cli_error("%s: file is truncated (it ends before the lengths its header declares)", path);
        break;
    case DEDUP_ERR_NOMEM:
        cli_error("%s: out of memory loading the filter", path);
        break;
    default:
        cli_error("%s: %s", path, dedup_strerror(s));
        break;
    }
}

/* Reads the header of 'path' and finds its type's operations.  Prints the
 * error and returns false on failure. */
static bool peek_type(const char *path, dedup_header *hdr, const filter_type **t)
{
    errno = 0;
    dedup_status s = dedup_peek_file(path, hdr);
    if (s) {
        file_error(path, s, errno);
        return false;
    }
    *t = filter_type_by_file_type(hdr->type);
    if (!*t) {
        cli_error("%s: holds a structure of type %s (%u), not a filter 'dedup filter' can "
                  "open",
                  path, dedup_type_name(hdr->type), (unsigned)hdr->type);
        return false;
    }
    return true;
}

/* Loads 'path' through the library's seen-set (dedup/seen.h), which
 * validates all of it (header, params, payload, checksum, nothing after),
 * and finds the type's operations for what only this command does with it
 * (they take dedup_seen_impl(*s)). */
static bool load_filter(const char *path, const filter_type **t, dedup_seen **s)
{
    dedup_header hdr;
    if (!peek_type(path, &hdr, t))
        return false;
    errno = 0;
    dedup_status st = dedup_seen_load_file(path, NULL, s);
    if (st) {
        file_error(path, st, errno);
        return false;
    }
    return true;
}

static bool save_error(const char *path, dedup_status s, int err)
{
    if (s == DEDUP_ERR_IO)
        cli_error("%s: cannot save: %s (the previous file, if any, is unchanged)", path,
                  err ? strerror(err) : dedup_strerror(s));
    else
        cli_error("%s: cannot save: %s", path, dedup_strerror(s));
    return false;
}

static bool save_filter(const dedup_seen *sn, const char *path)
{
    errno = 0;
    dedup_status s = dedup_seen_save_file(sn, path);
    return s ? save_error(path, s, errno) : true;
}

/* ---- Items ----------------------------------------------------------------- */

/* Receives a batch of items; returns false to stop reading. */
typedef bool (*item_fn)(void *ctx, const filter_key *keys, size_t n);

typedef struct item_opts {
    char delim;    /* '\n' or '\0' */
    bool strip_cr; /* --crlf */
} item_opts;

/* Reads items from 'fd' ('name' for messages) and passes them to fn in
 * batches.  Returns 0, CLI_EXIT_USAGE on a read error (after a message), or
 * -1 when fn asked to stop. */
static int read_items(int fd, const char *name, const item_opts *io, item_fn fn, void *ctx)
{
    size_t cap = READ_BLOCK, len = 0, scan = 0, start = 0;
    char *buf = malloc(cap);
    filter_key *batch = malloc(ITEM_BATCH * sizeof *batch);
    size_t nb = 0;
    int rc = 0;
    bool eof = false;
    if (!buf || !batch) {
        cli_error("%s: out of memory", name);
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    while (!eof) {
        if (len == cap) {
            /* The buffer holds one unfinished item: make room. */
            size_t ncap = cap * 2;
            char *nbuf = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nbuf) {
                cli_error("%s: out of memory (an item longer than %zu bytes)", name, cap);
                rc = CLI_EXIT_FAIL;
                goto done;
            }
            buf = nbuf;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            cli_error("%s: read error: %s", name, strerror(errno));
            rc = CLI_EXIT_USAGE;
            goto done;
        }
        if (r == 0)
            eof = true;
        len += (size_t)r;
        for (;;) {
            char *e = scan < len ? memchr(buf + scan, io->delim, len - scan) : NULL;
            size_t end;
            if (e) {
                end = (size_t)(e - buf);
            } else if (eof && start < len) {
                end = len; /* a last item without terminator */
            } else {
                break;
            }
            size_t ilen = end - start;
            if (io->strip_cr && ilen && buf[end - 1] == '\r')
                ilen--;
            batch[nb].data = buf + start;
            batch[nb].len = ilen;
            if (++nb == ITEM_BATCH) {
                if (!fn(ctx, batch, nb)) {
                    rc = -1;
                    goto done;
                }
                nb = 0;
            }
            start = scan = end + 1;
            if (end == len)
                break;
        }
        /* Hand over what points into buf before moving the tail. */
        if (nb) {
            if (!fn(ctx, batch, nb)) {
                rc = -1;
                goto done;
            }
            nb = 0;
        }
        if (start > len)
            start = len;
        memmove(buf, buf + start, len - start);
        len -= start;
        scan = len;
        start = 0;
    }
done:
    free(buf);
    free(batch);
    return rc;
}

/* Items from the arguments ("-" reads standard input there), or all of
 * standard input when there are none.  Same returns as read_items. */
static int for_each_item(int nargs, char **args, const item_opts *io, item_fn fn, void *ctx)
{
    if (nargs == 0)
        return read_items(STDIN_FILENO, "standard input", io, fn, ctx);
    filter_key batch[256];
    size_t nb = 0;
    for (int i = 0; i < nargs; i++) {
        if (strcmp(args[i], "-") == 0) {
            if (nb && !fn(ctx, batch, nb))
                return -1;
            nb = 0;
            int rc = read_items(STDIN_FILENO, "standard input", io, fn, ctx);
            if (rc)
                return rc;
            continue;
        }
        batch[nb].data = args[i];
        batch[nb].len = strlen(args[i]);
        if (++nb == sizeof batch / sizeof batch[0]) {
            if (!fn(ctx, batch, nb))
                return -1;
            nb = 0;
        }
    }
    if (nb && !fn(ctx, batch, nb))
        return -1;
    return 0;
}

/* ---- Option parsing shared by the actions ----------------------------------- */

enum {
    OPT_SEED = 1000,
    OPT_JSON,
    OPT_CRLF,
    OPT_ON_FULL,
    OPT_KNOWN,
    OPT_FRESH,
    OPT_VERSION,
    OPT_EXTRA = 2000 /* + index of a type-specific create option */
};

/* Handles the options every action accepts; returns -1 if 'c' was not one
 * of them, else the exit status to return (or -2 to continue). */
static int common_option(int c, const char *cmd, char **argv)
{
    switch (c) {
    case 'h': filter_usage(stdout); return out_finish("filter", NULL);
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
    void *h = NULL;
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
    co.extra = extra;
    bool force = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":t:n:p:m:k:fh", longopts, NULL)) != -1) {
        int r = common_option(c, cmd, argv);
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
    struct stat st;
    if (!force && stat(co.path, &st) == 0) {
        cli_error("%s: %s already exists (use -f/--force to overwrite it)", cmd, co.path);
        goto out;
    }
    rc = t->create(&co, &h);
    if (rc)
        goto out;
    errno = 0;
    dedup_status sst = t->save(h, co.path);
    rc = sst ? (save_error(co.path, sst, errno), CLI_EXIT_FAIL) : CLI_EXIT_OK;
    if (!rc && cli_verbosity >= 2) {
        filter_info_out io = {stderr, false, true};
        t->info(h, &io);
    }
out:
    if (t && h)
        t->free(h);
    free(longopts);
    free(extra);
    return rc;
}

/* ---- add / query / del ------------------------------------------------------------ */

typedef struct item_job {
    const char *path;
    const filter_type *t;
    dedup_seen *s;     /* the file's seen-set */
    void *h;           /* dedup_seen_impl(s), for the type's operations */
    bool set_add;      /* add through dedup_seen_decide: kinds that cannot
                          delete hold a set, so adding a key again changes
                          nothing; counting and cuckoo count every add */
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

static bool add_batch(void *ctx, const filter_key *keys, size_t n)
{
    item_job *j = ctx;
    size_t done = 0;
    dedup_status s;
    if (j->set_add) {
        uint64_t seed = dedup_seen_seed(j->s);
        for (size_t i = 0; i < n; i++)
            j->dig[i] = dedup_hash(keys[i].data, keys[i].len, seed);
        dedup_batch b = {.n = n, .digests = j->dig};
        s = dedup_seen_decide(j->s, &b, j->verdict, &done);
    } else
        s = j->t->add(j->h, keys, n, &done);
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
    j->t->query(j->h, keys, n, j->answers);
    for (size_t i = 0; i < n; i++) {
        if (j->answers[i] == j->invert)
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
    dedup_status s = j->t->del(j->h, keys, n, j->answers);
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
        if (!filter_types[i]->del)
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
        int r = common_option(c, cmd, argv);
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
        if (!peek_type(j.path, &hdr, &j.t))
            return CLI_EXIT_USAGE;
        if (!j.t->del) {
            no_delete_error(j.path, j.t);
            return CLI_EXIT_USAGE;
        }
    }
    if (!load_filter(j.path, &j.t, &j.s))
        return CLI_EXIT_USAGE;
    j.h = dedup_seen_impl(j.s);
    dedup_seen_info before;
    dedup_seen_get_info(j.s, &before);
    j.set_add = a == A_ADD && !before.can_delete;
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
        int r = for_each_item(nargs, args, &io, add_batch, &j);
        dedup_seen_info after;
        dedup_seen_get_info(j.s, &after);
        /* counting and cuckoo count their adds themselves; a FAIL there is
         * checked once all are in (nothing is saved past capacity) */
        bool past = after.capacity && after.over_capacity && after.items > before.items;
        if (!j.error && past && !j.set_add && on_full == DEDUP_ON_FULL_FAIL)
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
        } else if (!save_filter(j.s, j.path)) {
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
        int r = for_each_item(nargs, args, &io, query_batch, &j);
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
        int r = for_each_item(nargs, args, &io, del_batch, &j);
        if (r > 0) {
            rc = r;
        } else if (j.error) {
            cli_error("%s: %s; nothing was saved", j.path, dedup_strerror(j.error));
            rc = CLI_EXIT_FAIL;
        } else if (!save_filter(j.s, j.path)) {
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

/* ---- info ---------------------------------------------------------------------------- */

static int info_one(const char *path, bool json)
{
    dedup_header hdr;
    errno = 0;
    dedup_status s = dedup_peek_file(path, &hdr);
    if (s) {
        file_error(path, s, errno);
        return CLI_EXIT_USAGE;
    }
    /* Every type a seen-set keeps is loaded whole, which validates all of
     * it (a truncated or damaged set or window state is refused here too,
     * not only a filter). */
    const filter_type *t = filter_type_by_file_type(hdr.type);
    dedup_seen *sn = NULL;
    errno = 0;
    s = dedup_seen_load_file(path, NULL, &sn);
    bool checked = s == DEDUP_OK;
    if (s && !(s == DEDUP_ERR_WRONG_TYPE && !t)) {
        file_error(path, s, errno);
        return CLI_EXIT_USAGE;
    }
    struct stat st;
    uint64_t fsize = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;

    filter_info_out o = {stdout, json, true};
    if (json)
        fputc('{', stdout);
    info_str(&o, "file", "file", path);
    info_bytes(&o, "file_bytes", "file size", fsize);
    info_u64(&o, "format_version", "format version", hdr.version);
    dedup_seen_info in;
    if (sn)
        dedup_seen_get_info(sn, &in);
    dedup_status ls = DEDUP_OK;
    bool described = false; /* by dd_info_state(), capacity included */
    if (t) {
        t->info(dedup_seen_impl(sn), &o);
    } else if (dd_info_state(path, &hdr, &o, &ls)) {
        /* a state file, a roaring state or a sketch: loaded whole and described */
        checked = described = true;
    } else if (ls) {
        if (json)
            fputs("}\n", stdout);
        file_error(path, ls, errno);
        dedup_seen_free(sn);
        return CLI_EXIT_USAGE;
    } else {
        /* A set or window state file: what the header and the seen-set say. */
        info_str(&o, "type", "type", dedup_type_name(hdr.type));
        info_u64(&o, "type_id", "type id", hdr.type);
        info_hex(&o, "seed", "seed", hdr.seed);
        info_bytes(&o, "payload_bytes", "payload", hdr.payload_len);
        if (sn && in.distinct_known)
            info_u64(&o, "distinct", in.distinct_exact ? "distinct keys" : "distinct keys (estimated)",
                     in.distinct);
    }
    if (sn && in.capacity && !described) {
        info_u64(&o, "capacity", "capacity (items planned)", in.capacity);
        info_u64(&o, "items", in.distinct_exact ? "items held" : "items held (estimated)", in.items);
        info_bool(&o, "over_capacity", "over capacity", in.over_capacity);
        if (!json && in.over_capacity)
            info_str(&o, "note_capacity", "note",
                     "more items than it was created for: the rate now is above its target");
    }
    info_str(&o, "checked", "contents checked",
             checked ? "whole file (header, params, payload, checksum)"
                     : "header only: no loader in this build knows this type");
    if (json)
        fputs("}\n", stdout);
    dedup_seen_free(sn);
    return CLI_EXIT_OK;
}

static int filter_info(int argc, char **argv)
{
    static const struct option longopts[] = {{"json", no_argument, NULL, OPT_JSON},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, OPT_VERSION},
                                             {NULL, 0, NULL, 0}};
    bool json = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int r = common_option(c, "filter info", argv);
        if (r >= 0)
            return r;
        if (c == OPT_JSON)
            json = true;
    }
    if (optind >= argc) {
        cli_error("filter info: missing FILE (usage: dedup filter info FILE... [--json])");
        return CLI_EXIT_USAGE;
    }
    int rc = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        if (i > optind && !json)
            putchar('\n');
        int r = info_one(argv[i], json);
        if (r)
            rc = r;
    }
    if (out_finish("filter info", NULL) && !rc)
        rc = CLI_EXIT_FAIL;
    return rc;
}

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
    int r = read_items(fd, path, io, verify_batch, v);
    if (fd != STDIN_FILENO)
        close(fd);
    return r > 0 ? r : r < 0 ? CLI_EXIT_FAIL : 0;
}

/* dedup filter verify FILE --known K --fresh F: the check to run before a
 * filter goes live.  Every known item (added before) must be found, and the
 * fresh items (never added) measure the false-positive rate, whose 99.9%
 * interval must hold the rate the filter claims at its fill now. */
static int filter_verify(int argc, char **argv)
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
        int r = common_option(c, cmd, argv);
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
    if (!load_filter(path, &t, &v.s))
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
            bool inside = claim >= lo && claim <= hi;
            printf("fresh items      %" PRIu64 ", %" PRIu64 " reported present: measured rate "
                   "%.4g%% (99.9%% interval %.4g%% .. %.4g%%)\n",
                   v.items, v.present, rate * 100, lo * 100, hi * 100);
            printf("claimed rate     %.4g%% at the fill now (%.4g%% planned): %s\n", claim * 100,
                   in.fpr_target * 100,
                   inside ? "within the interval"
                   : claim < lo ? "BELOW the interval: the filter errs more often than it claims "
                                  "(or some fresh items were added to it)"
                                : "ABOVE the interval: the filter errs less often than it claims");
            if ((double)v.items * claim < 10)
                printf("note             %" PRIu64 " fresh items expect %.3g false positives: "
                       "give at least %.0f for a test of the rate\n",
                       v.items, (double)v.items * claim, claim > 0 ? ceil(10 / claim) : 0.0);
            ok = ok && inside;
        }
        printf("verdict          %s\n", ok ? "pass" : "FAIL");
        rc = out_finish(cmd, NULL) ? CLI_EXIT_FAIL : ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    }
    free(v.dig);
    free(v.verdict);
    dedup_seen_free(v.s);
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
        int r = common_option(c, cmd, argv);
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
    if (!load_filter(first, &t, &accs))
        return CLI_EXIT_USAGE;
    void *acc = dedup_seen_impl(accs);
    if (!t->merge && argc - optind > 2) {
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
        if (!load_filter(path, &t2, &hs)) {
            rc = CLI_EXIT_USAGE;
            break;
        }
        void *h = dedup_seen_impl(hs);
        if (t2 != t) {
            cli_error("%s: cannot merge %s and %s: types differ (%s is %s %s, %s %s %s)", cmd,
                      first, path, first, cli_a(t->noun), t->noun, path, cli_a(t2->noun), t2->noun);
            rc = CLI_EXIT_USAGE;
        } else {
            char why[256] = "";
            dedup_status s = t->merge(acc, h, why, sizeof why);
            if (s == DEDUP_ERR_INCOMPATIBLE) {
                cli_error("%s: cannot merge %s and %s: %s (filters merge only when created "
                          "with the same type, size, k and seed)",
                          cmd, first, path, why[0] ? why : dedup_strerror(s));
                rc = CLI_EXIT_USAGE;
            } else if (s) {
                cli_error("%s: merging %s into %s: %s", cmd, path, first, dedup_strerror(s));
                rc = CLI_EXIT_FAIL;
            }
        }
        dedup_seen_free(hs);
    }
    if (!rc && !save_filter(accs, outp))
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
        filter_usage(stdout);
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
        return filter_info(argc, argv);
    if (strcmp(action, "merge") == 0)
        return filter_merge(argc, argv);
    if (strcmp(action, "verify") == 0)
        return filter_verify(argc, argv);
    cli_error("filter: unknown action '%s' (create, add, query, del, info, merge or verify; see "
              "'dedup filter --help')",
              action);
    return CLI_EXIT_USAGE;
}
