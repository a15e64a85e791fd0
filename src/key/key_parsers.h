/*
 * key_parsers.h - the key spec's view of the URL canonicaliser (url.h) and
 * the JSON path extractor (json.h); not public API.
 */
#ifndef DEDUP_KEY_PARSERS_H
#define DEDUP_KEY_PARSERS_H

#include "dedup/key.h"

typedef struct ddi_key_parsers {
    bool url;      /* canonical URLs asked */
    void *url_opts; /* the compiled URL options, or NULL */
    void *json;    /* the compiled JSON paths, or NULL */
    size_t mem;    /* bytes held */
} ddi_key_parsers;

/* Compiles p's URL options and JSON paths.  DEDUP_ERR_INVALID_ARG with
 * *err_pos in p->json_paths; DEDUP_ERR_UNSUPPORTED when a parser is not
 * built in; DEDUP_ERR_NOMEM. */
dedup_status ddi_key_parsers_init(ddi_key_parsers *kp, const dedup_key_params *p,
                                  const dedup_allocator *a, size_t *err_pos);
void ddi_key_parsers_free(ddi_key_parsers *kp, const dedup_allocator *a);

/* The canonical URL of in[0..n) into out (n + 1 bytes). */
dedup_status ddi_key_url(const ddi_key_parsers *kp, const unsigned char *in, size_t n,
                         unsigned char *out, size_t *olen);

/* The framed canonical values of the JSON paths of line[0..n) into out
 * (cap bytes); DEDUP_ERR_FULL with *olen the room needed. */
dedup_status ddi_key_json(const ddi_key_parsers *kp, const unsigned char *line, size_t n,
                          unsigned char *out, size_t cap, size_t *olen);

/* Why line[0..n) has no JSON key: the status dd_json_extract gives, with
 * *pos the byte of the problem (SIZE_MAX when none is known) and, for a
 * missing path, its place in the spec (*span_len 0 otherwise). */
dedup_status ddi_key_json_explain(const ddi_key_parsers *kp, const unsigned char *line, size_t n,
                                  size_t *pos, size_t *span_off, size_t *span_len);

#endif
