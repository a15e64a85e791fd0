/*
 * dedup/key.h - from a record to its key: field selection, CSV, JSON Lines
 * paths, canonical URLs and normalisation.
 *
 * A key spec is compiled once (dedup_key_create) from its parameters and,
 * when fields are named, from the header record; it is then applied to
 * records one by one (dedup_key_of) or a batch at a time (dedup_key_batch).
 * The record itself is never changed: only its key is derived.
 *
 * What a key is, by the selection:
 *   - the whole record (no fields, plain format): the record's bytes;
 *   - exactly one field ("3", or a name): that field's bytes;
 *   - anything else (a list "1,3", a range "2-4" or "3-", several names;
 *     every field of a CSV record when none is selected; the JSON paths):
 *     a tuple, each element written as a u32 little-endian length and its
 *     bytes, so a field holding the delimiter can never make two different
 *     tuples equal.
 * A field past the record's last one is empty (as awk's $N); an open range
 * "N-" stops at the record's last field.
 *
 * Formats:
 *   - DEDUP_KEY_PLAIN: fields are the bytes between delimiters.
 *   - DEDUP_KEY_CSV: RFC 4180.  A field that starts with '"' is quoted: it
 *     ends at the next '"' that is not doubled, may hold the delimiter and
 *     newlines, and its value is its content with every "" made one '"'.  A
 *     '"' inside an unquoted field is data.  A record's final '\r' (CRLF) is
 *     not part of its last field; an empty record has no fields.  Malformed:
 *     text after a closing quote, or a quote still open at the end of the
 *     record (DEDUP_ERR_CORRUPT for that record).
 *   - DEDUP_KEY_JSON: the record is one JSON text; the key is the tuple of
 *     the canonical JSON texts of the values at the given paths (strings
 *     decoded and written with one escaping, so "\u00e9" is "é"; numbers by
 *     value, so 1, 1.0 and 10e-1 are one number and 1 differs from "1";
 *     object members sorted by name; of repeated names the last wins).
 *     Nesting is limited to 64 levels.
 *
 * Normalisation, applied to each element (or to the whole record) in this
 * order: trim (leading and trailing space, \t, \r, \n, \v, \f) -> squeeze
 * (every run of those becomes one space) -> canonical URL -> strip prefix ->
 * ASCII case fold (bytes >= 0x80 unchanged, so locale-independent).  JSON
 * values are compared by their canonical texts; the normalisations apply to
 * a selected value that is a string (its decoded text, written back in the
 * canonical escaping), and with url a selected value that is not a string
 * is not a URL (DEDUP_ERR_INVALID_ARG).
 *
 * Canonical URL (RFC 3986 section 6.2.2): scheme and host lower-cased,
 * percent-escapes in upper-case hex, escaped unreserved characters decoded,
 * dot segments removed, an empty path made "/", the default port (80 for
 * http, 443 for https) and the fragment dropped; then the query parameters
 * whose names match one of the drop globs ('*' and '?') are dropped and,
 * when asked, the rest sorted by name then value.  Internationalised domain
 * names are not converted.  A field that is not an absolute URL with an
 * authority is a per-record error (DEDUP_ERR_INVALID_ARG).
 *
 * Limits: at most DEDUP_KEY_MAX_FIELD for a field number, DEDUP_KEY_MAX_ITEMS
 * items in a selection.
 *
 * Thread-safety: a dedup_key is read-only after dedup_key_create and may be
 * applied from several threads at once, each with its own output buffer.
 */
#ifndef DEDUP_KEY_H
#define DEDUP_KEY_H

#include "dedup/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEDUP_KEY_MAX_FIELD 1000000u /* largest field number */
#define DEDUP_KEY_MAX_ITEMS 1024u    /* items (numbers, ranges, names) in a selection */

typedef enum dedup_key_format {
    DEDUP_KEY_PLAIN = 0, /* delimiter-separated fields */
    DEDUP_KEY_CSV = 1,   /* RFC 4180 records */
    DEDUP_KEY_JSON = 2   /* JSON Lines: one JSON text per record */
} dedup_key_format;

