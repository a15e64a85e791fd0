/*
 * test_store_damage.c - damage to a store's files is refused, never read
 * as fewer keys (issue 33 item 6).
 *
 * A tiny store is made (some keys ingested into a table file, the rest in
 * the pending log of a process that ended without closing, as a kill
 * leaves it); then for each of its files, one case per position: the byte
 * there changed (XOR a seeded non-zero value), and the file cut there.
 * Each case is a fresh copy of the store, opened read-only and asked for
 * every key: the open (or the lookup) must fail, or every key must be
 * there.  A case that answers some key "new" fails the test, naming the
 * file, the position and the count.
 *
 * Every position of the pending log and of files up to 24 bytes is tried;
 * RocksDB's table files (NNNNNN.sst) at every class of position: every
 * byte of the footer, and in each block (the data block, the index, the
 * metaindex and each meta block it names: filter, properties) its first 4
 * bytes, its last 8 (the restart array's end and the restart count, whose
 * top bit also flags a hash index: changed by a seeded value and by 0x80),
 * 2 drawn from the seed, and the 5 bytes of its trailer (the footer's zero
 * padding: its first and last 2 bytes); and cut at 0, inside
 * each block, in the footer and before the last byte.  Other large
 * files (MANIFEST, WAL, OPTIONS) at 24 positions: their first and last 4
 * bytes and 16 drawn from the seed (another seed, other positions).  Under
 * a sanitizer (DEDUP_SANITIZER set) every 4th position of the pending log,
 * 8 of each other file that is not a table, and in a table the footer
 * but its padding, and each block's first byte, restart count, and the
 * first 2 bytes of its trailer.  Each case runs in a
 * child; the child dying of a signal fails the test (RocksDB's assertions
 * once aborted on a damaged properties block: a crash is never a refusal),
 * and a table file refused must be named by the error.  The pending log cut
 * inside a record cannot be told from a crash's torn last record (a
 * record is written after the output of its keys, so its keys' records
 * are written again by the next run, never lost): that case must report
 * the torn bytes (info.torn_bytes, said by the CLI), never be silent.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dedup/store.h"

#define NKEYS 40u
#define NTABLE 38u  /* ingested into a table file; the rest: 2 log records */
#define MAXFILES 32

typedef struct sfile {
    char name[64];
    unsigned char *data;
    size_t len;
} sfile;

static sfile files[MAXFILES];
static size_t nfiles;
static dedup_digest keys[NKEYS];
static uint64_t failures, cases, refused, torn;
static char *child_why; /* shared with the children: the refusal's message */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static dedup_store *open_rw(const char *dir)
{
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    p.seed = 7;
    dedup_store *s = NULL;
    char why[512];
    if (dedup_store_create(&p, NULL, &s, why, sizeof why) != DEDUP_OK) {
        fprintf(stderr, "open %s: %s\n", dir, why);
        exit(2);
    }
    return s;
}

/* The store: NTABLE keys ingested (two table files, by two opens), the
 * rest in two pending-log records of a child that ends without closing (a
 * kill's leftovers). */
static void make_store(const char *dir)
{
    dedup_verdict v[NKEYS];
    dedup_store *s;
    fflush(NULL);
    pid_t pid = fork(); /* RocksDB's threads live in children only */
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        s = open_rw(dir);
        dedup_batch b = {.n = NTABLE / 2, .digests = keys};
        if (dedup_store_decide(s, &b, v, NULL) != DEDUP_OK || dedup_store_flush(s) != DEDUP_OK)
            _exit(3);
        dedup_store_free(s);
        _exit(0);
    }
    int wst = 0;
    if (waitpid(pid, &wst, 0) != pid || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0)
        die("child");
    pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        s = open_rw(dir);
        /* an ingestion recorded at the end of this open's MANIFEST: a cut
         * there loses the table (RocksDB takes the cut for the end) */
        dedup_batch b = {.n = NTABLE - NTABLE / 2, .digests = keys + NTABLE / 2};
        if (dedup_store_decide(s, &b, v, NULL) != DEDUP_OK || dedup_store_flush(s) != DEDUP_OK)
            _exit(3);
        for (size_t from = NTABLE; from < NKEYS; from++) {
            dedup_batch c = {.n = 1, .digests = keys + from};
            if (dedup_store_decide(s, &c, v, NULL) != DEDUP_OK)
                _exit(3);
        }
        _exit(0); /* no close: the log stays as a kill leaves it */
    }
    if (waitpid(pid, &wst, 0) != pid || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0)
        die("child");
}

