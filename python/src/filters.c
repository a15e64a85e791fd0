/*
 * filters.c - dedup.Bloom (classic and blocked) and dedup.CountingBloom over
 * dedup/bloom.h and dedup/counting.h.
 */
#include "batch.h"

#include <math.h>
#include <string.h>

/* ---- Bloom ----------------------------------------------------------------- */

static dedup_status bloom_save(const void *p, dedup_sink *s) { return dedup_bloom_save(p, s); }
static dedup_status bloom_load(dedup_source src, void **out)
{
    return dedup_bloom_load(src, NULL, (dedup_bloom **)out);
}
static void bloom_free(void *p) { dedup_bloom_free(p); }
static dedup_digest bloom_digest(const void *p, const void *k, size_t n)
{
    return dedup_bloom_digest(p, k, n);
}

static PyTypeObject BloomType;
dd_kind dd_bloom_kind = {&BloomType, bloom_save, bloom_load, bloom_free};
DD_COMMON_DEFS(Bloom, dd_bloom_kind)

static PyObject *Bloom_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"capacity", "error_rate", "bits", "hashes", "seed", "blocked", NULL};
    unsigned long long capacity = 0, bits = 0;
    double rate = 0.01;
    unsigned int k = 0;
    PyObject *seed = NULL;
    int blocked = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Kd$KIOp:Bloom", names, &capacity, &rate, &bits,
                                     &k, &seed, &blocked))
        return NULL;
    dedup_bloom_params p;
    dedup_bloom_params_init(&p);
    p.kind = blocked ? DEDUP_BLOOM_BLOCKED : DEDUP_BLOOM_CLASSIC;
    p.capacity = capacity;
    p.fpr = rate;
    p.bits = bits;
    p.k = k;
    if (dd_seed_of(seed, &p.seed) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_bloom *bf = NULL;
    dedup_status s;
    Py_BEGIN_ALLOW_THREADS
    s = dedup_bloom_create(&p, NULL, &bf);
    Py_END_ALLOW_THREADS
    return dd_adopt(o, s, bf);
}

static dedup_status bloom_add_key(void *p, const void *k, size_t n, dedup_verdict *v)
{
    *v = dedup_bloom_test_and_add_key(p, k, n) ? DEDUP_MAYBE_DUPLICATE : DEDUP_NEW;
    return DEDUP_OK;
}
static bool bloom_has_key(const void *p, const void *k, size_t n)
{
    return dedup_bloom_might_contain_key(p, k, n);
}
static PyObject *Bloom_add(dd_obj *o, PyObject *key) { return dd_add_key(o, key, bloom_add_key); }
static int Bloom_contains(dd_obj *o, PyObject *key)
{
    return dd_contains_key(o, key, bloom_has_key);
}

static void bloom_add_batch(void *p, const dedup_digest *d, size_t n)
{
    dedup_bloom_add_batch(p, d, n);
}
static PyObject *Bloom_update(dd_obj *o, PyObject *it)
{
    return dd_update(o, it, bloom_digest, bloom_add_batch);
}

static PyObject *Bloom_add_many(dd_obj *o, PyObject *it)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, bloom_digest, true) < 0)
        return NULL;
    dedup_bloom_test_and_add_batch(o->p, b.d, (size_t)b.n, b.found);
    dd_batch_end(&b, o);
    return dd_bool_list(b.found, b.n, true);
}

static void bloom_has_batch(const void *p, const dedup_digest *d, size_t n, bool *out)
{
    dedup_bloom_might_contain_batch(p, d, n, out);
}
static PyObject *Bloom_contains_many(dd_obj *o, PyObject *it)
{
    return dd_contains_many(o, it, bloom_digest, bloom_has_batch);
}

static Py_ssize_t Bloom_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    double e = dedup_bloom_estimate_count(o->p);
    dd_leave(o);
    if (!(e < 9.0e18)) {
        PyErr_SetString(PyExc_OverflowError, "the filter is saturated: its count cannot be estimated");
        return -1;
    }
    return (Py_ssize_t)llround(e);
}

static PyObject *Bloom_remove(dd_obj *o, PyObject *key)
{
    (void)o;
    (void)key;
    PyErr_SetString(dd_Error, "a Bloom filter cannot delete a key (use CountingBloom or Cuckoo)");
    return NULL;
}

static PyObject *Bloom_union(dd_obj *o, PyObject *other)
{
    dd_obj *src = dd_other(other, &BloomType, "union", "Bloom");
    if (!src)
        return NULL;
    if (src == o) {
        Py_INCREF(o);
        return (PyObject *)o;
    }
    if (dd_enter2(o, src) < 0)
        return NULL;
    dedup_status s = dedup_bloom_union(o->p, src->p);
    return dd_leave2_self(o, src, s, NULL);
}

