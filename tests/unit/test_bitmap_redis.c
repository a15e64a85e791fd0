/*
 * test_bitmap_redis.c - the bitmap's Redis export read by a real Redis.
 *
 * Starts its own redis-server ($REDIS_SERVER, default /usr/bin/redis-server)
 * on a free 127.0.0.1 port with persistence off, and checks both ways:
 *  - `SET k <dedup_bitmap_export_redis()>`: STRLEN, BITCOUNT, GETBIT at
 *    random offsets, BITCOUNT ... BIT over random ranges and BITPOS 1/0
 *    ... BIT from random offsets answer as get, count_range, next_set and
 *    next_clear do;
 *  - bits written with SETBIT, read back with GET and
 *    dedup_bitmap_import_redis(), are the same bits.
 * Commands are pipelined in bounded batches over one socket (a minimal RESP
 * client: the test needs no client library); every read has a 10 s timeout
 * and the server is shut down at the end, also when a check fails.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/bitmap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t server_pid;
static int conn = -1;
static int port;
static char workdir[64];

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0)
        return -1;
    socklen_t len = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s);
    return ntohs(a.sin_port);
}

static int try_connect(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s < 0)
        return -1;
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    struct timeval tv = {10, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return s;
}

/* ---- a minimal RESP client ---------------------------------------------- */
static unsigned char rbuf[1 << 16];
static size_t rpos, rlen;

static void send_all(const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(conn, c, n);
        if (w <= 0)
            fail_msg("write to redis: %s", strerror(errno));
        c += w;
        n -= (size_t)w;
    }
}

static int get_byte(void)
{
    if (rpos == rlen) {
        ssize_t r = read(conn, rbuf, sizeof rbuf);
        if (r <= 0)
            fail_msg("read from redis: %s", r == 0 ? "closed" : strerror(errno));
        rpos = 0;
        rlen = (size_t)r;
    }
    return rbuf[rpos++];
}

static void get_line(char *out, size_t cap)
{
    size_t n = 0;
    int c;
    while ((c = get_byte()) != '\n')
        if (n + 1 < cap && c != '\r')
            out[n++] = (char)c;
    out[n] = 0;
}

/* Sends one command of 'argc' arguments (binary-safe). */
static void command(int argc, const char *const *argv, const size_t *lens)
{
    char head[64];
    snprintf(head, sizeof head, "*%d\r\n", argc);
    send_all(head, strlen(head));
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        snprintf(head, sizeof head, "$%zu\r\n", l);
        send_all(head, strlen(head));
        send_all(argv[i], l);
        send_all("\r\n", 2);
    }
}

static void commandf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A command of space-separated words. */
static void commandf(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const char *argv[16];
    int argc = 0;
    for (char *tok = strtok(line, " "); tok && argc < 16; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    command(argc, argv, NULL);
}

static long long reply_int(void)
{
    char line[128];
    get_line(line, sizeof line);
    if (line[0] != ':')
        fail_msg("expected an integer reply, got '%s'", line);
    return strtoll(line + 1, NULL, 10);
}

static void reply_ok(void)
{
    char line[128];
    get_line(line, sizeof line);
    if (line[0] != '+')
        fail_msg("expected a status reply, got '%s'", line);
}

/* A bulk reply into a malloc'd buffer; *len its length. */
static unsigned char *reply_bulk(size_t *len)
{
    char line[128];
    get_line(line, sizeof line);
    if (line[0] != '$')
        fail_msg("expected a bulk reply, got '%s'", line);
    long long n = strtoll(line + 1, NULL, 10);
    if (n < 0)
        n = 0;
    unsigned char *p = malloc((size_t)n + 1);
    for (long long i = 0; i < n; i++)
        p[i] = (unsigned char)get_byte();
    get_byte();
    get_byte();
    *len = (size_t)n;
    return p;
}

/* ---- the server ------------------------------------------------------------ */
static int start_server(void **state)
{
    (void)state;
    const char *bin = getenv("REDIS_SERVER") ? getenv("REDIS_SERVER") : "/usr/bin/redis-server";
    snprintf(workdir, sizeof workdir, "/tmp/test_bitmap_redis_XXXXXX");
    if (!mkdtemp(workdir))
        return -1;
    for (int attempt = 0; attempt < 5 && conn < 0; attempt++) {
        port = free_port();
        char portstr[16];
        snprintf(portstr, sizeof portstr, "%d", port);
        server_pid = fork();
        if (server_pid == 0) {
            int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, 1);
            dup2(devnull, 2);
            execl(bin, bin, "--port", portstr, "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--dir", workdir, "--daemonize", "no", (char *)NULL);
            _exit(127);
        }
        /* Up to 10 s for it to accept connections. */
        for (int i = 0; i < 200 && conn < 0; i++) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
            int status;
            if (waitpid(server_pid, &status, WNOHANG) == server_pid) {
                server_pid = 0;
                break; /* it exited: the port was taken, or no server */
            }
            conn = try_connect();
        }
        if (conn < 0 && server_pid > 0) {
            kill(server_pid, SIGKILL);
            waitpid(server_pid, NULL, 0);
            server_pid = 0;
        }
    }
    if (conn < 0) {
        fprintf(stderr, "could not start %s on a free port\n", bin);
        return -1;
    }
    commandf("PING");
    reply_ok();
    fprintf(stderr, "redis-server on 127.0.0.1:%d\n", port);
    return 0;
}