typedef struct dedup_key_params {
    dedup_key_format format;
    /* Field selection, as cut -f: comma-separated items, each a field number
     * (1-based), a range "N-M", an open range "N-", or a column name looked
     * up in the header (plain and CSV).  NULL or "": the whole record. */
    const char *fields;
    int delim;               /* the delimiter byte; -1: TAB for plain, ',' for CSV */
    const char *json_paths;  /* DEDUP_KEY_JSON: ".a.b,.items[0]" (required) */
    bool trim, squeeze, fold_case;
    const unsigned char *prefix; /* stripped from the start when present */
    size_t prefix_len;
    bool url;                /* canonical URL */
    const char *url_drop;    /* comma-separated globs of parameter names: '*' any
                                run of bytes, '?' one byte, and the two-byte
                                sequences \, \* \? \\ a literal , * ? \ (any other
                                byte after a backslash is an error); matched
                                against the names in their canonical form;
                                NULL: none */
    bool url_sort_params;
} dedup_key_params;

/* The defaults: plain format, whole record, default delimiter, no
 * normalisation. */
void dedup_key_params_init(dedup_key_params *p);

typedef struct dedup_key dedup_key;

/* Compiles 'p'.  'header' (header_len bytes, without its terminator; may be
 * NULL) is the header record, parsed in p->format, whose field names the
 * selection may use; the first of two equal names is the one found.
 * Errors: DEDUP_ERR_INVALID_ARG (a malformed selection, JSON path or glob,
 * a name with no header, a field number of 0 or past DEDUP_KEY_MAX_FIELD,
 * a delimiter that is '"' or the newline in CSV, JSON with fields, URL
 * drop globs or sorting without url, an empty glob or
 * a '\\' escaping another byte in p->url_drop), with *err_pos (when not
 * NULL) the byte offset of the problem in p->fields (or p->json_paths, or
 * p->url_drop); DEDUP_ERR_NOT_FOUND (a name absent from the header,
 * *err_pos at it); DEDUP_ERR_CORRUPT (a malformed CSV header);
 * DEDUP_ERR_LIMIT (more than DEDUP_KEY_MAX_ITEMS items, or JSON paths past
 * their limits); DEDUP_ERR_NOMEM.
 * *out is NULL on error. */
dedup_status dedup_key_create(const dedup_key_params *p, const unsigned char *header,
                              size_t header_len, const dedup_allocator *alloc, dedup_key **out,
                              size_t *err_pos);

/* Frees 'k'; accepts NULL. */
void dedup_key_free(dedup_key *k);

/* Bytes 'k' holds. */
size_t dedup_key_memory_usage(const dedup_key *k);

/* True when every record's key is the record itself (plain, no fields, no
 * normalisation): callers may skip dedup_key_of. */
bool dedup_key_is_identity(const dedup_key *k);

/* Room in 'out' that always suffices for dedup_key_of on a record of 'len'
 * bytes, except with JSON paths (whose canonical texts may be longer than
 * the record: see DEDUP_ERR_FULL).  Saturates at SIZE_MAX. */
size_t dedup_key_bound(const dedup_key *k, size_t len);

/* The key of rec[0..len) (a record without its terminator).  *key points
 * either into rec or into out (cap bytes); *klen is its length.
 * Per-record errors (the record has no key; the caller decides): 
 * DEDUP_ERR_CORRUPT (malformed CSV, invalid JSON or UTF-8 in JSON),
 * DEDUP_ERR_NOT_FOUND (a JSON path absent), DEDUP_ERR_LIMIT (JSON nested
 * too deep), DEDUP_ERR_INVALID_ARG (a field that is not a URL).
 * DEDUP_ERR_FULL: cap is too small; *klen is the room needed (call again).
 * No allocation. */
dedup_status dedup_key_of(const dedup_key *k, const unsigned char *rec, size_t len,
                          unsigned char *out, size_t cap, const unsigned char **key,
                          size_t *klen);

/* The record at the front of p[0..avail) and its key, in one pass where
 * the key allows it (CSV field lists).  The record ends at the first 'term'
 * (for CSV: outside quotes, as dedup_csv_scan_block finds it), which must
 * lie in p[0..avail) (else the record is taken to be all of it);
 * *rec_len gets its length without the terminator, and the rest is
 * exactly dedup_key_of(k, p, *rec_len, out, cap, key, klen): the same key,
 * statuses and DEDUP_ERR_FULL (*rec_len is set then too).  No
 * allocation. */