static PyObject *Bloom_clear(dd_obj *o, PyObject *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    dedup_bloom_clear(o->p);
    dd_leave(o);
    Py_RETURN_NONE;
}

static PyObject *Bloom_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    const dedup_bloom *bf = o->p;
    PyObject *d = PyDict_New();
    int bad = !d ||
        dd_dict_put(d, "kind", PyUnicode_FromString(
                               dedup_bloom_get_kind(bf) == DEDUP_BLOOM_BLOCKED ? "blocked" : "classic")) ||
        dd_dict_put(d, "bits", PyLong_FromUnsignedLongLong(dedup_bloom_bits(bf))) ||
        dd_dict_put(d, "hashes", PyLong_FromUnsignedLong(dedup_bloom_k(bf))) ||
        dd_dict_put(d, "capacity", PyLong_FromUnsignedLongLong(dedup_bloom_capacity(bf))) ||
        dd_dict_put(d, "error_rate", PyFloat_FromDouble(dedup_bloom_target_fpr(bf))) ||
        dd_dict_put(d, "seed", PyLong_FromUnsignedLongLong(dedup_bloom_seed(bf))) ||
        dd_dict_put(d, "bits_set", PyLong_FromUnsignedLongLong(dedup_bloom_popcount(bf))) ||
        dd_dict_put(d, "fill", PyFloat_FromDouble(dedup_bloom_fill_ratio(bf))) ||
        dd_dict_put(d, "estimated_count", PyFloat_FromDouble(dedup_bloom_estimate_count(bf))) ||
        dd_dict_put(d, "fpr_current", PyFloat_FromDouble(dedup_bloom_current_fpr(bf))) ||
        dd_dict_put(d, "memory", PyLong_FromSize_t(dedup_bloom_memory_usage(bf)));
    dd_leave(o);
    return dd_dict_done(d, bad);
}

static PyObject *Bloom_ior(PyObject *a, PyObject *b)
{
    if (!PyObject_TypeCheck(a, &BloomType))
        Py_RETURN_NOTIMPLEMENTED;
    return Bloom_union((dd_obj *)a, b);
}

static PyMethodDef Bloom_methods[] = {
    {"add", (PyCFunction)Bloom_add, METH_O,
     "add(key) -> bool: add a str (UTF-8) or bytes key; True when it was new.  A False "
     "may be a false positive (a new key the filter took for a seen one)."},
    {"update", (PyCFunction)Bloom_update, METH_O,
     "update(iterable): add every key through the library's batch add (GIL released "
     "for long batches)."},
    {"add_many", (PyCFunction)Bloom_add_many, METH_O,
     "add_many(keys) -> list of bool: add in order, one verdict per key (True = new), "
     "through the library's batch test-and-add."},
    {"contains_many", (PyCFunction)Bloom_contains_many, METH_O,
     "contains_many(keys) -> list of bool: 'might contain' per key (batch query)."},
    {"remove", (PyCFunction)Bloom_remove, METH_O,
     "Always raises dedup.Error: a Bloom filter cannot delete."},
    {"union", (PyCFunction)Bloom_union, METH_O,
     "union(other): self becomes self OR other (same kind, bits, hashes and seed, "
     "else dedup.Error); returns self.  Also 'f |= g'."},
    {"clear", (PyCFunction)Bloom_clear, METH_NOARGS, "Clear every bit."},
    DD_COMMON_METHODS(Bloom)
    DD_CTX_METHODS(Bloom)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Bloom_getset[] = {
    {"info", (getter)Bloom_info, NULL,
     "dict: kind, bits, hashes, capacity, error_rate (the target), seed, bits_set, fill, "
     "estimated_count, fpr_current (the false-positive rate in force at this fill), memory.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Bloom_seq = {.sq_length = (lenfunc)Bloom_len,
                                      .sq_contains = (objobjproc)Bloom_contains};
static PyNumberMethods Bloom_num = {.nb_inplace_or = Bloom_ior};

static PyTypeObject BloomType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.Bloom",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bloom(capacity, error_rate=0.01, *, bits=0, hashes=0, seed=None, blocked=False)\n\n"
              "A Bloom filter (dedup/bloom.h): 'key in f' means the key MIGHT have been "
              "added (false positives at about error_rate once capacity keys are in; never "
              "a false negative).  blocked=True: one 64-byte block per key (faster, a few "
              "more bits).  len(f) is an ESTIMATE from the bits set.  Keys: str (UTF-8) or "
              "bytes.  Thread-safe: calls on one object are serialised by a lock; batch "
              "calls release the GIL.",
    .tp_new = Bloom_new,
    .tp_dealloc = (destructor)Bloom_dealloc,
    .tp_methods = Bloom_methods,
    .tp_getset = Bloom_getset,
    .tp_as_sequence = &Bloom_seq,
    .tp_as_number = &Bloom_num,
};

/* ---- Counting Bloom ----------------------------------------------------------- */

static dedup_status counting_save(const void *p, dedup_sink *s) { return dedup_counting_save(p, s); }
static dedup_status counting_load(dedup_source src, void **out)
{
    return dedup_counting_load(src, NULL, (dedup_counting **)out);
}
static void counting_free(void *p) { dedup_counting_free(p); }
static dedup_digest counting_digest(const void *p, const void *k, size_t n)
{
    return dedup_counting_digest(p, k, n);
}

static PyTypeObject CountingType;
dd_kind dd_counting_kind = {&CountingType, counting_save, counting_load, counting_free};
DD_COMMON_DEFS(Counting, dd_counting_kind)

static PyObject *Counting_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"capacity", "error_rate", "counters", "hashes", "seed", NULL};
    unsigned long long capacity = 0, counters = 0;
    double rate = 0.01;
    unsigned int k = 0;
    PyObject *seed = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Kd$KIO:CountingBloom", names, &capacity, &rate,
                                     &counters, &k, &seed))
        return NULL;
    dedup_counting_params p;
    dedup_counting_params_init(&p);
    p.capacity = capacity;
    p.fpr = rate;
    p.counters = counters;
    p.k = k;
    if (dd_seed_of(seed, &p.seed) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_counting *cb = NULL;
    dedup_status s = dedup_counting_create(&p, NULL, &cb);
    return dd_adopt(o, s, cb);
}

