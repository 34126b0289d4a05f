// src/torch/autograd_kernel.cc — opcore.torch.register_autograd's Autograd
// kernel in C++: a forward op and its backward op, paired by name, as one
// node of torch's autograd graph, with no Python on either pass.
//
// Why: in Python the pairing is an autograd.Function (or a Python kernel at
// the Autograd key calling one); Function.apply, ctx.save_for_backward and
// the backward's Python frame cost more per call than the ops themselves on
// small tensors (a [32, 120] ReLU forward+backward read 1.18x the seeds'
// hand-written Function; a Python Autograd kernel that only calls such a
// Function is 1.07x, the floor of any Python route). torch's own ops pair
// their forward and backward in C++ nodes (VariableType, Functions.h); this
// kernel is one such node, generic over a binding computed once at
// registration by opcore/torch.py (_Pairing): which backward argument is
// fed which forward input, forward result, incoming gradient or default,
// and which forward input each backward result is the gradient of.
//
// What it does: called at the op's Autograd key. Without grad mode or an
// input that requires grad it redispatches below autograd, as a C++ op
// with no autograd formula would. Otherwise it saves what the backward
// names (tensors as SavedVariables: version-checked, released after
// backward, visible to saved-tensor hooks), redispatches the forward, and
// makes the results' grad_fn a node whose apply calls the backward op
// through the dispatcher (so its own Autograd kernel applies under
// create_graph=True) and checks every gradient against its input's shape
// and dtype with opcore's message. Forward-mode AD is refused by name: the
// pairing gives reverse mode only. Under compiled autograd the node's
// backward is one opaque call in the graph (apply_functional, bound by the
// binding's name), as torch's C++ custom Functions are.
//
// Built into the same shim as boxed_kernel.cc (opcore/_torch_native.py).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/dynamo/compiled_autograd.h>
#include <torch/library.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace octorch {
std::string dtype_name(c10::ScalarType t); // boxed_kernel.cc
}

