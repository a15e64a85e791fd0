/*
 * json.h - values of JSON Lines records by path, in a canonical text, the
 * keys of `--json` (internal; not exported from libdedup.so).
 *
 * Paths.  A spec is a comma-separated list of at most DD_JSON_MAX_PATHS
 * paths.  Each path starts with '.' and goes on with components:
 *   .name       a member; the name is any non-empty run of bytes other than
 *               '.', '[', ']', ',' and '"' (".user.id")
 *   ."name"     a member named by a JSON string (escapes included, may be
 *               empty), for names with those bytes ('."a.b"', '."\u00e9"')
 *   [N]         an element of an array, N decimal, 0 the first (".items[0]",
 *               ".[2]" on a top-level array)
 * A lone "." is the whole record.  Member names are at most
 * DD_JSON_MAX_NAME bytes (decoded), a path has at most DD_JSON_MAX_DEPTH
 * components.
 *
 * Records.  A record must be one JSON text (RFC 8259: any value at the top,
 * whitespace " \t\r\n" around tokens) in valid UTF-8: no NaN or Infinity,
 * no control characters inside strings, no lone or reversed surrogate
 * escapes, no overlong or surrogate UTF-8 sequences.  The whole record is
 * checked, also after every path was found.  Containers nest at most
 * DD_JSON_MAX_DEPTH deep.
 *
 * Canonical text of a value (what is compared):
 *   - strings: decoded, then written in quotes with one escaping: '"' and
 *     '\\' as \" and \\, the control characters 0x08 0x09 0x0a 0x0c 0x0d as
 *     \b \t \n \f \r, the others below 0x20 as \u00xx (lower-case hex),
 *     everything else as UTF-8 (so "\u00e9", "\u00E9" and "é" are one
 *     string, "\/" is "/");
 *   - numbers: by value, exactly (no rounding): 1, 1.0, 1e0 and 10e-1 are
 *     one number; -0 is 0.  A value with no fractional part and at most 21
 *     trailing zeros is written as a plain integer ("100", "-7",
 *     "1000000000000000000000"); any other one in scientific form with one
 *     digit before the point and no trailing zeros: "1.5e0", "-2.5e-3",
 *     "1e22", "1.23456789012345678901e30".  A selected value holding a
 *     number whose written exponent is beyond +-10^18 is DEDUP_ERR_LIMIT
 *     (elsewhere in the record such a number is only checked);
 *   - true, false, null: as they are;
 *   - arrays: "[" elements "," "]" in their order;
 *   - objects: "{" "name":value "," "}" with the members sorted bytewise by
 *     the canonical text of their names (between the quotes, a shorter prefix
 *     first); when a name repeats, the last member of that name wins (also
 *     for paths: in {"a":{"b":1},"a":{}} the path .a.b is missing).
 * So 1 and "1" differ, and objects whose members come in another order are
 * equal.
 */
#ifndef DEDUP_KEY_JSON_H
#define DEDUP_KEY_JSON_H

#include <stddef.h>

#include "dedup/common.h"

/* Containers nested deeper in a record are refused (DEDUP_ERR_LIMIT): the
 * scanner keeps one small frame per level on the stack. */
#define DD_JSON_MAX_DEPTH 64
/* Paths in one spec: the scanner tracks them in one 64-bit mask per level. */
#define DD_JSON_MAX_PATHS 64
/* Bytes of a member name in a path: record names are decoded into a stack
 * buffer of this size to be compared. */
#define DD_JSON_MAX_NAME 1024

typedef struct dd_json_paths dd_json_paths;

/* Compiles 'spec' (NUL-terminated, see above).  DEDUP_ERR_INVALID_ARG with
 * *err_pos = byte offset of the problem (a path not starting with '.', an
 * empty or too long name, a bad index, a bad quoted name, too many paths or
 * components; the offset of the component, or of the '.' starting the path);
 * DEDUP_ERR_NOMEM.  'alloc' may be NULL (malloc). */
dedup_status dd_json_paths_compile(const char *spec, const dedup_allocator *alloc,
                                   dd_json_paths **out, size_t *err_pos);
void dd_json_paths_free(dd_json_paths *p); /* accepts NULL */
size_t dd_json_paths_count(const dd_json_paths *p);
/* Where path i (spec order) stands in the spec it was compiled from:
 * spec[*off .. *off + *len).  False when there is no path i. */
bool dd_json_path_span(const dd_json_paths *p, size_t i, size_t *off, size_t *len);

/* One pass over one JSON text line[0..len) (a JSON Lines record, without its
 * newline) checks it and finds every path's value; then, for every path in
 * spec order, appends to out:
 *     u32 little-endian length L, then L bytes: the canonical text of the
 *     value.
 * Returns DEDUP_OK with *olen the bytes written; DEDUP_ERR_CORRUPT (not
 * valid JSON or invalid UTF-8; *bad_pos = byte offset of the first bad
 * byte); DEDUP_ERR_LIMIT (nesting deeper than DD_JSON_MAX_DEPTH, *bad_pos =
 * the offset of the bracket; or, in a selected value, a number exponent
 * beyond +-10^18, or a value's canonical text over 4 GiB);
 * DEDUP_ERR_NOT_FOUND (a path missing, *bad_path = the index of the first
 * one missing); DEDUP_ERR_FULL when 'cap' is too
 * small: *olen = a size that is enough (it may exceed the final length, as
 * sorting object members borrows room after the text), call again.  Errors
 * are reported in this order: CORRUPT or the depth LIMIT (whichever comes
 * first in the line), NOT_FOUND, then the exponent or 4 GiB LIMIT (*bad_pos
 * not set) or FULL.  'bad_path' and 'bad_pos' may be NULL.
 * No allocation, thread-safe for distinct out buffers ('p' is only read). */
dedup_status dd_json_extract(const dd_json_paths *p, const unsigned char *line, size_t len,
                             unsigned char *out, size_t cap, size_t *olen, size_t *bad_path,
                             size_t *bad_pos);

#endif /* DEDUP_KEY_JSON_H */
