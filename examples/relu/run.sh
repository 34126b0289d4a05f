#!/usr/bin/env bash
# Build each ReLU variant with the opcore CLI and check it against a C
# reference through the host API. Run from anywhere: examples/relu/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
opcore="$root/build/opcore"
out="${OUT:-$root/build/examples/relu}"
mkdir -p "$out"
cc -std=c11 -O2 -Wall -Wextra -I"$root/include" "$here/check_relu.c" -o "$out/check_relu" \
   -L"$root/build" -lopcore -Wl,-rpath,"$root/build" -lm
for variant in elementwise stream tcm multicore; do
    flags=()
    [ "$variant" = multicore ] && flags+=(--multicore)
    "$opcore" build --name relu --compute "$here/$variant/relu.c" --shape "$here/shape.c" \
        ${flags[@]+"${flags[@]}"} -o "$out/$variant"
    "$out/check_relu" "$out/$variant/librelu.so"
done