static dedup_status counting_add_key(void *p, const void *k, size_t n, dedup_verdict *v)
{
    *v = dedup_counting_test_and_add_key(p, k, n);
    return DEDUP_OK;
}
static bool counting_has_key(const void *p, const void *k, size_t n)
{
    return dedup_counting_might_contain_key(p, k, n);
}
static dedup_status counting_del_key(void *p, const void *k, size_t n)
{
    return dedup_counting_delete_key(p, k, n);
}
static PyObject *Counting_add(dd_obj *o, PyObject *key)
{
    return dd_add_key(o, key, counting_add_key);
}
static int Counting_contains(dd_obj *o, PyObject *key)
{
    return dd_contains_key(o, key, counting_has_key);
}

static void counting_add_batch(void *p, const dedup_digest *d, size_t n)
{
    dedup_counting_add_batch(p, d, n);
}
static PyObject *Counting_update(dd_obj *o, PyObject *it)
{
    return dd_update(o, it, counting_digest, counting_add_batch);
}

static PyObject *Counting_add_many(dd_obj *o, PyObject *it)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, counting_digest, true) < 0)
        return NULL;
    dedup_verdict *v = PyMem_RawMalloc(sizeof *v * (size_t)(b.n ? b.n : 1));
    if (v) {
        dedup_counting_test_and_add_batch(o->p, b.d, (size_t)b.n, v);
        for (Py_ssize_t i = 0; i < b.n; i++)
            b.found[i] = v[i] == DEDUP_NEW;
        PyMem_RawFree(v);
    }
    dd_batch_end(&b, o);
    if (!v) {
        PyMem_Free(b.found);
        return PyErr_NoMemory();
    }
    return dd_bool_list(b.found, b.n, false);
}

static void counting_has_batch(const void *p, const dedup_digest *d, size_t n, bool *out)
{
    dedup_counting_might_contain_batch(p, d, n, out);
}
static PyObject *Counting_contains_many(dd_obj *o, PyObject *it)
{
    return dd_contains_many(o, it, counting_digest, counting_has_batch);
}

static Py_ssize_t Counting_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    uint64_t n = dedup_counting_adds(o->p) - dedup_counting_deletes(o->p);
    dd_leave(o);
    return (Py_ssize_t)n;
}

/* Deletes one copy; KeyError (remove) or False (discard) when certainly absent. */
static PyObject *Counting_remove(dd_obj *o, PyObject *key)
{
    return dd_del_key(o, key, true, counting_del_key);
}
static PyObject *Counting_discard(dd_obj *o, PyObject *key)
{
    return dd_del_key(o, key, false, counting_del_key);
}

