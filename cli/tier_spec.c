/* tier_spec.c - --store and --tier: the stack of seen-sets (see tier_spec.h). */
#define _POSIX_C_SOURCE 200809L
#include "tier_spec.h"

#include <errno.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dedup/tiers.h"
#include "dedup/window.h"
#include "seen_spec.h"
#include "io.h"
#ifdef DEDUP_HAVE_ROCKSDB
#include "dedup/store.h"
#endif
#ifdef DEDUP_HAVE_REDIS
#include "dedup/redis.h"
#include "redis_cli.h"
#endif

/* A tier is named by the kind of its seen-set: a filter kind, EXACT or
 * FINGERPRINT in memory, STORE (rocksdb:DIR), REDIS (redis://...), or 0 for
 * file:PATH, a filter of whatever kind its file holds. */
typedef struct tier_def {
    dedup_seen_kind kind;
    uint64_t items, memory, expire_s;
    uint64_t cache; /* rocksdb: block cache bytes, 0 = the store's default */
    double fpr;
    const char *path; /* into the argument, or the --store argument */
    int sync;         /* -1 = the run's --sync */
    int keys;         /* dedup_store_keys */
    /* redis: (path is the URL) */
    uint64_t ttl_ms, reserve_ms;
    const char *name;
    int retries;      /* -1 = the backend's default */
} tier_def;

struct dd_tiers_cli {
    tier_def def[DEDUP_TIERS_MAX];
    size_t n;
    const char *store_dir;
    char copies[DEDUP_TIERS_MAX][4096]; /* the --tier arguments, which paths point into */
    size_t ncopies;
    int sync; /* -1 = not given */
    bool trust, rebuild, shared;
    /* the run */
    const dedup_tiers *view;
    size_t first;                       /* tiers above def[0]: 1 with a window */
    dedup_seen *seen[DEDUP_TIERS_MAX];  /* by tier index, owned by the stack */
    dedup_seen *pre_seen[DEDUP_TIERS_MAX]; /* stores opened by dd_tiers_open_stores, by def */
    bool commits;                       /* a redis tier: reserve, then commit */
    bool stores;                        /* a rocksdb tier: its keys are committed per batch */
    const char *identity;               /* the run's key options (dd_tiers_set_identity) */
    bool force_keys;
    bool sync_out;                      /* a rocksdb tier with sync always: fsync the output */
    bool any_redis;                     /* a redis tier: its keys may be UNCERTAIN */
    dd_after after;                     /* uncertain records, commits */
    char name[DEDUP_TIERS_MAX][96];
    const void *window;
    dd_uncertain unc;                   /* --uncertain FILE: a Redis tier's lost replies */
};

static bool is_filter_kind(dedup_seen_kind k)
{
    return k == DEDUP_SEEN_BLOOM || k == DEDUP_SEEN_BLOCKED || k == DEDUP_SEEN_CUCKOO ||
           k == DEDUP_SEEN_SCALABLE;
}

static bool is_file(const tier_def *d) { return d->kind == 0; }
static bool is_exact(const tier_def *d)
{
    return d->kind == DEDUP_SEEN_EXACT || d->kind == DEDUP_SEEN_FINGERPRINT;
}
/* A filter: in memory, or file:PATH. */
static bool is_filter(const tier_def *d) { return is_file(d) || is_filter_kind(d->kind); }

static bool parse_sync(const char *v, int *out)
{
    static const char *const names[] = {"batch", "always", "none"};
    for (int i = 0; i < 3; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i; /* DEDUP_STORE_SYNC_BATCH, ALWAYS, NONE */
            return true;
        }
    return false;
}

/* "n=100M,p=1%,m=1G,file=PATH" after a filter's name. */
static bool parse_filter_opts(tier_def *d, char *opts, const char *spec)
{
    for (char *save = NULL, *kv = strtok_r(opts, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            cli_error("--tier %s: '%s' is not KEY=VALUE (n=, p=, m=, file=)", spec, kv);
            return false;
        }
        *eq = '\0';
        const char *v = eq + 1;
        bool ok = true;
        if (strcmp(kv, "n") == 0)
            ok = cli_parse_count(v, &d->items);
        else if (strcmp(kv, "p") == 0)
            ok = cli_parse_prob(v, &d->fpr);
        else if (strcmp(kv, "m") == 0)
            ok = cli_parse_size(v, &d->memory);
        else if (strcmp(kv, "file") == 0)
            d->path = v;
        else {
            cli_error("--tier %s: unknown setting '%s' (n=, p=, m=, file=)", spec, kv);
            return false;
        }
        if (!ok || !*v) {
            cli_error("--tier %s: bad value '%s' for %s=", spec, v, kv);
            return false;
        }
    }
    return true;
}

