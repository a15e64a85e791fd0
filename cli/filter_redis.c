/*
 * filter_redis.c - `dedup filter create|add|query|del|info
 * redis://host:port[/db]/NAME` and `dedup filter copy SRC DST` between a
 * local blocked filter file and a Redis bitmap filter (redis_cli.h).
 *
 * -t bitmap (default) is the bitmap scheme; -t module (or bloom) and
 * -t cuckoo the module scheme's BF.* and CF.* filters.  Only a cuckoo filter
 * deletes.  Every filter keeps its shape in NAME:meta, so only create needs
 * -n; the other actions read it.
 *
 * The Redis filter NAME is the last path part of the URL; its keys are
 * NAME:meta and NAME:{NAME:s<i>}:g0 (dedup/redis.h, bitmap scheme).  A copy
 * is byte for byte: a Redis segment holds exactly the bytes of the local
 * filter's words (see backends/redis/bitmap.c), so copying to Redis ORs the
 * file into the filter there and copying from Redis writes a file that
 * `dedup filter` and `dedup --state` read like any other (atomically).
 */
#define _POSIX_C_SOURCE 200809L
#include "redis_cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"

#ifdef DEDUP_HAVE_REDIS
#include "dedup/bloom.h"
#include "dedup/format.h"
#include "dedup/redis.h"

#define BATCH 4096

typedef struct fr_opts {
    char base[1024];
    char shown[1024]; /* base for messages: its password as "***" */
    char name[256];
    dedup_redis_scheme scheme;
    uint64_t items, bits;
    double fpr;
    uint64_t seed;
    bool seed_given; /* --seed */
    uint32_t shards, segments, k;
    dedup_redis_filter filter;
    bool typed; /* -t given; else the stored scheme is taken */
    bool count, invert, quiet, json;
    int term;
} fr_opts;

/* "redis://[auth@]host:port[/db]/NAME" -> base URL + NAME. */
static bool split_url(const char *s, fr_opts *o)
{
    const char *hp = strstr(s, "://");
    const char *slash = hp ? strchr(hp + 3, '/') : NULL;
    const char *last = slash ? strrchr(slash, '/') : NULL;
    if (!last || !last[1] || strlen(last + 1) >= sizeof o->name ||
        (size_t)(last - s) >= sizeof o->base) {
        char shown[1024];
        dd_redis_url_shown(s, shown, sizeof shown);
        cli_error("filter: '%s' names no filter: use redis[s]://host:port[/db]/NAME", shown);
        return false;
    }
    memcpy(o->base, s, (size_t)(last - s));
    o->base[last - s] = 0;
    dd_redis_url_shown(o->base, o->shown, sizeof o->shown);
    snprintf(o->name, sizeof o->name, "%s", last + 1);
    return true;
}

/* Opens the filter; one that exists is read with the seed kept in its
 * NAME:meta (f->seed becomes that one, for digesting the items). */
static dedup_redis *fr_open(fr_opts *f, bool create)
{
    dedup_redis_params o;
    dedup_redis_params_init(&o);
    o.url = f->base;
    o.name = f->name;
    o.scheme = f->scheme;
    o.items = create ? f->items : 0;
    o.filter = f->filter;
    o.bits = create ? f->bits : 0;
    o.hashes = create ? f->k : 0;
    if (f->fpr > 0)
        o.fpr = f->fpr;
    o.seed = f->seed;
    /* A new name takes a secret seed unless --seed chose one; an existing
     * one's is taken (a module filter's must match a --seed given). */
    o.secret_seed = !f->seed_given || (!create && o.scheme != DEDUP_REDIS_MODULE);
    if (f->shards)
        o.shards = f->shards;
    o.segments = f->segments;
    dedup_redis *r = NULL;
    char err[768];
    if (dd_redis_conn_apply(&o))
        return NULL;
    dedup_status st = dedup_redis_create(&o, NULL, &r, err, sizeof err);
    if (st == DEDUP_ERR_WRONG_TYPE && !f->typed && !create && o.scheme == DEDUP_REDIS_BITMAP) {
        o.scheme = DEDUP_REDIS_MODULE; /* NAME:meta holds the module scheme's shape */
        st = dedup_redis_create(&o, NULL, &r, err, sizeof err);
    }
    if (st != DEDUP_OK) {
        cli_error("filter: %s/%s: %s", f->shown, f->name, err);
        return NULL;
    }
    dedup_redis_shape sh;
    dedup_redis_get_shape(r, &sh);
    f->seed = sh.seed;
    return r;
}

