/*
 * dedup/redis.h - Redis and Redis Cluster as a seen-set (component
 * libdedup_redis, built on hiredis; libdedup itself has no network code).
 *
 * Conventions, libdedup's own (dedup/common.h) and the same in every
 * component (dedup/store.h, dedup/redis.h, dedup/roaring.h):
 *  - dedup_X_params p; dedup_X_params_init(&p); fill in what you need;
 *    dedup_X_create(&p, alloc_or_NULL, &x, why, whycap) makes the object
 *    and dedup_X_free(x) releases it, dedup_X_free(NULL) a no-op.
 *  - Every call that can fail returns a dedup_status (dedup_strerror()
 *    names it).  A text buffer for the reason is 'char *why, size_t whycap'
 *    (why may be NULL; the sentence is cut to whycap bytes, NUL included);
 *    once the object exists, dedup_X_last_error(x) gives the sentence of
 *    its last failure ("" if none, never NULL).
 *  - dedup_X_as_seen(x, alloc, &seen) wraps the object as a seen-set
 *    (dedup/seen.h), which owns it from then on.
 *  - No global state, no printing, no exit.  The library libdedup_X
 *    exports dedup_* only; a program builds with
 *    `pkg-config --cflags --libs dedup-X`.
 * Here X is redis.
 *
 * Many processes on many machines agree on "seen before?" through one Redis
 * server or one Redis Cluster.  The remote set answers the same verb as
 * every local kind (dedup/seen.h, kind DEDUP_SEEN_REDIS):
 *
 *   dedup_redis_params o; dedup_redis_params_init(&o);
 *   o.url = "redis://127.0.0.1:6379/0"; o.scheme = DEDUP_REDIS_KEYS;
 *   dedup_redis *r; char why[256];
 *   st = dedup_redis_create(&o, NULL, &r, why, sizeof why);   connects now
 *   st = dedup_redis_decide(r, &batch, verdicts, &done);     pipelined
 *   ... write the records answered NEW ...
 *   st = dedup_redis_commit(r, &batch);                      see "Reserve"
 *   dedup_redis_free(r);
 *
 * or wrapped as a dedup_seen (dedup_redis_as_seen()).
 *
 * URLs.  "redis://[user:pass@]host:port[/db]" names one server;
 * "redis-cluster://[user:pass@]host:port[,host:port...]" names a cluster by
 * one or more seed nodes (db must be 0 or absent there).  "user:" may be
 * empty ("redis://:pass@h:p") for the default user.  host is a name or an
 * IPv4 address; port 1..65535 (default 6379); db 0..(2^31-1).  A redis://
 * URL naming a cluster node, or a redis-cluster:// URL naming a server
 * without cluster support, is refused at open with a sentence saying so.
 * "rediss://" and "rediss-cluster://" are the same over TLS (OpenSSL):
 * every node, those MOVED and ASK name and every reconnection included;
 * see the tls_* parameters.  A password is better given in the params'
 * 'password' than in the URL, which other users may see (ps); messages
 * show a URL's password as "***" (dedup_redis_url_redact()).
 * "redis-sentinel://[user:pass@]host:port[,host:port...]/MASTER[/db]" names
 * the master that Redis Sentinel calls MASTER, through one or more
 * sentinels (port default 26379; see "Sentinel" below).
 *
 * Schemes (the layout of the remote set):
 *  - DEDUP_REDIS_KEYS: exact.  One Redis string per seen key, named
 *    "<name>:" + the 16 bytes of the digest (lo then hi, little-endian), or
 *    "<name>:" + the key bytes when whole_keys is set (exact even against
 *    digest collisions, at the keys' size).  Recorded with
 *    SET key <value> NX GET [PX ms] (Redis 7.0 or later): nil says NEW (it
 *    was absent and is now set), the old value DUPLICATE.  The values are
 *    "4217" (reserved, see "Reserve, then commit") and "4219" (recorded);
 *    under a name whose seed is DEDUP_DEFAULT_SEED also "1" (older
 *    versions).  Any other value, or another type (WRONGTYPE), is a key
 *    that is not ours: DEDUP_ERR_WRONG_TYPE naming it, never "seen".
 *    A metadata hash "<name>:meta" (field "shape") holds
 *    "scheme=keys v=1 seed=S sum=H", written by the first client (HSETNX)
 *    and read by every one.
 *  - DEDUP_REDIS_BITMAP: a blocked Bloom filter (dedup/bloom.h's blocked
 *    layout: block = reduce(lo, blocks), positions (hi * salt_i) >> 55) on
 *    plain Redis strings, for servers without modules.  Sized from (items,
 *    fpr) with dedup_blocked_bits_for/k_for, exactly as `dedup calc` does.
 *    Blocks are split over 'segments' keys "<name>:{<name>:s<i>}:g<gen>",
 *    each at most 2^32 bits (Redis' 512 MB string limit); the hash tag puts
 *    all generations of a segment in one slot and spreads segments over the
 *    slots.  A batch is tested-and-set atomically per segment in one
 *    command: without ttl_ms one BITFIELD (its SET u1 returns the old bit,
 *    in order), with ttl_ms one Lua script over the segment's live
 *    generations (EVALSHA; EVAL when the server answers NOSCRIPT, e.g.
 *    after a failover), its keys passed in KEYS.  Decisions equal those of a local
 *    blocked filter of the same bits, k and seed, fed the same keys in the
 *    same order (by one client).  A metadata hash "<name>:meta" holds
 *    version, bits, k, seed, segments, generation length and count; a
 *    client whose parameters differ is refused (DEDUP_ERR_INCOMPATIBLE)
 *    with both values named.  Format 2 (created by this version) ends the
 *    shape with a checksum, and without ttl_ms each segment holds a
 *    sentinel byte just past its blocks, written before the metadata: a
 *    segment without it (deleted, evicted, recreated empty, or not ours)
 *    is DEDUP_ERR_CORRUPT naming it, at open or at the batch that meets it.
 *    Format 1 names (no checksum, no sentinels) are still read.
 *
 * Metadata (keys and bitmap).  The shape text is parsed strictly (it must
 * be exactly what this version writes) and, from the formats above on,
 * checked against its " sum=" (XXH3 of the text): damage is
 * DEDUP_ERR_CHECKSUM or CORRUPT naming the key, never another shape.
 * With secret_seed a new name is created with a random seed from the OS
 * (getrandom), and every client takes the stored seed (the first HSETNX
 * wins a race of first clients; all read it back); without it 'seed'
 * creates the name and must equal the stored one.  A known seed lets its
 * holder craft keys sharing a digest (the later one dropped as a repeat).  With ttl_ms, segments exist per generation of
 *    ttl_ms / generations; each generation's keys expire (PEXPIREAT) ttl_ms
 *    after it ends, a key is recorded in the current generation and found in
 *    any live one, so it is remembered at least ttl_ms and at most
 *    ttl_ms * (1 + 1/generations).  Generations follow the clients' clocks,
 *    which must agree to well within a generation.
 *  - DEDUP_REDIS_MODULE: a filter module's commands: this project's module
 *    (build/dedup_redis.so) or RedisBloom.  One logical filter is split
 *    into S 'shards' keys "<name>:{<name>:f<i>}" (the hash tag spreads them
 *    over a cluster's slots), an item routed to shard reduce(hi, S) by its
 *    digest, so a filter may be larger than one node's memory.  The item
 *    sent is the 16-byte digest.  S is derived from the filter's size: the
 *    bytes of a local filter of the same kind for (items, fpr)
 *    (dedup_seen_bytes_for()), one shard per 64 MiB or part of it, and on a
 *    cluster at least 4 per master, at most 65536; or 'shards'.  Each shard
 *    is reserved if absent for items/S + 4 * sqrt(items/S) + 16 keys (the
 *    binomial spread of the keys over the shards stays inside).
 *    'filter' picks the module's structure:
 *      bloom (default): BF.RESERVE key fpr capacity, BF.MADD, BF.MEXISTS.
 *      cuckoo: CF.RESERVE key capacity, CF.INSERTNX key NOCREATE ITEMS ...
 *        (1 NEW, 0 MAYBE_DUPLICATE, -1 a full shard: DEDUP_ERR_FULL),
 *        CF.MEXISTS; and dedup_redis_delete() (CF.DEL).  The cuckoo's
 *        false-positive rate is the server's: the fingerprint size comes
 *        from the module's configuration (this project's module: its
 *        CF_ERROR_RATE argument, 1% by default; RedisBloom: 8-bit
 *        fingerprints), not from 'fpr', which is kept in the metadata only.
 *    With ttl_ms (bloom only) the shards are this project's expiring
 *    filters instead (DEDUP.RESERVE key ttl_ms fpr capacity, DEDUP.MADD,
 *    DEDUP.EXISTS): a key is remembered for the window ttl_ms; RedisBloom
 *    has no such command (DEDUP_ERR_UNSUPPORTED at open).
 *    A metadata hash "<name>:meta" (field "shape") holds the format version,
 *    filter, S, items, fpr, seed and ttl_ms and a checksum, written by the
 *    first client (HSETNX, after it reserved the shards) and read by every
 *    one, so all clients route keys to the same shards.  A client giving
 *    items must give the stored items, fpr, ttl_ms, and filter and shards
 *    when it sets them (0 = any): else DEDUP_ERR_INCOMPATIBLE naming both
 *    shapes.  A client giving items = 0 adopts the stored shape
 *    (DEDUP_ERR_NOT_FOUND when there is none); its ttl_ms, filter and
 *    shards must still match when set.  Seed: a client with secret_seed
 *    creates a filter with a random seed from the OS and adopts a stored
 *    one (dedup_redis_get_shape() gives it: digest with it); a client
 *    without it creates with 'seed' (whatever its value) and must match a
 *    stored one.  A damaged shape (the checksum, a field out of range) is
 *    DEDUP_ERR_CHECKSUM or DEDUP_ERR_CORRUPT naming the key; a shard
 *    missing or of another type, see dedup_redis_decide().
 *    A name whose metadata is another scheme's (bitmap vs module) gives
 *    DEDUP_ERR_WRONG_TYPE at open, whatever the scheme asked.
 *
 * Round trips.  Commands are pipelined: a batch becomes one command per key
 * (keys), one per shard (module: BF.MADD, CF.INSERTNX or DEDUP.MADD) or
 * one BITFIELD or script call per segment (bitmap), sent to their nodes up to 'pipeline' commands at a time, all
 * nodes written before any is read.  Redis Cluster: the slot map comes from
 * CLUSTER SLOTS of a seed node, each command goes to its slot's master
 * (CRC16 of the key or of its {hash tag}); a MOVED reply updates the map and
 * resends only that command, an ASK reply resends it to the named node after
 * ASKING; TRYAGAIN and CLUSTERDOWN are retried after a pause; a node that
 * fails makes the client reload the map from any node that answers
 * (failover).
 *
 * Sentinel (redis-sentinel:// URLs).  At open the sentinels are asked in
 * turn (SENTINEL GET-MASTER-ADDR-BY-NAME, each connection bounded by the
 * connect and io timeouts) for the master's address; the first address
 * given is connected as a redis:// server would be (AUTH, SELECT with the
 * URL's credentials and db) and must answer ROLE "master".  When the master
 * fails mid-run (a lost connection, READONLY, a refused connection) the
 * client asks the sentinels again, every 100 ms for at most
 * failover_wait_ms, until an address they name answers ROLE "master", and
 * goes on there; commands lost on the way are resent and marked lost, as
 * on one server, and with wait_replicas so are the batch's commands the
 * old master answered (WAIT speaks only for its own connection).  Sentinels are reached over plain TCP, without AUTH
 * unless one answers NOAUTH (then with the URL's credentials).  A sentinel
 * that does not know MASTER is passed over; none knowing it is an error at
 * open naming the master.  Replication is asynchronous: without
 * wait_replicas a failover can lose writes the old master acknowledged,
 * and a key recorded there may be answered NEW again.
 *
 * Reserve, then commit (keys scheme with ttl_ms, or with 'reserve').  A
 * process that records a key and then dies before its record reaches the
 * output leaves the key "seen" while nobody received the record: every
 * other process drops it as a duplicate, and the record is lost.  To close
 * that hole a NEW key is first set to "4217" with the short expiry
 * reserve_ms, and recorded ("4219", with expiry ttl_ms, or none) by
 * dedup_redis_commit() once the caller has written its record out.  A
 * process that dies in between loses the key after reserve_ms, and the
 * next occurrence is answered NEW again (it is delivered at least once,
 * never zero times).  A key reserved by a live process is a duplicate for
 * everybody else.  Without ttl_ms and 'reserve' keys are recorded at once
 * and commit does nothing.
 *
 * Failure semantics.
 *  - A server that cannot be reached at open is an error at open
 *    (DEDUP_ERR_IO, the message names host:port), before any key is decided.
 *    So are a refused AUTH or SELECT, a cluster whose slots are not all
 *    served, and the URL kind mismatch above.
 *  - A connection lost mid-run is reconnected with bounded exponential
 *    backoff (backoff_ms doubling up to 2 s, at most 'retries' attempts per
 *    batch, counted in stats.retries); past that the call fails with
 *    DEDUP_ERR_IO naming host:port.  *done then counts the keys from the
 *    start of the batch whose commands were answered (out[0..*done) holds
 *    their verdicts, recorded remotely: write them out); of the rest, some
 *    may be recorded remotely (a caller lists them as uncertain).  Without
 *    wait_replicas only: with it, a failed call reports nothing (*done 0).
 *    An error reply (OOM under maxmemory with noeviction, a key not ours)
 *    ends *done at its key (the first key of its segment's command in the
 *    bitmap scheme) the same way, the message naming the node.
 *  - A command written whose reply was lost may or may not have run.  It is
 *    sent again once reconnected; a key it then finds present is UNCERTAIN
 *    (perhaps recorded by the lost command, perhaps by another client):
 *    callers drop it like a duplicate (the safe direction), count it
 *    (stats.uncertain) and may write it aside.  A key found absent is NEW.
 *    A later occurrence of a key inside the same batch is a repeat of its
 *    first occurrence, never UNCERTAIN (the first one's verdict covers the
 *    key): DUPLICATE in the keys scheme, MAYBE_DUPLICATE in the bitmap and
 *    module schemes (as without a lost reply), so no key is both new and
 *    uncertain, nor uncertain twice.
 *  - wait_replicas N: after each batch's commands (and each commit) the
 *    client sends WAIT N wait_timeout_ms to every master written, in the
 *    same round trip.  Fewer acknowledgements (a replica resyncing, or
 *    none yet after a failover) are asked again with the same backoff;
 *    still fewer after 'retries' fail the call with DEDUP_ERR_IO.  A
 *    master lost before acknowledging has its commands sent again (to its
 *    successor), marked lost as above.  So a caller that writes its output
 *    only after decide returns never reports a key NEW that a failover
 *    could forget.  Creating a filter waits the same way for its bitmap
 *    segments' sentinels and its module shards before NAME:meta is
 *    written, so a failover cannot leave a meta without them.
 *  - A cuckoo shard with no room left (CF.INSERTNX answered -1) fails the
 *    call with DEDUP_ERR_FULL; the keys before it in the batch may be
 *    recorded.
 *  - A key of the wrong type under the name (WRONGTYPE) gives
 *    DEDUP_ERR_WRONG_TYPE; other error replies give DEDUP_ERR_IO; the
 *    message (dedup_redis_last_error()) names the node and Redis' words.
 *
 * Thread-safety: one dedup_redis per thread (its connections are its own).
 * Any number of objects in any number of processes may share one server.
 */
