/*
 * seen.c - dedup.SeenSet: the library's seen-set (dedup/seen.h) made from a
 * spec, every local method behind one verb, decide().
 */
#include "batch.h"

#include "dedup/seen.h"
#include "dedup/window.h"
#ifdef DEDUP_PY_HAVE_STORE
#include "dedup/store.h"
#endif
#ifdef DEDUP_PY_HAVE_REDIS
#include "dedup/redis.h"
#endif

#include <math.h>
#include <string.h>

static dedup_status seen_save(const void *p, dedup_sink *s) { return dedup_seen_save(p, s); }
static dedup_status seen_load(dedup_source src, void **out)
{
    return dedup_seen_load(src, NULL, (dedup_seen **)out);
}
static void seen_free(void *p) { dedup_seen_free(p); }

static PyTypeObject SeenType;
dd_kind dd_seen_kind = {&SeenType, seen_save, seen_load, seen_free};
DD_COMMON_DEFS(Seen, dd_seen_kind)

static int name_to(const char *what, const char *name, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    PyErr_Format(PyExc_ValueError, "unknown %s '%s'", what, name);
    return -1;
}

static PyObject *Seen_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kind",     "items",  "error_rate", "memory", "seed",   "counts",
                            "on_full",  "window", "duration",   "lateness", "approximate",
                            "hashes",   NULL};
    const char *kind = "exact", *on_full = "warn", *window = "sliding";
    unsigned long long items = 0, memory = 0;
    double rate = 0.01, duration = 0, lateness = 0;
    PyObject *seed = NULL;
    int counts = 0, approximate = 0;
    unsigned int hashes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|s$KdKOpssddpI:SeenSet", names, &kind, &items,
                                     &rate, &memory, &seed, &counts, &on_full, &window, &duration,
                                     &lateness, &approximate, &hashes))
        return NULL;
    dedup_seen_spec sp;
    dedup_seen_spec_init(&sp);
    sp.kind = dedup_seen_kind_from_name(kind);
    if (!sp.kind || sp.kind == DEDUP_SEEN_EXACT_SPILL || sp.kind >= DEDUP_SEEN_ROARING) {
        PyErr_Format(PyExc_ValueError,
                     "kind must be exact, fingerprint, u64, bloom, blocked, counting, cuckoo, "
                     "scalable or window (got '%s')", kind);
        return NULL;
    }
    static const char *const fulls[] = {"warn", "fail", "grow"};
    static const char *const windows[] = {"sliding", "tumbling", "count"};
    int f = name_to("on_full", on_full, fulls, 3);
    int w = f < 0 ? -1 : name_to("window", window, windows, 3);
    if (w < 0)
        return NULL;
    sp.items = items;
    sp.fpr = rate;
    sp.memory = memory;
    sp.counts = counts;
    sp.hashes = hashes;
    sp.on_full = (dedup_on_full)f;
    sp.window_type = w;
    sp.approximate = approximate;
    /* time windows take seconds; a count window takes records */
    sp.duration = (uint64_t)(w == DEDUP_WINDOW_COUNT ? duration : llround(duration * 1e6));
    sp.lateness = (uint64_t)llround(lateness * 1e6);
    if (dd_seed_of(seed, &sp.seed) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_seen *s = NULL;
    dedup_status st = dedup_seen_create(&sp, NULL, &s);
    return dd_adopt(o, st, s);
}

/* The arrays of one seen-set batch, built with the GIL held. */
typedef struct seen_batch {
    PyObject *list;
    Py_ssize_t n;
    dedup_digest *d;
    const unsigned char **keys;
    size_t *lens;
    uint64_t *ints;
    int64_t *times;
    dedup_batch b;
} seen_batch;

static void seen_batch_free(seen_batch *sb)
{
    Py_XDECREF(sb->list);
    PyMem_Free(sb->d);
    PyMem_Free(sb->keys);
    PyMem_Free(sb->lens);
    PyMem_Free(sb->ints);
    PyMem_Free(sb->times);
}