/* Items go to Redis BATCH at a time; query prints the selected ones. */
typedef enum { FEED_QUERY, FEED_ADD, FEED_DEL } feed_op;

typedef struct feed {
    dedup_seen *s;
    const fr_opts *f;
    feed_op op;
    bool removed[BATCH];
    uint64_t absent;
    dedup_digest d[BATCH];
    dedup_verdict v[BATCH];
    char *keep[BATCH];
    size_t lens[BATCH];
    size_t n;
    uint64_t selected;
} feed;

static bool feed_flush(feed *q)
{
    if (!q->n)
        return true;
    dedup_batch b = {.n = q->n, .digests = q->d, .keys = (const unsigned char *const *)q->keep,
                     .lens = q->lens};
    dedup_status st = q->op == FEED_ADD ? dedup_seen_add(q->s, &b, NULL)
                      : q->op == FEED_DEL ? dedup_seen_delete(q->s, &b, q->removed)
                                          : dedup_seen_query(q->s, &b, q->v);
    bool ok = st == DEDUP_OK;
    if (!ok)
        cli_error("filter: %s/%s: %s", q->f->shown, q->f->name, dedup_seen_error(q->s));
    for (size_t i = 0; i < q->n; i++) {
        if (ok && q->op == FEED_DEL && !q->removed[i]) {
            q->absent++;
            cli_warn("filter del: '%.*s' is not in %s/%s (certainly absent); nothing deleted",
                     (int)q->lens[i], q->keep[i], q->f->shown, q->f->name);
        }
        bool present = q->v[i] != DEDUP_NEW;
        if (ok && q->op == FEED_QUERY && present != q->f->invert) {
            q->selected++;
            if (!q->f->quiet && !q->f->count) {
                char t = (char)q->f->term;
                out_write(q->keep[i], q->lens[i]);
                out_write(&t, 1);
            }
        }
        free(q->keep[i]);
        q->keep[i] = NULL;
    }
    q->n = 0;
    return ok;
}

static bool feed_one(feed *q, const char *item, size_t len)
{
    char *k = malloc(len + 1);
    if (!k) {
        cli_error("out of memory");
        return false;
    }
    memcpy(k, item, len);
    q->keep[q->n] = k;
    q->lens[q->n] = len;
    q->d[q->n] = dedup_hash(item, len, q->f->seed);
    return ++q->n < BATCH || feed_flush(q);
}

static bool feed_stdin(feed *q)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    bool ok = true;
    while (ok && (len = getdelim(&line, &cap, q->f->term, stdin)) >= 0) {
        if (len > 0 && line[len - 1] == (char)q->f->term)
            len--;
        ok = feed_one(q, line, (size_t)len);
    }
    free(line);
    if (ok && ferror(stdin)) {
        cli_error("filter: standard input: %s", strerror(errno));
        ok = false;
    }
    return ok;
}

static int run_items(dedup_seen *s, const fr_opts *f, feed_op op, int nargs, char **args)
{
    bool add = op != FEED_QUERY;
    feed *q = calloc(1, sizeof *q);
    if (!q) {
        cli_error("out of memory");
        return CLI_EXIT_FAIL;
    }
    q->s = s;
    q->f = f;
    q->op = op;
    bool ok = true;
    if (nargs == 0)
        ok = feed_stdin(q);
    for (int i = 0; ok && i < nargs; i++)
        ok = strcmp(args[i], "-") == 0 ? feed_stdin(q) : feed_one(q, args[i], strlen(args[i]));
    ok = ok && feed_flush(q);
    uint64_t selected = q->selected, absent = q->absent;
    for (size_t i = 0; i < q->n; i++)
        free(q->keep[i]);
    free(q);
    if (!ok) /* query: 1 means "none selected", so its errors are 2 */
        return add ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
    if (!add && f->count && !f->quiet)
        printf("%llu\n", (unsigned long long)selected);
    if (out_finish("filter", NULL) != 0)
        return add ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
    if (op == FEED_DEL)
        return absent ? CLI_EXIT_FAIL : 0; /* as `dedup filter del FILE`: 1 if some was absent */
    return !add && selected == 0 ? 1 : 0;
}

