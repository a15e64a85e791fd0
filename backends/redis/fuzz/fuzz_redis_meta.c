/*
 * fuzz_redis_meta.c - the module scheme's metadata parser on arbitrary
 * bytes (the text another client, or anyone, left in "<name>:meta"): it
 * never reads past the NUL, and what it accepts is within the ranges the
 * scheme relies on (version 1, or 2 with a matching sum, 1..65536 shards, items >= 1, 0 < fpr < 1,
 * filter bloom or cuckoo, a TTL only with bloom).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    rd_mod_shape t;
    dedup_status st = rd_module_shape_parse(s, &t);
    if (st == DEDUP_OK) {
        bool cuckoo = strcmp(t.filter, "cuckoo") == 0;
        if (t.version < 1 || t.version > 2 || t.shards < 1 || t.shards > 65536 || t.items < 1 || !(t.fpr > 0) ||
            !(t.fpr < 1) || (!cuckoo && strcmp(t.filter, "bloom") != 0) || (cuckoo && t.ttl_ms))
            abort();
    } else if (st != DEDUP_ERR_WRONG_TYPE && st != DEDUP_ERR_VERSION && st != DEDUP_ERR_CORRUPT &&
               st != DEDUP_ERR_CHECKSUM) {
        abort();
    }
    free(s);
    return 0;
}
