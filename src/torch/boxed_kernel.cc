// src/torch/boxed_kernel.cc — opcore's native torch kernels as boxed C++
// kernels of torch's dispatcher, without the stable C ABI's conversions.
//
// Why: a kernel registered through the stable C ABI (torch_library_impl,
// src/python/torch_native.c's default route) is called through torch's
// StableIValueBoxedKernel, which converts every IValue into a heap-allocated
// handle and back (a new at::Tensor per tensor argument, whose deletion
// re-takes the GIL), walks the schema's types per argument and allocates a
// side stack: a 1x1 op through torch.ops costs 1.4x a C++ extension op with
// the same loop, whatever the kernel does. A boxed c10::OperatorKernel reads
// the IValue stack in place, as the C++ extension's own (boxed-from-unboxed)
// wrapper does.
//
// What it does: it builds the same StableIValue stack the stable route
// would (the encoding of torch/csrc/stable/stableivalue_conversions.h as of
// torch 2.13; lists, strings and optional boxes made with the stable ABI's
// own constructors, so torch_native.c frees them as it does on that route)
// except that tensors are borrowed: each is a pointer to the at::Tensor
// inside the IValue (an AtenTensorHandle is an at::Tensor*), valid while the
// stack holds it, and never deleted by opcore; beside the stack, each Tensor
// argument's fields (data, sizes, strides, dtype, device) as read here, so
// the C side need not make six calls into torch per tensor. Then it calls
// torch_native.c's run and moves the results (owned handles) back onto the
// stack. Errors leave as the C++ exception torch_native.c throws.
//
// How it is built: against the installed torch's headers, per torch
// version, by opcore/_torch_native.py (at `make python`, or at first use
// into opcore's cache); it links libtorch_cpu and libc10. Not in wheels:
// it must match the torch it runs in. Where it cannot be built, or with
// OPCORE_TORCH_BOXED=0 or OPCORE_TORCH_PUBLIC_API=1 (torch internals), the
// stable route serves. C linkage for the three entry points below and
// autograd_kernel.cc's one (the same shim: register_autograd's C++ kernel);
// nothing else is exported (-fvisibility=hidden).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/stable/c/shim.h>
#include <torch/library.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace {

using StableIValue = uint64_t;

// An argument's kind, as torch_native.c passes it (oc_arg_type's values
// would tie this file to opcore's header; these are its own).
enum Kind : int32_t {
    K_TENSOR = 0, K_INT, K_FLOAT, K_BOOL, K_DTYPE, K_STR, K_INT_LIST, K_FLOAT_LIST, K_TENSOR_LIST,
};

// A Tensor argument as read here (torch_native.h's ocpy_torch_view: the same
// layout; oc_torch_boxed_version says which).
struct TensorView {
    void *data;
    const int64_t *sizes, *strides;
    int64_t ndim;
    int32_t dtype, device;
    int32_t ok;
};

using RunFn = void (*)(void *rec, StableIValue *stack, const TensorView *views);

TensorView view_of(const at::Tensor &t)
{
    TensorView v{};
    if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage()) return v; // the ABI's accessors decide
    v.data = t.data_ptr();
    v.sizes = t.sizes().data();
    v.strides = t.strides().data();
    v.ndim = t.dim();
    v.dtype = static_cast<int32_t>(t.scalar_type());
    v.device = static_cast<int32_t>(t.device().type());
    v.ok = 1;
    return v;
}

StableIValue borrow(const at::Tensor &t)
{
    return static_cast<StableIValue>(reinterpret_cast<uintptr_t>(&t));
}

StableIValue bits(double f)
{
    StableIValue v = 0;
    std::memcpy(&v, &f, sizeof f);
    return v;
}

int64_t to_int(const c10::IValue &v)
{
    return v.isSymInt() ? v.toSymInt().guard_int(__FILE__, __LINE__) : v.toInt();
}

// Throws on a failure of the stable ABI's constructors (torch's own
// exception: torch.ops raises it).
void check(AOTITorchError e, const char *what)
{
    TORCH_CHECK(e == AOTI_TORCH_SUCCESS, "opcore: ", what, " failed");
}

StableIValue list_of(Kind kind, const c10::IValue &v)
{
    // the items as the list's own storage holds them (IValues): a borrowed
    // tensor stays valid while the stack holds the list
    const c10::ArrayRef<c10::IValue> items = v.toListRef();
    StableListHandle l = nullptr;
    check(torch_new_list_reserve_size(items.size(), &l), "a list");
    for (const c10::IValue &item : items) {
        StableIValue e = kind == K_TENSOR_LIST ? borrow(item.toTensor())
                       : kind == K_INT_LIST    ? static_cast<StableIValue>(to_int(item))
                                               : bits(item.toDouble());
        check(torch_list_push_back(l, e), "a list item");
    }
    return static_cast<StableIValue>(reinterpret_cast<uintptr_t>(l));
}

