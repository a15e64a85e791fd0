/*
 * redis_opts.c - `dedup --redis URL ...`: options, the seen-set, records
 * answered UNCERTAIN, --stats (redis_cli.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "redis_cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "io.h"
#include "redis_journal.h"
#include "tier_spec.h"

const char dd_redis_help[] =
    "Shared seen-set in Redis (many processes, many machines):\n"
    "      --redis=URL        keep the seen-set in Redis: redis://[user@]host:port[/db]\n"
    "                         or redis-cluster://host:port[,host:port...] (a Redis Cluster)\n"
    "                         or redis-sentinel://host:port[,host:port...]/MASTER[/db]\n"
    "                         (the master Redis Sentinel names MASTER; followed on failover);\n"
    "                         rediss:// and rediss-cluster:// over TLS.  The password:\n"
    "                         DEDUP_REDIS_PASSWORD or REDISCLI_AUTH in the environment,\n"
    "                         or --redis-auth-file (never in the URL: ps shows it)\n"
    "      --redis-auth-file=FILE  'PASSWORD' or 'USER PASSWORD'; FILE must be readable\n"
    "                         by its owner only (chmod 600)\n"
    "      --tls-cacert=FILE  rediss: the CAs (PEM) the server's certificate is checked\n"
    "                         against (default: the system's); its name is checked too\n"
    "      --tls-cert=FILE, --tls-key=FILE  rediss: a client certificate and its key\n"
    "      --tls-insecure     rediss: do not check the server's certificate (warned)\n"
    "      --redis-scheme=S   keys (default: exact, one Redis key per key), bitmap (a\n"
    "                         blocked Bloom filter on plain strings, sized by -n/-p), or\n"
    "                         module (BF.*/CF.* of dedup_redis.so or RedisBloom, -n/-p)\n"
    "      --name=NAME        prefix of the Redis keys (default dedup)\n"
    "      --ttl=D            forget a key D after it was seen (7d, 1h); module: the\n"
    "                         expiring DEDUP.* filters of dedup_redis.so\n"
    "      --reserve=D        keys: a new key lives D until its record is written,\n"
    "                         then is recorded (for --ttl if given; default 60s,\n"
    "                         at least 1s)\n"
    "      --uncertain=FILE   write records whose Redis reply was lost (dropped like\n"
    "                         duplicates) to FILE; also for --tier redis://\n"
    "      --wait-replicas=N  each batch waits for N replicas (WAIT) before its output\n"
    "      --redis-whole-keys keys: name Redis keys by the key bytes, not the digest\n"
    "      --redis-filter=F   module: bloom (default; BF.*) or cuckoo (CF.*: keys can\n"
    "                         be deleted with `dedup filter del`; no --ttl)\n"
    "      --shards=S         module: split the filter into S keys (default: one per\n"
    "                         64 MiB of filter, at least 4 per cluster master; kept\n"
    "                         in NAME:meta, so later runs need neither -n nor this)\n"
    "      --segments=S       bitmap: split the filter into S keys (default: by size)\n"
    "      --pipeline=N       commands in flight per node (default 1024)\n"
    "      --redis-retries=N  reconnect attempts per batch before failing (default 8)\n"
    "      --redis-failover-wait=D  redis-sentinel://: how long a lost master is\n"
    "                         waited for, until the sentinels name one (default 60s)\n"
    "      --journal=DIR      bitmap, module: keep the journal of the batch in flight\n"
    "                         (what a kill -9 would lose) under DIR (default\n"
    "                         $XDG_STATE_HOME/dedup, else ~/.local/state/dedup)\n"
    "      --no-journal       run without it: a kill -9 may lose up to one batch\n";

#ifdef DEDUP_HAVE_REDIS
#include "dedup/redis.h"