static int do_info(dedup_redis *r, const fr_opts *f)
{
    dedup_redis_shape sh;
    dedup_redis_get_shape(r, &sh);
    uint64_t mem = 0;
    if (dedup_redis_remote_memory(r, &mem) != DEDUP_OK) {
        cli_error("filter: %s/%s: %s", f->shown, f->name, dedup_redis_last_error(r));
        return CLI_EXIT_FAIL;
    }
    if (f->json) {
        printf("{\"url\":");
        cli_json_string(stdout, f->shown);
        printf(",\"name\":");
        cli_json_string(stdout, f->name);
        printf(",\"scheme\":\"%s\",\"cluster\":%s,\"bits\":%llu,\"k\":%u,\"segments\":%u,"
               "\"shards\":%u,\"items\":%llu,\"fpr\":",
               dedup_redis_scheme_name(sh.scheme), sh.cluster ? "true" : "false",
               (unsigned long long)sh.bits, sh.k, sh.segments, sh.shards,
               (unsigned long long)sh.items);
        json_double(stdout, sh.fpr);
        printf(",\"seed\":%llu,\"memory\":%llu", (unsigned long long)sh.seed,
               (unsigned long long)mem);
        if (sh.scheme == DEDUP_REDIS_MODULE)
            printf(",\"filter\":\"%s\"", sh.filter == DEDUP_REDIS_FILTER_CUCKOO ? "cuckoo" : "bloom");
        if (sh.generations)
            printf(",\"generations\":%u", sh.generations);
        printf("}\n");
    } else {
        char hb[32];
        printf("filter:     %s/%s\n", f->shown, f->name);
        printf("scheme:     %s%s\n", dedup_redis_scheme_name(sh.scheme), sh.cluster ? " (cluster)" : "");
        if (sh.scheme == DEDUP_REDIS_BITMAP)
            printf("bits:       %llu (k=%u, %u segment(s))\n", (unsigned long long)sh.bits, sh.k,
                   sh.segments);
        else
            printf("shards:     %u (%s filter)\n", sh.shards,
                   sh.filter == DEDUP_REDIS_FILTER_CUCKOO ? "cuckoo" : "bloom");
        printf("capacity:   %llu at %g\n", (unsigned long long)sh.items, sh.fpr);
        printf("seed:       %llu\n", (unsigned long long)sh.seed);
        printf("memory:     %s in Redis\n", cli_human_size(mem, hb, sizeof hb));
    }
    return out_finish("filter", NULL) ? CLI_EXIT_FAIL : 0;
}

/* ---- copy ---- */

typedef struct enc_ctx {
    const unsigned char *params;
    uint32_t params_len;
    uint16_t type;
    uint64_t seed;
    const unsigned char *bytes;
    uint64_t len;
} enc_ctx;

static dedup_status write_bloom_file(const void *obj, dedup_sink *sink)
{
    const enc_ctx *e = obj;
    dedup_encoder enc;
    dedup_status st = dedup_encoder_begin(&enc, *sink, e->type, e->seed, e->params, e->params_len, e->len);
    if (st == DEDUP_OK)
        st = dedup_encoder_write(&enc, e->bytes, (size_t)e->len);
    if (st == DEDUP_OK)
        st = dedup_encoder_end(&enc);
    return st;
}

/* The header and params of an empty blocked filter of this shape, from its
 * own save: the file written from Redis then differs only in its payload. */
static bool empty_params(const dedup_redis_shape *sh, unsigned char **buf, dedup_decoder *dec)
{
    dedup_bloom_params bp;
    dedup_bloom_params_init(&bp);
    bp.kind = DEDUP_BLOOM_BLOCKED;
    bp.bits = sh->bits;
    bp.k = sh->k;
    bp.seed = sh->seed;
    bp.capacity = sh->items;
    bp.fpr = sh->fpr;
    dedup_bloom *bf = NULL;
    if (dedup_bloom_create(&bp, NULL, &bf) != DEDUP_OK)
        return false;
    uint64_t size = dedup_bloom_serialized_size(bf);
    *buf = malloc(size);
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, *buf, size);
    bool ok = *buf && dedup_bloom_save(bf, &sink) == DEDUP_OK;
    dedup_bloom_free(bf);
    if (!ok)
        return false;
    dedup_mem_source src;
    return dedup_decoder_begin(dec, dedup_mem_source_init(&src, *buf, size), 0) == DEDUP_OK;
}

