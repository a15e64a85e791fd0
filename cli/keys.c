/* keys.c - the key options, parsed and compiled into a library key spec
 * (see keys.h). */
#include "keys.h"

#include <stdlib.h>
#include <string.h>

#include "dedup/hash.h"

#include "cli.h"

void dd_keyspec_init(dd_keyspec *k)
{
    memset(k, 0, sizeof *k);
    k->delim = '\t';
}

int dd_key_option(int c, const char *arg, const char *cmd, dd_keyspec *k, unsigned char *term)
{
    const char *pre = cmd ? cmd : "", *sep = cmd ? ": " : "";
    switch (c) {
    case 'f': {
        uint64_t f;
        k->field = 0;
        k->fields = NULL;
        if (cli_parse_count(arg, &f) && f >= 1 && f <= DEDUP_KEY_MAX_FIELD) {
            k->field = (size_t)f;
            return 1;
        }
        /* A list, ranges or names: checked now for its shape (names are
         * looked up once the header is read). */
        dedup_key_params p;
        dedup_key_params_init(&p);
        p.fields = arg;
        dedup_key *t = NULL;
        size_t at = 0;
        static const unsigned char probe[] = "";
        dedup_status st = dedup_key_create(&p, probe, 0, NULL, &t, &at);
        dedup_key_free(t);
        if (!*arg || (st && st != DEDUP_ERR_NOT_FOUND)) {
            cli_error("%s%s-f/--field: '%s' is not a field list (N, N,M, N-M, N- or column "
                      "names; the problem is at '%s')",
                      pre, sep, arg, arg + at);
            return -1;
        }
        k->fields = arg;
        return 1;
    }
    case 'd':
        k->delim_given = true;
        if (strlen(arg) == 1)
            k->delim = (unsigned char)arg[0];
        else if (strcmp(arg, "\\t") == 0)
            k->delim = '\t';
        else if (strcmp(arg, "\\0") == 0)
            k->delim = '\0';
        else {
            cli_error("%s%s-d/--delimiter must be one character (got '%s')", pre, sep, arg);
            return -1;
        }
        return 1;
    case 'i': k->fold_case = true; return 1;
    case DD_KEY_OPT_TRIM: k->trim = true; return 1;
    case DD_KEY_OPT_SQUEEZE: k->squeeze = true; return 1;
    case DD_KEY_OPT_PREFIX:
        k->prefix = arg;
        k->prefix_len = strlen(arg);
        return 1;
    case 'z': *term = '\0'; return 1;
    case DD_KEY_OPT_CSV: k->csv = true; return 1;
    case DD_KEY_OPT_HEADER: k->header = true; return 1;
    case DD_KEY_OPT_JSON: k->json = arg; return 1;
    case DD_KEY_OPT_URL: k->url = true; return 1;
    case DD_KEY_OPT_URL_DROP: k->url_drop = arg; return 1;
    case DD_KEY_OPT_URL_SORT: k->url_sort = true; return 1;
    default: return 0;
    }
}

/* Appends 'label' and 'text' in hex (nothing when either is NULL) at
 * buf[at..] when it fits; returns the length it takes. */
static size_t describe_text(char *buf, size_t cap, size_t at, const char *label, const char *text)
{
    if (!label || !text)
        return 0;
    size_t ll = strlen(label), tl = strlen(text), need = ll + 2 * tl;
    if (at + need < cap) {
        memcpy(buf + at, label, ll);
        for (size_t i = 0; i < tl; i++)
            snprintf(buf + at + ll + 2 * i, 3, "%02x", (unsigned char)text[i]);
        buf[at + need] = '\0';
    } else if (at < cap) {
        buf[at] = '\0';
    }
    return need;
}

size_t dd_keyspec_describe(const dd_keyspec *k, unsigned char term, bool int_keys, char *buf,
                           size_t cap)
{
    /* The prefix is written in hex so that the description stays one
     * printable line whatever bytes the prefix holds. */
    char pre[2 * 256 + 1];
    size_t plen = k->prefix_len < 256 ? k->prefix_len : 256;
    for (size_t i = 0; i < plen; i++)
        snprintf(pre + 2 * i, 3, "%02x", (unsigned char)k->prefix[i]);
    pre[2 * plen] = '\0';
    /* A longer prefix is told apart by its length and a digest of it all. */
    char tail[64] = "";
    if (k->prefix_len > plen) {
        dedup_digest d = dedup_hash(k->prefix, k->prefix_len, DEDUP_DEFAULT_SEED);
        snprintf(tail, sizeof tail, "..%zu:%016llx", k->prefix_len, (unsigned long long)d.lo);
    }
    bool delim = k->field || k->fields || k->csv;
    int n = snprintf(buf, cap, "keys/1 field=%zu delim=%02x term=%02x%s%s%s%s%s%s%s",
                     k->field, delim ? k->delim : 0, term, k->trim ? " trim" : "",
                     k->squeeze ? " squeeze" : "", k->fold_case ? " icase" : "",
                     plen ? " prefix=" : "", pre, tail, int_keys ? " int" : "");
    if (n < 0)
        return 0;
    /* The newer options are appended only when used, so a state made with
     * the options above keeps its description. */
    size_t len = (size_t)n;
    len += describe_text(buf, cap, len, " fields=", k->fields);
    len += describe_text(buf, cap, len, k->csv ? " csv" : NULL, "");
    len += describe_text(buf, cap, len, k->header ? " header" : NULL, "");
    len += describe_text(buf, cap, len, " json=", k->json);
    len += describe_text(buf, cap, len, k->url ? " url" : NULL, "");
    len += describe_text(buf, cap, len, " url-drop=", k->url_drop);
    len += describe_text(buf, cap, len, k->url_sort ? " url-sort" : NULL, "");
    return len;
}

