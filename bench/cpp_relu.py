"""The C++ extension ReLUs the benchmarks compare opcore with, built with
torch.utils.cpp_extension.load:

    cpp_ops::relu_fast, relu_fast_backward   what a C++ extension author
                                             writes for speed
    cpp_ops::relu_fast_ag                    relu_fast with its backward as a
                                             C++ torch::autograd::Function
    cpp_ops::relu_forward, relu_backward     the Neuron tutorial's CPU ReLU (the tutorial's
                                             pytorch/relu.cpp), the reference
                                             of the MLP tables
    cpp_seed::relu_forward, relu_backward    the same tutorial code built the
                                             way the tutorial's build.py builds it
    cpp_stable::relu                         relu_fast written against
                                             libtorch's stable C ABI (the
                                             route opcore's native kernels
                                             take): the floor of that route

cpp_extension.load adds no optimisation flag of its own, so the tutorial's
build.py (no extra_cflags) compiles at the compiler's default, -O0: the
accessor loops then cost ~20 ns per element. cpp_ops is built with -O3, the
fair peer; cpp_seed shows what the tutorial's recipe gives.

    import cpp_relu
    cpp_relu.load(build_directory)      # builds once each (ninja caches them)
    cpp_relu.Relu.apply(x)              # the Neuron ReLU tutorial's autograd.Function, -O3
    cpp_relu.SeedBuildRelu.apply(x)     # the same around the -O0 build
"""
import os
import textwrap

import torch

CPP_RELU = textwrap.dedent("""
    #include <torch/extension.h>

    // What a C++ extension author writes for speed: a raw loop into
    // torch::empty_like.
    torch::Tensor relu_fast(const torch::Tensor& x) {
        TORCH_CHECK(x.scalar_type() == torch::kFloat && x.is_contiguous(), "relu_fast: contiguous float32");
        torch::Tensor y = torch::empty_like(x);
        const float* s = x.data_ptr<float>();
        float* d = y.data_ptr<float>();
        for (int64_t i = 0, n = x.numel(); i < n; i++) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
        return y;
    }

    torch::Tensor relu_fast_backward(const torch::Tensor& g_, const torch::Tensor& x) {
        torch::Tensor g = g_.contiguous();  // autograd's grad of a sum is an expanded (stride 0) tensor
        torch::Tensor y = torch::empty_like(x);
        const float* s = x.data_ptr<float>();
        const float* gg = g.data_ptr<float>();
        float* d = y.data_ptr<float>();
        for (int64_t i = 0, n = x.numel(); i < n; i++) d[i] = s[i] > 0.0f ? gg[i] : 0.0f;
        return y;
    }

    // The Neuron tutorial's CPU ReLU (the Neuron ReLU tutorial's pytorch/relu.cpp).
    torch::Tensor relu_forward(const torch::Tensor& t_in) {
        torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
        auto t_in_acc = t_in.accessor<float, 2>();
        auto t_out_acc = t_out.accessor<float, 2>();
        auto sizes = t_in.sizes();
        for (int64_t i = 0; i < sizes[0]; i++)
            for (int64_t j = 0; j < sizes[1]; j++)
                t_out_acc[i][j] = t_in_acc[i][j] > 0.0 ? t_in_acc[i][j] : 0.0;
        return t_out;
    }

    torch::Tensor relu_backward(const torch::Tensor& t_grad, const torch::Tensor& t_in) {
        torch::Tensor t_out = torch::zeros(t_in.sizes(), torch::kFloat);
        auto t_in_acc = t_in.accessor<float, 2>();
        auto t_grad_acc = t_grad.accessor<float, 2>();
        auto t_out_acc = t_out.accessor<float, 2>();
        auto sizes = t_in.sizes();
        for (int64_t i = 0; i < sizes[0]; i++)
            for (int64_t j = 0; j < sizes[1]; j++)
                t_out_acc[i][j] = t_in_acc[i][j] > 0.0 ? t_grad_acc[i][j] : 0.0;
        return t_out;
    }

    // relu_fast with its backward in C++ (torch::autograd::Function, the
    // PyTorch C++ autograd tutorial's pattern) as the op's Autograd kernel:
    // a C++ extension author's differentiable op with no Python on either pass.
    struct ReluFastFn : public torch::autograd::Function<ReluFastFn> {
        static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
            ctx->save_for_backward({x});
            return relu_fast(x);
        }
        static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                       torch::autograd::variable_list g) {
            return {relu_fast_backward(g[0], ctx->get_saved_variables()[0])};
        }
    };

    torch::Tensor relu_fast_ag(const torch::Tensor& x) { return ReluFastFn::apply(x); }

    TORCH_LIBRARY(cpp_ops, m) {
        m.def("relu_fast", &relu_fast);
        m.def("relu_fast_backward", &relu_fast_backward);
        m.def("relu_forward", &relu_forward);
        m.def("relu_backward", &relu_backward);
        m.def("relu_fast_ag(Tensor x) -> Tensor");
    }
    TORCH_LIBRARY_IMPL(cpp_ops, CPU, m) { m.impl("relu_fast_ag", &relu_fast); }
    TORCH_LIBRARY_IMPL(cpp_ops, Autograd, m) { m.impl("relu_fast_ag", &relu_fast_ag); }
""")

