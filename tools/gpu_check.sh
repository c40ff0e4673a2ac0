#!/usr/bin/env bash
# One-shot GPU check for a machine with an NVIDIA GPU and no network: build, GPU tests, benchmarks.
#
#   tools/gpu_check.sh [BUILD_DIR]
#
# BUILD_DIR: an existing build directory configured with -Dcuda=enabled (only the needed targets
# are rebuilt). Without it, build-gpu/ is configured (-Dcuda=enabled) and built. Nothing is
# installed or downloaded: missing meson/ninja/nvcc is an error. Then it runs
#   meson test -C B --suite gpu --print-errorlogs --no-rebuild
#   B/bench/bench_gpu
#   python3 tools/bench_torch.py                   (skips itself without torch or a GPU)
#   B/examples/mnist/mnist --device cuda:0 --model mlp --limit 2000 --epochs 1   (if data exists)
# and writes a markdown report to gpu_report.md, or to $OUT/gpu_report.md when OUT is set (the
# full test log is copied beside it). Every step runs under `timeout`, all within a total budget
# of 7.5 minutes. Exit status: 0 when every step that ran passed, 1 otherwise. See docs/gpu.md.
set -u

cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
TOTAL_BUDGET=${GPU_CHECK_BUDGET:-450}   # seconds; the whole script must finish in under 8 minutes
START=$SECONDS
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  REPORT_DIR=$OUT
else
  REPORT_DIR=$ROOT
fi
REPORT=$REPORT_DIR/gpu_report.md
LOGDIR=$(mktemp -d)
trap 'rm -rf "$LOGDIR"' EXIT
FAILED=()

say() { printf '[gpu_check %3ds] %s\n' "$((SECONDS - START))" "$*" >&2; }

# Seconds a step may take: its own cap, but never past the total budget (0: no time left).
budget() {
  local cap=$1 left=$((TOTAL_BUDGET - (SECONDS - START)))
  ((left < 5)) && { echo 0; return; }
  ((cap < left)) && echo "$cap" || echo "$left"
}

# run_step NAME CAP_SECONDS CMD...: runs CMD under timeout, output to $LOGDIR/NAME.log (and to
# stderr); records NAME in FAILED unless it exits 0 (or 77 = skipped). Returns CMD's status.
run_step() {
  local name=$1 cap=$2 t rc
  shift 2
  t=$(budget "$cap")
  if ((t == 0)); then
    echo "skipped: the ${TOTAL_BUDGET}s budget is spent" >"$LOGDIR/$name.log"
    FAILED+=("$name (no time left)")
    return 124
  fi
  say "$name (timeout ${t}s): $*"
  timeout -k 10 "$t" "$@" >"$LOGDIR/$name.log" 2>&1
  rc=$?
  tail -n 40 "$LOGDIR/$name.log" >&2
  echo "$rc" >"$LOGDIR/$name.rc"
  if ((rc == 124 || rc == 137)); then
    echo "TIMED OUT after ${t}s" >>"$LOGDIR/$name.log"
    FAILED+=("$name (timed out after ${t}s)")
  elif ((rc != 0 && rc != 77)); then
    FAILED+=("$name (exit $rc)")
  fi
  return "$rc"
}

# Prints a log file, at most the last N lines, inside a fenced block.
fenced_tail() {
  local file=$1 n=${2:-80}
  echo '```'
  if [[ -f $file ]]; then
    if (($(wc -l <"$file") > n)); then echo "... (last $n lines)"; fi
    tail -n "$n" "$file"
  else
    echo "(no output)"
  fi
  echo '```'
}

# --- tools -------------------------------------------------------------------------------------
missing=()
for tool in meson ninja python3 timeout; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ! command -v nvcc >/dev/null 2>&1; then
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [[ -n $d && -x $d/bin/nvcc ]]; then
      export PATH="$d/bin:$PATH"
      break
    fi
  done
  command -v nvcc >/dev/null 2>&1 || missing+=("nvcc (CUDA toolkit; set CUDA_HOME)")