bool dd_keyspec_identity(const dd_keyspec *k)
{
    return k->field == 0 && !k->fields && !k->csv && !k->json && !k->url && !k->header &&
           !k->trim && !k->squeeze && !k->fold_case && k->prefix_len == 0;
}

bool dd_keyspec_check(dd_keyspec *k, const char *cmd)
{
    const char *pre = cmd ? cmd : "", *sep = cmd ? ": " : "";
    if (k->json && (k->csv || k->field || k->fields || k->header)) {
        cli_error("%s%s--json takes its fields as paths: no -f, --csv or --header with it", pre,
                  sep);
        return false;
    }
    if ((k->url_drop || k->url_sort) && !k->url) {
        cli_error("%s%s--url-drop-params and --url-sort-params need --url", pre, sep);
        return false;
    }
    if (k->url_drop) { /* the glob list alone, so that the place named is in it */
        dedup_key_params p;
        dedup_key_params_init(&p);
        p.url = true;
        p.url_drop = k->url_drop;
        dedup_key *t = NULL;
        size_t at = 0;
        dedup_status st = dedup_key_create(&p, NULL, 0, NULL, &t, &at);
        dedup_key_free(t);
        if (st == DEDUP_ERR_INVALID_ARG) {
            cli_error("%s%s--url-drop-params: '%s' is not a list of globs (the problem is at "
                      "'%s': globs are separated by ',' and none is empty; write a literal "
                      "',', '*', '?' or '\\' as '\\,', '\\*', '\\?' or '\\\\')",
                      pre, sep, k->url_drop, k->url_drop + (at <= strlen(k->url_drop) ? at : 0));
            return false;
        }
    }
    if (k->csv && k->delim_given && (k->delim == '"' || k->delim == '\n' || k->delim == '\r')) {
        cli_error("%s%s--csv cannot take '\"', \\n or \\r as its delimiter", pre, sep);
        return false;
    }
    if (k->csv && !k->delim_given)
        k->delim = ',';
    return true;
}

bool dd_keyspec_compile(dd_keyspec *k, const unsigned char *hdr, size_t hlen, const char *file)
{
    dedup_key_params p;
    dedup_key_params_init(&p);
    p.format = k->json ? DEDUP_KEY_JSON : k->csv ? DEDUP_KEY_CSV : DEDUP_KEY_PLAIN;
    char num[24];
    if (k->field) {
        snprintf(num, sizeof num, "%zu", k->field);
        p.fields = num;
    } else {
        p.fields = k->fields;
    }
    p.delim = k->delim;
    p.json_paths = k->json;
    p.trim = k->trim;
    p.squeeze = k->squeeze;
    p.fold_case = k->fold_case;
    p.prefix = (const unsigned char *)k->prefix;
    p.prefix_len = k->prefix_len;
    p.url = k->url;
    p.url_drop = k->url_drop;
    p.url_sort_params = k->url_sort;
    size_t at = 0;
    dedup_status st = dedup_key_create(&p, hdr, hlen, NULL, &k->compiled, &at);
    if (st == DEDUP_OK)
        return true;
    const char *spec = k->json ? k->json : p.fields ? p.fields : "";
    size_t sl = strlen(spec);
    const char *rest = at <= sl ? spec + at : "";
    const char *end = strchr(rest, ',');
    int nl = end ? (int)(end - rest) : (int)strlen(rest);
    if (st == DEDUP_ERR_NOT_FOUND)
        cli_error("%s: the header has no column '%.*s' (-f %s)", file, nl, rest, spec);
    else if (st == DEDUP_ERR_CORRUPT)
        cli_error("%s: line 1: the header is not well-formed CSV", file);
    else if (st == DEDUP_ERR_INVALID_ARG && k->json)
        cli_error("--json: '%s' is not a list of paths (the problem is at '%s')", spec, rest);
    else if (st == DEDUP_ERR_INVALID_ARG && !hdr && k->fields)
        cli_error("-f %s: column '%.*s' is a name, which needs --header", spec, nl, rest);
    else if (st == DEDUP_ERR_INVALID_ARG && k->url_drop)
        cli_error("--url-drop-params: '%s' is not a list of globs", k->url_drop);
    else if (st == DEDUP_ERR_LIMIT)
        cli_error("%s: too many fields or paths (the problem is at '%s')", spec, rest);
    else
        cli_error("key options: %s", dedup_strerror(st));
    return false;
}