#ifndef DEDUP_REDIS_H
#define DEDUP_REDIS_H

#include "dedup/common.h"
#include "dedup/hash.h"
#include "dedup/seen.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dedup_redis_scheme {
    DEDUP_REDIS_KEYS = 1,
    DEDUP_REDIS_BITMAP = 2,
    DEDUP_REDIS_MODULE = 3
} dedup_redis_scheme;

/* The module scheme's structure in the server (see DEDUP_REDIS_MODULE). */
typedef enum dedup_redis_filter {
    DEDUP_REDIS_FILTER_DEFAULT = 0, /* bloom when creating; else what is stored */
    DEDUP_REDIS_FILTER_BLOOM = 1,   /* BF.* (or DEDUP.* with ttl_ms) */
    DEDUP_REDIS_FILTER_CUCKOO = 2   /* CF.*: deletes; no ttl_ms */
} dedup_redis_filter;

/* "keys", "bitmap", "module"; NULL for other values.  from_name: 0 when
 * 'name' is none of them. */
const char *dedup_redis_scheme_name(dedup_redis_scheme s);
dedup_redis_scheme dedup_redis_scheme_from_name(const char *name);

/* ---- URLs ------------------------------------------------------------------ */
#define DEDUP_REDIS_MAX_SEEDS 16
#define DEDUP_REDIS_MAX_HOST 255
#define DEDUP_REDIS_MAX_CRED 255
#define DEDUP_REDIS_MAX_MASTER 255