static void read_all(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        die("opendir");
    while ((e = readdir(d))) {
        char path[600];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (nfiles == MAXFILES)
            die("too many files");
        sfile *f = &files[nfiles++];
        if (strlen(e->d_name) >= sizeof f->name)
            die(e->d_name);
        snprintf(f->name, sizeof f->name, "%.63s", e->d_name);
        f->len = (size_t)st.st_size;
        f->data = malloc(f->len + 1);
        FILE *fp = fopen(path, "rb");
        if (!f->data || !fp || fread(f->data, 1, f->len, fp) != f->len)
            die(path);
        fclose(fp);
    }
    closedir(d);
}

/* Writes the pristine files into 'dir' (emptied first), file 'which'
 * replaced by (data, len). */
static void lay_out(const char *dir, size_t which, const unsigned char *data, size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600];
    while (d && (e = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.')
            unlink(path);
    }
    if (d)
        closedir(d);
    for (size_t i = 0; i < nfiles; i++) {
        if (strncmp(files[i].name, "LOG", 3) == 0)
            continue; /* RocksDB's text log: never read */
        snprintf(path, sizeof path, "%.300s/%.63s", dir, files[i].name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const unsigned char *p = i == which ? data : files[i].data;
        size_t n = i == which ? len : files[i].len;
        if (fd < 0 || write(fd, p, n) != (ssize_t)n)
            die(path);
        close(fd);
    }
}

/* In a child (a crash there is told from a refusal):
 * opens the damaged copy read-only and asks every key.  Exit 0: every key
 * there; C_REFUSED: refused (open or lookup failed, its message in
 * child_why); C_TORN: some key answered new with the log's torn tail
 * reported; C_SILENT: some key answered new, silently.  (Not 1: a
 * sanitizer's report ends the child with 1, a failure here.) */
enum { C_REFUSED = 10, C_TORN, C_SILENT };
static int check_child(const char *dir)
{
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    p.read_only = true;
    p.read_threads = 1;
    dedup_store *s = NULL;
    char why[512];
    if (dedup_store_create(&p, NULL, &s, why, sizeof why) != DEDUP_OK) {
        snprintf(child_why, 512, "%s", why);
        return C_REFUSED;
    }
    dedup_verdict v[NKEYS];
    dedup_batch b = {.n = NKEYS, .digests = keys};
    if (dedup_store_query(s, &b, v) != DEDUP_OK) {
        snprintf(child_why, 512, "%s", dedup_store_last_error(s));
        return C_REFUSED;
    }
    dedup_store_info in;
    dedup_store_get_info(s, &in);
    size_t absent = 0;
    for (size_t i = 0; i < NKEYS; i++)
        absent += v[i] != DEDUP_DUPLICATE;
    return absent == 0 ? 0 : in.torn_bytes ? C_TORN : C_SILENT;
}

/* One case: 'name', when set, must be named by a refusal. */
static void check(const char *dir, const char *what, size_t pos, bool in_log, const char *name)
{
    cases++;
    child_why[0] = '\0';
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2); /* RocksDB's assertion messages */
        _exit(check_child(dir));
    }
    int wst = 0;
    if (waitpid(pid, &wst, 0) != pid)
        die("waitpid");
    int rc = WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
    if (rc == C_REFUSED && (!name || strstr(child_why, name))) {
        refused++;
        return;
    }
    if (rc == 0 || (rc == C_TORN && in_log)) {
        torn += rc == C_TORN;
        return;
    }
    failures++;
    if (failures > 20)
        return;
    if (rc == -1)
        fprintf(stderr, "FAIL: %s at byte %zu: the process died of signal %d instead of "
                "refusing the store\n", what, pos, WIFSIGNALED(wst) ? WTERMSIG(wst) : 0);
    else if (rc == C_REFUSED)
        fprintf(stderr, "FAIL: %s at byte %zu: refused without naming %s: %s\n", what, pos,
                name, child_why);
    else if (rc == C_TORN || rc == C_SILENT)
        fprintf(stderr, "FAIL: %s at byte %zu: opened, some of the %u keys answered new%s\n",
                what, pos, NKEYS, rc == C_TORN ? " (a torn tail reported)" : "");
    else
        fprintf(stderr, "FAIL: %s at byte %zu: the check exited %d (a sanitizer's report?)\n",
                what, pos, rc);
}