namespace {

using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

// How a backward argument is fed (opcore/torch.py's _Pairing plan): forward
// input `index`, forward result `index`, the gradient of result `index`, or
// its own default `dflt`.
enum FeedKind : int32_t { F_INPUT = 0, F_RESULT = 1, F_GRAD = 2, F_DEFAULT = 3 };
struct Feed {
    FeedKind kind;
    int index;
    c10::IValue dflt;
};

// What one registration knows, shared by its kernel and every node it made
// (a node outlives a re-registration).
struct Binding {
    std::string fname;                 // the forward, "ns::op"
    std::string node_name;             // grad_fn's name()
    std::optional<c10::OperatorHandle> bwd; // the backward op
    size_t nargs = 0, nret = 0;        // the forward's arguments and results
    std::vector<std::string> arg_names;
    std::vector<int> tensor_args;      // the forward's Tensor / Tensor? arguments: the node's edges, in order
    std::vector<int> edge_of;          // forward argument -> edge, or -1
    std::vector<Feed> feed;            // per backward argument
    std::vector<int> targets;          // per backward result: the forward argument it is the gradient of, or -1
    std::vector<bool> save_arg;        // forward argument the backward reads
    std::vector<bool> save_result;     // forward result the backward reads
    std::string key;                   // forward|backward: names the binding (compiled autograd)
};

using octorch::dtype_name;

std::string shape_text(c10::SymIntArrayRef sizes)
{
    std::ostringstream s;
    s << "[";
    for (size_t i = 0; i < sizes.size(); i++) s << (i ? ", " : "") << sizes[i];
    s << "]";
    return s.str();
}

// Every binding by its key, for compiled autograd's functional calls (a
// graph made by it names the binding, not a node). A re-registration of
// the same pair replaces the entry; bindings are small and live on in the
// nodes and graphs that hold them.
std::mutex registry_lock;
std::unordered_map<std::string, std::shared_ptr<const Binding>> registry;

std::shared_ptr<const Binding> lookup(const std::string &key)
{
    std::lock_guard<std::mutex> lock(registry_lock);
    auto it = registry.find(key);
    TORCH_CHECK(it != registry.end(), "opcore: no register_autograd pairing ", key);
    return it->second;
}

// What the backward reads, unpacked (references: no copies per call): per
// forward argument its tensor (args) or value (values), per result its
// tensor, and the inputs' and results' shapes (is_empty: a Tensor? input
// that was None).
struct Saved {
    const variable_list &args, &results;
    const std::vector<c10::IValue> &values;
    const std::vector<torch::autograd::VariableInfo> &input_info, &result_info;
};

// The backward pass itself, on tensors (the node's apply, or compiled
// autograd's functional call): feed the backward op, call it through the
// dispatcher, check and place its gradients (one per edge).
variable_list run_backward(const Binding &b, const variable_list &grads, const Saved &sv)
{
    torch::jit::Stack s;
    s.reserve(b.feed.size());
    for (const Feed &f : b.feed) {
        int idx = f.index;
        switch (f.kind) {
        case F_INPUT:
            if (b.edge_of[idx] >= 0)
                s.emplace_back(sv.args[idx].defined() ? c10::IValue(sv.args[idx]) : c10::IValue());
            else
                s.push_back(sv.values[idx]);
            break;
        case F_RESULT: s.emplace_back(sv.results[idx]); break;
        case F_GRAD:
            if (grads[idx].defined()) {
                s.emplace_back(grads[idx]);
            } else { // that result was not used: zeros, as the Python route's zeros_like(result)
                at::OptionalDeviceGuard guard;
                s.emplace_back(sv.result_info[idx].zeros(guard));
            }
            break;
        case F_DEFAULT: s.push_back(f.dflt); break;
        }
    }
    b.bwd->callBoxed(&s);
    variable_list out(b.tensor_args.size());
    for (size_t k = 0; k < s.size() && k < b.targets.size(); k++) {
        int i = b.targets[k];
        int e = i >= 0 ? b.edge_of[i] : -1;
        const c10::IValue &r = s[k];
        if (e < 0 || r.isNone() || sv.input_info[e].is_empty) continue;
        const torch::autograd::VariableInfo &like = sv.input_info[e];
        bool fits = r.isTensor() && (!r.toTensor().defined() || (r.toTensor().scalar_type() == like.scalar_type &&
                                                                  r.toTensor().sym_sizes() == like.size));
        if (!fits) {
            std::string got = r.isTensor() ? dtype_name(r.toTensor().scalar_type()) + " " +
                                                 shape_text(r.toTensor().sym_sizes())
                                           : r.tagKind();
            TORCH_CHECK(false, "opcore: backward of ", b.fname, " returned a gradient for input '", b.arg_names[i],
                        "' of ", got, ", expected ", dtype_name(like.scalar_type), " ", shape_text(like.size));
        }
        out[e] = r.toTensor();
    }
    return out;
}

// Compiled autograd's functional call: grads, then the node's state as
// apply_with_saved packed it (the binding's key first).
variable_list apply_functional(const variable_list &grads, const std::vector<c10::IValue> &packed)
{
    torch::dynamo::autograd::PackedArgs p(packed);
    std::shared_ptr<const Binding> b = lookup(p.unpack<std::string>());
    variable_list args(b->nargs), results(b->nret);
    std::vector<c10::IValue> values(b->nargs);
    for (size_t i = 0; i < b->nargs; i++) {
        if (!b->save_arg[i]) continue;
        c10::IValue v = p.unpack<c10::IValue>();
        if (b->edge_of[i] >= 0) args[i] = v.isTensor() ? v.toTensor() : at::Tensor();
        else values[i] = std::move(v);
    }
    for (size_t j = 0; j < b->nret; j++)
        if (b->save_result[j]) results[j] = p.unpack<at::Tensor>();
    auto input_info = p.unpack<std::vector<torch::autograd::VariableInfo>>();
    auto result_info = p.unpack<std::vector<torch::autograd::VariableInfo>>();
    return run_backward(*b, grads, Saved{args, results, values, input_info, result_info});
}

// The node: what the backward reads, saved at the forward.
class Backward final : public Node {
public:
    explicit Backward(std::shared_ptr<const Binding> b)
        : b_(std::move(b)), args_(b_->nargs), values_(b_->nargs), results_(b_->nret), input_info_(b_->tensor_args.size()),
          result_info_(b_->nret)
    {
    }