static bool int_kind(const dedup_seen *s)
{
    dedup_seen_kind k = dedup_seen_kind_of(s);
    return k == DEDUP_SEEN_U64 || k == DEDUP_SEEN_BITMAP;
}

/* Keys (one key, or an iterable of them) and optional times (seconds). */
static int seen_batch_make(seen_batch *sb, const dedup_seen *s, PyObject *keys, PyObject *times,
                           bool *single)
{
    memset(sb, 0, sizeof *sb);
    *single = PyUnicode_Check(keys) || PyBytes_Check(keys) || PyLong_Check(keys);
    sb->list = *single ? PyList_New(1) : PySequence_List(keys);
    if (!sb->list)
        return -1;
    if (*single) {
        Py_INCREF(keys);
        PyList_SET_ITEM(sb->list, 0, keys);
    }
    Py_ssize_t n = sb->n = PyList_GET_SIZE(sb->list);
    size_t cap = (size_t)(n ? n : 1);
    bool ints = int_kind(s);
    sb->d = PyMem_Calloc(cap, sizeof *sb->d);
    sb->keys = PyMem_Calloc(cap, sizeof *sb->keys);
    sb->lens = PyMem_Calloc(cap, sizeof *sb->lens);
    sb->ints = ints ? PyMem_Calloc(cap, sizeof *sb->ints) : NULL;
    if (!sb->d || !sb->keys || !sb->lens || (ints && !sb->ints)) {
        PyErr_NoMemory();
        return -1;
    }
    uint64_t seed = dedup_seen_seed(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(sb->list, i);
        if (ints) {
            if (!PyLong_Check(o)) {
                PyErr_Format(PyExc_TypeError, "a key of this seen-set must be int, not %.200s",
                             Py_TYPE(o)->tp_name);
                return -1;
            }
            unsigned long long v = PyLong_AsUnsignedLongLong(o);
            if (v == (unsigned long long)-1 && PyErr_Occurred())
                return -1;
            sb->ints[i] = v;
            sb->d[i] = dedup_hash_u64(v, seed);
            continue;
        }
        dd_key k;
        if (dd_key_of(o, &k) < 0)
            return -1;
        sb->keys[i] = (const unsigned char *)k.p;
        sb->lens[i] = (size_t)k.n;
        sb->d[i] = dedup_hash(k.p, (size_t)k.n, seed);
    }
    if (times && times != Py_None) {
        PyObject *tl = *single ? Py_BuildValue("[O]", times) : PySequence_List(times);
        if (!tl)
            return -1;
        if (PyList_GET_SIZE(tl) != n) {
            Py_DECREF(tl);
            PyErr_SetString(PyExc_ValueError, "times must have one entry per key");
            return -1;
        }
        sb->times = PyMem_Calloc(cap, sizeof *sb->times);
        for (Py_ssize_t i = 0; sb->times && i < n; i++) {
            double t = PyFloat_AsDouble(PyList_GET_ITEM(tl, i));
            if (t == -1.0 && PyErr_Occurred()) {
                Py_DECREF(tl);
                return -1;
            }
            sb->times[i] = (int64_t)llround(t * 1e6);
        }
        Py_DECREF(tl);
        if (!sb->times) {
            PyErr_NoMemory();
            return -1;
        }
    }
    sb->b = (dedup_batch){.n = (size_t)n, .digests = sb->d, .keys = sb->keys, .lens = sb->lens,
                          .times = sb->times, .ints = sb->ints};
    return 0;
}

/* Takes the lock, then makes the batch; -1 with an exception set and
 * nothing held. */
static int seen_batch_begin(seen_batch *sb, dd_obj *o, PyObject *keys, PyObject *times,
                            bool *single)
{
    if (dd_enter(o) < 0)
        return -1;
    if (seen_batch_make(sb, o->p, keys, times, single) < 0) {
        dd_leave(o);
        seen_batch_free(sb);
        return -1;
    }
    return 0;
}

