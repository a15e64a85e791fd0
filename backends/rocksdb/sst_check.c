/*
 * sst_check.c - the checks of a store's table files made before RocksDB
 * opens them.
 *
 * Why: RocksDB checks each block of a table file against the checksum in
 * its trailer before using it -- except the properties block, which it
 * parses first and checks afterwards (an ingested file may have had its
 * global sequence number rewritten in place, and the check then allows for
 * it).  A damaged properties block can thus make RocksDB fail an internal
 * assertion while opening the file (Debian's librocksdb keeps them: the
 * process aborts) instead of reporting the damage.  So before any RocksDB
 * open, every table file of DIR ("NNNNNN.sst") whose footer is whole has
 * the two blocks RocksDB reads first checked here: the metaindex block and
 * the properties block it names, their checksums the way RocksDB computes
 * them.  A file whose footer is not whole (cut short, or a table a killed
 * flush never finished) is left to RocksDB, which refuses it when the
 * MANIFEST lists it ("bad table magic number") and deletes it otherwise.
 * Every other block is checked by RocksDB before use (the store's read
 * options verify checksums).
 *
 * The cost: three small reads per table file (the footer, ~100 bytes of
 * metaindex, ~1 KB of properties), whatever the file's size.
 *
 * The layout read (RocksDB's block-based table, format_version 2..5): a
 * 53-byte footer at the end -- checksum type (1 byte), the metaindex and
 * index blocks' handles (varint64 offset, varint64 size), zero padding to
 * byte 41, format_version (u32 LE), magic (u64 LE); each block is followed
 * by a 5-byte trailer -- compression type (1 byte), checksum (u32 LE) of
 * the block's bytes and that type byte.  A block: entries (varint32
 * shared, non-shared and value lengths, the key's non-shared bytes, the
 * value), restart offsets (u32 each), their count (u32).
 */
#define _GNU_SOURCE
#include "store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define FOOTER_LEN 53u
#define TRAILER_LEN 5u
#define BLOCK_MAX (64u << 20) /* a meta block larger than this is damage */
static const uint64_t table_magic = 0x88e241b785f4cff7ull;
enum { CK_CRC32C = 1, CK_XXH3 = 4 };
static const char props_name[] = "rocksdb.properties";
static const char seqno_name[] = "rocksdb.external_sst_file.global_seqno";

typedef struct handle {
    uint64_t off, size;
} handle;

static uint32_t crc32c(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    }
    return ~crc;
}

/* RocksDB's checksum of a block and its trailer's type byte. */
static uint32_t block_checksum(int type, const unsigned char *b, size_t n, unsigned char last)
{
    if (type == CK_CRC32C) {
        uint32_t c = crc32c(crc32c(0, b, n), &last, 1);
        return ((c >> 15) | (c << 17)) + 0xa282ead8u; /* RocksDB's crc32c::Mask */
    }
    return (uint32_t)XXH3_64bits(b, n) ^ (uint32_t)last * 0x6b9083d9u;
}

/* A varint of at most 'maxb' bytes at *p (< end); false if cut or longer. */
static bool get_varint(const unsigned char **p, const unsigned char *end, int maxb, uint64_t *v)
{
    *v = 0;
    for (int i = 0; i < maxb && *p < end; i++) {
        unsigned char c = *(*p)++;
        *v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80))
            return true;
    }
    return false;
}

/* Walks block b[0..n) (its trailer excluded) to the entry whose key is
 * 'key': its value's place in b.  False if absent or the block is not
 * well formed. */
static bool block_find(const unsigned char *b, size_t n, const char *key, size_t *voff,
                       size_t *vlen)
{
    if (n < 4)
        return false;
    uint64_t nr = get_u32(b + n - 4) & 0x7fffffffu;
    if (nr == 0 || nr > (n - 4) / 4)
        return false;
    const unsigned char *p = b, *end = b + n - 4 - 4 * nr;
    size_t klen = strlen(key), have = 0;
    char cur[256]; /* meta blocks' keys are short: a longer one is damage */
    while (p < end) {
        uint64_t sh, ns, vl;
        if (!get_varint(&p, end, 5, &sh) || !get_varint(&p, end, 5, &ns) ||
            !get_varint(&p, end, 5, &vl) || sh > have || ns > sizeof cur - sh ||
            ns > (uint64_t)(end - p) || vl > (uint64_t)(end - p) - ns)
            return false;
        memcpy(cur + sh, p, (size_t)ns);
        have = (size_t)(sh + ns);
        p += ns;
        if (have == klen && memcmp(cur, key, klen) == 0) {
            *voff = (size_t)(p - b);
            *vlen = (size_t)vl;
            return true;
        }
        p += vl;
    }
    return false;
}

/* Reads block h of the file (with its trailer) into a new buffer. */
static unsigned char *read_block(int fd, uint64_t flen, handle h, const char **bad)
{
    if (h.size > BLOCK_MAX || h.off > flen || h.size + TRAILER_LEN > flen - h.off) {
        *bad = "a block handle points outside the file";
        return NULL;
    }
    unsigned char *b = malloc((size_t)h.size + TRAILER_LEN);
    if (!b) {
        *bad = "out of memory";
        return NULL;
    }
    if (pread(fd, b, (size_t)h.size + TRAILER_LEN, (off_t)h.off) !=
        (ssize_t)(h.size + TRAILER_LEN)) {
        *bad = "cannot be read";
        free(b);
        return NULL;
    }
    return b;
}

