/*
 * fuzz_csv_split.c - the CSV record splitter and field splitter (dedup/key.h)
 * on arbitrary bytes.  The first byte picks the delimiter and the block
 * size: record ends found over the stream cut into blocks must be the ones
 * found in one call, and the ones found record by record; every record's
 * fields never reach past it; a CSV key spec applied to every record either
 * gives a key that fits the bound it promises or a per-record error.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENDS 4096

static void check_fields(const unsigned char *rec, size_t len, unsigned char delim)
{
    size_t pos = 0, total = 0;
    unsigned char *tmp = malloc(len + 1);
    for (;;) {
        dedup_csv_field f;
        size_t before = pos;
        dedup_status st = dedup_csv_field_next(rec, len, delim, &pos, &f);
        if (st == DEDUP_ERR_RANGE || st == DEDUP_ERR_CORRUPT)
            break;
        if (st != DEDUP_OK || pos <= before || f.p < rec || f.p + f.len > rec + len)
            abort();
        size_t u = dedup_csv_unquote(&f, tmp);
        if (u > f.len)
            abort();
        total++;
        if (total > len + 1)
            abort(); /* more fields than bytes: no progress */
    }
    free(tmp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const unsigned char delims[] = {',', ';', '\t', '\0', '|', 'a', ' ', '\\'};
    unsigned char delim = delims[data[0] & 7];
    size_t block = (size_t)(data[0] >> 3) + 1;
    const unsigned char *p = data + 1;
    size_t n = size - 1;

    /* One call, every end. */
    static size_t ends[MAX_ENDS], ends2[MAX_ENDS];
    size_t ne = 0, ne2 = 0;
    dedup_csv_scan s;
    dedup_csv_scan_init(&s);
    size_t last_all = dedup_csv_scan_block(&s, p, n, delim, '\n', ends, MAX_ENDS, &ne);
    if (ne == MAX_ENDS)
        return 0;
    /* One call, the last end only. */
    dedup_csv_scan s1;
    dedup_csv_scan_init(&s1);
    size_t last = dedup_csv_scan_block(&s1, p, n, delim, '\n', NULL, 0, NULL);
    if (last != last_all || s1.state != s.state)
        abort();
    /* In blocks. */
    dedup_csv_scan sb;
    dedup_csv_scan_init(&sb);
    size_t lastb = 0;
    for (size_t off = 0; off < n; off += block) {
        size_t m = n - off < block ? n - off : block;
        size_t got = 0, e = dedup_csv_scan_block(&sb, p + off, m, delim, '\n', ends2 + ne2,
                                                 MAX_ENDS - ne2, &got);
        for (size_t i = 0; i < got; i++)
            ends2[ne2 + i] += off;
        ne2 += got;
        if (e)
            lastb = off + e;
    }
    if (lastb != last || ne2 != ne || memcmp(ends, ends2, ne * sizeof *ends) != 0 ||
        sb.state != s.state)
        abort();
    /* Record by record (as the command's feeder splits a block). */
    size_t at = 0;
    for (size_t i = 0; i < ne; i++) {
        dedup_csv_scan r;
        dedup_csv_scan_init(&r);
        size_t e = 0, got = 0;
        (void)dedup_csv_scan_block(&r, p + at, n - at, delim, '\n', &e, 1, &got);
        if (got != 1 || at + e != ends[i])
            abort();
        at = ends[i];
    }
    /* Fields and keys of every record, the tail included. */
    dedup_key_params kp;
    dedup_key_params_init(&kp);
    kp.format = DEDUP_KEY_CSV;
    kp.delim = delim == '\n' ? ',' : delim;
    kp.fields = (data[0] & 8) ? "2,1-3,4-" : NULL;
    kp.trim = (data[0] & 16) != 0;
    kp.fold_case = (data[0] & 32) != 0;
    dedup_key *k = NULL;
    if (dedup_key_create(&kp, NULL, 0, NULL, &k, NULL) != DEDUP_OK)
        abort();
    /* The same records as plain delimited fields, a list out of order. */
    dedup_key_params pp;
    dedup_key_params_init(&pp);
    pp.delim = kp.delim;
    pp.fields = "3,1-2,2-";
    dedup_key *kplain = NULL;
    if (dedup_key_create(&pp, NULL, 0, NULL, &kplain, NULL) != DEDUP_OK)
        abort();
    at = 0;
    for (size_t i = 0; i <= ne; i++) {
        size_t end = i < ne ? ends[i] - 1 : n;
        if (i == ne && at == n)
            break;
        const unsigned char *rec = p + at;
        size_t len = end - at;
        check_fields(rec, len, delim);
        size_t cap = dedup_key_bound(k, len);
        unsigned char *out = malloc(cap ? cap : 1);
        const unsigned char *key;
        size_t klen;
        dedup_status st = dedup_key_of(k, rec, len, out, cap, &key, &klen);
        if (st != DEDUP_OK && st != DEDUP_ERR_CORRUPT)
            abort();
        if (st == DEDUP_OK && klen > cap && key == out)
            abort();
        free(out);
        cap = dedup_key_bound(kplain, len);
        out = malloc(cap ? cap : 1);
        if (dedup_key_of(kplain, rec, len, out, cap, &key, &klen) != DEDUP_OK || klen > cap)
            abort(); /* plain fields never fail, and the bound holds */
        free(out);
        at = i < ne ? ends[i] : n;
    }
    dedup_key_free(k);
    dedup_key_free(kplain);
    return 0;
}
