#!/usr/bin/env python3
"""PyTorch reference for a DistributedDataParallel CPU benchmark: examples/mnist's LeNet under DDP.

    python3 tools/bench_torch_ddp.py --ranks 2                        # 2 processes, 1 thread each
    python3 tools/bench_torch_ddp.py --ranks 1 --steps 5 --warmup 2   # world size 1, still DDP
    python3 tools/bench_torch_ddp.py --ranks 2 --batch 64 --json out.json

Spawns --ranks processes (torch.multiprocessing, start method "spawn"), each limited to one
intra-op and one inter-op thread, joined by the gloo backend over 127.0.0.1 on a free port the
parent picks. --ranks 1 goes through DDP as well (world size 1), so its overhead is comparable.

Each rank: torch.manual_seed(0); the LeNet of tools/bench_torch.py (width 2, BatchNorm) wrapped
in torch.nn.parallel.DistributedDataParallel with its defaults (bucket_cap_mb 25, buffers
broadcast); SGD lr 0.01, momentum 0.9, weight decay 5e-4, Nesterov; one fixed random batch
[--batch, 1, 28, 28] of its own (drawn after torch.manual_seed(1 + rank)) with labels in 0..9.
A step is zero_grad(set_to_none=True), cross-entropy forward, backward, SGD step. After
--warmup steps, --steps steps are timed by wall clock between two dist.barrier() calls; the
loop stops early once it has run --max-seconds (the ranks agree on when, by an all-reduce every
half second or so), and what was timed is reported.

Rank 0 prints one markdown row on stdout (notes go to stderr):

    | torch DDP (gloo) | N ranks x 1 thread | batch B/rank | <samples/s> |

where samples/s = N * B * timed steps / seconds; with --json FILE it also writes
{"framework": "torch", "ranks", "batch_per_rank", "steps" (timed), "seconds", "samples_per_s"}.

Exits 0 after printing why it skipped when torch cannot be imported (it never installs or
downloads anything); 1 when a rank fails (the others are terminated within seconds) or the run
passes --timeout; 2 on bad arguments.
"""
import argparse
import datetime
import importlib.util
import json
import os
import socket
import sys
import time
import warnings
from pathlib import Path


