/*
 * pending.c - the keys a store with sync BATCH or NONE recorded since its
 * last ingestion, and the ingestion that moves them into RocksDB.
 *
 * Why not RocksDB's memtable: digests are random, so each insert into the
 * memtable's skiplist walks cold cache lines of a 64 MiB structure; on the
 * machines measured that caps the puts at ~50k keys/s even from a minimal
 * program with the WAL off (bench/results/tiers.md).  Here a recorded key
 * is appended to an array of entries and to an open-addressing table of its index
 * (one probe), and every DDR_PENDING_KEYS keys the entries are sorted and
 * written as one table file (SstFileWriter, the column family's own
 * options: ribbon filter, compression) that RocksDB ingests whole: a
 * sequential write instead of millions of skiplist inserts.  Lookups ask
 * this table before RocksDB, so nothing recorded is ever answered NEW
 * again.
 *
 * Durability: the keys decided since the last commit are appended to
 * DIR/dedup-pending.log as one record, with one write(2), at
 * dedup_store_commit() (after each chunk of decide()/record(), or when the
 * caller says, params.caller_commits: the CLI commits once the batch's
 * records are written out).  Sync BATCH: a kill -9 loses no committed key
 * (the kernel has the bytes); a power loss may lose the records since the
 * last ingestion, or leave a log shorter than its header says (refused as
 * damaged: move it away and those keys' records are written again).  Sync
 * ALWAYS: the record is fdatasync()ed before the commit returns.  Sync
 * NONE keeps no log: a kill -9 forgets the keys since the last ingestion.
 *
 * The log (version 2): a 32-byte header (magic "DDUPPLOG", version, key
 * mode, generation, the length through the last committed record,
 * checksum) then records: a 32-byte header (payload bytes, entries, the
 * record's number, the payload's checksum, its own checksum; both seeded
 * by generation and number) and the entries (u32 time, u32 length, the
 * key's bytes).  Each commit appends one record with one write(2), then
 * rewrites the header's length.  At open, only a torn tail -- an
 * incomplete record past the declared length, the write a kill cut -- is
 * ignored (and reported: info.torn_bytes); a bad checksum, a record out of
 * sequence, a file shorter than its declared length is damage, refused
 * naming the file and the byte.  A record past the declared length is
 * whole and read (the kill came between its write and the header's).
 *
 * The count across a crash: before ingesting generation G the store writes
 * {count + new keys, ingested = G} to its meta column family (synced), then
 * ingests, then starts the log of generation G + 1.  A log found at open is
 * replayed and ingested again; its keys are counted only if the meta does
 * not already say "ingested = G".  Ingesting a key twice is harmless.
 */
#define _GNU_SOURCE /* qsort_r */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_MAGIC "DDUPPLOG"
#define LOG_VERSION 2u
#define LOG_HEADER 32u
#define REC_HEADER 32u
#define ENTRY_HEADER 8u

static void path_of(const dedup_store *s, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", s->dir, name);
}

static dedup_status sys_error(dedup_store *s, const char *what, const char *name)
{
    snprintf(s->err, sizeof s->err, "%s/%s: %s: %s", s->dir, name, what, strerror(errno));
    return DEDUP_ERR_IO;
}

/* ---- memory ----------------------------------------------------------------- */

static bool grow(const dedup_allocator *a, void **p, size_t *cap, size_t need, size_t unit)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need)
        nc *= 2;
    void *q = xmalloc(a, nc * unit);
    if (!q)
        return false;
    if (*p)
        memcpy(q, *p, *cap * unit);
    xfree(a, *p);
    *p = q;
    *cap = nc;
    return true;
}

size_t ddr_pending_memory(const dedup_store *s)
{
    const ddr_pending *p = &s->pend;
    return p->cap + p->ecap * sizeof *p->e + p->logcap +
           (p->table ? DDR_PENDING_SLOTS * sizeof *p->table : 0);
}

