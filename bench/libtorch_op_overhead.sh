#!/usr/bin/env bash
# Builds bench/libtorch_op_overhead.cpp against the libtorch inside a pip-installed torch and runs
# it; prints one JSON line (as bench_cpu does). Exits 0 with a "skipped" line on stderr when torch
# cannot be imported. PyTorch is a benchmarking aid only, never an octo dependency.
#
#   bench/libtorch_op_overhead.sh [THREADS] [--quick]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) || {
  echo "libtorch_op_overhead: skipped (python3 cannot import torch)" >&2
  exit 0
}
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null)
out=${OCTO_LIBTORCH_BENCH:-/tmp/octo_libtorch_op_overhead}
if [ ! -x "$out" ] || [ "$here/libtorch_op_overhead.cpp" -nt "$out" ]; then
  echo "libtorch_op_overhead: compiling against $torch_dir (about a minute)" >&2
  if ! g++ -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI="$abi" "$here/libtorch_op_overhead.cpp" \
    -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" \
    -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" -ltorch -ltorch_cpu -lc10 -o "$out" \
    2>"$out.log"; then
    echo "libtorch_op_overhead: skipped (compiling against libtorch failed; see $out.log)" >&2
    tail -3 "$out.log" >&2
    exit 0
  fi
fi
"$out" "${1:-1}" "${2:-}"