typedef struct dedup_redis_url {
    bool cluster;                  /* redis-cluster:// or rediss-cluster:// */
    bool tls;                      /* rediss:// or rediss-cluster:// */
    bool sentinel;                 /* redis-sentinel://: seeds are sentinels */
    char master[DEDUP_REDIS_MAX_MASTER + 1]; /* sentinel: the master's name */
    char user[DEDUP_REDIS_MAX_CRED + 1]; /* "" = the default user */
    char pass[DEDUP_REDIS_MAX_CRED + 1]; /* "" = no AUTH */
    int db;                        /* 0 unless given */
    size_t nseeds;                 /* 1 for redis:// */
    struct {
        char host[DEDUP_REDIS_MAX_HOST + 1];
        int port;
    } seeds[DEDUP_REDIS_MAX_SEEDS];
} dedup_redis_url;

/* Parses 'text' (NUL-terminated, as above).  Percent-escapes (%XX) are
 * decoded in user and password.  Errors: DEDUP_ERR_INVALID_ARG with a
 * sentence in 'why' (may be NULL) naming what is wrong: the scheme, an empty
 * or over-long host or credential, a port or db out of range, a db on a
 * cluster URL, more than DEDUP_REDIS_MAX_SEEDS seeds, trailing text, a
 * sentinel URL without a master name (or one over DEDUP_REDIS_MAX_MASTER
 * bytes). */