bool dd_time_key_compile(const dd_keyspec *k, const char *spec, const unsigned char *hdr,
                         size_t hlen, const char *file, dedup_key **out)
{
    dedup_key_params p;
    dedup_key_params_init(&p);
    p.format = k->json ? DEDUP_KEY_JSON : k->csv ? DEDUP_KEY_CSV : DEDUP_KEY_PLAIN;
    p.delim = k->delim;
    if (k->json)
        p.json_paths = spec;
    else
        p.fields = spec;
    dedup_status st = dedup_key_create(&p, hdr, hlen, NULL, out, NULL);
    if (st == DEDUP_OK)
        return true;
    if (st == DEDUP_ERR_NOT_FOUND)
        cli_error("%s: the header has no column '%s' (--time-field)", file, spec);
    else
        cli_error("--time-field %s: %s", spec,
                  k->json ? "not a JSON path" : "not a field number or column name");
    return false;
}

void dd_keyspec_release(dd_keyspec *k)
{
    dedup_key_free(k->compiled);
    k->compiled = NULL;
}

const unsigned char *dd_key_of(const dd_keyspec *k, const unsigned char *rec, size_t len,
                               unsigned char *scratch, size_t *klen)
{
    const unsigned char *key = rec;
    *klen = len;
    /* A simple spec's key never needs more than 'len' bytes: no error. */
    (void)dedup_key_of(k->compiled, rec, len, scratch, len, &key, klen);
    return key;
}

dedup_status dd_key_get(const dd_keyspec *k, const unsigned char *rec, size_t len,
                        unsigned char **scratch, size_t *cap, const unsigned char **key,
                        size_t *klen)
{
    for (;;) {
        dedup_status st = dedup_key_of(k->compiled, rec, len, *scratch, *cap, key, klen);
        if (st != DEDUP_ERR_FULL)
            return st;
        size_t nc = *klen > *cap * 2 ? *klen : *cap * 2 + 64;
        unsigned char *nb = realloc(*scratch, nc);
        if (!nb)
            return DEDUP_ERR_NOMEM;
        *scratch = nb;
        *cap = nc;
    }
}

const char *dd_key_error_text(const dd_keyspec *k, dedup_status st)
{
    switch (st) {
    case DEDUP_ERR_CORRUPT:
        return k->json ? "not valid JSON (or invalid UTF-8)"
                       : "malformed CSV (text after a closing quote, or a quote left open)";
    case DEDUP_ERR_NOT_FOUND: return "a --json path is missing";
    case DEDUP_ERR_LIMIT: return "JSON nested too deep";
    case DEDUP_ERR_INVALID_ARG: return "not an absolute URL";
    default: return dedup_strerror(st);
    }
}

const char *dd_key_bad_reason(const dd_keyspec *k)
{
    if (k->json)
        return k->url ? "invalid JSON, a path missing or not a URL"
                      : "invalid JSON or a path missing";
    if (k->csv)
        return k->url ? "malformed CSV or not a URL" : "malformed CSV";
    return "not a URL";
}

const char *dd_key_problem_text(const dd_keyspec *k, const unsigned char *rec, size_t len,
                                dedup_status st, char *buf, size_t cap)
{
    dedup_key_problem pr;
    dedup_key_explain(k->compiled, rec, len, st, &pr);
    if (pr.spec_len && k->json && pr.spec_off + pr.spec_len <= strlen(k->json))
        snprintf(buf, cap, "the --json path '%.*s' is missing", (int)pr.spec_len,
                 k->json + pr.spec_off);
    else if (pr.offset != SIZE_MAX && k->json)
        snprintf(buf, cap, "%s at byte %zu", pr.what, pr.offset + 1);
    else if (pr.offset != SIZE_MAX)
        snprintf(buf, cap, "malformed CSV: %s at byte %zu", pr.what, pr.offset + 1);
    else if (st == DEDUP_ERR_CORRUPT || st == DEDUP_ERR_INVALID_ARG || st == DEDUP_ERR_LIMIT ||
             st == DEDUP_ERR_NOT_FOUND)
        snprintf(buf, cap, "%s", k->json || st != DEDUP_ERR_CORRUPT ? pr.what
                                                                     : dd_key_error_text(k, st));
    else
        snprintf(buf, cap, "%s", dd_key_error_text(k, st));
    return buf;
}
