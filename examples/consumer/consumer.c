/* consumer.c - a program built against an installed libdedup: it sizes a
 * blocked Bloom filter, adds keys, checks that none is lost and prints the
 * library version.  Built both with pkg-config and with find_package(dedup)
 * by tests/install/test_install.sh. */
#include <stdio.h>

#include <dedup/bloom.h>

int main(void)
{
    dedup_bloom_params p;
    dedup_bloom_params_init(&p);
    p.kind = DEDUP_BLOOM_BLOCKED;
    p.capacity = 10000;
    p.fpr = 0.01;
    dedup_bloom *bf;
    dedup_status s = dedup_bloom_create(&p, NULL, &bf);
    if (s != DEDUP_OK) {
        fprintf(stderr, "consumer: %s\n", dedup_strerror(s));
        return 1;
    }
    char key[32];
    for (int i = 0; i < 10000; i++) {
        int n = snprintf(key, sizeof key, "key-%d", i);
        dedup_bloom_add_key(bf, key, (size_t)n);
    }
    for (int i = 0; i < 10000; i++) {
        int n = snprintf(key, sizeof key, "key-%d", i);
        if (!dedup_bloom_might_contain_key(bf, key, (size_t)n)) {
            fprintf(stderr, "consumer: lost key %d\n", i);
            return 1;
        }
    }
    printf("consumer OK with libdedup %s\n", dedup_version_string());
    dedup_bloom_free(bf);
    return 0;
}
