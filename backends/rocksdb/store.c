/*
 * store.c - the persistent exact seen-set on RocksDB's C API (dedup/store.h).
 *
 * How a chunk of keys is decided: build the RocksDB keys (digest bytes or
 * the key itself); a key in the pending table (pending.c) is a duplicate;
 * the others are read in one batched MultiGet; a key found (and not
 * expired) is a duplicate, an absent one new unless an earlier key of the
 * chunk was that key (the pending table says, since the new ones join it
 * as they are decided); then the chunk is committed (pending.c) unless the
 * caller commits.  Creation and the lock: create.c.
 *
 * Why these RocksDB options (dedup/store.h lists them): keys are written
 * once and never updated, digests are random bytes, and the cost that
 * matters is the point read of a PRESENT key: an absent key is settled by a
 * filter probe in memory, a present one walks an index block and a data
 * block, each a cache miss on random keys.
 *  - 16 KiB data blocks with binary search and LZ4: a repeat's block is
 *    usually in the cache, where smaller blocks cost more (4x the cache
 *    entries, a deeper index search); a hash index inside blocks and no
 *    compression only pay on cold reads.  LZ4 squeezes the ingested keys'
 *    zeroed sequence numbers (digests themselves are incompressible); a
 *    block is decompressed once, when it enters the cache.
 *  - A full ribbon filter per table (about 30% smaller than Bloom at the
 *    same rate), whole-key, and a memtable Bloom: an absent key reads no
 *    data block.
 *  - absent_screened: with a local filter in front that knows every key,
 *    the keys reaching the store are repeats plus the filter's false
 *    positives; a repeat found in the bottom level gains nothing from that
 *    level's filter, so the filter there is a wasted probe and memory
 *    (RocksDB's optimize_filters_for_hits).  Upper levels keep theirs.
 *  - Filters and indexes held by the table readers, never evicted by data
 *    blocks; a scan (dedup_store_foreach) fills the block cache when the
 *    tables fit in three quarters of it.
 *  - Leveled compaction with dynamic level bytes: the smallest space
 *    amplification for data never overwritten; ingested files of random
 *    digests overlap every file and land in level 0, and the default
 *    trigger merges them down soon.
 *  - MultiGet on keys sorted here (RocksDB's sorted_input skips its own
 *    sort), walked file by file.
 * The measurements behind each choice: bench/results/tiers.md.
 */
#define _GNU_SOURCE /* flock, getrandom, O_DIRECTORY */
#include "store_int.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

static void set_why(char *why, size_t cap, const char *fmt, const char *dir, const char *detail)
{
    if (why && cap)
        snprintf(why, cap, fmt, dir, detail ? detail : "");
}

/* RocksDB's error strings name their kind first ("IO error: ...",
 * "Corruption: ..."); the lock is reported as an IO error on DIR/LOCK. */
static dedup_status map_open_error(const char *msg, const char *dir, char *why, size_t cap)
{
    if (strstr(msg, "LOCK") || strstr(msg, "lock hold")) {
        set_why(why, cap, "%s is in use by another process (RocksDB: %s)", dir, msg);
        return DEDUP_ERR_IO;
    }
    if (strncmp(msg, "Corruption", 10) == 0 && strstr(msg, "global seqno")) {
        /* RocksDB names the MANIFEST, not the table whose number is
         * damaged: the tables whose number was written in place (no checksum
         * covers it) are named, as the suspects (sst_check.c). */
        char files[256];
        ddr_rewritten_tables(dir, files, sizeof files);
        if (why && cap)
            snprintf(why, cap, "%s: the store is corrupted: the global sequence number of an "
                     "ingested table disagrees with the MANIFEST; damaged: one of %s (RocksDB: %s)",
                     dir, files[0] ? files : "its .sst files", msg);
        return DEDUP_ERR_CORRUPT;
    }
    if (strncmp(msg, "Corruption", 10) == 0) {
        set_why(why, cap, "%s: the store is corrupted (RocksDB: %s)", dir, msg);
        return DEDUP_ERR_CORRUPT;
    }
    if (strncmp(msg, "Invalid argument", 16) == 0) {
        set_why(why, cap, "%s is not a dedup store (RocksDB: %s)", dir, msg);
        return DEDUP_ERR_BAD_MAGIC;
    }
    set_why(why, cap, "%s: cannot open the store (RocksDB: %s)", dir, msg);
    return DEDUP_ERR_IO;
}

/* ---- expiry -------------------------------------------------------------- */

static unsigned char cfilter_fn(void *state, int level, const char *key, size_t klen,
                                const char *val, size_t vlen, char **nv, size_t *nvlen,
                                unsigned char *changed)
{
    (void)level, (void)key, (void)klen, (void)nv, (void)nvlen;
    const dedup_store *s = state;
    *changed = 0;
    return value_expired(s, val, vlen, store_now(s)) ? 1 : 0;
}

static const char *cfilter_name(void *state)
{
    (void)state;
    return "dedup.expire";
}

static void cfilter_destroy(void *state)
{
    (void)state;
}

/* ---- options --------------------------------------------------------------- */

