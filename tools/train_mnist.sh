#!/usr/bin/env bash
# The README's first command: from a fresh clone on Debian/Ubuntu, installs what is missing,
# builds octo into build/, and trains the LeNet-style CNN on Fashion-MNIST for 3 epochs
# (about a minute per epoch on 2 cores), printing the test accuracy after each epoch.
#
#   tools/train_mnist.sh                       # --model cnn --epochs 3 on the default data
#   tools/train_mnist.sh --devices cpu:0,cpu:1 # extra arguments go to the mnist example
#   tools/train_mnist.sh --np 2                # 2 processes under mpirun: --distributed (DDP)
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh
builddir=${OCTO_BUILDDIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir"
fi
ninja -C "$builddir" examples/mnist/mnist
if [ "${1:-}" = "--np" ]; then
  [ $# -ge 2 ] || { echo "train_mnist.sh: --np needs a number of processes" >&2; exit 2; }
  np=$2
  shift 2
  mpirun=(mpirun -np "$np" --bind-to none)
  [ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
  [ "$np" -gt "$(nproc)" ] && mpirun+=(--oversubscribe)
  exec "${mpirun[@]}" "$builddir/examples/mnist/mnist" --distributed --model cnn --epochs 3 "$@"
fi
exec "$builddir/examples/mnist/mnist" --model cnn --epochs 3 "$@"
