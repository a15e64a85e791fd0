/*
 * url.h - canonical form of an absolute URL, the key of `--url` (internal;
 * not exported from libdedup.so).
 *
 * The canonical form, in order:
 *   - scheme: lower-cased; it must match ALPHA *(ALPHA / DIGIT / "+" / "-" /
 *     ".") and be followed by "://";
 *   - userinfo ("user:pass@"): kept byte for byte;
 *   - host: non-empty; ASCII letters lower-cased (also inside an IPv6 literal
 *     "[...]", whose content is not otherwise checked); a trailing dot is
 *     kept; bytes >= 0x80 are kept as they are (internationalised domain
 *     names are out of scope: "bücher.de" and "xn--bcher-kva.de" differ);
 *   - port: digits only, at most 65535, leading zeros removed; dropped when
 *     empty or the scheme's default (80 for http, 443 for https);
 *   - path, query, host: percent-escapes "%xy" get upper-case hex, and those
 *     of unreserved characters (ALPHA DIGIT "-" "." "_" "~") are decoded;
 *     escapes of other characters are kept (so "%2F" and "/" differ); a '%'
 *     not followed by two hex digits is kept verbatim, and so is the escape
 *     of a hex digit that would complete an escape with it ("%4%41" stays,
 *     so that canonicalising a canonical form changes nothing); '+' and
 *     "%20" are not touched;
 *   - path: dot segments removed (RFC 3986 5.2.4, after decoding, so
 *     "%2E%2E" is ".."); an empty path becomes "/";
 *   - query: parameters are separated by '&' (not ';'); a parameter's name
 *     is the text before its first '=', compared after the escape rule
 *     above; with drop patterns or sort_params, empty parameters ("a&&b")
 *     are removed too; an empty query ("http://h/?") is removed;
 *   - fragment ("#..." ): removed;
 *   - every other byte (spaces, control characters, quotes, bytes >= 0x80)
 *     is kept as it is: the key is not re-encoded.
 *
 * Limits: with sort_params, at most DD_URL_MAX_SORT_PARAMS parameters
 * (after dropping); more is DEDUP_ERR_INVALID_ARG.
 */
#ifndef DEDUP_KEY_URL_H
#define DEDUP_KEY_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/common.h"

/* Parameters a sorted query may hold; 24 KiB of stack in dd_url_canon. */
#define DD_URL_MAX_SORT_PARAMS 512

typedef struct dd_url_opts {
    const char *const *drop; /* glob patterns for query parameter names to drop
                                ('*' any run of bytes, '?' one byte, '\\' makes
                                the byte after it literal, all other bytes
                                literal), n_drop of them, NUL-terminated */
    size_t n_drop;
    bool sort_params;        /* sort the remaining parameters (stable, by name
                                then value, bytewise) */
    /* Filled by dd_url_opts_prepare (else zero, and unused): the first bytes
     * a name may start with for some pattern to match it (first_ok), and
     * whether one may match the empty name. */
    bool prepared;
    bool empty_ok;
    uint64_t first_ok[4];
} dd_url_opts;

/* Fills the prepared fields of 'o' from its patterns (call again after
 * changing them): names no pattern can match are then passed over with one
 * table lookup.  Optional: dd_url_canon gives the same output either way. */
void dd_url_opts_prepare(dd_url_opts *o);

/* Canonical form of the URL in[0..len) (see above).  'o' may be NULL (no
 * dropping, no sorting).  'out' has room for len + 1 bytes (the canonical
 * form is never longer); 'out' and 'in' must not overlap.  *olen gets its
 * length.  DEDUP_ERR_INVALID_ARG when 'in' is not an absolute URL with an
 * authority (scheme "://" host), the port is not a number <= 65535, an IPv6
 * literal has no closing ']' or text between ']' and the port, or a sorted
 * query has too many parameters: the caller applies --on-bad-key; *olen is
 * then 0.  Pure function, no allocation, thread-safe. */
dedup_status dd_url_canon(const dd_url_opts *o, const unsigned char *in, size_t len,
                          unsigned char *out, size_t *olen);

/* Whether 'name'[0..len) matches the glob 'pat' (NUL-terminated; '*' and
 * '?' and '\\' as above).  Linear in len times the pattern's length at worst. */
bool dd_url_glob_match(const char *pat, const unsigned char *name, size_t len);

#endif /* DEDUP_KEY_URL_H */
