/*
 * plan.c - the five questions turned into a method (include/dedup/plan.h).
 *
 * Every method is sized first, with the structures' own sizing functions
 * (the filters' memory is dedup_seen_bytes_for(), the one place the CLI and
 * the components size them too) and documented bounds, and judged against the answers (exactness,
 * deletes, window, memory, infrastructure); then the rules of plan.h pick
 * one among the feasible ones, and every other method gets the reason it
 * lost: the first answer it fails, or what it costs more than the winner.
 */
#include "dedup/plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dedup/bloom.h"
#include "dedup/cuckoo.h"
#include "dedup/limits.h"
#include "dedup/seen.h"

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define SOFT_EXACT_LIMIT GIB     /* rule 4 without a budget */
#define REDIS_SEGMENT (512 * MIB) /* a Redis string's largest size */

static const char *const method_names[DEDUP_PLAN_METHODS] = {
    "exact",   "fingerprint", "u64",    "bitmap",        "blocked",  "bloom",      "cuckoo",
    "counting", "window",     "window-approx", "external", "sharded", "redis-keys",
    "redis-bitmap",
};

const char *dedup_plan_method_name(dedup_plan_method m)
{
    return (unsigned)m < DEDUP_PLAN_METHODS ? method_names[m] : "unknown";
}

void dedup_plan_question_init(dedup_plan_question *q) { memset(q, 0, sizeof *q); }

/* Slots of 16 bytes at a load of at least 3/8, and the arena's key + 4. */
double dedup_plan_exact_bytes_per_key(double key_bytes) { return key_bytes + 4.0 + 16.0 / 0.375; }

/* ---- formatting --------------------------------------------------------------- */

static void fmt_bytes(char *b, size_t cap, double v)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    while (v >= 1024.0 && i < 5) {
        v /= 1024.0;
        i++;
    }
    snprintf(b, cap, i ? "%.2f %s" : "%.0f %s", v, u[i]);
}

/* A size for -m: whole MiB (rounded up), or G when exact. */
static void fmt_opt_size(char *b, size_t cap, uint64_t v)
{
    uint64_t mib = (v + MIB - 1) / MIB;
    if (mib % 1024 == 0)
        snprintf(b, cap, "%lluG", (unsigned long long)(mib / 1024));
    else
        snprintf(b, cap, "%lluM", (unsigned long long)mib);
}

