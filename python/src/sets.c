/*
 * sets.c - dedup.StrSet and dedup.IntSet (exact sets, dedup/set.h) and
 * dedup.HyperLogLog (dedup/hll.h).
 */
#include "batch.h"

#include <math.h>
#include <string.h>

/* ---- StrSet ------------------------------------------------------------------ */

static dedup_status strset_save(const void *p, dedup_sink *s) { return dedup_strset_save(p, s); }
static dedup_status strset_load(dedup_source src, void **out)
{
    return dedup_strset_load(src, NULL, (dedup_strset **)out);
}
static void strset_free(void *p) { dedup_strset_free(p); }
static dedup_digest strset_digest(const void *p, const void *k, size_t n)
{
    return dedup_strset_digest(p, k, n);
}

static PyTypeObject StrSetType;
dd_kind dd_strset_kind = {&StrSetType, strset_save, strset_load, strset_free};
DD_COMMON_DEFS(StrSet, dd_strset_kind)

static PyObject *StrSet_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"capacity", "memory_limit", "seed", NULL};
    unsigned long long capacity = 0, limit = 0;
    PyObject *seed = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|K$KO:StrSet", names, &capacity, &limit, &seed))
        return NULL;
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.capacity = capacity;
    p.memory_limit = limit;
    if (dd_seed_of(seed, &p.seed) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_strset *set = NULL;
    dedup_status s = dedup_strset_create(&p, NULL, &set);
    return dd_adopt(o, s, set);
}

static dedup_status strset_add_key(void *p, const void *k, size_t n, dedup_verdict *v)
{
    return dedup_strset_insert(p, k, n, dedup_strset_digest(p, k, n), v);
}
static bool strset_has_key(const void *p, const void *k, size_t n)
{
    return dedup_strset_contains(p, k, n, dedup_strset_digest(p, k, n));
}
static PyObject *StrSet_add(dd_obj *o, PyObject *key) { return dd_add_key(o, key, strset_add_key); }
static int StrSet_contains(dd_obj *o, PyObject *key)
{
    return dd_contains_key(o, key, strset_has_key);
}

/* Inserts in order with the slots (then the stored keys) of keys further on
 * prefetched, as the library's batch paths do; dedup/set.h has no batch
 * insert for strings, only these prefetch calls. */
static PyObject *strset_adds(dd_obj *o, PyObject *it, bool verdicts)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, strset_digest, true) < 0)
        return NULL;
    enum { AHEAD = 16 };
    dedup_status s = DEDUP_OK;
    Py_ssize_t i = 0;
    for (Py_ssize_t j = 0; j < b.n && j < AHEAD; j++)
        dedup_strset_prefetch(o->p, b.d[j]);
    for (; i < b.n; i++) {
        if (i + AHEAD < b.n)
            dedup_strset_prefetch(o->p, b.d[i + AHEAD]);
        if (i + AHEAD / 2 < b.n)
            dedup_strset_prefetch_key(o->p, b.d[i + AHEAD / 2]);
        dedup_verdict v = DEDUP_NEW;
        s = dedup_strset_insert(o->p, b.keys[i].p, (size_t)b.keys[i].n, b.d[i], &v);
        if (s)
            break;
        b.found[i] = v == DEDUP_NEW;
    }
    dd_batch_end(&b, o);
    return dd_adds_out(b.found, b.n, s, (size_t)i, verdicts);
}
static PyObject *StrSet_update(dd_obj *o, PyObject *it) { return strset_adds(o, it, false); }
static PyObject *StrSet_add_many(dd_obj *o, PyObject *it) { return strset_adds(o, it, true); }

static PyObject *StrSet_contains_many(dd_obj *o, PyObject *it)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, strset_digest, true) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < b.n; i++)
        b.found[i] = dedup_strset_contains(o->p, b.keys[i].p, (size_t)b.keys[i].n, b.d[i]);
    dd_batch_end(&b, o);
    return dd_bool_list(b.found, b.n, false);
}

static Py_ssize_t StrSet_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    uint64_t n = dedup_strset_size(o->p);
    dd_leave(o);
    return (Py_ssize_t)n;
}

