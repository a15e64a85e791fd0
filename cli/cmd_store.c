/*
 * cmd_store.c - `dedup store info DIR`: what a persistent store (dedup
 * --store DIR, a rocksdb: tier) holds: keys, bytes on disk, bytes per key.
 * Opens the store read-only, so it works while a run holds the store.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifdef DEDUP_HAVE_ROCKSDB
#include "dedup/store.h"
#endif

static void store_usage(FILE *f)
{
    fprintf(f,
            "Usage: %s store info [--json] DIR\n"
            "Shows what the persistent store in DIR (dedup --store DIR, --tier rocksdb:DIR)\n"
            "holds: keys recorded, bytes on disk, bytes per key, seed, key mode, expiry.\n"
            "Read-only: works while another dedup holds the store.\n"
            "  --json      one JSON object on stdout\n"
            "  -h, --help  this help\n",
            cli_progname);
}

int cmd_store(int argc, char **argv)
{
    static const struct option lo[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    bool json = false;
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        store_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "info") != 0) {
        cli_error("store: unknown action '%s' (choose info)", argv[1]);
        return CLI_EXIT_USAGE;
    }
    argc--, argv++;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'j') {
            json = true;
        } else if (c == 'h') {
            store_usage(stdout);
            return CLI_EXIT_OK;
        } else {
            store_usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) {
        cli_error("store info: give exactly one DIR");
        return CLI_EXIT_USAGE;
    }
    const char *dir = argv[optind];
#ifndef DEDUP_HAVE_ROCKSDB
    (void)json;
    cli_error("store info %s: this dedup was built without RocksDB (librocksdb-dev)", dir);
    return CLI_EXIT_FAIL;
#else
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = dir;
    p.create = false;
    p.read_only = true;
    dedup_store *s = NULL;
    char why[768];
    dedup_status st = dedup_store_create(&p, NULL, &s, why, sizeof why);
    if (st != DEDUP_OK) {
        cli_error("%s", why);
        return CLI_EXIT_USAGE;
    }
    dedup_store_info in;
    st = dedup_store_get_info(s, &in);
    char ident[DEDUP_STORE_IDENTITY_MAX + 1];
    snprintf(ident, sizeof ident, "%s", st == DEDUP_OK ? in.identity : "");
    dedup_store_free(s);
    if (st != DEDUP_OK) {
        cli_error("%s: %s", dir, dedup_strerror(st));
        return CLI_EXIT_FAIL;
    }
    double per_key = in.keys ? (double)in.bytes_on_disk / (double)in.keys : 0;
    const char *mode = in.keys_mode == DEDUP_STORE_KEYS_WHOLE ? "whole" : "digest";
    if (json) {
        printf("{\"store\":");
        cli_json_string(stdout, dir);
        printf(",\"format_version\":%u,\"keys_mode\":\"%s\",\"seed\":%llu,\"expire_s\":%llu,"
               "\"keys\":%llu,\"bytes_on_disk\":%llu,\"sst_bytes\":%llu,\"bytes_per_key\":%.2f,"
               "\"key_options\":",
               in.format_version, mode, (unsigned long long)in.seed,
               (unsigned long long)in.expire, (unsigned long long)in.keys,
               (unsigned long long)in.bytes_on_disk, (unsigned long long)in.sst_bytes, per_key);
        cli_json_string(stdout, ident);
        printf("}\n");
    } else {
        char h1[32];
        printf("store:          %s\n", dir);
        printf("format:         dedup store v%u, %s keys, seed 0x%016llx\n", in.format_version,
               mode, (unsigned long long)in.seed);
        printf("key options:    %s\n", ident[0] ? ident : "(not recorded: made by an older dedup)");
        if (in.expire)
            printf("expiry:         %llu s (age checked on read)\n", (unsigned long long)in.expire);
        else
            printf("expiry:         none\n");
        printf("keys:           %llu\n", (unsigned long long)in.keys);
        printf("bytes on disk:  %llu (%s)\n", (unsigned long long)in.bytes_on_disk,
               cli_human_size(in.bytes_on_disk, h1, sizeof h1));
        printf("bytes per key:  %.2f\n", per_key);
    }
    return CLI_EXIT_OK;
#endif
}