static bool skip_file(const char *name)
{
    /* text or lock files RocksDB never reads back */
    return strncmp(name, "LOG", 3) == 0 || strcmp(name, "LOCK") == 0 ||
           strcmp(name, "dedup.lock") == 0;
}

/* The pending log's other damage, beyond one byte and a cut: a zeroed
 * block (64 bytes at every 16th position past the header, as a disk that
 * lost a sector or a file system that zero-fills after a crash leaves it)
 * and a record repeated (each record appended again at the end, and the
 * first record written twice in a row).  Each must be refused or leave
 * every key there.  The layout (pending.c): a 32-byte header, then records
 * of a 32-byte header whose first u32 is the payload's bytes. */
static void log_damage_cases(size_t f, const char *work, tu_rng *r)
{
    const unsigned char *d = files[f].data;
    size_t len = files[f].len, starts[64], nrec = 0;
    for (size_t at = 32; at + 32 <= len && nrec < 64;) {
        starts[nrec++] = at;
        at += 32 + ((size_t)d[at] | (size_t)d[at + 1] << 8 | (size_t)d[at + 2] << 16 |
                    (size_t)d[at + 3] << 24);
    }
    if (nrec < 2)
        die("the pending log holds fewer than 2 records");
    unsigned char *buf = malloc(2 * len);
    if (!buf)
        die("malloc");
    uint64_t before = failures;
    size_t phase = (size_t)tu_below(r, 16), zeroed = 0;
    for (size_t pos = 32 + phase; pos < len; pos += 16, zeroed++) {
        memcpy(buf, d, len);
        memset(buf + pos, 0, len - pos < 64 ? len - pos : 64);
        lay_out(work, f, buf, len);
        check(work, "dedup-pending.log with 64 bytes zeroed", pos, false, NULL);
    }
    for (size_t i = 0; i < nrec; i++) {
        size_t end = i + 1 < nrec ? starts[i + 1] : len;
        memcpy(buf, d, len);
        memcpy(buf + len, d + starts[i], end - starts[i]);
        lay_out(work, f, buf, len + end - starts[i]);
        check(work, "dedup-pending.log with a record repeated at its end", starts[i], false,
              NULL);
    }
    size_t end0 = starts[1];
    memcpy(buf, d, end0);
    memcpy(buf + end0, d + starts[0], end0 - starts[0]);
    memcpy(buf + end0 + (end0 - starts[0]), d + end0, len - end0);
    lay_out(work, f, buf, len + end0 - starts[0]);
    check(work, "dedup-pending.log with its first record twice", starts[0], false, NULL);
    printf("%-24s %zu zeroed blocks, %zu records repeated: %llu failure(s)\n",
           "dedup-pending.log", zeroed, nrec + 1, (unsigned long long)(failures - before));
    free(buf);
}

/* ---- table files: every class of position ------------------------------ */

typedef struct blk {
    size_t off, size; /* the block's bytes; its 5-byte trailer follows */
} blk;

static size_t get_varint(const unsigned char *d, size_t len, size_t *at)
{
    size_t v = 0;
    for (int sh = 0; *at < len && sh < 64; sh += 7) {
        unsigned char c = d[(*at)++];
        v |= (size_t)(c & 0x7f) << sh;
        if (!(c & 0x80))
            return v;
    }
    die("a table file of the pristine store is not as expected");
    return 0;
}

static blk get_handle(const unsigned char *d, size_t len, size_t *at)
{
    blk b;
    b.off = get_varint(d, len, at);
    b.size = get_varint(d, len, at);
    return b;
}

/* The value of a block's first entry (meta blocks: one entry per key, no
 * shared prefix), *at past it; false at the block's entries' end. */
