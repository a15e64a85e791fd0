/*
 * intkeys.h - integer keys: from a key's bytes to a 64-bit integer, and what
 * to do with a key that is not one (--keys int, --on-bad-key).
 *
 * A key is an integer when it is decimal digits (at most 20, value below
 * 2^64) or "0x"/"0X" followed by 1 to 16 hexadecimal digits, nothing else:
 * no sign, no spaces (--trim removes those first, as for any key), no
 * empty key.  Leading zeros are allowed ("007" is 7, so it is a duplicate
 * of "7": the integer is the key).
 */
#ifndef DEDUP_CLI_INTKEYS_H
#define DEDUP_CLI_INTKEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "seen_spec.h"

typedef enum dd_bad_key {
    DD_BAD_KEY_FAIL = 0, /* stop before any output of it, naming file, line and value */
    DD_BAD_KEY_SKIP = 1, /* drop the record */
    DD_BAD_KEY_KEEP = 2  /* write the record, undecided */
} dd_bad_key;

/* True with *out set when the 'len' bytes at 'k' are an integer as above. */
bool dd_int_key(const unsigned char *k, size_t len, uint64_t *out);

/* "fail", "skip", "keep" -> the policy; false for anything else. */
bool dd_bad_key_from_name(const char *name, dd_bad_key *out);

/* Writes the first 'cap' - 1 bytes at most of a bad key into 'buf' for a
 * message, control bytes and bytes >= 0x80 as \xHH, and "..." when cut.
 * Returns buf. */
const char *dd_key_for_message(const unsigned char *k, size_t len, char *buf, size_t cap);

/* "LO..HI", each decimal or 0x-hex, LO <= HI.  False on anything else. */
bool dd_int_range(const char *s, uint64_t *lo, uint64_t *hi);

/* The method options of an integer-key run, checked before any work:
 * --mode exact is the 64-bit integer set (DEDUP_SEEN_U64), bitmap one bit
 * per value of --range (refused, with the bytes it would need, past -m or
 * the bitmap's 2^40-bit limit; any LO..HI, with --state too: the file
 * keeps the range, and resuming checks it in dd_seen_load), roaring the
 * component (when built).  --range, --on-bad-key and those modes without
 * --keys int are refused.  'state' (the --state path or NULL) is not needed
 * by any check today.  True with *kind set, or false with a sentence for
 * the user in msg. */
bool dd_int_keys_check(bool int_keys, const char *mode, bool range_given, bool bad_key_given,
                       const dd_seen_opts *sizing, const char *state, char *msg, size_t cap,
                       dedup_seen_kind *kind);

#endif
