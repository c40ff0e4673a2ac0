#!/usr/bin/env python3
"""PyTorch twin of bench/bench_cpu.cpp: the same CPU measurements, the same JSON lines.

    OMP_NUM_THREADS=2 python3 bench/torch_cpu.py --threads 2 [--quick] [--only op,sgemm,conv,prep,bnrelu,train]

PyTorch is used for benchmarking only (pip); when it cannot be imported this prints one line
saying why and exits 0. The models are tools/bench_torch.py's twins of examples/mnist/models.h
and examples/cifar10/models.h, layer for layer. bench/run.py drives it.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))


def time_median(fn, warmup, reps):
    """Seconds of one call of fn: warmup untimed calls, then the median of reps timed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class Emitter:
    def __init__(self, threads):
        self.threads = threads

    def __call__(self, bench, config, value, unit, reps):
        print(json.dumps({"framework": "torch", "bench": bench, "config": config,
                          "threads": self.threads, "value": value, "unit": unit, "reps": reps}),
              flush=True)
        print(f"  torch {bench:<14} {config:<28} {self.threads} thr: {value:10.2f} {unit}",
              file=sys.stderr, flush=True)


def op_overhead(torch, emit, quick):
    """Forward + backward of one 8x8 float32 add with autograd, microseconds per op."""
    n, reps = 1000, (7 if quick else 21)
    x = torch.randn(8, 8, requires_grad=True)
    h0 = torch.randn(8, 8)

    def chain():
        h = h0
        for _ in range(n):
            h = h + x
        h.sum().backward()
        x.grad.zero_()

    s = time_median(chain, 3, reps)
    emit("op_overhead", "8x8 add fwd+bwd", s / n * 1e6, "us/op", reps)


def sgemm(torch, emit, quick):
    n, reps = 1024, (5 if quick else 15)
    a, b = torch.randn(n, n), torch.randn(n, n)
    with torch.no_grad():
        s = time_median(lambda: torch.matmul(a, b), 2, reps)
    emit("sgemm", "1024^3", 2.0 * n ** 3 / s / 1e9, "GFLOP/s", reps)


def prep(torch, emit, quick):
    """uint8 batch -> float32 normalised per channel, microseconds per batch of 128: the batched
    form of torchvision's ToTensor + Normalize, written in place (one conversion, three passes)."""
    reps = 31 if quick else 101
    cases = [("prep_mnist", (128, 1, 28, 28), [0.5], [0.5]),
             ("prep_cifar", (128, 3, 32, 32), [0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616])]
    for name, shape, mean, std in cases:
        u8 = torch.randint(0, 256, shape, dtype=torch.uint8)
        m = torch.tensor(mean).view(-1, 1, 1)
        sd = torch.tensor(std).view(-1, 1, 1)
        with torch.no_grad():
            s = time_median(lambda: u8.float().div_(255).sub_(m).div_(sd), 5, reps)
        emit(name, "[" + ", ".join(map(str, shape)) + "] uint8", s * 1e6, "us/batch", reps)


def bn_relu(torch, emit, quick):
    """relu(batch_norm(x)) forward + backward in training on the MNIST CNN's first block's
    activations [128, 12, 28, 28], microseconds (PyTorch's eager mode has no fused kernel)."""
    reps = 11 if quick else 41
    shape = (128, 12, 28, 28)
    x = torch.randn(*shape, requires_grad=True)
    w, b = torch.ones(12, requires_grad=True), torch.zeros(12, requires_grad=True)
    rm, rv = torch.zeros(12), torch.ones(12)
    g = torch.randn(*shape)
    F = torch.nn.functional

    def step():
        F.relu(F.batch_norm(x, rm, rv, w, b, training=True)).backward(g)
        x.grad = w.grad = b.grad = None

    s = time_median(step, 3, reps)
    emit("bn_relu", "[" + ", ".join(map(str, shape)) + "] fwd+bwd", s * 1e6, "us/iter", reps)


def conv(torch, emit, quick):
    """The MNIST CNN's largest conv (LeNet width 2's second): 12 -> 32, 5x5, 14x14, batch 128."""
    b, cin, cout, k, hw = 128, 12, 32, 5, 14
    out_hw = hw - k + 1
    reps = 5 if quick else 15
    x, w, bias = torch.randn(b, cin, hw, hw), torch.randn(cout, cin, k, k), torch.randn(cout)
    with torch.no_grad():
        s = time_median(lambda: torch.nn.functional.conv2d(x, w, bias), 2, reps)
    flops = 2.0 * b * cout * out_hw * out_hw * cin * k * k
    emit("conv2d", "128x12x14x14 * 32x12x5x5", flops / s / 1e9, "GFLOP/s", reps)


def train_rate(torch, model, shape, label_smoothing, warmup, reps, amp=None):
    """Samples/s of zero_grad + forward + cross-entropy + backward + SGD (Nesterov momentum 0.9,
    weight decay 5e-4, as the examples) on one fixed random batch, median of the timed steps."""
    torch.manual_seed(0)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4,
                          nesterov=True)
    x = torch.randn(*shape)
    y = torch.randint(0, 10, (shape[0],))

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
            loss = torch.nn.functional.cross_entropy(model(x), y, label_smoothing=label_smoothing)
        loss.backward()
        opt.step()

    return shape[0] / time_median(step, warmup, reps)


def train(torch, emit, quick):
    import bench_torch as twins  # tools/bench_torch.py: the examples' models in PyTorch

    nn = torch.nn
    rows = [("train_mlp", (128, 1, 28, 28), lambda: twins.mlp(nn), 0.0, 50, None),
            ("train_mlp_bf16", (128, 1, 28, 28), lambda: twins.mlp(nn), 0.0, 50, torch.bfloat16),
            ("train_cnn", (128, 1, 28, 28), lambda: twins.lenet(nn, 2, True), 0.0, 20, None),
            ("train_cnn_bf16", (128, 1, 28, 28), lambda: twins.lenet(nn, 2, True), 0.0, 20,
             torch.bfloat16),
            ("train_cifar10", (128, 3, 32, 32), lambda: twins.resnet9(nn, 16), 0.2, 5, None)]
    for name, shape, make, smoothing, reps, amp in rows:
        if quick:
            reps = max(3, reps // 4)
        rate = train_rate(torch, make(), shape, smoothing, 2 if quick else 5, reps, amp)
        emit(name, "batch 128", rate, "samples/s", reps)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="op,sgemm,conv,prep,bnrelu,train")
    args = p.parse_args()
    try:
        import torch
    except Exception as e:  # benchmarking only: never a build or test dependency
        print(f"torch_cpu: skipped: `import torch` failed ({type(e).__name__}: {e})")
        return 0
    torch.set_num_threads(max(1, args.threads))
    print(f"torch_cpu: torch {torch.__version__}, {torch.get_num_threads()} thread(s)"
          f"{', quick' if args.quick else ''}", file=sys.stderr, flush=True)
    emit = Emitter(args.threads)
    only = set(args.only.split(","))
    for key, fn in [("op", op_overhead), ("sgemm", sgemm), ("conv", conv), ("prep", prep),
                    ("bnrelu", bn_relu), ("train", train)]:
        if key in only:
            fn(torch, emit, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