StableIValue encode(Kind kind, const c10::IValue &v)
{
    switch (kind) {
    case K_TENSOR: return borrow(v.toTensor());
    case K_INT: return static_cast<StableIValue>(to_int(v));
    case K_FLOAT: return bits(v.toDouble());
    case K_BOOL: return v.toBool() ? 1 : 0;
    case K_DTYPE: return static_cast<StableIValue>(static_cast<uint32_t>(static_cast<int32_t>(v.toScalarType())));
    case K_STR: {
        const std::string &s = v.toStringRef();
        StringHandle h = nullptr;
        check(torch_new_string_handle(s.data(), s.size(), &h), "a string");
        return static_cast<StableIValue>(reinterpret_cast<uintptr_t>(h));
    }
    default: return list_of(kind, v);
    }
}

class Kernel final : public c10::OperatorKernel {
public:
    Kernel(RunFn run, void *rec, const int32_t *kinds, const int32_t *optional, int nargs, int nret)
        : run_(run), rec_(rec), nargs_(nargs), nret_(nret)
    {
        for (int i = 0; i < nargs; i++) {
            kinds_[i] = static_cast<Kind>(kinds[i]);
            optional_[i] = optional[i] != 0;
        }
    }

    void operator()(const c10::OperatorHandle &, c10::DispatchKeySet, torch::jit::Stack *stack)
    {
        StableIValue vals[kMaxArgs > kMaxResults ? kMaxArgs : kMaxResults];
        TensorView views[kMaxArgs];
        const size_t base = stack->size() - static_cast<size_t>(nargs_);
        for (int i = 0; i < nargs_; i++) {
            const c10::IValue &v = (*stack)[base + static_cast<size_t>(i)];
            views[i].ok = 0;
            if (kinds_[i] == K_TENSOR && v.isTensor()) views[i] = view_of(v.toTensor());
            if (!optional_[i]) {
                vals[i] = encode(kinds_[i], v);
                continue;
            }
            if (v.isNone()) {
                vals[i] = 0;
                continue;
            }
            StableIValue *box = nullptr; // torch_native.c deletes it (torch_delete_stable_ivalue)
            check(torch_new_stable_ivalue(&box), "an optional");
            *box = encode(kinds_[i], v);
            vals[i] = static_cast<StableIValue>(reinterpret_cast<uintptr_t>(box));
        }
        run_(rec_, vals, views); // throws opcore's error
        stack->erase(stack->end() - nargs_, stack->end());
        for (int j = 0; j < nret_; j++) {
            at::Tensor *t = reinterpret_cast<at::Tensor *>(static_cast<uintptr_t>(vals[j]));
            stack->emplace_back(std::move(*t));
            delete t; // an owned handle is a new at::Tensor (aoti_torch_empty_strided, new_tensor_handle)
        }
    }

    static constexpr int kMaxArgs = 64, kMaxResults = 16;

private:
    RunFn run_;
    void *rec_;
    int nargs_, nret_;
    Kind kinds_[kMaxArgs];
    bool optional_[kMaxArgs];
};

} // namespace

extern "C" {

// The version of this interface (these entry points and autograd_kernel.cc's):
// torch_native.c checks it before use.
__attribute__((visibility("default"))) int oc_torch_boxed_version(void) { return 3; }

// Register `run` (with `rec`) as the CPU kernel of torch op ns::name. kinds
// and optional: per argument. *reg: the registration (oc_torch_boxed_drop
// takes it out). 0 on success, else -1 with a message in err.
__attribute__((visibility("default"))) int oc_torch_boxed_impl(const char *ns, const char *name, RunFn run, void *rec,
                                                               const int32_t *kinds, const int32_t *optional,
                                                               int nargs, int nret, void **reg, char *err,
                                                               size_t errlen)
{
    *reg = nullptr;
    if (nargs > Kernel::kMaxArgs || nret > Kernel::kMaxResults) {
        std::snprintf(err, errlen, "%d arguments, %d results: at most %d and %d", nargs, nret, Kernel::kMaxArgs,
                      Kernel::kMaxResults);
        return -1;
    }
    try {
        auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::CPU,
                                                    "opcore/torch/boxed_kernel.cc", __LINE__);
        lib->impl(name, torch::CppFunction::makeFromBoxedFunctor(
                            std::make_unique<Kernel>(run, rec, kinds, optional, nargs, nret)));
        *reg = lib.release();
        return 0;
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "%s", e.what());
        return -1;
    }
}

// Take a registration out again (its kernel is no longer called).
__attribute__((visibility("default"))) void oc_torch_boxed_drop(void *reg)
{
    delete static_cast<torch::Library *>(reg);
}
}
