#!/usr/bin/env bash
# Note [CUDA header dependencies] (meson.build): every kernels/cuda/*.cu object must have its
# headers in ninja's dependency log, or a header change leaves it stale. Used by the test suite
# (test 'cuda_header_deps', CUDA builds only); usage: check_cuda_deps.sh NINJA BUILD_DIR SOURCE_DIR
set -euo pipefail
ninja=$1 build=$2 src=$3
deps=$("$ninja" -C "$build" -t deps)
status=0
for cu in "$src"/kernels/cuda/*.cu; do
  name=$(basename "$cu")
  # The object's block: its "obj: #deps N ..." line, then one indented path per line.
  block=$(awk -v obj="kernels_cuda_$name.o:" '
    /^[^ ]/ { on = index($1, obj) > 0 && substr($1, length($1) - length(obj) + 1) == obj }
    on' <<<"$deps")
  headers=$(grep -cE '^ +.*/(core|kernels|tensor)/[^ ]+\.h$' <<<"$block" || true)
  if [[ -z $block ]]; then
    echo "$name: no object in ninja's dependency log (expected one built from $cu)"; status=1
  elif [[ $headers -eq 0 ]]; then
    echo "$name: ninja records no octo header for its object, so a header change would not" \
         "rebuild it (found: $(head -1 <<<"$block"))"; status=1
  else
    echo "$name: $headers octo headers tracked"
  fi
done
exit $status
