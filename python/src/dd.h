/*
 * dd.h - what the files of the _dedup extension module share.
 *
 * Every Python object wraps one libdedup object through the library's
 * public API only (include/dedup/); nothing here re-implements a
 * structure.  Each wrapper holds a lock: every method takes it, so one
 * Python object may be used from several threads at once; a batch call
 * drops the GIL while it holds the lock, so other threads run Python code
 * meanwhile.
 */
#ifndef DD_PY_H
#define DD_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <pythread.h>
#include <stdatomic.h>

#include "dedup/bloom.h"
#include "dedup/common.h"
#include "dedup/counting.h"
#include "dedup/cuckoo.h"
#include "dedup/format.h"
#include "dedup/hash.h"
#include "dedup/hll.h"
#include "dedup/scalable.h"
#include "dedup/set.h"
#include "dedup/state.h"

/* Batches at least this long run with the GIL released. */
#define DD_NOGIL_BATCH 1024

/* One wrapped libdedup object. */
typedef struct dd_obj {
    PyObject_HEAD
    void *p;                     /* the library object; NULL once closed */
    pthread_mutex_t lock;        /* taken by every method (a plain mutex: CPython's
                                    own lock reads the clock on every acquire) */
    bool has_lock;               /* lock initialised */
    _Atomic unsigned long owner; /* the thread holding it, 0 when none */
    void *aux;                   /* a second view of the same structure (a stack's
                                    dedup_tiers), or NULL */
    char *state_ident;           /* a seen-set loaded from a state container
                                    (dedup/state.h): its identity, kept for save();
                                    PyMem, or NULL */
} dd_obj;

/* How a structure is saved, loaded and freed: one per Python class. */
typedef struct dd_kind {
    PyTypeObject *type;
    dedup_status (*save)(const void *obj, dedup_sink *sink);
    dedup_status (*load)(dedup_source src, void **out);
    void (*free)(void *obj);
} dd_kind;

/* A key's bytes: borrowed from a bytes or str object the caller keeps. */
typedef struct dd_key {
    const char *p;
    Py_ssize_t n;
} dd_key;

extern PyObject *dd_Error;

/* Raises dedup.Error with the library's sentence for 's' (and 'what': a
 * file name, or NULL); returns NULL.  DEDUP_ERR_IO adds errno's text. */
PyObject *dd_raise(dedup_status s, const char *what);
/* bytes or str (UTF-8) -> *k; else TypeError naming the type; 0 / -1. */
int dd_key_of(PyObject *o, dd_key *k);
/* Sequence of keys from any iterable: a new list, or NULL. */
PyObject *dd_key_list(PyObject *iterable, dd_key **keys, Py_ssize_t *n);

/* Lock / unlock / closed check.  dd_enter returns -1 with ValueError set
 * when the object was closed. */
int dd_enter(dd_obj *o);
void dd_leave(dd_obj *o);
/* Both locks of two distinct objects (in a fixed order); 0 / -1. */
int dd_enter2(dd_obj *a, dd_obj *b);

/* Shared methods, given the kind. */
PyObject *dd_to_bytes(dd_obj *o, const dd_kind *k);
PyObject *dd_save(dd_obj *o, const dd_kind *k, PyObject *path);
PyObject *dd_reduce(dd_obj *o, const dd_kind *k);
PyObject *dd_close(dd_obj *o, const dd_kind *k);
void dd_dealloc(dd_obj *o, const dd_kind *k);
/* A new object of kind 'k' around p (the lock made here); frees p on error. */
PyObject *dd_wrap(const dd_kind *k, void *p);
int dd_init_lock(dd_obj *o);

/* A new object of 'type' with its lock and no structure yet; NULL with an
 * exception set. */
static inline dd_obj *dd_alloc(PyTypeObject *type)
{
    dd_obj *o = (dd_obj *)type->tp_alloc(type, 0);
    if (!o || dd_init_lock(o) < 0) {
        Py_XDECREF(o);
        return NULL;
    }
    return o;
}

/* Ends a constructor: 'o' takes 'p' when the create call returned 0, else
 * 'o' is dropped and dedup.Error raised for 's'. */
static inline PyObject *dd_adopt(dd_obj *o, dedup_status s, void *p)
{
    if (s) {
        Py_DECREF(o);
        return dd_raise(s, NULL);
    }
    o->p = p;
    return (PyObject *)o;
}