static void build_options(dedup_store *s, uint64_t block_cache, bool whole, bool screened)
{
    s->opt = rocksdb_options_create();
    rocksdb_options_increase_parallelism(s->opt, 2);
    rocksdb_options_set_max_background_jobs(s->opt, 2);
    rocksdb_options_set_write_buffer_size(s->opt, 64u << 20);
    rocksdb_options_set_max_write_buffer_number(s->opt, 3);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(s->opt, 1);
    /* screened: no filter in the bottom level's tables (see store.h) */
    rocksdb_options_set_optimize_filters_for_hits(s->opt, screened);
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(s->opt, 0.02);
    rocksdb_options_set_memtable_whole_key_filtering(s->opt, 1);
    rocksdb_options_set_compression(s->opt, whole ? rocksdb_lz4_compression
                                                  : DDR_DIGEST_COMPRESSION);
    rocksdb_options_set_bottommost_compression(s->opt, whole ? rocksdb_zstd_compression
                                                             : DDR_DIGEST_COMPRESSION);
    rocksdb_options_set_paranoid_checks(s->opt, 1);
    rocksdb_options_set_keep_log_file_num(s->opt, 2);

    s->topt = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_filter_policy(s->topt,
                                                  rocksdb_filterpolicy_create_ribbon(10.0));
    rocksdb_block_based_options_set_whole_key_filtering(s->topt, 1);
    rocksdb_block_based_options_set_block_size(s->topt, DDR_BLOCK_SIZE);
    rocksdb_block_based_options_set_format_version(s->topt, 5);
    /* the checksum sst_check.c verifies (RocksDB 7's default, named) */
    rocksdb_block_based_options_set_checksum(s->topt, 4 /* kXXH3 */);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(s->topt, 0);
    s->cache = rocksdb_cache_create_lru((size_t)block_cache);
    rocksdb_block_based_options_set_block_cache(s->topt, s->cache);
    rocksdb_options_set_block_based_table_factory(s->opt, s->topt);

    s->meta_opt = rocksdb_options_create();
    if (s->expire) {
        s->cfilter = rocksdb_compactionfilter_create(s, cfilter_destroy, cfilter_fn, cfilter_name);
        rocksdb_options_set_compaction_filter(s->opt, s->cfilter);
    }

    s->ro = rocksdb_readoptions_create();
    s->ro_scan = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(s->ro_scan, 0);
    rocksdb_readoptions_set_total_order_seek(s->ro_scan, 1);
    s->wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(s->wo, s->sync == DEDUP_STORE_SYNC_ALWAYS);
    rocksdb_writeoptions_disable_WAL(s->wo, s->sync == DEDUP_STORE_SYNC_NONE);
}

/* ---- marker ----------------------------------------------------------------- */

static void encode_marker(const dedup_store *s, unsigned char m[MARKER_LEN])
{
    memcpy(m, marker_magic, 8);
    put_u32(m + 8, DEDUP_STORE_FORMAT_VERSION);
    put_u32(m + 12, (uint32_t)s->keys);
    put_u64(m + 16, s->seed);
    put_u64(m + 24, s->expire);
    put_u32(m + 32, DEDUP_HASH_XXH3_128);
    put_u32(m + 36, (uint32_t)dedup_hash(m, 36, 0).lo);
}

