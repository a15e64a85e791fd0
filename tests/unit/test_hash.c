/* test_hash.c - known-answer digests and the helpers built on them.
 *
 * The vectors are XXH3-128 of bytes b[i] = (i*31 + 7) & 0xFF for several
 * lengths (one per code path of XXH3: 0, 1-3, 4-8, 9-16, 17-128, 129-240,
 * 240+) and seeds.  They were computed once with this library; the seed-0
 * rows were cross-checked with `xxhsum -H2` (xxHash 0.8.1), which prints
 * the canonical form hi||lo.  A change here means every file changes. */
#include "testutil.h"

#include "dedup/hash.h"

#include <string.h>

static const struct {
    size_t len;
    uint64_t seed, lo, hi;
} KAT[] = {
{0, UINT64_C(0x0000000000000000), UINT64_C(0x6001C324468D497F), UINT64_C(0x99AA06D3014798D8)},
{1, UINT64_C(0x0000000000000000), UINT64_C(0x4C5CCA45D0F4811F), UINT64_C(0x495B62073EF70CA4)},
{3, UINT64_C(0x0000000000000000), UINT64_C(0x15F7093B173D005C), UINT64_C(0x46F66CB935381565)},
{8, UINT64_C(0x0000000000000000), UINT64_C(0x56BB836CEB6D4BAA), UINT64_C(0x803C675A846CC6C2)},
{11, UINT64_C(0x0000000000000000), UINT64_C(0x1696C6F427B4AB16), UINT64_C(0xBCFC02420941F7DB)},
{16, UINT64_C(0x0000000000000000), UINT64_C(0xF853DD94614DFA07), UINT64_C(0x650FE308C566747D)},
{100, UINT64_C(0x0000000000000000), UINT64_C(0xD61D8DBFF22D515F), UINT64_C(0x7F5A1F03462E52B4)},
{200, UINT64_C(0x0000000000000000), UINT64_C(0x60EA018811F9A437), UINT64_C(0x8D8629A1AEF9EF90)},
{1000, UINT64_C(0x0000000000000000), UINT64_C(0x989765D0EA7A5ECD), UINT64_C(0xF534F51E82A81D29)},
{0, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x4CA5176998171787), UINT64_C(0xD142977A2CCA554B)},
{1, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x2F3ACD3805F81DE3), UINT64_C(0x00A711EB5A736B26)},
{3, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x079DD5D54D89480A), UINT64_C(0xBF6C84DF5F76651D)},
{8, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x3EDB070ECF3A9343), UINT64_C(0xC3612DC11470E721)},
{11, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0xCA36CCD87C57D9BE), UINT64_C(0x7E8DFA1FAEB31070)},
{16, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x4E683254A04C377F), UINT64_C(0xBE0F27BAC4D1F58F)},
{100, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x48C946439D60CD25), UINT64_C(0xC5EF64958E922287)},
{200, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x2BD1EB5D960E73F4), UINT64_C(0x8511E8A53F70BFBF)},
{1000, UINT64_C(0x9E3779B97F4A7C15), UINT64_C(0x75B5719D9F31A6A2), UINT64_C(0x4022020C7B531E80)},
{0, UINT64_C(0x000000000000002A), UINT64_C(0x3C1D09E9FE249164), UINT64_C(0x16C20ACD33F7AF2F)},
{1, UINT64_C(0x000000000000002A), UINT64_C(0xC72384329881F542), UINT64_C(0x8F345F94F33C2B82)},
{3, UINT64_C(0x000000000000002A), UINT64_C(0x0322C472F9DD3C8A), UINT64_C(0x5C291892A9981241)},
{8, UINT64_C(0x000000000000002A), UINT64_C(0x925E9CBD6B9D6856), UINT64_C(0x4EBA1888652C0237)},
{11, UINT64_C(0x000000000000002A), UINT64_C(0x58813519B6F2AE61), UINT64_C(0xAD000578F50739DE)},
{16, UINT64_C(0x000000000000002A), UINT64_C(0x5AAC6C3B573A84AB), UINT64_C(0x3C216DD14F4EC5DC)},
{100, UINT64_C(0x000000000000002A), UINT64_C(0x145AAF80746EBA85), UINT64_C(0x50524DAC88F99C9A)},
{200, UINT64_C(0x000000000000002A), UINT64_C(0x82236C396C3FEE2D), UINT64_C(0x652994AE1565B773)},
{1000, UINT64_C(0x000000000000002A), UINT64_C(0x210176AC002574AD), UINT64_C(0x3A57F1243CCC56B5)},
};

