"""The C++ extension ReLUs the benchmarks compare opcore with, in one
TORCH_LIBRARY (namespace cpp_ops), built with torch.utils.cpp_extension:

    cpp_ops::relu_fast, relu_fast_backward   what a C++ extension author
                                             writes for speed
    cpp_ops::relu_forward, relu_backward     the seeds' CPU ReLU (seed 000's
                                             pytorch/relu.cpp), the reference
                                             of the MLP tables

    import cpp_relu
    cpp_relu.load(build_directory)      # builds once (ninja caches it)
    cpp_relu.Relu.apply(x)              # seed 000's autograd.Function
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

    // The seeds' CPU ReLU (seed 000's pytorch/relu.cpp).
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

    TORCH_LIBRARY(cpp_ops, m) {
        m.def("relu_fast", &relu_fast);
        m.def("relu_fast_backward", &relu_fast_backward);
        m.def("relu_forward", &relu_forward);
        m.def("relu_backward", &relu_backward);
    }
""")



def load(build_directory):
    """Build (once; cached by cpp_extension's ninja) and load the library."""
    import torch.utils.cpp_extension as cpp_extension
    if hasattr(torch.ops.cpp_ops, "relu_forward"):
        return torch.ops.cpp_ops
    os.makedirs(build_directory, exist_ok=True)
    src = os.path.join(build_directory, "relu.cpp")
    if not os.path.exists(src) or open(src).read() != CPP_RELU:
        with open(src, "w") as f:
            f.write(CPP_RELU)
    cpp_extension.load(name="librelu_cpp", sources=[src], is_python_module=False,
                       build_directory=build_directory, verbose=False)
    return torch.ops.cpp_ops


class Relu(torch.autograd.Function):
    """Seed 000's my_ops.Relu, around the seeds' C++ ops."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.ops.cpp_ops.relu_forward(x)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return torch.ops.cpp_ops.relu_backward(grad, x)
