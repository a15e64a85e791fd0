/* intkeys.c - integer keys (see intkeys.h). */
#include "intkeys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dedup/limits.h"

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool dd_int_key(const unsigned char *k, size_t len, uint64_t *out)
{
    if (len == 0)
        return false;
    uint64_t v = 0;
    if (len > 2 && k[0] == '0' && (k[1] == 'x' || k[1] == 'X')) {
        size_t i = 2;
        while (i < len && k[i] == '0') /* leading zeros do not count against 16 digits */
            i++;
        if (len - i > 16)
            return false;
        for (; i < len; i++) {
            int h = hexval(k[i]);
            if (h < 0)
                return false;
            v = v << 4 | (uint64_t)h;
        }
        *out = v;
        return true;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned c = (unsigned)k[i] - '0';
        if (c > 9)
            return false;
        if (v > (UINT64_MAX - c) / 10)
            return false; /* 2^64 or more */
        v = v * 10 + c;
    }
    *out = v;
    return true;
}

bool dd_bad_key_from_name(const char *name, dd_bad_key *out)
{
    if (strcmp(name, "fail") == 0)
        *out = DD_BAD_KEY_FAIL;
    else if (strcmp(name, "skip") == 0)
        *out = DD_BAD_KEY_SKIP;
    else if (strcmp(name, "keep") == 0)
        *out = DD_BAD_KEY_KEEP;
    else
        return false;
    return true;
}

const char *dd_key_for_message(const unsigned char *k, size_t len, char *buf, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return buf;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = k[i];
        bool plain = c >= 0x20 && c < 0x7f && c != '\\';
        size_t need = plain ? 1 : 4;
        if (o + need + 4 > cap) { /* room for "..." and the NUL */
            if (o + 4 <= cap) {
                memcpy(buf + o, "...", 3);
                o += 3;
            }
            break;
        }
        if (plain)
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02X", c);
    }
    buf[o < cap ? o : cap - 1] = 0;
    return buf;
}

bool dd_int_range(const char *s, uint64_t *lo, uint64_t *hi)
{
    const char *dots = strstr(s, "..");
    if (!dots)
        return false;
    uint64_t a, b;
    if (!dd_int_key((const unsigned char *)s, (size_t)(dots - s), &a) ||
        !dd_int_key((const unsigned char *)dots + 2, strlen(dots + 2), &b) || b < a)
        return false;
    *lo = a;
    *hi = b;
    return true;
}

bool dd_int_keys_check(bool int_keys, const char *mode, bool range_given, bool bad_key_given,
                       const dd_seen_opts *sizing, const char *state, char *msg, size_t cap,
                       dedup_seen_kind *kind)
{
    dedup_seen_kind named = dedup_seen_kind_from_name(mode);
    bool bitmap = named == DEDUP_SEEN_BITMAP, roaring = named == DEDUP_SEEN_ROARING;
    (void)state; /* a bitmap's file keeps its range: any --range resumes */
    *kind = 0;
    if (!int_keys) {
        snprintf(msg, cap, "%s needs --keys int",
                 bitmap || roaring ? (bitmap ? "--mode bitmap" : "--mode roaring")
                 : range_given     ? "--range"
                                   : "--on-bad-key");
        (void)bad_key_given;
        return false;
    }
    if (!bitmap && !roaring && named != DEDUP_SEEN_EXACT) {
        snprintf(msg, cap, "--keys int works with --mode exact (the integer set), bitmap or "
                           "roaring, not %s", mode);
        return false;
    }
    if (range_given && !bitmap) {
        snprintf(msg, cap, "--range sizes a bitmap: it needs --mode bitmap");
        return false;
    }
    if (bitmap) {
        if (!range_given) {
            snprintf(msg, cap, "--mode bitmap needs --range LO..HI: one bit per possible ID");
            return false;
        }
        uint64_t span = sizing->range_hi - sizing->range_lo; /* bits - 1 */
        char hb[32], mb[32];
        if (span >= DEDUP_MAX_BITS) {
            cli_human_size(span / 8 + 1, hb, sizeof hb);
            snprintf(msg, cap, "--range %llu..%llu needs %s as a bitmap, over its limit of 2^40 "
                               "bits (128 GiB); use --mode roaring or exact",
                     (unsigned long long)sizing->range_lo, (unsigned long long)sizing->range_hi, hb);
            return false;
        }
        uint64_t bytes = (span / 64 + 1) * 8;
        if (sizing->memory && bytes > sizing->memory) {
            cli_human_size(bytes, hb, sizeof hb);
            cli_human_size(sizing->memory, mb, sizeof mb);
            snprintf(msg, cap, "--range %llu..%llu needs %s as a bitmap, more than -m/--memory %s; "
                               "use --mode roaring or exact, or more memory",
                     (unsigned long long)sizing->range_lo, (unsigned long long)sizing->range_hi, hb,
                     mb);
            return false;
        }
        *kind = DEDUP_SEEN_BITMAP;
        return true;
    }
    if (roaring) {
#ifdef DEDUP_HAVE_ROARING
        *kind = DEDUP_SEEN_ROARING;
        return true;
#else
        snprintf(msg, cap, "--mode roaring needs the roaring component, which this dedup was "
                           "built without (install libroaring-dev and rebuild)");
        return false;
#endif
    }
    *kind = DEDUP_SEEN_U64;
    return true;
}