static bool next_entry(const unsigned char *d, blk b, size_t *at, size_t *vat)
{
    size_t n = b.off + b.size, nr = 0;
    for (int i = 0; i < 4; i++)
        nr |= (size_t)d[n - 4 + i] << (8 * i);
    size_t end = n - 4 - 4 * (nr & 0x7fffffffu);
    if (*at >= end)
        return false;
    (void)get_varint(d, end, at);
    size_t ns = get_varint(d, end, at), vl = get_varint(d, end, at);
    *vat = *at + ns;
    *at = *vat + vl;
    return true;
}

/* The blocks of a table file (RocksDB's block-based table, format_version
 * 5, checked by the test store's own writer): the footer's metaindex and
 * index, the meta blocks the metaindex names, the first data block the
 * index names. */
static size_t table_blocks(const sfile *f, blk *out, size_t cap)
{
    const unsigned char *d = f->data;
    size_t len = f->len, at = len - 53, n = 0;
    if (len < 53 + 5 || d[len - 8] != 0xf7 || d[len - 1] != 0x88)
        die("a table file of the pristine store has no block-based footer");
    at++;
    out[n++] = get_handle(d, len, &at); /* metaindex */
    out[n++] = get_handle(d, len, &at); /* index */
    size_t vat;
    at = out[0].off;
    while (n < cap && next_entry(d, out[0], &at, &vat))
        out[n++] = get_handle(d, len, &vat);
    at = out[1].off;
    if (n < cap && next_entry(d, out[1], &at, &vat))
        out[n++] = get_handle(d, len, &vat);
    for (size_t i = 0; i < n; i++)
        if (out[i].off + out[i].size + 5 > len - 53)
            die("a table file's block is outside it");
    return n;
}

static bool is_table(const char *name)
{
    size_t l = strlen(name);
    return l > 4 && strcmp(name + l - 4, ".sst") == 0;
}

/* One table file: the byte at each class of position changed, and cuts;
 * each refused naming the file, or every key there. */
