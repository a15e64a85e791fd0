/* feeder.c - reading, splitting, keying and hashing on a second thread (see feeder.h). */
#define _GNU_SOURCE /* memrchr */
#include "feeder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "io.h" /* dd_stop_signal */

#define NSLOT 4                     /* blocks in flight: one filling, the rest queued or in use */
#define BLOCK ((size_t)1 << 20)     /* initial buffer; grows for a longer record */
#define WAIT_NS 100000000L          /* the caller looks at dd_stop_signal this often */
/* Records handed over at most in one block.  The per-record arrays cost 52
 * bytes a record: a buffer of empty records would need 52 times its size,
 * unbounded by any -m.  A buffer with more records is handed over in parts
 * (the first split where the buffer's is, the rest by the caller). */
#define REC_CAP ((size_t)16384)

typedef struct slot {
    dd_block b;
    unsigned char *buf;
    size_t cap, len;     /* buffer and the bytes in it */
    size_t used;         /* bytes the records cover (the rest starts the next block) */
    unsigned char *scratch;
    size_t scratch_cap;
    size_t rcap;         /* capacity of the per-record arrays */
    const unsigned char *piece_rec[1]; /* a piece block's one "record" */
    size_t piece_len[1];
    unsigned char *arrays; /* their one allocation */
    bool split_done;     /* records found (else the caller splits the block) */
    bool hashed;         /* digests computed (else the caller computes them) */
    size_t tail;         /* at the end of the input: a last record without terminator */
    size_t next;         /* where the next part's records start (REC_CAP) */
    bool tail_done;      /* the tail is in a part already */
    bool more;           /* records past the part handed over remain */
    dedup_csv_scan scan; /* CSV: the splitter's state at 'scanned' */
    size_t scanned;      /* CSV: bytes of buf scanned for record ends */
    unsigned char **old_scratch; /* scratch chunks outgrown during this block */
    size_t n_old;
} slot;

struct dd_feeder {
    int fd;
    bool own_fd, regular;
    const char *name;
    dd_feeder_opts o;
    dd_keyspec key;
    const dedup_key *kc; /* the compiled key */
    bool identity, csv;
    bool header_done;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv_prod, cv_cons;
    slot s[NSLOT];
    /* counters under mu: blocks published, handed to the caller, released by it */
    uint64_t produced, taken, released;
    bool done, stop;
    int error;
    uint64_t bytes_read; /* producer's own */
};

/* The per-record arrays live in one allocation, digests first (16-byte
 * aligned), then the pointers and lengths; the first 'keep' entries move
 * along. */
static bool grow_records(slot *s, size_t need, size_t keep)
{
    if (need <= s->rcap)
        return true;
    size_t nc = s->rcap ? s->rcap : 4096;
    while (nc < need)
        nc *= 2;
    size_t per = sizeof(dedup_digest) + 2 * sizeof(unsigned char *) + 2 * sizeof(size_t) +
                 sizeof(dedup_verdict);
    unsigned char *a = malloc(nc * per);
    if (!a)
        return false;
    dd_block old = s->b;
    s->b.dig = (dedup_digest *)(void *)a;
    s->b.rec = (const unsigned char **)(void *)(a + nc * sizeof(dedup_digest));
    s->b.key = s->b.rec + nc;
    s->b.rlen = (size_t *)(void *)(s->b.key + nc);
    s->b.klen = s->b.rlen + nc;
    s->b.verdict = (dedup_verdict *)(void *)(s->b.klen + nc);
    if (keep) {
        memcpy(s->b.dig, old.dig, keep * sizeof *old.dig);
        memcpy(s->b.rec, old.rec, keep * sizeof *old.rec);
        memcpy(s->b.key, old.key, keep * sizeof *old.key);
        memcpy(s->b.rlen, old.rlen, keep * sizeof *old.rlen);
        memcpy(s->b.klen, old.klen, keep * sizeof *old.klen);
        memcpy(s->b.verdict, old.verdict, keep * sizeof *old.verdict);
    }
    free(s->arrays);
    s->arrays = a;
    s->rcap = nc;
    return true;
}

