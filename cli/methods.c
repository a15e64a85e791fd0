/* methods.c - exact, fingerprint, bloom and blocked behind one interface. */
#include "methods.h"

#include <stdlib.h>
#include <string.h>

#include "dedup/bloom.h"
#include "dedup/cuckoo.h"
#include "dedup/scalable.h"
#include "dedup/format.h"
#include "dedup/set.h"
#include "cli.h"

const char *const dd_method_names[] = {"exact", "fingerprint", "bloom", "blocked", "cuckoo", "scalable", NULL};

bool dd_method_known(const char *name)
{
    for (size_t i = 0; dd_method_names[i]; i++)
        if (strcmp(name, dd_method_names[i]) == 0)
            return true;
    return false;
}

void dd_method_unknown(char *buf, size_t cap, const char *name)
{
    if (!buf || !cap)
        return;
    int n = snprintf(buf, cap, "unknown --mode '%s' (choose", name);
    for (size_t i = 0; dd_method_names[i] && n >= 0 && (size_t)n < cap; i++) {
        const char *sep = i == 0 ? " " : dd_method_names[i + 1] ? ", " : " or ";
        n += snprintf(buf + n, cap - (size_t)n, "%s%s", sep, dd_method_names[i]);
    }
    if (n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ")");
}

/* ---- exact: full keys ---------------------------------------------------- */

static dedup_status exact_decide(dd_method *m, size_t n, const unsigned char *const *keys,
                                 const size_t *lens, const dedup_digest *d, dedup_verdict *out)
{
    dedup_strset *s = m->impl;
    /* Three passes so that both cache misses of a key (its slot, then the
     * stored key it must be compared with) overlap with the other keys'. */
    for (size_t i = 0; i < n; i++)
        dedup_strset_prefetch(s, d[i]);
    for (size_t i = 0; i < n; i++)
        dedup_strset_prefetch_key(s, d[i]);
    for (size_t i = 0; i < n; i++) {
        dedup_status st = dedup_strset_insert(s, keys[i], lens[i], d[i], &out[i]);
        if (st) {
            m->done = i;
            return st;
        }
    }
    return DEDUP_OK;
}
static uint64_t exact_distinct(const dd_method *m) { return dedup_strset_size(m->impl); }
static size_t exact_memory(const dd_method *m) { return dedup_strset_memory_usage(m->impl); }
static double zero_fpr(const dd_method *m) { (void)m; return 0.0; }
static dedup_status save_strset(const void *o, dedup_sink *s) { return dedup_strset_save(o, s); }
static dedup_status exact_save(const dd_method *m, const char *path)
{
    return dedup_save_file(path, save_strset, m->impl);
}
static uint64_t exact_count(const dd_method *m, const unsigned char *k, size_t l, dedup_digest d)
{
    return dedup_strset_count_of(m->impl, k, l, d);
}
static void exact_destroy(dd_method *m) { dedup_strset_free(m->impl); }

/* ---- fingerprint: 128-bit digests only ------------------------------------ */

static dedup_status fp_decide(dd_method *m, size_t n, const unsigned char *const *keys,
                              const size_t *lens, const dedup_digest *d, dedup_verdict *out)
{
    (void)keys;
    (void)lens;
    dedup_digestset *s = m->impl;
    for (size_t i = 0; i < n; i++)
        dedup_digestset_prefetch(s, d[i]);
    for (size_t i = 0; i < n; i++) {
        dedup_status st = dedup_digestset_insert(s, d[i], &out[i]);
        if (st)
            return st;
    }
    return DEDUP_OK;
}
static uint64_t fp_distinct(const dd_method *m) { return dedup_digestset_size(m->impl); }
static size_t fp_memory(const dd_method *m) { return dedup_digestset_memory_usage(m->impl); }
static dedup_status save_dset(const void *o, dedup_sink *s) { return dedup_digestset_save(o, s); }
static dedup_status fp_save(const dd_method *m, const char *path)
{
    return dedup_save_file(path, save_dset, m->impl);
}
static uint64_t fp_count(const dd_method *m, const unsigned char *k, size_t l, dedup_digest d)
{
    (void)k;
    (void)l;
    return dedup_digestset_count_of(m->impl, d);
}
static void fp_destroy(dd_method *m) { dedup_digestset_free(m->impl); }

/* ---- bloom / blocked ---------------------------------------------------------- */

