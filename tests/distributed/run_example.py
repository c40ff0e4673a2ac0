#!/usr/bin/env python3
"""The MNIST example in distributed mode, as a user runs it (tiny generated data):

    run_example.py MPIRUN DDP_WORKER MNIST_BINARY

1. `mpirun -np 2 mnist --distributed ... --save A`: rank 0 alone prints the epoch line and
   writes the CSV and the checkpoint;
2. one process resumes A (and says how the schedule was realigned);
3. one process saves B, and `mpirun -np 2 ... --distributed --resume B` continues it;
4. `--distributed --devices cpu:0,cpu:1` is a usage error (exit 2).
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from run_mpi import mpirun_command, without_leak_check  # noqa: E402


def run(cmd, expect_rc=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300, stdin=subprocess.DEVNULL, env=without_leak_check(os.environ))
    print(f"$ {' '.join(cmd)}\n{p.stdout}[exit {p.returncode}]")
    if p.returncode != expect_rc:
        print(f"FAIL: expected exit {expect_rc}")
        sys.exit(1)
    return p.stdout


def expect(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def main():
    mpirun, worker, mnist = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="octo_ddp_example_")
    data = os.path.join(tmp, "data")
    run([worker, "mnist_data", data])
    common = ["--data", data, "--epochs", "2", "--batch-size", "64"]
    a, b, csv = (os.path.join(tmp, n) for n in ("a.safetensors", "b.safetensors", "m.csv"))
    out = run(mpirun_command(mpirun, 2) + [mnist, "--distributed", "--stop-after", "1", "--save", a,
                                           "--csv", csv] + common)
    expect(out.count("epoch 1: train loss") == 1, "only rank 0 prints the epoch line")
    expect("in each of 2 processes (DistributedDataParallel over mpi" in out,
           "the run says it is distributed")
    expect(os.path.exists(a), "rank 0 saved the checkpoint")
    expect(len(open(csv).read().strip().splitlines()) == 2, "one CSV header and one epoch row")
    out = run([mnist, "--resume", a] + common)
    expect("resumed from" in out and "epoch 2: train loss" in out,
           "a distributed checkpoint resumes in one process")
    expect("learning-rate schedule continues at step" in out,
           "the schedule is realigned to this run's batches per epoch")
    run([mnist, "--stop-after", "1", "--save", b] + common)
    out = run(mpirun_command(mpirun, 2) + [mnist, "--distributed", "--resume", b] + common)
    expect(out.count("resumed from") == 1 and out.count("epoch 2: train loss") == 1,
           "a single-process checkpoint resumes in a distributed run")
    out = run([mnist, "--distributed", "--devices", "cpu:0,cpu:1"] + common, expect_rc=2)
    expect("cannot be combined with --distributed" in out, "--devices with --distributed is refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