static dedup_status check_marker(dedup_store *s, const dedup_store_params *p, const char *v,
                                 size_t vlen, char *why, size_t cap)
{
    const unsigned char *m = (const unsigned char *)v;
    char d[160];
    if (vlen < 12 || memcmp(m, marker_magic, 8) != 0) {
        set_why(why, cap, "%s is not a dedup store (its marker is not one)%s", s->dir, NULL);
        return DEDUP_ERR_BAD_MAGIC;
    }
    if (get_u32(m + 8) != DEDUP_STORE_FORMAT_VERSION) {
        snprintf(d, sizeof d, "%u, this program reads %u", get_u32(m + 8),
                 DEDUP_STORE_FORMAT_VERSION);
        set_why(why, cap, "%s: store format version %s", s->dir, d);
        return DEDUP_ERR_VERSION;
    }
    if (vlen != MARKER_LEN || get_u32(m + 36) != (uint32_t)dedup_hash(m, 36, 0).lo) {
        set_why(why, cap, "%s: the store's marker is damaged (checksum mismatch)%s", s->dir, NULL);
        return DEDUP_ERR_CHECKSUM;
    }
    uint32_t keys = get_u32(m + 12);
    uint64_t seed = get_u64(m + 16), expire = get_u64(m + 24);
    if ((keys != DEDUP_STORE_KEYS_DIGEST && keys != DEDUP_STORE_KEYS_WHOLE) ||
        get_u32(m + 32) != DEDUP_HASH_XXH3_128) {
        set_why(why, cap, "%s: the store's marker holds an impossible key mode or hash%s", s->dir,
                NULL);
        return DEDUP_ERR_CORRUPT;
    }
    if (p->seed && p->seed != seed) {
        snprintf(d, sizeof d, "seed 0x%016llx, asked 0x%016llx", (unsigned long long)seed,
                 (unsigned long long)p->seed);
        set_why(why, cap, "%s: the store was built with %s", s->dir, d);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    if (p->keys && (uint32_t)p->keys != keys) {
        snprintf(d, sizeof d, "%s keys, asked %s", keys == DEDUP_STORE_KEYS_WHOLE ? "whole" : "digest",
                 p->keys == DEDUP_STORE_KEYS_WHOLE ? "whole" : "digest");
        set_why(why, cap, "%s: the store holds %s", s->dir, d);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    if (p->expire && p->expire != expire) {
        snprintf(d, sizeof d, "expiry %llu s, asked %llu s", (unsigned long long)expire,
                 (unsigned long long)p->expire);
        set_why(why, cap, "%s: the store was created with %s", s->dir, d);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    s->keys = (dedup_store_keys)keys;
    s->seed = seed;
    s->expire = expire;
    return DEDUP_OK;
}

/* ---- open / close ------------------------------------------------------------- */

void dedup_store_params_init(dedup_store_params *p)
{
    memset(p, 0, sizeof *p);
    p->create = true;
    p->sync = DEDUP_STORE_SYNC_BATCH;
    p->block_cache = 32u << 20;
    p->read_threads = 2;
}

static bool file_exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

static bool dir_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            empty = false;
            break;
        }
    closedir(d);
    return empty;
}

static dedup_status alloc_scratch(dedup_store *s)
{
    size_t n = DEDUP_STORE_CHUNK;
    s->kbuf = xmalloc(&s->a, n * 16);
    s->kptr = xmalloc(&s->a, n * sizeof *s->kptr);
    s->klen = xmalloc(&s->a, n * sizeof *s->klen);
    s->vals = xmalloc(&s->a, n * sizeof *s->vals);
    s->errs = xmalloc(&s->a, n * sizeof *s->errs);
    s->ord = xmalloc(&s->a, n * sizeof *s->ord);
    s->sptr = xmalloc(&s->a, n * sizeof *s->sptr);
    s->slen = xmalloc(&s->a, n * sizeof *s->slen);
    s->qidx = xmalloc(&s->a, n * sizeof *s->qidx);
    s->qptr = xmalloc(&s->a, n * sizeof *s->qptr);
    s->qlen = xmalloc(&s->a, n * sizeof *s->qlen);
    if (!s->kbuf || !s->kptr || !s->klen || !s->vals || !s->errs || !s->qidx ||
        !s->qptr || !s->qlen || !s->ord || !s->sptr || !s->slen)
        return DEDUP_ERR_NOMEM;
    return DEDUP_OK;
}

/* Decides whether DIR holds a store, nothing, or something else. */
static dedup_status probe_dir(const dedup_store_params *p, bool *fresh, char *why, size_t cap)
{
    struct stat st;
    *fresh = false;
    if (stat(p->dir, &st) != 0) {
        if (errno != ENOENT || !p->create || p->read_only) {
            set_why(why, cap, "%s: no store there (%s)", p->dir, strerror(errno));
            return DEDUP_ERR_IO;
        }
        *fresh = true;
        return DEDUP_OK;
    }
    if (!S_ISDIR(st.st_mode)) {
        set_why(why, cap, "%s is not a dedup store (not a directory)%s", p->dir, NULL);
        return DEDUP_ERR_BAD_MAGIC;
    }
    if (file_exists(p->dir, "CURRENT"))
        return DEDUP_OK;
    if (dir_empty(p->dir) && p->create && !p->read_only) {
        *fresh = true;
        return DEDUP_OK;
    }
    set_why(why, cap, "%s is not a dedup store (no RocksDB database in it)%s", p->dir, NULL);
    return DEDUP_ERR_BAD_MAGIC;
}

/* check_count() (below) before the writable open, which would delete the
 * table files a damaged MANIFEST no longer names: the keys of the pending
 * log (not yet read) are allowed for by its size, 24 bytes per digest key
 * at least. */
static dedup_status probe_count(dedup_store *s, rocksdb_t *db, rocksdb_readoptions_t *ro,
                                rocksdb_column_family_handle_t **h, const char *dir, char *why,
                                size_t cap)
{
    if (s->expire)
        return DEDUP_OK;
    size_t vl = 0;
    char *e = NULL;
    char *v = rocksdb_get_cf(db, ro, h[1], COUNT_KEY, strlen(COUNT_KEY), &vl, &e);
    uint64_t count = !e && v && vl == 8 ? get_u64((const unsigned char *)v) : 0;
    free(v);
    free(e);
    uint64_t held = 0;
    if (!count || rocksdb_property_int_cf(db, h[0], "rocksdb.estimate-num-keys", &held) != 0)
        return DEDUP_OK;
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, DDR_LOG_NAME);
    uint64_t pending = stat(path, &st) == 0 ? (uint64_t)st.st_size / 24 : 0;
    if (count <= held + pending)
        return DEDUP_OK;
    char d[160];
    snprintf(d, sizeof d, "%llu keys counted, %llu in its tables", (unsigned long long)count,
             (unsigned long long)held);
    set_why(why, cap, "%s: the store is damaged: %s (a table file or the MANIFEST's record of "
            "one is missing); refused, so that no recorded key is taken for new", dir, d);
    return DEDUP_ERR_CORRUPT;
}

/* Reads the marker of the store in 'dir' through a plain read-only open,
 * so the key mode and expiry are known before the options are chosen. */
static dedup_status read_marker(dedup_store *s, const dedup_store_params *p, const char *dir,
                                char *why, size_t cap)
{
    char *e = NULL;
    dedup_status st = DEDUP_OK;
    /* Learn the key mode and expiry before choosing options: read the
     * marker through a plain read-only open first. */
    size_t ncf = 0;
    rocksdb_options_t *probe = rocksdb_options_create();
    char **names = rocksdb_list_column_families(probe, dir, &ncf, &e);
    bool has_meta = false;
    for (size_t i = 0; !e && i < ncf; i++)
        has_meta |= strcmp(names[i], META_CF) == 0;
    if (names)
        rocksdb_list_column_families_destroy(names, ncf);
    if (!e && (!has_meta || ncf != 2)) {
        rocksdb_options_destroy(probe);
        set_why(why, cap, "%s is a RocksDB database but not a dedup store%s", dir, NULL);
        return DEDUP_ERR_BAD_MAGIC;
    }
    if (!e) {
        const char *cfn[2] = {"default", META_CF};
        const rocksdb_options_t *cfo[2] = {probe, probe};
        rocksdb_column_family_handle_t *h[2] = {0};
        rocksdb_t *db =
            rocksdb_open_for_read_only_column_families(probe, dir, 2, cfn, cfo, h, 0, &e);
        if (db) {
            rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
            size_t vl = 0;
            char *v = rocksdb_get_cf(db, ro, h[1], MARKER_KEY, strlen(MARKER_KEY), &vl, &e);
            if (!e && !v) {
                set_why(why, cap, "%s is not a dedup store (no marker)%s", dir, NULL);
                st = DEDUP_ERR_BAD_MAGIC;
            } else if (!e) {
                st = check_marker(s, p, v, vl, why, cap);
            }
            free(v);
            if (st == DEDUP_OK && !e)
                st = probe_count(s, db, ro, h, dir, why, cap);
            rocksdb_readoptions_destroy(ro);
            rocksdb_column_family_handle_destroy(h[0]);
            rocksdb_column_family_handle_destroy(h[1]);
            rocksdb_close(db);
        }
    }
    rocksdb_options_destroy(probe);
    if (e) {
        st = map_open_error(e, dir, why, cap);
        free(e);
    }
    return st;
}

