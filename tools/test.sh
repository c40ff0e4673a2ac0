#!/usr/bin/env bash
# Runs octo's whole test suite from a fresh clone: installs missing packages, configures, builds,
# runs every Meson test and ends with one line "N passed, M failed[, K skipped]".
#
#   tools/test.sh                    # CUDA backend if the toolkit is found (GPU tests skip without a GPU)
#   tools/test.sh -Dcuda=enabled     # any extra arguments go to `meson setup`
set -uo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh || exit 1
builddir=${OCTO_BUILDDIR:-build}
if [ -d "$builddir" ]; then
  meson setup --reconfigure "$builddir" "$@" >/dev/null || exit 1
else
  meson setup "$builddir" "$@" || exit 1
fi
ninja -C "$builddir" || exit 1

log=$(mktemp)
meson test -C "$builddir" --print-errorlogs --num-processes 2 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
ok=$(awk '/^Ok:/ {print $2}' "$log")
fail=$(awk '/^Fail:/ {print $2}' "$log")
timeout=$(awk '/^Timeout:/ {print $2}' "$log")
skipped=$(awk '/^Skipped:/ {print $2}' "$log")
rm -f "$log"
fail=$(( ${fail:-0} + ${timeout:-0} ))
line="${ok:-0} passed, ${fail} failed"
[ "${skipped:-0}" -gt 0 ] && line="$line, ${skipped} skipped"
echo
echo "$line"
[ "$status" -eq 0 ] && [ "$fail" -eq 0 ]