    std::string name() const override { return b_->node_name; }

    void release_variables() override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto &s : args_) s.reset_data();
        for (auto &s : results_) s.reset_data(); // a second backward: torch's own "second time" error
    }

    // At the forward, before it runs (inputs) and after (results).
    void save_inputs(const torch::jit::Stack &stack, size_t base)
    {
        const Binding &b = *b_;
        for (size_t i = 0; i < b.nargs; i++) {
            const c10::IValue &v = stack[base + i];
            int e = b.edge_of[i];
            if (e >= 0 && v.isTensor()) input_info_[e] = torch::autograd::VariableInfo(v.toTensor());
            if (!b.save_arg[i]) continue;
            if (e >= 0) args_[i] = SavedVariable(v.isTensor() ? v.toTensor() : at::Tensor(), false);
            else values_[i] = v;
        }
    }

    void save_results(const torch::jit::Stack &stack, size_t base)
    {
        for (size_t j = 0; j < b_->nret; j++) {
            const at::Tensor &t = stack[base + j].toTensor();
            if (b_->save_result[j]) results_[j] = SavedVariable(t, true);
            result_info_[j] = torch::autograd::VariableInfo(t);
        }
    }

    // Compiled autograd: the node's state, as a cache key and graph inputs.
    void compiled_args(torch::dynamo::autograd::CompiledNodeArgs &args) const override
    {
        args.collect(b_->key);
        args.collect(args_, false);
        args.collect(results_, true);
        args.collect(values_);
        args.collect(input_info_);
        args.collect(result_info_);
    }

    // ... and its backward as one opaque call in compiled autograd's graph
    // (apply_functional above), as torch's C++ custom Functions do.
    variable_list apply_with_saved(const variable_list &inputs,
                                   torch::dynamo::autograd::SwapSavedVariables &saved) override
    {
        const Binding &b = *b_;
        saved.before(args_);
        saved.before(results_);
        saved.before(values_);
        saved.before(input_info_);
        saved.before(result_info_);
        torch::dynamo::autograd::PackedArgs p;
        p.pack(b.key);
        for (size_t i = 0; i < b.nargs; i++) {
            if (!b.save_arg[i]) continue;
            if (b.edge_of[i] < 0) {
                p.pack(values_[i]);
                continue;
            }
            at::Tensor t = args_[i].unpack();
            p.pack(t.defined() ? c10::IValue(std::move(t)) : c10::IValue());
        }
        for (size_t j = 0; j < b.nret; j++)
            if (b.save_result[j]) p.pack(results_[j].unpack(getptr()));
        p.pack(input_info_);
        p.pack(result_info_);
        std::vector<c10::IValue> packed = std::move(p).vec();
        std::vector<at::TypePtr> schema;
        schema.reserve(packed.size());
        for (const c10::IValue &v : packed) schema.emplace_back(v.isTensor() ? at::TensorType::get() : v.type());
        const auto &py = torch::dynamo::autograd::getPyCompilerInterface();
        std::string fn = py->bind_function(saved.get_py_compiler(), "Opcore" + b.node_name, apply_functional,
                                           schema, /*is_custom_function*/ true, /*is_traceable*/ true);
        auto metadata = torch::dynamo::autograd::IValuePacker<std::vector<std::optional<torch::autograd::InputMetadata>>>::pack(
            torch::dynamo::autograd::get_input_metadata(next_edges()));
        variable_list out = py->call_function(saved.get_py_compiler(), "apply_functional", fn, inputs, packed,
                                              metadata);
        saved.after(args_);
        saved.after(results_);
        saved.after(values_);
        saved.after(input_info_);
        saved.after(result_info_);
        return out;
    }

