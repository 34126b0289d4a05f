#!/usr/bin/env bash
# Build the `tiles` example library with the opcore CLI and call each op on
# constant inputs whose results are known (tests/python/test_tiles.py checks
# the same values). Run from anywhere: examples/tiles/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT:-$root/build/examples/tiles}"
cli="${OPCORE_CLI:-$root/build/opcore}"
mkdir -p "$out"
"$cli" build --name tiles --multicore --compute "$here"/{add,matmul,rmsnorm,layer_norm,softmax,flash_attention}.c \
    --shape "$here/shape.c" -o "$out"
lib="$out/libtiles.so"
"$cli" run "$lib" tensor_add --shape 130,70 --arg a=1 --arg b=2             # 3 everywhere
"$cli" run "$lib" matmul --shape 4,5 --shape 5,3 --arg a=1 --arg b=2        # 10
"$cli" run "$lib" rmsnorm --shape 9,40 --shape 40 --arg x=2 --arg w=3 --arg eps=0   # 3
"$cli" run "$lib" layer_norm --shape 9,40 --shape 40 --arg x=1 --arg b=5 --arg eps=1e-5  # out 5, mean 1
"$cli" run "$lib" softmax --shape 9,40 --arg x=1                             # 1/40 = 0.025
"$cli" run "$lib" flash_attention --shape 1,2,130,16 --arg v=2 --arg causal=true  # 2