_Static_assert((int)DD_REDIS_KEYS == (int)DEDUP_REDIS_KEYS &&
                   (int)DD_REDIS_BITMAP == (int)DEDUP_REDIS_BITMAP &&
                   (int)DD_REDIS_MODULE == (int)DEDUP_REDIS_MODULE &&
                   (int)DD_REDIS_BLOOM == (int)DEDUP_REDIS_FILTER_BLOOM &&
                   (int)DD_REDIS_CUCKOO == (int)DEDUP_REDIS_FILTER_CUCKOO,
               "the parsed --redis-scheme and --redis-filter are the library's values");

struct dd_redis_run {
    dedup_redis *r; /* owned by the seen-set */
    const char *name;
    uint64_t unwritten; /* records of a failed batch left unwritten */
    dd_after after;   /* uncertain records, the keys scheme's commits */
    dd_uncertain unc; /* --uncertain FILE */
    dd_journal *journal; /* bitmap, module: the batch in flight */
    char master[DEDUP_REDIS_MAX_MASTER + 1]; /* a sentinel URL's master name, else "" */
};
#endif

/* The position + 1 of 'arg' in names[0..n), or 0. */
static int name_index(const char *arg, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(arg, names[i]) == 0)
            return i + 1;
    return 0;
}

int dd_redis_option(dd_redis_opts *o, int code, const char *arg)
{
    static const char *const schemes[] = {"keys", "bitmap", "module"}; /* DD_REDIS_KEYS.. */
    static const char *const filters[] = {"bloom", "cuckoo"};          /* DD_REDIS_BLOOM.. */
    uint64_t v;
    switch (code) {
    case DD_OPT_REDIS:
        /* A copy, so the password is masked on the command line (ps). */
        if (strlen(arg) >= sizeof o->url_copy) {
            cli_error("--redis: a URL of more than %zu bytes", sizeof o->url_copy - 1);
            return -1;
        }
        memcpy(o->url_copy, arg, strlen(arg) + 1);
        o->url = o->url_copy;
        dd_redis_hide_url_password((char *)arg);
        return 1;
    case DD_OPT_REDIS_SCHEME:
        if (!(o->scheme = name_index(arg, schemes, 3))) {
            cli_error("--redis-scheme '%s': choose keys, bitmap or module", arg);
            return -1;
        }
        return 1;
    case DD_OPT_REDIS_NAME:
        if (!*arg || strlen(arg) > 200 || strpbrk(arg, "{}")) {
            cli_error("--name '%s': 1 to 200 bytes without '{' or '}'", arg);
            return -1;
        }
        o->name = arg;
        return 1;
    case DD_OPT_REDIS_RESERVE:
        /* Shorter than a batch's pipeline can take on a loaded machine,
         * a reservation runs out between two occurrences of a key in one
         * batch, and the run writes the key twice. */
        if (!cli_parse_duration(arg, &v) || v < 1000000) {
            cli_error("--reserve '%s': a duration of at least 1s (a new key must stay "
                      "reserved while its batch is decided, written out and committed)", arg);
            return -1;
        }
        o->reserve_us = v;
        return 1;
    case DD_OPT_REDIS_TTL:
        if (!cli_parse_duration(arg, &v) || v < 1000) {
            cli_error("--ttl '%s': a duration of at least 1ms (500ms, 10s, 1h, 7d)", arg);
            return -1;
        }
        o->ttl_us = v;
        return 1;
    case DD_OPT_REDIS_FILTER:
        if (!(o->filter = name_index(arg, filters, 2))) {
            cli_error("--redis-filter '%s': choose bloom or cuckoo", arg);
            return -1;
        }
        return 1;
    case DD_OPT_REDIS_UNCERTAIN: o->uncertain_path = arg; return 1;
    case DD_OPT_REDIS_JOURNAL:
        if (!*arg) {
            cli_error("--journal '': give a directory");
            return -1;
        }
        o->journal_dir = arg;
        return 1;
    case DD_OPT_REDIS_NO_JOURNAL: o->no_journal = true; return 1;
    case DD_OPT_REDIS_FAILOVER_WAIT:
        if (!cli_parse_duration(arg, &v) || v < 1000 || v > 3600000000ull) {
            cli_error("--redis-failover-wait '%s': a duration from 1ms to 1h (500ms, 90s)", arg);
            return -1;
        }
        o->failover_wait_us = v;
        return 1;
    case DD_OPT_REDIS_WAIT:
        if (!arg_uint(NULL, "--wait-replicas", arg, 0, 64, &v))
            return -1;
        o->wait_replicas = (uint32_t)v;
        return 1;
    case DD_OPT_REDIS_WHOLE: o->whole_keys = true; return 1;
    case DD_OPT_REDIS_SHARDS:
    case DD_OPT_REDIS_SEGMENTS:
        if (!arg_uint(NULL, code == DD_OPT_REDIS_SHARDS ? "--shards" : "--segments", arg, 1,
                      65536, &v))
            return -1;
        *(code == DD_OPT_REDIS_SHARDS ? &o->shards : &o->segments) = (uint32_t)v;
        return 1;
    case DD_OPT_REDIS_RETRIES:
        if (!arg_uint("dedup", "--redis-retries", arg, 0, 100, &v))
            return -1;
        o->retries = (int)v;
        o->retries_given = true;
        return 1;
    case DD_OPT_REDIS_PIPELINE:
        if (!arg_uint(NULL, "--pipeline", arg, 1, 65536, &v))
            return -1;
        o->pipeline = (uint32_t)v;
        return 1;
    default: return dd_redis_conn_option(code, arg);
    }
}