protected:
    variable_list apply(variable_list &&grads) override
    {
        variable_list args, results;
        {
            std::lock_guard<std::mutex> lock(mutex_); // against release_variables (as torch's nodes)
            args.reserve(b_->nargs);
            for (const SavedVariable &a : args_) args.push_back(a.unpack());
            results.reserve(b_->nret);
            for (const SavedVariable &r : results_) results.push_back(r.unpack(getptr()));
        }
        return run_backward(*b_, grads, Saved{args, results, values_, input_info_, result_info_});
    }

private:
    std::shared_ptr<const Binding> b_;
    std::vector<SavedVariable> args_;   // per forward argument: its tensor, when the backward reads it
    std::vector<c10::IValue> values_;   // per forward argument: its value, when the backward reads it
    std::vector<SavedVariable> results_;
    std::vector<torch::autograd::VariableInfo> input_info_, result_info_; // per edge, per result
};

// A tensor that can record a graph or carries a forward grad: one with
// autograd metadata (a plain tensor has none).
bool has_meta(const at::Tensor &t)
{
    return t.defined() && t.unsafeGetTensorImpl()->autograd_meta();
}

class Kernel final : public c10::OperatorKernel {
public:
    explicit Kernel(std::shared_ptr<const Binding> b) : b_(std::move(b)) {}

    void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet ks, torch::jit::Stack *stack)
    {
        const Binding &b = *b_;
        const size_t base = stack->size() - b.nargs;
        const bool grad_mode = torch::autograd::GradMode::is_enabled();
        bool need = false; // one pass over the tensor inputs: every call comes through here
        for (int i : b.tensor_args) {
            const c10::IValue &v = (*stack)[base + static_cast<size_t>(i)];
            if (!v.isTensor() || !v.toTensor().defined()) continue;
            const at::Tensor &t = v.toTensor();
            if (!has_meta(t)) continue; // no grad, no forward grad
            TORCH_CHECK(!t._fw_grad(/*level*/ 0).defined(), "opcore: ", b.fname,
                        " has no forward-mode derivative: register_autograd pairs it with a backward (reverse "
                        "mode) only; use torch.func.vjp / .backward(), or a torch op with a jvp");
            need = need || (grad_mode && t.requires_grad());
        }
        if (!need) {
            at::AutoDispatchBelowAutograd guard;
            op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
            return;
        }
        auto node = c10::make_intrusive<Backward>(b_);
        std::vector<at::Tensor> inputs;
        inputs.reserve(b.tensor_args.size());
        for (int i : b.tensor_args) {
            const c10::IValue &v = (*stack)[base + static_cast<size_t>(i)];
            inputs.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
        }
        node->set_next_edges(torch::autograd::collect_next_edges(inputs));
        node->save_inputs(*stack, base);
        {
            at::AutoDispatchBelowAutograd guard;
            op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
        }
        const size_t rbase = stack->size() - b.nret;
        for (size_t j = 0; j < b.nret; j++) {
            const at::Tensor &t = (*stack)[rbase + j].toTensor();
            if (t.defined() && !torch::autograd::isDifferentiableType(t.scalar_type()))
                node->add_input_metadata(Node::undefined_input()); // an integer result: no gradient flows
            else
                torch::autograd::set_history(t, node);
        }
        node->save_results(*stack, rbase);
    }

private:
    std::shared_ptr<const Binding> b_;
};

// The Autograd kernel of an op whose backward is Python (a callable given
// to register_autograd): torch.library.register_autograd's Python kernel
// serves every call that may record a graph; the others (no input with
// autograd metadata: nothing requires grad or carries a forward grad)
// redispatch below autograd here, as that kernel's no-grad branch does,
// without entering Python (a [1, 16] rmsnorm call took 8.4 us with every
// call through the Python kernel, 3.8 us for layer_norm's C++ one).
class PyFallback final : public c10::OperatorKernel {
public:
    PyFallback(c10::SafeKernelFunction py, size_t nargs) : py_(std::move(py)), nargs_(nargs) {}

