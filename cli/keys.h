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

/* True when keys are whole records (no copy needed). */
bool dd_keyspec_identity(const dd_keyspec *k);

/* Computes the key of rec.  Returns a pointer either into rec or into
 * 'scratch' (which must hold at least 'len' bytes); *klen gets its length. */
const unsigned char *dd_key_of(const dd_keyspec *k, const unsigned char *rec, size_t len,
                               unsigned char *scratch, size_t *klen);

#endif
