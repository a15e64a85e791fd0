/*
 * rocksdb_ceiling.c - what this machine's librocksdb does alone with 16-byte
 * random keys, the floor under bench_tiers.sh's store figures:
 *   1. puts through the memtable: WriteBatch of 4096, WAL off
 *   2. the same number of keys as sorted table files (SstFileWriter, 2M keys
 *      each) ingested whole (IngestExternalFile): the store's write path
 *   3. MultiGet of 4096 keys at a time: present keys, then absent keys
 * Options as the store's (ribbon filter 10 bits/key, LZ4, 16 KiB blocks,
 * binary search in them); the environment changes them, to measure each:
 *   RC_NONE=1 no compression, RC_BLOCK=BYTES block size, RC_HASH=1 a hash
 *   index in data blocks (ratio 0.75), RC_HITS=1 optimize_filters_for_hits,
 *   RC_BLOOM=1 a Bloom filter instead of ribbon, RC_SORTED=1 sorted batches
 *   through the batched MultiGet (sorted_input), RC_COMPACT=1 a full
 *   compaction before the reads (one sorted run: no level-0 file to probe),
 *   RC_RESTART=N block_restart_interval (default 16), RC_SHARDBITS=N the
 *   block cache's shard bits (default: RocksDB's choice), RC_THREADS=2 each
 *   batch's MultiGet split in two halves read by two threads at once,
 *   RC_NOPUTS=1 skips step 1, RC_ROUNDS=N reads the present keys N times
 *   (each round reported: one in-cache figure per round).
 * Each read phase reports keys per wall second and per CPU second (all
 * threads, background compaction included).
 *
 *   cc -O2 -o rc bench/rocksdb_ceiling.c -lrocksdb -lpthread
 *   ./rc DIR KEYS [PUT_KEYS] [READS] [CACHE_MB]
 */
#include <pthread.h>
#include <rocksdb/c.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 4096
#define FILE_KEYS (2L << 20)

#include <sys/resource.h>

static double cpu(void) /* user + system seconds of every thread */
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t *x) /* splitmix64 */
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void key(uint64_t *x, unsigned char k[16])
{
    uint64_t a = mix(x), b = mix(x);
    memcpy(k, &a, 8);
    memcpy(k + 8, &b, 8);
}

