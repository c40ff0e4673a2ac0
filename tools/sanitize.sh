#!/usr/bin/env bash
# Builds octo with sanitizers (CPU only) and runs the CPU test suite under them.
#
#   tools/sanitize.sh asan     # AddressSanitizer + UndefinedBehaviorSanitizer, every CPU suite
#   tools/sanitize.sh tsan     # ThreadSanitizer: DataParallel, engine, DataLoader, core, DDP and
#                              # examples suites
#
# Build dirs: build-asan/, build-tsan/ (OCTO_SANITIZE_BUILDDIR overrides). Any report fails the
# run: UBSan and TSan are made fatal (halt_on_error), ASan always is. Known leaks of Open MPI's
# own start-up are suppressed (tools/sanitizers/lsan.supp); octo's are not.
set -uo pipefail
cd "$(dirname "$0")/.."
kind=${1:-asan}
supp=$(realpath tools/sanitizers)
case $kind in
  asan)
    builddir=${OCTO_SANITIZE_BUILDDIR:-build-asan}
    sanitize=address,undefined
    suites=(--suite cpu)
    # allocator_may_return_null: an impossible allocation returns null, so octo's OutOfMemoryError
    # path is what gets tested, not ASan's own abort.
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:allocator_may_return_null=1"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
    ;;
  tsan)
    builddir=${OCTO_SANITIZE_BUILDDIR:-build-tsan}
    sanitize=thread
    suites=(--suite data_parallel --suite engine --suite data --suite core --suite distributed
            --suite examples)
    # allocator_may_return_null as for asan: the out-of-memory tests reach octo's own error.
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$supp/tsan.supp"
    ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan" >&2
    exit 2
    ;;
esac
tools/install_deps.sh || exit 1
# -O1 -g1: reports keep file:line, and the build takes about half the time of -O2 -g.
opts=(-Db_sanitize="$sanitize" -Db_lundef=false -Dcuda=disabled -Dbuildtype=plain
      "-Dcpp_args=-O1 -g1" -Dnative=false -Dbenchmarks=false)
if [ -d "$builddir" ]; then
  meson setup --reconfigure "$builddir" "${opts[@]}" >/dev/null || exit 1
else
  meson setup "$builddir" "${opts[@]}" >/dev/null || exit 1
fi
ninja -C "$builddir" || exit 1
log=$(mktemp)
# Sanitized code runs several times slower: the timeouts of meson.build times 3.
meson test -C "$builddir" --print-errorlogs --num-processes 2 --timeout-multiplier 3 \
  "${suites[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
ok=$(awk '/^Ok:/ {print $2}' "$log")
fail=$(awk '/^Fail:/ {print $2}' "$log")
timeout=$(awk '/^Timeout:/ {print $2}' "$log")
rm -f "$log"
echo
echo "$kind: ${ok:-0} passed, $(( ${fail:-0} + ${timeout:-0} )) failed"
exit "$status"