fi
if ((${#missing[@]})); then
  echo "gpu_check: missing: ${missing[*]}. This script installs and downloads nothing;" \
       "install them first (see docs/gpu.md)." >&2
  exit 2
fi

# --- build -------------------------------------------------------------------------------------
BUILD=${1:-build-gpu}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
if [[ ! -f $BUILD/build.ninja ]]; then
  if [[ $# -ge 1 ]]; then
    echo "gpu_check: $BUILD is not a configured meson build directory" >&2
    exit 2
  fi
  run_step configure 120 meson setup "$BUILD" -Dcuda=enabled -Dbuildtype=release \
    || { cat "$LOGDIR/configure.log" >&2; echo "gpu_check: meson setup failed" >&2; exit 1; }
fi
cuda_on=$(meson introspect "$BUILD" --buildoptions 2>/dev/null \
  | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="cuda"][0])' \
  2>/dev/null || echo unknown)

# Only what the check runs: the gpu-suite test executables, bench_gpu and the mnist example.
targets=()
while IFS= read -r t; do [[ -n $t ]] && targets+=("$t"); done < <(
  meson introspect "$BUILD" --tests 2>/dev/null | python3 -c '
import json, os, sys
build = sys.argv[1]
for t in json.load(sys.stdin):
    # suites are named "gpu" or "<project>:gpu"
    if any(s.split(":")[-1] == "gpu" for s in t.get("suite", [])) and t["cmd"]:
        print(os.path.relpath(t["cmd"][0], build))
' "$BUILD" 2>/dev/null)
if ((${#targets[@]} == 0)); then
  echo "gpu_check: the build in $BUILD has no gpu test suite: is it configured with -Dcuda=enabled" \
       "(cuda option: $cuda_on) and are CUDA, cuBLAS, cuDNN and NCCL all found? See meson-logs." >&2
  exit 2
fi
targets+=(bench/bench_gpu)
have_mnist_target=0
if ninja -C "$BUILD" -t targets all 2>/dev/null | grep -q '^examples/mnist/mnist:'; then
  targets+=(examples/mnist/mnist)
  have_mnist_target=1
fi
run_step build 240 ninja -C "$BUILD" -j "$(nproc)" "${targets[@]}"
build_rc=$?

# --- GPU info ----------------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 20 nvidia-smi >"$LOGDIR/nvidia-smi.log" 2>&1 || echo "(nvidia-smi failed)" >>"$LOGDIR/nvidia-smi.log"
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv >"$LOGDIR/gpu-query.log" 2>&1
else
  echo "nvidia-smi not found" >"$LOGDIR/nvidia-smi.log"
fi

# --- tests and benchmarks ----------------------------------------------------------------------
if ((build_rc == 0)); then
  run_step tests 150 meson test -C "$BUILD" --suite gpu --print-errorlogs --no-rebuild
  run_step bench_gpu 90 "$BUILD/bench/bench_gpu"
else
  FAILED+=("tests (not run: build failed)" "bench_gpu (not run: build failed)")
fi
run_step bench_torch 90 python3 tools/bench_torch.py

# bench_gpu exits 77 when octo sees no GPU (no driver, no device, CUDA_VISIBLE_DEVICES=""): then
# nothing was checked, which is a failure of this script's purpose, not a pass.
no_gpu=0
if [[ -f $LOGDIR/bench_gpu.rc && $(cat "$LOGDIR/bench_gpu.rc") == 77 ]]; then
  no_gpu=1
  FAILED+=("no GPU visible to octo (tests and benchmarks skipped)")
fi

mnist_data=""
for d in data/mnist /usr/share/datasets/fashion-mnist; do
  if [[ -f $d/train-images-idx3-ubyte || -f $d/train-images-idx3-ubyte.gz ]]; then
    mnist_data=$d
    break
  fi
done
if ((no_gpu)); then
  echo "skipped: no GPU visible" >"$LOGDIR/mnist.log"
elif ((build_rc == 0 && have_mnist_target)) && [[ -n $mnist_data ]]; then
  run_step mnist 60 "$BUILD/examples/mnist/mnist" --device cuda:0 --model mlp --limit 2000 \
    --epochs 1 --data "$mnist_data"
elif [[ -z $mnist_data ]]; then
  echo "skipped: no MNIST data in data/mnist or /usr/share/datasets/fashion-mnist" >"$LOGDIR/mnist.log"
else
  echo "skipped: examples/mnist/mnist was not built (CLI11 missing?) or the build failed" >"$LOGDIR/mnist.log"
fi

# --- report ------------------------------------------------------------------------------------
status_of() {  # the result of a step for the summary table
  local name=$1 rc
  [[ -f $LOGDIR/$name.rc ]] || { echo "not run"; return; }
  rc=$(cat "$LOGDIR/$name.rc")
  case $rc in
    0) echo "ok" ;;
    77) echo "skipped (exit 77: no GPU visible)" ;;
    124 | 137) echo "**timed out**" ;;
    *) echo "**failed (exit $rc)**" ;;
  esac
}

# The markdown table rows a benchmark printed, plus its one-line headers.
bench_tables() {
  local file=$1
  [[ -f $file ]] || { echo "(no output)"; return; }
  if grep -q '^|' "$file"; then
    grep -v '^|' "$file" | grep -v '^\s*$' | grep -v '^\[' | head -n 8 | sed 's/^/    /'
    echo
    grep '^|' "$file"
  else
    fenced_tail "$file" 30
  fi
}

{
  echo "# octo GPU check"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), host: $(hostname)"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "- build dir: \`$BUILD\` (cuda option: $cuda_on); nvcc: $(nvcc --version | tail -n 2 | head -n 1)"
  echo "- total time: $((SECONDS - START)) s of a ${TOTAL_BUDGET} s budget"
  if ((${#FAILED[@]})); then
    echo "- **result: FAILED** — ${FAILED[*]}"
  else
    echo "- **result: all steps passed**"
  fi
  echo
  echo "| step | result |"
  echo "|---|---|"
  for s in configure build tests bench_gpu bench_torch mnist; do
    if [[ $s == configure && ! -f $LOGDIR/configure.rc ]]; then continue; fi
    if [[ $s == mnist && ! -f $LOGDIR/mnist.rc ]]; then
      echo "| mnist | $(head -n 1 "$LOGDIR/mnist.log" 2>/dev/null) |"
      continue
    fi
    echo "| $s | $(status_of "$s") |"
  done
  echo
  echo "## GPU (nvidia-smi)"
  echo
  [[ -f $LOGDIR/gpu-query.log ]] && fenced_tail "$LOGDIR/gpu-query.log" 10
  fenced_tail "$LOGDIR/nvidia-smi.log" 40
  echo
  echo "## Build"
  echo
  if ((build_rc == 0)); then
    fenced_tail "$LOGDIR/build.log" 3
  else  # compiler errors and ninja's verdict, without the (many) warnings' context lines
    grep -E 'error|FAILED|^ninja: |TIMED OUT|^\[[0-9]+/[0-9]+\]' "$LOGDIR/build.log" >"$LOGDIR/build.short"
    fenced_tail "$LOGDIR/build.short" 60
  fi
  echo
  echo "## GPU tests (meson test --suite gpu)"
  echo
  if [[ -f $LOGDIR/tests.log ]]; then
    echo "Summary:"
    echo
    echo '```'
    grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout): ' \
      "$LOGDIR/tests.log" || echo "(no summary lines; see below)"
    echo '```'
    if [[ $(cat "$LOGDIR/tests.rc") != 0 ]]; then
      echo
      echo "Error logs (tail):"
      echo
      fenced_tail "$LOGDIR/tests.log" 150
    fi
    echo
    echo "Full log: \`$BUILD/meson-logs/testlog.txt\`$([[ -n ${OUT:-} ]] && echo ' (copied to gpu_testlog.txt)')."
  else
    echo "not run"
  fi
  echo
  echo "## octo benchmark (bench/bench_gpu)"
  echo
  bench_tables "$LOGDIR/bench_gpu.log"
  echo
  echo "## PyTorch eager reference (tools/bench_torch.py)"
  echo
  bench_tables "$LOGDIR/bench_torch.log"
  echo
  echo "## MNIST MLP on cuda:0 (2000 examples, 1 epoch)"
  echo
  fenced_tail "$LOGDIR/mnist.log" 25
} >"$REPORT"

if [[ -n ${OUT:-} && -f $BUILD/meson-logs/testlog.txt ]]; then
  cp "$BUILD/meson-logs/testlog.txt" "$OUT/gpu_testlog.txt"
fi
say "report: $REPORT"
if ((${#FAILED[@]})); then
  say "FAILED: ${FAILED[*]}"
  exit 1
fi
say "all steps passed"
exit 0