static void fmt_duration(char *b, size_t cap, uint64_t us)
{
    static const struct { uint64_t us; const char *unit; } u[] = {
        {UINT64_C(86400000000), "d"}, {UINT64_C(3600000000), "h"}, {60000000, "m"},
        {1000000, "s"}, {1000, "ms"},
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
        if (us % u[i].us == 0) {
            snprintf(b, cap, "%llu%s", (unsigned long long)(us / u[i].us), u[i].unit);
            return;
        }
    snprintf(b, cap, "%lluus", (unsigned long long)us);
}

static void say(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

/* ---- sizing every method ------------------------------------------------------- */

typedef struct ctx {
    const dedup_plan_question *q;
    uint64_t n, records;
    double key, rec, p, p_eff; /* p_eff: the rate used to size filters when exact is required */
    bool exact_needed, window;
    uint64_t budget;
    uint64_t blocked_bits; /* dedup_blocked_bits_for(n, p_eff): a search, done once */
    char nbuf[32], pbuf[32], wbuf[32];
} ctx;

static bool fits(const ctx *c, uint64_t bytes) { return c->budget == 0 || bytes <= c->budget; }

static dedup_plan_choice *slot(dedup_plan *p, dedup_plan_method m)
{
    dedup_plan_choice *ch = &p->choices[m];
    memset(ch, 0, sizeof *ch);
    ch->method = m;
    ch->considered = true;
    ch->feasible = true;
    ch->nodes = 1;
    return ch;
}

static void set_memory(const ctx *c, dedup_plan_choice *ch, double bytes)
{
    ch->memory = bytes >= 1.8e19 ? UINT64_MAX : (uint64_t)ceil(bytes);
    ch->bits_per_key = (double)ch->memory * 8.0 / (double)c->n;
    if (ch->nodes <= 1)
        ch->node_memory = ch->memory;
}

/* Marks a method infeasible with the first reason found. */
static void refuse(dedup_plan_choice *ch, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(dedup_plan_choice *ch, const char *fmt, ...)
{
    if (!ch->feasible)
        return;
    ch->feasible = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ch->reason, sizeof ch->reason, fmt, ap);
    va_end(ap);
}

/* The answers every method is judged against, in the order a reader asks. */
static void judge_common(const ctx *c, dedup_plan_choice *ch, bool exact, bool can_delete,
                         bool windowed)
{
    char hb[32], bb[32];
    ch->exact = exact;
    if (c->exact_needed && !exact)
        refuse(ch, "not exact: sized at 1%% it would drop new keys as duplicates at a rate of "
                   "%.3g, and the answers say no false duplicate is acceptable", ch->fpr);
    if (!c->exact_needed && !exact && ch->fpr > c->p * 1.01)
        refuse(ch, "reaches only a rate of %.3g at this size, above the %s accepted", ch->fpr,
               c->pbuf);
    if (c->q->deletes && !can_delete)
        refuse(ch, "cannot delete keys, and the answers need deletes");
    if (c->window && !windowed)
        refuse(ch, "remembers every key forever: a repeat after the %s window would be dropped, "
                   "but it must be kept", c->wbuf);
    if (ch->nodes <= 1 && !fits(c, ch->memory)) {
        fmt_bytes(hb, sizeof hb, (double)ch->memory);
        fmt_bytes(bb, sizeof bb, (double)c->budget);
        refuse(ch, "needs %s, over the %s budget", hb, bb);
    }
}

static void size_exact(const ctx *c, dedup_plan *p)
{
    dedup_plan_choice *ch = slot(p, DEDUP_PLAN_EXACT);
    set_memory(c, ch, (double)c->n * dedup_plan_exact_bytes_per_key(c->key) + MIB);
    say(ch->command, sizeof ch->command, "dedup -n %s FILE", c->nbuf);
    judge_common(c, ch, true, false, false);
}

static void size_fingerprint(const ctx *c, dedup_plan *p)
{
    dedup_plan_choice *ch = slot(p, DEDUP_PLAN_FINGERPRINT);
    set_memory(c, ch, (double)dedup_seen_bytes_for(DEDUP_SEEN_FINGERPRINT, c->n, 0) + MIB);
    ch->fpr = (double)c->n * (double)c->n / ldexp(1.0, 129);
    say(ch->command, sizeof ch->command, "dedup --mode fingerprint -n %s FILE", c->nbuf);
    judge_common(c, ch, ch->fpr <= 1e-12, false, false);
}

static void size_ints(const ctx *c, dedup_plan *p)
{
    const dedup_plan_question *q = c->q;
    dedup_plan_choice *ch = slot(p, DEDUP_PLAN_U64);
    set_memory(c, ch, (double)dedup_seen_bytes_for(DEDUP_SEEN_U64, c->n, 0) + MIB);
    say(ch->command, sizeof ch->command, "dedup --keys int -n %s FILE", c->nbuf);
    judge_common(c, ch, true, false, false);
    if (q->range_hi > q->range_lo) {
        ch = slot(p, DEDUP_PLAN_BITMAP);
        uint64_t span = q->range_hi - q->range_lo;
        double bits = (double)span + 1.0;
        set_memory(c, ch, ceil(bits / 64.0) * 8.0);
        say(ch->command, sizeof ch->command, "dedup --keys int --mode bitmap --range %llu..%llu FILE",
            (unsigned long long)q->range_lo, (unsigned long long)q->range_hi);
        if (bits > (double)DEDUP_MAX_BITS)
            refuse(ch, "a range of %.3g values is over the bitmap's 2^40-bit limit", bits);
        judge_common(c, ch, true, true, false);
    }
}

static void size_blooms(const ctx *c, dedup_plan *p)
{
    char hb[32];
    dedup_plan_choice *ch = slot(p, DEDUP_PLAN_BLOCKED);
    uint64_t bits = c->blocked_bits;
    bool over = bits == 0 || bits > DEDUP_MAX_BITS;
    if (!over) {
        ch->hashes = dedup_blocked_k_for(c->n, bits);
        ch->fpr = dedup_blocked_fpr_for(c->n, bits, ch->hashes);
    }
    set_memory(c, ch, (double)bits / 8.0); /* = dedup_seen_bytes_for(BLOCKED): no second search */
    say(ch->command, sizeof ch->command, "dedup --mode blocked -n %s -p %s FILE", c->nbuf, c->pbuf);
    if (over)
        refuse(ch, "%s keys at %s need more than the 2^40-bit limit in 512-bit blocks", c->nbuf,
               c->pbuf);
    judge_common(c, ch, false, false, false);

    ch = slot(p, DEDUP_PLAN_BLOOM);
    bits = dedup_bloom_bits_for(c->n, c->p_eff);
    over = bits == 0 || bits > DEDUP_MAX_BITS;
    if (!over) {
        ch->hashes = dedup_bloom_k_for(c->n, bits);
        ch->fpr = dedup_bloom_fpr_for(c->n, bits, ch->hashes);
    }
    set_memory(c, ch, (double)bits / 8.0); /* = dedup_seen_bytes_for(BLOOM) */
    say(ch->command, sizeof ch->command, "dedup --mode bloom -n %s -p %s FILE", c->nbuf, c->pbuf);
    if (over) {
        fmt_bytes(hb, sizeof hb, (double)bits / 8.0);
        refuse(ch, "needs %s, more than the 2^40-bit limit of one filter", hb);
    }
    judge_common(c, ch, false, false, false);

    /* Counting: the classic layout's counters, 4 bits each. */
    ch = slot(p, DEDUP_PLAN_COUNTING);
    bits = dedup_bloom_bits_for(c->n, c->p_eff);
    over = bits == 0 || bits > DEDUP_MAX_BITS;
    uint64_t counters = (bits + 15) / 16 * 16;
    if (!over) {
        ch->hashes = dedup_bloom_k_for(c->n, counters);
        ch->fpr = dedup_bloom_fpr_for(c->n, counters, ch->hashes);
    }
    set_memory(c, ch, (double)dedup_seen_bytes_for(DEDUP_SEEN_COUNTING, c->n, c->p_eff));
    say(ch->command, sizeof ch->command,
        "dedup filter create keys.cbf -t counting -n %s -p %s; dedup filter add|del|query keys.cbf",
        c->nbuf, c->pbuf);
    if (over)
        refuse(ch, "more counters than the 2^40 limit");
    judge_common(c, ch, false, true, false);

    /* Cuckoo: 4-slot buckets at the planned load. */
    ch = slot(p, DEDUP_PLAN_CUCKOO);
    uint32_t f = dedup_cuckoo_fingerprint_bits_for(c->p_eff, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
    uint64_t nb = dedup_cuckoo_buckets_for(c->n, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
    if (f && nb) {
        double load = (double)c->n / ((double)nb * DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE);
        ch->fpr = dedup_cuckoo_fpr_for(f, DEDUP_CUCKOO_DEFAULT_BUCKET_SIZE, load);
        ch->hashes = 2; /* two buckets a key */
    }
    set_memory(c, ch, (double)dedup_seen_bytes_for(DEDUP_SEEN_CUCKOO, c->n, c->p_eff));
    say(ch->command, sizeof ch->command,
        "dedup filter create keys.cf -t cuckoo -n %s -p %s; dedup filter add|del|query keys.cf",
        c->nbuf, c->pbuf);
    if (!f || !nb)
        refuse(ch, "a rate of %s needs fingerprints over 32 bits", c->pbuf);
    judge_common(c, ch, false, true, false);
}

static void size_windows(const ctx *c, dedup_plan *p)
{
    dedup_plan_choice *ch = slot(p, DEDUP_PLAN_WINDOW);
    set_memory(c, ch, (double)c->n * DEDUP_PLAN_WINDOW_BYTES + MIB);
    ch->fpr = (double)c->n * (double)c->n / ldexp(1.0, 129); /* digests, as fingerprint */
    say(ch->command, sizeof ch->command, "dedup --window %s --time-field N -n %s FILE", c->wbuf,
        c->nbuf);
    judge_common(c, ch, true, false, true);

    ch = slot(p, DEDUP_PLAN_WINDOW_APPROX);
    unsigned f = 4;
    while (f < 32 && 8.0 / (ldexp(1.0, (int)f) - 1.0) > c->p_eff)
        f++;
    ch->fpr = 8.0 / (ldexp(1.0, (int)f) - 1.0);
    ch->hashes = 2;
    /* G = 7 generations, 3 tag bits, 95% load (dedup/window.h). */
    set_memory(c, ch, (double)c->n * 8.0 / 7.0 / 0.95 * (f + 3) / 8.0 + 20480.0);
    say(ch->command, sizeof ch->command,
        "dedup --mode blocked --window %s --time-field N -n %s -p %s FILE", c->wbuf, c->nbuf,
        c->pbuf);
    judge_common(c, ch, false, false, true);
}

static void size_external(const ctx *c, dedup_plan *p)
{
    char mb[32];
    dedup_plan_choice *ch = slot(p, DEDUP_PLAN_EXTERNAL);
    uint64_t mem = c->budget ? c->budget : 64 * MIB;
    double input = (double)c->records * c->rec;
    ch->disk = (uint64_t)ceil(input);
    ch->io = (uint64_t)ceil(input * DEDUP_PLAN_EXTERNAL_IO);
    set_memory(c, ch, (double)mem);
    fmt_opt_size(mb, sizeof mb, mem);
    say(ch->command, sizeof ch->command, "dedup -m %s -T TMPDIR FILE", mb);
    judge_common(c, ch, true, false, false);
}

/* Nodes for a total of 'bytes' at the budget per node (or as given). */
static uint32_t nodes_for(const ctx *c, double bytes)
{
    if (c->q->nodes)
        return c->q->nodes;
    if (!c->budget)
        return 1;
    double n = ceil(bytes / (double)c->budget);
    return n < 1 ? 1 : n > 1e6 ? 1000000u : (uint32_t)n;
}

static void judge_nodes(const ctx *c, dedup_plan_choice *ch)
{
    char hb[32], bb[32];
    ch->node_memory = (ch->memory + ch->nodes - 1) / ch->nodes;
    if (!fits(c, ch->node_memory)) {
        fmt_bytes(hb, sizeof hb, (double)ch->node_memory);
        fmt_bytes(bb, sizeof bb, (double)c->budget);
        refuse(ch, "needs %s on each of the %u machines given, over the %s budget", hb, ch->nodes,
               bb);
    }
}

static void size_sharded(const ctx *c, dedup_plan *p)
{
    dedup_plan_choice *ch = slot(p, DEDUP_PLAN_SHARDED);
    double total = (double)c->n * dedup_plan_exact_bytes_per_key(c->key);
    ch->nodes = nodes_for(c, total * 1.1); /* 10% for the ring's imbalance */
    if (!c->q->nodes && ch->nodes < 2)
        ch->nodes = 2;
    set_memory(c, ch, total * 1.1 + (double)ch->nodes * MIB);
    judge_nodes(c, ch);
    uint64_t per = (c->n + ch->nodes - 1) / ch->nodes;
    say(ch->command, sizeof ch->command,
        "dedup split -N %u -o 'part-%%s.txt' FILE; then on node I: dedup -n %llu part-I.txt",
        ch->nodes, (unsigned long long)(per + per / 10));
    judge_common(c, ch, true, false, false);
}

static void size_redis(const ctx *c, dedup_plan *p)
{
    dedup_plan_choice *ch = slot(p, DEDUP_PLAN_REDIS_KEYS);
    double total = (double)c->n * DEDUP_PLAN_REDIS_KEY_BYTES;
    ch->nodes = nodes_for(c, total);
    set_memory(c, ch, total);
    judge_nodes(c, ch);
    if (c->window)
        say(ch->command, sizeof ch->command,
            "dedup --redis redis://HOST:6379 --redis-scheme keys --ttl %s FILE", c->wbuf);
    else
        say(ch->command, sizeof ch->command, "dedup --redis redis://HOST:6379 --redis-scheme keys FILE");
    judge_common(c, ch, true, true, true);

    ch = slot(p, DEDUP_PLAN_REDIS_BITMAP);
    uint64_t bits = c->blocked_bits;
    bool over = bits == 0 || bits > DEDUP_MAX_BITS;
    if (!over) {
        ch->hashes = dedup_blocked_k_for(c->n, bits);
        ch->fpr = dedup_blocked_fpr_for(c->n, bits, ch->hashes);
    }
    double bytes = (double)bits / 8.0;
    ch->nodes = nodes_for(c, bytes);
    set_memory(c, ch, bytes);
    judge_nodes(c, ch);
    say(ch->command, sizeof ch->command,
        "dedup --redis redis://HOST:6379 --redis-scheme bitmap -n %s -p %s FILE  "
        "(%llu segment keys of at most 512 MiB)",
        c->nbuf, c->pbuf, (unsigned long long)((uint64_t)ceil(bytes / (double)REDIS_SEGMENT)));
    if (over)
        refuse(ch, "more bits than the 2^40 limit");
    judge_common(c, ch, false, false, false);
}

/* ---- choosing ----------------------------------------------------------------------- */

static bool ok(const dedup_plan *p, dedup_plan_method m)
{
    return p->choices[m].considered && p->choices[m].feasible;
}

static dedup_plan_method choose(const ctx *c, dedup_plan *p, char *why, size_t cap)
{
    const dedup_plan_question *q = c->q;
    const dedup_plan_choice *ex = &p->choices[DEDUP_PLAN_EXACT];
    char a[32], b[32];
    /* 1. a window */
    if (c->window) {
        if (q->infra == DEDUP_PLAN_REDIS && ok(p, DEDUP_PLAN_REDIS_KEYS)) {
            say(why, cap, "keys seen on any machine within %s must be known to all: one Redis key "
                          "per key, set only if absent, expiring after %s (exact, and its memory "
                          "follows the keys of the last %s only)", c->wbuf, c->wbuf, c->wbuf);
            return DEDUP_PLAN_REDIS_KEYS;
        }
        const dedup_plan_choice *w = &p->choices[DEDUP_PLAN_WINDOW];
        if (ok(p, DEDUP_PLAN_WINDOW) &&
            (c->exact_needed || c->budget || w->memory <= SOFT_EXACT_LIMIT)) {
            fmt_bytes(a, sizeof a, (double)w->memory);
            say(why, cap, "a repeat counts only within %s, so only the keys of the last %s are "
                          "kept: %s for %s keys a window, exact, constant over the stream",
                c->wbuf, c->wbuf, a, c->nbuf);
            return DEDUP_PLAN_WINDOW;
        }
        if (ok(p, DEDUP_PLAN_WINDOW_APPROX)) {
            fmt_bytes(a, sizeof a, (double)p->choices[DEDUP_PLAN_WINDOW_APPROX].memory);
            say(why, cap, "a repeat counts only within %s and a rate of %s is accepted: tagged "
                          "fingerprints of the window's keys, %s", c->wbuf, c->pbuf, a);
            return DEDUP_PLAN_WINDOW_APPROX;
        }
    }
    /* 2. machines sharing a Redis */
    if (q->infra == DEDUP_PLAN_REDIS) {
        if ((c->exact_needed || q->deletes) && ok(p, DEDUP_PLAN_REDIS_KEYS)) {
            say(why, cap, "every machine must see the same exact set: one Redis key per key, "
                          "%u Redis node(s)", p->choices[DEDUP_PLAN_REDIS_KEYS].nodes);
            return DEDUP_PLAN_REDIS_KEYS;
        }
        if (!c->exact_needed && ok(p, DEDUP_PLAN_REDIS_BITMAP)) {
            fmt_bytes(a, sizeof a, (double)p->choices[DEDUP_PLAN_REDIS_BITMAP].memory);
            say(why, cap, "every machine must see the same filter and a rate of %s is accepted: "
                          "a blocked Bloom filter on plain Redis strings, %s in Redis", c->pbuf, a);
            return DEDUP_PLAN_REDIS_BITMAP;
        }
    }
    /* 3. deletes */
    if (q->deletes) {
        if (ok(p, DEDUP_PLAN_BITMAP)) {
            say(why, cap, "integer keys in a known range and deletes: one bit per possible value "
                          "clears as easily as it sets");
            return DEDUP_PLAN_BITMAP;
        }
        bool cu = ok(p, DEDUP_PLAN_CUCKOO), co = ok(p, DEDUP_PLAN_COUNTING);
        if (cu || co) {
            dedup_plan_method m = cu && (!co || p->choices[DEDUP_PLAN_CUCKOO].memory <=
                                                    p->choices[DEDUP_PLAN_COUNTING].memory)
                                      ? DEDUP_PLAN_CUCKOO
                                      : DEDUP_PLAN_COUNTING;
            fmt_bytes(a, sizeof a, (double)p->choices[m].memory);
            say(why, cap, "keys must be deleted and a rate of %s is accepted: the %s filter can "
                          "forget a key, in %s (%.1f bits a key)", c->pbuf,
                m == DEDUP_PLAN_CUCKOO ? "cuckoo" : "counting Bloom", a, p->choices[m].bits_per_key);
            return m;
        }
    }
    /* 4. the exact set fits */
    bool soft = c->budget ? ex->memory <= c->budget
                          : (c->exact_needed || ex->memory <= SOFT_EXACT_LIMIT);
    if (q->int_keys && (ok(p, DEDUP_PLAN_BITMAP) || ok(p, DEDUP_PLAN_U64))) {
        dedup_plan_method m = ok(p, DEDUP_PLAN_BITMAP) &&
                                      (!ok(p, DEDUP_PLAN_U64) ||
                                       p->choices[DEDUP_PLAN_BITMAP].memory <=
                                           p->choices[DEDUP_PLAN_U64].memory)
                                  ? DEDUP_PLAN_BITMAP
                                  : DEDUP_PLAN_U64;
        bool m_soft = c->budget || c->exact_needed || p->choices[m].memory <= SOFT_EXACT_LIMIT;
        if (m_soft) {
            fmt_bytes(a, sizeof a, (double)p->choices[m].memory);
            say(why, cap, m == DEDUP_PLAN_BITMAP
                              ? "integer keys in a range dense enough: one bit per possible value, "
                                "%s, exact, no hashing"
                              : "integer keys: the 64-bit integer set, %s, exact",
                a);
            return m;
        }
    }
    if (ok(p, DEDUP_PLAN_EXACT) && soft) {
        fmt_bytes(a, sizeof a, (double)ex->memory);
        if (c->exact_needed)
            say(why, cap, "the exact set of %s keys fits: %s%s, no false positive at all; a "
                          "filter's errors would buy nothing here", c->nbuf, a,
                c->budget ? " within the budget" : "");
        else
            say(why, cap, "the exact set of %s keys fits in %s (%s), so a rate of %s buys nothing: "
                          "small data needs no probabilistic method", c->nbuf, a,
                c->budget ? "within the budget" : "under 1 GiB", c->pbuf);
        return DEDUP_PLAN_EXACT;
    }
    /* 5. exact required, the exact set does not fit */
    if (c->exact_needed) {
        fmt_bytes(a, sizeof a, (double)ex->memory);
        if (ok(p, DEDUP_PLAN_FINGERPRINT)) {
            fmt_bytes(b, sizeof b, (double)p->choices[DEDUP_PLAN_FINGERPRINT].memory);
            say(why, cap, "the exact set needs %s, over the budget; 16-byte digests of the keys "
                          "need %s, and two of %s keys share a digest with odds of %.2g: exact in "
                          "practice, in memory, without the disk's IO",
                a, b, c->nbuf, p->choices[DEDUP_PLAN_FINGERPRINT].fpr);
            return DEDUP_PLAN_FINGERPRINT;
        }
        if (ok(p, DEDUP_PLAN_SHARDED)) {
            fmt_bytes(b, sizeof b, (double)p->choices[DEDUP_PLAN_SHARDED].node_memory);
            say(why, cap, "exact is required and neither the exact set (%s) nor digests fit one "
                          "machine: split by consistent hashing over %u machines, %s each, each "
                          "exact on its part (the union is the global answer)",
                a, p->choices[DEDUP_PLAN_SHARDED].nodes, b);
            return DEDUP_PLAN_SHARDED;
        }
        if (ok(p, DEDUP_PLAN_EXTERNAL)) {
            fmt_bytes(b, sizeof b, (double)p->choices[DEDUP_PLAN_EXTERNAL].io);
            say(why, cap, "exact is required and neither the exact set (%s) nor digests fit the "
                          "memory: the exact set while it fits, then sort-merge on disk (IO about "
                          "%s, 3.5x the input); exact, in bounded memory", a, b);
            return DEDUP_PLAN_EXTERNAL;
        }
    }
    /* 6. a rate accepted */
    if (!c->exact_needed) {
        const dedup_plan_choice *bk = &p->choices[DEDUP_PLAN_BLOCKED],
                                *bl = &p->choices[DEDUP_PLAN_BLOOM];
        fmt_bytes(b, sizeof b, (double)ex->memory);
        if (ok(p, DEDUP_PLAN_BLOCKED) &&
            (!ok(p, DEDUP_PLAN_BLOOM) || (double)bk->memory <= 1.25 * (double)bl->memory)) {
            fmt_bytes(a, sizeof a, (double)bk->memory);
            say(why, cap, "a rate of %s is accepted and the exact set would need %s: a blocked "
                          "Bloom filter, %s (%.2f bits a key, k = %u, expected rate %.3g), one "
                          "cache line a key", c->pbuf, b, a, bk->bits_per_key, bk->hashes, bk->fpr);
            return DEDUP_PLAN_BLOCKED;
        }
        if (ok(p, DEDUP_PLAN_BLOOM)) {
            fmt_bytes(a, sizeof a, (double)bl->memory);
            say(why, cap, "a rate of %s is accepted and the exact set would need %s: a Bloom "
                          "filter, %s (%.2f bits a key, k = %u, expected rate %.3g)", c->pbuf, b,
                a, bl->bits_per_key, bl->hashes, bl->fpr);
            return DEDUP_PLAN_BLOOM;
        }
        if (ok(p, DEDUP_PLAN_SHARDED)) {
            say(why, cap, "no filter at %s fits one machine: split over %u machines, each exact "
                          "on its part", c->pbuf, p->choices[DEDUP_PLAN_SHARDED].nodes);
            return DEDUP_PLAN_SHARDED;
        }
        if (ok(p, DEDUP_PLAN_EXTERNAL)) {
            say(why, cap, "no filter at %s fits the memory: the exact external path works in any "
                          "memory, at the cost of disk IO", c->pbuf);
            return DEDUP_PLAN_EXTERNAL;
        }
    }
    /* The rules above did not apply (an exact window too large for the soft
     * limit, say): the first feasible method in the order of preference. */
    static const dedup_plan_method order[] = {
        DEDUP_PLAN_WINDOW,  DEDUP_PLAN_WINDOW_APPROX, DEDUP_PLAN_REDIS_KEYS, DEDUP_PLAN_BITMAP,
        DEDUP_PLAN_U64,     DEDUP_PLAN_EXACT,         DEDUP_PLAN_FINGERPRINT, DEDUP_PLAN_BLOCKED,
        DEDUP_PLAN_BLOOM,   DEDUP_PLAN_CUCKOO,        DEDUP_PLAN_COUNTING,   DEDUP_PLAN_SHARDED,
        DEDUP_PLAN_EXTERNAL, DEDUP_PLAN_REDIS_BITMAP,
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (ok(p, order[i])) {
            fmt_bytes(a, sizeof a, (double)p->choices[order[i]].memory);
            say(why, cap, "the first method, in the order of preference, that meets every answer (%s)", a);
            return order[i];
        }
    /* Nothing meets every answer: the nearest, said plainly. */
    say(why, cap, "no method meets every answer (%s); this one comes nearest: relax an answer "
                  "(a rate, a budget, deletes) for a full recommendation", ex->reason);
    return c->exact_needed || q->deletes ? DEDUP_PLAN_EXACT : DEDUP_PLAN_BLOOM;
}

/* Why a feasible method lost to the winner. */
static void lost(const ctx *c, const dedup_plan_choice *w, dedup_plan_choice *o)
{
    char a[32], b[32];
    fmt_bytes(a, sizeof a, (double)o->memory);
    fmt_bytes(b, sizeof b, (double)w->memory);
    double ratio = w->memory ? (double)o->memory / (double)w->memory : 0;
    bool shared = c->q->infra == DEDUP_PLAN_REDIS;
    bool o_remote = o->method == DEDUP_PLAN_REDIS_KEYS || o->method == DEDUP_PLAN_REDIS_BITMAP;
    bool w_remote = w->method == DEDUP_PLAN_REDIS_KEYS || w->method == DEDUP_PLAN_REDIS_BITMAP;
    if (shared && w_remote && !o_remote)
        say(o->reason, sizeof o->reason, "%s, but on one machine: a key another machine saw "
                                         "would pass again, and the machines share a Redis", a);
    else if (o->method == DEDUP_PLAN_CUCKOO && !c->q->deletes)
        say(o->reason, sizeof o->reason, "%s (%.2f bits a key), but a fixed table refuses keys "
                                         "once full and inserts relocate keys; its strength is "
                                         "deletes, which are not needed", a, o->bits_per_key);
    else if (w->exact && !o->exact)
        say(o->reason, sizeof o->reason, "would drop new keys at a rate of %.3g (%s) where an "
                                         "exact method fits", o->fpr, a);
    else if (o->method == DEDUP_PLAN_EXTERNAL) {
        fmt_bytes(b, sizeof b, (double)o->io);
        say(o->reason, sizeof o->reason, "reads and writes about %s on disk where the "
                                         "recommended method works in memory", b);
    }
    else if (o->method == DEDUP_PLAN_SHARDED || o->method == DEDUP_PLAN_REDIS_KEYS ||
             o->method == DEDUP_PLAN_REDIS_BITMAP)
        say(o->reason, sizeof o->reason, "needs %u machine(s) and %s in all, with a network "
                                         "round trip per batch, where one machine suffices",
            o->nodes, a);
    else if (o->method == DEDUP_PLAN_BLOOM && w->method == DEDUP_PLAN_BLOCKED)
        say(o->reason, sizeof o->reason, "%s (%.2f bits a key), but k = %u cache misses a key "
                                         "against the blocked filter's one", a, o->bits_per_key,
            o->hashes);
    else if (o->method == DEDUP_PLAN_BLOCKED && w->method == DEDUP_PLAN_BLOOM)
        say(o->reason, sizeof o->reason, "needs %s, %.0f%% more than the classic filter at this "
                                         "rate", a, (ratio - 1) * 100);
    else if (o->method == DEDUP_PLAN_COUNTING && w->method == DEDUP_PLAN_CUCKOO)
        say(o->reason, sizeof o->reason, "needs %s (%.1f bits a key, 4-bit counters), %.1fx the "
                                         "cuckoo filter", a, o->bits_per_key, ratio);
    else if (o->exact && !w->exact && o->memory > w->memory)
        say(o->reason, sizeof o->reason, "exact, but needs %s, %.1fx the %s of the recommended "
                                         "method, for a rate of %s you accept", a, ratio, b,
            c->pbuf);
    else if (o->memory > w->memory)
        say(o->reason, sizeof o->reason, "needs %s, %.1fx the recommended %s", a, ratio, b);
    else if (o->method == DEDUP_PLAN_WINDOW_APPROX && w->method == DEDUP_PLAN_WINDOW)
        say(o->reason, sizeof o->reason, "%s, but may drop new keys at %.3g where the exact window "
                                         "fits", a, o->fpr);
    else if (o->method == DEDUP_PLAN_FINGERPRINT && w->method == DEDUP_PLAN_EXACT)
        say(o->reason, sizeof o->reason, "%s, smaller, but keeps only digests (collision odds "
                                         "%.2g); the exact set fits, so nothing is gained", a,
            o->fpr);
    else if (o->method == DEDUP_PLAN_EXACT && w->method == DEDUP_PLAN_U64)
        say(o->reason, sizeof o->reason, "needs %s for keys the integer set holds in 8-byte slots",
            a);
    else
        say(o->reason, sizeof o->reason, "%s: smaller or equal, but %s wins by the rules (%s "
                                         "first)", a, dedup_plan_method_name(w->method),
            dedup_plan_method_name(w->method));
}

dedup_status dedup_plan_make(const dedup_plan_question *q, dedup_plan *out)
{
    if (!q || !out || q->items == 0 || !(q->fpr >= 0 && q->fpr <= 0.5) ||
        (q->window_us && !q->stream) || q->key_bytes < 0 || q->record_bytes < 0 ||
        (q->range_hi && (q->range_hi < q->range_lo || !q->int_keys)) ||
        (unsigned)q->infra > DEDUP_PLAN_CLUSTER)
        return DEDUP_ERR_INVALID_ARG;
    if (q->items > (UINT64_C(1) << 48))
        return DEDUP_ERR_LIMIT;
    memset(out, 0, sizeof *out);
    ctx c;
    memset(&c, 0, sizeof c);
    c.q = q;
    c.n = q->items;
    c.records = q->records ? q->records : 2 * q->items;
    c.key = q->key_bytes > 0 ? q->key_bytes : 40.0;
    c.rec = q->record_bytes > 0 ? q->record_bytes : c.key + 1.0;
    c.p = q->fpr;
    c.exact_needed = q->fpr == 0;
    c.p_eff = c.exact_needed ? 0.01 : q->fpr;
    c.window = q->stream && q->window_us;
    c.budget = q->memory;
    c.blocked_bits = dedup_blocked_bits_for(c.n, c.p_eff);
    snprintf(c.nbuf, sizeof c.nbuf, "%llu", (unsigned long long)c.n);
    snprintf(c.pbuf, sizeof c.pbuf, "%g", c.p_eff);
    if (c.window)
        fmt_duration(c.wbuf, sizeof c.wbuf, q->window_us);

    size_exact(&c, out);
    size_fingerprint(&c, out);
    if (q->int_keys)
        size_ints(&c, out);
    size_blooms(&c, out);
    if (c.window)
        size_windows(&c, out);
    size_external(&c, out);
    if (q->infra == DEDUP_PLAN_CLUSTER)
        size_sharded(&c, out);
    if (q->infra == DEDUP_PLAN_REDIS)
        size_redis(&c, out);

    char why[sizeof out->choices[0].reason];
    dedup_plan_method w = choose(&c, out, why, sizeof why);
    out->chosen = w;
    for (size_t m = 0; m < DEDUP_PLAN_METHODS; m++) {
        dedup_plan_choice *o = &out->choices[m];
        if (!o->considered)
            continue;
        out->count++;
        if (m != (size_t)w && o->feasible)
            lost(&c, &out->choices[w], o);
    }
    memcpy(out->choices[w].reason, why, sizeof why);
    return DEDUP_OK;
}
