"""torch.save / torch.load of a state shaped like ckpt-bench's, as the everyday
baseline. Run with Debian's python3-torch (/usr/bin/python3), not a venv.

Per iteration: torch.save into a fresh file, flush + os.fsync (so the time is
to durable, like ckpt's), drop the page cache, torch.load, check the tensors.
Prints one JSON object with the medians.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    s = s.strip()
    if s and s[-1].upper() in units:
        return int(s[:-1]) * units[s[-1].upper()]
    return int(s)


def drop_cache(path):
    """Evicts the file's pages so that load reads the disk. Returns how."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        pass
    # Clean pages of one file can be dropped without privileges.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return "fadvise_dontneed"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--path", required=True, help="file to write (removed at the end)")
    ap.add_argument("--size", required=True, help="total bytes, K/M/G suffixes")
    ap.add_argument("--tensors", type=int, default=64)
    ap.add_argument("--iters", type=int, default=2)
    a = ap.parse_args()

    total = parse_size(a.size)
    per = total // a.tensors
    if per % 4 or per == 0:
        sys.exit("torch-baseline: size must split into float32 tensors of equal size")
    g = torch.Generator().manual_seed(1234)
    state = {
        "layer%04d.weight" % i: torch.empty(per // 4, dtype=torch.float32).uniform_(-1, 1, generator=g)
        for i in range(a.tensors)
    }

    save_s, load_s, how = [], [], None
    try:
        for _ in range(a.iters):
            if os.path.exists(a.path):
                os.unlink(a.path)
            t0 = time.perf_counter()
            with open(a.path, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            save_s.append(time.perf_counter() - t0)

            how = drop_cache(a.path)
            t0 = time.perf_counter()
            loaded = torch.load(a.path, weights_only=True)
            load_s.append(time.perf_counter() - t0)
            for k, v in state.items():
                if not torch.equal(v, loaded[k]):
                    sys.exit("torch-baseline: loaded tensor %s differs" % k)
            del loaded
    finally:
        if os.path.exists(a.path):
            os.unlink(a.path)

    gib = total / (1 << 30)
    save, load = statistics.median(save_s), statistics.median(load_s)
    print(json.dumps({
        "bytes": total, "tensors": a.tensors, "iters": a.iters, "torch": torch.__version__,
        "cache_drop": how, "save_fsync_s": save, "load_s": load,
        "save_fsync_gib_s": gib / save, "load_gib_s": gib / load,
        "save_fsync_s_all": save_s, "load_s_all": load_s,
    }))


if __name__ == "__main__":
    main()
