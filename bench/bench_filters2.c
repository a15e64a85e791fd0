/*
 * bench_filters2.c - counting Bloom, cuckoo (12-bit) and scalable Bloom next
 * to the classic and blocked Bloom filters, same keys, same run.
 *
 *   bench_filters2 [--n N[,N...]] [--p P] [--queries Q] [--scalable-to N] [--huge] [--seed S]
 *
 * Defaults: n = 10M; p = 0.01; Q = 10M absent queries (fewer if n is
 * smaller); scalable grown from 1,000 to --scalable-to (default 10M) keys.
 * For each n, one filter at a time (only one in memory):
 *
 *   classic       dedup_bloom, classic layout, sized for (n, p)
 *   blocked       dedup_bloom, blocked layout, sized for (n, p)
 *   counting      dedup_counting sized for (n, p): 4x the classic bits
 *   cuckoo-12     dedup_cuckoo, capacity n, p -> 12-bit fingerprints, b = 4
 *
 * Per filter: insert (n keys), query present (min(n, Q) keys), query
 * absent (Q fresh keys; the fraction found is the measured FPR), delete
 * (min(n, Q) keys; counting and cuckoo), in ns per key of CPU time
 * (CLOCK_PROCESS_CPUTIME_ID, so time the shared machine gives to other
 * processes is not counted; memory stalls are), including generating and
 * hashing the key.  "1" = one call per key; "batch" = digests of 1024 keys
 * then the batch call (prefetching).  Bits per key = memory_usage * 8 / n.
 *
 * Scalable: test_and_add_batch of 1,000 -> N keys at p from a 1,000-key
 * first link (growth 2, r = 0.9), then bits per item and the measured FPR
 * over 1M fresh keys (and for comparison the same chain with r = 0.5).
 *
 * --huge gives every structure an allocator that maps large blocks with
 * MADV_HUGEPAGE (2 MiB pages, as the dedup command line does); without it
 * they use malloc (4 KiB pages: most random accesses also miss the TLB).
 */
#define _DEFAULT_SOURCE
#include "dedup/bloom.h"
#include "dedup/counting.h"
#include "dedup/cuckoo.h"
#include "dedup/scalable.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define CHUNK 1024

static uint64_t g_seed = 42;

/* --huge: an allocator hook that maps blocks of 1 MiB and more with
 * MADV_HUGEPAGE (what the dedup command line does, cli/hugealloc.c), given
 * to every structure alike; otherwise NULL (malloc). */
static const dedup_allocator *g_alloc;

typedef struct hhdr { size_t map_len; void *map; size_t pad[6]; } hhdr; /* 64 bytes */

static void *h_malloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size < ((size_t)1 << 20)) {
        hhdr *h = malloc(sizeof *h + size);
        if (!h)
            return NULL;
        h->map_len = 0;
        return h + 1;
    }
    size_t align = (size_t)2 << 20, len = size + sizeof(hhdr) + align;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)p + sizeof(hhdr) + align - 1) & ~(uintptr_t)(align - 1);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)a, size & ~(align - 1), MADV_HUGEPAGE);
#endif
    hhdr *h = (hhdr *)a - 1;
    h->map_len = len;
    h->map = p;
    return (void *)a;
}
static void *h_calloc(void *ctx, size_t n, size_t size)
{
    size_t total = n * size;
    unsigned char *p = h_malloc(ctx, total);
    if (p && ((hhdr *)p - 1)->map_len == 0)
        memset(p, 0, total); /* fresh mappings are already zero */
    return p;
}
static void h_free(void *ctx, void *ptr)
{
    (void)ctx;
    if (!ptr)
        return;
    hhdr *h = (hhdr *)ptr - 1;
    if (h->map_len)
        munmap(h->map, h->map_len);
    else
        free(h);
}
static const dedup_allocator huge_alloc = {h_malloc, h_calloc, NULL, h_free, NULL};