void ddr_pending_free(dedup_store *s)
{
    ddr_pending *p = &s->pend;
    if (p->log_fd >= 0)
        close(p->log_fd);
    p->log_fd = -1;
    xfree(&s->a, p->arena);
    xfree(&s->a, p->e);
    xfree(&s->a, p->table);
    xfree(&s->a, p->logbuf);
    p->arena = NULL, p->e = NULL, p->table = NULL, p->logbuf = NULL;
}

/* ---- the table ---------------------------------------------------------------- */

/* Bytes [from, from + 8) of k, big-endian, zero past len. */
static bool same_entry(const ddr_pending *p, const ddr_entry *e, const char *k, size_t len,
                       uint64_t pfx, uint64_t rest)
{
    if (e->len != len || e->pfx != pfx)
        return false;
    return len <= 16 ? e->rest == rest : memcmp(p->arena + e->rest, k, len) == 0;
}

uint32_t ddr_pending_find(const dedup_store *s, const char *k, size_t len, uint64_t h)
{
    const ddr_pending *p = &s->pend;
    if (!p->n)
        return NO_SLOT;
    uint64_t pfx = ddr_be_word(k, len, 0), rest = ddr_be_word(k, len, 8);
    uint32_t slot = (uint32_t)h & (DDR_PENDING_SLOTS - 1);
    while (p->table[slot] != NO_SLOT) {
        if (same_entry(p, &p->e[p->table[slot]], k, len, pfx, rest))
            return p->table[slot];
        slot = (slot + 1) & (DDR_PENDING_SLOTS - 1);
    }
    return NO_SLOT;
}

static bool log_reserve(dedup_store *s, size_t more)
{
    ddr_pending *p = &s->pend;
    if (p->loglen == 0)
        p->loglen = REC_HEADER;
    return grow(&s->a, (void **)&p->logbuf, &p->logcap, p->loglen + more, 1);
}

static dedup_status put_entry(dedup_store *s, const char *k, size_t len, uint64_t h, uint32_t ts,
                              bool to_log)
{
    ddr_pending *p = &s->pend;
    if (len > UINT32_MAX)
        return DEDUP_ERR_LIMIT;
    uint64_t pfx = ddr_be_word(k, len, 0), rest = ddr_be_word(k, len, 8);
    uint32_t slot = (uint32_t)h & (DDR_PENDING_SLOTS - 1);
    while (p->table[slot] != NO_SLOT) {
        if (same_entry(p, &p->e[p->table[slot]], k, len, pfx, rest))
            break;
        slot = (slot + 1) & (DDR_PENDING_SLOTS - 1);
    }
    if (to_log) {
        if (!log_reserve(s, ENTRY_HEADER + len))
            return DEDUP_ERR_NOMEM;
        unsigned char *q = p->logbuf + p->loglen;
        put_u32(q, ts);
        put_u32(q + 4, (uint32_t)len);
        memcpy(q + 8, k, len);
        p->loglen += ENTRY_HEADER + len;
    }
    p->uadded++;
    if (p->table[slot] != NO_SLOT) { /* an expired key recorded anew */
        p->e[p->table[slot]].ts = ts;
        return DEDUP_OK;
    }
    if (!grow(&s->a, (void **)&p->e, &p->ecap, p->n + 1, sizeof *p->e))
        return DEDUP_ERR_NOMEM;
    if (len > 16) {
        if (!grow(&s->a, (void **)&p->arena, &p->cap, p->used + len, 1))
            return DEDUP_ERR_NOMEM;
        memcpy(p->arena + p->used, k, len);
        rest = p->used;
        p->used += len;
    } else {
        p->used += 16; /* counted against DDR_PENDING_BYTES all the same */
    }
    p->e[p->n] = (ddr_entry){.pfx = pfx, .rest = rest, .len = (uint32_t)len, .ts = ts};
    p->table[slot] = (uint32_t)p->n;
    p->n++;
    return DEDUP_OK;
}

