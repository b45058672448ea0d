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
"send_stamped(send, slots, block, size, offset, n, deadline, as_bytes=0, pool=None, first=0) -> int\n\n"
"For i in range(n): read the clock; stop if it is at or past deadline; else store the stamp as a\n"
"native int64 at byte offset + i * size of the writable buffer block and call send(slots[i]) or, with\n"
"as_bytes, send(a bytes object holding the size bytes of message i of the block): a new one, or with a\n"
"pool (a list whose entries the caller leaves to this function), pool[(first + i) % len(pool)] when the\n"
"pool holds the only reference to it (the library has let it go, so nothing else can see it change):\n"
"then only its first offset + 8 bytes (the header up to the stamp) are written, for the caller promises\n"
"that the messages of the block differ in no other byte. Else a new object takes that place in the pool.\n"
"Returns how many messages were handed over. An exception from send goes on unchanged; the stamp of\n"
"the message whose send raised has been stored, so the caller counts the leading non-zero stamps.");

/* The bytes object of the message at ``src`` (``size`` bytes, of which only the first ``head`` differ between
 * messages): a pool entry of which only the pool holds a reference, its head rewritten, else a new object,
 * which takes the entry's place when there is a pool. A new reference; NULL with an exception set. */
static PyObject *
stamped_bytes(const char *src, Py_ssize_t size, Py_ssize_t head, PyObject *pool, Py_ssize_t index)
{
    Py_ssize_t pooled = pool == NULL ? 0 : PyList_GET_SIZE(pool); /* read each time: send may change it */
    if (pooled == 0)
        return PyBytes_FromStringAndSize(src, size);
    Py_ssize_t at = index % pooled;
    PyObject *old = PyList_GET_ITEM(pool, at);
    if (PyBytes_CheckExact(old) && Py_REFCNT(old) == 1 && PyBytes_GET_SIZE(old) == size) {
        memcpy(PyBytes_AS_STRING(old), src, head);
        /* A hash cached of the old contents would be wrong (the field is deprecated for readers since
         * 3.11; bytes still keep their hash in it). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        ((PyBytesObject *)old)->ob_shash = -1;
#pragma GCC diagnostic pop
        Py_INCREF(old);
        return old;
    }
    PyObject *msg = PyBytes_FromStringAndSize(src, size);
    if (msg == NULL)
        return NULL;
    Py_INCREF(msg);
    PyList_SetItem(pool, at, msg); /* takes one reference and lets the old entry go */
    return msg;
}

static PyObject *
send_stamped(PyObject *self, PyObject *args)
{
    PyObject *send, *slots, *block, *pool = Py_None;
    Py_ssize_t size, offset, n, i, first = 0;
    long long deadline;
    int as_bytes = 0;
    Py_buffer view;

    if (!PyArg_ParseTuple(args, "OO!OnnnL|pOn:send_stamped", &send, &PyList_Type, &slots, &block, &size, &offset,
                          &n, &deadline, &as_bytes, &pool, &first))
        return NULL;
    if (pool == Py_None) {
        pool = NULL;
    } else if (!PyList_CheckExact(pool) || first < 0) {
        PyErr_SetString(PyExc_ValueError, "send_stamped: pool must be a list (or None) and first >= 0");
        return NULL;
    }
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
            msg = stamped_bytes(stamp_at - offset, size, offset + 8, pool, first + i);
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

PyDoc_STRVAR(recv_headers_doc,
"recv_headers(recv, timed_out, headers, lengths, stamps, n, hsize) -> int\n\n"
"For i in range(n): call recv(); on return read the clock, copy the message's first hsize bytes (fewer if\n"
"it is shorter) to byte i * hsize of the writable buffer headers, its length to lengths[i] and the stamp to\n"
"stamps[i] (writable buffers of native int64), and let the message go at once, as a plain receive loop\n"
"does (a batch of held messages costs a receiver whose recv is in Python a tenth of its rate at 1 KB:\n"
"docs/harness-cost.md). An exception that is an instance of timed_out ends the batch and is cleared: the\n"
"return value is the number of messages received. Any other exception goes on unchanged after the messages\n"
"before it were recorded; the caller counts the leading non-zero stamps.");

static PyObject *
recv_headers(PyObject *self, PyObject *args)
{
    PyObject *recv, *timed_out, *headers, *lengths, *stamps;
    Py_ssize_t n, hsize, i;
    Py_buffer hv, lv, sv;

    if (!PyArg_ParseTuple(args, "OOOOOnn:recv_headers", &recv, &timed_out, &headers, &lengths, &stamps, &n, &hsize))
        return NULL;
    if (PyObject_GetBuffer(headers, &hv, PyBUF_WRITABLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(lengths, &lv, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&hv);
        return NULL;
    }
    if (PyObject_GetBuffer(stamps, &sv, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&hv);
        PyBuffer_Release(&lv);
        return NULL;
    }
    PyObject *result = NULL;
    if (n < 0 || hsize < 1 || n > hv.len / hsize || n > lv.len / (Py_ssize_t)sizeof(int64_t)
        || n > sv.len / (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "recv_headers: n must fit the headers, lengths and stamps buffers");
        goto done;
    }
    char *head_at = (char *)hv.buf;
    int64_t *length_at = (int64_t *)lv.buf, *stamp_at = (int64_t *)sv.buf;
    for (i = 0; i < n; i++, head_at += hsize) {
        PyObject *msg = PyObject_CallNoArgs(recv);
        if (msg == NULL) {
            if (PyErr_ExceptionMatches(timed_out)) {
                PyErr_Clear();
                result = PyLong_FromSsize_t(i);
            }
            goto done;
        }
        int64_t t = now_ns();
        Py_buffer mv;
        if (PyObject_GetBuffer(msg, &mv, PyBUF_SIMPLE) < 0) {
            Py_DECREF(msg);
            goto done;
        }
        memcpy(head_at, mv.buf, mv.len < hsize ? mv.len : hsize);
        length_at[i] = mv.len;
        PyBuffer_Release(&mv);
        Py_DECREF(msg);
        memcpy(&stamp_at[i], &t, sizeof t); /* last: a non-zero stamp means the message is recorded */
        if (PyErr_CheckSignals() < 0)
            goto done;
    }
    result = PyLong_FromSsize_t(i);
done:
    PyBuffer_Release(&hv);
    PyBuffer_Release(&lv);
    PyBuffer_Release(&sv);
    return result;
}

static PyMethodDef methods[] = {
    {"send_stamped", send_stamped, METH_VARARGS, send_stamped_doc},
    {"recv_headers", recv_headers, METH_VARARGS, recv_headers_doc},
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