static dedup_status bloom_decide(dd_method *m, size_t n, const unsigned char *const *keys,
                                 const size_t *lens, const dedup_digest *d, dedup_verdict *out)
{
    (void)keys;
    (void)lens;
    bool seen[256];
    size_t done = 0;
    while (done < n) {
        size_t c = n - done < 256 ? n - done : 256;
        dedup_bloom_test_and_add_batch(m->impl, d + done, c, seen);
        for (size_t i = 0; i < c; i++)
            out[done + i] = seen[i] ? DEDUP_MAYBE_DUPLICATE : DEDUP_NEW;
        done += c;
    }
    return DEDUP_OK;
}
static uint64_t bloom_distinct(const dd_method *m)
{
    double e = dedup_bloom_estimate_count(m->impl);
    return e > 1.8e19 ? UINT64_MAX : (uint64_t)(e + 0.5);
}
static size_t bloom_memory(const dd_method *m) { return dedup_bloom_memory_usage(m->impl); }
static double bloom_fpr(const dd_method *m) { return dedup_bloom_current_fpr(m->impl); }
static dedup_status bloom_save(const dd_method *m, const char *path)
{
    return dedup_bloom_save_file(m->impl, path);
}
static void bloom_destroy(dd_method *m) { dedup_bloom_free(m->impl); }

/* ---- cuckoo: fingerprints in buckets, growable unless sized by -m ---------------- */

static dedup_status cuckoo_decide(dd_method *m, size_t n, const unsigned char *const *keys,
                                  const size_t *lens, const dedup_digest *d, dedup_verdict *out)
{
    (void)keys;
    (void)lens;
    for (size_t i = 0; i < n; i++) {
        dedup_status st = dedup_cuckoo_test_and_add(m->impl, d[i], &out[i]);
        if (st)
            return st;
    }
    return DEDUP_OK;
}
static uint64_t cuckoo_distinct(const dd_method *m)
{
    dedup_cuckoo_info in;
    dedup_cuckoo_get_info(m->impl, &in);
    return in.items;
}
static size_t cuckoo_memory(const dd_method *m) { return dedup_cuckoo_memory_usage(m->impl); }
static double cuckoo_fpr(const dd_method *m)
{
    dedup_cuckoo_info in;
    dedup_cuckoo_get_info(m->impl, &in);
    return in.fpr_current;
}
static dedup_status cuckoo_save(const dd_method *m, const char *path)
{
    return dedup_cuckoo_save_file(m->impl, path);
}
static void cuckoo_destroy(dd_method *m) { dedup_cuckoo_free(m->impl); }

/* ---- scalable: a chain of Bloom filters that grows, the rate still bounded by p ---- */

static dedup_status scalable_decide(dd_method *m, size_t n, const unsigned char *const *keys,
                                    const size_t *lens, const dedup_digest *d, dedup_verdict *out)
{
    (void)keys;
    (void)lens;
    dedup_status st = dedup_scalable_test_and_add_batch(m->impl, d, n, out, NULL);
    if (!st && m->memory_limit && dedup_scalable_memory_usage(m->impl) > m->memory_limit)
        st = DEDUP_ERR_FULL; /* the chain grew past -m: the run cannot keep its promise */
    return st;
}
static uint64_t scalable_distinct(const dd_method *m)
{
    dedup_scalable_info in;
    dedup_scalable_get_info(m->impl, &in);
    return in.items;
}
static size_t scalable_memory(const dd_method *m) { return dedup_scalable_memory_usage(m->impl); }
static double scalable_fpr(const dd_method *m)
{
    dedup_scalable_info in;
    dedup_scalable_get_info(m->impl, &in);
    return in.fpr_current;
}
static dedup_status scalable_save(const dd_method *m, const char *path)
{
    return dedup_scalable_save_file(m->impl, path);
}
static void scalable_destroy(dd_method *m) { dedup_scalable_free(m->impl); }

/* ---- construction ----------------------------------------------------------------- */

static dd_method *new_method(const char *name)
{
    dd_method *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->fpr = zero_fpr;
    if (strcmp(name, "exact") == 0) {
        m->name = "exact";
        m->decide = exact_decide;
        m->distinct = exact_distinct;
        m->memory = exact_memory;
        m->save = exact_save;
        m->count_of = exact_count;
        m->destroy = exact_destroy;
    } else if (strcmp(name, "fingerprint") == 0) {
        m->name = "fingerprint";
        m->decide = fp_decide;
        m->distinct = fp_distinct;
        m->memory = fp_memory;
        m->save = fp_save;
        m->count_of = fp_count;
        m->destroy = fp_destroy;
    } else if (strcmp(name, "bloom") == 0 || strcmp(name, "blocked") == 0) {
        m->name = strcmp(name, "blocked") == 0 ? "blocked" : "bloom";
        m->probabilistic = true;
        m->decide = bloom_decide;
        m->distinct = bloom_distinct;
        m->memory = bloom_memory;
        m->fpr = bloom_fpr;
        m->save = bloom_save;
        m->destroy = bloom_destroy;
    } else if (strcmp(name, "cuckoo") == 0) {
        m->name = "cuckoo";
        m->probabilistic = true;
        m->decide = cuckoo_decide;
        m->distinct = cuckoo_distinct;
        m->memory = cuckoo_memory;
        m->fpr = cuckoo_fpr;
        m->save = cuckoo_save;
        m->destroy = cuckoo_destroy;
    } else if (strcmp(name, "scalable") == 0) {
        m->name = "scalable";
        m->probabilistic = true;
        m->decide = scalable_decide;
        m->distinct = scalable_distinct;
        m->memory = scalable_memory;
        m->fpr = scalable_fpr;
        m->save = scalable_save;
        m->destroy = scalable_destroy;
    } else {
        free(m);
        return NULL;
    }
    return m;
}

