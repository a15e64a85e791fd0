/*
 * gen_ring_corpus.c - writes the seeds of the fuzz_ring_load corpus into
 * the directory given (fuzz/corpus/ring_load/): small valid rings (one
 * node, weighted nodes, an empty ring, other points per weight), a
 * truncated and a bit-flipped copy.  Not part of the build; run by hand
 * when the format changes:
 *
 *   cc -std=c11 -Iinclude fuzz/gen_ring_corpus.c build/libdedup.a -lxxhash -llz4 -lm \
 *      -o /tmp/gen && /tmp/gen fuzz/corpus/ring_load
 */
#include "dedup/ring.h"

#include <string.h>

#include "gen_util.h"

static dedup_status save_ring(const void *o, dedup_sink *s) { return dedup_ring_save(o, s); }

static void ring_seed(const char *file, uint32_t ppw, const char *const *names,
                      const double *weights, size_t n, int damage)
{
    dedup_ring_params p;
    dedup_ring_params_init(&p);
    p.points_per_weight = ppw;
    dedup_ring *r = NULL;
    if (dedup_ring_create(&p, NULL, &r) != DEDUP_OK ||
        dedup_ring_add_nodes(r, names, weights, n, NULL) != DEDUP_OK)
        exit(1);
    size_t len;
    unsigned char *b = gen_saved(save_ring, r, (size_t)dedup_ring_serialized_size(r), &len);
    if (damage == 1)
        len -= 5;
    else if (damage == 2)
        b[len / 2] ^= 0x10;
    put(file, b, len);
    free(b);
    dedup_ring_free(r);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_ring_corpus DIR\n");
        return 2;
    }
    gen_dir = argv[1];
    const char *one[] = {"solo"};
    const char *four[] = {"alpha", "beta", "gamma", "delta"};
    const double w4[] = {1, 1, 2, 0.5};
    const char *many[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    ring_seed("one-node", 160, one, NULL, 1, 0);
    ring_seed("weighted", 160, four, w4, 4, 0);
    ring_seed("empty", 160, NULL, NULL, 0, 0);
    ring_seed("ppw-3", 3, many, NULL, 8, 0);
    ring_seed("truncated", 160, four, w4, 4, 1);
    ring_seed("flipped", 160, four, w4, 4, 2);
    return 0;
}