# The Neuron tutorial's two functions alone, in their own namespace, for the -O0 build.
CPP_SEED = ("#include <torch/extension.h>\n\n"
            + CPP_RELU[CPP_RELU.index("// The Neuron tutorial's CPU ReLU"):CPP_RELU.index("// relu_fast with its backward in C++")]
            + "TORCH_LIBRARY(cpp_seed, m) {\n"
              "    m.def(\"relu_forward\", &relu_forward);\n"
              "    m.def(\"relu_backward\", &relu_backward);\n"
              "}\n")



# relu_fast through the stable ABI: a boxed kernel (STABLE_TORCH_LIBRARY),
# tensors as torch::stable::Tensor handles, the output from
# torch::stable::empty_like.
CPP_STABLE = textwrap.dedent("""
    #include <torch/csrc/stable/library.h>
    #include <torch/csrc/stable/ops.h>
    #include <torch/csrc/stable/tensor.h>

    using torch::stable::Tensor;

    Tensor relu_stable(Tensor x) {
        STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float && x.is_contiguous(),
                        "relu: contiguous float32");
        Tensor y = torch::stable::empty_like(x);
        const float* s = static_cast<const float*>(x.data_ptr());
        float* d = static_cast<float*>(y.data_ptr());
        for (int64_t i = 0, n = x.numel(); i < n; i++) d[i] = s[i] > 0.0f ? s[i] : 0.0f;
        return y;
    }

    STABLE_TORCH_LIBRARY(cpp_stable, m) { m.def("relu(Tensor x) -> Tensor"); }
    STABLE_TORCH_LIBRARY_IMPL(cpp_stable, CPU, m) { m.impl("relu", TORCH_BOX(&relu_stable)); }
""")


def _build(build_directory, name, source, extra_cflags):
    import torch.utils.cpp_extension as cpp_extension
    os.makedirs(build_directory, exist_ok=True)
    src = os.path.join(build_directory, name + ".cpp")
    if not os.path.exists(src) or open(src).read() != source:
        with open(src, "w") as f:
            f.write(source)
    cpp_extension.load(name=name, sources=[src], is_python_module=False, extra_cflags=extra_cflags,
                       build_directory=build_directory, verbose=False)


def load(build_directory, seed_build=True):
    """Build (once; cached by cpp_extension's ninja) and load cpp_ops (-O3)
    and, with seed_build, cpp_seed (the tutorial's flags); returns torch.ops.cpp_ops."""
    if not hasattr(torch.ops.cpp_ops, "relu_forward"):
        _build(os.path.join(build_directory, "O3"), "librelu_cpp", CPP_RELU, ["-O3"])
    if seed_build and not hasattr(torch.ops.cpp_seed, "relu_forward"):
        _build(os.path.join(build_directory, "seed_build"), "librelu_cpp_seed", CPP_SEED, [])
    return torch.ops.cpp_ops


def load_stable(build_directory):
    """Build and load cpp_stable (-O3); returns torch.ops.cpp_stable.relu."""
    if not hasattr(torch.ops.cpp_stable, "relu"):
        _build(os.path.join(build_directory, "stable"), "librelu_cpp_stable", CPP_STABLE, ["-O3"])
    return torch.ops.cpp_stable.relu


class Relu(torch.autograd.Function):
    """The tutorial's my_ops.Relu, around the tutorial's C++ ops (-O3 build)."""
    namespace = "cpp_ops"

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return getattr(torch.ops, cls.namespace).relu_forward(x)

    @classmethod
    def backward(cls, ctx, grad):
        x, = ctx.saved_tensors
        return getattr(torch.ops, cls.namespace).relu_backward(grad, x)


class SeedBuildRelu(Relu):
    """The same Function around the tutorial's ops built as the tutorial builds them."""
    namespace = "cpp_seed"