dedup_status dedup_redis_url_parse(const char *text, dedup_redis_url *out, char *why,
                                   size_t whycap);

/* Copies 'text' (a URL as above, or any text) into buf (cap bytes with the
 * NUL, truncated to fit) with its password, if any, replaced by "***", for
 * messages.  Returns the length the whole copy needs.  Pure. */
size_t dedup_redis_url_redact(const char *text, char *buf, size_t cap);

/* ---- Parameters -------------------------------------------------------------- */
typedef struct dedup_redis_params {
    const char *url;          /* required; see above */
    dedup_redis_scheme scheme;/* default DEDUP_REDIS_KEYS */
    const char *name;         /* key prefix, 1..200 bytes; default "dedup" */
    bool whole_keys;          /* keys scheme: name keys by their bytes, not digest */
    uint64_t ttl_ms;          /* 0 = keys never expire */
    uint64_t reserve_ms;      /* keys + ttl: expiry of a reserved key; default
                                 60000, at most ttl_ms */
    uint32_t wait_replicas;   /* WAIT N after each batch; 0 = no wait */
    uint32_t wait_timeout_ms; /* default 1000 */
    uint32_t connect_timeout_ms; /* default 2000 */
    uint32_t io_timeout_ms;   /* a reply not received in this time is lost; default 5000 */
    uint32_t retries;         /* reconnect attempts per batch; default 8 */
    uint32_t failover_wait_ms;/* sentinel: how long a lost master is waited
                                 for (until a sentinel names a master that
                                 answers ROLE as one); default 60000 */
    uint32_t backoff_ms;      /* first pause; doubles up to 2000; default 50 */
    uint32_t pipeline;        /* commands in flight per node, 1..65536; default 1024 */
    uint64_t seed;            /* hash seed of the digests; default DEDUP_DEFAULT_SEED */
    bool secret_seed;         /* every scheme: a new name gets a random seed from
                                 the OS instead of 'seed', and an existing name's
                                 stored seed is taken whatever 'seed' says; the
                                 caller digests with dedup_redis_get_shape()'s seed.
                                 false (default): 'seed' creates a name and must
                                 match the stored one */
    bool reserve;             /* keys: reserve NEW keys until dedup_redis_commit()
                                 also without ttl_ms (see "Reserve, then commit") */
    /* bitmap and module */
    uint64_t items;           /* n; required (>= 1) for bitmap and module unless
                                 their metadata is already there (0 = take it) */
    double fpr;               /* p; default 0.01 */
    uint64_t bits;            /* bitmap: 0 = from (items, fpr); else rounded to 512 */
    uint32_t hashes;          /* bitmap: k in 1..16; 0 = the best for (items, bits) */
    uint32_t segments;        /* bitmap: 0 = as few as the 2^32-bit limit allows
                                 (but at least 1); at most 65536 */
    uint32_t generations;     /* bitmap with ttl_ms: default 4, 1..64 */
    uint32_t shards;          /* module: keys of the logical filter, at most
                                 65536; 0 (default) = from the filter's size
                                 when creating it, else as stored */
    dedup_redis_filter filter;/* module: bloom or cuckoo; default: see the enum */
    /* Credentials and TLS.  user/password, when not NULL, replace the URL's
     * (password "" = no AUTH).  The TLS fields are read for rediss:// and
     * rediss-cluster:// only: tls_cacert (PEM; NULL = the system's CAs),
     * tls_cert and tls_key (PEM client certificate and its key, both or
     * neither), tls_insecure (the server's certificate and name are not
     * checked; default false: checked against the CAs and against the host
     * of every node, redirections included). */
    const char *user;
    const char *password;
    const char *tls_cacert;
    const char *tls_cert;
    const char *tls_key;
    bool tls_insecure;
} dedup_redis_params;

