/*
 * filters2.c - dedup.Cuckoo and dedup.ScalableBloom over dedup/cuckoo.h and
 * dedup/scalable.h: the filters whose adds can fail (FULL, LIMIT).
 */
#include "batch.h"

#include <string.h>

/* ---- Cuckoo ------------------------------------------------------------------- */

static dedup_status cuckoo_save(const void *p, dedup_sink *s) { return dedup_cuckoo_save(p, s); }
static dedup_status cuckoo_load(dedup_source src, void **out)
{
    return dedup_cuckoo_load(src, NULL, (dedup_cuckoo **)out);
}
static void cuckoo_free(void *p) { dedup_cuckoo_free(p); }
static dedup_digest cuckoo_digest(const void *p, const void *k, size_t n)
{
    return dedup_cuckoo_digest(p, k, n);
}

static PyTypeObject CuckooType;
dd_kind dd_cuckoo_kind = {&CuckooType, cuckoo_save, cuckoo_load, cuckoo_free};
DD_COMMON_DEFS(Cuckoo, dd_cuckoo_kind)

static PyObject *Cuckoo_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"capacity",  "error_rate", "fingerprint_bits", "bucket_size",
                            "max_kicks", "expansion",  "seed",             NULL};
    unsigned long long capacity = 0;
    double rate = 0.01;
    unsigned int fp = 0, b = 4, kicks = 500, expansion = 0;
    PyObject *seed = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Kd$IIIIO:Cuckoo", names, &capacity, &rate, &fp, &b,
                                     &kicks, &expansion, &seed))
        return NULL;
    dedup_cuckoo_params p;
    dedup_cuckoo_params_init(&p);
    p.capacity = capacity;
    p.fpr = rate;
    p.fingerprint_bits = fp;
    p.bucket_size = b;
    p.max_kicks = kicks;
    p.expansion = expansion;
    if (dd_seed_of(seed, &p.seed) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_cuckoo *cf = NULL;
    dedup_status s = dedup_cuckoo_create(&p, NULL, &cf);
    return dd_adopt(o, s, cf);
}

static dedup_status cuckoo_add_key(void *p, const void *k, size_t n, dedup_verdict *v)
{
    return dedup_cuckoo_test_and_add_key(p, k, n, v);
}
static bool cuckoo_has_key(const void *p, const void *k, size_t n)
{
    return dedup_cuckoo_might_contain_key(p, k, n);
}
static dedup_status cuckoo_del_key(void *p, const void *k, size_t n)
{
    return dedup_cuckoo_delete_key(p, k, n);
}
static PyObject *Cuckoo_add(dd_obj *o, PyObject *key) { return dd_add_key(o, key, cuckoo_add_key); }
static int Cuckoo_contains(dd_obj *o, PyObject *key)
{
    return dd_contains_key(o, key, cuckoo_has_key);
}

/* The library's batch test-and-add; on FULL the keys before it stay added
 * and dedup.Error says how many. */
static PyObject *cuckoo_adds(dd_obj *o, PyObject *it, bool verdicts)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, cuckoo_digest, true) < 0)
        return NULL;
    size_t done = 0;
    dedup_status s = DEDUP_ERR_NOMEM;
    dedup_verdict *v = PyMem_RawMalloc(sizeof *v * (size_t)(b.n ? b.n : 1));
    if (v) {
        s = dedup_cuckoo_test_and_add_batch(o->p, b.d, (size_t)b.n, v, &done);
        for (size_t i = 0; i < done; i++)
            b.found[i] = v[i] == DEDUP_NEW;
        PyMem_RawFree(v);
    }
    dd_batch_end(&b, o);
    return dd_adds_out(b.found, b.n, s, done, verdicts);
}
static PyObject *Cuckoo_update(dd_obj *o, PyObject *it) { return cuckoo_adds(o, it, false); }
static PyObject *Cuckoo_add_many(dd_obj *o, PyObject *it) { return cuckoo_adds(o, it, true); }

static void cuckoo_has_batch(const void *p, const dedup_digest *d, size_t n, bool *out)
{
    dedup_cuckoo_might_contain_batch(p, d, n, out);
}
static PyObject *Cuckoo_contains_many(dd_obj *o, PyObject *it)
{
    return dd_contains_many(o, it, cuckoo_digest, cuckoo_has_batch);
}