/* Raises dedup.Error "<the library's sentence> (the first <done> keys were
 * <verb>)" for a batch stopped by 's'; returns NULL. */
static inline PyObject *dd_raise_done(dedup_status s, size_t done, const char *verb)
{
    PyObject *m = PyUnicode_FromFormat("%s (the first %zu keys were %s)", dedup_strerror(s),
                                       done, verb);
    if (m) {
        PyErr_SetObject(dd_Error, m);
        Py_DECREF(m);
    }
    return NULL;
}

/* Ends an info getter: the dict, or NULL (dropping it) when building it
 * failed ('bad'). */
static inline PyObject *dd_dict_done(PyObject *d, int bad)
{
    if (bad) {
        Py_XDECREF(d);
        return NULL;
    }
    return d;
}

/* The other operand of union() / merge(): 'other' when it is a 'type',
 * else NULL with TypeError "<verb> needs a <cls>, not <its type>". */
static inline dd_obj *dd_other(PyObject *other, PyTypeObject *type, const char *verb,
                               const char *cls)
{
    if (!PyObject_TypeCheck(other, type)) {
        PyErr_Format(PyExc_TypeError, "%s needs a %s, not %.200s", verb, cls,
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    return (dd_obj *)other;
}

/* Ends union() / merge() with both locks held (dd_enter2): drops them,
 * then returns a new reference to 'o', or raises for 's' (with 'what' as
 * dd_raise). */
static inline PyObject *dd_leave2_self(dd_obj *o, dd_obj *src, dedup_status s, const char *what)
{
    dd_leave(src);
    dd_leave(o);
    if (s)
        return dd_raise(s, what);
    Py_INCREF(o);
    return (PyObject *)o;
}

/* The single-key methods: read a str/bytes key, take the lock, run 'fn' on
 * the structure, drop the lock.  Each class passes a small wrapper over its
 * library call. */
typedef dedup_status (*dd_add_fn)(void *obj, const void *key, size_t len, dedup_verdict *v);
typedef bool (*dd_contains_fn)(const void *obj, const void *key, size_t len);
typedef dedup_status (*dd_del_fn)(void *obj, const void *key, size_t len);

/* add(key) -> True when new; dedup.Error when 'fn' fails. */
static inline PyObject *dd_add_key(dd_obj *o, PyObject *key, dd_add_fn fn)
{
    dd_key k;
    if (dd_key_of(key, &k) < 0 || dd_enter(o) < 0)
        return NULL;
    dedup_verdict v = DEDUP_NEW;
    dedup_status s = fn(o->p, k.p, (size_t)k.n, &v);
    dd_leave(o);
    if (s)
        return dd_raise(s, NULL);
    return PyBool_FromLong(v == DEDUP_NEW);
}

/* 'key in obj': 1 / 0, or -1 with an exception set. */
static inline int dd_contains_key(dd_obj *o, PyObject *key, dd_contains_fn fn)
{
    dd_key k;
    if (dd_key_of(key, &k) < 0 || dd_enter(o) < 0)
        return -1;
    bool r = fn(o->p, k.p, (size_t)k.n);
    dd_leave(o);
    return r;
}

/* Deletes one copy: remove() ('raise': None, KeyError when certainly
 * absent) or discard() (True, or False when certainly absent). */
static inline PyObject *dd_del_key(dd_obj *o, PyObject *key, bool raise, dd_del_fn fn)
{
    dd_key k;
    if (dd_key_of(key, &k) < 0 || dd_enter(o) < 0)
        return NULL;
    dedup_status s = fn(o->p, k.p, (size_t)k.n);
    dd_leave(o);
    if (s == DEDUP_ERR_NOT_FOUND) {
        if (!raise)
            Py_RETURN_FALSE;
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    if (s)
        return dd_raise(s, NULL);
    if (raise)
        Py_RETURN_NONE;
    Py_RETURN_TRUE;
}

/* Loads from bytes or a path; any kind, or only 'want' (NULL: any). */
PyObject *dd_load_bytes(const char *data, Py_ssize_t len, const dd_kind *want);
PyObject *dd_load_path(const char *path, const dd_kind *want);

/* The class families (filters.c, filters2.c, sets.c, digest.c, seen.c, ring.c, key.c). */
extern dd_kind dd_bloom_kind, dd_counting_kind, dd_cuckoo_kind, dd_scalable_kind;
extern dd_kind dd_strset_kind, dd_intset_kind, dd_hll_kind, dd_seen_kind, dd_ring_kind;
extern dd_kind dd_digestset_kind;
int dd_filters_ready(PyObject *m);
int dd_filters2_ready(PyObject *m);
int dd_sets_ready(PyObject *m);
int dd_digest_ready(PyObject *m);
int dd_seen_ready(PyObject *m);
int dd_ring_ready(PyObject *m);
int dd_key_ready(PyObject *m);

/* SeenSet.stack() and SeenSet.tier_stats (tiers.c). */
PyObject *dd_tiers_stack(PyObject *cls, PyObject *args, PyObject *kw);
PyObject *dd_tiers_stats(dd_obj *o, void *unused);

/* A dict item setter that steals 'v'; -1 on error. */
int dd_dict_put(PyObject *d, const char *key, PyObject *v);

/* Common method table entries each class repeats, with its kind. */
#define DD_COMMON_METHODS(prefix)                                                         \
    {"to_bytes", (PyCFunction)prefix##_to_bytes, METH_NOARGS,                            \
     "The structure in the library's file format (the CLI's files), as bytes."},          \
    {"save", (PyCFunction)prefix##_save, METH_O,                                          \
     "save(path): write the CLI's file format atomically (temporary file, fsync, "        \
     "rename): a crash leaves the old file."},                                             \
    {"close", (PyCFunction)prefix##_close, METH_NOARGS,                                   \
     "Free the structure now; any later use raises ValueError."},                          \
    {"__reduce__", (PyCFunction)prefix##_reduce, METH_NOARGS, "Pickle support."},         \
    {"from_bytes", (PyCFunction)prefix##_from_bytes, METH_O | METH_CLASS,                 \
     "from_bytes(data): load bytes written by to_bytes() or the CLI; dedup.Error on "     \
     "a damaged or truncated blob or on a blob of another structure."},                   \
    {"load", (PyCFunction)prefix##_load, METH_O | METH_CLASS,                             \
     "load(path): read a file written by save() or the CLI (validated in full)."},

#define DD_COMMON_DEFS(prefix, kind)                                                       \
    static PyObject *prefix##_to_bytes(dd_obj *o, PyObject *unused)                        \
    { (void)unused; return dd_to_bytes(o, &kind); }                                        \
    static PyObject *prefix##_save(dd_obj *o, PyObject *path) { return dd_save(o, &kind, path); } \
    static PyObject *prefix##_close(dd_obj *o, PyObject *unused)                           \
    { (void)unused; return dd_close(o, &kind); }                                           \
    static PyObject *prefix##_reduce(dd_obj *o, PyObject *unused)                          \
    { (void)unused; return dd_reduce(o, &kind); }                                          \
    static PyObject *prefix##_from_bytes(PyObject *cls, PyObject *data)                    \
    {                                                                                      \
        (void)cls;                                                                         \
        Py_buffer b;                                                                       \
        if (PyObject_GetBuffer(data, &b, PyBUF_SIMPLE) < 0)                                \
            return NULL;                                                                   \
        PyObject *r = dd_load_bytes(b.buf, b.len, &kind);                                  \
        PyBuffer_Release(&b);                                                              \
        return r;                                                                          \
    }                                                                                      \
    static PyObject *prefix##_load(PyObject *cls, PyObject *path)                          \
    {                                                                                      \
        (void)cls;                                                                         \
        PyObject *b = NULL;                                                                \
        if (!PyUnicode_FSConverter(path, &b))                                              \
            return NULL;                                                                   \
        PyObject *r = dd_load_path(PyBytes_AS_STRING(b), &kind);                           \
        Py_DECREF(b);                                                                      \
        return r;                                                                          \
    }                                                                                      \
    static void prefix##_dealloc(dd_obj *o) { dd_dealloc(o, &kind); }                      \
    static PyObject *prefix##_enter(dd_obj *o, PyObject *unused)                           \
    { (void)unused; Py_INCREF(o); return (PyObject *)o; }                                  \
    static PyObject *prefix##_exit(dd_obj *o, PyObject *args)                              \
    { (void)args; return dd_close(o, &kind); }

#define DD_CTX_METHODS(prefix)                                                             \
    {"__enter__", (PyCFunction)prefix##_enter, METH_NOARGS, NULL},                         \
    {"__exit__", (PyCFunction)prefix##_exit, METH_VARARGS, "Closes the object."},

#endif