void dedup_redis_params_init(dedup_redis_params *o);

/* The shard count S the module scheme gives a new filter of 'items' keys
 * at 'fpr' (see DEDUP_REDIS_MODULE): one per 64 MiB of the filter, at
 * least 4 per master when 'masters' > 0 (a cluster; 0 = one server), in
 * 1..65536.  Pure; the same on every machine. */
uint32_t dedup_redis_module_shards(dedup_redis_filter filter, uint64_t items, double fpr,
                                   size_t masters);

/* ---- The remote set ---------------------------------------------------------- */
typedef struct dedup_redis dedup_redis;

/* Connects (every seed tried in turn for a cluster; the slot map read),
 * authenticates, selects the db, and prepares the scheme: bitmap reads or
 * creates its metadata (HSETNX, so concurrent first clients agree) and
 * loads its script; module does the same with its metadata, then reserves
 * its shards.  Errors: INVALID_ARG (bad URL or option, a TLS file that
 * cannot be read or a key not matching its certificate; 'why' says which),
 * IO (unreachable, refused AUTH, a TLS handshake failed or a certificate
 * refused on either side (naming host:port and why; not retried), a command
 * refused to the ACL user (NOPERM, naming it), not a cluster / a cluster,
 * slots not covered), UNSUPPORTED (no module), INCOMPATIBLE (metadata differs: both
 * values named), NOT_FOUND (items 0 and no metadata), WRONG_TYPE (the
 * metadata key or a shard holds another type, or the metadata is another
 * scheme's), VERSION / CORRUPT (metadata this version cannot read), NOMEM.
 * 'why' (may be NULL) receives a sentence in every case. */
