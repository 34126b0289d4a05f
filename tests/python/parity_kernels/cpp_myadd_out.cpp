// extension-cpp's myadd_out as a C++ extension op (its muladd.cpp's loop
// and checks): the reference opcore's in-place ops are compared with
// (tests/python/test_torch_parity.py) and timed against
// (bench/inplace_bench.py). Built with torch.utils.cpp_extension.load_inline.
#include <torch/library.h>
#include <ATen/ATen.h>

void myadd_out_cpu(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  TORCH_CHECK(a.sizes() == b.sizes());
  TORCH_CHECK(b.sizes() == out.sizes());
  TORCH_CHECK(a.dtype() == at::kFloat);
  TORCH_CHECK(b.dtype() == at::kFloat);
  TORCH_CHECK(out.dtype() == at::kFloat);
  TORCH_CHECK(out.is_contiguous());
  at::Tensor a_contig = a.contiguous();
  at::Tensor b_contig = b.contiguous();
  const float* a_ptr = a_contig.data_ptr<float>();
  const float* b_ptr = b_contig.data_ptr<float>();
  float* result_ptr = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); i++) result_ptr[i] = a_ptr[i] + b_ptr[i];
}

TORCH_LIBRARY(cppref, m) { m.def("myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()"); }
TORCH_LIBRARY_IMPL(cppref, CPU, m) { m.impl("myadd_out", &myadd_out_cpu); }