/* "DIR,sync=always,keys=whole,expire=7d" after "rocksdb:". */
static bool parse_store_opts(tier_def *d, char *rest, const char *spec)
{
    char *save = NULL;
    char *dir = strtok_r(rest, ",", &save);
    if (!dir || !*dir) {
        cli_error("--tier %s: rocksdb: needs a directory (rocksdb:DIR)", spec);
        return false;
    }
    d->path = dir;
    for (char *kv = strtok_r(NULL, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        const char *v = eq ? eq + 1 : "";
        if (eq)
            *eq = '\0';
        uint64_t us = 0;
        if (strcmp(kv, "sync") == 0 && parse_sync(v, &d->sync))
            continue;
        if (strcmp(kv, "keys") == 0 && (strcmp(v, "digest") == 0 || strcmp(v, "whole") == 0)) {
            d->keys = strcmp(v, "whole") == 0 ? 2 : 1;
            continue;
        }
        if (strcmp(kv, "expire") == 0 && cli_parse_duration(v, &us) && us >= 1000000) {
            d->expire_s = us / 1000000;
            continue;
        }
        if (strcmp(kv, "cache") == 0 && cli_parse_size(v, &d->cache) && d->cache >= (1u << 20))
            continue;
        cli_error("--tier %s: bad setting '%s%s%s' (sync=always|batch|none, keys=digest|whole, "
                  "expire=DURATION of at least 1s, cache=SIZE of at least 1M)", spec, kv,
                  eq ? "=" : "", v);
        return false;
    }
    return true;
}

/* "redis://host:port[/db][,ttl=D,reserve=D,name=N,retries=N]": the URL
 * ends at the first comma; a sentinel URL's sentinels are a comma list
 * ("redis-sentinel://h:p,h:p/MASTER[/db]"), so its URL ends at the first
 * comma past the '/' that starts the master's name. */
static bool parse_redis_opts(tier_def *d, char *spec_copy, const char *spec)
{
    char *save = NULL, none[1] = "";
    char *opts = NULL;
    if (strncmp(spec_copy, "redis-sentinel://", 17) == 0) {
        char *slash = strchr(spec_copy + 17, '/');
        char *comma = slash ? strchr(slash, ',') : NULL;
        opts = none;
        if (comma) {
            *comma = '\0';
            opts = comma + 1;
        }
        d->path = spec_copy;
    } else {
        d->path = strtok_r(spec_copy, ",", &save);
    }
    d->retries = -1;
    for (char *kv = strtok_r(opts, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        const char *v = eq ? eq + 1 : "";
        if (eq)
            *eq = '\0';
        uint64_t us = 0, n = 0;
        if (strcmp(kv, "ttl") == 0 && cli_parse_duration(v, &us) && us >= 1000) {
            d->ttl_ms = us / 1000;
            continue;
        }
        /* at least 1s, as --reserve: a new key stays reserved while its
         * batch is decided, written out and committed */
        if (strcmp(kv, "reserve") == 0 && cli_parse_duration(v, &us) && us >= 1000000) {
            d->reserve_ms = us / 1000;
            continue;
        }
        if (strcmp(kv, "name") == 0 && *v && strlen(v) <= 200) {
            d->name = v;
            continue;
        }
        if (strcmp(kv, "retries") == 0 && cli_parse_count(v, &n) && n <= 100) {
            d->retries = (int)n;
            continue;
        }
        cli_error("--tier %s: bad setting '%s%s%s' (ttl=DURATION, reserve=DURATION of at least 1s, name=PREFIX, "
                  "retries=N of at most 100)", spec, kv, eq ? "=" : "", v);
        return false;
    }
    if (d->reserve_ms && (!d->ttl_ms || d->reserve_ms > d->ttl_ms)) {
        cli_error("--tier %s: reserve= applies with ttl= and must not exceed it", spec);
        return false;
    }
    return true;
}

static bool add_def(dd_tiers_cli *t, const char *spec, char *s)
{
    if (t->n + 2 > DEDUP_TIERS_MAX) { /* room for a window on top */
        cli_error("--tier %s: at most %u tiers", spec, DEDUP_TIERS_MAX - 1);
        return false;
    }
    tier_def *d = &t->def[t->n];
    memset(d, 0, sizeof *d);
    d->sync = -1;
    char *colon = strchr(s, ':');
    char *rest = NULL;
    if (strncmp(s, "redis://", 8) == 0 || strncmp(s, "rediss://", 9) == 0 ||
        strncmp(s, "redis-sentinel://", 17) == 0) {
        d->kind = DEDUP_SEEN_REDIS;
        if (!parse_redis_opts(d, s, spec))
            return false;
#ifndef DEDUP_HAVE_REDIS
        cli_error("--tier %s: this dedup has no Redis tier (built without libhiredis-dev)", spec);
        return false;
#endif
        t->n++;
        return true;
    }
    if (colon) {
        *colon = '\0';
        rest = colon + 1;
    }
    if (strcmp(s, "rocksdb") == 0) {
        d->kind = DEDUP_SEEN_STORE;
        if (!rest || !parse_store_opts(d, rest, spec))
            return rest ? false : (cli_error("--tier %s: give rocksdb:DIR", spec), false);
    } else if (strcmp(s, "file") == 0) {
        d->kind = 0;
        if (!rest || !*rest) {
            cli_error("--tier %s: give file:PATH", spec);
            return false;
        }
        d->path = rest;
    } else if (strcmp(s, "exact") == 0 || strcmp(s, "fingerprint") == 0) {
        d->kind = dedup_seen_kind_from_name(s);
        if (rest && !parse_filter_opts(d, rest, spec))
            return false;
    } else if (is_filter_kind(dedup_seen_kind_from_name(s))) {
        d->kind = dedup_seen_kind_from_name(s);
        if (rest && !parse_filter_opts(d, rest, spec))
            return false;
    } else {
        cli_error("--tier %s: unknown tier '%s' (choose bloom, blocked, cuckoo, scalable, exact, "
                  "fingerprint, file:PATH, redis://HOST:PORT, redis-sentinel://HOSTS/MASTER or "
                  "rocksdb:DIR)", spec, s);
        return false;
    }
#ifndef DEDUP_HAVE_ROCKSDB
    if (d->kind == DEDUP_SEEN_STORE) {
        cli_error("--tier %s: this dedup was built without RocksDB (librocksdb-dev)", spec);
        return false;
    }
#endif
    t->n++;
    return true;
}

bool dd_tiers_opt(dd_tiers_cli **tp, int which, const char *arg)
{
    /* One run per process: the options live in static storage, so that no
     * early return of the command has anything to free. */
    static dd_tiers_cli the;
    if (!*tp) {
        memset(&the, 0, sizeof the);
        the.sync = -1;
        *tp = &the;
    }
    dd_tiers_cli *t = *tp;
    switch (which) {
    case DD_TOPT_TIER: {
        if (t->ncopies == DEDUP_TIERS_MAX) {
            cli_error("--tier %s: at most %u tiers", arg, DEDUP_TIERS_MAX - 1);
            return false;
        }
        if (strlen(arg) >= sizeof t->copies[0]) {
            cli_error("--tier: the spec is too long");
            return false;
        }
        char *copy = t->copies[t->ncopies++];
        strcpy(copy, arg);
        /* A Redis URL's password: masked on the command line (ps) and in
         * the messages that quote the spec; the copy keeps it. */
        if (dd_is_redis_url(arg))
            dd_redis_hide_url_password((char *)arg);
        return add_def(t, arg, copy);
    }
    case DD_TOPT_STORE:
#ifndef DEDUP_HAVE_ROCKSDB
        cli_error("--store %s: this dedup was built without RocksDB (librocksdb-dev)", arg);
        return false;
#else
        if (t->store_dir) {
            cli_error("give --store once (more stores: --tier rocksdb:DIR)");
            return false;
        }
        t->store_dir = arg;
        return true;
#endif
    case DD_TOPT_SYNC:
        if (!parse_sync(arg, &t->sync)) {
            cli_error("--sync must be always, batch or none (got '%s')", arg);
            return false;
        }
        return true;
    case DD_TOPT_TRUST:
        t->trust = true;
        return true;
    case DD_TOPT_REBUILD:
        t->rebuild = true;
        return true;
    case DD_TOPT_SHARED:
        t->shared = true;
        return true;
    }
    return false;
}

bool dd_tiers_check(dd_tiers_cli *t, dedup_seen_kind mode_kind, uint64_t items, double fpr,
                    uint64_t memory, bool windowed, bool counts, bool state)
{
    if (t->store_dir) {
        if (mode_kind != DEDUP_SEEN_EXACT && !is_filter_kind(mode_kind)) {
            cli_error("--store keeps every key exactly: use it alone (--mode exact) or behind a "
                      "filter (--mode bloom|blocked|cuckoo|scalable)");
            return false;
        }
        if (t->n + 2 + is_filter_kind(mode_kind) > DEDUP_TIERS_MAX) {
            cli_error("too many tiers with --store");
            return false;
        }
        if (is_filter_kind(mode_kind)) { /* --mode's filter in front of the store */
            tier_def *d = &t->def[t->n++];
            memset(d, 0, sizeof *d);
            d->kind = mode_kind;
            d->items = items;
            d->fpr = fpr;
            d->memory = memory;
            d->sync = -1;
        }
        tier_def *d = &t->def[t->n++];
        memset(d, 0, sizeof *d);
        d->kind = DEDUP_SEEN_STORE;
        d->path = t->store_dir;
        d->sync = -1;
    } else if (t->n && mode_kind != DEDUP_SEEN_EXACT) {
        cli_error("--mode names the method of a single seen-set: with --tier, give each filter "
                  "as a tier (e.g. --tier blocked:n=10M,p=1%%)");
        return false;
    }
    if (!t->n) {
        cli_error("--sync, --trust-filter, --rebuild-filter and --shared need --store or --tier");
        return false;
    }
    if (counts || state) {
        cli_error("--store/--tier keep the seen-set themselves: they cannot be combined with %s",
                  state ? "--state" : "-c/--count or -u/--unique");
        return false;
    }
    bool filter_above_store = false, any_filter = false, any_store = false;
    for (size_t i = 0; i < t->n; i++) {
        tier_def *d = &t->def[i];
        if (is_filter(d))
            any_filter = true;
        if (d->kind == DEDUP_SEEN_STORE) {
            filter_above_store |= any_filter;
            any_store = true;
            if (d->sync < 0)
                d->sync = t->sync < 0 ? 0 : t->sync;
            if (windowed && d->keys == 2) {
                cli_error("rocksdb:%s,keys=whole needs the keys, which a window run does not pass "
                          "on: use digest keys with --window/--last", d->path);
                return false;
            }
        }
        if (!d->items && !d->memory &&
            (d->kind == DEDUP_SEEN_BLOOM || d->kind == DEDUP_SEEN_BLOCKED)) {
            cli_error("the %s tier needs its size: n=N (and p=P) or m=SIZE, e.g. %s:n=10M,p=1%% "
                      "(with --store: -n/-p/-m)", dedup_seen_kind_name(d->kind),
                      dedup_seen_kind_name(d->kind));
            return false;
        }
        if (is_exact(d) && windowed) {
            cli_error("an exact tier under --window/--last: the window is exact already; put a "
                      "filter or a store behind it");
            return false;
        }
    }
    if (t->sync >= 0 && !any_store) {
        cli_error("--sync applies to a store: give --store DIR or --tier rocksdb:DIR");
        return false;
    }
    if (t->trust && !any_filter) {
        cli_error("--trust-filter needs a filter tier");
        return false;
    }
    if (t->rebuild && !filter_above_store) {
        cli_error("--rebuild-filter fills a filter from the store below it: give a filter tier "
                  "above a rocksdb: tier");
        return false;
    }
    if (t->unc.path) {
        bool any_redis = false;
        for (size_t i = 0; i < t->n; i++)
            any_redis |= t->def[i].kind == DEDUP_SEEN_REDIS;
        if (!any_redis) {
            cli_error("--uncertain keeps the records whose Redis reply was lost: give a "
                      "redis:// tier (or --redis)");
            return false;
        }
        t->unc.f = fopen(t->unc.path, "w"); /* before any output */
        if (!t->unc.f) {
            cli_error("--uncertain '%s': %s", t->unc.path, strerror(errno));
            return false;
        }
    }
    return true;
}

void dd_tiers_set_uncertain(dd_tiers_cli *t, const char *path)
{
    t->unc.path = path;
}

const void *dd_tiers_window(const dd_tiers_cli *t)
{
    return t ? t->window : NULL;
}

/* What tier k's seen-set is beyond the local kinds (zero for none). */
static dedup_seen_stats tier_stats(const dd_tiers_cli *t, size_t k)
{
    dedup_seen_stats ss;
    dedup_seen_get_stats(t->seen[k], &ss);
    return ss;
}

bool dd_tiers_outside(const dd_tiers_cli *t)
{
    for (size_t k = 0; t && k < DEDUP_TIERS_MAX; k++) {
        dedup_seen_stats ss = tier_stats(t, k);
        if (ss.remote || ss.persistent)
            return true;
    }
    return false;
}

#ifdef DEDUP_HAVE_ROCKSDB
static dedup_status open_store(dd_tiers_cli *t, const tier_def *d, uint64_t seed, dedup_seen **out,
                               char *err, size_t cap)
{
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = d->path;
    p.seed = seed;
    p.sync = (dedup_store_sync)d->sync;
    p.keys = (dedup_store_keys)d->keys;
    p.expire = d->expire_s;
    p.identity = t->identity;
    p.identity_force = t->force_keys;
    p.caller_commits = true; /* committed once the records are written out */
    if (d->cache)
        p.block_cache = d->cache;
    /* A filter above (one process owns its keys) screens the absent keys. */
    for (const tier_def *f = t->def; f < d && !t->shared; f++)
        p.absent_screened |= is_filter(f);
    dedup_store *s = NULL;
    dedup_status st = dedup_store_create(&p, NULL, &s, err, cap);
    if (st == DEDUP_ERR_INCOMPATIBLE && strstr(err, "seed"))
        snprintf(err + strlen(err), cap - strlen(err), " (give its --seed)");
    else if (st == DEDUP_ERR_INCOMPATIBLE && strstr(err, "keys were made with"))
        snprintf(err + strlen(err), cap - strlen(err),
                 ": give the same key options, or --force-keys to use it anyway");
    if (st)
        return st;
    st = dedup_store_as_seen(s, NULL, out);
    if (st) {
        dedup_store_free(s);
        snprintf(err, cap, "%s: %s", d->path, dedup_strerror(st));
        return st;
    }
    dedup_store_info in;
    if (dedup_store_get_info(s, &in) == DEDUP_OK && in.identity_adopted)
        cli_info(1, "%s: a store made before key options were recorded: it takes this run's "
                 "[%s] as its own", d->path, in.identity);
    if (in.recovered)
        cli_info(1, "%s: %llu key(s) recovered from the pending log of a run that did not finish",
                 d->path, (unsigned long long)in.recovered);
    if (in.torn_bytes)
        cli_info(1, "%s: the pending log's last record was cut by a crash (%llu bytes): ignored; "
                 "its records, if they were written out, are written again",
                 d->path, (unsigned long long)in.torn_bytes);
    t->stores = true;
    t->sync_out |= p.sync == DEDUP_STORE_SYNC_ALWAYS;
    return DEDUP_OK;
}
#endif

#ifdef DEDUP_HAVE_REDIS
/* The keys scheme (exact), its TTL the "recent keys"; a NEW key is reserved
 * until its record is written out (dd_tiers_after_batch commits it).
 * 'seed' 0: the name's own seed (a new name takes a random one, kept in
 * NAME:meta); else that one, which an existing name must hold. */
static dedup_status open_redis(dd_tiers_cli *t, const tier_def *d, uint64_t seed,
                               dedup_seen **out, char *err, size_t cap)
{
    dedup_redis_params o;
    dedup_redis_params_init(&o);
    o.url = d->path;
    o.scheme = DEDUP_REDIS_KEYS;
    o.secret_seed = seed == 0;
    if (seed)
        o.seed = seed;
    o.ttl_ms = d->ttl_ms;
    o.reserve = true; /* with a TTL or without */
    if (d->reserve_ms)
        o.reserve_ms = d->reserve_ms;
    else if (d->ttl_ms && o.reserve_ms > d->ttl_ms)
        o.reserve_ms = d->ttl_ms;
    if (d->name)
        o.name = d->name;
    if (d->retries >= 0)
        o.retries = (uint32_t)d->retries;
    dedup_redis *r = NULL;
    char why[512], shown[512];
    dd_redis_url_shown(d->path, shown, sizeof shown);
    if (dd_redis_conn_apply(&o)) { /* its error printed */
        snprintf(err, cap, "--tier %s: no credentials", shown);
        return DEDUP_ERR_INVALID_ARG;
    }
    dedup_status st = dedup_redis_create(&o, NULL, &r, why, sizeof why);
    if (st) {
        snprintf(err, cap, "--tier %s: %s", shown, why);
        return st;
    }
    st = dedup_redis_as_seen(r, NULL, out);
    if (st) {
        dedup_redis_free(r);
        snprintf(err, cap, "--tier %s: %s", d->path, dedup_strerror(st));
        return st;
    }
    t->any_redis = true;
    t->commits = true;
    return DEDUP_OK;
}
#endif

/* A filter file a tier reads (file:PATH, or FILTER,file=PATH when PATH
 * exists): loaded before the rest, since its seed is the run's. */
static dedup_status load_file_tier(const tier_def *d, dedup_seen **out, char *err, size_t cap)
{
    dedup_status st = dedup_seen_load_file(d->path, NULL, out);
    if (st) {
        if (is_file(d))
            snprintf(err, cap, "--tier file:%s: %s", d->path,
                     st == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(st));
        else
            snprintf(err, cap, "%s: %s", d->path,
                     st == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(st));
        return st;
    }
    dedup_seen_info in;
    dedup_seen_get_info(*out, &in);
    if (is_file(d) && (!in.probabilistic || in.kind == DEDUP_SEEN_WINDOW)) {
        snprintf(err, cap, "--tier file:%s holds a %s, not a filter", d->path,
                 dedup_seen_kind_name(in.kind));
        st = DEDUP_ERR_WRONG_TYPE;
    } else if (!is_file(d) && in.kind != d->kind) {
        snprintf(err, cap, "--tier %s,file=%s holds a %s", dedup_seen_kind_name(d->kind), d->path,
                 dedup_seen_kind_name(in.kind));
        st = DEDUP_ERR_WRONG_TYPE;
    }
    if (st) {
        dedup_seen_free(*out);
        *out = NULL;
    }
    return st;
}

/* Whether def 'd' is a set kept between runs, with a seed of its own: a
 * store, a Redis name, a filter file that exists. */
static bool persistent(const tier_def *d)
{
    return d->kind == DEDUP_SEEN_STORE || d->kind == DEDUP_SEEN_REDIS || is_file(d) ||
           (d->path && access(d->path, F_OK) == 0);
}

/* Opens one persistent def with 'seed' when 'fixed' (else its own; a new
 * one takes a random seed) into t->pre_seen[i]. */
static dedup_status open_persistent(dd_tiers_cli *t, size_t i, uint64_t seed, bool fixed,
                                    char *err, size_t cap)
{
    const tier_def *d = &t->def[i];
    switch (d->kind) {
    case DEDUP_SEEN_STORE:
#ifdef DEDUP_HAVE_ROCKSDB
        return open_store(t, d, seed, &t->pre_seen[i], err, cap);
#else
        return DEDUP_ERR_UNSUPPORTED;
#endif
    case DEDUP_SEEN_REDIS:
#ifdef DEDUP_HAVE_REDIS
        return open_redis(t, d, seed, &t->pre_seen[i], err, cap);
#else
        return DEDUP_ERR_UNSUPPORTED;
#endif
    default: {
        dedup_status st = load_file_tier(d, &t->pre_seen[i], err, cap);
        if (!st && fixed && dedup_seen_seed(t->pre_seen[i]) != seed) {
            snprintf(err, cap, "%s: was made with seed 0x%016llx, not 0x%016llx (the --seed given, "
                     "or the run's other persistent tiers'): one run decides with one seed",
                     d->path, (unsigned long long)dedup_seen_seed(t->pre_seen[i]),
                     (unsigned long long)seed);
            dedup_seen_free(t->pre_seen[i]);
            t->pre_seen[i] = NULL;
            st = DEDUP_ERR_INCOMPATIBLE;
        }
        return st;
    }
    }
}

/* The order in which dd_tiers_open_stores() opens the persistent tiers:
 * stores, filter files, filters, exact sets, Redis names. */
static int open_rank(const tier_def *d)
{
    return d->kind == DEDUP_SEEN_STORE ? 0 : is_file(d) ? 1 : is_filter(d) ? 2 : is_exact(d) ? 3 : 4;
}

static void tier_name(const tier_def *d, char *name, size_t cap)
{
    if (is_file(d))
        snprintf(name, cap, "file:%s", d->path);
    else if (d->kind == DEDUP_SEEN_REDIS) { /* its password shown as *** */
        char shown[512];
        dd_redis_url_shown(d->path, shown, sizeof shown);
        snprintf(name, cap, "%.90s", shown);
    }
    else if (d->kind == DEDUP_SEEN_STORE)
        snprintf(name, cap, "rocksdb:%s", d->path);
    else
        snprintf(name, cap, "%s", dedup_seen_kind_name(d->kind));
}

/* Tier k of def d: the one dd_tiers_open_stores() opened, or a new
 * in-memory set with the run's seed. */
static dedup_status make_tier(dd_tiers_cli *t, const tier_def *d, uint64_t seed, size_t k,
                              char *err, size_t cap)
{
    size_t i = (size_t)(d - t->def);
    dedup_status st = DEDUP_OK;
    tier_name(d, t->name[k], sizeof t->name[k]);
    if (t->pre_seen[i]) {
        t->seen[k] = t->pre_seen[i];
        t->pre_seen[i] = NULL;
        return DEDUP_OK;
    }
    if (persistent(d)) { /* a file that appeared since, or a store not opened */
        st = open_persistent(t, i, seed, true, err, cap);
        return st ? st : make_tier(t, d, seed, k, err, cap);
    }
    dd_seen_opts so;
    memset(&so, 0, sizeof so);
    so.kind = d->kind;
    so.mode = dedup_seen_kind_name(d->kind);
    so.items = d->items;
    so.fpr = d->fpr;
    so.memory = d->memory;
    so.seed = seed;
    st = dd_seen_create(&so, &t->seen[k], err, cap);
    return st;
}

void dd_tiers_set_identity(dd_tiers_cli *t, const char *desc, bool force)
{
    if (!t)
        return;
    t->identity = desc;
    t->force_keys = force;
}

dedup_status dd_tiers_open_stores(dd_tiers_cli *t, uint64_t *seed, bool seed_given, char *err,
                                  size_t cap)
{
    dedup_status st = DEDUP_OK;
    /* Each persistent set keeps its own seed (a new one takes a random seed
     * from the OS); the first one opened fixes the run's, and every later
     * one must hold it (a new one is made with it).  --seed fixes it first.
     * Stores first, then filter files, then Redis names: those that cannot
     * take another seed decide before a name that can still be made. */
    uint64_t want = seed_given ? *seed : 0;
    bool fixed = seed_given;
    const char *first = NULL;
    for (int o = 0; o < 5 && !st; o++) {
        for (size_t i = 0; i < t->n && !st; i++) {
            const tier_def *d = &t->def[i];
            if (open_rank(d) != o || t->pre_seen[i] || !persistent(d))
                continue;
            st = open_persistent(t, i, fixed ? want : 0, fixed, err, cap);
            if (st)
                break;
            uint64_t sd = dedup_seen_seed(t->pre_seen[i]);
            if (fixed && sd != want) { /* a store or Redis name that answered otherwise */
                snprintf(err, cap, "%s and %s were made with different seeds (0x%016llx, 0x%016llx): "
                         "one run decides with one seed", first ? first : "--seed", d->path,
                         (unsigned long long)want, (unsigned long long)sd);
                st = DEDUP_ERR_INCOMPATIBLE;
            }
            if (!first) { /* the sets after it (a new one too) take its seed */
                first = d->path;
                want = sd;
                fixed = true;
            }
        }
    }
    if (st) {
        for (size_t i = 0; i < t->n; i++) {
            dedup_seen_free(t->pre_seen[i]);
            t->pre_seen[i] = NULL;
        }
        return st;
    }
    if (fixed) {
        *seed = want;
    } else if (!dd_fresh_seed(seed)) { /* new filter files and one-run tiers: a secret seed */
        snprintf(err, cap, "no random seed from the system (%s): give --seed", strerror(errno));
        return DEDUP_ERR_IO;
    }
    return DEDUP_OK;
}

/* A store tier's record callback (dedup/tiers.h): a blind write. */
static dedup_status record_add(void *ctx, const dedup_batch *b)
{
    return dedup_seen_add(ctx, b, NULL);
}

dedup_status dd_tiers_create(dd_tiers_cli *t, dedup_seen *top, uint64_t seed, dedup_seen **out,
                             char *err, size_t cap)
{
    dedup_tier tiers[DEDUP_TIERS_MAX];
    memset(tiers, 0, sizeof tiers);
    t->first = top ? 1 : 0;
    if (top) {
        t->seen[0] = top;
        t->window = dedup_window_of_seen(top);
        snprintf(t->name[0], sizeof t->name[0], "window");
    }
    size_t n = t->first + t->n;
    dedup_status st = DEDUP_OK;
    for (size_t i = 0; i < t->n && !st; i++)
        st = make_tier(t, &t->def[i], seed, t->first + i, err, cap);
    /* Whether each filter knows every key of the stores below it. */
    for (size_t k = t->first; k < n && !st; k++) {
        const tier_def *d = &t->def[k - t->first];
        tiers[k].seen = t->seen[k];
        tiers[k].name = t->name[k];
        if (d->kind == DEDUP_SEEN_REDIS) { /* decide() records; with a TTL it holds the recent keys */
            tiers[k].forgets = d->ttl_ms != 0;
            continue;
        }
        if (d->kind == DEDUP_SEEN_STORE) {
            tiers[k].record = record_add;
            tiers[k].record_ctx = t->seen[k];
            continue;
        }
        if (!is_filter(d))
            continue;
        bool covers = true;
        uint64_t held = 0;
        for (size_t u = k + 1; u < n && !st; u++) {
            dedup_seen_stats ss = tier_stats(t, u);
            if (!ss.persistent)
                continue;
            uint64_t keys = ss.stored_keys;
            if (t->rebuild && keys) {
                uint64_t c = 0;
                st = dedup_seen_fill(t->seen[u], t->seen[k], &c);
                if (st)
                    snprintf(err, cap, "--rebuild-filter: %s from %s: %s", t->name[k],
                             t->name[u], st == DEDUP_ERR_IO ? dedup_seen_error(t->seen[u])
                                                            : dedup_strerror(st));
                cli_info(2, "%s: rebuilt from %s (%llu keys)", t->name[k], t->name[u],
                         (unsigned long long)c);
            } else if (keys) {
                covers = false;
                held += keys;
            }
        }
        tiers[k].covers_below = covers;
        if (!covers && !st)
            cli_warn("the %s filter does not know the %llu keys already in the store below it: "
                     "each of its 'new' answers is checked in the store (no reads saved); "
                     "--rebuild-filter fills it from the store at start",
                     t->name[k], (unsigned long long)held);
    }
    if (top)
        tiers[0].seen = top, tiers[0].name = t->name[0];
    if (!st) {
        dedup_tiers_spec sp = {.tiers = tiers, .n = n, .trust_filter = t->trust, .shared = t->shared};
        st = dedup_tiers_create(&sp, NULL, out, &t->view);
        if (st == DEDUP_ERR_INCOMPATIBLE)
            snprintf(err, cap, "the tiers were made with different seeds (give the same --seed)");
        else if (st)
            snprintf(err, cap, "cannot build the tiers: %s", dedup_strerror(st));
    }
    if (st) {
        for (size_t i = 0; i < t->n; i++) {
            dedup_seen_free(t->pre_seen[i]);
            t->pre_seen[i] = NULL;
        }
        for (size_t k = 0; k < n; k++) {
            dedup_seen_free(t->seen[k]);
            t->seen[k] = NULL;
        }
        t->window = NULL;
    }
    return st;
}

bool dd_tiers_keep(const dd_tiers_cli *t)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (persistent(&t->def[i]) || t->def[i].path)
            return true;
    return false;
}

bool dd_tiers_finish(dd_tiers_cli *t, bool ok)
{
    bool good = true;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = t->first + i;
        const tier_def *d = &t->def[i];
        if (!t->seen[k])
            continue;
        if (ok && d->path && (is_filter(d) || is_exact(d))) {
            dedup_status st = dedup_seen_save_file(t->seen[k], d->path);
            if (st) {
                cli_error("%s: cannot save the %s tier: %s", d->path, t->name[k],
                          st == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(st));
                good = false;
            }
        }
        /* A complete run commits what is left (records written by paths
         * without a per-batch commit); after a failure, keys whose records
         * were not confirmed written are forgotten by the flush. */
        if (tier_stats(t, k).persistent) {
            dedup_batch none = {.n = 0};
            if (ok && dedup_seen_commit(t->seen[k], &none) != DEDUP_OK) {
                cli_error("%s", dedup_seen_error(t->seen[k]));
                good = false;
            }
            if (dedup_seen_flush(t->seen[k]) != DEDUP_OK) {
                cli_error("%s", dedup_seen_error(t->seen[k]));
                good = false;
            }
        }
    }
    /* Nothing lost without a word: the records a lost reply made uncertain. */
    if (t->unc.f) {
        if (fclose(t->unc.f) != 0 && !t->unc.failed) {
            cli_error("--uncertain '%s': %s", t->unc.path, strerror(errno));
            t->unc.failed = true;
        }
        t->unc.f = NULL;
        good &= !t->unc.failed;
    }
    if (t->unc.count)
        cli_warn("%llu record(s) dropped as uncertain: a Redis tier's reply was lost, so whether "
                 "their keys were recorded is unknown (dropped like duplicates, not recorded in "
                 "the tiers below)%s%s%s",
                 (unsigned long long)t->unc.count, t->unc.path ? "; written to '" : "; give "
                 "--uncertain FILE to keep them", t->unc.path ? t->unc.path : "",
                 t->unc.path ? "'" : "");
    return good;
}

