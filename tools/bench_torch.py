#!/usr/bin/env python3
"""PyTorch eager reference for bench/bench_gpu.cpp: the same SGEMM and MLP training step on cuda:0.

    python3 tools/bench_torch.py            # about 20 s on an H100/H200
    python3 tools/bench_torch.py --quick    # fewer repeats, no 8192^3

Prints the same markdown table as bench_gpu (framework = torch). Exits 0 after printing why it
skipped when torch cannot be imported or no GPU is visible (it never installs or downloads).
"""
import statistics
import sys
import time

DATASHEET_FP32_TFLOPS = 67.0  # H100/H200 SXM dense FP32: a datasheet figure, not measured


def row(bench, config, best, median, unit, note=""):
    print(f"| torch | {bench} | {config} | {best:.1f} | {median:.1f} | {unit} | {note} |", flush=True)


def row_na(bench, config, note):
    print(f"| torch | {bench} | {config} | - | - | - | {note} |", flush=True)


def stats(rates):
    return max(rates), statistics.median(rates)


def time_matmul(torch, n, dtype, warmup, reps):
    a = torch.randn(n, n, device="cuda:0", dtype=dtype)
    b = torch.randn(n, n, device="cuda:0", dtype=dtype)
    with torch.no_grad():
        for _ in range(warmup):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(reps)]
        for start, stop in events:
            start.record()
            torch.matmul(a, b)
            stop.record()
        torch.cuda.synchronize()
    flops = 2.0 * n ** 3
    return stats([flops / (s.elapsed_time(e) * 1e-3) / 1e12 for s, e in events])


def time_mlp(torch, device, batch, chunks, steps):
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4,
                          nesterov=True)
    x = torch.randn(batch, 784, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    for _ in range(5):
        step()
    sync()
    rates = []
    for _ in range(chunks):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        rates.append(batch * steps / (time.perf_counter() - t0))
    return stats(rates)


def guarded(bench, config, fn):
    try:
        fn()
        return True
    except Exception as e:  # report in the table, keep going
        row_na(bench, config, "FAILED: " + str(e).splitlines()[0].replace("|", "/"))
        return False


def main():
    quick = "--quick" in sys.argv[1:]
    try:
        import torch
    except Exception as e:
        print(f"bench_torch: skipped: `import torch` failed ({type(e).__name__}: {e})")
        return 0
    if not torch.cuda.is_available():
        print(f"bench_torch: skipped: torch {torch.__version__} sees no CUDA device "
              f"(built with CUDA {torch.version.cuda})")
        return 0
    # Same arithmetic as octo's cuBLAS path: true FP32, no TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(0)
    print(f"bench_torch: cuda:0 = {name}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
          f"eager, TF32 off")
    print(f"FP32 peak: {DATASHEET_FP32_TFLOPS:.0f} TFLOP/s is the H100/H200 SXM *datasheet* figure, "
          f"not a measurement.\n")
    print("| framework | benchmark | config | best | median | unit | note |")
    print("|---|---|---|---:|---:|---|---|")
    ok = True
    sizes = [4096] if quick else [4096, 8192]
    for n in sizes:
        def sgemm(n=n):
            best, med = time_matmul(torch, n, torch.float32, 3, 10 if quick or n > 4096 else 30)
            row("sgemm fp32", f"{n}^3", best, med, "TFLOP/s",
                f"best = {100 * best / DATASHEET_FP32_TFLOPS:.0f}% of datasheet "
                f"{DATASHEET_FP32_TFLOPS:.0f}")
        ok &= guarded("sgemm fp32", f"{n}^3", sgemm)
    for n in sizes:
        def bf16(n=n):
            best, med = time_matmul(torch, n, torch.bfloat16, 3, 10)
            row("matmul bf16", f"{n}^3", best, med, "TFLOP/s", "tensor cores")
        ok &= guarded("matmul bf16", f"{n}^3", bf16)
    chunks = 3 if quick else 5
    for batch in (64, 512):
        def mlp(batch=batch):
            best, med = time_mlp(torch, "cuda:0", batch, chunks, 50)
            row("mlp train cuda:0", f"batch {batch}", best, med, "samples/s",
                "784-256-128-10, CE, SGD nesterov")
        ok &= guarded("mlp train cuda:0", f"batch {batch}", mlp)

    def mlp_cpu():
        best, med = time_mlp(torch, "cpu", 512, 3, 10)
        row("mlp train cpu", "batch 512", best, med, "samples/s",
            f"same step, {torch.get_num_threads()} CPU threads")
    ok &= guarded("mlp train cpu", "batch 512", mlp_cpu)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