static int strset_visit(void *ctx, const void *key, size_t len, uint64_t count)
{
    (void)count;
    PyObject *b = PyBytes_FromStringAndSize(key, (Py_ssize_t)len);
    if (!b)
        return 1;
    int r = PyList_Append(ctx, b);
    Py_DECREF(b);
    return r ? 1 : 0;
}

static PyObject *StrSet_iter(dd_obj *o)
{
    PyObject *l = PyList_New(0);
    if (!l)
        return NULL;
    if (dd_enter(o) < 0) {
        Py_DECREF(l);
        return NULL;
    }
    int r = dedup_strset_foreach(o->p, strset_visit, l);
    dd_leave(o);
    if (r) {
        Py_DECREF(l);
        return NULL;
    }
    PyObject *it = PyObject_GetIter(l);
    Py_DECREF(l);
    return it;
}

static PyObject *StrSet_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    PyObject *d = PyDict_New();
    int bad = !d || dd_dict_put(d, "kind", PyUnicode_FromString("strings")) ||
              dd_dict_put(d, "items", PyLong_FromUnsignedLongLong(dedup_strset_size(o->p))) ||
              dd_dict_put(d, "memory", PyLong_FromSize_t(dedup_strset_memory_usage(o->p)));
    dd_leave(o);
    return dd_dict_done(d, bad);
}

static PyObject *StrSet_clear(dd_obj *o, PyObject *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    dedup_strset_clear(o->p);
    dd_leave(o);
    Py_RETURN_NONE;
}

static PyObject *set_no_remove(dd_obj *o, PyObject *key)
{
    (void)o;
    (void)key;
    PyErr_SetString(dd_Error, "the library's exact sets cannot delete a key");
    return NULL;
}

static PyMethodDef StrSet_methods[] = {
    {"add", (PyCFunction)StrSet_add, METH_O, "add(key) -> bool: True when the key is new."},
    {"update", (PyCFunction)StrSet_update, METH_O,
     "update(iterable): insert every key (prefetched ahead; GIL released for long batches)."},
    {"add_many", (PyCFunction)StrSet_add_many, METH_O,
     "add_many(keys) -> list of bool (True = new), in order."},
    {"contains_many", (PyCFunction)StrSet_contains_many, METH_O,
     "contains_many(keys) -> list of bool."},
    {"remove", (PyCFunction)set_no_remove, METH_O, "Always raises dedup.Error (no delete)."},
    {"clear", (PyCFunction)StrSet_clear, METH_NOARGS, "Remove every key."},
    DD_COMMON_METHODS(StrSet)
    DD_CTX_METHODS(StrSet)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef StrSet_getset[] = {
    {"info", (getter)StrSet_info, NULL, "dict: kind, items, memory (bytes held, exact).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods StrSet_seq = {.sq_length = (lenfunc)StrSet_len,
                                       .sq_contains = (objobjproc)StrSet_contains};

static PyTypeObject StrSetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.StrSet",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StrSet(capacity=0, *, memory_limit=0, seed=None)\n\n"
              "An exact set of str/bytes keys (dedup_strset): 'in' is certain, len() exact.  "
              "A str key and its UTF-8 bytes are the same key; iteration yields bytes in "
              "insertion order.  memory_limit (bytes): an add that would grow the set past it "
              "raises dedup.Error 'structure is full' and changes nothing; the set grows by "
              "2 MiB segments, so a limit below about 2.1 MB holds no key.  Thread-safe as "
              "Bloom.",
    .tp_new = StrSet_new,
    .tp_dealloc = (destructor)StrSet_dealloc,
    .tp_methods = StrSet_methods,
    .tp_getset = StrSet_getset,
    .tp_as_sequence = &StrSet_seq,
    .tp_iter = (getiterfunc)StrSet_iter,
};

/* ---- IntSet ------------------------------------------------------------------ */

static dedup_status intset_save(const void *p, dedup_sink *s) { return dedup_u64set_save(p, s); }
static dedup_status intset_load(dedup_source src, void **out)
{
    return dedup_u64set_load(src, NULL, (dedup_u64set **)out);
}
static void intset_free(void *p) { dedup_u64set_free(p); }

static PyTypeObject IntSetType;
dd_kind dd_intset_kind = {&IntSetType, intset_save, intset_load, intset_free};
DD_COMMON_DEFS(IntSet, dd_intset_kind)

static int int_key(PyObject *o, uint64_t *v)
{
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "an IntSet key must be int, not %.200s", Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(o);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *v = (uint64_t)x;
    return 0;
}

static PyObject *IntSet_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"capacity", "memory_limit", NULL};
    unsigned long long capacity = 0, limit = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|K$K:IntSet", names, &capacity, &limit))
        return NULL;
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.capacity = capacity;
    p.memory_limit = limit;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_u64set *set = NULL;
    dedup_status s = dedup_u64set_create(&p, NULL, &set);
    return dd_adopt(o, s, set);
}

