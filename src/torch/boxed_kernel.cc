// src/torch/boxed_kernel.cc — opcore ops as boxed C++ kernels of torch's
// dispatcher: the one native route of opcore.torch ("the shim").
//
// A call reads torch's IValue stack in place into oc_values (tensors viewed
// with zero copies, any strides), runs the op through libopcore's public
// host API (oc_op_run; a call repeating the last one's argument metadata
// through a prepared call, oc_call_prepare / oc_call_run, as opcore.jax does
// per XLA call site), allocates fresh results with torch, bumps the version
// counters of the Tensor(a!) arguments it wrote (as torch's own in-place
// ops do) and leaves the results on the stack. A failure leaves as the
// exception the host's fail() throws (src/python/torch_native.c: the
// opcore.OpError with .op and .status, carried through torch's dispatcher).
//
// Prepared calls: an op keeps one, made when two calls in a row that missed
// it had one key (each Tensor's dtype, device, sizes and strides, each int,
// float, bool and dtype value); ops with other argument kinds (optional,
// list, str), ops of --debug libraries, calls while the profiler records and
// OC_INFER_MEMO=0 have none. A running call takes it for itself (threads
// calling the op at once take the usual path meanwhile).
//
// Reloading: a registration outlives its op's library. Each call reads the
// op it runs from the registration's slot (Site::op), which a reload of a
// build with the same schema replaces atomically
// (oc_torch_shim_swap): torch's dispatcher keeps the same kernel, calls in
// flight finish on the op they read, later ones run the new one. An op
// whose library was unloaded stays in the slot and fails as libopcore says
// ("its library ... was unloaded"); its record is never freed.
//
// A C++ program with no Python registers a library's ops through it too
// (oc_torch_shim_register_library, below), and runs AOTInductor packages
// that call them.
//
// Built against the installed torch's headers (opcore/_torch_native.py:
// `make python`, the wheel build, `python -m opcore build-torch-shim`),
// linked with libopcore, libtorch_cpu and libc10; never on import. Only
// the extern "C" entry points below and autograd_kernel.cc's are exported.
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <opcore/host.h>
#include <opcore/profiler.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#define OC_SHIM_API extern "C" __attribute__((visibility("default")))

// What opcore's Python extension lends the shim (src/python/torch_native.h
// repeats it): fail() raises opcore's exception for `st` (never returns);
// lend_begin/_end bracket a run that may lend torch's threads.
struct oc_torch_host {
    void (*fail)(const oc_op *op, oc_status st);
    bool (*lend_begin)(void);
    void (*lend_end)(bool lent);
};

namespace octorch {

std::string dtype_name(c10::ScalarType t)
{
    switch (t) { // as Python prints torch.dtype
    case c10::kFloat: return "torch.float32";
    case c10::kDouble: return "torch.float64";
    case c10::kHalf: return "torch.float16";
    case c10::kBFloat16: return "torch.bfloat16";
    case c10::kComplexHalf: return "torch.complex32";
    case c10::kComplexFloat: return "torch.complex64";
    case c10::kComplexDouble: return "torch.complex128";
    case c10::kInt: return "torch.int32";
    case c10::kLong: return "torch.int64";
    case c10::kShort: return "torch.int16";
    case c10::kChar: return "torch.int8";
    case c10::kByte: return "torch.uint8";
    case c10::kBool: return "torch.bool";
    case c10::kUInt16: return "torch.uint16";
    case c10::kUInt32: return "torch.uint32";
    case c10::kUInt64: return "torch.uint64";
    default: return std::string("torch.") + c10::toString(t);
    }
}

} // namespace octorch