/* The key of record p[0..len) as record n of the slot (see key_into);
 * with 'find_end' the record is the one at the front of p[0..len), which
 * ends at a terminator there: *rec_len gets its length (dedup_key_of_next
 * finds the end and the key in one pass). */
static bool key_into_next(dd_feeder *f, slot *s, const unsigned char *p, size_t len,
                          bool find_end, size_t *rec_len, size_t *off, size_t n)
{
    for (;;) {
        const unsigned char *k = NULL;
        size_t kl = 0;
        dedup_status st =
            find_end ? dedup_key_of_next(f->kc, p, len, f->o.term, rec_len, s->scratch + *off,
                                         s->scratch_cap - *off, &k, &kl)
                     : dedup_key_of(f->kc, p, len, s->scratch + *off, s->scratch_cap - *off, &k,
                                    &kl);
        if (st == DEDUP_ERR_FULL) {
            unsigned char **no = realloc(s->old_scratch, (s->n_old + 1) * sizeof *no);
            if (!no)
                return false;
            s->old_scratch = no;
            size_t nc = kl > BLOCK ? kl : BLOCK;
            unsigned char *ns = malloc(nc);
            if (!ns)
                return false;
            s->old_scratch[s->n_old++] = s->scratch;
            s->scratch = ns;
            s->scratch_cap = nc;
            *off = 0;
            continue;
        }
        if (st) {
            s->b.key[n] = NULL;
            s->b.klen[n] = (size_t)st;
        } else {
            s->b.key[n] = k;
            s->b.klen[n] = kl;
            if (k >= s->scratch && k < s->scratch + s->scratch_cap)
                *off = (size_t)(k - s->scratch) + kl;
        }
        return true;
    }
}

/* The key of record p[0..len) as record n of the slot, written at
 * scratch + *off when it is not a range of the record; a new scratch chunk
 * when the key does not fit (the old one stays until the slot is split
 * again: earlier keys point into it).  A record without a key gets key NULL
 * and its dedup_status in klen.  False when out of memory. */
static bool key_into(dd_feeder *f, slot *s, const unsigned char *p, size_t len, size_t *off,
                     size_t n)
{
    return key_into_next(f, s, p, len, false, NULL, off, n);
}

/* Splits s->buf[0, used) (plus a last unterminated record of 'tail' bytes
 * when the input ended) into records and keys, and digests them when
 * 'hash' (otherwise the caller's thread does, see dd_feeder_next). */
