#!/usr/bin/env python3
"""The CPU benchmark suite: octo (build/bench/bench_cpu) beside PyTorch (bench/torch_cpu.py).

    python3 bench/run.py [--quick] [--rounds N] [--json out.json] [--builddir build]

Runs each half at OMP_NUM_THREADS=1 and =2 (octo also gets --threads, i.e. set_num_threads),
the MNIST example for two MLP epochs at each thread count (the second, steady-state one is
the epoch row; the first, with one-time setup, is shown beside it), joins the JSON lines and prints a
markdown table: octo, PyTorch, the ratio (octo/PyTorch, > 1 = octo faster) and issue 14's target
with met / NOT met. Progress goes to stderr. --quick keeps the whole run under about 2 minutes.
--rounds N repeats everything N times (octo and PyTorch alternating within each round) and reports
each row's median over the rounds (--stat best: the best round), for machines whose neighbours
make single runs unreliable.
See docs/benchmarks.md ("The suite: bench/run.py").
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
THREADS = (1, 2)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_json_lines(cmd, threads, timeout):
    """Runs cmd with OMP_NUM_THREADS=threads (stderr passes through) and returns its JSON lines
    and its other stdout lines."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    log(f"$ OMP_NUM_THREADS={threads} {' '.join(cmd)}")
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, timeout=timeout,
                           cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        log(f"  timed out after {timeout} s")
        return [], [f"timed out after {timeout} s"]
    results, other = [], []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            results.append(json.loads(line))
        elif line:
            other.append(line)
            log("  " + line)
    if p.returncode != 0:
        other.append(f"exit status {p.returncode}")
        log(f"  exit status {p.returncode}")
    return results, other