static int cmp16(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

static void die(const char *what, char *e)
{
    fprintf(stderr, "%s: %s\n", what, e);
    exit(1);
}

static rocksdb_options_t *options(size_t cache_mb)
{
    rocksdb_options_t *o = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(o, 1);
    rocksdb_options_increase_parallelism(o, 2);
    rocksdb_options_set_max_background_jobs(o, 2);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(o, 1);
    const char *ev;
    rocksdb_options_set_compression(o, getenv("RC_NONE") ? rocksdb_no_compression : rocksdb_lz4_compression);
    rocksdb_options_set_optimize_filters_for_hits(o, getenv("RC_HITS") != NULL);
    rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_filter_policy(t, getenv("RC_BLOOM") ? rocksdb_filterpolicy_create_bloom_full(10.0) : rocksdb_filterpolicy_create_ribbon(10.0));
    rocksdb_block_based_options_set_block_size(t, (ev = getenv("RC_BLOCK")) ? (size_t)atol(ev) : 16u << 10);
    if ((ev = getenv("RC_RESTART")))
        rocksdb_block_based_options_set_block_restart_interval(t, atoi(ev));
    if (getenv("RC_HASH")) {
        rocksdb_block_based_options_set_data_block_index_type(t, rocksdb_block_based_table_data_block_index_type_binary_search_and_hash);
        rocksdb_block_based_options_set_data_block_hash_ratio(t, 0.75);
    }
    rocksdb_block_based_options_set_format_version(t, 5);
    rocksdb_lru_cache_options_t *lo = rocksdb_lru_cache_options_create();
    rocksdb_lru_cache_options_set_capacity(lo, cache_mb << 20);
    if ((ev = getenv("RC_SHARDBITS")))
        rocksdb_lru_cache_options_set_num_shard_bits(lo, atoi(ev));
    rocksdb_block_based_options_set_block_cache(t, rocksdb_cache_create_lru_opts(lo));
    rocksdb_lru_cache_options_destroy(lo);
    rocksdb_options_set_block_based_table_factory(o, t);
    return o;
}

static rocksdb_column_family_handle_t *cf_default;

/* One MultiGet of n keys (sorted or not), found counted; run by one thread. */
typedef struct part {
    rocksdb_t *db;
    const rocksdb_readoptions_t *ro;
    const char **kp;
    size_t *kl, *vl, n;
    char **v, **er;
    rocksdb_pinnableslice_t **ps;
    bool sorted;
    long found;
} part;

static void *read_part(void *arg)
{
    part *p = arg;
    if (p->sorted) {
        rocksdb_batched_multi_get_cf(p->db, p->ro, cf_default, p->n, p->kp, p->kl, p->ps, p->er, true);
        for (size_t j = 0; j < p->n; j++) {
            if (p->er[j])
                die("multi_get", p->er[j]);
            p->found += p->ps[j] != NULL;
            rocksdb_pinnableslice_destroy(p->ps[j]);
        }
        return NULL;
    }
    rocksdb_multi_get(p->db, p->ro, p->n, p->kp, p->kl, p->v, p->vl, p->er);
    for (size_t j = 0; j < p->n; j++) {
        if (p->er[j])
            die("multi_get", p->er[j]);
        p->found += p->v[j] != NULL;
        free(p->v[j]);
    }
    return NULL;
}

static void reads(rocksdb_t *db, uint64_t seed, long n, const char *what)
{
    static unsigned char kb[BATCH][16];
    const char *kp[BATCH];
    size_t kl[BATCH], vl[BATCH];
    char *v[BATCH], *er[BATCH];
    static rocksdb_pinnableslice_t *ps[BATCH];
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    long found = 0;
    bool sorted = getenv("RC_SORTED") != NULL, two = getenv("RC_THREADS") && atoi(getenv("RC_THREADS")) > 1;
    n = (n + BATCH - 1) / BATCH * BATCH;
    double t0 = now(), c0 = cpu();
    for (long i = 0; i < n; i += BATCH) {
        for (int j = 0; j < BATCH; j++) {
            key(&seed, kb[j]);
            kp[j] = (const char *)kb[j];
            kl[j] = 16;
        }
        if (sorted)
            qsort(kb, BATCH, 16, cmp16);
        size_t h = two ? BATCH / 2 : BATCH;
        part a = {db, ro, kp, kl, vl, h, v, er, ps, sorted, 0};
        part b = {db, ro, kp + h, kl + h, vl + h, BATCH - h, v + h, er + h, ps + h, sorted, 0};
        pthread_t th;
        if (two && pthread_create(&th, NULL, read_part, &b) != 0)
            die("pthread_create", "failed");
        read_part(&a);
        if (two)
            pthread_join(th, NULL);
        else if (b.n)
            read_part(&b);
        found += a.found + b.found;
    }
    double t = now() - t0, c = cpu() - c0;
    printf("multiget %-7s %ld keys (%ld found) in %.2f s: %.0f keys/s; %.2f CPU s: %.0f keys per CPU s"
           " (%.2f us CPU per key)\n", what, n, found, t, (double)n / t, c, (double)n / c, 1e6 * c / (double)n);
    rocksdb_readoptions_destroy(ro);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIR KEYS [PUT_KEYS] [READS] [CACHE_MB]\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char path[4096], *e = NULL;
    long n = atol(argv[2]);
    long puts = argc > 3 ? atol(argv[3]) : 0;
    if (puts <= 0)
        puts = n < 2000000 ? n : 2000000;
    long nr = argc > 4 ? atol(argv[4]) : 1000000;
    size_t cache = argc > 5 ? (size_t)atol(argv[5]) : 1024;

    /* 1: memtable puts, in a database of their own */
    snprintf(path, sizeof path, "%s/puts", argv[1]);
    rocksdb_options_t *o = options(cache);
    rocksdb_t *db = NULL;
    uint64_t x = 7;
    unsigned char k[16];
    double t0 = now(), t;
    if (getenv("RC_NOPUTS"))
        goto ingest;
    db = rocksdb_open(o, path, &e);
    if (e)
        die(path, e);
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(wo, 1);
    for (long i = 0; i < puts; i += BATCH) {
        rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
        for (long j = 0; j < BATCH && i + j < puts; j++) {
            key(&x, k);
            rocksdb_writebatch_put(wb, (const char *)k, 16, "", 0);
        }
        rocksdb_write(db, wo, wb, &e);
        if (e)
            die("write", e);
        rocksdb_writebatch_destroy(wb);
    }
    t = now() - t0;
    printf("memtable puts      %ld keys in %.2f s: %.0f keys/s (WriteBatch %d, WAL off)\n", puts,
           t, (double)puts / t, BATCH);
    rocksdb_close(db);

ingest: /* 2: sorted table files, ingested */
    snprintf(path, sizeof path, "%s/ingest", argv[1]);
    const char *cfn[1] = {"default"};
    const rocksdb_options_t *cfo[1] = {o};
    db = rocksdb_open_column_families(o, path, 1, cfn, cfo, &cf_default, &e);
    if (e)
        die(path, e);
    unsigned char(*buf)[16] = malloc(FILE_KEYS * 16);
    rocksdb_envoptions_t *eo = rocksdb_envoptions_create();
    rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
    rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
    x = 1;
    t0 = now();
    for (long i = 0, f = 0; i < n; i += FILE_KEYS, f++) {
        long m = n - i < FILE_KEYS ? n - i : FILE_KEYS;
        for (long j = 0; j < m; j++)
            key(&x, buf[j]);
        qsort(buf, (size_t)m, 16, cmp16);
        rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(eo, o);
        char sst[4200];
        snprintf(sst, sizeof sst, "%s/in-%ld.sst", argv[1], f);
        rocksdb_sstfilewriter_open(w, sst, &e);
        for (long j = 0; !e && j < m; j++)
            rocksdb_sstfilewriter_put(w, (const char *)buf[j], 16, "", 0, &e);
        if (!e)
            rocksdb_sstfilewriter_finish(w, &e);
        if (e)
            die(sst, e);
        rocksdb_sstfilewriter_destroy(w);
        const char *files[1] = {sst};
        rocksdb_ingest_external_file(db, files, 1, io, &e);
        if (e)
            die("ingest", e);
    }
    t = now() - t0;
    printf("sorted ingestion   %ld keys in %.2f s: %.0f keys/s (files of %ld keys)\n", n, t,
           (double)n / t, FILE_KEYS);

    if (getenv("RC_COMPACT")) {
        t0 = now();
        rocksdb_compact_range(db, NULL, 0, NULL, 0);
        printf("full compaction    %.2f s\n", now() - t0);
    }
    char *l0 = rocksdb_property_value(db, "rocksdb.num-files-at-level0");
    char *l6 = rocksdb_property_value(db, "rocksdb.levelstats");
    printf("level-0 files %s\n%s", l0, l6);
    free(l0);
    free(l6);
    /* 3: reads (present: the ingested sequence again; absent: another) */
    int rounds = getenv("RC_ROUNDS") ? atoi(getenv("RC_ROUNDS")) : 1;
    for (int i = 0; i < rounds; i++)
        reads(db, 1, nr < n ? nr : n, "present");
    reads(db, 99, nr, "absent");
    rocksdb_column_family_handle_destroy(cf_default);
    rocksdb_close(db);
    free(buf);
    return 0;
}
