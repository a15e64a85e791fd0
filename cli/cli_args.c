/* cli_args.c - option values with clear error messages (see cli_args.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"

bool arg_count(const char *cmd, const char *opt, const char *v, uint64_t *out)
{
    if (cli_parse_count(v, out))
        return true;
    cli_error("%s: %s must be a positive whole number such as 1000000, 1e6 or 10M (got '%s')",
              cmd, opt, v);
    return false;
}

bool arg_prob(const char *cmd, const char *opt, const char *v, double *out)
{
    if (cli_parse_prob(v, out))
        return true;
    cli_error("%s: %s must be between 0 and 1 exclusive, such as 0.01, 1%% or 1e-3 (got '%s')",
              cmd, opt, v);
    return false;
}

bool arg_size(const char *cmd, const char *opt, const char *v, uint64_t *out)
{
    if (cli_parse_size(v, out))
        return true;
    cli_error("%s: %s must be a positive size in bytes such as 4096, 512K, 64M or 2G (got '%s')",
              cmd, opt, v);
    return false;
}

bool arg_uint(const char *cmd, const char *opt, const char *v, uint64_t lo, uint64_t hi,
              uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = (v[0] >= '0' && v[0] <= '9') ? strtoull(v, &end, 10) : 0;
    if (!(v[0] >= '0' && v[0] <= '9') || *end || errno || x < lo || x > hi) {
        cli_error("%s: %s must be a whole number from %" PRIu64 " to %" PRIu64 " (got '%s')", cmd,
                  opt, lo, hi, v);
        return false;
    }
    *out = x;
    return true;
}

bool arg_seed(const char *cmd, const char *opt, const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = (v[0] >= '0' && v[0] <= '9') ? strtoull(v, &end, 0) : 0;
    if (!(v[0] >= '0' && v[0] <= '9') || *end || errno) {
        cli_error("%s%s%s must be a 64-bit number, decimal or 0x-hex (got '%s')", cmd ? cmd : "",
                  cmd ? ": " : "", opt, v);
        return false;
    }
    *out = x;
    return true;
}

void arg_bad_option(const char *cmd, int c, char **argv, const char *help_cmd)
{
    const char *arg = argv[optind - 1];
    if (c == ':')
        cli_error("%s: option '%s' needs a value (see '%s --help')", cmd, arg, help_cmd);
    else if (optopt && !(arg[0] == '-' && arg[1] == '-'))
        cli_error("%s: unknown option '-%c' (see '%s --help')", cmd, optopt, help_cmd);
    else
        cli_error("%s: unknown option '%s' (see '%s --help')", cmd, arg, help_cmd);
}

void json_double(FILE *f, double v)
{
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, sizeof buf, "%.17g", v);
    fputs(buf, f);
}

const char *human_size_si(uint64_t bytes, char *buf, size_t cap)
{
    static const char *units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1000.0 && u < 5) {
        v /= 1000.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
}

static int out_errno; /* errno of the first failed write to stdout */

bool out_write(const void *buf, size_t len)
{
    if (out_errno)
        return false;
    errno = 0;
    if (fwrite(buf, 1, len, stdout) == len)
        return true;
    out_errno = errno ? errno : EIO;
    return false;
}

int out_finish(const char *cmd, bool *epipe)
{
    errno = 0;
    if (!out_errno && fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    if (!out_errno)
        out_errno = errno ? errno : EIO;
    if (out_errno == EPIPE) {
        if (epipe)
            *epipe = true;
        return 0;
    }
    cli_error("%s: write error on standard output: %s", cmd, strerror(out_errno));
    return 1;
}