static Py_ssize_t Cuckoo_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    dedup_cuckoo_info info;
    dedup_cuckoo_get_info(o->p, &info);
    dd_leave(o);
    return (Py_ssize_t)info.items;
}

static PyObject *Cuckoo_remove(dd_obj *o, PyObject *key)
{
    return dd_del_key(o, key, true, cuckoo_del_key);
}
static PyObject *Cuckoo_discard(dd_obj *o, PyObject *key)
{
    return dd_del_key(o, key, false, cuckoo_del_key);
}

static PyObject *Cuckoo_union(dd_obj *o, PyObject *other)
{
    (void)o;
    (void)other;
    PyErr_SetString(dd_Error, "a cuckoo filter has no union (the library offers none)");
    return NULL;
}

static PyObject *Cuckoo_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    dedup_cuckoo_info i;
    dedup_cuckoo_get_info(o->p, &i);
    dd_leave(o);
    PyObject *d = PyDict_New();
    int bad = !d ||
        dd_dict_put(d, "kind", PyUnicode_FromString(i.expansion ? "cuckoo-chain" : "cuckoo")) ||
        dd_dict_put(d, "fingerprint_bits", PyLong_FromUnsignedLong(i.fingerprint_bits)) ||
        dd_dict_put(d, "bucket_size", PyLong_FromUnsignedLong(i.bucket_size)) ||
        dd_dict_put(d, "links", PyLong_FromUnsignedLong(i.links)) ||
        dd_dict_put(d, "capacity", PyLong_FromUnsignedLongLong(i.capacity)) ||
        dd_dict_put(d, "buckets", PyLong_FromUnsignedLongLong(i.buckets)) ||
        dd_dict_put(d, "slots", PyLong_FromUnsignedLongLong(i.slots)) ||
        dd_dict_put(d, "items", PyLong_FromUnsignedLongLong(i.items)) ||
        dd_dict_put(d, "fill", PyFloat_FromDouble(i.load)) ||
        dd_dict_put(d, "fpr_full", PyFloat_FromDouble(i.fpr_full)) ||
        dd_dict_put(d, "fpr_current", PyFloat_FromDouble(i.fpr_current)) ||
        dd_dict_put(d, "seed", PyLong_FromUnsignedLongLong(i.seed)) ||
        dd_dict_put(d, "memory", PyLong_FromSize_t(i.memory));
    return dd_dict_done(d, bad);
}