namespace {

oc_torch_host host;

[[noreturn]] void raise(const oc_op *op, oc_status st)
{
    host.fail(op, st); // throws
    std::abort();
}
std::atomic<uint64_t> prepared_made{0};
constexpr int kMaxArgs = 64;
constexpr int kKeyMax = 296; // int64s: 16 tensors of 8 dims

// torch's dtype of each oc_dtype, and back (-1: none)
c10::ScalarType torch_dtype[OC_NUM_DTYPES];
int oc_dtype_of[static_cast<int>(c10::ScalarType::NumOptions)];

void init_dtypes()
{
    for (int &d : oc_dtype_of) d = -1;
    for (int s = 0; s < static_cast<int>(c10::ScalarType::NumOptions); s++) {
        std::string name = octorch::dtype_name(static_cast<c10::ScalarType>(s)).substr(6);
        for (int d = 0; d < OC_NUM_DTYPES; d++)
            if (name == oc_dtype_name(static_cast<oc_dtype>(d))) {
                oc_dtype_of[s] = d;
                torch_dtype[d] = static_cast<c10::ScalarType>(s);
            }
    }
}

bool memo_off()
{
    const char *e = std::getenv("OC_INFER_MEMO");
    return e && !std::strcmp(e, "0");
}

struct Prepared {
    const oc_op *op = nullptr; // the op it was made for
    oc_call *call = nullptr;
    oc_tensor metas[OC_MAX_RESULTS];
    std::vector<int64_t> key;
    ~Prepared() { oc_call_free(call); }
};

// One registered op. Never freed: torch may still be entering its kernel on
// another thread when the registration is dropped (the op's record stays in
// libopcore, and such a call fails as the op's library was unloaded).
// Everything but the slot follows from the schema, which a swap keeps.
struct Site {
    std::atomic<const oc_op *> op; // the slot: the op calls run now
    int nargs, nres, nret = 0;
    oc_arg_type type[kMaxArgs];
    bool optional[kMaxArgs], bump[kMaxArgs];
    int alias[OC_MAX_RESULTS], ret_index[OC_MAX_RESULTS];
    bool any_alias = false;          // a result returned is an argument (Tensor(a!))
    bool keyed_args;                 // every argument can key a prepared call
    std::atomic<bool> eligible;      // for prepared calls (not for --debug libraries)
    std::atomic<bool> gone{false};   // its library was reloaded without it (oc_torch_shim_retire)
    std::atomic<Prepared *> ready{nullptr};
    std::mutex lock; // guards missed
    std::unique_ptr<Prepared> missed;

