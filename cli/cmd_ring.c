/*
 * cmd_ring.c - `dedup ring`: show a ring's nodes and shares, and what a
 * change of nodes moves, before moving anything.
 *
 *   dedup ring --nodes a,b,c                    shares of a, b, c
 *   dedup ring --nodes a,b,c --add d            the fraction of keys that move
 *   dedup ring --nodes a,b,c --remove b --ranges   and the ranges themselves
 *   dedup ring -N 8 --add 2                     jump hash: 8 -> 10 shards
 *   dedup ring --nodes a,b --save ring.ddp      a ring file for 'split --ring'
 *
 * The numbers come from the library (dedup_ring_node_share,
 * dedup_ring_diff): exactly what `dedup split` routes, not a simulation.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "dedup/ring.h"
#include "nodes.h"

#define CMD "ring"

static const char ring_help[] =
"Usage: dedup ring (-N COUNT | --nodes LIST | --nodes-file FILE | --ring FILE)\n"
"                  [--add NODE[=WEIGHT]]... [--remove NODE]... [OPTION]...\n"
"Show how keys are routed to nodes, and what a change of nodes moves.\n"
"\n"
"  -N, --shards=COUNT     numbered shards (jump hash, as 'dedup split -N')\n"
"      --nodes=LIST       named nodes name[=weight],... (as 'dedup split --nodes')\n"
"      --nodes-file=FILE  one name[=weight] a line\n"
"      --ring=FILE        a ring saved with --save\n"
"      --add=NODE[=W]     the change: add a node (with -N: add COUNT shards)\n"
"      --remove=NODE      the change: remove a node (with -N: remove the last\n"
"                         COUNT shards)\n"
"      --ranges           list every range of positions that changes owner\n"
"                         (first and last position in hex, from, to)\n"
"      --owner=KEY        print the node KEY goes to (after the change, if any);\n"
"                         KEY is the key as 'dedup split' computes it\n"
"      --save=FILE        write the ring (after the change) to FILE, atomically\n"
"      --json             one JSON object instead of text\n"
"  -h, --help             show this help and exit\n"
"\n"
"Without a change it prints each node's weight, points and share of the keys;\n"
"with one, the fraction of keys that move and from which node to which.\n"
"Example: dedup ring --nodes a,b,c --add d\n";

enum { OPT_NODES = 256, OPT_NODES_FILE, OPT_RING, OPT_ADD, OPT_REMOVE, OPT_RANGES, OPT_OWNER,
       OPT_SAVE, OPT_JSON };

static const struct option long_opts[] = {
    {"shards", required_argument, NULL, 'N'},
    {"nodes", required_argument, NULL, OPT_NODES},
    {"nodes-file", required_argument, NULL, OPT_NODES_FILE},
    {"ring", required_argument, NULL, OPT_RING},
    {"add", required_argument, NULL, OPT_ADD},
    {"remove", required_argument, NULL, OPT_REMOVE},
    {"ranges", no_argument, NULL, OPT_RANGES},
    {"owner", required_argument, NULL, OPT_OWNER},
    {"save", required_argument, NULL, OPT_SAVE},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct ring_opts {
    uint64_t shards;
    bool named;
    dd_nodelist nodes, add;
    const char **remove;
    size_t nremove;
    const char *ring_file, *save, *owner;
    bool ranges, json;
} ring_opts;

/* Flow between two nodes, summed over ranges. */
typedef struct flow {
    uint32_t from, to;
    double frac;
} flow;

typedef struct diff_out {
    const dedup_ring *a, *b;
    bool ranges, json;
    size_t nranges;
    flow *flows;
    size_t nflows, cap;
    bool nomem;
} diff_out;

