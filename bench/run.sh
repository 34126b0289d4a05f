#!/usr/bin/env bash
# Run every benchmark and write bench/results/report.md (this machine's part,
# with its chart). One command: `make bench` (or bench/run.sh after
# `make lib cli python`). Ratios come from one run on this machine; every
# result file records the machine (CPU model, instruction sets, THP mode).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mkdir -p bench/results
$PYTHON bench/benchlib.py banner
# result files written from here on are this run's (stamped below)
started=$(mktemp)
trap 'rm -f "$started"' EXIT
make -s build/bench/relu_bench build/bench/call_cost
echo "== ReLU bandwidth, launch, build (C)"
build/bench/relu_bench bench/results/relu.json
echo "== engine fixed cost per oc_op_call (C)"
build/bench/call_cost bench/results/call_cost.json
echo "== PyTorch: per call and autograd vs the peers, build time"
$PYTHON bench/torch_bench.py
echo "== PyTorch: the direct call vs apache-tvm-ffi, measured two ways"
$PYTHON bench/direct_call_bench.py
echo "== plain C loops (SiLU, softmax) vs torch eager, torch.compile, -ffast-math"
$PYTHON bench/activations_bench.py
echo "== multicore op right after a torch matmul"
$PYTHON bench/multicore_after_matmul.py
echo "== launch grids and stalls next to torch's threads (idle and loaded)"
$PYTHON bench/grid_bench.py
echo "== JAX custom call vs jnp"
$PYTHON bench/jax_bench.py
echo "== JAX: opcore vs a C++ XLA FFI handler"
$PYTHON bench/jax_ffi_bench.py
echo "== JAX: start-up of a JAX-only program (opcore vs jax.ffi, no torch)"
$PYTHON bench/jax_import_bench.py
echo "== profiler overhead (off and on)"
$PYTHON bench/profiler_bench.py
echo "== profiler HTML report in headless Chromium (100k events)"
$PYTHON bench/html_report_bench.py
echo "== broadcast add with the iterator vs torch.add"
$PYTHON bench/iter_bench.py
echo "== tile layer (examples/tiles): matmul, flash attention, norms vs torch"
$PYTHON bench/tiles_bench.py
echo "== low-precision linear layers (int8, Q8_0, Q4_0, bf16, f16 weights) vs torch"
$PYTHON bench/lowp_bench.py
$PYTHON bench/lowp_bench.py --isa avx2
echo "== examples/llm: Llama decoder prefill and decode vs torch and llama.cpp"
# the llama.cpp peer lives in the bench's environment only (built from source, once)
$PYTHON -c "import llama_cpp" 2>/dev/null || { $PYTHON -m pip install -q cmake &&
    CMAKE_ARGS="-DGGML_NATIVE=ON" $PYTHON -m pip install -q --no-binary llama-cpp-python \
        -r bench/requirements-llm.txt; } || echo "llama.cpp peer not installed: its rows are missing"
$PYTHON bench/llm_bench.py
# every side held to AVX2: llama.cpp from a second build, for AVX2 alone (once)
LLAMA_AVX2=build/bench/llama-avx2
[ -d "$LLAMA_AVX2/llama_cpp" ] || CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
    -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" $PYTHON -m pip install -q --no-deps \
    --no-binary llama-cpp-python --target "$LLAMA_AVX2" diskcache \
    "$(grep '^llama-cpp-python==' bench/requirements-llm.txt)" ||
    echo "AVX2 llama.cpp peer not built: its rows are missing"
$PYTHON bench/llm_bench.py --isa avx2 --llama-path "$LLAMA_AVX2"
echo "== MLP training and inference"
$PYTHON bench/mlp_bench.py --no-report "$@"
# the machine and kernel paths into the files of this run that lack them
# (the C benches', and those of benches that write their JSON themselves)
find bench/results -name '*.json' -newer "$started" -exec $PYTHON bench/benchlib.py stamp {} +
$PYTHON bench/report.py