/* The keys the store has counted against what its tables hold (RocksDB's
 * count of table entries, exact for keys written once): fewer means a
 * table file or the MANIFEST's record of one is gone -- RocksDB itself
 * takes a MANIFEST cut short for one that ended there, and would answer
 * every key of the lost tables "new".  Without expiry only (expired keys
 * leave the tables at compaction); record() of a key already held counts
 * it twice (store.h), which can only make the count larger. */
static dedup_status check_count(dedup_store *s, char *why, size_t cap)
{
    if (s->expire)
        return DEDUP_OK;
    uint64_t held = 0;
    if (rocksdb_property_int_cf(s->db, s->cf_keys, "rocksdb.estimate-num-keys", &held) != 0)
        return DEDUP_OK; /* not known: nothing to compare */
    uint64_t pending = s->read_only ? s->pend.n : 0; /* read-only: the log is not ingested */
    if (s->count <= held + pending)
        return DEDUP_OK;
    char d[160];
    snprintf(d, sizeof d, "%llu keys counted, %llu in its tables",
             (unsigned long long)s->count, (unsigned long long)(held + pending));
    set_why(why, cap, "%s: the store is damaged: %s (a table file or the MANIFEST's record of "
            "one is missing); refused, so that no recorded key is taken for new", s->dir, d);
    return DEDUP_ERR_CORRUPT;
}

/* ---- identity ----------------------------------------------------------------------- */

/* The stored identity: its text then a 4-byte checksum of it. */
static dedup_status check_identity(dedup_store *s, const dedup_store_params *p, bool fresh,
                                   char *why, size_t cap)
{
    char *e = NULL;
    size_t vl = 0;
    char *v = fresh ? NULL
                    : rocksdb_get_cf(s->db, s->ro, s->cf_meta, IDENTITY_KEY, strlen(IDENTITY_KEY),
                                     &vl, &e);
    if (e) {
        set_why(why, cap, "%s: cannot read the store's key options (RocksDB: %s)", s->dir, e);
        free(e);
        return DEDUP_ERR_IO;
    }
    if (v) {
        const unsigned char *u = (const unsigned char *)v;
        if (vl < 4 || vl - 4 > DEDUP_STORE_IDENTITY_MAX ||
            get_u32(u + vl - 4) != (uint32_t)dedup_hash(v, vl - 4, 0).lo) {
            set_why(why, cap, "%s: the store's record of its key options is damaged%s", s->dir,
                    NULL);
            free(v);
            return DEDUP_ERR_CHECKSUM;
        }
        memcpy(s->identity, v, vl - 4);
        s->identity[vl - 4] = '\0';
        free(v);
    }
    if (!p->identity || s->read_only)
        return DEDUP_OK;
    size_t il = strlen(p->identity);
    if (il > DEDUP_STORE_IDENTITY_MAX)
        return DEDUP_ERR_INVALID_ARG;
    if (v && strcmp(s->identity, p->identity) != 0 && !p->identity_force) {
        if (why && cap)
            snprintf(why, cap, "%s: the store's keys were made with [%s]; this run makes them with "
                     "[%s]", s->dir, s->identity, p->identity);
        return DEDUP_ERR_INCOMPATIBLE;
    }
    if (v && strcmp(s->identity, p->identity) == 0)
        return DEDUP_OK;
    /* new, adopted or forced: recorded (synced) */
    unsigned char *w = xmalloc(&s->a, il + 4);
    if (!w)
        return DEDUP_ERR_NOMEM;
    memcpy(w, p->identity, il);
    put_u32(w + il, (uint32_t)dedup_hash(p->identity, il, 0).lo);
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(wo, 1);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_writebatch_put_cf(wb, s->cf_meta, IDENTITY_KEY, strlen(IDENTITY_KEY), (const char *)w,
                              il + 4);
    rocksdb_write(s->db, wo, wb, &e);
    rocksdb_writebatch_destroy(wb);
    rocksdb_writeoptions_destroy(wo);
    xfree(&s->a, w);
    if (e) {
        set_why(why, cap, "%s: cannot record the store's key options (RocksDB: %s)", s->dir, e);
        free(e);
        return DEDUP_ERR_IO;
    }
    s->identity_adopted = !fresh && !v;
    memcpy(s->identity, p->identity, il + 1);
    return DEDUP_OK;
}

/* Opens the store in 'dir' ('fresh': creates it there, an empty
 * directory), its lock held unless read-only. */
