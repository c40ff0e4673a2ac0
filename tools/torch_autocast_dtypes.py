#!/usr/bin/env python3
"""Prints the dtype PyTorch's CPU autocast gives each op octo's autocast table covers, so the
table in autograd/autocast.cpp can be checked against a live PyTorch (pip install torch; never
needed by the build or the tests, which hold PyTorch's lists themselves).

    python3 tools/torch_autocast_dtypes.py
"""
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_autocast_dtypes: PyTorch is not installed (pip install torch)")

for dt in (torch.bfloat16, torch.float16):
    x, w = torch.randn(4, 5), torch.randn(3, 5)
    img, k = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    lo = torch.randn(4, 5, dtype=dt)
    p = torch.sigmoid(torch.randn(4, 5)).to(dt)
    y = torch.tensor([0, 4, 2, 1])
    with torch.autocast("cpu", dtype=dt):
        # float32 inputs: the lower-precision list casts them down.
        low = {"linear": F.linear(x, w), "mm": torch.mm(x, w.t()), "matmul": x @ w.t(),
               "bmm": torch.bmm(x[None], w.t()[None]), "conv2d": F.conv2d(img, k),
               "relu (not listed)": F.relu(x), "linear, float64": F.linear(x.double(), w.double())}
        # 16-bit inputs: the float32 list casts them up.
        up = {"cross_entropy": F.cross_entropy(lo, y), "nll_loss": F.nll_loss(lo, y),
              "mse_loss": F.mse_loss(lo, p), "l1_loss": F.l1_loss(lo, p),
              "smooth_l1_loss": F.smooth_l1_loss(lo, p), "huber_loss": F.huber_loss(lo, p),
              "binary_cross_entropy": F.binary_cross_entropy(p, p),
              "binary_cross_entropy_with_logits": F.binary_cross_entropy_with_logits(lo, p),
              "prod": torch.prod(lo, 1), "exp": torch.exp(lo), "sum": lo.sum(),
              "softmax": torch.softmax(lo, 1), "log_softmax": torch.log_softmax(lo, 1),
              "layer_norm": F.layer_norm(lo, (5,)), "logsumexp": torch.logsumexp(lo, 1),
              "pow": lo ** 2, "rsqrt": lo.abs().rsqrt()}
    name = str(dt).replace("torch.", "")
    print(f"torch {torch.__version__}, autocast('cpu', {name}):")
    for label, ops in (("float32 in", low), (f"{name} in", up)):
        for op, t in ops.items():
            print(f"  {op:36s} {label:>12s} -> {str(t.dtype).replace('torch.', '')}")
