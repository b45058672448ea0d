/* The runner's per-message loops in C: stamp and send, receive and stamp.
 *
 * At full speed on small messages the Python bytecode around each send or receive (the loop, the call to
 * time.monotonic_ns, the store of its result) costs a noticeable share of what the system under test costs,
 * so the harness, not the system, would set part of the numbers (`mqbench calibrate` measures this). These two
 * functions do the same work as the Python loops in worker.py, which remain as the fallback when this module
 * is not built: the clock is CLOCK_MONOTONIC, the clock time.monotonic_ns() reads, and the driver's own send
 * or receive is called exactly as the Python loop would call it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

PyDoc_STRVAR(send_stamped_doc,
"send_stamped(send, slots, block, size, offset, n, deadline, as_bytes=0) -> int\n\n"
"For i in range(n): read the clock; stop if it is at or past deadline; else store the stamp as a\n"
"native int64 at byte offset + i * size of the writable buffer block and call send(slots[i]) or, with\n"
"as_bytes, send(a new bytes object holding the size bytes of message i of the block).\n"
"Returns how many messages were handed over. An exception from send goes on unchanged; the stamp of\n"
"the message whose send raised has been stored, so the caller counts the leading non-zero stamps.");

static PyObject *
send_stamped(PyObject *self, PyObject *args)
{
    PyObject *send, *slots, *block;
    Py_ssize_t size, offset, n, i;
    long long deadline;
    int as_bytes = 0;
    Py_buffer view;

    if (!PyArg_ParseTuple(args, "OO!OnnnL|p:send_stamped", &send, &PyList_Type, &slots, &block, &size, &offset,
                          &n, &deadline, &as_bytes))
        return NULL;
    if (PyObject_GetBuffer(block, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    if (n < 0 || size < 1 || offset < 0 || offset + 8 > size || n > PyList_GET_SIZE(slots) || n > view.len / size) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "send_stamped: n slots of size bytes with an 8-byte stamp at offset "
                                          "must fit both the slot list and the block");
        return NULL;
    }
    char *stamp_at = (char *)view.buf + offset;
    for (i = 0; i < n; i++, stamp_at += size) {
        int64_t t = now_ns();
        if (t >= deadline)
            break;
        memcpy(stamp_at, &t, sizeof t);
        PyObject *msg;
        if (as_bytes) {
            msg = PyBytes_FromStringAndSize(stamp_at - offset, size);
            if (msg == NULL) {
                PyBuffer_Release(&view);
                return NULL;
            }
        } else {
            msg = PyList_GET_ITEM(slots, i);
            Py_INCREF(msg); /* send may run Python code that changes the list */
        }
        PyObject *r = PyObject_CallOneArg(send, msg);
        Py_DECREF(msg);
        if (r == NULL) {
            PyBuffer_Release(&view);
            return NULL;
        }
        Py_DECREF(r);
        if (PyErr_CheckSignals() < 0) { /* a send implemented in C may not give handlers a chance */
            PyBuffer_Release(&view);
            return NULL;
        }
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(i);
}

PyDoc_STRVAR(recv_stamped_doc,
"recv_stamped(recv, timed_out, batch, stamps, n) -> int\n\n"
"For i in range(n): call recv(); on return read the clock and store the message as batch[i] and the stamp\n"
"as stamps[i] (a writable buffer of native int64). An exception that is an instance of timed_out ends the\n"
"batch and is cleared: the return value is the number of messages stored. Any other exception goes on\n"
"unchanged after the messages before it were stored; the caller counts the leading non-zero stamps.");

static PyObject *
recv_stamped(PyObject *self, PyObject *args)
{
    PyObject *recv, *timed_out, *batch, *stamps;
    Py_ssize_t n, i;
    Py_buffer view;

    if (!PyArg_ParseTuple(args, "OOO!On:recv_stamped", &recv, &timed_out, &PyList_Type, &batch, &stamps, &n))
        return NULL;
    if (PyObject_GetBuffer(stamps, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    if (n < 0 || n > PyList_GET_SIZE(batch) || n > view.len / (Py_ssize_t)sizeof(int64_t)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "recv_stamped: n must fit both the batch list and the stamps buffer");
        return NULL;
    }
    char *stamp_at = (char *)view.buf;
    for (i = 0; i < n; i++, stamp_at += sizeof(int64_t)) {
        PyObject *msg = PyObject_CallNoArgs(recv);
        if (msg == NULL) {
            PyBuffer_Release(&view);
            if (PyErr_ExceptionMatches(timed_out)) {
                PyErr_Clear();
                return PyLong_FromSsize_t(i);
            }
            return NULL;
        }
        int64_t t = now_ns();
        if (PyList_SetItem(batch, i, msg) < 0) { /* steals msg; the list cannot have shrunk: checked above */
            PyBuffer_Release(&view);
            return NULL;
        }
        memcpy(stamp_at, &t, sizeof t);
        if (PyErr_CheckSignals() < 0) { /* message i is stored and stamped: it counts */
            PyBuffer_Release(&view);
            return NULL;
        }
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"send_stamped", send_stamped, METH_VARARGS, send_stamped_doc},
    {"recv_stamped", recv_stamped, METH_VARARGS, recv_stamped_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "harness.runner._hotloop",
    "The runner's per-message stamp-and-send and receive-and-stamp loops in C (see worker.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__hotloop(void)
{
    return PyModule_Create(&module);
}