    void clear()
    {
        delete ready.exchange(nullptr);
        std::lock_guard<std::mutex> g(lock);
        missed.reset();
    }
    void put(Prepared *p)
    {
        Prepared *none = nullptr; // a newer one installed meanwhile stays
        if (!ready.compare_exchange_strong(none, p)) delete p;
    }
};

struct Reg {
    std::unique_ptr<torch::Library> lib;
    Site *site;
};

[[noreturn]] void fail_arg(const oc_op *op, int i, const std::string &what)
{
    oc_set_error(OC_EINVAL, "op '%s': argument %d '%s' %s", oc_op_qualname(op), i + 1,
                 oc_op_arg_name(op, i), what.c_str());
    raise(op, OC_EINVAL);
}

int64_t to_int(const c10::IValue &v)
{
    return v.isSymInt() ? v.toSymInt().guard_int(__FILE__, __LINE__) : v.toInt();
}

// What one call owns until it ends.
struct Call {
    // the arrays are filled as needed
    explicit Call(Site &site) : s(site), op(site.op.load(std::memory_order_acquire)) {}
    Site &s;
    const oc_op *op; // read once from the slot: the whole call runs this op
    oc_value vals[kMaxArgs];
    oc_tensor tensors[kMaxArgs];
    std::vector<std::unique_ptr<char[]>> heap; // list items
    at::Tensor results[OC_MAX_RESULTS];
};

void view(const oc_op *s, int i, const at::Tensor &t, oc_tensor *out)
{
    if (!t.defined()) fail_arg(s, i, "is an undefined tensor");
    if (t.device().type() != c10::DeviceType::CPU)
        fail_arg(s, i, "is on device '" + c10::DeviceTypeName(t.device().type(), true) +
                           "'; opcore runs kernels on the CPU: move the tensor with .cpu()");
    if (t.layout() != c10::kStrided || !t.has_storage())
        fail_arg(s, i, "is not a strided tensor with storage; opcore kernels take strided CPU "
                       "tensors");
    int d = oc_dtype_of[static_cast<int>(t.scalar_type())];
    if (d < 0)
        fail_arg(s, i, "has dtype " + octorch::dtype_name(t.scalar_type()) +
                           ", which opcore does not support");
    int64_t ndim = t.dim();
    if (ndim > OC_MAX_DIMS)
        fail_arg(s, i, "has " + std::to_string(ndim) + " dims; opcore allows at most " +
                           std::to_string(OC_MAX_DIMS));
    out->data = t.data_ptr();
    out->dtype = static_cast<oc_dtype>(d);
    out->ndim = static_cast<int32_t>(ndim);
    std::memcpy(out->sizes, t.sizes().data(), static_cast<size_t>(ndim) * sizeof(int64_t));
    std::memcpy(out->strides, t.strides().data(), static_cast<size_t>(ndim) * sizeof(int64_t));
    out->flags = 0;
    out->coherence = OC_COHERENT;
}

template <typename T> T *items(Call &c, size_t n)
{
    c.heap.emplace_back(new char[n ? n * sizeof(T) : 1]);
    return reinterpret_cast<T *>(c.heap.back().get());
}

oc_value convert(Call &c, int i, const c10::IValue &v)
{
    const Site &s = c.s;
    if (s.optional[i] && v.isNone()) return oc_value_none();
    switch (s.type[i]) {
    case OC_ARG_TENSOR:
        view(c.op, i, v.toTensor(), &c.tensors[i]);
        return oc_value_tensor(&c.tensors[i]);
    case OC_ARG_INT: return oc_value_int(to_int(v));
    case OC_ARG_FLOAT: return oc_value_float(v.toDouble());
    case OC_ARG_BOOL: return oc_value_bool(v.toBool());
    case OC_ARG_DTYPE: {
        int d = oc_dtype_of[static_cast<int>(v.toScalarType())];
        if (d < 0)
            fail_arg(c.op, i, "is " + octorch::dtype_name(v.toScalarType()) +
                               ", a dtype opcore does not support");
        return oc_value_dtype(static_cast<oc_dtype>(d));
    }
    case OC_ARG_STR: {
        const std::string &str = v.toStringRef();
        size_t nul = str.find('\0');
        if (nul != std::string::npos) // the kernel gets a C string: it would end at the NUL
            fail_arg(c.op, i, "(a str) holds a NUL character at index " + std::to_string(nul) +
                               "; a kernel receives a str as a C string, which would end there "
                               "(pass the data as a tensor instead)");
        return oc_value_str(str.c_str());
    }
    case OC_ARG_TENSOR_LIST: {
        c10::ArrayRef<c10::IValue> l = v.toListRef();
        oc_tensor *t = items<oc_tensor>(c, l.size());
        for (size_t k = 0; k < l.size(); k++) view(c.op, i, l[k].toTensor(), &t[k]);
        return oc_value_tensors(t, static_cast<int64_t>(l.size()));
    }
    case OC_ARG_INT_LIST: {
        c10::ArrayRef<c10::IValue> l = v.toListRef();
        int64_t *x = items<int64_t>(c, l.size());
        for (size_t k = 0; k < l.size(); k++) x[k] = to_int(l[k]);
        return oc_value_ints(x, static_cast<int64_t>(l.size()));
    }
    case OC_ARG_FLOAT_LIST: {
        c10::ArrayRef<c10::IValue> l = v.toListRef();
        double *x = items<double>(c, l.size());
        for (size_t k = 0; k < l.size(); k++) x[k] = l[k].toDouble();
        return oc_value_floats(x, static_cast<int64_t>(l.size()));
    }
    default: break; // not registered (oc_torch_shim_impl)
    }
    oc_set_error(OC_EINVAL, "op '%s': argument %d has a type the native kernel does not carry",
                 oc_op_qualname(c.op), i + 1);
    raise(c.op, OC_EINVAL);
}

// Result `index` of meta's shape and dtype, allocated by torch.
oc_status alloc_torch(Call &c, int index, const oc_tensor *meta)
{
    try {
        c10::IntArrayRef sizes(meta->sizes, static_cast<size_t>(meta->ndim));
        c.results[index] = at::detail::empty_cpu(sizes, torch_dtype[meta->dtype], false,
                                                 std::nullopt);
    } catch (const std::exception &e) {
        return oc_set_error(OC_ENOMEM, "op '%s': torch could not allocate result %d: %s",
                            oc_op_qualname(c.op), index, e.what());
    }
    return OC_OK;
}

oc_status alloc_result(void *ctx, int index, const oc_tensor *meta, oc_tensor *out)
{
    Call &c = *static_cast<Call *>(ctx);
    oc_status st = alloc_torch(c, index, meta);
    if (st) return st;
    return oc_tensor_init(out, c.results[index].data_ptr(), meta->dtype, meta->ndim, meta->sizes);
}

// A prepared call's key (see the header): its int64s, on the caller's stack.
struct Key {
    int n = 0;
    int64_t v[kKeyMax];
    bool push(int64_t x)
    {
        if (n == kKeyMax) return false;
        v[n++] = x;
        return true;
    }
    bool operator==(const std::vector<int64_t> &o) const
    {
        size_t len = static_cast<size_t>(n);
        return o.size() == len && !std::memcmp(o.data(), v, len * sizeof *v);
    }
};

// This call's key, or false.
bool make_key(const Site &s, const c10::IValue *args, Key &key)
{
    if (!s.eligible.load(std::memory_order_relaxed) || oc_profiler_enabled()) return false;
    for (int i = 0; i < s.nargs; i++) {
        const c10::IValue &v = args[i];
        bool ok = true;
        switch (s.type[i]) {
        case OC_ARG_TENSOR: {
            const at::Tensor &t = v.toTensor();
            if (!t.defined() || t.layout() != c10::kStrided) return false;
            int64_t nd = t.dim();
            ok = key.push(static_cast<int64_t>(t.scalar_type()) << 40 |
                          static_cast<int64_t>(t.device().type()) << 8 | nd);
            for (int64_t d = 0; d < nd && ok; d++)
                ok = key.push(t.sizes()[d]) && key.push(t.strides()[d]);
            break;
        }
        case OC_ARG_INT: ok = key.push(to_int(v)); break;
        case OC_ARG_FLOAT: {
            double f = v.toDouble();
            int64_t bits;
            std::memcpy(&bits, &f, sizeof bits);
            ok = key.push(bits);
            break;
        }
        case OC_ARG_BOOL: ok = key.push(v.toBool()); break;
        default: ok = key.push(static_cast<int64_t>(v.toScalarType())); break; // dtype
        }
        if (!ok) return false;
    }
    return true;
}

Prepared *take(Site &s, const oc_op *op, const Key &key)
{
    if (!s.ready.load(std::memory_order_relaxed)) return nullptr;
    Prepared *p = s.ready.exchange(nullptr, std::memory_order_acquire);
    if (p && p->op != op) { // made for the op a swap replaced
        delete p;
        return nullptr;
    }
    if (!p || key == p->key) return p;
    s.put(p);
    return nullptr;
}

// After a call that missed and succeeded: remember its key; when the last
// miss had the same one, prepare a call for it.
void learn(Site &s, const oc_op *op, const Key &key, const oc_value *args, const oc_tensor *outs)
{
    std::unique_ptr<Prepared> m;
    {
        std::lock_guard<std::mutex> g(s.lock);
        if (!s.missed || s.missed->op != op || !(key == s.missed->key)) {
            if (!s.missed) s.missed = std::make_unique<Prepared>();
            s.missed->op = op;
            s.missed->key.assign(key.v, key.v + key.n);
            return;
        }
        m = std::move(s.missed); // becomes the prepared call
    }
    for (int r = 0; r < s.nres; r++) m->metas[r] = outs[r];
    if (oc_call_prepare(op, args, s.nargs, s.nres ? outs : nullptr, nullptr, &m->call) != OC_OK) {
        oc_clear_error(); // nothing lost: calls take the usual path
        return;
    }
    prepared_made.fetch_add(1, std::memory_order_relaxed);
    delete s.ready.exchange(m.release(), std::memory_order_acq_rel);
}

// Bump the version counters of the Tensor(a!) arguments. A tensor without
// one (an inference tensor outside inference mode) is left as a C++ op
// leaves it: written, nothing raised.
void bump(const at::Tensor &t)
{
    try {
        torch::autograd::impl::bump_version(t);
    } catch (const std::exception &) {
    }
}

oc_status run_prepared(Call &c, const c10::IValue *args, Prepared *p)
{
    const Site &s = c.s;
    void *data[kMaxArgs + OC_MAX_RESULTS];
    int k = 0;
    for (int i = 0; i < s.nargs; i++)
        if (s.type[i] == OC_ARG_TENSOR) data[k++] = args[i].toTensor().data_ptr();
    oc_status st = OC_OK;
    for (int r = 0; r < s.nres && !st; r++) {
        if (s.alias[r] >= 0) continue; // `-> Tensor(a!)`: the argument
        st = alloc_torch(c, r, &p->metas[r]); // only its data goes to the call: no struct to fill
        if (!st) data[k++] = c.results[r].data_ptr();
    }
    if (st) return st;
    bool lent = host.lend_begin();
    st = oc_call_run(p->call, data);
    host.lend_end(lent);
    return st;
}

[[noreturn]] void raise_gone(const oc_op *op)
{
    const oc_library *lib = oc_op_library(op);
    oc_set_error(OC_ENOTFOUND, "op '%s': its library '%s' was unloaded and loaded again without it (the "
                 "build loaded now does not define it); torch keeps the name until the process ends",
                 oc_op_qualname(op), oc_library_name(lib));
    raise(op, OC_ENOTFOUND);
}

class Kernel final : public c10::OperatorKernel {
public:
    explicit Kernel(Site *s) : s_(s) {}

