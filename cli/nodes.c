/* nodes.c - node lists for `dedup split` and `dedup ring` (see nodes.h). */
#define _POSIX_C_SOURCE 200809L
#include "nodes.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static bool name_ok(const char *s, size_t len, const char **why)
{
    if (len == 0) {
        *why = "an empty node name";
        return false;
    }
    if (len > DEDUP_RING_MAX_NAME) {
        *why = "a node name longer than 255 bytes";
        return false;
    }
    if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) {
        *why = "node name '.' or '..'";
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 0x7F || c == ',' || c == '=' || c == '/' || c == '%') {
            *why = "a node name with a character other than printable ASCII "
                   "(no space, ',', '=', '/' or '%')";
            return false;
        }
    }
    return true;
}

bool dd_nodes_weight(const char *s, double *out)
{
    char *end;
    errno = 0;
    double w = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(w) || !(w > 0) ||
        round(w * DEDUP_RING_DEFAULT_POINTS) < 1)
        return false;
    *out = w;
    return true;
}

static bool push(dd_nodelist *nl, char *name, double w)
{
    if (nl->n == nl->cap) {
        size_t cap = nl->cap ? nl->cap * 2 : 16;
        char **nn = realloc(nl->names, cap * sizeof *nn);
        if (!nn)
            return false;
        nl->names = nn;
        double *nw = realloc(nl->weights, cap * sizeof *nw);
        if (!nw)
            return false;
        nl->weights = nw;
        nl->cap = cap;
    }
    nl->names[nl->n] = name;
    nl->weights[nl->n++] = w;
    return true;
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool dd_nodes_parse_one(const char *cmd, const char *where, const char *entry, size_t len,
                        dd_nodelist *nl)
{
    while (len && is_blank(*entry)) {
        entry++;
        len--;
    }
    while (len && is_blank(entry[len - 1]))
        len--;
    const char *eq = memchr(entry, '=', len);
    size_t nlen = eq ? (size_t)(eq - entry) : len;
    while (nlen && is_blank(entry[nlen - 1]))
        nlen--;
    const char *why;
    if (!name_ok(entry, nlen, &why)) {
        cli_error("%s: %s: %s (got '%.*s')", cmd, where, why, (int)len, entry);
        return false;
    }
    double w = 1;
    if (eq) {
        char wbuf[64];
        const char *ws = eq + 1;
        size_t wl = (size_t)(entry + len - ws);
        while (wl && is_blank(*ws)) {
            ws++;
            wl--;
        }
        if (wl == 0 || wl >= sizeof wbuf) {
            cli_error("%s: %s: node '%.*s' needs a weight after '=' (got '%.*s')", cmd, where,
                      (int)nlen, entry, (int)len, entry);
            return false;
        }
        memcpy(wbuf, ws, wl);
        wbuf[wl] = '\0';
        if (!dd_nodes_weight(wbuf, &w)) {
            cli_error("%s: %s: the weight of node '%.*s' must be a positive number of at least "
                      "1/320 (got '%s')", cmd, where, (int)nlen, entry, wbuf);
            return false;
        }
    }
    /* a repeated name is found when the ring is made (dd_nodes_ring) */
    char *name = malloc(nlen + 1);
    if (!name || !push(nl, name, w)) {
        free(name);
        cli_error("%s: out of memory", cmd);
        return false;
    }
    memcpy(name, entry, nlen);
    name[nlen] = '\0';
    return true;
}

bool dd_nodes_parse_list(const char *cmd, const char *opt, const char *list, dd_nodelist *nl)
{
    const char *p = list;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (!dd_nodes_parse_one(cmd, opt, p, len, nl))
            return false;
        if (!c)
            return true;
        p = c + 1;
    }
}

bool dd_nodes_parse_file(const char *cmd, const char *path, dd_nodelist *nl)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_error("%s: --nodes-file %s: %s", cmd, path, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t cap = 0, before = nl->n;
    ssize_t got;
    unsigned long lineno = 0;
    bool ok = true;
    while (ok && (got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t len = (size_t)got;
        if (len && line[len - 1] == '\n')
            len--;
        size_t i = 0;
        while (i < len && is_blank(line[i]))
            i++;
        if (i == len || line[i] == '#')
            continue;
        if (memchr(line, '\0', len)) {
            cli_error("%s: %s:%lu: a NUL byte in the line", cmd, path, lineno);
            ok = false;
            break;
        }
        char where[600];
        snprintf(where, sizeof where, "%s:%lu", path, lineno);
        ok = dd_nodes_parse_one(cmd, where, line, len, nl);
    }
    if (ok && ferror(f)) {
        cli_error("%s: --nodes-file %s: read error: %s", cmd, path, strerror(errno));
        ok = false;
    }
    if (ok && nl->n == before) {
        cli_error("%s: --nodes-file %s: no node in the file", cmd, path);
        ok = false;
    }
    free(line);
    fclose(f);
    return ok;
}

bool dd_nodes_ring(const char *cmd, const dd_nodelist *nl, dedup_ring **out)
{
    dedup_ring *r = NULL;
    dedup_status s = dedup_ring_create(NULL, NULL, &r);
    size_t bad = nl->n;
    if (!s)
        s = dedup_ring_add_nodes(r, (const char *const *)nl->names, nl->weights, nl->n, &bad);
    if (s) {
        if (bad < nl->n && s == DEDUP_ERR_INVALID_ARG) /* names and weights were checked */
            cli_error("%s: node '%s' is listed twice", cmd, nl->names[bad]);
        else if (bad < nl->n)
            cli_error("%s: node '%s': %s", cmd, nl->names[bad], dedup_strerror(s));
        else if (s == DEDUP_ERR_LIMIT)
            cli_error("%s: %zu nodes with these weights need more than %u points (at most %u "
                      "nodes, 160 points per unit of weight)", cmd, nl->n,
                      (unsigned)DEDUP_RING_MAX_POINTS, (unsigned)DEDUP_RING_MAX_NODES);
        else
            cli_error("%s: %s", cmd, dedup_strerror(s));
        dedup_ring_free(r);
        return false;
    }
    *out = r;
    return true;
}

void dd_nodes_free(dd_nodelist *nl)
{
    for (size_t i = 0; i < nl->n; i++)
        free(nl->names[i]);
    free(nl->names);
    free(nl->weights);
    memset(nl, 0, sizeof *nl);
}

bool dd_ring_load_checked(const char *cmd, const char *path, dedup_ring **out)
{
    dedup_ring *r = NULL;
    dedup_status s = dedup_ring_load_file(path, NULL, &r);
    if (s) {
        cli_error("%s: --ring %s: %s", cmd, path,
                  s == DEDUP_ERR_IO ? strerror(errno) : dedup_strerror(s));
        return false;
    }
    const char *why = NULL;
    uint32_t n = dedup_ring_node_count(r);
    for (uint32_t i = 0; i < n && !why; i++) {
        const char *name = dedup_ring_node_name(r, i);
        if (!name_ok(name, strlen(name), &why))
            cli_error("%s: --ring %s: %s (got '%s')", cmd, path, why, name);
    }
    if (!why && n == 0) {
        why = "empty";
        cli_error("%s: --ring %s: the ring has no node", cmd, path);
    }
    if (why) {
        dedup_ring_free(r);
        return false;
    }
    *out = r;
    return true;
}