dedup_status ddr_pending_put(dedup_store *s, const char *k, size_t len, uint64_t h, uint32_t ts)
{
    return put_entry(s, k, len, h, ts, s->pend.log_fd >= 0);
}

bool ddr_pending_full(const dedup_store *s)
{
    return s->pend.n >= DDR_PENDING_KEYS || s->pend.used >= DDR_PENDING_BYTES;
}

/* ---- the log ------------------------------------------------------------------ */

/* The header: magic, version, key mode, generation, the length of the log
 * through its last committed record (updated after each record), and a
 * checksum of the 28 bytes before it. */
static void encode_log_header(const dedup_store *s, unsigned char h[LOG_HEADER])
{
    memset(h, 0, LOG_HEADER);
    memcpy(h, LOG_MAGIC, 8);
    put_u32(h + 8, LOG_VERSION);
    put_u32(h + 12, (uint32_t)s->keys);
    put_u64(h + 16, s->pend.gen);
    put_u32(h + 24, (uint32_t)s->pend.log_bytes);
    put_u32(h + 28, (uint32_t)dedup_hash(h, 28, 0).lo);
}

static dedup_status write_all(dedup_store *s, int fd, const unsigned char *b, size_t n)
{
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return sys_error(s, "cannot write the pending log", DDR_LOG_NAME);
        b += w;
        n -= (size_t)w;
    }
    return DEDUP_OK;
}

static void sync_dir(const dedup_store *s)
{
    int d = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0) {
        (void)fsync(d);
        close(d);
    }
}

/* Starts the log of generation s->pend.gen: written aside (a name created
 * here, never a link followed), then renamed over the old one, so a crash
 * leaves one whole log or the other; with sync ALWAYS the new log and the
 * directory entry are synced first. */