dedup_status dedup_redis_create(const dedup_redis_params *o, const dedup_allocator *alloc,
                                dedup_redis **out, char *why, size_t whycap);

/* Bytes this object holds on the client: its batch buffers and scratch
 * (hiredis' connection buffers not included).  'alloc' of open is not
 * used: hiredis allocates through libc, and so does this object. */
size_t dedup_redis_memory_usage(const dedup_redis *r);

/* Closes the connections and frees; NULL is a no-op. */
void dedup_redis_free(dedup_redis *r);

/* Decides batch->n keys in order (batch->digests required, computed with
 * o->seed; keys/lens too when whole_keys) and records the new ones.
 * out[i]: DEDUP_NEW, DEDUP_DUPLICATE (keys), DEDUP_MAYBE_DUPLICATE (bitmap,
 * module) or DEDUP_UNCERTAIN.  The whole batch is decided in as many round
 * trips as the pipeline depth needs (ceil(n / pipeline) per node, plus
 * redirections).  On error *done counts the keys decided from the start of
 * the batch (out[0..*done) valid; in the bitmap scheme, where a command
 * carries every key of its segment, this is up to the first key of a
 * command left unanswered); some of the others may be recorded remotely.
 * The module scheme answers for the whole batch (*done = n) even then: a
 * key whose shard's command got no usable reply (lost, an error, a full
 * cuckoo shard) is DEDUP_UNCERTAIN, as is a NEW key after a failed WAIT,
 * so no key is recorded remotely without its record written out or listed.
 * A module shard missing under existing metadata (deleted, evicted) is
 * DEDUP_ERR_NOT_FOUND naming it, at open or here; one of another type
 * DEDUP_ERR_WRONG_TYPE.  Errors: above. */
