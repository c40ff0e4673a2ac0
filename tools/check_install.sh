#!/usr/bin/env bash
# Installs octo into a temporary prefix, then builds examples/hello_devices.cpp the way a user
# would -- `c++ -std=c++20 prog.cpp $(pkg-config --cflags --libs octo)` -- and runs it.
# Used by the test suite (test 'install'); usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --destdir "$tmp" --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
libdir=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="libdir"))')
root="$tmp$prefix"
pcdir="$root/$libdir/pkgconfig"
# The .pc file names the real prefix; point pkg-config at the staged copy instead.
export PKG_CONFIG_PATH="$pcdir"
flags=$(pkg-config --define-variable=prefix="$root" --cflags --libs octo)
# A sanitized libocto (-Db_sanitize=...) needs the program built with the same runtime.
c++ -std=c++20 ${OCTO_SANITIZE_FLAGS:-} "$src/examples/hello_devices.cpp" $flags -o "$tmp/hello_devices"
out=$(LD_LIBRARY_PATH="$root/$libdir" "$tmp/hello_devices")
echo "$out"
grep -q "Expected all tensors to be on the same device, but found at least two devices, cpu:0 and cpu:1!" <<<"$out"
grep -q "device='cpu:1', dtype=float64" <<<"$out"
