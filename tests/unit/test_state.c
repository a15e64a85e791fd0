/*
 * test_state.c - the state container (dedup/state.h): identity and set
 * round trips, bare seen-set files, identities refused on save, and every
 * single-byte change of a state file refused on load.
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "dedup/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static dedup_seen *filled(dedup_seen_kind kind, uint64_t n)
{
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = kind;
    sp.items = 1000;
    sp.seed = tu_seed();
    dedup_seen *s = NULL;
    assert_int_equal(dedup_seen_create(&sp, NULL, &s), DEDUP_OK);
    for (uint64_t i = 0; i < n; i++) {
        char k[32];
        int len = snprintf(k, sizeof k, "key-%llu", (unsigned long long)i);
        dedup_digest d = dedup_hash(k, (size_t)len, sp.seed);
        const unsigned char *kp = (const unsigned char *)k;
        size_t kl = (size_t)len;
        dedup_batch b = {.n = 1, .digests = &d, .keys = &kp, .lens = &kl};
        dedup_verdict v;
        size_t done;
        assert_int_equal(dedup_seen_decide(s, &b, &v, &done), DEDUP_OK);
    }
    return s;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spill(const char *path, const unsigned char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
}

static void test_round_trip(void **state)
{
    (void)state;
    char p[128], ident[DEDUP_STATE_IDENT_MAX + 1];
    path_of(p, sizeof p, "s.state");
    dedup_seen_kind kinds[] = {DEDUP_SEEN_EXACT, DEDUP_SEEN_FINGERPRINT, DEDUP_SEEN_BLOCKED};
    for (size_t i = 0; i < 3; i++) {
        dedup_seen *s = filled(kinds[i], 300);
        const char *id = "keys/1 field=2 delim=2c term=0a mode=test";
        assert_int_equal(dedup_state_save(s, p, id), DEDUP_OK);
        dedup_header h;
        bool has = false;
        assert_int_equal(dedup_state_peek(p, &h, &has, ident, sizeof ident), DEDUP_OK);
        assert_true(has);
        assert_string_equal(ident, id);
        dedup_seen_info a, b;
        dedup_seen_get_info(s, &a);
        assert_int_equal(h.type, a.file_type);
        dedup_seen *t = NULL;
        has = false;
        assert_int_equal(dedup_state_load(p, NULL, NULL, &t, &has, ident, sizeof ident), DEDUP_OK);
        assert_true(has);
        assert_string_equal(ident, id);
        dedup_seen_get_info(t, &b);
        assert_int_equal(a.file_type, b.file_type);
        assert_int_equal(a.seed, b.seed);
        assert_int_equal(a.bits, b.bits);
        if (!a.probabilistic) /* a filter's count is an estimate once loaded */
            assert_int_equal(a.items, b.items);
        /* a short identity buffer gets a prefix, NUL-terminated */
        char small[5];
        dedup_seen_free(t);
        assert_int_equal(dedup_state_load(p, NULL, NULL, &t, &has, small, sizeof small), DEDUP_OK);
        assert_string_equal(small, "keys");
        dedup_seen_free(t);
        /* without an identity: the bare seen-set file */
        assert_int_equal(dedup_state_save(s, p, NULL), DEDUP_OK);
        assert_int_equal(dedup_state_peek(p, &h, &has, ident, sizeof ident), DEDUP_OK);
        assert_false(has);
        assert_string_equal(ident, "");
        assert_int_equal(dedup_state_load(p, NULL, NULL, &t, &has, NULL, 0), DEDUP_OK);
        assert_false(has);
        dedup_seen_free(t);
        dedup_seen_free(s);
    }
}

static void test_bad_identities_make_no_file(void **state)
{
    (void)state;
    char p[128];
    path_of(p, sizeof p, "bad.state");
    dedup_seen *s = filled(DEDUP_SEEN_EXACT, 10);
    char big[DEDUP_STATE_IDENT_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *bad[] = {"", "tab\there", "line\n", "\x80high", big};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dedup_state_save(s, p, bad[i]), DEDUP_ERR_INVALID_ARG);
        assert_int_equal(access(p, F_OK), -1);
    }
    big[DEDUP_STATE_IDENT_MAX] = '\0'; /* the longest one fits */
    assert_int_equal(dedup_state_save(s, p, big), DEDUP_OK);
    char ident[DEDUP_STATE_IDENT_MAX + 1];
    dedup_seen *t = NULL;
    bool has;
    assert_int_equal(dedup_state_load(p, NULL, NULL, &t, &has, ident, sizeof ident), DEDUP_OK);
    assert_string_equal(ident, big);
    dedup_seen_free(t);
    dedup_seen_free(s);
    unlink(p);
}

static void test_every_byte_changed_is_refused(void **state)
{
    (void)state;
    char p[128], q[128];
    path_of(p, sizeof p, "good.state");
    path_of(q, sizeof q, "bent.state");
    dedup_seen *s = filled(DEDUP_SEEN_EXACT, 20);
    assert_int_equal(dedup_state_save(s, p, "keys/1 mode=exact"), DEDUP_OK);
    size_t len;
    unsigned char *b = slurp(p, &len);
    for (size_t i = 0; i < len; i++) {
        b[i] ^= (unsigned char)(1u << (i % 8));
        spill(q, b, len);
        dedup_seen *t = NULL;
        bool has;
        dedup_status st = dedup_state_load(q, NULL, NULL, &t, &has, NULL, 0);
        if (st == DEDUP_OK)
            fail_msg("byte %zu of %zu changed and the state loaded", i, len);
        assert_null(t);
        b[i] ^= (unsigned char)(1u << (i % 8));
    }
    /* truncated anywhere, or a byte more */
    for (size_t n = 0; n < len; n++) {
        spill(q, b, n);
        dedup_seen *t = NULL;
        bool has;
        assert_int_not_equal(dedup_state_load(q, NULL, NULL, &t, &has, NULL, 0), DEDUP_OK);
    }
    unsigned char *more = malloc(len + 1);
    memcpy(more, b, len);
    more[len] = 0;
    spill(q, more, len + 1);
    dedup_seen *t = NULL;
    bool has;
    assert_int_equal(dedup_state_load(q, NULL, NULL, &t, &has, NULL, 0), DEDUP_ERR_TRAILING);
    free(more);
    free(b);
    dedup_seen_free(s);
    unlink(p);
    unlink(q);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_state.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_identities_make_no_file),
        cmocka_unit_test(test_every_byte_changed_is_refused),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    char p[128];
    path_of(p, sizeof p, "s.state");
    unlink(p);
    rmdir(dir);
    return r;
}
