/*
 * bloom.c - classic and blocked Bloom filters (include/dedup/bloom.h).
 *
 * Both layouts keep their bits in one array of 64-bit words, 64-byte
 * aligned, and derive every index from the key's 128-bit digest:
 *
 *  classic  enhanced double hashing, in one of two probe schemes kept in
 *           the file (the params' last word; a loaded filter keeps its own):
 *           0 (files written before scheme 1): probe i at
 *             reduce(lo + i*hi + (i^3 - i)/6, m), the sums in 2^64, computed
 *             incrementally (x += y; y += i + 1).  The increments are nothing
 *             against 2^64 / m, so a digest whose step hi * m / 2^64 lies
 *             within a bit of 0 (or of m*a/j for a small j) puts its k probes
 *             on 1 (j) bits: a false-positive floor of about 1 / (m k), far
 *             above a tiny p.
 *           1 (every filter created now): probe i at
 *             (reduce(lo + i*hi + (i^3 - i)/6, m) + i(i + 1)/2) mod m: the
 *             triangular term, in whole bits, spreads the probes of any step.
 *             (Reducing lo and hi to bits first and stepping mod m would
 *             spread them too, but two keys would then share all k probes
 *             with probability 1/m^2, another floor near n/m^2 per key.)
 *  blocked  block = reduce(lo, m/512); bit i of the key inside the block at
 *           (hi * SALT[i]) >> 55, i < k <= 16.
 *
 * Writers branch once per call on thread_safe: plain loads and ORs when
 * false, relaxed __atomic_fetch_or / __atomic_load_n when true.  Relaxed is
 * enough: a bit once set is never cleared by a concurrent writer, so every
 * thread's OR lands and nothing orders the bits against other memory.
 *
 * The blocked layout's false-positive model (blocked_fpr_lambda below) is exact
 * for the scheme, treating the k in-block positions as independent uniform
 * draws with replacement: a block holding j keys has received j*k balls in
 * 512 bins, its occupancy S_j has a distribution computed by a dynamic
 * programme over balls, a fresh key that lands there is a false positive
 * with probability E[(S_j/512)^k], and the number of keys per block is
 * Poisson(n / blocks).  Nothing is cached between calls.
 */
#include "dedup/bloom.h"

#include "dedup/limits.h"
#include "internal.h"

#include <math.h>

#define BLOCK_BITS 512u
#define BLOCK_WORDS 8u
#define BLOCKED_MAX_K 16u
#define PARAMS_LEN 32u
/* The classic probe schemes (the top of the file), the params' last word. */
#define CLASSIC_PROBE_LEGACY 0u
#define CLASSIC_PROBE_SPREAD 1u

/* Odd multipliers for the in-block positions (splitmix64 outputs, low bit
 * forced).  Pinned: changing one changes every blocked filter file. */
static const uint64_t SALT[BLOCKED_MAX_K] = {
    UINT64_C(0x157A3807A48FAA9D), UINT64_C(0xD573529B34A1D093), UINT64_C(0x2F90B72E996DCCBF),
    UINT64_C(0xA2D419334C4667ED), UINT64_C(0x01404CE914938009), UINT64_C(0x14BC574C2A2B4C73),
    UINT64_C(0xB8FC5B1060708C05), UINT64_C(0x8931545F4F9EA651), UINT64_C(0xF984DB4EF14FDE1B),
    UINT64_C(0x2680D065CB73ECE7), UINT64_C(0xCDB8C9CD9A62DA0F), UINT64_C(0x6A6E60FD5089ADED),
    UINT64_C(0x8EBA85B28DF77747), UINT64_C(0x97F6C69811CFB13B), UINT64_C(0x380E8B5C685039CF),
    UINT64_C(0xD7EBCCA19D49C3F5)};

struct dedup_bloom {
    uint64_t *words;   /* 64-byte aligned */
    void *raw;         /* what ddi_free() takes */
    uint64_t bits;     /* m */
    uint64_t nwords;   /* ceil(m / 64) */
    uint64_t nblocks;  /* blocked: m / 512 */
    uint64_t capacity; /* n planned, 0 if sized by bits */
    double fpr;        /* p asked for */
    uint64_t seed;
    uint32_t k;
    uint32_t probe;    /* classic: CLASSIC_PROBE_* (the params' last word) */
    dedup_bloom_kind kind;
    bool thread_safe;
    dedup_allocator alloc;
};

/* ======================================================================
 * Sizing: classic
 * ====================================================================== */

#define LN2 0.69314718055994530942
#define LN2_SQ 0.48045301391820142467

static bool valid_p(double p) { return p > 0.0 && p < 1.0; }

uint64_t dedup_bloom_bits_for(uint64_t n, double p)
{
    if (n == 0 || !valid_p(p))
        return 0;
    double m = ceil(-(double)n * log(p) / LN2_SQ);
    if (!(m < 18446744073709551616.0)) /* 2^64 */
        return UINT64_MAX;
    return m < 1.0 ? 1 : (uint64_t)m;
}

uint32_t dedup_bloom_k_for(uint64_t n, uint64_t bits)
{
    if (n == 0 || bits == 0)
        return 0;
    double k = round((double)bits / (double)n * LN2);
    if (k < 1.0)
        return 1;
    if (k > DEDUP_MAX_BLOOM_K)
        return DEDUP_MAX_BLOOM_K;
    return (uint32_t)k;
}

double dedup_bloom_fpr_for(uint64_t n, uint64_t bits, uint32_t k)
{
    if (n == 0 || bits == 0 || k == 0)
        return 0.0;
    /* Probability that one given bit is still 0 after k*n probes. */
    double zero = exp((double)k * (double)n * log1p(-1.0 / (double)bits));
    return pow(1.0 - zero, (double)k);
}