static int copy_from_redis(fr_opts *f, const char *path)
{
    f->scheme = DEDUP_REDIS_BITMAP;
    dedup_redis *r = fr_open(f, false);
    if (!r)
        return CLI_EXIT_FAIL;
    dedup_redis_shape sh;
    dedup_redis_get_shape(r, &sh);
    unsigned char *bytes = malloc(sh.bits / 8), *ebuf = NULL;
    static dedup_decoder dec;
    int rc = 0;
    if (!bytes || !empty_params(&sh, &ebuf, &dec)) {
        cli_error("filter copy: cannot build a %llu-bit blocked filter", (unsigned long long)sh.bits);
        rc = CLI_EXIT_FAIL;
    } else if (dedup_redis_bitmap_read(r, bytes, sh.bits / 8) != DEDUP_OK) {
        cli_error("filter copy: %s/%s: %s", f->shown, f->name, dedup_redis_last_error(r));
        rc = CLI_EXIT_FAIL;
    } else {
        if (sh.generations)
            cli_info(1, "filter copy: %s/%s expires keys (%u generations): '%s' is the union of "
                        "its live generations, every key recorded within the window until now, "
                        "and as a file it never forgets them", f->shown, f->name, sh.generations, path);
        enc_ctx e = {dec.params, dec.header.params_len, dec.header.type, sh.seed, bytes, sh.bits / 8};
        dedup_status st = dedup_save_file(path, write_bloom_file, &e);
        dedup_bloom *check = NULL;
        if (st == DEDUP_OK)
            st = dedup_bloom_load_file(path, NULL, &check);
        dedup_bloom_free(check);
        if (st != DEDUP_OK) {
            cli_error("filter copy: '%s': %s", path, st == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(st));
            rc = CLI_EXIT_FAIL;
        }
    }
    free(bytes);
    free(ebuf);
    dedup_redis_free(r);
    return rc;
}

static int copy_to_redis(fr_opts *f, const char *path)
{
    dedup_bloom *bf = NULL;
    dedup_status st = dedup_bloom_load_file(path, NULL, &bf);
    if (st != DEDUP_OK) {
        cli_error("filter copy: '%s': %s", path, st == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(st));
        return CLI_EXIT_USAGE;
    }
    if (dedup_bloom_get_kind(bf) != DEDUP_BLOOM_BLOCKED) {
        cli_error("filter copy: '%s' is a classic Bloom filter; only a blocked one (-t blocked) "
                  "has the layout of a Redis bitmap filter", path);
        dedup_bloom_free(bf);
        return CLI_EXIT_USAGE;
    }
    f->scheme = DEDUP_REDIS_BITMAP;
    f->bits = dedup_bloom_bits(bf);
    f->k = dedup_bloom_k(bf);
    f->seed = dedup_bloom_seed(bf);
    f->seed_given = true; /* the file's bits are digests of its seed */
    f->items = dedup_bloom_capacity(bf);
    if (!f->items)
        f->items = dedup_seen_capacity_for_size(DEDUP_SEEN_BLOCKED, f->bits, dedup_bloom_target_fpr(bf));
    f->fpr = dedup_bloom_target_fpr(bf);
    dedup_bloom_free(bf);
    /* An existing filter with a TTL takes the file into its current
     * generation; any other goes through create, which compares shapes. */
    dedup_redis *r = NULL;
    dedup_redis_params o;
    dedup_redis_params_init(&o);
    o.url = f->base;
    o.name = f->name;
    o.scheme = DEDUP_REDIS_BITMAP;
    o.seed = f->seed;
    char err[768];
    int crc = dd_redis_conn_apply(&o);
    if (crc)
        return crc;
    st = dedup_redis_create(&o, NULL, &r, err, sizeof err);
    if (st != DEDUP_OK && st != DEDUP_ERR_NOT_FOUND) {
        cli_error("filter copy: %s/%s: %s", f->shown, f->name, err);
        return CLI_EXIT_FAIL;
    }
    dedup_redis_shape sh = {0};
    if (r)
        dedup_redis_get_shape(r, &sh);
    if (r && sh.generations && (sh.bits != f->bits || sh.k != f->k)) {
        cli_error("filter copy: the bitmap filter %s/%s has bits=%llu k=%u; '%s' has bits=%llu "
                  "k=%u (the same shape is needed)", f->shown, f->name,
                  (unsigned long long)sh.bits, sh.k, path, (unsigned long long)f->bits, f->k);
        dedup_redis_free(r);
        return CLI_EXIT_FAIL;
    }
    if (r && sh.generations) {
        cli_info(1, "filter copy: %s/%s expires keys (%u generations): the keys of '%s' count as "
                    "seen now, and are forgotten one TTL from now", f->shown, f->name,
                 sh.generations, path);
    } else {
        dedup_redis_free(r);
        r = fr_open(f, true);
    }
    if (!r)
        return CLI_EXIT_FAIL;
    /* The payload, straight from the file (its checksum checked at the end). */
    dedup_file_source fs;
    dedup_source src;
    static dedup_decoder dec;
    unsigned char *bytes = malloc(f->bits / 8);
    int rc = 0;
    st = bytes ? dedup_file_source_open(&fs, path, &src) : DEDUP_ERR_NOMEM;
    if (st == DEDUP_OK) {
        st = dedup_decoder_begin(&dec, src, 0);
        if (st == DEDUP_OK)
            st = dedup_decoder_read(&dec, bytes, (size_t)(f->bits / 8));
        if (st == DEDUP_OK)
            st = dedup_decoder_end(&dec);
        dedup_file_source_close(&fs);
    }
    if (st != DEDUP_OK) {
        cli_error("filter copy: '%s': %s", path, dedup_strerror(st));
        rc = CLI_EXIT_USAGE;
    } else if (dedup_redis_bitmap_write(r, bytes, f->bits / 8) != DEDUP_OK) {
        cli_error("filter copy: %s/%s: %s", f->shown, f->name, dedup_redis_last_error(r));
        rc = CLI_EXIT_FAIL;
    }
    free(bytes);
    dedup_redis_free(r);
    return rc;
}

