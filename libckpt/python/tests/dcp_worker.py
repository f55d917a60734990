"""One rank of the DCP tests (run by test_dcp.py under torchrun).

save:  a state of DTensors sharded over all ranks, a replicated tensor and
       non-tensor items, through ckpt.torch.StorageWriter as version V, with
       dcp.async_save (thread executor).
torn:  the same as version V, with the coordinator killed (-9, a ckpt fault
       point) after every other rank's data is durable, before its own
       shard with DCP's metadata is.
load:  into DTensors sharded over this run's ranks, the newest committed
       version (or --version), checked element for element.
process: versions V and V+1 with dcp.async_save's process executor, both
       COMMITTED with every rank's shard; V+2 with the coordinator's
       checkpoint process killed before its shard is durable: PENDING, and
       the newest committed, V+1, loads.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

from ckpt.torch import StorageReader, StorageWriter


def full(version):
    return {"w": (torch.arange(24 * 5, dtype=torch.float32).reshape(24, 5) + version),
            "b": (torch.arange(12, dtype=torch.float32) * 0.5 + version).to(torch.bfloat16),
            "rep": torch.arange(7, dtype=torch.int64) * (version + 1)}


def state(mesh, version, zero):
    f = full(version)
    out = {}
    for k in ("w", "b"):
        t = torch.zeros_like(f[k]) if zero else f[k]
        out[k] = distribute_tensor(t, mesh, [Shard(0)])
    out["rep"] = torch.zeros_like(f["rep"]) if zero else f["rep"]
    out["extra"] = {"step": -1 if zero else version, "note": "" if zero else f"version {version}"}
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--mode", choices=["save", "torn", "load", "process"], required=True)
    p.add_argument("--version", type=int)
    p.add_argument("--expect", type=int)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    if a.mode == "process":
        # dcp.async_save with the process executor: the writer is pickled to
        # a checkpoint process per rank (kept for later saves), which opens
        # its own context on the root. Two versions, the second through
        # the same processes.
        # The second writer wraps a Checkpointer of this process: the
        # checkpoint process opens one like it.
        from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
        from ckpt import Checkpointer
        settings = {"staging_bytes": "4M", "chunk_bytes": "64K"}
        ck = Checkpointer("dcp", a.root, **settings)
        for v, w in ((a.version, StorageWriter("dcp", a.root, **settings)),
                     (a.version + 1, StorageWriter(checkpointer=ck))):
            fut = dcp.async_save(state(mesh, v, zero=False), storage_writer=w, checkpoint_id=v,
                                 async_checkpointer_type=AsyncCheckpointerType.PROCESS)
            fut.result()
            w.close()
            print(f"rank {rank}: saved version {v} (process executor)", flush=True)
        assert [(i.version, i.state, i.shards_done) for i in ck.versions()] == \
            [(a.version, "COMMITTED", world), (a.version + 1, "COMMITTED", world)], ck.versions()
        # Then the coordinator's checkpoint process killed (-9) before its
        # shard with DCP's metadata is durable: every rank's save fails,
        # and the version is left PENDING without it.
        torn = dict(settings, faults="save.before_fsync=kill") if rank == 0 else settings
        try:
            dcp.async_save(state(mesh, a.version + 2, zero=False), storage_writer=StorageWriter("dcp", a.root, **torn),
                           checkpoint_id=a.version + 2, async_checkpointer_type=AsyncCheckpointerType.PROCESS).result()
            print(f"rank {rank}: the torn save returned", flush=True)
            return 1
        except RuntimeError as e:
            print(f"rank {rank}: the torn save failed: {str(e)[:200]}", flush=True)
        dist.barrier()
        got = [(i.version, i.state, i.shards_done) for i in ck.versions()]
        assert got[-1] == (a.version + 2, "PENDING", world - 1), got
        ck.close()
        sd = state(mesh, 0, zero=True)
        dcp.load(sd, storage_reader=StorageReader("dcp", a.root))
        for k in ("w", "b"):
            assert torch.equal(sd[k].full_tensor(), full(a.version + 1)[k]), k
        assert sd["extra"]["step"] == a.version + 1
        print(f"rank {rank}: loaded version {a.version + 1}", flush=True)
    elif a.mode in ("save", "torn"):
        settings = {"staging_bytes": "4M", "chunk_bytes": "64K"}
        if a.mode == "torn" and rank == 0:
            settings["faults"] = "save.before_fsync=kill"
        w = StorageWriter("dcp", a.root, **settings)
        if a.mode == "save":  # dcp.async_save: the thread executor, DCP's default stager
            dcp.async_save(state(mesh, a.version, zero=False), storage_writer=w, checkpoint_id=a.version).result()
        else:
            dcp.save(state(mesh, a.version, zero=False), storage_writer=w, checkpoint_id=a.version)
        w.close()
        print(f"rank {rank}: saved version {a.version}", flush=True)
    else:
        sd = state(mesh, 0, zero=True)
        r = StorageReader("dcp", a.root, step=a.version)
        dcp.load(sd, storage_reader=r)
        want = full(a.expect)
        for k in ("w", "b"):
            got = sd[k].full_tensor()
            assert got.dtype == want[k].dtype and torch.equal(got, want[k]), (k, got, want[k])
        assert torch.equal(sd["rep"], want["rep"]), sd["rep"]
        assert sd["extra"] == {"step": a.expect, "note": f"version {a.expect}"}, sd["extra"]
        r.reset()  # closes its view
        print(f"rank {rank}: loaded version {a.expect} on {world} ranks", flush=True)
    # No rank tears its connections down while another is still inside a
    # collective (DTensor.full_tensor above): gloo aborts the process that
    # finds its peer gone.
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    # Every check has passed and been printed. Leave without the interpreter's
    # teardown: torch's C++ side can abort in its static destructors after the
    # process group is gone ("terminate called without an active exception",
    # seen rarely after every rank had printed 'loaded'), which would fail a
    # test whose every assertion held.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