static PyMethodDef Cuckoo_methods[] = {
    {"add", (PyCFunction)Cuckoo_add, METH_O,
     "add(key) -> bool: True (stored) when new, False when it might be present.  "
     "dedup.Error when the filter is full (the key was NOT added)."},
    {"update", (PyCFunction)Cuckoo_update, METH_O,
     "update(iterable): the library's batch test-and-add (GIL released for long batches); "
     "on FULL the keys "
     "before stay added and dedup.Error says how many."},
    {"add_many", (PyCFunction)Cuckoo_add_many, METH_O,
     "add_many(keys) -> list of bool, add() per key in order (the library's batch "
     "test-and-add)."},
    {"contains_many", (PyCFunction)Cuckoo_contains_many, METH_O,
     "contains_many(keys) -> list of bool (the library's batch query)."},
    {"remove", (PyCFunction)Cuckoo_remove, METH_O,
     "remove(key): delete one copy; KeyError when no fingerprint of it is stored."},
    {"discard", (PyCFunction)Cuckoo_discard, METH_O, "discard(key) -> bool: as remove()."},
    {"union", (PyCFunction)Cuckoo_union, METH_O, "Always raises dedup.Error (no union)."},
    DD_COMMON_METHODS(Cuckoo)
    DD_CTX_METHODS(Cuckoo)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Cuckoo_getset[] = {
    {"info", (getter)Cuckoo_info, NULL,
     "dict: fingerprint_bits, bucket_size, links, capacity, buckets, slots, items, fill, "
     "fpr_full (bound when full), fpr_current (in force now), seed, memory.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Cuckoo_seq = {.sq_length = (lenfunc)Cuckoo_len,
                                       .sq_contains = (objobjproc)Cuckoo_contains};

static PyTypeObject CuckooType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.Cuckoo",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Cuckoo(capacity, error_rate=0.01, *, fingerprint_bits=0, bucket_size=4, "
              "max_kicks=500, expansion=0, seed=None)\n\n"
              "A cuckoo filter (dedup/cuckoo.h): deletes; 'key in f' means MIGHT contain.  "
              "expansion >= 1 grows by links instead of failing when full.  len(f) is the "
              "EXACT number of stored fingerprints.  Thread-safe as Bloom.",
    .tp_new = Cuckoo_new,
    .tp_dealloc = (destructor)Cuckoo_dealloc,
    .tp_methods = Cuckoo_methods,
    .tp_getset = Cuckoo_getset,
    .tp_as_sequence = &Cuckoo_seq,
};

/* ---- Scalable Bloom --------------------------------------------------------------- */

static dedup_status scalable_save(const void *p, dedup_sink *s) { return dedup_scalable_save(p, s); }
static dedup_status scalable_load(dedup_source src, void **out)
{
    return dedup_scalable_load(src, NULL, (dedup_scalable **)out);
}
static void scalable_free(void *p) { dedup_scalable_free(p); }
static dedup_digest scalable_digest(const void *p, const void *k, size_t n)
{
    return dedup_scalable_digest(p, k, n);
}

static PyTypeObject ScalableType;
dd_kind dd_scalable_kind = {&ScalableType, scalable_save, scalable_load, scalable_free};
DD_COMMON_DEFS(Scalable, dd_scalable_kind)

static PyObject *Scalable_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"capacity", "error_rate", "growth", "tightening",
                            "max_links", "seed",      "blocked", NULL};
    unsigned long long capacity = 1000;
    double rate = 0.01, tightening = DEDUP_SCALABLE_DEFAULT_TIGHTENING;
    unsigned int growth = 2, max_links = DEDUP_MAX_CHAIN;
    PyObject *seed = NULL;
    int blocked = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Kd$IdIOp:ScalableBloom", names, &capacity, &rate,
                                     &growth, &tightening, &max_links, &seed, &blocked))
        return NULL;
    dedup_scalable_params p;
    dedup_scalable_params_init(&p);
    p.kind = blocked ? DEDUP_BLOOM_BLOCKED : DEDUP_BLOOM_CLASSIC;
    p.capacity = capacity;
    p.fpr = rate;
    p.growth = growth;
    p.tightening = tightening;
    p.max_links = max_links;
    if (dd_seed_of(seed, &p.seed) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_scalable *sb = NULL;
    dedup_status s = dedup_scalable_create(&p, NULL, &sb);
    return dd_adopt(o, s, sb);
}

static dedup_status scalable_add_key(void *p, const void *k, size_t n, dedup_verdict *v)
{
    return dedup_scalable_test_and_add_key(p, k, n, v);
}
static bool scalable_has_key(const void *p, const void *k, size_t n)
{
    return dedup_scalable_might_contain_key(p, k, n);
}
static PyObject *Scalable_add(dd_obj *o, PyObject *key)
{
    return dd_add_key(o, key, scalable_add_key);
}
static int Scalable_contains(dd_obj *o, PyObject *key)
{
    return dd_contains_key(o, key, scalable_has_key);
}

static PyObject *scalable_adds(dd_obj *o, PyObject *it, bool verdicts)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, scalable_digest, true) < 0)
        return NULL;
    dedup_verdict *v = PyMem_RawMalloc(sizeof *v * (size_t)(b.n ? b.n : 1));
    size_t done = 0;
    dedup_status s = DEDUP_ERR_NOMEM;
    if (v) {
        s = dedup_scalable_test_and_add_batch(o->p, b.d, (size_t)b.n, v, &done);
        for (size_t i = 0; i < done; i++)
            b.found[i] = v[i] == DEDUP_NEW;
    }
    PyMem_RawFree(v);
    dd_batch_end(&b, o);
    return dd_adds_out(b.found, b.n, s, done, verdicts);
}
static PyObject *Scalable_update(dd_obj *o, PyObject *it) { return scalable_adds(o, it, false); }
static PyObject *Scalable_add_many(dd_obj *o, PyObject *it) { return scalable_adds(o, it, true); }

static void scalable_has_batch(const void *p, const dedup_digest *d, size_t n, bool *out)
{
    dedup_scalable_might_contain_batch(p, d, n, out);
}
static PyObject *Scalable_contains_many(dd_obj *o, PyObject *it)
{
    return dd_contains_many(o, it, scalable_digest, scalable_has_batch);
}

static Py_ssize_t Scalable_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    dedup_scalable_info info;
    dedup_scalable_get_info(o->p, &info);
    dd_leave(o);
    return (Py_ssize_t)info.items;
}