bool dd_redis_used(const dd_redis_opts *o)
{
    return o->url || o->scheme || o->filter || o->name || o->uncertain_path || o->ttl_us || o->reserve_us ||
           o->wait_replicas || o->whole_keys || o->shards || o->segments || o->pipeline ||
           o->retries_given || o->journal_dir || o->no_journal || o->failover_wait_us;
}

int dd_redis_check_args(const dd_redis_opts *o, bool mode_given, bool windowed, bool state,
                        bool bounded, bool counts)
{
    if (!o->url) {
        cli_error("--redis-scheme, --redis-filter, --name, --ttl, --reserve, --uncertain, "
                  "--wait-replicas, --shards, --segments, --pipeline, --redis-retries, "
                  "--journal, --no-journal and --redis-failover-wait need --redis URL");
        return -1;
    }
    if (o->journal_dir && o->no_journal) {
        cli_error("--journal and --no-journal exclude each other");
        return -1;
    }
    const char *bad = mode_given ? "--mode (choose --redis-scheme keys|bitmap|module)"
                      : windowed ? "--window/--last (use --ttl for recent keys)"
                      : state    ? "-s/--state (the seen-set is in Redis)"
                      : bounded  ? "-m/--memory, --sort and --tmpdir"
                      : counts   ? "-c/--count or -u/--unique: they need each key's count over the "
                                   "whole input, and a seen-set shared through Redis keeps only "
                                   "whether a key was seen, by any process (the outputs that work "
                                   "with --redis: first occurrences, the default, and -D)"
                                 : NULL;
    if (bad) {
        cli_error("--redis cannot be combined with %s", bad);
        return -1;
    }
    int sch = o->scheme ? o->scheme : DD_REDIS_KEYS;
    if (o->whole_keys && sch != DD_REDIS_KEYS) {
        cli_error("--redis-whole-keys is for --redis-scheme keys");
        return -1;
    }
    if (o->reserve_us && sch != DD_REDIS_KEYS) {
        cli_error("--reserve is for --redis-scheme keys");
        return -1;
    }
    if (o->shards && sch != DD_REDIS_MODULE) {
        cli_error("--shards is for --redis-scheme module");
        return -1;
    }
    if (o->filter && sch != DD_REDIS_MODULE) {
        cli_error("--redis-filter is for --redis-scheme module");
        return -1;
    }
    if (o->filter == DD_REDIS_CUCKOO && o->ttl_us) {
        cli_error("--redis-filter cuckoo cannot expire keys: with --ttl the module scheme uses "
                  "the expiring DEDUP.* filters (bloom)");
        return -1;
    }
    if (o->segments && sch != DD_REDIS_BITMAP) {
        cli_error("--segments is for --redis-scheme bitmap");
        return -1;
    }
    return 0;
}

