/* roaring_consumer.c - a program built against an installed
 * libdedup_roaring (pkg-config dedup-roaring): integer keys decided twice
 * in a roaring seen-set -- new the first time, duplicates the second.
 * Built and run by tests/install/test_install.sh. */
#include <stdio.h>

#include <dedup/roaring.h>

#define N 5000

int main(void)
{
    dedup_seen_spec spec;
    dedup_seen_spec_init(&spec);
    spec.kind = DEDUP_SEEN_ROARING;
    dedup_seen *seen;
    dedup_status s = dedup_roaring_seen_create(&spec, NULL, &seen);
    if (s) {
        fprintf(stderr, "roaring_consumer: %s\n", dedup_strerror(s));
        return 1;
    }
    static uint64_t ids[N];
    static dedup_verdict v[N];
    for (int i = 0; i < N; i++)
        ids[i] = (uint64_t)i * 7919u + ((uint64_t)(i & 1) << 40); /* both sides of 2^32 */
    dedup_batch b = {.n = N, .ints = ids};
    for (int round = 0; round < 2; round++) {
        if ((s = dedup_seen_decide(seen, &b, v, NULL))) {
            fprintf(stderr, "roaring_consumer: decide: %s\n", dedup_strerror(s));
            return 1;
        }
        for (int i = 0; i < N; i++)
            if (v[i] != (round ? DEDUP_DUPLICATE : DEDUP_NEW)) {
                fprintf(stderr, "roaring_consumer: id %d: verdict %d in round %d\n", i, v[i], round);
                return 1;
            }
    }
    printf("roaring_consumer OK: %d ids new, then duplicates\n", N);
    dedup_seen_free(seen);
    return 0;
}
