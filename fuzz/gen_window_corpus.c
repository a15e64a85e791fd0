/*
 * gen_window_corpus.c - writes the approximate-window seeds of the
 * fuzz_window_load corpus into the directory given
 * (fuzz/corpus/window_load/): small valid sliding, tumbling and last-N
 * windows, one whose table overflowed into the stash, a bit-flipped
 * copy, and windows with refresh on duplicate (exact and approximate).  (The exact-window seeds and approx_old_layout, a file of the
 * Bloom-generation layout that loaders now refuse, are kept as they are.)
 * Not part of the build; run by hand when the format changes:
 *
 *   cc -std=c11 -Iinclude fuzz/gen_window_corpus.c build/libdedup.a -lxxhash -lm \
 *      -o /tmp/gen && /tmp/gen fuzz/corpus/window_load
 */
#include "dedup/window.h"

#include <string.h>

#include "gen_util.h"

static dedup_status save_window(const void *o, dedup_sink *s) { return dedup_window_save(o, s); }

/* A window of 'type' fed 'n' records of keys below 'keys', one time unit
 * apart with some disorder, saved. */
static unsigned char *window_mode_bytes(dedup_window_mode mode, bool refresh,
                                        dedup_window_type type, uint64_t duration,
                                        uint64_t lateness, uint32_t gens, uint64_t capacity,
                                        size_t n, uint64_t keys, size_t *len)
{
    dedup_window_params p;
    dedup_window_params_init(&p);
    p.type = type;
    p.mode = mode;
    p.refresh = refresh;
    p.duration = duration;
    p.lateness = lateness;
    p.generations = gens;
    p.capacity = capacity;
    dedup_window *w = NULL;
    if (dedup_window_create(&p, NULL, &w) != DEDUP_OK)
        exit(1);
    uint64_t x = 7;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        uint64_t key = (x >> 33) % keys;
        int64_t t = (int64_t)i - (int64_t)((x >> 20) % (lateness + 1));
        dedup_verdict v;
        if (dedup_window_seen(w, dedup_window_digest(w, &key, sizeof key), t, &v) != DEDUP_OK)
            exit(1);
    }
    unsigned char *buf = gen_saved(save_window, w, (size_t)dedup_window_serialized_size(w), len);
    dedup_window_free(w);
    return buf;
}

static unsigned char *window_bytes(dedup_window_type type, uint64_t duration, uint64_t lateness,
                                   uint32_t gens, uint64_t capacity, size_t n, uint64_t keys,
                                   size_t *len)
{
    return window_mode_bytes(DEDUP_WINDOW_APPROX, false, type, duration, lateness, gens, capacity,
                             n, keys, len);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    gen_dir = argv[1];
    size_t len;
    unsigned char *b = window_bytes(DEDUP_WINDOW_SLIDING, 100, 20, 0, 30, 300, 60, &len);
    put("approx_sliding", b, len);
    b[len / 2] ^= 0x10; /* fails the checksum (or earlier) */
    put("approx_sliding_flipped", b, len);
    free(b);
    b = window_bytes(DEDUP_WINDOW_TUMBLING, 50, 10, 0, 20, 200, 40, &len);
    put("approx_tumbling", b, len);
    free(b);
    b = window_bytes(DEDUP_WINDOW_COUNT, 40, 0, 3, 30, 150, 50, &len);
    put("approx_last_n", b, len);
    free(b);
    b = window_bytes(DEDUP_WINDOW_SLIDING, 100, 0, 0, 5, 300, 1000, &len); /* 20x overload */
    put("approx_stash", b, len);
    free(b);
    /* Refresh on duplicate (the options word of the params): keys back
     * within the window, so entries moved to newer generations. */
    b = window_mode_bytes(DEDUP_WINDOW_APPROX, true, DEDUP_WINDOW_SLIDING, 100, 20, 0, 30, 300, 40,
                          &len);
    put("approx_refresh", b, len);
    free(b);
    b = window_mode_bytes(DEDUP_WINDOW_APPROX, true, DEDUP_WINDOW_COUNT, 40, 0, 3, 5, 200, 300,
                          &len); /* overloaded: renewed entries in the stash */
    put("approx_refresh_last_n", b, len);
    free(b);
    b = window_mode_bytes(DEDUP_WINDOW_EXACT, true, DEDUP_WINDOW_SLIDING, 100, 20, 4, 0, 300, 40,
                          &len);
    put("exact_refresh", b, len);
    free(b);
    return 0;
}