static PyObject *IntSet_add(dd_obj *o, PyObject *key)
{
    uint64_t k;
    if (int_key(key, &k) < 0 || dd_enter(o) < 0)
        return NULL;
    dedup_verdict v = DEDUP_NEW;
    dedup_status s = dedup_u64set_insert(o->p, k, &v);
    dd_leave(o);
    if (s)
        return dd_raise(s, NULL);
    return PyBool_FromLong(v == DEDUP_NEW);
}

static int IntSet_contains(dd_obj *o, PyObject *key)
{
    uint64_t k;
    if (int_key(key, &k) < 0 || dd_enter(o) < 0)
        return -1;
    bool r = dedup_u64set_contains(o->p, k);
    dd_leave(o);
    return r;
}

/* Keys of an iterable as uint64 (PyMem; *n set). */
static uint64_t *int_keys(PyObject *it, Py_ssize_t *n)
{
    PyObject *l = PySequence_List(it);
    if (!l)
        return NULL;
    Py_ssize_t len = PyList_GET_SIZE(l);
    uint64_t *k = PyMem_Malloc(sizeof *k * (size_t)(len ? len : 1));
    if (!k) {
        Py_DECREF(l);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        if (int_key(PyList_GET_ITEM(l, i), &k[i]) < 0) {
            PyMem_Free(k);
            Py_DECREF(l);
            return NULL;
        }
    }
    Py_DECREF(l);
    *n = len;
    return k;
}

/* The keys of 'it' (int_keys) and *out, an array of *n elements of 'size'
 * bytes, with the lock taken; NULL with an exception set and nothing held. */
static uint64_t *int_batch_begin(dd_obj *o, PyObject *it, Py_ssize_t *n, size_t size, void **out)
{
    uint64_t *k = int_keys(it, n);
    if (!k)
        return NULL;
    *out = PyMem_Malloc(size * (size_t)(*n ? *n : 1));
    if (!*out) {
        PyMem_Free(k);
        PyErr_NoMemory();
        return NULL;
    }
    if (dd_enter(o) < 0) {
        PyMem_Free(k);
        PyMem_Free(*out);
        return NULL;
    }
    return k;
}

static PyObject *intset_adds(dd_obj *o, PyObject *it, bool verdicts)
{
    Py_ssize_t n = 0;
    void *out;
    uint64_t *k = int_batch_begin(o, it, &n, sizeof(dedup_verdict), &out);
    if (!k)
        return NULL;
    dedup_verdict *v = out;
    size_t done = 0;
    dedup_status s;
    if (n >= DD_NOGIL_BATCH) {
        Py_BEGIN_ALLOW_THREADS
        s = dedup_u64set_insert_batch(o->p, k, (size_t)n, v, &done);
        Py_END_ALLOW_THREADS
    } else {
        s = dedup_u64set_insert_batch(o->p, k, (size_t)n, v, &done);
    }
    dd_leave(o);
    PyMem_Free(k);
    PyObject *r = NULL;
    if (s) {
        dd_raise_done(s, done, "added");
    } else if (!verdicts) {
        r = Py_None;
        Py_INCREF(r);
    } else if ((r = PyList_New(n))) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *b = v[i] == DEDUP_NEW ? Py_True : Py_False;
            Py_INCREF(b);
            PyList_SET_ITEM(r, i, b);
        }
    }
    PyMem_Free(v);
    return r;
}
static PyObject *IntSet_update(dd_obj *o, PyObject *it) { return intset_adds(o, it, false); }
static PyObject *IntSet_add_many(dd_obj *o, PyObject *it) { return intset_adds(o, it, true); }

