/*
 * nodes.h - the node lists of `dedup split` and `dedup ring`: parsed from
 * --nodes a,b=2,c or --nodes-file FILE (name[=weight] a line), checked, and
 * made into a ring (dedup/ring.h).
 *
 * A node name is 1..255 bytes of printable ASCII other than space, ',',
 * '=', '/' and '%', and not "." or "..": names become parts of file names
 * (-o part-%s.txt) and the DEDUP_NODE variable of filters.  A weight is a
 * positive decimal number (default 1); the node gets round(weight * 160)
 * points, at least one.
 */
#ifndef DEDUP_CLI_NODES_H
#define DEDUP_CLI_NODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/ring.h"

typedef struct dd_nodelist {
    char **names;
    double *weights;
    size_t n, cap;
} dd_nodelist;

/* Appends the nodes of "a,b=2,c".  On a bad entry prints
 * "dedup: CMD: --nodes: ..." naming the entry and returns false. */
bool dd_nodes_parse_list(const char *cmd, const char *opt, const char *list, dd_nodelist *nl);
/* Appends the nodes of FILE: one name[=weight] a line; blank lines and
 * lines starting with '#' are skipped; spaces around name and weight are
 * ignored.  Errors name the file and line. */
bool dd_nodes_parse_file(const char *cmd, const char *path, dd_nodelist *nl);
/* Parses one "name[=weight]" (what 'where' says for messages). */
bool dd_nodes_parse_one(const char *cmd, const char *where, const char *entry, size_t len,
                        dd_nodelist *nl);
/* A ring of the list's nodes (empty names, repeats, weights were checked
 * when parsed; a weight too large for the ring is reported here). */
bool dd_nodes_ring(const char *cmd, const dd_nodelist *nl, dedup_ring **out);
void dd_nodes_free(dd_nodelist *nl);

/* Loads a ring saved by `dedup ring --save` and checks that its names are
 * ones the CLI accepts and that it has a node; messages name the file. */
bool dd_ring_load_checked(const char *cmd, const char *path, dedup_ring **out);

/* Positive decimal weight "2", "0.5", "1e3": false unless finite, > 0 and
 * at least one point at 160 per unit. */
bool dd_nodes_weight(const char *s, double *out);

#endif