uint64_t dedup_bloom_capacity_for(uint64_t bits, double p)
{
    if (bits == 0 || !valid_p(p))
        return 0;
    /* The largest n with bits_for(n, p) <= bits: the exact inverse. */
    double est = floor((double)bits * LN2_SQ / -log(p));
    if (est < 0.0)
        est = 0.0;
    if (est > 1.8e19)
        est = 1.8e19;
    uint64_t n = (uint64_t)est;
    while (n > 0 && dedup_bloom_bits_for(n, p) > bits)
        n--;
    while (n < UINT64_MAX && dedup_bloom_bits_for(n + 1, p) <= bits)
        n++;
    return n;
}

/* ======================================================================
 * Sizing: blocked (the exact model)
 * ====================================================================== */

/* ln(j!) : exact sum below 32, Stirling's series above (error < 1e-15). */
static double log_factorial(double j)
{
    if (j < 32.0) {
        double s = 0.0;
        for (double i = 2.0; i <= j; i += 1.0)
            s += log(i);
        return s;
    }
    double inv = 1.0 / j, inv2 = inv * inv;
    return j * log(j) - j + 0.5 * log(2.0 * 3.14159265358979323846 * j) +
           inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 / 1260.0));
}

static double poisson_pmf(double lambda, double j)
{
    if (lambda <= 0.0)
        return j == 0.0 ? 1.0 : 0.0;
    return exp(-lambda + j * log(lambda) - log_factorial(j));
}

/* Balls beyond which every bin of a block is occupied except with
 * probability 512 * e^-48 < 1e-18: E[(S/512)^k] is 1 to double precision. */
#define SATURATED_BALLS (48u * BLOCK_BITS)

/* FPR of a blocked filter with mean lambda keys per block and k positions
 * per key.  dist[s] = P(S = s) after t balls, advanced one ball at a time;
 * at every multiple of k inside the Poisson window the conditional FPR is
 * accumulated. */
static double blocked_fpr_lambda(double lambda, uint32_t k)
{
    if (lambda <= 0.0)
        return 0.0;
    double sd = sqrt(lambda);
    double jlo = floor(lambda - 12.0 * sd - 30.0), jhi = ceil(lambda + 12.0 * sd + 30.0);
    if (jlo < 0.0)
        jlo = 0.0;
    double jsat = ceil((double)SATURATED_BALLS / k); /* j from which g(j) = 1 */
    if (jlo >= jsat)
        return 1.0; /* every block that matters is saturated */

    double powk[BLOCK_BITS + 1];
    for (unsigned s = 0; s <= BLOCK_BITS; s++)
        powk[s] = pow((double)s / BLOCK_BITS, (double)k);

    double dist[BLOCK_BITS + 1];
    for (unsigned s = 0; s <= BLOCK_BITS; s++)
        dist[s] = 0.0;
    dist[0] = 1.0;
    /* dist[s] is negligible (< TINY) outside [bot, top]; the occupancy is
     * concentrated, so this cuts the work per ball several times. */
    const double TINY = 1e-40;
    unsigned bot = 0, top = 0;

    double sum = 0.0;
    double jdp_end = jhi < jsat ? jhi : jsat - 1.0;
    for (double j = 0.0; j <= jdp_end; j += 1.0) {
        if (j >= jlo) {
            double g = 0.0;
            for (unsigned s = bot; s <= top; s++)
                g += dist[s] * powk[s];
            sum += poisson_pmf(lambda, j) * g;
        }
        if (j == jdp_end)
            break;
        /* k more balls: a ball lands in an occupied bin (prob s/512) or
         * occupies a new one. */
        for (uint32_t b = 0; b < k; b++) {
            unsigned nt = top < BLOCK_BITS ? top + 1 : BLOCK_BITS;
            if (nt > top)
                dist[nt] = 0.0;
            for (unsigned s = nt; s > bot; s--)
                dist[s] = dist[s] * ((double)s / BLOCK_BITS) +
                          dist[s - 1] * ((double)(BLOCK_BITS - s + 1) / BLOCK_BITS);
            dist[bot] *= (double)bot / BLOCK_BITS;
            top = nt;
            while (bot < top && dist[bot] < TINY)
                dist[bot++] = 0.0;
            while (top > bot && dist[top] < TINY)
                dist[top--] = 0.0;
        }
    }
    /* Saturated blocks answer yes for certain. */
    for (double j = jsat > jlo ? jsat : jlo; j <= jhi; j += 1.0)
        sum += poisson_pmf(lambda, j);
    return sum > 1.0 ? 1.0 : sum;
}

double dedup_blocked_fpr_for(uint64_t n, uint64_t bits, uint32_t k)
{
    if (n == 0 || bits < BLOCK_BITS || k == 0 || k > BLOCKED_MAX_K)
        return 0.0;
    uint64_t nblocks = bits / BLOCK_BITS;
    return blocked_fpr_lambda((double)n / (double)nblocks, k);
}

/* The FPR is unimodal in k at a fixed lambda (it falls while another probe
 * rejects more fresh keys than the extra bits it sets admit, then rises), so
 * the searches over k below walk from a good start towards lower values and
 * stop at the first step that is worse: a few model evaluations instead of
 * sixteen.  tests/unit/test_bloom.c checks them against exhaustive scans. */

/* The k in 1..16 with the lowest model FPR for lambda (the smallest such k
 * on a tie), and that FPR; the walk starts at k0. */
static uint32_t blocked_best_k_from(double lambda, uint32_t k0, double *fpr_out)
{
    uint32_t best = k0;
    double bestf = blocked_fpr_lambda(lambda, k0);
    for (uint32_t k = k0 + 1; k <= BLOCKED_MAX_K; k++) {
        double f = blocked_fpr_lambda(lambda, k);
        if (!(f < bestf))
            break;
        best = k;
        bestf = f;
    }
    if (best == k0)
        for (uint32_t k = k0 - 1; k >= 1; k--) {
            double f = blocked_fpr_lambda(lambda, k);
            if (!(f <= bestf))
                break;
            best = k;
            bestf = f;
        }
    if (fpr_out)
        *fpr_out = bestf;
    return best;
}