dedup_status dedup_redis_decide(dedup_redis *r, const dedup_batch *batch, dedup_verdict *out,
                                size_t *done);

/* Answers without recording (keys: EXISTS; bitmap: the script's query
 * mode; module: BF.MEXISTS or CF.MEXISTS).  Errors as decide. */
dedup_status dedup_redis_query(dedup_redis *r, const dedup_batch *batch, dedup_verdict *out);

/* Adds the keys of 'batch' as a filter's add does (`dedup filter add`):
 * decide for every scheme but the module's cuckoo filter, where each add
 * stores a copy even when the key looks present (CF.INSERT, as a local
 * cuckoo filter counts every add), so each add can be deleted once; out[i]
 * is then DEDUP_NEW.  Errors as decide. */
dedup_status dedup_redis_add(dedup_redis *r, const dedup_batch *batch, dedup_verdict *out);

/* Module scheme with the cuckoo filter: deletes one copy of each key of
 * 'batch' (CF.DEL, pipelined, one command per key); removed[i] is false
 * only when key i was certainly absent.  After a lost reply the deletes
 * without a reply are sent again, and a resent delete may find its key gone
 * (its first attempt did it) or remove a copy of another key of the batch
 * with the same fingerprint (whose own delete then finds nothing): so when
 * any reply of the call was lost, every key of it is reported removed
 * (what was asked is done; which copy went where is unknown).  Delete only
 * keys that were added: a key never added may share a fingerprint with one
 * that was, and deleting it removes that one (a false negative for it).
 * DEDUP_ERR_UNSUPPORTED for other schemes and for the Bloom filter.
 * Errors otherwise as decide. */
dedup_status dedup_redis_delete(dedup_redis *r, const dedup_batch *batch, bool *removed);