static PyObject *verdicts_out(const dedup_verdict *v, Py_ssize_t n, bool single)
{
    if (single)
        return PyLong_FromLong(v[0]);
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *x = PyLong_FromLong(v[i]);
        if (!x) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

/* decide (record) or query (not), with the GIL released on long batches. */
static PyObject *seen_run(dd_obj *o, PyObject *args, PyObject *kw, bool record)
{
    static char *names[] = {"keys", "times", NULL};
    PyObject *keys, *times = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, record ? "O|O:decide" : "O|O:query", names, &keys,
                                     &times))
        return NULL;
    seen_batch sb;
    bool single;
    if (seen_batch_begin(&sb, o, keys, times, &single) < 0)
        return NULL;
    dedup_verdict *v = PyMem_Calloc((size_t)(sb.n ? sb.n : 1), sizeof *v);
    if (!v) {
        dd_leave(o);
        seen_batch_free(&sb);
        return PyErr_NoMemory();
    }
    size_t done = 0;
    dedup_status s;
    PyThreadState *ts = sb.n >= DD_NOGIL_BATCH ? PyEval_SaveThread() : NULL;
    s = record ? dedup_seen_decide(o->p, &sb.b, v, &done) : dedup_seen_query(o->p, &sb.b, v);
    if (ts)
        PyEval_RestoreThread(ts);
    dd_leave(o);
    PyObject *r = NULL;
    if (s && record) {
        dd_raise_done(s, done, "decided");
    } else if (s) {
        PyErr_SetString(dd_Error, dedup_strerror(s));
    } else {
        r = verdicts_out(v, sb.n, single);
    }
    PyMem_Free(v);
    seen_batch_free(&sb);
    return r;
}
static PyObject *Seen_decide(dd_obj *o, PyObject *a, PyObject *k) { return seen_run(o, a, k, true); }
static PyObject *Seen_query(dd_obj *o, PyObject *a, PyObject *k) { return seen_run(o, a, k, false); }

static PyObject *Seen_delete(dd_obj *o, PyObject *keys)
{
    seen_batch sb;
    bool single;
    if (seen_batch_begin(&sb, o, keys, NULL, &single) < 0)
        return NULL;
    bool *removed = PyMem_Calloc((size_t)(sb.n ? sb.n : 1), sizeof *removed);
    dedup_status s = removed ? dedup_seen_delete(o->p, &sb.b, removed) : DEDUP_ERR_NOMEM;
    dd_leave(o);
    Py_ssize_t n = sb.n;
    seen_batch_free(&sb);
    if (s) {
        PyMem_Free(removed);
        return dd_raise(s, NULL);
    }
    if (single) {
        PyObject *r = PyBool_FromLong(removed[0]);
        PyMem_Free(removed);
        return r;
    }
    return dd_bool_list(removed, n, false);
}

static PyObject *Seen_commit(dd_obj *o, PyObject *keys)
{
    seen_batch sb;
    bool single;
    if (seen_batch_begin(&sb, o, keys, NULL, &single) < 0)
        return NULL;
    dedup_status s;
    Py_BEGIN_ALLOW_THREADS
    s = dedup_seen_commit(o->p, &sb.b);
    Py_END_ALLOW_THREADS
    dd_leave(o);
    seen_batch_free(&sb);
    if (s)
        return dd_raise(s, NULL);
    Py_RETURN_NONE;
}

static PyObject *Seen_advance(dd_obj *o, PyObject *arg)
{
    double t = PyFloat_AsDouble(arg);
    if (t == -1.0 && PyErr_Occurred())
        return NULL;
    if (dd_enter(o) < 0)
        return NULL;
    dedup_status s = dedup_seen_advance(o->p, (int64_t)llround(t * 1e6));
    dd_leave(o);
    if (s)
        return dd_raise(s, NULL);
    Py_RETURN_NONE;
}

