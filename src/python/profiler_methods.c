/* src/python/profiler_methods.c — the profiler's methods of opcore._C.
 *
 * The module (src/python/module.c) adds oc_py_profiler_methods[] to its own
 * method table. The Python layer is python/opcore/profiler.py.
 *
 *   profiler_start(logdir="logs", profile_type="trace", ms_duration=0.0, run_name=None)
 *   profiler_stop() -> dict of outputs (see oc_profiler_output)
 *   profiler_begin(name), profiler_end(), profiler_step(n)
 *   profiler_enabled() -> bool, profiler_membw_gbps() -> float,
 *   profiler_membw_source() -> str
 *   profiler_import(source, clock, spans): spans = [(name, category, thread,
 *       tid, t0_ns, t1_ns, op), ...]; clock 0 monotonic, 1 realtime
 *   profiler_import_xspace(source, data: bytes)
 *   profiler_now_ns(clock=0) -> int
 *
 * Errors: a bad argument raises ValueError, a profile already running (or
 * none running) RuntimeError, a file that cannot be written OSError; the
 * message is opcore's (oc_errmsg()).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "opcore/profiler.h"
#include "opcore/status.h"

static PyObject *raise_status(oc_status st)
{
    PyObject *type = PyExc_RuntimeError;
    if (st == OC_EINVAL) type = PyExc_ValueError;
    else if (st == OC_EIO) type = PyExc_OSError;
    else if (st == OC_ENOMEM) type = PyExc_MemoryError;
    PyErr_SetString(type, oc_errmsg());
    return NULL;
}

static PyObject *py_start(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"logdir", "profile_type", "ms_duration", "run_name", NULL};
    const char *logdir = "logs", *type_s = "trace", *run_name = NULL;
    PyObject *dur_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zzOz:profiler_start", kwlist, &logdir, &type_s, &dur_o,
                                     &run_name))
        return NULL;
    oc_profile_type type;
    if (!type_s || !strcmp(type_s, "trace")) type = OC_PROFILE_TRACE;
    else if (!strcmp(type_s, "operator")) type = OC_PROFILE_OPERATOR;
    else return PyErr_Format(PyExc_ValueError, "profile_type is '%s'; expected 'trace' or 'operator'", type_s);
    double ms = 0;
    if (dur_o != Py_None) {
        ms = PyFloat_AsDouble(dur_o);
        if (ms == -1.0 && PyErr_Occurred()) return NULL;
    }
    oc_status st = oc_profiler_start(logdir, type, ms, run_name);
    if (st != OC_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static int put(PyObject *d, const char *key, oc_profile_output what)
{
    const char *v = oc_profiler_output(what);
    PyObject *o = v ? PyUnicode_DecodeFSDefault(v) : (Py_INCREF(Py_None), Py_None);
    if (!o) return -1;
    int r = PyDict_SetItemString(d, key, o);
    Py_DECREF(o);
    return r;
}

static PyObject *py_stop(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    oc_status st;
    Py_BEGIN_ALLOW_THREADS
    st = oc_profiler_stop(NULL, 0);
    Py_END_ALLOW_THREADS
    if (st != OC_OK) return raise_status(st);  /* the profile is stopped all the same */
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    if (put(d, "run_dir", OC_PROFILE_OUT_RUN_DIR) || put(d, "trace", OC_PROFILE_OUT_TRACE) ||
        put(d, "xplane", OC_PROFILE_OUT_XPLANE) || put(d, "summary_json", OC_PROFILE_OUT_SUMMARY_JSON) ||
        put(d, "summary_csv", OC_PROFILE_OUT_SUMMARY_CSV) || put(d, "html", OC_PROFILE_OUT_HTML) ||
        put(d, "logdir", OC_PROFILE_OUT_LOGDIR) || put(d, "run_name", OC_PROFILE_OUT_RUN_NAME)) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *py_begin(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    oc_status st = oc_profiler_begin(name);
    if (st != OC_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *py_end(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    oc_status st = oc_profiler_end();
    if (st != OC_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *py_step(PyObject *self, PyObject *arg)
{
    (void)self;
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    oc_status st = oc_profiler_step((int64_t)n);
    if (st != OC_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *py_enabled(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyBool_FromLong(oc_profiler_enabled());
}

static PyObject *py_membw(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    double bw;
    Py_BEGIN_ALLOW_THREADS
    bw = oc_profiler_membw_gbps();
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(bw);
}

static PyObject *py_membw_source(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    const char *s;
    Py_BEGIN_ALLOW_THREADS
    s = oc_profiler_membw_source();
    Py_END_ALLOW_THREADS
    return PyUnicode_FromString(s);
}

/* A str or None -> a UTF-8 pointer owned by the object (or NULL). */
static int opt_str(PyObject *o, const char **out)
{
    if (o == Py_None) {
        *out = NULL;
        return 0;
    }
    *out = PyUnicode_AsUTF8(o);
    return *out ? 0 : -1;
}

static PyObject *py_import(PyObject *self, PyObject *args)
{
    (void)self;
    const char *source;
    int clock;
    PyObject *seq_in;
    if (!PyArg_ParseTuple(args, "siO:profiler_import", &source, &clock, &seq_in)) return NULL;
    PyObject *seq = PySequence_Fast(seq_in, "profiler_import: spans must be a sequence of tuples");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    oc_profiler_span *sp = PyMem_Calloc(n ? (size_t)n : 1, sizeof *sp);
    if (!sp) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name, *cat, *thread;
        long long tid, t0, t1;
        int op;
        if (!PyTuple_Check(items[i]) ||
            !PyArg_ParseTuple(items[i], "OOOLLLp", &name, &cat, &thread, &tid, &t0, &t1, &op)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "profiler_import: span %zd is not a tuple (name, category, "
                             "thread, tid, t0_ns, t1_ns, op)", i);
            goto fail;
        }
        if (opt_str(name, &sp[i].name) || opt_str(cat, &sp[i].category) || opt_str(thread, &sp[i].thread))
            goto fail;
        sp[i].tid = tid;
        sp[i].t0_ns = t0;
        sp[i].t1_ns = t1;
        sp[i].op = op != 0;
    }
    oc_status st = oc_profiler_import(source, (oc_profiler_clock)clock, sp, (size_t)n);
    PyMem_Free(sp);
    Py_DECREF(seq);
    if (st != OC_OK) return raise_status(st);
    Py_RETURN_NONE;
fail:
    PyMem_Free(sp);
    Py_DECREF(seq);
    return NULL;
}

static PyObject *py_import_xspace(PyObject *self, PyObject *args)
{
    (void)self;
    const char *source;
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "sy*:profiler_import_xspace", &source, &buf)) return NULL;
    oc_status st = oc_profiler_import_xspace(source, buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    if (st != OC_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *py_now_ns(PyObject *self, PyObject *args)
{
    (void)self;
    int clock = 0;
    if (!PyArg_ParseTuple(args, "|i:profiler_now_ns", &clock)) return NULL;
    return PyLong_FromLongLong(oc_profiler_now_ns((oc_profiler_clock)clock));
}

PyMethodDef oc_py_profiler_methods[] = {
    {"profiler_start", (PyCFunction)(void (*)(void))py_start, METH_VARARGS | METH_KEYWORDS,
     "profiler_start(logdir='logs', profile_type='trace', ms_duration=None, run_name=None)\n"
     "Start a profile (see opcore.profiler.profile)."},
    {"profiler_stop", py_stop, METH_NOARGS,
     "profiler_stop() -> dict\nStop the profile, write its files; returns their paths."},
    {"profiler_begin", py_begin, METH_O, "profiler_begin(name)\nOpen a named block on this thread."},
    {"profiler_end", py_end, METH_NOARGS, "profiler_end()\nClose the innermost named block of this thread."},
    {"profiler_step", py_step, METH_O, "profiler_step(n)\nMark the start of step n."},
    {"profiler_enabled", py_enabled, METH_NOARGS, "profiler_enabled() -> bool\nTrue while a profile records."},
    {"profiler_membw_gbps", py_membw, METH_NOARGS,
     "profiler_membw_gbps() -> float\nThe machine's memory bandwidth (GB/s) used by the summary."},
    {"profiler_membw_source", py_membw_source, METH_NOARGS,
     "profiler_membw_source() -> str\nHow the memory bandwidth was obtained."},
    {"profiler_import", py_import, METH_VARARGS,
     "profiler_import(source, clock, spans)\nAdd spans of another profiler to the running profile: "
     "spans = [(name, category, thread, tid, t0_ns, t1_ns, op), ...], clock 0 = monotonic, 1 = realtime."},
    {"profiler_import_xspace", py_import_xspace, METH_VARARGS,
     "profiler_import_xspace(source, data)\nAdd the host spans of an XSpace (.xplane.pb bytes)."},
    {"profiler_now_ns", py_now_ns, METH_VARARGS,
     "profiler_now_ns(clock=0) -> int\nNow in ns on opcore's clock (0, monotonic) or realtime (1)."},
    {NULL, NULL, 0, NULL}};
