/*
 * url_canon_bench.c - canonical URLs per second on one core (the target of
 * issue 36: >= 5M URLs/s).  A list of realistic crawler URLs is generated in
 * memory first (deterministic from the seed): hosts and paths as
 * bench/gen_urls.c makes them, with what crawlers meet mixed in: upper-case
 * schemes and hosts, default ports, tracking parameters (utm_*, fbclid,
 * gclid), fragments, dot segments, percent-escapes (some of unreserved
 * characters), several parameters.  The timed loop only canonicalises, in
 * three settings: the bare rules, with --url-drop-params='utm_*,fbclid,gclid',
 * and with that plus --url-sort-params.  Thread CPU time, best of ROUNDS.
 *
 *   url_canon_bench [URLS=2000000] [ROUNDS=5] [SEED=1] [SETTING]
 *
 * SETTING 0, 1 or 2 times that setting only (for profiles and A/B runs).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "url.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const char *words[] = {"news", "shop", "blog", "docs", "mail", "cloud", "data", "media",
    "video", "music", "sport", "travel", "food", "health", "tech", "games", "forum", "wiki",
    "store", "photo", "maps", "books", "jobs", "auto", "home", "money", "learn", "code",
    "social", "events", "market", "search"};
static const char *tlds[] = {"com", "org", "net", "io", "de", "fr", "co.uk", "cn", "jp", "info"};

static size_t url(char *o, uint64_t id, uint64_t seed)
{
    uint64_t h = mix(id ^ seed), g = mix(h), f = mix(g);
    int n = 0;
    const char *scheme = (f & 7) == 0 ? "HTTPS" : (f & 7) == 1 ? "http" : "https";
    const char *port = (f >> 3 & 15) == 0 ? (scheme[4] == 0 ? ":80" : ":443")
                       : (f >> 3 & 15) == 1 ? ":8080" : "";
    const char *www = (f >> 7 & 7) == 0 ? "WWW" : "www";
    uint64_t dom = h % 20000;
    n += sprintf(o + n, "%s://%s.%s%u.%s%s/%s/", scheme, www, words[dom % 32],
                 (unsigned)(dom / 32), tlds[(dom >> 5) % 10], port, words[(h >> 20) % 32]);
    if ((f >> 10 & 15) == 0)
        n += sprintf(o + n, "./%s/../", words[(g >> 3) % 32]);
    if ((f >> 14 & 7) == 0)
        n += sprintf(o + n, "%%7E%s/", words[(g >> 8) % 32]);
    n += sprintf(o + n, "%s-%06x/%u.html", words[(h >> 28) % 32], (unsigned)(g & 0xffffff),
                 (unsigned)(g >> 40));
    int params = (int)(f >> 17 & 3);
    char sep = '?';
    for (int i = 0; i < params; i++) {
        static const char *names[] = {"id", "page", "sort", "q", "ref", "lang"};
        n += sprintf(o + n, "%c%s=%u", sep, names[(g >> (i * 5)) % 6], (unsigned)(g >> (20 + i * 7)) & 1023);
        sep = '&';
    }
    if ((f >> 19 & 3) == 0) {
        n += sprintf(o + n, "%cutm_source=newsletter&utm_medium=email&utm_campaign=spring%u", sep,
                     (unsigned)(f >> 40) & 63);
        sep = '&';
    }
    if ((f >> 21 & 7) == 0) {
        n += sprintf(o + n, "%c%s=IwAR%012llx", sep, (f >> 24 & 1) ? "fbclid" : "gclid",
                     (unsigned long long)(mix(f) & 0xffffffffffffull));
        sep = '&';
    }
    if ((f >> 25 & 7) == 0)
        n += sprintf(o + n, "%cq=caf%%c3%%a9+cr%%C3%%A8me%%20br%%FBl%%E9e", sep);
    if ((f >> 28 & 3) == 0)
        n += sprintf(o + n, "#section-%u", (unsigned)(f >> 50) & 15);
    return (size_t)n;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 2000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    int only = argc > 4 ? atoi(argv[4]) : -1;
    if (!n || rounds < 1)
        return 2;
    size_t *off = malloc((n + 1) * sizeof *off);
    char *buf = malloc(n * 512);
    unsigned char *out = malloc(4096);
    if (!off || !buf || !out)
        return 1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = at;
        at += url(buf + at, i, seed);
    }
    off[n] = at;
    printf("%zu URLs, %.1f bytes on average; e.g. %.*s\n", n, (double)at / (double)n,
           (int)(off[1] - off[0]), buf);
    static const char *const drop[] = {"utm_*", "fbclid", "gclid"};
    dd_url_opts settings[3] = {{.drop = NULL}, {.drop = drop, .n_drop = 3},
                               {.drop = drop, .n_drop = 3, .sort_params = true}};
    for (int s = 0; s < 3; s++) /* as the key spec does */
        dd_url_opts_prepare(&settings[s]);
    const char *names[3] = {"rules only", "drop utm_*,fbclid,gclid", "drop + sort"};
    for (int s = 0; s < 3; s++) {
        if (only >= 0 && s != only)
            continue;
        double best = 1e30;
        uint64_t sum = 0, bytes = 0;
        for (int r = 0; r < rounds; r++) {
            double t0 = cpu_now();
            sum = bytes = 0;
            for (size_t i = 0; i < n; i++) {
                size_t olen;
                if (dd_url_canon(&settings[s], (unsigned char *)buf + off[i], off[i + 1] - off[i], out,
                                 &olen) != DEDUP_OK)
                    return 1;
                sum += out[olen / 2];
                bytes += olen;
            }
            double t = cpu_now() - t0;
            if (t < best)
                best = t;
        }
        size_t olen;
        dd_url_canon(&settings[s], (unsigned char *)buf + off[7], off[8] - off[7], out, &olen);
        printf("%-24s %6.2f M URLs/s  %6.1f ns/URL  %5.0f MB/s in  (out %.1f B/URL, check %llu) e.g. %.*s\n",
               names[s], (double)n / best / 1e6, best / (double)n * 1e9, (double)at / best / 1e6,
               (double)bytes / (double)n, (unsigned long long)sum, (int)olen, out);
    }
    free(off);
    free(buf);
    free(out);
    return 0;
}
