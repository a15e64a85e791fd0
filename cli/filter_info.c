/*
 * filter_info.c - `dedup filter info FILE... [--json]`, and the output
 * helpers every type's info printer uses (filter_types.h), so that text
 * and JSON stay in step.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_args.h"
#include "filter_cmd.h"
#include "state_file.h"

/* ---- Info output helpers (declared in filter_types.h) ----------------------------- */

bool info_has(const filter_info_out *o, const char *key)
{
    for (int i = 0; i < o->nkeys; i++)
        if (strcmp(o->keys[i], key) == 0)
            return true;
    return false;
}

static void info_key(filter_info_out *o, const char *key, const char *label)
{
    if (o->nkeys < (int)(sizeof o->keys / sizeof o->keys[0]))
        snprintf(o->keys[o->nkeys++], sizeof o->keys[0], "%s", key);
    if (o->json) {
        fputs(o->first ? "" : ",", o->f);
        cli_json_string(o->f, key);
        fputc(':', o->f);
    } else {
        fprintf(o->f, "%-32s ", label);
    }
    o->first = false;
}

void info_str(filter_info_out *o, const char *key, const char *label, const char *v)
{
    info_key(o, key, label);
    if (o->json)
        cli_json_string(o->f, v);
    else
        fprintf(o->f, "%s\n", v);
}

void info_u64(filter_info_out *o, const char *key, const char *label, uint64_t v)
{
    info_key(o, key, label);
    fprintf(o->f, o->json ? "%" PRIu64 : "%" PRIu64 "\n", v);
}

void info_f64(filter_info_out *o, const char *key, const char *label, double v)
{
    info_key(o, key, label);
    if (o->json)
        json_double(o->f, v);
    else
        fprintf(o->f, "%.6g\n", v);
}

void info_prob(filter_info_out *o, const char *key, const char *label, double v)
{
    info_key(o, key, label);
    if (o->json)
        json_double(o->f, v);
    else
        fprintf(o->f, "%.6g (%.4g%%)\n", v, v * 100.0);
}

void info_bytes(filter_info_out *o, const char *key, const char *label, uint64_t v)
{
    char h[32];
    info_key(o, key, label);
    if (o->json)
        fprintf(o->f, "%" PRIu64, v);
    else
        fprintf(o->f, "%" PRIu64 " (%s)\n", v, cli_human_size(v, h, sizeof h));
}

void info_bool(filter_info_out *o, const char *key, const char *label, bool v)
{
    info_key(o, key, label);
    fprintf(o->f, o->json ? "%s" : "%s\n", v ? (o->json ? "true" : "yes") : (o->json ? "false" : "no"));
}

void info_hex(filter_info_out *o, const char *key, const char *label, uint64_t v)
{
    info_key(o, key, label);
    if (o->json) {
        char buf[64];
        fprintf(o->f, "%" PRIu64 ",", v);
        snprintf(buf, sizeof buf, "%s_hex", key);
        cli_json_string(o->f, buf);
        fprintf(o->f, ":\"0x%016" PRIx64 "\"", v);
    } else {
        fprintf(o->f, "0x%016" PRIx64 "\n", v);
    }
}

/* ---- info ---------------------------------------------------------------------------- */

static int info_one(const char *path, bool json)
{
    dedup_header hdr; /* a state container's: the nested seen-set's */
    bool has_ident;
    char ident[DEDUP_STATE_IDENT_MAX + 1];
    errno = 0;
    dedup_status s = dedup_state_peek(path, &hdr, &has_ident, ident, sizeof ident);
    if (s) {
        dd_filter_file_error(path, s, errno);
        return CLI_EXIT_USAGE;
    }
    /* Every type a seen-set keeps is loaded whole, which validates all of
     * it (a truncated or damaged set or window state is refused here too,
     * not only a filter). */
    const filter_type *t = filter_type_by_file_type(hdr.type);
    dedup_seen *sn = NULL;
    errno = 0;
    s = dd_state_load(path, NULL, &sn, &has_ident, ident, sizeof ident);
    bool checked = s == DEDUP_OK;
    if (s && !(s == DEDUP_ERR_WRONG_TYPE && !t)) {
        dd_filter_file_error(path, s, errno);
        return CLI_EXIT_USAGE;
    }
    struct stat st;
    uint64_t fsize = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;

    filter_info_out o = {.f = stdout, .json = json, .first = true};
    if (json)
        fputc('{', stdout);
    info_str(&o, "file", "file", path);
    info_bytes(&o, "file_bytes", "file size", fsize);
    info_u64(&o, "format_version", "format version", hdr.version);
    if (has_ident) /* the key options a --state run recorded */
        info_str(&o, "keys", "key options (--state)", ident);
    dedup_seen_info in;
    if (sn)
        dedup_seen_get_info(sn, &in);
    dedup_status ls = DEDUP_OK;
    bool described = false; /* by dd_info_state(), capacity included */
    if (t) {
        t->info(sn, &o);
    } else if (dd_info_state(path, &hdr, &o, &ls)) {
        /* a state file, a roaring state or a sketch: loaded whole and described */
        checked = described = true;
    } else if (ls) {
        if (json)
            fputs("}\n", stdout);
        dd_filter_file_error(path, ls, errno);
        dedup_seen_free(sn);
        return CLI_EXIT_USAGE;
    } else {
        /* A set or window state file: what the header and the seen-set say. */
        info_str(&o, "type", "type", dedup_type_name(hdr.type));
        info_u64(&o, "type_id", "type id", hdr.type);
        info_hex(&o, "seed", "seed", hdr.seed);
        info_bytes(&o, "payload_bytes", "payload", hdr.payload_len);
        if (sn && in.distinct_known)
            info_u64(&o, "distinct", in.distinct_exact ? "distinct keys" : "distinct keys (estimated)",
                     in.distinct);
    }
    if (sn && in.capacity && !described) {
        /* The type's printer may have written some of these already. */
        if (!info_has(&o, "capacity"))
            info_u64(&o, "capacity", "capacity (items planned)", in.capacity);
        if (!info_has(&o, "items"))
            info_u64(&o, "items", in.distinct_exact ? "items held" : "items held (estimated)",
                     in.items);
        info_bool(&o, "over_capacity", "over capacity", in.over_capacity);
        if (!json && in.over_capacity)
            info_str(&o, "note_capacity", "note",
                     "more items than it was created for: the rate now is above its target");
    }
    info_str(&o, "checked", "contents checked",
             checked ? "whole file (header, params, payload, checksum)"
                     : "header only: no loader in this build knows this type");
    if (json)
        fputs("}\n", stdout);
    dedup_seen_free(sn);
    return CLI_EXIT_OK;
}

int dd_filter_info(int argc, char **argv)
{
    static const struct option longopts[] = {{"json", no_argument, NULL, OPT_JSON},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, OPT_VERSION},
                                             {NULL, 0, NULL, 0}};
    bool json = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int r = dd_filter_common_option(c, "filter info", argv);
        if (r >= 0)
            return r;
        if (c == OPT_JSON)
            json = true;
    }
    if (optind >= argc) {
        cli_error("filter info: missing FILE (usage: dedup filter info FILE... [--json])");
        return CLI_EXIT_USAGE;
    }
    int rc = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        if (i > optind && !json)
            putchar('\n');
        int r = info_one(argv[i], json);
        if (r)
            rc = r;
    }
    if (out_finish("filter info", NULL) && !rc)
        rc = CLI_EXIT_FAIL;
    return rc;
}
