"""ckpt from Python against torch.save, safetensors and torch.distributed.checkpoint,
on one disk, one state (N random float32 tensors, SIZE bytes in all), in one run,
beside the machine's own limits measured in the same run: a tensor copy_ into a
pre-touched buffer (memcpy) and fio write/read of the same bytes (O_DIRECT,
io_uring, 8 MiB blocks -- ckpt's chunk --, the faster of queue depths 8 and 32).

Four figures per method, medians over --iters:
  stall    until the save call returns
  modify   until the state may be modified again
  durable  until the checkpoint is on disk (fsync'ed)
  restore  reading it back into tensors, the page cache dropped first

and ckpt-bench (the C library alone) on the same state, for the Python layer's
overhead: one ckpt-bench save and restore right after each of ckpt's iterations
(alternated, so both sides see the same load; separate runs differed by 20 %). ckpt's stall is also paired with a memcpy of the same tensors taken
just before each save (the machine's bandwidth moves between the steps). ckpt runs with
default settings; its first save, which sizes the staging pool, is reported on its own.
DCP runs twice: through DCP's FileSystemWriter / FileSystemReader and through
ckpt.torch's StorageWriter / StorageReader (sync and both async executors). The
targets of docs/benchmarks.md are judged at the end. Run with the test environment's python (tools/deps.sh):

  .venv/bin/python tools/bench/torch-vs-ckpt.py --dir /path/on/the/disk [--size 1G]
      [--tensors 64] [--iters 2] [--ckpt-bench build/bin/ckpt-bench] [--json out.json]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

import ckpt
import ckpt.torch  # noqa: F401


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def fsync_tree(path):
    """fsync a file or every file under a folder, then the folder holding them."""
    files = [path] if os.path.isfile(path) else [os.path.join(dp, f) for dp, _, fs in os.walk(path) for f in fs]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    fd = os.open(path if os.path.isdir(path) else os.path.dirname(path), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


FIO_DEPTHS = (8, 32)  # ckpt's default depth, and a deeper queue


def fio(rw, path, size):
    """Seconds for fio to write or read size bytes of path (O_DIRECT,
    io_uring, 8 MiB blocks): the faster of queue depth 8 (ckpt's default)
    and 32. A virtual disk can read twice as fast at 32 as at 8, so depth 8
    alone is not the disk's limit (restores then measured 1.5-2.3x "fio
    read")."""
    bs = min(8 << 20, size) // 4096 * 4096  # a smoke size below one block
    best = None
    for depth in FIO_DEPTHS:
        r = subprocess.run(["fio", "--name=seq" + rw, f"--filename={path}", f"--rw={rw}", f"--bs={bs}",
                            f"--iodepth={depth}", "--ioengine=io_uring", "--direct=1", f"--size={size}",
                            "--end_fsync=1", "--output-format=json"], capture_output=True, text=True, check=True)
        s = json.loads(r.stdout)["jobs"][0]["job_runtime"] / 1000.0
        best = s if best is None else min(best, s)
    return best


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


CK_RESTORE = "ckpt (Python, Checkpointer.save / restore in place)"
CK_LOAD = "ckpt (Python, Checkpointer.save / load)"
BASE_READS = ("torch.save + fsync / torch.load", "safetensors save_file + fsync / load_file",
              "dcp.save (FileSystemWriter) / dcp.load")
DCP_PAIRS = (("dcp.save / dcp.load through ckpt.torch", "dcp.save (FileSystemWriter) / dcp.load"),
             ("dcp.async_save through ckpt.torch, thread executor, DefaultStager",
              "dcp.async_save, thread executor, DefaultStager"),
             ("dcp.async_save through ckpt.torch, process executor", "dcp.async_save, process executor"))


def async_save_timed(state, writer, kind, stager=None):
    """dcp.async_save of state: (stall, may modify, durable) seconds. With
    a stager that stages in the background, "may modify" is its staging
    future; without one, when async_save returned. The process
    executor's worker joins a process group: one of one rank."""
    t0 = time.perf_counter()
    fut = dcp.async_save(state, storage_writer=writer, no_dist=kind == AsyncCheckpointerType.THREAD,
                         async_checkpointer_type=kind, async_stager=stager)
    stall = time.perf_counter() - t0
    staged = getattr(fut, "staging_completion", None)
    if staged is not None:
        staged.result()
        fut = fut.upload_completion
    modify = time.perf_counter() - t0
    fut.result()
    durable = time.perf_counter() - t0
    return stall, modify, durable


def background_stager():
    """DCP's DefaultStager staging in the background (its best for the
    thread executor), kept across saves as a training run keeps it (it
    reuses its copy's memory from one save to the next)."""
    cuda = torch.cuda.is_available()
    return DefaultStager(StagingOptions(use_pinned_memory=cuda, use_shared_memory=False, use_async_staging=True,
                                        use_non_blocking_copy=cuda))


def judge(out, b):
    """Each target of the benchmark against this run's figures: dicts with
    the figure, its value, the target ("OP NUMBER") and whether it is met."""
    m, res = out["methods"], []

    def add(figure, value, target, fmt="%.2f"):
        op, bound = target.split()
        met = {"<=": value <= float(bound), "<": value < float(bound), ">=": value >= float(bound)}[op]
        res.append({"figure": figure, "value": value, "target": target, "format": fmt, "met": bool(met)})
    if b.paired:
        add("stall / the paired tensor copy, default settings (median)", statistics.median(b.paired), "<= 1.3")
    if CK_RESTORE in m:
        add("ckpt durable / fio write", m[CK_RESTORE]["durable_vs_fio"], ">= 0.9")
    for name, what in ((CK_LOAD, "load()"), (CK_RESTORE, "restore()")):
        if name not in m:
            continue
        add(f"{what} / fio read", m[name]["restore_vs_fio"], ">= 0.95")
        for base in BASE_READS:
            if base in m:
                add(f"{what} time / {base.split(' / ')[-1]}'s", m[name]["restore_s"] / m[base]["restore_s"], "< 1")
    if "python_overhead" in out:
        add("restore() over ckpt-bench (no cache drop on either side)", out["python_overhead"]["restore"], "<= 0.10",
            "%+.2f")
    for ours, theirs in DCP_PAIRS:
        if ours in m and theirs in m:
            worst = max(m[ours][k] / m[theirs][k] for k in ("stall_s", "modify_s", "durable_s", "restore_s"))
            add(f"{ours}: worst of stall, may modify, durable, restore / FileSystemWriter's", worst, "< 1")
    return res


class Bench:
    def __init__(self, a):
        self.a = a
        self.rows = {}
        n, per = a.tensors, a.size // a.tensors // 4
        g = torch.Generator().manual_seed(1)
        self.state = {f"t{i:02d}": torch.randn(per, generator=g) for i in range(n)}
        self.bytes = sum(t.numel() * 4 for t in self.state.values())
        self.check = {k: v.clone() for k, v in list(self.state.items())[:2]}
        self.warm = []  # ckpt restores without a cache drop
        self.cb = []    # ckpt-bench's figures, each run right after one of ckpt's iterations
        self.lib = []   # (Python stall, the library's, Python durable, the library's)
        self.paired = []  # each ckpt stall over a memcpy of the same tensors just before it
        self.dst = None
        self.first = None  # ckpt's first save: (stall, paired memcpy); it sizes the pool

    def record(self, name, stall, modify, durable, restore):
        self.rows.setdefault(name, []).append((stall, modify, durable, restore))

    def verify(self, got):
        for k, v in self.check.items():
            assert torch.equal(got[k], v), k

    def memcpy(self):
        dst = torch.empty(self.bytes // 4)
        dst.fill_(1.0)  # pre-touched
        src = torch.cat([t.view(-1) for t in self.state.values()])
        out = []
        for _ in range(3):
            t, _ = timed(lambda: dst.copy_(src))
            out.append(t)
        return statistics.median(out)

    def memcpy_paired(self):
        """One copy of every tensor into its slice of a pre-touched buffer:
        the bytes and the tensors a save copies, taken right next to it (the
        VM's memory bandwidth moves 1.5-2x within a minute)."""
        if self.dst is None:
            self.dst = torch.empty(self.bytes // 4)
            self.dst.fill_(1.0)
        def copy():
            off = 0
            for t in self.state.values():
                n = t.numel()
                self.dst[off:off + n].copy_(t.view(-1))
                off += n
        return timed(copy)[0]

    def run_ckpt(self, d):
        # Default settings: the staging pool sizes itself from the state at
        # the first save (which also faults it in: reported on its own).
        with ckpt.Checkpointer("bench", d) as c:
            mc = self.memcpy_paired()
            t0 = time.perf_counter()
            c.save(0, self.state).wait()
            self.first = (time.perf_counter() - t0, mc)
            for i in range(self.a.iters):
                mc = self.memcpy_paired()
                t0 = time.perf_counter()
                h = c.save(i + 1, self.state)
                stall = time.perf_counter() - t0
                self.paired.append(stall / mc)
                st = h.wait()
                durable = time.perf_counter() - t0
                self.lib.append((stall, st.stall_s, durable, st.durable_s))
                # As ckpt-bench does it (no cache drop), for the Python layer's overhead.
                warm, _ = timed(lambda: c.restore(self.state, version=i + 1))
                self.verify(self.state)
                drop_caches()
                restore, _ = timed(lambda: c.restore(self.state, version=i + 1))
                self.verify(self.state)
                self.record(CK_RESTORE, stall, stall, durable, restore)
                drop_caches()
                load, got = timed(lambda: c.load(version=i + 1))
                self.verify(got)
                del got
                self.record(CK_LOAD, stall, stall, durable, load)
                self.warm.append(warm)
                # The C library alone on the same shape of state, right
                # after: the Python layer's overhead from alternated pairs.
                cb = self.ckpt_bench(os.path.join(d, "ckpt-bench"), iters=2)
                if cb:
                    self.cb.append(cb)
        self.dst = None  # the paired copy's buffer: not kept through the baselines

    def run_torch_save(self, d):
        for i in range(self.a.iters):
            p = os.path.join(d, f"t{i}.pt")

            def save():
                with open(p, "wb") as f:
                    torch.save(self.state, f)
                    f.flush()
                    os.fsync(f.fileno())
            t, _ = timed(save)
            drop_caches()
            r, got = timed(lambda: torch.load(p))
            self.verify(got)
            self.record("torch.save + fsync / torch.load", t, t, t, r)
            os.unlink(p)

    def run_safetensors(self, d):
        from safetensors.torch import load_file, save_file
        for i in range(self.a.iters):
            p = os.path.join(d, f"s{i}.safetensors")

            def save():
                save_file(self.state, p)
                fsync_tree(p)
            t, _ = timed(save)
            drop_caches()
            r, got = timed(lambda: load_file(p))
            self.verify(got)
            self.record("safetensors save_file + fsync / load_file", t, t, t, r)
            os.unlink(p)

    def run_dcp(self, d):
        for i in range(self.a.iters):
            p = os.path.join(d, f"dcp{i}")
            t, _ = timed(lambda: dcp.save(self.state, storage_writer=dcp.FileSystemWriter(p), no_dist=True))
            drop_caches()
            into = {k: torch.empty_like(v) for k, v in self.state.items()}
            r, _ = timed(lambda: dcp.load(into, storage_reader=dcp.FileSystemReader(p), no_dist=True))
            self.verify(into)
            self.record("dcp.save (FileSystemWriter) / dcp.load", t, t, t, r)
            shutil.rmtree(p)

    def run_dcp_async(self, d, kind):
        """FileSystemWriter under dcp.async_save. The thread executor with
        DCP's DefaultStager staging in the background, one stager for every
        save (its first save, which allocates the stager's copy, is not
        timed: as ckpt's first); the process executor as DCP does it
        without a stager (FileSystemWriter is a BlockingAsyncStager: it
        stages itself)."""
        name = {AsyncCheckpointerType.THREAD: "dcp.async_save, thread executor, DefaultStager",
                AsyncCheckpointerType.PROCESS: "dcp.async_save, process executor"}[kind]
        stager = background_stager() if kind == AsyncCheckpointerType.THREAD else None
        try:
            if stager is not None:
                p = os.path.join(d, "warm")
                async_save_timed(self.state, dcp.FileSystemWriter(p), kind, stager)
                shutil.rmtree(p)
            for i in range(self.a.iters):
                p = os.path.join(d, f"adcp{i}")
                stall, modify, durable = async_save_timed(self.state, dcp.FileSystemWriter(p), kind, stager)
                drop_caches()
                into = {k: torch.empty_like(v) for k, v in self.state.items()}
                r, _ = timed(lambda: dcp.load(into, storage_reader=dcp.FileSystemReader(p), no_dist=True))
                self.verify(into)
                self.record(name, stall, modify, durable, r)
                shutil.rmtree(p)
        finally:
            if stager is not None:
                stager.close()

    def run_dcp_ckpt(self, d, kind):
        """DCP through ckpt.torch's StorageWriter / StorageReader, default
        settings, no checkpoint_id (the next version). One writer for every
        save, as a training run keeps it (its first save, which sizes the
        staging pool, is not timed); the reads after it is closed (a reader
        opens the root's index, one environment per process). The thread
        executor with one DefaultStager staging in the background for every
        save, as FileSystemWriter's run has it; the process executor as
        DCP does it without a stager."""
        from ckpt.torch import StorageReader, StorageWriter
        name = {None: DCP_PAIRS[0][0], AsyncCheckpointerType.THREAD: DCP_PAIRS[1][0],
                AsyncCheckpointerType.PROCESS: DCP_PAIRS[2][0]}[kind]
        w = StorageWriter("bench", d)
        stager = background_stager() if kind == AsyncCheckpointerType.THREAD else None
        saves = []
        for i in range(self.a.iters + 1):
            if kind is None:
                stall, _ = timed(lambda: dcp.save(self.state, storage_writer=w, no_dist=True))
                modify = durable = stall
            else:
                stall, modify, durable = async_save_timed(self.state, w, kind, stager)
            if i:
                saves.append((stall, modify, durable))
        if stager is not None:
            stager.close()
        w.close()
        for v, (stall, modify, durable) in enumerate(saves, start=2):
            drop_caches()
            into = {k: torch.empty_like(v) for k, v in self.state.items()}
            r, _ = timed(lambda: dcp.load(into, storage_reader=StorageReader("bench", d), checkpoint_id=v,
                                          no_dist=True))
            self.verify(into)
            self.record(name, stall, modify, durable, r)

    def ckpt_bench(self, d, iters=None):
        exe = self.a.ckpt_bench
        if not exe or not os.path.exists(exe):
            return None
        shutil.rmtree(d, ignore_errors=True)
        r = subprocess.run([exe, "--root", d, "--size", str(self.bytes), "--regions", str(self.a.tensors),
                            "--iters", str(iters or self.a.iters), "--chunk-bytes", "8M", "--json"],
                           capture_output=True, text=True, check=True)
        shutil.rmtree(d, ignore_errors=True)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def ckpt_bench_alternated(self):
        """ckpt-bench's figures from the runs alternated with ckpt's
        iterations (medians), None when there were none."""
        if not self.cb:
            return None
        return {k: statistics.median(c[k] for c in self.cb) for k in ("stall_s", "durable_s", "restore_s")}


STEPS = ("ckpt", "torch", "safetensors", "dcp", "dcp-thread", "dcp-process", "dcp-ckpt", "dcp-ckpt-thread",
         "dcp-ckpt-process")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="a folder on the disk to measure (emptied subfolder)")
    ap.add_argument("--size", default="1G")
    ap.add_argument("--tensors", type=int, default=64)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--ckpt-bench", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin",
                                                         "ckpt-bench"))
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--only", help="run only these methods (comma list of: " + ", ".join(STEPS) + ")")
    ap.add_argument("--bench-rows", action="store_true", help="also print the targets as BENCH-ROW lines "
                    "(tools/bench-all.sh)")
    a = ap.parse_args()
    a.size = parse_size(a.size)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    work = os.path.join(a.dir, "torch-vs-ckpt")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    import socket
    import torch.distributed as dist
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    b = Bench(a)
    print(f"state: {a.tensors} float32 tensors, {b.bytes / 2**30:.2f} GiB; {a.iters} iterations each; "
          f"page cache dropped before reads: {drop_caches()}", file=sys.stderr)
    t0 = time.time()
    fio_file = os.path.join(work, "fio.dat")
    fw = [fio("write", fio_file, b.bytes)]
    fr = [fio("read", fio_file, b.bytes)]
    os.unlink(fio_file)
    mc = b.memcpy()
    steps = [("ckpt", lambda d: b.run_ckpt(d)), ("torch", b.run_torch_save), ("safetensors", b.run_safetensors),
             ("dcp", b.run_dcp), ("dcp-thread", lambda d: b.run_dcp_async(d, AsyncCheckpointerType.THREAD)),
             ("dcp-process", lambda d: b.run_dcp_async(d, AsyncCheckpointerType.PROCESS)),
             ("dcp-ckpt", lambda d: b.run_dcp_ckpt(d, None)),
             ("dcp-ckpt-thread", lambda d: b.run_dcp_ckpt(d, AsyncCheckpointerType.THREAD)),
             ("dcp-ckpt-process", lambda d: b.run_dcp_ckpt(d, AsyncCheckpointerType.PROCESS))]
    if a.only:
        want = set(a.only.split(","))
        if want - set(STEPS):
            ap.error(f"--only: unknown {sorted(want - set(STEPS))}; one of {', '.join(STEPS)}")
        steps = [x for x in steps if x[0] in want]
    failed = {}
    for name, fn in steps:
        d = os.path.join(work, name)
        os.makedirs(d)
        print(f"  {name} ...", file=sys.stderr, flush=True)
        try:
            fn(d)
        except Exception as e:  # a baseline that does not run here is reported, not fatal
            failed[name] = f"{type(e).__name__}: {e}"
        shutil.rmtree(d, ignore_errors=True)
    cb = b.ckpt_bench_alternated() or b.ckpt_bench(os.path.join(work, "ckpt-bench"))
    fw.append(fio("write", fio_file, b.bytes))
    fr.append(fio("read", fio_file, b.bytes))
    shutil.rmtree(work, ignore_errors=True)
    fw_s, fr_s = statistics.median(fw), statistics.median(fr)
    gib = b.bytes / 2**30
    out = {"bytes": b.bytes, "tensors": a.tensors, "iters": a.iters, "memcpy_s": mc, "fio_write_s": fw,
           "fio_read_s": fr, "ckpt_bench": cb, "failed": failed, "methods": {}, "run_s": time.time() - t0,
           "torch": torch.__version__}
    print(f"\nmemcpy (tensor copy_ into a pre-touched buffer): {mc:.3f} s ({gib / mc:.2f} GiB/s); "
          f"fio write {fw_s:.3f} s ({gib / fw_s:.2f} GiB/s), read {fr_s:.3f} s ({gib / fr_s:.2f} GiB/s)\n")
    print("| method | stall s (x memcpy) | may modify s (x memcpy) | durable s (of fio write) | "
          "restore s (of fio read) |")
    print("|---|---|---|---|---|")
    for name, rows in b.rows.items():
        s, m, d, r = (statistics.median(x) for x in zip(*rows))
        out["methods"][name] = {"stall_s": s, "modify_s": m, "durable_s": d, "restore_s": r,
                                "modify_vs_memcpy": m / mc, "durable_vs_fio": fw_s / d, "restore_vs_fio": fr_s / r}
        print(f"| {name} | {s:.3f} ({s / mc:.2f}x) | {m:.3f} ({m / mc:.2f}x) | {d:.3f} ({fw_s / d:.2f}) | "
              f"{r:.3f} ({fr_s / r:.2f}) |")
    if cb:
        py = out["methods"].get(CK_RESTORE)
        print(f"| ckpt-bench (C, the same state) | {cb['stall_s']:.3f} ({cb['stall_s'] / mc:.2f}x) | "
              f"{cb['stall_s']:.3f} | {cb['durable_s']:.3f} ({fw_s / cb['durable_s']:.2f}) | "
              f"{cb['restore_s']:.3f} ({fr_s / cb['restore_s']:.2f}) |")
        if py:
            py = dict(py, restore_s=statistics.median(b.warm))  # like ckpt-bench: no cache drop
            out["python_overhead"] = {k: py[k + "_s"] / cb[k + "_s"] - 1 for k in ("stall", "durable", "restore")}
            if b.cb:  # the same from each alternated pair, for the spread
                out["python_restore_over_ckpt_bench_pairs"] = [w / c["restore_s"] - 1 for w, c in zip(b.warm, b.cb)]
            print("\nPython layer over ckpt-bench (restores without a cache drop on both sides, "
                  f"{'alternated' if b.cb else 'separate runs'}): " +
                  ", ".join(f"{k} {v * 100:+.0f}%" for k, v in out["python_overhead"].items()))
    if b.paired:
        out["modify_vs_memcpy_paired"] = b.paired
        print(f"ckpt may modify over a memcpy of the same tensors taken just before each save: "
              f"median {statistics.median(b.paired):.2f}x (" + ", ".join(f"{x:.2f}" for x in b.paired) + ")")
    if b.lib:
        ps, ls, pd, ld = (statistics.median(x) for x in zip(*b.lib))
        out["python_vs_library_in_run"] = {"stall": ps / ls - 1, "durable": pd / ld - 1}
        print(f"Python layer over the library's own timing of the same saves: stall {ps:.3f} s vs {ls:.3f} s "
              f"({(ps / ls - 1) * 100:+.1f}%), durable {pd:.3f} s vs {ld:.3f} s ({(pd / ld - 1) * 100:+.1f}%)")
    if b.first:
        out["first_save_stall_s"], out["first_save_paired_memcpy_s"] = b.first
        print(f"ckpt's first save (sizes the staging pool and faults it in): stall {b.first[0]:.3f} s "
              f"({b.first[0] / b.first[1]:.2f}x its paired memcpy)")
    out["targets"] = judge(out, b)
    size = f"{gib:g} GiB" if gib >= 1 else f"{b.bytes / 2**20:g} MiB"
    print("\ntargets:")
    for t in out["targets"]:
        print(f"  {'met    ' if t['met'] else 'NOT MET'}  {t['figure']}: {t['format'] % t['value']} "
              f"(target {t['target']})")
        if a.bench_rows:
            print("BENCH-ROW " + json.dumps({"figure": f"{size}: {t['figure']}", "value": t["value"],
                                             "format": t["format"], "target": t["target"]}))
    for k, v in failed.items():
        print(f"\n{k}: did not run: {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
