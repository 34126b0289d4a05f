// src/python/torch_native_throw.cc — the one thing opcore's C cannot do:
// throw a C++ exception.
//
// Why C++: a kernel of torch's dispatcher reports failure only by
// throwing. The torch kernel shim (src/torch/boxed_kernel.cc) is built
// against torch's headers but not Python's, so it asks this extension to
// raise opcore's exception (torch_native.c's fail), which leaves through a
// throw, from here.
//
// What is thrown: torch's `python_error` (torch/csrc/Exceptions.h), the
// exception torch uses to carry an already-built Python exception through
// C++. Every place that hands C++ errors back to Python (torch's pybind11
// exception translator, HANDLE_TH_ERRORS, the autograd engine) restores it
// as is, so the torch.ops caller gets opcore.OpError with .op and .status,
// exactly as from the Python kernel. The class below repeats torch's layout
// (std::exception, three PyObject*, std::string); catch clauses match the
// type by its name, which is the same. Its what() is the message, for C++
// callers that catch std::exception.
#include "torch_native.h"

#include <exception>
#include <string>
#include <utility>

struct python_error : public std::exception {
    python_error() = default;
    python_error(const python_error &other)
        : type(other.type), value(other.value), traceback(other.traceback), message(other.message)
    {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_XINCREF(type);
        Py_XINCREF(value);
        Py_XINCREF(traceback);
        PyGILState_Release(g);
    }
    python_error(python_error &&other) noexcept
        : type(other.type), value(other.value), traceback(other.traceback), message(std::move(other.message))
    {
        other.type = other.value = other.traceback = nullptr;
    }
    python_error &operator=(const python_error &) = delete;
    python_error &operator=(python_error &&) = delete;
    ~python_error() override
    {
        if (type || value || traceback) {
            PyGILState_STATE g = PyGILState_Ensure();
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            PyGILState_Release(g);
        }
    }
    const char *what() const noexcept override { return message.c_str(); }

    PyObject *type{nullptr};
    PyObject *value{nullptr};
    PyObject *traceback{nullptr};
    std::string message;
};

static_assert(sizeof(python_error) == sizeof(void *) * 4 + sizeof(std::string), "torch's python_error layout");

extern "C" void ocpy_torch_throw(PyObject *type, PyObject *value, PyObject *traceback, const char *msg)
{
    python_error e;
    e.type = type;
    e.value = value;
    e.traceback = traceback;
    e.message = msg ? msg : "opcore op failed";
    throw e;
}