    void operator()(const c10::OperatorHandle &op, c10::DispatchKeySet ks, torch::jit::Stack *stack)
    {
        const size_t base = stack->size() - nargs_;
        for (size_t i = base; i < stack->size(); i++)
            if (has_autograd((*stack)[i])) {
                py_.callBoxed(op, ks, stack);
                return;
            }
        at::AutoDispatchBelowAutograd guard;
        op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
    }

private:
    static bool has_autograd(const c10::IValue &v)
    {
        if (v.isTensor()) return has_meta(v.toTensor());
        if (!v.isList()) return false;
        for (const c10::IValue &e : v.toListRef())
            if (e.isTensor() && has_meta(e.toTensor())) return true;
        return false;
    }

    c10::SafeKernelFunction py_;
    size_t nargs_;
};

bool is_tensor(const c10::TypePtr &t)
{
    if (t->kind() == c10::TypeKind::TensorType) return true;
    auto o = t->cast<c10::OptionalType>();
    return o && o->getElementType()->kind() == c10::TypeKind::TensorType;
}

c10::OperatorHandle find(const char *qualname)
{
    std::string q(qualname);
    size_t dot = q.find('.', q.find("::"));
    std::string name = dot == std::string::npos ? q : q.substr(0, dot);
    std::string overload = dot == std::string::npos ? "" : q.substr(dot + 1);
    return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
}

// The binding, checked against both schemas; throws a message for the caller.
std::shared_ptr<Binding> make_binding(const char *forward, const char *backward, const int32_t *feed_kind,
                                      const int32_t *feed_index, int nfeed, const int32_t *targets, int ntargets)
{
    auto b = std::make_shared<Binding>();
    c10::OperatorHandle fwd = find(forward);
    b->bwd = find(backward);
    const c10::FunctionSchema &fs = fwd.schema(), &bs = b->bwd->schema();
    b->fname = forward;
    b->node_name = std::string(forward) + "Backward";
    b->nargs = fs.arguments().size();
    b->nret = fs.returns().size();
    TORCH_CHECK(b->nret > 0, forward, " returns nothing");
    for (const c10::Argument &r : fs.returns())
        TORCH_CHECK(r.type()->kind() == c10::TypeKind::TensorType, forward, ": a result that is not a Tensor");
    b->edge_of.assign(b->nargs, -1);
    for (size_t i = 0; i < b->nargs; i++) {
        const c10::Argument &a = fs.arguments()[i];
        TORCH_CHECK(!a.alias_info() || !a.alias_info()->isWrite(), forward, ": a Tensor(a!) argument");
        b->arg_names.push_back(a.name());
        if (is_tensor(a.type())) {
            b->edge_of[i] = static_cast<int>(b->tensor_args.size());
            b->tensor_args.push_back(static_cast<int>(i));
        } else {
            TORCH_CHECK(a.type()->kind() != c10::TypeKind::ListType ||
                            a.type()->castRaw<c10::ListType>()->getElementType()->kind() !=
                                c10::TypeKind::TensorType,
                        forward, ": a Tensor[] argument");
        }
    }
    TORCH_CHECK(static_cast<size_t>(nfeed) == bs.arguments().size(), backward, " takes ", bs.arguments().size(),
                " arguments, the binding feeds ", nfeed);
    b->save_arg.assign(b->nargs, false);
    b->save_result.assign(b->nret, false);
    for (int k = 0; k < nfeed; k++) {
        int32_t kind = feed_kind[k], idx = feed_index[k];
        size_t bound = kind == F_INPUT ? b->nargs : kind == F_DEFAULT ? 1 : b->nret;
        TORCH_CHECK(kind >= F_INPUT && kind <= F_DEFAULT && idx >= 0 && static_cast<size_t>(idx) < bound,
                    "backward argument ", k, ": no such source (", kind, ", ", idx, ")");
        const c10::Argument &ba = bs.arguments()[static_cast<size_t>(k)];
        TORCH_CHECK(kind != F_DEFAULT || ba.default_value().has_value(), backward, "'s argument '", ba.name(),
                    "' has no default");
        b->feed.push_back(Feed{static_cast<FeedKind>(kind), idx,
                               kind == F_DEFAULT ? *ba.default_value() : c10::IValue()});
        if (kind == F_INPUT) b->save_arg[static_cast<size_t>(idx)] = true;
        if (kind == F_RESULT) b->save_result[static_cast<size_t>(idx)] = true;
    }
    for (int k = 0; k < ntargets; k++) {
        TORCH_CHECK(targets[k] < static_cast<int32_t>(b->nargs), "backward result ", k, ": no such input");
        b->targets.push_back(targets[k]);
    }
    b->key = std::string(forward) + "|" + backward;
    return b;
}