dedup_status ddr_open_dir(const dedup_store_params *p, const dedup_allocator *alloc,
                          const char *dir, bool fresh, dedup_store **out, char *why, size_t cap)
{
    dedup_allocator a = {0};
    if (alloc)
        a = *alloc;
    dedup_status st = DEDUP_OK;
    dedup_store *s = xmalloc(&a, sizeof *s);
    if (!s)
        return DEDUP_ERR_NOMEM;
    memset(s, 0, sizeof *s);
    s->pend.log_fd = -1;
    s->lock_fd = -1;
    s->a = a;
    size_t dl = strlen(dir) + 1;
    s->dir = xmalloc(&a, dl);
    if (!s->dir || alloc_scratch(s) != DEDUP_OK) {
        dedup_store_free(s);
        return DEDUP_ERR_NOMEM;
    }
    memcpy(s->dir, dir, dl);
    s->read_only = p->read_only;
    s->sync = p->sync;
    s->caller_commits = p->caller_commits;
    s->clock = p->clock;
    s->clock_ctx = p->clock_ctx;
    s->keys = p->keys ? p->keys : DEDUP_STORE_KEYS_DIGEST;
    s->seed = p->seed;
    if (fresh && !s->seed && (st = ddr_random_seed(&s->seed, dir, why, cap)) != DEDUP_OK) {
        dedup_store_free(s);
        return st;
    }
    s->expire = p->expire;

    if (!s->read_only && (st = ddr_take_lock(s, why, cap)) != DEDUP_OK) {
        dedup_store_free(s);
        return st;
    }
    char *e = NULL;
    if (!fresh && ((st = ddr_check_tables(dir, why, cap)) != DEDUP_OK ||
                   (st = read_marker(s, p, dir, why, cap)) != DEDUP_OK)) {
        dedup_store_free(s);
        return st;
    }

    s->block_cache = p->block_cache ? p->block_cache : (32u << 20);
    s->read_threads = p->read_threads > 1 ? 2 : 1;
    build_options(s, s->block_cache, s->keys == DEDUP_STORE_KEYS_WHOLE, p->absent_screened);
    if (fresh) {
        rocksdb_options_set_create_if_missing(s->opt, 1);
        rocksdb_options_set_create_missing_column_families(s->opt, 1);
    }
    const char *cfn[2] = {"default", META_CF};
    const rocksdb_options_t *cfo[2] = {s->opt, s->meta_opt};
    rocksdb_column_family_handle_t *h[2] = {0};
    if (s->read_only)
        s->db = rocksdb_open_for_read_only_column_families(s->opt, dir, 2, cfn, cfo, h, 0, &e);
    else
        s->db = rocksdb_open_column_families(s->opt, dir, 2, cfn, cfo, h, &e);
    if (e) {
        st = map_open_error(e, dir, why, cap);
        free(e);
        s->db = NULL;
        dedup_store_free(s);
        return st;
    }
    s->cf_keys = h[0];
    s->cf_meta = h[1];

    if (fresh) {
        unsigned char m[MARKER_LEN], c[8];
        encode_marker(s, m);
        put_u64(c, 0);
        rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
        rocksdb_writebatch_put_cf(wb, s->cf_meta, MARKER_KEY, strlen(MARKER_KEY),
                                  (const char *)m, MARKER_LEN);
        rocksdb_writebatch_put_cf(wb, s->cf_meta, COUNT_KEY, strlen(COUNT_KEY),
                                  (const char *)c, 8);
        rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
        rocksdb_writeoptions_set_sync(wo, 1);
        rocksdb_write(s->db, wo, wb, &e);
        rocksdb_writeoptions_destroy(wo);
        rocksdb_writebatch_destroy(wb);
    } else {
        size_t vl = 0;
        char *v = rocksdb_get_cf(s->db, s->ro, s->cf_meta, COUNT_KEY, strlen(COUNT_KEY), &vl, &e);
        if (!e && v && vl == 8)
            s->count = get_u64((const unsigned char *)v);
        free(v);
    }
    if (e) {
        set_why(why, cap, "%s: cannot read or write the store's marker (RocksDB: %s)", dir, e);
        free(e);
        dedup_store_free(s);
        return DEDUP_ERR_IO;
    }
    if ((st = check_identity(s, p, fresh, why, cap)) != DEDUP_OK) {
        dedup_store_free(s);
        return st;
    }
    if ((st = ddr_pending_open(s)) != DEDUP_OK) {
        set_why(why, cap, "%s%s", s->err[0] ? s->err : "cannot start the pending log", NULL);
        s->pend.n = 0; /* nothing to ingest at close */
        dedup_store_free(s);
        return st;
    }
    if ((st = check_count(s, why, cap)) != DEDUP_OK) {
        s->pend.n = 0;
        s->pend.committed = 0;
        dedup_store_free(s);
        return st;
    }
    *out = s;
    return DEDUP_OK;
}

dedup_status dedup_store_create(const dedup_store_params *p, const dedup_allocator *alloc,
                                dedup_store **out, char *why, size_t whycap)
{
    if (why && whycap)
        why[0] = '\0';
    *out = NULL;
    if (!p || !p->dir || !p->dir[0] || p->sync > DEDUP_STORE_SYNC_NONE ||
        p->keys > DEDUP_STORE_KEYS_WHOLE || p->expire > UINT32_MAX) {
        set_why(why, whycap, "%s%s", "invalid store parameters", NULL);
        return DEDUP_ERR_INVALID_ARG;
    }
    const char *lerr = ddr_rdb_load(); /* librocksdb, on the first store (rdb_lazy.h) */
    if (lerr) {
        set_why(why, whycap, "%s%s", lerr, NULL);
        return DEDUP_ERR_UNSUPPORTED;
    }
    bool fresh;
    dedup_status st = probe_dir(p, &fresh, why, whycap);
    if (st == DEDUP_OK && fresh)
        st = ddr_create_store(p, alloc, why, whycap);
    if (st != DEDUP_OK)
        return st;
    return ddr_open_dir(p, alloc, p->dir, false, out, why, whycap);
}


dedup_status dedup_store_flush(dedup_store *s)
{
    char *e = NULL;
    if (!s->db || s->read_only)
        return DEDUP_OK;
    dedup_status st = ddr_pending_ingest(s);
    if (st != DEDUP_OK)
        return st;
    if (s->sync == DEDUP_STORE_SYNC_NONE) {
        rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
        rocksdb_flushoptions_set_wait(fo, 1);
        rocksdb_flush_cf(s->db, fo, s->cf_keys, &e);
        if (!e)
            rocksdb_flush_cf(s->db, fo, s->cf_meta, &e);
        rocksdb_flushoptions_destroy(fo);
    } else {
        rocksdb_flush_wal(s->db, 1, &e);
    }
    return e ? take_error(s, e) : DEDUP_OK;
}

