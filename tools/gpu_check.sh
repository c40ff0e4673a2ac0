#!/usr/bin/env bash
# One-shot GPU check for a machine with an NVIDIA GPU and no network: build, tests, benchmarks.
#
#   tools/gpu_check.sh [BUILD_DIR]    run the check (BUILD_DIR defaults to build-gpu/)
#   tools/gpu_check.sh --bundle-deps  write build-gpudeps/: the header-only dependencies, zlib's
#                                     headers and pkg-config, for a GPU machine that lacks them
#
# BUILD_DIR: a build directory configured here with -Dcuda=enabled (only the needed targets are
# rebuilt), or a new one, which is configured with -Dcuda=enabled -Dexamples=true
# -Dbenchmarks=true -Dtests=true. Nothing is installed or downloaded. meson and ninja are taken
# from PATH or from python3's meson/ninja packages; build-gpudeps/ (when carried along) supplies
# Eigen, nlohmann_json, Catch2, CLI11 and zlib's headers; cuDNN, NCCL and cuBLAS are looked for in
# the CUDA toolkit, the system and python3's nvidia-* packages. Then it runs
#   ninja: the gpu-suite tests, bench/bench_gpu, examples/mnist/mnist, examples/cifar10/cifar10
#   meson test -C B --suite gpu --print-errorlogs --no-rebuild
#   B/bench/bench_gpu  and  python3 tools/bench_torch.py    (skips itself without torch or a GPU)
#   a few training steps of examples/mnist (cnn, mlp, cnn with --amp bf16 and fp16) and
#   examples/cifar10 on cuda:0, on data
#   generated on the spot (or data/mnist, data/cifar-10-batches-bin when present)
# and writes a markdown report to gpu_report.md, or to $OUT/gpu_report.md when OUT is set (the full
# test log and the benchmark logs are copied beside it). Every step runs under `timeout`, all
# within a total budget of 7.5 minutes. Exit status: 0 when every step that ran passed, 1
# otherwise, 2 for a missing tool or build dir. See docs/gpu.md.
set -u

cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
DEPS=$ROOT/build-gpudeps

# --- --bundle-deps: run where the Debian/Ubuntu -dev packages are installed ---------------------
if [[ ${1:-} == --bundle-deps ]]; then
  set -e
  rm -rf "$DEPS"
  mkdir -p "$DEPS/include" "$DEPS/lib/pkgconfig" "$DEPS/bin"
  cp -r /usr/include/eigen3/Eigen "$DEPS/include/"
  cp -r /usr/include/nlohmann /usr/include/catch2 /usr/include/CLI "$DEPS/include/"
  cp /usr/include/zlib.h /usr/include/zconf.h "$DEPS/include/"
  version() { pkg-config --modversion "$1"; }
  # One include/ for all (Eigen/ sits in it directly, not under eigen3/).
  for spec in "eigen3 Eigen3" "nlohmann_json nlohmann_json" "catch2 Catch2" "CLI11 CLI11" \
              "zlib zlib"; do
    read -r pc name <<<"$spec"
    libs=""
    [[ $pc == zlib ]] && libs="-lz"  # gpu_check links libz.so to the machine's libz.so.1
    # shellcheck disable=SC2016  # ${pcfiledir} and ${prefix} are pkg-config's variables
    printf 'prefix=${pcfiledir}/../..\nName: %s\nDescription: %s (bundled headers)\nVersion: %s\nCflags: -I${prefix}/include\nLibs: %s\n' \
      "$name" "$name" "$(version "$pc")" "$libs" >"$DEPS/lib/pkgconfig/$pc.pc"
  done
  cp "$(readlink -f "$(command -v pkg-config)")" "$DEPS/bin/pkg-config"
  cp "$(ldd "$DEPS/bin/pkg-config" | awk '/libpkgconf/ {print $3}')" "$DEPS/lib/"
  du -sh "$DEPS"
  echo "gpu_check: wrote $DEPS; send it to the GPU machine with the source tree"
  exit 0
fi

TOTAL_BUDGET=${GPU_CHECK_BUDGET:-450}  # seconds; the whole script must finish in under 8 minutes
START=$SECONDS
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  REPORT_DIR=$OUT
else
  REPORT_DIR=$ROOT
