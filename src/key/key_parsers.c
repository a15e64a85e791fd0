/* key_parsers.c - the URL and JSON parsers behind a key spec (see
 * key_parsers.h). */
#include "key_parsers.h"

dedup_status ddi_key_parsers_init(ddi_key_parsers *kp, const dedup_key_params *p,
                                  const dedup_allocator *a, size_t *err_pos)
{
    (void)a;
    (void)err_pos;
    kp->url = p->url;
    kp->url_opts = kp->json = NULL;
    kp->mem = 0;
    if (p->url || p->json_paths || p->url_drop || p->url_sort_params)
        return DEDUP_ERR_UNSUPPORTED;
    return DEDUP_OK;
}

void ddi_key_parsers_free(ddi_key_parsers *kp, const dedup_allocator *a)
{
    (void)kp;
    (void)a;
}

dedup_status ddi_key_url(const ddi_key_parsers *kp, const unsigned char *in, size_t n,
                         unsigned char *out, size_t *olen)
{
    (void)kp, (void)in, (void)n, (void)out, (void)olen;
    return DEDUP_ERR_UNSUPPORTED;
}

dedup_status ddi_key_json(const ddi_key_parsers *kp, const unsigned char *line, size_t n,
                          unsigned char *out, size_t cap, size_t *olen)
{
    (void)kp, (void)line, (void)n, (void)out, (void)cap, (void)olen;
    return DEDUP_ERR_UNSUPPORTED;
}