static PyObject *IntSet_contains_many(dd_obj *o, PyObject *it)
{
    Py_ssize_t n = 0;
    void *out;
    uint64_t *k = int_batch_begin(o, it, &n, sizeof(bool), &out);
    if (!k)
        return NULL;
    bool *found = out;
    Py_BEGIN_ALLOW_THREADS
    dedup_u64set_contains_batch(o->p, k, (size_t)n, found);
    Py_END_ALLOW_THREADS
    dd_leave(o);
    PyMem_Free(k);
    return dd_bool_list(found, n, false);
}

static Py_ssize_t IntSet_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    uint64_t n = dedup_u64set_size(o->p);
    dd_leave(o);
    return (Py_ssize_t)n;
}

static PyObject *IntSet_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    PyObject *d = PyDict_New();
    int bad = !d || dd_dict_put(d, "kind", PyUnicode_FromString("integers")) ||
              dd_dict_put(d, "items", PyLong_FromUnsignedLongLong(dedup_u64set_size(o->p))) ||
              dd_dict_put(d, "memory", PyLong_FromSize_t(dedup_u64set_memory_usage(o->p)));
    dd_leave(o);
    return dd_dict_done(d, bad);
}

static PyMethodDef IntSet_methods[] = {
    {"add", (PyCFunction)IntSet_add, METH_O,
     "add(key) -> bool: True when new; keys are ints in 0 .. 2**64-1 (OverflowError else)."},
    {"update", (PyCFunction)IntSet_update, METH_O,
     "update(iterable): the library's batch insert (GIL released for long batches)."},
    {"add_many", (PyCFunction)IntSet_add_many, METH_O,
     "add_many(keys) -> list of bool (True = new), the library's batch insert."},
    {"contains_many", (PyCFunction)IntSet_contains_many, METH_O,
     "contains_many(keys) -> list of bool (the library's batch query)."},
    {"remove", (PyCFunction)set_no_remove, METH_O, "Always raises dedup.Error (no delete)."},
    DD_COMMON_METHODS(IntSet)
    DD_CTX_METHODS(IntSet)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef IntSet_getset[] = {
    {"info", (getter)IntSet_info, NULL, "dict: kind, items, memory.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods IntSet_seq = {.sq_length = (lenfunc)IntSet_len,
                                       .sq_contains = (objobjproc)IntSet_contains};

static PyTypeObject IntSetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.IntSet",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "IntSet(capacity=0, *, memory_limit=0)\n\n"
              "An exact set of 64-bit unsigned integers (dedup_u64set).  Thread-safe as Bloom.",
    .tp_new = IntSet_new,
    .tp_dealloc = (destructor)IntSet_dealloc,
    .tp_methods = IntSet_methods,
    .tp_getset = IntSet_getset,
    .tp_as_sequence = &IntSet_seq,
};

/* ---- HyperLogLog ------------------------------------------------------------- */

static dedup_status hll_save(const void *p, dedup_sink *s) { return dedup_hll_save(p, s); }
static dedup_status hll_load(dedup_source src, void **out)
{
    return dedup_hll_load(src, NULL, (dedup_hll **)out);
}
static void hll_free(void *p) { dedup_hll_free(p); }
static dedup_digest hll_digest(const void *p, const void *k, size_t n)
{
    return dedup_hash(k, n, dedup_hll_seed(p));
}

static PyTypeObject HLLType;
dd_kind dd_hll_kind = {&HLLType, hll_save, hll_load, hll_free};
DD_COMMON_DEFS(HLL, dd_hll_kind)

static PyObject *HLL_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"precision", "seed", NULL};
    unsigned int precision = DEDUP_HLL_DEFAULT_PRECISION;
    PyObject *seed = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|I$O:HyperLogLog", names, &precision, &seed))
        return NULL;
    dedup_hll_params p;
    dedup_hll_params_init(&p);
    p.precision = precision;
    if (dd_seed_of(seed, &p.seed) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_hll *h = NULL;
    dedup_status s = dedup_hll_create(&p, NULL, &h);
    return dd_adopt(o, s, h);
}

static PyObject *HLL_add(dd_obj *o, PyObject *key)
{
    dd_key k;
    if (dd_key_of(key, &k) < 0 || dd_enter(o) < 0)
        return NULL;
    dedup_status s = dedup_hll_add(o->p, hll_digest(o->p, k.p, (size_t)k.n));
    dd_leave(o);
    if (s)
        return dd_raise(s, NULL);
    Py_RETURN_NONE;
}