void dedup_store_free(dedup_store *s)
{
    if (!s)
        return;
    if (s->db) {
        (void)dedup_store_flush(s);
        if (s->cf_keys)
            rocksdb_column_family_handle_destroy(s->cf_keys);
        if (s->cf_meta)
            rocksdb_column_family_handle_destroy(s->cf_meta);
        rocksdb_close(s->db);
    }
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* the lock goes with it, after RocksDB's files are closed */
    if (s->ro)
        rocksdb_readoptions_destroy(s->ro);
    if (s->ro_scan)
        rocksdb_readoptions_destroy(s->ro_scan);
    if (s->wo)
        rocksdb_writeoptions_destroy(s->wo);
    if (s->opt)
        rocksdb_options_destroy(s->opt);
    if (s->meta_opt)
        rocksdb_options_destroy(s->meta_opt);
    if (s->topt)
        rocksdb_block_based_options_destroy(s->topt);
    if (s->cache)
        rocksdb_cache_destroy(s->cache);
    if (s->cfilter)
        rocksdb_compactionfilter_destroy(s->cfilter);
    const dedup_allocator a = s->a;
    xfree(&a, s->kbuf);
    xfree(&a, s->kptr);
    xfree(&a, s->klen);
    xfree(&a, s->vals);
    xfree(&a, s->errs);
    xfree(&a, s->ord);
    xfree(&a, s->sptr);
    xfree(&a, s->slen);
    xfree(&a, s->qidx);
    xfree(&a, s->qptr);
    xfree(&a, s->qlen);
    ddr_pending_free(s);
    xfree(&a, s->dir);
    xfree(&a, s);
}

/* ---- the chunk ----------------------------------------------------------------- */

static dedup_status check_batch(const dedup_store *s, const dedup_batch *b)
{
    if (!b || (b->n && !b->digests))
        return DEDUP_ERR_INVALID_ARG;
    if (s->keys == DEDUP_STORE_KEYS_WHOLE && b->n && (!b->keys || !b->lens))
        return DEDUP_ERR_INVALID_ARG;
    return DEDUP_OK;
}

/* Points kptr/klen at the RocksDB keys of b[from, from+m). */
static void build_keys(dedup_store *s, const dedup_batch *b, size_t from, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        if (s->keys == DEDUP_STORE_KEYS_WHOLE) {
            s->kptr[i] = (const char *)b->keys[from + i];
            s->klen[i] = b->lens[from + i];
        } else {
            unsigned char *k = s->kbuf + 16 * i;
            put_u64(k, b->digests[from + i].lo);
            put_u64(k + 8, b->digests[from + i].hi);
            s->kptr[i] = (const char *)k;
            s->klen[i] = 16;
        }
    }
}

/* RocksDB's bytewise order: the two words, then the bytes past 16, then
 * the length (a key that is a prefix of another comes first; the words'
 * zero padding never reorders them). */
