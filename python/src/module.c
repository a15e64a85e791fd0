/*
 * module.c - the _dedup module: errors, keys, locking, files and bytes,
 * shared by every class (filters.c, sets.c).
 */
#include "dd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

PyObject *dd_Error;

PyObject *dd_raise(dedup_status s, const char *what)
{
    int err = errno;
    PyObject *msg;
    const char *text = dedup_strerror(s);
    if (s == DEDUP_ERR_IO && err)
        msg = what ? PyUnicode_FromFormat("%s: %s: %s", what, text, strerror(err))
                   : PyUnicode_FromFormat("%s: %s", text, strerror(err));
    else
        msg = what ? PyUnicode_FromFormat("%s: %s", what, text) : PyUnicode_FromString(text);
    if (!msg)
        return NULL;
    PyObject *exc = PyObject_CallOneArg(dd_Error, msg);
    Py_DECREF(msg);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong((long)s);
    if (!code || PyObject_SetAttrString(exc, "status", code) < 0) {
        Py_XDECREF(code);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    PyErr_SetObject(dd_Error, exc);
    Py_DECREF(exc);
    return NULL;
}

int dd_key_of(PyObject *o, dd_key *k)
{
    if (PyBytes_Check(o)) {
        k->p = PyBytes_AS_STRING(o);
        k->n = PyBytes_GET_SIZE(o);
        return 0;
    }
    if (PyUnicode_Check(o)) {
        k->p = PyUnicode_AsUTF8AndSize(o, &k->n);
        return k->p ? 0 : -1;
    }
    PyErr_Format(PyExc_TypeError, "a key must be str or bytes, not %.200s", Py_TYPE(o)->tp_name);
    return -1;
}

PyObject *dd_key_list(PyObject *iterable, dd_key **keys, Py_ssize_t *n)
{
    /* The keys end up in a tuple the caller keeps: it holds every key alive
     * while the GIL is released, even if another thread changes the list
     * the caller passed.  A list is copied in the same pass that reads the
     * keys (one visit of each key object); a tuple is used as it is. */
    PyObject *src = PyList_CheckExact(iterable) || PyTuple_CheckExact(iterable)
                        ? (Py_INCREF(iterable), iterable)
                        : PySequence_Tuple(iterable);
    if (!src)
        return NULL;
    bool copy = PyList_CheckExact(src);
    Py_ssize_t len = PySequence_Fast_GET_SIZE(src);
    PyObject *seq = copy ? PyTuple_New(len) : (Py_INCREF(src), src);
    dd_key *k = seq ? PyMem_Malloc(sizeof *k * (size_t)(len ? len : 1)) : NULL;
    if (!k) {
        Py_XDECREF(seq);
        Py_DECREF(src);
        return seq ? PyErr_NoMemory() : NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(src);
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *o = items[i];
        if (dd_key_of(o, &k[i]) < 0) {
            PyMem_Free(k);
            Py_DECREF(seq);
            Py_DECREF(src);
            return NULL;
        }
        if (copy) {
            Py_INCREF(o);
            PyTuple_SET_ITEM(seq, i, o);
        }
    }
    Py_DECREF(src);
    *keys = k;
    *n = len;
    return seq;
}

int dd_init_lock(dd_obj *o)
{
    if (pthread_mutex_init(&o->lock, NULL) != 0) {
        PyErr_NoMemory();
        return -1;
    }
    o->has_lock = true;
    return 0;
}

int dd_enter(dd_obj *o)
{
    if (!o->has_lock) {
        PyErr_SetString(PyExc_ValueError, "the object is not initialised");
        return -1;
    }
    unsigned long me = PyThread_get_thread_ident();
    if (atomic_load_explicit(&o->owner, memory_order_relaxed) == me) {
        /* a finalizer run by an allocation inside one of this object's
         * methods, calling the object again: refused, not a deadlock */
        PyErr_Format(PyExc_RuntimeError, "re-entrant call on a %.200s already in use by this thread",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    if (pthread_mutex_trylock(&o->lock) != 0) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&o->lock);
        Py_END_ALLOW_THREADS
    }
    if (!o->p) {
        pthread_mutex_unlock(&o->lock);
        PyErr_Format(PyExc_ValueError, "operation on a closed %.200s", Py_TYPE(o)->tp_name);
        return -1;
    }
    atomic_store_explicit(&o->owner, me, memory_order_relaxed);
    return 0;
}

void dd_leave(dd_obj *o)
{
    atomic_store_explicit(&o->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&o->lock);
}

int dd_enter2(dd_obj *a, dd_obj *b)
{
    /* always in address order, so a.union(b) and b.union(a) on two threads
     * cannot each hold one lock and wait for the other */
    dd_obj *first = a < b ? a : b, *second = a < b ? b : a;
    if (dd_enter(first) < 0)
        return -1;
    if (dd_enter(second) < 0) {
        dd_leave(first);
        return -1;
    }
    return 0;
}

PyObject *dd_to_bytes(dd_obj *o, const dd_kind *k)
{
    if (dd_enter(o) < 0)
        return NULL;
    uint64_t size = 0;
    dedup_sink cs = dedup_count_sink_init(&size);
    dedup_status s = k->save(o->p, &cs);
    if (s) {
        dd_leave(o);
        return dd_raise(s, NULL);
    }
    if (size > (uint64_t)PY_SSIZE_T_MAX) {
        dd_leave(o);
        return dd_raise(DEDUP_ERR_LIMIT, NULL);
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!b) {
        dd_leave(o);
        return NULL;
    }
    dedup_mem_sink ms;
    dedup_sink sink = dedup_mem_sink_init(&ms, PyBytes_AS_STRING(b), (size_t)size);
    Py_BEGIN_ALLOW_THREADS
    s = k->save(o->p, &sink);
    Py_END_ALLOW_THREADS
    dd_leave(o);
    if (s || ms.len != size) {
        Py_DECREF(b);
        return dd_raise(s ? s : DEDUP_ERR_IO, NULL);
    }
    return b;
}

PyObject *dd_save(dd_obj *o, const dd_kind *k, PyObject *path)
{
    PyObject *pb = NULL;
    if (!PyUnicode_FSConverter(path, &pb))
        return NULL;
    if (dd_enter(o) < 0) {
        Py_DECREF(pb);
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(pb);
    dedup_status s;
    int err;
    Py_BEGIN_ALLOW_THREADS
    errno = 0;
    /* a seen-set read from a state container is written back as one, with
     * its identity (the CLI's key options) */
    s = o->state_ident ? dedup_state_save(o->p, p, o->state_ident) : dedup_save_file(p, k->save, o->p);
    err = errno;
    Py_END_ALLOW_THREADS
    dd_leave(o);
    if (s) {
        errno = err;
        dd_raise(s, p);
        Py_DECREF(pb);
        return NULL;
    }
    Py_DECREF(pb);
    Py_RETURN_NONE;
}

PyObject *dd_reduce(dd_obj *o, const dd_kind *k)
{
    PyObject *data = dd_to_bytes(o, k);
    if (!data)
        return NULL;
    PyObject *fn = PyObject_GetAttrString((PyObject *)Py_TYPE(o), "from_bytes");
    if (!fn) {
        Py_DECREF(data);
        return NULL;
    }
    return Py_BuildValue("(N(N))", fn, data);
}

PyObject *dd_close(dd_obj *o, const dd_kind *k)
{
    if (o->has_lock &&
        atomic_load_explicit(&o->owner, memory_order_relaxed) == PyThread_get_thread_ident()) {
        PyErr_Format(PyExc_RuntimeError, "re-entrant close of a %.200s in use by this thread",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    if (o->has_lock) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&o->lock);
        Py_END_ALLOW_THREADS
        void *p = o->p;
        o->p = NULL;
        pthread_mutex_unlock(&o->lock);
        k->free(p);
    }
    Py_RETURN_NONE;
}

void dd_dealloc(dd_obj *o, const dd_kind *k)
{
    k->free(o->p);
    o->p = NULL;
    PyMem_Free(o->state_ident);
    if (o->has_lock)
        pthread_mutex_destroy(&o->lock);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

PyObject *dd_wrap(const dd_kind *k, void *p)
{
    dd_obj *o = dd_alloc(k->type);
    if (!o) {
        k->free(p);
        return NULL;
    }
    o->p = p;
    return (PyObject *)o;
}

/* The class that loads files of structure type 't', or NULL. */
static const dd_kind *kind_for_type(uint32_t t)
{
    switch (t) {
    case DEDUP_TYPE_BLOOM:
    case DEDUP_TYPE_BLOCKED_BLOOM: return &dd_bloom_kind;
    case DEDUP_TYPE_COUNTING_BLOOM: return &dd_counting_kind;
    case DEDUP_TYPE_CUCKOO:
    case DEDUP_TYPE_CUCKOO_CHAIN: return &dd_cuckoo_kind;
    case DEDUP_TYPE_SCALABLE_BLOOM: return &dd_scalable_kind;
    case DEDUP_TYPE_SET_STRING: return &dd_strset_kind;
    case DEDUP_TYPE_SET_U64: return &dd_intset_kind;
    case DEDUP_TYPE_HLL: return &dd_hll_kind;
    /* kept by the seen-set only */
    case DEDUP_TYPE_WINDOW:
    case DEDUP_TYPE_SET_DIGEST:
    case DEDUP_TYPE_BITMAP: return &dd_seen_kind;
    case DEDUP_TYPE_RING: return &dd_ring_kind;
    default: return NULL;
    }
}

static PyObject *unsupported_type(uint32_t t, const char *what)
{
    PyObject *m = what ? PyUnicode_FromFormat("%s: structure type '%s' (%u) has no Python class",
                                              what, dedup_type_name(t), (unsigned)t)
                       : PyUnicode_FromFormat("structure type '%s' (%u) has no Python class",
                                              dedup_type_name(t), (unsigned)t);
    if (m) {
        PyErr_SetObject(dd_Error, m);
        Py_DECREF(m);
    }
    return NULL;
}

PyObject *dd_load_bytes(const char *data, Py_ssize_t len, const dd_kind *want)
{
    const dd_kind *k = want;
    if (!k) {
        /* The header names the type; a blob too short or not ours is left to
         * a loader, which refuses it with the library's own status. */
        k = &dd_bloom_kind;
        static const unsigned char magic[8] = {0x89, 'D', 'D', 'P', '\r', '\n', 0x1a, '\n'};
        if (len >= (Py_ssize_t)DEDUP_HEADER_SIZE && memcmp(data, magic, 8) == 0) {
            uint32_t t = (uint32_t)(unsigned char)data[10] | (uint32_t)(unsigned char)data[11] << 8;
            k = kind_for_type(t);
            if (!k)
                return unsupported_type(t, NULL);
        }
    }
    dedup_mem_source ms;
    dedup_source src = dedup_mem_source_init(&ms, data, (size_t)len);
    void *p = NULL;
    dedup_status s;
    Py_BEGIN_ALLOW_THREADS
    s = k->load(src, &p);
    Py_END_ALLOW_THREADS
    if (!s && ms.pos != ms.len) {
        k->free(p);
        s = DEDUP_ERR_TRAILING;
    }
    if (s)
        return dd_raise(s, NULL);
    return dd_wrap(k, p);
}

/* A state container (dedup/state.h): its seen-set as a SeenSet that keeps
 * the identity for save(). */
static PyObject *load_state(const char *path)
{
    char *ident = PyMem_Malloc(DEDUP_STATE_IDENT_MAX + 1);
    if (!ident)
        return PyErr_NoMemory();
    dedup_seen *sn = NULL;
    bool has = false;
    dedup_status s;
    int err;
    Py_BEGIN_ALLOW_THREADS
    errno = 0;
    s = dedup_state_load(path, NULL, NULL, &sn, &has, ident, DEDUP_STATE_IDENT_MAX + 1);
    err = errno;
    Py_END_ALLOW_THREADS
    if (s) {
        PyMem_Free(ident);
        errno = err;
        return dd_raise(s, path);
    }
    PyObject *o = dd_wrap(&dd_seen_kind, sn);
    if (!o || !has)
        PyMem_Free(ident);
    else
        ((dd_obj *)o)->state_ident = ident;
    return o;
}

PyObject *dd_load_path(const char *path, const dd_kind *want)
{
    const dd_kind *k = want;
    dedup_status s;
    if (!k || k == &dd_seen_kind) {
        dedup_header h;
        errno = 0;
        s = dedup_peek_file(path, &h);
        if (s)
            return dd_raise(s, path);
        if (h.type == DEDUP_TYPE_STATE)
            return load_state(path);
        if (!k)
            k = kind_for_type(h.type);
        if (!k)
            return unsupported_type(h.type, path);
    }
    dedup_file_source *f = PyMem_Malloc(sizeof *f);
    if (!f)
        return PyErr_NoMemory();
    void *p = NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    dedup_source src;
    errno = 0;
    s = dedup_file_source_open(f, path, &src);
    if (!s) {
        s = k->load(src, &p);
        err = errno;
        if (!s && src.remaining(src.ctx) != 0) {
            k->free(p);
            p = NULL;
            s = DEDUP_ERR_TRAILING;
        }
        dedup_file_source_close(f);
    } else {
        err = errno;
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(f);
    if (s) {
        errno = err;
        return dd_raise(s, path);
    }
    return dd_wrap(k, p);
}

int dd_dict_put(PyObject *d, const char *key, PyObject *v)
{
    if (!v)
        return -1;
    int r = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return r;
}

/* ---- Module functions ------------------------------------------------------ */

static PyObject *mod_load(PyObject *self, PyObject *path)
{
    (void)self;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(path, &b))
        return NULL;
    PyObject *r = dd_load_path(PyBytes_AS_STRING(b), NULL);
    Py_DECREF(b);
    return r;
}

static PyObject *mod_from_bytes(PyObject *self, PyObject *data)
{
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(data, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *r = dd_load_bytes(b.buf, b.len, NULL);
    PyBuffer_Release(&b);
    return r;
}

static PyObject *mod_strerror(PyObject *self, PyObject *arg)
{
    (void)self;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(dedup_strerror((dedup_status)v));
}

static PyMethodDef mod_methods[] = {
    {"load", mod_load, METH_O,
     "load(path): read any structure file written by the CLI or by save(); the "
     "class follows the file's type.  dedup.Error (naming the file) on a damaged, "
     "truncated or foreign file."},
    {"from_bytes", mod_from_bytes, METH_O,
     "from_bytes(data): as load(), from bytes (to_bytes() output or a file's contents)."},
    {"strerror", mod_strerror, METH_O, "strerror(status): the library's sentence for a status."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "_dedup",
    "libdedup's structures (the C extension behind the dedup package).", -1, mod_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dedup(void);
PyMODINIT_FUNC PyInit__dedup(void)
{
    PyObject *m = PyModule_Create(&mod_def);
    if (!m)
        return NULL;
    dd_Error = PyErr_NewExceptionWithDoc(
        "dedup.Error",
        "A libdedup call failed; str() is the library's sentence (dedup_strerror), "
        "prefixed by the file when there is one; .status is the dedup_status code.",
        NULL, NULL);
    if (!dd_Error || PyModule_AddObjectRef(m, "Error", dd_Error) < 0)
        goto fail;
    if (PyModule_AddIntConstant(m, "NEW", DEDUP_NEW) < 0 ||
        PyModule_AddIntConstant(m, "DUPLICATE", DEDUP_DUPLICATE) < 0 ||
        PyModule_AddIntConstant(m, "MAYBE_DUPLICATE", DEDUP_MAYBE_DUPLICATE) < 0 ||
        PyModule_AddStringConstant(m, "library_version", dedup_version_string()) < 0)
        goto fail;
    if (dd_filters_ready(m) < 0 || dd_filters2_ready(m) < 0 || dd_sets_ready(m) < 0 ||
        dd_digest_ready(m) < 0 ||
        dd_seen_ready(m) < 0 || dd_ring_ready(m) < 0 ||
        dd_key_ready(m) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
