#!/usr/bin/env bash
# Downloads datasets for the examples into data/ and checks their published MD5 sums.
# Needs internet access; the tests never need it (they generate their own tiny data).
#
#   tools/get_data.sh                 # MNIST -> data/mnist
#   tools/get_data.sh fashion cifar10 # Fashion-MNIST -> data/fashion-mnist,
#                                     # CIFAR-10 (binary) -> data/cifar-10-batches-bin
#
# On Debian/Ubuntu `sudo apt install dataset-fashion-mnist` is an offline alternative for
# Fashion-MNIST (the mnist example finds /usr/share/datasets/fashion-mnist by itself).
set -euo pipefail
cd "$(dirname "$0")/.."

fetch() {  # url dest md5
  local url=$1 dest=$2 md5=$3
  if [ -f "$dest" ] && echo "$md5  $dest" | md5sum -c --status; then
    echo "get_data: $dest present"
    return 0
  fi
  echo "get_data: $url"
  if command -v curl >/dev/null; then
    curl -fL --retry 3 -o "$dest.part" "$url"
  else
    wget -q -O "$dest.part" "$url"
  fi
  if ! echo "$md5  $dest.part" | md5sum -c --status; then
    echo "get_data: MD5 mismatch for $url (expected $md5)" >&2
    rm -f "$dest.part"
    return 1
  fi
  mv "$dest.part" "$dest"
}

fetch_first() {  # dest md5 url... : tries each mirror in turn
  local dest=$1 md5=$2
  shift 2
  for url in "$@"; do
    fetch "$url" "$dest" "$md5" && return 0
  done
  echo "get_data: could not download $(basename "$dest")" >&2
  return 1
}

# MD5 sums as published by the dataset authors (and used by torchvision).
get_mnist() {
  mkdir -p data/mnist
  local f
  declare -A md5=(
    [train-images-idx3-ubyte.gz]=f68b3c2dcbeaaa9fbdd348bbdeb94873
    [train-labels-idx1-ubyte.gz]=d53e105ee54ea40749a09fcbcd1e9432
    [t10k-images-idx3-ubyte.gz]=9fb629c4189551a2d022fa330f9573f3
    [t10k-labels-idx1-ubyte.gz]=ec29112dd5afa0611ce80d1b7f02629c)
  for f in "${!md5[@]}"; do
    fetch_first "data/mnist/$f" "${md5[$f]}" \
      "https://ossci-datasets.s3.amazonaws.com/mnist/$f" \
      "https://storage.googleapis.com/cvdf-datasets/mnist/$f" \
      "http://yann.lecun.com/exdb/mnist/$f"
  done
}

get_fashion() {
  mkdir -p data/fashion-mnist
  local f
  declare -A md5=(
    [train-images-idx3-ubyte.gz]=8d4fb7e6c68d591d4c3dfef9ec88bf0d
    [train-labels-idx1-ubyte.gz]=25c81989df183df01b3e8a0aad5dffbe
    [t10k-images-idx3-ubyte.gz]=bef4ecab320f06d8554ea6380940ec79
    [t10k-labels-idx1-ubyte.gz]=bb300cfdad3c16e7a12a480ee83cd310)
  for f in "${!md5[@]}"; do
    fetch_first "data/fashion-mnist/$f" "${md5[$f]}" \
      "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/$f"
  done
}

get_cifar10() {
  mkdir -p data
  fetch_first data/cifar-10-binary.tar.gz c32a1d4ab5d03f1284b67883e8d87530 \
    "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
  tar -xzf data/cifar-10-binary.tar.gz -C data  # -> data/cifar-10-batches-bin/
}

[ $# -eq 0 ] && set -- mnist
for name in "$@"; do
  case "$name" in
    mnist) get_mnist ;;
    fashion|fashion-mnist) get_fashion ;;
    cifar10|cifar-10) get_cifar10 ;;
    *) echo "get_data: unknown dataset '$name' (mnist, fashion, cifar10)" >&2; exit 2 ;;
  esac
done
echo "get_data: done"
