/* util.c - messages and argument parsing shared by the subcommands. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dedup/format.h"
#include "dedup/hash.h"

int cli_verbosity = 1;
const char *cli_progname = "dedup";

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: %s", cli_progname, prefix);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("", fmt, ap);
    va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
    if (cli_verbosity < 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg("warning: ", fmt, ap);
    va_end(ap);
}

void cli_info(int level, const char *fmt, ...)
{
    if (cli_verbosity < level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg("", fmt, ap);
    va_end(ap);
}

/* Parses a non-negative decimal number with optional fraction/exponent and
 * returns the rest of the string in *end. */
static bool parse_number(const char *s, double *v, const char **end)
{
    if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
        return false;
    char *e;
    errno = 0;
    double d = strtod(s, &e);
    if (e == s || errno == ERANGE || !isfinite(d) || d < 0)
        return false;
    *v = d;
    *end = e;
    return true;
}

bool cli_parse_size(const char *s, uint64_t *out)
{
    double v;
    const char *e;
    if (!parse_number(s, &v, &e))
        return false;
    double mult = 1;
    switch (toupper((unsigned char)*e)) {
    case 'K': mult = 1024.0; e++; break;
    case 'M': mult = 1048576.0; e++; break;
    case 'G': mult = 1073741824.0; e++; break;
    case 'T': mult = 1099511627776.0; e++; break;
    default: break;
    }
    if (mult > 1 && *e == 'i')
        e++;
    if (*e == 'B' || *e == 'b')
        e++;
    if (*e)
        return false;
    double r = ceil(v * mult);
    if (r < 1 || r > 1.8e19)
        return false;
    *out = (uint64_t)r;
    return true;
}

bool cli_parse_count(const char *s, uint64_t *out)
{
    double v;
    const char *e;
    if (!parse_number(s, &v, &e))
        return false;
    double mult = 1;
    switch (*e) {
    case 'k': case 'K': mult = 1e3; e++; break;
    case 'M': case 'm': mult = 1e6; e++; break;
    case 'G': case 'g': case 'B': case 'b': mult = 1e9; e++; break;
    case 'T': case 't': mult = 1e12; e++; break;
    default: break;
    }
    if (*e)
        return false;
    double r = v * mult;
    if (r < 1 || r > 1.8e19 || r != floor(r))
        return false;
    *out = (uint64_t)r;
    return true;
}

bool cli_parse_prob(const char *s, double *out)
{
    double v;
    const char *e;
    if (!parse_number(s, &v, &e))
        return false;
    if (*e == '%') {
        v /= 100.0;
        e++;
    }
    if (*e || !(v > 0.0 && v < 1.0))
        return false;
    *out = v;
    return true;
}

bool cli_parse_duration(const char *s, uint64_t *out_us)
{
    double v;
    const char *e;
    if (!parse_number(s, &v, &e))
        return false;
    double mult;
    if (!*e || strcmp(e, "s") == 0 || strcmp(e, "sec") == 0)
        mult = 1e6;
    else if (strcmp(e, "ms") == 0)
        mult = 1e3;
    else if (strcmp(e, "us") == 0)
        mult = 1;
    else if (strcmp(e, "m") == 0 || strcmp(e, "min") == 0)
        mult = 60e6;
    else if (strcmp(e, "h") == 0)
        mult = 3600e6;
    else if (strcmp(e, "d") == 0)
        mult = 86400e6;
    else
        return false;
    double r = v * mult;
    if (r < 1 || r > 9.2e18)
        return false;
    *out_us = (uint64_t)llround(r);
    return true;
}

bool cli_fd_regular(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

bool dd_fresh_seed(uint64_t *out)
{
    return dedup_secret_seed(out) == DEDUP_OK;
}

uint64_t cli_run_seed(void)
{
    uint64_t s = 0;
    if (!dd_fresh_seed(&s)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        s = (uint64_t)t.tv_nsec * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)t.tv_sec ^
            (uint64_t)getpid() << 32;
    }
    return s;
}

const char *cli_a(const char *word)
{
    return word && strchr("aeiouAEIOU", word[0]) && word[0] ? "an" : "a";
}

const char *cli_human_size(uint64_t bytes, char *buf, size_t cap)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
}

void cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void cli_print_version(void)
{
    printf("dedup %s (library %s)\n", DEDUP_VERSION_STRING, dedup_version_string());
}

int cli_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    int e = pthread_condattr_init(&ca);
    if (e)
        return e;
    e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!e)
        e = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return e;
}

void cli_cond_wait_ns(pthread_cond_t *cv, pthread_mutex_t *mu, long ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec += ns % 1000000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}