static Py_ssize_t Seen_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    dedup_seen_info i;
    dedup_seen_get_info(o->p, &i);
    dd_leave(o);
    if (!i.distinct_known) {
        PyErr_SetString(PyExc_OverflowError, "the filter is saturated: its count cannot be estimated");
        return -1;
    }
    return (Py_ssize_t)i.distinct;
}

static PyObject *Seen_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    dedup_seen_info i;
    dedup_seen_get_info(o->p, &i);
    dd_leave(o);
    PyObject *d = PyDict_New();
    int bad = !d ||
        dd_dict_put(d, "kind", PyUnicode_FromString(dedup_seen_kind_name(i.kind))) ||
        dd_dict_put(d, "probabilistic", PyBool_FromLong(i.probabilistic)) ||
        dd_dict_put(d, "can_delete", PyBool_FromLong(i.can_delete)) ||
        dd_dict_put(d, "capacity", PyLong_FromUnsignedLongLong(i.capacity)) ||
        dd_dict_put(d, "items", PyLong_FromUnsignedLongLong(i.items)) ||
        dd_dict_put(d, "over_capacity", PyBool_FromLong(i.over_capacity)) ||
        dd_dict_put(d, "distinct", PyLong_FromUnsignedLongLong(i.distinct)) ||
        dd_dict_put(d, "distinct_exact", PyBool_FromLong(i.distinct_exact)) ||
        dd_dict_put(d, "error_rate", PyFloat_FromDouble(i.fpr_target)) ||
        dd_dict_put(d, "fpr_current", PyFloat_FromDouble(i.fpr_bound)) ||
        dd_dict_put(d, "bits", PyLong_FromUnsignedLongLong(i.bits)) ||
        dd_dict_put(d, "hashes", PyLong_FromUnsignedLong(i.hashes)) ||
        dd_dict_put(d, "seed", PyLong_FromUnsignedLongLong(i.seed)) ||
        dd_dict_put(d, "memory", PyLong_FromSize_t(i.memory)) ||
        dd_dict_put(d, "key_options", o->state_ident ? PyUnicode_FromString(o->state_ident)
                                                     : Py_NewRef(Py_None));
    return dd_dict_done(d, bad);
}

#ifdef DEDUP_PY_HAVE_STORE
/* SeenSet.open_store(dir, ...): the RocksDB store (dedup/store.h) as a
 * seen-set, exact, on disk, shared with `dedup --store DIR`. */
static PyObject *Seen_open_store(PyObject *cls, PyObject *args, PyObject *kw)
{
    (void)cls;
    static char *names[] = {"dir", "create", "read_only", "expire", "whole_keys", "sync", NULL};
    PyObject *dir = NULL;
    int create = 1, read_only = 0, whole = 0;
    unsigned long long expire = 0;
    const char *sync = "batch";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|$ppKps:open_store", names,
                                     PyUnicode_FSConverter, &dir, &create, &read_only, &expire,
                                     &whole, &sync))
        return NULL;
    static const char *const syncs[] = {"batch", "always", "none"};
    int sy = name_to("sync", sync, syncs, 3);
    if (sy < 0) {
        Py_DECREF(dir);
        return NULL;
    }
    dedup_store_params p;
    dedup_store_params_init(&p);
    p.dir = PyBytes_AS_STRING(dir);
    p.create = create;
    p.read_only = read_only;
    p.expire = expire;
    p.keys = whole ? DEDUP_STORE_KEYS_WHOLE : DEDUP_STORE_KEYS_AUTO;
    p.sync = (dedup_store_sync)sy;
    char why[512] = "";
    dedup_store *st = NULL;
    dedup_seen *s = NULL;
    dedup_status rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dedup_store_create(&p, NULL, &st, why, sizeof why);
    if (!rc) {
        rc = dedup_store_as_seen(st, NULL, &s);
        if (rc)
            dedup_store_free(st);
    }
    Py_END_ALLOW_THREADS
    if (rc) {
        PyObject *r = dd_raise(rc, why[0] ? why : PyBytes_AS_STRING(dir));
        Py_DECREF(dir);
        return r;
    }
    Py_DECREF(dir);
    return dd_wrap(&dd_seen_kind, s);
}
#endif

