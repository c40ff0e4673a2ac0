#!/usr/bin/env python3
"""PyTorch eager reference for bench/bench_gpu.cpp: the same GEMMs and training steps on cuda:0.

    python3 tools/bench_torch.py            # about half a minute on an H100/H200
    python3 tools/bench_torch.py --quick    # fewer repeats, no 8192^3

Prints the same markdown table as bench_gpu (framework = torch), row for row, with the same
sizes, batch sizes and timing method. Exits 0 after printing why it skipped when torch cannot be
imported or sees no GPU (it never installs or downloads anything); 1 when a row failed.
"""
import statistics
import sys
import time

# Dense H100/H200 SXM peaks in TFLOP/s from NVIDIA's datasheets (tensor-core rates there are
# "with sparsity", twice these); the same figures as bench/bench_gpu.cpp.
PEAK = {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}


def row(bench, config, median, best, unit, peak, note):
    pct = f"{100 * median / peak:.0f}%" if peak else "-"
    print(f"| torch | {bench} | {config} | {median:.1f} | {best:.1f} | {unit} | {pct} | {note} |",
          flush=True)


def row_na(bench, config, note):
    print(f"| torch | {bench} | {config} | - | - | - | - | {note} |", flush=True)


def stats(rates):
    return statistics.median(rates), max(rates)


def time_matmul(torch, n, dtype, warmup, reps):
    """TFLOP/s of n^3 matmuls: each call timed between two CUDA events after warm-up."""
    # Drawn in float32 and converted, as bench_gpu does (never zeros).
    a = torch.randn(n, n, device="cuda:0").to(dtype)
    b = torch.randn(n, n, device="cuda:0").to(dtype)
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


def lenet(nn, width=2, batchnorm=True):
    """examples/mnist's LeNet: conv5x5(pad 2)-BN-relu-pool2, conv5x5-BN-relu-pool2, 3 linears."""
    c1, c2 = 6 * width, 16 * width

    def block(cin, cout, pad):
        layers = [nn.Conv2d(cin, cout, 5, padding=pad, bias=not batchnorm)]
        if batchnorm:
            layers.append(nn.BatchNorm2d(cout))
        return nn.Sequential(*layers, nn.ReLU(), nn.MaxPool2d(2))

    return nn.Sequential(block(1, c1, 2), block(c1, c2, 0), nn.Flatten(),
                         nn.Linear(c2 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def resnet9(nn, width=16):
    """examples/cifar10's ResNet-9 with channel widths w, 2w, 4w, 8w."""
    def conv_bn(cin, cout, pool=False):
        layers = [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
        if pool:
            layers.append(nn.MaxPool2d(2))
        return nn.Sequential(*layers)

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.res1, self.res2 = conv_bn(c, c), conv_bn(c, c)

        def forward(self, x):
            return x + self.res2(self.res1(x))

    w = width
    return nn.Sequential(conv_bn(3, w), conv_bn(w, 2 * w, True), Residual(2 * w),
                         conv_bn(2 * w, 4 * w, True), conv_bn(4 * w, 8 * w, True), Residual(8 * w),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8 * w, 10))


def mlp(nn):
    """examples/mnist's MLP: 784-256-128-10 with ReLU."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                         nn.ReLU(), nn.Linear(128, 10))


def time_training(torch, model, shape, label_smoothing, warmup, steps, max_seconds):
    """images/s of forward + cross-entropy + backward + SGD on one random batch reused every step;
    each timed step alone between two synchronisations (wall clock). Returns stats, steps."""
    nn = torch.nn
    torch.manual_seed(0)
    model = model.to("cuda:0").train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4,
                          nesterov=True)
    batch = shape[0]
    x = torch.randn(*shape, device="cuda:0")
    y = torch.randint(0, 10, (batch,), device="cuda:0")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y, label_smoothing=label_smoothing)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    rates = []
    begin = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        rates.append(batch / (t1 - t0))
        if t1 - begin > max_seconds:
            break
    return stats(rates), len(rates)


def guarded(bench, config, fn):
    try:
        fn()
        return True
    except Exception as e:  # reported in the table; the remaining rows still run
        msg = (str(e).splitlines() or [type(e).__name__])[0].replace("|", "/")
        row_na(bench, config, f"failed: {msg}")
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
    # As octo: float32 is true float32 unless a row turns TF32 on; 16-bit GEMMs reduce in float32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    p = torch.cuda.get_device_properties(0)
    print(f"bench_torch: cuda:0 = {p.name}, compute capability {p.major}.{p.minor}, "
          f"{p.multi_processor_count} SMs, memory {p.total_memory / 2**30:.0f} GiB; "
          f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
          f"{torch.backends.cudnn.version()}), eager, cudnn.benchmark "
          f"{torch.backends.cudnn.benchmark}")
    print("Peaks: H100/H200 SXM datasheet dense TFLOP/s, not measured: " +
          ", ".join(f"{k.upper()} {v:.0f}" for k, v in PEAK.items()) + ".\n")
    print("| framework | benchmark | config | median | best | unit | % of peak | note |")
    print("|---|---|---|---:|---:|---|---:|---|")
    ok = True
    sizes = [4096] if quick else [4096, 8192]
    gemms = [("gemm fp32", torch.float32, False, "fp32"), ("gemm tf32", torch.float32, True, "tf32"),
             ("gemm bf16", torch.bfloat16, False, "bf16"), ("gemm fp16", torch.float16, False, "fp16")]
    for bench, dtype, tf32, peak_key in gemms:
        for n in sizes:
            def gemm(bench=bench, dtype=dtype, tf32=tf32, peak_key=peak_key, n=n):
                torch.backends.cuda.matmul.allow_tf32 = tf32
                try:
                    reps = 10 if quick else (30 if n <= 4096 else 10)
                    med, best = time_matmul(torch, n, dtype, 3, reps)
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = False
                peak = PEAK[peak_key]
                row(bench, f"{n}^3", med, best, "TFLOP/s", peak,
                    f"% of the {peak:.0f} TFLOP/s datasheet peak")
            ok &= guarded(bench, f"{n}^3", gemm)

    steps = 10 if quick else 30
    nn = torch.nn
    models = [
        ("train mnist cnn", 128, (1, 28, 28), lambda: lenet(nn), 0.0,
         "examples/mnist LeNet width 2 + BN, 1x28x28"),
        ("train cifar10 resnet9", 512, (3, 32, 32), lambda: resnet9(nn), 0.2,
         "examples/cifar10 ResNet-9 width 16, 3x32x32, label smoothing 0.2"),
        ("train mnist mlp", 512, (784,), lambda: mlp(nn), 0.0, "examples/mnist MLP 784-256-128-10"),
    ]
    for bench, batch, image, make, smoothing, note in models:
        def train(bench=bench, batch=batch, image=image, make=make, smoothing=smoothing,
                  note=note):
            (med, best), timed = time_training(torch, make(), (batch, *image), smoothing, 5, steps,
                                               20.0)
            row(bench, f"batch {batch}", med, best, "images/s", 0,
                f"{note}; median of {timed} steps")
        ok &= guarded(bench, f"batch {batch}", train)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