static dedup_status start_log(dedup_store *s)
{
    char path[4096], tmp[4200];
    path_of(s, DDR_LOG_NAME, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (s->pend.log_fd >= 0)
        close(s->pend.log_fd);
    s->pend.log_fd = -1;
    s->pend.seq = 0;
    s->pend.log_bytes = LOG_HEADER;
    (void)unlink(tmp); /* a killed run's; the store's lock makes it nobody else's */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return sys_error(s, "cannot create the pending log", DDR_LOG_NAME ".tmp");
    unsigned char h[LOG_HEADER];
    encode_log_header(s, h);
    dedup_status st = write_all(s, fd, h, sizeof h);
    if (st == DEDUP_OK && s->sync == DEDUP_STORE_SYNC_ALWAYS && fdatasync(fd) != 0)
        st = sys_error(s, "cannot sync the pending log", DDR_LOG_NAME ".tmp");
    if (st == DEDUP_OK && rename(tmp, path) != 0)
        st = sys_error(s, "cannot rename the pending log", DDR_LOG_NAME);
    if (st != DEDUP_OK) {
        close(fd);
        unlink(tmp);
        return st;
    }
    if (s->sync == DEDUP_STORE_SYNC_ALWAYS)
        sync_dir(s);
    s->pend.log_fd = fd;
    return DEDUP_OK;
}

/* A record's header: u32 payload bytes, u32 entries, u64 record number in
 * this log (0, 1, ...), u64 payload checksum, u32 zero, u32 checksum of
 * the 28 bytes before it; both checksums seeded by generation and number,
 * so a record copied from elsewhere or repeated fails them. */
static uint64_t rec_seed(uint64_t gen, uint64_t seq)
{
    return gen * 0x9E3779B97F4A7C15ull ^ seq;
}

/* Writes the record of the keys put since the last commit (one write(2));
 * fdatasync()ed with sync ALWAYS. */
static dedup_status write_record(dedup_store *s)
{
    ddr_pending *p = &s->pend;
    if (p->log_fd < 0 || p->loglen <= REC_HEADER) {
        p->loglen = 0;
        return DEDUP_OK;
    }
    size_t bytes = p->loglen - REC_HEADER;
    if (bytes > UINT32_MAX) {
        snprintf(s->err, sizeof s->err, "%s/%s: a record of %zu bytes is past the format's limit",
                 s->dir, DDR_LOG_NAME, bytes);
        return DEDUP_ERR_LIMIT;
    }
    uint32_t n = 0;
    for (size_t at = REC_HEADER; at < p->loglen; n++)
        at += ENTRY_HEADER + get_u32(p->logbuf + at + 4);
    unsigned char *h = p->logbuf;
    uint64_t rs = rec_seed(p->gen, p->seq);
    put_u32(h, (uint32_t)bytes);
    put_u32(h + 4, n);
    put_u64(h + 8, p->seq);
    put_u64(h + 16, dedup_hash(h + REC_HEADER, bytes, rs).lo);
    put_u32(h + 24, 0);
    put_u32(h + 28, (uint32_t)dedup_hash(h, 28, rs).lo);
    dedup_status st = write_all(s, p->log_fd, p->logbuf, p->loglen);
    if (st == DEDUP_OK && s->sync == DEDUP_STORE_SYNC_ALWAYS && fdatasync(p->log_fd) != 0)
        st = sys_error(s, "cannot sync the pending log", DDR_LOG_NAME);
    if (st == DEDUP_OK && p->log_bytes + p->loglen > UINT32_MAX)
        st = DEDUP_ERR_LIMIT;
    if (st == DEDUP_OK) {
        /* Then the header's length (synced by the next record's fdatasync
         * with ALWAYS): so the log is never shorter than its header says
         * unless damaged; a kill before this write leaves one whole record
         * past the length, which is read (its output was written). */
        unsigned char hdr[LOG_HEADER];
        p->log_bytes += p->loglen;
        encode_log_header(s, hdr);
        if (pwrite(p->log_fd, hdr + 24, 8, 24) != 8)
            st = sys_error(s, "cannot write the pending log's header", DDR_LOG_NAME);
    }
    p->loglen = 0;
    if (st == DEDUP_OK)
        p->seq++;
    return st;
}

dedup_status dedup_store_commit(dedup_store *s)
{
    if (!s || s->read_only)
        return DEDUP_ERR_UNSUPPORTED;
    ddr_pending *p = &s->pend;
    if (s->failed) { /* which keys the failed call had put is not known */
        if (!s->err[0])
            snprintf(s->err, sizeof s->err, "%s: not committed after a failed decide", s->dir);
        return DEDUP_ERR_IO;
    }
    dedup_status st = write_record(s);
    if (st != DEDUP_OK)
        return st;
    p->committed = p->n;
    p->added += p->uadded;
    p->uadded = 0;
    return ddr_pending_full(s) ? ddr_pending_ingest(s) : DEDUP_OK;
}

dedup_status ddr_pending_chunk_done(dedup_store *s)
{
    if (!s->caller_commits || s->pend.n >= DDR_PENDING_SLOTS / 4 * 3)
        return dedup_store_commit(s);
    return DEDUP_OK;
}

static uint64_t hash_of(const dedup_store *s, const unsigned char *k, size_t len)
{
    if (s->keys == DEDUP_STORE_KEYS_DIGEST && len == 16)
        return get_u64(k);
    return dedup_hash(k, len, s->seed).lo;
}

static dedup_status log_damage(dedup_store *s, size_t at, const char *what)
{
    snprintf(s->err, sizeof s->err,
             "%s/%s: damaged at byte %zu (%s): refused, so that no recorded key is taken for "
             "new; move the file away to accept that the keys it holds are output again",
             s->dir, DDR_LOG_NAME, at, what);
    return DEDUP_ERR_CORRUPT;
}

/* Puts the entries of one record's payload (checked) into the table. */
static dedup_status replay_entries(dedup_store *s, const unsigned char *q, uint32_t bytes,
                                   uint32_t n, size_t at)
{
    const unsigned char *end = q + bytes;
    for (uint32_t i = 0; i < n; i++) {
        if ((size_t)(end - q) < ENTRY_HEADER || get_u32(q + 4) > (size_t)(end - q) - ENTRY_HEADER ||
            (s->keys == DEDUP_STORE_KEYS_DIGEST && get_u32(q + 4) != 16))
            return log_damage(s, at, "a record holds an impossible entry");
        uint32_t ts = get_u32(q), len = get_u32(q + 4);
        dedup_status rc =
            put_entry(s, (const char *)q + ENTRY_HEADER, len, hash_of(s, q + 8, len), ts, false);
        if (rc != DEDUP_OK)
            return rc;
        q += ENTRY_HEADER + len;
    }
    return q == end ? DEDUP_OK : log_damage(s, at, "a record's entries do not fill it");
}

/* The records of a log.  Only a torn tail is a crash's artefact: fewer
 * bytes left than a record header, or a whole, valid header whose payload
 * runs past the end of the file (write(2) stopped by the kill).  Any other
 * failure -- a header or payload checksum, a record out of sequence
 * (repeated, missing, from another log), a zeroed block -- is damage. */
static dedup_status replay_records(dedup_store *s, const unsigned char *buf, size_t size)
{
    ddr_pending *p = &s->pend;
    uint64_t seq = 0;
    size_t declared = get_u32(buf + 24);
    if (declared < LOG_HEADER)
        return log_damage(s, 24, "an impossible length in the header");
    for (size_t at = LOG_HEADER; at < size; seq++) {
        const unsigned char *h = buf + at;
        if (size - at < REC_HEADER) {
            if (at < declared)
                return log_damage(s, at, "the file ends before the length its header declares");
            p->torn_bytes = size - at;
            break;
        }
        uint64_t rs = rec_seed(p->gen, seq);
        if (get_u32(h + 28) != (uint32_t)dedup_hash(h, 28, rs).lo || get_u32(h + 24) != 0)
            return log_damage(s, at, get_u64(h + 8) != seq ? "a record out of sequence"
                                                          : "a record header's checksum");
        uint32_t bytes = get_u32(h), n = get_u32(h + 4);
        if (bytes > size - at - REC_HEADER) {
            if (at < declared)
                return log_damage(s, at, "the file ends before the length its header declares");
            p->torn_bytes = size - at;
            break;
        }
        if (get_u64(h + 16) != dedup_hash(h + REC_HEADER, bytes, rs).lo)
            return log_damage(s, at, "a record's checksum");
        dedup_status rc = replay_entries(s, h + REC_HEADER, bytes, n, at);
        if (rc != DEDUP_OK)
            return rc;
        at += REC_HEADER + bytes;
    }
    if (size < declared)
        return log_damage(s, size, "the file ends before the length its header declares");
    return DEDUP_OK;
}

/* Loads the log left by the last run into the pending keys.  Sets *gen. */
static dedup_status replay_log(dedup_store *s, bool *found)
{
    char path[4096];
    path_of(s, DDR_LOG_NAME, path, sizeof path);
    *found = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? DEDUP_OK : sys_error(s, "cannot open the pending log", DDR_LOG_NAME);
    struct stat st;
    unsigned char *buf = NULL;
    dedup_status rc = DEDUP_OK;
    if (fstat(fd, &st) != 0) {
        rc = sys_error(s, "cannot stat the pending log", DDR_LOG_NAME);
        goto done;
    }
    size_t size = (size_t)st.st_size;
    buf = xmalloc(&s->a, size ? size : 1);
    if (!buf) {
        rc = DEDUP_ERR_NOMEM;
        goto done;
    }
    for (size_t got = 0; got < size;) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = sys_error(s, "cannot read the pending log", DDR_LOG_NAME);
            goto done;
        }
        got += (size_t)r;
    }
    if (size < LOG_HEADER || memcmp(buf, LOG_MAGIC, 8) != 0 ||
        get_u32(buf + 28) != (uint32_t)dedup_hash(buf, 28, 0).lo) {
        snprintf(s->err, sizeof s->err, "%s/%s: not a pending log of this store (bad header)",
                 s->dir, DDR_LOG_NAME);
        rc = DEDUP_ERR_CORRUPT;
        goto done;
    }
    if (get_u32(buf + 8) != LOG_VERSION || get_u32(buf + 12) != (uint32_t)s->keys) {
        snprintf(s->err, sizeof s->err, "%s/%s: log version %u, key mode %u: not this store's",
                 s->dir, DDR_LOG_NAME, get_u32(buf + 8), get_u32(buf + 12));
        rc = DEDUP_ERR_INCOMPATIBLE;
        goto done;
    }
    *found = true;
    s->pend.gen = get_u64(buf + 16);
    rc = replay_records(s, buf, size);
    if (rc == DEDUP_OK) {
        s->pend.recovered = s->pend.uadded;
        s->pend.committed = s->pend.n;
        s->pend.added += s->pend.uadded;
        s->pend.uadded = 0;
    }
