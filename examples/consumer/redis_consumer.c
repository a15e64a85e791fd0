/* redis_consumer.c - a program built against an installed libdedup_redis
 * (pkg-config dedup-redis): it decides keys twice in the Redis server at
 * URL through the seen-set interface -- new the first time, duplicates the
 * second -- and checks that the set holds them.  Built and run by
 * tests/install/test_install.sh against a redis-server it starts.
 *
 *   redis_consumer redis://127.0.0.1:PORT/DB NAME */
#include <stdio.h>

#include <dedup/redis.h>

#define N 1000

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: redis_consumer URL NAME\n");
        return 2;
    }
    dedup_redis_params o;
    dedup_redis_params_init(&o);
    o.url = argv[1];
    o.name = argv[2];
    o.scheme = DEDUP_REDIS_KEYS;
    dedup_redis *r;
    char why[256];
    dedup_status s = dedup_redis_create(&o, NULL, &r, why, sizeof why);
    if (s) {
        fprintf(stderr, "redis_consumer: %s: %s\n", dedup_strerror(s), why);
        return 1;
    }
    dedup_seen *seen;
    if ((s = dedup_redis_as_seen(r, NULL, &seen))) {
        dedup_redis_free(r);
        fprintf(stderr, "redis_consumer: %s\n", dedup_strerror(s));
        return 1;
    }
    static dedup_digest d[N];
    static dedup_verdict v[N];
    char key[32];
    for (int i = 0; i < N; i++) {
        int n = snprintf(key, sizeof key, "key-%d", i);
        d[i] = dedup_hash(key, (size_t)n, o.seed);
    }
    dedup_batch b = {.n = N, .digests = d};
    for (int round = 0; round < 2; round++) {
        size_t done = 0;
        if ((s = dedup_seen_decide(seen, &b, v, &done)) || done != N) {
            fprintf(stderr, "redis_consumer: decide: %s\n", dedup_strerror(s));
            return 1;
        }
        for (int i = 0; i < N; i++)
            if (v[i] != (round ? DEDUP_DUPLICATE : DEDUP_NEW)) {
                fprintf(stderr, "redis_consumer: key %d: verdict %d in round %d\n", i, v[i], round);
                return 1;
            }
    }
    printf("redis_consumer OK: %d keys new, then duplicates\n", N);
    dedup_seen_free(seen);
    return 0;
}