def _load_bench_torch():
    """tools/bench_torch.py as a module (for its lenet), found beside this file."""
    path = Path(__file__).resolve().with_name("bench_torch.py")
    spec = importlib.util.spec_from_file_location("bench_torch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # stdlib imports only at its top level
    return module


# At module level, so that spawned ranks have both too: they run this file's top level before
# they import torch.multiprocessing to unpickle their task. torch warns on import when numpy is
# missing, and numpy plays no part here.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
lenet = _load_bench_torch().lenet


def _import_torch():
    import torch
    return torch


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--ranks", type=positive_int, default=2, help="world size, default 2")
    p.add_argument("--steps", type=positive_int, default=30, help="timed steps, default 30")
    p.add_argument("--warmup", type=non_negative_int, default=5, help="untimed steps, default 5")
    p.add_argument("--batch", type=positive_int, default=128, help="samples per rank, default 128")
    p.add_argument("--json", metavar="FILE", help="also write the result as a JSON object")
    p.add_argument("--max-seconds", type=positive_float, default=60.0,
                   help="stop the timed loop early after this long, default 60")
    p.add_argument("--timeout", type=positive_float, default=None,
                   help="kill every rank and fail past this many seconds in all "
                        "(default: --max-seconds + 300)")
    args = p.parse_args(argv)
    if args.json and not Path(args.json).resolve().parent.is_dir():
        p.error(f"argument --json: no folder {Path(args.json).resolve().parent}")
    return args


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_rank(rank, world, port, args):
    """One DDP rank: set up, warm up, time, and (rank 0) report. Raises on any failure."""
    torch = _import_torch()
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    import torch.distributed as dist
    nn = torch.nn

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(lenet(nn, width=2, batchnorm=True).train())
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4,
                              nesterov=True)
        torch.manual_seed(1 + rank)
        x = torch.randn(args.batch, 1, 28, 28)
        y = torch.randint(0, 10, (args.batch,))

        def step():
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        def agreed_max(value):
            t = torch.tensor([value], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return t.item()

        dist.barrier()
        w0 = time.perf_counter()
        for _ in range(args.warmup):
            step()
        per_step = (time.perf_counter() - w0) / args.warmup if args.warmup else 0.0
        # Every rank must run the same number of steps (or DDP's all-reduces hang), so the early
        # stop is decided together: an all-reduce every `check_every` steps, about every 0.5 s.
        check_every = max(1, int(0.5 / agreed_max(per_step))) if per_step > 0 else 1

        dist.barrier()
        t0 = time.perf_counter()
        timed = 0
        while timed < args.steps:
            step()
            timed += 1
            if timed % check_every == 0 and timed < args.steps:
                if agreed_max(float(time.perf_counter() - t0 >= args.max_seconds)) > 0:
                    break
        dist.barrier()
        seconds = time.perf_counter() - t0

        if rank == 0:
            rate = world * args.batch * timed / seconds
            print(f"| torch DDP (gloo) | {world} ranks x 1 thread | batch {args.batch}/rank | "
                  f"{rate:.1f} |", flush=True)
            stopped = (f"; stopped after {timed} of {args.steps} steps (--max-seconds "
                       f"{args.max_seconds:g})" if timed < args.steps else "")
            print(f"bench_torch_ddp: torch {torch.__version__}, {world} ranks, {timed} steps of "
                  f"batch {args.batch}/rank in {seconds:.3f} s after {args.warmup} warm-up "
                  f"steps{stopped}", file=sys.stderr, flush=True)
            if args.json:
                result = {"framework": "torch", "ranks": world, "batch_per_rank": args.batch,
                          "steps": timed, "seconds": seconds, "samples_per_s": rate}
                with open(args.json, "w") as f:
                    json.dump(result, f, indent=2)
                    f.write("\n")
    finally:
        dist.destroy_process_group()


def stop_all(processes, grace=2.0):
    """SIGTERM, then SIGKILL after `grace` seconds, every process still alive; reap them all."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    end = time.monotonic() + grace
    for p in processes:
        p.join(max(0.0, end - time.monotonic()))
    for p in processes:
        if p.is_alive():
            p.kill()
        p.join()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        torch = _import_torch()
        import torch.distributed as dist
        import torch.multiprocessing as mp
        from torch.multiprocessing.spawn import ProcessException
    except Exception as e:
        print(f"bench_torch_ddp: skipped: `import torch` failed ({type(e).__name__}: {e})")
        return 0
    if not dist.is_available() or not dist.is_gloo_available():
        print(f"bench_torch_ddp: skipped: torch {torch.__version__} has no gloo backend")
        return 0

    # Inherited by the ranks: one OpenMP thread each, and gloo on the loopback interface only.
    os.environ["OMP_NUM_THREADS"] = "1"
    if "lo" in {name for _, name in socket.if_nameindex()}:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    timeout = args.timeout if args.timeout is not None else args.max_seconds + 300.0
    deadline = time.monotonic() + timeout

    ctx = mp.start_processes(run_rank, args=(args.ranks, free_port(), args), nprocs=args.ranks,
                             join=False, start_method="spawn")
    try:
        # join() returns True once all ranks exited 0; when one fails it terminates the others
        # (SIGTERM after the grace period, SIGKILL after another) and raises.
        while not ctx.join(timeout=0.5, grace_period=2.0):
            if time.monotonic() > deadline:
                print(f"bench_torch_ddp: failed: not done after {timeout:g} s (--timeout); "
                      f"terminating the ranks", file=sys.stderr)
                stop_all(ctx.processes)
                return 1
    except ProcessException as e:
        print(f"bench_torch_ddp: failed: rank {e.error_index} (pid {e.error_pid}): "
              f"{str(e).strip()}", file=sys.stderr)
        return 1
    finally:
        stop_all(ctx.processes)  # nothing left by now, unless interrupted
    return 0


if __name__ == "__main__":
    sys.exit(main())