static bool block_ok(int type, unsigned char *b, size_t n)
{
    return get_u32(b + n + 1) == block_checksum(type, b, n, b[n]);
}

/* The properties block's check: as written, or with the global sequence
 * number an ingestion wrote in place zeroed (what RocksDB allows for; then
 * *rewritten is set: those 8 bytes are covered by no checksum). */
static bool props_ok(int type, unsigned char *b, size_t n, bool *rewritten)
{
    if (block_ok(type, b, n))
        return true;
    size_t vo, vl;
    if (b[n] != 0 || !block_find(b, n, seqno_name, &vo, &vl) || vl != 8)
        return false;
    memset(b + vo, 0, 8);
    *rewritten = block_ok(type, b, n);
    return *rewritten;
}

/* Checks one table file: NULL if sound or left to RocksDB, else what is
 * wrong with it.  *rewritten: its global sequence number was written in
 * place (see props_ok). */
static const char *check_table(int fd, bool *rewritten)
{
    struct stat st;
    unsigned char f[FOOTER_LEN];
    if (fstat(fd, &st) != 0)
        return "cannot be read";
    uint64_t flen = (uint64_t)st.st_size;
    if (flen < FOOTER_LEN)
        return NULL; /* RocksDB: "file is too short" */
    if (pread(fd, f, FOOTER_LEN, (off_t)(flen - FOOTER_LEN)) != (ssize_t)FOOTER_LEN)
        return "cannot be read";
    if (get_u64(f + 45) != table_magic)
        return NULL; /* not whole: RocksDB's "bad table magic number" */
    uint32_t fv = get_u32(f + 41);
    if (fv < 2 || fv > 5)
        return "its footer names an unknown format version";
    if (f[0] != CK_CRC32C && f[0] != CK_XXH3)
        return "its footer names a checksum type this program does not check";
    const unsigned char *p = f + 1, *end = f + 41;
    handle mi, ix;
    if (!get_varint(&p, end, 10, &mi.off) || !get_varint(&p, end, 10, &mi.size) ||
        !get_varint(&p, end, 10, &ix.off) || !get_varint(&p, end, 10, &ix.size))
        return "its footer's block handles are not well formed";
    const char *bad = NULL;
    unsigned char *m = read_block(fd, flen - FOOTER_LEN, mi, &bad);
    if (!m)
        return bad;
    size_t vo, vl;
    handle ph;
    if (!block_ok(f[0], m, (size_t)mi.size) || m[mi.size] != 0)
        bad = "its metaindex block fails its checksum";
    else if (!block_find(m, (size_t)mi.size, props_name, &vo, &vl))
        bad = "its metaindex block names no properties block";
    else {
        p = m + vo;
        end = p + vl;
        if (!get_varint(&p, end, 10, &ph.off) || !get_varint(&p, end, 10, &ph.size))
            bad = "its properties block's handle is not well formed";
    }
    free(m);
    if (bad)
        return bad;
    unsigned char *pb = read_block(fd, flen - FOOTER_LEN, ph, &bad);
    if (!pb)
        return bad;
    if (!props_ok(f[0], pb, (size_t)ph.size, rewritten))
        bad = "its properties block fails its checksum";
    free(pb);
    return bad;
}

static bool is_table_name(const char *n)
{
    size_t i = 0;
    while (n[i] >= '0' && n[i] <= '9')
        i++;
    return i > 0 && strcmp(n + i, ".sst") == 0;
}

dedup_status ddr_check_tables(const char *dir, char *why, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (why && cap)
            snprintf(why, cap, "%s: cannot list the store's files (%s)", dir, strerror(errno));
        return DEDUP_ERR_IO;
    }
    dedup_status st = DEDUP_OK;
    struct dirent *e;
    while (st == DEDUP_OK && (e = readdir(d))) {
        if (!is_table_name(e->d_name))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT)
            continue; /* gone since the listing: RocksDB judges its absence */
        bool rewritten = false;
        const char *bad = fd < 0 ? strerror(errno) : check_table(fd, &rewritten);
        if (fd >= 0)
            close(fd);
        if (bad) {
            if (why && cap)
                snprintf(why, cap, "%s/%s: the store's table file is damaged: %s; refused, so "
                         "that no recorded key is taken for new", dir, e->d_name, bad);
            st = DEDUP_ERR_CORRUPT;
        }
    }
    closedir(d);
    return st;
}

void ddr_rewritten_tables(const char *dir, char *out, size_t cap)
{
    if (!cap)
        return;
    out[0] = '\0';
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_table_name(e->d_name))
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        bool rewritten = false;
        const char *bad = check_table(fd, &rewritten);
        close(fd);
        size_t used = strlen(out);
        if (!bad && rewritten && used + strlen(e->d_name) + 3 < cap)
            snprintf(out + used, cap - used, "%s%s", used ? ", " : "", e->d_name);
    }
    closedir(d);
}
