/*
 * fuzz_redis_url.c - dedup_redis_url_parse() on arbitrary bytes: it never
 * reads past the NUL, never overflows a field, and what it accepts is
 * within the documented ranges (ports 1..65535, 1..16 seeds, non-empty
 * hosts, db 0 on a cluster, a master name exactly on a sentinel URL) with a sentence for every refusal.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/redis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    dedup_redis_url u;
    char why[256];
    why[0] = 0;
    dedup_status st = dedup_redis_url_parse(s, &u, why, sizeof why);
    if (st == DEDUP_OK) {
        if (u.nseeds < 1 || u.nseeds > DEDUP_REDIS_MAX_SEEDS || (!u.cluster && !u.sentinel && u.nseeds != 1) ||
            (u.cluster && u.db != 0) || u.db < 0)
            abort();
        if (!u.sentinel != !u.master[0] || strlen(u.master) > DEDUP_REDIS_MAX_MASTER ||
            (u.sentinel && u.cluster))
            abort();
        for (size_t i = 0; i < u.nseeds; i++)
            if (u.seeds[i].port < 1 || u.seeds[i].port > 65535 || !u.seeds[i].host[0] ||
                strlen(u.seeds[i].host) > DEDUP_REDIS_MAX_HOST)
                abort();
        if (strlen(u.user) > DEDUP_REDIS_MAX_CRED || strlen(u.pass) > DEDUP_REDIS_MAX_CRED)
            abort();
    } else if (st != DEDUP_ERR_INVALID_ARG || !why[0]) {
        abort();
    }
    free(s);
    return 0;
}