done:
    xfree(&s->a, buf);
    close(fd);
    return rc;
}

/* ---- ingestion ----------------------------------------------------------------- */

/* Entries sort by their keys' bytes (RocksDB's bytewise order): two
 * integer comparisons for keys of at most 16 bytes. */
static int cmp_entry(const void *x, const void *y, void *ctx)
{
    const ddr_entry *a = x, *b = y;
    if (a->pfx != b->pfx)
        return a->pfx < b->pfx ? -1 : 1;
    if (a->len <= 16 && b->len <= 16) {
        if (a->rest != b->rest)
            return a->rest < b->rest ? -1 : 1;
    } else {
        unsigned char ba[16], bb[16];
        const unsigned char *ka = ddr_entry_key(ctx, a, ba), *kb = ddr_entry_key(ctx, b, bb);
        size_t m = a->len < b->len ? a->len : b->len;
        int c = m > 8 ? memcmp(ka + 8, kb + 8, m - 8) : 0;
        if (c)
            return c;
    }
    return a->len < b->len ? -1 : a->len > b->len;
}

static dedup_status write_meta(dedup_store *s, uint64_t count, uint64_t gen)
{
    unsigned char c[8], g[8];
    put_u64(c, count);
    put_u64(g, gen);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_writebatch_put_cf(wb, s->cf_meta, COUNT_KEY, strlen(COUNT_KEY), (const char *)c, 8);
    rocksdb_writebatch_put_cf(wb, s->cf_meta, INGEST_KEY, strlen(INGEST_KEY), (const char *)g, 8);
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(wo, 1);
    char *e = NULL;
    rocksdb_write(s->db, wo, wb, &e);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_writebatch_destroy(wb);
    return e ? take_error(s, e) : DEDUP_OK;
}