static PyObject *Scalable_remove(dd_obj *o, PyObject *key)
{
    (void)o;
    (void)key;
    PyErr_SetString(dd_Error, "a scalable Bloom filter cannot delete a key "
                              "(use CountingBloom or Cuckoo)");
    return NULL;
}

static PyObject *Scalable_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    dedup_scalable_info i;
    dedup_scalable_get_info(o->p, &i);
    dd_leave(o);
    PyObject *d = PyDict_New();
    int bad = !d ||
        dd_dict_put(d, "kind", PyUnicode_FromString(i.kind == DEDUP_BLOOM_BLOCKED ? "blocked" : "classic")) ||
        dd_dict_put(d, "links", PyLong_FromUnsignedLong(i.links)) ||
        dd_dict_put(d, "max_links", PyLong_FromUnsignedLong(i.max_links)) ||
        dd_dict_put(d, "growth", PyLong_FromUnsignedLong(i.growth)) ||
        dd_dict_put(d, "tightening", PyFloat_FromDouble(i.tightening)) ||
        dd_dict_put(d, "error_rate", PyFloat_FromDouble(i.fpr)) ||
        dd_dict_put(d, "fpr_bound", PyFloat_FromDouble(i.fpr_bound)) ||
        dd_dict_put(d, "fpr_current", PyFloat_FromDouble(i.fpr_current)) ||
        dd_dict_put(d, "initial_capacity", PyLong_FromUnsignedLongLong(i.initial_capacity)) ||
        dd_dict_put(d, "capacity", PyLong_FromUnsignedLongLong(i.capacity)) ||
        dd_dict_put(d, "items", PyLong_FromUnsignedLongLong(i.items)) ||
        dd_dict_put(d, "bits", PyLong_FromUnsignedLongLong(i.bits)) ||
        dd_dict_put(d, "seed", PyLong_FromUnsignedLongLong(i.seed)) ||
        dd_dict_put(d, "memory", PyLong_FromSize_t(i.memory));
    return dd_dict_done(d, bad);
}

static PyMethodDef Scalable_methods[] = {
    {"add", (PyCFunction)Scalable_add, METH_O,
     "add(key) -> bool: True when new (a link is appended when the newest is full)."},
    {"update", (PyCFunction)Scalable_update, METH_O,
     "update(iterable): the library's batch test-and-add (GIL released)."},
    {"add_many", (PyCFunction)Scalable_add_many, METH_O,
     "add_many(keys) -> list of bool (True = new), the library's batch test-and-add."},
    {"contains_many", (PyCFunction)Scalable_contains_many, METH_O,
     "contains_many(keys) -> list of bool (batch query)."},
    {"remove", (PyCFunction)Scalable_remove, METH_O, "Always raises dedup.Error."},
    DD_COMMON_METHODS(Scalable)
    DD_CTX_METHODS(Scalable)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Scalable_getset[] = {
    {"info", (getter)Scalable_info, NULL,
     "dict: kind, links, max_links, growth, tightening, error_rate (the promise), "
     "fpr_bound (sum over links), fpr_current, capacity, items, bits, seed, memory.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Scalable_seq = {.sq_length = (lenfunc)Scalable_len,
                                         .sq_contains = (objobjproc)Scalable_contains};

static PyTypeObject ScalableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.ScalableBloom",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ScalableBloom(capacity=1000, error_rate=0.01, *, growth=2, tightening=0.9, "
              "max_links=..., seed=None, blocked=False)\n\n"
              "A chain of Bloom filters that grows (dedup/scalable.h); the rate stays under "
              "error_rate.  'key in f' means MIGHT contain.  len(f) counts the adds that "
              "were new (EXACT count of True verdicts; distinct keys taken for seen ones by "
              "a false positive are not in it).  No delete.  Thread-safe as Bloom.",
    .tp_new = Scalable_new,
    .tp_dealloc = (destructor)Scalable_dealloc,
    .tp_methods = Scalable_methods,
    .tp_getset = Scalable_getset,
    .tp_as_sequence = &Scalable_seq,
};

int dd_filters2_ready(PyObject *m)
{
    if (PyType_Ready(&CuckooType) < 0 || PyType_Ready(&ScalableType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Cuckoo", (PyObject *)&CuckooType) < 0 ||
        PyModule_AddObjectRef(m, "ScalableBloom", (PyObject *)&ScalableType) < 0)
        return -1;
    return 0;
}
