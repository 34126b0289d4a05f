// src/python/torch_native_throw.cc — the two things opcore's C cannot do:
// throw a C++ exception, and call a C++ function that may throw one.
//
// Why C++: torch's dispatcher calls a boxed kernel registered through the
// stable C ABI (torch_library_impl) as a plain function and gives it no
// error channel; libtorch's own stable extensions report failure by
// throwing (STD_TORCH_CHECK). So the native kernel (torch_native.c) leaves
// through a throw, from here.
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

#include <cstdio>
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

// torch::autograd::impl::bump_version(const at::Tensor &), found by its
// mangled name (torch_native.c) and handed in as `fn`: the stable C ABI has
// no version-counter call. An AtenTensorHandle is an at::Tensor * (the
// stable ABI's own encoding), so the reference is the handle itself; the
// type need not be complete to pass it on.
namespace at {
class Tensor;
}

extern "C" int ocpy_torch_bump_version(void *fn, void *tensor_handle, char *err, size_t len)
{
    try {
        reinterpret_cast<void (*)(const at::Tensor &)>(fn)(*static_cast<const at::Tensor *>(tensor_handle));
        return 0;
    } catch (const std::exception &e) {
        std::snprintf(err, len, "%s", e.what());
        return -1;
    }
}