static bool split(dd_feeder *f, slot *s, bool hash)
{
    if (s->arrays) { /* a piece block pointed these elsewhere */
        s->b.rec = (const unsigned char **)(void *)(s->arrays + s->rcap * sizeof(dedup_digest));
        s->b.rlen = (size_t *)(void *)(s->b.rec + 2 * s->rcap);
    }
    unsigned char *p = s->buf + s->next, *end = s->buf + s->used;
    size_t tail = s->tail_done ? 0 : s->tail;
    size_t n = 0;
    for (size_t i = 0; i < s->n_old; i++)
        free(s->old_scratch[i]);
    s->n_old = 0;
    if (!f->identity && s->scratch_cap < s->used + tail) {
        unsigned char *ns = realloc(s->scratch, s->used + tail);
        if (!ns)
            return false;
        s->scratch = ns;
        s->scratch_cap = s->used + tail;
    }
    size_t off = 0;
    dedup_csv_scan cs;
    dedup_csv_scan_init(&cs);
    for (;;) {
        unsigned char *q;
        size_t len;
        if (n == REC_CAP) {
            break;
        } else if (p < end && f->csv && !f->identity) {
            /* the record's end and its key in one pass */
            if (n == s->rcap && !grow_records(s, n + 1, n))
                return false;
            if (!key_into_next(f, s, p, (size_t)(end - p), true, &len, &off, n))
                return false;
            q = p + len;
            s->b.rec[n] = p;
            s->b.rlen[n] = len;
            if (hash && s->b.key[n])
                s->b.dig[n] = dedup_hash(s->b.key[n], s->b.klen[n], f->o.seed);
            n++;
            p = q + 1;
            continue;
        } else if (p < end && f->csv) {
            size_t e, ne;
            (void)dedup_csv_scan_block(&cs, p, (size_t)(end - p), f->key.delim, f->o.term, &e, 1,
                                       &ne);
            q = p + e - 1; /* 'used' ends after a record: there is one */
            len = (size_t)(q - p);
        } else if (p < end) {
            q = memchr(p, f->o.term, (size_t)(end - p));
            len = (size_t)(q - p);
        } else if (tail) {
            q = p + tail;
            len = tail;
            tail = 0;
            s->tail_done = true;
        } else {
            break;
        }
        if (n == s->rcap && !grow_records(s, n + 1, n))
            return false;
        s->b.rec[n] = p;
        s->b.rlen[n] = len;
        if (f->identity) {
            s->b.key[n] = p;
            s->b.klen[n] = len;
        } else if (!key_into(f, s, p, len, &off, n)) {
            return false;
        }
        if (hash && s->b.key[n])
            s->b.dig[n] = dedup_hash(s->b.key[n], s->b.klen[n], f->o.seed);
        n++;
        p = q + 1;
    }
    s->b.n = n;
    s->next = (size_t)(p - s->buf);
    s->more = p < end || tail;
    s->hashed = hash || !f->o.hash;
    s->split_done = true;
    return true;
}

/* A slot filled anew: its records start at the front. */
static void slot_reset(slot *s)
{
    s->next = 0;
    s->tail_done = false;
    s->more = false;
}

static void publish(dd_feeder *f, slot *s, bool last, int err)
{
    pthread_mutex_lock(&f->mu);
    s->b.bytes_read = f->bytes_read;
    if (s->b.piece || (s->split_done ? s->b.n > 0 : s->used + s->tail > 0))
        f->produced++;
    if (last) {
        f->done = true;
        f->error = err;
    }
    pthread_cond_signal(&f->cv_cons);
    pthread_mutex_unlock(&f->mu);
}

/* The feeder of a mapped input (opts.mapped): blocks are windows of the
 * mapping, cut after the last terminator within BLOCK bytes (after the
 * first one past it for a longer record). */
static void *mapped_main(dd_feeder *f)
{
    const unsigned char *m = f->o.map, *end = m + f->o.map_len;
    const unsigned char *p = m;
    for (;;) {
        pthread_mutex_lock(&f->mu);
        while (f->produced - f->released >= NSLOT && !f->stop)
            pthread_cond_wait(&f->cv_prod, &f->mu);
        bool stop = f->stop;
        slot *s = &f->s[f->produced % NSLOT];
        pthread_mutex_unlock(&f->mu);
        if (stop)
            return NULL;
        size_t left = (size_t)(end - p), want = left < BLOCK ? left : BLOCK;
        const unsigned char *t = want ? memrchr(p, f->o.term, want) : NULL;
        if (!t && want < left)
            t = memchr(p + want, f->o.term, left - want);
        size_t used = t ? (size_t)(t - p) + 1 : 0;
        bool eof = !t || (size_t)(t - p) + 1 == left;
        if (!t && want == left)
            used = 0; /* the rest is one last record without terminator */
        s->buf = (unsigned char *)(uintptr_t)p; /* read only: split() only reads it */
        s->cap = 0;
        s->used = used;
        s->len = eof ? left : used;
        s->tail = eof ? left - used : 0;
        s->b.piece = 0;
        slot_reset(s);
        pthread_mutex_lock(&f->mu);
        bool caller_busy = f->produced > f->taken;
        pthread_mutex_unlock(&f->mu);
        s->split_done = false;
        s->hashed = false;
        s->b.work = 0;
        int err = 0;
        /* With work to do here, this thread splits and hashes every block:
         * the work needs the digests, and the caller has its own half. */
        if ((caller_busy || f->o.work) && !split(f, s, f->o.hash)) {
            err = ENOMEM;
            s->used = s->tail = 0;
            s->b.n = 0;
            s->split_done = true;
        }
        if (!err && f->o.work && s->more) {
            /* The work sees whole blocks: this one ends after REC_CAP
             * records, the next starts there. */
            s->used = s->len = s->next;
            s->tail = 0;
            s->more = false;
            eof = false;
        }
        f->bytes_read += s->len;
        p += s->len;
        if (!err && f->o.work && s->b.n)
            s->b.work = f->o.work(f->o.work_ctx, &s->b);
        publish(f, s, eof || err, err);
        if (eof || err)
            return NULL;
    }
}