/* The classic optimal k for mean lambda keys per 512-bit block: a start for
 * the walks. */
static uint32_t blocked_k_guess(double lambda)
{
    double kc = round((double)BLOCK_BITS / lambda * LN2);
    return kc < 1.0 ? 1 : kc > BLOCKED_MAX_K ? BLOCKED_MAX_K : (uint32_t)kc;
}

static uint32_t blocked_best_k(double lambda, double *fpr_out)
{
    return blocked_best_k_from(lambda, blocked_k_guess(lambda), fpr_out);
}

uint32_t dedup_blocked_k_for(uint64_t n, uint64_t bits)
{
    if (n == 0 || bits < BLOCK_BITS)
        return 0;
    return blocked_best_k((double)n / (double)(bits / BLOCK_BITS), NULL);
}

/* Smallest block count whose FPR with k probes is <= p, searched in
 * [lo, hi] where fpr(hi) <= p is known; returns hi if none lower.  The
 * FPR falls with the block count, smoothly: each step interpolates log FPR
 * linearly between the bracket's ends (once both are known), and falls back
 * to halving whenever that did not cut the bracket to a quarter. */
/* The search's bracket and the log FPR at its ends. */
typedef struct bsearch_state {
    uint64_t lo, hi;
    double flo, fhi;
} bsearch_state;

/* Evaluates the FPR at 'mid' (in [lo, hi)) and narrows the bracket. */
static void bsearch_probe(bsearch_state *b, uint64_t n, double p, uint32_t k, uint64_t mid)
{
    double f = blocked_fpr_lambda((double)n / (double)mid, k);
    if (f <= p) {
        b->hi = mid;
        b->fhi = log(f);
    } else {
        b->lo = mid + 1;
        b->flo = log(f);
    }
}

static uint64_t blocks_search(uint64_t n, double p, uint32_t k, uint64_t lo, uint64_t hi)
{
    double lp = log(p);
    /* fhi <= lp; flo = log fpr(lo - 1) > lp, once known */
    bsearch_state b = {lo, hi, NAN, log(blocked_fpr_lambda((double)n / (double)hi, k))};
    while (b.lo < b.hi) {
        uint64_t width = b.hi - b.lo, mid;
        if (!isnan(b.flo) && isfinite(b.fhi) && b.flo > b.fhi) {
            /* x = the block count where the line through (lo - 1, flo) and
             * (hi, fhi) meets lp; probe just above it */
            double x = (double)(b.lo - 1) +
                       (b.flo - lp) / (b.flo - b.fhi) * (double)(b.hi - b.lo + 1);
            mid = x <= (double)b.lo ? b.lo : x >= (double)(b.hi - 1) ? b.hi - 1 : (uint64_t)x;
        } else {
            mid = b.lo + (b.hi - b.lo) / 2;
        }
        bsearch_probe(&b, n, p, k, mid);
        if (b.lo < b.hi && b.hi - b.lo > width / 4 && !isnan(b.flo))
            bsearch_probe(&b, n, p, k, b.lo + (b.hi - b.lo) / 2); /* interpolation crept: halve */
    }
    return b.hi;
}

/* Largest block count we ever size: DEDUP_MAX_BITS / 512.  Beyond it the
 * answer is "more than the limit", reported as that count + 1 blocks. */
#define MAX_BLOCKS (DEDUP_MAX_BITS / BLOCK_BITS)

/* Smallest block count whose model FPR is <= p: with the given k when
 * fixed_k != 0, else with the best k (returned in *k_out). */
static uint64_t blocked_blocks_for(uint64_t n, double p, uint32_t fixed_k, uint32_t *k_out)
{
    /* Start from the classic size (blocked needs at least about as much)
     * with the classic optimal k, then bracket and search; other k values
     * are tried only where they could do better than the best so far. */
    uint64_t cb = dedup_bloom_bits_for(n, p);
    uint64_t guess = cb / BLOCK_BITS + 1;
    if (guess > MAX_BLOCKS)
        guess = MAX_BLOCKS;
    double kc = round(-log(p) / LN2);
    uint32_t k0 = kc < 1.0 ? 1 : kc > BLOCKED_MAX_K ? BLOCKED_MAX_K : (uint32_t)kc;
    if (fixed_k)
        k0 = fixed_k;

    /* Bracket for k0: find hi with fpr(hi) <= p. */
    uint64_t lo = 1, hi = guess;
    while (blocked_fpr_lambda((double)n / (double)hi, k0) > p) {
        lo = hi + 1;
        if (hi >= MAX_BLOCKS) {
            hi = MAX_BLOCKS + 1;
            break;
        }
        hi = hi > MAX_BLOCKS / 2 ? MAX_BLOCKS : hi * 2;
    }
    uint64_t best;
    uint32_t bestk = k0;
    if (hi > MAX_BLOCKS)
        best = MAX_BLOCKS + 1;
    else {
        if (lo == 1 && hi > 1) {
            /* Shrink from below: halve while it still meets p. */
            while (hi > 1 && blocked_fpr_lambda((double)n / (double)(hi / 2), k0) <= p)
                hi /= 2;
            lo = hi / 2 + 1;
            if (lo > hi)
                lo = hi;
        }
        best = blocks_search(n, p, k0, lo, hi);
    }
    if (!fixed_k) {
        /* Another k does better only if it meets p with one block fewer.
         * Those that do form a run of k around the best k there (the FPR
         * is unimodal in k); each gets its own search, smallest wins, the
         * smaller k on a tie. */
        uint64_t cand = best > MAX_BLOCKS ? MAX_BLOCKS : best - 1;
        if (cand > 0) {
            double lc = (double)n / (double)cand, fk;
            uint32_t kb = blocked_best_k_from(lc, k0, &fk);
            if (fk <= p) {
                uint32_t klo = kb, khi = kb;
                while (klo > 1 && blocked_fpr_lambda(lc, klo - 1) <= p)
                    klo--;
                while (khi < BLOCKED_MAX_K && blocked_fpr_lambda(lc, khi + 1) <= p)
                    khi++;
                for (uint32_t k = klo; k <= khi; k++) {
                    if (k == k0)
                        continue;
                    uint64_t b = blocks_search(n, p, k, 1, cand);
                    if (b < best || (b == best && k < bestk)) {
                        best = b;
                        bestk = k;
                    }
                }
            }
        }
    }
    if (best <= MAX_BLOCKS && !fixed_k) {
        /* The k that minimises the FPR at that size (what k_for reports). */
        bestk = blocked_best_k_from((double)n / (double)best, bestk, NULL);
    }
    if (k_out)
        *k_out = bestk;
    return best;
}

