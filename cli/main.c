/*
 * main.c - dispatch to a subcommand, or run the main job.
 *
 *   dedup [OPTIONS] [FILE...]        line deduplication (cmd_dedup.c)
 *   dedup calc ...                    filter sizing (cmd_calc.c)
 *   dedup filter ACTION FILE ...      filter files (cmd_filter.c)
 *   dedup split ... [FILE...]         partition by key (cmd_split.c)
 *   dedup ring ...                    routing and what a change moves (cmd_ring.c)
 *   dedup store info DIR              a persistent store (cmd_store.c)
 *
 * A file literally named like a subcommand can be given as ./calc.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int main(int argc, char **argv)
{
    /* A closed pipe (dedup ... | head) must end us quietly: ignore SIGPIPE
     * and treat EPIPE on stdout as a normal end in the writer. */
    signal(SIGPIPE, SIG_IGN);
    int rc;
    if (argc > 1 && strcmp(argv[1], "calc") == 0)
        rc = cmd_calc(argc - 1, argv + 1);
    else if (argc > 1 && strcmp(argv[1], "filter") == 0)
        rc = cmd_filter(argc - 1, argv + 1);
    else if (argc > 1 && strcmp(argv[1], "split") == 0)
        rc = cmd_split(argc - 1, argv + 1);
    else if (argc > 1 && strcmp(argv[1], "ring") == 0)
        rc = cmd_ring(argc - 1, argv + 1);
    else if (argc > 1 && strcmp(argv[1], "store") == 0)
        rc = cmd_store(argc - 1, argv + 1);
    else
        rc = cmd_dedup(argc, argv);
    cli_allocator_shutdown();
    return rc;
}