static void fill(unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 31 + 7);
}

static void test_known_answers(void **state)
{
    (void)state;
    unsigned char b[1000];
    fill(b, sizeof b);
    for (size_t i = 0; i < sizeof KAT / sizeof *KAT; i++) {
        dedup_digest d = dedup_hash(b, KAT[i].len, KAT[i].seed);
        assert_int_equal(d.lo, KAT[i].lo);
        assert_int_equal(d.hi, KAT[i].hi);
    }
    /* A NULL key with length 0 is the empty input. */
    dedup_digest e = dedup_hash(NULL, 0, 0);
    assert_int_equal(e.lo, UINT64_C(0x6001C324468D497F));
    assert_int_equal(e.hi, UINT64_C(0x99AA06D3014798D8));
}

static void test_u64_is_le_bytes(void **state)
{
    (void)state;
    dedup_digest d = dedup_hash_u64(UINT64_C(0x0123456789ABCDEF), 0);
    assert_int_equal(d.lo, UINT64_C(0xDC7DA55868FEB560));
    assert_int_equal(d.hi, UINT64_C(0x9D0A16A121EDC615));
    tu_rng r = {tu_seed()};
    for (int i = 0; i < 10000; i++) {
        uint64_t k = tu_next(&r), seed = i % 3 ? tu_next(&r) : DEDUP_DEFAULT_SEED;
        unsigned char b[8];
        for (int j = 0; j < 8; j++)
            b[j] = (unsigned char)(k >> (8 * j));
        dedup_digest x = dedup_hash_u64(k, seed), y = dedup_hash(b, 8, seed);
        assert_int_equal(x.lo, y.lo);
        assert_int_equal(x.hi, y.hi);
    }
}

static void test_seed_changes_digest(void **state)
{
    (void)state;
    dedup_digest a = dedup_hash("key", 3, 1), b = dedup_hash("key", 3, 2);
    assert_true(a.lo != b.lo && a.hi != b.hi);
}

static void test_reduce(void **state)
{
    (void)state;
    assert_int_equal(dedup_reduce(UINT64_MAX, 1), 0);
    assert_int_equal(dedup_reduce(0, 12345), 0);
    assert_int_equal(dedup_reduce(UINT64_MAX, 12345), 12344);
    assert_int_equal(dedup_reduce(UINT64_MAX, UINT64_MAX), UINT64_MAX - 1);
    assert_int_equal(dedup_reduce(UINT64_C(1) << 63, 10), 5);
    /* Uniform: 1M digests into 10 bins, each within 1% of 100k. */
    uint64_t bins[10] = {0};
    for (uint64_t i = 0; i < 1000000; i++) {
        uint64_t v = dedup_reduce(dedup_hash_u64(i, 7).lo, 10);
        assert_true(v < 10);
        bins[v]++;
    }
    for (int i = 0; i < 10; i++)
        assert_true(bins[i] > 99000 && bins[i] < 101000);
}

/* Secret seeds: never 0 or the default, and 64 draws all differ (a
 * repeat among 64 uniform 64-bit values has odds of about 1e-16). */
static void test_secret_seed(void **state)
{
    (void)state;
    uint64_t seen[64];
    for (int i = 0; i < 64; i++) {
        assert_int_equal(dedup_secret_seed(&seen[i]), DEDUP_OK);
        assert_true(seen[i] != 0 && seen[i] != DEDUP_DEFAULT_SEED);
        for (int j = 0; j < i; j++)
            assert_true(seen[i] != seen[j]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_u64_is_le_bytes),
        cmocka_unit_test(test_seed_changes_digest),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_secret_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