#ifdef DEDUP_PY_HAVE_REDIS
/* SeenSet.open_redis(url, ...): a seen-set kept in Redis (dedup/redis.h),
 * shared by every process that opens the same URL and name. */
static PyObject *Seen_open_redis(PyObject *cls, PyObject *args, PyObject *kw)
{
    (void)cls;
    static char *names[] = {"url",   "name",       "scheme",     "ttl", "items",
                            "error_rate", "whole_keys", NULL};
    const char *url, *name = "dedup", *scheme = "keys";
    double ttl = 0, rate = 0.01;
    unsigned long long items = 0;
    int whole = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$ssdKdp:open_redis", names, &url, &name,
                                     &scheme, &ttl, &items, &rate, &whole))
        return NULL;
    dedup_redis_params o;
    dedup_redis_params_init(&o);
    o.url = url;
    o.name = name;
    o.scheme = dedup_redis_scheme_from_name(scheme);
    if (!o.scheme) {
        PyErr_Format(PyExc_ValueError, "scheme must be keys, bitmap or module (got '%s')", scheme);
        return NULL;
    }
    if (ttl < 0) {
        PyErr_SetString(PyExc_ValueError, "ttl must be >= 0 seconds");
        return NULL;
    }
    o.ttl_ms = (uint64_t)llround(ttl * 1000.0);
    if (o.ttl_ms && o.reserve_ms > o.ttl_ms)
        o.reserve_ms = o.ttl_ms;
    o.items = items;
    o.fpr = rate;
    o.whole_keys = whole;
    char err[512] = "";
    dedup_redis *r = NULL;
    dedup_seen *s = NULL;
    dedup_status rc;
    Py_BEGIN_ALLOW_THREADS
    rc = dedup_redis_create(&o, NULL, &r, err, sizeof err);
    if (!rc) {
        rc = dedup_redis_as_seen(r, NULL, &s);
        if (rc)
            dedup_redis_free(r);
    }
    Py_END_ALLOW_THREADS
    if (rc)
        return dd_raise(rc, err[0] ? err : url);
    return dd_wrap(&dd_seen_kind, s);
}
#endif