static inline uint64_t mix(uint64_t z)
{
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Keys: present = mix(seed + i), absent = mix(seed' + i). */
static inline dedup_digest key_present(uint64_t i, uint64_t hseed)
{
    return dedup_hash_u64(mix(g_seed + i), hseed);
}
static inline dedup_digest key_absent(uint64_t i, uint64_t hseed)
{
    return dedup_hash_u64(mix(~g_seed - UINT64_C(0x5555555555555555) + i), hseed);
}

typedef struct result {
    char name[32];
    const char *api;
    double bits_per_key;
    double ins, qp, qa, del; /* ns per key; < 0: not measured */
    double fpr;
    uint64_t failed;         /* inserts that failed (cuckoo FULL) */
} result;

static void print_header(uint64_t n, double p)
{
    printf("\n### n = %llu keys, p = %g\n\n", (unsigned long long)n, p);
    printf("| filter | api | bits/key | insert ns | query present ns | query absent ns | delete ns | "
           "measured FPR |\n|---|---|---|---|---|---|---|---|\n");
}

static void print_row(const result *r)
{
    printf("| %s | %s | %.2f | %.1f | %.1f | %.1f | ", r->name, r->api, r->bits_per_key, r->ins,
           r->qp, r->qa);
    if (r->del >= 0)
        printf("%.1f", r->del);
    else
        printf("-");
    printf(" | %.5f |", r->fpr);
    if (r->failed)
        printf(" (%llu inserts failed)", (unsigned long long)r->failed);
    printf("\n");
    fflush(stdout);
}

/* ---- Bloom (classic, blocked) --------------------------------------------------- */

/* ---- timed queries, shared by every filter --------------------------------------------- */

/* One filter's queries ('one' may be NULL for filters timed in batches only). */
typedef struct query_ops {
    bool (*one)(const void *f, dedup_digest d);
    void (*batch)(const void *f, const dedup_digest *d, size_t n, bool *out);
} query_ops;

/* Asks for keys 0..q-1 of the inserted (present) or never inserted set;
 * returns ns per query and adds the positive answers to *hits. */
static double time_queries(const void *f, const query_ops *ops, bool present, uint64_t q,
                           uint64_t hs, bool batch, uint64_t *hits)
{
    dedup_digest d[CHUNK];
    bool out[CHUNK];
    double t = now();
    for (uint64_t i = 0; i < q; i += CHUNK) {
        size_t m = q - i < CHUNK ? (size_t)(q - i) : CHUNK;
        if (batch) {
            for (size_t j = 0; j < m; j++)
                d[j] = present ? key_present(i + j, hs) : key_absent(i + j, hs);
            ops->batch(f, d, m, out);
            for (size_t j = 0; j < m; j++)
                *hits += out[j];
        } else {
            for (size_t j = 0; j < m; j++)
                *hits += ops->one(f, present ? key_present(i + j, hs) : key_absent(i + j, hs));
        }
    }
    return (now() - t) * 1e9 / (double)q;
}

static bool bloom_one(const void *f, dedup_digest d) { return dedup_bloom_might_contain(f, d); }
static void bloom_batch(const void *f, const dedup_digest *d, size_t n, bool *out)
{
    dedup_bloom_might_contain_batch(f, d, n, out);
}
static const query_ops bloom_q = {bloom_one, bloom_batch};
static void counting_batch(const void *f, const dedup_digest *d, size_t n, bool *out)
{
    dedup_counting_might_contain_batch(f, d, n, out);
}
static const query_ops counting_q = {NULL, counting_batch};
static bool cuckoo_one(const void *f, dedup_digest d) { return dedup_cuckoo_might_contain(f, d); }
static void cuckoo_batch(const void *f, const dedup_digest *d, size_t n, bool *out)
{
    dedup_cuckoo_might_contain_batch(f, d, n, out);
}
static const query_ops cuckoo_q = {cuckoo_one, cuckoo_batch};
static void scalable_batch(const void *f, const dedup_digest *d, size_t n, bool *out)
{
    dedup_scalable_might_contain_batch(f, d, n, out);
}
static const query_ops scalable_q = {NULL, scalable_batch};

static void bench_bloom(dedup_bloom_kind kind, uint64_t n, double p, uint64_t q, bool batch,
                        result *r)
{
    dedup_bloom_params bp;
    dedup_bloom_params_init(&bp);
    bp.kind = kind;
    bp.capacity = n;
    bp.fpr = p;
    dedup_bloom *bf;
    if (dedup_bloom_create(&bp, g_alloc, &bf)) {
        fprintf(stderr, "bloom create failed\n");
        exit(1);
    }
    uint64_t hs = dedup_bloom_seed(bf);
    snprintf(r->name, sizeof r->name, "%s", kind == DEDUP_BLOOM_CLASSIC ? "classic" : "blocked");
    r->api = batch ? "batch" : "1";
    dedup_digest d[CHUNK];
    uint64_t qp = q < n ? q : n, hits = 0;
    double t = now();
    for (uint64_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? (size_t)(n - i) : CHUNK;
        if (batch) {
            for (size_t j = 0; j < m; j++)
                d[j] = key_present(i + j, hs);
            dedup_bloom_add_batch(bf, d, m);
        } else {
            for (size_t j = 0; j < m; j++)
                dedup_bloom_add(bf, key_present(i + j, hs));
        }
    }
    r->ins = (now() - t) * 1e9 / (double)n;
    r->qp = time_queries(bf, &bloom_q, true, qp, hs, batch, &hits);
    if (hits != qp) {
        fprintf(stderr, "FALSE NEGATIVE in %s\n", r->name);
        exit(1);
    }
    hits = 0;
    r->qa = time_queries(bf, &bloom_q, false, q, hs, batch, &hits);
    r->fpr = (double)hits / (double)q;
    r->del = -1;
    r->bits_per_key = (double)dedup_bloom_memory_usage(bf) * 8 / (double)n;
    dedup_bloom_free(bf);
}

/* ---- counting -------------------------------------------------------------------------- */

static void bench_counting(uint64_t n, double p, uint64_t q, result *r)
{
    dedup_counting_params cp;
    dedup_counting_params_init(&cp);
    cp.capacity = n;
    cp.fpr = p;
    dedup_counting *cb;
    if (dedup_counting_create(&cp, g_alloc, &cb)) {
        fprintf(stderr, "counting create failed\n");
        exit(1);
    }
    uint64_t hs = dedup_counting_seed(cb);
    snprintf(r->name, sizeof r->name, "counting");
    r->api = "batch (delete 1)";
    dedup_digest d[CHUNK];
    uint64_t qp = q < n ? q : n, hits = 0;
    double t = now();
    for (uint64_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? (size_t)(n - i) : CHUNK;
        for (size_t j = 0; j < m; j++)
            d[j] = key_present(i + j, hs);
        dedup_counting_add_batch(cb, d, m);
    }
    r->ins = (now() - t) * 1e9 / (double)n;
    r->qp = time_queries(cb, &counting_q, true, qp, hs, true, &hits);
    if (hits != qp) {
        fprintf(stderr, "FALSE NEGATIVE in counting\n");
        exit(1);
    }
    hits = 0;
    r->qa = time_queries(cb, &counting_q, false, q, hs, true, &hits);
    r->fpr = (double)hits / (double)q;
    r->bits_per_key = (double)dedup_counting_memory_usage(cb) * 8 / (double)n;
    t = now();
    for (uint64_t i = 0; i < qp; i++)
        if (dedup_counting_delete(cb, key_present(i, hs)) != DEDUP_OK) {
            fprintf(stderr, "counting delete failed\n");
            exit(1);
        }
    r->del = (now() - t) * 1e9 / (double)qp;
    dedup_counting_free(cb);
}

/* ---- cuckoo ------------------------------------------------------------------------------ */

static void bench_cuckoo(uint64_t n, double p, uint64_t q, bool batch, result *r)
{
    dedup_cuckoo_params kp;
    dedup_cuckoo_params_init(&kp);
    kp.capacity = n;
    kp.fpr = p;
    dedup_cuckoo *cf;
    if (dedup_cuckoo_create(&kp, g_alloc, &cf)) {
        fprintf(stderr, "cuckoo create failed\n");
        exit(1);
    }
    dedup_cuckoo_info info;
    dedup_cuckoo_get_info(cf, &info);
    uint64_t hs = info.seed;
    snprintf(r->name, sizeof r->name, "cuckoo-%u", info.fingerprint_bits);
    r->api = batch ? "batch" : "1";
    dedup_digest d[CHUNK];
    uint64_t qp = q < n ? q : n, hits = 0;
    r->failed = 0;
    double t = now();
    for (uint64_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? (size_t)(n - i) : CHUNK;
        if (batch) {
            for (size_t j = 0; j < m; j++)
                d[j] = key_present(i + j, hs);
            size_t off = 0;
            while (off < m) {
                size_t added = 0;
                if (dedup_cuckoo_add_batch(cf, d + off, m - off, &added) != DEDUP_OK) {
                    r->failed++;
                    added++;
                }
                off += added;
            }
        } else {
            for (size_t j = 0; j < m; j++)
                if (dedup_cuckoo_add(cf, key_present(i + j, hs)) != DEDUP_OK)
                    r->failed++;
        }
    }
    r->ins = (now() - t) * 1e9 / (double)n;
    r->qp = time_queries(cf, &cuckoo_q, true, qp, hs, batch, &hits);
    if (hits + r->failed < qp) {
        fprintf(stderr, "FALSE NEGATIVE in cuckoo\n");
        exit(1);
    }
    hits = 0;
    r->qa = time_queries(cf, &cuckoo_q, false, q, hs, batch, &hits);
    r->fpr = (double)hits / (double)q;
    dedup_cuckoo_get_info(cf, &info);
    r->bits_per_key = (double)dedup_cuckoo_memory_usage(cf) * 8 / (double)n;
    fprintf(stderr, "  cuckoo load %.4f (%llu buckets)\n", info.load,
            (unsigned long long)info.buckets);
    t = now();
    for (uint64_t i = 0; i < qp; i++)
        (void)dedup_cuckoo_delete(cf, key_present(i, hs));
    r->del = (now() - t) * 1e9 / (double)qp;
    dedup_cuckoo_free(cf);
}

/* ---- scalable --------------------------------------------------------------------------- */

static void bench_scalable(uint64_t n, double p, double r_tight, uint64_t q)
{
    dedup_scalable_params sp;
    dedup_scalable_params_init(&sp);
    sp.capacity = 1000;
    sp.fpr = p;
    sp.tightening = r_tight;
    dedup_scalable *sb;
    if (dedup_scalable_create(&sp, g_alloc, &sb)) {
        fprintf(stderr, "scalable create failed\n");
        exit(1);
    }
    uint64_t hs = sp.seed;
    dedup_digest d[CHUNK];
    dedup_verdict v[CHUNK];
    uint64_t maybe = 0;
    double t = now();
    for (uint64_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? (size_t)(n - i) : CHUNK, done;
        for (size_t j = 0; j < m; j++)
            d[j] = key_present(i + j, hs);
        if (dedup_scalable_test_and_add_batch(sb, d, m, v, &done) != DEDUP_OK) {
            fprintf(stderr, "scalable add failed\n");
            exit(1);
        }
        for (size_t j = 0; j < m; j++)
            maybe += v[j] == DEDUP_MAYBE_DUPLICATE;
    }
    double ins = (now() - t) * 1e9 / (double)n;
    uint64_t hits = 0;
    double qa = time_queries(sb, &scalable_q, false, q, hs, true, &hits);
    dedup_scalable_info info;
    dedup_scalable_get_info(sb, &info);
    printf("| %.2f | %llu | %u | %.2f | %.2f | %.1f | %.1f | %.5f | %.5f | %.5f | %llu |\n", r_tight,
           (unsigned long long)n, info.links, (double)info.memory * 8 / (double)info.items,
           (double)info.bits / (double)info.items, ins, qa, (double)hits / (double)q,
           info.fpr_current, info.fpr_bound, (unsigned long long)maybe);
    fflush(stdout);
    dedup_scalable_free(sb);
}

static int parse_list(const char *s, uint64_t *out, int max)
{
    int c = 0;
    while (*s && c < max) {
        char *e;
        double v = strtod(s, &e);
        if (e == s)
            return -1;
        out[c++] = (uint64_t)v;
        s = *e == ',' ? e + 1 : e;
    }
    return c;
}

int main(int argc, char **argv)
{
    uint64_t ns[8] = {10000000};
    int nn = 1;
    double p = 0.01;
    uint64_t q = 10000000, sc_to = 10000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            nn = parse_list(argv[++i], ns, 8);
        } else if (!strcmp(argv[i], "--p") && i + 1 < argc) {
            p = strtod(argv[++i], NULL);
        } else if (!strcmp(argv[i], "--queries") && i + 1 < argc) {
            q = (uint64_t)strtod(argv[++i], NULL);
        } else if (!strcmp(argv[i], "--scalable-to") && i + 1 < argc) {
            sc_to = (uint64_t)strtod(argv[++i], NULL);
        } else if (!strcmp(argv[i], "--huge")) {
            g_alloc = &huge_alloc;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            g_seed = strtoull(argv[++i], NULL, 0);
        } else {
            fprintf(stderr,
                    "usage: %s [--n N[,N...]] [--p P] [--queries Q] [--scalable-to N|0] "
                    "[--huge] [--seed S]\n",
                    argv[0]);
            return 2;
        }
    }
    if (nn <= 0 || !(p > 0 && p < 1) || q == 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    for (int a = 0; a < nn; a++) {
        uint64_t n = ns[a];
        print_header(n, p);
        result rc, rb, r;
        memset(&rc, 0, sizeof rc);
        memset(&rb, 0, sizeof rb);
        bench_bloom(DEDUP_BLOOM_CLASSIC, n, p, q, false, &rc);
        print_row(&rc);
        memset(&r, 0, sizeof r);
        bench_bloom(DEDUP_BLOOM_CLASSIC, n, p, q, true, &r);
        print_row(&r);
        memset(&rb, 0, sizeof rb);
        bench_bloom(DEDUP_BLOOM_BLOCKED, n, p, q, true, &rb);
        print_row(&rb);
        result rcount;
        memset(&rcount, 0, sizeof rcount);
        bench_counting(n, p, q, &rcount);
        print_row(&rcount);
        result rk1, rk;
        memset(&rk1, 0, sizeof rk1);
        bench_cuckoo(n, p, q, false, &rk1);
        print_row(&rk1);
        memset(&rk, 0, sizeof rk);
        bench_cuckoo(n, p, q, true, &rk);
        print_row(&rk);
        printf("\nRatios at n = %llu: counting bits / classic bits = %.2f (target <= 4.1); "
               "cuckoo-12 batch: insert %.1f ns (target <= 200), query present %.1f / absent "
               "%.1f ns (target <= 55), %.2f bits/key (target <= 12.8); cuckoo query absent vs "
               "blocked batch = %.2fx\n",
               (unsigned long long)n, rcount.bits_per_key / rc.bits_per_key, rk.ins, rk.qp, rk.qa,
               rk.bits_per_key, rk.qa / rb.qa);
    }
    if (sc_to) {
        uint64_t sq = 1000000;
        printf("\n### scalable Bloom grown from 1,000 to %llu keys, p = %g, growth 2, classic links, "
               "%llu fresh queries\n\n",
               (unsigned long long)sc_to, p, (unsigned long long)sq);
        printf("| r | items | links | bits/item (memory) | bits/item (filter bits) | insert ns | "
               "query absent ns | measured FPR | expected FPR | bound | MAYBE verdicts on new keys |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|\n");
        bench_scalable(sc_to, p, 0.9, sq);
        bench_scalable(sc_to, p, 0.5, sq);
    }
    return 0;
}