uint64_t dedup_blocked_bits_for(uint64_t n, double p)
{
    if (n == 0 || !valid_p(p))
        return 0;
    return blocked_blocks_for(n, p, 0, NULL) * BLOCK_BITS;
}

uint64_t dedup_blocked_capacity_for(uint64_t bits, double p)
{
    if (bits < BLOCK_BITS || !valid_p(p))
        return 0;
    uint64_t nblocks = bits / BLOCK_BITS;
    /* Largest n with min_k fpr(n) <= p.  FPR grows with n for every k. */
    double kc = round(-log(p) / LN2);
    uint32_t k0 = kc < 1.0 ? 1 : kc > BLOCKED_MAX_K ? BLOCKED_MAX_K : (uint32_t)kc;
    uint64_t best = 0;
    for (uint32_t i = 0; i < BLOCKED_MAX_K; i++) {
        /* k0 first, then the others in turn. */
        uint32_t k = i == 0 ? k0 : (i <= k0 - 1 ? i : i + 1);
        if (blocked_fpr_lambda((double)(best + 1) / (double)nblocks, k) > p)
            continue;
        /* Bracket: fpr(lo) <= p, find hi with fpr(hi) > p. */
        uint64_t lo = best + 1, hi = lo;
        for (;;) {
            uint64_t next = hi > UINT64_MAX / 2 ? UINT64_MAX : hi * 2;
            if (blocked_fpr_lambda((double)next / (double)nblocks, k) > p) {
                hi = next;
                break;
            }
            lo = next;
            if (next == UINT64_MAX)
                return UINT64_MAX;
            hi = next;
        }
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (blocked_fpr_lambda((double)mid / (double)nblocks, k) <= p)
                lo = mid;
            else
                hi = mid;
        }
        if (lo > best)
            best = lo;
    }
    return best;
}

/* ======================================================================
 * Creation
 * ====================================================================== */

void dedup_bloom_params_init(dedup_bloom_params *params)
{
    memset(params, 0, sizeof *params);
    params->kind = DEDUP_BLOOM_CLASSIC;
    params->capacity = 0;
    params->fpr = 0.01;
    params->bits = 0;
    params->k = 0;
    params->seed = DEDUP_DEFAULT_SEED;
    params->thread_safe = false;
}

static uint32_t max_k(dedup_bloom_kind kind)
{
    return kind == DEDUP_BLOOM_BLOCKED ? BLOCKED_MAX_K : DEDUP_MAX_BLOOM_K;
}

/* Allocates an empty filter of the given shape; every argument checked by
 * the caller. */
static dedup_status bloom_alloc(dedup_bloom_kind kind, uint64_t bits, uint32_t k,
                                uint64_t capacity, double fpr, uint64_t seed, bool thread_safe,
                                const dedup_allocator *alloc, dedup_bloom **out)
{
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    uint64_t nwords = (bits + 63) / 64;
    size_t bytes;
    if (nwords > SIZE_MAX / 8 || !ddi_mul_size((size_t)nwords, 8, &bytes))
        return DEDUP_ERR_LIMIT;
    dedup_bloom *bf = ddi_malloc(&a, sizeof *bf);
    if (!bf)
        return DEDUP_ERR_NOMEM;
    memset(bf, 0, sizeof *bf);
    bf->alloc = a;
    bf->words = ddi_aligned_calloc(&a, bytes, 64, &bf->raw);
    if (!bf->words) {
        ddi_free(&a, bf);
        return DEDUP_ERR_NOMEM;
    }
    bf->bits = bits;
    bf->nwords = nwords;
    bf->nblocks = kind == DEDUP_BLOOM_BLOCKED ? bits / BLOCK_BITS : 0;
    bf->capacity = capacity;
    bf->fpr = fpr;
    bf->seed = seed;
    bf->k = k;
    bf->probe = kind == DEDUP_BLOOM_CLASSIC ? CLASSIC_PROBE_SPREAD : 0;
    bf->kind = kind;
    bf->thread_safe = thread_safe;
    *out = bf;
    return DEDUP_OK;
}