static int cmp_ord(const void *x, const void *y)
{
    const ddr_ord *a = x, *b = y;
    if (a->pfx != b->pfx)
        return a->pfx < b->pfx ? -1 : 1;
    if (a->rest != b->rest)
        return a->rest < b->rest ? -1 : 1;
    size_t m = a->len < b->len ? a->len : b->len;
    int c = m > 16 ? memcmp(a->k + 16, b->k + 16, m - 16) : 0;
    if (c)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* One MultiGet over sorted keys sptr/slen[0..n), results into vals/errs. */
typedef struct mget_part {
    dedup_store *s;
    size_t from, n;
} mget_part;

static void *mget_part_run(void *arg)
{
    const mget_part *p = arg;
    dedup_store *s = p->s;
    rocksdb_batched_multi_get_cf(s->db, s->ro, s->cf_keys, p->n, s->sptr + p->from,
                                 s->slen + p->from, s->vals + p->from, s->errs + p->from, true);
    return NULL;
}

/* A lookup of at least this many keys is split over two threads (when
 * read_threads is 2): below it, starting a thread costs more than half the
 * reads (~2-5 us of CPU each, bench/results/tiers.md). */
#define MGET_SPLIT_MIN 256u

/* One MultiGet of the chunk's keys: present[i] says whether key i is held
 * and not expired.  The keys are sorted first (RocksDB then skips its own
 * sort: sorted_input), and a large lookup reads its second half on a
 * helper thread started and joined here. */
static dedup_status multi_get_of(dedup_store *s, size_t m, const char **kp, const size_t *kl,
                                 bool *present)
{
    if (!m)
        return DEDUP_OK;
    for (size_t i = 0; i < m; i++)
        s->ord[i] = (ddr_ord){ddr_be_word(kp[i], kl[i], 0), ddr_be_word(kp[i], kl[i], 8), kp[i],
                              (uint32_t)kl[i], (uint32_t)i};
    qsort(s->ord, m, sizeof *s->ord, cmp_ord);
    for (size_t j = 0; j < m; j++) {
        s->sptr[j] = s->ord[j].k;
        s->slen[j] = s->ord[j].len;
    }
    size_t h = s->read_threads > 1 && m >= MGET_SPLIT_MIN ? m / 2 : m;
    mget_part lo = {s, 0, h}, hi = {s, h, m - h};
    pthread_t th;
    bool two = hi.n && pthread_create(&th, NULL, mget_part_run, &hi) == 0;
    mget_part_run(&lo);
    if (two)
        pthread_join(th, NULL);
    else if (hi.n)
        mget_part_run(&hi);
    s->lookups += m;
    int64_t now = s->expire ? store_now(s) : 0;
    dedup_status st = DEDUP_OK;
    for (size_t j = 0; j < m; j++) {
        size_t i = s->ord[j].i;
        if (s->errs[j]) {
            if (st == DEDUP_OK)
                st = take_error(s, s->errs[j]);
            else
                free(s->errs[j]);
        }
        present[i] = false;
        if (s->vals[j]) {
            size_t vl = 0;
            const char *v = rocksdb_pinnableslice_value(s->vals[j], &vl);
            present[i] = !value_expired(s, v, vl, now);
            s->expired += !present[i];
            rocksdb_pinnableslice_destroy(s->vals[j]);
        }
    }
    return st;
}

static dedup_status multi_get(dedup_store *s, size_t m, bool *present)
{
    return multi_get_of(s, m, s->kptr, s->klen, present);
}

static bool pending_has(const dedup_store *s, size_t i, uint64_t h, int64_t now)
{
    uint32_t e = ddr_pending_find(s, s->kptr[i], s->klen[i], h);
    if (e == NO_SLOT)
        return false;
    unsigned char ts[4];
    put_u32(ts, s->pend.e[e].ts);
    return !value_expired(s, (const char *)ts, s->expire ? 4 : 0, now);
}

/* Sync BATCH and NONE (pending.c): a key recorded since the last ingestion
 * is answered from the pending table without a read; the others are read
 * in one MultiGet; the new ones join the pending table (and its log) and
 * every DDR_PENDING_KEYS keys the table is ingested. */
static dedup_status decide_chunk_pending(dedup_store *s, const dedup_batch *b, size_t from,
                                         size_t m, dedup_verdict *out)
{
    bool present[DEDUP_STORE_CHUNK];
    build_keys(s, b, from, m);
    int64_t now = s->expire ? store_now(s) : 0;
    size_t q = 0;
    for (size_t i = 0; i < m; i++) {
        if (pending_has(s, i, b->digests[from + i].lo, now)) {
            out[i] = DEDUP_DUPLICATE;
            continue;
        }
        s->qidx[q] = (uint32_t)i;
        s->qptr[q] = s->kptr[i];
        s->qlen[q] = s->klen[i];
        q++;
    }
    dedup_status st = multi_get_of(s, q, s->qptr, s->qlen, present);
    if (st != DEDUP_OK)
        return st;
    uint64_t added = 0;
    for (size_t j = 0; j < q && st == DEDUP_OK; j++) {
        size_t i = s->qidx[j];
        uint64_t h = b->digests[from + i].lo;
        if (present[j] || pending_has(s, i, h, now)) { /* the second: earlier in this chunk */
            out[i] = DEDUP_DUPLICATE;
            continue;
        }
        st = ddr_pending_put(s, s->kptr[i], s->klen[i], h, (uint32_t)now);
        out[i] = DEDUP_NEW;
        added++;
    }
    if (st != DEDUP_OK)
        return st;
    s->writes += added;
    return ddr_pending_chunk_done(s);
}

dedup_status dedup_store_decide(dedup_store *s, const dedup_batch *b, dedup_verdict *out,
                                size_t *done)
{
    if (done)
        *done = 0;
    dedup_status st = check_batch(s, b);
    if (st != DEDUP_OK)
        return st;
    if (s->read_only)
        return DEDUP_ERR_UNSUPPORTED;
    for (size_t from = 0; from < b->n; from += DEDUP_STORE_CHUNK) {
        size_t m = b->n - from < DEDUP_STORE_CHUNK ? b->n - from : DEDUP_STORE_CHUNK;
        st = decide_chunk_pending(s, b, from, m, out + from);
        if (st != DEDUP_OK) {
            s->failed |= s->caller_commits; /* see dedup_store_commit() */
            return st;
        }
        if (done)
            *done = from + m;
    }
    return DEDUP_OK;
}

dedup_status dedup_store_query(const dedup_store *cs, const dedup_batch *b, dedup_verdict *out)
{
    dedup_store *s = (dedup_store *)cs; /* scratch and stats only */
    bool present[DEDUP_STORE_CHUNK];
    dedup_status st = check_batch(s, b);
    if (st != DEDUP_OK)
        return st;
    for (size_t from = 0; from < b->n; from += DEDUP_STORE_CHUNK) {
        size_t m = b->n - from < DEDUP_STORE_CHUNK ? b->n - from : DEDUP_STORE_CHUNK;
        build_keys(s, b, from, m);
        st = multi_get(s, m, present);
        if (st != DEDUP_OK)
            return st;
        int64_t now = s->expire ? store_now(s) : 0;
        for (size_t i = 0; i < m; i++)
            out[from + i] = present[i] || pending_has(s, i, b->digests[from + i].lo, now)
                                ? DEDUP_DUPLICATE
                                : DEDUP_NEW;
    }
    return DEDUP_OK;
}

dedup_status dedup_store_record(void *ctx, const dedup_batch *b)
{
    dedup_store *s = ctx;
    dedup_status st = check_batch(s, b);
    if (st != DEDUP_OK)
        return st;
    if (s->read_only)
        return DEDUP_ERR_UNSUPPORTED;
    unsigned char ts[4];
    put_u32(ts, (uint32_t)(s->expire ? store_now(s) : 0));
    for (size_t from = 0; from < b->n; from += DEDUP_STORE_CHUNK) {
        size_t m = b->n - from < DEDUP_STORE_CHUNK ? b->n - from : DEDUP_STORE_CHUNK;
        build_keys(s, b, from, m);
        for (size_t i = 0; i < m && st == DEDUP_OK; i++)
            st = ddr_pending_put(s, s->kptr[i], s->klen[i], b->digests[from + i].lo, get_u32(ts));
        if (st == DEDUP_OK)
            s->writes += m;
        if (st == DEDUP_OK)
            st = ddr_pending_chunk_done(s);
        if (st != DEDUP_OK) {
            s->failed |= s->caller_commits;
            return st;
        }
    }
    return DEDUP_OK;
}

/* ---- what it holds ------------------------------------------------------------ */

static uint64_t dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    uint64_t total = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    closedir(d);
    return total;
}

