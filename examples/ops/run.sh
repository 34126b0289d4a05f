#!/usr/bin/env bash
# Build the nn_ops example library with the opcore CLI and run the C host
# program that calls every op of it. Run from anywhere: examples/ops/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT:-$root/build/examples/ops}"
mkdir -p "$out"
"$root/build/opcore" build --name nn_ops \
    --compute "$here"/{layer_norm,sgd,concat,avg_pool,linear,global_sum}.c --shape "$here/shape.c" -o "$out"
cc -std=c11 -O2 -Wall -Wextra -I"$root/include" "$here/ops_host.c" -o "$out/ops_host" \
   -L"$root/build" -lopcore -Wl,-rpath,"$root/build" -lm
"$out/ops_host" "$out/libnn_ops.so"