static void set_err(char *err, size_t cap, const char *msg)
{
    if (err && cap)
        snprintf(err, cap, "%s", msg);
}

dedup_status dd_method_create(const char *name, const dd_sizing *s, dd_method **out, char *err,
                              size_t errcap)
{
    *out = NULL;
    dd_method *m = new_method(name);
    if (!m) {
        dd_method_unknown(err, errcap, name);
        return DEDUP_ERR_INVALID_ARG;
    }
    dedup_status st;
    m->seed = s->seed;
    m->memory_limit = s->memory;
    if (!m->probabilistic) {
        dedup_set_params p;
        dedup_set_params_init(&p);
        p.capacity = s->items;
        p.seed = s->seed;
        p.counts = s->counts;
        p.memory_limit = s->memory; /* -m bounds the set: past it the run stops, never guesses */
        if (!p.memory_limit && m->decide == exact_decide)
            p.memory_limit = s->spill_at;
        if (m->decide == exact_decide)
            st = dedup_strset_create(&p, cli_allocator_growing(), (dedup_strset **)&m->impl);
        else
            st = dedup_digestset_create(&p, cli_allocator(), (dedup_digestset **)&m->impl);
        if (st)
            set_err(err, errcap, dedup_strerror(st));
    } else if (m->decide == cuckoo_decide) {
        dedup_cuckoo_params p;
        dedup_cuckoo_params_init(&p);
        p.seed = s->seed;
        if (s->fpr > 0)
            p.fpr = s->fpr;
        if (s->items) {
            /* Growth is only a safety net past -n: links of the same size
             * keep later deletes (dedup filter del on the state) exact. */
            p.capacity = s->items;
            p.expansion = s->memory ? 0 : 1; /* -m is a ceiling: no growth then */
        } else if (s->memory) {
            uint32_t f = dedup_cuckoo_fingerprint_bits_for(p.fpr, 4);
            p.buckets = s->memory * 8 / ((uint64_t)f * 4);
            p.expansion = 0;
        } else {
            p.capacity = 1u << 20; /* grows by doubling links as needed */
            p.expansion = 2;
        }
        st = dedup_cuckoo_create(&p, cli_allocator(), (dedup_cuckoo **)&m->impl);
        if (st)
            set_err(err, errcap, dedup_strerror(st));
        else if (s->items && s->memory && dedup_cuckoo_memory_usage(m->impl) > s->memory) {
            if (err)
                snprintf(err, errcap, "-n %llu needs %zu bytes as a cuckoo filter, more than -m/--memory allows",
                         (unsigned long long)s->items, dedup_cuckoo_memory_usage(m->impl));
            dedup_cuckoo_free(m->impl);
            st = DEDUP_ERR_LIMIT;
        }
    } else if (m->decide == scalable_decide) {
        dedup_scalable_params p;
        dedup_scalable_params_init(&p);
        p.kind = DEDUP_BLOOM_BLOCKED;
        p.seed = s->seed;
        if (s->fpr > 0)
            p.fpr = s->fpr;
        if (s->items)
            p.capacity = s->items;
        st = dedup_scalable_create(&p, cli_allocator(), (dedup_scalable **)&m->impl);
        if (st)
            set_err(err, errcap, dedup_strerror(st));
    } else {
        dedup_bloom_params p;
        dedup_bloom_params_init(&p);
        p.kind = strcmp(m->name, "blocked") == 0 ? DEDUP_BLOOM_BLOCKED : DEDUP_BLOOM_CLASSIC;
        p.seed = s->seed;
        if (s->fpr > 0)
            p.fpr = s->fpr;
        if (s->items) {
            p.capacity = s->items;
            uint64_t bits = p.kind == DEDUP_BLOOM_BLOCKED ? dedup_blocked_bits_for(s->items, p.fpr)
                                                          : dedup_bloom_bits_for(s->items, p.fpr);
            if (s->memory && bits / 8 > s->memory) {
                if (err)
                    snprintf(err, errcap,
                             "-n %llu at -p %g needs %llu bytes, more than -m/--memory %llu allows",
                             (unsigned long long)s->items, p.fpr, (unsigned long long)(bits / 8),
                             (unsigned long long)s->memory);
                free(m);
                return DEDUP_ERR_LIMIT;
            }
            p.bits = bits; /* sized once: create only picks k for it */
        } else if (s->memory) {
            p.bits = s->memory * 8;
            p.capacity = p.kind == DEDUP_BLOOM_BLOCKED ? dedup_blocked_capacity_for(p.bits, p.fpr)
                                                       : dedup_bloom_capacity_for(p.bits, p.fpr);
            if (p.capacity == 0) {
                set_err(err, errcap, "-m/--memory is too small for any key at this -p");
                free(m);
                return DEDUP_ERR_INVALID_ARG;
            }
        } else {
            if (err)
                snprintf(err, errcap,
                         "--mode %s needs its size: -n/--items N (with -p/--fpr, default 0.01) "
                         "or -m/--memory SIZE",
                         m->name);
            free(m);
            return DEDUP_ERR_INVALID_ARG;
        }
        st = dedup_bloom_create(&p, cli_allocator(), (dedup_bloom **)&m->impl);
        if (st)
            set_err(err, errcap, dedup_strerror(st));
    }
    if (st) {
        free(m);
        return st;
    }
    *out = m;
    return DEDUP_OK;
}

