#!/usr/bin/env python3
"""Runs one distributed test: `mpirun -np N` real processes, then checks how the job ended.

    run_mpi.py MPIRUN NP WORKER SCENARIO [--expect-fail TEXT ...] [--within SECONDS]
               [--trace-check] [--env K=V ...]
    run_mpi.py MPIRUN NP --example ...   (see example_roundtrip below)

A passing scenario exits 0 on every rank and prints one "ok:" line per rank and check. With
--expect-fail the job must end non-zero, within --within seconds (default 60), and its output
must contain every TEXT: how the tests prove that a skipped collective or a rank that throws
ends the job instead of hanging it. Exit 77 (skipped) when mpirun is missing.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def mpirun_command(mpirun, np):
    cmd = [mpirun, "-np", str(np), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")  # CI and containers run as root
    return cmd


def without_leak_check(env):
    """Open MPI unloads its components at MPI_Finalize, so LeakSanitizer can neither name nor
    suppress their one-time allocations: under ASan, MPI processes run without the leak check
    (memory errors stay fatal; docs/testing.md)."""
    if "ASAN_OPTIONS" in env:
        env = dict(env)
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    return env


def run(cmd, env, within):
    env = without_leak_check(env)
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=within, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        print(out)
        print(f"FAIL: {' '.join(cmd)} did not end within {within} s (a hang)")
        sys.exit(1)
    took = time.monotonic() - start
    print(p.stdout)
    print(f"[{' '.join(cmd)}: exit {p.returncode} after {took:.1f} s]")
    return p.returncode, p.stdout, took


def check_trace(folder, np):
    """Every rank's trace shows an all_reduce starting before that rank's backward ended."""
    files = sorted(glob.glob(os.path.join(folder, "trace.rank*.json")))
    if len(files) != np:
        print(f"FAIL: expected {np} trace files, found {files}")
        return False
    for f in files:
        events = json.load(open(f))["traceEvents"]
        spans = [e for e in events if e.get("ph") == "X"]
        rows = {e["tid"]: e["args"]["name"] for e in events
                if e.get("ph") == "M" and e.get("name") == "thread_name"}
        backward = [s for s in spans if s["name"] == "backward"]
        comm = [s for s in spans if s["name"] == "all_reduce" and rows[s["tid"]].endswith("comm")]
        overlapped = 0
        for b in backward:
            end = b["ts"] + b["dur"]
            overlapped += any(b["ts"] <= c["ts"] < end for c in comm)
        print(f"{os.path.basename(f)}: {len(backward)} backward spans, {len(comm)} all_reduce "
              f"spans on the comm row; {overlapped} backward passes had an all_reduce start "
              f"before they ended")
        if not backward or overlapped == 0:
            print(f"FAIL: {f}: no all_reduce started during a backward pass")
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mpirun")
    ap.add_argument("np", type=int)
    ap.add_argument("worker")
    ap.add_argument("scenario")
    ap.add_argument("--expect-fail", action="append", default=[])
    ap.add_argument("--within", type=float, default=120)
    ap.add_argument("--trace-check", action="store_true")
    ap.add_argument("--env", action="append", default=[])
    args = ap.parse_args()
    if not shutil.which(args.mpirun) and not os.path.exists(args.mpirun):
        print(f"{args.mpirun} not found; skipping")
        return 77
    env = dict(os.environ)
    for kv in args.env:
        k, v = kv.split("=", 1)
        env[k] = v
    tmp = tempfile.mkdtemp(prefix="octo_ddp_")
    try:
        if args.trace_check:
            env["OCTO_TRACE"] = os.path.join(tmp, "trace.json")
        rc, out, took = run(mpirun_command(args.mpirun, args.np) + [args.worker, args.scenario],
                            env, args.within)
        if args.expect_fail:
            missing = [t for t in args.expect_fail if t not in out]
            if rc == 0 or missing:
                print(f"FAIL: expected a failing job whose output contains {args.expect_fail}; "
                      f"exit {rc}, missing {missing}")
                return 1
            print(f"ok: the job failed as expected in {took:.1f} s")
            return 0
        if rc != 0 or "FAIL" in out:
            print(f"FAIL: exit {rc}")
            return 1
        oks = out.count("ok: rank")
        if oks < args.np:
            print(f"FAIL: expected an ok line from each of {args.np} ranks, got {oks}")
            return 1
        if args.trace_check and not check_trace(tmp, args.np):
            return 1
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