/* fdatasync() of the output when it is a regular file (a pipe or a
 * terminal has no disk to reach). */
static bool sync_output(dd_writer *w)
{
    struct stat st;
    if (fstat(w->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return true;
    if (fdatasync(w->fd) == 0)
        return true;
    w->error = errno;
    return false;
}

bool dd_uncertain_put(dd_uncertain *u, const void *rec, size_t len, int term)
{
    u->count++;
    if (u->failed || !u->f)
        return !u->failed;
    if (fwrite(rec, 1, len, u->f) != len || putc(term, u->f) == EOF) {
        cli_error("--uncertain '%s': %s", u->path, strerror(errno));
        u->failed = true;
        return false;
    }
    return true;
}

bool dd_after_batch(dd_after *a, dedup_seen *s, const dedup_batch *b, const dedup_verdict *v,
                    const unsigned char *const *rec, const size_t *rlen, unsigned char term,
                    dd_writer *w)
{
    size_t news = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (a->unc && v[i] == DEDUP_UNCERTAIN && !dd_uncertain_put(a->unc, rec[i], rlen[i], term))
            return false;
        news += v[i] == DEDUP_NEW;
    }
    if (!a->commits || !news)
        return true;
    /* "Written out": past this process, in the kernel's hands -- and with
     * a store's sync always, on the disk when the output is a file -- before
     * the batch's keys are committed: a kill between the two makes the next
     * run write these records again, never lose them. */
    if (!dd_writer_flush(w))
        return false; /* the caller reports the writer's error */
    if (a->sync_out && !sync_output(w))
        return false;
    if (news > a->cap) {
        dd_after_free(a);
        a->d = malloc(news * sizeof *a->d);
        a->k = malloc(news * sizeof *a->k);
        a->l = malloc(news * sizeof *a->l);
        a->cap = news;
        if (!a->d || !a->k || !a->l) {
            dd_after_free(a);
            cli_error("out of memory");
            return false;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++)
        if (v[i] == DEDUP_NEW) {
            a->d[k] = b->digests[i];
            a->k[k] = b->keys ? b->keys[i] : NULL;
            a->l[k] = b->lens ? b->lens[i] : 0;
            k++;
        }
    dedup_batch cb = {.n = k, .digests = a->d, .keys = b->keys ? a->k : NULL,
                      .lens = b->lens ? a->l : NULL};
    if (dedup_seen_commit(s, &cb) != DEDUP_OK) {
        cli_error("%s %zu keys%s: %s", a->what, k, a->where, a->errfn(a->errctx));
        return false;
    }
    return true;
}

void dd_after_free(dd_after *a)
{
    free(a->d);
    free(a->k);
    free(a->l);
    a->d = NULL, a->k = NULL, a->l = NULL, a->cap = 0;
}

static const char *tiers_error(const void *t) { return dd_tiers_error(t); }

bool dd_tiers_after_batch(dd_tiers_cli *t, dedup_seen *s, const dedup_batch *b,
                          const dedup_verdict *v, const unsigned char *const *rec,
                          const size_t *rlen, unsigned char term, dd_writer *w)
{
    dd_after *a = &t->after;
    a->unc = t->any_redis ? &t->unc : NULL;
    a->commits = t->commits || t->stores;
    a->sync_out = t->sync_out;
    a->what = "committing";
    a->where = t->commits ? " to the Redis tier" : " to the store tier";
    a->errfn = tiers_error;
    a->errctx = t;
    return dd_after_batch(a, s, b, v, rec, rlen, term, w);
}

const char *dd_tiers_error(const dd_tiers_cli *t)
{
    size_t n = t ? t->first + t->n : 0;
    /* Remote tiers' messages first, then the stores'. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < n; k++) {
            dedup_seen_stats ss = tier_stats(t, k);
            if ((pass ? ss.persistent : ss.remote) && *dedup_seen_error(t->seen[k]))
                return dedup_seen_error(t->seen[k]);
        }
    return "";
}

void dd_tiers_print_stats(const dd_tiers_cli *t, FILE *f, bool json)
{
    if (!t->view)
        return;
    dedup_tiers_stats st;
    dedup_tiers_get_stats(t->view, &st);
    double avoided = st.new_keys ? (double)st.reads_avoided / (double)st.new_keys : 0;
    if (json) {
        fprintf(f, "{\"tiers\":[");
        for (size_t k = 0; k < st.n; k++) {
            const dedup_tier_stats *s = &st.tier[k];
            fprintf(f, "%s{\"name\":", k ? "," : "");
            cli_json_string(f, s->name);
            fprintf(f, ",\"kind\":\"%s\",\"lookups\":%llu,\"hits\":%llu,\"ended_new\":%llu,"
                       "\"passed_down\":%llu,\"records\":%llu,\"trusted\":%llu,\"seconds\":%.3f",
                    dedup_seen_kind_name(s->kind), (unsigned long long)s->lookups,
                    (unsigned long long)s->hits, (unsigned long long)s->ended_new,
                    (unsigned long long)s->passed_down, (unsigned long long)s->records,
                    (unsigned long long)s->trusted, (double)s->ns / 1e9);
            dedup_seen_stats ss = tier_stats(t, k);
            if (ss.remote)
                fprintf(f, ",\"uncertain\":%llu", (unsigned long long)ss.uncertain);
            if (ss.persistent)
                fprintf(f, ",\"store_keys\":%llu,\"bytes_on_disk\":%llu",
                        (unsigned long long)ss.stored_keys, (unsigned long long)ss.bytes_on_disk);
            fputc('}', f);
        }
        fprintf(f, "],\"exact\":%s,\"trust_filter\":%s,\"shared\":%s,\"new_keys\":%llu,"
                   "\"reads_avoided\":%llu,\"reads_avoided_rate\":%.6f,\"contradicted\":%llu}\n",
                st.exact ? "true" : "false", st.trust_filter ? "true" : "false",
                st.shared ? "true" : "false", (unsigned long long)st.new_keys,
                (unsigned long long)st.reads_avoided, avoided, (unsigned long long)st.contradicted);
        return;
    }
    fprintf(f, "dedup: tiers: %s%s; %llu new keys, %llu (%.2f%%) settled by a filter without "
               "reading the tiers below\n",
            st.exact ? "exact" : "not exact (the filter's maybe counts as a duplicate)",
            st.shared ? ", shared (no filter's 'new' is final)" : "",
            (unsigned long long)st.new_keys, (unsigned long long)st.reads_avoided, avoided * 100);
    for (size_t k = 0; k < st.n; k++) {
        const dedup_tier_stats *s = &st.tier[k];
        fprintf(f, "dedup:   %zu %-24s lookups %llu, hits %llu, ended new %llu, passed down %llu, "
                   "recorded %llu",
                k + 1, s->name, (unsigned long long)s->lookups, (unsigned long long)s->hits,
                (unsigned long long)s->ended_new, (unsigned long long)s->passed_down,
                (unsigned long long)s->records);
        if (st.trust_filter && s->probabilistic)
            fprintf(f, ", trusted maybes %llu", (unsigned long long)s->trusted);
        dedup_seen_stats ss = tier_stats(t, k);
        if (ss.remote)
            fprintf(f, ", uncertain %llu", (unsigned long long)ss.uncertain);
        fprintf(f, ", %.3f s\n", (double)s->ns / 1e9);
        if (ss.persistent) {
            char hb[32];
            fprintf(f, "dedup:     store: %llu keys, %s on disk (%.1f bytes/key)\n",
                    (unsigned long long)ss.stored_keys,
                    cli_human_size(ss.bytes_on_disk, hb, sizeof hb),
                    ss.stored_keys ? (double)ss.bytes_on_disk / (double)ss.stored_keys : 0.0);
        }
    }
    if (st.contradicted)
        fprintf(f, "dedup:   %llu 'new' answers of a filter were duplicates in a tier below\n",
                (unsigned long long)st.contradicted);
}

void dd_tiers_free(dd_tiers_cli *t)
{
    if (!t)
        return; /* the rest is static storage (dd_tiers_opt) */
    for (size_t i = 0; i < t->n; i++) { /* opened, never stacked (a failure between) */
        dedup_seen_free(t->pre_seen[i]);
        t->pre_seen[i] = NULL;
    }
    dd_after_free(&t->after);
    if (t->unc.f) /* a run that ended before dd_tiers_finish() */
        fclose(t->unc.f);
    t->unc.f = NULL;
}