static int stop_server(void **state)
{
    (void)state;
    if (conn >= 0)
        close(conn);
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        for (int i = 0; i < 100; i++) {
            if (waitpid(server_pid, NULL, WNOHANG) == server_pid) {
                server_pid = 0;
                break;
            }
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (server_pid > 0) {
            kill(server_pid, SIGKILL);
            waitpid(server_pid, NULL, 0);
        }
    }
    rmdir(workdir);
    return 0;
}

static dedup_bitmap *random_bitmap(uint64_t n, unsigned per_mille, tu_rng *r)
{
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    p.nbits = n;
    dedup_bitmap *bm = NULL;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &bm), DEDUP_OK);
    for (uint64_t i = 0; i < n; i++)
        if (tu_below(r, 1000) < per_mille)
            assert_int_equal(dedup_bitmap_set(bm, i), DEDUP_OK);
    return bm;
}

static void test_export_read_by_redis(void **state)
{
    (void)state;
    tu_rng r = {tu_seed()};
    static const uint64_t sizes[] = {1, 8, 13, 64, 100003, 1 << 20};
    static const unsigned dens[] = {500, 10, 990};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t di = 0; di < 3; di++) {
            uint64_t n = sizes[si];
            dedup_bitmap *bm = random_bitmap(n, dens[di], &r);
            size_t nb = (size_t)dedup_bitmap_redis_bytes(bm);
            unsigned char *buf = malloc(nb);
            assert_int_equal(dedup_bitmap_export_redis(bm, buf, nb), DEDUP_OK);
            const char *argv[3] = {"SET", "bm", (const char *)buf};
            size_t lens[3] = {3, 2, nb};
            command(3, argv, lens);
            reply_ok();
            commandf("STRLEN bm");
            assert_int_equal(reply_int(), nb);
            commandf("BITCOUNT bm");
            assert_int_equal(reply_int(), dedup_bitmap_popcount(bm));
            /* GETBIT at 500 random offsets, pipelined. */
            uint64_t off[500];
            for (int i = 0; i < 500; i++) {
                off[i] = tu_below(&r, n);
                commandf("GETBIT bm %llu", (unsigned long long)off[i]);
            }
            for (int i = 0; i < 500; i++) {
                bool v;
                assert_int_equal(dedup_bitmap_get(bm, off[i], &v), DEDUP_OK);
                assert_int_equal(reply_int(), v);
            }
            /* BITCOUNT over ranges, BITPOS 1 / 0 from offsets (Redis 7: BIT). */
            uint64_t a[100], b[100];
            for (int i = 0; i < 100; i++) {
                a[i] = tu_below(&r, n);
                b[i] = a[i] + tu_below(&r, n - a[i]); /* inclusive end, < n */
                commandf("BITCOUNT bm %llu %llu BIT", (unsigned long long)a[i],
                         (unsigned long long)b[i]);
                commandf("BITPOS bm 1 %llu %llu BIT", (unsigned long long)a[i],
                         (unsigned long long)(n - 1));
                commandf("BITPOS bm 0 %llu %llu BIT", (unsigned long long)a[i],
                         (unsigned long long)(n - 1));
            }
            for (int i = 0; i < 100; i++) {
                uint64_t c;
                assert_int_equal(dedup_bitmap_count_range(bm, a[i], b[i] + 1, &c), DEDUP_OK);
                assert_int_equal(reply_int(), c);
                uint64_t s = dedup_bitmap_next_set(bm, a[i]);
                assert_int_equal(reply_int(), s == n ? -1 : (long long)s);
                uint64_t z = dedup_bitmap_next_clear(bm, a[i]);
                assert_int_equal(reply_int(), z == n ? -1 : (long long)z);
            }
            free(buf);
            dedup_bitmap_free(bm);
        }
}

static void test_setbit_imported(void **state)
{
    (void)state;
    tu_rng r = {tu_seed() ^ 7};
    const uint64_t n = 200000;
    commandf("DEL sb");
    (void)reply_int();
    dedup_bitmap_params p;
    dedup_bitmap_params_init(&p);
    p.nbits = n;
    dedup_bitmap *model = NULL;
    assert_int_equal(dedup_bitmap_create(&p, NULL, &model), DEDUP_OK);
    for (int batch = 0; batch < 10; batch++) {
        for (int i = 0; i < 1000; i++) {
            uint64_t o = tu_below(&r, n);
            commandf("SETBIT sb %llu 1", (unsigned long long)o);
            assert_int_equal(dedup_bitmap_set(model, o), DEDUP_OK);
        }
        for (int i = 0; i < 1000; i++)
            (void)reply_int();
    }
    commandf("GET sb");
    size_t len;
    unsigned char *s = reply_bulk(&len);
    dedup_bitmap *got = NULL;
    assert_int_equal(dedup_bitmap_import_redis(s, len, n, NULL, &got), DEDUP_OK);
    uint64_t c = 0;
    for (uint64_t i = 0; i < n; i++) {
        bool x, y;
        dedup_bitmap_get(model, i, &x);
        dedup_bitmap_get(got, i, &y);
        assert_int_equal(x, y);
        c += x;
    }
    commandf("BITCOUNT sb");
    assert_int_equal(reply_int(), c);
    free(s);
    dedup_bitmap_free(got);
    dedup_bitmap_free(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_read_by_redis),
        cmocka_unit_test(test_setbit_imported),
    };
    return cmocka_run_group_tests(tests, start_server, stop_server);
}
