/*
 * keys.h - from a record to its key: field selection and normalisation.
 *
 * Normalisation changes only the key, never the record written out.  Order
 * of steps: select field -> trim -> squeeze -> strip prefix -> fold case.
 * Case folding is ASCII only (bytes >= 0x80 are kept as they are), so it is
 * locale-independent and never changes a key's length.
 */
#ifndef DEDUP_CLI_KEYS_H
#define DEDUP_CLI_KEYS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct dd_keyspec {
    size_t field;         /* 0 = whole record, else 1-based field number */
    unsigned char delim;  /* field delimiter (default TAB) */
    bool trim;            /* strip leading/trailing whitespace (space \t \r \n \v \f) */
    bool squeeze;         /* runs of whitespace count as one space */
    bool fold_case;       /* ASCII case-insensitive */
    const char *prefix;   /* removed from the start of the key when present */
    size_t prefix_len;
} dd_keyspec;

/* The key options, the same in every subcommand that reads keys (the main
 * job, split, count): one table fragment for getopt_long, their short
 * letters, their --help lines, and dd_key_option() to apply one.  The codes
 * of the long-only ones sit far above the 256.. a caller numbers its own. */
enum { DD_KEY_OPT_TRIM = 0x4b00, DD_KEY_OPT_SQUEEZE, DD_KEY_OPT_PREFIX };

#define DD_KEY_LONG_OPTIONS                                                                     \
    {"field", required_argument, NULL, 'f'}, {"delimiter", required_argument, NULL, 'd'},       \
    {"ignore-case", no_argument, NULL, 'i'}, {"trim", no_argument, NULL, DD_KEY_OPT_TRIM},      \
    {"squeeze", no_argument, NULL, DD_KEY_OPT_SQUEEZE},                                         \
    {"strip-prefix", required_argument, NULL, DD_KEY_OPT_PREFIX},                               \
    {"zero-terminated", no_argument, NULL, 'z'}

/* The short letters of DD_KEY_LONG_OPTIONS, for getopt_long's optstring. */
#define DD_KEY_SHORT_OPTIONS "f:d:iz"

/* The --help lines of the key options (-z is said with the records). */
#define DD_KEY_HELP                                                                  \
    "  -f, --field=N          key is field N (1-based) instead of the whole record\n" \
    "  -d, --delimiter=C      field delimiter (default TAB)\n"                         \
    "  -i, --ignore-case      ASCII case-insensitive keys\n"                           \
    "      --trim             ignore leading and trailing whitespace (including \\r)\n" \
    "      --squeeze          runs of whitespace compare as one space\n"               \
    "      --strip-prefix=S   ignore S at the start of keys\n"

/* The defaults: whole records, TAB-delimited fields, no normalisation. */
void dd_keyspec_init(dd_keyspec *k);

/* Applies option 'c' (a getopt_long result) with argument 'arg' when it is
 * one of the key options: -f N (1 to 1000000), -d C (one character, or the
 * two-character \t or \0), -i, --trim, --squeeze, --strip-prefix S into
 * *k, and -z into *term.  Returns 1 when it was one (applied), 0 when it is
 * not a key option (the caller's), -1 on a bad value, after an error
 * naming it, prefixed "CMD: " when 'cmd' is not NULL. */
int dd_key_option(int c, const char *arg, const char *cmd, dd_keyspec *k, unsigned char *term);

/* Writes into buf (cap bytes, always NUL-terminated when cap > 0) a
 * canonical, printable description of how keys are computed: the field and
 * delimiter, every normalisation, the record terminator and whether keys are
 * parsed as integers.  Two runs compute the same key from every record
 * exactly when their descriptions are equal, so a state file or store keeps
 * it as part of its identity and refuses a run whose description differs.
 * Returns the length the whole description needs (excluding the NUL), as
 * snprintf does. */
size_t dd_keyspec_describe(const dd_keyspec *k, unsigned char term, bool int_keys, char *buf,
                           size_t cap);

/* True when keys are whole records (no copy needed). */
bool dd_keyspec_identity(const dd_keyspec *k);

/* Computes the key of rec.  Returns a pointer either into rec or into
 * 'scratch' (which must hold at least 'len' bytes); *klen gets its length. */
const unsigned char *dd_key_of(const dd_keyspec *k, const unsigned char *rec, size_t len,
                               unsigned char *scratch, size_t *klen);

#endif
