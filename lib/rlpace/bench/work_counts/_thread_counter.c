/* A profile function (Py_tracefunc) counting the Python calls and builtin calls of the
 * threads it is installed in, for rlpace.bench.work_counts.threads.
 *
 * The measuring thread installs it in the case's other threads with _PyEval_SetProfile,
 * its state object a tuple of plain dicts and two callables, and reads the dicts:
 *
 *   (waits, counts, total, labels, is_wait, label_of)
 *   waits:  code object -> whether it is the standard library's waiting machinery
 *           (is_wait(code), asked once per code object)
 *   counts: code object, or (owner, method def address) for a builtin -> calls
 *   total:  a list of one int, this thread's calls (each thread has a state of its own;
 *           the dicts are shared)
 *   labels: a builtin's key -> its name (label_of(builtin), asked once per key)
 *
 * A call whose code is a wait's (for a builtin: whose caller is a wait) is not counted.
 * Every event runs under the GIL; an error is dropped, never raised into the thread.
 * Built at run time against the running interpreter's headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

static int bump(PyObject *dict, PyObject *key)
{
    PyObject *now = PyDict_GetItemWithError(dict, key); /* borrowed */
    long n = 0;
    if (now != NULL) {
        n = PyLong_AsLong(now);
    } else if (PyErr_Occurred()) {
        return -1;
    }
    PyObject *next = PyLong_FromLong(n + 1);
    if (next == NULL) {
        return -1;
    }
    int rc = PyDict_SetItem(dict, key, next);
    Py_DECREF(next);
    return rc;
}

static int count(PyObject *state, PyFrameObject *frame, int what, PyObject *arg)
{
    PyObject *waits = PyTuple_GET_ITEM(state, 0);
    PyObject *counts = PyTuple_GET_ITEM(state, 1);
    PyObject *total = PyTuple_GET_ITEM(state, 2);
    PyObject *labels = PyTuple_GET_ITEM(state, 3);
    PyObject *is_wait = PyTuple_GET_ITEM(state, 4);
    PyObject *label_of = PyTuple_GET_ITEM(state, 5);
    int rc = -1;
    PyObject *key = NULL;
    PyCodeObject *code = PyFrame_GetCode(frame); /* the callee's, or the builtin's caller's */
    PyObject *wait = PyDict_GetItemWithError(waits, (PyObject *)code); /* borrowed */
    int skip;
    if (wait == NULL) {
        if (PyErr_Occurred()) {
            goto done;
        }
        wait = PyObject_CallOneArg(is_wait, (PyObject *)code);
        if (wait == NULL) {
            goto done;
        }
        skip = PyObject_IsTrue(wait);
        int stored = PyDict_SetItem(waits, (PyObject *)code, wait);
        Py_DECREF(wait);
        if (stored < 0 || skip < 0) {
            goto done;
        }
    } else {
        skip = PyObject_IsTrue(wait);
    }
    if (skip) {
        rc = 0;
        goto done;
    }
    if (what == PyTrace_CALL) {
        key = (PyObject *)code;
        Py_INCREF(key);
    } else {
        PyObject *owner = Py_None;
        PyObject *def = NULL;
        if (PyCFunction_Check(arg)) {
            PyObject *self = PyCFunction_GET_SELF(arg);
            if (self != NULL) {
                owner = PyModule_Check(self) ? self : (PyObject *)Py_TYPE(self);
            }
            def = PyLong_FromVoidPtr(((PyCFunctionObject *)arg)->m_ml);
        } else {
            owner = (PyObject *)Py_TYPE(arg);
            def = Py_NewRef(Py_None);
        }
        if (def == NULL) {
            goto done;
        }
        key = PyTuple_Pack(2, owner, def);
        Py_DECREF(def);
        if (key == NULL) {
            goto done;
        }
        int known = PyDict_Contains(labels, key);
        if (known < 0) {
            goto done;
        }
        if (!known) {
            PyObject *label = PyObject_CallOneArg(label_of, arg);
            if (label == NULL) {
                goto done;
            }
            int stored = PyDict_SetItem(labels, key, label);
            Py_DECREF(label);
            if (stored < 0) {
                goto done;
            }
        }
    }
    if (!PyList_Check(total) || PyList_GET_SIZE(total) != 1) {
        goto done;
    }
    PyObject *next = PyLong_FromLong(PyLong_AsLong(PyList_GET_ITEM(total, 0)) + 1);
    if (next == NULL) {
        goto done;
    }
    PyList_SetItem(total, 0, next); /* steals next */
    rc = bump(counts, key);
done:
    Py_XDECREF(key);
    Py_DECREF(code);
    return rc;
}

int rlpace_count_calls(PyObject *state, PyFrameObject *frame, int what, PyObject *arg)
{
    if (what != PyTrace_CALL && what != PyTrace_C_CALL) {
        return 0;
    }
    if (state == NULL || !PyTuple_Check(state) || PyTuple_GET_SIZE(state) != 6) {
        return 0;
    }
    if (what == PyTrace_C_CALL && arg == NULL) {
        return 0;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback); /* an error on its way must reach its handler */
    if (count(state, frame, what, arg) < 0) {
        PyErr_Clear(); /* a counting error is dropped: the thread runs on */
    }
    PyErr_Restore(type, value, traceback);
    return 0;
}
