/*
 * fuzz_window_load.c - dedup_window_load() on arbitrary bytes.
 *
 * Whatever the input, loading must either fail cleanly or give a window
 * that can be used: it takes more records (with times derived from the
 * input), its stats stay consistent, and it saves to exactly
 * dedup_window_serialized_size() bytes that load again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/window.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dedup_mem_source ms;
    dedup_window *w = NULL;
    if (dedup_window_load(dedup_mem_source_init(&ms, data, size), NULL, &w) != DEDUP_OK) {
        if (w)
            abort(); /* a failed load leaves *out NULL */
        return 0;
    }
    dedup_window_stats st;
    dedup_window_get_stats(w, &st);
    int64_t base = st.has_time ? st.max_time : 0;
    for (size_t i = 0; i < 64; i++) {
        uint64_t key = i < size ? data[i] : i;
        int64_t t = base + (int64_t)(i * 7) - 200;
        if (t > DEDUP_WINDOW_MAX_TIME)
            t = DEDUP_WINDOW_MAX_TIME;
        if (t < DEDUP_WINDOW_MIN_TIME)
            t = DEDUP_WINDOW_MIN_TIME;
        dedup_verdict v;
        dedup_status s = dedup_window_seen(w, dedup_window_digest(w, &key, sizeof key), t, &v);
        if (s != DEDUP_OK && s != DEDUP_ERR_NOMEM)
            abort();
    }
    dedup_window_get_stats(w, &st);
    if (st.live + st.expired != st.kept || st.peak_live < st.live)
        abort();
    uint64_t want = dedup_window_serialized_size(w);
    if (want <= (1u << 22)) {
        unsigned char *buf = malloc(want);
        if (buf) {
            dedup_mem_sink sink_mem;
            dedup_sink sink = dedup_mem_sink_init(&sink_mem, buf, want);
            if (dedup_window_save(w, &sink) != DEDUP_OK || sink_mem.len != want)
                abort();
            dedup_window *back = NULL;
            dedup_mem_source src2;
            if (dedup_window_load(dedup_mem_source_init(&src2, buf, want), NULL, &back) !=
                DEDUP_OK)
                abort();
            dedup_window_free(back);
            free(buf);
        }
    }
    dedup_window_free(w);
    return 0;
}
