/*
 * progress.h - the progress line on stderr shared by the main job's engines:
 * bytes read, records, records per second and, when the input's size is
 * known (regular files only), the percent done and the time left.
 */
#ifndef DEDUP_CLI_PROGRESS_H
#define DEDUP_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct dd_progress {
    bool on;
    double start, last;
    uint64_t total_bytes; /* 0 = unknown */
} dd_progress;

/* Seconds on a monotonic clock. */
double dd_now(void);
/* Starts the clock; 'on' says whether anything is printed. */
void dd_progress_init(dd_progress *p, bool on, uint64_t total_bytes);
/* Redraws the line at most four times a second ('final': now, and ends it
 * with a newline).  'phase', if not NULL, follows the figures (e.g. "merging"). */
void dd_progress_show(dd_progress *p, uint64_t bytes, uint64_t records, bool final,
                      const char *phase);

#endif
