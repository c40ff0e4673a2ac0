#!/usr/bin/env bash
# The README's first command: from a fresh clone on Debian/Ubuntu, installs what is missing,
# builds octo into build/, and trains the LeNet-style CNN on Fashion-MNIST for 3 epochs
# (about a minute per epoch on 2 cores), printing the test accuracy after each epoch.
#
#   tools/train_mnist.sh                       # --model cnn --epochs 3 on the default data
#   tools/train_mnist.sh --devices cpu:0,cpu:1 # extra arguments go to the mnist example
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh
builddir=${OCTO_BUILDDIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir"
fi
ninja -C "$builddir" examples/mnist/mnist
exec "$builddir/examples/mnist/mnist" --model cnn --epochs 3 "$@"