dedup_status dedup_bloom_create(const dedup_bloom_params *params, const dedup_allocator *alloc,
                                dedup_bloom **out)
{
    if (!params || !out)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_bloom_kind kind = params->kind;
    if (kind != DEDUP_BLOOM_CLASSIC && kind != DEDUP_BLOOM_BLOCKED)
        return DEDUP_ERR_INVALID_ARG;
    double p = params->fpr;
    if (!(p >= DEDUP_MIN_FPR && p < 1.0))
        return DEDUP_ERR_INVALID_ARG;
    if (params->capacity == 0 && params->bits == 0)
        return DEDUP_ERR_INVALID_ARG;
    if (params->k > max_k(kind))
        return DEDUP_ERR_INVALID_ARG;

    uint64_t bits = params->bits;
    uint32_t k = params->k;
    if (kind == DEDUP_BLOOM_CLASSIC) {
        if (bits == 0)
            bits = dedup_bloom_bits_for(params->capacity, p);
        if (bits > DEDUP_MAX_BITS)
            return DEDUP_ERR_LIMIT;
        if (k == 0) {
            if (params->capacity)
                k = dedup_bloom_k_for(params->capacity, bits);
            else {
                /* Sized by bits alone: the k that is optimal when the
                 * filter holds as many keys as reach p. */
                double kc = round(-log(p) / LN2);
                k = kc < 1.0 ? 1 : kc > DEDUP_MAX_BLOOM_K ? DEDUP_MAX_BLOOM_K : (uint32_t)kc;
            }
        }
    } else {
        if (bits == 0) {
            uint64_t nb = blocked_blocks_for(params->capacity, p, k, k ? NULL : &k);
            if (nb > MAX_BLOCKS)
                return DEDUP_ERR_LIMIT;
            bits = nb * BLOCK_BITS;
        } else {
            if (bits > DEDUP_MAX_BITS)
                return DEDUP_ERR_LIMIT;
            bits = (bits + BLOCK_BITS - 1) / BLOCK_BITS * BLOCK_BITS;
            if (k == 0) {
                uint64_t n = params->capacity ? params->capacity
                                              : dedup_blocked_capacity_for(bits, p);
                k = n ? dedup_blocked_k_for(n, bits) : 1;
            }
        }
    }
    if (bits == 0 || bits > DEDUP_MAX_BITS)
        return DEDUP_ERR_LIMIT;
    return bloom_alloc(kind, bits, k, params->capacity, p, params->seed, params->thread_safe,
                       alloc, out);
}

void dedup_bloom_free(dedup_bloom *bf)
{
    if (!bf)
        return;
    dedup_allocator a = bf->alloc;
    ddi_free(&a, bf->raw);
    ddi_free(&a, bf);
}

/* ======================================================================
 * Hot paths
 * ====================================================================== */

dedup_digest dedup_bloom_digest(const dedup_bloom *bf, const void *key, size_t len)
{
    return dedup_hash(key, len, bf->seed);
}

static inline uint64_t load_word(const uint64_t *w, bool ts)
{
    return ts ? __atomic_load_n(w, __ATOMIC_RELAXED) : *w;
}

/* ---- classic ---- */

/* One key's probe sequence (see the top of the file). */
typedef struct cprobe {
    uint64_t x, y, t, m;
    bool spread;
} cprobe;

static inline cprobe cp_start(const dedup_bloom *bf, dedup_digest d)
{
    return (cprobe){d.lo, d.hi, 0, bf->bits, bf->probe == CLASSIC_PROBE_SPREAD};
}

static inline uint64_t cp_bit(const cprobe *p)
{
    uint64_t b = dedup_reduce(p->x, p->m);
    if (p->spread) { /* b, t < m <= DEDUP_MAX_BITS: no wrap in 64 bits */
        b += p->t;
        if (b >= p->m)
            b -= p->m;
    }
    return b;
}

/* To probe i + 1 after probe i. */
static inline void cp_next(cprobe *p, uint32_t i)
{
    p->x += p->y;
    p->y += i + 1;
    if (p->spread) {
        p->t += i + 1;
        if (p->t >= p->m)
            p->t %= p->m;
    }
}

static inline void classic_add(dedup_bloom *bf, dedup_digest d)
{
    cprobe p = cp_start(bf, d);
    uint64_t *w = bf->words;
    uint32_t k = bf->k;
    if (bf->thread_safe) {
        for (uint32_t i = 0; i < k; i++) {
            uint64_t b = cp_bit(&p);
            __atomic_fetch_or(&w[b >> 6], UINT64_C(1) << (b & 63), __ATOMIC_RELAXED);
            cp_next(&p, i);
        }
    } else {
        for (uint32_t i = 0; i < k; i++) {
            uint64_t b = cp_bit(&p);
            w[b >> 6] |= UINT64_C(1) << (b & 63);
            cp_next(&p, i);
        }
    }
}

static inline bool classic_query(const dedup_bloom *bf, dedup_digest d)
{
    cprobe p = cp_start(bf, d);
    const uint64_t *w = bf->words;
    uint32_t k = bf->k;
    bool ts = bf->thread_safe;
    for (uint32_t i = 0; i < k; i++) {
        uint64_t b = cp_bit(&p);
        if (!(load_word(&w[b >> 6], ts) >> (b & 63) & 1))
            return false;
        cp_next(&p, i);
    }
    return true;
}

static inline bool classic_test_and_add(dedup_bloom *bf, dedup_digest d)
{
    cprobe p = cp_start(bf, d);
    uint64_t *w = bf->words;
    uint32_t k = bf->k;
    uint64_t all = 1;
    if (bf->thread_safe) {
        for (uint32_t i = 0; i < k; i++) {
            uint64_t b = cp_bit(&p);
            uint64_t bit = UINT64_C(1) << (b & 63);
            uint64_t old = __atomic_fetch_or(&w[b >> 6], bit, __ATOMIC_RELAXED);
            all &= (old & bit) != 0;
            cp_next(&p, i);
        }
    } else {
        for (uint32_t i = 0; i < k; i++) {
            uint64_t b = cp_bit(&p);
            uint64_t bit = UINT64_C(1) << (b & 63);
            uint64_t old = w[b >> 6];
            all &= (old & bit) != 0;
            w[b >> 6] = old | bit;
            cp_next(&p, i);
        }
    }
    return all != 0;
}

/* ---- blocked ---- */

static inline uint64_t *block_of(const dedup_bloom *bf, dedup_digest d)
{
    return bf->words + dedup_reduce(d.lo, bf->nblocks) * BLOCK_WORDS;
}