    void operator()(const c10::OperatorHandle &, c10::DispatchKeySet, torch::jit::Stack *stack)
    {
        Site &s = *s_;
        const c10::IValue *args = stack->data() + (stack->size() - static_cast<size_t>(s.nargs));
        Call c(s);
        if (__builtin_expect(s.gone.load(std::memory_order_relaxed), 0)) raise_gone(c.op);
        Key key;
        bool keyed = make_key(s, args, key);
        Prepared *p = keyed ? take(s, c.op, key) : nullptr;
        oc_status st;
        if (p) {
            st = run_prepared(c, args, p);
            s.put(p);
        } else {
            for (int i = 0; i < s.nargs; i++) c.vals[i] = convert(c, i, args[i]);
            oc_tensor outs[OC_MAX_RESULTS];
            bool lent = host.lend_begin();
            st = oc_op_run(c.op, c.vals, s.nargs, alloc_result, &c, outs);
            host.lend_end(lent);
            if (!st && keyed) learn(s, c.op, key, c.vals, outs);
        }
        if (st) raise(c.op, st);
        for (int i = 0; i < s.nargs; i++) {
            if (!s.bump[i] || args[i].isNone()) continue;
            if (s.type[i] == OC_ARG_TENSOR) bump(args[i].toTensor());
            else for (const c10::IValue &t : args[i].toListRef()) bump(t.toTensor());
        }
        if (!s.any_alias) { // every result fresh: straight from the call onto the stack
            stack->erase(stack->end() - s.nargs, stack->end());
            for (int j = 0; j < s.nret; j++) stack->emplace_back(std::move(c.results[s.ret_index[j]]));
            return;
        }
        c10::IValue out[OC_MAX_RESULTS];
        for (int j = 0; j < s.nret; j++) {
            int r = s.ret_index[j], a = s.alias[r];
            out[j] = a < 0 ? c10::IValue(std::move(c.results[r])) : args[a];
        }
        stack->erase(stack->end() - s.nargs, stack->end());
        for (int j = 0; j < s.nret; j++) stack->push_back(std::move(out[j]));
    }

private:
    Site *s_;
};

bool carried(oc_arg_type t)
{
    return t != OC_ARG_SCALAR && t != OC_ARG_DICT && t != OC_ARG_NONE;
}

} // namespace