fi
REPORT=$REPORT_DIR/gpu_report.md
WORK=$(mktemp -d)
LOGDIR=$WORK/logs
mkdir -p "$LOGDIR"
trap 'rm -rf "$WORK"' EXIT
FAILED=()
ENV_NOTES=()

say() { printf '[gpu_check %3ds] %s\n' "$((SECONDS - START))" "$*" >&2; }

# Seconds a step may take: its own cap, but never past the total budget (0: no time left).
budget() {
  local cap=$1 left=$((TOTAL_BUDGET - (SECONDS - START)))
  ((left < 5)) && { echo 0; return; }
  ((cap < left)) && echo "$cap" || echo "$left"
}

# run_step NAME CAP_SECONDS CMD...: runs CMD under timeout, output to $LOGDIR/NAME.log (and its
# tail to stderr); records NAME in FAILED unless it exits 0 (or 77 = skipped). Returns CMD's
# status.
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
  tail -n 30 "$LOGDIR/$name.log" >&2
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

# --- tools: meson and ninja from PATH or from python3's packages ---------------------------------
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}
ORIG_LD_SET=${LD_LIBRARY_PATH+set}
mkdir -p "$WORK/bin" "$WORK/lib"
export PATH="$WORK/bin:$PATH"
if ! command -v meson >/dev/null 2>&1 && python3 -c 'import mesonbuild' >/dev/null 2>&1; then
  printf '#!/bin/sh\nexec python3 -m mesonbuild.mesonmain "$@"\n' >"$WORK/bin/meson"
  chmod +x "$WORK/bin/meson"
  ENV_NOTES+=("meson: python3's mesonbuild package")
fi
if ! command -v ninja >/dev/null 2>&1; then
  ninja_dir=$(python3 -c 'import ninja; print(ninja.BIN_DIR)' 2>/dev/null)
  if [[ -n $ninja_dir && -x $ninja_dir/ninja ]]; then
    ln -sf "$ninja_dir/ninja" "$WORK/bin/ninja"
    ENV_NOTES+=("ninja: python3's ninja package ($ninja_dir)")
  fi
fi
if ! command -v nvcc >/dev/null 2>&1; then
  for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [[ -n $d && -x $d/bin/nvcc ]]; then
      export PATH="$d/bin:$PATH"
      break
    fi
  done
fi
missing=()
for tool in meson ninja python3 timeout nvcc; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "gpu_check: missing: ${missing[*]}. This script installs and downloads nothing; see" \
       "docs/gpu.md for carrying meson and ninja as wheels." >&2
  exit 2
fi
CUDA_ROOT=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")

# --- dependencies: the carried bundle, and the CUDA libraries wherever they are -----------------
if [[ -d $DEPS/lib/pkgconfig ]]; then
  export PKG_CONFIG_PATH="$DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  if ! command -v pkg-config >/dev/null 2>&1 && [[ -x $DEPS/bin/pkg-config ]]; then
    ln -sf "$DEPS/bin/pkg-config" "$WORK/bin/pkg-config"
    export LD_LIBRARY_PATH="$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    ENV_NOTES+=("pkg-config: build-gpudeps/bin")
  fi
  ENV_NOTES+=("Eigen, nlohmann_json, Catch2, CLI11, zlib headers: build-gpudeps/")