/* The key's bits inside its block, as 8 words. */
static inline void block_mask(uint64_t hi, uint32_t k, uint64_t mask[BLOCK_WORDS])
{
    for (unsigned w = 0; w < BLOCK_WORDS; w++)
        mask[w] = 0;
    for (uint32_t i = 0; i < k; i++) {
        unsigned pos = (unsigned)((hi * SALT[i]) >> 55);
        mask[pos >> 6] |= UINT64_C(1) << (pos & 63);
    }
}

/* Position i of a key inside its block, 0..511. */
static inline unsigned block_pos(uint64_t hi, uint32_t i)
{
    return (unsigned)((hi * SALT[i]) >> 55);
}

/* Plain mode touches the k words directly (k loads/stores within one line,
 * cheaper than building a mask); thread-safe mode merges the k bits into
 * per-word masks first so each word gets at most one atomic OR. */
static inline void blocked_add(dedup_bloom *bf, dedup_digest d)
{
    uint64_t *blk = block_of(bf, d);
    uint32_t k = bf->k;
    if (bf->thread_safe) {
        uint64_t mask[BLOCK_WORDS];
        block_mask(d.hi, k, mask);
        for (unsigned w = 0; w < BLOCK_WORDS; w++)
            if (mask[w])
                __atomic_fetch_or(&blk[w], mask[w], __ATOMIC_RELAXED);
    } else {
        for (uint32_t i = 0; i < k; i++) {
            unsigned pos = block_pos(d.hi, i);
            blk[pos >> 6] |= UINT64_C(1) << (pos & 63);
        }
    }
}

static inline bool blocked_query(const dedup_bloom *bf, dedup_digest d)
{
    const uint64_t *blk = block_of(bf, d);
    uint32_t k = bf->k;
    uint64_t all = 1;
    if (bf->thread_safe) {
        for (uint32_t i = 0; i < k; i++) {
            unsigned pos = block_pos(d.hi, i);
            all &= __atomic_load_n(&blk[pos >> 6], __ATOMIC_RELAXED) >> (pos & 63);
        }
    } else {
        for (uint32_t i = 0; i < k; i++) {
            unsigned pos = block_pos(d.hi, i);
            all &= blk[pos >> 6] >> (pos & 63);
        }
    }
    return (all & 1) != 0;
}

static inline bool blocked_test_and_add(dedup_bloom *bf, dedup_digest d)
{
    uint64_t *blk = block_of(bf, d);
    uint32_t k = bf->k;
    uint64_t miss = 0;
    if (bf->thread_safe) {
        uint64_t mask[BLOCK_WORDS];
        block_mask(d.hi, k, mask);
        for (unsigned w = 0; w < BLOCK_WORDS; w++)
            if (mask[w])
                miss |= mask[w] & ~__atomic_fetch_or(&blk[w], mask[w], __ATOMIC_RELAXED);
    } else {
        for (uint32_t i = 0; i < k; i++) {
            unsigned pos = block_pos(d.hi, i);
            uint64_t bit = UINT64_C(1) << (pos & 63);
            uint64_t old = blk[pos >> 6];
            miss |= bit & ~old;
            blk[pos >> 6] = old | bit;
        }
    }
    return miss == 0;
}

/* ---- public single-key forms ---- */

void dedup_bloom_add(dedup_bloom *bf, dedup_digest d)
{
    if (bf->kind == DEDUP_BLOOM_BLOCKED)
        blocked_add(bf, d);
    else
        classic_add(bf, d);
}

bool dedup_bloom_might_contain(const dedup_bloom *bf, dedup_digest d)
{
    return bf->kind == DEDUP_BLOOM_BLOCKED ? blocked_query(bf, d) : classic_query(bf, d);
}

bool dedup_bloom_test_and_add(dedup_bloom *bf, dedup_digest d)
{
    return bf->kind == DEDUP_BLOOM_BLOCKED ? blocked_test_and_add(bf, d)
                                           : classic_test_and_add(bf, d);
}

void dedup_bloom_add_key(dedup_bloom *bf, const void *key, size_t len)
{
    dedup_bloom_add(bf, dedup_hash(key, len, bf->seed));
}

bool dedup_bloom_might_contain_key(const dedup_bloom *bf, const void *key, size_t len)
{
    return dedup_bloom_might_contain(bf, dedup_hash(key, len, bf->seed));
}

bool dedup_bloom_test_and_add_key(dedup_bloom *bf, const void *key, size_t len)
{
    return dedup_bloom_test_and_add(bf, dedup_hash(key, len, bf->seed));
}

/* ---- batches ----------------------------------------------------------
 * Blocked: a rolling window: the block of key i + AHEAD is prefetched while
 * key i is processed, so AHEAD misses stay in flight all the time (a key
 * repeated within the window is still handled in order, so it is found).
 * Classic: the same with all k lines of key i + CLASSIC_AHEAD (k lines per
 * key, so fewer keys ahead: the core tracks only so many misses). */

#define AHEAD 16u
#define CLASSIC_AHEAD 4u

static inline void prefetch_block(const dedup_bloom *bf, dedup_digest d, bool write)
{
    const uint64_t *blk = block_of(bf, d);
    if (write)
        DD_PREFETCH_W(blk);
    else
        DD_PREFETCH(blk);
}

static inline void prefetch_classic(const dedup_bloom *bf, const dedup_digest *d, size_t n,
                                    bool write)
{
    uint32_t k = bf->k;
    for (size_t i = 0; i < n; i++) {
        cprobe pr = cp_start(bf, d[i]);
        for (uint32_t j = 0; j < k; j++) {
            const uint64_t *p = &bf->words[cp_bit(&pr) >> 6];
            if (write)
                DD_PREFETCH_W(p);
            else
                DD_PREFETCH(p);
            cp_next(&pr, j);
        }
    }
}