static uint64_t prop(const dedup_store *s, rocksdb_column_family_handle_t *cf, const char *name)
{
    uint64_t v = 0;
    if (rocksdb_property_int_cf(s->db, cf, name, &v) != 0)
        return 0;
    return v;
}

dedup_status dedup_store_get_info(const dedup_store *s, dedup_store_info *out)
{
    memset(out, 0, sizeof *out);
    out->keys = s->count + s->pend.added + s->pend.uadded;
    out->recovered = s->pend.recovered;
    out->identity = s->identity;
    out->identity_adopted = s->identity_adopted;
    out->torn_bytes = s->pend.torn_bytes;
    out->bytes_on_disk = dir_bytes(s->dir);
    out->sst_bytes = prop(s, s->cf_keys, "rocksdb.total-sst-files-size") +
                     prop(s, s->cf_meta, "rocksdb.total-sst-files-size");
    out->seed = s->seed;
    out->keys_mode = s->keys;
    out->expire = s->expire;
    out->format_version = DEDUP_STORE_FORMAT_VERSION;
    out->lookups = s->lookups;
    out->writes = s->writes;
    out->expired = s->expired;
    out->memory = (size_t)(prop(s, s->cf_keys, "rocksdb.cur-size-all-mem-tables") +
                           prop(s, s->cf_keys, "rocksdb.estimate-table-readers-mem") +
                           rocksdb_cache_get_usage(s->cache)) +
                  sizeof *s + DEDUP_STORE_CHUNK * (16 + 2 * sizeof(void *) + sizeof(size_t) +
                                                   sizeof(char *)) +
                  ddr_pending_memory(s);
    return DEDUP_OK;
}

const char *dedup_store_last_error(const dedup_store *s)
{
    return s ? s->err : "";
}

dedup_status dedup_store_foreach(const dedup_store *cs, dedup_store_digest_fn fn, void *ctx)
{
    dedup_store *s = (dedup_store *)cs;
    dedup_digest *buf = xmalloc(&s->a, DEDUP_STORE_CHUNK * sizeof *buf);
    if (!buf)
        return DEDUP_ERR_NOMEM;
    /* A scan reads every block anyway: when the cache can hold the tables
     * (with a quarter to spare), it keeps them, and the reads that follow
     * (a rebuild's run) find their blocks decoded in memory. */
    bool keep = prop(s, s->cf_keys, "rocksdb.live-sst-files-size") <= s->block_cache / 4 * 3;
    rocksdb_readoptions_set_fill_cache(s->ro_scan, keep);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, s->ro_scan, s->cf_keys);
    int64_t now = s->expire ? store_now(s) : 0;
    size_t n = 0;
    dedup_status st = DEDUP_OK;
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl = 0, vl = 0;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        if (value_expired(s, v, vl, now))
            continue;
        if (s->keys == DEDUP_STORE_KEYS_WHOLE) {
            buf[n] = dedup_hash(k, kl, s->seed);
        } else if (kl == 16) {
            buf[n].lo = get_u64((const unsigned char *)k);
            buf[n].hi = get_u64((const unsigned char *)k + 8);
        } else {
            snprintf(s->err, sizeof s->err, "%s: a key of %zu bytes in a digest store", s->dir, kl);
            st = DEDUP_ERR_CORRUPT;
            break;
        }
        if (++n == DEDUP_STORE_CHUNK) {
            if (fn(ctx, buf, n)) {
                st = DEDUP_ERR_CANCELLED;
                break;
            }
            n = 0;
        }
    }
    char *e = NULL;
    rocksdb_iter_get_error(it, &e);
    if (e)
        st = take_error(s, e);
    for (size_t i = 0; st == DEDUP_OK && i < s->pend.n; i++) { /* recorded, not yet ingested */
        const ddr_entry *pe = &s->pend.e[i];
        unsigned char kb[16];
        const unsigned char *k = ddr_entry_key(s->pend.arena, pe, kb);
        unsigned char ts[4];
        put_u32(ts, pe->ts);
        if (value_expired(s, (const char *)ts, s->expire ? 4 : 0, now))
            continue;
        if (s->keys == DEDUP_STORE_KEYS_WHOLE) {
            buf[n] = dedup_hash(k, pe->len, s->seed);
        } else {
            buf[n].lo = get_u64(k);
            buf[n].hi = get_u64(k + 8);
        }
        if (++n == DEDUP_STORE_CHUNK) {
            if (fn(ctx, buf, n))
                st = DEDUP_ERR_CANCELLED;
            n = 0;
        }
    }
    if (st == DEDUP_OK && n && fn(ctx, buf, n))
        st = DEDUP_ERR_CANCELLED;
    rocksdb_iter_destroy(it);
    xfree(&s->a, buf);
    return st;
}

typedef struct fill_ctx {
    dedup_seen *filter;
    dedup_verdict v[DEDUP_STORE_CHUNK];
    dedup_status st;
    uint64_t count;
} fill_ctx;

static int fill_one(void *ctx, const dedup_digest *d, size_t n)
{
    fill_ctx *f = ctx;
    dedup_batch b = {.n = n, .digests = d};
    f->st = dedup_seen_decide(f->filter, &b, f->v, NULL);
    f->count += n;
    return f->st != DEDUP_OK;
}

dedup_status dedup_store_fill(const dedup_store *s, dedup_seen *filter, uint64_t *count)
{
    fill_ctx *f = xmalloc(&((dedup_store *)s)->a, sizeof *f);
    if (!f)
        return DEDUP_ERR_NOMEM;
    f->filter = filter;
    f->st = DEDUP_OK;
    f->count = 0;
    dedup_status st = dedup_store_foreach(s, fill_one, f);
    if (st == DEDUP_ERR_CANCELLED && f->st != DEDUP_OK)
        st = f->st;
    if (count)
        *count = f->count;
    xfree(&((dedup_store *)s)->a, f);
    return st;
}
