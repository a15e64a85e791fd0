/*
 * batch.h - the part of every batch call that is the same: keys in, digests
 * computed (without the GIL for long batches), a list of verdicts out.
 */
#ifndef DD_BATCH_H
#define DD_BATCH_H

#include "dd.h"

/* A batch in progress: the keys' list (owns the references), the keys, the
 * digests and a verdict per key. */
typedef struct dd_batch {
    PyObject *list;
    dd_key *keys;
    Py_ssize_t n;
    dedup_digest *d;
    bool *found;
    PyThreadState *ts; /* set while the GIL is released */
} dd_batch;

/* Hashes a key with the object's seed. */
typedef dedup_digest (*dd_digest_fn)(const void *obj, const void *key, size_t len);

/* Collects the keys of 'iterable', takes the object's lock, then (for
 * long batches) releases the GIL.  'digest' hashes a key with the object's
 * seed.  want_found allocates found[].  0, or -1 with an exception set
 * (nothing held). */
static inline int dd_batch_begin(dd_batch *b, dd_obj *o, PyObject *iterable,
                                 dd_digest_fn digest, bool want_found)
{
    memset(b, 0, sizeof *b);
    b->list = dd_key_list(iterable, &b->keys, &b->n);
    if (!b->list)
        return -1;
    size_t n = (size_t)(b->n ? b->n : 1);
    b->d = PyMem_Malloc(sizeof *b->d * n);
    b->found = want_found ? PyMem_Malloc(sizeof *b->found * n) : NULL;
    if (!b->d || (want_found && !b->found)) {
        PyMem_Free(b->d);
        PyMem_Free(b->found);
        PyMem_Free(b->keys);
        Py_DECREF(b->list);
        PyErr_NoMemory();
        return -1;
    }
    if (dd_enter(o) < 0) {
        PyMem_Free(b->d);
        PyMem_Free(b->found);
        PyMem_Free(b->keys);
        Py_DECREF(b->list);
        return -1;
    }
    if (b->n >= DD_NOGIL_BATCH)
        b->ts = PyEval_SaveThread();
    for (Py_ssize_t i = 0; i < b->n; i++)
        b->d[i] = digest(o->p, b->keys[i].p, (size_t)b->keys[i].n);
    return 0;
}

/* Takes the GIL back, drops the lock and frees all but found[]. */
static inline void dd_batch_end(dd_batch *b, dd_obj *o)
{
    if (b->ts)
        PyEval_RestoreThread(b->ts);
    b->ts = NULL;
    dd_leave(o);
    PyMem_Free(b->d);
    PyMem_Free(b->keys);
    Py_DECREF(b->list);
}

/* A list of n booleans (negated when 'invert'); frees 'found'. */
static inline PyObject *dd_bool_list(bool *found, Py_ssize_t n, bool invert)
{
    PyObject *l = PyList_New(n);
    if (l) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = (found[i] != invert) ? Py_True : Py_False;
            Py_INCREF(v);
            PyList_SET_ITEM(l, i, v);
        }
    }
    PyMem_Free(found);
    return l;
}

/* Ends update() / add_many() over found[] (freed here): dedup.Error saying
 * how many keys went in when 's' stopped the batch after 'done' keys; else
 * None, or the verdicts when 'verdicts'. */
static inline PyObject *dd_adds_out(bool *found, Py_ssize_t n, dedup_status s, size_t done,
                                    bool verdicts)
{
    if (s) {
        PyMem_Free(found);
        return dd_raise_done(s, done, "added");
    }
    if (!verdicts) {
        PyMem_Free(found);
        Py_RETURN_NONE;
    }
    return dd_bool_list(found, n, false);
}

/* A library batch call over the digests: a query (out[] per key) or an
 * add that cannot fail. */
typedef void (*dd_query_fn)(const void *obj, const dedup_digest *d, size_t n, bool *out);
typedef void (*dd_add_batch_fn)(void *obj, const dedup_digest *d, size_t n);

/* contains_many(): the keys' answers from 'query', as a list of bool. */
static inline PyObject *dd_contains_many(dd_obj *o, PyObject *it, dd_digest_fn digest,
                                         dd_query_fn query)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, digest, true) < 0)
        return NULL;
    query(o->p, b.d, (size_t)b.n, b.found);
    dd_batch_end(&b, o);
    return dd_bool_list(b.found, b.n, false);
}

/* update() through an add that cannot fail: None. */
static inline PyObject *dd_update(dd_obj *o, PyObject *it, dd_digest_fn digest,
                                  dd_add_batch_fn add)
{
    dd_batch b;
    if (dd_batch_begin(&b, o, it, digest, false) < 0)
        return NULL;
    add(o->p, b.d, (size_t)b.n);
    dd_batch_end(&b, o);
    Py_RETURN_NONE;
}

/* Reads an unsigned 64-bit seed (None: the default). */
static inline int dd_seed_of(PyObject *o, uint64_t *seed)
{
    if (!o || o == Py_None) {
        *seed = DEDUP_DEFAULT_SEED;
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *seed = (uint64_t)v;
    return 0;
}

#endif
