/*
 * gen_urls.c - writes N URL-like lines to stdout, a given fraction of them
 * repeats of earlier lines, deterministically from a seed.  Shared by the
 * benchmarks (external dedup, exact line dedup).  Build: cc -O2 -o gen_urls
 * bench/gen_urls.c   (bench_extsort.sh does it).
 *
 *   gen_urls N [-r REPEAT_FRACTION=0.5] [-s SKEW=0] [-S SEED=1] [-b BYTES]
 *
 * Line i is, with probability REPEAT_FRACTION (and once at least one URL
 * exists), a copy of an earlier distinct URL, otherwise a new one.  The
 * repeated URL is drawn over the distinct URLs so far: uniformly with skew 0,
 * and with skew s > 0 as index = floor(u * x^(1+s)) for x uniform in [0,1),
 * which favours the oldest URLs (popular pages seen early).  URLs are
 * derived from their index by hashing, so nothing is kept in memory:
 *   https://www.<word><n>.<tld>/<word>/<word>-<hex>/<id>.html?ref=<base36>
 * 40-110 bytes, ~70 on average.  With -b, stops after BYTES bytes instead
 * of N lines (N is then the maximum).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

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

static char *put(char *o, const char *s) { size_t n = strlen(s); memcpy(o, s, n); return o + n; }
static char *put_u(char *o, uint64_t v, unsigned base)
{
    char tmp[24]; int n = 0;
    do { unsigned d = (unsigned)(v % base); tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10); v /= base; } while (v);
    while (n) *o++ = tmp[--n];
    return o;
}

static size_t url(char *o0, uint64_t id, uint64_t seed)
{
    uint64_t h = mix(id ^ seed), g = mix(h);
    char *o = o0;
    o = put(o, "https://www.");
    uint64_t dom = h % 20000; /* 20k sites */
    o = put(o, words[dom % 32]);
    o = put_u(o, dom / 32, 10);
    *o++ = '.';
    o = put(o, tlds[(dom >> 5) % 10]);
    *o++ = '/';
    o = put(o, words[(h >> 20) % 32]);
    *o++ = '/';
    o = put(o, words[(h >> 28) % 32]);
    *o++ = '-';
    o = put_u(o, g & 0xffffff, 16);
    *o++ = '/';
    o = put_u(o, id, 10);
    o = put(o, ".html");
    if ((g >> 32) % 3) {
        o = put(o, "?ref=");
        o = put_u(o, (g >> 35) & ((1ull << ((g >> 60) * 4 + 8)) - 1), 36);
    }
    *o++ = '\n';
    return (size_t)(o - o0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gen_urls N [-r FRACTION] [-s SKEW] [-S SEED] [-b BYTES]\n");
        return 2;
    }
    uint64_t n = strtoull(argv[1], NULL, 0), seed = 1, maxbytes = 0;
    double rep = 0.5, skew = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-r")) rep = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) skew = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "-S")) seed = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "-b")) maxbytes = strtoull(argv[i + 1], NULL, 0);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    static char buf[1 << 20];
    size_t len = 0;
    uint64_t distinct = 0, bytes = 0, rng = mix(seed ^ 0x5eed);
    uint64_t thr = (uint64_t)(rep * 18446744073709551615.0);
    for (uint64_t i = 0; i < n; i++) {
        rng = mix(rng);
        uint64_t id;
        if (distinct > 0 && rng < thr) {
            double x = (double)(mix(rng) >> 11) * (1.0 / 9007199254740992.0);
            if (skew > 0)
                x = pow(x, 1.0 + skew);
            id = (uint64_t)(x * (double)distinct);
            if (id >= distinct)
                id = distinct - 1;
        } else {
            id = distinct++;
        }
        size_t k = url(buf + len, id, seed);
        len += k;
        bytes += k;
        if (len > sizeof buf - 256) {
            if (fwrite(buf, 1, len, stdout) != len) return 1;
            len = 0;
        }
        if (maxbytes && bytes >= maxbytes)
            break;
    }
    if (len && fwrite(buf, 1, len, stdout) != len) return 1;
    return 0;
}
