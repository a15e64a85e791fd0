/*
 * digest.c - dedup.DigestSet: an exact set of str/bytes keys that keeps
 * only each key's 128-bit digest under a secret seed (dedup_digestset of
 * dedup/set.h), the equality the CLI uses for records kept by reference.
 */
#include "batch.h"

#include <string.h>

static dedup_status digestset_save(const void *p, dedup_sink *s)
{
    return dedup_digestset_save(p, s);
}
static dedup_status digestset_load(dedup_source src, void **out)
{
    return dedup_digestset_load(src, NULL, (dedup_digestset **)out);
}
static void digestset_free(void *p) { dedup_digestset_free(p); }
static dedup_digest digestset_digest(const void *p, const void *k, size_t n)
{
    return dedup_hash(k, n, dedup_digestset_seed(p));
}

static PyTypeObject DigestSetType;
dd_kind dd_digestset_kind = {&DigestSetType, digestset_save, digestset_load, digestset_free};
DD_COMMON_DEFS(DigestSet, dd_digestset_kind)

/* A seed nobody outside this process knows: keys chosen to collide under
 * one seed do not collide under another. */
static int secret_seed(uint64_t *seed)
{
    if (dedup_secret_seed(seed) != DEDUP_OK) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

static PyObject *DigestSet_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"capacity", "memory_limit", "seed", NULL};
    unsigned long long capacity = 0, limit = 0;
    PyObject *seed = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|K$KO:DigestSet", names, &capacity, &limit,
                                     &seed))
        return NULL;
    dedup_set_params p;
    dedup_set_params_init(&p);
    p.capacity = capacity;
    p.memory_limit = limit;
    if ((seed && seed != Py_None ? dd_seed_of(seed, &p.seed) : secret_seed(&p.seed)) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_digestset *set = NULL;
    dedup_status s;
    Py_BEGIN_ALLOW_THREADS
    s = dedup_digestset_create(&p, NULL, &set);
    Py_END_ALLOW_THREADS
    return dd_adopt(o, s, set);
}

static dedup_status digestset_add_key(void *p, const void *k, size_t n, dedup_verdict *v)
{
    return dedup_digestset_insert(p, digestset_digest(p, k, n), v);
}
static bool digestset_has_key(const void *p, const void *k, size_t n)
{
    return dedup_digestset_contains(p, digestset_digest(p, k, n));
}
static PyObject *DigestSet_add(dd_obj *o, PyObject *key)
{
    return dd_add_key(o, key, digestset_add_key);
}
static int DigestSet_contains(dd_obj *o, PyObject *key)
{
    return dd_contains_key(o, key, digestset_has_key);
}

/* Inserts in order with the slots of keys further on prefetched. */
static PyObject *digestset_adds(dd_obj *o, PyObject *it, bool verdicts)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, digestset_digest, true) < 0)
        return NULL;
    enum { AHEAD = 16 };
    dedup_status s = DEDUP_OK;
    Py_ssize_t i = 0;
    for (Py_ssize_t j = 0; j < b.n && j < AHEAD; j++)
        dedup_digestset_prefetch(o->p, b.d[j]);
    for (; i < b.n; i++) {
        if (i + AHEAD < b.n)
            dedup_digestset_prefetch(o->p, b.d[i + AHEAD]);
        dedup_verdict v = DEDUP_NEW;
        s = dedup_digestset_insert(o->p, b.d[i], &v);
        if (s)
            break;
        b.found[i] = v == DEDUP_NEW;
    }
    dd_batch_end(&b, o);
    return dd_adds_out(b.found, b.n, s, (size_t)i, verdicts);
}
static PyObject *DigestSet_update(dd_obj *o, PyObject *it) { return digestset_adds(o, it, false); }
static PyObject *DigestSet_add_many(dd_obj *o, PyObject *it)
{
    return digestset_adds(o, it, true);
}

