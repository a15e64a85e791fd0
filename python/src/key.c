/*
 * key.c - dedup.Key: the library's key extraction (dedup/key.h): fields,
 * CSV, JSON Lines paths, canonical URLs, normalisation.  A compiled key is
 * read-only, so it needs no lock.
 */
#include "dd.h"

#include "dedup/key.h"

#include <string.h>

typedef struct key_obj {
    PyObject_HEAD
    dedup_key *k; /* keeps its own copies of the params */
} key_obj;

static PyTypeObject KeyType;

/* The record's bytes (bytes or str); -1 with TypeError naming the type. */
static int record_of(PyObject *o, dd_key *r)
{
    if (dd_key_of(o, r) < 0) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "a record must be str or bytes, not %.200s",
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    return 0;
}

static PyObject *Key_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"fields", "format", "delimiter", "json_paths", "header", "trim",
                            "squeeze", "fold_case", "prefix", "url", "url_drop",
                            "url_sort_params", NULL};
    const char *fields = NULL, *format = "plain", *paths = NULL, *drop = NULL;
    PyObject *delim = Py_None, *header = Py_None, *prefix = Py_None;
    int trim = 0, squeeze = 0, fold = 0, url = 0, sortp = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|z$sOzOpppOpzp:Key", names, &fields, &format,
                                     &delim, &paths, &header, &trim, &squeeze, &fold, &prefix,
                                     &url, &drop, &sortp))
        return NULL;
    dedup_key_params p;
    dedup_key_params_init(&p);
    if (strcmp(format, "plain") == 0)
        p.format = DEDUP_KEY_PLAIN;
    else if (strcmp(format, "csv") == 0)
        p.format = DEDUP_KEY_CSV;
    else if (strcmp(format, "json") == 0)
        p.format = DEDUP_KEY_JSON;
    else {
        PyErr_Format(PyExc_ValueError, "format must be plain, csv or json (got '%s')", format);
        return NULL;
    }
    p.fields = fields;
    p.json_paths = paths;
    p.trim = trim;
    p.squeeze = squeeze;
    p.fold_case = fold;
    p.url = url;
    p.url_drop = drop;
    p.url_sort_params = sortp;
    if (delim != Py_None) {
        dd_key d;
        if (record_of(delim, &d) < 0)
            return NULL;
        if (d.n != 1) {
            PyErr_SetString(PyExc_ValueError, "delimiter must be one byte");
            return NULL;
        }
        p.delim = (unsigned char)d.p[0];
    }
    dd_key h = {NULL, 0}, pre = {NULL, 0};
    if ((header != Py_None && record_of(header, &h) < 0) ||
        (prefix != Py_None && record_of(prefix, &pre) < 0))
        return NULL;
    p.prefix = (const unsigned char *)pre.p;
    p.prefix_len = (size_t)pre.n;
    key_obj *o = (key_obj *)type->tp_alloc(type, 0);
    if (!o)
        return NULL;
    size_t err_pos = 0;
    dedup_status s = dedup_key_create(&p, (const unsigned char *)h.p, (size_t)h.n, NULL, &o->k,
                                      &err_pos);
    if (s) {
        Py_DECREF(o);
        if (s == DEDUP_ERR_INVALID_ARG || s == DEDUP_ERR_NOT_FOUND) {
            const char *spec = p.format == DEDUP_KEY_JSON ? paths : fields;
            PyObject *m = PyUnicode_FromFormat("%s (at byte %zu of '%s')", dedup_strerror(s),
                                               err_pos, spec ? spec : "");
            if (m) {
                PyErr_SetObject(dd_Error, m);
                Py_DECREF(m);
            }
            return NULL;
        }
        return dd_raise(s, NULL);
    }
    return (PyObject *)o;
}

static void Key_dealloc(key_obj *o)
{
    dedup_key_free(o->k);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

/* The key of one record as bytes; dedup.Error for a record without a key. */
static PyObject *key_one(key_obj *o, PyObject *rec)
{
    dd_key r;
    if (record_of(rec, &r) < 0)
        return NULL;
    unsigned char small[512];
    unsigned char *buf = small;
    size_t cap = sizeof small;
    const unsigned char *key = NULL;
    size_t klen = 0;
    dedup_status s;
    for (;;) {
        s = dedup_key_of(o->k, (const unsigned char *)r.p, (size_t)r.n, buf, cap, &key, &klen);
        if (s != DEDUP_ERR_FULL || buf != small)
            break;
        cap = klen;
        buf = PyMem_Malloc(cap ? cap : 1);
        if (!buf)
            return PyErr_NoMemory();
    }
    PyObject *out = s ? dd_raise(s, NULL) : PyBytes_FromStringAndSize((const char *)key, (Py_ssize_t)klen);
    if (buf != small)
        PyMem_Free(buf);
    return out;
}

static PyObject *Key_call(key_obj *o, PyObject *args, PyObject *kw)
{
    PyObject *rec;
    static char *names[] = {"record", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:Key", names, &rec))
        return NULL;
    return key_one(o, rec);
}

static PyObject *Key_keys(key_obj *o, PyObject *it)
{
    PyObject *seq = PySequence_Tuple(it);
    if (!seq)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *k = key_one(o, PyTuple_GET_ITEM(seq, i));
        if (!k) {
            if (!PyErr_ExceptionMatches(dd_Error)) {
                Py_CLEAR(l);
                break;
            }
            /* a record without a key: None in its place */
            PyErr_Clear();
            k = Py_None;
            Py_INCREF(k);
        }
        PyList_SET_ITEM(l, i, k);
    }
    Py_DECREF(seq);
    return l;
}

static PyObject *Key_identity(key_obj *o, void *unused)
{
    (void)unused;
    return PyBool_FromLong(dedup_key_is_identity(o->k));
}

static PyMethodDef Key_methods[] = {
    {"keys", (PyCFunction)Key_keys, METH_O,
     "keys(records) -> list of bytes: the key of each record, None for a record that has "
     "none (malformed CSV or JSON, a missing path, a field that is not a URL)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Key_getset[] = {
    {"identity", (getter)Key_identity, NULL, "True when every key is its whole record.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject KeyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dedup.Key",
    .tp_basicsize = sizeof(key_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Key(fields=None, *, format='plain', delimiter=None, json_paths=None, "
              "header=None, trim=False, squeeze=False, fold_case=False, prefix=None, "
              "url=False, url_drop=None, url_sort_params=False)\n\n"
              "The library's key extraction (dedup/key.h), as the CLI's -f/--csv/--json/--url "
              "options: key(record) -> bytes (dedup.Error when the record has no key).  "
              "Fields 'N', 'N-M', 'N-' or header names; several fields make a "
              "length-prefixed tuple.  Read-only: safe from any thread.",
    .tp_new = Key_new,
    .tp_dealloc = (destructor)Key_dealloc,
    .tp_call = (ternaryfunc)Key_call,
    .tp_methods = Key_methods,
    .tp_getset = Key_getset,
};

int dd_key_ready(PyObject *m)
{
    if (PyType_Ready(&KeyType) < 0 || PyModule_AddObjectRef(m, "Key", (PyObject *)&KeyType) < 0)
        return -1;
    return 0;
}
