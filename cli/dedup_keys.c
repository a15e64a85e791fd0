/* dedup_keys.c - the main job's keys from records that may lack one (CSV,
 * JSON, URLs) and its --header: messages naming file and line, the
 * --on-bad-key policy, the header written once (see dedup_run.h). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dedup_run.h"
#include "intkeys.h"

/* Lines the records [0, n) of the batch take: one each, and in CSV the
 * newlines inside their quoted fields. */
uint64_t dd_run_batch_lines(const run *r, size_t n)
{
    uint64_t l = n;
    if (r->o->key.csv)
        for (size_t i = 0; i < n; i++)
            for (const unsigned char *p = r->rec[i], *e = p + r->rlen[i];
                 (p = memchr(p, r->o->term, (size_t)(e - p))) != NULL; p++)
                l++;
    return l;
}

/* A record without a key (dedup/key.h: malformed CSV, ...): false after an
 * error naming its file and line when --on-bad-key is fail; else dropped
 * or written undecided. */
bool dd_run_bad_key(run *r, size_t i)
{
    opts *o = r->o;
    r->bad_keys++;
    if (o->bad_key == DD_BAD_KEY_FAIL) {
        char val[80], why[160];
        dd_key_for_message(r->rec[i], r->rlen[i], val, sizeof val);
        cli_error("%s:%llu: %s: '%s' (--on-bad-key skip or keep lets the run go on)",
                  r->file_name, (unsigned long long)(r->file_lines + dd_run_batch_lines(r, i) + 1),
                  dd_key_problem_text(&o->key, r->rec[i], r->rlen[i], (dedup_status)r->klen[i],
                                      why, sizeof why),
                  val);
        r->failed = true;
        return false;
    }
    r->records_in++;
    if (o->bad_key == DD_BAD_KEY_KEEP) {
        r->records_out++;
        if (!dd_writer_record(&r->w, r->rec[i], r->rlen[i], o->term))
            return false;
    }
    return true;
}

/* Whether a record's key may fail (dedup/key.h's per-record errors). */
bool dd_run_key_errs(const opts *o) { return o->key.csv || o->key.json || o->key.url; }

/* The header callback of the feeder (--header): the first file's header
 * compiles the key and is kept to be written once; every later file's
 * must be the same. */
const dedup_key *dd_run_on_header(void *ctx, const unsigned char *rec, size_t len)
{
    run *r = ctx;
    uint64_t nl = 0;
    for (size_t i = 0; i < len; i++)
        nl += rec[i] == r->o->term;
    r->file_lines = r->hdr_lines = 1 + nl;
    if (!r->hdr_seen) {
        r->hdr = malloc(len ? len : 1);
        if (!r->hdr) {
            cli_error("out of memory");
            r->hdr_failed = true;
            return NULL;
        }
        memcpy(r->hdr, rec, len);
        r->hdr_len = len;
        r->hdr_file = r->file_name;
        r->hdr_seen = true;
        if (!dd_keyspec_compile(&r->o->key, rec, len, r->file_name) ||
            (r->o->time_field && (r->o->key.csv || r->o->time_field == SIZE_MAX) &&
             !dd_time_key_compile(&r->o->key, r->o->time_spec, rec, len, r->file_name,
                                  &r->o->time_key))) {
            r->hdr_failed = true;
            return NULL;
        }
        return r->o->key.compiled;
    }
    if (len != r->hdr_len || memcmp(rec, r->hdr, len) != 0) {
        cli_error("%s: its header (line 1) differs from %s's: the fields would not be the same "
                  "columns",
                  r->file_name, r->hdr_file);
        r->hdr_failed = true;
        return NULL;
    }
    return r->o->key.compiled;
}

/* Writes the header once, before the first record. */
bool dd_run_write_header(run *r)
{
    if (!r->hdr_seen || r->hdr_written || r->hdr_failed)
        return true;
    r->hdr_written = true;
    return dd_writer_record(&r->w, r->hdr, r->hdr_len, r->o->term);
}