/* The input's first record, s->buf's first: given to the header callback
 * and skipped.  False when the callback refuses it. */
static bool take_header(dd_feeder *f, slot *s)
{
    f->header_done = true;
    size_t end, next;
    if (s->used) {
        size_t e = 0, ne;
        if (f->csv) {
            dedup_csv_scan cs;
            dedup_csv_scan_init(&cs);
            (void)dedup_csv_scan_block(&cs, s->buf, s->used, f->key.delim, f->o.term, &e, 1, &ne);
        } else {
            e = (size_t)((unsigned char *)memchr(s->buf, f->o.term, s->used) - s->buf) + 1;
        }
        end = e - 1;
        next = e;
    } else {
        end = next = s->tail; /* the input is the header alone */
        s->tail_done = true;
    }
    const dedup_key *k = f->o.header(f->o.header_ctx, s->buf, end);
    if (!k)
        return false;
    f->kc = k;
    f->identity = dedup_key_is_identity(k);
    s->next = next;
    return true;
}

static void *feeder_main(void *arg)
{
    dd_feeder *f = arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    sigset_t all;
    sigfillset(&all);
    sigdelset(&all, SIGBUS); /* a mapped input cut shorter: byref.c's handler says so */
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    if (f->o.mapped)
        return mapped_main(f);

    slot *prev = NULL;
    bool in_giant = false; /* handing over a long record in pieces */
    for (;;) {
        pthread_mutex_lock(&f->mu);
        while (f->produced - f->released >= NSLOT && !f->stop)
            pthread_cond_wait(&f->cv_prod, &f->mu);
        bool stop = f->stop;
        slot *s = &f->s[f->produced % NSLOT];
        pthread_mutex_unlock(&f->mu);
        if (stop)
            return NULL;

        /* The partial record the previous block ended with comes first.  The
         * previous buffer is only ever read by the caller, and this thread
         * rewrites it no sooner than NSLOT blocks later. */
        size_t carry = prev ? prev->len - prev->used : 0;
        /* Room for the carry and as much again; with pieces a buffer never
         * grows (a carry that fills it is handed over as a piece). */
        size_t want = carry * 2 > BLOCK && !f->o.pieces ? carry * 2 : BLOCK;
        if (s->cap < want) {
            free(s->buf);
            s->buf = malloc(want);
            s->cap = s->buf ? want : 0;
            if (!s->buf) {
                s->b.n = 0;
                publish(f, s, true, ENOMEM);
                return NULL;
            }
        }
        if (carry)
            memcpy(s->buf, prev->buf + prev->used, carry);
        dedup_csv_scan_init(&s->scan);
        s->scanned = 0;
        s->len = carry;
        s->used = 0;
        s->b.piece = 0;
        slot_reset(s);
        if (carry && prev->b.piece) {
            /* After the last piece of a long record the bytes carried over
             * may hold whole records already. */
            unsigned char *t = memrchr(s->buf, f->o.term, carry);
            if (t)
                s->used = (size_t)(t - s->buf) + 1;
        }
        bool eof = false, full = false;
        int err = 0;
        for (;;) {
            if (s->len == s->cap) {
                if (s->used)
                    break; /* full: publish, the rest moves on */
                if (f->o.pieces) {
                    full = true; /* one record fills the buffer: hand it over as a piece */
                    break;
                }
                /* One record fills the whole buffer: grow it. */
                unsigned char *nb = realloc(s->buf, s->cap * 2);
                if (!nb) {
                    err = ENOMEM;
                    break;
                }
                s->buf = nb;
                s->cap *= 2;
            }
            pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
            ssize_t r = read(f->fd, s->buf + s->len, s->cap - s->len);
            int e = errno;
            pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
            if (r < 0) {
                if (e == EINTR)
                    continue;
                err = e;
                break;
            }
            if (r == 0) {
                eof = true;
                break;
            }
            /* In a long record only its end matters: the first terminator. */
            unsigned char *t = f->csv ? NULL
                             : in_giant ? memchr(s->buf + s->len, f->o.term, (size_t)r)
                                        : memrchr(s->buf + s->len, f->o.term, (size_t)r);
            s->len += (size_t)r;
            if (f->csv) {
                /* Record ends are terminators outside quotes: the splitter
                 * goes on over the new bytes (and a carried record's). */
                size_t e = dedup_csv_scan_block(&s->scan, s->buf + s->scanned,
                                                s->len - s->scanned, f->key.delim, f->o.term,
                                                NULL, 0, NULL);
                if (e)
                    t = s->buf + s->scanned + e - 1;
                s->scanned = s->len;
            }
            f->bytes_read += (uint64_t)r;
            if (t)
                s->used = (size_t)(t - s->buf) + 1;
            if (in_giant && t)
                break;
            if (!f->regular && s->used)
                break; /* a pipe: decide what came without waiting for more */
        }
        if (!err && (in_giant || full)) {
            /* A piece of a long record: up to its terminator (the rest starts
             * the next block), to the end of the input, or the full buffer. */
            bool last = in_giant && (s->used || eof);
            s->b.piece = DD_PIECE | (in_giant ? 0u : DD_PIECE_FIRST) | (last ? DD_PIECE_LAST : 0u);
            s->b.rec = s->piece_rec;
            s->b.rlen = s->piece_len;
            s->piece_rec[0] = s->buf;
            s->piece_len[0] = s->used ? s->used - 1 : s->len;
            s->b.n = 1;
            s->hashed = s->split_done = true; /* pieces have no digest: the engine streams one */
            if (!s->used || eof)
                s->used = s->len;
            in_giant = !last;
            eof = eof && s->used == s->len;
            publish(f, s, eof, 0);
            if (eof)
                return NULL;
            prev = s;
            continue;
        }
        /* After a read error the complete records before it still count. */
        s->tail = eof ? s->len - s->used : 0;
        if (!err && !f->header_done && f->o.header && (s->used || s->tail) && !take_header(f, s)) {
            s->used = s->tail = 0;
            s->b.n = 0;
            s->split_done = true;
            publish(f, s, true, -1);
            return NULL;
        }
        /* Splitting and hashing are done by whichever thread has time: here
         * when the caller still has blocks queued (it is the slower side),
         * by the caller when it is waiting for this one. */
        pthread_mutex_lock(&f->mu);
        bool caller_busy = f->produced > f->taken;
        pthread_mutex_unlock(&f->mu);
        s->split_done = false;
        s->hashed = false;
        if (caller_busy && !split(f, s, f->o.hash)) {
            err = ENOMEM;
            s->used = s->tail = 0;
            s->b.n = 0;
            s->split_done = true;
        }
        publish(f, s, eof || err, err);
        if (eof || err)
            return NULL;
        prev = s;
    }
}