// The version of this interface (these entry points, autograd_kernel.cc's
// and struct oc_torch_host): opcore checks it before use.
OC_SHIM_API int oc_torch_shim_version(void) { return 6; }

OC_SHIM_API void oc_torch_shim_init(const oc_torch_host *h)
{
    host = *h;
    init_dtypes();
}

// Register op's CPU kernel as torch op ns::name, returning every result or
// (fresh_only) only the fresh ones. 1 registered (*reg: the registration),
// 0 an argument kind the shim does not carry (Scalar), -1 an error in err.
OC_SHIM_API int oc_torch_shim_impl(const oc_op *op, const char *ns, const char *name,
                                   int fresh_only, void **reg, char *err, size_t errlen)
{
    *reg = nullptr;
    int nargs = oc_op_num_args(op), nres = oc_op_num_results(op);
    if (nargs > kMaxArgs || nres > OC_MAX_RESULTS) return 0;
    for (int i = 0; i < nargs; i++)
        if (!carried(oc_op_arg_type(op, i))) return 0;
    Site *s = new Site;
    s->op.store(op);
    s->nargs = nargs;
    s->nres = nres;
    s->keyed_args = !memo_off();
    for (int i = 0; i < nargs; i++) {
        oc_arg_type t = s->type[i] = oc_op_arg_type(op, i);
        s->optional[i] = oc_op_arg_optional(op, i);
        s->bump[i] = oc_op_arg_mutable(op, i) && (t == OC_ARG_TENSOR || t == OC_ARG_TENSOR_LIST);
        bool keyed = t == OC_ARG_TENSOR || t == OC_ARG_INT || t == OC_ARG_FLOAT ||
                     t == OC_ARG_BOOL || t == OC_ARG_DTYPE;
        s->keyed_args = s->keyed_args && !s->optional[i] && keyed;
    }
    s->eligible.store(s->keyed_args && !oc_library_debug(oc_op_library(op)));
    for (int r = 0; r < nres; r++) {
        s->alias[r] = oc_op_result_alias(op, r);
        if (fresh_only && s->alias[r] >= 0) continue;
        s->ret_index[s->nret++] = r;
        s->any_alias = s->any_alias || s->alias[r] >= 0;
    }
    try {
        auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::CPU,
                                                    "opcore/torch/boxed_kernel.cc", __LINE__);
        lib->impl(name, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Kernel>(s)));
        *reg = new Reg{std::move(lib), s};
        return 1;
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "%s", e.what());
        delete s;
        return -1;
    }
}

