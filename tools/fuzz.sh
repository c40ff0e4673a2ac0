#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, ASan and UBSan, and runs each for a given
# time, two at a time, starting from the committed seed corpora (fuzz/corpus/<target>/).
#
#   tools/fuzz.sh                 # 600 s per target
#   tools/fuzz.sh 60 fuzz_idx     # one target for a minute
#
# New inputs go to build-fuzz/corpus/<target>/ (not committed); a crash, leak, sanitizer report
# or timeout (10 s per input) leaves its input as build-fuzz/findings/<target>/crash-* and fails
# the run. The summary gives each target's executions and time.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_idx fuzz_cifar fuzz_safetensors fuzz_checkpoint)
builddir=${OCTO_FUZZ_BUILDDIR:-build-fuzz}

tools/install_deps.sh || exit 1
need=()
for p in clang libclang-rt-14-dev libomp-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" || exit 1
fi
if [ ! -f "$builddir/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$builddir" -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dcuda=disabled -Dtests=false -Dexamples=false -Dbenchmarks=false \
    -Dnative=false -Dbuildtype=debugoptimized -Dcpp_args=-fsanitize=fuzzer-no-link || exit 1
fi
ninja -C "$builddir" || exit 1

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$(realpath tools/sanitizers/lsan.supp):print_suppressions=0"
export OMP_NUM_THREADS=1
run_one() {
  local t=$1 work="$builddir/corpus/$1" found="$builddir/findings/$1"
  mkdir -p "$work" "$found"
  "$builddir/fuzz/$t" "$work" "fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$found/" -print_final_stats=1 \
    >"$builddir/$t.log" 2>&1
  echo $? >"$builddir/$t.rc"
}
pids=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait
status=0
echo
echo "| target | seconds | executions | corpus | result |"
echo "|---|---:|---:|---:|---|"
for t in "${targets[@]}"; do
  rc=$(cat "$builddir/$t.rc")
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$builddir/$t.log" | tail -1 |
         grep -o '[0-9]*$')
  secs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$builddir/$t.log" | tail -1 |
         grep -oE '[0-9]+ second' | grep -oE '[0-9]+')
  corpus=$(ls "$builddir/corpus/$t" | wc -l)
  result=clean
  if [ "$rc" != 0 ]; then result="FAILED (exit $rc, see $builddir/$t.log)"; status=1; fi
  echo "| $t | ${secs:-?} | ${runs:-?} | $corpus | $result |"
done
exit $status