int dd_feeder_open(dd_feeder **out, const char *path, const dd_feeder_opts *o)
{
    *out = NULL;
    dd_feeder *f = calloc(1, sizeof *f);
    if (!f)
        return ENOMEM;
    f->o = *o;
    f->key = *o->key;
    f->kc = o->key->compiled;
    f->csv = o->key->csv && !o->mapped;
    f->identity = !o->key->header && dd_keyspec_identity(o->key);
    f->name = path;
    if (o->mapped) {
        f->fd = -1;
        if (strcmp(path, "-") == 0)
            f->name = "(standard input)";
    } else if (strcmp(path, "-") == 0) {
        f->fd = STDIN_FILENO;
        f->name = "(standard input)";
    } else {
        f->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) {
            int e = errno;
            free(f);
            return e;
        }
        f->own_fd = true;
#ifdef POSIX_FADV_SEQUENTIAL
        (void)posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    }
    struct stat st;
    f->regular = o->mapped || (fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode));
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv_prod, NULL);
    cli_cond_init(&f->cv_cons);
    int e = pthread_create(&f->th, NULL, feeder_main, f);
    if (e) {
        dd_feeder_close(f);
        return e;
    }
    f->started = true;
    *out = f;
    return 0;
}

const dd_block *dd_feeder_next(dd_feeder *f)
{
    pthread_mutex_lock(&f->mu);
    if (f->taken > f->released) {
        slot *held = &f->s[(f->taken - 1) % NSLOT];
        if (held->more && !dd_stop_signal) {
            /* The next part of the buffer the caller holds. */
            pthread_mutex_unlock(&f->mu);
            if (!split(f, held, f->o.hash)) {
                pthread_mutex_lock(&f->mu);
                f->error = ENOMEM;
                f->done = true;
                pthread_mutex_unlock(&f->mu);
                return NULL;
            }
            return &held->b;
        }
        f->released++;
        pthread_cond_signal(&f->cv_prod);
    }
    while (f->produced == f->taken && !f->done && !dd_stop_signal)
        cli_cond_wait_ns(&f->cv_cons, &f->mu, WAIT_NS);
    slot *s = NULL;
    if (f->produced > f->taken && !dd_stop_signal) {
        s = &f->s[f->taken % NSLOT];
        f->taken++;
    }
    pthread_mutex_unlock(&f->mu);
    if (!s)
        return NULL;
    if (!s->split_done) {
        if (!split(f, s, f->o.hash)) {
            pthread_mutex_lock(&f->mu);
            f->error = ENOMEM;
            f->done = true;
            pthread_mutex_unlock(&f->mu);
            return NULL;
        }
    } else if (!s->hashed) {
        for (size_t i = 0; i < s->b.n; i++)
            if (s->b.key[i])
                s->b.dig[i] = dedup_hash(s->b.key[i], s->b.klen[i], f->o.seed);
        s->hashed = true;
    }
    return &s->b;
}

int dd_feeder_error(const dd_feeder *f)
{
    dd_feeder *m = (dd_feeder *)f;
    pthread_mutex_lock(&m->mu);
    int e = m->error;
    pthread_mutex_unlock(&m->mu);
    return e;
}

const char *dd_feeder_name(const dd_feeder *f) { return f->name; }

void dd_feeder_close(dd_feeder *f)
{
    if (!f)
        return;
    if (f->started) {
        pthread_mutex_lock(&f->mu);
        f->stop = true;
        pthread_cond_broadcast(&f->cv_prod);
        bool done = f->done;
        pthread_mutex_unlock(&f->mu);
        if (!done)
            pthread_cancel(f->th); /* it may be blocked in read() on a pipe */
        pthread_join(f->th, NULL);
    }
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv_prod);
    pthread_cond_destroy(&f->cv_cons);
    if (f->own_fd)
        close(f->fd);
    for (int i = 0; i < NSLOT; i++) {
        slot *s = &f->s[i];
        if (!f->o.mapped)
            free(s->buf);
        free(s->scratch);
        for (size_t j = 0; j < s->n_old; j++)
            free(s->old_scratch[j]);
        free(s->old_scratch);
        free(s->arrays);
    }
    free(f);
}