fi
site_dirs=()
while IFS= read -r d; do [[ -d $d ]] && site_dirs+=("$d"); done < <(
  python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' \
    2>/dev/null)
nvidia_dirs=()  # python3's nvidia-* wheels (cuDNN, NCCL, cuBLAS, ...) live under site/nvidia/
for d in "${site_dirs[@]}"; do [[ -d $d/nvidia ]] && nvidia_dirs+=("$d/nvidia"); done
lib_dirs=("$CUDA_ROOT/lib64" "$CUDA_ROOT/lib" "$CUDA_ROOT/targets/x86_64-linux/lib"
          /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib)
inc_dirs=("$CUDA_ROOT/include" "$CUDA_ROOT/targets/x86_64-linux/include" /usr/include
          /usr/include/x86_64-linux-gnu /usr/local/include)
add_path() {  # add_path VAR DIR: prepends DIR to the colon list VAR unless it is there
  local var=$1 dir=$2 cur=${!1-}
  [[ :$cur: == *:"$dir":* ]] || export "$var=$dir${cur:+:$cur}"
}
# provide LIB SOVERSION [HEADER]: makes lib$LIB.so linkable and loadable and HEADER includable,
# taking them from versioned-only system files (lib$LIB.so.$SOVERSION without the -dev symlink)
# or python3's nvidia-* wheels when needed.
provide() {
  local lib=$1 soversion=$2 header=${3:-} d found=""
  for d in "${lib_dirs[@]}"; do
    if [[ -e $d/lib$lib.so ]]; then found=$d/lib$lib.so; break; fi
  done
  if [[ -z $found ]]; then
    found=$(find "${lib_dirs[@]}" "${nvidia_dirs[@]}" -maxdepth 4 -name "lib$lib.so.$soversion" \
      2>/dev/null | head -n 1)
    if [[ -n $found ]]; then
      ln -sf "$found" "$WORK/lib/lib$lib.so"
      add_path LIBRARY_PATH "$WORK/lib"
      ENV_NOTES+=("lib$lib.so -> $found")
    fi
  fi
  if [[ -z $found ]]; then
    ENV_NOTES+=("lib$lib.so: not found anywhere")
  else  # the loader searches the system dirs anyway; only the others go on LD_LIBRARY_PATH
    d=$(dirname "$(readlink -f "$found")")
    [[ $d == /usr/lib* || $d == /lib* ]] || add_path LD_LIBRARY_PATH "$d"
  fi
  [[ -z $header ]] && return 0
  for d in "${inc_dirs[@]}"; do [[ -e $d/$header ]] && return 0; done
  found=$(find "${nvidia_dirs[@]}" -maxdepth 4 -name "$header" 2>/dev/null | head -n 1)
  if [[ -n $found ]]; then
    add_path CPATH "$(dirname "$found")"
    ENV_NOTES+=("$header: $(dirname "$found")")
  else
    ENV_NOTES+=("$header: not found anywhere")
  fi
}
provide cudnn 9 cudnn.h
provide nccl 2 nccl.h
provide cublas 13 cublas_v2.h
provide cublasLt 13 cublasLt.h
provide cudart 13 cuda_runtime_api.h
provide z 1  # zlib.h comes with the system's zlib -dev package or build-gpudeps/

# --- build -------------------------------------------------------------------------------------
BUILD=${1:-build-gpu}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
if [[ ! -f $BUILD/build.ninja ]]; then
  if [[ $# -ge 1 && -e $BUILD ]]; then
    echo "gpu_check: $BUILD exists but is not a configured meson build directory" >&2
    exit 2
  fi
  run_step configure 90 meson setup "$BUILD" -Dcuda=enabled -Dbuildtype=release \
    -Dexamples=true -Dbenchmarks=true -Dtests=true \
    || say "meson setup failed (the report shows its log)"
fi
cuda_on=$(meson introspect "$BUILD" --buildoptions 2>/dev/null \
  | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="cuda"][0])' \
  2>/dev/null || echo unknown)

# Only what the check runs: the gpu-suite test executables, bench_gpu and the two examples.
test_names=()
test_paths=()
while IFS=$'\t' read -r name path; do
  [[ -n $path ]] && test_names+=("$name") && test_paths+=("$path")
done < <(
  meson introspect "$BUILD" --tests 2>/dev/null | python3 -c '
import json, os, sys
build = sys.argv[1]
for t in json.load(sys.stdin):
    # suites are named "gpu" or "<project>:gpu"
    if any(s.split(":")[-1] == "gpu" for s in t.get("suite", [])) and t["cmd"]:
        print(t["name"] + "\t" + os.path.relpath(t["cmd"][0], build))
' "$BUILD" 2>/dev/null)
targets=("${test_paths[@]}")
if ((${#targets[@]} == 0)); then
  FAILED+=("no gpu test suite in $BUILD (cuda option: $cuda_on)")
  build_rc=1
  echo "skipped: $BUILD has no gpu test suite: is it configured with -Dcuda=enabled and are CUDA," \
       "cuBLAS, cuDNN and NCCL all found? See the configure log below." >"$LOGDIR/build.log"
else
  targets+=(bench/bench_gpu)
  all_targets=$(ninja -C "$BUILD" -t targets all 2>/dev/null)
  for ex in examples/mnist/mnist examples/cifar10/cifar10; do
    grep -q "^$ex:" <<<"$all_targets" && targets+=("$ex")
  done
  # -k 0: one target that fails to compile does not keep the others from being built and run.
  run_step build 270 ninja -C "$BUILD" -k 0 -j "$(nproc)" "${targets[@]}"
  build_rc=$?
fi

# --- GPU info ----------------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 20 nvidia-smi >"$LOGDIR/nvidia-smi.log" 2>&1 || echo "(nvidia-smi failed)" >>"$LOGDIR/nvidia-smi.log"
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit \
    --format=csv >"$LOGDIR/gpu-query.log" 2>&1
else
  echo "nvidia-smi not found" >"$LOGDIR/nvidia-smi.log"
fi

# --- tests and benchmarks ----------------------------------------------------------------------
# After a failed build, what did get built still runs (the report says the build failed).
# meson test refuses to start when any selected test is missing, so then the built ones are
# named one by one.
built=()
unbuilt=()
for i in "${!test_names[@]}"; do
  if [[ -x $BUILD/${test_paths[i]} ]]; then built+=("${test_names[i]}"); else unbuilt+=("${test_names[i]}"); fi
done
if ((${#built[@]} == 0)); then
  echo "not run: no gpu test executable was built" >"$LOGDIR/tests.log"
  FAILED+=("tests (none built)")
elif ((${#unbuilt[@]} == 0)); then
  run_step tests 150 meson test -C "$BUILD" --suite gpu --print-errorlogs --no-rebuild
else
  FAILED+=("tests not built: ${unbuilt[*]}")
  run_step tests 150 meson test -C "$BUILD" --print-errorlogs --no-rebuild "${built[@]}"
fi
if [[ -x $BUILD/bench/bench_gpu ]]; then
  run_step bench_gpu 100 "$BUILD/bench/bench_gpu"
else
  echo "not run: bench/bench_gpu was not built" >"$LOGDIR/bench_gpu.log"
  FAILED+=("bench_gpu (not built)")
fi
# PyTorch with the environment it was started with: the library paths added above are octo's.
if [[ -n $ORIG_LD_SET ]]; then
  run_step bench_torch 100 env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" python3 tools/bench_torch.py
else
  run_step bench_torch 100 env -u LD_LIBRARY_PATH python3 tools/bench_torch.py
fi

# bench_gpu exits 77 when octo sees no GPU (no driver, no device, CUDA_VISIBLE_DEVICES=""): then
# nothing was checked, which is a failure of this script's purpose, not a pass.
no_gpu=0
if [[ -f $LOGDIR/bench_gpu.rc && $(cat "$LOGDIR/bench_gpu.rc") == 77 ]]; then
  no_gpu=1
  FAILED+=("no GPU visible to octo (tests and benchmarks skipped)")
fi

# --- examples: a few training steps on cuda:0 ----------------------------------------------------
# Real data when present, else small files of random bytes in the real formats (MNIST IDX,
# CIFAR-10 binary): enough for the examples' full path (loading, batching, training, evaluation).
make_data() {
  python3 - "$1" <<'EOF'
import os, struct, sys
root = sys.argv[1]
os.makedirs(root + "/mnist", exist_ok=True)
os.makedirs(root + "/cifar", exist_ok=True)
labels = lambda n: bytes(b % 10 for b in os.urandom(n))
for prefix, n in (("train", 2048), ("t10k", 512)):
    with open(f"{root}/mnist/{prefix}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + os.urandom(n * 784))
    with open(f"{root}/mnist/{prefix}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 2049, n) + labels(n))
for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
    with open(f"{root}/cifar/{name}.bin", "wb") as f:
        n = 512
        f.write(b"".join(bytes([l]) + os.urandom(3072) for l in labels(n)))
EOF
}
mnist_data=""
cifar_data=""
data_note="generated (random bytes in the real formats)"
for d in data/mnist /usr/share/datasets/fashion-mnist; do
  if [[ -f $d/train-images-idx3-ubyte || -f $d/train-images-idx3-ubyte.gz ]]; then mnist_data=$d; break; fi
done
[[ -f data/cifar-10-batches-bin/test_batch.bin ]] && cifar_data=data/cifar-10-batches-bin
if [[ -z $mnist_data || -z $cifar_data ]]; then
  if make_data "$WORK/data" >"$LOGDIR/make_data.log" 2>&1; then
    [[ -z $mnist_data ]] && mnist_data=$WORK/data/mnist
    [[ -z $cifar_data ]] && cifar_data=$WORK/data/cifar
  else
    data_note="generating data failed: $(tail -n 1 "$LOGDIR/make_data.log")"
  fi
fi
EXAMPLES=(mnist_cnn mnist_mlp mnist_cnn_bf16 mnist_cnn_fp16 cifar10)
for ex in "${EXAMPLES[@]}"; do
  if [[ $ex == mnist_cnn_bf16 || $ex == mnist_cnn_fp16 ]]; then  # autocast (Note [16-bit kernels])
    exe=$BUILD/examples/mnist/mnist
    data=$mnist_data
    args=(--model cnn --amp "${ex#mnist_cnn_}")
  elif [[ $ex == mnist_* ]]; then
    exe=$BUILD/examples/mnist/mnist
    data=$mnist_data
    args=(--model "${ex#mnist_}")
  else
    exe=$BUILD/examples/cifar10/cifar10
    data=$cifar_data
    args=()
  fi
  if ((no_gpu)); then
    echo "skipped: no GPU visible" >"$LOGDIR/$ex.log"
  elif [[ ! -x $exe ]]; then
    echo "skipped: $exe was not built (CLI11 missing, or the build failed)" >"$LOGDIR/$ex.log"
  elif [[ -z $data ]]; then
    echo "skipped: no data ($data_note)" >"$LOGDIR/$ex.log"
  else
    # --limit 1024: 8 steps of 128 (mnist) or 4 of 256 (cifar10), then an evaluation pass.
    run_step "$ex" 60 "$exe" --device cuda:0 --epochs 1 --limit 1024 --data "$data" "${args[@]}"
  fi
done

# --- report ------------------------------------------------------------------------------------
status_of() {  # the result of a step for the summary table
  local name=$1 rc
  [[ -f $LOGDIR/$name.rc ]] || { head -n 1 "$LOGDIR/$name.log" 2>/dev/null || echo "not run"; return; }
  rc=$(cat "$LOGDIR/$name.rc")
  case $rc in
    0) echo "ok" ;;
    77) echo "skipped (exit 77: no GPU visible)" ;;
    124 | 137) echo "**timed out**" ;;
    *) echo "**failed (exit $rc)**" ;;
  esac
}

# The lines a benchmark printed before its table (device, peaks, method), indented.
bench_preamble() {
  local file=$1
  [[ -f $file ]] || { echo "(no output)"; return; }
  grep -v '^|' "$file" | grep -v '^\s*$' | head -n 8 | sed 's/^/    /'
}

# octo's and PyTorch's tables merged on (benchmark, config), side by side.
side_by_side() {
  python3 - "$LOGDIR/bench_gpu.log" "$LOGDIR/bench_torch.log" <<'EOF'
import sys

def rows(path):
    table = {}
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return table
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 8 or cells[0] not in ("octo", "torch"):
            continue
        _, bench, config, median, _best, unit, pct, note = cells[:8]
        table[(bench, config)] = {"median": median, "unit": unit, "pct": pct, "note": note}
    return table

def value(r):
    if not r:
        return "-"
    if r["median"] != "-":
        return r["median"]
    return r["note"].split(":")[0] or "-"

octo, torch = rows(sys.argv[1]), rows(sys.argv[2])
keys = list(octo) + [k for k in torch if k not in octo]
if not keys:
    print("(neither benchmark printed a table)")
    sys.exit(0)
print("| benchmark | config | unit | octo | torch | octo / torch | octo % of peak | torch % of peak |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for k in keys:
    o, t = octo.get(k), torch.get(k)
    unit = (o or t)["unit"]
    if unit == "-" and t:
        unit = t["unit"]
    try:
        ratio = f"{float(o['median']) / float(t['median']):.2f}"
    except (TypeError, ValueError, ZeroDivisionError):
        ratio = "-"
    print(f"| {k[0]} | {k[1]} | {unit} | {value(o)} | {value(t)} | {ratio} | "
          f"{o['pct'] if o else '-'} | {t['pct'] if t else '-'} |")
notes = [(fw, k, r["note"]) for fw, table in (("octo", octo), ("torch", torch))
         for k, r in table.items() if r["note"].lower().startswith("failed")]
if notes:
    print("\nFailed rows:\n")
    for fw, k, note in notes:
        print(f"- {fw} {k[0]} {k[1]}: {note}")
EOF
}

{
  echo "# octo GPU check"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), host: $(uname -n)"
  if commit=$(git rev-parse --short HEAD 2>/dev/null); then
    git diff --quiet HEAD 2>/dev/null || commit+=" (with uncommitted changes)"
  else
    commit="unknown (no git checkout)"
  fi
  echo "- commit: $commit"
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
  for s in configure build tests bench_gpu bench_torch "${EXAMPLES[@]}"; do
    if [[ $s == configure && ! -f $LOGDIR/configure.log ]]; then continue; fi
    echo "| $s | $(status_of "$s") |"
  done
  echo
  echo "## Benchmarks side by side (median; bench/bench_gpu and tools/bench_torch.py)"
  echo
  side_by_side
  echo
  echo "octo: "
  echo
  bench_preamble "$LOGDIR/bench_gpu.log"
  echo
  echo "PyTorch: "
  echo
  bench_preamble "$LOGDIR/bench_torch.log"
  echo
  echo "## GPU (nvidia-smi)"
  echo
  [[ -f $LOGDIR/gpu-query.log ]] && fenced_tail "$LOGDIR/gpu-query.log" 10
  fenced_tail "$LOGDIR/nvidia-smi.log" 30
  echo
  echo "## Environment"
  echo
  for n in "${ENV_NOTES[@]}"; do echo "- $n"; done
  echo "- meson $(meson --version 2>/dev/null), ninja $(ninja --version 2>/dev/null), $(c++ --version 2>/dev/null | head -n 1), python3 $(python3 -c 'import platform; print(platform.python_version())')"
  echo
  echo "## Configure and build"
  echo
  if [[ -f $LOGDIR/configure.log && $(cat "$LOGDIR/configure.rc" 2>/dev/null) != 0 ]]; then
    fenced_tail "$LOGDIR/configure.log" 40
  fi
  if ((build_rc == 0)); then
    fenced_tail "$LOGDIR/build.log" 3
  elif [[ -f $LOGDIR/build.log ]]; then  # compiler errors and ninja's verdict, not the warnings
    grep -E 'error|FAILED|^ninja: |TIMED OUT|^skipped|^\[[0-9]+/[0-9]+\]' "$LOGDIR/build.log" \
      | tail -n 60 >"$LOGDIR/build.short"
    fenced_tail "$LOGDIR/build.short" 60
  fi
  echo
  echo "## GPU tests (meson test --suite gpu)"
  echo
  if [[ -f $LOGDIR/tests.rc ]]; then
    ((${#unbuilt[@]})) && echo "Not built, so not run: ${unbuilt[*]}." && echo
    echo '```'
    grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout): ' \
      "$LOGDIR/tests.log" || echo "(no summary lines; see below)"
    echo '```'
    if [[ $(cat "$LOGDIR/tests.rc" 2>/dev/null) != 0 ]]; then
      echo
      echo "Error logs (tail):"
      echo
      fenced_tail "$LOGDIR/tests.log" 150
    fi
  else
    head -n 1 "$LOGDIR/tests.log" 2>/dev/null || echo "not run"
  fi
  echo
  echo "## Examples on cuda:0 (--epochs 1 --limit 1024)"
  echo
  echo "Data: MNIST ${mnist_data:-none}, CIFAR-10 ${cifar_data:-none}" | sed "s|$WORK/data/[a-z]*|$data_note|g"
  for ex in "${EXAMPLES[@]}"; do
    echo
    echo "### $ex"
    echo
    fenced_tail "$LOGDIR/$ex.log" 15
  done
} >"$REPORT"

if [[ -n ${OUT:-} ]]; then
  [[ -f $BUILD/meson-logs/testlog.txt ]] && cp "$BUILD/meson-logs/testlog.txt" "$OUT/gpu_testlog.txt"
  for b in bench_gpu bench_torch; do
    [[ -f $LOGDIR/$b.log ]] && cp "$LOGDIR/$b.log" "$OUT/$b.log"
  done
fi
say "report: $REPORT"
if ((${#FAILED[@]})); then
  say "FAILED: ${FAILED[*]}"
  exit 1
fi
say "all steps passed"
exit 0