def mnist_epoch(builddir, threads, timeout):
    """samples/s of the first and the second MLP epoch of examples/mnist (Fashion-MNIST), as the
    example prints them (the training loop only, not the test pass), or (None, None, reason).
    The first epoch also pays the process's one-time costs (oneDNN's first GEMM call sets up its
    kernels); the second is the steady state every later epoch runs at."""
    exe = os.path.join(builddir, "examples", "mnist", "mnist")
    if not os.path.exists(exe):
        return None, None, f"{exe} not built"
    cmd = [exe, "--model", "mlp", "--epochs", "2", "--threads", str(threads)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    log(f"$ OMP_NUM_THREADS={threads} {' '.join(cmd)}")
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None, None, f"timed out after {timeout} s"
    rates = {}
    for epoch in (1, 2):
        m = re.search(rf"^epoch {epoch}: .*?([0-9.]+) samples/s", p.stdout, re.M)
        if m:
            log("  " + m.group(0))
            rates[epoch] = float(m.group(1))
    if p.returncode != 0 or len(rates) != 2:
        why = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[0]
        return None, None, why
    return rates[1], rates[2], ""


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (under ~2 minutes)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the whole suite N times; each row is the median over rounds")
    ap.add_argument("--stat", choices=("median", "best"), default="median",
                    help="each row over the rounds: the median (default) or the best round "
                         "(fastest), for machines where a neighbour takes a core in some rounds")
    ap.add_argument("--json", help="write all measurements and the table's rows here")
    ap.add_argument("--builddir", default="build", help="meson build directory (default build)")
    args = ap.parse_args()
    builddir = os.path.abspath(os.path.join(ROOT, args.builddir)
                               if not os.path.isabs(args.builddir) else args.builddir)
    bench_cpu = os.path.join(builddir, "bench", "bench_cpu")
    if not os.path.exists(bench_cpu):
        log(f"run.py: {bench_cpu} not found; build it: ninja -C {args.builddir} bench/bench_cpu")
        return 1
    quick = ["--quick"] if args.quick else []
    timeout = 600
    results, notes = [], []
    torch_skipped = None
    if args.rounds < 1:
        log(f"run.py: --rounds must be at least 1, got {args.rounds}")
        return 2
    for rnd, t in [(rnd, t) for rnd in range(args.rounds) for t in THREADS]:
        first = len(results)
        if args.rounds > 1:
            log(f"--- round {rnd + 1} of {args.rounds}, {t} thread(s)")
        only = "peak,op,sgemm,conv,prep,bnrelu,train" + (",dp" if t == 2 else "")
        r, other = run_json_lines([bench_cpu, "--threads", str(t), "--only", only] + quick, t,
                                  timeout)
        results += r
        notes += [f"bench_cpu ({t} thr): {o}" for o in other]
        r, other = run_json_lines([sys.executable, os.path.join(HERE, "torch_cpu.py"),
                                   "--threads", str(t)] + quick, t, timeout)
        results += r
        for o in other:
            if o.startswith("torch_cpu: skipped"):
                torch_skipped = o
            else:
                notes.append(f"torch_cpu ({t} thr): {o}")
        if t == 1:  # libtorch's C++ API, for the per-op overhead row (skips without torch)
            r, other = run_json_lines([os.path.join(HERE, "libtorch_op_overhead.sh"), "1"] + quick,
                                      t, timeout)
            results += r
            notes += [f"libtorch_op_overhead: {o}" for o in other]
        first_epoch, later_epoch, why = mnist_epoch(builddir, t, timeout)
        if first_epoch is None:
            notes.append(f"mnist mlp epoch ({t} thr): {why}")
        else:
            for bench, rate in (("mlp_epoch1", first_epoch), ("mlp_epoch", later_epoch)):
                results.append({"framework": "octo", "bench": bench, "config": "Fashion-MNIST",
                                "threads": t, "value": rate, "unit": "samples/s", "reps": 1})
        for r in results[first:]:
            r["round"] = rnd

    def get(fw, bench, t):
        per_round = {}
        for r in results:
            if r["framework"] == fw and r["bench"] == bench and r["threads"] == t:
                # The FP32 peak is measured twice per run (the best counts); every other row once.
                per_round[r["round"]] = max(per_round.get(r["round"], r["value"]), r["value"])
        if not per_round:
            return None
        vals = sorted(per_round.values())
        if args.stat == "best":  # times (us/...) are best when lowest, rates when highest
            lower_is_better = any(r["unit"].startswith("us/") for r in results
                                  if r["framework"] == fw and r["bench"] == bench)
            return vals[0] if lower_is_better else vals[-1]
        mid = len(vals) // 2
        return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2

    def fmt(v, unit=""):
        if v is None:
            return "-"
        s = f"{v:.2f}" if v < 100 else f"{v:.0f}"
        return s + unit

    rows = []

    def add(name, t, octo, torch, ratio, target, met, unit):
        rows.append({"row": name, "threads": t, "octo": octo, "torch": torch, "ratio": ratio,
                     "target": target, "met": met, "unit": unit})

    def status(met):
        return "-" if met is None else ("met" if met else "NOT met")

    # Per-op overhead (lower is better): ratio = torch time / octo time.
    o, p = get("octo", "op_overhead", 1), get("torch", "op_overhead", 1)
    ratio = p / o if o and p else None
    add("per-op overhead, 8x8 add fwd+bwd (us/op)", 1, o, p, ratio, ">= 1.0x",
        None if ratio is None else ratio >= 1.0, "us/op")
    lt = get("libtorch", "op_overhead", 1)
    ratio = lt / o if o and lt else None
    add("per-op overhead vs libtorch C++ (us/op)", 1, o, lt, ratio, ">= 1.0x",
        None if ratio is None else ratio >= 1.0, "us/op")
    for t in THREADS:
        add("FP32 peak, FMA loop (GFLOP/s)", t, get("octo", "fp32_peak", t), None, None, "-",
            None, "GFLOP/s")
    for t in THREADS:
        peak = get("octo", "fp32_peak", t)
        o, p = get("octo", "sgemm", t), get("torch", "sgemm", t)
        pct = o / peak if o and peak else None
        add("SGEMM 1024^3 (GFLOP/s, % of peak)", t, o, p, o / p if o and p else None,
            ">= 80% of peak", None if pct is None else pct >= 0.8, "GFLOP/s")
    for t in THREADS:
        o, p = get("octo", "conv2d", t), get("torch", "conv2d", t)
        add("conv2d 128x12x14x14 * 32x12x5x5 (GFLOP/s, % of peak)", t, o, p,
            o / p if o and p else None, "-", None, "GFLOP/s")
    for name, label in (("prep_mnist", "MNIST"), ("prep_cifar", "CIFAR-10")):
        for t in THREADS:  # lower is better: ratio = PyTorch's time / octo's
            o, p = get("octo", name, t), get("torch", name, t)
            add(f"batch prep {label} 128, uint8 -> normalized float32 (us/batch)", t, o, p,
                p / o if o and p else None, "-", None, "us/batch")
        for t in THREADS:
            o, c = get("octo", name, t), get("octo", name + "_composite", t)
            add(f"batch prep {label}: normalize(uint8) vs normalize(to_float) (us/batch)", t, o,
                None, c / o if o and c else None, "-", None, "us/batch")
    for t in THREADS:  # lower is better: ratio = PyTorch's time / octo's
        o, p = get("octo", "bn_relu", t), get("torch", "bn_relu", t)
        add("BatchNorm2d+ReLU fwd+bwd 128x12x28x28 (us/iter)", t, o, p,
            p / o if o and p else None, "-", None, "us/iter")
    for t in THREADS:
        o, c = get("octo", "bn_relu", t), get("octo", "bn_relu_composite", t)
        add("BatchNorm2d+ReLU: fused vs relu(batch_norm) (us/iter)", t, o, None,
            c / o if o and c else None, "-", None, "us/iter")
    targets = {("train_mlp", 1): 1.0, ("train_mlp", 2): 1.2, ("train_cnn", 1): 1.0,
               ("train_cnn", 2): 1.1}
    names = {"train_mlp": "MNIST MLP training (samples/s)",
             "train_mlp_bf16": "MNIST MLP training, autocast bf16 (samples/s)",
             "train_cnn": "MNIST CNN training (samples/s)",
             "train_cnn_bf16": "MNIST CNN training, autocast bf16 (samples/s)",
             "train_cifar10": "CIFAR-10 ResNet-9 training (samples/s)"}
    for bench in ("train_mlp", "train_mlp_bf16", "train_cnn", "train_cnn_bf16", "train_cifar10"):
        for t in THREADS:
            o, p = get("octo", bench, t), get("torch", bench, t)
            ratio = o / p if o and p else None
            goal = targets.get((bench, t))
            add(names[bench], t, o, p, ratio, f">= {goal}x" if goal else "-",
                None if goal is None or ratio is None else ratio >= goal, "samples/s")
    for model, label in (("mlp", "MLP"), ("cnn", "CNN")):
        for t in THREADS:
            o, p = get("octo", f"train_{model}_bf16", t), get("octo", f"train_{model}", t)
            ot, pt = get("torch", f"train_{model}_bf16", t), get("torch", f"train_{model}", t)
            add(f"MNIST {label} autocast bf16 vs float32, same framework (samples/s)", t,
                o / p if o and p else None, ot / pt if ot and pt else None, None, "-", None, "x")
    o, one = get("octo", "dp_cpu0_cpu1", 2), get("octo", "dp_one_device", 2)
    ratio = o / one if o and one else None
    add("CNN DataParallel cpu:0,cpu:1 vs 1 device 2 thr (samples/s)", 2, o, None, ratio,
        ">= 1.3x", None if ratio is None else ratio >= 1.3, "samples/s")
    for t in THREADS:
        e, s = get("octo", "mlp_epoch", t), get("octo", "train_mlp", t)
        ratio = e / s if e and s else None
        add("MLP epoch vs its step rate (samples/s)", t, e, None, ratio, ">= 90% of step rate",
            None if ratio is None else ratio >= 0.9, "samples/s")
    for t in THREADS:  # the first epoch, with the process's one-time setup: shown, no target
        e, s = get("octo", "mlp_epoch1", t), get("octo", "train_mlp", t)
        add("MLP first epoch (one-time setup included) vs step rate (samples/s)", t, e, None,
            e / s if e and s else None, "-", None, "samples/s")

    peaks = {t: get("octo", "fp32_peak", t) for t in THREADS}
    lines = ["| row | threads | octo | PyTorch | ratio | target | status |",
             "|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        o, p, t = r["octo"], r["torch"], r["threads"]
        os_, ps = fmt(o), fmt(p)
        if "% of peak" in r["row"] and peaks.get(t):
            if o:
                os_ += f" ({100 * o / peaks[t]:.0f}%)"
            if p:
                ps += f" ({100 * p / peaks[t]:.0f}%)"
        if "vs float32" in r["row"]:
            os_, ps = fmt(o, "x"), fmt(p, "x")
        if r["row"].startswith("CNN DataParallel"):
            ps = f"1 device: {fmt(one)}"
        if r["row"].startswith(("MLP epoch", "MLP first epoch")):
            ps = f"step: {fmt(get('octo', 'train_mlp', t))}"
        if "fused vs relu(batch_norm)" in r["row"]:
            ps = f"composite: {fmt(get('octo', 'bn_relu_composite', t))}"
        if "vs normalize(to_float)" in r["row"]:
            key = "prep_mnist" if "MNIST" in r["row"] else "prep_cifar"
            ps = f"composite: {fmt(get('octo', key + '_composite', t))}"
        if r["ratio"] is None:
            rs = "-"
        elif r["row"].startswith(("MLP epoch", "MLP first epoch")):
            rs = f"{100 * r['ratio']:.0f}%"
        else:
            rs = f"{r['ratio']:.2f}x"
        lines.append(f"| {r['row']} | {t} | {os_} | {ps} | {rs} | {r['target']} | "
                     f"{status(r['met'])} |")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rounds = f", {args.stat} of {args.rounds} rounds" if args.rounds > 1 else ""
    header = (f"CPU suite, {when}, {cpu_model()}, {os.cpu_count()} CPUs"
              f"{', --quick' if args.quick else ''}{rounds}. ratio = octo/PyTorch (> 1 = octo faster; "
              "per-op overhead, batch prep and BatchNorm2d+ReLU: PyTorch's time / octo's); "
              "DataParallel, epoch, normalize(uint8) and fused BatchNorm2d+ReLU rows compare "
              "octo with itself.")
    print(header + "\n")
    print("\n".join(lines))
    if torch_skipped:
        print(f"\n{torch_skipped}")
    for n in notes:
        print(f"\nnote: {n}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": when, "machine": cpu_model(), "cpus": os.cpu_count(),
                       "quick": args.quick, "stat": args.stat, "torch_skipped": torch_skipped, "notes": notes,
                       "results": results, "rows": rows}, f, indent=1)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