/* Keys scheme with ttl_ms: gives the keys of 'batch' answered NEW their
 * real expiry (see "Reserve, then commit").  Pass the same keys that were
 * answered NEW (others are harmless: an existing key just gets its expiry
 * renewed).  DEDUP_OK at once for other schemes or without ttl_ms. */
dedup_status dedup_redis_commit(dedup_redis *r, const dedup_batch *batch);

typedef struct dedup_redis_stats {
    uint64_t round_trips;   /* pipelines written and read back, per node */
    uint64_t commands;      /* commands sent, resent ones included */
    uint64_t keys;          /* keys decided or queried */
    uint64_t retries;       /* reconnects, redirections and busy retries */
    uint64_t moved, ask;    /* cluster redirections followed */
    uint64_t uncertain;     /* keys answered DEDUP_UNCERTAIN */
    uint64_t recorded;      /* keys answered NEW */
    size_t nodes;           /* masters connected */
} dedup_redis_stats;

void dedup_redis_get_stats(const dedup_redis *r, dedup_redis_stats *out);

/* "host:port" of the server the commands go to now, into buf (cap bytes
 * with the NUL, truncated to fit): a redis:// URL's server, a sentinel
 * URL's master as the sentinels last named it (it changes with a
 * failover), a cluster's first master.  Not thread-safe against a call
 * in progress on 'r'. */
void dedup_redis_master_addr(const dedup_redis *r, char *buf, size_t cap);

/* The last error's sentence ("" if none), valid until the next call. */
const char *dedup_redis_last_error(const dedup_redis *r);

/* The shape in force (bitmap: as read from the metadata). */
typedef struct dedup_redis_shape {
    dedup_redis_scheme scheme;
    bool cluster;
    uint64_t seed;
    uint64_t bits;        /* bitmap */
    uint32_t k;           /* bitmap */
    uint32_t segments;    /* bitmap */
    uint32_t generations; /* bitmap with ttl */
    uint32_t shards;      /* module */
    uint64_t items;       /* planned capacity (bitmap, module) */
    double fpr;
    dedup_redis_filter filter; /* module: BLOOM or CUCKOO (as stored) */
} dedup_redis_shape;

void dedup_redis_get_shape(const dedup_redis *r, dedup_redis_shape *out);

/* Bytes of memory the remote keys use (MEMORY USAGE of each bitmap
 * segment or module shard, summed; for keys, INFO's used_memory of every
 * master).  Errors as decide. */
dedup_status dedup_redis_remote_memory(dedup_redis *r, uint64_t *bytes);

/* Bitmap scheme: reads / writes the whole bit array as the bytes of a
 * local blocked filter's words (dedup/bloom.h's layout, little-endian
 * 64-bit words, bits/8 bytes), so a filter can be copied to disk and back.
 * 'buf' has bits/8 bytes.  write ORs into what is there (union).  With
 * generations (ttl_ms) read ORs every live generation: the union answers
 * "present" for each key recorded within the window at the time of the
 * read, and is a plain filter afterwards (it never forgets); write ORs into
 * the current generation and sets its expiry, so the keys written count as
 * seen at the time of the write.  DEDUP_ERR_UNSUPPORTED for other schemes. */
dedup_status dedup_redis_bitmap_read(dedup_redis *r, unsigned char *buf, uint64_t len);
dedup_status dedup_redis_bitmap_write(dedup_redis *r, const unsigned char *buf, uint64_t len);

/* Wraps 'r' as a seen-set (kind DEDUP_SEEN_REDIS): decide, query, commit
 * and info dispatch to the calls above; the seen-set owns 'r' once this
 * succeeds (dedup_seen_free() frees it).  On failure (NOMEM) 'r' is not
 * freed. */
dedup_status dedup_redis_as_seen(dedup_redis *r, const dedup_allocator *alloc, dedup_seen **out);

#ifdef __cplusplus
}
#endif
#endif /* DEDUP_REDIS_H */