static int on_range(void *ctx, const dedup_ring_range *r)
{
    diff_out *d = ctx;
    double len = ((double)(r->last - r->first) + 1) / 18446744073709551616.0;
    const char *from = dedup_ring_node_name(d->a, r->from), *to = dedup_ring_node_name(d->b, r->to);
    if (d->ranges) {
        if (d->json) {
            fprintf(stdout, "%s{\"first\":\"%016" PRIx64 "\",\"last\":\"%016" PRIx64 "\",\"from\":",
                    d->nranges ? "," : "", r->first, r->last);
            cli_json_string(stdout, from ? from : "");
            fputs(",\"to\":", stdout);
            cli_json_string(stdout, to ? to : "");
            fputc('}', stdout);
        } else {
            printf("%016" PRIx64 " %016" PRIx64 " %s %s\n", r->first, r->last, from ? from : "-",
                   to ? to : "-");
        }
    }
    d->nranges++;
    for (size_t i = 0; i < d->nflows; i++)
        if (d->flows[i].from == r->from && d->flows[i].to == r->to) {
            d->flows[i].frac += len;
            return 0;
        }
    if (d->nflows == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 16;
        flow *f = realloc(d->flows, cap * sizeof *f);
        if (!f) {
            d->nomem = true;
            return 1;
        }
        d->flows = f;
        d->cap = cap;
    }
    d->flows[d->nflows++] = (flow){r->from, r->to, len};
    return 0;
}