static uint16_t type_of_method(const dd_method *m)
{
    if (m->decide == exact_decide)
        return DEDUP_TYPE_SET_STRING;
    if (m->decide == fp_decide)
        return DEDUP_TYPE_SET_DIGEST;
    if (m->decide == cuckoo_decide)
        return DEDUP_TYPE_CUCKOO;
    if (m->decide == scalable_decide)
        return DEDUP_TYPE_SCALABLE_BLOOM;
    return strcmp(m->name, "blocked") == 0 ? DEDUP_TYPE_BLOCKED_BLOOM : DEDUP_TYPE_BLOOM;
}

dedup_status dd_method_load(const char *name, const char *path, dd_method **out,
                            char *err, size_t errcap)
{
    *out = NULL;
    dd_method *m = new_method(name);
    if (!m) {
        dd_method_unknown(err, errcap, name);
        return DEDUP_ERR_INVALID_ARG;
    }
    uint16_t want = type_of_method(m);
    dedup_header h;
    dedup_status st = dedup_peek_file(path, &h);
    if (!st && want == DEDUP_TYPE_CUCKOO && h.type == DEDUP_TYPE_CUCKOO_CHAIN)
        want = DEDUP_TYPE_CUCKOO_CHAIN; /* a grown cuckoo filter */
    if (!st && h.type != want) {
        if (err)
            snprintf(err, errcap, "is %s '%s' state, but --mode %s keeps %s '%s' state (give the --mode it was made with)",
                     cli_a(dedup_type_name(h.type)), dedup_type_name(h.type), m->name,
                     cli_a(dedup_type_name(want)), dedup_type_name(want));
        free(m);
        return DEDUP_ERR_WRONG_TYPE;
    }
    if (!st) {
        dedup_file_source *fs = malloc(sizeof *fs);
        dedup_source src;
        st = fs ? dedup_file_source_open(fs, path, &src) : DEDUP_ERR_NOMEM;
        if (!st) {
            if (want == DEDUP_TYPE_SET_STRING)
                st = dedup_strset_load(src, cli_allocator_growing(), (dedup_strset **)&m->impl);
            else if (want == DEDUP_TYPE_SET_DIGEST)
                st = dedup_digestset_load(src, cli_allocator(), (dedup_digestset **)&m->impl);
            else if (want == DEDUP_TYPE_CUCKOO || want == DEDUP_TYPE_CUCKOO_CHAIN)
                st = dedup_cuckoo_load(src, cli_allocator(), (dedup_cuckoo **)&m->impl);
            else if (want == DEDUP_TYPE_SCALABLE_BLOOM)
                st = dedup_scalable_load(src, cli_allocator(), (dedup_scalable **)&m->impl);
            else
                st = dedup_bloom_load(src, cli_allocator(), (dedup_bloom **)&m->impl);
            if (!st && fs->remaining != 0 && fs->remaining != UINT64_MAX) {
                m->destroy(m);
                st = DEDUP_ERR_TRAILING;
            }
            dedup_file_source_close(fs);
        }
        free(fs);
    }
    if (st) {
        if (err && st != DEDUP_ERR_IO)
            set_err(err, errcap, dedup_strerror(st));
        else if (err)
            err[0] = '\0';
        free(m);
        return st;
    }
    m->seed = h.seed; /* digests must use the file's seed */
    *out = m;
    return DEDUP_OK;
}

void dd_method_free(dd_method *m)
{
    if (!m)
        return;
    if (m->destroy && m->impl)
        m->destroy(m);
    free(m);
}