/* The loop every batch form shares; OP(i) handles d[i]. */
#define BATCH_LOOP(bf, d, n, write, BLOCKED_OP, CLASSIC_OP)                                  \
    do {                                                                                     \
        if ((bf)->kind == DEDUP_BLOOM_BLOCKED) {                                             \
            size_t pre = (n) < AHEAD ? (n) : AHEAD;                                          \
            for (size_t i = 0; i < pre; i++)                                                 \
                prefetch_block((bf), (d)[i], (write));                                       \
            for (size_t i = 0; i < (n); i++) {                                               \
                if (i + AHEAD < (n))                                                         \
                    prefetch_block((bf), (d)[i + AHEAD], (write));                           \
                BLOCKED_OP;                                                                  \
            }                                                                                \
        } else {                                                                             \
            size_t pre = (n) < CLASSIC_AHEAD ? (n) : CLASSIC_AHEAD;                          \
            prefetch_classic((bf), (d), pre, (write));                                       \
            for (size_t i = 0; i < (n); i++) {                                               \
                if (i + CLASSIC_AHEAD < (n))                                                 \
                    prefetch_classic((bf), (d) + i + CLASSIC_AHEAD, 1, (write));             \
                CLASSIC_OP;                                                                  \
            }                                                                                \
        }                                                                                    \
    } while (0)

void dedup_bloom_add_batch(dedup_bloom *bf, const dedup_digest *d, size_t n)
{
    BATCH_LOOP(bf, d, n, true, blocked_add(bf, d[i]), classic_add(bf, d[i]));
}

void dedup_bloom_might_contain_batch(const dedup_bloom *bf, const dedup_digest *d, size_t n,
                                     bool *out)
{
    BATCH_LOOP(bf, d, n, false, out[i] = blocked_query(bf, d[i]),
               out[i] = classic_query(bf, d[i]));
}

void dedup_bloom_test_and_add_batch(dedup_bloom *bf, const dedup_digest *d, size_t n, bool *out)
{
    BATCH_LOOP(bf, d, n, true, out[i] = blocked_test_and_add(bf, d[i]),
               out[i] = classic_test_and_add(bf, d[i]));
}

/* ======================================================================
 * Shape and state
 * ====================================================================== */

dedup_bloom_kind dedup_bloom_get_kind(const dedup_bloom *bf) { return bf->kind; }
uint64_t dedup_bloom_bits(const dedup_bloom *bf) { return bf->bits; }
uint32_t dedup_bloom_k(const dedup_bloom *bf) { return bf->k; }
uint64_t dedup_bloom_capacity(const dedup_bloom *bf) { return bf->capacity; }
double dedup_bloom_target_fpr(const dedup_bloom *bf) { return bf->fpr; }
uint64_t dedup_bloom_seed(const dedup_bloom *bf) { return bf->seed; }

uint64_t dedup_bloom_popcount(const dedup_bloom *bf)
{
    uint64_t c = 0;
    bool ts = bf->thread_safe;
    for (uint64_t i = 0; i < bf->nwords; i++)
        c += (uint64_t)__builtin_popcountll(load_word(&bf->words[i], ts));
    return c;
}

double dedup_bloom_fill_ratio(const dedup_bloom *bf)
{
    return (double)dedup_bloom_popcount(bf) / (double)bf->bits;
}

static unsigned block_popcount(const dedup_bloom *bf, uint64_t b)
{
    const uint64_t *blk = bf->words + b * BLOCK_WORDS;
    unsigned c = 0;
    for (unsigned w = 0; w < BLOCK_WORDS; w++)
        c += (unsigned)__builtin_popcountll(load_word(&blk[w], bf->thread_safe));
    return c;
}

double dedup_bloom_estimate_count(const dedup_bloom *bf)
{
    double k = (double)bf->k;
    if (bf->kind == DEDUP_BLOOM_CLASSIC) {
        double m = (double)bf->bits, x = (double)dedup_bloom_popcount(bf);
        if (x >= m)
            return INFINITY;
        return -(m / k) * log1p(-x / m);
    }
    /* Per block: the same estimator with m = 512, summed.  log1p(-x/512)
     * takes 513 values; tabulate them. */
    double tab[BLOCK_BITS];
    for (unsigned s = 0; s < BLOCK_BITS; s++)
        tab[s] = -((double)BLOCK_BITS / k) * log1p(-(double)s / BLOCK_BITS);
    double sum = 0.0;
    for (uint64_t b = 0; b < bf->nblocks; b++) {
        unsigned c = block_popcount(bf, b);
        if (c >= BLOCK_BITS)
            return INFINITY;
        sum += tab[c];
    }
    return sum;
}

double dedup_bloom_current_fpr(const dedup_bloom *bf)
{
    double k = (double)bf->k;
    if (bf->kind == DEDUP_BLOOM_CLASSIC)
        return pow(dedup_bloom_fill_ratio(bf), k);
    double tab[BLOCK_BITS + 1];
    for (unsigned s = 0; s <= BLOCK_BITS; s++)
        tab[s] = pow((double)s / BLOCK_BITS, k);
    double sum = 0.0;
    for (uint64_t b = 0; b < bf->nblocks; b++)
        sum += tab[block_popcount(bf, b)];
    return sum / (double)bf->nblocks;
}

size_t dedup_bloom_memory_usage(const dedup_bloom *bf)
{
    /* The bit array plus the alignment slack ddi_aligned_calloc adds. */
    return sizeof *bf + (size_t)bf->nwords * 8 + 64;
}

void dedup_bloom_clear(dedup_bloom *bf)
{
    memset(bf->words, 0, (size_t)bf->nwords * 8);
}

/* ======================================================================
 * Set algebra
 * ====================================================================== */

static bool same_shape(const dedup_bloom *a, const dedup_bloom *b)
{
    return a->kind == b->kind && a->bits == b->bits && a->k == b->k && a->seed == b->seed &&
           a->probe == b->probe;
}

dedup_status dedup_bloom_union(dedup_bloom *dst, const dedup_bloom *src)
{
    if (!dst || !src)
        return DEDUP_ERR_INVALID_ARG;
    if (!same_shape(dst, src))
        return DEDUP_ERR_INCOMPATIBLE;
    for (uint64_t i = 0; i < dst->nwords; i++)
        dst->words[i] |= src->words[i];
    return DEDUP_OK;
}