bool dd_is_redis_url(const char *s)
{
    return s && (strncmp(s, "redis://", 8) == 0 || strncmp(s, "redis-cluster://", 16) == 0 ||
                 strncmp(s, "rediss://", 9) == 0 || strncmp(s, "rediss-cluster://", 17) == 0 ||
                 strncmp(s, "redis-sentinel://", 17) == 0);
}

#ifdef DEDUP_HAVE_REDIS

/* The journals of the servers and name: those of dead runs recovered
 * (any scheme), then, for the bitmap and module schemes, this run's
 * created.  0, or the exit status with an error printed. */
static int journal_start(dd_redis_run *rr, const dd_redis_opts *o, const dedup_redis_url *u,
                         const char *name, bool journaled)
{
    if (o->no_journal)
        return 0;
    char key[4096];
    size_t kl = (size_t)snprintf(key, sizeof key, "%s", u->cluster ? "redis-cluster://" : "redis://");
    if (u->sentinel) /* the master, by its name: wherever the sentinels put it */
        kl = (size_t)snprintf(key, sizeof key, "redis-sentinel://%s", u->master);
    for (size_t i = 0; i < u->nseeds && kl < sizeof key && !u->sentinel; i++)
        kl += (size_t)snprintf(key + kl, sizeof key - kl, "%s%s:%d", i ? "," : "",
                               u->seeds[i].host, u->seeds[i].port);
    if (kl < sizeof key)
        snprintf(key + kl, sizeof key - kl, "/%d %s", u->db, name);
    char dir[4096];
    bool exists;
    if (!dd_journal_dir(o->journal_dir, key, name, journaled, dir, sizeof dir, &exists))
        return CLI_EXIT_FAIL;
    uint64_t kh = dd_journal_key_hash(key);
    if (exists && !dd_journal_recover(dir, kh, rr->unc.f, rr->unc.path))
        return CLI_EXIT_FAIL;
    if (journaled && !(rr->journal = dd_journal_open(dir, kh)))
        return CLI_EXIT_FAIL;
    return 0;
}

static const char *seen_error(const void *s) { return dedup_seen_error(s); }