static void table_cases(size_t f, const char *work, tu_rng *r, bool san)
{
    const sfile *t = &files[f];
    blk b[8];
    size_t nb = table_blocks(t, b, 8), len = t->len, pos[8 * 24 + 64], npos = 0;
    size_t pad = len - 53 + 1, hb = 0;
    while (hb < 4) /* the footer's two handles: four varints, then zero padding */
        hb += !(t->data[pad++] & 0x80);
    /* under a sanitizer: the footer's handles, version and magic, and in
     * each block its first byte, its restart count, its trailer's type and
     * first checksum byte */
    for (size_t i = len - 53; i < len; i++)
        if (i < pad + (san ? 0 : 2) || i >= len - 12 - (san ? 0 : 2))
            pos[npos++] = i; /* the footer, but for its padding's middle */
    for (size_t i = 0; i < nb; i++) {
        for (size_t k = 0; k < (san ? 1u : 4u) && k < b[i].size; k++)
            pos[npos++] = b[i].off + k;
        for (size_t k = b[i].size < 8 ? b[i].size : san ? 4 : 8; k > 0; k--)
            pos[npos++] = b[i].off + b[i].size - k;
        for (size_t k = 0; k < (san ? 0u : 2u); k++)
            pos[npos++] = b[i].off + (size_t)tu_below(r, b[i].size);
        for (size_t k = 0; k < (san ? 2u : 5u); k++)
            pos[npos++] = b[i].off + b[i].size + k; /* the trailer */
    }
    unsigned char *buf = malloc(len);
    if (!buf)
        die("malloc");
    uint64_t before = failures, ncase = cases;
    double t0 = now_s();
    char what[128];
    for (size_t k = 0; k < npos; k++) {
        memcpy(buf, t->data, len);
        buf[pos[k]] ^= (unsigned char)(1 + tu_below(r, 255));
        lay_out(work, f, buf, len);
        snprintf(what, sizeof what, "%.63s changed", t->name);
        check(work, what, pos[k], false, t->name);
    }
    for (size_t i = 0; i < nb; i++) /* the restart count's top bit: a hash index */
        if (b[i].size >= 4) {
            memcpy(buf, t->data, len);
            buf[b[i].off + b[i].size - 1] ^= 0x80;
            lay_out(work, f, buf, len);
            snprintf(what, sizeof what, "%.63s's hash-index flag set", t->name);
            check(work, what, b[i].off + b[i].size - 1, false, t->name);
        }
    size_t cuts[16] = {0, len - 53, len - 8, len - 1}, ncut = 4;
    for (size_t i = 0; i < nb; i++)
        cuts[ncut++] = b[i].off + b[i].size / 2;
    for (size_t i = 0; i < ncut; i++) {
        lay_out(work, f, t->data, cuts[i]);
        snprintf(what, sizeof what, "%.63s cut", t->name);
        check(work, what, cuts[i], false, NULL);
    }
    printf("%-24s %7zu bytes, %zu blocks, %4zu cases: %llu failure(s), %.1f s\n", t->name, len,
           nb, (size_t)(cases - ncase), (unsigned long long)(failures - before), now_s() - t0);
    free(buf);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *sanitizer = getenv("DEDUP_SANITIZER");
    bool san = sanitizer && *sanitizer;
    uint64_t seed = tu_seed();
    tu_rng r = {seed};
    for (size_t i = 0; i < NKEYS; i++)
        keys[i] = (dedup_digest){tu_next(&r), tu_next(&r)};
    char base[] = "/tmp/dedup_store_damage.XXXXXX";
    if (!mkdtemp(base))
        die("mkdtemp");
    char pristine[128], work[128];
    snprintf(pristine, sizeof pristine, "%s/store", base);
    snprintf(work, sizeof work, "%s/work", base);
    {   /* load librocksdb here once (rdb_lazy.h), so the children need not */
        dedup_store_params p;
        dedup_store_params_init(&p);
        p.dir = "/nonexistent/dedup_store_damage";
        p.create = false;
        dedup_store *none = NULL;
        (void)dedup_store_create(&p, NULL, &none, NULL, 0);
    }
    make_store(pristine);
    read_all(pristine);
    if (mkdir(work, 0755) != 0)
        die("mkdir");
    child_why = mmap(NULL, 512, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (child_why == MAP_FAILED)
        die("mmap");
    for (size_t f = 0; f < nfiles; f++) {
        if (skip_file(files[f].name))
            continue;
        if (is_table(files[f].name)) {
            table_cases(f, work, &r, san);
            continue;
        }
        size_t len = files[f].len;
        bool is_log = strcmp(files[f].name, "dedup-pending.log") == 0;
        if (is_log && len <= 32 + 3 * 32)
            die("the pending log holds no records");
        /* under a sanitizer (each case forks a slow process): every 4th
         * position of the log, from a seeded start, and 8 of the others */
        bool every = (is_log && !san) || len <= (san ? 8u : 24u);
        size_t npos = every ? len : is_log ? (len + 3) / 4 : san ? 8 : 24;
        size_t phase = (size_t)tu_below(&r, 4);
        unsigned char *buf = malloc(len + 1);
        uint64_t before = failures;
        double t0 = now_s();
        for (size_t k = 0; k < npos; k++) {
            size_t pos = every ? k : is_log ? (4 * k + phase) % len : k < 4 ? k
                                       : k < 8 ? len - 1 - (k - 4) : (size_t)tu_below(&r, len);
            char what[128];
            memcpy(buf, files[f].data, len);
            buf[pos] ^= (unsigned char)(1 + tu_below(&r, 255));
            lay_out(work, f, buf, len);
            snprintf(what, sizeof what, "%.63s changed", files[f].name);
            check(work, what, pos, false, NULL);
            lay_out(work, f, files[f].data, pos);
            snprintf(what, sizeof what, "%.63s cut", files[f].name);
            check(work, what, pos, is_log && pos >= 32, NULL);
        }
        printf("%-24s %7zu bytes, %5zu positions%s: %llu failure(s), %.1f s\n", files[f].name, len,
               npos, every ? " (every one)" : "", (unsigned long long)(failures - before),
               now_s() - t0);
        free(buf);
        if (is_log)
            log_damage_cases(f, work, &r);
    }
    printf("%llu cases: %llu refused, %llu torn log tails reported, %llu failures\n",
           (unsigned long long)cases, (unsigned long long)refused, (unsigned long long)torn,
           (unsigned long long)failures);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        return 2;
    return failures ? 1 : 0;
}