dedup_status dedup_bloom_intersect(dedup_bloom *dst, const dedup_bloom *src)
{
    if (!dst || !src)
        return DEDUP_ERR_INVALID_ARG;
    if (!same_shape(dst, src))
        return DEDUP_ERR_INCOMPATIBLE;
    for (uint64_t i = 0; i < dst->nwords; i++)
        dst->words[i] &= src->words[i];
    return DEDUP_OK;
}

/* ======================================================================
 * Persistence
 * ====================================================================== */

static uint16_t file_type(const dedup_bloom *bf)
{
    return bf->kind == DEDUP_BLOOM_BLOCKED ? DEDUP_TYPE_BLOCKED_BLOOM : DEDUP_TYPE_BLOOM;
}

static void encode_params(const dedup_bloom *bf, unsigned char p[PARAMS_LEN])
{
    dedup_put_u64(p + 0, bf->capacity);
    dedup_put_f64(p + 8, bf->fpr);
    dedup_put_u64(p + 16, bf->bits);
    dedup_put_u32(p + 24, bf->k);
    dedup_put_u32(p + 28, bf->probe);
}

dedup_status dedup_bloom_save(const dedup_bloom *bf, dedup_sink *sink)
{
    if (!bf || !sink)
        return DEDUP_ERR_INVALID_ARG;
    unsigned char params[PARAMS_LEN];
    encode_params(bf, params);
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, file_type(bf), bf->seed, params,
                                         PARAMS_LEN, bf->nwords * 8);
    if (s)
        return s;
    if (bf->thread_safe) {
        /* Concurrent adders may be running: copy with atomic loads. */
        uint64_t tmp[512];
        for (uint64_t i = 0; i < bf->nwords && !s; i += 512) {
            size_t c = bf->nwords - i < 512 ? (size_t)(bf->nwords - i) : 512;
            for (size_t j = 0; j < c; j++)
                tmp[j] = __atomic_load_n(&bf->words[i + j], __ATOMIC_RELAXED);
            s = dedup_encoder_write_u64s(&e, tmp, c);
        }
    } else {
        s = dedup_encoder_write_u64s(&e, bf->words, (size_t)bf->nwords);
    }
    if (s)
        return s;
    return dedup_encoder_end(&e);
}

uint64_t dedup_bloom_serialized_size(const dedup_bloom *bf)
{
    return DEDUP_HEADER_SIZE + PARAMS_LEN + bf->nwords * 8 + DEDUP_TRAILER_SIZE;
}

dedup_status dedup_bloom_load(dedup_source src, const dedup_allocator *alloc, dedup_bloom **out)
{
    if (!out || !src.read)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_decoder decoder, *dec = &decoder; /* ~5 KB; 64-byte aligned */
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_bloom *bf = NULL;
    dedup_status s = dedup_decoder_begin(dec, src, 0);
    if (s)
        goto done;
    dedup_bloom_kind kind;
    if (dec->header.type == DEDUP_TYPE_BLOOM)
        kind = DEDUP_BLOOM_CLASSIC;
    else if (dec->header.type == DEDUP_TYPE_BLOCKED_BLOOM)
        kind = DEDUP_BLOOM_BLOCKED;
    else {
        s = DEDUP_ERR_WRONG_TYPE;
        goto done;
    }
    if (dec->header.params_len != PARAMS_LEN) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    const unsigned char *p = dec->params;
    uint64_t capacity = dedup_get_u64(p);
    double fpr = dedup_get_f64(p + 8);
    uint64_t bits = dedup_get_u64(p + 16);
    uint32_t k = dedup_get_u32(p + 24);
    uint32_t probe = dedup_get_u32(p + 28);
    if (probe > (kind == DEDUP_BLOOM_CLASSIC ? CLASSIC_PROBE_SPREAD : 0) || k == 0 || k > max_k(kind) ||
        !(fpr == 0.0 || (fpr >= DEDUP_MIN_FPR && fpr < 1.0)) || bits == 0 ||
        (kind == DEDUP_BLOOM_BLOCKED && bits % BLOCK_BITS != 0)) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    if (bits > DEDUP_MAX_BITS) {
        s = DEDUP_ERR_LIMIT;
        goto done;
    }
    uint64_t nwords = (bits + 63) / 64;
    if (dec->header.payload_len != nwords * 8) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    s = bloom_alloc(kind, bits, k, capacity, fpr, dec->header.seed, false, &a, &bf);
    if (s)
        goto done;
    bf->probe = probe;
    s = dedup_decoder_read_u64s(dec, bf->words, (size_t)nwords);
    if (!s)
        s = dedup_decoder_end(dec);
    if (!s && bits % 64 != 0) {
        /* Bits at and above m are never set by this library. */
        if (bf->words[nwords - 1] >> (bits % 64))
            s = DEDUP_ERR_CORRUPT;
    }
done:
    if (s) {
        dedup_bloom_free(bf);
        return s;
    }
    *out = bf;
    return DEDUP_OK;
}

static dedup_status save_cb(const void *obj, dedup_sink *sink)
{
    return dedup_bloom_save(obj, sink);
}

dedup_status dedup_bloom_save_file(const dedup_bloom *bf, const char *path)
{
    if (!bf || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_cb, bf);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_bloom *x = NULL;
    dedup_status s = dedup_bloom_load(src, alloc, &x);
    *out = x;
    return s;
}

static void free_any(void *obj) { dedup_bloom_free(obj); }

dedup_status dedup_bloom_load_file(const char *path, const dedup_allocator *alloc,
                                dedup_bloom **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    void *obj = NULL;
    dedup_status s = ddi_load_file(path, alloc, load_any, free_any, &obj);
    *out = obj;
    return s;
}