static dedup_status write_table(dedup_store *s, const char *path)
{
    ddr_pending *p = &s->pend;
    qsort_r(p->e, p->n, sizeof *p->e, cmp_entry, p->arena);
    rocksdb_envoptions_t *eo = rocksdb_envoptions_create();
    rocksdb_sstfilewriter_t *w = rocksdb_sstfilewriter_create(eo, s->opt);
    char *e = NULL;
    unlink(path);
    rocksdb_sstfilewriter_open(w, path, &e);
    unsigned char ts[4];
    for (size_t i = 0; !e && i < p->n; i++) {
        put_u32(ts, p->e[i].ts);
        unsigned char kb[16];
        rocksdb_sstfilewriter_put(w, (const char *)ddr_entry_key(p->arena, &p->e[i], kb), p->e[i].len,
                                  (const char *)ts, s->expire ? 4 : 0, &e);
    }
    if (!e)
        rocksdb_sstfilewriter_finish(w, &e);
    rocksdb_sstfilewriter_destroy(w);
    rocksdb_envoptions_destroy(eo);
    return e ? take_error(s, e) : DEDUP_OK;
}

dedup_status ddr_pending_ingest(dedup_store *s)
{
    ddr_pending *p = &s->pend;
    dedup_status st = DEDUP_OK;
    if (p->committed < p->n) { /* caller_commits: keys never committed are forgotten */
        p->n = p->committed;
        p->uadded = 0;
        p->loglen = 0;
        if (!p->n) {
            memset(p->table, 0xff, DDR_PENDING_SLOTS * sizeof *p->table);
            p->used = 0;
        } /* else the table is reset after the ingestion below */
    }
    if (p->n) {
        /* 1: the count, with "generation gen is counted" (see the top) */
        uint64_t count = s->count + (p->ingested == p->gen ? 0 : p->added);
        st = write_meta(s, count, p->gen);
        if (st != DEDUP_OK)
            return st;
        s->count = count;
        p->ingested = p->gen;
        /* 2: the table file, ingested (moved) into the keys' family */
        char path[4096];
        path_of(s, DDR_SST_NAME, path, sizeof path);
        st = write_table(s, path);
        if (st == DEDUP_OK) {
            rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
            rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
            const char *files[1] = {path};
            char *e = NULL;
            rocksdb_ingest_external_file_cf(s->db, s->cf_keys, files, 1, io, &e);
            rocksdb_ingestexternalfileoptions_destroy(io);
            if (e)
                st = take_error(s, e);
        }
        unlink(path);
        if (st != DEDUP_OK)
            return st;
        memset(p->table, 0xff, DDR_PENDING_SLOTS * sizeof *p->table);
        p->n = 0;
        p->committed = 0;
        p->used = 0;
        p->added = 0;
        /* 3: the next generation's log */
        p->gen = p->ingested + 1;
        if (p->log_fd >= 0)
            st = start_log(s);
    }
    return st;
}