dedup_status dedup_key_of_next(const dedup_key *k, const unsigned char *p, size_t avail,
                               unsigned char term, size_t *rec_len, unsigned char *out,
                               size_t cap, const unsigned char **key, size_t *klen);

/* The keys of records [0, n): like dedup_key_of for each, the keys that are
 * not byte ranges of their record written one after another into 'arena'
 * (cap bytes).  st[i] gets record i's status (DEDUP_OK, or a per-record
 * error with key[i] NULL and klen[i] 0).  Returns DEDUP_OK when all n are
 * done; DEDUP_ERR_FULL when the arena filled: *done records are done and
 * *need is the room record *done needs (give a larger arena, or a fresh one,
 * and continue from there).  *used gets the arena bytes used. */
dedup_status dedup_key_batch(const dedup_key *k, size_t n, const unsigned char *const *rec,
                             const size_t *len, unsigned char *arena, size_t cap,
                             const unsigned char **key, size_t *klen, dedup_status *st,
                             size_t *done, size_t *need, size_t *used);

/* Why a record has no key, for messages. */
typedef struct dedup_key_problem {
    const char *what;   /* a short static English text: "a quote left open",
                           "text after a closing quote", "not valid JSON or
                           UTF-8", "a JSON path missing", ... */
    size_t offset;      /* byte offset in the record where the problem was
                           found; SIZE_MAX when it has none */
    size_t spec_off, spec_len; /* a missing JSON path: where it stands in
                           p->json_paths (spec_len 0 otherwise) */
} dedup_key_problem;

/* Explains the per-record error 'st' that dedup_key_of gave for
 * rec[0..len): reads the record again (slower than dedup_key_of; meant for
 * the records that fail).  Never fails; no allocation; thread-safe as
 * dedup_key_of. */
void dedup_key_explain(const dedup_key *k, const unsigned char *rec, size_t len,
                       dedup_status st, dedup_key_problem *pr);

/* ---- CSV records ------------------------------------------------------
 * The record splitter, usable over a stream cut in arbitrary blocks: the
 * state carries over from one call to the next.  Records end at 'term'
 * (normally '\n') outside quotes. */
typedef struct dedup_csv_scan {
    int state;              /* private; zero (dedup_csv_scan_init) at a record's start */
} dedup_csv_scan;

void dedup_csv_scan_init(dedup_csv_scan *s);

/* Scans p[0..len), which continues the stream where the last call stopped.
 * Returns the offset just past the last record terminator in p, or 0 when p
 * ends no record.  With 'all_ends' not NULL, every record end is reported:
 * all_ends[i] is the offset just past the i-th terminator, at most
 * 'ends_cap' of them, *n_ends their count (scanning stops at the cap, and
 * the return value is then the offset of the last one reported; the state
 * is where that one ended).  Never fails: malformed quoting is found by the
 * field splitter. */
size_t dedup_csv_scan_block(dedup_csv_scan *s, const unsigned char *p, size_t len,
                            unsigned char delim, unsigned char term, size_t *all_ends,
                            size_t ends_cap, size_t *n_ends);

/* True when the scan stands at the start of a record (so the stream may end
 * there); false inside an open quote or a record. */
bool dedup_csv_scan_at_start(const dedup_csv_scan *s);

/* One field of a CSV record: for a quoted field, the bytes between its
 * quotes, with doubled quotes still doubled (dedup_csv_unquote). */
typedef struct dedup_csv_field {
    const unsigned char *p;
    size_t len;
    bool quoted;
} dedup_csv_field;

/* The field of rec[0..len) that starts at *pos (0 for the first); *pos
 * moves past its delimiter, or to len + 1 after the last field.  Returns
 * DEDUP_OK; DEDUP_ERR_RANGE when *pos > len (no field left; an empty
 * record has none); DEDUP_ERR_CORRUPT for text after a closing quote or a
 * quote left open.  The record is taken as it is: the caller removes a
 * CRLF's '\r'. */
dedup_status dedup_csv_field_next(const unsigned char *rec, size_t len, unsigned char delim,
                                  size_t *pos, dedup_csv_field *f);

/* Writes f's value (doubled quotes made single) to out (room for f->len
 * bytes) and returns its length. */
size_t dedup_csv_unquote(const dedup_csv_field *f, unsigned char *out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_KEY_H */
