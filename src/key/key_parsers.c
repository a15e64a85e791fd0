/* key_parsers.c - the URL and JSON parsers behind a key spec (see
 * key_parsers.h): the spec's strings turned into their options once. */
#include "key_parsers.h"

#include <string.h>

#include "internal.h"
#include "json.h"
#include "url.h"

/* The URL options and the storage of their globs, one allocation. */
typedef struct url_box {
    dd_url_opts o;
    const char **globs;
    char *text; /* the glob list, its commas made NULs */
} url_box;

/* The glob list 'list' split at its unescaped commas into globs[] (n of
 * them, each NUL-terminated in text): the pair \, becomes a comma, while
 * \* \? and \\ stay escaped for the matcher (url.h).  False with *err_pos
 * at an empty glob, or at a backslash followed by any other byte. */
static bool split_globs(const char *list, char *text, const char **globs, size_t *n,
                        size_t *err_pos)
{
    size_t k = 0, w = 0, start = 0;
    globs[0] = text;
    for (size_t i = 0;; i++) {
        char c = list[i];
        if (c == ',' || c == '\0') {
            if (i == start) {
                *err_pos = i;
                return false; /* an empty glob */
            }
            text[w++] = '\0';
            k++;
            if (c == '\0')
                break;
            globs[k] = text + w;
            start = i + 1;
            continue;
        }
        if (c == '\\') {
            char e = list[i + 1];
            if (e != ',' && e != '*' && e != '?' && e != '\\') {
                *err_pos = i;
                return false;
            }
            if (e != ',')
                text[w++] = '\\';
            text[w++] = e;
            i++;
            continue;
        }
        text[w++] = c;
    }
    *n = k;
    return true;
}

static dedup_status url_init(ddi_key_parsers *kp, const dedup_key_params *p,
                             const dedup_allocator *a, size_t *err_pos)
{
    size_t tl = p->url_drop ? strlen(p->url_drop) : 0, n = 0;
    if (p->url_drop) {
        n = 1;
        for (size_t i = 0; i < tl; i++)
            n += p->url_drop[i] == ',';
    }
    size_t size = sizeof(url_box) + n * sizeof(char *) + tl + 1;
    url_box *b = ddi_calloc(a, 1, size);
    if (!b)
        return DEDUP_ERR_NOMEM;
    b->globs = (const char **)(void *)(b + 1);
    b->text = (char *)(b->globs + n);
    if (p->url_drop && !split_globs(p->url_drop, b->text, b->globs, &n, err_pos)) {
        ddi_free(a, b);
        return DEDUP_ERR_INVALID_ARG;
    }
    b->o.drop = b->globs;
    b->o.n_drop = n;
    b->o.sort_params = p->url_sort_params;
    dd_url_opts_prepare(&b->o);
    kp->url_opts = b;
    kp->mem += size;
    return DEDUP_OK;
}

dedup_status ddi_key_parsers_init(ddi_key_parsers *kp, const dedup_key_params *p,
                                  const dedup_allocator *a, size_t *err_pos)
{
    kp->url = p->url;
    kp->url_opts = kp->json = NULL;
    kp->mem = 0;
    if ((p->url_drop || p->url_sort_params) && !p->url)
        return DEDUP_ERR_INVALID_ARG;
    if (p->url) {
        dedup_status st = url_init(kp, p, a, err_pos);
        if (st)
            return st;
    }
    if (p->json_paths) {
        dd_json_paths *j = NULL;
        dedup_status st = dd_json_paths_compile(p->json_paths, a, &j, err_pos);
        if (st) {
            ddi_key_parsers_free(kp, a);
            return st;
        }
        kp->json = j;
        kp->mem += 64 + strlen(p->json_paths) * 2; /* the compiled paths, about */
    }
    return DEDUP_OK;
}

void ddi_key_parsers_free(ddi_key_parsers *kp, const dedup_allocator *a)
{
    ddi_free(a, kp->url_opts);
    dd_json_paths_free(kp->json);
    kp->url_opts = kp->json = NULL;
}

dedup_status ddi_key_url(const ddi_key_parsers *kp, const unsigned char *in, size_t n,
                         unsigned char *out, size_t *olen)
{
    const url_box *b = kp->url_opts;
    return dd_url_canon(&b->o, in, n, out, olen);
}

dedup_status ddi_key_json(const ddi_key_parsers *kp, const unsigned char *line, size_t n,
                          unsigned char *out, size_t cap, size_t *olen)
{
    size_t bad_path = 0, bad_pos = 0;
    return dd_json_extract(kp->json, line, n, out, cap, olen, &bad_path, &bad_pos);
}

dedup_status ddi_key_json_explain(const ddi_key_parsers *kp, const unsigned char *line, size_t n,
                                  size_t *pos, size_t *span_off, size_t *span_len)
{
    unsigned char one[1];
    size_t olen = 0, bad_path = SIZE_MAX, bad_pos = SIZE_MAX;
    *pos = SIZE_MAX;
    *span_off = *span_len = 0;
    /* errors come before the room: an empty buffer tells them */
    dedup_status st = dd_json_extract(kp->json, line, n, one, 0, &olen, &bad_path, &bad_pos);
    if (st == DEDUP_ERR_CORRUPT || st == DEDUP_ERR_LIMIT)
        *pos = bad_pos;
    if (st == DEDUP_ERR_NOT_FOUND && !dd_json_path_span(kp->json, bad_path, span_off, span_len))
        *span_off = *span_len = 0;
    return st;
}