static PyMethodDef Seen_methods[] = {
#ifdef DEDUP_PY_HAVE_REDIS
    {"open_redis", (PyCFunction)(void (*)(void))Seen_open_redis,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "open_redis(url, *, name='dedup', scheme='keys', ttl=0, items=0, error_rate=0.01, "
     "whole_keys=False) -> SeenSet: a seen-set kept in Redis (dedup/redis.h, the CLI's "
     "--redis URL), shared by every client of the same name; ttl in seconds (0: keys "
     "never expire).  decide() may answer dedup.UNCERTAIN when a reply was lost."},
#endif
#ifdef DEDUP_PY_HAVE_STORE
    {"open_store", (PyCFunction)(void (*)(void))Seen_open_store,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "open_store(dir, *, create=True, read_only=False, expire=0, whole_keys=False, "
     "sync='batch') -> SeenSet: the persistent RocksDB store (dedup/store.h, the CLI's "
     "--store DIR) as an exact seen-set; close() makes it durable and releases its lock."},
#endif
    {"stack", (PyCFunction)(void (*)(void))dd_tiers_stack,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "stack(tiers, *, trust_filter=False, shared=False) -> SeenSet: tiers (top first) "
     "answering as one seen-set (dedup/tiers.h, the CLI's --tier): a filter in front, "
     "exact sets, windows, the store or Redis behind.  Each tier is a SeenSet, or a "
     "(SeenSet, {'name': str, 'covers_below': bool, 'forgets': bool}) pair; the stack "
     "takes their structures (those objects read as closed afterwards; on an error "
     "they keep them).  The answer is exact when the bottom tier is exact and "
     "trust_filter is off; tier_stats gives each tier's counts."},
    {"decide", (PyCFunction)(void (*)(void))Seen_decide, METH_VARARGS | METH_KEYWORDS,
     "decide(keys, times=None) -> verdicts: test-and-add in order (a repeat inside the "
     "batch is a duplicate of its first occurrence).  One key gives one verdict, an "
     "iterable a list: dedup.NEW, DUPLICATE (exact kinds), MAYBE_DUPLICATE "
     "(probabilistic kinds), LATE (windows).  times: event times in seconds, for "
     "windows."},
    {"query", (PyCFunction)(void (*)(void))Seen_query, METH_VARARGS | METH_KEYWORDS,
     "query(keys, times=None) -> verdicts without recording."},
    {"delete", (PyCFunction)Seen_delete, METH_O,
     "delete(keys) -> bool or list: False where a key was certainly absent; dedup.Error "
     "for kinds that cannot delete (info['can_delete'])."},
    {"commit", (PyCFunction)Seen_commit, METH_O,
     "commit(keys): the records of these keys (answered NEW) were delivered: a Redis "
     "seen-set with a ttl makes their reservation permanent (see dedup/redis.h, "
     "'Reserve, then commit'); a no-op for local kinds."},
    {"advance", (PyCFunction)Seen_advance, METH_O,
     "advance(watermark): windows: raise the watermark (seconds)."},
    DD_COMMON_METHODS(Seen)
    DD_CTX_METHODS(Seen)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Seen_getset[] = {
    {"info", (getter)Seen_info, NULL,
     "dict: kind, probabilistic, can_delete, capacity, items, over_capacity, distinct, "
     "distinct_exact, error_rate, fpr_current (the bound in force), bits, hashes, seed, "
     "memory, key_options (the identity of a CLI --state file it was loaded from, kept "
     "by save(); else None).",
     NULL},
    {"tier_stats", (getter)dd_tiers_stats, NULL,
     "dict (stacks made by SeenSet.stack only): keys, new, duplicates, "
     "maybe_duplicates, other, reads_avoided, contradicted, exact, trust_filter, shared, "
     "and 'tiers': per tier name, kind, probabilistic, lookups, hits, ended_new, "
     "passed_down, records, trusted, seconds.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Seen_seq = {.sq_length = (lenfunc)Seen_len};

static PyTypeObject SeenType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.SeenSet",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SeenSet(kind='exact', *, items=0, error_rate=0.01, memory=0, seed=None, "
              "counts=False, on_full='warn', window='sliding', duration=0, lateness=0, "
              "approximate=False, hashes=0)\n\n"
              "The library's seen-set (dedup/seen.h) from a spec: kind is exact, "
              "fingerprint, u64, bloom, blocked, counting, cuckoo, scalable or window "
              "(window: 'sliding' or 'tumbling' over duration seconds of event time, or "
              "'count' over the last duration records).  len() is the distinct keys held "
              "(an estimate for filters: info['distinct_exact']).  Its files are the "
              "CLI's (dedup --state).  Thread-safe as Bloom.",
    .tp_new = Seen_new,
    .tp_dealloc = (destructor)Seen_dealloc,
    .tp_methods = Seen_methods,
    .tp_getset = Seen_getset,
    .tp_as_sequence = &Seen_seq,
};

int dd_seen_ready(PyObject *m)
{
    if (PyType_Ready(&SeenType) < 0 || PyModule_AddObjectRef(m, "SeenSet", (PyObject *)&SeenType) < 0)
        return -1;
    if (PyModule_AddIntConstant(m, "LATE", DEDUP_LATE) < 0 ||
        PyModule_AddIntConstant(m, "DEFERRED", DEDUP_DEFERRED) < 0 ||
        PyModule_AddIntConstant(m, "UNCERTAIN", DEDUP_UNCERTAIN) < 0)
        return -1;
    return 0;
}
