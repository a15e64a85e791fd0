/*
 * tiers.c - SeenSet.stack(): a stack of seen-sets answering as one
 * (dedup/tiers.h), and its per-tier statistics (SeenSet.tier_stats).
 */
#include "dd.h"

#include "dedup/seen.h"
#include "dedup/tiers.h"

#include <string.h>

/* One tier as given: a SeenSet, or (SeenSet, {name, covers_below, forgets}). */
static int tier_of(PyObject *item, dd_obj **obj, dedup_tier *t, PyObject **name)
{
    PyObject *opts = NULL;
    if (PyTuple_Check(item)) {
        if (PyTuple_GET_SIZE(item) != 2 || !PyDict_Check(PyTuple_GET_ITEM(item, 1))) {
            PyErr_SetString(PyExc_TypeError,
                            "a tier is a SeenSet or a (SeenSet, dict of options) pair");
            return -1;
        }
        opts = PyTuple_GET_ITEM(item, 1);
        item = PyTuple_GET_ITEM(item, 0);
    }
    if (!PyObject_TypeCheck(item, dd_seen_kind.type)) {
        PyErr_Format(PyExc_TypeError, "a tier must be a SeenSet, not %.200s",
                     Py_TYPE(item)->tp_name);
        return -1;
    }
    *obj = (dd_obj *)item;
    memset(t, 0, sizeof *t);
    if (!opts)
        return 0;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(opts, &pos, &k, &v)) {
        const char *key = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        if (!key) {
            PyErr_SetString(PyExc_TypeError, "tier option names are str");
            return -1;
        }
        if (strcmp(key, "name") == 0) {
            if (!PyUnicode_Check(v)) {
                PyErr_SetString(PyExc_TypeError, "a tier's name is a str");
                return -1;
            }
            *name = v;
        } else if (strcmp(key, "covers_below") == 0 || strcmp(key, "forgets") == 0) {
            int b = PyObject_IsTrue(v);
            if (b < 0)
                return -1;
            if (key[0] == 'c')
                t->covers_below = b;
            else
                t->forgets = b;
        } else {
            PyErr_Format(PyExc_ValueError,
                         "unknown tier option '%s' (name, covers_below, forgets)", key);
            return -1;
        }
    }
    return 0;
}

/* Gives the structures taken from objs[0..n) back to them. */
static void give_back(dd_obj **objs, dedup_tier *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&objs[i]->lock);
        objs[i]->p = t[i].seen;
        pthread_mutex_unlock(&objs[i]->lock);
    }
}

PyObject *dd_tiers_stack(PyObject *cls, PyObject *args, PyObject *kw)
{
    (void)cls;
    static char *names[] = {"tiers", "trust_filter", "shared", NULL};
    PyObject *list;
    int trust = 0, shared = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$pp:stack", names, &list, &trust, &shared))
        return NULL;
    PyObject *seq = PySequence_Fast(list, "stack() takes a sequence of tiers, top first");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > (Py_ssize_t)DEDUP_TIERS_MAX) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "a stack has 1 to %u tiers (got %zd)",
                     (unsigned)DEDUP_TIERS_MAX, n);
        return NULL;
    }
    dd_obj *objs[DEDUP_TIERS_MAX];
    dedup_tier t[DEDUP_TIERS_MAX];
    PyObject *tier_names[DEDUP_TIERS_MAX] = {NULL};
    for (Py_ssize_t i = 0; i < n; i++)
        if (tier_of(PySequence_Fast_GET_ITEM(seq, i), &objs[i], &t[i], &tier_names[i]) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    /* Take each tier's structure out of its object (which reads as closed
     * from then on): the stack owns them once made. */
    size_t taken = 0;
    for (; taken < (size_t)n; taken++) {
        if (dd_enter(objs[taken]) < 0)
            break; /* closed, or given twice */
        t[taken].seen = objs[taken]->p;
        objs[taken]->p = NULL;
        dd_leave(objs[taken]);
        if (tier_names[taken] && !(t[taken].name = PyUnicode_AsUTF8(tier_names[taken]))) {
            taken++;
            break;
        }
    }
    if (taken < (size_t)n) {
        give_back(objs, t, taken);
        Py_DECREF(seq);
        return NULL;
    }
    dd_obj *o = dd_alloc(dd_seen_kind.type);
    if (!o) {
        give_back(objs, t, taken);
        Py_DECREF(seq);
        return NULL;
    }
    dedup_tiers_spec sp = {.tiers = t, .n = (size_t)n, .trust_filter = trust, .shared = shared};
    dedup_seen *s = NULL;
    const dedup_tiers *view = NULL;
    dedup_status st = dedup_tiers_create(&sp, NULL, &s, &view);
    Py_DECREF(seq); /* the names were copied by the library */
    if (st) {
        give_back(objs, t, taken);
        Py_DECREF(o);
        return dd_raise(st, NULL);
    }
    o->p = s;
    o->aux = (void *)view;
    return (PyObject *)o;
}

