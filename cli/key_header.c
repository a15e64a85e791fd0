/* key_header.c - --header and keyless records for split and count (see
 * key_header.h). */
#include "key_header.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "intkeys.h" /* dd_key_for_message */

static uint64_t lines_of(const unsigned char *p, size_t n, unsigned char term)
{
    uint64_t l = 1;
    for (const unsigned char *e = p + n; (p = memchr(p, term, (size_t)(e - p))) != NULL; p++)
        l++;
    return l;
}

const dedup_key *dd_key_header_cb(void *ctx, const unsigned char *rec, size_t len)
{
    dd_key_header *h = ctx;
    h->lines = h->key->csv ? lines_of(rec, len, '\n') : 1;
    if (!h->seen) {
        h->seen = true;
        h->hdr = malloc(len ? len : 1);
        if (!h->hdr) {
            cli_error("%s%sout of memory", h->cmd ? h->cmd : "", h->cmd ? ": " : "");
            h->failed = true;
            return NULL;
        }
        memcpy(h->hdr, rec, len);
        h->len = len;
        h->first = h->file;
        if (!dd_keyspec_compile(h->key, rec, len, h->file)) {
            h->failed = true;
            return NULL;
        }
        return h->key->compiled;
    }
    if (len != h->len || memcmp(rec, h->hdr, len) != 0) {
        cli_error("%s%s%s: its header (line 1) differs from %s's", h->cmd ? h->cmd : "",
                  h->cmd ? ": " : "", h->file, h->first);
        h->failed = true;
        return NULL;
    }
    return h->key->compiled;
}

bool dd_key_header_block_ok(dd_key_header *h, const dd_block *b, unsigned char term)
{
    return dd_key_header_filter(h, b, term, false, NULL) == b->n;
}

size_t dd_key_header_filter(dd_key_header *h, const dd_block *b, unsigned char term, bool skip,
                            size_t *good)
{
    size_t m = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (!b->key[i] && !skip) {
            char val[80], why[160];
            dd_key_for_message(b->rec[i], b->rlen[i], val, sizeof val);
            cli_error("%s%s%s:%llu: %s: '%s'%s", h->cmd ? h->cmd : "", h->cmd ? ": " : "",
                      h->file, (unsigned long long)(h->lines + 1),
                      dd_key_problem_text(h->key, b->rec[i], b->rlen[i], (dedup_status)b->klen[i],
                                          why, sizeof why),
                      val,
                      " (--on-bad-key skip or keep lets the run go on)");
            return SIZE_MAX;
        }
        h->lines += h->key->csv ? lines_of(b->rec[i], b->rlen[i], term) : 1;
        if (!b->key[i]) {
            h->skipped++;
            continue;
        }
        if (good)
            good[m] = i;
        m++;
    }
    return m;
}

void dd_key_header_free(dd_key_header *h)
{
    free(h->hdr);
    h->hdr = NULL;
}


void dd_keyed_free(dd_keyed_block *k)
{
    free(k->good);
    free(k->b.dig); /* the arrays' one allocation starts with the digests */
}

/* blk itself when every record has a key; else its keyed records in *k's
 * arrays; NULL after an error (a record without a key and no skip: named
 * by key_header.c; or no memory). */
const dd_block *dd_keyed_only(dd_keyed_block *k, dd_key_header *kh, const dd_block *blk,
                                  unsigned char term, bool skip)
{
    if (blk->piece)
        return blk;
    if (k->cap < blk->n) {
        dd_keyed_free(k);
        size_t c = blk->n;
        k->good = malloc(c * sizeof *k->good);
        unsigned char *a = malloc(c * (2 * sizeof(void *) + 2 * sizeof(size_t) + sizeof(dedup_digest)));
        if (!k->good || !a) {
            free(a);
            free(k->good);
            k->good = NULL;
            k->b.dig = NULL;
            k->cap = 0;
            k->nomem = true;
            return NULL;
        }
        k->cap = c;
        k->b.dig = (dedup_digest *)(void *)a;
        k->b.rec = (const unsigned char **)(void *)(a + c * sizeof(dedup_digest));
        k->b.key = k->b.rec + c;
        k->b.rlen = (size_t *)(void *)(k->b.key + c);
        k->b.klen = k->b.rlen + c;
    }
    size_t m = dd_key_header_filter(kh, blk, term, skip, k->good);
    if (m == SIZE_MAX)
        return NULL;
    if (m == blk->n)
        return blk;
    for (size_t j = 0; j < m; j++) {
        size_t i = k->good[j];
        k->b.rec[j] = blk->rec[i];
        k->b.rlen[j] = blk->rlen[i];
        k->b.key[j] = blk->key[i];
        k->b.klen[j] = blk->klen[i];
        k->b.dig[j] = blk->dig[i];
    }
    k->b.n = m;
    k->b.piece = 0;
    k->b.bytes_read = blk->bytes_read;
    return &k->b;
}