static PyObject *Counting_count(dd_obj *o, PyObject *key)
{
    dd_key k;
    if (dd_key_of(key, &k) < 0 || dd_enter(o) < 0)
        return NULL;
    uint32_t c = dedup_counting_count_key(o->p, k.p, (size_t)k.n);
    dd_leave(o);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *Counting_union(dd_obj *o, PyObject *other)
{
    dd_obj *src = dd_other(other, &CountingType, "union", "CountingBloom");
    if (!src)
        return NULL;
    if (src == o) {
        PyErr_SetString(PyExc_ValueError, "union of a CountingBloom with itself");
        return NULL;
    }
    if (dd_enter2(o, src) < 0)
        return NULL;
    dedup_status s = dedup_counting_merge(o->p, src->p);
    return dd_leave2_self(o, src, s, NULL);
}

static PyObject *Counting_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    const dedup_counting *cb = o->p;
    PyObject *d = PyDict_New();
    int bad = !d ||
        dd_dict_put(d, "kind", PyUnicode_FromString("counting")) ||
        dd_dict_put(d, "counters", PyLong_FromUnsignedLongLong(dedup_counting_counters(cb))) ||
        dd_dict_put(d, "hashes", PyLong_FromUnsignedLong(dedup_counting_k(cb))) ||
        dd_dict_put(d, "capacity", PyLong_FromUnsignedLongLong(dedup_counting_capacity(cb))) ||
        dd_dict_put(d, "error_rate", PyFloat_FromDouble(dedup_counting_target_fpr(cb))) ||
        dd_dict_put(d, "seed", PyLong_FromUnsignedLongLong(dedup_counting_seed(cb))) ||
        dd_dict_put(d, "adds", PyLong_FromUnsignedLongLong(dedup_counting_adds(cb))) ||
        dd_dict_put(d, "deletes", PyLong_FromUnsignedLongLong(dedup_counting_deletes(cb))) ||
        dd_dict_put(d, "saturated", PyLong_FromUnsignedLongLong(dedup_counting_saturated(cb))) ||
        dd_dict_put(d, "nonzero", PyLong_FromUnsignedLongLong(dedup_counting_nonzero(cb))) ||
        dd_dict_put(d, "fill", PyFloat_FromDouble((double)dedup_counting_nonzero(cb) /
                                                  (double)dedup_counting_counters(cb))) ||
        dd_dict_put(d, "fpr_current", PyFloat_FromDouble(dedup_counting_current_fpr(cb))) ||
        dd_dict_put(d, "memory", PyLong_FromSize_t(dedup_counting_memory_usage(cb)));
    dd_leave(o);
    return dd_dict_done(d, bad);
}

static PyMethodDef Counting_methods[] = {
    {"add", (PyCFunction)Counting_add, METH_O,
     "add(key) -> bool: True (and the key counted) when it was new; False (nothing "
     "changed) when it might be present."},
    {"update", (PyCFunction)Counting_update, METH_O,
     "update(iterable): count every key once more (the library's batch add)."},
    {"add_many", (PyCFunction)Counting_add_many, METH_O,
     "add_many(keys) -> list of bool: add() per key, in order, through the library's "
     "batch test-and-add (GIL released for long batches)."},
    {"contains_many", (PyCFunction)Counting_contains_many, METH_O,
     "contains_many(keys) -> list of bool (batch query)."},
    {"remove", (PyCFunction)Counting_remove, METH_O,
     "remove(key): delete one copy; KeyError when the key is certainly absent.  Delete "
     "only keys you added."},
    {"discard", (PyCFunction)Counting_discard, METH_O,
     "discard(key) -> bool: as remove(), False instead of KeyError."},
    {"count", (PyCFunction)Counting_count, METH_O,
     "count(key) -> int: estimated copies (never fewer than the truth; 15 = 15 or more)."},
    {"union", (PyCFunction)Counting_union, METH_O,
     "union(other): add other's counts (same shape and seed); returns self."},
    DD_COMMON_METHODS(Counting)
    DD_CTX_METHODS(Counting)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Counting_getset[] = {
    {"info", (getter)Counting_info, NULL,
     "dict: counters, hashes, capacity, error_rate, seed, adds, deletes, saturated, "
     "nonzero, fill, fpr_current, memory.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Counting_seq = {.sq_length = (lenfunc)Counting_len,
                                         .sq_contains = (objobjproc)Counting_contains};

static PyTypeObject CountingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.CountingBloom",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CountingBloom(capacity, error_rate=0.01, *, counters=0, hashes=0, seed=None)\n\n"
              "A Bloom filter of 4-bit counters that can delete (dedup/counting.h).  'key in "
              "f' means MIGHT contain.  len(f) = adds - deletes recorded (EXACT count of "
              "operations, not of distinct keys: update() counts every key).  Thread-safe "
              "as Bloom.",
    .tp_new = Counting_new,
    .tp_dealloc = (destructor)Counting_dealloc,
    .tp_methods = Counting_methods,
    .tp_getset = Counting_getset,
    .tp_as_sequence = &Counting_seq,
};

int dd_filters_ready(PyObject *m)
{
    if (PyType_Ready(&BloomType) < 0 || PyType_Ready(&CountingType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Bloom", (PyObject *)&BloomType) < 0 ||
        PyModule_AddObjectRef(m, "CountingBloom", (PyObject *)&CountingType) < 0)
        return -1;
    return 0;
}