// Register the boxed functor make() builds (it may throw) as op forward's
// kernel at `key`; *reg: the registration. 0, or -1 with a message in err.
template <typename Make>
int register_at(const char *forward, c10::DispatchKey key, void **reg, char *err, size_t errlen,
                Make make)
{
    *reg = nullptr;
    try {
        std::string q(forward);
        size_t sep = q.find("::");
        std::string ns = q.substr(0, sep), name = q.substr(sep + 2);
        auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, key,
                                                    "opcore/torch/autograd_kernel.cc", __LINE__);
        lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(make()));
        *reg = lib.release();
        return 0;
    } catch (const c10::Error &e) {
        std::snprintf(err, errlen, "%s", e.what_without_backtrace());
        return -1;
    } catch (const std::exception &e) {
        std::snprintf(err, errlen, "%s", e.what());
        return -1;
    }
}

} // namespace

// Register the Autograd kernel pairing op `forward` ("ns::op[.overload]")
// with op `backward`: backward argument k is fed (feed_kind[k],
// feed_index[k]): 0 forward input i, 1 forward result j, 2 the gradient of
// result j, 3 its own default; backward result k is the gradient of
// forward input targets[k] (-1: of none). *reg: the registration
// (oc_torch_shim_autograd_drop takes it out). 0 on success, else -1 with a
// message in err.
extern "C" __attribute__((visibility("default"))) int
oc_torch_shim_autograd(const char *forward, const char *backward, const int32_t *feed_kind,
                       const int32_t *feed_index, int nfeed, const int32_t *targets, int ntargets, void **reg,
                       char *err, size_t errlen)
{
    return register_at(forward, c10::DispatchKey::Autograd, reg, err, errlen, [&] {
        auto b = make_binding(forward, backward, feed_kind, feed_index, nfeed, targets, ntargets);
        {
            std::lock_guard<std::mutex> lock(registry_lock);
            registry[b->key] = b;
        }
        return std::make_unique<Kernel>(std::move(b));
    });
}

// In front of the Python Autograd kernel torch.library.register_autograd
// registered for `forward` (at the Autograd alias): a kernel at AutogradCPU
// that runs calls needing no graph without Python (PyFallback above) and
// hands the others to that kernel. *reg: as oc_torch_shim_autograd's. 0, or
// -1 with a message in err (no Python kernel there: the caller keeps it).
extern "C" __attribute__((visibility("default"))) int
oc_torch_shim_autograd_py(const char *forward, void **reg, char *err, size_t errlen)
{
    return register_at(forward, c10::DispatchKey::AutogradCPU, reg, err, errlen, [&] {
        c10::OperatorHandle fwd = find(forward);
        TORCH_CHECK(fwd.hasKernelForDispatchKey(c10::DispatchKey::Autograd), forward,
                    " has no Autograd kernel to stand in front of");
        size_t nargs = fwd.schema().arguments().size();
        return std::make_unique<PyFallback>(
            fwd.getComputedKernelForDispatchKey(c10::DispatchKey::AutogradCPU), nargs);
    });
}

// Take an oc_torch_shim_autograd registration out of torch again.
extern "C" __attribute__((visibility("default"))) void oc_torch_shim_autograd_drop(void *reg)
{
    delete static_cast<torch::Library *>(reg);
}
