/*
 * ring.c - dedup.Ring: the consistent-hash ring of dedup/ring.h (owner of a
 * key among named, weighted nodes), as `dedup ring` and `dedup split
 * --nodes` route keys.
 */
#include "batch.h"

#include "dedup/ring.h"

static dedup_status ring_save(const void *p, dedup_sink *s) { return dedup_ring_save(p, s); }
static dedup_status ring_load(dedup_source src, void **out)
{
    return dedup_ring_load(src, NULL, (dedup_ring **)out);
}
static void ring_free(void *p) { dedup_ring_free(p); }
/* Keys are hashed as the CLI hashes them for routing: the default seed. */
static dedup_digest ring_digest(const void *p, const void *k, size_t n)
{
    (void)p;
    return dedup_hash(k, n, DEDUP_DEFAULT_SEED);
}

static PyTypeObject RingType;
dd_kind dd_ring_kind = {&RingType, ring_save, ring_load, ring_free};
DD_COMMON_DEFS(Ring, dd_ring_kind)

/* Adds one node (name, weight); -1 with dedup.Error set. */
static int ring_add_one(dd_obj *o, PyObject *name, double weight)
{
    const char *n = PyUnicode_AsUTF8(name);
    if (!n)
        return -1;
    dedup_status s = dedup_ring_add(o->p, n, weight);
    if (s) {
        dd_raise(s, n);
        return -1;
    }
    return 0;
}

static PyObject *Ring_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"nodes", "points_per_weight", "seed", NULL};
    PyObject *nodes = NULL, *seed = NULL;
    unsigned int points = DEDUP_RING_DEFAULT_POINTS;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$IO:Ring", names, &nodes, &points, &seed))
        return NULL;
    dedup_ring_params p;
    dedup_ring_params_init(&p);
    p.points_per_weight = points;
    if (seed && seed != Py_None && dd_seed_of(seed, &p.seed) < 0)
        return NULL;
    dd_obj *o = dd_alloc(type);
    if (!o)
        return NULL;
    dedup_status s = dedup_ring_create(&p, NULL, (dedup_ring **)&o->p);
    if (s) {
        Py_DECREF(o);
        return dd_raise(s, NULL);
    }
    if (nodes && nodes != Py_None) {
        /* a dict {name: weight} or an iterable of names (weight 1) */
        PyObject *items = PyDict_Check(nodes) ? PyDict_Items(nodes) : PySequence_List(nodes);
        for (Py_ssize_t i = 0; items && i < PyList_GET_SIZE(items); i++) {
            PyObject *it = PyList_GET_ITEM(items, i);
            PyObject *name = PyTuple_Check(it) ? PyTuple_GET_ITEM(it, 0) : it;
            double w = PyTuple_Check(it) ? PyFloat_AsDouble(PyTuple_GET_ITEM(it, 1)) : 1.0;
            if ((w == -1.0 && PyErr_Occurred()) || ring_add_one(o, name, w) < 0) {
                Py_CLEAR(items);
                break;
            }
        }
        if (!items) {
            Py_DECREF(o);
            return NULL;
        }
        Py_DECREF(items);
    }
    return (PyObject *)o;
}

static PyObject *node_name(const dd_obj *o, uint32_t i)
{
    if (i == DEDUP_RING_NONE) {
        PyErr_SetString(dd_Error, "the ring has no node");
        return NULL;
    }
    return PyUnicode_FromString(dedup_ring_node_name(o->p, i));
}

static PyObject *Ring_owner(dd_obj *o, PyObject *key)
{
    dd_key k;
    if (dd_key_of(key, &k) < 0 || dd_enter(o) < 0)
        return NULL;
    uint32_t i = dedup_ring_lookup(o->p, ring_digest(o->p, k.p, (size_t)k.n));
    PyObject *r = node_name(o, i);
    dd_leave(o);
    return r;
}