PyObject *dd_tiers_stats(dd_obj *o, void *unused)
{
    (void)unused;
    if (dd_enter(o) < 0)
        return NULL;
    if (!o->aux) {
        dd_leave(o);
        PyErr_SetString(dd_Error, "tier_stats: this SeenSet is not a stack (SeenSet.stack)");
        return NULL;
    }
    dedup_tiers_stats ts;
    dedup_tiers_get_stats(o->aux, &ts);
    dd_leave(o);
    PyObject *tiers = PyList_New(0), *d = PyDict_New();
    int bad = !tiers || !d;
    for (size_t i = 0; !bad && i < ts.n; i++) {
        const dedup_tier_stats *x = &ts.tier[i];
        PyObject *e = PyDict_New();
        bad = !e || dd_dict_put(e, "name", PyUnicode_FromString(x->name)) ||
              dd_dict_put(e, "kind", PyUnicode_FromString(dedup_seen_kind_name(x->kind))) ||
              dd_dict_put(e, "probabilistic", PyBool_FromLong(x->probabilistic)) ||
              dd_dict_put(e, "lookups", PyLong_FromUnsignedLongLong(x->lookups)) ||
              dd_dict_put(e, "hits", PyLong_FromUnsignedLongLong(x->hits)) ||
              dd_dict_put(e, "ended_new", PyLong_FromUnsignedLongLong(x->ended_new)) ||
              dd_dict_put(e, "passed_down", PyLong_FromUnsignedLongLong(x->passed_down)) ||
              dd_dict_put(e, "records", PyLong_FromUnsignedLongLong(x->records)) ||
              dd_dict_put(e, "trusted", PyLong_FromUnsignedLongLong(x->trusted)) ||
              dd_dict_put(e, "seconds", PyFloat_FromDouble((double)x->ns / 1e9)) ||
              PyList_Append(tiers, e) < 0;
        Py_XDECREF(e);
    }
    bad = bad || dd_dict_put(d, "keys", PyLong_FromUnsignedLongLong(ts.keys)) ||
          dd_dict_put(d, "new", PyLong_FromUnsignedLongLong(ts.new_keys)) ||
          dd_dict_put(d, "duplicates", PyLong_FromUnsignedLongLong(ts.duplicates)) ||
          dd_dict_put(d, "maybe_duplicates", PyLong_FromUnsignedLongLong(ts.maybe_duplicates)) ||
          dd_dict_put(d, "other", PyLong_FromUnsignedLongLong(ts.other)) ||
          dd_dict_put(d, "reads_avoided", PyLong_FromUnsignedLongLong(ts.reads_avoided)) ||
          dd_dict_put(d, "contradicted", PyLong_FromUnsignedLongLong(ts.contradicted)) ||
          dd_dict_put(d, "exact", PyBool_FromLong(ts.exact)) ||
          dd_dict_put(d, "trust_filter", PyBool_FromLong(ts.trust_filter)) ||
          dd_dict_put(d, "shared", PyBool_FromLong(ts.shared)) ||
          PyDict_SetItemString(d, "tiers", tiers) < 0;
    Py_XDECREF(tiers);
    return dd_dict_done(d, bad);
}
