/* intkeys.c - integer keys (see intkeys.h). */
#include "intkeys.h"

#include <stdio.h>
#include <string.h>

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