static PyObject *Ring_owners(dd_obj *o, PyObject *it)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, ring_digest, false) < 0)
        return NULL;
    uint32_t *idx = PyMem_RawMalloc(sizeof *idx * (size_t)(b.n ? b.n : 1));
    if (idx)
        dedup_ring_lookup_batch(o->p, b.d, (size_t)b.n, idx);
    Py_ssize_t n = b.n;
    if (b.ts)
        PyEval_RestoreThread(b.ts);
    b.ts = NULL;
    PyObject *l = idx ? PyList_New(n) : PyErr_NoMemory();
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *name = node_name(o, idx[i]);
        if (!name) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, name);
    }
    PyMem_RawFree(idx);
    dd_batch_end(&b, o);
    return l;
}

static PyObject *Ring_add(dd_obj *o, PyObject *args)
{
    PyObject *name;
    double w = 1.0;
    if (!PyArg_ParseTuple(args, "U|d:add", &name, &w) || dd_enter(o) < 0)
        return NULL;
    int r = ring_add_one(o, name, w);
    dd_leave(o);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Ring_remove(dd_obj *o, PyObject *name)
{
    const char *n = PyUnicode_AsUTF8(name);
    if (!n || dd_enter(o) < 0)
        return NULL;
    dedup_status s = dedup_ring_remove(o->p, n);
    dd_leave(o);
    if (s == DEDUP_ERR_NOT_FOUND) {
        PyErr_SetObject(PyExc_KeyError, name);
        return NULL;
    }
    if (s)
        return dd_raise(s, n);
    Py_RETURN_NONE;
}

static PyObject *Ring_nodes(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    PyObject *d = PyDict_New();
    for (uint32_t i = 0; d && i < dedup_ring_node_count(o->p); i++) {
        PyObject *v = Py_BuildValue("{s:d,s:I,s:d}", "weight", dedup_ring_node_weight(o->p, i),
                                    "points", (unsigned)dedup_ring_node_points(o->p, i), "share",
                                    dedup_ring_node_share(o->p, i));
        if (dd_dict_put(d, dedup_ring_node_name(o->p, i), v) < 0)
            Py_CLEAR(d);
    }
    dd_leave(o);
    return d;
}

static Py_ssize_t Ring_len(dd_obj *o)
{
    if (dd_enter(o) < 0)
        return -1;
    uint32_t n = dedup_ring_node_count(o->p);
    dd_leave(o);
    return (Py_ssize_t)n;
}

static PyMethodDef Ring_methods[] = {
    {"owner", (PyCFunction)Ring_owner, METH_O,
     "owner(key) -> str: the node the key goes to (as `dedup ring --owner KEY` and "
     "`dedup split --nodes` route it); dedup.Error on an empty ring."},
    {"owners", (PyCFunction)Ring_owners, METH_O,
     "owners(keys) -> list of str: the library's batch lookup."},
    {"add", (PyCFunction)Ring_add, METH_VARARGS, "add(name, weight=1.0): add a node."},
    {"remove", (PyCFunction)Ring_remove, METH_O, "remove(name): KeyError when absent."},
    DD_COMMON_METHODS(Ring)
    DD_CTX_METHODS(Ring)
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Ring_getset[] = {
    {"nodes", (getter)Ring_nodes, NULL, "dict name -> {weight, points, share}.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Ring_seq = {.sq_length = (lenfunc)Ring_len};

static PyTypeObject RingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.Ring",
    .tp_basicsize = sizeof(dd_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Ring(nodes=None, *, points_per_weight=160, seed=None)\n\n"
              "A consistent-hash ring (dedup/ring.h): nodes is a list of names or a dict "
              "{name: weight}.  Its files are `dedup ring --save`'s.  Thread-safe as Bloom.",
    .tp_new = Ring_new,
    .tp_dealloc = (destructor)Ring_dealloc,
    .tp_methods = Ring_methods,
    .tp_getset = Ring_getset,
    .tp_as_sequence = &Ring_seq,
};

int dd_ring_ready(PyObject *m)
{
    if (PyType_Ready(&RingType) < 0 || PyModule_AddObjectRef(m, "Ring", (PyObject *)&RingType) < 0)
        return -1;
    return 0;
}