static int parse_args(int argc, char **argv, ring_opts *o)
{
    memset(o, 0, sizeof *o);
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":N:h", long_opts, NULL)) != -1) {
        switch (c) {
        case 'N':
            if (!arg_uint(CMD, "-N/--shards", optarg, 1, DEDUP_RING_MAX_NODES, &o->shards))
                return CLI_EXIT_USAGE;
            break;
        case OPT_NODES:
            o->named = true;
            if (!dd_nodes_parse_list(CMD, "--nodes", optarg, &o->nodes))
                return CLI_EXIT_USAGE;
            break;
        case OPT_NODES_FILE:
            o->named = true;
            if (!dd_nodes_parse_file(CMD, optarg, &o->nodes))
                return CLI_EXIT_USAGE;
            break;
        case OPT_RING: o->ring_file = optarg; break;
        case OPT_ADD:
            if (!dd_nodes_parse_one(CMD, "--add", optarg, strlen(optarg), &o->add))
                return CLI_EXIT_USAGE;
            break;
        case OPT_REMOVE: {
            const char **r = realloc(o->remove, (o->nremove + 1) * sizeof *r);
            if (!r) {
                cli_error("%s: out of memory", CMD);
                return CLI_EXIT_FAIL;
            }
            o->remove = r;
            o->remove[o->nremove++] = optarg;
            break;
        }
        case OPT_RANGES: o->ranges = true; break;
        case OPT_OWNER: o->owner = optarg; break;
        case OPT_SAVE: o->save = optarg; break;
        case OPT_JSON: o->json = true; break;
        case 'h': fputs(ring_help, stdout); return -1;
        default:
            arg_bad_option(CMD, c, argv, "dedup ring");
            return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_error("%s: unexpected argument '%s' (see 'dedup ring --help')", CMD, argv[optind]);
        return CLI_EXIT_USAGE;
    }
    int ways = (o->shards != 0) + o->named + (o->ring_file != NULL);
    if (ways != 1) {
        cli_error("%s: give one of -N COUNT, --nodes LIST, --nodes-file FILE or --ring FILE", CMD);
        return CLI_EXIT_USAGE;
    }
    if (o->shards && (o->save || o->ranges)) {
        cli_error("%s: --save and --ranges are for named nodes; jump hash has no ring", CMD);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* -N: shards added or removed, and the keys that move (exactly the keys of
 * the shards added, or of those removed: |m - n| / max(m, n) of them). */
static int jump_report(const ring_opts *o)
{
    uint64_t n = o->shards, m = n;
    for (size_t i = 0; i < o->add.n; i++) {
        uint64_t k;
        if (!arg_uint(CMD, "--add (a count with -N)", o->add.names[i], 1, DEDUP_RING_MAX_NODES, &k))
            return CLI_EXIT_USAGE;
        m += k;
    }
    for (size_t i = 0; i < o->nremove; i++) {
        uint64_t k;
        if (!arg_uint(CMD, "--remove (a count with -N)", o->remove[i], 1, DEDUP_RING_MAX_NODES, &k))
            return CLI_EXIT_USAGE;
        if (k >= m) {
            cli_error("%s: --remove %s would leave no shard", CMD, o->remove[i]);
            return CLI_EXIT_USAGE;
        }
        m -= k;
    }
    if (m > DEDUP_RING_MAX_NODES) {
        cli_error("%s: %" PRIu64 " shards; at most %u", CMD, m, (unsigned)DEDUP_RING_MAX_NODES);
        return CLI_EXIT_USAGE;
    }
    double moved = m == n ? 0 : (double)(m > n ? m - n : n - m) / (double)(m > n ? m : n);
    if (o->owner) {
        dedup_digest d = dedup_hash(o->owner, strlen(o->owner), DEDUP_DEFAULT_SEED);
        if (o->json) {
            fputs("{\"key\":", stdout);
            cli_json_string(stdout, o->owner);
            printf(",\"shard\":%u}\n", dedup_jump_digest(d, (uint32_t)m));
        } else {
            printf("%u\n", dedup_jump_digest(d, (uint32_t)m));
        }
        return out_finish(CMD, NULL);
    }
    if (o->json)
        printf("{\"routing\":\"jump\",\"shards\":%" PRIu64 ",\"after\":%" PRIu64 ",\"moved\":", n, m);
    else if (m == n)
        printf("%" PRIu64 " shards (jump hash): each holds 1/%" PRIu64 " of the keys\n", n, n);
    else
        printf("%" PRIu64 " -> %" PRIu64 " shards (jump hash): %.6f of the keys move, %s\n", n, m,
               moved, m > n ? "all of them into the new shards" : "all of them out of the removed shards");
    if (o->json) {
        json_double(stdout, moved);
        fputs("}\n", stdout);
    }
    return out_finish(CMD, NULL);
}

static void print_nodes(const dedup_ring *r, bool json)
{
    uint32_t n = dedup_ring_node_count(r);
    if (!json)
        printf("%-24s %8s %8s %9s\n", "node", "weight", "points", "share");
    for (uint32_t i = 0; i < n; i++) {
        if (json) {
            printf("%s{\"node\":", i ? "," : "");
            cli_json_string(stdout, dedup_ring_node_name(r, i));
            fputs(",\"weight\":", stdout);
            json_double(stdout, dedup_ring_node_weight(r, i));
            printf(",\"points\":%u,\"share\":", dedup_ring_node_points(r, i));
            json_double(stdout, dedup_ring_node_share(r, i));
            fputc('}', stdout);
        } else {
            printf("%-24s %8g %8u %8.4f%%\n", dedup_ring_node_name(r, i), dedup_ring_node_weight(r, i),
                   dedup_ring_node_points(r, i), 100 * dedup_ring_node_share(r, i));
        }
    }
}

int cmd_ring(int argc, char **argv)
{
    ring_opts o;
    int rc = parse_args(argc, argv, &o);
    dedup_ring *before = NULL, *after = NULL;
    diff_out d = {0};
    if (rc)
        goto out;
    if (o.shards) {
        rc = jump_report(&o);
        goto out;
    }
    if (o.named ? !dd_nodes_ring(CMD, &o.nodes, &before)
                : !dd_ring_load_checked(CMD, o.ring_file, &before)) {
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    dedup_status s = dedup_ring_copy(before, NULL, &after);
    if (!s)
        for (size_t i = 0; i < o.nremove && !s; i++) {
            s = dedup_ring_remove(after, o.remove[i]);
            if (s == DEDUP_ERR_NOT_FOUND) {
                cli_error("%s: --remove %s: no such node", CMD, o.remove[i]);
                rc = CLI_EXIT_USAGE;
                goto out;
            }
        }
    size_t bad = o.add.n;
    if (!s)
        s = dedup_ring_add_nodes(after, (const char *const *)o.add.names, o.add.weights, o.add.n, &bad);
    if (s) {
        if (s == DEDUP_ERR_INVALID_ARG && bad < o.add.n)
            cli_error("%s: --add %s: the ring has that node already (or it is added twice)", CMD,
                      o.add.names[bad]);
        else
            cli_error("%s: %s", CMD, dedup_strerror(s));
        rc = s == DEDUP_ERR_NOMEM ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
        goto out;
    }
    if (dedup_ring_node_count(after) == 0) {
        cli_error("%s: the change leaves no node", CMD);
        rc = CLI_EXIT_USAGE;
        goto out;
    }
    if (o.owner) {
        dedup_digest dg = dedup_hash(o.owner, strlen(o.owner), DEDUP_DEFAULT_SEED);
        const char *name = dedup_ring_node_name(after, dedup_ring_lookup(after, dg));
        if (o.json) {
            fputs("{\"key\":", stdout);
            cli_json_string(stdout, o.owner);
            fputs(",\"node\":", stdout);
            cli_json_string(stdout, name);
            fputs("}\n", stdout);
        } else {
            printf("%s\n", name);
        }
    } else {
        bool change = o.add.n || o.nremove;
        if (o.json) {
            printf("{\"routing\":\"ring\",\"points_per_weight\":%u,\"nodes\":[",
                   dedup_ring_points_per_weight(after));
            print_nodes(after, true);
            fputc(']', stdout);
        } else {
            print_nodes(after, false);
        }
        if (change) {
            d.a = before;
            d.b = after;
            d.ranges = o.ranges;
            d.json = o.json;
            if (o.json)
                fputs(o.ranges ? ",\"ranges\":[" : "", stdout);
            else if (o.ranges)
                printf("\n%-16s %-16s %s %s\n", "first", "last", "from", "to");
            double moved = 0;
            s = dedup_ring_diff(before, after, on_range, &d, &moved);
            if (s || d.nomem) {
                cli_error("%s: %s", CMD, dedup_strerror(d.nomem ? DEDUP_ERR_NOMEM : s));
                rc = CLI_EXIT_FAIL;
                goto out;
            }
            if (o.json) {
                fputs(o.ranges ? "]" : "", stdout);
                fputs(",\"moved\":", stdout);
                json_double(stdout, moved);
                fputs(",\"flows\":[", stdout);
            } else {
                printf("\nmoved: %.6f of the keys (%zu ranges)\n", moved, d.nranges);
            }
            for (size_t i = 0; i < d.nflows; i++) {
                const char *from = dedup_ring_node_name(before, d.flows[i].from);
                const char *to = dedup_ring_node_name(after, d.flows[i].to);
                if (o.json) {
                    fputs(i ? ",{\"from\":" : "{\"from\":", stdout);
                    cli_json_string(stdout, from);
                    fputs(",\"to\":", stdout);
                    cli_json_string(stdout, to);
                    fputs(",\"fraction\":", stdout);
                    json_double(stdout, d.flows[i].frac);
                    fputc('}', stdout);
                } else {
                    printf("  %-24s -> %-24s %.6f\n", from, to, d.flows[i].frac);
                }
            }
            if (o.json)
                fputc(']', stdout);
        }
        if (o.json)
            fputs("}\n", stdout);
    }
    if (o.save) {
        s = dedup_ring_save_file(after, o.save);
        if (s) {
            cli_error("%s: cannot save %s: %s", CMD, o.save,
                      s == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(s));
            rc = CLI_EXIT_FAIL;
            goto out;
        }
    }
    rc = out_finish(CMD, NULL);
out:
    free(d.flows);
    dedup_ring_free(before);
    dedup_ring_free(after);
    dd_nodes_free(&o.nodes);
    dd_nodes_free(&o.add);
    free(o.remove);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
