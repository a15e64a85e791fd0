/* progress.c - see progress.h. */
#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include <stdio.h>
#include <time.h>

#include "cli.h"

double dd_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void dd_progress_init(dd_progress *p, bool on, uint64_t total_bytes)
{
    p->on = on;
    p->start = p->last = dd_now();
    p->total_bytes = total_bytes;
}

void dd_progress_show(dd_progress *p, uint64_t bytes, uint64_t records, bool final,
                      const char *phase)
{
    if (!p->on)
        return;
    double t = dd_now();
    if (!final && t - p->last < 0.25)
        return;
    p->last = t;
    double el = t - p->start;
    char hb[32];
    fprintf(stderr, "\rdedup: %s, %llu records, %.1fM records/s", cli_human_size(bytes, hb, sizeof hb),
            (unsigned long long)records, el > 0 ? (double)records / el / 1e6 : 0.0);
    if (p->total_bytes && bytes <= p->total_bytes) {
        double frac = (double)bytes / (double)p->total_bytes;
        fprintf(stderr, ", %3.0f%%", frac * 100);
        if (frac > 0.01 && !final && !phase) {
            double eta = el / frac - el;
            fprintf(stderr, ", ETA %d:%02d", (int)eta / 60, (int)eta % 60);
        }
    }
    if (phase)
        fprintf(stderr, ", %s", phase);
    fputs("   ", stderr);
    if (final)
        fputc('\n', stderr);
}
