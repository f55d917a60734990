"""Where a Python restore's time goes, against ckpt-bench's restore of the
same state, in rounds that alternate the two (the machine's load moves
between them less than between two separate runs).

Each round: a Checkpointer saves N random float32 tensors (SIZE bytes in
all), then restores them in place --iters times, each split into the
state's ckpt_restore call, the two small ckpt_restore calls that read the
header and manifest first, and the Python around them; then ckpt-bench
saves and restores the same shape of state (N regions, 8 MiB chunks). No
cache drop on either side (as ckpt-bench does it); the reads are O_DIRECT.

  .venv/bin/python tools/bench/py-restore-split.py --dir /path/on/the/disk [--size 256M]
      [--tensors 64] [--rounds 5] [--iters 3] [--alloc torch|huge]
      [--ckpt-bench build/bin/ckpt-bench]

--alloc huge puts the tensors in page-aligned anonymous mappings with
MADV_HUGEPAGE, as ckpt-bench's regions are; torch (the default) is torch's
own allocator (64-byte aligned: the library reads into a buffer and copies).
"""
import argparse
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch

import ckpt


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


class TimedContext:
    """The Checkpointer's context with its restore calls timed."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.calls = []

    def restore(self, v):
        t = time.perf_counter()
        r = self._ctx.restore(v)
        self.calls.append(time.perf_counter() - t)
        return r

    def __getattr__(self, k):
        return getattr(self._ctx, k)


def make_state(a):
    per = a.size // a.tensors // 4
    g = torch.Generator().manual_seed(1)
    st = {}
    for i in range(a.tensors):
        if a.alloc == "huge":
            m = mmap.mmap(-1, per * 4)
            m.madvise(mmap.MADV_HUGEPAGE)
            t = torch.frombuffer(m, dtype=torch.float32)
            t.copy_(torch.randn(per, generator=g))
        else:
            t = torch.randn(per, generator=g)
        st[f"t{i:02d}"] = t
    return st


def python_round(a, state, d):
    chunk = 8 << 20
    slots = sum(-(-t.numel() * 4 // chunk) for t in state.values()) + 3
    with ckpt.Checkpointer("split", d, staging_bytes=str(slots * chunk), chunk_bytes="8M") as c:
        c.save(1, state).wait()
        tc = TimedContext(c._ctx)
        c._ctx = tc
        rows = []
        try:
            for _ in range(a.iters):
                tc.calls.clear()
                t = time.perf_counter()
                c.restore(state, version=1)
                total = time.perf_counter() - t
                rows.append((total, tc.calls[-1], sum(tc.calls[:-1])))
        finally:
            c._ctx = tc._ctx
    shutil.rmtree(d, ignore_errors=True)
    return [statistics.median(x) for x in zip(*rows)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--size", default="256M")
    ap.add_argument("--tensors", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--alloc", choices=["torch", "huge"], default="torch")
    ap.add_argument("--ckpt-bench", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin",
                                                         "ckpt-bench"))
    a = ap.parse_args()
    a.size = parse_size(a.size)
    work = os.path.join(a.dir, "py-restore-split")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    state = make_state(a)
    over = []
    print("| round | Python restore ms | its state ckpt_restore ms | header+manifest ckpt_restores ms | "
          "Python around them ms | ckpt-bench restore ms | Python over ckpt-bench |")
    print("|---|---|---|---|---|---|---|")
    for r in range(a.rounds):
        total, lib, meta = python_round(a, state, os.path.join(work, "py"))
        out = subprocess.run([a.ckpt_bench, "--root", os.path.join(work, "cb"), "--size", str(a.size), "--regions",
                              str(a.tensors), "--chunk-bytes", "8M", "--iters", str(a.iters), "--json"],
                             capture_output=True, text=True, check=True)
        cb = json.loads(out.stdout.strip().splitlines()[-1])["restore_s"]
        over.append(total / cb - 1)
        print(f"| {r} | {total * 1e3:.1f} | {lib * 1e3:.1f} | {meta * 1e3:.2f} | {(total - lib - meta) * 1e3:.2f} | "
              f"{cb * 1e3:.1f} | {over[-1] * 100:+.0f}% |", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"\nmedian Python restore over ckpt-bench's: {statistics.median(over) * 100:+.0f}% "
          f"({a.alloc} allocation, {a.tensors} tensors, {a.size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