// Take a registration out again (its kernel is no longer called).
OC_SHIM_API void oc_torch_shim_drop(void *reg)
{
    Reg *r = static_cast<Reg *>(reg);
    r->lib.reset();
    r->site->clear(); // its oc_call holds the op's bound arguments
    delete r;
}

// Make a registration call `op` from now on (a reload of its library): 1
// swapped, 0 refused because op's schema is not the registered one's
// (torch's definition cannot change under calls: the caller re-registers).
// Calls running finish on the op they read; prepared calls made for the
// old op are dropped as they are met.
OC_SHIM_API int oc_torch_shim_swap(void *reg, const oc_op *op)
{
    Site *s = static_cast<Reg *>(reg)->site;
    const oc_op *old = s->op.load(std::memory_order_acquire);
    if (std::strcmp(oc_op_schema(old), oc_op_schema(op)) != 0) return 0;
    s->eligible.store(s->keyed_args && !oc_library_debug(oc_op_library(op)), std::memory_order_relaxed);
    s->op.store(op, std::memory_order_release);
    s->gone.store(false, std::memory_order_relaxed);
    s->clear(); // a prepared call in use meets the new op when it is taken again
    return 1;
}

// Its library was reloaded without the op: calls raise OpError saying so
// (until a build defining it again swaps it back in).
OC_SHIM_API void oc_torch_shim_retire(void *reg)
{
    Site *s = static_cast<Reg *>(reg)->site;
    s->gone.store(true, std::memory_order_relaxed);
    s->clear();
}

// ---- C++ hosts with no Python ----------------------------------------------------

namespace {

[[noreturn]] void fail_in_cpp(const oc_op *, oc_status)
{
    TORCH_CHECK(false, oc_errmsg()); // a c10::Error with opcore's message
}

bool lend_none(void) { return false; }
void lend_end_none(bool) {}

std::mutex defs_lock;
std::vector<std::unique_ptr<torch::Library>> defs; // the ops' schemas, for the process's life

} // namespace

// For a C++ program with no Python (torch's AOTIModelPackageLoader running
// an AOTInductor package that calls opcore ops): define every op of `lib`
// (loaded with oc_library_load) in torch's dispatcher with its schema and
// register its CPU kernel, as opcore.torch does from Python. Errors are
// c10::Errors carrying opcore's message; torch's threads are not lent.
// Ops the shim does not carry (Scalar, Dict arguments) are left out. The
// number of ops registered, or -1 with a message in err.
OC_SHIM_API int oc_torch_shim_register_library(const oc_library *lib, char *err, size_t errlen)
{
    static const oc_torch_host cpp_host = {fail_in_cpp, lend_none, lend_end_none};
    if (!host.fail) oc_torch_shim_init(&cpp_host);
    const char *ns = oc_library_name(lib);
    int count = 0;
    try {
        auto def = std::make_unique<torch::Library>(torch::Library::FRAGMENT, ns, std::nullopt,
                                                    "opcore/torch/boxed_kernel.cc", __LINE__);
        for (int i = 0; i < oc_library_num_ops(lib); i++) {
            const oc_op *op = oc_library_op(lib, i);
            void *reg = nullptr;
            bool dict = false;
            for (int a = 0; a < oc_op_num_args(op); a++)
                dict = dict || oc_op_arg_type(op, a) == OC_ARG_DICT;
            if (dict) continue; // torch's schemas have no such type
            def->def(oc_op_schema(op));
            int r = oc_torch_shim_impl(op, ns, oc_op_name(op), 0, &reg, err, errlen);
            if (r < 0) return -1;
            count += r; // the registration lives as long as the process
        }
        std::lock_guard<std::mutex> g(defs_lock);
        defs.push_back(std::move(def));
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "%s", e.what());
        return -1;
    }
    return count;
}

// Prepared calls made in this process (tests read it).
OC_SHIM_API uint64_t oc_torch_shim_prepared(void)
{
    return prepared_made.load(std::memory_order_relaxed);
}
