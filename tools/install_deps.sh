#!/usr/bin/env bash
# Installs octo's build and test dependencies from Debian/Ubuntu packages (needs root or sudo).
# Installs only what is missing, so it is cheap to run again.
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++       # build
  libeigen3-dev                          # CPU GEMM (float64, fallback)
  libdnnl-dev                            # CPU SGEMM (oneDNN; optional, -Donednn)
  catch2                                 # tests
  zlib1g-dev                             # gzip'd IDX files
  nlohmann-json3-dev                     # safetensors headers
  libcli11-dev                           # example command lines
  libopenmpi-dev openmpi-bin             # distributed bootstrap
  dataset-fashion-mnist                  # real data for the examples
  clang-format                           # the code style (.clang-format), checked by CI
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