/* The actions on a Redis filter, parsed once from argv[0]. */
enum fr_action { FR_OTHER, FR_CREATE, FR_ADD, FR_QUERY, FR_DEL, FR_INFO, FR_COPY };

static enum fr_action fr_action_of(const char *a)
{
    static const struct { const char *name; enum fr_action act; } acts[] = {
        {"create", FR_CREATE}, {"add", FR_ADD},   {"query", FR_QUERY}, {"del", FR_DEL},
        {"delete", FR_DEL},    {"info", FR_INFO}, {"copy", FR_COPY}};
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
        if (strcmp(a, acts[i].name) == 0)
            return acts[i].act;
    return FR_OTHER;
}

int dd_filter_redis(int argc, char **argv)
{
    const char *action = argv[0];
    const enum fr_action act = fr_action_of(action);
    enum { O_SEED = 0x5300, O_SHARDS, O_SEGMENTS, O_JSON };
    static const struct option lo[] = {
        {"type", required_argument, NULL, 't'},   {"items", required_argument, NULL, 'n'},
        {"fpr", required_argument, NULL, 'p'},    {"hashes", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, O_SEED}, {"shards", required_argument, NULL, O_SHARDS},
        {"segments", required_argument, NULL, O_SEGMENTS}, {"json", no_argument, NULL, O_JSON},
        {"count", no_argument, NULL, 'c'},        {"invert", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},        {"zero-terminated", no_argument, NULL, 'z'},
        DD_REDIS_CONN_LONG_OPTIONS,               {NULL, 0, NULL, 0}};
    fr_opts f;
    memset(&f, 0, sizeof f);
    f.scheme = DEDUP_REDIS_BITMAP;
    f.seed = DEDUP_DEFAULT_SEED;
    f.term = '\n';
    char cmd[64];
    snprintf(cmd, sizeof cmd, "filter %s", action);
    opterr = 0;
    optind = 1;
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, ":t:n:p:k:cvqz", lo, NULL)) != -1) {
        switch (c) {
        case 't':
            f.typed = true;
            if (strcmp(optarg, "bitmap") == 0 || strcmp(optarg, "blocked") == 0)
                f.scheme = DEDUP_REDIS_BITMAP;
            else if (strcmp(optarg, "module") == 0 || strcmp(optarg, "bloom") == 0) {
                f.scheme = DEDUP_REDIS_MODULE;
                f.filter = DEDUP_REDIS_FILTER_BLOOM;
            } else if (strcmp(optarg, "cuckoo") == 0) {
                f.scheme = DEDUP_REDIS_MODULE;
                f.filter = DEDUP_REDIS_FILTER_CUCKOO;
            } else {
                cli_error("%s: a Redis filter is -t bitmap (plain strings), -t module (BF.*) or "
                          "-t cuckoo (CF.*, deletes), not '%s'", cmd, optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        case 'n': if (!arg_count(cmd, "-n", optarg, &f.items)) return CLI_EXIT_USAGE; break;
        case 'p': if (!arg_prob(cmd, "-p", optarg, &f.fpr)) return CLI_EXIT_USAGE; break;
        case 'k':
            if (!arg_uint(cmd, "-k", optarg, 1, 16, &v)) return CLI_EXIT_USAGE;
            f.k = (uint32_t)v;
            break;
        case O_SEED:
            if (!arg_seed(cmd, "--seed", optarg, &f.seed))
                return CLI_EXIT_USAGE;
            f.seed_given = true;
            break;
        case O_SHARDS:
        case O_SEGMENTS:
            if (!arg_uint(cmd, c == O_SHARDS ? "--shards" : "--segments", optarg, 1, 65536, &v))
                return CLI_EXIT_USAGE;
            *(c == O_SHARDS ? &f.shards : &f.segments) = (uint32_t)v;
            break;
        case O_JSON: f.json = true; break;
        case 'c': f.count = true; break;
        case 'v': f.invert = true; break;
        case 'q': f.quiet = true; break;
        case 'z': f.term = 0; break;
        default:
            if (dd_redis_conn_option(c, optarg))
                break;
            arg_bad_option(cmd, c, argv, "dedup filter");
            return CLI_EXIT_USAGE;
        }
    }
    int nargs = argc - optind;
    char **args = argv + optind;
    if (act == FR_COPY) {
        if (nargs != 2) {
            cli_error("filter copy: give SRC and DST (a filter file and redis://host:port/NAME)");
            return CLI_EXIT_USAGE;
        }
        bool sr = dd_is_redis_url(args[0]), dr = dd_is_redis_url(args[1]);
        if (sr == dr) {
            cli_error("filter copy: one of SRC and DST must be a Redis URL, the other a file");
            return CLI_EXIT_USAGE;
        }
        if (!split_url(sr ? args[0] : args[1], &f))
            return CLI_EXIT_USAGE;
        dd_redis_hide_url_password(sr ? args[0] : args[1]);
        return sr ? copy_from_redis(&f, args[1]) : copy_to_redis(&f, args[0]);
    }
    if (nargs < 1 || !split_url(args[0], &f))
        return CLI_EXIT_USAGE;
    dd_redis_hide_url_password(args[0]);
    bool create = act == FR_CREATE;
    if (create && !f.items && !(f.scheme == DEDUP_REDIS_BITMAP && f.bits)) {
        cli_error("filter create: -n/--items is needed (the keys planned, with -p)");
        return CLI_EXIT_USAGE;
    }
    bool del = act == FR_DEL;
    if (act == FR_OTHER) {
        cli_error("filter %s: not available for a Redis filter (create, add, query, del, info, "
                  "copy)", action);
        return CLI_EXIT_USAGE;
    }
    if (del && f.typed && f.scheme != DEDUP_REDIS_MODULE) {
        cli_error("filter del: %s is a bitmap filter, which cannot delete items (a key's bits "
                  "are shared with others); a Redis filter that deletes is -t cuckoo (the "
                  "module's CF.*)", args[0]);
        return CLI_EXIT_USAGE;
    }
    dedup_redis *r = fr_open(&f, create);
    if (!r)
        return act == FR_QUERY ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    /* Items are digested with the filter's stored seed (a module filter
     * created without --seed keeps a random one in NAME:meta). */
    dedup_redis_shape stored;
    dedup_redis_get_shape(r, &stored);
    f.seed = stored.seed;
    if (create || act == FR_INFO) {
        int rc = create ? 0 : do_info(r, &f);
        dedup_redis_free(r);
        return rc;
    }
    /* Items go through the seen-set, which owns the connection from here. */
    dedup_seen *s = NULL;
    dedup_status st = dedup_redis_as_seen(r, NULL, &s);
    if (st != DEDUP_OK) {
        dedup_redis_free(r);
        cli_error("filter: %s/%s: %s", f.base, f.name, dedup_strerror(st));
        return CLI_EXIT_FAIL;
    }
    int rc = run_items(s, &f, del ? FEED_DEL : act == FR_ADD ? FEED_ADD : FEED_QUERY, nargs - 1,
                       args + 1);
    dedup_seen_free(s);
    return rc;
}

#else

int dd_filter_redis(int argc, char **argv)
{
    (void)argc; (void)argv;
    cli_error("filter: this dedup was built without the Redis backend (install libhiredis-dev "
              "and rebuild)");
    return CLI_EXIT_USAGE;
}

#endif