static PyObject *HLL_update(dd_obj *o, PyObject *it)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, hll_digest, false) < 0)
        return NULL;
    dedup_status s = dedup_hll_add_batch(o->p, b.d, (size_t)b.n);
    dd_batch_end(&b, o);
    if (s)
        return dd_raise(s, NULL);
    Py_RETURN_NONE;
}

static PyObject *HLL_count(dd_obj *o, PyObject *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    double e = dedup_hll_estimate(o->p);
    dd_leave(o);
    return PyFloat_FromDouble(e);
}

static Py_ssize_t HLL_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    double e = dedup_hll_estimate(o->p);
    dd_leave(o);
    return (Py_ssize_t)llround(e);
}

static PyObject *HLL_merge(dd_obj *o, PyObject *other)
{
    dd_obj *src = dd_other(other, &HLLType, "merge", "HyperLogLog");
    if (!src)
        return NULL;
    if (src == o) {
        Py_INCREF(o);
        return (PyObject *)o;
    }
    if (dd_enter2(o, src) < 0)
        return NULL;
    char why[160] = "";
    dedup_status s = dedup_hll_merge(o->p, src->p, why, sizeof why);
    return dd_leave2_self(o, src, s, why[0] ? why : NULL);
}

static PyObject *HLL_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    const dedup_hll *h = o->p;
    PyObject *d = PyDict_New();
    int bad = !d || dd_dict_put(d, "kind", PyUnicode_FromString("hll")) ||
              dd_dict_put(d, "precision", PyLong_FromUnsignedLong(dedup_hll_precision(h))) ||
              dd_dict_put(d, "registers", PyLong_FromUnsignedLongLong(dedup_hll_registers(h))) ||
              dd_dict_put(d, "sparse", PyBool_FromLong(dedup_hll_is_sparse(h))) ||
              dd_dict_put(d, "std_error", PyFloat_FromDouble(dedup_hll_std_error(h))) ||
              dd_dict_put(d, "estimate", PyFloat_FromDouble(dedup_hll_estimate(h))) ||
              dd_dict_put(d, "seed", PyLong_FromUnsignedLongLong(dedup_hll_seed(h))) ||
              dd_dict_put(d, "memory", PyLong_FromSize_t(dedup_hll_memory_usage(h)));
    dd_leave(o);
    return dd_dict_done(d, bad);
}

static PyMethodDef HLL_methods[] = {
    {"add", (PyCFunction)HLL_add, METH_O, "add(key): count a str/bytes key."},
    {"update", (PyCFunction)HLL_update, METH_O, "update(iterable): the library's batch add."},
    {"count", (PyCFunction)HLL_count, METH_NOARGS,
     "count() -> float: the ESTIMATED number of distinct keys (std error: info['std_error'])."},
    {"merge", (PyCFunction)HLL_merge, METH_O,
     "merge(other): self becomes the sketch of both inputs (same precision and seed)."},
    DD_COMMON_METHODS(HLL)
    DD_CTX_METHODS(HLL)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef HLL_getset[] = {
    {"info", (getter)HLL_info, NULL,
     "dict: precision, registers, sparse, std_error, estimate, seed, memory.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods HLL_seq = {.sq_length = (lenfunc)HLL_len};

static PyTypeObject HLLType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.HyperLogLog",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "HyperLogLog(precision=14, *, seed=None)\n\n"
              "Distinct-count sketch (dedup/hll.h).  len(h) is the rounded ESTIMATE.  "
              "Thread-safe as Bloom.",
    .tp_new = HLL_new,
    .tp_dealloc = (destructor)HLL_dealloc,
    .tp_methods = HLL_methods,
    .tp_getset = HLL_getset,
    .tp_as_sequence = &HLL_seq,
};

int dd_sets_ready(PyObject *m)
{
    if (PyType_Ready(&StrSetType) < 0 || PyType_Ready(&IntSetType) < 0 ||
        PyType_Ready(&HLLType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "StrSet", (PyObject *)&StrSetType) < 0 ||
        PyModule_AddObjectRef(m, "IntSet", (PyObject *)&IntSetType) < 0 ||
        PyModule_AddObjectRef(m, "HyperLogLog", (PyObject *)&HLLType) < 0)
        return -1;
    return 0;
}