static uint64_t meta_u64(dedup_store *s, const char *key, dedup_status *st)
{
    size_t vl = 0;
    char *e = NULL;
    char *v = rocksdb_get_cf(s->db, s->ro, s->cf_meta, key, strlen(key), &vl, &e);
    uint64_t x = 0;
    if (e)
        *st = take_error(s, e);
    else if (v && vl == 8)
        x = get_u64((const unsigned char *)v);
    free(v);
    return x;
}

/* Called once the database is open: allocates the table, replays and
 * ingests a log left by an earlier run (whatever this run's sync mode), and
 * starts this run's log with sync BATCH.  Read-only: the log is only read
 * into the table (answered and counted, neither ingested nor removed). */
dedup_status ddr_pending_open(dedup_store *s)
{
    ddr_pending *p = &s->pend;
    p->log_fd = -1;
    p->table = xmalloc(&s->a, DDR_PENDING_SLOTS * sizeof *p->table);
    if (!p->table)
        return DEDUP_ERR_NOMEM;
    memset(p->table, 0xff, DDR_PENDING_SLOTS * sizeof *p->table);
    dedup_status st = DEDUP_OK;
    p->ingested = meta_u64(s, INGEST_KEY, &st);
    if (st != DEDUP_OK)
        return st;
    bool found = false;
    st = replay_log(s, &found);
    if (st != DEDUP_OK)
        return st;
    if (s->read_only) {
        /* A killed run's log (or the log of a run in progress): its keys are
         * answered present and counted, unless the meta already counted
         * them (the crash fell between the count and the next log); the
         * log is left as it is, for the next writable open to ingest. */
        if (found && p->ingested == p->gen)
            p->added = 0;
        return DEDUP_OK;
    }
    if (!found)
        p->gen = p->ingested + 1;
    if (p->n) {
        st = ddr_pending_ingest(s); /* gen: the replayed log's */
        if (st != DEDUP_OK)
            return st;
    }
    p->gen = p->ingested + 1;
    if (s->sync != DEDUP_STORE_SYNC_NONE)
        return start_log(s);
    char path[4096];
    path_of(s, DDR_LOG_NAME, path, sizeof path);
    if (unlink(path) != 0 && errno != ENOENT)
        return sys_error(s, "cannot remove the pending log", DDR_LOG_NAME);
    return DEDUP_OK;
}