static void digestset_has_batch(const void *p, const dedup_digest *d, size_t n, bool *out)
{
    enum { AHEAD = 16 };
    for (size_t j = 0; j < n && j < AHEAD; j++)
        dedup_digestset_prefetch(p, d[j]);
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n)
            dedup_digestset_prefetch(p, d[i + AHEAD]);
        out[i] = dedup_digestset_contains(p, d[i]);
    }
}
static PyObject *DigestSet_contains_many(dd_obj *o, PyObject *it)
{
    return dd_contains_many(o, it, digestset_digest, digestset_has_batch);
}

static Py_ssize_t DigestSet_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    uint64_t n = dedup_digestset_size(o->p);
    dd_leave(o);
    return (Py_ssize_t)n;
}

static PyObject *DigestSet_info(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    PyObject *d = PyDict_New();
    int bad = !d || dd_dict_put(d, "kind", PyUnicode_FromString("digests")) ||
              dd_dict_put(d, "items", PyLong_FromUnsignedLongLong(dedup_digestset_size(o->p))) ||
              dd_dict_put(d, "seed", PyLong_FromUnsignedLongLong(dedup_digestset_seed(o->p))) ||
              dd_dict_put(d, "memory", PyLong_FromSize_t(dedup_digestset_memory_usage(o->p)));
    dd_leave(o);
    return dd_dict_done(d, bad);
}

static PyObject *DigestSet_remove(dd_obj *o, PyObject *key)
{
    (void)o;
    (void)key;
    PyErr_SetString(dd_Error, "a DigestSet cannot delete a key");
    return NULL;
}

static PyMethodDef DigestSet_methods[] = {
    {"add", (PyCFunction)DigestSet_add, METH_O, "add(key) -> bool: True when the key is new."},
    {"update", (PyCFunction)DigestSet_update, METH_O,
     "update(iterable): insert every key (slots prefetched ahead; GIL released for long "
     "batches).  On a memory_limit reached, the keys before stay added and dedup.Error "
     "says how many."},
    {"add_many", (PyCFunction)DigestSet_add_many, METH_O,
     "add_many(keys) -> list of bool (True = new), in order."},
    {"contains_many", (PyCFunction)DigestSet_contains_many, METH_O,
     "contains_many(keys) -> list of bool (batch query, prefetched)."},
    {"remove", (PyCFunction)DigestSet_remove, METH_O, "Always raises dedup.Error (no delete)."},
    DD_COMMON_METHODS(DigestSet)
    DD_CTX_METHODS(DigestSet)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef DigestSet_getset[] = {
    {"info", (getter)DigestSet_info, NULL, "dict: kind, items, seed, memory (bytes held, exact).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods DigestSet_seq = {.sq_length = (lenfunc)DigestSet_len,
                                          .sq_contains = (objobjproc)DigestSet_contains};

static PyTypeObject DigestSetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.DigestSet",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "DigestSet(capacity=0, *, memory_limit=0, seed=None)\n\n"
              "A set of str/bytes keys that keeps only each key's 128-bit digest (XXH3-128) "
              "under a seed drawn from the OS (getrandom) unless one is given, and saved with "
              "the set: 19 to 24 bytes a key whatever the keys' length.  'in' and add() "
              "compare digests: equal keys always match, and two different keys match only "
              "if their digests collide, with probability about n^2 / 2^129 over n keys "
              "(1e-20 at a billion keys), which keys chosen by someone who does not know the "
              "seed cannot raise -- the equality the CLI uses for records kept by reference.  "
              "len() is exact; the keys themselves are not kept (no iteration, no delete).  "
              "The file is the CLI's digest set (type 8).  Thread-safe as Bloom.",
    .tp_new = DigestSet_new,
    .tp_dealloc = (destructor)DigestSet_dealloc,
    .tp_methods = DigestSet_methods,
    .tp_getset = DigestSet_getset,
    .tp_as_sequence = &DigestSet_seq,
};

int dd_digest_ready(PyObject *m)
{
    if (PyType_Ready(&DigestSetType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "DigestSet", (PyObject *)&DigestSetType);
}