int dd_redis_create(const dd_redis_opts *o, uint64_t items, double fpr, uint64_t seed,
                    bool seed_given, dd_redis_run **run, dedup_seen **out)
{
    *run = NULL;
    *out = NULL;
    dedup_redis_params ro;
    dedup_redis_params_init(&ro);
    ro.url = o->url;
    ro.scheme = o->scheme ? (dedup_redis_scheme)o->scheme : DEDUP_REDIS_KEYS;
    if (o->name)
        ro.name = o->name;
    ro.whole_keys = o->whole_keys;
    ro.ttl_ms = o->ttl_us / 1000;
    if (o->reserve_us)
        ro.reserve_ms = o->reserve_us / 1000;
    ro.wait_replicas = o->wait_replicas;
    if (o->pipeline)
        ro.pipeline = o->pipeline;
    if (o->retries_given)
        ro.retries = (uint32_t)o->retries;
    if (o->failover_wait_us)
        ro.failover_wait_ms = (uint32_t)(o->failover_wait_us / 1000);
    if (o->shards)
        ro.shards = o->shards;
    ro.segments = o->segments;
    if (o->filter)
        ro.filter = (dedup_redis_filter)o->filter;
    ro.items = items;
    if (fpr > 0)
        ro.fpr = fpr;
    ro.seed = seed;
    /* Every scheme: a new name takes a secret seed, kept in NAME:meta, and
     * every later run takes the stored one (--seed: that one). */
    ro.secret_seed = !seed_given;
    /* Keys: each NEW key is reserved until its record is written out. */
    ro.reserve = ro.scheme == DEDUP_REDIS_KEYS;
    if (ro.filter == DEDUP_REDIS_FILTER_CUCKOO && fpr > 0)
        cli_warn("-p is only recorded with --redis-filter cuckoo: the server's module sets a "
                 "cuckoo filter's rate (dedup_redis.so: its CF_ERROR_RATE argument)");
    if (ro.scheme == DEDUP_REDIS_KEYS && (items || fpr > 0))
        cli_warn("-n/-p have no effect with --redis-scheme keys (it never errs)");
    int crc = dd_redis_conn_apply(&ro);
    if (crc)
        return crc;
    char shown[1024];
    dd_redis_url_shown(o->url, shown, sizeof shown);
    dedup_redis_url u;
    char why[512];
    if (dedup_redis_url_parse(o->url, &u, why, sizeof why) != DEDUP_OK) {
        cli_error("--redis: %s", why);
        return CLI_EXIT_USAGE;
    }
    dd_redis_run *rr = calloc(1, sizeof *rr);
    if (!rr) {
        cli_error("out of memory");
        return CLI_EXIT_FAIL;
    }
    if (o->uncertain_path) {
        rr->unc.f = fopen(o->uncertain_path, "w");
        if (!rr->unc.f) {
            cli_error("--uncertain '%s': %s", o->uncertain_path, strerror(errno));
            free(rr);
            return CLI_EXIT_USAGE;
        }
        rr->unc.path = o->uncertain_path;
    }
    int jrc = journal_start(rr, o, &u, ro.name, ro.scheme != DEDUP_REDIS_KEYS);
    if (jrc) {
        if (rr->unc.f)
            fclose(rr->unc.f);
        free(rr);
        return jrc;
    }
    char err[768];
    dedup_status st = dedup_redis_create(&ro, NULL, &rr->r, err, sizeof err);
    if (st == DEDUP_OK) {
        st = dedup_redis_as_seen(rr->r, NULL, out);
        if (st != DEDUP_OK) {
            dedup_redis_free(rr->r);
            snprintf(err, sizeof err, "%s", dedup_strerror(st));
        }
    }
    if (st != DEDUP_OK) {
        cli_error("--redis %s: %s", shown, err);
        if (rr->unc.f)
            fclose(rr->unc.f);
        dd_journal_close(rr->journal, false);
        free(rr);
        return st == DEDUP_ERR_INVALID_ARG ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    /* Keys scheme: a NEW key stays reserved until its record is out. */
    rr->after = (dd_after){.unc = &rr->unc, .commits = ro.scheme == DEDUP_REDIS_KEYS,
                           .what = "--redis: committing", .where = "", .errfn = seen_error,
                           .errctx = *out};
    rr->name = ro.name;
    if (u.sentinel)
        memcpy(rr->master, u.master, sizeof rr->master);
    *run = rr;
    return 0;
}

const char *dd_redis_error(const dd_redis_run *run)
{
    return run ? dedup_redis_last_error(run->r) : "";
}

bool dd_redis_after_batch(dd_redis_run *run, dedup_seen *s, const dedup_batch *b,
                          const dedup_verdict *v, const unsigned char *const *rec,
                          const size_t *rlen, unsigned char term, struct dd_writer *w)
{
    return dd_after_batch(&run->after, s, b, v, rec, rlen, term, w);
}

bool dd_redis_batch_start(dd_redis_run *run, const unsigned char *const *rec, const size_t *rlen,
                          size_t n, unsigned char term)
{
    return !run || !run->journal || dd_journal_write(run->journal, rec, rlen, n, term);
}

/* The batch's records are out of the process (the writer and --uncertain
 * flushed): the journal lets go of them. */
static bool journal_done(dd_redis_run *run, struct dd_writer *w)
{
    if (!dd_journal_pending(run->journal))
        return true;
    if (!dd_writer_flush(w))
        return false;
    if (run->unc.f && fflush(run->unc.f) != 0) {
        cli_error("--uncertain '%s': %s", run->unc.path, strerror(errno));
        run->unc.failed = true;
        return false;
    }
    return dd_journal_clear(run->journal);
}

bool dd_redis_batch_done(dd_redis_run *run, struct dd_writer *w)
{
    return !run || journal_done(run, w);
}

bool dd_redis_uncertain(dd_redis_run *run, const void *rec, size_t len, int term)
{
    return !run || dd_uncertain_put(&run->unc, rec, len, term);
}

void dd_redis_failed_batch(dd_redis_run *run, const dedup_batch *b, size_t done,
                           const unsigned char *const *rec, const size_t *rlen, unsigned char term,
                           struct dd_writer *w)
{
    if (!run)
        return;
    if (done >= b->n) { /* every record decided and handed to the writer */
        (void)journal_done(run, w);
        return;
    }
    bool listed = run->unc.f != NULL;
    for (size_t i = done; i < b->n && listed; i++)
        listed = dd_redis_uncertain(run, rec[i], rlen[i], term);
    /* Listed in --uncertain: the journal's copy is not needed (if the
     * flushes fail it stays, for the next run). */
    if (listed)
        (void)journal_done(run, w);
    run->unwritten += b->n - done;
    dedup_redis_shape sh;
    dedup_redis_get_shape(run->r, &sh);
    const char *fate = sh.scheme == DEDUP_REDIS_KEYS
                           ? "the keys Redis recorded stay reserved, not recorded, until --reserve "
                             "runs out"
                           : "a later run drops the keys whose bits Redis set";
    if (run->unc.f)
        cli_error("--redis: %zu records of the batch in flight were not written out (their keys "
                  "may be in Redis under '%s': %s); they are listed in --uncertain '%s'",
                  b->n - done, run->name, fate, run->unc.path);
    else if (dd_journal_pending(run->journal))
        cli_error("--redis: %zu records of the batch in flight were not written out (their keys "
                  "may be in Redis under '%s': %s); the journal '%s' keeps the whole batch, and "
                  "the next run on this name recovers it",
                  b->n - done, run->name, fate, dd_journal_path(run->journal));
    else
        cli_error("--redis: %zu records of the batch in flight were not written out (their keys "
                  "may be in Redis under '%s': %s); give --uncertain FILE to keep them",
                  b->n - done, run->name, fate);
}

void dd_redis_print_stats(const dd_redis_run *run, FILE *f, bool json)
{
    if (!run)
        return;
    dedup_redis_stats s;
    dedup_redis_get_stats(run->r, &s);
    dedup_redis_shape sh;
    dedup_redis_get_shape(run->r, &sh);
    double per = s.round_trips ? (double)s.commands / (double)s.round_trips : 0;
    char at[DEDUP_REDIS_MAX_HOST + 8];
    dedup_redis_master_addr(run->r, at, sizeof at);
    if (json) {
        fprintf(f, ",\"redis\":{\"scheme\":\"%s\",\"cluster\":%s,\"masters\":%zu,"
                   "\"round_trips\":%llu,\"commands\":%llu,\"keys\":%llu,"
                   "\"keys_per_round_trip\":",
                dedup_redis_scheme_name(sh.scheme), sh.cluster ? "true" : "false", s.nodes,
                (unsigned long long)s.round_trips, (unsigned long long)s.commands,
                (unsigned long long)s.keys);
        json_double(f, s.round_trips ? (double)s.keys / (double)s.round_trips : 0);
        fprintf(f, ",\"retries\":%llu,\"moved\":%llu,\"ask\":%llu,\"uncertain\":%llu",
                (unsigned long long)s.retries, (unsigned long long)s.moved,
                (unsigned long long)s.ask, (unsigned long long)s.uncertain);
        if (run->master[0]) {
            fputs(",\"sentinel_master\":", f);
            cli_json_string(f, run->master);
            fputs(",\"master_at\":", f);
            cli_json_string(f, at);
        }
        fputc('}', f);
        return;
    }
    if (run->master[0])
        fprintf(f, "redis:          %s scheme, sentinel master '%s' at %s\n",
                dedup_redis_scheme_name(sh.scheme), run->master, at);
    else
        fprintf(f, "redis:          %s scheme, %s, %zu master(s)\n",
                dedup_redis_scheme_name(sh.scheme), sh.cluster ? "cluster" : "single server",
                s.nodes);
    if (sh.scheme == DEDUP_REDIS_BITMAP)
        fprintf(f, "redis filter:   %llu bits, k=%u, %u segment(s)\n", (unsigned long long)sh.bits,
                sh.k, sh.segments);
    if (sh.scheme == DEDUP_REDIS_MODULE)
        fprintf(f, "redis filter:   %s, %llu keys at %g, %u shard(s)\n",
                sh.filter == DEDUP_REDIS_FILTER_CUCKOO ? "cuckoo" : "bloom",
                (unsigned long long)sh.items, sh.fpr, sh.shards);
    fprintf(f, "round trips:    %llu (%.1f commands, %.1f keys each)\n",
            (unsigned long long)s.round_trips, per,
            s.round_trips ? (double)s.keys / (double)s.round_trips : 0);
    fprintf(f, "retries:        %llu (%llu MOVED, %llu ASK)\n", (unsigned long long)s.retries,
            (unsigned long long)s.moved, (unsigned long long)s.ask);
    fprintf(f, "uncertain:      %llu\n", (unsigned long long)s.uncertain);
}

bool dd_redis_close(dd_redis_run *run)
{
    if (!run)
        return true;
    bool ok = !run->unc.failed;
    if (run->unc.f && fclose(run->unc.f) != 0 && ok) {
        cli_error("--uncertain '%s': %s", run->unc.path, strerror(errno));
        ok = false;
    }
    bool keep = dd_journal_pending(run->journal);
    if (keep && !run->unwritten) /* else dd_redis_failed_batch() said so */
        cli_error("--redis: the records of the batch in flight may not all have been written "
                  "out; the journal '%s' keeps them, and the next run on this name recovers them",
                  dd_journal_path(run->journal));
    dd_journal_close(run->journal, keep);
    dd_after_free(&run->after);
    free(run);
    return ok;
}

#else /* !DEDUP_HAVE_REDIS */

int dd_redis_create(const dd_redis_opts *o, uint64_t items, double fpr, uint64_t seed,
                    bool seed_given, dd_redis_run **run, dedup_seen **out)
{
    (void)o; (void)items; (void)fpr; (void)seed; (void)seed_given;
    *run = NULL;
    *out = NULL;
    cli_error("--redis: this dedup was built without the Redis backend (install "
              "libhiredis-dev and rebuild)");
    return CLI_EXIT_USAGE;
}

bool dd_redis_uncertain(dd_redis_run *run, const void *rec, size_t len, int term)
{
    (void)run; (void)rec; (void)len; (void)term;
    return true;
}

bool dd_redis_after_batch(dd_redis_run *run, dedup_seen *s, const dedup_batch *b,
                          const dedup_verdict *v, const unsigned char *const *rec,
                          const size_t *rlen, unsigned char term, struct dd_writer *w)
{
    (void)run; (void)s; (void)b; (void)v; (void)rec; (void)rlen; (void)term; (void)w;
    return true;
}

const char *dd_redis_error(const dd_redis_run *run)
{
    (void)run;
    return "";
}

void dd_redis_failed_batch(dd_redis_run *run, const dedup_batch *b, size_t done,
                           const unsigned char *const *rec, const size_t *rlen, unsigned char term,
                           struct dd_writer *w)
{
    (void)run; (void)b; (void)done; (void)rec; (void)rlen; (void)term; (void)w;
}

bool dd_redis_batch_start(dd_redis_run *run, const unsigned char *const *rec, const size_t *rlen,
                          size_t n, unsigned char term)
{
    (void)run; (void)rec; (void)rlen; (void)n; (void)term;
    return true;
}

bool dd_redis_batch_done(dd_redis_run *run, struct dd_writer *w)
{
    (void)run; (void)w;
    return true;
}

void dd_redis_print_stats(const dd_redis_run *run, FILE *f, bool json)
{
    (void)run; (void)f; (void)json;
}

bool dd_redis_close(dd_redis_run *run)
{
    (void)run;
    return true;
}

#endif
